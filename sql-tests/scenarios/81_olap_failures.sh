#!/usr/bin/env bash
# OLAP snapshots when things go wrong (own clusters):
#  1. userfaultfd denied (a seccomp filter like Docker's default profile, inherited by the server):
#     the worker falls back to the software method, logs why once, scoot.snapshot_stats shows it,
#     and snapshot queries work.
#  2. the memory bound: with scoot.snapshot_memory = 1 MB, a REPEATABLE READ READ ONLY transaction
#     holds a snapshot while another session changes far more than 1 MB of its pages: the writer
#     finishes (never blocked), the snapshot is abandoned, and the reader's next statement fails
#     with SQLSTATE 72000 (snapshot too old); a new statement then works again.
#  3. writers exiting mid-snapshot (pgbench -C: a new backend per transaction) and readers
#     terminated with pg_terminate_backend in the middle of a query: invariants hold, no pin
#     is left behind.
#  4. the worker killed with SIGKILL under load: the postmaster restarts the cluster, no backend
#     hangs in a page fault, and a new worker takes snapshots again.
set -uo pipefail
. "$(dirname "$0")/helpers/olap_lib.sh"

echo "--- 1. userfaultfd denied -> software"
cc -O2 -o "$WORK/deny_uffd" "$HERE/helpers/deny_uffd.c" || fail "could not build helpers/deny_uffd.c"
chmod 755 "$WORK/deny_uffd"
SCOOT_PGCTL_WRAPPER="$WORK/deny_uffd" start_cluster deny 55520 "scoot.snapshot_method = 'uffd'"
m=$(worker_method); why=$(stat method_reason)
echo "    method=$m reason: $why"
[ "$m" = software ] || soft_fail "with userfaultfd denied the method is '$m', want software"
case "$why" in *userfaultfd*) ;; *) soft_fail "the reason does not mention userfaultfd: '$why'" ;; esac
# the worker logs the line just after it publishes the method
why_line="snapshot method software (userfaultfd unavailable"
for _ in $(seq 50); do grep -qF "$why_line" "$PGHOST/server.log" && break; sleep 0.1; done
grep -qF "$why_line" "$PGHOST/server.log" ||
  soft_fail "the server log does not say why the worker uses software"
q -c "CREATE TABLE dn (id int PRIMARY KEY, v int) USING scoot" -c "INSERT INTO dn SELECT g, g FROM generate_series(1, 10000) g"
r=$(OLAP_OPTS="-c scoot.snapshot_max_age=0" qo -c "SELECT count(*), sum(v) FROM dn" 2>&1)
[ "$r" = "10000|50005000" ] || soft_fail "snapshot query under software fallback returned '$r'"
[ "$(stat snapshots_taken)" -ge 1 ] || soft_fail "no snapshot taken under software fallback"
stop_cluster

echo "--- 2. the memory bound: abandon the oldest snapshot, never block writers"
start_cluster mem 55521 "scoot.snapshot_method = 'software'" "scoot.snapshot_memory = 1"
q -c "CREATE TABLE big (id int PRIMARY KEY, v int, pad text) USING scoot" \
  -c "INSERT INTO big SELECT g, 0, repeat('x', 200) FROM generate_series(1, 200000) g" || fail "load big"
# reader: pins a snapshot, waits for the writer, reads again; then, once the writer has
# committed, a new statement that takes a new snapshot (snapshot_max_age = 0: a statement of a
# session that did not write may otherwise read a snapshot up to 1 s old, README *Freshness*)
rm -f "$WORK/writer_done"
(
  PGOPTIONS="-c scoot.olap=on" "$BIN/psql" -X -qAt -v ON_ERROR_STOP=0 >"$WORK/reader.out" 2>&1 <<SQL
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
SELECT 'first', count(*), sum(v) FROM big;
SELECT pg_sleep(6);
\set VERBOSITY verbose
SELECT 'second', count(*), sum(v) FROM big;
ROLLBACK;
\! for i in \$(seq 600); do [ -f "$WORK/writer_done" ] && break; sleep 0.1; done
SET scoot.snapshot_max_age = 0;
SELECT 'after', count(*), sum(v) FROM big;
SQL
) &
reader=$!
sleep 2
t0=$SECONDS
q -c "UPDATE big SET v = 1" || soft_fail "the writer failed"
touch "$WORK/writer_done"
echo "    writer updated 200000 rows (their version headers alone span ~4 MB of pages) in $((SECONDS - t0))s with a 1 MB pre-image pool"
wait $reader
sed 's/^/    reader: /' "$WORK/reader.out" | head -8
grep -q "^first|200000|0$" "$WORK/reader.out" || soft_fail "the reader's first statement did not see 200000 rows with sum 0"
grep -q "72000" "$WORK/reader.out" || soft_fail "the reader's second statement did not fail with SQLSTATE 72000"
grep -q "snapshot too old" "$WORK/reader.out" || soft_fail "no 'snapshot too old' message"
grep -q "^second" "$WORK/reader.out" && soft_fail "the abandoned snapshot still returned rows"
grep -q "^after|200000|200000$" "$WORK/reader.out" || soft_fail "a new statement after the abandonment did not see the update"
ab=$(stat abandoned_for_memory)
[ "$ab" -ge 1 ] || soft_fail "scoot.snapshot_stats.abandoned_for_memory = $ab"
echo "    abandoned_for_memory=$ab pool_bytes_used=$(stat pool_bytes_used)"
stop_cluster

echo "--- 3. writers exiting mid-snapshot, readers terminated mid-query"
start_cluster exits 55522
pgbench_init 5
rm -f "$WORK/stop"
( while [ ! -f "$WORK/stop" ]; do "$BIN/pgbench" -n -C -c 4 -j 2 -T 5 >>"$WORK/pgbC.log" 2>&1; done ) &
loader=$!
sleep 1
bad=0
for ((i = 1; i <= 60; i++)); do
  r=$(qo -c "$INVARIANT" 2>&1)
  [ "$r" = t ] || { bad=$((bad + 1)); echo "    query $i: $r"; }
  if [ $((i % 10)) = 0 ]; then
    # a long snapshot query, terminated in the middle
    qo -c "SELECT count(*) FROM pgbench_accounts a, pg_sleep(5)" >/dev/null 2>&1 &
    sleep 0.5
    n=$(q -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE state = 'active' AND backend_type = 'client backend' AND query LIKE '%pg_sleep(5)%' AND pid <> pg_backend_pid()")
    [ "$n" -ge 1 ] || echo "    (reader $i had not started yet)"
  fi
done
touch "$WORK/stop"; wait $loader
[ $bad -eq 0 ] || soft_fail "$bad snapshot queries failed or were inconsistent with exiting writers"
grep -q "number of failed transactions: [1-9]" "$WORK/pgbC.log" && soft_fail "pgbench -C reported failed transactions"
wait_for 10 "SELECT coalesce(sum(readers), 0) = 0 FROM scoot.snapshots" ||
  soft_fail "pins left behind after terminated readers: $(q -c "SELECT string_agg(id || ':' || readers, ' ') FROM scoot.snapshots")"
echo "    60 invariant queries with pgbench -C and 6 terminated readers: $bad bad"

echo "--- 4. SIGKILL of the worker under load"
pgbench_init 5
( "$BIN/pgbench" -n -c 4 -j 2 -T 20 >"$WORK/pgbK.log" 2>&1 ) &
loader=$!
( for ((i = 0; i < 200; i++)); do qo -c "$INVARIANT" >/dev/null 2>&1; done ) &
readers=$!
sleep 3
wpid=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_scoot olap worker'")
[ -n "$wpid" ] || fail "no olap worker"
kill -9 "$wpid"
echo "    killed the worker (pid $wpid)"
# every backend must go away with the crash restart (none stuck in a fault)
t0=$SECONDS
up=0
for ((i = 0; i < 300; i++)); do
  if "$BIN/pg_isready" -q && [ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_scoot olap worker'" 2>/dev/null)" = 1 ]; then
    up=1; break
  fi
  sleep 0.2
done
[ $up = 1 ] || fail "the server or its olap worker did not come back within 60 s after the worker was killed"
echo "    server and a new worker back after $((SECONDS - t0))s"
wait $loader $readers 2>/dev/null
grep -q "terminating connection because of crash of another server process\|server closed the connection" "$WORK/pgbK.log" ||
  echo "    (pgbench log: $(tail -1 "$WORK/pgbK.log"))"
# the restarted server takes snapshots again (tables are empty: no durability yet)
# Create, fill and read in one session: read-your-writes is what the snapshot rule guarantees
# (another session may read a snapshot up to scoot.snapshot_max_age old, taken between the
# CREATE and the INSERT). The EXPLAIN line proves the read came from a snapshot.
q -c "DROP TABLE IF EXISTS k"
r=$(qo -c "CREATE TABLE k (i int) USING scoot" -c "INSERT INTO k SELECT generate_series(1, 1000)" \
  -c "SELECT count(*) FROM k" 2>&1)
[ "$r" = 1000 ] || soft_fail "snapshot query after the restart returned '$r'"
qo -c "EXPLAIN (COSTS OFF) SELECT count(*) FROM k" | grep -q "Scoot Snapshot" ||
  soft_fail "the query after the restart did not read a snapshot: $(qo -c "EXPLAIN (COSTS OFF) SELECT count(*) FROM k")"
[ "$(stat snapshots_taken)" -ge 1 ] || soft_fail "the new worker took no snapshot"
stop_cluster
finish
