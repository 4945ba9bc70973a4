#!/usr/bin/env bash
# Bulk-load benchmark (`make bench-load`): heap vs scoot in ONE throw-away cluster, the same
# loads alternated engine by engine, LOAD_REPS rounds (median reported):
#   copy_narrow    COPY of LOAD_ROWS bigint values (`COPY ... FROM PROGRAM 'seq 1 N'`)
#   copy_lineitem  COPY of LOAD_LINEITEM lineitem-like rows (bigint, int, 4 x numeric(15,2),
#                  2 x char(1), date) from a CSV file written once
#   insert_select  INSERT ... SELECT generate_series of LOAD_INSERT bigint values (row by row:
#                  PostgreSQL hands COPY's rows to the table AM in batches, INSERT's one at a time)
# Every load goes into a freshly created table; its row count and sum are checked.
# Results: bench/results/load.{md,json}. Knobs: LOAD_REPS (3), LOAD_ROWS (10000000),
# LOAD_LINEITEM (2000000), LOAD_INSERT (2000000), SKIP_SETUP=1, SKIP_BUILD=1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SCOOT_REPO"

REPS=${LOAD_REPS:-3}
ROWS=${LOAD_ROWS:-10000000}
LI=${LOAD_LINEITEM:-2000000}
INS=${LOAD_INSERT:-2000000}
RES=$SCOOT_REPO/bench/results

if [ "${SKIP_SETUP:-0}" != 1 ]; then step "setup"; bash scripts/setup.sh; fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then step "build + install (release)"; build_install; fi
resolve_pg_config
step "start a throw-away cluster"
SCOOT_ARENA_MB=${SCOOT_ARENA_MB:-4096} cluster_start
q() { psql_q -d postgres "$@"; }
q -c "CREATE EXTENSION IF NOT EXISTS pg_scoot"
CSV=$SCOOT_CLUSTER_DIR/lineitem.csv
LI_COLS="l_orderkey bigint, l_linenumber int, l_quantity numeric(15,2), l_extendedprice numeric(15,2),
  l_discount numeric(15,2), l_tax numeric(15,2), l_returnflag char(1), l_linestatus char(1), l_shipdate date"
q -c "COPY (SELECT g / 4, g % 7, 1 + g % 50, (g % 100000) / 100.0 + 900, (g % 11) / 100.0, (g % 9) / 100.0,
  chr(65 + g % 3), chr(70 + g % 2), date '1992-01-01' + g % 2500 FROM generate_series(1, $LI) g) TO '$CSV' (FORMAT csv)"

ms() { echo $(( $(date +%s%N) / 1000000 )); }
TSV=$(mktemp)
run() {   # run <load> <engine>: prints elapsed ms; checks the loaded rows
  local load=$1 e=$2 t0 t1 want got
  case $load in
    copy_narrow)
      q -c "DROP TABLE IF EXISTS ld_$e" -c "CREATE TABLE ld_$e (id bigint NOT NULL) USING $e"
      t0=$(ms); q -c "COPY ld_$e FROM PROGRAM 'seq 1 $ROWS'"; t1=$(ms)
      want="$ROWS|$((ROWS * (ROWS + 1) / 2))"; got=$(q -c "SELECT count(*), sum(id) FROM ld_$e") ;;
    insert_select)
      q -c "DROP TABLE IF EXISTS ld_$e" -c "CREATE TABLE ld_$e (id bigint NOT NULL) USING $e"
      t0=$(ms); q -c "INSERT INTO ld_$e SELECT generate_series(1, $INS)"; t1=$(ms)
      want="$INS|$((INS * (INS + 1) / 2))"; got=$(q -c "SELECT count(*), sum(id) FROM ld_$e") ;;
    copy_lineitem)
      q -c "DROP TABLE IF EXISTS li_$e" -c "CREATE TABLE li_$e ($LI_COLS) USING $e"
      t0=$(ms); q -c "COPY li_$e FROM '$CSV' (FORMAT csv)"; t1=$(ms)
      want=$(q -c "SELECT count(*), sum(l_extendedprice), max(l_shipdate) FROM li_heap_ref")
      got=$(q -c "SELECT count(*), sum(l_extendedprice), max(l_shipdate) FROM li_$e") ;;
  esac
  [ "$got" = "$want" ] || die "$load on $e: got $got, want $want"
  echo $((t1 - t0))
}
q -c "CREATE TABLE li_heap_ref ($LI_COLS) USING heap" -c "COPY li_heap_ref FROM '$CSV' (FORMAT csv)"

LOADS="copy_narrow copy_lineitem insert_select"
for r in $(seq "$REPS"); do
  for load in $LOADS; do
    for e in heap scoot; do
      t=$(run "$load" "$e")
      printf '%s\t%s\t%s\t%s\n' "$load" "$e" "$r" "$t" >>"$TSV"
      echo "round $r: $load on $e: $t ms"
    done
  done
done
q -c "DROP TABLE IF EXISTS ld_heap, ld_scoot, li_heap, li_scoot, li_heap_ref"

step "report -> bench/results/load.{md,json}"
GIT=$(git rev-parse --short HEAD)$(git status --porcelain --untracked-files=no | grep -q . && echo ' (dirty)' || true)
python3 - "$TSV" "$RES" "$GIT" "$ROWS" "$LI" "$INS" "$REPS" <<'EOF'
import json, statistics, sys, collections
tsv, res, git, rows, li, ins, reps = sys.argv[1:]
t = collections.defaultdict(list)
for line in open(tsv):
    load, e, r, ms = line.split('\t')
    t[(load, e)].append(int(ms))
what = {
    'copy_narrow': f'COPY {int(rows):,} bigint rows (seq)',
    'copy_lineitem': f'COPY {int(li):,} lineitem-like rows (CSV, 9 columns)',
    'insert_select': f'INSERT ... SELECT {int(ins):,} bigint rows',
}
out = {'git': git, 'reps': int(reps), 'loads': {}}
lines = [
    '# Bulk load, heap vs scoot (`make bench-load`)', '',
    f'git {git}; one throw-away cluster, loads alternated heap/scoot, median of {reps} rounds, '
    'each into a freshly created table (row count and sum checked). Lower is better; '
    '`heap/scoot` > 1: scoot faster.', '',
    '| load | heap ms | scoot ms | heap/scoot | scoot rows/s |', '|---|---:|---:|---:|---:|']
n = {'copy_narrow': int(rows), 'copy_lineitem': int(li), 'insert_select': int(ins)}
for load in ['copy_narrow', 'copy_lineitem', 'insert_select']:
    h = statistics.median(t[(load, 'heap')]); s = statistics.median(t[(load, 'scoot')])
    out['loads'][load] = {'heap_ms': t[(load, 'heap')], 'scoot_ms': t[(load, 'scoot')],
                          'heap_median_ms': h, 'scoot_median_ms': s}
    lines.append(f'| {what[load]} | {h:,.0f} | {s:,.0f} | {h / s:.2f}x | {n[load] / s * 1000:,.0f} |')
open(f'{res}/load.md', 'w').write('\n'.join(lines) + '\n')
json.dump(out, open(f'{res}/load.json', 'w'), indent=1)
print('\n'.join(lines))
EOF
rm -f "$TSV"
