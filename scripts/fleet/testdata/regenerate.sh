#!/usr/bin/env bash
# Rewrites the fleet generator's templates (dgx-h100.prom, dgx-a100.prom) as the agent exports
# them: a sim `microbench fabric` job over three nodes of eight ranks (the job-wide inter-node
# collectives and each rail's pairs), then one sim agent on node-0's state directory, whose
# `/metrics` after its first calibration is the template.
#
#   scripts/fleet/testdata/regenerate.sh [TARGET_DIR]
#
# TARGET_DIR holds release builds of `microbench` and `agent` (default: the workspace's
# target/release; build them with `cargo build --release -p microbench -p agent`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$(cd "$here/../../.." && pwd)/target/release}
for tool in microbench agent; do
  [ -x "$bin/$tool" ] || { echo "regenerate.sh: no $tool in $bin: build it with cargo build --release -p $tool" >&2; exit 2; }
done
command -v curl >/dev/null || { echo "regenerate.sh: \`curl\` is not installed" >&2; exit 2; }
work=$(mktemp -d)
agent=""
cleanup() {
  if [ -n "$agent" ]; then kill "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

for profile in dgx-h100 dgx-a100; do
  dir=$work/$profile
  mkdir -p "$dir"
  port=$(free_port)
  pids=()
  for rank in $(seq 0 23); do
    node=node-$(( rank / 8 ))
    mkdir -p "$dir/$node"
    env -u SLURM_JOB_ID RANK=$rank WORLD_SIZE=24 LOCAL_RANK=$(( rank % 8 )) MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port TORCHELASTIC_RUN_ID=templates-$port MESHFIT_NODE_NAME=$node \
      "$bin/microbench" --backend sim --profile "$profile" fabric -b 1M -e 64M \
      --out "$dir/all.jsonl" --state-dir "$dir/$node" >"$dir/rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || { cat "$dir"/rank*.log >&2; echo "regenerate.sh: the $profile fabric job failed" >&2; exit 1; }
  done
  listen=127.0.0.1:$(free_port)
  "$bin/agent" --backend sim --profile "$profile" --state-dir "$dir/node-0" --node-name node-0 \
    --listen "$listen" --jitter 0s --sample-interval 1s >"$dir/agent.log" 2>&1 &
  agent=$!
  for _ in $(seq 120); do
    if curl -sf "http://$listen/metrics" | grep -q '^meshfit_calibration_last_success_timestamp_seconds'; then
      break
    fi
    sleep 1
  done
  curl -sf "http://$listen/metrics" >"$here/$profile.prom.new" \
    || { cat "$dir/agent.log" >&2; echo "regenerate.sh: the agent did not answer" >&2; exit 1; }
  grep -q '^meshfit_calibration_last_success_timestamp_seconds' "$here/$profile.prom.new" \
    || { rm -f "$here/$profile.prom.new"; tail "$dir/agent.log" >&2; echo "regenerate.sh: no calibration in 2 minutes" >&2; exit 1; }
  mv "$here/$profile.prom.new" "$here/$profile.prom"
  kill "$agent"; wait "$agent" 2>/dev/null || true; agent=""
  echo "regenerate.sh: $here/$profile.prom: $(grep -vc '^#' "$here/$profile.prom") series" >&2
done
