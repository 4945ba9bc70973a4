#!/usr/bin/env bash
# Installs pg_scoot into $PG_CONFIG's directories (`make install`; every script's build step).
#
#   scripts/install.sh             release build (`cargo pgrx package`), then install its files
#   scripts/install.sh --no-build  install the files of the last package build again
#
# SCOOT_PACKAGE_DIR: the package tree to install from (default: where `cargo pgrx package` puts it).
#
# Why not `cargo pgrx install`: it copies over the installed pg_scoot.so in place, truncating the
# file that every running server with pg_scoot preloaded has mapped, and the postmaster and its
# backends die of SIGBUS at their next call into it (the server is then down). PGXS's
# `make install` uses install(1), which unlinks the old file and writes a new one: running
# servers keep the old library until they restart. This does the same, file by file, from the
# package tree `cargo pgrx package` builds (target/release/pg_scoot-pg15/ mirrors the paths the
# files go to). sql-tests/scenarios/95_install_running.sh checks it against a running server.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
resolve_pg_config

build=1
case "${1:-}" in
  --no-build) build=0 ;;
  "") ;;
  *) die "usage: $0 [--no-build]" ;;
esac

if [ $build = 1 ]; then
  (cd "$SCOOT_REPO" && cargo pgrx package --pg-config "$PG_CONFIG")
fi
pkg=${SCOOT_PACKAGE_DIR:-$CARGO_TARGET_DIR/release/pg_scoot-pg$PG_MAJOR}
[ -f "$pkg$PG_PKGLIBDIR/pg_scoot.so" ] || die "no package build in $pkg (run $0 without --no-build)"
n=0
while IFS= read -r -d '' f; do
  rel=${f#"$pkg"}
  case "$rel" in *.so) mode=755 ;; *) mode=644 ;; esac
  install -D -m "$mode" "$f" "$rel"   # unlinks the old file first: running servers keep theirs
  n=$((n + 1))
done < <(find "$pkg" -type f -print0)
log "installed $n files from $pkg (pg_scoot.so into $PG_PKGLIBDIR)"
