#!/usr/bin/env bash
# deploy/ checks (issue 6), run by scripts/test.sh after the workspace builds. Installs what it
# needs when missing (Debian prometheus and wget; Python tools into deploy/.check/venv; npm packages into
# deploy/.check/node), then checks the Dockerfile, the chart and plain manifests, the Prometheus
# rules, the Grafana dashboards, the multi-node calibration recipes (issue 12: the chart's fabric
# CronJob, deploy/slurm, deploy/mpirun), and the whole chain with sim agents and a real Prometheus.
# Prints each check; exits non-zero on the first failure.
#
# Usage: deploy/check.sh [--screenshots]
#   --screenshots  write the dashboard PNGs to deploy/screenshots (committed) instead of a
#                  scratch folder, drawn from a 64-node sim fleet (the default run uses 9 nodes
#                  to stay quick); they change on every run, so only when refreshing them.
set -euo pipefail
cd "$(dirname "$0")"
deploy=$(pwd)
repo=$(cd .. && pwd)
tools=$deploy/.check
shots=""
fleet=small
case "${1:-}" in
  --screenshots) shots=$deploy/screenshots; fleet=screenshots ;;
  "") ;;
  *) echo "usage: deploy/check.sh [--screenshots]" >&2; exit 2 ;;
esac

# One stream, so that headings and the tools' own lines stay in order.
exec 1>&2
say() { printf '== deploy: %s\n' "$*"; }
work=$(mktemp -d)
# e2e.py stops the agents and the Prometheus it starts when it ends or gets SIGTERM; on the way
# out this script sends it that SIGTERM and waits for it, then removes the scratch files.
e2e=""
cleanup() {
  if [ -n "$e2e" ]; then
    kill "$e2e" 2>/dev/null || true
    wait "$e2e" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
shots=${shots:-$work/screenshots}

# --- tools, installed when missing or when their pinned versions change ---------------------
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  say "installing Debian prometheus (prometheus, promtool)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
# The chart's `helm test` script is run here with wget (busybox's in the Pod, GNU's here).
if ! command -v wget >/dev/null; then
  say "installing Debian wget"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wget >/dev/null
fi
# A stamp holds the hash of what was installed, so a changed pin reinstalls and nothing else does.
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }
want=$(sha256sum check/requirements.txt | cut -d' ' -f1)
if ! stamp_ok "$tools/venv/.installed" "$want"; then
  say "installing Python tools into deploy/.check/venv"
  rm -rf "$tools/venv"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install -q --disable-pip-version-check -r check/requirements.txt
  echo "$want" > "$tools/venv/.installed"
fi
want=$(cat check/package.json check/package-lock.json | sha256sum | cut -d' ' -f1)
if ! stamp_ok "$tools/node/.installed" "$want"; then
  say "installing npm packages into deploy/.check/node"
  rm -rf "$tools/node"
  mkdir -p "$tools/node"
  cp check/package.json check/package-lock.json "$tools/node/"
  (cd "$tools/node" && npm ci --silent --no-audit --no-fund)
  echo "$want" > "$tools/node/.installed"
fi
py=$tools/venv/bin/python

# --- static checks -------------------------------------------------------------------------
say "hadolint Dockerfile (the image itself is not built: no container engine here)"
"$tools/venv/bin/hadolint" Dockerfile
echo "   Dockerfile: no findings"

say "Helm chart and plain manifests"
"$py" check/manifests.py check "$work/rendered"

say "chart options (issue 11): subchart and global, NOTES, helm test Pod, priority class, IP families, ServiceMonitor, image stages"
(cd check && "$py" chart_options.py)

say "chart modes (hostPID, hostProc, with fabric calibration): rendered, validated, each pod against the Pod Security Standards level the README claims"
(cd check && "$py" pss.py)

say "multi-node calibration in the chart: calibration.fabric on, every object validated and wired together"
"$py" check/recipes.py chart

say "ServiceMonitor and PrometheusRule against the Prometheus Operator CRD schemas"
cp check/crd_validate.mjs "$tools/node/"
(cd "$tools/node" && node crd_validate.mjs "$work/rendered/crd-objects.json")

say "dashboards and CRD objects as typed literals: tsc --strict against @grafana/schema and the operator types"
rm -rf "$tools/node/ts"
mkdir -p "$tools/node/ts"
cp check/grafana.ts check/monitoring.ts check/tsconfig.json "$tools/node/ts/"
"$py" check/typed_literals.py "$tools/node/ts" helm/meshfit/dashboards/*.json -- "$work/rendered/crd-objects.json"
(cd "$tools/node/ts" && ../node_modules/.bin/tsc -p .)
echo "   $(ls "$tools/node/ts"/dashboard_*.ts | wc -l) dashboards and $(grep -c '^export const' "$tools/node/ts/monitoring_objects.ts") CRD objects type-check"

say "dashboard queries (issue 28): every selector by \$cluster, every join on cluster, no line per node"
"$py" check/dashboard_queries.py

say "Prometheus rules: promtool check rules, promtool test rules"
promtool check rules helm/meshfit/rules/meshfit.rules.yaml
promtool test rules prometheus/meshfit.rules.test.yaml
say "every alert's runbook_url names its own page under deploy/runbooks"; "$py" check/runbooks.py

say "fleet generator (scripts/fleet): OpenMetrics for N nodes, a 20-node fleet backfilled with promtool"
(cd "$repo/scripts/fleet" && PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s .)

# --- the whole chain -----------------------------------------------------------------------
say "building agent, microbench and tuner for the end-to-end check"
bins=()
target=${CARGO_TARGET_DIR:-$repo/target}
# One build for the three: built one by one, each resolves its own features and compiles its own
# copy of the shared crates, which costs CI's small disk a few hundred MB. The agent calibrates by
# running the microbench binary beside it (issue 10).
(cd "$repo" && cargo build --locked --quiet --workspace --bins)
for bin in agent tuner; do
  if [ -x "$target/debug/$bin" ]; then bins+=("$target/debug/$bin"); else bins+=(""); fi
done
if [ -z "${bins[0]}" ]; then
  echo "   SKIP end-to-end check and dashboard PNGs: the workspace has no \`agent\` binary"
else
  say "end to end: sim agents of two GPU models ($fleet fleet), Prometheus with the shipped rules, every panel query, alerts, tuner"
  "$py" check/e2e.py "${bins[0]}" "${bins[1]}" "$work" "$work/panels.json" --fleet "$fleet" &
  e2e=$!
  wait "$e2e"
  e2e=""
  say "dashboard PNGs"
  "$py" check/render_dashboards.py "$work/panels.json" "$shots"
  say "the chart's helm test script against a sim agent, IPv4 and IPv6 loopback"
  (cd check && "$py" chart_options.py helm-test "${bins[0]}")
fi
# Last, so that a microbench without `fabric` yet (issue 12) still lets every check above run.
say "launch recipes (issue 12): shellcheck, stand-in srun/mpirun/Job controller, flags against \`microbench fabric --help\`, sim runs on loopback"
"$py" check/recipes.py launch "$target/debug/microbench" "$work/recipes"
say "all deploy checks passed"
