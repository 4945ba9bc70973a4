#!/usr/bin/env bash
# Analytic scan benchmark (`make bench-analytic`): heap vs scoot plain scans vs ScootScan vs an
# OLAP snapshot, Q1/Q6 and single-column scans. Results: bench/results/analytic.{md,json}.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SCOOT_REPO"
if [ "${SKIP_SETUP:-0}" != 1 ]; then step "setup"; bash scripts/setup.sh; fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then step "build + install (release)"; build_install; fi
step "benchmark (bench/analytic_bench.py)"
resolve_pg_config
SCOOT_BINDIR=$PG_BINDIR python3 bench/analytic_bench.py
