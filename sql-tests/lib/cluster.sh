# shellcheck shell=bash
# Helpers to run a throw-away plain PostgreSQL 15 cluster (no pg_scoot) for
# generating heap reference outputs.  Source this file; then call
#   cluster_start      -> exports PGHOST/PGPORT/PGUSER, registers stop on EXIT
#   cluster_stop
# Knobs (env): PGBIN (default /usr/lib/postgresql/15/bin), BASELINE_PORT
# (default 55432), BASELINE_KEEP=1 to leave the cluster running.
# PostgreSQL refuses to run as root, so when we are root the server runs as
# the `postgres` OS user (clients still run as the caller).

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
BASELINE_PORT=${BASELINE_PORT:-55432}

_as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

cluster_start() {
    if [ -n "${CLUSTER_DIR:-}" ]; then return 0; fi
    CLUSTER_DIR=$(mktemp -d /tmp/scoot-heap-baseline.XXXXXX)
    chmod 755 "$CLUSTER_DIR"
    if [ "$(id -u)" = 0 ]; then chown postgres: "$CLUSTER_DIR"; fi
    _as_pg "$PGBIN/initdb" -D "$CLUSTER_DIR/data" -U postgres -A trust \
        -E UTF8 --no-locale >"$CLUSTER_DIR/initdb.log" 2>&1 || {
        cat "$CLUSTER_DIR/initdb.log" >&2; return 1; }
    cat >>"$CLUSTER_DIR/data/postgresql.conf" <<CONF
port = $BASELINE_PORT
listen_addresses = ''
unix_socket_directories = '$CLUSTER_DIR'
max_prepared_transactions = 10
max_worker_processes = 8
max_parallel_workers = 4
fsync = off
synchronous_commit = off
full_page_writes = off
autovacuum = off
lc_messages = 'C'
log_min_messages = warning
CONF
    _as_pg "$PGBIN/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" \
        -w -t 60 start >/dev/null || { cat "$CLUSTER_DIR/server.log" >&2; return 1; }
    export PGHOST="$CLUSTER_DIR" PGPORT="$BASELINE_PORT" PGUSER=postgres
    unset PGDATABASE
    if [ "${BASELINE_KEEP:-0}" != 1 ]; then trap cluster_stop EXIT; fi
    echo "heap baseline cluster: PGHOST=$PGHOST PGPORT=$PGPORT (data $CLUSTER_DIR/data)" >&2
}

cluster_stop() {
    if [ -z "${CLUSTER_DIR:-}" ]; then return 0; fi
    _as_pg "$PGBIN/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$CLUSTER_DIR"
    unset CLUSTER_DIR
}

# Create (re-create) database $1; with $2 = fake-am, install the fake `scoot`
# table access method that is really heap, so `USING scoot` means heap.
baseline_createdb() {
    local db=$1 mode=${2:-}
    PGOPTIONS="-c client_min_messages=warning" "$PGBIN/psql" -X -q -d postgres -v ON_ERROR_STOP=1 \
        -c "DROP DATABASE IF EXISTS \"$db\"" -c "CREATE DATABASE \"$db\" TEMPLATE template0" >/dev/null
    if [ "$mode" = fake-am ]; then
        "$PGBIN/psql" -X -q -d "$db" -v ON_ERROR_STOP=1 \
            -c "CREATE ACCESS METHOD scoot TYPE TABLE HANDLER heap_tableam_handler" \
            -c "CREATE SCHEMA scoot" >/dev/null
    fi
}
