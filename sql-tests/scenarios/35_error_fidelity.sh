#!/usr/bin/env bash
# Errors read exactly as on heap whatever the server's environment: sql/error_context.sql (CONTEXT
# lines of functions called from index expressions, constraint fields, lock-wait context, errors in
# ANALYZE/VACUUM FULL, ...) must give the heap-generated expected/error_context.out on a server
# started with RUST_BACKTRACE=full in its environment and on one started without it. (Before the
# fix, the first showed a Rust backtrace with build paths as DETAIL and both lost CONTEXT lines.)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=${SCOOT_REPO:-$(cd "$HERE/../.." && pwd)}
. "$REPO/scripts/lib.sh"
resolve_pg_config
fail() { echo "FAIL: $*"; exit 1; }
rc_all=0
for mode in with without; do
  DIR=$(mktemp -d /tmp/scoot_errfid.XXXXXX); chown postgres:postgres "$DIR"
  W=$(pg_tmpdir scoot_errfid_regress)
  if [ $mode = with ]; then envcmd=(env RUST_BACKTRACE=full RUST_LIB_BACKTRACE=1); else envcmd=(env -u RUST_BACKTRACE -u RUST_LIB_BACKTRACE); fi
  "${envcmd[@]}" SCOOT_PORT=55493 SCOOT_EXTRA_CONF="max_prepared_transactions = 5" \
    bash "$REPO/scripts/cluster.sh" start "$DIR" >/dev/null 2>&1 || fail "cluster start ($mode RUST_BACKTRACE)"
  eval "$(bash "$REPO/scripts/cluster.sh" env "$DIR")"
  pid=$(head -1 "$DIR/data/postmaster.pid")
  if [ $mode = with ]; then
    tr '\0' '\n' <"/proc/$pid/environ" | grep -q '^RUST_BACKTRACE=full' || fail "server environment lacks RUST_BACKTRACE"
  fi
  mkdir -p "$W/sql" "$W/expected"
  cp "$REPO/sql/error_context.sql" "$W/sql/"; cp "$REPO/expected/error_context.out" "$W/expected/"
  chown -R postgres: "$W"
  psql -X -qAt -d postgres -c "CREATE DATABASE errfid" -c "\\c errfid" -c "CREATE EXTENSION pg_scoot" >/dev/null || fail "setup db"
  out=$(cd "$W" && as_postgres "$PG_REGRESS" --use-existing --host="$PGHOST" --port="$PGPORT" --user=postgres \
          --dbname=errfid --inputdir="$W" --outputdir="$W" --bindir="$PG_BINDIR" error_context 2>&1)
  if grep -q "1 of 1 tests failed\|FAILED\|failed" <<<"$out"; then
    echo "FAIL ($mode RUST_BACKTRACE in the server's environment):"; cat "$W/regression.diffs"; rc_all=1
  else
    echo "ok: error_context identical to heap's, server started $mode RUST_BACKTRACE"
  fi
  bash "$REPO/scripts/cluster.sh" stop "$DIR" --remove >/dev/null 2>&1
  rm -rf "$W"
done
exit $rc_all
