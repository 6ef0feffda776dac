#!/usr/bin/env bash
# Usage: run.sh [SECONDS] [TARGET...]
# Runs each fuzz target (default: all) of the tuner's readers for SECONDS (default 600), one
# process at low priority, from a corpus seeded with the real files in data/ and seeds/:
#   runs_yaml          data/*.yaml (the published runs files)
#   model_yaml         seeds/model_yaml (dense, GQA and MoE shapes)
#   measurement_files  data/nccl-tests/*.txt, record's JSON-lines seeds, seeds/measurement_files
#   prometheus_reply   seeds/prometheus_reply (valid, hostile and refused /api/v1/query replies)
# Not for CI: it needs the nightly toolchain and cargo-fuzz (cargo install cargo-fuzz).
# Prints each target's executions and coverage (libFuzzer's cov: and ft: figures).
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(runs_yaml model_yaml measurement_files prometheus_reply)
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target"
  limit=()
  case "$target" in
    # data/vtrain-runs.yaml is 1 MB: grown to that, inputs parse at ~12 a second and the corpus
    # reaches 150 MB in 10 minutes. The first 16 KB of each file still holds a dozen runs.
    runs_yaml) cp ../../data/*.yaml "corpus/$target/"; limit=(-max_len=16384) ;;
    model_yaml) cp seeds/model_yaml/* "corpus/$target/" ;;
    measurement_files)
      cp ../../data/nccl-tests/*.txt ../../record/fuzz/seeds/json_lines/* \
        seeds/measurement_files/* "corpus/$target/" ;;
    prometheus_reply) cp seeds/prometheus_reply/* "corpus/$target/" ;;
    *) echo "unknown target $target" >&2; exit 2 ;;
  esac
  nice cargo +nightly fuzz run "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -print_final_stats=1 "${limit[@]}" \
    2>&1 | tee "corpus/$target.log" | grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|stat::number_of_executed_units|SUMMARY|panicked" || true
done
