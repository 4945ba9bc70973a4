#!/usr/bin/env bash
# OLAP snapshot benchmarks (`make bench-olap`): snapshot creation vs size / hot blocks / fork(),
# first-write cost, HTAP (TPC-B with analytic streams, heap vs scoot), latency timeline.
# Results: bench/results/olap.md, olap.json, olap_*.png. See bench/olap_bench.py for the knobs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SCOOT_REPO"
if [ "${SKIP_SETUP:-0}" != 1 ]; then step "setup"; bash scripts/setup.sh; fi
step "build + install (release)"
build_install
step "benchmarks (bench/olap_bench.py)"
resolve_pg_config
SCOOT_BINDIR=$PG_BINDIR python3 bench/olap_bench.py
