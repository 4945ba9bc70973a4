#!/usr/bin/env bash
# gen_expected.sh - regenerate every heap-derived reference output.
#
#   1. expected/NAME.out        for sql/NAME.sql, except setup.sql and
#                               scoot_specific*.sql (their expected output
#                               comes from scoot itself).  Produced by
#                               pg_regress on a plain cluster in a database in
#                               which   CREATE ACCESS METHOD scoot TYPE TABLE
#                               HANDLER heap_tableam_handler   was run, so the
#                               files run unmodified ("USING scoot" = heap) and
#                               the output is byte-identical to what a correct
#                               scoot must produce.
#   2. sql-tests/heap-expected/NAME.out   for every sql/NAME.sql, with
#                               heap_baseline.sh (USING scoot stripped by sed):
#                               the plain-heap reference, also for the
#                               scoot_specific files.
#   3. sql-tests/isolation/expected/NAME.out  for every
#                               sql-tests/isolation/specs/NAME.spec, with
#                               pg_isolation_regress against the fake-AM
#                               database (no --load-extension).
#
# usage: sql-tests/gen_expected.sh [regress|heap|isolation ...]   (default: all)
# Needs PostgreSQL 15 server binaries (PGBIN, default
# /usr/lib/postgresql/15/bin) and postgresql-server-dev-15 for pg_regress /
# pg_isolation_regress.  Starts a throw-away cluster on port 55432.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/cluster.sh
. "$here/lib/cluster.sh"

PGXS_DIR=${PGXS_DIR:-$("$PGBIN/pg_config" --pkglibdir 2>/dev/null || pg_config --pkglibdir)/pgxs}
PG_REGRESS=${PG_REGRESS:-$PGXS_DIR/src/test/regress/pg_regress}
PG_ISOLATION_REGRESS=${PG_ISOLATION_REGRESS:-$PGXS_DIR/src/test/isolation/pg_isolation_regress}

parts=("$@")
if [ ${#parts[@]} -eq 0 ]; then parts=(regress heap isolation); fi

cluster_start
work=$(mktemp -d /tmp/scoot-gen-expected.XXXXXX)
trap '[ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$work"; cluster_stop' EXIT
status=0

regress_tests() {
    local f n
    for f in "$repo"/sql/*.sql; do
        n=$(basename "$f" .sql)
        case "$n" in setup|scoot_specific*) continue ;; esac
        echo "$n"
    done
}

for part in "${parts[@]}"; do
    case "$part" in
    regress)
        mkdir -p "$work/regress/sql" "$work/regress/expected" "$work/regress/out" "$repo/expected"
        mapfile -t tests < <(regress_tests)
        for n in "${tests[@]}"; do
            cp "$repo/sql/$n.sql" "$work/regress/sql/"
            : >"$work/regress/expected/$n.out"   # pg_regress aborts if one is missing
        done
        baseline_createdb scoot_regress_baseline fake-am
        # empty expected files: pg_regress reports every test as failed; we
        # only want its results/ directory
        "$PG_REGRESS" --use-existing --dbname=scoot_regress_baseline \
            --inputdir="$work/regress" --outputdir="$work/regress/out" \
            "${tests[@]}" >"$work/regress/pg_regress.log" 2>&1 || true
        for n in "${tests[@]}"; do
            if [ -f "$work/regress/out/results/$n.out" ]; then
                cp "$work/regress/out/results/$n.out" "$repo/expected/$n.out"
                echo "expected/$n.out"
            else
                echo "!! no result for $n" >&2; status=1
            fi
        done
        ;;
    heap)
        BASELINE_REUSE=1 "$here/heap_baseline.sh" --outdir "$here/heap-expected" "$repo"/sql/*.sql || status=1
        ;;
    isolation)
        iso="$here/isolation"
        mkdir -p "$iso/expected" "$work/iso/out"
        mapfile -t specs < <(cd "$iso/specs" && ls -- *.spec | sed 's/\.spec$//')
        # start from empty expected files so every test produces a fresh result
        mkdir -p "$work/iso/in/expected"
        for n in "${specs[@]}"; do : >"$work/iso/in/expected/$n.out"; done
        ln -s "$iso/specs" "$work/iso/in/specs"
        baseline_createdb isolation_regression fake-am
        "$PG_ISOLATION_REGRESS" --use-existing --dbname=isolation_regression \
            --inputdir="$work/iso/in" --outputdir="$work/iso/out" \
            "${specs[@]}" >"$work/iso/pg_isolation_regress.log" 2>&1 || true
        for n in "${specs[@]}"; do
            if [ -f "$work/iso/out/results/$n.out" ]; then
                cp "$work/iso/out/results/$n.out" "$iso/expected/$n.out"
                echo "sql-tests/isolation/expected/$n.out"
            else
                echo "!! no isolation result for $n" >&2; status=1
            fi
        done
        ;;
    *) echo "unknown part: $part" >&2; exit 2 ;;
    esac
done
exit $status
