#!/usr/bin/env bash
# Throw-away PostgreSQL 15 clusters with pg_scoot preloaded (server runs as the `postgres` OS user).
#
#   scripts/cluster.sh run [--] CMD [ARGS...]  start a temp cluster, run CMD with PGHOST/PGPORT/PGUSER/
#                                              PGDATABASE/SCOOT_BINDIR exported, stop+remove it on exit
#   scripts/cluster.sh start [DIR]             start a persistent cluster (default DIR
#                                              /tmp/pg_scoot_cluster) and print `export ...` lines:
#                                                eval "$(scripts/cluster.sh start)"
#   scripts/cluster.sh stop [DIR] [--remove]   stop it (and delete DIR)
#   scripts/cluster.sh status [DIR]
#   scripts/cluster.sh env [DIR]               print the export lines again
#
# Knobs: SCOOT_PORT (first port tried, default 54329), SCOOT_PRELOAD=0 (no pg_scoot),
# SCOOT_ARENA_MB (scoot.arena_size, default 2048), SCOOT_EXTRA_CONF, SCOOT_LISTEN, SCOOT_KEEP_CLUSTER=1,
# SCOOT_PGCTL_WRAPPER (command prefix for pg_ctl start, e.g. sql-tests/scenarios/helpers/deny_uffd).
# Settings are written to DIR/data/scoot_cluster.conf (sized for 2 cores / 24 GiB).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
resolve_pg_config

DEFAULT_DIR=/tmp/pg_scoot_cluster
print_env() {
  local dir=$1 port
  port=$(sed -n 's/^port = //p' "$dir/data/scoot_cluster.conf")
  echo "export PGHOST='$dir' PGPORT=$port PGUSER=postgres PGDATABASE=postgres SCOOT_BINDIR='$PG_BINDIR'"
}

cmd=${1:-}; shift || true
case "$cmd" in
  run)
    [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || die "usage: $0 run [--] CMD [ARGS...]"
    cluster_start >&2
    rc=0; "$@" || rc=$?
    exit $rc
    ;;
  start)
    dir=${1:-$DEFAULT_DIR}
    if [ -f "$dir/data/postmaster.pid" ] && cluster_is_up "$dir"; then
      echo "already running" >&2
    else
      cluster_start "$dir" >&2
    fi
    print_env "$dir"
    ;;
  stop)
    dir=$DEFAULT_DIR remove=
    for a in "$@"; do case "$a" in --remove) remove=remove ;; *) dir=$a ;; esac; done
    cluster_stop "$dir" "$remove"
    ;;
  status)
    dir=${1:-$DEFAULT_DIR}
    as_postgres "$PG_BINDIR/pg_ctl" -D "$dir/data" status
    ;;
  env)
    print_env "${1:-$DEFAULT_DIR}"
    ;;
  *)
    sed -n '2,17p' "$0"; exit 2 ;;
esac
