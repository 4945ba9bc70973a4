#!/usr/bin/env bash
# Arrow export benchmark (`make bench-arrow`): TPC-H lineitem at ARROW_SF (default 1) in heap and
# scoot, pg_scoot.read_arrow vs ADBC, ConnectorX, psycopg and raw COPY BINARY, one cluster.
# Results: bench/results/arrow.{md,json}. Knobs: ARROW_SF, ARROW_REPS.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SCOOT_REPO"
if [ "${SKIP_SETUP:-0}" != 1 ]; then step "setup"; bash scripts/setup.sh; fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then step "build + install (release)"; build_install; fi
if ! command -v tpchgen-cli >/dev/null && [ ! -x "$HOME/.cargo/bin/tpchgen-cli" ]; then
  step "cargo install tpchgen-cli"
  cargo install tpchgen-cli --locked
fi
if ! python3 -c 'import adbc_driver_postgresql, connectorx' >/dev/null 2>&1; then
  step "pip install adbc-driver-postgresql connectorx"
  pyargs=(-m pip install -q --disable-pip-version-check adbc-driver-manager adbc-driver-postgresql connectorx)
  python3 "${pyargs[@]}" || python3 "${pyargs[@]}" --break-system-packages
fi
step "benchmark (bench/arrow_bench.py)"
resolve_pg_config
SCOOT_BINDIR=$PG_BINDIR python3 bench/arrow_bench.py
