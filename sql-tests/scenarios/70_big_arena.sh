#!/usr/bin/env bash
# A 2 GB arena: a table living in blocks past 1160 (where 113 TID pages per block would exceed
# PostgreSQL's 131072-block segment, which bitmap-scan and ANALYZE prefetching run into) must support
# bitmap scans, ANALYZE, TID scans and TABLESAMPLE.
set -euo pipefail
REPO=${SCOOT_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
DIR=$(mktemp -d /tmp/scoot_bigarena.XXXXXX)
chown postgres:postgres "$DIR"
cleanup() { bash "$REPO/scripts/cluster.sh" stop "$DIR" --remove >/dev/null 2>&1 || true; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

SCOOT_ARENA_MB=2048 SCOOT_PORT=55496 bash "$REPO/scripts/cluster.sh" start "$DIR" >/dev/null 2>&1 || fail "cluster start"
eval "$(bash "$REPO/scripts/cluster.sh" env "$DIR")"
q() { psql -X -v ON_ERROR_STOP=1 -qAt -d postgres "$@"; }
q -c "CREATE EXTENSION pg_scoot" || fail "create extension"
# one 400 kB row per block: 1300 blocks of filler push the next table past block 1300
q -c "CREATE TABLE filler (id int, t text) USING scoot" \
  -c "INSERT INTO filler SELECT g, repeat(md5(g::text), 12500) FROM generate_series(1, 1300) g" || fail "filler"
used=$(q -c "SELECT blocks_used FROM scoot.arena")
[ "$used" -ge 1300 ] || fail "filler uses only $used blocks"
q -c "CREATE TABLE big_s (id int PRIMARY KEY, k int, v text) USING scoot" \
  -c "CREATE INDEX big_s_k ON big_s (k)" \
  -c "INSERT INTO big_s SELECT g, g % 100, 'v' || g FROM generate_series(1, 20000) g" || fail "insert"
maxtid=$(q -c "SELECT max(ctid) FROM big_s")
echo "big_s max ctid: $maxtid (blocks used: $(q -c "SELECT blocks_used FROM scoot.arena"))"
q -c "ANALYZE big_s" || fail "ANALYZE failed"
# ANALYZE samples the table's TID address space (sparse here), so reltuples is an estimate; the
# planner's row count comes from relation_estimate_size, which counts the rows in the arena.
r=$(q -c "SELECT reltuples::int FROM pg_class WHERE relname = 'big_s'")
[ "$r" -ge 10000 ] && [ "$r" -le 40000 ] || fail "reltuples after ANALYZE: $r, want about 20000"
[ "$(q -c "SELECT count(*) FROM pg_stats WHERE tablename = 'big_s'")" = 3 ] || fail "pg_stats not filled"
q -c "CREATE FUNCTION plan_rows(q text) RETURNS int LANGUAGE plpgsql AS \$\$
        DECLARE j json; BEGIN EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO j;
        RETURN (j->0->'Plan'->>'Plan Rows')::int; END \$\$" || fail "plan_rows"
r=$(q -c "SELECT plan_rows('SELECT * FROM big_s')")
[ "$r" = 20000 ] || fail "planner estimate for big_s: $r rows, want 20000"
r=$(q -c "SET enable_seqscan = off" -c "SET enable_indexscan = off" -c "SELECT count(*), sum(id) FROM big_s WHERE k = 7") ||
  fail "bitmap scan failed"
[ "$r" = "200|1991400" ] || fail "bitmap scan: $r"
r=$(q -c "SELECT count(*) FROM big_s WHERE ctid = '$maxtid'") || fail "tid scan failed"
[ "$r" = 1 ] || fail "tid scan: $r"
r=$(q -c "SELECT count(*) <= 20000 FROM big_s TABLESAMPLE SYSTEM (50) REPEATABLE (1)") || fail "tablesample failed"
[ "$r" = t ] || fail "tablesample: $r"
q -c "VACUUM ANALYZE big_s" -c "DROP TABLE filler, big_s" || fail "vacuum/drop"
[ "$(q -c "SELECT blocks_used FROM scoot.arena")" = 0 ] || fail "blocks not returned after DROP"
echo "ok: big arena, high blocks: ANALYZE, bitmap, TID and sample scans work"
