#!/usr/bin/env bash
# Point-in-time recovery of scoot tables from a base backup and a WAL archive
# (src/wal/mod.rs `fetch_gap`/`restore_gap`): the restored server loads the checkpoint image the
# backup copied, restores the WAL between that image and the backup's start with
# restore_command, and replays the scoot WAL up to the recovery target.
#  - recovery to the end of the archive gives exactly the primary's rows;
#  - recovery_target_lsn gives exactly the rows committed before that LSN (later inserts,
#    updates and deletes are absent), through seq scans and index scans;
#  - the recovered server keeps them across a clean restart and a crash, and writes.
set -uo pipefail
REPO=${SCOOT_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${SCOOT_BINDIR:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
WORK=$(mktemp -d /tmp/scoot_pitr.XXXXXX)
chmod 777 "$WORK"
PRI=$WORK/primary
ARCH=$WORK/archive
BK=$WORK/backup
mkdir -p "$ARCH" "$BK" && chown postgres: "$ARCH" "$BK" && chmod 700 "$BK"
PORT0=$((${PGPORT:-5432} + 5))
RPORT=$((PORT0 + 1))
fail() { echo "FAIL: $*"; for f in "$WORK"/r*.log; do [ -f "$f" ] && { echo "--- $f"; grep -v "^\s*$" "$f" | tail -n 15; }; done; exit 1; }
cleanup() {
  for d in "$WORK"/r1 "$WORK"/r2; do
    [ -f "$d/postmaster.pid" ] && runuser -u postgres -- "$BIN/pg_ctl" -D "$d" -m immediate stop >/dev/null 2>&1
  done
  bash "$REPO/scripts/cluster.sh" stop "$PRI" --remove >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

SCOOT_PORT=$PORT0 SCOOT_ARENA_MB=256 SCOOT_EXTRA_CONF="archive_mode = on
archive_command = 'cp %p $ARCH/%f'" bash "$REPO/scripts/cluster.sh" start "$PRI" >"$WORK/start.out" 2>&1 ||
  fail "primary start: $(tail -20 "$WORK/start.out")"
eval "$(bash "$REPO/scripts/cluster.sh" env "$PRI")"
export PGDATABASE=postgres
q() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
qr() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt -h "$PGHOST" -p "$RPORT" "$@"; }
SUMS="SELECT (SELECT count(*) || '/' || coalesce(sum(id), 0) || '/' || coalesce(md5(string_agg(id || ':' || v, ',' ORDER BY id)), '-') FROM pt)
  || ' ' || (SELECT count(*) FROM ph)"
ISUMS="SET enable_seqscan = off; SET enable_bitmapscan = off;
  SELECT count(*) || '/' || coalesce(sum(length(v)), 0) FROM pt WHERE id BETWEEN -1000000 AND 1000000"

q -c "CREATE EXTENSION pg_scoot" -c "CREATE TABLE pt (id int PRIMARY KEY, v text) USING scoot" \
  -c "CREATE TABLE ph (id int PRIMARY KEY)" \
  -c "INSERT INTO pt SELECT g, 'a' || g FROM generate_series(1, 20000) g" \
  -c "INSERT INTO ph SELECT generate_series(1, 10)" || fail "setup"
# rows between the (older) checkpoint image and the backup's start: only the archive has them
q -c "UPDATE pt SET v = 'b' || id WHERE id % 5 = 0" -c "DELETE FROM pt WHERE id % 13 = 0" || fail "phase B"
runuser -u postgres -- "$BIN/pg_basebackup" -D "$BK" -X stream -c fast -h "$PGHOST" -p "$PGPORT" -U postgres \
  >"$WORK/basebackup.out" 2>&1 || fail "pg_basebackup: $(cat "$WORK/basebackup.out")"
[ -f "$BK/pg_scoot/arena.img" ] || fail "the backup has no checkpoint image"
q -c "INSERT INTO pt SELECT g, 'c' || g FROM generate_series(20001, 25000) g" -c "UPDATE pt SET v = 'c' WHERE id < 100" || fail "phase C"
target=$(q -c "SELECT pg_current_wal_lsn()")
want_target=$(q -c "$SUMS")
want_target_idx=$(q -c "$ISUMS")
q -c "INSERT INTO pt SELECT g, 'd' || g FROM generate_series(25001, 30000) g" -c "DELETE FROM pt WHERE id < 5000" \
  -c "UPDATE pt SET v = 'd' WHERE id % 7 = 0" -c "INSERT INTO ph VALUES (11)" || fail "phase D"
want_end=$(q -c "$SUMS")
want_end_idx=$(q -c "$ISUMS")
last=$(q -c "SELECT pg_walfile_name(pg_current_wal_lsn())")
q -c "SELECT pg_switch_wal()" >/dev/null
for _ in $(seq 1 100); do [ -f "$ARCH/$last" ] && break; sleep 0.2; done
[ -f "$ARCH/$last" ] || fail "WAL segment $last was not archived"

# restore: copy of the backup, recovery.signal, restore_command, optional target
restore() {
  local dir=$1 extra=$2
  rm -rf "$dir" && cp -a "$BK" "$dir" && chown -R postgres: "$dir"
  touch "$dir/recovery.signal"
  {
    echo "port = $RPORT"
    echo "archive_mode = off"
    echo "restore_command = 'cp $ARCH/%f %p'"
    echo "recovery_target_action = promote"
    printf '%s\n' "$extra"
  } >>"$dir/scoot_cluster.conf"
  runuser -u postgres -- "$BIN/pg_ctl" -D "$dir" -l "$dir.log" -w -t 120 start >"$WORK/pg_ctl.out" 2>&1 ||
    fail "restored server did not start: $(cat "$WORK/pg_ctl.out")"
  for _ in $(seq 1 150); do [ "$(qr -c "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ] && break; sleep 0.2; done
  [ "$(qr -c "SELECT pg_is_in_recovery()")" = f ] || fail "$dir: still in recovery"
  # the image is older than the backup's start (unless the primary wrote one in between)
  grep -q "scoot: restored the WAL from .* from the archive" "$dir.log" ||
    grep -q "scoot: base backup or standby: loaded checkpoint image .* the scoot WAL is replayed from there" "$dir.log" ||
    fail "$dir: the WAL between the image and the backup's start was not restored from the archive"
  grep -h "scoot: restored the WAL\|scoot: replayed" "$dir.log" | sed 's/^.*LOG: */    /'

  grep -q "could not replay\|cannot replay" "$dir.log" && fail "$dir: replay refused"
}

echo "=== recovery to the end of the archive"
restore "$WORK/r1" ""
[ "$(qr -c "$SUMS")" = "$want_end" ] || fail "end of archive: '$(qr -c "$SUMS")', want '$want_end'"
[ "$(qr -c "$ISUMS")" = "$want_end_idx" ] || fail "end of archive (index): '$(qr -c "$ISUMS")', want '$want_end_idx'"
runuser -u postgres -- "$BIN/pg_ctl" -D "$WORK/r1" -m fast stop >/dev/null 2>&1
echo "    ok: $want_end"

echo "=== recovery to an LSN (recovery_target_lsn = '$target')"
restore "$WORK/r2" "recovery_target_lsn = '$target'"
[ "$(qr -c "$SUMS")" = "$want_target" ] || fail "target LSN: '$(qr -c "$SUMS")', want '$want_target'"
[ "$(qr -c "$ISUMS")" = "$want_target_idx" ] || fail "target LSN (index): '$(qr -c "$ISUMS")', want '$want_target_idx'"
echo "    ok: $want_target"

echo "--- the recovered server writes, and keeps its rows across a clean restart and a crash"
qr -c "INSERT INTO pt SELECT g, 'r' || g FROM generate_series(100001, 101000) g" -c "DELETE FROM pt WHERE id BETWEEN 10 AND 20" || fail "writes"
want=$(qr -c "$SUMS")
runuser -u postgres -- "$BIN/pg_ctl" -D "$WORK/r2" -l "$WORK/r2.log" -w -t 120 restart -m fast >/dev/null 2>&1 || fail "restart"
[ "$(qr -c "$SUMS")" = "$want" ] || fail "after a clean restart: '$(qr -c "$SUMS")', want '$want'"
qr -c "UPDATE pt SET v = 'x' WHERE id % 3 = 0" || fail "update"
want=$(qr -c "$SUMS")
runuser -u postgres -- "$BIN/pg_ctl" -D "$WORK/r2" -m immediate stop >/dev/null 2>&1
runuser -u postgres -- "$BIN/pg_ctl" -D "$WORK/r2" -l "$WORK/r2.log" -w -t 120 start >/dev/null 2>&1 || fail "start after crash"
[ "$(qr -c "$SUMS")" = "$want" ] || fail "after a crash: '$(qr -c "$SUMS")', want '$want'"
echo "    ok"
echo "PASS"
