#!/usr/bin/env bash
# scoot-test: background
# OLAP snapshots under a full pgbench load, for each snapshot method (uffd, software, copy, and
# uffd with every first write resolved by the worker's fault handler: scoot.uffd_writer_resolves =
# off), each on its own cluster:
#  - >= 300 single-statement snapshot queries (scoot.olap = on) read sum(abalance), sum(tbalance)
#    and sum(bbalance) while 4 pgbench clients run TPC-B on scoot tables: the three sums must be
#    equal every time (a snapshot is transaction-consistent) and no query may fall back to live
#    data or fail;
#  - read-your-writes: a session that commits a row sees it in its next snapshot statement;
#  - index scans and sequential scans of one image (a REPEATABLE READ READ ONLY transaction)
#    return the same count and sum for 30 ranges of pgbench_accounts while the load runs, and the
#    same aggregates over some and over all columns (text, char(n), numeric) of a table whose rows
#    a second writer keeps rewriting (index fetches of changed blocks read sparse copies; the
#    sequential side's ScootScan and ScootAgg copy only the columns they read of changed blocks);
#  - pgbench reports no failed transaction; scoot.snapshot_stats reports the method asked for,
#    and the snapshots were taken and released (no pin left behind).
set -uo pipefail
. "$(dirname "$0")/helpers/olap_lib.sh"
N=${OLAP_QUERIES:-300}
# idx_vs_seq <label> <select>: runs <select> through an index scan and then through a sequential
# scan of one image (a REPEATABLE READ READ ONLY transaction); returns 1 and says so when the two
# results differ or are empty
idx_vs_seq() {
  local r a b
  r=$(qo -c "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" \
         -c "SET LOCAL enable_seqscan = off" -c "SET LOCAL enable_bitmapscan = off" -c "$2" \
         -c "SET LOCAL enable_seqscan = on" -c "SET LOCAL enable_indexscan = off" -c "$2" \
         -c "COMMIT" 2>"$WORK/err" | grep -v -E '^(BEGIN|SET|COMMIT)$')
  a=$(echo "$r" | sed -n 1p) b=$(echo "$r" | sed -n 2p)
  [ -n "$a" ] && [ "$a" = "$b" ] && return 0
  echo "    $1: '$a' vs '$b' $(head -1 "$WORK/err")"
  return 1
}
port=55510
for variant in uffd uffd_handler software copy; do
  method=${variant%_handler}
  resolves=on; [ "$variant" = uffd_handler ] && resolves=off
  echo "--- method $method (scoot.uffd_writer_resolves = $resolves)"
  start_cluster "$variant" $port "scoot.snapshot_method = '$method'" "scoot.snapshot_memory = 512" \
    "scoot.uffd_writer_resolves = $resolves"
  port=$((port + 1))
  pgbench_init 10
  m=$(worker_method)
  [ "$m" = "$method" ] || fail "scoot.snapshot_stats.method = '$m', want $method ($(stat method_reason))"

  # TPC-B load in 5 s rounds until the readers are done
  rm -f "$WORK/stop"
  (
    r=0
    while [ ! -f "$WORK/stop" ]; do
      r=$((r + 1))
      "$BIN/pgbench" -n -c 4 -j 2 -T 5 >"$WORK/pgb_${variant}_$r.log" 2>&1 || echo "pgbench round $r exited $?" >>"$WORK/pgb_errors"
    done
  ) &
  loader=$!
  sleep 2
  t0=$SECONDS taken0=$(stat snapshots_taken)
  bad=0 errs=0
  for ((i = 1; i <= N; i++)); do
    if ! r=$(qo -c "$INVARIANT" 2>"$WORK/err"); then
      errs=$((errs + 1)); head -3 "$WORK/err"; continue
    fi
    if [ -s "$WORK/err" ]; then errs=$((errs + 1)); head -3 "$WORK/err"; fi
    [ "$r" = t ] || { bad=$((bad + 1)); echo "    query $i: the three sums differ"; }
  done
  secs=$((SECONDS - t0))
  # read-your-writes, under the same load
  q -c "CREATE TABLE ryw (id int) USING scoot" || fail "create ryw"
  ryw_bad=0
  for ((i = 1; i <= 50; i++)); do
    r=$(qo -c "INSERT INTO ryw VALUES ($i)" -c "SELECT count(*) FROM ryw" 2>"$WORK/err")
    [ "$r" = "$i" ] || { ryw_bad=$((ryw_bad + 1)); echo "    read-your-writes: after $i inserts the snapshot statement saw '$r' $(head -1 "$WORK/err")"; }
  done
  # index fetches of an image (blocks unchanged since the snapshot are read in place under their
  # shared lock, changed ones from saved pre-images) agree with a sequential scan of the same
  # image, under the same load
  idx_bad=0
  for ((i = 1; i <= 30; i++)); do
    lo=$(( (i * 7919) % 900000 + 1 ))
    idx_vs_seq "index vs seq on one image, aid from $lo" \
      "SELECT count(*), sum(abalance) FROM pgbench_accounts WHERE aid BETWEEN $lo AND $lo + 20000" ||
      idx_bad=$((idx_bad + 1))
    # a ScootScan reading two fixed-width columns of changed blocks copies only their pages
    # (the header, the row headers, those columns' bitmaps and values)
    idx_vs_seq "index vs column-copy seq on one image, aid from $lo" \
      "SELECT count(*), md5(string_agg(abalance::text, ',' ORDER BY aid)) FROM pgbench_accounts WHERE aid BETWEEN $lo AND $lo + 20000" ||
      idx_bad=$((idx_bad + 1))
  done
  # the same with wide rows of variable-length text that a second writer keeps rewriting (index
  # fetches read changed blocks from sparse copies: only the pages of the header, the row
  # headers and the cells of the columns they read), reading some columns and all of them
  q -c "CREATE TABLE vt (id int PRIMARY KEY, n int, pad char(40), t text, m numeric(12,2)) USING scoot" \
    -c "INSERT INTO vt SELECT i, i, 'p' || i, repeat(md5(i::text), 1 + i % 7), i / 7.0 FROM generate_series(1, 20000) i" \
    -c "ANALYZE vt" || fail "create vt"
  cat >"$WORK/vt.sql" <<'SQL'
\set k random(1, 20000)
UPDATE vt SET n = n + 1, t = repeat(md5(random()::text), 1 + (random() * 6)::int), m = m + 0.01 WHERE id = :k;
SQL
  "$BIN/pgbench" -n -c 2 -j 2 -T 25 -f "$WORK/vt.sql" >"$WORK/pgb_vt_${variant}.log" 2>&1 &
  vtload=$!
  sleep 1
  vt_bad=0
  for ((i = 1; i <= 30; i++)); do
    lo=$(( (i * 613) % 18000 + 1 ))
    for cols in "count(*), sum(n)" "count(*), sum(n), sum(m), md5(string_agg(t || pad, ',' ORDER BY id))" \
      "count(*), md5(string_agg(n || '/' || m || pad, ',' ORDER BY id))"; do
      idx_vs_seq "vt index vs seq on one image, id from $lo ($cols)" \
        "SELECT $cols FROM vt WHERE id BETWEEN $lo AND $lo + 2000" || vt_bad=$((vt_bad + 1))
    done
  done
  wait $vtload || echo "vt pgbench exited $?" >>"$WORK/pgb_errors"
  vt_tx=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$WORK/pgb_vt_${variant}.log")
  echo "    index vs seq scans of one image, text rows rewritten meanwhile ($vt_tx updates): 90 reads, $vt_bad disagreements"
  [ $vt_bad -eq 0 ] || soft_fail "$variant: $vt_bad index-vs-seq disagreements on one image (vt)"
  [ "${vt_tx:-0}" -gt 100 ] || soft_fail "$variant: the vt writer ran only '${vt_tx:-0}' updates"
  touch "$WORK/stop"; wait $loader
  taken=$(( $(stat snapshots_taken) - taken0 ))
  echo "    $N snapshot queries in ${secs}s: $bad inconsistent, $errs errors/warnings; read-your-writes misses: $ryw_bad; snapshots taken meanwhile: $taken"
  echo "    $(q -F ' ' -c "SELECT 'gate_ms_avg=' || round(gate_ms_avg::numeric, 3), 'gate_ms_max=' || round(gate_ms_max::numeric, 3), 'create_ms_avg=' || round(create_ms_avg::numeric, 3), 'pages_saved=' || pages_saved, 'write_faults=' || write_faults, 'abandoned=' || snapshots_abandoned FROM scoot.snapshot_stats")"
  if [ "$method" = uffd ]; then
    # who resolved the first writes under kernel write-protection: the writer itself (its own
    # descriptor) or the worker's fault handler. A writer cannot lift a page another process is
    # saving at that moment: with its own resolution on, 7-10% go to the handler under this
    # load (a run at 10.06% failed the old bound of 1 in 10); with it off, all of them do
    fw=$(stat first_write_faults) hf=$(stat write_faults) va=$(stat first_writes_via_alias)
    echo "    first writes under kernel write-protection: $fw (median $(stat "round(first_write_fault_us_p50::numeric, 2)") us); resolved by the worker's fault handler: $hf; written through the unprotected alias mapping: $va"
    [ "$fw" -gt 0 ] || soft_fail "$variant: no first write happened under kernel write-protection"
    if [ "$resolves" = on ]; then
      [ $((hf * 4)) -lt "$fw" ] || soft_fail "$variant: $hf of $fw first writes went to the fault handler (writers should resolve their own)"
      # row writes (cells, version headers, free-map words) go through the alias: most first writes
      [ $((va * 2)) -gt "$fw" ] || soft_fail "$variant: only $va of $fw first writes went through the alias mapping"
    else
      [ $((hf * 2)) -ge "$fw" ] || soft_fail "$variant: only $hf of $fw first writes went to the fault handler"
      [ "$va" -eq 0 ] || soft_fail "$variant: $va first writes went through the alias mapping with scoot.uffd_writer_resolves off"
    fi
  fi
  tps=$(cat "$WORK"/pgb_"${variant}"_*.log | sed -nE 's/^tps = ([0-9.]+) .*/\1/p' | head -20 | tr '\n' ' ')
  echo "    pgbench tps per 5 s round: $tps"
  [ $bad -eq 0 ] || soft_fail "$variant: $bad of $N snapshot queries saw unequal sums"
  [ $errs -eq 0 ] || soft_fail "$variant: $errs snapshot queries failed or warned"
  [ $ryw_bad -eq 0 ] || soft_fail "$variant: $ryw_bad read-your-writes misses"
  [ $idx_bad -eq 0 ] || soft_fail "$variant: $idx_bad index-vs-seq disagreements on one image"
  echo "    index vs seq scans of one image under load: 60 reads of 30 ranges, $idx_bad disagreements"
  [ "$taken" -ge 10 ] || soft_fail "$variant: only $taken snapshots taken during the run"
  [ -f "$WORK/pgb_errors" ] && soft_fail "$variant: $(cat "$WORK/pgb_errors")" && rm -f "$WORK/pgb_errors"
  if grep -h "number of failed transactions" "$WORK"/pgb_"${variant}"_*.log | grep -qv ": 0 "; then
    soft_fail "$variant: pgbench reported failed transactions"
  fi
  # every pin is gone once the readers are
  wait_for 10 "SELECT coalesce(sum(readers), 0) = 0 FROM scoot.snapshots" ||
    soft_fail "$variant: pins left behind: $(q -c "SELECT string_agg(id || ':' || readers, ' ') FROM scoot.snapshots")"
  stop_cluster
done
finish
