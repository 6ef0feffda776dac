#!/usr/bin/env bash
# The test command: installs what the tests need when it is missing, then runs every check CI
# runs: rustfmt, clippy with -D warnings, the whole test suite, microbench against NVIDIA's
# real NCCL and cuBLASLt (scripts/check-libs.sh), and the launch configs through the frameworks'
# own parsers (scripts/check-launch-configs.sh); both install into the user's cache, outside the
# repository, and skip offline.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '== %s\n' "$*" >&2; }

# Toolchain components.
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    say "installing $component"
    rustup component add "$component"
  fi
done

# The tests read the repository's own copy of the real data (data/, copied from shared/data).
if [ ! -d data/nccl-tests ]; then
  echo "scripts/test.sh: data/ is missing: the tests read the published runs and nccl-tests logs there" >&2
  exit 1
fi

# The end-to-end tests (tests/, meshfit-e2e) lint /metrics with promtool and scrape agents with
# a real Prometheus: Debian's prometheus package has both binaries.
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  say "installing prometheus (for the end-to-end tests)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends prometheus
fi

say "rustfmt"
cargo fmt --all -- --check
say "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
say "tests"
cargo test --workspace --locked
say "GPU libraries (NVIDIA's NCCL and cuBLAS wheels, no GPU needed)"
scripts/check-libs.sh
scripts/device-summary.py --self-test
say "launch configs through the frameworks' parsers"
scripts/check-launch-configs.sh
deploy/check.sh
