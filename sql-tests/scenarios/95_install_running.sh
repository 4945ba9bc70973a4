#!/usr/bin/env bash
# Installing pg_scoot while a server runs with it preloaded (`make install`, an upgrade) must not
# take the server down. `cargo pgrx install` copied over pg_scoot.so in place: the postmaster and
# every backend had that file mapped, died of SIGBUS at their next call into it, and the server
# stayed down. scripts/install.sh replaces the file (install(1) unlinks, then writes a new inode),
# as PGXS does. Here the installed files are installed again (the same bytes, from a package tree
# built from them) under a session that is in the middle of using scoot tables; the session, the
# postmaster and new sessions must carry on, on the old (now deleted) mapping.
set -euo pipefail
REPO=${SCOOT_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$REPO/scripts/lib.sh"
resolve_pg_config
fail() { echo "FAIL: $*"; exit 1; }

so=$PG_PKGLIBDIR/pg_scoot.so
ext=$("$PG_CONFIG" --sharedir)/extension
pkg=$(mktemp -d /tmp/scoot_pkg.XXXXXX)
sess=
cleanup() {
  exec 7>&- 2>/dev/null || true
  [ -n "$sess" ] && kill "$sess" 2>/dev/null || true
  rm -rf "$pkg"
}
trap cleanup EXIT
install -D -m 755 "$so" "$pkg$so"
for f in "$ext"/pg_scoot.control "$ext"/pg_scoot--*.sql; do install -D -m 644 "$f" "$pkg$f"; done

psql -X -q -v ON_ERROR_STOP=1 \
  -c "CREATE TABLE inst (id int PRIMARY KEY, v text) USING scoot" \
  -c "INSERT INTO inst SELECT g, 'v' || g FROM generate_series(1, 10000) g" || fail "setup"
datadir=$(psql -X -Atc "SHOW data_directory")
pm=$(head -1 "$datadir/postmaster.pid")
grep -q " $so\$" "/proc/$pm/maps" || fail "the postmaster (pid $pm) does not map $so"

# a session that lives across the install, mid-transaction on a scoot table
mkfifo "$pkg/in"
psql -X -q -At -v ON_ERROR_STOP=1 <"$pkg/in" >"$pkg/out" 2>&1 &
sess=$!
exec 7>"$pkg/in"
echo "BEGIN; INSERT INTO inst VALUES (0, 'zero'); SELECT 'before', count(*) FROM inst;" >&7
for _ in $(seq 100); do grep -q '^before|' "$pkg/out" && break; sleep 0.1; done
grep -qx 'before|10001' "$pkg/out" || fail "session before the install: $(cat "$pkg/out")"

ino=$(stat -c %i "$so")
SCOOT_PACKAGE_DIR=$pkg bash "$REPO/scripts/install.sh" --no-build || fail "scripts/install.sh"
[ "$(stat -c %i "$so")" != "$ino" ] || fail "$so was overwritten in place (same inode)"
cmp -s "$so" "$pkg$so" || fail "the installed library differs from the package's"
grep -q " $so (deleted)\$" "/proc/$pm/maps" || fail "the postmaster no longer maps the replaced library"

# the session carries on (its transaction too), through code of the old mapping
echo "INSERT INTO inst SELECT g, 'w' FROM generate_series(10001, 20000) g; COMMIT; SELECT 'after', count(*), sum(id) FROM inst;" >&7
exec 7>&-
wait "$sess" || fail "the session died: $(cat "$pkg/out")"
sess=
grep -qx 'after|20001|200010000' "$pkg/out" || fail "session after the install: $(cat "$pkg/out")"
[ "$(head -1 "$datadir/postmaster.pid")" = "$pm" ] && kill -0 "$pm" || fail "the postmaster is gone"
# new sessions are forked from the same postmaster, library and all
psql -X -Atc "SELECT count(*), sum(length(v)) FROM inst WHERE id > 10000" | grep -qx '10000|10000' ||
  fail "a new session cannot read the table"
psql -X -Atc "SELECT live_rows FROM scoot.arena_tables WHERE relation = 'inst'::regclass" | grep -qx 20001 ||
  fail "a new session cannot query scoot's views"
echo "ok: scripts/install.sh replaced pg_scoot.so under a running server (inode $ino -> $(stat -c %i "$so")); server, session and new sessions carried on"
