#!/usr/bin/env bash
# THE demo of pg_scoot (`make demo`): pgbench TPC-B on scoot tables in a throw-away cluster.
#
#   setup.sh -> scripts/install.sh (release) -> throw-away cluster (scoot preloaded)
#   -> PGOPTIONS='-c default_table_access_method=scoot' pgbench -i -s $DEMO_SCALE
#   -> pgbench -c 8 -j 2 -T $DEMO_SECONDS -M prepared, and meanwhile (scoot) an analytic reader with
#      scoot.olap = on: every second sum(abalance), sum(tbalance), sum(bbalance) on an OLAP snapshot
#      (equal in every snapshot, or the demo fails) and a GROUP BY; EXPLAIN shows the snapshot line;
#      scoot.snapshots / scoot.snapshot_stats
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

OLAP_OUT=$SCOOT_CLUSTER_DIR/olap.out
: >"$OLAP_OUT"
if [ "$AM" = scoot ]; then
  step "pgbench -c $CLIENTS -j 2 -T $SECS -M prepared, with an analytic reader on OLAP snapshots"
  ( end=$((SECONDS + SECS))
    while [ $SECONDS -lt $end ]; do
      PGOPTIONS="-c scoot.olap=on" psql_q -F ' ' -c "SELECT (SELECT sum(abalance) FROM pgbench_accounts),
          (SELECT sum(tbalance) FROM pgbench_tellers), (SELECT sum(bbalance) FROM pgbench_branches)" >>"$OLAP_OUT" 2>&1
      sleep 1
    done ) &
  OLAP_PID=$!
else
  step "pgbench -c $CLIENTS -j 2 -T $SECS -M prepared"
fi
"$PGBENCH" -c "$CLIENTS" -j 2 -T "$SECS" -M prepared -P 5 2>&1 | tee "$SCOOT_CLUSTER_DIR/pgbench.out"
processed=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$SCOOT_CLUSTER_DIR/pgbench.out")
failed_tx=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$SCOOT_CLUSTER_DIR/pgbench.out")
[ -n "$processed" ] && [ "$processed" -gt 0 ] || die "pgbench processed no transactions"

if [ "$AM" = scoot ]; then
  wait "$OLAP_PID" || true
  step "analytic reads on OLAP snapshots during the run"
  nq=$(wc -l <"$OLAP_OUT")
  bad=$(awk 'NF != 3 || $1 != $2 || $2 != $3' "$OLAP_OUT" | wc -l)
  echo "$nq snapshot queries of sum(abalance), sum(tbalance), sum(bbalance) under load; $bad inconsistent or failed"
  head -3 "$OLAP_OUT" | sed 's/^/  /'
  [ "$nq" -gt 0 ] && [ "$bad" = 0 ] || { echo "OLAP snapshot reads: FAILED"; awk 'NF != 3 || $1 != $2 || $2 != $3' "$OLAP_OUT" | head; OLAP_BAD=1; }
  echo
  echo "SET scoot.olap = on; EXPLAIN ANALYZE SELECT bid, count(*), sum(abalance) FROM pgbench_accounts GROUP BY bid:"
  PGOPTIONS="-c scoot.olap=on" "$PG_BINDIR/psql" -X -c "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
      SELECT bid, count(*), sum(abalance) FROM pgbench_accounts GROUP BY bid"
  "$PG_BINDIR/psql" -X -c "SELECT id, method, age_ms, readers FROM scoot.snapshots" || true
  "$PG_BINDIR/psql" -X -x -c "SELECT method, method_reason, snapshots_taken, gate_ms_avg, gate_ms_max, create_ms_avg,
      pages_saved, first_write_copies, first_write_copy_us_p50, first_write_faults, first_write_fault_us_p50
      FROM scoot.snapshot_stats" || true
fi

step "consistency check"
read -r a t b d n <<<"$(psql_q -F ' ' -c "SELECT
    (SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts),
    (SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers),
    (SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches),
    (SELECT coalesce(sum(delta), 0)    FROM pgbench_history),
    (SELECT count(*)                   FROM pgbench_history)")"
echo "sum(abalance)=$a sum(tbalance)=$t sum(bbalance)=$b sum(delta)=$d history rows=$n (pgbench: $processed processed, ${failed_tx:-?} failed)"
ok=1
[ "${OLAP_BAD:-0}" = 1 ] && ok=0
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
