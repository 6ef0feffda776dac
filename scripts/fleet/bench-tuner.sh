#!/usr/bin/env bash
# The tuner against a fleet in a real Prometheus: wall time and peak memory of
# `tuner recommend --prometheus` reading every node's series (raw), reduced in Prometheus at
# query time, and from the chart's recorded curves (where WORKDIR's data/ holds them: run
# scripts/fleet/bench-rules.sh --work WORKDIR first), and of `tuner recommend --measurements`
# on a snapshot of each kind.
#
# Usage: scripts/fleet/bench-tuner.sh NODES [WORKDIR]
#   TUNER      the tuner binary (default target/release/tuner; build it with
#              `cargo build --release -p tuner`)
#   PARTS      the fleet is generated and backfilled in this many parts (default 4), which
#              bounds promtool's memory (about 3.6 GB per 1,000 nodes in one part)
#   RAW_MAX    the largest fleet the raw path is timed on (default 4000): past it the raw
#              reply passes the tuner's 256 MiB limit
#   WINDOW     how far back the tuner reads (--window, default 30m); a WORKDIR whose data/
#              another script backfilled earlier needs it to reach that data's samples
# Needs python3, promtool, prometheus and GNU time (/usr/bin/time -v). Prints one line per
# run: what ran, wall seconds, max RSS in MB, exit code.
set -euo pipefail
cd "$(dirname "$0")/../.."

nodes=${1:?usage: scripts/fleet/bench-tuner.sh NODES [WORKDIR]}
work=${2:-$(mktemp -d)}
tuner=${TUNER:-target/release/tuner}
parts=${PARTS:-4}
raw_max=${RAW_MAX:-4000}
port=${PORT:-19391}
window=${WINDOW:-30m}
mkdir -p "$work"

for tool in python3 promtool prometheus /usr/bin/time "$tuner"; do
  command -v "$tool" >/dev/null || { echo "bench-tuner.sh: $tool is missing" >&2; exit 1; }
done

# The fleet, with samples from ten minutes ago to ten ahead; the queries read the latest within
# half an hour (--window 30m), so a rerun on the same WORKDIR within 20 minutes finds them.
end=$(( $(date +%s) + 600 ))
if [ ! -d "$work/data" ]; then
  step=$(( (nodes + parts - 1) / parts ))
  for (( first = 0; first < nodes; first += step )); do
    last=$(( first + step < nodes ? first + step : nodes ))
    python3 scripts/fleet/generate.py --nodes "$nodes" --range "$first:$last" --slow 5 \
      --samples 5 --span 1200 --end "$end" --out "$work/part.om"
    promtool tsdb create-blocks-from openmetrics "$work/part.om" "$work/data" >/dev/null
    rm -f "$work/part.om"
  done
fi

printf 'global:\n  scrape_interval: 1m\n' >"$work/prometheus.yml"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$port" --query.max-samples=500000000 \
  >"$work/prometheus.log" 2>&1 &
prom=$!
trap 'kill $prom 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null && break
  sleep 1
done

# One measured run: NAME then the command.
timed() {
  local name=$1 rc
  shift
  set +e
  /usr/bin/time -v "$@" >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
  set -e
  awk -v name="$name" -v rc="$rc" '
    /Elapsed \(wall clock\)/ { n = split($NF, t, ":"); wall = (n == 3 ? t[1] * 3600 + t[2] * 60 + t[3] : t[1] * 60 + t[2]) }
    /Maximum resident set size/ { rss = $NF / 1024 }
    END { printf "%-28s %8.1f s %8.0f MB  rc=%s\n", name, wall, rss, rc }' "$work/$name.err"
}

job=(recommend --model 70b --gpus 512 --format json --timeout 600s --window "$window")
url="http://127.0.0.1:$port"
echo "fleet of $nodes nodes in $work"
# The recorded curves first, so that their figures do not depend on what the query-time
# reduction, which at 12,500 nodes can run for the whole --timeout, leaves in Prometheus.
if curl -sf "$url/api/v1/query" --data-urlencode "query=last_over_time(model:meshfit_node_gpu_model_info:nodes[$window])" | grep -q model_name; then
  timed recorded "$tuner" "${job[@]}" --prometheus "$url" --fleet-query recorded
  timed snapshot-compact-recorded "$tuner" snapshot --compact --fleet-query recorded --prometheus "$url" --timeout 600s --window "$window" -o "$work/compact-recorded.json"
fi
timed reduced "$tuner" "${job[@]}" --prometheus "$url" --fleet-query reduced
timed snapshot-compact "$tuner" snapshot --compact --prometheus "$url" --timeout 600s --window "$window" -o "$work/compact.json"
timed from-compact "$tuner" "${job[@]}" --measurements "$work/compact.json"
if [ "$nodes" -le "$raw_max" ]; then
  timed raw "$tuner" "${job[@]}" --prometheus "$url" --fleet-query raw
  timed snapshot-raw "$tuner" snapshot --prometheus "$url" --timeout 600s --window "$window" -o "$work/raw.json"
  timed from-raw "$tuner" "${job[@]}" --measurements "$work/raw.json"
fi
ls -l "$work"/*.json
