#!/usr/bin/env bash
# THE demo of pg_scoot (`make demo`): pgbench TPC-B on scoot tables in a throw-away cluster.
#
#   setup.sh -> cargo pgrx install --release -> throw-away cluster (scoot preloaded)
#   -> PGOPTIONS='-c default_table_access_method=scoot' pgbench -i -s $DEMO_SCALE
#   -> pgbench -c 8 -j 2 -T $DEMO_SECONDS -M prepared
#   -> check sum(abalance) = sum(tbalance) = sum(bbalance) = sum(delta), print scoot.arena
#   -> stop the cluster. Exit status non-zero if any step or check fails.
#
# Knobs: SKIP_BUILD=1, SKIP_SETUP=1, DEMO_SCALE (10), DEMO_SECONDS (20), DEMO_CLIENTS (8),
#        DEMO_AM (scoot; `heap` runs the same demo on heap as a baseline / plumbing check).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SCOOT_REPO"

SCALE=${DEMO_SCALE:-10}
SECS=${DEMO_SECONDS:-20}
CLIENTS=${DEMO_CLIENTS:-8}
AM=${DEMO_AM:-scoot}

if [ "${SKIP_SETUP:-0}" != 1 ]; then step "setup"; bash scripts/setup.sh; fi
step "build + install (release)"
build_install

step "start a throw-away cluster"
[ "$AM" = heap ] && [ "${SCOOT_PRELOAD:-1}" = 1 ] && [ ! -f "$PG_PKGLIBDIR/pg_scoot.so" ] && export SCOOT_PRELOAD=0
cluster_start
export PGDATABASE=postgres
if [ "${SCOOT_PRELOAD:-1}" = 1 ]; then
  psql_q -c "CREATE EXTENSION IF NOT EXISTS pg_scoot"
  psql_q -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_scoot'" | sed 's/^/pg_scoot version: /'
fi
PGBENCH=$PG_BINDIR/pgbench

step "pgbench -i -s $SCALE (default_table_access_method=$AM)"
PGOPTIONS="-c default_table_access_method=$AM" "$PGBENCH" -i -q -s "$SCALE"
echo "table access methods:"
psql_q -F ' ' -c "SELECT '  ' || c.relname, a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam
                  WHERE c.relname LIKE 'pgbench_%' AND c.relkind = 'r' ORDER BY 1"
wrong=$(psql_q -c "SELECT count(*) FROM pg_class c JOIN pg_am a ON a.oid = c.relam
                   WHERE c.relname LIKE 'pgbench_%' AND c.relkind = 'r' AND a.amname <> '$AM'")
[ "$wrong" = 0 ] || die "$wrong pgbench table(s) do not use access method $AM"

step "pgbench -c $CLIENTS -j 2 -T $SECS -M prepared"
"$PGBENCH" -c "$CLIENTS" -j 2 -T "$SECS" -M prepared -P 5 2>&1 | tee "$SCOOT_CLUSTER_DIR/pgbench.out"
processed=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$SCOOT_CLUSTER_DIR/pgbench.out")
failed_tx=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$SCOOT_CLUSTER_DIR/pgbench.out")
[ -n "$processed" ] && [ "$processed" -gt 0 ] || die "pgbench processed no transactions"

step "consistency check"
read -r a t b d n <<<"$(psql_q -F ' ' -c "SELECT
    (SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts),
    (SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers),
    (SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches),
    (SELECT coalesce(sum(delta), 0)    FROM pgbench_history),
    (SELECT count(*)                   FROM pgbench_history)")"
echo "sum(abalance)=$a sum(tbalance)=$t sum(bbalance)=$b sum(delta)=$d history rows=$n (pgbench: $processed processed, ${failed_tx:-?} failed)"
ok=1
if [ "$a" = "$t" ] && [ "$t" = "$b" ] && [ "$b" = "$d" ]; then echo "balances: CONSISTENT"; else echo "balances: INCONSISTENT"; ok=0; fi
if [ "$n" != "$processed" ]; then echo "history rows ($n) != transactions processed ($processed)"; ok=0; fi
counts=$(psql_q -F ' ' -c "SELECT (SELECT count(*) FROM pgbench_accounts), (SELECT count(*) FROM pgbench_tellers),
                                  (SELECT count(*) FROM pgbench_branches)")
echo "rows accounts/tellers/branches: $counts (expected $((SCALE * 100000)) $((SCALE * 10)) $SCALE)"
[ "$counts" = "$((SCALE * 100000)) $((SCALE * 10)) $SCALE" ] || { echo "row counts: WRONG"; ok=0; }

if [ "${SCOOT_PRELOAD:-1}" = 1 ]; then
  step "SELECT * FROM scoot.arena"
  "$PG_BINDIR/psql" -X -c "SELECT * FROM scoot.arena" || echo "(scoot.arena not available)"
  step "SELECT * FROM scoot.arena_tables"
  "$PG_BINDIR/psql" -X -c "SELECT * FROM scoot.arena_tables ORDER BY relation::text" || true
fi
step "sizes (pg_total_relation_size)"
"$PG_BINDIR/psql" -X -c "SELECT c.relname, a.amname, pg_size_pretty(pg_total_relation_size(c.oid)) AS total
                         FROM pg_class c JOIN pg_am a ON a.oid = c.relam
                         WHERE c.relname LIKE 'pgbench_%' AND c.relkind = 'r' ORDER BY 1"
if grep -qE 'PANIC|TRAP|terminated by signal' "$SCOOT_CLUSTER_DIR/server.log"; then
  echo "server log shows a crash:"; grep -nE -B2 -A5 'PANIC|TRAP|terminated by signal' "$SCOOT_CLUSTER_DIR/server.log" | head -60
  ok=0
fi

step "stop cluster"
[ $ok = 1 ] && echo "demo: OK" || { echo "demo: FAILED"; exit 1; }
