#!/usr/bin/env bash
# Runs the same tuner commands with two binaries and says which print differently (stdout,
# stderr and exit status together): the check behind "no behaviour changes" in a refactor.
#
# usage: scripts/same-output.sh OLD_TUNER NEW_TUNER OUTDIR [FLEET_DIR]
#   OLD_TUNER  a tuner built from the revision before, e.g.
#              git worktree add /tmp/old REV && CARGO_TARGET_DIR=/tmp/old-target \
#                cargo build --release -p tuner --manifest-path /tmp/old/Cargo.toml
#              (copy it to a folder of its own as `tuner`: usage lines print the binary's name)
#   FLEET_DIR  optional: a folder holding fleet.jsonl, node-a..c records of a sim fleet; the six
#              commands that read it run only when it is given.
# Each command's output is kept under OUTDIR/old/N and OUTDIR/new/N.
set -uo pipefail
old=$1 new=$2 out=$3 fleet=${4:-}
rm -rf "$out"; mkdir -p "$out/old" "$out/new"
cd "$(dirname "$0")/.."
cmds=(
 "validate --format json --runs data/published-runs.yaml data/more-runs.yaml data/vtrain-runs.yaml"
 "validate --summary --runs data/published-runs.yaml data/more-runs.yaml data/vtrain-runs.yaml"
 "validate --format json --runs data/vtrain-runs.yaml --measurements data/vtrain-luts/a100 --measurements-gpu a100-sxm-80gb"
 "recommend --model 70b --gpus 512 --format json --top 50"
 "recommend --model 405b --gpus 16384 --global-batch 2048 --format json --top 30"
 "recommend --model 8x22b --gpus 256 --format json --top 30"
 "recommend --model 671b --gpus 2048 --cluster hgx-h800 --format json --top 30"
 "recommend --model 70b --gpus 256 --framework deepspeed --format json --top 30"
 "recommend --model 70b --gpus 256 --framework fsdp --format json --top 30"
 "recommend --model 13b --gpus 64 --cluster dgx-a100 --no-flash-attention --format json --top 30"
 "recommend --model 70b --gpus 64 --measurements tuner/fuzz/seeds/measurement_files/snapshot.json --format json"
 "recommend --model 8b --gpus 128 --cluster gb200-nvl72 --precision fp8 --format json --top 30"
 "explain --model 70b --gpus 512 --tp 8 --pp 8 --dp 8 --microbatches 64 --virtual-stages 2 --recompute full --format json"
 "explain --model 70b --gpus 512 --tp 8 --pp 8 --dp 8 --microbatches 64"
 "explain --model 8x7b --gpus 64 --tp 2 --ep 8 --dp 32 --cp 1 --format json"
 "explain --model 405b --gpus 1024 --tp 8 --pp 16 --dp 4 --cp 2 --zero 1 --recompute selective --format json"
 "explain --model 70b --gpus 256 --tp 4 --dp 64 --zero 3 --framework fsdp --recompute full --format json"
 "compare --model 70b --gpus 512 --a tp=8,pp=8,dp=8 --b tp=4,pp=8,dp=16"
 "recommend --model 70b --gpus 512 --gpus-per-node 0"
 "recommend --model 70b --gpus 500 --gpus-per-node 4 --nics-per-node 2 --nic-gbps 100 --top 3"
 "recommend --model 70b --gpus 512 --global-batch 0"
 "recommend --model 70b --gpus 512 --global-batch-tokens 3.3M --top 2"
 "recommend --model 70b --gpus 512 --global-batch-tokens lots"
 "recommend --model nope --gpus 512 --gpus-per-node 0"
 "validate --runs data/vtrain-runs.yaml --measurements data/vtrain-luts/a100 --measurements-gpu a100-sxm-80gb"
 "validate --runs tuner/tests/data/llm-foundry-h100.yaml tuner/tests/data/megatron-bridge-h100-moe.yaml"
 "recommend --model 70b --gpus 512 --emit megatron --top 3"
 "recommend --model 671b --gpus 2048 --cluster hgx-h800 --emit megatron --top 3"
 "recommend --model 8x7b --gpus 64 --emit deepspeed --top 3"
 "recommend --model 405b --gpus 1024 --emit torchtitan --top 3"
 "explain --model 70b --gpus 512 --tp 8 --pp 6 --dp 8 --virtual-stages 2 --emit megatron"
)
if [ -n "$fleet" ]; then
  cmds+=(
 "fit --measurements $fleet/fleet.jsonl --format json"
 "fit --measurements $fleet/fleet.jsonl --exclude-degraded"
 "recommend --model 70b --gpus 64 --measurements $fleet/fleet.jsonl --format json --top 20"
 "recommend --model 70b --gpus 64 --measurements $fleet/fleet.jsonl --exclude-degraded --format json --top 20"
 "recommend --model 70b --gpus 64 --measurements $fleet/fleet.jsonl --exclude node-c --aggregate median --top 20"
 "recommend --model 8x7b --gpus 64 --measurements $fleet/fleet.jsonl --compare-nominal --top 10"
  )
fi
for f in data/nccl-tests/*; do cmds+=("fit --measurements $f --format json"); done
for f in tuner/tests/data/*.yaml; do cmds+=("validate --format json --runs $f"); done
i=0; fail=0
for c in "${cmds[@]}"; do
  i=$((i+1))
  $old $c > "$out/old/$i" 2>&1; echo "rc=$?" >> "$out/old/$i"
  $new $c > "$out/new/$i" 2>&1; echo "rc=$?" >> "$out/new/$i"
  if ! cmp -s "$out/old/$i" "$out/new/$i"; then echo "DIFF $i: $c"; fail=1; fi
done
echo "compared $i commands; fail=$fail"
