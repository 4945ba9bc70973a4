#!/usr/bin/env bash
# TPC-H benchmark (`make bench-tpch`): the 22 queries at scale factor TPCH_SF (default 1) on heap
# and scoot (live, OLAP snapshot, 0 and 2 workers) in one cluster, data from tpchgen-cli
# (installed from crates.io when missing). Results: bench/results/tpch.{md,json}.
# Knobs: TPCH_SF, TPCH_REPS, TPCH_TIMEOUT, TPCH_QUERIES=1,6 (a subset).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SCOOT_REPO"
if [ "${SKIP_SETUP:-0}" != 1 ]; then step "setup"; bash scripts/setup.sh; fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then step "build + install (release)"; build_install; fi
if ! command -v tpchgen-cli >/dev/null && [ ! -x "$HOME/.cargo/bin/tpchgen-cli" ]; then
  step "cargo install tpchgen-cli"
  cargo install tpchgen-cli --locked
fi
step "benchmark (bench/tpch_bench.py)"
resolve_pg_config
SCOOT_BINDIR=$PG_BINDIR python3 bench/tpch_bench.py
