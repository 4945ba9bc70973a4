#!/usr/bin/env bash
# pg_scoot without shared_preload_libraries: CREATE EXTENSION and every scoot entry point must fail
# with a clear error (never crash), and a server started later without the preload must refuse to touch
# existing scoot tables while heap tables keep working.
set -euo pipefail
REPO=${SCOOT_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
DIR=$(mktemp -d /tmp/scoot_nopreload.XXXXXX)
chown postgres:postgres "$DIR"
cleanup() { bash "$REPO/scripts/cluster.sh" stop "$DIR" --remove >/dev/null 2>&1 || true; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. a cluster that never preloaded pg_scoot
SCOOT_PRELOAD=0 SCOOT_PORT=55497 bash "$REPO/scripts/cluster.sh" start "$DIR" >/dev/null 2>&1 || fail "cluster start"
eval "$(bash "$REPO/scripts/cluster.sh" env "$DIR")"
out=$(psql -X -d postgres -c "CREATE EXTENSION pg_scoot" 2>&1 || true)
echo "$out" | grep -q "pg_scoot is not loaded through shared_preload_libraries" || fail "CREATE EXTENSION without preload: $out"
psql -X -d postgres -Atc "SELECT count(*) FROM pg_extension WHERE extname = 'pg_scoot'" | grep -qx 0 || fail "extension was created"
psql -X -d postgres -Atc "SELECT 1" | grep -qx 1 || fail "server not usable"
cleanup

# 2. created with the preload, restarted without it
SCOOT_PORT=55497 bash "$REPO/scripts/cluster.sh" start "$DIR" >/dev/null 2>&1 || fail "cluster start (preloaded)"
eval "$(bash "$REPO/scripts/cluster.sh" env "$DIR")"
psql -X -q -d postgres -v ON_ERROR_STOP=1 -c "CREATE EXTENSION pg_scoot" \
  -c "CREATE TABLE s (id int PRIMARY KEY, v text) USING scoot" -c "INSERT INTO s VALUES (1, 'a')" \
  -c "CREATE TABLE h (id int) USING heap" -c "INSERT INTO h VALUES (1)" || fail "setup with preload"
conf="$DIR/data/scoot_cluster.conf"
sed -i "s/^shared_preload_libraries.*/shared_preload_libraries = ''/" "$conf"
runuser -u postgres -- "$SCOOT_BINDIR/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w restart -m fast >/dev/null || fail "restart"
for q in "SELECT * FROM s" "INSERT INTO s VALUES (2, 'b')" "SELECT * FROM scoot.arena" "CREATE TABLE s2 (id int) USING scoot"; do
  out=$(psql -X -d postgres -c "$q" 2>&1 || true)
  echo "$out" | grep -q "pg_scoot is not loaded through shared_preload_libraries" || fail "'$q' without preload: $out"
done
psql -X -d postgres -Atc "SELECT count(*) FROM h" | grep -qx 1 || fail "heap table lost"
psql -X -d postgres -Atc "SELECT pg_postmaster_start_time() IS NOT NULL" | grep -qx t || fail "server crashed"
echo "ok: missing preload gives clear errors and nothing crashes"
