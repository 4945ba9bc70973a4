#!/usr/bin/env bash
# `make installcheck`: run the pg_regress suite (sql/ + expected/) and the isolation specs
# (sql-tests/isolation/) against an ALREADY RUNNING server that has pg_scoot installed and in
# shared_preload_libraries. Connection: PGHOST / PGPORT / PGUSER (default: /var/run/postgresql,
# 5432, postgres). Like PGXS installcheck, pg_regress drops and re-creates database
# contrib_regression on that server (hence no --use-existing, which would need the database and the
# extension to exist already). Prints "N passed, M failed" last; non-zero exit if anything failed.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
resolve_pg_config
export PGHOST=${PGHOST:-/var/run/postgresql} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
"$PG_BINDIR/pg_isready" -q || die "no server at PGHOST=$PGHOST PGPORT=$PGPORT"
OUT=$SCOOT_REPO/target/scoot-installcheck
rm -rf "$OUT"; mkdir -p "$OUT"
P=0 F=0
prepare_regress_dir "$SCOOT_REPO/sql" "$SCOOT_REPO/expected"
if [ ${#REGRESS_TESTS[@]} -gt 0 ]; then
  SUITE_KEEP_DIR=$OUT/regress SUITE_SCHEDULE=$REGRESS_SCHEDULE regress_suite regress "$REGRESS_WORKDIR" existing "${REGRESS_TESTS[@]}"
  echo "pg_regress: $SUITE_PASSED passed, $SUITE_FAILED failed"
  P=$((P + SUITE_PASSED)) F=$((F + SUITE_FAILED))
fi
cp -r "$REGRESS_WORKDIR" "$OUT/regress" 2>/dev/null; rm -rf "$REGRESS_WORKDIR"
prepare_isolation_dir "$SCOOT_REPO/sql-tests/isolation"
if [ ${#ISOLATION_TESTS[@]} -gt 0 ]; then
  SUITE_KEEP_DIR=$OUT/isolation regress_suite isolation "$ISOLATION_WORKDIR" existing "${ISOLATION_TESTS[@]}"
  echo "isolation: $SUITE_PASSED passed, $SUITE_FAILED failed"
  P=$((P + SUITE_PASSED)) F=$((F + SUITE_FAILED))
fi
cp -r "$ISOLATION_WORKDIR" "$OUT/isolation" 2>/dev/null; rm -rf "$ISOLATION_WORKDIR"
echo "outputs: $OUT"
echo "$P passed, $F failed"
[ $F -eq 0 ]
