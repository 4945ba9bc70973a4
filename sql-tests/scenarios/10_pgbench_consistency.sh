#!/usr/bin/env bash
# pgbench (TPC-B like) on scoot tables: initialise at scale 10 with default_table_access_method=scoot,
# run 8 clients, then check the bank invariants (all balance sums equal the history deltas, one
# history row per transaction), VACUUM, re-check, and check VACUUM removed the dead branch rows.
#
# Env: PGHOST PGPORT PGUSER (runner), SCOOT_BINDIR (pgbench/psql), PGBENCH_SECONDS (default 60).
set -uo pipefail

BIN=${SCOOT_BINDIR:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
SECS=${PGBENCH_SECONDS:-60}
DB=scoot_pgbench_scn
WORK=$(mktemp -d /tmp/scoot_pgbench.XXXXXX)

fail() { echo "FAIL: $*"; exit 1; }
q()  { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt -d "$DB" "$@"; }
qp() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt -d postgres "$@"; }

cleanup() {
  "$BIN/psql" -X -qAt -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

qp -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" || fail "could not create database $DB"
q -c "CREATE EXTENSION pg_scoot" || fail "CREATE EXTENSION pg_scoot failed in $DB"

echo "--- pgbench -i -s 10 (default_table_access_method=scoot)"
t0=$SECONDS
if ! PGOPTIONS='-c default_table_access_method=scoot' "$BIN/pgbench" -i -s 10 -q "$DB" >"$WORK/init.log" 2>&1; then
  cat "$WORK/init.log"; fail "pgbench -i failed"
fi
echo "    init took $((SECONDS - t0))s"

# all four tables must really be scoot tables
ams=$(q -c "SELECT c.relname || '=' || coalesce(a.amname, '-') FROM pg_class c LEFT JOIN pg_am a ON a.oid = c.relam
            WHERE c.relname IN ('pgbench_accounts','pgbench_branches','pgbench_tellers','pgbench_history')
            ORDER BY c.relname") || fail "pg_class query failed"
echo "    $(echo $ams)"
want="pgbench_accounts=scoot pgbench_branches=scoot pgbench_history=scoot pgbench_tellers=scoot"
[ "$(echo $ams)" = "$want" ] || fail "table access methods: got '$(echo $ams)', want '$want'"

counts() {
  q -c "SELECT (SELECT count(*) FROM pgbench_branches) || ' ' || (SELECT count(*) FROM pgbench_tellers)
             || ' ' || (SELECT count(*) FROM pgbench_accounts)"
}
c=$(counts) || fail "count query failed"
[ "$c" = "10 100 1000000" ] || fail "after init: branches/tellers/accounts counts = '$c', want '10 100 1000000'"
h=$(q -c "SELECT count(*) FROM pgbench_history") || fail "history count failed"
[ "$h" = 0 ] || fail "after init: pgbench_history has $h rows, want 0"

echo "--- pgbench -c 8 -j 2 -T $SECS -M prepared"
rc=0
"$BIN/pgbench" -c 8 -j 2 -T "$SECS" -M prepared "$DB" >"$WORK/run.log" 2>&1 || rc=$?
cat "$WORK/run.log" | grep -vE '^(pgbench: )?(client|progress)' | tail -n 25
[ $rc -eq 0 ] || { grep -E 'error|abort' "$WORK/run.log" | head -20; fail "pgbench exited with status $rc"; }
grep -q "^number of failed transactions: 0 " "$WORK/run.log" ||
  fail "pgbench did not report 'number of failed transactions: 0' ($(grep 'failed transactions' "$WORK/run.log"))"
ntx=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$WORK/run.log")
[ -n "$ntx" ] || fail "could not find 'number of transactions actually processed' in pgbench output"
[ "$ntx" -gt 0 ] || fail "pgbench processed no transactions"

check_invariants() {   # check_invariants <label>
  local r
  r=$(q -c "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' || (SELECT sum(tbalance) FROM pgbench_tellers)
             || ' ' || (SELECT sum(bbalance) FROM pgbench_branches) || ' ' || (SELECT coalesce(sum(delta),0) FROM pgbench_history)
             || ' ' || (SELECT count(*) FROM pgbench_history)") || fail "$1: invariant query failed"
  read -r sa st sb sd nh <<<"$r"
  echo "    $1: sum(abalance)=$sa sum(tbalance)=$st sum(bbalance)=$sb sum(delta)=$sd count(history)=$nh transactions=$ntx"
  [ "$sa" = "$sd" ] && [ "$st" = "$sd" ] && [ "$sb" = "$sd" ] ||
    fail "$1: balance sums differ: accounts=$sa tellers=$st branches=$sb history=$sd"
  [ "$nh" = "$ntx" ] || fail "$1: pgbench_history has $nh rows but pgbench processed $ntx transactions"
  c=$(counts) || fail "$1: count query failed"
  [ "$c" = "10 100 1000000" ] || fail "$1: branches/tellers/accounts counts = '$c', want '10 100 1000000'"
  # the same per-id aggregates through the primary key indexes
  r=$(q -c "SET enable_seqscan = off" -c "SELECT (SELECT sum(bbalance) FROM pgbench_branches WHERE bid BETWEEN 1 AND 10)
             || ' ' || (SELECT sum(tbalance) FROM pgbench_tellers WHERE tid BETWEEN 1 AND 100)
             || ' ' || (SELECT count(*) FROM pgbench_accounts WHERE aid BETWEEN 1 AND 1000000)") ||
    fail "$1: index-scan invariant query failed"
  [ "$r" = "$sb $st 1000000" ] || fail "$1: via indexes got '$r', want '$sb $st 1000000'"
}
echo "--- invariants after the run"
check_invariants "after pgbench"

echo "--- VACUUM"
q -c "VACUUM" || fail "VACUUM failed"
check_invariants "after VACUUM"
dead=$(q -c "SELECT dead_rows FROM scoot.arena_tables WHERE relation = 'pgbench_branches'::regclass") ||
  fail "scoot.arena_tables query failed"
echo "    pgbench_branches dead_rows after VACUUM: '$dead'"
[ -n "$dead" ] || fail "pgbench_branches is missing from scoot.arena_tables"
[ "$dead" -lt 100 ] || fail "pgbench_branches still has $dead dead row versions after VACUUM (want < 100)"

echo "PASS"
