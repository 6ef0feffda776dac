#!/usr/bin/env bash
# Rule evaluation time over a backfilled fleet: writes a fleet with scripts/fleet/generate.py
# (DGX H100 and A100 nodes in turn, one slow node in 200), backfills a fresh TSDB with promtool,
# starts Prometheus on it with a rules file and prints each group's evaluation time from
# /api/v1/rules, with its share of the group's interval and the slowest rules.
#
#   scripts/fleet/bench-rules.sh [--nodes N] [--rules FILE] [--evals E] [--parts P [--jobs J]] [--work DIR [--reuse]]
#
# --nodes     fleet size (default 1000)
# --rules     Prometheus rule file (default: the chart's, deploy/helm/meshfit/rules/meshfit.rules.yaml)
# --evals     evaluations of every group to wait for (default 3); the figures are over them
# --parts     write and backfill the fleet in P parts (default 1); promtool holds about 3.6 GB per
#             1,000 nodes of a part in memory
# --jobs      parts written and backfilled at once (default: all P); memory is about
#             3.6 GB x J x N / P / 1,000, so 12,500 nodes fit in 8 GB as --parts 13 --jobs 2
# --work      scratch directory, kept (default: a new temporary one, removed at the end)
# --reuse     the blocks a run before left in --work DIR, when they hold the same --nodes: several
#             rule files against one fleet
#
# Needs python3, promtool and prometheus. The samples end when the script starts, and the
# recording rules write after them: a backfilled block that reached into the future would make
# Prometheus refuse the rules' samples as out of bounds. Prometheus runs with a 2 h lookback
# (--query.lookback-delta) so that the rules still find the fleet's last samples.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
nodes=1000 rules=$repo/deploy/helm/meshfit/rules/meshfit.rules.yaml evals=3 parts=1 jobs="" work="" keep="" reuse=""
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --rules) rules=$2; shift 2 ;;
    --evals) evals=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --work) work=$2; keep=1; shift 2 ;;
    --reuse) reuse=1; shift ;;
    *) usage ;;
  esac
done
jobs=${jobs:-$parts}
for n in "$nodes" "$evals" "$parts" "$jobs"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "bench-rules.sh: expected a whole number above 0, got \`$n\`" >&2; exit 2; }
done
[ -z "$reuse" ] || [ -n "$keep" ] || { echo "bench-rules.sh: --reuse needs --work DIR" >&2; exit 2; }
[ -r "$rules" ] || { echo "bench-rules.sh: --rules $rules: cannot read it" >&2; exit 2; }
for tool in python3 promtool prometheus; do
  command -v "$tool" >/dev/null || { echo "bench-rules.sh: \`$tool\` is not installed" >&2; exit 2; }
done
if [ -z "$work" ]; then work=$(mktemp -d); fi
mkdir -p "$work"
prom=""
cleanup() {
  if [ -n "$prom" ]; then kill "$prom" 2>/dev/null || true; wait "$prom" 2>/dev/null || true; fi
  if [ -z "$keep" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT
say() { printf '== %s\n' "$*" >&2; }

promtool check rules "$rules" >/dev/null
if [ -n "$reuse" ] && [ "$(cat "$work/blocks/nodes" 2>/dev/null)" = "$nodes" ]; then
  say "reusing the $nodes-node blocks in $work/blocks"
else
  end=$(date +%s)
  say "writing and backfilling $nodes nodes in $parts part(s)"
  start=$(date +%s)
  rm -rf "$work/blocks" "$work/parts"
  mkdir -p "$work/blocks" "$work/parts"
  for ((p = 0; p < parts; p++)); do
    first=$(( nodes * p / parts )) last=$(( nodes * (p + 1) / parts ))
    [ "$first" -lt "$last" ] || continue
    # A part's outcome is its .ok file: `wait -n` reaps parts here, so `wait PID` cannot tell.
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    (
      om=$work/parts/$p.om
      python3 "$here/generate.py" --nodes "$nodes" --range "$first:$last" --slow $(( (nodes + 199) / 200 )) \
        --cluster bench --template "$here/testdata/dgx-h100.prom" --template "$here/testdata/dgx-a100.prom" \
        --end "$end" --span 900 --samples 7 --out "$om" 2>"$work/parts/$p.log"
      promtool tsdb create-blocks-from openmetrics "$om" "$work/parts/$p" >>"$work/parts/$p.log" 2>&1
      rm -f "$om"
      touch "$work/parts/$p.ok"
    ) &
  done
  wait
  for ((p = 0; p < parts; p++)); do
    first=$(( nodes * p / parts )) last=$(( nodes * (p + 1) / parts ))
    [ "$first" -ge "$last" ] || [ -e "$work/parts/$p.ok" ] \
      || { cat "$work/parts/$p.log" >&2; echo "bench-rules.sh: part $p failed" >&2; exit 1; }
  done
  # The parts' blocks overlap in time. Prometheus merges overlapping blocks when it compacts,
  # a minute after it starts: at 12,500 nodes that takes longer than the rules are timed for
  # and starves them. So a Prometheus without rules merges them here, once, and the rules run
  # on one block as a fleet's own history would be.
  for d in "$work"/parts/*/; do mv "$d"/*/ "$work/blocks/"; done
  # Blocks whose time ranges overlap another's. A span across a 2-hour boundary leaves
  # adjacent blocks too, which Prometheus never merges: only overlaps are waited for.
  overlapping() {
    python3 - "$work/blocks" <<'PY'
import glob, json, sys
spans = [json.load(open(m)) for m in glob.glob(sys.argv[1] + "/01*/meta.json") if ".tmp" not in m]
spans = [(m["minTime"], m["maxTime"]) for m in spans]
print(sum(any(a < d and c < b for j, (c, d) in enumerate(spans) if j != i) for i, (a, b) in enumerate(spans)))
PY
  }
  if [ "$(overlapping)" -gt 0 ]; then
    say "merging $(overlapping) overlapping blocks"
    printf 'global:\n  scrape_interval: 1h\n' >"$work/merge.yml"
    prometheus --config.file="$work/merge.yml" --storage.tsdb.path="$work/blocks" \
      --web.listen-address="127.0.0.1:0" --log.level=warn >"$work/merge.log" 2>&1 &
    prom=$!
    until [ "$(overlapping)" -eq 0 ] && ! ls -d "$work"/blocks/*.tmp* >/dev/null 2>&1; do
      kill -0 "$prom" 2>/dev/null || { tail -5 "$work/merge.log" >&2; echo "bench-rules.sh: merging the blocks failed" >&2; exit 1; }
      sleep 10
    done
    kill "$prom"; wait "$prom" 2>/dev/null || true; prom=""
    rm -rf "$work/blocks/wal" "$work/blocks/chunks_head" "$work/blocks/queries.active" "$work/blocks/lock"
  fi
  echo "$nodes" >"$work/blocks/nodes"
  grep -h "slow nodes" "$work"/parts/*.log >&2 || true
  echo "   $(( $(date +%s) - start )) s, $(du -sh "$work/blocks" | cut -f1) of blocks" >&2
fi
# A fresh copy each run: the rules' own samples of a run before stay out of this one.
rm -rf "$work/data"
cp -r "$work/blocks" "$work/data"
rm -f "$work/data/nodes"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/prometheus.yml" <<YAML
global:
  evaluation_interval: 1m
rule_files: ["$rules"]
YAML
say "Prometheus $(prometheus --version 2>&1 | head -1 | cut -d' ' -f3) on 127.0.0.1:$port with $(basename "$rules")"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$port" --query.lookback-delta=2h --log.level=warn >"$work/prometheus.log" 2>&1 &
prom=$!
python3 - "http://127.0.0.1:$port" "$evals" "$nodes" <<'PY' || { tail -20 "$work/prometheus.log" >&2; exit 1; }
import json, statistics, sys, time, urllib.request
base, evals, nodes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def get(path):
    with urllib.request.urlopen(base + path, timeout=60) as r:
        return json.load(r)["data"]

deadline = time.time() + 600
while True:
    try:
        get("/api/v1/status/runtimeinfo")
        break
    except OSError:
        if time.time() > deadline:
            sys.exit("Prometheus did not come up in 10 minutes")
        time.sleep(1)
# Every group's evaluations, the first (which loads the blocks' indexes) and one of slack
# included, at the longest interval, plus 10 minutes for a slow first evaluation.
longest = max((g["interval"] for g in get("/api/v1/rules")["groups"]), default=60)
limit = 600 + (evals + 2) * longest
deadline = time.time() + limit
seen = {}  # group -> {lastEvaluation: (group time, {rule: time})}
while True:
    groups = get("/api/v1/rules")["groups"]
    for g in groups:
        if g["lastEvaluation"].startswith("0001"):
            continue
        for r in g["rules"]:
            if r.get("lastError"):
                sys.exit(f"group {g['name']}: rule {r.get('name')}: {r['lastError']}")
        rules = {r["name"]: r["evaluationTime"] for r in g["rules"]}
        seen.setdefault(g["name"], {})[g["lastEvaluation"]] = (g["evaluationTime"], rules, g["interval"])
    if groups and all(len(seen.get(g["name"], {})) > evals for g in groups):
        break
    if time.time() > deadline:
        sys.exit(f"fewer than {evals} evaluations of every group in {limit / 60:.0f} minutes: {[(k, len(v)) for k, v in seen.items()]}")
    time.sleep(2)
up = get("/api/v1/query?query=count(count%20by%20(hostname)%20(meshfit_gpu_info))")["result"]
print(f"nodes seen by Prometheus: {up[0]['value'][1] if up else 0} of {nodes}")
print(f"{'group':<24} {'interval':>8} {'evals':>5} {'median s':>9} {'max s':>8} {'of interval':>11}  slowest rules (median s)")
for name, runs in seen.items():
    # The first evaluation also pays for loading the blocks' indexes: left out.
    kept = [runs[k] for k in sorted(runs)][1:]
    times = [t for t, _, _ in kept]
    interval = kept[0][2]
    per_rule = {r: statistics.median(k[1][r] for k in kept) for r in kept[0][1]}
    top = sorted(per_rule.items(), key=lambda kv: -kv[1])[:3]
    print(f"{name:<24} {interval:>7.0f}s {len(times):>5} {statistics.median(times):>9.3f} {max(times):>8.3f} "
          f"{statistics.median(times) / interval:>10.1%}  " + ", ".join(f"{r} {t:.3f}" for r, t in top))
PY
