#!/usr/bin/env bash
# heap_baseline.sh - run sql/*.sql test files against PLAIN PostgreSQL heap
# (no pg_scoot), echoing the way pg_regress does, so the output can be diffed
# against what the same file produces on scoot.
#
# usage: sql-tests/heap_baseline.sh [--fake-am] [--outdir DIR] [FILE.sql ...]
#
#   default FILEs : sql/*.sql
#   default DIR   : sql-tests/heap-expected        (NAME.out per file)
#   (default)     : a copy of each file is rewritten with sed: "USING scoot"
#                   clauses are removed, "default_table_access_method = scoot" and
#                   "SET ACCESS METHOD scoot"
#                   becomes heap, CREATE EXTENSION pg_scoot is dropped, and
#                   the session runs with default_table_access_method = heap.
#   --fake-am     : the file runs unmodified in a database where
#                     CREATE ACCESS METHOD scoot TYPE TABLE HANDLER heap_tableam_handler
#                   was executed, i.e. "USING scoot" means heap.  The output then
#                   is byte-identical to what a correct scoot must produce.
#
# A throw-away cluster (run as the `postgres` OS user when we are root) is
# started on port $BASELINE_PORT (55432) and stopped at exit.  Set
# BASELINE_REUSE=1 to use the server in PGHOST/PGPORT/PGUSER instead.
# Each file runs in a freshly created database.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/cluster.sh
. "$here/lib/cluster.sh"

mode=sed
outdir="$here/heap-expected"
files=()
while [ $# -gt 0 ]; do
    case "$1" in
        --fake-am) mode=fake-am ;;
        --outdir) outdir=$2; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) files+=("$1") ;;
    esac
    shift
done
if [ ${#files[@]} -eq 0 ]; then files=("$repo"/sql/*.sql); fi
mkdir -p "$outdir"

if [ "${BASELINE_REUSE:-0}" != 1 ]; then cluster_start; fi

work=$(mktemp -d /tmp/heap_baseline.XXXXXX)
trap 'rm -rf "$work"; cluster_stop' EXIT

# the environment pg_regress gives psql
export PGTZ=PST8PDT PGDATESTYLE='Postgres, MDY' PGAPPNAME=pg_regress
db=scoot_heap_baseline
status=0
for f in "${files[@]}"; do
    name=$(basename "$f" .sql)
    in="$work/$name.sql"
    if [ "$mode" = fake-am ]; then
        cp "$f" "$in"
        # setup.sql's CREATE EXTENSION is replaced by the fake AM
        sed -i -E '/^[[:space:]]*CREATE EXTENSION[^;]*pg_scoot[^;]*;/Id' "$in"
        opts=""
    else
        sed -E \
            -e '/^[[:space:]]*CREATE EXTENSION[^;]*pg_scoot[^;]*;/Id' \
            -e 's/[[:space:]]+USING[[:space:]]+scoot\b//Ig' \
            -e "s/(default_table_access_method[[:space:]]*(=|TO)[[:space:]]*)'?scoot\b'?/\\1heap/Ig" \
            -e "s/(SET[[:space:]]+ACCESS[[:space:]]+METHOD[[:space:]]+)scoot\b/\\1heap/Ig" \
            "$f" >"$in"
        opts="-c default_table_access_method=heap"
    fi
    baseline_createdb "$db" "$mode"
    PGOPTIONS="$opts" "$PGBIN/psql" -X -a -q -d "$db" \
        -v HIDE_TABLEAM=on -v HIDE_TOAST_COMPRESSION=on \
        <"$in" >"$outdir/$name.out" 2>&1 || status=1
    if grep -q -E '^(FATAL|PANIC):|server closed the connection' "$outdir/$name.out"; then
        echo "!! $name: server crash/FATAL in output" >&2; status=1
    fi
    printf '%-28s -> %s\n' "$name" "$outdir/$name.out"
done
"$PGBIN/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null
exit $status
