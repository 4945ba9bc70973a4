#!/usr/bin/env bash
# pgbench: heap vs scoot in ONE throw-away cluster (`make bench`). See bench/README.md.
#
#   setup + build/install -> cluster -> pgbench -i -s $BENCH_SCALE into bench_heap (heap) and
#   bench_scoot (PGOPTIONS default_table_access_method=scoot) -> for mode in TPC-B, select-only;
#   clients 1 4 8: alternate heap/scoot runs (-j 2 -M prepared -T $BENCH_SECONDS --log)
#   -> bench/results/latest.md + latest.json (TPS, latency avg + p99, storage, machine info)
#
# Knobs: BENCH_SECONDS (30), BENCH_SCALE (10), BENCH_CLIENTS ("1 4 8"), BENCH_MODES ("tpcb select"),
#        BENCH_ENGINES ("heap scoot"), BENCH_THREADS (2), SKIP_BUILD=1, SKIP_SETUP=1,
#        SCOOT_EXTRA_CONF (extra postgresql.conf lines, e.g. "synchronous_commit = off").
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SCOOT_REPO"

SECS=${BENCH_SECONDS:-30}
SCALE=${BENCH_SCALE:-10}
CLIENTS=${BENCH_CLIENTS:-1 4 8}
MODES=${BENCH_MODES:-tpcb select}
ENGINES=${BENCH_ENGINES:-heap scoot}
THREADS=${BENCH_THREADS:-2}
RES=$SCOOT_REPO/bench/results
TMP=$RES/tmp

if [ "${SKIP_SETUP:-0}" != 1 ]; then step "setup"; bash scripts/setup.sh; fi
step "build + install (release)"
build_install
case " $ENGINES " in
  *" scoot "*) ;;
  *) [ -f "$PG_PKGLIBDIR/pg_scoot.so" ] || export SCOOT_PRELOAD=0 ;;   # heap-only without the extension
esac

rm -rf "$TMP"; mkdir -p "$TMP"
step "start a throw-away cluster"
cluster_start
PGBENCH=$PG_BINDIR/pgbench

{
  echo "postgres=$(psql_q -d postgres -c 'SHOW server_version')"
  echo "git=$(git -C "$SCOOT_REPO" rev-parse --short HEAD 2>/dev/null || echo none)$(git -C "$SCOOT_REPO" status --porcelain 2>/dev/null | grep -q . && echo ' (dirty)')"
  echo "scale=$SCALE"
  echo "seconds=$SECS"
  echo "threads=$THREADS"
  echo "query_mode=prepared"
  echo "engines=$ENGINES"
  echo "settings=$(psql_q -d postgres -F= -R', ' -c "SELECT name, current_setting(name) FROM pg_settings
      WHERE name IN ('shared_buffers','max_connections','synchronous_commit','fsync','wal_level','scoot.arena_size','scoot.block_size','max_wal_size')
      ORDER BY name")"
} >"$TMP/meta.env"

measure_storage() {   # measure_storage <when>
  local when=$1 e
  # per table: heap's table bytes (pg_table_size) vs the arena memory the scoot table's blocks
  # hold (blocks * block_size) and the bytes its rows occupy in them
  : >"$TMP/tables-$when.tsv"
  for t in pgbench_accounts pgbench_branches pgbench_tellers pgbench_history lineitem_like; do
    hb=$(psql_q -d bench_heap -c "SELECT pg_table_size(to_regclass('$t'))" 2>/dev/null || true)
    sb=""; sr=""; sp=""
    case " $ENGINES " in *" scoot "*)
      read -r sb sr sp <<<"$(psql_q -d bench_scoot -F' ' -c "SELECT t.blocks::bigint * a.block_size, t.bytes,
             pg_table_size('$t') FROM scoot.arena_tables t, scoot.arena a WHERE t.relation = to_regclass('$t')" 2>/dev/null || true)" ;;
    esac
    printf '%s\t%s\t%s\t%s\t%s\n' "$t" "${hb:-}" "${sb:-}" "${sr:-}" "${sp:-}" >>"$TMP/tables-$when.tsv"
  done
  for e in $ENGINES; do
    psql_q -d "bench_$e" -F' ' -c "SELECT coalesce(sum(pg_table_size(c.oid)), 0), coalesce(sum(pg_indexes_size(c.oid)), 0),
             coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
             WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
               AND c.relname IN ('pgbench_accounts','pgbench_branches','pgbench_tellers','pgbench_history')" \
      >"$TMP/storage-$when-$e.txt" 2>&1 || true
  done
  case " $ENGINES " in *" scoot "*)
    psql_q -d bench_scoot -c "SELECT row_to_json(a) FROM scoot.arena a" >"$TMP/arena-$when.txt" 2>&1 ||
      log "scoot.arena not available: $(head -c 200 "$TMP/arena-$when.txt")" ;;
  esac
}

for e in $ENGINES; do
  step "initialise bench_$e: pgbench -i -s $SCALE (default_table_access_method=$e)"
  psql_q -d postgres -c "CREATE DATABASE bench_$e"
  [ "$e" = scoot ] && psql_q -d bench_scoot -c "CREATE EXTENSION IF NOT EXISTS pg_scoot"
  t1=$SECONDS
  PGOPTIONS="-c default_table_access_method=$e" "$PGBENCH" -i -q -s "$SCALE" "bench_$e" 2>&1 | tail -n 2
  echo "init_seconds_$e=$((SECONDS - t1))" >>"$TMP/meta.env"
  ams=$(psql_q -d "bench_$e" -c "SELECT string_agg(DISTINCT a.amname, ',') FROM pg_class c JOIN pg_am a ON a.oid = c.relam
                                 WHERE c.relname LIKE 'pgbench_%' AND c.relkind = 'r'")
  [ "$ams" = "$e" ] || die "bench_$e: pgbench tables use access method(s) '$ams', expected '$e'"
done
# a TPC-H lineitem-like table (bigint, 4 x numeric(15,2), 2 x char(1), date) of $BENCH_LINEITEM_ROWS
# rows with lineitem's value ranges, in both databases: the compact column encodings' showcase
LI_ROWS=${BENCH_LINEITEM_ROWS:-3000000}
for e in $ENGINES; do
  step "lineitem-like table: $LI_ROWS rows in bench_$e"
  psql_q -d "bench_$e" -c "DROP TABLE IF EXISTS lineitem_like" \
    -c "CREATE TABLE lineitem_like (l_orderkey bigint, l_quantity numeric(15,2), l_extendedprice numeric(15,2),
          l_discount numeric(15,2), l_tax numeric(15,2), l_returnflag char(1), l_linestatus char(1),
          l_shipdate date) USING $e" \
    -c "INSERT INTO lineitem_like SELECT g / 4, 1 + (g * 7) % 50,
          round(((1 + (g * 7) % 50) * (900 + (g * 13) % 100000 / 100.0))::numeric, 2),
          ((g * 3) % 11) / 100.0, ((g * 5) % 9) / 100.0, (ARRAY['A','N','R'])[1 + g % 3],
          (ARRAY['O','F'])[1 + g % 2], date '1992-01-01' + (g % 2500)
        FROM generate_series(1, $LI_ROWS) g"
done
psql_q -d postgres -c CHECKPOINT
measure_storage after_init

: >"$TMP/runs.tsv"
i=0
for mode in $MODES; do
  case "$mode" in tpcb) mflag=() ;; select) mflag=(-S) ;; *) die "unknown mode $mode (tpcb|select)" ;; esac
  if [ "$mode" = tpcb ]; then
    for e in $ENGINES; do
      psql_q -d "bench_$e" -c "VACUUM ANALYZE" || log "VACUUM ANALYZE failed in bench_$e (continuing)"
    done
  fi
  for c in $CLIENTS; do
    # alternate which engine goes first, so neither always runs on a "warmer" machine
    order=$ENGINES
    [ $((i % 2)) = 1 ] && order=$(echo "$ENGINES" | tr ' ' '\n' | tac | tr '\n' ' ')
    i=$((i + 1))
    for e in $order; do
      name="$mode-c$c-$e"
      step "$name: pgbench ${mflag[*]:-} -c $c -j $THREADS -T $SECS -M prepared bench_$e"
      psql_q -d postgres -c CHECKPOINT
      rc=0
      "$PGBENCH" "${mflag[@]}" -c "$c" -j "$THREADS" -T "$SECS" -M prepared \
        --log --log-prefix="$TMP/$name.log" "bench_$e" >"$TMP/$name.out" 2>&1 || rc=$?
      grep -E '^(tps|latency average|number of failed)' "$TMP/$name.out" | sed 's/^/    /' || true
      [ $rc = 0 ] || { log "pgbench exit $rc:"; tail -n 5 "$TMP/$name.out"; }
      printf '%s %s %s %s %s\n' "$mode" "$c" "$e" "$rc" "$name" >>"$TMP/runs.tsv"
    done
  done
done
measure_storage after_runs
if grep -qE 'PANIC|TRAP|terminated by signal' "$SCOOT_CLUSTER_DIR/server.log"; then
  log "server log shows a crash:"; grep -nE -B2 -A5 'PANIC|TRAP|terminated by signal' "$SCOOT_CLUSTER_DIR/server.log" | head -40
fi
cp "$SCOOT_CLUSTER_DIR/server.log" "$TMP/server.log" 2>/dev/null || true

step "report"
rc=0
python3 "$SCOOT_REPO/bench/pgbench_report.py" --tmp "$TMP" --out "$RES/latest" || rc=$?
echo
echo "written: $RES/latest.md $RES/latest.json (raw logs: $TMP)"
exit $rc
