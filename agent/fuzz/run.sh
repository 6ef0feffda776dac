#!/usr/bin/env bash
# Usage: run.sh [SECONDS] [TARGET...]
# Runs each fuzz target (default: all) of the agent's readers for SECONDS (default 600), one
# process at low priority, from a corpus seeded with seeds/:
#   config_yaml  the printed defaults, a sim and an NCCL node's configuration
#   state_json   a sim node's calibration.json (one record of each kind), an aborted run's
# Not for CI: it needs the nightly toolchain and cargo-fuzz (cargo install cargo-fuzz).
# Prints each target's executions and coverage (libFuzzer's cov: and ft: figures).
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config_yaml state_json)
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target"
  cp "seeds/$target"/* "corpus/$target/"
  nice cargo +nightly fuzz run "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -print_final_stats=1 \
    2>&1 | tee "corpus/$target.log" | grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|stat::number_of_executed_units|SUMMARY|panicked" || true
done
