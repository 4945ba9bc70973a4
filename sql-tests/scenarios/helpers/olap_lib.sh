# shellcheck shell=bash
# Helpers of the OLAP snapshot scenarios (8x_olap_*.sh): each starts its OWN throw-away clusters
# (scripts/cluster.sh) because scoot.snapshot_method and scoot.snapshot_memory are postmaster
# settings. Source it after `set -uo pipefail`.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO=${SCOOT_REPO:-$(cd "$HERE/../.." && pwd)}
CLUSTER_SH=$REPO/scripts/cluster.sh
BIN=${SCOOT_BINDIR:-/usr/lib/postgresql/15/bin}
WORK=$(mktemp -d /tmp/scoot_olap.XXXXXX)
chmod 755 "$WORK"
CLUSTERS=()
SOFT_FAILS=()

soft_fail() { echo "FAIL (continuing): $*"; SOFT_FAILS+=("$*"); }
fail() {
  echo "FAIL: $*"
  local m
  for m in "${SOFT_FAILS[@]}"; do echo "FAIL (earlier): $m"; done
  [ -n "${PGHOST:-}" ] && [ -f "$PGHOST/server.log" ] && { echo "----- $PGHOST/server.log (tail)"; tail -n 25 "$PGHOST/server.log"; }
  exit 1
}
finish() {
  [ ${#SOFT_FAILS[@]} -eq 0 ] || fail "${#SOFT_FAILS[@]} check(s) failed"
  echo PASS
}
olap_cleanup() {
  local d
  jobs -p | xargs -r kill 2>/dev/null
  for d in "${CLUSTERS[@]}"; do bash "$CLUSTER_SH" stop "$d" --remove >/dev/null 2>&1; done
  rm -rf "$WORK"
}
trap olap_cleanup EXIT

# start_cluster <name> <port> [extra conf lines...]: a fresh cluster; exports PGHOST/PGPORT.
start_cluster() {
  local name=$1 port=$2; shift 2
  local dir=/tmp/scoot_olap_${name}_$$ conf
  conf=$(printf '%s\n' "$@")
  local env_lines
  env_lines=$(SCOOT_ARENA_MB=${ARENA_MB:-1024} SCOOT_PORT=$port SCOOT_EXTRA_CONF="$conf" \
    bash "$CLUSTER_SH" start "$dir" 2>"$WORK/start_$name.err") ||
    { cat "$WORK/start_$name.err"; fail "could not start cluster $name"; }
  CLUSTERS+=("$dir")
  eval "$env_lines"
  export PGDATABASE=postgres
  q -c "CREATE EXTENSION pg_scoot" >/dev/null || fail "CREATE EXTENSION failed on $name"
}
stop_cluster() { bash "$CLUSTER_SH" stop "$PGHOST" --remove >/dev/null 2>&1; }

q()  { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
qo() { PGOPTIONS="-c scoot.olap=on ${OLAP_OPTS:-}" "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
stat() { q -c "SELECT $1 FROM scoot.snapshot_stats"; }
# worker_method: the snapshot method once the OLAP worker has chosen it ('none' until the worker
# has started; under a loaded CI machine that can take seconds after the cluster is up).
worker_method() {
  wait_for 60 "SELECT method <> 'none' FROM scoot.snapshot_stats" || echo "    (no method after 60 s)" >&2
  stat method
}

# wait_for <seconds> <sql returning t>
wait_for() {
  local i
  for ((i = 0; i < $1 * 10; i++)); do
    [ "$(q -c "$2" 2>/dev/null)" = t ] && return 0
    sleep 0.1
  done
  return 1
}

pgbench_init() {   # pgbench_init <scale>
  PGOPTIONS='-c default_table_access_method=scoot' "$BIN/pgbench" -i -s "$1" -q >"$WORK/init.log" 2>&1 ||
    { cat "$WORK/init.log"; fail "pgbench -i failed"; }
}

# the TPC-B invariant, read by one snapshot statement: "t" when the three sums are equal
INVARIANT="SELECT a = t AND t = b FROM (SELECT (SELECT sum(abalance) FROM pgbench_accounts) a,
  (SELECT sum(tbalance) FROM pgbench_tellers) t, (SELECT sum(bbalance) FROM pgbench_branches) b) x"
