#!/usr/bin/env bash
# `make bench-floor`: how far above heap can any table storage take pgbench TPC-B on this machine?
# One throw-away cluster, pgbench -i -s $BENCH_SCALE into bench_heap and bench_scoot, then per client
# count: TPC-B on heap, TPC-B on scoot, and bench/oltp_floor/floor.sql on heap: TPC-B's statements and
# round trips with every table access but the history INSERT removed (a storage engine whose
# reads and updates cost nothing cannot beat it; it still commits with a WAL flush, as
# synchronous_commit = on requires). Writes bench/results/oltp_floor.{md,tsv}.
# Knobs: BENCH_SECONDS (20), BENCH_SCALE (10), BENCH_CLIENTS ("1 4 8"), SKIP_SETUP, SKIP_BUILD.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SCOOT_REPO"
SECS=${BENCH_SECONDS:-20} SCALE=${BENCH_SCALE:-10} CLIENTS=${BENCH_CLIENTS:-1 4 8}
RES=$SCOOT_REPO/bench/results
if [ "${SKIP_SETUP:-0}" != 1 ]; then step "setup"; bash scripts/setup.sh; fi
step "build + install (release)"
build_install
step "start a throw-away cluster"
cluster_start
PGBENCH=$PG_BINDIR/pgbench
for e in heap scoot; do
  psql_q -d postgres -c "CREATE DATABASE bench_$e"
  [ "$e" = scoot ] && psql_q -d bench_scoot -c "CREATE EXTENSION IF NOT EXISTS pg_scoot"
  PGOPTIONS="-c default_table_access_method=$e" "$PGBENCH" -i -q -s "$SCALE" "bench_$e" 2>&1 | tail -n 1
  psql_q -d "bench_$e" -c "VACUUM ANALYZE"
done
tps() { grep -E '^tps' "$1" | sed -E 's/^tps = ([0-9.]+).*/\1/'; }
out=$RES/oltp_floor.tsv
printf 'clients\theap_tpcb\tscoot_tpcb\tfloor\n' >"$out"
for c in $CLIENTS; do
  for run in heap scoot floor; do
    psql_q -d postgres -c CHECKPOINT
    case $run in
      heap) args=(bench_heap) ;;
      scoot) args=(bench_scoot) ;;
      floor) args=(-f bench/oltp_floor/floor.sql bench_heap) ;;
    esac
    step "$run: pgbench -c $c -j 2 -T $SECS -M prepared ${args[*]}"
    "$PGBENCH" -n -c "$c" -j 2 -T "$SECS" -M prepared "${args[@]}" >"/tmp/floor-$run-$c.out" 2>&1
    eval "t_$run=$(tps "/tmp/floor-$run-$c.out")"
  done
  printf '%s\t%s\t%s\t%s\n' "$c" "$t_heap" "$t_scoot" "$t_floor" >>"$out"
done
sc=$(psql_q -d postgres -c "SELECT current_setting('synchronous_commit') || ', fsync ' || current_setting('fsync')")
python3 - "$out" "$RES/oltp_floor.md" "$(git rev-parse --short HEAD)" "$SECS" "$SCALE" "$sc" <<'PY'
import sys
tsv, md, git, secs, scale, sc = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(tsv)][1:]
with open(md, "w") as f:
    f.write("# pgbench TPC-B: heap, scoot and the no-storage floor (`make bench-floor`)\n\n")
    f.write(f"git {git}, scale {scale}, {secs} s per run, -M prepared, -j 2, synchronous_commit {sc}; one cluster.\n")
    f.write("*floor*: `bench/oltp_floor/floor.sql` on the heap database (TPC-B's statements and round trips, "
            "no table read or updated, the history INSERT and the commit's WAL flush kept): the TPS no storage "
            "engine can exceed here.\n\n")
    f.write("| clients | heap TPS | scoot TPS | scoot/heap | floor TPS | floor/heap |\n|---:|---:|---:|---:|---:|---:|\n")
    for c, h, s, fl in rows:
        h, s, fl = float(h), float(s), float(fl)
        f.write(f"| {c} | {h:,.0f} | {s:,.0f} | {s/h:.2f}x | {fl:,.0f} | {fl/h:.2f}x |\n")
print(open(md).read())
PY
