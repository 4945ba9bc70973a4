#!/usr/bin/env bash
# A server restart empties scoot tables (durability comes later):
#  - the first access after the restart emits WARNING '... lost its rows in a server restart' and
#    sees 0 rows; later accesses (same or other session) do not warn;
#  - the table works again afterwards (INSERT, seq and index scans), and its indexes do not return
#    rows for the lost contents (the old index entries point at TIDs the new rows reuse);
#  - a heap table keeps its rows.
# Restarts the shared cluster (pg_ctl restart -m fast as the postgres OS user).
set -uo pipefail
BIN=${SCOOT_BINDIR:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
WORK=$(mktemp -d /tmp/scoot_restart.XXXXXX)
chmod 755 "$WORK"
fail() { echo "FAIL: $*"; exit 1; }
q() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
cleanup() {
  "$BIN/psql" -X -qAt -c "SET client_min_messages = error" -c "DROP TABLE IF EXISTS rst_scoot, rst_plain, rst_heap" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

q -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS rst_scoot, rst_plain, rst_heap" \
  -c "CREATE TABLE rst_scoot (id int PRIMARY KEY, k int, t text) USING scoot" \
  -c "CREATE INDEX rst_scoot_k ON rst_scoot (k)" \
  -c "CREATE TABLE rst_plain (id int, t text) USING scoot" \
  -c "INSERT INTO rst_plain SELECT g, 'before ' || g FROM generate_series(1, 50) g" \
  -c "CREATE TABLE rst_heap (id int PRIMARY KEY, k int, t text) USING heap" \
  -c "INSERT INTO rst_scoot SELECT g, g % 10, 'before ' || g FROM generate_series(1, 100) g" \
  -c "INSERT INTO rst_heap SELECT g, g % 10, 'before ' || g FROM generate_series(1, 100) g" || fail "setup failed"
[ "$(q -c 'SELECT count(*) FROM rst_scoot')" = 100 ] || fail "rst_scoot does not have 100 rows before the restart"

DATADIR=$(q -c "SHOW data_directory") || fail "SHOW data_directory failed"
[ -d "$DATADIR" ] || fail "data directory '$DATADIR' not found"
# keep logging to the cluster's server.log (scripts/lib.sh starts it with -l <clusterdir>/server.log)
LOGFILE=$(dirname "$DATADIR")/server.log
[ -f "$LOGFILE" ] || LOGFILE=$WORK/server.log
echo "--- restarting the server (data directory $DATADIR)"
if ! runuser -u postgres -- "$BIN/pg_ctl" -D "$DATADIR" -l "$LOGFILE" -w -t 120 restart -m fast >"$WORK/pg_ctl.out" 2>&1; then
  cat "$WORK/pg_ctl.out"; tail -n 20 "$LOGFILE" 2>/dev/null; fail "pg_ctl restart failed"
fi
for _ in $(seq 1 60); do "$BIN/pg_isready" -q && break; sleep 1; done
"$BIN/pg_isready" -q || fail "server not ready after the restart"

# psql with both output and messages captured: q2 <stdout file> <stderr file> args...
q2() { local o=$1 e=$2; shift 2; "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@" >"$o" 2>"$e"; }
WARN='lost its rows in a server restart'

echo "--- a table without indexes: one WARNING, then empty and usable"
q2 "$WORK/o1" "$WORK/e1" -c "SELECT count(*) FROM rst_plain" -c "SELECT count(*) FROM rst_plain" ||
  fail "first access failed: $(cat "$WORK/e1")"
cat "$WORK/e1"
grep -q "WARNING: .*scoot table \"rst_plain\" $WARN" "$WORK/e1" ||
  fail "first access: no WARNING containing '$WARN' (stderr: $(cat "$WORK/e1"))"
[ "$(grep -c "$WARN" "$WORK/e1")" = 1 ] ||
  fail "the WARNING was emitted $(grep -c "$WARN" "$WORK/e1") times in the first session, want once"
[ "$(cat "$WORK/o1" | tr '\n' ' ')" = "0 0 " ] || fail "first access: count(*) returned '$(cat "$WORK/o1" | tr '\n' ' ')', want 0 (twice)"
q2 "$WORK/o2" "$WORK/e2" -c "SELECT count(*) FROM rst_plain" -c "INSERT INTO rst_plain VALUES (1, 'after')" -c "SELECT count(*) FROM rst_plain" ||
  fail "second access failed: $(cat "$WORK/e2")"
[ -s "$WORK/e2" ] && fail "second access printed messages: $(cat "$WORK/e2")"
[ "$(cat "$WORK/o2" | tr '\n' ' ')" = "0 1 " ] || fail "second access: '$(cat "$WORK/o2")', want 0 then 1"
echo "    ok: one WARNING, 0 rows, usable"

echo "--- a table with indexes: refused (its indexes reference lost rows) until TRUNCATE"
for i in 1 2; do
  if q2 "$WORK/o3" "$WORK/e3" -c "SELECT count(*) FROM rst_scoot"; then
    fail "access $i to the indexed table after the restart succeeded: $(cat "$WORK/o3")"
  fi
  grep -q "ERROR: .*scoot table \"rst_scoot\" $WARN and its indexes still reference them" "$WORK/e3" ||
    fail "access $i: unexpected error text: $(cat "$WORK/e3")"
  grep -q "HINT: .*TRUNCATE rst_scoot" "$WORK/e3" || fail "access $i: no HINT naming TRUNCATE: $(cat "$WORK/e3")"
done
q -c "TRUNCATE rst_scoot" || fail "TRUNCATE after the restart failed"
r=$(q -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" \
      -c "SELECT count(*) FROM rst_scoot WHERE id BETWEEN 1 AND 100" -c "SELECT count(*) FROM rst_scoot WHERE k = 3" 2>&1) ||
  fail "index scans after TRUNCATE failed: $r"
[ "$(echo $r)" = "0 0" ] || fail "index scans after TRUNCATE returned counts '$(echo $r)', want '0 0'"
echo "    ok: clear error with HINT, TRUNCATE resets it"

echo "--- the table works again"
# new rows with other keys; they reuse the TIDs the lost rows had
q -c "INSERT INTO rst_scoot SELECT g, 100 + g % 10, 'after ' || g FROM generate_series(1001, 1050) g" ||
  fail "INSERT after the restart failed"
# keys of lost rows must be insertable (no false duplicate from the stale index entries)
q -c "INSERT INTO rst_scoot SELECT g, g % 10, 'again ' || g FROM generate_series(1, 20) g" ||
  fail "INSERT of ids 1..20 (ids the lost rows had) after the restart failed"
want="70|0|70|50|20|1"
for mode in seq index bitmap; do
  case $mode in
    seq)    sets=(-c "SET enable_indexscan = off" -c "SET enable_bitmapscan = off") ;;
    index)  sets=(-c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off") ;;
    bitmap) sets=(-c "SET enable_seqscan = off" -c "SET enable_indexscan = off") ;;
  esac
  r=$(q "${sets[@]}" -c "SELECT (SELECT count(*) FROM rst_scoot WHERE id BETWEEN 1 AND 2000)
           || '|' || (SELECT count(*) FROM rst_scoot WHERE id BETWEEN 21 AND 100)
           || '|' || (SELECT count(*) FROM rst_scoot WHERE k BETWEEN 0 AND 200)
           || '|' || (SELECT count(*) FROM rst_scoot WHERE k >= 100)
           || '|' || (SELECT count(*) FROM rst_scoot WHERE t LIKE 'again%' AND id BETWEEN 1 AND 20)
           || '|' || (SELECT count(*) FROM rst_scoot WHERE id = 5 AND t = 'again 5')" 2>&1) ||
    fail "$mode scan queries failed: $r"
  [ "$r" = "$want" ] || {
    q "${sets[@]}" -c "SELECT id, k, t FROM rst_scoot WHERE id BETWEEN 21 AND 100 ORDER BY id LIMIT 10" 2>&1
    fail "after re-inserting, $mode scans: '$r', want '$want' (counts: ids 1..2000, lost ids 21..100, k 0..200, new k, re-inserted, id 5)"
  }
  echo "    ok: $mode scans"
done
r=$(q -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" -c "SELECT id, t FROM rst_scoot WHERE id IN (30, 1001) ORDER BY id" | tr '\n' ' ')
[ "$r" = "1001|after 1001 " ] || fail "index lookup of lost id 30 and new id 1001 returned '$r', want '1001|after 1001 '"
q -c "UPDATE rst_scoot SET t = t || '+' WHERE id <= 10" -c "DELETE FROM rst_scoot WHERE id > 1040" -c "VACUUM rst_scoot" ||
  fail "UPDATE/DELETE/VACUUM after the restart failed"
r=$(q -c "SELECT count(*), count(*) FILTER (WHERE t LIKE '%+') FROM rst_scoot")
[ "$r" = "60|10" ] || fail "after UPDATE/DELETE: '$r', want '60|10'"
echo "    ok: INSERT/UPDATE/DELETE/VACUUM"

echo "--- stale index entries never return a row whose key does not match"
# before the restart ids 1..100 had k = id % 10; the rows now in the table carry other ids/keys.
# Old index entries must read as gone, never as whichever new row now sits at their address.
for off in enable_bitmapscan enable_indexscan; do
  r=$(q -c "SET enable_seqscan = off" -c "SET $off = off" \
        -c "SELECT count(*) FROM rst_scoot WHERE id BETWEEN 1 AND 100 AND NOT (id BETWEEN 1 AND 100)" \
        -c "SELECT count(*) FROM rst_scoot WHERE k = 3 AND k <> 3") || fail "index checks failed"
  [ "$(echo $r)" = "0 0" ] || fail "index scans returned rows with non-matching keys ($off = off): '$(echo $r)'"
done
want=$(q -c "SET enable_indexscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*) FROM rst_scoot WHERE id BETWEEN 1 AND 100")
got=$(q -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*) FROM rst_scoot WHERE id BETWEEN 1 AND 100")
[ "$want" = "$got" ] || fail "index range scan counts $got rows, a seq scan $want"
echo "    ok"

echo "--- heap table kept its rows"
r=$(q -c "SELECT count(*), sum(id), min(t COLLATE \"C\") FROM rst_heap") || fail "heap select failed"
[ "$r" = "100|5050|before 1" ] || fail "rst_heap after the restart: '$r', want '100|5050|before 1'"
echo "    ok"
echo "PASS"
