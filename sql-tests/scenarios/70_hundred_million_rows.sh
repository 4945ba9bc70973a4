#!/usr/bin/env bash
# scoot-test: background
# No cap on rows: each table has its own TID address space. On an own cluster with a 16 GB arena:
#  - a 100M-row narrow table is loaded with COPY (its TID pages go far beyond PostgreSQL's 1 GB
#    segment of 131072 pages), gets a btree index, and answers index, bitmap (with prefetching,
#    effective_io_concurrency and maintenance_io_concurrency at their defaults), TID and sequential
#    scans correctly;
#  - ANALYZE (which prefetches the sampled pages through smgr) and VACUUM work and fill pg_class;
#  - pg_relation_size() reports the bytes the table's TID space spans (about the arena memory its
#    blocks use), and a table created afterwards starts at ctid (0,1).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=${SCOOT_REPO:-$(cd "$HERE/../.." && pwd)}
DIR=$(mktemp -d /tmp/scoot_100m.XXXXXX)
chown postgres:postgres "$DIR"
N=${ROWS_100M:-100000000}
cleanup() { bash "$REPO/scripts/cluster.sh" stop "$DIR" --remove >/dev/null 2>&1 || true; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$DIR/server.log" ] && tail -n 20 "$DIR/server.log"; exit 1; }
t0=$SECONDS
lap() { echo "    [$((SECONDS - t0))s] $*"; }

SCOOT_ARENA_MB=16384 SCOOT_PORT=55494 \
  SCOOT_EXTRA_CONF=$'maintenance_work_mem = 2GB\nmax_wal_size = 8GB\nautovacuum = off' \
  bash "$REPO/scripts/cluster.sh" start "$DIR" >/dev/null 2>&1 || fail "cluster start"
eval "$(bash "$REPO/scripts/cluster.sh" env "$DIR")"
q() { psql -X -v ON_ERROR_STOP=1 -qAt -d postgres "$@"; }
q -c "CREATE EXTENSION pg_scoot" || fail "create extension"
q -c "SHOW scoot.arena_size" | grep -q 16GB || fail "arena is not 16 GB: $(q -c 'SHOW scoot.arena_size')"

echo "--- COPY $N rows"
q -c "CREATE TABLE hm (id bigint NOT NULL) USING scoot" || fail "create"
q -c "COPY hm FROM PROGRAM 'seq 1 $N'" || fail "COPY"
lap "loaded"
r=$(q -c "SELECT count(*), sum(id) FROM hm") || fail "count"
[ "$r" = "$N|$((N * (N + 1) / 2))" ] || fail "count/sum after COPY: $r"
maxpage=$(q -c "SELECT (ctid::text::point)[0]::bigint FROM hm WHERE id = $N") || fail "ctid of the last row"
echo "    last row's TID page: $maxpage"
[ "$maxpage" -gt 131072 ] || fail "the table's TID pages stay below one 1 GB segment ($maxpage): not a test of the cap"
lap "counted"

echo "--- btree index, index / bitmap / TID scans"
q -c "CREATE INDEX hm_id ON hm (id)" || fail "create index"
lap "index built"
for id in 1 77777777 $N $((N / 2 + 3)); do
  r=$(q -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*) FROM hm WHERE id = $id")
  [ "$r" = 1 ] || fail "index scan for id $id: $r"
done
# bitmap heap scans over ranges spread across the whole TID space (prefetching on)
r=$(q -c "SET enable_seqscan = off" -c "SET enable_indexscan = off" \
      -c "SELECT count(*), sum(id) FROM hm WHERE id BETWEEN 99000001 AND 99100000 OR id < 1001 OR id BETWEEN 50000001 AND 50002000") ||
  fail "bitmap scan"
[ "$r" = "103000|$(( (99000001 + 99100000) * 100000 / 2 + 1000 * 1001 / 2 + (50000001 + 50002000) * 2000 / 2 ))" ] ||
  fail "bitmap scan result: $r"
plan=$(q -c "SET enable_seqscan = off" -c "SET enable_indexscan = off" -c "EXPLAIN SELECT count(*) FROM hm WHERE id < 1001 OR id > 99999000")
grep -q "Bitmap Heap Scan" <<<"$plan" || fail "no bitmap heap scan: $plan"
tid=$(q -c "SELECT ctid FROM hm WHERE id = $N")
r=$(q -c "SELECT id FROM hm WHERE ctid = '$tid'") || fail "TID scan"
[ "$r" = "$N" ] || fail "TID scan of $tid: $r"
lap "scans"

echo "--- ANALYZE and VACUUM"
q -c "ANALYZE hm" || fail "ANALYZE"
r=$(q -c "SELECT reltuples::bigint FROM pg_class WHERE relname = 'hm'")
[ "$r" -ge $((N * 95 / 100)) ] && [ "$r" -le $((N * 105 / 100)) ] || fail "reltuples after ANALYZE: $r, want about $N"
q -c "SELECT n_distinct, null_frac FROM pg_stats WHERE tablename = 'hm' AND attname = 'id'" | grep -q . || fail "pg_stats empty"
q -c "DELETE FROM hm WHERE id % 10 = 0" || fail "delete"
q -c "VACUUM hm" || fail "VACUUM"
r=$(q -c "SELECT reltuples::bigint FROM pg_class WHERE relname = 'hm'")
[ "$r" = $((N - N / 10)) ] || fail "reltuples after VACUUM: $r, want $((N - N / 10))"
r=$(q -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*) FROM hm WHERE id IN (10, 11, 99999990, 99999991)")
[ "$r" = 2 ] || fail "index scan after VACUUM: $r"
lap "analyzed and vacuumed"

echo "--- sizes"
rel=$(q -c "SELECT pg_relation_size('hm')")
read -r blocks bytes <<<"$(q -F ' ' -c "SELECT blocks, bytes FROM scoot.arena_tables WHERE relation = 'hm'::regclass")"
bs=$(q -c "SELECT block_size FROM scoot.arena")
echo "    pg_relation_size: $rel; scoot.arena_tables: $blocks blocks of $bs bytes, $bytes bytes of rows"
[ "$rel" -gt $(((blocks - 1) * bs)) ] && [ "$rel" -le $((blocks * bs)) ] ||
  fail "pg_relation_size ($rel) does not match the table's $blocks blocks"
du=$(du -k "$DIR/data/$(q -c "SELECT pg_relation_filepath('hm')")" | awk '{print $1}')
[ "$du" -lt 1024 ] || fail "the sparse relation file uses $du kB of disk"
q -c "CREATE TABLE hm_small (i int) USING scoot" -c "INSERT INTO hm_small VALUES (1), (2)" || fail "small table"
[ "$(q -c "SELECT min(ctid) FROM hm_small")" = "(0,1)" ] || fail "a new table does not start at (0,1)"
q -c "DROP TABLE hm" || fail "drop"
[ "$(q -c "SELECT blocks_used FROM scoot.arena")" -le 2 ] || fail "DROP did not give the blocks back"
lap "done"
echo "ok"
