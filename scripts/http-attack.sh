#!/usr/bin/env bash
# Issue 13: the agent's HTTP server under two attacks, on loopback, with the figures the issue
# asks for (RSS before, during, after; /metrics p50/p99/max on a scraper's keep-alive
# connection while under attack). It builds the release agent, starts it with the sim backend
# and its default limits, runs both attacks and stops everything by itself (a few minutes).
#
#   scripts/http-attack.sh [--idle 20000] [--readers 1500] [--hold-s 40] [--results-mib 1]
#
# The idle attack opens as many connections as the hard `ulimit -n` allows, up to --idle,
# and says so when that is fewer. Loopback only: the agent listens on 127.0.0.1:0.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --quiet -p agent --bin agent --example http_attack
echo "ulimit -n: soft $(ulimit -Sn), hard $(ulimit -Hn)"
exec "$target/release/examples/http_attack" "$target/release/agent" "$@"
