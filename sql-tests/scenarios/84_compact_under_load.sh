#!/usr/bin/env bash
# Compaction under an OLTP load, then a crash (own cluster; src/am/compact.rs):
#  pgbench_accounts (scale 10) loses three rows in four, so its blocks are a quarter full. While
#  pgbench (2 clients, 20 s, READ COMMITTED) updates random accounts, a session compacts the table
#  over and over (scoot.compact, then VACUUM) and the background compactor may act too
#  (scoot.freeze_after = 300ms: blocks freeze under the load and pgbench's writes thaw them; both
#  are counted). Moves race with pgbench's updates of the same rows: pgbench waits
#  for the compacting transaction and follows the row to its new place.
#  Checked after the load: no pgbench transaction failed; the table needs far fewer blocks; every
#  account's balance equals the sum of its history rows, tellers and branches equal the whole
#  history; index scans (primary key) return exactly what sequential scans return. Then the
#  server is crashed (pg_ctl stop -m immediate): after crash recovery (WAL replay of the moves and
#  their index entries) all of that still holds. Before that: DROP DATABASE of a database the
#  background compactor is working in stops the compactor and succeeds.
set -uo pipefail
. "$(dirname "$0")/helpers/olap_lib.sh"
start_cluster compact 55534 "scoot.freeze_after = '300ms'"
DIR=${CLUSTERS[0]}
pgctl() { runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 120 "$@" >"$WORK/pg_ctl.out" 2>&1; }

pgbench_init 10
q -c "DELETE FROM pgbench_accounts WHERE aid % 4 <> 0" || fail "delete"
q -c "VACUUM pgbench_accounts" || fail "vacuum"
blocks() { q -c "SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'pgbench_accounts'::regclass"; }
b0=$(blocks)
echo "--- pgbench_accounts: $b0 blocks, a quarter full"

checks() {   # checks <label>
  local r
  r=$(q -c "SELECT (SELECT sum(abalance) FROM pgbench_accounts) =
                   (SELECT coalesce(sum(h.delta), 0) FROM pgbench_history h WHERE h.aid % 4 = 0)
               AND (SELECT sum(tbalance) FROM pgbench_tellers) = (SELECT coalesce(sum(delta), 0) FROM pgbench_history)
               AND (SELECT sum(bbalance) FROM pgbench_branches) = (SELECT coalesce(sum(delta), 0) FROM pgbench_history)")
  [ "$r" = t ] || soft_fail "$1: balances do not add up to the history"
  local seq idx
  seq=$(q -c "SET enable_indexscan = off" -c "SET enable_bitmapscan = off" \
    -c "SELECT count(*), sum(aid), sum(abalance) FROM pgbench_accounts WHERE aid > 0")
  idx=$(q -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" \
    -c "SELECT count(*), sum(aid), sum(abalance) FROM pgbench_accounts WHERE aid > 0")
  [ "$seq" = "$idx" ] || soft_fail "$1: index scan ($idx) differs from sequential scan ($seq)"
  [ "$(q -c "SELECT count(*) FROM pgbench_accounts")" = 250000 ] || soft_fail "$1: rows lost or added"
  r=$(q -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" \
    -c "SELECT count(*) FROM generate_series(4, 1000000, 4004) a WHERE EXISTS (SELECT 1 FROM pgbench_accounts WHERE aid = a)")
  [ "$r" = 250 ] || soft_fail "$1: point lookups through the index found $r of 250 rows"
  echo "    $1: balances add up, index = seq scan ($seq), 250000 rows"
}

echo "--- pgbench 20 s, 2 clients, while compacting"
fz0=$(q -c "SELECT blocks_frozen || ' ' || blocks_thawed FROM scoot.freeze_stats")
"$BIN/pgbench" -n -c 2 -j 2 -T 20 >"$WORK/pgbench.log" 2>&1 &
PGB=$!
moved=0
end=$((SECONDS + 18))
while [ $SECONDS -lt $end ]; do
  m=$(q -c "SET client_min_messages = warning" -c "SELECT scoot.compact('pgbench_accounts', 0.9)" 2>>"$WORK/compact.err") ||
    soft_fail "scoot.compact failed: $(tail -n 2 "$WORK/compact.err")"
  moved=$((moved + ${m:-0}))
  q -c "VACUUM pgbench_accounts" 2>>"$WORK/compact.err" || soft_fail "VACUUM failed"
done
wait $PGB || { cat "$WORK/pgbench.log"; fail "pgbench failed"; }
grep -E "number of failed transactions: 0|^tps" "$WORK/pgbench.log" | head -2
grep -q "number of failed transactions: 0" "$WORK/pgbench.log" || soft_fail "pgbench reported failed transactions"
echo "    scoot.compact moved $moved rows during the load"
# the background freezer froze blocks under the load and pgbench's writes thawed some of them
read -r f0 t0 <<<"$fz0"
read -r f1 t1 <<<"$(q -c "SELECT blocks_frozen || ' ' || blocks_thawed FROM scoot.freeze_stats")"
echo "    during the load: $((f1 - f0)) blocks frozen, $((t1 - t0)) thawed"
[ $((f1 - f0)) -gt 0 ] && [ $((t1 - t0)) -gt 0 ] || soft_fail "no freezing and thawing under the load"
[ "$moved" -gt 100000 ] || soft_fail "only $moved rows moved"
q -c "VACUUM pgbench_accounts" || fail "vacuum"
b1=$(blocks)
echo "    pgbench_accounts: $b0 -> $b1 blocks"
[ "$b1" -le $((b0 / 2)) ] || soft_fail "compaction left $b1 of $b0 blocks"
checks "after the load"

echo "--- DROP DATABASE while the background compactor works in it"
# the compactor waits for an old snapshot (held in another database) before its VACUUM; DROP
# DATABASE stops it, as PostgreSQL stops autovacuum workers, instead of failing with "database is
# being accessed by other users"
# one compactor runs at a time and it waits (up to a minute) for old snapshots: a background
# compaction of pgbench_accounts started now would wait for the sleeper below and keep cdrop's
# from starting. Compact pgbench_accounts fully first, so that it is not picked again, and wait
# for any compactor still at work.
q -c "SET client_min_messages = warning" -c "SELECT scoot.compact('pgbench_accounts', 1.0)" >/dev/null || fail "compact"
q -c "VACUUM pgbench_accounts" || fail "vacuum"
wait_for 90 "SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'pg_scoot compactor'" ||
  soft_fail "a background compactor did not finish"
q -c "CREATE DATABASE cdrop" || fail "create database"
PGDATABASE=cdrop q -c "CREATE EXTENSION pg_scoot" -c "CREATE TABLE bg (id int PRIMARY KEY, v text) USING scoot" \
  -c "INSERT INTO bg SELECT i, 'v' || i FROM generate_series(1, 200000) i" -c "DELETE FROM bg WHERE id % 10 <> 0" \
  -c "SET scoot.snapshot_max_age = 0" -c "SET scoot.olap = on" -c "SELECT count(*) FROM bg" -c "RESET scoot.olap" \
  -c "VACUUM bg" >/dev/null || fail "sparse table in cdrop"
# the compactor starts once cdrop's blocks have frozen and stayed cold for scoot.freeze_after: on a
# busy 2-core machine that took more than 30 s once; the sleeper outlasts the longest wait
q -c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT 1" -c "SELECT pg_sleep(150)" -c "COMMIT" >/dev/null 2>&1 &
SLEEPER=$!
wait_for 90 "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'pg_scoot compactor' AND datname = 'cdrop'" ||
  soft_fail "the background compactor did not start in cdrop"
sleep 1
t0=$SECONDS
q -c "DROP DATABASE cdrop" 2>"$WORK/dropdb.err" || soft_fail "DROP DATABASE failed: $(cat "$WORK/dropdb.err")"
stopped=$(grep -c 'terminating background worker "pg_scoot compactor"' "$DIR/server.log")
echo "    DROP DATABASE took $((SECONDS - t0)) s; $stopped compactor(s) stopped"
[ "$stopped" -ge 1 ] || soft_fail "DROP DATABASE did not stop the compactor"
[ $((SECONDS - t0)) -le 5 ] || soft_fail "DROP DATABASE took more than 5 s"
kill $SLEEPER 2>/dev/null; q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(150)%' AND pid <> pg_backend_pid()" >/dev/null

echo "--- crash (pg_ctl stop -m immediate) and recovery"
q -c "SELECT scoot.compact('pgbench_accounts', 1.0)" >/dev/null 2>&1
pgctl stop -m immediate || { cat "$WORK/pg_ctl.out"; fail "pg_ctl stop -m immediate failed"; }
pgctl start || { cat "$WORK/pg_ctl.out"; tail -n 20 "$DIR/server.log"; fail "start after the crash failed"; }
wait_for 30 "SELECT true" || fail "server not ready after the crash"
checks "after the crash"
finish
