#!/usr/bin/env bash
# Footprint benchmark of the agent (issue 4), not a test: with the sim backend after a full
# calibration, the resident memory (/proc), idle CPU over a window, /metrics latency at a
# fixed rate from a second process on loopback, and the payload size per scrape; then the
# same load asking for OpenMetrics with gzip, as Prometheus does.
#
# Targets: RSS < 20 MiB, idle CPU < 0.5% of a core, p99 < 5 ms at 200 requests/s for 60 s.
# Usage: agent/bench/footprint.sh   (IDLE_S, RATE, LOAD_S, PROFILE override the defaults)
set -euo pipefail
cd "$(dirname "$0")/../.."

IDLE_S=${IDLE_S:-60}
RATE=${RATE:-200}
LOAD_S=${LOAD_S:-60}
PROFILE=${PROFILE:-dgx-h100}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}

cargo build --quiet --release -p agent --bin agent
# Calibration runs the microbench binary as a child (issue 10).
cargo build --quiet --release -p microbench --bin microbench
cargo build --quiet --release -p meshfit-e2e --example loadgen
bin=$CARGO_TARGET_DIR/release

work=$(mktemp -d)
agent_pid=
cleanup() { [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

"$bin/agent" --backend sim --profile "$PROFILE" --listen 127.0.0.1:0 --state-dir "$work/state" \
  --node-name bench --jitter 0s --microbench-bin "$bin/microbench" 2>"$work/log" &
agent_pid=$!

addr=
for _ in $(seq 1 100); do
  addr=$(grep -o 'listening on http://[0-9.:]*' "$work/log" | sed 's|.*http://||' || true)
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { cat "$work/log"; echo "agent did not start" >&2; exit 1; }

for _ in $(seq 1 600); do
  grep -q 'calibration success' "$work/log" && break
  sleep 0.1
done
grep 'calibration success' "$work/log" || { cat "$work/log"; echo "no calibration" >&2; exit 1; }
sleep 6 # the first live sample

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$agent_pid/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$agent_pid/status"; }
# utime + stime in clock ticks (fields 14 and 15, counted after the command name).
ticks() { sed 's/.*) //' "/proc/$agent_pid/stat" | awk '{print $12 + $13}'; }
hz=$(getconf CLK_TCK)

curl -s "http://$addr/metrics" >"$work/metrics"
payload=$(wc -c <"$work/metrics")
payload_gz=$(gzip -c "$work/metrics" | wc -c)
series=$(grep -vc '^#' "$work/metrics")
rss_calibrated=$(rss_kib)

t0=$(ticks)
sleep "$IDLE_S"
t1=$(ticks)
idle_pct=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$IDLE_S" 'BEGIN {printf "%.3f", (b - a) / hz / s * 100}')

# The agent's CPU per request: unlike the latency tail, not set by other processes' load.
cpu_per_request_us() {
  awk -v a="$1" -v b="$2" -v hz="$hz" -v n="$((RATE * LOAD_S))" 'BEGIN {printf "%.0f", (b - a) / hz / n * 1e6}'
}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(ticks)
load=$("$bin/examples/loadgen" "$addr" /metrics "$RATE" "$LOAD_S" 4)
cpu_us=$(cpu_per_request_us "$t0" "$(ticks)")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
rss_loaded=$(rss_kib)
# What Prometheus asks for by default: OpenMetrics, gzip-compressed (issue 11).
openmetrics=(
  "Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
  "Accept-Encoding: gzip"
)
curl -s -H "${openmetrics[0]}" -H "${openmetrics[1]}" "http://$addr/metrics" >"$work/metrics.om.gz"
payload_om=$(gzip -dc "$work/metrics.om.gz" | wc -c)
payload_om_gz=$(wc -c <"$work/metrics.om.gz")
t0=$(ticks)
load_om=$("$bin/examples/loadgen" "$addr" /metrics "$RATE" "$LOAD_S" 4 "${openmetrics[@]}")
cpu_om_us=$(cpu_per_request_us "$t0" "$(ticks)")
load_om_after=$(cut -d' ' -f1-3 /proc/loadavg)
rss_loaded_om=$(rss_kib)
hwm=$(hwm_kib)

echo "agent footprint (sim $PROFILE, after a full calibration: $(grep -o '[0-9]* records' "$work/log" | head -1))"
echo "  rss_after_calibration_mib $(awk -v k="$rss_calibrated" 'BEGIN {printf "%.1f", k / 1024}')"
echo "  rss_after_load_mib        $(awk -v k="$rss_loaded" 'BEGIN {printf "%.1f", k / 1024}')"
echo "  rss_after_om_load_mib     $(awk -v k="$rss_loaded_om" 'BEGIN {printf "%.1f", k / 1024}')"
echo "  rss_peak_mib              $(awk -v k="$hwm" 'BEGIN {printf "%.1f", k / 1024}')"
echo "  idle_cpu_percent_of_core  $idle_pct (over ${IDLE_S} s)"
echo "  payload_bytes_per_scrape  $payload ($payload_gz gzipped, $series series)"
echo "  openmetrics_payload_bytes $payload_om ($payload_om_gz as served gzipped)"
echo "  load ${RATE}/s for ${LOAD_S} s: $load agent_cpu_us_per_request $cpu_us"
echo "  openmetrics+gzip load ${RATE}/s for ${LOAD_S} s: $load_om agent_cpu_us_per_request $cpu_om_us"
# Tail latency on a shared machine follows its run queue: say how busy it was.
echo "  host: $(nproc) CPUs, load average $load_before before, $load_after after the load, $load_om_after after the openmetrics load"
