# shellcheck shell=bash
# Shared helpers for pg_scoot's build / test / bench scripts. Source it; do not execute it.
#
#   . "$(dirname "$0")/lib.sh"
#
# Environment knobs (all optional):
#   PG_CONFIG            pg_config to build/test against (default: pg_config on PATH, else
#                        /usr/lib/postgresql/15/bin/pg_config); resolved to <bindir>/pg_config
#   SKIP_BUILD=1         build_install does nothing (use the already installed pg_scoot)
#   SCOOT_PORT           first port tried by cluster_start (default 54329; next free one is used)
#   SCOOT_PRELOAD=0      clusters and pg_regress temp instances WITHOUT pg_scoot (plumbing checks)
#   REGRESS_EXTRA_CONF   extra lines for the pg_regress/isolation --temp-config
#   SCOOT_LISTEN         listen_addresses of throw-away clusters (default '' = unix socket only)
#   SCOOT_EXTRA_CONF     extra postgresql.conf lines (newline separated) for throw-away clusters
#   SCOOT_KEEP_CLUSTER=1 do not delete a throw-away cluster's directory when it stops
#   CARGO_TARGET_DIR     cargo's build directory (default ~/.cache/pg_scoot/target, shared by clones)

set -o pipefail

SCOOT_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PGRX_VERSION=0.18.1
PG_MAJOR=15

# cargo / pyenv may be missing from a minimal (CI) PATH
for _d in "$HOME/.cargo/bin" "${PYENV_ROOT:-$HOME/.pyenv}/shims"; do
  case ":$PATH:" in *":$_d:"*) ;; *) [ -d "$_d" ] && PATH="$_d:$PATH" ;; esac
done
export PATH
# debug info in the test build costs time and half of target/ (see ../shared/TOOLCHAIN.md)
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-0}
# one build cache per machine, shared by every clone: a fresh clone (CI) compiles only pg_scoot
# itself, not its ~300 dependencies again (cargo's fingerprints keep each clone's build apart)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pg_scoot/target}
# ... except for build.rs's C objects: its output directory is one for every clone, and cargo
# reruns it only for C files newer than its last run, whichever clone ran it: C edited in one
# clone before another clone's build went uncompiled. Their digest makes build.rs run again
# whenever the C differs from the last build's.
SCOOT_C_DIGEST=$(cat "$SCOOT_REPO"/src/ffi/*.c "$SCOOT_REPO"/src/exec/*.c "$SCOOT_REPO"/src/exec/*.h \
  2>/dev/null | sha1sum | cut -c1-40)
export SCOOT_C_DIGEST
unset _d

_scoot_t0=${_scoot_t0:-$SECONDS}
step() { echo "=== [$((SECONDS - _scoot_t0))s] $*"; }
log()  { echo "--- $*"; }
die()  { echo "ERROR: $*" >&2; exit 1; }

# ---------------------------------------------------------------- pg_config
resolve_pg_config() {
  local pc=${PG_CONFIG:-}
  if [ -z "$pc" ]; then
    pc=$(command -v pg_config 2>/dev/null || true)
    [ -n "$pc" ] || pc=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
  fi
  [ -x "$pc" ] || pc=$(command -v "$pc" 2>/dev/null || true)
  [ -n "$pc" ] && [ -x "$pc" ] || die "pg_config not found (set PG_CONFIG=...)"
  # /usr/bin/pg_config on Debian is a wrapper; use the real binary of that installation
  local bindir; bindir=$("$pc" --bindir) || die "$pc --bindir failed"
  [ -x "$bindir/pg_config" ] && pc=$bindir/pg_config
  PG_CONFIG=$pc
  PG_BINDIR=$bindir
  PG_PKGLIBDIR=$("$pc" --pkglibdir)
  PG_REGRESS=$PG_PKGLIBDIR/pgxs/src/test/regress/pg_regress
  PG_ISOLATION_REGRESS=$PG_PKGLIBDIR/pgxs/src/test/isolation/pg_isolation_regress
  export PG_CONFIG PG_BINDIR PG_PKGLIBDIR PG_REGRESS PG_ISOLATION_REGRESS
}

# ---------------------------------------------------------------- cleanup stack
# Every script gets a single EXIT/INT/TERM trap running the registered commands (LIFO).
_SCOOT_CLEANUPS=()
_scoot_run_cleanups() {
  local i
  for ((i = ${#_SCOOT_CLEANUPS[@]} - 1; i >= 0; i--)); do
    eval "${_SCOOT_CLEANUPS[i]}" || true
  done
  _SCOOT_CLEANUPS=()
}
add_cleanup() {
  _SCOOT_CLEANUPS+=("$1")
  trap '_scoot_run_cleanups' EXIT
  trap '_scoot_run_cleanups; exit 130' INT
  trap '_scoot_run_cleanups; exit 143' TERM
}

# A temp dir the postgres OS user owns (servers refuse to run as root).
pg_tmpdir() {   # pg_tmpdir <prefix>
  local d; d=$(mktemp -d "/tmp/$1.XXXXXX")
  chmod 755 "$d"; chown postgres:postgres "$d"
  echo "$d"
}

as_postgres() { runuser -u postgres -- "$@"; }

# ---------------------------------------------------------------- build
build_install() {
  resolve_pg_config
  if [ "${SKIP_BUILD:-0}" = 1 ]; then
    log "SKIP_BUILD=1: using the installed pg_scoot ($(ls "$PG_PKGLIBDIR"/pg_scoot.so 2>/dev/null || echo 'NOT INSTALLED'))"
    return 0
  fi
  # not `cargo pgrx install`: it overwrites pg_scoot.so in place and kills running servers
  bash "$SCOOT_REPO/scripts/install.sh"
}

# ---------------------------------------------------------------- throw-away cluster
port_in_use() {   # TCP listener on localhost, or a socket/lock file of a local cluster
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
  ls /tmp/.s.PGSQL."$1" /var/run/postgresql/.s.PGSQL."$1" >/dev/null 2>&1 && return 0
  return 1
}
free_port() {
  local p=${1:-54329}
  while port_in_use "$p"; do p=$((p + 1)); done
  echo "$p"
}

# cluster_start [dir]  -- initdb + start; exports PGHOST PGPORT PGUSER SCOOT_CLUSTER_DIR SCOOT_BINDIR.
# Without a dir, a fresh temp dir is used and the cluster is stopped+removed on script exit.
cluster_start() {
  resolve_pg_config
  local dir=${1:-} throwaway=0
  if [ -z "$dir" ]; then dir=$(pg_tmpdir scoot-cluster); throwaway=1; fi
  mkdir -p "$dir"; chown postgres:postgres "$dir"; chmod 755 "$dir"
  local port; port=$(free_port "${SCOOT_PORT:-54329}")
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_postgres "$PG_BINDIR/initdb" -D "$dir/data" -U postgres --auth=trust --no-locale -E UTF8 \
      --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log"; die "initdb failed"; }
    echo "include_if_exists 'scoot_cluster.conf'" >>"$dir/data/postgresql.conf"
  fi
  {
    echo "# written by scripts/lib.sh cluster_start"
    echo "port = $port"
    echo "listen_addresses = '${SCOOT_LISTEN:-}'"
    echo "unix_socket_directories = '$dir'"
    if [ "${SCOOT_PRELOAD:-1}" = 1 ]; then
      echo "shared_preload_libraries = 'pg_scoot'"
      echo "scoot.arena_size = ${SCOOT_ARENA_MB:-2048}"
    fi
    # sized for 2 cores / 24 GiB
    echo "max_connections = 100"
    echo "shared_buffers = 1GB"
    echo "effective_cache_size = 12GB"
    echo "work_mem = 16MB"
    echo "maintenance_work_mem = 256MB"
    echo "max_prepared_transactions = 10"
    echo "max_wal_size = 4GB"
    echo "min_wal_size = 1GB"
    echo "checkpoint_timeout = 15min"
    echo "checkpoint_completion_target = 0.9"
    echo "max_worker_processes = 8"
    echo "max_parallel_workers_per_gather = 2"
    echo "log_line_prefix = '%m [%p] '"
    echo "log_min_messages = warning"
    [ -n "${SCOOT_EXTRA_CONF:-}" ] && printf '%s\n' "$SCOOT_EXTRA_CONF"
  } >"$dir/data/scoot_cluster.conf"
  chown postgres:postgres "$dir/data/scoot_cluster.conf"
  # SCOOT_PGCTL_WRAPPER: a command prefix for pg_ctl (e.g. a seccomp filter the server inherits)
  # shellcheck disable=SC2086
  if ! as_postgres ${SCOOT_PGCTL_WRAPPER:-} "$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 120 start >/dev/null; then
    echo "----- server.log -----"; tail -n 50 "$dir/server.log" 2>/dev/null
    [ $throwaway = 1 ] && [ "${SCOOT_KEEP_CLUSTER:-0}" != 1 ] && rm -rf "$dir"
    return 1
  fi
  export PGHOST=$dir PGPORT=$port PGUSER=postgres SCOOT_CLUSTER_DIR=$dir SCOOT_BINDIR=$PG_BINDIR
  export PGDATABASE=${PGDATABASE:-postgres}
  if [ $throwaway = 1 ]; then
    add_cleanup "cluster_stop '$dir' remove"
  fi
  log "cluster up: PGHOST=$PGHOST PGPORT=$PGPORT (log: $dir/server.log)"
}

cluster_is_up() {   # cluster_is_up [dir]
  local dir=${1:-$SCOOT_CLUSTER_DIR}
  as_postgres "$PG_BINDIR/pg_ctl" -D "$dir/data" status >/dev/null 2>&1 &&
    "$PG_BINDIR/pg_isready" -q -h "$dir" -p "$(sed -n 's/^port = //p' "$dir/data/scoot_cluster.conf")" -t 10
}

# cluster_restart [dir] -- after a crash (or a conf change)
cluster_restart() {
  local dir=${1:-$SCOOT_CLUSTER_DIR}
  as_postgres "$PG_BINDIR/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  as_postgres "$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 120 start >/dev/null
}

# cluster_stop [dir] [remove]
cluster_stop() {
  local dir=${1:-$SCOOT_CLUSTER_DIR} remove=${2:-}
  [ -n "$dir" ] && [ -d "$dir/data" ] || return 0
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_postgres "$PG_BINDIR/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
      as_postgres "$PG_BINDIR/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  if [ "$remove" = remove ] && [ "${SCOOT_KEEP_CLUSTER:-0}" != 1 ]; then
    rm -rf "$dir"
  elif [ "$remove" = remove ]; then
    log "SCOOT_KEEP_CLUSTER=1: kept $dir"
  fi
}

psql_q() { "$PG_BINDIR/psql" -X -v ON_ERROR_STOP=1 -qAt "$@"; }

# ---------------------------------------------------------------- pg_regress-style suites
# regress_suite <kind> <workdir> <mode> [tests...]
#   kind: regress | isolation;  mode: temp (own temp instance) | existing (running PGHOST/PGPORT server)
#   <workdir> must already hold the inputs (regress: *.sql in sql/, expected/; isolation: specs/,
#   expected/). Sets SUITE_PASSED / SUITE_FAILED; prints diffs on failure.
#   A test whose expected file is missing is run against an empty one (so results/<t>.out is
#   produced for review) and counted as failed.
regress_suite() {
  local kind=$1 w=$2 mode=$3; shift 3
  local tests=("$@") bin ext srcdir
  SUITE_PASSED=0; SUITE_FAILED=0
  if [ "$kind" = isolation ]; then bin=$PG_ISOLATION_REGRESS; ext=spec; srcdir=specs
  else bin=$PG_REGRESS; ext=sql; srcdir=sql; fi
  [ -x "$bin" ] || { echo "$kind: $bin missing"; SUITE_FAILED=${#tests[@]}; return 1; }
  [ ${#tests[@]} -gt 0 ] || return 0
  mkdir -p "$w/expected"
  local t missing=()
  for t in "${tests[@]}"; do
    if [ ! -f "$w/expected/$t.out" ]; then missing+=("$t"); : >"$w/expected/$t.out"; fi
  done
  {
    if [ "${SCOOT_PRELOAD:-1}" = 1 ]; then
      echo "shared_preload_libraries = 'pg_scoot'"
      echo "scoot.arena_size = 512"
    fi
    echo "max_prepared_transactions = 10"
    [ -n "${REGRESS_EXTRA_CONF:-}" ] && printf '%s\n' "$REGRESS_EXTRA_CONF"
  } >"$w/temp.conf"
  local args=(--inputdir="$w" --outputdir="$w" --bindir="$PG_BINDIR" --dbname=contrib_regression)
  [ "$kind" = isolation ] && [ "${SCOOT_PRELOAD:-1}" = 1 ] && args+=(--load-extension=pg_scoot)
  if [ "$mode" = temp ]; then
    args+=(--temp-instance="$w/tmp_check" --temp-config="$w/temp.conf")
  else
    # Like PGXS installcheck: pg_regress (re)creates contrib_regression on the running server.
    # (--use-existing would skip that, and the database and the extension would have to exist.)
    args+=(--host="${PGHOST:-/var/run/postgresql}" --port="${PGPORT:-5432}" --user="${PGUSER:-postgres}")
  fi
  chown -R postgres:postgres "$w"
  local rc=0 runner=()
  [ "$mode" = temp ] && runner=(runuser -u postgres --)
  # SUITE_SCHEDULE: a pg_regress schedule that runs the tests (some at the same time) instead of
  # the list, which then only names the tests to count
  local run_tests=("${tests[@]}")
  if [ -n "${SUITE_SCHEDULE:-}" ]; then args+=(--schedule="$SUITE_SCHEDULE"); run_tests=(); fi
  (cd "$w" && timeout -k 15 "${REGRESS_TIMEOUT:-1200}" "${runner[@]}" "$bin" "${args[@]}" "${run_tests[@]}") \
    2>&1 | tee "$w/summary.txt" || rc=$?
  # a killed pg_regress leaves its temp postmaster behind
  if [ -f "$w/tmp_check/data/postmaster.pid" ]; then
    as_postgres "$PG_BINDIR/pg_ctl" -D "$w/tmp_check/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  # count per test: "test foo ... ok", "     foo ... ok" (parallel), "ok 1 - foo" (PG16+)
  for t in "${tests[@]}"; do
    if printf '%s\n' "${missing[@]}" | grep -qx -- "$t"; then
      SUITE_FAILED=$((SUITE_FAILED + 1))
      echo "$kind: $t has no expected/$t.out (its output: ${SUITE_KEEP_DIR:-$w}/results/$t.out)"
    elif grep -qE "^(test )?[[:space:]]*$t[[:space:]]+\.\.\. ok|^ok [0-9]+ +[-+] $t( |$)" "$w/summary.txt"; then
      SUITE_PASSED=$((SUITE_PASSED + 1))
    else
      SUITE_FAILED=$((SUITE_FAILED + 1))
    fi
  done
  if [ $SUITE_FAILED -gt 0 ] || [ $rc -ne 0 ]; then
    if [ -f "$w/regression.diffs" ]; then
      echo "----- $kind regression.diffs -----"
      head -c "${DIFF_LIMIT:-100000}" "$w/regression.diffs"; echo
    fi
    local l
    for l in "$w"/tmp_check/log/postmaster.log "$w"/log/postmaster.log; do
      if [ -f "$l" ] && grep -qE 'PANIC|TRAP|terminated by signal|server process .* was terminated' "$l"; then
        echo "----- $kind server log (crash lines) -----"
        grep -nE -B2 -A8 'PANIC|TRAP|terminated by signal' "$l" | head -n 120
      fi
    done
    [ $SUITE_FAILED -eq 0 ] && SUITE_FAILED=1   # pg_regress failed without a test failing
  fi
  [ $SUITE_FAILED -eq 0 ]
}

# prepare_regress_dir <dir with *.sql> <expected dir>
#   sets REGRESS_WORKDIR (a postgres-owned copy) and REGRESS_TESTS
#   (sql/setup.sql first, then the rest in C-locale alphabetical order).
prepare_regress_dir() {
  local sqldir=$1 expdir=$2 w f
  w=$(pg_tmpdir scoot-regress)
  mkdir -p "$w/sql" "$w/expected"
  cp "$sqldir"/*.sql "$w/sql/" 2>/dev/null || true
  cp "$expdir"/*.out "$w/expected/" 2>/dev/null || true
  [ -d "$sqldir/data" ] && cp -r "$sqldir/data" "$w/"
  REGRESS_TESTS=()
  [ -f "$sqldir/setup.sql" ] && REGRESS_TESTS+=(setup)
  for f in $(cd "$sqldir" && LC_ALL=C ls -- *.sql 2>/dev/null); do
    f=${f%.sql}; [ "$f" = setup ] || REGRESS_TESTS+=("$f")
  done
  # <sqldir>/schedule (pg_regress format: which tests run at the same time) -> REGRESS_SCHEDULE, a
  # copy without the tests that have no .sql, plus a line of its own for each test it misses
  REGRESS_SCHEDULE=
  if [ -f "$sqldir/schedule" ]; then
    local t listed
    listed=$(sed -nE 's/^test:[[:space:]]*//p' "$sqldir/schedule" | tr -s ' \t' '\n\n')
    for t in $listed; do
      [ -f "$sqldir/$t.sql" ] || log "$sqldir/schedule: $t has no $t.sql (left out)"
    done
    while IFS= read -r l; do
      case "$l" in
        test:*)
          local keep=()
          for t in ${l#test:}; do [ -f "$sqldir/$t.sql" ] && keep+=("$t"); done
          [ ${#keep[@]} -gt 0 ] && echo "test: ${keep[*]}" ;;
        *) echo "$l" ;;
      esac
    done <"$sqldir/schedule" >"$w/schedule"
    for t in "${REGRESS_TESTS[@]}"; do
      if ! grep -qx -- "$t" <<<"$listed"; then
        log "$sqldir/schedule does not list $t: it runs alone, last"
        echo "test: $t" >>"$w/schedule"
      fi
    done
    REGRESS_SCHEDULE=$w/schedule
  fi
  chown -R postgres:postgres "$w"
  REGRESS_WORKDIR=$w
}

# prepare_isolation_dir <dir>  -- specs are <dir>/specs/*.spec and/or <dir>/*.spec, expected output
# <dir>/expected/*.out. Sets ISOLATION_WORKDIR (postgres-owned copy) and ISOLATION_TESTS (sorted).
prepare_isolation_dir() {
  local specdir=$1 w f
  w=$(pg_tmpdir scoot-isolation)
  mkdir -p "$w/specs" "$w/expected"
  cp "$specdir"/*.spec "$specdir"/specs/*.spec "$w/specs/" 2>/dev/null || true
  cp "$specdir"/expected/*.out "$w/expected/" 2>/dev/null || true
  ISOLATION_TESTS=()
  for f in $(cd "$w/specs" && LC_ALL=C ls -- *.spec 2>/dev/null); do ISOLATION_TESTS+=("${f%.spec}"); done
  chown -R postgres:postgres "$w"
  ISOLATION_WORKDIR=$w
}
