#!/usr/bin/env bash
# Physical standbys and base backups of scoot tables (src/wal/mod.rs `rm_startup`/`fetch_gap`,
# src/wal/checkpoint_image.rs `load_for_standby`, src/wal/record.rs `apply` with `hot`):
#  - pg_basebackup -R of a primary gives a hot standby whose scoot tables hold the primary's rows:
#    it loads the copied checkpoint image, fetches the WAL between that image and the backup's
#    start from the primary, and replays the scoot WAL from then on;
#  - during a pgbench run on the primary every standby query sees a transaction-consistent state
#    (pgbench's three balance sums are equal), and after catching up the standby's tables equal
#    the primary's (checksums over every row, index scans included);
#  - VACUUM on the primary cancels (max_standby_streaming_delay) a standby query whose snapshot
#    still needs the pruned rows, instead of letting it return too few rows;
#  - the standby keeps its scoot rows across a clean restart and a crash, and keeps following;
#  - a cascading standby (a base backup of the standby, streaming from it) has every row too;
#  - promotion keeps every row; the promoted server writes, restarts and crashes safely;
#  - a base backup started without access to the WAL it needs (no primary_conninfo) refuses
#    its scoot tables with a clear error, never wrong or silently missing rows;
#  - the primary is unaffected.
set -uo pipefail
BIN=${SCOOT_BINDIR:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
WORK=$(mktemp -d /tmp/scoot_standby.XXXXXX)
chmod 777 "$WORK"
SB=$WORK/standby
BK=$WORK/backup
SPORT=$((${PGPORT:-5432} + 1))
BPORT=$((${PGPORT:-5432} + 2))
DB=scoot_standby
fail() { echo "FAIL: $*"; [ -f "$WORK/standby.log" ] && tail -n 25 "$WORK/standby.log"; exit 1; }
q() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt -d "$DB" "$@"; }
qs() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt -p "$SPORT" -d "$DB" "$@"; }
sbctl() { runuser -u postgres -- "$BIN/pg_ctl" -D "$SB" -l "$WORK/standby.log" -o "-p $SPORT" -w -t 120 "$@" >"$WORK/pg_ctl.out" 2>&1; }
cleanup() {
  for d in "$SB" "$BK" "$WORK/backup2" "$WORK/cascade"; do
    [ -f "$d/postmaster.pid" ] && runuser -u postgres -- "$BIN/pg_ctl" -D "$d" -m immediate stop >/dev/null 2>&1
  done
  "$BIN/psql" -X -qAt -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

# every row of the test tables, as one checksum per table
SUMS="SELECT (SELECT md5(string_agg(id || ':' || t, ',' ORDER BY id)) FROM sb_scoot)
  || ' ' || (SELECT md5(string_agg(id || ':' || v, ',' ORDER BY id)) FROM sb_big)
  || ' ' || (SELECT md5(string_agg(aid || ':' || abalance, ',' ORDER BY aid)) FROM pgbench_accounts)
  || ' ' || (SELECT md5(string_agg(tid || ':' || tbalance, ',' ORDER BY tid)) FROM pgbench_tellers)
  || ' ' || (SELECT count(*) || '/' || coalesce(sum(delta), 0) FROM pgbench_history)"
# the same through the primary key indexes
ISUMS="SET enable_seqscan = off; SET enable_bitmapscan = off;
  SELECT (SELECT count(*) || '/' || sum(length(t)) FROM sb_scoot WHERE id BETWEEN 1 AND 1000000)
  || ' ' || (SELECT count(*) || '/' || sum(length(v)) FROM sb_big WHERE id BETWEEN 1 AND 1000000)
  || ' ' || (SELECT count(*) || '/' || sum(abalance) FROM pgbench_accounts WHERE aid BETWEEN 1 AND 1000000)"
INV="SELECT (SELECT sum(abalance) FROM pgbench_accounts) = (SELECT sum(tbalance) FROM pgbench_tellers)
  AND (SELECT sum(tbalance) FROM pgbench_tellers) = (SELECT sum(bbalance) FROM pgbench_branches)"

# waits until the standby on port $1 replayed everything the primary wrote so far
catch_up() {
  local port=$1 lsn
  lsn=$("$BIN/psql" -X -qAt -d "$DB" -c "SELECT pg_current_wal_lsn()")
  for _ in $(seq 1 300); do
    [ "$("$BIN/psql" -X -qAt -p "$port" -d "$DB" -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'" 2>/dev/null)" = t ] && return 0
    sleep 0.2
  done
  fail "the standby did not replay up to $lsn"
}
same_as_primary() {
  local what=$1 want got
  want=$(q -c "$SUMS") || fail "checksums on the primary failed"
  got=$(qs -c "$SUMS") || fail "checksums on the standby failed ($what)"
  [ "$got" = "$want" ] || fail "$what: standby '$got', primary '$want'"
  want=$(q -c "$ISUMS") || fail "index checksums on the primary failed"
  got=$(qs -c "$ISUMS") || fail "index checksums on the standby failed ($what)"
  [ "$got" = "$want" ] || fail "$what (index scans): standby '$got', primary '$want'"
}

"$BIN/psql" -X -qAt -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" >/dev/null || fail "createdb failed"
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION pg_scoot" \
  -c "CREATE TABLE sb_heap (id int PRIMARY KEY, t text)" \
  -c "CREATE TABLE sb_scoot (id int PRIMARY KEY, t text) USING scoot" \
  -c "CREATE TABLE sb_big (id int PRIMARY KEY, v text) USING scoot" \
  -c "INSERT INTO sb_heap SELECT g, 'h' || g FROM generate_series(1, 100) g" \
  -c "INSERT INTO sb_scoot SELECT g, 's' || g FROM generate_series(1, 100) g" \
  -c "INSERT INTO sb_big SELECT g, repeat(md5(g::text), 1 + g % 5) FROM generate_series(1, 60000) g" \
  -c "UPDATE sb_big SET v = 'updated ' || id WHERE id % 7 = 0" \
  -c "DELETE FROM sb_big WHERE id % 11 = 0" || fail "setup failed"
PGOPTIONS="-c default_table_access_method=scoot" "$BIN/pgbench" -q -i -s 2 "$DB" >"$WORK/pgbench_init.out" 2>&1 ||
  fail "pgbench -i failed: $(cat "$WORK/pgbench_init.out")"
[ "$(q -c "SELECT count(*) FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE relname LIKE 'pgbench_%' AND amname = 'scoot'")" = 4 ] ||
  fail "pgbench tables are not scoot tables"

echo "=== a hot standby from pg_basebackup -R replays the scoot tables"
mkdir -p "$SB" && chown postgres: "$SB" && chmod 700 "$SB"
runuser -u postgres -- "$BIN/pg_basebackup" -D "$SB" -R -X stream -c fast -h "${PGHOST:-/tmp}" -p "${PGPORT:-5432}" -U postgres \
  >"$WORK/basebackup.out" 2>&1 || fail "pg_basebackup failed: $(cat "$WORK/basebackup.out")"
[ -f "$SB/pg_scoot/arena.img" ] || fail "pg_basebackup did not copy the checkpoint image"
# cancel standby queries that block replay after 1 s (the conflict test below relies on it)
echo "max_standby_streaming_delay = 1s" >>"$SB/postgresql.conf"
# the standby writes its own images (every 2 s while scoot records arrive)
echo "scoot.checkpoint_interval = 2" >>"$SB/postgresql.conf"
sbctl start || fail "the standby did not start: $(cat "$WORK/pg_ctl.out")"
grep -q "scoot: base backup or standby: loaded checkpoint image" "$WORK/standby.log" || fail "no LOG about loading the copied image"
grep -Eq "scoot: replayed [0-9]+ scoot WAL records" "$WORK/standby.log" || fail "the WAL between the image and the backup was not replayed"
grep -q "could not replay\|cannot replay" "$WORK/standby.log" && fail "replay refused on the standby"
[ "$(qs -c "SELECT pg_is_in_recovery()")" = t ] || fail "the standby is not in recovery"
catch_up "$SPORT"
same_as_primary "after the base backup"
echo "    ok: $(qs -c "SELECT count(*) FROM sb_big") rows of sb_big and the pgbench tables equal the primary's"

echo "=== pgbench on the primary while the standby reads"
"$BIN/pgbench" -n -c 2 -j 2 -T 8 "$DB" >"$WORK/pgbench.out" 2>&1 &
PB=$!
reads=0
cancelled=0
while kill -0 "$PB" 2>/dev/null; do
  if ! r=$(qs -c "$INV" 2>&1); then
    # a standby query may be cancelled by a conflict with recovery (as on heap: pruning on the
    # primary, replay delayed past max_standby_streaming_delay by the standby's image writes);
    # never answered with inconsistent rows
    case $r in *"conflict with recovery"*) cancelled=$((cancelled + 1)); continue ;; esac
    fail "standby read during pgbench failed: $r"
  fi
  [ "$r" = t ] || fail "standby saw unequal pgbench balance sums during the run"
  reads=$((reads + 1))
done
[ "$cancelled" -le $((reads / 4)) ] || fail "$cancelled of $((reads + cancelled)) standby reads cancelled by conflicts"
wait "$PB" || fail "pgbench failed: $(tail -5 "$WORK/pgbench.out")"
tps=$(grep -o "tps = [0-9.]*" "$WORK/pgbench.out" | head -1)
[ "$reads" -ge 5 ] || fail "only $reads standby reads during pgbench"
catch_up "$SPORT"
same_as_primary "after pgbench"
[ "$(qs -c "$INV")" = t ] || fail "balance sums differ on the standby"
echo "    ok: $reads consistent standby reads during pgbench ($tps; $cancelled cancelled by conflicts), tables equal after catching up"
r=$(qs -c "SELECT standby_replay, wal_retained_bytes >= 0, loaded_at_start FROM scoot.checkpoints" 2>&1) &&
  [ "$r" = "t|t|t" ] || fail "scoot.checkpoints on the standby: $r"
# scoot.olap and the Arrow export read the live arena on a standby (no OLAP worker in recovery)
r=$(qs -c "SET scoot.olap = on" -c "$INV" 2>&1) && [ "$r" = t ] || fail "scoot.olap = on on the standby: $r"
r=$(qs -c "SELECT count(*) > 0 FROM scoot.arrow_stream('sb_big'::regclass)" 2>&1) && [ "$r" = t ] ||
  fail "Arrow export on the standby: $r"
r=$(qs -c "SET scoot.olap = on" -c "SELECT count(*) > 0 FROM scoot.arrow_stream('pgbench_accounts'::regclass)" 2>&1) && [ "$r" = t ] ||
  fail "Arrow export with scoot.olap on the standby: $r"

echo "=== UPDATE, DELETE, VACUUM, TRUNCATE and new tables follow"
q -c "UPDATE sb_big SET v = v || '+' WHERE id % 3 = 0" -c "DELETE FROM sb_big WHERE id > 50000" \
  -c "VACUUM sb_big" -c "TRUNCATE sb_scoot" -c "INSERT INTO sb_scoot SELECT g, 'again' || g FROM generate_series(1, 500) g" \
  -c "CREATE TABLE sb_new (id int PRIMARY KEY, t text) USING scoot" \
  -c "INSERT INTO sb_new SELECT g, 'n' || g FROM generate_series(1, 3000) g" || fail "primary changes failed"
catch_up "$SPORT"
same_as_primary "after UPDATE/DELETE/VACUUM/TRUNCATE"
[ "$(qs -c "SELECT count(*), sum(id) FROM sb_new")" = "3000|4501500" ] || fail "sb_new on the standby: $(qs -c "SELECT count(*), sum(id) FROM sb_new")"
if qs -c "INSERT INTO sb_new VALUES (0, 'x')" >/dev/null 2>"$WORK/e"; then fail "a write on the standby succeeded"; fi
grep -q "read-only transaction" "$WORK/e" || fail "unexpected error for a standby write: $(cat "$WORK/e")"
echo "    ok"

echo "=== a standby query that still needs rows VACUUM removes on the primary"
python3 - "$SPORT" "$DB" "${PGHOST:-/tmp}" "${PGPORT:-5432}" <<'EOF' || fail "conflict test failed"
import sys, time, psycopg
sport, db, host, pport = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
p = psycopg.connect(host=host, port=pport, dbname=db, user="postgres", autocommit=True)
p.execute("DROP TABLE IF EXISTS sb_conf")
p.execute("CREATE TABLE sb_conf (id int PRIMARY KEY, t text) USING scoot")
p.execute("INSERT INTO sb_conf SELECT g, 'c' || g FROM generate_series(1, 2000) g")
lsn = p.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
s = psycopg.connect(host=host, port=sport, dbname=db, user="postgres", autocommit=True)
for _ in range(300):
    if s.execute("SELECT pg_last_wal_replay_lsn() >= %s", (lsn,)).fetchone()[0]:
        break
    time.sleep(0.1)
s.autocommit = False
s.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
n0 = s.execute("SELECT count(*) FROM sb_conf").fetchone()[0]
assert n0 == 2000, n0
p.execute("DELETE FROM sb_conf WHERE id % 2 = 0")
p.execute("VACUUM sb_conf")
lsn = p.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
time.sleep(3)  # max_standby_streaming_delay is 1 s
try:
    n1 = s.execute("SELECT count(*) FROM sb_conf").fetchone()[0]
    seq = s.execute("SELECT count(*) FROM sb_conf WHERE id % 2 = 0").fetchone()[0]
    if n1 != 2000 or seq != 1000:
        print(f"FAIL: the standby's REPEATABLE READ transaction saw {n1} rows ({seq} even), want 2000 (1000) or a conflict error")
        sys.exit(1)
    print("    (the transaction was not cancelled and still saw all rows)")
except psycopg.Error as e:
    msg = str(e)
    if "conflict with recovery" not in msg:
        print("FAIL: unexpected error:", msg)
        sys.exit(1)
    print("    ok: cancelled:", msg.splitlines()[0])
s2 = psycopg.connect(host=host, port=sport, dbname=db, user="postgres", autocommit=True)
for _ in range(300):
    if s2.execute("SELECT pg_last_wal_replay_lsn() >= %s", (lsn,)).fetchone()[0]:
        break
    time.sleep(0.1)
n2 = s2.execute("SELECT count(*) FROM sb_conf").fetchone()[0]
if n2 != 1000:
    print(f"FAIL: after the VACUUM the standby has {n2} rows, want 1000")
    sys.exit(1)
EOF

echo "=== the standby keeps its scoot rows across a clean restart and a crash"
sbctl restart -m fast || fail "standby restart failed: $(cat "$WORK/pg_ctl.out")"
grep -q "scoot: wrote checkpoint image" "$WORK/standby.log" || fail "the standby wrote no image at its shutdown"
q -c "INSERT INTO sb_new SELECT g, 'r' || g FROM generate_series(3001, 3500) g" -c "UPDATE sb_big SET v = 'r' WHERE id < 100" || fail "primary writes failed"
catch_up "$SPORT"
same_as_primary "after a clean standby restart"
[ "$(qs -c "SELECT count(*) FROM sb_new")" = 3500 ] || fail "sb_new after the standby restart: $(qs -c "SELECT count(*) FROM sb_new")"
# the standby's own images: a crash recovers from them and its own WAL, without the primary
"$BIN/pgbench" -n -c 2 -T 4 "$DB" >"$WORK/pgbench1b.out" 2>&1 || fail "pgbench failed"
catch_up "$SPORT"
grep -q "scoot: standby wrote checkpoint image" "$WORK/standby.log" || fail "the standby wrote no image of its own while replaying"
[ "$(qs -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pg_scoot_wal'")" = 1 ] || fail "no slot keeping the standby's WAL"
lines=$(wc -l <"$WORK/standby.log")
runuser -u postgres -- "$BIN/pg_ctl" -D "$SB" -m immediate stop >/dev/null 2>&1 || fail "standby crash failed"
"$BIN/pgbench" -n -c 2 -T 2 "$DB" >"$WORK/pgbench2.out" 2>&1 || fail "pgbench failed"
q -c "INSERT INTO sb_new SELECT g, 'c' || g FROM generate_series(3501, 4000) g" || fail "insert failed"
sbctl start || fail "standby start after a crash failed: $(cat "$WORK/pg_ctl.out")"
tail -n +"$((lines + 1))" "$WORK/standby.log" | grep -q "fetching the WAL" && fail "the standby needed the primary's WAL after its crash"
catch_up "$SPORT"
same_as_primary "after a standby crash"
[ "$(qs -c "SELECT count(*) FROM sb_new")" = 4000 ] || fail "sb_new after the standby crash"
echo "    ok (recovered from its own image: $(tail -n +"$((lines + 1))" "$WORK/standby.log" | grep -o "loaded checkpoint image [^:]*" | head -1))"

echo "=== a cascading standby (pg_basebackup -R of the standby) follows through it"
CS=$WORK/cascade
CPORT=$((${PGPORT:-5432} + 4))
runuser -u postgres -- "$BIN/pg_basebackup" -D "$CS" -R -X stream -c fast -h "${PGHOST:-/tmp}" -p "$SPORT" -U postgres \
  >"$WORK/basebackup_c.out" 2>&1 || fail "pg_basebackup of the standby failed: $(cat "$WORK/basebackup_c.out")"
[ -f "$CS/pg_scoot/arena.img" ] || fail "pg_basebackup of the standby did not copy its checkpoint image"
rm -f "$CS/postmaster.pid" "$CS/postmaster.opts"
runuser -u postgres -- "$BIN/pg_ctl" -D "$CS" -l "$WORK/cascade.log" -o "-p $CPORT" -w -t 120 start >"$WORK/pg_ctl.out" 2>&1 ||
  fail "cascading standby start failed: $(tail -n 20 "$WORK/cascade.log")"
qc() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt -p "$CPORT" -d "$DB" "$@"; }
"$BIN/pgbench" -n -c 2 -T 2 "$DB" >"$WORK/pgbench_c.out" 2>&1 || fail "pgbench failed"
q -c "UPDATE sb_big SET v = 'cascade' WHERE id % 97 = 0" -c "DELETE FROM sb_scoot WHERE id % 5 = 0" || fail "primary writes failed"
catch_up "$SPORT"
catch_up "$CPORT"
for what in SUMS ISUMS; do
  want=$(q -c "${!what}") || fail "$what on the primary failed"
  got=$(qc -c "${!what}") || fail "$what on the cascading standby failed: $(tail -n 5 "$WORK/cascade.log")"
  [ "$got" = "$want" ] || fail "cascading standby ($what): '$got', primary '$want'"
done
[ "$(qc -c "$INV")" = t ] || fail "balance sums differ on the cascading standby"
runuser -u postgres -- "$BIN/pg_ctl" -D "$CS" -m fast stop >/dev/null 2>&1
echo "    ok: every row equal to the primary's, also by index scans"

echo "=== promotion keeps every row"
catch_up "$SPORT"
want=$(q -c "$SUMS")
runuser -u postgres -- "$BIN/pg_ctl" -D "$SB" -w promote >"$WORK/pg_ctl.out" 2>&1 || fail "promote failed: $(cat "$WORK/pg_ctl.out")"
for _ in $(seq 1 100); do [ "$(qs -c "SELECT pg_is_in_recovery()")" = f ] && break; sleep 0.2; done
[ "$(qs -c "SELECT pg_is_in_recovery()")" = f ] || fail "still in recovery after promote"
grep -q "scoot: end of recovery: wrote checkpoint image" "$WORK/standby.log" || fail "no image at promotion"
got=$(qs -c "$SUMS")
[ "$got" = "$want" ] || fail "after promotion: '$got', want '$want'"
qs -c "INSERT INTO sb_new SELECT g, 'p' || g FROM generate_series(4001, 5000) g" -c "UPDATE sb_scoot SET t = 'promoted'" \
  -c "DELETE FROM sb_big WHERE id < 1000" || fail "writes on the promoted server failed"
"$BIN/pgbench" -n -c 2 -T 2 -p "$SPORT" "$DB" >"$WORK/pgbench3.out" 2>&1 || fail "pgbench on the promoted server failed"
[ "$(qs -c "$INV")" = t ] || fail "balance sums differ on the promoted server"
want=$(qs -c "$SUMS")
sbctl restart -m fast || fail "restart of the promoted server failed: $(cat "$WORK/pg_ctl.out")"
got=$(qs -c "$SUMS") || fail "reading after the restart failed"
[ "$got" = "$want" ] || fail "promoted server after a clean restart: '$got', want '$want'"
qs -c "INSERT INTO sb_new SELECT g, 'm' FROM generate_series(5001, 5100) g" || fail "insert failed"
want=$(qs -c "$SUMS") && wantn=$(qs -c "SELECT count(*) FROM sb_new")
runuser -u postgres -- "$BIN/pg_ctl" -D "$SB" -m immediate stop >/dev/null 2>&1 || fail "crash failed"
sbctl start || fail "start after the crash failed: $(cat "$WORK/pg_ctl.out")"
got=$(qs -c "$SUMS") || fail "reading after the crash failed"
[ "$got" = "$want" ] || fail "promoted server after a crash: '$got', want '$want'"
[ "$(qs -c "SELECT count(*) FROM sb_new")" = "$wantn" ] || fail "sb_new after the crash"
r=$(qs -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*) FROM sb_new WHERE id BETWEEN 1 AND 10000")
[ "$r" = "$wantn" ] || fail "index scan on the promoted server: $r rows, want $wantn"
echo "    ok"

echo "=== a base backup without the WAL since its image refuses its scoot tables"
runuser -u postgres -- "$BIN/pg_ctl" -D "$SB" -m fast stop >/dev/null 2>&1
mkdir -p "$BK" && chown postgres: "$BK" && chmod 700 "$BK"
runuser -u postgres -- "$BIN/pg_basebackup" -D "$BK" -X stream -c fast -h "${PGHOST:-/tmp}" -p "${PGPORT:-5432}" -U postgres \
  >"$WORK/basebackup2.out" 2>&1 || fail "pg_basebackup failed: $(cat "$WORK/basebackup2.out")"
runuser -u postgres -- "$BIN/pg_ctl" -D "$BK" -l "$WORK/backup.log" -o "-p $BPORT" -w -t 120 start >"$WORK/pg_ctl.out" 2>&1 ||
  fail "the restored backup did not start: $(cat "$WORK/pg_ctl.out")"
bq() { "$BIN/psql" -X -qAt -p "$BPORT" -d "$DB" "$@"; }
[ "$(bq -c "SELECT count(*) FROM sb_heap")" = 100 ] || fail "heap rows missing in the restored backup"
if grep -q "primary_conninfo is not set" "$WORK/backup.log"; then
  if bq -c "SELECT count(*) FROM sb_scoot" >"$WORK/o" 2>"$WORK/e"; then
    fail "reading a scoot table of the restored backup succeeded: $(cat "$WORK/o")"
  fi
  grep -q "has no rows on this server" "$WORK/e" || fail "unexpected error: $(cat "$WORK/e")"
  bq -c "TRUNCATE sb_scoot" -c "INSERT INTO sb_scoot VALUES (1, 'x')" || fail "TRUNCATE + INSERT in the restored backup failed"
  echo "    ok: clear error, usable after TRUNCATE"
else
  # (the primary wrote an image after the backup started: nothing was missing)
  [ "$(bq -c "$SUMS")" = "$(q -c "$SUMS")" ] || fail "the restored backup replayed its scoot tables but they differ from the primary's"
  echo "    ok: the copied image was newer than the backup's start: nothing missing"
fi
runuser -u postgres -- "$BIN/pg_ctl" -D "$BK" -m fast stop >/dev/null 2>&1

echo "=== a standby that cannot reach the primary at its start, then can (the HINT's retry)"
BK2=$WORK/backup2
mkdir -p "$BK2" && chown postgres: "$BK2" && chmod 700 "$BK2"
runuser -u postgres -- "$BIN/pg_basebackup" -D "$BK2" -R -X stream -c fast -h "${PGHOST:-/tmp}" -p "${PGPORT:-5432}" -U postgres \
  >"$WORK/basebackup3.out" 2>&1 || fail "pg_basebackup failed: $(cat "$WORK/basebackup3.out")"
good=$(grep "^primary_conninfo" "$BK2/postgresql.auto.conf")
sed -i "s|^primary_conninfo.*|primary_conninfo = 'host=${PGHOST:-/tmp} port=1 user=postgres'|" "$BK2/postgresql.auto.conf"
b2ctl() { runuser -u postgres -- "$BIN/pg_ctl" -D "$BK2" -l "$WORK/backup2.log" -o "-p $BPORT" -w -t 120 "$@" >"$WORK/pg_ctl.out" 2>&1; }
b2ctl start || fail "the standby with a wrong primary_conninfo did not start: $(cat "$WORK/pg_ctl.out")"
grep -q "attempt 5 of 5" "$WORK/backup2.log" || fail "no retries of the fetch: $(grep scoot "$WORK/backup2.log" | tail -3)"
grep -q "HINT:  To try again" "$WORK/backup2.log" || fail "no HINT how to retry: $(grep -A1 "cannot replay" "$WORK/backup2.log")"
if "$BIN/psql" -X -qAt -p "$BPORT" -d "$DB" -c "SELECT count(*) FROM sb_new" >"$WORK/o" 2>"$WORK/e"; then
  fail "a scoot table read as $(cat "$WORK/o") without its WAL"
fi
grep -q "has no rows on this server" "$WORK/e" || fail "unexpected error: $(cat "$WORK/e")"
b2ctl stop -m fast || fail "stop failed"
sed -i "s|^primary_conninfo.*|$good|" "$BK2/postgresql.auto.conf"
rm -f "$BK2/pg_scoot/rows_not_replayed"
b2ctl start || fail "restart after fixing primary_conninfo failed: $(cat "$WORK/pg_ctl.out")"
catch_up "$BPORT"
[ "$("$BIN/psql" -X -qAt -p "$BPORT" -d "$DB" -c "$SUMS")" = "$(q -c "$SUMS")" ] || fail "the retried standby differs from the primary"
b2ctl stop -m fast
echo "    ok: 5 attempts, a clear error with a HINT, then the retry replays every row"

echo "--- the primary is unaffected"
[ "$(q -c "SELECT count(*) FROM sb_new")" = 4000 ] || fail "primary sb_new: $(q -c "SELECT count(*) FROM sb_new")"
[ "$(q -c "$INV")" = t ] || fail "primary balance sums differ"
echo "PASS"
