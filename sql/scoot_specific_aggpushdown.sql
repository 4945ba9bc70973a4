-- ScootAgg, aggregate pushdown: which aggregate queries it answers (EXPLAIN shows group keys,
-- aggregates and block filters), which it leaves to PostgreSQL, the fallback to PostgreSQL's
-- own plan when a block cannot be answered exactly (NaN, infinity, a column added later, an
-- overflow), and a differential check: thousands of random grouped aggregates over data with
-- NULLs and edge values answer exactly (values and errors) as on a heap copy and with
-- scoot.agg_pushdown = off.
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;

CREATE TABLE ag_s (id int, s int2, a int, b int8, n numeric(12,2), w numeric(30,6), c char(2), k char(1),
                   v varchar(8), t text, d date, ts timestamp, tz timestamptz, f float8) USING scoot;
CREATE TABLE ag_h (LIKE ag_s) USING heap;
INSERT INTO ag_h
SELECT i,
       CASE WHEN i % 53 = 0 THEN NULL ELSE (i % 301) - 150 END,
       CASE WHEN i % 13 = 0 THEN NULL ELSE (i * 7919) % 1000 - 500 END,
       CASE WHEN i % 17 = 0 THEN NULL ELSE i::int8 * 1000003 % 99991 END,
       CASE WHEN i % 11 = 0 THEN NULL ELSE ((i * 31) % 20000) / 100.0 - 50 END,
       CASE WHEN i % 19 = 0 THEN NULL ELSE (i::int8 * 104729 % 1000003) / 7.0 END,
       CASE WHEN i % 7 = 0 THEN NULL ELSE chr(65 + i % 5) || chr(65 + i % 3) END,
       CASE WHEN i % 29 = 0 THEN NULL ELSE chr(70 + i % 4) END,
       CASE WHEN i % 23 = 0 THEN NULL ELSE 'v' || (i % 9) END,
       CASE WHEN i % 31 = 0 THEN NULL ELSE 't' || (i % 5) END,
       CASE WHEN i % 37 = 0 THEN NULL ELSE date '2020-01-01' + (i % 900) END,
       CASE WHEN i % 41 = 0 THEN NULL ELSE timestamp '2020-01-01' + (i % 5000) * interval '17 minutes' END,
       CASE WHEN i % 43 = 0 THEN NULL ELSE timestamptz '2020-01-01 00:00+00' + (i % 700) * interval '1 day 1 hour' END,
       CASE WHEN i % 47 = 0 THEN NULL ELSE ((i * 13) % 1000) / 8.0 END
FROM generate_series(1, 30000) i;
-- edge values: type bounds, infinite dates and timestamps
INSERT INTO ag_h (id, s, a, b, n, w, d, ts, k) VALUES
  (30001, 32767, 2147483647, 9223372036854775807, 9999999999.99, 99999999999999999999999.999999, 'infinity', 'infinity', 'F'),
  (30002, -32768, -2147483648, -9223372036854775808, -9999999999.99, -99999999999999999999999.999999, '-infinity', '-infinity', 'G'),
  (30003, 0, 0, 0, 0, 0, '2020-01-01', '2020-01-01', NULL);
INSERT INTO ag_s SELECT * FROM ag_h;
UPDATE ag_s SET a = a + 1 WHERE id % 10 = 0 AND id < 30000;
UPDATE ag_h SET a = a + 1 WHERE id % 10 = 0 AND id < 30000;
DELETE FROM ag_s WHERE id % 97 = 0;
DELETE FROM ag_h WHERE id % 97 = 0;
ANALYZE ag_s;
ANALYZE ag_h;

-- plans: what is pushed down
EXPLAIN (COSTS OFF) SELECT count(*) FROM ag_s;
EXPLAIN (COSTS OFF)
SELECT c, k, count(*), count(n), sum(a), sum(b), avg(n), min(d), max(ts), sum(n * (1 - n)), avg(w)
FROM ag_s WHERE d >= date '2020-03-01' AND d < date '2020-03-01' + interval '1 year' AND n IS NOT NULL
GROUP BY c, k ORDER BY c, k;
-- HAVING and expressions over the aggregates stay PostgreSQL's (over the node's rows)
EXPLAIN (COSTS OFF, VERBOSE)
SELECT k, sum(a) / count(*) AS mean, max(b) - min(b) FROM ag_s WHERE b >= 0 AND b < 100000 GROUP BY k HAVING max(n) > 10 ORDER BY sum(a) DESC;
-- integer arithmetic of any widths, casts to numeric, count of any column, timestamp and varchar keys
EXPLAIN (COSTS OFF) SELECT ts, v, sum(a * 2 + a), sum(a::numeric * n), max(b - 1), sum(s + a), count(t) FROM ag_s WHERE a IN (1, 2, 3) GROUP BY ts, v;
-- not pushed down: a qual that is no block filter, a text or float key, DISTINCT / ORDER BY /
-- FILTER in an aggregate, an aggregate of an unsupported type, division,
-- grouping sets, a join, a row lock
EXPLAIN (COSTS OFF) SELECT count(*) FROM ag_s WHERE a + 1 > 5;
EXPLAIN (COSTS OFF) SELECT t, count(*) FROM ag_s GROUP BY t;
EXPLAIN (COSTS OFF) SELECT f, count(*) FROM ag_s GROUP BY f;
EXPLAIN (COSTS OFF) SELECT count(DISTINCT a) FROM ag_s;
EXPLAIN (COSTS OFF) SELECT sum(a ORDER BY a) FROM ag_s;
EXPLAIN (COSTS OFF) SELECT sum(a) FILTER (WHERE b > 0) FROM ag_s;
EXPLAIN (COSTS OFF) SELECT sum(f) FROM ag_s;
EXPLAIN (COSTS OFF) SELECT sum(a / 2) FROM ag_s;
EXPLAIN (COSTS OFF) SELECT k, c, count(*) FROM ag_s GROUP BY ROLLUP (k, c);
EXPLAIN (COSTS OFF) SELECT s.k, count(*) FROM ag_s s JOIN ag_h h USING (id) GROUP BY s.k;
EXPLAIN (COSTS OFF) SELECT a, count(*) FROM ag_s GROUP BY a + 1, a;
SET scoot.agg_pushdown = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ag_s;
RESET scoot.agg_pushdown;
SET scoot.custom_scan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ag_s;
RESET scoot.custom_scan;

-- answers next to heap's
SELECT c, k, count(*), count(n), sum(a), sum(b), avg(n), min(d), max(ts), sum(n * (1 - n)), avg(w)
FROM ag_s WHERE d >= date '2020-03-01' AND d < date '2020-03-01' + interval '1 year' AND n IS NOT NULL
GROUP BY c, k ORDER BY c, k LIMIT 5;
SELECT c, k, count(*), count(n), sum(a), sum(b), avg(n), min(d), max(ts), sum(n * (1 - n)), avg(w)
FROM ag_h WHERE d >= date '2020-03-01' AND d < date '2020-03-01' + interval '1 year' AND n IS NOT NULL
GROUP BY c, k ORDER BY c, k LIMIT 5;
SELECT k, sum(a) / count(*) AS mean, max(b) - min(b) FROM ag_s WHERE b >= 0 AND b < 100000 GROUP BY k HAVING max(n) > 10 ORDER BY sum(a) DESC;
SELECT k, sum(a) / count(*) AS mean, max(b) - min(b) FROM ag_h WHERE b >= 0 AND b < 100000 GROUP BY k HAVING max(n) > 10 ORDER BY sum(a) DESC;
-- character filters: char(n) compares without trailing spaces, varchar exactly, LIKE 'prefix%'
EXPLAIN (COSTS OFF) SELECT k, count(*) FROM ag_s WHERE c = 'AB ' AND v LIKE 'v1%' AND k IN ('F', 'G') GROUP BY k;
SELECT k, count(*), sum(a) FROM ag_s WHERE c = 'AB ' AND v LIKE 'v1%' AND k IN ('F', 'G') GROUP BY k ORDER BY k;
SELECT k, count(*), sum(a) FROM ag_h WHERE c = 'AB ' AND v LIKE 'v1%' AND k IN ('F', 'G') GROUP BY k ORDER BY k;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ag_s WHERE v = '' OR v = 'v1 ' OR c LIKE 'AB%';
SELECT count(*) FROM ag_s WHERE v = '' OR v = 'v1 ' OR c LIKE 'AB%';
SELECT count(*) FROM ag_h WHERE v = '' OR v = 'v1 ' OR c LIKE 'AB%';
SELECT count(*), count(v) FROM ag_s WHERE v = 'v1 ';
SELECT count(*), count(v) FROM ag_s WHERE v IN ('v1', 'v2') AND c LIKE '_B%';
SELECT count(*), count(v) FROM ag_h WHERE v IN ('v1', 'v2') AND c LIKE '_B%';
-- bounds: sums past int8 are numeric; min/max of infinite dates; no rows: one row of NULLs / 0
SELECT sum(b), avg(b), sum(s), avg(s), min(d), max(d), min(ts), max(ts), max(w), min(w) FROM ag_s;
SELECT sum(b), avg(b), sum(s), avg(s), min(d), max(d), min(ts), max(ts), max(w), min(w) FROM ag_h;
SELECT count(*), count(a), sum(a), avg(n), min(d) FROM ag_s WHERE a > 100000;
SELECT k, count(*) FROM ag_s WHERE a > 100000 GROUP BY k;
-- overflow: PostgreSQL's own error (the node falls back to PostgreSQL's plan)
SELECT sum(a + 1) FROM ag_s;
SELECT sum(b * 2) FROM ag_s;
SELECT sum(s * s) FROM ag_s;
SELECT sum(a * 2), sum(s * 2), sum(b * 2) FROM ag_s WHERE a < 1000000 AND a > -1000000 AND b < 1000000;
SELECT sum(a * 2), sum(s * 2), sum(b * 2) FROM ag_h WHERE a < 1000000 AND a > -1000000 AND b < 1000000;
-- group keys of full-width char(8) / varchar(8) values next to each other, and four key words
CREATE TABLE ag_k (x char(8), y varchar(8), z char(1), n int) USING scoot;
INSERT INTO ag_k SELECT 'ABCDEFG' || (i % 3), 'xyzwvut' || (i % 2), chr(65 + i % 2), i FROM generate_series(1, 100) i;
EXPLAIN (COSTS OFF) SELECT x, y, n, z, count(*) FROM ag_k GROUP BY x, y, n, z;
SELECT x, y, z, count(*), sum(n), sum(c) FROM (SELECT x, y, n, z, count(*) AS c FROM ag_k GROUP BY x, y, n, z) s
GROUP BY x, y, z ORDER BY 1, 2, 3;
SELECT x, y, z, count(*), sum(n) FROM ag_k GROUP BY x, y, z ORDER BY 1, 2, 3;
DROP TABLE ag_k;
-- a row that is updated in this transaction counts once, with its new value
BEGIN;
UPDATE ag_s SET a = 1000 WHERE id = 5;
INSERT INTO ag_s (id, a, k) VALUES (40000, 7, 'Z');
SELECT k, count(*), sum(a) FROM ag_s WHERE k IN ('F', 'Z') OR k IS NULL GROUP BY k ORDER BY k;
ROLLBACK;
SELECT k, count(*), sum(a) FROM ag_s WHERE k IN ('F', 'Z') OR k IS NULL GROUP BY k ORDER BY k;
-- a rescanned node (the target reads the outer row)
SELECT g, x.cnt FROM generate_series(1, 3) g, LATERAL (SELECT count(*) + g AS cnt FROM ag_s WHERE a > 0) x;
-- a scrollable cursor
BEGIN;
DECLARE agc SCROLL CURSOR FOR SELECT k, count(*) FROM ag_s GROUP BY k ORDER BY k;
FETCH 2 FROM agc;
FETCH BACKWARD 1 FROM agc;
FETCH LAST FROM agc;
COMMIT;
-- parallel plans keep the same answers
SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT k, count(*), sum(n), avg(a) FROM ag_s GROUP BY k ORDER BY k;
SELECT k, count(*), sum(n), avg(a) FROM ag_h GROUP BY k ORDER BY k;
-- there a partial aggregate under a Gather pushes every one-step Agg out of the grouping
-- relation's paths; ScootAgg builds the one-step Agg it falls back on itself and stays
EXPLAIN (COSTS OFF) SELECT k, count(*), sum(n), avg(a) FROM ag_s GROUP BY k ORDER BY k;
EXPLAIN (COSTS OFF) SELECT count(*), sum(n) FROM ag_s WHERE a > 0;
RESET parallel_setup_cost; RESET parallel_tuple_cost; RESET min_parallel_table_scan_size;
SET max_parallel_workers_per_gather = 0;

-- the differential check: random group keys, aggregates and filters
CREATE FUNCTION ag_run(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) || count(*) FROM (%s) x', q) INTO r;
  RETURN r;
EXCEPTION WHEN OTHERS THEN
  RETURN 'ERROR: ' || SQLERRM;
END $$;
CREATE FUNCTION ag_check(n int, seed float8) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  keys text[] := ARRAY['s', 'a', 'b', 'n', 'c', 'k', 'v', 'd', 'ts', 'tz', 'w', 'extra'];
  aggs text[] := ARRAY[
    'count(*)', 'count(a)', 'count(n)', 'count(d)', 'sum(a)', 'sum(s)', 'sum(b)', 'sum(n)', 'sum(w)',
    'avg(a)', 'avg(s)', 'avg(b)', 'avg(n)', 'avg(w)', 'min(a)', 'max(a)', 'min(s)', 'max(b)', 'min(n)',
    'max(w)', 'min(d)', 'max(d)', 'min(ts)', 'max(tz)', 'sum(n * w)', 'sum(n - 1.5)', 'avg(n * (1 - n))',
    'sum(a * 3 - a)', 'sum(b * b)', 'sum(a::numeric * n)', 'max(n * 100)', 'sum(b + 1)', 'count(n * 2)',
    'sum(s * s)', 'avg(a + 1)', 'min(w - n)', 'sum(2.50 * n)', 'max(a * a)', 'sum(a::int8 * b)',
    'sum(b - 1)', 'sum(s + a)', 'avg(a * s)', 'count(t)', 'count(f)', 'sum(a::int8 * 3)', 'sum(extra)', 'avg(extra * 2)'];
  preds text[] := ARRAY[
    'a > %s', 'a BETWEEN %s AND %s + 300', 'a IS NULL', 'b < %s * 100', 'n >= %s / 10.0', 'n < %s.25',
    'n IS NOT NULL AND n < %s / 7.0', 'w > %s * 3', 'k IS NULL', 'd < date ''2020-06-01'' + %s',
    'ts >= timestamp ''2020-02-01'' + %s * interval ''1 hour''', 'd >= date ''2020-03-01'' + %s * interval ''1 day''',
    'a IN (%s, %s, 7, -3, NULL)', 'n IN (1.50, 0.25, -49.69, 12.345)', 's < %s', 'tz > timestamptz ''2020-06-01 00:00+00''',
    'b IS NOT NULL AND a IS NOT NULL', 'c = ''AB''', 'extra > %s', 'a %% 7 = 3', 'k IN (''F'', ''H'', NULL)',
    'v = ''v3''', 'v LIKE ''v1%%''', 'c LIKE ''A%%''', 'k = ''G''', 'c = ''BA  ''', 'v IN (''v2'', ''v5'', ''x'')'];
  live text[];
  i int; j int; g text; sel text; pred text; q text; r_s text; r_h text; r_off text;
  checked int := 0; pushed int := 0; errors int := 0; p text;
BEGIN
  PERFORM setseed(seed);
  SELECT array_agg(attname::text ORDER BY attnum) INTO live FROM pg_attribute
   WHERE attrelid = 'ag_s'::regclass AND attnum > 0 AND NOT attisdropped;
  keys := ARRAY(SELECT x FROM unnest(keys) x WHERE x = ANY (live));
  aggs := ARRAY(SELECT x FROM unnest(aggs) x WHERE x NOT LIKE '%extra%' OR 'extra' = ANY (live));
  preds := ARRAY(SELECT x FROM unnest(preds) x WHERE split_part(x, ' ', 1) = ANY (live));
  FOR i IN 1..n LOOP
    g := '';
    FOR j IN 1..(floor(random() * 3))::int LOOP
      g := g || CASE WHEN g = '' THEN '' ELSE ', ' END || keys[1 + floor(random() * array_length(keys, 1))::int];
    END LOOP;
    sel := '';
    FOR j IN 1..(1 + floor(random() * 4))::int LOOP
      sel := sel || CASE WHEN sel = '' THEN '' ELSE ', ' END || aggs[1 + floor(random() * array_length(aggs, 1))::int];
    END LOOP;
    pred := 'true';
    IF random() < 0.7 THEN
      pred := format(preds[1 + floor(random() * array_length(preds, 1))::int],
                     floor(random() * 1000 - 500)::int, floor(random() * 1000 - 500)::int);
    END IF;
    IF random() < 0.3 THEN
      pred := pred || ' AND ' || format(preds[1 + floor(random() * array_length(preds, 1))::int],
                                        floor(random() * 1000)::int, floor(random() * 1000)::int);
    END IF;
    IF random() < 0.2 THEN
      -- an OR (a block filter when every arm is one or an AND of them)
      pred := format('(%s) OR (%s)', pred,
                     format(preds[1 + floor(random() * array_length(preds, 1))::int],
                            floor(random() * 1000 - 500)::int, floor(random() * 1000)::int));
    END IF;
    q := format('SELECT %s%s FROM ag_s WHERE %s%s', CASE WHEN g = '' THEN '' ELSE g || ', ' END, sel, pred,
                CASE WHEN g = '' THEN '' ELSE ' GROUP BY ' || g END);
    IF random() < 0.15 AND g <> '' THEN
      q := q || ' HAVING count(*) > 3';
    END IF;
    r_s := ag_run(q);
    r_h := ag_run(replace(q, 'ag_s', 'ag_h'));
    FOR p IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
      IF p LIKE '%ScootAgg%' THEN pushed := pushed + 1; END IF;
    END LOOP;
    SET LOCAL scoot.agg_pushdown = off;
    r_off := ag_run(q);
    SET LOCAL scoot.agg_pushdown = on;
    IF r_s <> r_h OR r_s <> r_off THEN
      RAISE EXCEPTION 'query % differs: scoot % heap % plain %', q, r_s, r_h, r_off;
    END IF;
    IF r_s LIKE 'ERROR%' THEN errors := errors + 1; END IF;
    checked := checked + 1;
  END LOOP;
  RETURN format('%s queries agree (%s pushed down, %s raise the same error)', checked,
                CASE WHEN pushed >= checked / 3 THEN 'many' ELSE 'FEW: ' || pushed END,
                CASE WHEN errors > 0 THEN 'some' ELSE 'none' END);
END $$;
BEGIN;
SELECT ag_check(700, 0.42);
COMMIT;

-- fallbacks: a block the integer path cannot answer makes the node run PostgreSQL's plan
-- (EXPLAIN ANALYZE names the reason); answers stay exact
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT sum(n), count(*) FROM ag_s;
INSERT INTO ag_s (id, n, w, k) VALUES (50001, 'NaN', 1.5, 'N');
INSERT INTO ag_h (id, n, w, k) VALUES (50001, 'NaN', 1.5, 'N');
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT sum(n), count(*) FROM ag_s;
SELECT sum(n), avg(n), max(n), count(*) FROM ag_s;
SELECT sum(n), avg(n), max(n), count(*) FROM ag_h;
SELECT k, sum(w), count(*) FROM ag_s WHERE n >= 'NaN' GROUP BY k;
SELECT k, sum(w), count(*) FROM ag_h WHERE n >= 'NaN' GROUP BY k;
-- NaN as a group key groups with NaN
SELECT n, count(*) FROM ag_s WHERE n IS NULL OR n > 9999999999 GROUP BY n ORDER BY n;
SELECT n, count(*) FROM ag_h WHERE n IS NULL OR n > 9999999999 GROUP BY n ORDER BY n;
-- a char(1) value of two bytes does not fit the column's 1-byte cells: later blocks store the
-- column as varlena, and the node falls back when grouping by it
INSERT INTO ag_s (id, a, k) VALUES (50002, 5, 'é');
INSERT INTO ag_h (id, a, k) VALUES (50002, 5, 'é');
DO $$
DECLARE l text;
BEGIN
  FOR l IN EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT k, count(*) FROM ag_s WHERE a = 5 GROUP BY k LOOP
    IF l LIKE '%Scoot Fallback%' THEN RAISE NOTICE '%', trim(l); END IF;
  END LOOP;
END $$;
SELECT k, sum(a), count(*) FROM ag_s WHERE a = 5 GROUP BY k ORDER BY k;
SELECT k, sum(a), count(*) FROM ag_h WHERE a = 5 GROUP BY k ORDER BY k;
-- the same where ScootAgg built the one-step Agg it falls back on (workers allowed, see above)
SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
DO $$
DECLARE l text;
BEGIN
  FOR l IN EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT k, count(*) FROM ag_s WHERE a = 5 GROUP BY k LOOP
    IF l LIKE '%Scoot Fallback%' OR l LIKE '%ScootAgg%' THEN RAISE NOTICE '%', trim(l); END IF;
  END LOOP;
END $$;
SELECT k, sum(a), count(*) FROM ag_s WHERE a = 5 GROUP BY k ORDER BY k;
RESET parallel_setup_cost; RESET parallel_tuple_cost; RESET min_parallel_table_scan_size;
SET max_parallel_workers_per_gather = 0;
DELETE FROM ag_s WHERE id IN (50001, 50002);
DELETE FROM ag_h WHERE id IN (50001, 50002);
-- after VACUUM (all-visible blocks), and with a column added with a default (absent from the
-- old blocks: the node falls back for it) and one dropped
VACUUM ag_s;
VACUUM ag_h;
ALTER TABLE ag_s ADD COLUMN extra int DEFAULT 5;
ALTER TABLE ag_h ADD COLUMN extra int DEFAULT 5;
ALTER TABLE ag_s DROP COLUMN v;
ALTER TABLE ag_h DROP COLUMN v;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT sum(extra) FROM ag_s;
SELECT sum(extra), count(extra), avg(extra) FROM ag_s;
SELECT sum(extra), count(extra), avg(extra) FROM ag_h;
BEGIN;
SELECT ag_check(500, 0.17);
COMMIT;

-- an OLAP snapshot: the same answers from the frozen image
SELECT pg_sleep(1.2);
SET scoot.olap = on;
SELECT k, count(*), sum(a), avg(n), max(d) FROM ag_s GROUP BY k ORDER BY k;
RESET scoot.olap;
SELECT k, count(*), sum(a), avg(n), max(d) FROM ag_h GROUP BY k ORDER BY k;

DROP FUNCTION ag_check(int, float8);
DROP FUNCTION ag_run(text);
DROP TABLE ag_s, ag_h;

-- dense blocks: once a scan saw every slot of an all-visible block as a row, ScootAgg takes all
-- slots without reading row headers until a slot changes state; each change below must end that
-- (a freed, reused, redirected or dead slot counted as a row would change count and sum)
CREATE TABLE dn_s (a int, b int) USING scoot;
CREATE TABLE dn_h (a int, b int) USING heap;
INSERT INTO dn_s SELECT i, i % 7 FROM generate_series(1, 60000) i;
INSERT INTO dn_h SELECT i, i % 7 FROM generate_series(1, 60000) i;
VACUUM dn_s;
VACUUM dn_h;
SELECT count(*), sum(a) FROM dn_s WHERE b >= 0;
SELECT count(*), sum(a) FROM dn_s WHERE b >= 0;
SELECT count(*), sum(a) FROM dn_h WHERE b >= 0;
DELETE FROM dn_s WHERE a % 10 = 0;
DELETE FROM dn_h WHERE a % 10 = 0;
VACUUM dn_s;
VACUUM dn_h;
SELECT count(*), sum(a) FROM dn_s WHERE b >= 0;
SELECT count(*), sum(a) FROM dn_s WHERE b >= 0;
SELECT count(*), sum(a) FROM dn_h WHERE b >= 0;
SET scoot.olap = on;
SELECT count(*), sum(a) FROM dn_s WHERE b >= 0;
RESET scoot.olap;
INSERT INTO dn_s SELECT i, 0 FROM generate_series(1, 100) i;
INSERT INTO dn_h SELECT i, 0 FROM generate_series(1, 100) i;
VACUUM dn_s;
VACUUM dn_h;
SELECT count(*), sum(a) FROM dn_s WHERE b >= 0;
SELECT count(*), sum(a) FROM dn_s WHERE b >= 0;
SELECT count(*), sum(a) FROM dn_h WHERE b >= 0;
UPDATE dn_s SET a = a + 1 WHERE a % 3 = 0;
UPDATE dn_h SET a = a + 1 WHERE a % 3 = 0;
VACUUM dn_s;
VACUUM dn_h;
SELECT count(*), sum(a) FROM dn_s WHERE b >= 0;
SET scoot.olap = on;
SELECT count(*), sum(a) FROM dn_s WHERE b >= 0;
RESET scoot.olap;
SELECT count(*), sum(a) FROM dn_s WHERE b >= 0;
SELECT count(*), sum(a) FROM dn_h WHERE b >= 0;
EXPLAIN (COSTS OFF) SELECT count(*), sum(a) FROM dn_s WHERE b >= 0;
DROP TABLE dn_s, dn_h;

-- integer group keys are looked up by their position in a grid over the blocks' key ranges
-- (agg.rs, Dense; EXPLAIN ANALYZE VERBOSE: Scoot Group Grid), the grid growing as blocks with
-- wider ranges come and dropped for good when it would exceed 4M cells; NULL keys and keys
-- outside it go by hash. Answers are heap's, with and without pushdown.
CREATE TABLE gr_s (id int, a int, b int8, s int2, d date, v int) USING scoot;
CREATE TABLE gr_h (LIKE gr_s) USING heap;
INSERT INTO gr_h
SELECT i, CASE WHEN i % 101 = 0 THEN NULL ELSE i / 3 - 20000 END,  -- negative first, growing
       (i % 7)::int8 - 3, (i % 5)::int2, date '2024-01-01' + i % 400, i % 13
FROM generate_series(1, 120000) i;
-- the last block: ranges too wide for a grid (a, b, d)
INSERT INTO gr_h VALUES (120001, 2000000000, 9223372036854775807, 1, 'infinity', 1);
INSERT INTO gr_s SELECT * FROM gr_h;
ANALYZE gr_s, gr_h;
CREATE FUNCTION gr_run(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text; p text; grid text := 'no grid'; dropped bool := false;
BEGIN
  FOR p IN EXECUTE 'EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF p ~ 'Scoot Group Grid Rows: [1-9]' THEN grid := 'grid'; END IF;
    IF p ~ 'Scoot Group Grid Cells: 0$' THEN dropped := true; END IF;
  END LOOP;
  IF dropped THEN grid := grid || ', dropped'; END IF;
  EXECUTE format('SELECT md5(string_agg(x::text, ''|'' ORDER BY x::text)) FROM (%s) x', q) INTO r;
  EXECUTE format('SELECT md5(string_agg(x::text, ''|'' ORDER BY x::text)) FROM (%s) x',
                 replace(q, 'gr_s', 'gr_h')) INTO p;
  IF r IS DISTINCT FROM p THEN
    RETURN grid || ': DIFFERS from heap';
  END IF;
  SET LOCAL scoot.agg_pushdown = off;
  EXECUTE format('SELECT md5(string_agg(x::text, ''|'' ORDER BY x::text)) FROM (%s) x', q) INTO p;
  SET LOCAL scoot.agg_pushdown = on;
  RETURN grid || CASE WHEN r IS DISTINCT FROM p THEN ': DIFFERS without pushdown' ELSE ': same as heap' END;
END $$;
BEGIN;
SELECT gr_run('SELECT s, v, count(*), sum(a), min(id) FROM gr_s GROUP BY s, v') AS small_grid;
SELECT gr_run('SELECT a, count(*), sum(v), max(b) FROM gr_s GROUP BY a') AS growing_then_dropped;
SELECT gr_run('SELECT a, count(*) FROM gr_s WHERE id < 100000 GROUP BY a') AS growing;
SELECT gr_run('SELECT b, s, count(*), sum(v) FROM gr_s GROUP BY b, s') AS int8_dropped;
SELECT gr_run('SELECT d, count(*) FROM gr_s WHERE id > 1000 GROUP BY d') AS date_dropped;
SELECT gr_run('SELECT a, s, v, count(*) FROM gr_s WHERE a < 0 GROUP BY a, s, v') AS three_keys;
SELECT gr_run('SELECT v, count(*), sum(b) FROM gr_s WHERE a IS NULL GROUP BY v') AS null_rows;
COMMIT;
DROP TABLE gr_s, gr_h;
DROP FUNCTION gr_run(text);
