#!/usr/bin/env bash
# CH-benCHmark (`make bench-ch`): go-tpc's `ch` workload — TPC-C transactions on OLTP threads and
# the 22 CH analytic queries (TPC-H adapted to the TPC-C schema) on an analytic thread, at the same
# time on the same data — on heap and on scoot, one throw-away cluster, one after the other in the
# same run. The scoot database has `default_table_access_method = scoot` and `scoot.olap = on`
# (database settings): its analytic queries read OLAP snapshot images; TPC-C's read-write
# transactions read live rows (scoot.olap never applies to them). The optional scoot_nice engine is scoot
# with `scoot.olap_nice` (CH_NICE, 10) as well: backends reading OLAP snapshots run at that nice
# value, so the kernel prefers the OLTP backends when the CPUs are short.
# Results: bench/results/ch.{md,json}; raw go-tpc output in bench/results/tmp-ch/ (git-ignored).
# `make bench-tpcc` runs it with CH_AP_THREADS=0 and CH_RESULT=tpcc: TPC-C alone, the transactional
# side without the analytic thread competing for the CPUs (bench/results/tpcc.{md,json}).
# Knobs: CH_RESULT (ch: the results' file name), CH_WAREHOUSES (1), CH_THREADS (2 OLTP), CH_AP_THREADS (1 analytic), CH_TIME (120s per
# engine), CH_ENGINES ("heap scoot"; add scoot_nice for the third run), CH_NICE (10), GO_TPC (the go-tpc binary; installed with `go install` when
# missing), SKIP_SETUP, SKIP_BUILD.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SCOOT_REPO"
if [ "${SKIP_SETUP:-0}" != 1 ]; then step "setup"; bash scripts/setup.sh; fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then step "build + install (release)"; build_install; fi
GO_TPC=${GO_TPC:-$HOME/go/bin/go-tpc}
if [ ! -x "$GO_TPC" ]; then
  step "go install github.com/pingcap/go-tpc/cmd/go-tpc@v1.0.9"
  command -v go >/dev/null || die "go is needed to build go-tpc"
  go install github.com/pingcap/go-tpc/cmd/go-tpc@v1.0.9
fi
W=${CH_WAREHOUSES:-1} TH=${CH_THREADS:-2} AP=${CH_AP_THREADS:-1} T=${CH_TIME:-120s}
OUTD=$SCOOT_REPO/bench/results/tmp-ch
mkdir -p "$OUTD"
rm -f "$OUTD"/run-*.log "$OUTD"/meta-*.env   # the report reads the engines of this run only
step "cluster (TCP on 127.0.0.1 for go-tpc)"
export SCOOT_LISTEN=127.0.0.1 SCOOT_ARENA_MB=${SCOOT_ARENA_MB:-4096}
export SCOOT_EXTRA_CONF="shared_buffers = '2GB'
max_wal_size = '8GB'
max_connections = 100
jit = off"
cluster_start
GT=("$GO_TPC" -d postgres -H 127.0.0.1 -P "$PGPORT" -U postgres --conn-params sslmode=disable)
for e in ${CH_ENGINES:-heap scoot}; do
  db=ch_$e am=${e%%_*}
  step "$e: prepare ($W warehouse(s))"
  "$PG_BINDIR/psql" -X -q -d postgres -c "CREATE DATABASE $db"
  if [ "$am" = scoot ]; then
    "$PG_BINDIR/psql" -X -q -d "$db" -c "CREATE EXTENSION pg_scoot" \
      -c "ALTER DATABASE $db SET default_table_access_method = scoot" \
      -c "ALTER DATABASE $db SET scoot.olap = on"
    [ "$e" != scoot_nice ] ||
      "$PG_BINDIR/psql" -X -q -d "$db" -c "ALTER DATABASE $db SET scoot.olap_nice = ${CH_NICE:-10}"
  fi
  t0=$SECONDS
  # the TPC-C tables and rows, then the CH additions (nation, region, supplier, a view)
  "${GT[@]}" -D "$db" tpcc prepare --warehouses "$W" >"$OUTD/prepare-$e.log" 2>&1 ||
    { tail -20 "$OUTD/prepare-$e.log"; die "go-tpc tpcc prepare failed on $e"; }
  "${GT[@]}" -D "$db" ch prepare --warehouses "$W" >>"$OUTD/prepare-$e.log" 2>&1 ||
    { tail -20 "$OUTD/prepare-$e.log"; die "go-tpc ch prepare failed on $e"; }
  echo "prepare_s_$e=$((SECONDS - t0))" >"$OUTD/meta-$e.env"
  ams=$("$PG_BINDIR/psql" -X -At -d "$db" -c "SELECT string_agg(DISTINCT a.amname, ',') FROM pg_class c JOIN pg_am a ON a.oid = c.relam JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'public'")
  [ "$ams" = "$am" ] || die "$db: tables use access method(s) '$ams', expected $am"
  "$PG_BINDIR/psql" -X -q -d "$db" -c "VACUUM ANALYZE"
  "$PG_BINDIR/psql" -X -q -d postgres -c "CHECKPOINT"
  step "$e: run $T ($TH OLTP + $AP analytic threads)"
  "${GT[@]}" -D "$db" -T "$TH" -t "$AP" --time "$T" ch run --warehouses "$W" >"$OUTD/run-$e.log" 2>&1 ||
    { tail -20 "$OUTD/run-$e.log"; die "go-tpc ch run failed on $e"; }
  tail -n 30 "$OUTD/run-$e.log"
done
step "report"
CH_NICE=${CH_NICE:-10} python3 bench/ch_report.py "$OUTD" "$SCOOT_REPO/bench/results" "$W" "$TH" "$AP" "$T"
