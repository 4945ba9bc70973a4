#!/usr/bin/env bash
# Base backups and physical standbys (src/wal/checkpoint_image.rs `NOT_REPLAYED`,
# src/storage/tabledir.rs `check_not_stale`). pg_scoot does not replay scoot WAL on standbys yet;
# what a user gets instead is a working standby with clear errors, never wrong or silently
# missing rows:
#  - pg_basebackup -R of a primary with scoot tables gives a hot standby that starts, replicates
#    heap tables, and refuses to read scoot tables with an error naming the limitation;
#  - after promotion the old scoot tables still refuse (their rows are on the old primary) until
#    TRUNCATE; new scoot tables work and survive a clean restart and a crash of the promoted
#    server;
#  - the primary is unaffected.
set -uo pipefail
BIN=${SCOOT_BINDIR:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
WORK=$(mktemp -d /tmp/scoot_standby.XXXXXX)
chmod 777 "$WORK"
SB=$WORK/standby
SPORT=$((${PGPORT:-5432} + 1))
fail() { echo "FAIL: $*"; [ -f "$WORK/standby.log" ] && tail -n 15 "$WORK/standby.log"; exit 1; }
q() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
qs() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt -p "$SPORT" "$@"; }
sbctl() { runuser -u postgres -- "$BIN/pg_ctl" -D "$SB" -l "$WORK/standby.log" -o "-p $SPORT" -w -t 120 "$@" >"$WORK/pg_ctl.out" 2>&1; }
cleanup() {
  [ -f "$SB/postmaster.pid" ] && runuser -u postgres -- "$BIN/pg_ctl" -D "$SB" -m immediate stop >/dev/null 2>&1
  q -c "SET client_min_messages = error" -c "DROP TABLE IF EXISTS sb_heap, sb_scoot" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

q -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS sb_heap, sb_scoot" \
  -c "CREATE TABLE sb_heap (id int PRIMARY KEY, t text)" \
  -c "CREATE TABLE sb_scoot (id int PRIMARY KEY, t text) USING scoot" \
  -c "INSERT INTO sb_heap SELECT g, 'h' || g FROM generate_series(1, 100) g" \
  -c "INSERT INTO sb_scoot SELECT g, 's' || g FROM generate_series(1, 100) g" || fail "setup failed"

echo "=== a hot standby from pg_basebackup -R"
mkdir -p "$SB" && chown postgres: "$SB" && chmod 700 "$SB"
runuser -u postgres -- "$BIN/pg_basebackup" -D "$SB" -R -X stream -c fast -h "${PGHOST:-/tmp}" -p "${PGPORT:-5432}" -U postgres \
  >"$WORK/basebackup.out" 2>&1 || fail "pg_basebackup failed: $(cat "$WORK/basebackup.out")"
sbctl start || fail "the standby did not start: $(cat "$WORK/pg_ctl.out")"
grep -q "scoot: this server starts from a base backup or as a standby" "$WORK/standby.log" ||
  fail "no LOG about the standby start"
[ "$(qs -c "SELECT pg_is_in_recovery()")" = t ] || fail "the standby is not in recovery"
[ "$(qs -c "SELECT count(*) FROM sb_heap")" = 100 ] || fail "heap rows missing on the standby"
if qs -c "SELECT count(*) FROM sb_scoot" >"$WORK/o" 2>"$WORK/e"; then
  fail "reading a scoot table on the standby succeeded: $(cat "$WORK/o") (its rows are not replayed)"
fi
grep -q "ERROR: .*scoot table \"sb_scoot\" has no rows on this server: .*pg_scoot does not replay scoot WAL there yet" "$WORK/e" ||
  fail "unexpected error on the standby: $(cat "$WORK/e")"
grep -q "HINT: .*Read the table on the primary server" "$WORK/e" || fail "no HINT: $(cat "$WORK/e")"
echo "    ok: heap replicated, scoot table refused with a clear error"

q -c "INSERT INTO sb_heap SELECT g, 'h' || g FROM generate_series(101, 150) g" \
  -c "INSERT INTO sb_scoot SELECT g, 's' || g FROM generate_series(101, 150) g" || fail "primary writes failed"
for _ in $(seq 1 100); do [ "$(qs -c "SELECT count(*) FROM sb_heap")" = 150 ] && break; sleep 0.2; done
[ "$(qs -c "SELECT count(*) FROM sb_heap")" = 150 ] || fail "the standby does not follow the primary"
echo "    ok: streaming goes on"

echo "=== promotion"
runuser -u postgres -- "$BIN/pg_ctl" -D "$SB" -w promote >"$WORK/pg_ctl.out" 2>&1 || fail "promote failed: $(cat "$WORK/pg_ctl.out")"
for _ in $(seq 1 100); do [ "$(qs -c "SELECT pg_is_in_recovery()")" = f ] && break; sleep 0.2; done
[ "$(qs -c "SELECT pg_is_in_recovery()")" = f ] || fail "still in recovery after promote"
if qs -c "SELECT count(*) FROM sb_scoot" >"$WORK/o" 2>"$WORK/e"; then
  fail "the old scoot table reads as '$(cat "$WORK/o")' on the promoted server"
fi
grep -q "has no rows on this server" "$WORK/e" || fail "unexpected error after promotion: $(cat "$WORK/e")"
grep -q "TRUNCATE sb_scoot" "$WORK/e" || fail "no HINT naming TRUNCATE: $(cat "$WORK/e")"
qs -c "TRUNCATE sb_scoot" -c "INSERT INTO sb_scoot SELECT g, 'p' || g FROM generate_series(1, 10) g" ||
  fail "TRUNCATE + INSERT on the promoted server failed"
r=$(qs -c "SET enable_seqscan = off" -c "SELECT count(*), sum(id) FROM sb_scoot WHERE id BETWEEN 1 AND 100")
[ "$r" = "10|55" ] || fail "index scan after TRUNCATE: '$r', want 10|55"
qs -c "CREATE TABLE sb_new (id int PRIMARY KEY, t text) USING scoot" \
  -c "INSERT INTO sb_new SELECT g, 'n' || g FROM generate_series(1, 1000) g" || fail "a new scoot table on the promoted server failed"
echo "    ok: old tables refused until TRUNCATE, new tables work"

echo "--- the promoted server keeps its scoot rows across a clean restart and a crash"
want=$(qs -c "SELECT (SELECT count(*) || '/' || sum(id) FROM sb_new) || ' ' || (SELECT count(*) || '/' || sum(id) FROM sb_scoot)")
sbctl restart -m fast || fail "restart of the promoted server failed: $(cat "$WORK/pg_ctl.out")"
got=$(qs -c "SELECT (SELECT count(*) || '/' || sum(id) FROM sb_new) || ' ' || (SELECT count(*) || '/' || sum(id) FROM sb_scoot)") ||
  fail "reading after the restart failed"
[ "$got" = "$want" ] || fail "after a clean restart: '$got', want '$want'"
qs -c "INSERT INTO sb_new SELECT g, 'm' FROM generate_series(1001, 1100) g" || fail "insert failed"
want=$(qs -c "SELECT (SELECT count(*) || '/' || sum(id) FROM sb_new) || ' ' || (SELECT count(*) || '/' || sum(id) FROM sb_scoot)")
runuser -u postgres -- "$BIN/pg_ctl" -D "$SB" -m immediate stop >/dev/null 2>&1 || fail "crash failed"
sbctl start || fail "start after the crash failed: $(cat "$WORK/pg_ctl.out")"
got=$(qs -c "SELECT (SELECT count(*) || '/' || sum(id) FROM sb_new) || ' ' || (SELECT count(*) || '/' || sum(id) FROM sb_scoot)") ||
  fail "reading after the crash failed"
[ "$got" = "$want" ] || fail "after a crash: '$got', want '$want'"
echo "    ok"

echo "--- the primary is unaffected"
r=$(q -c "SELECT count(*), sum(id) FROM sb_scoot")
[ "$r" = "150|11325" ] || fail "primary sb_scoot: '$r', want 150|11325"
echo "PASS"
