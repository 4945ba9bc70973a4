#!/usr/bin/env bash
# Server restarts and scoot rows (src/wal/checkpoint_image.rs):
#  A. a clean restart (pg_ctl restart -m fast) keeps every scoot table exactly: same rows at the same
#     TIDs (digests of ctid + row), every type incl. TOASTed and compressed values, NULLs, dead
#     versions, frozen blocks, unlogged tables, a prepared transaction that commits after the
#     restart; no WARNING; indexes answer like seq scans; writes go on; scoot.checkpoints reports
#     the loaded image. A second clean restart after more writes keeps the newer state.
#     The planner's size estimate of a table with redirect slots (HOT chain roots, counted in the
#     block descriptors, which the image does not hold) is the same after the restart.
#  B. a crash (pg_ctl stop -m immediate) after more writes and a CHECKPOINT keeps every committed
#     row at its TID (the image of the last clean shutdown + the scoot WAL since then); unlogged
#     tables come back empty, as on heap.
#  B2. a backend SIGKILLed mid-transaction: the postmaster reinitialises shared memory, the
#     image + WAL bring back every committed row, none of the open transaction's.
#  B2b. single-user mode refuses scoot tables (no image is loaded there); the next start
#     replays the WAL from the last image up to the single-user shutdown checkpoint.
#  B3. WAL beyond max_wal_size since the last image makes the worker write one early.
#  C. a damaged newest image (one flipped byte): WARNING, the previous image is loaded and the
#     scoot WAL since it replayed (clean shutdown: in the postmaster); same rows at the same TIDs.
#  C2. SIGKILL of every server process while the worker writes an image (slowed by
#     scoot.debug_image_delay): the temporary file is removed, the older image + WAL recover.
#  C3. SIGKILL during crash recovery (slowed by scoot.debug_redo_delay): the next start recovers.
#  C4. a full disk (a small tmpfs on pg_scoot/): the worker's image fails with a WARNING, OLTP
#     goes on, a crash and a clean restart (whose shutdown image also fails) lose nothing.
#  C5. both images damaged: the start stops with a clear FATAL naming both files and a HINT;
#     moving them away lets the server start, and then
#  D. the tables lost their rows: the first access warns '... lost its rows in a server restart'
#     and sees 0 rows; a table with indexes is refused until TRUNCATE; afterwards the table works
#     (INSERT, seq and index scans) and its indexes never return rows for the lost contents; a
#     heap table keeps its rows.
# Restarts the shared cluster (pg_ctl as the postgres OS user).
set -uo pipefail
BIN=${SCOOT_BINDIR:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
WORK=$(mktemp -d /tmp/scoot_restart.XXXXXX)
chmod 755 "$WORK"
fail() { echo "FAIL: $*"; exit 1; }
q() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
cleanup() {
  # a failure before the prepared transaction commits would leave its locks behind: the DROP
  # would wait for them for ever
  "$BIN/psql" -X -qAt -c "SELECT 1 FROM pg_prepared_xacts WHERE gid = 'rst_gx'" 2>/dev/null | grep -q 1 &&
    "$BIN/psql" -X -qAt -c "ROLLBACK PREPARED 'rst_gx'" >/dev/null 2>&1
  "$BIN/psql" -X -qAt -c "SET client_min_messages = error" -c "SET lock_timeout = '60s'" -c "DROP TABLE IF EXISTS rst_scoot, rst_plain, rst_heap, rst_types, rst_frozen, rst_unlogged, rst_wide, rst_redir" >/dev/null 2>&1
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
pgctl() { runuser -u postgres -- "$BIN/pg_ctl" -D "$DATADIR" -l "$LOGFILE" -w -t 120 "$@" >"$WORK/pg_ctl.out" 2>&1; }
wait_ready() {
  for _ in $(seq 1 60); do "$BIN/pg_isready" -q && return 0; sleep 1; done
  fail "server not ready after the restart"
}
# psql with both output and messages captured: q2 <stdout file> <stderr file> args...
q2() { local o=$1 e=$2; shift 2; "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@" >"$o" 2>"$e"; }
WARN='lost its rows in a server restart'
TABLES="rst_scoot rst_plain rst_types rst_frozen rst_unlogged"
# digest of every row with its TID, per table: equal digests = same rows at the same addresses
digests() {
  local t out=""
  for t in $TABLES; do
    out+="$t:$(q -c "SELECT count(*) || '/' || md5(coalesce(string_agg(ctid::text || '=' || x::text, ',' ORDER BY ctid), '')) FROM $t x") "
  done
  echo "$out"
}
# counts of index scans vs seq scans of rst_scoot / rst_types (indexes must match the rows)
index_check() {
  local preds=("id BETWEEN 1 AND 100000" "k = 3" "k BETWEEN 2 AND 5 AND id > 500" "id % 7 = 0 AND k < 4")
  local p s i
  for p in "${preds[@]}"; do
    s=$(q -c "SET enable_indexscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*), coalesce(sum(id), 0) FROM rst_scoot WHERE $p")
    i=$(q -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*), coalesce(sum(id), 0) FROM rst_scoot WHERE $p")
    [ "$s" = "$i" ] || fail "$1: rst_scoot WHERE $p: index scan '$i', seq scan '$s'"
  done
  s=$(q -c "SET enable_indexscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*), md5(string_agg(t, ',' ORDER BY id)) FROM rst_types WHERE id BETWEEN 10 AND 900")
  i=$(q -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*), md5(string_agg(t, ',' ORDER BY id)) FROM rst_types WHERE id BETWEEN 10 AND 900")
  [ "$s" = "$i" ] || fail "$1: rst_types: index scan '$i', seq scan '$s'"
}

q -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS rst_types, rst_frozen, rst_unlogged" \
  -c "CREATE TABLE rst_types (id int PRIMARY KEY, i2 int2, i8 int8, f4 float4, f8 float8, b bool,
        n1 numeric(10,2), n2 numeric, c4 char(4), vc varchar(20), t text, big text, by bytea, d date,
        ts timestamp, tz timestamptz, u uuid, j jsonb, a int[]) USING scoot" \
  -c "INSERT INTO rst_types SELECT g, (g % 30000)::int2, g::int8 * 1000003, g / 3.0, CASE g % 50 WHEN 0 THEN 'NaN' WHEN 1 THEN 'Infinity' WHEN 2 THEN '-Infinity' ELSE g / 7.0 END,
        g % 2 = 0, g / 100.0, g * 1234.000001 - 1e6, 'c' || (g % 100), 'vc' || g, CASE WHEN g % 9 = 0 THEN NULL WHEN g % 13 = 0 THEN '' ELSE 'text ' || g END,
        CASE WHEN g % 97 = 0 THEN (SELECT string_agg(md5((g * 1000 + s)::text), '') FROM generate_series(1, 200) s)
             WHEN g % 89 = 0 THEN repeat('compressible ', 1000) END,
        CASE WHEN g % 5 = 0 THEN NULL ELSE decode(md5(g::text), 'hex') END, date '2020-01-01' + g, timestamp '2020-01-01' + g * interval '1 minute',
        timestamptz '2020-01-01 00:00+00' + g * interval '1 second', md5(g::text)::uuid, jsonb_build_object('g', g, 'odd', g % 2 = 1),
        CASE WHEN g % 4 = 0 THEN NULL ELSE ARRAY[g, g + 1, NULL] END
      FROM generate_series(1, 3000) g" \
  -c "UPDATE rst_types SET t = t || ' updated', n2 = n2 + 1 WHERE id % 11 = 0" \
  -c "DELETE FROM rst_types WHERE id % 17 = 0" \
  -c "CREATE TABLE rst_frozen (a int, b float8, c text) USING scoot" \
  -c "INSERT INTO rst_frozen SELECT g, g * 1.5, 'f' || g FROM generate_series(1, 200000) g" \
  -c "SELECT scoot.freeze('rst_frozen')" \
  -c "CREATE UNLOGGED TABLE rst_unlogged (a int, b text) USING scoot" \
  -c "INSERT INTO rst_unlogged SELECT g, 'u' || g FROM generate_series(1, 1000) g" >/dev/null || fail "setup of the typed/frozen/unlogged tables failed"
# dead versions and reused slots in the indexed table
q -c "INSERT INTO rst_scoot SELECT g, g % 10, 'more ' || g FROM generate_series(101, 20000) g" \
  -c "UPDATE rst_scoot SET t = t || '+', k = k + 1 WHERE id % 3 = 0" \
  -c "DELETE FROM rst_scoot WHERE id % 7 = 1" || fail "setup writes failed"
frozen_before=$(q -c "SELECT blocks FROM scoot.blocks WHERE relation = 'rst_frozen'::regclass AND temperature = 'frozen'")
[ "${frozen_before:-0}" -gt 0 ] || fail "rst_frozen has no frozen blocks before the restart"
# a prepared transaction survives a restart like on heap (needs max_prepared_transactions > 0)
PREP=$(q -c "SHOW max_prepared_transactions")
if [ "$PREP" -gt 0 ]; then
  q -c "BEGIN" -c "INSERT INTO rst_plain VALUES (1000, 'prepared')" -c "UPDATE rst_plain SET t = 'prep-upd' WHERE id = 1" \
    -c "DELETE FROM rst_plain WHERE id = 2" -c "PREPARE TRANSACTION 'rst_gx'" || fail "PREPARE TRANSACTION failed"
fi
# HOT updates and VACUUM leave redirect slots; the planner's estimate leaves them out
q -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS rst_redir" \
  -c "CREATE TABLE rst_redir (id int PRIMARY KEY, v int, pad text) USING scoot" \
  -c "INSERT INTO rst_redir SELECT g, g, repeat('r', 40) FROM generate_series(1, 20000) g" \
  -c "VACUUM ANALYZE rst_redir" || fail "rst_redir setup failed"
scan_cost() { q -c "EXPLAIN SELECT v FROM rst_redir" | head -1 | sed -E 's/.*cost=[0-9.]+\.\.([0-9.]+) .*/\1/'; }
cost0=$(scan_cost)
q -c "UPDATE rst_redir SET v = v + 1" -c "UPDATE rst_redir SET v = v + 1" -c "VACUUM rst_redir" || fail "rst_redir updates failed"
redir_state() { echo "$(q -c "SELECT count(*) FROM scoot.row_versions('rst_redir'::regclass) WHERE state = 'redirect'") $(scan_cost)"; }
R1=$(redir_state)
[ "${R1%% *}" -gt 10000 ] || fail "rst_redir has ${R1%% *} redirect slots after HOT updates and VACUUM"
# within 10% of the estimate before the updates (counting the redirects as rows: about 1.9x)
[ "$(q -c "SELECT ${R1##* } BETWEEN $cost0 * 0.9 AND $cost0 * 1.1")" = t ] ||
  fail "scan cost of rst_redir went from $cost0 to ${R1##* } with ${R1%% *} redirect slots"
echo "    ok: ${R1%% *} redirect slots, scan cost $cost0 -> ${R1##* }"
D1=$(digests)

echo "=== A. clean restart keeps scoot tables"
lines_before=$(wc -l <"$LOGFILE")
pgctl restart -m fast || { cat "$WORK/pg_ctl.out"; tail -n 20 "$LOGFILE"; fail "pg_ctl restart failed"; }
wait_ready
tail -n +"$((lines_before + 1))" "$LOGFILE" | grep -q "scoot: wrote checkpoint image" || fail "no 'wrote checkpoint image' in the server log"
tail -n +"$((lines_before + 1))" "$LOGFILE" | grep -q "scoot: loaded checkpoint image" || fail "no 'loaded checkpoint image' in the server log"
q2 "$WORK/oa" "$WORK/ea" -c "SELECT count(*) FROM rst_scoot" -c "SELECT count(*) FROM rst_plain" || fail "first access after the clean restart failed: $(cat "$WORK/ea")"
[ -s "$WORK/ea" ] && fail "first access after a clean restart printed messages: $(cat "$WORK/ea")"
D2=$(digests)
[ "$D1" = "$D2" ] || fail "contents changed across a clean restart:
 before: $D1
 after:  $D2"
echo "    ok: same rows at the same TIDs ($D2)"
R2=$(redir_state)
[ "$R1" = "$R2" ] || fail "rst_redir (redirect slots, scan cost) was $R1 before the clean restart, $R2 after"
echo "    ok: the planner's estimate with redirect slots is unchanged ($R2)"
index_check "after the clean restart"
echo "    ok: index scans match seq scans"
r=$(q -c "SELECT loaded_at_start, tables_loaded >= 5, blocks_loaded > 0, load_ms >= 0, checkpoint_lsn = loaded_lsn, bytes > 0, written_at > now() - interval '1 hour' FROM scoot.checkpoints")
[ "$r" = "t|t|t|t|t|t|t" ] || fail "scoot.checkpoints after the clean restart: '$r'"
frozen_after=$(q -c "SELECT blocks FROM scoot.blocks WHERE relation = 'rst_frozen'::regclass AND temperature = 'frozen'")
[ "$frozen_after" = "$frozen_before" ] || fail "frozen blocks of rst_frozen: $frozen_before before, '$frozen_after' after the restart"
echo "    ok: scoot.checkpoints, frozen blocks stay frozen ($frozen_after)"
if [ "$PREP" -gt 0 ]; then
  r=$(q -c "SELECT gid FROM pg_prepared_xacts WHERE gid = 'rst_gx'")
  [ "$r" = rst_gx ] || fail "prepared transaction lost in the restart"
  r=$(q -c "SELECT count(*) FILTER (WHERE id = 1000) || '|' || count(*) FILTER (WHERE t = 'prep-upd') || '|' || count(*) FILTER (WHERE id = 2) FROM rst_plain")
  [ "$r" = "0|0|1" ] || fail "the prepared transaction's changes are visible before COMMIT PREPARED: '$r'"
  q -c "COMMIT PREPARED 'rst_gx'" || fail "COMMIT PREPARED after the restart failed"
  r=$(q -c "SELECT count(*) FILTER (WHERE id = 1000) || '|' || count(*) FILTER (WHERE t = 'prep-upd') || '|' || count(*) FILTER (WHERE id = 2) FROM rst_plain")
  [ "$r" = "1|1|0" ] || fail "after COMMIT PREPARED: '$r', want 1|1|0"
  echo "    ok: prepared transaction committed after the restart"
fi
# writes go on; keys that exist must still be duplicates, new TIDs never clash with old ones
if q -c "INSERT INTO rst_scoot VALUES (3, 0, 'dup')" >/dev/null 2>&1; then fail "duplicate key 3 accepted after the restart"; fi
q -c "INSERT INTO rst_scoot SELECT g, g % 10, 'after ' || g FROM generate_series(20001, 25000) g" \
  -c "UPDATE rst_scoot SET t = t || '!' WHERE id % 10 = 0" -c "DELETE FROM rst_scoot WHERE id % 11 = 5" \
  -c "UPDATE rst_types SET t = 'thawed' WHERE id < 50" -c "UPDATE rst_frozen SET c = 'thawed' WHERE a % 50000 = 0" \
  -c "VACUUM rst_scoot" || fail "writes after the clean restart failed"
r=$(q -c "SELECT count(*) = count(DISTINCT ctid) FROM rst_scoot")
[ "$r" = t ] || fail "two rows share a TID after the restart"
index_check "after writes"
D3=$(digests)
echo "    ok: writes after the restart"

echo "--- a second clean restart keeps the newer contents"
pgctl stop -m fast || fail "pg_ctl stop failed"
pgctl start || { cat "$WORK/pg_ctl.out"; fail "pg_ctl start failed"; }
wait_ready
D4=$(digests)
[ "$D3" = "$D4" ] || fail "contents changed across the second clean restart:
 before: $D3
 after:  $D4"
index_check "after the second restart"
echo "    ok"

echo "=== B. a crash keeps committed rows (checkpoint image + scoot WAL replay)"
q -c "UPDATE rst_scoot SET t = t || '#', k = k + 2 WHERE id % 4 = 0" -c "CHECKPOINT" \
  -c "DELETE FROM rst_scoot WHERE id % 13 = 0" -c "INSERT INTO rst_scoot SELECT g, g % 10, 'crash ' || g FROM generate_series(30001, 31000) g" \
  -c "UPDATE rst_types SET big = repeat('y', 5000) WHERE id % 50 = 1" -c "VACUUM rst_types" \
  -c "TRUNCATE rst_unlogged" -c "INSERT INTO rst_unlogged VALUES (1, 'unlogged, gone after a crash')" || fail "writes before the crash failed"
# a block full of wide rows whose updates free old versions: the variable-length area gets
# compacted, logged as COMPACT operations that crash recovery repeats on the same bytes
q -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS rst_wide" \
  -c "CREATE TABLE rst_wide (id int PRIMARY KEY, pad text) USING scoot" \
  -c "INSERT INTO rst_wide SELECT g, substr(repeat(md5(g::text), 25), 1, 300 + g % 400) FROM generate_series(1, 1800) g" ||
  fail "rst_wide setup failed"
TABLES="$TABLES rst_wide"
wc0=$(q -c "SELECT pg_current_wal_insert_lsn()")
for r in 1 2 3 4 5 6; do
  q -c "UPDATE rst_wide SET pad = substr(repeat(md5((id * $r)::text), 25), 1, 250 + (id * $r) % 450) WHERE id % 3 = $r % 3" \
    -c "VACUUM rst_wide" || fail "rst_wide update round $r failed"
done
wc1=$(q -c "SELECT pg_current_wal_flush_lsn()")
img=$(q -c "SELECT checkpoint_lsn FROM scoot.checkpoints")
[ "$(q -c "SELECT '$img'::pg_lsn < '$wc0'::pg_lsn")" = t ] ||
  echo "    note: an image ($img) was written during the rst_wide updates; recovery replays only their tail"
if q -c "CREATE EXTENSION IF NOT EXISTS pg_walinspect" >/dev/null 2>&1; then
  nc=$(q -c "SELECT count(*) FROM pg_get_wal_records_info('$wc0', '$wc1') WHERE resource_manager = 'pg_scoot' AND record_type = 'COMPACT'")
  [ "${nc:-0}" -gt 0 ] || fail "the rst_wide updates wrote no COMPACT record"
  echo "    ok: $nc COMPACT records for rst_wide before the crash"
fi
# more redirects, made after the image the crash recovery starts from (replayed from the WAL)
q -c "UPDATE rst_redir SET v = v + 1 WHERE id % 2 = 0" -c "VACUUM rst_redir" || fail "rst_redir updates failed"
R5=$(redir_state)
D5=$(digests)
# the records carry the resource manager's name and descriptions (pg_walinspect, PostgreSQL 15;
# pg_waldump of PostgreSQL 15 cannot load an extension's resource manager and prints custom143)
if q -c "CREATE EXTENSION IF NOT EXISTS pg_walinspect" >/dev/null 2>&1; then
  w0=$(q -c "SELECT pg_current_wal_insert_lsn()")
  q -c "INSERT INTO rst_scoot VALUES (39999, 1, 'walinspect')" -c "DELETE FROM rst_scoot WHERE id = 39999" || fail "writes failed"
  w1=$(q -c "SELECT pg_current_wal_insert_lsn()")
  r=$(q -c "SELECT record_type, description FROM pg_get_wal_records_info('$w0', '$w1') WHERE resource_manager = 'pg_scoot' LIMIT 1")
  echo "$r" | grep -qE "^BLOCK\|rel [0-9]+/[0-9]+/[0-9]+ block [0-9]+ hwm [0-9]+ runs [0-9]+ bytes [0-9]+$" ||
    fail "pg_walinspect does not show named scoot records: '$r'"
  D5=$(digests)
  echo "    ok: pg_walinspect names the records ($r)"
fi
lines_before=$(wc -l <"$LOGFILE")
echo "--- crashing the server (pg_ctl stop -m immediate; data directory $DATADIR)"
pgctl stop -m immediate || { cat "$WORK/pg_ctl.out"; fail "pg_ctl stop -m immediate failed"; }
pgctl start || { cat "$WORK/pg_ctl.out"; tail -n 20 "$LOGFILE"; fail "pg_ctl start after the crash failed"; }
wait_ready
tail -n +"$((lines_before + 1))" "$LOGFILE" | grep -q "scoot: crash recovery applied [0-9]* scoot WAL records" ||
  fail "no crash recovery of scoot tables in the log: $(tail -n +"$((lines_before + 1))" "$LOGFILE" | grep scoot)"
q2 "$WORK/ob" "$WORK/eb" -c "SELECT count(*) FROM rst_scoot" || fail "first access after the crash failed: $(cat "$WORK/eb")"
[ -s "$WORK/eb" ] && fail "first access after the crash printed messages: $(cat "$WORK/eb")"
# unlogged tables are emptied by a crash, as on heap
want5=$(echo "$D5" | sed -E 's/rst_unlogged:[^ ]*/rst_unlogged:0\/d41d8cd98f00b204e9800998ecf8427e/')
D6=$(digests)
[ "$want5" = "$D6" ] || fail "contents after the crash differ:
 before: $want5
 after:  $D6"
index_check "after the crash"
R6=$(redir_state)
[ "$R5" = "$R6" ] || fail "rst_redir (redirect slots, scan cost) was $R5 before the crash, $R6 after the recovery"
echo "    ok: same rows at the same TIDs, unlogged table empty, indexes match, estimate with redirects unchanged ($R6)"

# helpers for the fault tests
nounlogged() { echo "$1" | sed -E 's/rst_unlogged:[^ ]*/rst_unlogged:0\/d41d8cd98f00b204e9800998ecf8427e/'; }
newlog() { tail -n +"$((lines_before + 1))" "$LOGFILE"; }
set_conf() { q -c "ALTER SYSTEM SET $1 = $2" -c "SELECT pg_reload_conf()" >/dev/null || fail "ALTER SYSTEM SET $1 failed"; }
# with the server down: remove a setting that ALTER SYSTEM wrote (keeps the file's owner)
drop_conf() {
  local f=$DATADIR/postgresql.auto.conf
  grep -v "^$1 " "$f" >"$WORK/auto.conf"; cat "$WORK/auto.conf" >"$f"
}
reset_conf() { q -c "ALTER SYSTEM RESET $1" -c "SELECT pg_reload_conf()" >/dev/null || fail "ALTER SYSTEM RESET $1 failed"; }
# SIGKILL the postmaster and every server process (a power cut, as far as the server can tell)
kill_all() {
  local pm
  pm=$(head -n 1 "$DATADIR/postmaster.pid") || fail "no postmaster.pid"
  # shellcheck disable=SC2046
  kill -9 "$pm" $(pgrep -P "$pm") 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$pm" 2>/dev/null || break; sleep 0.1; done
  sleep 0.5
}
# same rows at the same TIDs as $1 (unlogged tables empty: every case here is a recovery)
same_as() {
  local want got
  want=$(nounlogged "$1"); got=$(digests)
  [ "$want" = "$got" ] || fail "$2: contents differ:
 before: $want
 after:  $got"
  index_check "$2"
}
damage() {
  python3 - "$1" <<'PY' || fail "could not damage $1"
import os, sys
p = sys.argv[1]
n = os.path.getsize(p) * 2 // 3
with open(p, "r+b") as f:
    f.seek(n); b = f.read(1); f.seek(n); f.write(bytes([b[0] ^ 0x10]))
PY
}
IMG=$DATADIR/pg_scoot/arena.img
PREVIMG=$DATADIR/pg_scoot/arena.img.prev

echo "=== B2. a backend killed mid-transaction: committed rows stay, the open transaction's do not"
D7=$(digests)
"$BIN/psql" -X -qAt -c "BEGIN" -c "INSERT INTO rst_scoot SELECT g, 1, 'uncommitted' FROM generate_series(50001, 50500) g" \
  -c "UPDATE rst_plain SET t = 'uncommitted'" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
vpid=""
for _ in $(seq 1 100); do
  vpid=$(q -c "SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()")
  [ -n "$vpid" ] && break; sleep 0.1
done
[ -n "$vpid" ] || fail "the open transaction's backend was not found"
lines_before=$(wc -l <"$LOGFILE")
kill -9 "$vpid"
wait
sleep 1
for _ in $(seq 1 100); do q -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.2; done
newlog | grep -q "terminated by signal 9" || fail "the postmaster did not notice the killed backend: $(newlog | tail -n 5)"
newlog | grep -qE "scoot: replayed [0-9]+ scoot WAL records|scoot: crash recovery applied" || fail "no scoot crash recovery after the backend crash: $(newlog | grep scoot)"
same_as "$D7" "after a backend SIGKILL"
[ "$(q -c "SELECT count(*) FROM rst_scoot WHERE t = 'uncommitted'") $(q -c "SELECT count(*) FROM rst_plain WHERE t = 'uncommitted'")" = "0 0" ] ||
  fail "rows of the killed transaction are visible"
echo "    ok: shared memory reinitialised, image + WAL replayed, no uncommitted rows"

echo "=== B2b. single-user mode refuses scoot tables; the next start replays up to its shutdown checkpoint"
D7b=$(digests)
pgctl stop -m fast || fail "pg_ctl stop failed"
echo "SELECT count(*) FROM rst_plain;" | runuser -u postgres -- "$BIN/postgres" --single -D "$DATADIR" "${PGDATABASE:-postgres}" >"$WORK/single.out" 2>&1
grep -q 'scoot table "rst_plain" cannot be used in single-user mode' "$WORK/single.out" ||
  fail "single-user mode did not refuse the scoot table: $(cat "$WORK/single.out")"
lines_before=$(wc -l <"$LOGFILE")
pgctl start || { cat "$WORK/pg_ctl.out"; tail -n 20 "$LOGFILE"; fail "start after single-user mode failed"; }
wait_ready
newlog | grep -qE "scoot: replayed [0-9]+ scoot WAL records from .* to the shutdown checkpoint" ||
  fail "no replay to the single-user shutdown checkpoint: $(newlog | grep scoot)"
same_as "$D7b" "after single-user mode"
echo "    ok"

echo "=== B3. more WAL than max_wal_size since the last image: the worker writes one early"
set_conf max_wal_size "'32MB'"
set_conf scoot.checkpoint_interval 3600
n0=$(q -c "SELECT images_written FROM scoot.checkpoints")
q -c "UPDATE rst_frozen SET b = b + 1" -c "UPDATE rst_frozen SET b = b - 1" || fail "bulk updates failed"
for _ in $(seq 1 100); do [ "$(q -c "SELECT images_written FROM scoot.checkpoints")" -gt "$n0" ] && break; sleep 0.5; done
[ "$(q -c "SELECT images_written FROM scoot.checkpoints")" -gt "$n0" ] ||
  fail "no image after $(q -c "SELECT pg_size_pretty(wal_retained_bytes) FROM scoot.checkpoints") of WAL with max_wal_size = 32MB"
reset_conf max_wal_size
reset_conf scoot.checkpoint_interval
echo "    ok: image written early ($(q -c "SELECT images_written FROM scoot.checkpoints") so far)"

echo "=== C. a damaged newest image: the previous image and a longer replay take over"
q -c "UPDATE rst_scoot SET t = t || 'c' WHERE id % 5 = 0" -c "INSERT INTO rst_plain SELECT g, 'c ' || g FROM generate_series(2001, 2100) g" || fail "writes failed"
D8=$(digests)
pgctl stop -m fast || fail "pg_ctl stop failed"
[ -s "$IMG" ] || fail "no image at $IMG after a clean shutdown"
[ -s "$PREVIMG" ] || fail "no previous image at $PREVIMG after several restarts"
damage "$IMG"
lines_before=$(wc -l <"$LOGFILE")
pgctl start || { cat "$WORK/pg_ctl.out"; tail -n 20 "$LOGFILE"; fail "pg_ctl start with a damaged newest image failed"; }
wait_ready
newlog | grep -q "WARNING: .*scoot: checkpoint image pg_scoot/arena.img is damaged: checksum mismatch" ||
  fail "no WARNING about the damaged image: $(newlog | grep scoot)"
newlog | grep -q "WARNING: .*using the older checkpoint image pg_scoot/arena.img.prev" ||
  fail "no WARNING about the fallback: $(newlog | grep scoot)"
newlog | grep -qE "scoot: replayed [1-9][0-9]* scoot WAL records from .* to the shutdown checkpoint" ||
  fail "no replay to the shutdown checkpoint: $(newlog | grep scoot)"
same_as "$D8" "after falling back to the previous image"
r=$(q -c "SELECT loaded_image, replayed_at_start, redo_records > 0 FROM scoot.checkpoints")
[ "$r" = "pg_scoot/arena.img.prev|t|t" ] || fail "scoot.checkpoints after the fallback: '$r'"
[ -f "$DATADIR/pg_scoot/arena.img.damaged" ] || fail "the damaged image was not kept as arena.img.damaged"
[ -s "$IMG" ] || fail "no new image after the fallback"
echo "    ok: WARNING, previous image + replay, same rows at the same TIDs"

echo "=== C2. a crash while the OLAP worker writes an image: the temporary file is ignored"
set_conf scoot.debug_image_delay 1000
set_conf scoot.checkpoint_interval 1
q -c "UPDATE rst_scoot SET t = t || 'w' WHERE id % 6 = 0" || fail "writes failed"
for _ in $(seq 1 100); do [ -f "$DATADIR/pg_scoot/arena.img.tmp" ] && break; sleep 0.1; done
[ -f "$DATADIR/pg_scoot/arena.img.tmp" ] || fail "the worker did not start writing an image"
q -c "DELETE FROM rst_plain WHERE id > 2050" || fail "writes during the image failed"
D9=$(digests)
lines_before=$(wc -l <"$LOGFILE")
kill_all
[ -f "$DATADIR/pg_scoot/arena.img.tmp" ] || fail "the image was finished before the crash (no temporary file)"
drop_conf scoot.debug_image_delay
drop_conf scoot.checkpoint_interval
pgctl start || { cat "$WORK/pg_ctl.out"; tail -n 20 "$LOGFILE"; fail "start after a crash during image writing failed"; }
wait_ready
[ -f "$DATADIR/pg_scoot/arena.img.tmp" ] && fail "the temporary image file is still there"
newlog | grep -qE "scoot: replayed [0-9]+ scoot WAL records|scoot: crash recovery applied" || fail "no crash recovery: $(newlog | grep scoot)"
same_as "$D9" "after a crash during image writing"
echo "    ok: old image + WAL, temporary file removed"

echo "=== C3. a crash during crash recovery: the next start recovers from the start again"
q -c "UPDATE rst_scoot SET k = k + 100 WHERE id % 2 = 0" -c "INSERT INTO rst_plain SELECT g, 'r' FROM generate_series(3001, 4000) g" || fail "writes failed"
D10=$(digests)
set_conf scoot.debug_redo_delay 500
pgctl stop -m immediate || fail "pg_ctl stop -m immediate failed"
lines_before=$(wc -l <"$LOGFILE")
runuser -u postgres -- "$BIN/pg_ctl" -D "$DATADIR" -l "$LOGFILE" -W start >/dev/null 2>&1 || fail "pg_ctl start -W failed"
for _ in $(seq 1 100); do newlog | grep -q "scoot: loaded checkpoint image" && break; sleep 0.1; done
sleep 1.5
newlog | grep -q "database system is ready" && fail "recovery finished too quickly to be interrupted"
kill_all
newlog | grep -q "database system is ready" && fail "recovery finished before the crash"
drop_conf scoot.debug_redo_delay
pgctl start || { cat "$WORK/pg_ctl.out"; tail -n 20 "$LOGFILE"; fail "start after a crash during recovery failed"; }
wait_ready
newlog | grep -qE "scoot: replayed [0-9]+ scoot WAL records|scoot: crash recovery applied" || fail "no completed crash recovery: $(newlog | grep scoot)"
same_as "$D10" "after a crash during recovery"
echo "    ok"

echo "=== C4. a full disk while writing images: a WARNING, the previous image and the WAL stay in use"
pgctl stop -m fast || fail "pg_ctl stop failed"
SAVE=$WORK/pg_scoot_save
cp -a "$DATADIR/pg_scoot" "$SAVE"
used=$(du -sb "$DATADIR/pg_scoot" | cut -f1)
if mount -t tmpfs -o size=$((used + 8192)) tmpfs "$DATADIR/pg_scoot" 2>"$WORK/mount.err"; then
  cp -a "$SAVE"/. "$DATADIR/pg_scoot"/ && chown postgres: "$DATADIR/pg_scoot" && chmod 700 "$DATADIR/pg_scoot"
  pgctl start || { cat "$WORK/pg_ctl.out"; umount "$DATADIR/pg_scoot"; fail "start on the small file system failed"; }
  wait_ready
  lines_before=$(wc -l <"$LOGFILE")
  set_conf scoot.checkpoint_interval 1
  q -c "UPDATE rst_scoot SET t = t || 'f' WHERE id % 8 = 0" || fail "writes failed"
  for _ in $(seq 1 100); do newlog | grep -q "could not write a checkpoint image" && break; sleep 0.1; done
  newlog | grep -q "WARNING: .*scoot: could not write a checkpoint image: .*No space left on device" ||
    fail "no WARNING about the full disk: $(newlog | grep scoot)"
  reset_conf scoot.checkpoint_interval
  q -c "INSERT INTO rst_plain SELECT g, 'full' FROM generate_series(5001, 5100) g" || fail "writes with a full image disk failed"
  [ -f "$DATADIR/pg_scoot/arena.img.tmp" ] && fail "the partial image was left behind"
  D11=$(digests)
  echo "--- crash with the disk full: recovery from the previous image + WAL"
  kill_all
  pgctl start || { cat "$WORK/pg_ctl.out"; tail -n 20 "$LOGFILE"; umount "$DATADIR/pg_scoot"; fail "start after a crash with a full disk failed"; }
  wait_ready
  same_as "$D11" "after a crash with a full image disk"
  echo "--- clean shutdown with the disk full: the shutdown image fails, the next start replays"
  lines_before=$(wc -l <"$LOGFILE")
  pgctl stop -m fast || fail "pg_ctl stop failed"
  newlog | grep -q "WARNING: .*could not write the checkpoint image .*the next start replays" ||
    fail "no WARNING about the failed shutdown image: $(newlog | grep scoot)"
  pgctl start || { cat "$WORK/pg_ctl.out"; tail -n 20 "$LOGFILE"; umount "$DATADIR/pg_scoot"; fail "start after a failed shutdown image failed"; }
  wait_ready
  newlog | grep -qE "scoot: replayed [0-9]+ scoot WAL records from .* to the shutdown checkpoint" ||
    fail "no replay to the shutdown checkpoint: $(newlog | grep scoot)"
  same_as "$D11" "after a clean restart whose image could not be written"
  pgctl stop -m fast || fail "pg_ctl stop failed"
  rm -rf "$SAVE"; cp -a "$DATADIR/pg_scoot" "$SAVE"
  umount "$DATADIR/pg_scoot" || fail "umount failed"
  rm -rf "$DATADIR/pg_scoot"; cp -a "$SAVE" "$DATADIR/pg_scoot"
  pgctl start || { cat "$WORK/pg_ctl.out"; tail -n 20 "$LOGFILE"; fail "start after the full-disk test failed"; }
  wait_ready
  same_as "$D11" "after moving the images back to the data directory"
  echo "    ok: WARNING, no loss, writes go on"
else
  echo "    SKIP: cannot mount a small tmpfs here ($(cat "$WORK/mount.err")); the full-disk case is not tested"
  pgctl start || fail "pg_ctl start failed"
  wait_ready
fi

echo "=== C5. both images damaged: the start stops with a clear error"
q -c "DELETE FROM rst_scoot" -c "INSERT INTO rst_scoot SELECT g, g % 10, 'before ' || g FROM generate_series(1, 100) g" \
  -c "DELETE FROM rst_plain" -c "INSERT INTO rst_plain SELECT g, 'before ' || g FROM generate_series(1, 50) g" || fail "refill failed"
[ "$(q -c 'SELECT count(*) FROM rst_scoot')" = 100 ] || fail "rst_scoot does not have 100 rows before the restart"
pgctl stop -m fast || fail "pg_ctl stop failed"
damage "$IMG"
damage "$PREVIMG"
lines_before=$(wc -l <"$LOGFILE")
if pgctl start; then fail "the server started with two damaged checkpoint images"; fi
newlog | grep -q "FATAL: .*scoot: no usable checkpoint image: .*pg_scoot/arena.img is damaged.*pg_scoot/arena.img.prev is damaged" ||
  fail "no FATAL naming both images: $(newlog | tail -n 5)"
newlog | grep -q "HINT: .*move pg_scoot/arena.img and pg_scoot/arena.img.prev out of the data directory" ||
  fail "no HINT about moving the images away: $(newlog | tail -n 5)"
echo "    ok: FATAL + HINT"
mv "$IMG" "$WORK/damaged.img"; mv "$PREVIMG" "$WORK/damaged.prev"
pgctl start || { cat "$WORK/pg_ctl.out"; tail -n 20 "$LOGFILE"; fail "pg_ctl start without the images failed"; }
wait_ready
echo "    ok: starts without the images"

echo "=== D. without an image the tables lost their rows: reported, never garbage"
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
