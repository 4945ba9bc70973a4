-- scoot_specific_fetch_columns: index and bitmap heap scans of scoot tables copy only the
-- columns their plan reads (src/exec/customscan.c, adjust_scan_nodes): the node's own quals
-- and target list when it projects, and the parent join's expressions on its side when it
-- hands its scan slot up unprojected (a physical target list). Every other column reads as
-- NULL, so a wrong column set shows as a wrong answer: every query here runs on a scoot table
-- and on a heap copy, and the two answers (md5 of all rows) must be equal.
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;

CREATE TABLE fc (k int, a int, q numeric(15,2), flag char(1), code varchar(8), t text,
                 d date, big int8, w numeric(30,4), ok bool, f float8, pad text, z int)
  USING scoot;
INSERT INTO fc SELECT i, i % 100, (i % 50) + 0.25, (array['A','N','R'])[i % 3 + 1], 'c' || (i % 97),
       CASE WHEN i % 13 = 0 THEN NULL ELSE repeat('t', i % 20) || i END,
       date '2000-01-01' + (i % 3000), i::int8 * 1000003, CASE WHEN i % 7 = 0 THEN NULL ELSE i / 7.0 END,
       i % 5 = 0, i / 3.0, repeat('p', 30), i % 11
FROM generate_series(1, 30000) i;
CREATE INDEX fc_k ON fc (k);
CREATE INDEX fc_a ON fc (a);
CREATE TABLE fh (LIKE fc) USING heap;
INSERT INTO fh SELECT * FROM fc;
CREATE INDEX fh_k ON fh (k);
CREATE INDEX fh_a ON fh (a);
CREATE TABLE drv (k int, a int, tag text);
INSERT INTO drv SELECT i * 37 % 30000 + 1, i % 100, 'g' || (i % 4) FROM generate_series(1, 400) i;
ANALYZE fc, fh, drv;

-- the answer of a query on the scoot table ('fc') and on the heap copy ('fh'): equal?
CREATE FUNCTION same(q text) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE s text; h text;
BEGIN
  EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) FROM (%s) x',
                 replace(q, 'TBL', 'fc')) INTO s;
  EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) FROM (%s) x',
                 replace(q, 'TBL', 'fh')) INTO h;
  IF s IS DISTINCT FROM h THEN
    RAISE NOTICE 'differs: %', q;
  END IF;
  RETURN s = h;
END $$;

-- index scans as the inner side of nested loops (physical target list, the join reads
-- columns of its own choosing), as the outer side, and projecting
SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_bitmapscan = off; SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT d.tag, f.q, f.t FROM drv d JOIN fc f ON f.k = d.k WHERE f.d > '2001-01-01';
SELECT same($$SELECT d.tag, f.q, f.t FROM drv d JOIN TBL f ON f.k = d.k WHERE f.d > '2001-01-01'$$);
SELECT same($$SELECT d.tag, f.z, f.w, f.code FROM drv d JOIN TBL f ON f.k = d.k AND f.flag <> d.tag$$);
SELECT same($$SELECT d.tag, f.big FROM drv d LEFT JOIN TBL f ON f.k = d.k + 100000$$);
SELECT same($$SELECT d.tag, f.k, f.pad FROM drv d JOIN TBL f ON f.a = d.a AND f.k < 600 WHERE f.ok$$);
SELECT same($$SELECT f.k, f.t, d.tag FROM TBL f JOIN drv d ON d.k = f.k WHERE f.k < 2000$$);
-- join filter and join quals on a late column, whole rows, system columns
SELECT same($$SELECT d.tag, f.z FROM drv d JOIN TBL f ON f.k = d.k WHERE f.t IS NULL OR f.f > 5000$$);
SELECT same($$SELECT d.tag, f FROM drv d JOIN TBL f ON f.k = d.k$$);
SELECT same($$SELECT d.tag, f.tableoid <> 0, f.ctid IS NOT NULL, f.q FROM drv d JOIN TBL f ON f.k = d.k$$);
-- a correlated subplan with an index scan under an aggregate; an index scan under a sort
SELECT same($$SELECT d.k, (SELECT sum(q) FROM TBL f WHERE f.a = d.a AND f.z = 3) FROM drv d$$);
SELECT same($$SELECT k, q, code FROM (SELECT * FROM TBL WHERE k BETWEEN 100 AND 900 ORDER BY w, k) s$$);
SELECT same($$SELECT count(*), sum(w), max(t) FROM TBL WHERE k BETWEEN 100 AND 5000 AND flag = 'A'$$);
-- merge join over index scans, and an index scan as a hash join's outer side (also when the
-- join spills outer rows to temporary files, copying the half-filled slots)
RESET enable_mergejoin; SET enable_nestloop = off; SET enable_sort = off;
EXPLAIN (COSTS OFF) SELECT f.k, f.t, g.q FROM fc f JOIN fc g ON g.k = f.k WHERE f.k < 3000;
SELECT same($$SELECT f.k, f.t, g.q, g.code FROM TBL f JOIN TBL g ON g.k = f.k WHERE f.k < 3000 AND g.z <> f.a$$);
RESET enable_sort; SET enable_mergejoin = off; RESET enable_hashjoin; SET work_mem = '64kB';
SELECT same($$SELECT f.k, f.t, d.tag, f.w FROM TBL f JOIN drv d ON d.k = f.k WHERE f.k < 20000$$);
SELECT same($$SELECT f.k, f.pad, g.t FROM TBL f JOIN TBL g ON g.a = f.a AND g.k = f.k + 1 WHERE f.k < 8000$$);
RESET work_mem;
-- a B-tree's conditions are never rechecked on the row: their columns are not copied unless
-- something else reads them; a hash index's are (its scan rechecks every row it returns)
RESET enable_nestloop; SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_bitmapscan = off;
SELECT same($$SELECT d.tag, f.q FROM drv d JOIN TBL f ON f.k = d.k AND f.a = d.a$$);
SELECT same($$SELECT d.tag, f.q, f.k FROM drv d JOIN TBL f ON f.k = d.k WHERE f.a < 50$$);
CREATE INDEX fc_code ON fc USING hash (code);
CREATE INDEX fh_code ON fh USING hash (code);
DROP INDEX fc_k, fh_k;
EXPLAIN (COSTS OFF) SELECT f.q FROM fc f WHERE f.code = 'c5';
SELECT same($$SELECT f.q FROM TBL f WHERE f.code = 'c5'$$);
SELECT same($$SELECT d.tag, f.q FROM drv d JOIN TBL f ON f.code = 'c' || (d.k % 97)$$);
DROP INDEX fc_code, fh_code;
CREATE INDEX fc_k ON fc (k);
CREATE INDEX fh_k ON fh (k);
RESET ALL; SET jit = off; SET max_parallel_workers_per_gather = 0;

-- bitmap heap scans: under a join, under an aggregate, with a lossy bitmap (rechecks read
-- the index quals' columns)
RESET ALL; SET jit = off; SET max_parallel_workers_per_gather = 0;
SET enable_indexscan = off; SET enable_seqscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off;
EXPLAIN (COSTS OFF) SELECT d.tag, f.q FROM drv d JOIN fc f ON f.a = d.a AND f.k < 900;
SELECT same($$SELECT d.tag, f.q, f.code FROM drv d JOIN TBL f ON f.a = d.a AND f.k < 900$$);
SELECT same($$SELECT sum(q), count(t), min(code) FROM TBL WHERE a IN (3, 5, 77) AND d < '2004-01-01'$$);
SELECT same($$SELECT f.k, f.w FROM TBL f WHERE f.a < 30 AND f.z = 2$$);
SET work_mem = '64kB';
SELECT same($$SELECT sum(q), count(t), max(f) FROM TBL WHERE a < 60 AND k % 3 = 0$$);
RESET work_mem;

-- index and bitmap heap scans handing their slot unprojected to an aggregate, which reads its
-- arguments, FILTERs, ORDER BYs, HAVING and grouping columns (hashed and sorted) from it
RESET ALL; SET jit = off; SET max_parallel_workers_per_gather = 0;
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT same($$SELECT flag, sum(q), count(t) FILTER (WHERE z > 3) FROM TBL WHERE k < 5000 GROUP BY flag HAVING max(code) > 'c1'$$);
SELECT same($$SELECT d, string_agg(code, ',' ORDER BY w, k), count(DISTINCT a) FROM TBL WHERE k < 3000 GROUP BY d$$);
SELECT same($$SELECT a % 7, sum(q), min(pad) FROM TBL WHERE k < 8000 GROUP BY a % 7$$);
SET enable_hashagg = off;
SELECT same($$SELECT a, sum(big), avg(f) FROM TBL WHERE k < 8000 GROUP BY a HAVING sum(q) > 100$$);
SELECT same($$SELECT code, t, count(*) FROM TBL WHERE k < 2000 GROUP BY code, t$$);
SELECT same($$SELECT count(*), sum(q) FROM TBL WHERE k < 5000 GROUP BY flag, z$$);
RESET enable_hashagg;
SET enable_indexscan = off; SET enable_bitmapscan = on;
SELECT same($$SELECT ok, max(t), sum(w) FROM TBL WHERE a IN (1, 2, 3) GROUP BY ok$$);
SELECT same($$SELECT d.k, (SELECT avg(q) FROM TBL f WHERE f.a = d.a AND f.k < 900) FROM drv d$$);

-- an index scan node's first row is fetched with its columns already set (the node names them
-- as it begins its scan): single-row lookups, also in generic plans whose runtime keys run a
-- subplan that scans the same table through the same index for other columns first (that
-- scan must copy its own columns, not the outer node's)
RESET ALL; SET jit = off; SET max_parallel_workers_per_gather = 0;
SET enable_seqscan = off; SET enable_bitmapscan = off; SET scoot.custom_scan = off;
EXPLAIN (COSTS OFF) SELECT k, q FROM fc WHERE k = (SELECT k + 1 FROM fc f2 WHERE f2.k = 77 AND f2.t IS NOT NULL);
SELECT same($$SELECT k, q FROM TBL WHERE k = (SELECT k + 1 FROM TBL f2 WHERE f2.k = 77 AND f2.t IS NOT NULL)$$);
SELECT same($$SELECT k, (SELECT f2.pad || f2.code FROM TBL f2 WHERE f2.k = f.k + 1) FROM TBL f WHERE k = 500$$);
SET plan_cache_mode = force_generic_plan;
PREPARE one_fc(int) AS SELECT k, q, (SELECT code || pad FROM fc f2 WHERE f2.k = $1 + 1) FROM fc
  WHERE k = (SELECT k + 1 FROM fc f3 WHERE f3.k = $1 AND f3.w IS NOT NULL AND f3.t IS NOT NULL);
PREPARE one_fh(int) AS SELECT k, q, (SELECT code || pad FROM fh f2 WHERE f2.k = $1 + 1) FROM fh
  WHERE k = (SELECT k + 1 FROM fh f3 WHERE f3.k = $1 AND f3.w IS NOT NULL AND f3.t IS NOT NULL);
EXPLAIN (COSTS OFF) EXECUTE one_fc(100);
DO $$
DECLARE s record; h record; n int; found int := 0;
BEGIN
  FOR n IN 1..60 LOOP
    EXECUTE format('EXECUTE one_fc(%s)', n * 17) INTO s;
    EXECUTE format('EXECUTE one_fh(%s)', n * 17) INTO h;
    IF s::text IS DISTINCT FROM h::text THEN RAISE NOTICE 'differs at %: % vs %', n * 17, s, h; END IF;
    IF s.k IS NOT NULL THEN found := found + 1; END IF;
  END LOOP;
  RAISE NOTICE 'rows found: %', found;
END $$;
EXECUTE one_fc(100);
DEALLOCATE one_fc; DEALLOCATE one_fh;

-- plain Seq Scans (scoot.custom_scan = off, and tables of a few rows with it on) copy only the
-- columns their plan reads too: projecting, handing their slot unprojected to a join (either
-- side) or an aggregate, under a Sort or Hash (every column), rescanned as a nested loop's inner
-- side or in a correlated subplan, whole rows, system columns, FOR UPDATE, parallel workers,
-- a cursor's WHERE CURRENT OF, and as the scan of an UPDATE / DELETE
RESET ALL; SET jit = off; SET max_parallel_workers_per_gather = 0; SET scoot.custom_scan = off;
SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_indexonlyscan = off;
EXPLAIN (COSTS OFF) SELECT d.tag, f.q, f.t FROM drv d JOIN fc f ON f.k = d.k WHERE f.d > '2001-01-01';
SELECT same($$SELECT d.tag, f.q, f.t FROM drv d JOIN TBL f ON f.k = d.k WHERE f.d > '2001-01-01'$$);
SELECT same($$SELECT f.k, f.w, d.tag FROM TBL f JOIN drv d ON d.k = f.k AND f.flag <> d.tag$$);
SELECT same($$SELECT q, code FROM TBL WHERE t LIKE 'ttt%' AND z = 4$$);
SELECT same($$SELECT count(*) FROM TBL WHERE pad LIKE 'p%' AND ok$$);
EXPLAIN (COSTS OFF) SELECT flag, sum(q), max(pad) FROM fc GROUP BY flag;
SELECT same($$SELECT flag, sum(q), count(t) FILTER (WHERE z > 3), max(pad) FROM TBL GROUP BY flag$$);
SET enable_hashagg = off;
SELECT same($$SELECT a % 5, sum(w), min(code) FROM TBL GROUP BY a % 5 HAVING sum(big) > 0$$);
RESET enable_hashagg;
SELECT same($$SELECT d.tag, f FROM drv d JOIN TBL f ON f.k = d.k$$);
SELECT same($$SELECT f.xmin::text::bigint > 2, f.cmin::text, f.ctid IS NOT NULL, f.tableoid <> 0, f.d FROM TBL f WHERE f.a = 3$$);
SELECT same($$SELECT k, t FROM (SELECT * FROM TBL WHERE a = 7 ORDER BY w DESC, k) s$$);
SELECT same($$SELECT d.k, (SELECT max(f.code) FROM TBL f WHERE f.a = d.a AND f.z = 3) FROM drv d WHERE d.k < 3000$$);
SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_material = off;
EXPLAIN (COSTS OFF) SELECT d.tag, f.w FROM drv d JOIN fc f ON f.k = d.k + 1 WHERE d.k < 200;
SELECT same($$SELECT d.tag, f.w, f.code FROM drv d JOIN TBL f ON f.k = d.k + 1 WHERE d.k < 200$$);
RESET enable_hashjoin; RESET enable_mergejoin; RESET enable_material;
BEGIN;
SELECT same($$SELECT k, q FROM TBL WHERE z = 9 AND a < 20 FOR UPDATE$$);
COMMIT;
SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT z, sum(q), max(t) FROM fc GROUP BY z;
SELECT same($$SELECT z, sum(q), max(t) FROM TBL GROUP BY z$$);
SELECT same($$SELECT k, code FROM TBL WHERE w > 4000 AND flag = 'N'$$);
RESET max_parallel_workers_per_gather; RESET parallel_setup_cost; RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size; SET max_parallel_workers_per_gather = 0;
BEGIN;
DECLARE sc_fc CURSOR FOR SELECT k FROM fc WHERE a = 42 ORDER BY k FOR UPDATE;
DECLARE sc_fh CURSOR FOR SELECT k FROM fh WHERE a = 42 ORDER BY k FOR UPDATE;
FETCH 3 FROM sc_fc; FETCH 3 FROM sc_fh;
UPDATE fc SET t = 'cursor', q = q * 2 WHERE CURRENT OF sc_fc;
UPDATE fh SET t = 'cursor', q = q * 2 WHERE CURRENT OF sc_fh;
COMMIT;
UPDATE fc SET w = w + 1, code = code || 'u' WHERE z = 5 AND a < 50;
UPDATE fh SET w = w + 1, code = code || 'u' WHERE z = 5 AND a < 50;
DELETE FROM fc WHERE z = 6 AND a > 95;
DELETE FROM fh WHERE z = 6 AND a > 95;
SELECT same($$SELECT * FROM TBL$$);
-- with custom scans on, a table of a few rows is read by a plain Seq Scan
RESET scoot.custom_scan;
CREATE TABLE few (id int, note text, v numeric(10,2), n int) USING scoot;
CREATE TABLE few_h (LIKE few) USING heap;
INSERT INTO few VALUES (1, 'one', 1.5, 10), (2, NULL, 2.25, 20), (3, 'three', NULL, 30);
INSERT INTO few_h SELECT * FROM few;
ANALYZE few, few_h;
EXPLAIN (COSTS OFF) SELECT f.k, x.note FROM fc f JOIN few x ON x.id = f.a WHERE f.k < 100;
SELECT f.k, x.note, x.v FROM fc f JOIN few x ON x.id = f.a WHERE f.k < 400 ORDER BY 1;
SELECT f.k, x.note, x.v FROM fh f JOIN few_h x ON x.id = f.a WHERE f.k < 400 ORDER BY 1;
SELECT n, v FROM few WHERE note IS NULL OR v > 2 ORDER BY n;
DROP TABLE few, few_h;
RESET ALL; SET jit = off; SET max_parallel_workers_per_gather = 0;

-- writes through such scans: UPDATE ... FROM and DELETE ... USING with index nested loops
RESET ALL; SET jit = off; SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_seqscan = off;
UPDATE fc f SET q = f.q + 1, t = d.tag FROM drv d WHERE f.k = d.k AND d.a < 50;
UPDATE fh f SET q = f.q + 1, t = d.tag FROM drv d WHERE f.k = d.k AND d.a < 50;
DELETE FROM fc f USING drv d WHERE f.k = d.k + 1 AND d.a > 90;
DELETE FROM fh f USING drv d WHERE f.k = d.k + 1 AND d.a > 90;
RESET ALL; SET jit = off;
SELECT same($$SELECT * FROM TBL$$);
SELECT same($$SELECT k, q, t FROM TBL WHERE k IN (SELECT k FROM drv)$$);
-- index-only scans fetch each row only for its visibility (no visibility map) and copy no
-- column of it; after the updates and deletes above, no dead version may show
SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT k FROM fc WHERE k < 3000;
SELECT same($$SELECT k FROM TBL WHERE k < 3000$$);
SELECT same($$SELECT a, count(*) FROM TBL WHERE a < 50 GROUP BY a$$);
RESET enable_seqscan; RESET enable_bitmapscan;

-- the same kinds of plans reading an OLAP snapshot image (scoot.olap): index and bitmap
-- fetches from the image copy the same columns
CREATE FUNCTION reads_image(q text) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || replace(q, 'TBL', 'fc') LOOP
    IF l LIKE '%Scoot Snapshot:%' THEN RETURN true; END IF;
  END LOOP;
  RETURN false;
END $$;
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
SET LOCAL scoot.olap = on;
SHOW scoot.snapshot_fetch_cache;
SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT reads_image($$SELECT d.tag, f.q, f.t FROM drv d JOIN TBL f ON f.k = d.k WHERE f.d > '2001-01-01'$$);
SELECT same($$SELECT d.tag, f.q, f.t FROM drv d JOIN TBL f ON f.k = d.k WHERE f.d > '2001-01-01'$$);
SELECT same($$SELECT d.tag, f.z, f.w, f.code FROM drv d JOIN TBL f ON f.k = d.k AND f.flag <> d.tag$$);
SELECT same($$SELECT d.tag, f FROM drv d JOIN TBL f ON f.k = d.k$$);
SELECT same($$SELECT d.k, (SELECT sum(q) FROM TBL f WHERE f.a = d.a AND f.z = 3) FROM drv d$$);
SELECT reads_image($$SELECT k FROM TBL WHERE k < 3000$$);
SELECT same($$SELECT k FROM TBL WHERE k < 3000$$);
SELECT same($$SELECT d.tag, count(*) FROM drv d JOIN TBL f ON f.a = d.a GROUP BY d.tag$$);
SET LOCAL enable_bitmapscan = on; SET LOCAL enable_indexscan = off;
SELECT same($$SELECT d.tag, f.q, f.code FROM drv d JOIN TBL f ON f.a = d.a AND f.k < 900$$);
SELECT same($$SELECT sum(q), count(t), min(code) FROM TBL WHERE a IN (3, 5, 77) AND d < '2004-01-01'$$);
COMMIT;
-- the images this test read are released before the next test (older images hold back the
-- horizon that VACUUM and scoot.freeze work to)
DO $$ BEGIN FOR i IN 1..200 LOOP EXIT WHEN NOT EXISTS (SELECT FROM scoot.snapshots WHERE state <> 'newest'); PERFORM pg_sleep(0.05); END LOOP; END $$;

DROP FUNCTION same(text);
DROP FUNCTION reads_image(text);
DROP TABLE fc, fh, drv;
