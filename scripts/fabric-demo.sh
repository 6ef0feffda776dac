#!/usr/bin/env bash
# The multi-node calibration end to end on one machine (issue 12), with the sim backend: two
# fabric jobs of six microbench processes on loopback as three nodes (two ranks each), one
# healthy and one with node n2's NIC 1 down; the pairwise pass names the node, and the tuner
# re-ranks a 70B job on 64 H100s from each job's file. Every figure is the sim's: a model of the
# hardware, not a measurement of it (the records say backend "sim").
#
#   scripts/fabric-demo.sh [OUT_DIR]      (builds release binaries first; about a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d)}
mkdir -p "$out"
cargo build --release --quiet -p microbench -p tuner
bin=${CARGO_TARGET_DIR:-target}/release

# A free loopback port for rank 0's rendezvous.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

job() { # job NAME [FAULT]: six ranks, three nodes; FAULT goes to n2's ranks only
  local name=$1 fault=${2:-} p pids=()
  p=$(port)
  for r in 0 1 2 3 4 5; do
    local node=n$((r / 2)) extra=()
    if [ -n "$fault" ] && [ "$node" = n2 ]; then extra=(--fault "$fault"); fi
    mkdir -p "$out/$name/state/$node"
    RANK=$r WORLD_SIZE=6 LOCAL_RANK=$((r % 2)) MASTER_ADDR=127.0.0.1 MASTER_PORT=$p \
      TORCHELASTIC_RUN_ID="demo-$name-$p" MESHFIT_NODE_NAME=$node \
      "$bin/microbench" --backend sim --profile dgx-h100 "${extra[@]}" \
      fabric -b 1M -e 64M --out "$out/$name/all.jsonl" --state-dir "$out/$name/state/$node" \
      >"$out/$name/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
}

job healthy
job faulted nic-down:nic=1
echo "== pairwise pass, n2's NIC 1 down (rank 0's report)"
grep -E "slow|skipped|named" "$out/faulted/rank0.log" || cat "$out/faulted/rank0.log"
for name in healthy faulted; do
  echo "== tuner recommend --model llama3-70b --gpus 64 from the $name job"
  "$bin/tuner" recommend --model llama3-70b --gpus 64 --top 3 --compare-nominal \
    --measurements "$out/$name/all.jsonl" 2>&1 | grep -vE '^tuner: note: (model|seq_len|global batch|optimizer)'
done
echo "files in $out"
