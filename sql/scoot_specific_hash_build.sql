-- scoot_specific_hash_build: a ScootScan under a hash join's Hash node writes its rows straight
-- into the join's hash table (src/exec/hashbuild.c, scoot.hash_build). The table must be what
-- PostgreSQL's Hash node builds from the same rows: every join answer equal with the build on,
-- off, and on heap tables; the Hash node's buckets, batches and memory equal on and off; rows
-- of later batches (small work_mem), NULL keys (inner and outer joins), keys hashed by other
-- functions than hashint2/4/8, rows wider than a hash chunk and rebuilds on rescan all covered.
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;
SET enable_nestloop = off;
SET enable_mergejoin = off;
SET scoot.eager_agg = off;		-- hb's scan under the Hash, not a pre-aggregation of pr

-- the build side: keys of each integer width, date, text and numeric, NULLs, duplicates,
-- payload columns of every kind, a few rows wider than a 8 kB hash chunk quarter
CREATE TABLE hb (k int, g int8, s int2, d date, t text, n numeric(12,2), ts timestamp,
                 pay text, f float8, b bool)
  USING scoot;
INSERT INTO hb SELECT i % 40000,
       CASE WHEN i % 13 = 0 THEN NULL ELSE (i % 40000)::int8 * 1000003 END,
       (i % 3000)::int2,
       date '1995-01-01' + (i % 4000),
       CASE WHEN i % 11 = 0 THEN NULL ELSE 't' || (i % 40000) END,
       (i % 5000) / 100.0,
       timestamp '2020-01-01' + (i % 999) * interval '1 hour',
       CASE WHEN i % 9 = 0 THEN NULL WHEN i % 10007 = 0 THEN repeat('w', 9000) ELSE 'p' || i END,
       i * 0.5,
       i % 2 = 0
FROM generate_series(1, 60000) i;
INSERT INTO hb VALUES (NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'all null', NULL, NULL);
CREATE TABLE hbh AS SELECT * FROM hb;
-- the probe side (larger, so that the planner hashes hb): every key also NULL sometimes, and
-- values the build side lacks
CREATE TABLE pr (k int, g int8, s int2, d date, t text, n numeric(12,2), ts timestamp, v int)
  USING scoot;
INSERT INTO pr SELECT i * 7 % 50000,
       CASE WHEN i % 17 = 0 THEN NULL ELSE (i * 7 % 50000)::int8 * 1000003 END,
       (i % 3500)::int2,
       date '1995-01-01' + (i % 4500),
       CASE WHEN i % 19 = 0 THEN NULL ELSE 't' || (i * 7 % 50000) END,
       (i % 6000) / 100.0,
       timestamp '2020-01-01' + (i % 1200) * interval '1 hour',
       i % 10
FROM generate_series(1, 150000) i;
INSERT INTO pr VALUES (NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0);
CREATE TABLE prh AS SELECT * FROM pr;
ANALYZE hb, hbh, pr, prh;

-- the answer with the build on, off, and on heap: equal? (BUILD and PROBE name the tables)
CREATE FUNCTION same(q text) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE on_ text; off_ text; h text;
BEGIN
  SET LOCAL scoot.hash_build = on;
  EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) FROM (%s) x',
                 replace(replace(q, 'BUILD', 'hb'), 'PROBE', 'pr')) INTO on_;
  SET LOCAL scoot.hash_build = off;
  EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) FROM (%s) x',
                 replace(replace(q, 'BUILD', 'hb'), 'PROBE', 'pr')) INTO off_;
  SET LOCAL scoot.hash_build = on;
  EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) FROM (%s) x',
                 replace(replace(q, 'BUILD', 'hbh'), 'PROBE', 'prh')) INTO h;
  IF on_ IS DISTINCT FROM h OR off_ IS DISTINCT FROM h THEN
    RAISE NOTICE 'differs: %', q;
  END IF;
  RETURN on_ = h AND off_ = h;
END $$;

-- the Hash nodes of q's plan (EXPLAIN ANALYZE, JSON) with the build on and off: buckets,
-- batches, memory, rows, and the rows the scans under them wrote into the table
CREATE FUNCTION hash_nodes(p json) RETURNS TABLE (buckets int, batches int, peak_kb bigint,
                                                   rows_ bigint, written bigint)
LANGUAGE sql AS $$
  WITH RECURSIVE n(node) AS (SELECT p -> 0 -> 'Plan'
                             UNION ALL
                             SELECT c FROM n, json_array_elements(n.node -> 'Plans') c)
  SELECT (node ->> 'Hash Buckets')::int, (node ->> 'Hash Batches')::int,
         (node ->> 'Peak Memory Usage')::bigint, (node ->> 'Actual Rows')::bigint,
         (SELECT sum((c ->> 'Rows Written into the Hash Table by Scoot')::bigint)
            FROM json_array_elements(node -> 'Plans') c)
  FROM n WHERE node ->> 'Node Type' = 'Hash'
$$;
CREATE FUNCTION build_report(q text) RETURNS TABLE (buckets int, batches int, rows_ bigint,
                                                     written bigint, same_table bool)
LANGUAGE plpgsql AS $$
DECLARE p_on json; p_off json;
BEGIN
  SET LOCAL scoot.hash_build = on;
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, TIMING off, SUMMARY off) ' || q INTO p_on;
  SET LOCAL scoot.hash_build = off;
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, TIMING off, SUMMARY off) ' || q INTO p_off;
  RETURN QUERY
    SELECT a.buckets, a.batches, a.rows_, a.written,
           a.buckets = b.buckets AND a.batches = b.batches AND a.peak_kb = b.peak_kb
             AND a.rows_ = b.rows_ AND b.written IS NULL
    FROM (SELECT *, row_number() OVER () r FROM hash_nodes(p_on)) a
    JOIN (SELECT *, row_number() OVER () r FROM hash_nodes(p_off)) b USING (r);
END $$;

-- the plan: the scoot table is hashed, and the scan under the Hash writes into it
EXPLAIN (COSTS OFF) SELECT count(*) FROM pr JOIN hb USING (k);
SELECT * FROM build_report('SELECT count(*) FROM pr JOIN hb USING (k)');

-- keys: int4, int8, int2, date (hashint4), text and numeric and timestamp (not hashed
-- inline), two and three keys, cross-type int4 = int8
SELECT same('SELECT p.k, p.v, b.pay, b.f, b.b FROM PROBE p JOIN BUILD b ON b.k = p.k');
SELECT same('SELECT p.g, b.k, b.pay FROM PROBE p JOIN BUILD b ON b.g = p.g');
SELECT same('SELECT p.s, count(*), sum(b.f) FROM PROBE p JOIN BUILD b ON b.s = p.s GROUP BY p.s');
SELECT same('SELECT p.d, count(*), max(b.pay) FROM PROBE p JOIN BUILD b ON b.d = p.d GROUP BY p.d');
SELECT same('SELECT p.t, b.k, b.n FROM PROBE p JOIN BUILD b ON b.t = p.t');
SELECT same('SELECT p.n, count(*) FROM PROBE p JOIN BUILD b ON b.n = p.n GROUP BY p.n');
SELECT same('SELECT p.ts, count(*) FROM PROBE p JOIN BUILD b ON b.ts = p.ts GROUP BY p.ts');
SELECT same('SELECT p.k, b.pay FROM PROBE p JOIN BUILD b ON b.k = p.k AND b.s = p.s');
SELECT same('SELECT p.k, b.pay FROM PROBE p JOIN BUILD b ON b.k = p.k AND b.g = p.g AND b.d = p.d');
SELECT same('SELECT p.k, b.g FROM PROBE p JOIN BUILD b ON b.g = p.k');
SELECT same('SELECT p.k, b.pay FROM PROBE p JOIN BUILD b ON b.k = p.k AND b.t = p.t');
-- a key that is an expression of the scan's columns (the scan projects it)
SELECT same('SELECT p.k, b.pay FROM PROBE p JOIN BUILD b ON b.k + 1 = p.k');
-- NULL keys: not in the table for inner joins; kept for the outer joins that need them
SELECT same('SELECT p.k, b.k, b.pay FROM PROBE p RIGHT JOIN BUILD b ON b.g = p.g WHERE b.k % 50 = 0 OR b.k IS NULL');
SELECT same('SELECT p.k, b.k, b.pay FROM PROBE p FULL JOIN BUILD b ON b.g = p.g WHERE coalesce(b.k, p.k, 0) % 50 = 0');
SELECT same('SELECT p.k, b.t FROM PROBE p LEFT JOIN BUILD b ON b.t = p.t');
SELECT same('SELECT p.* FROM PROBE p WHERE EXISTS (SELECT FROM BUILD b WHERE b.k = p.k AND b.s = p.s)');
SELECT same('SELECT p.* FROM PROBE p WHERE NOT EXISTS (SELECT FROM BUILD b WHERE b.g = p.g)');
-- the wide rows (each its own hash chunk)
SELECT same('SELECT p.k, length(b.pay), left(b.pay, 3) FROM PROBE p JOIN BUILD b ON b.k = p.k WHERE length(b.pay) > 100');
-- a filter on the build side (the scan's own qual) and a projection
SELECT same('SELECT p.k, b.f * 2, upper(b.pay) FROM PROBE p JOIN BUILD b ON b.k = p.k WHERE b.f > 1000 AND b.pay LIKE ''p1%''');

-- small work_mem: several batches; rows of later batches go through PostgreSQL's insert, and
-- the batch count grows during the build (ExecHashIncreaseNumBatches)
SET work_mem = '256kB';
SELECT same('SELECT p.k, b.pay, b.t FROM PROBE p JOIN BUILD b ON b.k = p.k');
SELECT same('SELECT p.k, b.k, b.pay FROM PROBE p FULL JOIN BUILD b ON b.k = p.k WHERE coalesce(b.k, p.k, 0) % 7 = 0');
SELECT batches > 1 AS several_batches, rows_ = 60000 AS every_row,
       written > 0 AND written < rows_ AS some_in_place, same_table
FROM build_report('SELECT count(*) FROM pr JOIN hb USING (k)');
-- skew (a multi-batch join whose probing key has frequent values: pr.v, ten values) keeps the
-- matching build rows in skew buckets; those builds are left to the Hash node (none written)
SELECT same('SELECT p.v, count(*), sum(b.f) FROM PROBE p JOIN BUILD b ON b.k = p.v GROUP BY p.v');
SELECT * FROM build_report('SELECT count(*) FROM pr JOIN hb ON hb.k = pr.v');
RESET work_mem;

-- the table PostgreSQL would have built: buckets, batches, memory and rows equal on and off
SELECT * FROM build_report('SELECT count(*) FROM pr JOIN hb ON hb.g = pr.g');
SELECT * FROM build_report('SELECT count(*) FROM pr JOIN hb ON hb.t = pr.t');
SELECT * FROM build_report('SELECT count(*) FROM pr RIGHT JOIN hb ON hb.d = pr.d');

-- a ScootPreAgg (eager aggregation of the hashed side) and a ScootAgg (a grouped subquery)
-- under the Hash write their groups into the table too
SET scoot.eager_agg = on;
EXPLAIN (COSTS OFF) SELECT count(*) FROM pr JOIN hb USING (k);
SELECT * FROM build_report('SELECT count(*) FROM pr JOIN hb USING (k)');
SELECT same('SELECT count(*), sum(b.f) FROM PROBE p JOIN BUILD b USING (k)');
SELECT same('SELECT b.s, count(*), max(p.v) FROM PROBE p JOIN BUILD b ON b.k = p.k GROUP BY b.s');
RESET scoot.eager_agg;
SET scoot.eager_agg = off;
EXPLAIN (COSTS OFF)
  SELECT p.k, x.* FROM pr p JOIN (SELECT s, count(*) c, max(k) t FROM hb GROUP BY s) x ON x.s = p.s;
SELECT * FROM build_report('SELECT p.k, x.* FROM pr p JOIN (SELECT s, count(*) c, max(k) t FROM hb GROUP BY s) x ON x.s = p.s');
SELECT same('SELECT p.k, x.* FROM PROBE p JOIN (SELECT s, count(*) c, max(k) t, min(pay) m FROM BUILD GROUP BY s) x ON x.s = p.s');

-- rebuilt on every rescan: a hash join under a nested loop whose parameter filters the build
SET enable_nestloop = on;
SELECT same('SELECT o.v, x.c FROM (SELECT DISTINCT v FROM PROBE) o,
               LATERAL (SELECT count(*) c, sum(b.f) FROM PROBE p JOIN BUILD b ON b.k = p.k
                        WHERE b.s % 10 = o.v) x');
SET enable_nestloop = off;

-- off: the Hash node pulls the rows itself (the scan writes none)
SET scoot.hash_build = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT count(*) FROM pr JOIN hb USING (k);
RESET scoot.hash_build;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT count(*) FROM pr JOIN hb USING (k);

-- cancellation during the build: the statement stops, the session goes on
SET statement_timeout = '20ms';
DO $$ BEGIN
  PERFORM count(*) FROM hb a JOIN hb b ON a.s = b.s JOIN hb c ON c.s = b.s;
EXCEPTION WHEN query_canceled THEN RAISE NOTICE 'canceled';
END $$;
RESET statement_timeout;
SELECT count(*) FROM pr JOIN hb USING (k);

RESET scoot.eager_agg;
DROP TABLE hb, hbh, pr, prh;
DROP FUNCTION same(text), hash_nodes(json), build_report(text);
