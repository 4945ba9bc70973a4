#!/usr/bin/env bash
# THE test command of pg_scoot (CI runs it through .ci/run; `make check` runs it too).
#
#   setup.sh -> [cargo pgrx test: #[pg_test] unit tests] -> scripts/install.sh (release package build, installed like PGXS)
#   -> pg_regress suite (sql/schedule, expected/)  own temp instance, scoot preloaded
#   -> isolation suite (sql-tests/isolation/)      own temp instance, scoot preloaded
#   -> PostgreSQL's own core regression and isolation suites with default_table_access_method=scoot
#      (sql-tests/pgcore/run.sh; failures outside sql-tests/pgcore/accepted_*.txt count as failed)
#   -> scenarios (sql-tests/scenarios/*.sh|*.py)   one throw-away cluster, database scoot_test
#                                                  (those marked "# scoot-test: background" run their
#                                                  own clusters, alongside the others)
#   -> one summary line "N passed, M failed"; exit status non-zero iff M > 0.
#
# N/M sum the pg_regress tests, isolation specs and scenarios. M also counts 1 for a failed build
# and the failed #[pg_test] tests (1 if `cargo pgrx test` failed without reporting counts), so the
# summary never says "0 failed" when the exit status is non-zero.
#
# Knobs:
#   SKIP_BUILD=1        no cargo build/install (test the pg_scoot already installed); implies PGRX_TEST=0
#   PGRX_TEST=auto|1|0  run `cargo pgrx test` (auto: only when src/ has #[pg_test] functions)
#   SUITES="regress isolation pgcore scenarios"   subset of suites to run
#   SCENARIOS=regex     only scenarios whose file name matches
#   SCENARIO_TIMEOUT=900  seconds per scenario; REGRESS_TIMEOUT=1200 seconds per pg_regress run
#   SCENARIO_VERBOSE=1  stream scenario output (default: shown only on failure)
#   SKIP_SETUP=1        do not run scripts/setup.sh
#   SCOOT_PRELOAD=0     plumbing check of this script WITHOUT the extension (not for real runs)
# Isolation specs: sql-tests/isolation/specs/*.spec (or sql-tests/isolation/*.spec), expected output in
# sql-tests/isolation/expected/. Outputs of the last run (results/, regression.diffs, logs) are kept in target/scoot-test/.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SCOOT_REPO"

OUT=$SCOOT_REPO/target/scoot-test
SUITES=${SUITES:-regress isolation pgcore scenarios}
TOTAL_P=0 TOTAL_F=0
SUMMARY=()
add_result() {   # add_result <label> <passed> <failed> [note]
  TOTAL_P=$((TOTAL_P + $2)); TOTAL_F=$((TOTAL_F + $3))
  SUMMARY+=("$1: $2 passed, $3 failed${4:+ ($4)}")
  echo "$1: $2 passed, $3 failed${4:+ ($4)}"
}
want() { case " $SUITES " in *" $1 "*) return 0 ;; esac; return 1; }
keep_outputs() {   # keep_outputs <name> <workdir>
  rm -rf "${OUT:?}/$1"; mkdir -p "$OUT/$1"
  local f
  for f in results output_iso regression.diffs regression.out summary.txt log tmp_check/log; do
    [ -e "$2/$f" ] && cp -r "$2/$f" "$OUT/$1/" 2>/dev/null
  done
  rm -rf "$2"
}

# ------------------------------------------------------------------ setup
if [ "${SKIP_SETUP:-0}" != 1 ]; then
  step "setup"
  bash "$SCOOT_REPO/scripts/setup.sh" || die "scripts/setup.sh failed"
fi
resolve_pg_config
mkdir -p "$OUT"

# ------------------------------------------------------------------ #[pg_test] unit tests
# Runs BEFORE the release install: `cargo pgrx test` installs its own (debug, pg_test) build of
# pg_scoot into $PG_CONFIG's directories, which the release install then replaces.
PGRX_TEST=${PGRX_TEST:-auto}
if [ "$PGRX_TEST" = auto ]; then
  if [ "${SKIP_BUILD:-0}" != 1 ] && grep -rqE '#\[pg_test' src 2>/dev/null; then PGRX_TEST=1; else PGRX_TEST=0; fi
fi
if [ "$PGRX_TEST" = 1 ]; then
  step "cargo pgrx test pg$PG_MAJOR (#[pg_test] unit tests)"
  tdir=$(pg_tmpdir scoot-pgrx-test)
  add_cleanup "rm -rf '$tdir'"
  rc=0
  # cargo pgrx test copies its build over the installed pg_scoot.so in place, which kills every
  # running server that has it loaded (SIGBUS; see scripts/install.sh): unlinked first, the copy
  # is a new file and running servers keep the old one
  rm -f "$PG_PKGLIBDIR/pg_scoot.so"
  cargo pgrx test "pg$PG_MAJOR" --runas postgres --pgdata "$tdir" 2>&1 | tee "$OUT/pgrx-test.log" || rc=$?
  # the test framework leaves its postmaster running on failure
  [ -f "$tdir/postmaster.pid" ] &&
    as_postgres "$PG_BINDIR/pg_ctl" -D "$tdir" -m immediate -w stop >/dev/null 2>&1
  p=0 f=0
  while read -r a b; do p=$((p + a)); f=$((f + b)); done < <(
    sed -nE 's/^test result: [A-Za-z]+\. ([0-9]+) passed; ([0-9]+) failed.*/\1 \2/p' "$OUT/pgrx-test.log")
  [ $rc -ne 0 ] && [ $f -eq 0 ] && f=1
  echo "pgrx #[pg_test]: $p passed, $f failed (cargo pgrx test exit $rc)"
  SUMMARY+=("pgrx #[pg_test]: $p passed, $f failed (counted as failures only)")
  TOTAL_F=$((TOTAL_F + f))
else
  log "cargo pgrx test skipped (PGRX_TEST=0, SKIP_BUILD=1, or no #[pg_test] in src/)"
fi

# ------------------------------------------------------------------ build + install
step "build + install (release)"
BUILD_OK=1
if ! build_install; then
  BUILD_OK=0
  add_result build 0 1 "build + install (scripts/install.sh) failed; suites skipped"
elif [ "${SCOOT_PRELOAD:-1}" = 1 ] && [ ! -f "$PG_PKGLIBDIR/pg_scoot.so" ]; then
  BUILD_OK=0
  add_result build 0 1 "$PG_PKGLIBDIR/pg_scoot.so not installed; suites skipped"
fi

# ------------------------------------------------------------------ pg_regress
if [ $BUILD_OK = 1 ] && want regress; then
  step "pg_regress (sql/ + expected/)"
  prepare_regress_dir "$SCOOT_REPO/sql" "$SCOOT_REPO/expected"
  if [ ${#REGRESS_TESTS[@]} -eq 0 ]; then
    add_result pg_regress 0 0 "no sql/*.sql"
  else
    SUITE_KEEP_DIR=$OUT/regress SUITE_SCHEDULE=$REGRESS_SCHEDULE regress_suite regress "$REGRESS_WORKDIR" temp "${REGRESS_TESTS[@]}"
    add_result pg_regress "$SUITE_PASSED" "$SUITE_FAILED"
  fi
  keep_outputs regress "$REGRESS_WORKDIR"
fi

# ------------------------------------------------------------------ isolation
if [ $BUILD_OK = 1 ] && want isolation; then
  step "isolation (sql-tests/isolation/specs/*.spec)"
  prepare_isolation_dir "$SCOOT_REPO/sql-tests/isolation"
  if [ ${#ISOLATION_TESTS[@]} -eq 0 ]; then
    add_result isolation 0 0 "no isolation specs"
  else
    SUITE_KEEP_DIR=$OUT/isolation regress_suite isolation "$ISOLATION_WORKDIR" temp "${ISOLATION_TESTS[@]}"
    add_result isolation "$SUITE_PASSED" "$SUITE_FAILED"
  fi
  keep_outputs isolation "$ISOLATION_WORKDIR"
fi

# ------------------------------------------------------------------ PostgreSQL's own suites
if [ $BUILD_OK = 1 ] && want pgcore; then
  step "PostgreSQL's core regression + isolation suites on scoot (sql-tests/pgcore/run.sh)"
  for s in regress isolation; do
    line=$(timeout -k 10 "${PGCORE_TIMEOUT:-1200}" bash sql-tests/pgcore/run.sh "$s" 2>&1 | tee "$OUT/pgcore-$s.log" | tail -n 1)
    grep -E "failing under scoot only|crash" "$OUT/pgcore-$s.log"
    if [[ $line =~ scoot\ ([0-9]+)\ passed,\ ([0-9]+)\ failed\;\ heap\ ([0-9]+)\ passed.*unexpected:\ (.*)$ ]]; then
      ap=${BASH_REMATCH[1]} af=${BASH_REMATCH[2]} hp=${BASH_REMATCH[3]} unexp=${BASH_REMATCH[4]}
      nunexp=0
      [ "$unexp" != none ] && nunexp=$(wc -w <<<"${unexp% SERVER CRASH}")
      case "$unexp" in *CRASH*) nunexp=$((nunexp + 1)) ;; esac
      add_result "pg core $s" "$ap" "$nunexp" "heap passes $hp; $af fail under scoot, unexpected: $unexp"
    else
      add_result "pg core $s" 0 1 "did not run: $line"
    fi
  done
fi

# ------------------------------------------------------------------ scenarios
fresh_test_db() {
  psql_q -d postgres -c "DROP DATABASE IF EXISTS scoot_test WITH (FORCE)" -c "CREATE DATABASE scoot_test" &&
    if [ "${SCOOT_PRELOAD:-1}" = 1 ]; then psql_q -d scoot_test -c "CREATE EXTENSION IF NOT EXISTS pg_scoot"; fi
}
if [ $BUILD_OK = 1 ] && want scenarios; then
  step "scenarios (sql-tests/scenarios/*.sh|*.py)"
  mapfile -t SCEN < <(cd sql-tests/scenarios 2>/dev/null && LC_ALL=C ls -- *.sh *.py 2>/dev/null | LC_ALL=C sort)
  if [ -n "${SCENARIOS:-}" ]; then
    mapfile -t SCEN < <(printf '%s\n' "${SCEN[@]}" | grep -E -- "$SCENARIOS")
  fi
  sp=0 sf=0
  if [ ${#SCEN[@]} -eq 0 ]; then
    add_result scenarios 0 0 "none"
  elif ! cluster_start; then
    add_result scenarios 0 ${#SCEN[@]} "cluster did not start"
  else
    rm -rf "$OUT/scenarios"; mkdir -p "$OUT/scenarios"
    if [ "${SCOOT_PRELOAD:-1}" = 1 ]; then
      psql_q -d postgres -c "CREATE EXTENSION IF NOT EXISTS pg_scoot" || log "CREATE EXTENSION in postgres failed"
    fi
    export PGDATABASE=scoot_test SCOOT_REPO
    # Scenarios marked "# scoot-test: background" run on clusters of their own: they start now
    # and run alongside the others (the 100M-row scenario's COPY and VACUUM use one CPU of two,
    # the pgbench-driven scenarios leave about half of the CPUs idle); their results come last.
    run_scenario() {   # run_scenario <file>: the scenario's own exit status (124: timed out)
      local runner=(bash)
      case "$1" in *.py) runner=(python3) ;; esac
      (cd sql-tests/scenarios && exec timeout -k 10 "${SCENARIO_TIMEOUT:-900}" "${runner[@]}" "$1" </dev/null)
    }
    bg_pids=() bg_names=()
    for s in "${SCEN[@]}"; do
      [ -n "$s" ] && grep -qx "# scoot-test: background" "sql-tests/scenarios/$s" || continue
      (
        t1=$SECONDS rc=0
        run_scenario "$s" >"$OUT/scenarios/${s%.*}.log" 2>&1 || rc=$?
        echo $((SECONDS - t1)) >"$OUT/scenarios/${s%.*}.secs"
        exit $rc
      ) &
      bg_pids+=($!) bg_names+=("$s")
      echo "scenario $s ... started in the background"
    done
    report_scenario() {   # report_scenario <name> <rc> <seconds> <log> <server log lines before>
      local s=$1 rc=$2 secs=$3 slog=$4 lines_before=$5 why
      if [ "$rc" -eq 0 ]; then
        echo "scenario $s ... ok (${secs}s)"; sp=$((sp + 1))
      else
        why="exit $rc"; [ "$rc" -eq 124 ] && why="timeout ${SCENARIO_TIMEOUT:-900}s"
        echo "scenario $s ... FAILED ($why, ${secs}s)"; sf=$((sf + 1))
        if [ "${SCENARIO_VERBOSE:-0}" != 1 ]; then
          echo "----- output (last 80 lines of $slog) -----"; tail -n 80 "$slog"
        fi
        if [ -n "$lines_before" ]; then
          echo "----- server log during the scenario (ERROR/FATAL/PANIC, last 40) -----"
          tail -n +"$((lines_before + 1))" "$SCOOT_CLUSTER_DIR/server.log" |
            grep -E 'ERROR|FATAL|PANIC|TRAP|terminated by signal' | tail -n 40
        fi
      fi
    }
    for s in "${SCEN[@]}"; do
      [ -n "$s" ] || continue
      printf '%s\n' "${bg_names[@]}" | grep -qx -- "$s" && continue
      if ! cluster_is_up; then
        log "server is down (crash?): restarting"
        tail -n 30 "$SCOOT_CLUSTER_DIR/server.log"
        cluster_restart || { echo "scenario $s ... FAILED (server does not restart)"; sf=$((sf + 1)); continue; }
      fi
      lines_before=$(wc -l <"$SCOOT_CLUSTER_DIR/server.log")
      slog=$OUT/scenarios/${s%.*}.log
      if ! fresh_test_db >"$slog" 2>&1; then
        echo "scenario $s ... FAILED (could not create database scoot_test)"; cat "$slog"
        sf=$((sf + 1)); continue
      fi
      t1=$SECONDS rc=0
      if [ "${SCENARIO_VERBOSE:-0}" = 1 ]; then
        run_scenario "$s" 2>&1 | tee -a "$slog" || rc=$?
      else
        run_scenario "$s" >>"$slog" 2>&1 || rc=$?
      fi
      report_scenario "$s" "$rc" "$((SECONDS - t1))" "$slog" "$lines_before"
    done
    for i in "${!bg_pids[@]}"; do
      s=${bg_names[$i]} rc=0
      wait "${bg_pids[$i]}" || rc=$?
      report_scenario "$s" "$rc" "$(cat "$OUT/scenarios/${s%.*}.secs" 2>/dev/null)" "$OUT/scenarios/${s%.*}.log" ""
    done
    cp "$SCOOT_CLUSTER_DIR/server.log" "$OUT/scenarios/server.log" 2>/dev/null
    add_result scenarios $sp $sf
  fi
fi

# ------------------------------------------------------------------ summary
step "summary"
for l in "${SUMMARY[@]}"; do echo "  $l"; done
echo "outputs: $OUT"
echo "$TOTAL_P passed, $TOTAL_F failed"
[ "$TOTAL_F" -eq 0 ]
