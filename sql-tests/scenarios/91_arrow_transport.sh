#!/usr/bin/env bash
# How scoot.arrow_stream's chunks reach the client (own cluster, listening on localhost with TLS):
# chunk-sized messages are written straight to the socket instead of through PostgreSQL 15's
# 8 kB send buffer, and a Unix-socket client gets a larger kernel send buffer while a stream goes
# out (src/arrow/stream.rs SendPath, src/ffi/shim.c). Checked (python/tests/transport_check.py):
#  - the export over a Unix socket, over TCP and over TCP with TLS (pg_stat_ssl) equals the same
#    rows exported from a heap table (PostgreSQL's executor, the ordinary send path), for small
#    and large record batches; COPY (SELECT scoot.arrow_stream(...)) TO STDOUT carries the same bytes;
#  - the backend writes a 100 MB stream with far fewer write calls than 8 kB pieces would need
#    (/proc/<pid>/io syscw), and its socket's send buffer is back to its old size afterwards;
#  - the connection stays in protocol sync: queries, notices and errors after a complete stream,
#    after a stream cut by statement_timeout, inside a transaction and through a cursor;
#  - a client that dies mid-stream, and pg_terminate_backend of a reader whose client stopped
#    reading, end that backend only: the postmaster is the same, other sessions go on.
set -uo pipefail
. "$(dirname "$0")/helpers/olap_lib.sh"
export SCOOT_LISTEN=localhost
start_cluster transport 55561
DIR=${CLUSTERS[0]}
runuser -u postgres -- openssl req -new -x509 -days 2 -nodes -subj "/CN=localhost" \
  -keyout "$DIR/data/server.key" -out "$DIR/data/server.crt" >"$WORK/openssl.log" 2>&1 ||
  { cat "$WORK/openssl.log"; fail "openssl could not make a certificate"; }
chmod 600 "$DIR/data/server.key"
q -c "ALTER SYSTEM SET ssl = on" -c "SELECT pg_reload_conf()" >/dev/null || fail "ssl = on"
sleep 1
[ "$(q -c "SHOW ssl")" = on ] || fail "ssl is not on after the reload"
PMPID=$(head -n 1 "$DIR/data/postmaster.pid")
cd "$REPO/python" || fail "no python/"
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 tests/transport_check.py "$DIR" "$PGPORT" ||
  soft_fail "transport checks"
[ "$(head -n 1 "$DIR/data/postmaster.pid")" = "$PMPID" ] || soft_fail "the postmaster restarted"
grep -E "terminated by signal|PANIC" "$DIR/server.log" && soft_fail "a server process crashed"
finish
