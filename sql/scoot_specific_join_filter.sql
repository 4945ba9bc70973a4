-- scoot_specific_join_filter: a ScootScan on the probing (outer) side of a hash join drops the
-- rows whose key the join's hash table cannot hold, before forming them (src/exec/customscan.c,
-- join filter; src/am/scan.rs apply_join_filter). A row dropped wrongly is a missing result row,
-- so every query runs on scoot tables and on heap copies, with the filter on and off, and the
-- answers (md5 of all rows) must be equal; EXPLAIN shows where the filter applies and, under
-- ANALYZE, that it removed rows.
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;
SET enable_nestloop = off;
SET enable_mergejoin = off;

-- fact: 200k rows over many blocks; keys of every filterable width, NULLs, a skewed value
CREATE TABLE jf (k int, g int8, s int2, d date, n numeric(12,2), t text, m int)
  USING scoot;
INSERT INTO jf SELECT i,
       CASE WHEN i % 17 = 0 THEN NULL ELSE i::int8 * 1000003 END,
       (i % 3000)::int2,
       date '1995-01-01' + (i % 4000),
       i / 100.0,
       CASE WHEN i % 11 = 0 THEN NULL ELSE 't' || i END,
       CASE WHEN i % 5 = 0 THEN 7 ELSE i END
FROM generate_series(1, 200000) i;
CREATE TABLE jfh (LIKE jf) USING heap;
INSERT INTO jfh SELECT * FROM jf;
-- dimensions: a few matching keys each (scoot and heap: the inner side's kind does not matter)
CREATE TABLE dim (k int, g int8, s int2, d date, m int, v int, label text) USING scoot;
INSERT INTO dim SELECT i * 97 % 200000 + 1, (i * 97 % 200000 + 1)::int8 * 1000003, (i % 3000)::int2,
       date '1995-01-01' + (i * 13 % 4000), CASE WHEN i % 4 = 0 THEN 7 ELSE i * 97 % 200000 + 1 END,
       i % 10, 'L' || i
FROM generate_series(1, 600) i;
INSERT INTO dim VALUES (NULL, NULL, NULL, NULL, NULL, 0, 'nulls');
CREATE TABLE dimh AS SELECT * FROM dim;
ANALYZE jf, jfh, dim, dimh;

-- the answer on scoot ('jf', 'dim', 'sk') and on heap ('jfh', 'dimh', 'skh'), the filter on and
-- off: equal?
CREATE FUNCTION same(q text) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE on_ text; off_ text; h text;
BEGIN
  SET LOCAL scoot.join_filter = on;
  EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) FROM (%s) x',
                 replace(replace(replace(q, 'FACT', 'jf'), 'DIM', 'dim'), 'SKEW', 'sk')) INTO on_;
  SET LOCAL scoot.join_filter = off;
  EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) FROM (%s) x',
                 replace(replace(replace(q, 'FACT', 'jf'), 'DIM', 'dim'), 'SKEW', 'sk')) INTO off_;
  SET LOCAL scoot.join_filter = on;
  EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) FROM (%s) x',
                 replace(replace(replace(q, 'FACT', 'jfh'), 'DIM', 'dimh'), 'SKEW', 'skh')) INTO h;
  IF on_ IS DISTINCT FROM h OR off_ IS DISTINCT FROM h THEN
    RAISE NOTICE 'differs: %', q;
  END IF;
  RETURN on_ = h AND off_ = h;
END $$;

-- the rows the filter removed in the plan of q (EXPLAIN ANALYZE, all ScootScans), and whether
-- every hash join's outer ScootScan shows it
CREATE FUNCTION removed(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE p json; n bigint; ea text := current_setting('scoot.eager_agg');
BEGIN
  -- the ScootScan's rows: without eager aggregation (a ScootPreAgg's filter drops groups)
  PERFORM set_config('scoot.eager_agg', 'off', false);
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || replace(replace(replace(q, 'FACT', 'jf'), 'DIM', 'dim'), 'SKEW', 'sk') INTO p;
  PERFORM set_config('scoot.eager_agg', ea, false);
  SELECT coalesce(sum((x #>> '{}')::bigint), -1) INTO n
    FROM jsonb_path_query(p::jsonb, 'strict $.**."Rows Removed by Scoot Join Filter"') x;
  RETURN n;
END $$;

-- where the filter applies (EXPLAIN shows it on the outer ScootScan of the hash join)
EXPLAIN (COSTS OFF) SELECT f.k, x.label FROM jf f JOIN dim x ON f.k = x.k;
-- integer keys of every width, date, two keys, a cross-type key
SELECT same($$SELECT f.k, f.n, x.label FROM FACT f JOIN DIM x ON f.k = x.k$$);
SELECT removed($$SELECT f.k, f.n, x.label FROM FACT f JOIN DIM x ON f.k = x.k$$) > 150000 AS removed_most;
SELECT same($$SELECT f.g, x.v FROM FACT f JOIN DIM x ON f.g = x.g$$);
SELECT same($$SELECT f.s, count(*) FROM FACT f JOIN DIM x ON f.s = x.s AND x.v = 3 GROUP BY f.s$$);
SELECT same($$SELECT f.d, f.k FROM FACT f JOIN DIM x ON f.d = x.d WHERE x.v < 2$$);
SELECT same($$SELECT f.k, x.v FROM FACT f JOIN DIM x ON f.k = x.k AND f.g = x.g$$);
SELECT same($$SELECT f.k, x.v FROM FACT f JOIN DIM x ON f.g = x.k$$);
SELECT same($$SELECT f.k, x.v FROM FACT f JOIN DIM x ON f.k = x.g$$);
SELECT same($$SELECT f.s, x.v FROM FACT f JOIN DIM x ON f.s = x.k$$);
-- the skewed value (every fifth fact row has m = 7, a most common value of the outer side):
-- the join keeps its inner rows in a skew bucket, not in the main table
SELECT same($$SELECT f.m, count(*), sum(f.n) FROM FACT f JOIN (SELECT DISTINCT m FROM DIM) x ON f.m = x.m GROUP BY f.m$$);
SELECT removed($$SELECT f.m, count(*) FROM FACT f JOIN (SELECT DISTINCT m FROM DIM) x ON f.m = x.m GROUP BY f.m$$) > 100000 AS removed_with_skew;
SELECT same($$SELECT f.m, count(*), sum(f.n) FROM FACT f JOIN DIM x ON f.m = x.m GROUP BY f.m$$);
-- semi joins, a right join (the filter applies), and joins it must leave alone: left, full,
-- anti (EXPLAIN shows no filter there); NULL keys on either side
SELECT same($$SELECT f.k FROM FACT f WHERE f.k IN (SELECT k FROM DIM WHERE v > 4)$$);
SELECT same($$SELECT f.k FROM FACT f WHERE EXISTS (SELECT 1 FROM DIM x WHERE x.g = f.g)$$);
SELECT same($$SELECT f.k, x.label FROM DIM x LEFT JOIN FACT f ON f.k = x.k$$);
SELECT same($$SELECT f.k, x.label FROM FACT f LEFT JOIN DIM x ON f.k = x.k WHERE f.k % 100 = 3$$);
SELECT same($$SELECT f.k, x.label FROM FACT f FULL JOIN DIM x ON f.k = x.k WHERE coalesce(f.k, 0) % 100 = 3 OR x.k IS NULL$$);
SELECT same($$SELECT count(*) FROM FACT f WHERE NOT EXISTS (SELECT 1 FROM DIM x WHERE x.k = f.k)$$);
SELECT same($$SELECT f.t, x.label FROM FACT f RIGHT JOIN DIM x ON f.g = x.g$$);
EXPLAIN (COSTS OFF) SELECT f.k, x.label FROM jf f LEFT JOIN dim x ON f.k = x.k;
EXPLAIN (COSTS OFF) SELECT count(*) FROM jf f WHERE NOT EXISTS (SELECT 1 FROM dim x WHERE x.k = f.k);
-- keys the filter does not hash (numeric, text): no filter, same answers
SELECT same($$SELECT f.k FROM FACT f JOIN DIM x ON f.n = x.k::numeric / 100$$);
SELECT same($$SELECT f.k FROM FACT f JOIN DIM x ON f.t = 't' || x.k$$);
-- a key computed from columns (integer +, -, *, %, mod() and casts over int2/int4/int8
-- columns, as CH-benCHmark's mod((s_w_id * s_i_id), 10000) = s_suppkey): the scan computes it
-- as PostgreSQL does; NULL columns keep the row (the join matches nothing)
EXPLAIN (COSTS OFF) SELECT f.k, x.label FROM jf f JOIN dim x ON mod(f.k * 7, 200000) + 1 = x.k;
SELECT same($$SELECT f.k FROM FACT f JOIN DIM x ON f.k + 1 = x.k$$);
SELECT removed($$SELECT f.k FROM FACT f JOIN DIM x ON f.k + 1 = x.k$$) > 150000 AS removed_expression;
SELECT same($$SELECT f.k, x.label FROM FACT f JOIN DIM x ON mod(f.k * 7, 200000) + 1 = x.k$$);
SELECT removed($$SELECT f.k, x.label FROM FACT f JOIN DIM x ON mod(f.k * 7, 200000) + 1 = x.k$$) > 150000 AS removed_mod;
SELECT same($$SELECT f.k, x.v FROM FACT f JOIN DIM x ON (f.k - f.s) % 1000 = x.k$$);
SELECT same($$SELECT f.k, x.v FROM FACT f JOIN DIM x ON f.g % 1000 = x.k::int8$$);
SELECT same($$SELECT f.k, x.v FROM FACT f JOIN DIM x ON f.k::int8 * 1000003 = x.g$$);
SELECT same($$SELECT f.k, x.v FROM FACT f JOIN DIM x ON (f.s * 3::int2) - 1::int2 = x.s$$);
SELECT same($$SELECT f.k, x.v FROM FACT f JOIN DIM x ON (f.g / 1000003)::int4 = x.k$$);
SELECT same($$SELECT f.k, x.v FROM FACT f JOIN DIM x ON f.k % -1 + f.k = x.k$$);
SELECT same($$SELECT f.k, x.v, x.g FROM FACT f JOIN DIM x ON f.k = x.k AND f.g - 1 = x.g - 1$$);
-- a key PostgreSQL cannot compute for some rows raises its error as on heap (the scan keeps
-- those rows for the join): int2 overflow, division by zero, a narrowing cast out of range
CREATE FUNCTION outcome(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text; h text; n bigint;
BEGIN
  BEGIN
    EXECUTE 'SELECT count(*) FROM (' || replace(replace(q, 'FACT', 'jf'), 'DIM', 'dim') || ') x' INTO n;
    r := 'rows: ' || n;
  EXCEPTION WHEN OTHERS THEN r := 'error: ' || SQLERRM;
  END;
  BEGIN
    EXECUTE 'SELECT count(*) FROM (' || replace(replace(q, 'FACT', 'jfh'), 'DIM', 'dimh') || ') x' INTO n;
    h := 'rows: ' || n;
  EXCEPTION WHEN OTHERS THEN h := 'error: ' || SQLERRM;
  END;
  RETURN CASE WHEN r = h THEN r ELSE 'scoot ' || r || ', heap ' || h END;
END $$;
SELECT outcome($$SELECT f.k FROM FACT f JOIN DIM x ON f.s * 11::int2 = x.s$$);
SELECT outcome($$SELECT f.k FROM FACT f JOIN DIM x ON f.k % (f.s - f.s) = x.k$$);
SELECT outcome($$SELECT f.k FROM FACT f JOIN DIM x ON f.g::int4 = x.k$$);
SELECT outcome($$SELECT f.k FROM FACT f JOIN DIM x ON (f.k * 10737) % 1000 = x.k$$);
-- scoot.join_filter_expressions = off: plain columns only
SET scoot.join_filter_expressions = off;
EXPLAIN (COSTS OFF) SELECT f.k, x.label FROM jf f JOIN dim x ON mod(f.k * 7, 200000) + 1 = x.k;
SELECT same($$SELECT f.k, x.label FROM FACT f JOIN DIM x ON mod(f.k * 7, 200000) + 1 = x.k$$);
RESET scoot.join_filter_expressions;
-- an expression the filter does not compute (division): no filter, same answers
SELECT same($$SELECT f.k FROM FACT f JOIN DIM x ON f.k / 2 = x.k$$);
-- a hash table in several batches (a small work_mem): rows of later batches go through
CREATE TABLE bigd AS SELECT i AS k, 'b' || i AS label FROM generate_series(1, 200000, 10) i;
ANALYZE bigd;
SET work_mem = '64kB';
EXPLAIN (COSTS OFF) SELECT f.k, f.t, x.label FROM jf f JOIN bigd x ON f.k = x.k;
SELECT same($$SELECT f.k, f.t, x.label FROM FACT f JOIN bigd x ON f.k = x.k$$);
SELECT removed($$SELECT f.k, f.t, x.label FROM FACT f JOIN bigd x ON f.k = x.k$$) > 0 AS removed_in_batch_0;
SELECT same($$SELECT f.k, f.t, x.label FROM FACT f JOIN (SELECT k, label || repeat('x', 200) AS label FROM DIM) x ON f.k = x.k$$);
RESET work_mem;
-- two batches and six most common values of the outer side (a tenth of its rows each): with
-- more than one batch the join keeps the inner rows of those values in skew buckets outside
-- the main table, and the filter must let their outer rows through
CREATE TABLE sk (k int, n numeric(12,2), m int) USING scoot;
INSERT INTO sk SELECT i, i / 100.0, CASE WHEN i % 10 BETWEEN 1 AND 6 THEN (i % 10) * 1000 + 7 ELSE i END
FROM generate_series(1, 200000) i;
CREATE TABLE skh AS SELECT * FROM sk;
CREATE TABLE bigm AS SELECT i * 10 AS m, 'm' || i AS label FROM generate_series(1, 8000) i;
INSERT INTO bigm SELECT i * 1000 + 7, 'mcv' FROM generate_series(1, 6) i;
ANALYZE sk, skh, bigm;
SET work_mem = '128kB';
SELECT same($$SELECT f.m, count(*), sum(f.n) FROM SKEW f JOIN bigm x ON f.m = x.m GROUP BY f.m$$);
SELECT removed($$SELECT f.m, count(*) FROM SKEW f JOIN bigm x ON f.m = x.m GROUP BY f.m$$) > 10000 AS removed_with_skew;
RESET work_mem;
-- the hash join rescanned with a rebuilt table per outer row (a parameter of its inner side)
SELECT same($$SELECT o.v, (SELECT count(*) FROM FACT f JOIN DIM x ON f.k = x.k WHERE x.v = o.v) FROM generate_series(0, 9) o(v)$$);
SELECT same($$SELECT o.v, c.n FROM generate_series(0, 4) o(v), LATERAL (SELECT count(*) AS n FROM FACT f JOIN DIM x ON f.m = x.m WHERE x.v <= o.v) c$$);
-- a hash join whose table is reused across rescans (its inner side has no parameter)
SELECT same($$SELECT o.v, (SELECT count(*) FROM FACT f JOIN DIM x ON f.k = x.k WHERE f.s > o.v * 100) FROM generate_series(0, 5) o(v)$$);
-- after updates and deletes (dead versions, hot blocks) and VACUUM
UPDATE jf SET k = k + 1 WHERE k % 1000 = 5;
UPDATE jfh SET k = k + 1 WHERE k % 1000 = 5;
DELETE FROM jf WHERE k % 997 = 0;
DELETE FROM jfh WHERE k % 997 = 0;
SELECT same($$SELECT f.k, f.n, x.label FROM FACT f JOIN DIM x ON f.k = x.k$$);
VACUUM jf;
SELECT same($$SELECT f.k, x.label FROM FACT f JOIN DIM x ON f.k = x.k AND f.g = x.g$$);
-- an OLAP snapshot image
SET scoot.olap = on;
SELECT same($$SELECT f.k, f.n, x.label FROM FACT f JOIN DIM x ON f.k = x.k$$);
SELECT removed($$SELECT f.k FROM FACT f JOIN DIM x ON f.k = x.k$$) > 150000 AS removed_on_image;
RESET scoot.olap;
-- parallel workers: with a private hash table per worker, and with a Parallel Hash (the
-- shared table of the batch being probed)
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET enable_parallel_hash = off;
SELECT same($$SELECT f.k, f.n, x.label FROM FACT f JOIN DIM x ON f.k = x.k$$);
SET enable_parallel_hash = on;
SELECT same($$SELECT f.k, f.n, x.label FROM FACT f JOIN DIM x ON f.k = x.k$$);
DO $$DECLARE l text; ph bool := false; jf bool := false;
BEGIN
  FOR l IN EXPLAIN (COSTS OFF) SELECT f.k, f.n, x.label FROM jf f JOIN dim x ON f.k = x.k LOOP
    ph := ph OR l LIKE '%Parallel Hash Join%';
    jf := jf OR l LIKE '%Scoot Join Filter%';
  END LOOP;
  RAISE NOTICE 'parallel hash join: %, join filter: %', ph, jf;
END$$;
SET work_mem = '128kB';
SELECT same($$SELECT f.m, count(*), sum(f.n) FROM SKEW f JOIN bigm x ON f.m = x.m GROUP BY f.m$$);
-- a Parallel Hash in several batches partitions its outer side first: no filter then
SET work_mem = '64kB';
SELECT same($$SELECT f.m, count(*), sum(f.n) FROM SKEW f JOIN bigd x ON f.m = x.k GROUP BY f.m$$);
RESET work_mem;
RESET enable_parallel_hash;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
SET max_parallel_workers_per_gather = 0;
-- off: no filter shown, nothing removed
SET scoot.join_filter = off;
EXPLAIN (COSTS OFF) SELECT f.k, x.label FROM jf f JOIN dim x ON f.k = x.k;
SELECT removed($$SELECT f.k FROM FACT f JOIN DIM x ON f.k = x.k$$) AS removed_when_off;
RESET scoot.join_filter;
-- a join that matches nearly every row: the filter stops looking after its trial
SELECT same($$SELECT f.k FROM FACT f JOIN FACT g ON f.k = g.k$$);
SELECT removed($$SELECT f.k FROM FACT f JOIN FACT g ON f.k = g.k$$) < 1000 AS gives_up;
-- after its trial the scan still hashes each row's key, to prefetch the join's bucket for the
-- rows a few ahead (a hint: the answer must not change), also when the join's table is split
-- into batches (rows of another batch: nothing to prefetch)
SET work_mem = '256kB';
SELECT same($$SELECT f.k, g.n FROM FACT f JOIN FACT g ON f.k = g.k$$);
RESET work_mem;
-- a Parallel Hash whose shared table is big next to the rows probing it gets no Bloom filter:
-- the filter walks the shared buckets as the join will, and gives up after a shorter trial
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SELECT same($$SELECT f.k, g.n FROM FACT f JOIN FACT g ON f.k = g.k$$);
SELECT removed($$SELECT f.k FROM FACT f JOIN FACT g ON f.k = g.k$$) < 1000 AS gives_up_parallel;
-- a small shared table gets one, from its buckets: a few absent keys pass it (the join drops
-- them), so the filter removes fewer than all the rows without a partner, which a walk of the
-- buckets removes. No worker may start: the leader probes alone, its count is the whole table's.
SET max_parallel_workers = 0;
SELECT same($$SELECT f.k, f.n, x.label FROM FACT f JOIN DIM x ON f.k = x.k$$);
DO $$DECLARE l text; ph bool := false;
BEGIN
  FOR l IN EXPLAIN (COSTS OFF) SELECT f.k FROM jf f JOIN dim x ON f.k = x.k LOOP
    ph := ph OR l LIKE '%Parallel Hash Join%';
  END LOOP;
  RAISE NOTICE 'parallel hash join: %', ph;
END$$;
SELECT r < n AND r > n * 0.9 AS bloom_on_shared_table
  FROM (SELECT removed($$SELECT f.k FROM FACT f JOIN DIM x ON f.k = x.k$$) AS r,
               (SELECT count(*) FROM jf f WHERE NOT EXISTS (SELECT FROM dim x WHERE x.k = f.k)) AS n) c;
RESET max_parallel_workers;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
SET max_parallel_workers_per_gather = 0;

-- costing (customscan.c, scoot_set_join_pathlist): a hash join whose outer side is a ScootScan
-- the filter serves is costed with only the rows expected to find a partner (the others are
-- dropped before they are formed), so the big table goes on the probing side; the plan's total
-- cost is lower than with the filter off, and where the filter cannot apply (a left join, a
-- numeric key) it is the same
CREATE TABLE tord (k int, p char(15), n numeric(10,2)) USING scoot;
INSERT INTO tord SELECT i, 'P' || (i % 5), i FROM generate_series(1, 150000) i;
CREATE TABLE tli (k int, sd date, cd date, rd date, mode char(10), n numeric(10,2)) USING scoot;
INSERT INTO tli SELECT i / 4 + 1, date '1995-01-01' + (i * 7 % 2000), date '1995-01-01' + (i * 11 % 2000),
       date '1995-01-01' + (i * 13 % 2000), 'M' || (i % 7), i / 4 + 1 FROM generate_series(1, 600000) i;
CREATE TABLE tordh AS SELECT * FROM tord;
CREATE TABLE tlih AS SELECT * FROM tli;
ANALYZE tord, tli, tordh, tlih;
CREATE FUNCTION plan_cost(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE p json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO p;
  RETURN (p -> 0 -> 'Plan' ->> 'Total Cost')::float8;
END $$;
CREATE FUNCTION cheaper_with_filter(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE on_ float8; off_ float8;
BEGIN
  SET LOCAL scoot.join_filter = on;
  on_ := plan_cost(q);
  SET LOCAL scoot.join_filter = off;
  off_ := plan_cost(q);
  SET LOCAL scoot.join_filter = on;
  RETURN CASE WHEN on_ < off_ THEN 'cheaper' WHEN on_ = off_ THEN 'same' ELSE 'dearer' END;
END $$;
SET enable_nestloop = off;
SET enable_mergejoin = off;
EXPLAIN (COSTS OFF) SELECT l.mode, count(*) FROM tli l JOIN tord o ON l.k = o.k
  WHERE l.mode IN ('M1', 'M2') AND l.cd < l.rd AND l.sd < l.cd AND l.rd >= '1996-01-01' AND l.rd < '1997-01-01'
  GROUP BY 1;
SELECT cheaper_with_filter($$SELECT l.mode, count(*) FROM tli l JOIN tord o ON l.k = o.k
  WHERE l.mode IN ('M1', 'M2') AND l.cd < l.rd AND l.sd < l.cd AND l.rd >= '1996-01-01' AND l.rd < '1997-01-01'
  GROUP BY 1$$);
SELECT cheaper_with_filter($$SELECT count(*) FROM tord o WHERE o.k IN (SELECT k FROM tli WHERE sd = '1996-03-01')$$) AS semi;
-- partial paths get the same costing (a Gather over the join, the filter in each worker)
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SELECT cheaper_with_filter($$SELECT count(*) FROM tli l JOIN tord o ON l.k = o.k
  WHERE l.mode IN ('M1', 'M2') AND l.cd < l.rd AND l.sd < l.cd AND l.rd >= '1996-01-01' AND l.rd < '1997-01-01'$$) AS parallel;
SELECT (SELECT count(*) FROM tli l JOIN tord o ON l.k = o.k
        WHERE l.mode IN ('M1', 'M2') AND l.cd < l.rd AND l.sd < l.cd AND l.rd >= '1996-01-01' AND l.rd < '1997-01-01') =
       (SELECT count(*) FROM tlih l JOIN tordh o ON l.k = o.k
        WHERE l.mode IN ('M1', 'M2') AND l.cd < l.rd AND l.sd < l.cd AND l.rd >= '1996-01-01' AND l.rd < '1997-01-01')
       AS parallel_same_as_heap;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
SET max_parallel_workers_per_gather = 0;
SELECT cheaper_with_filter($$SELECT count(*) FROM tord o LEFT JOIN tli l ON l.k = o.k AND l.sd = '1996-03-01'$$) AS left_join;
SELECT cheaper_with_filter($$SELECT count(*) FROM tli l JOIN tord o ON l.n = o.n WHERE l.sd = '1996-03-01'$$) AS numeric_key;
-- the same answers as on heap
SELECT (SELECT string_agg(x::text, ',' ORDER BY x::text) FROM (
          SELECT l.mode, count(*), sum(o.n) FROM tli l JOIN tord o ON l.k = o.k
          WHERE l.mode IN ('M1', 'M2') AND l.cd < l.rd AND l.sd < l.cd AND l.rd >= '1996-01-01'
            AND l.rd < '1997-01-01' GROUP BY 1) x) =
       (SELECT string_agg(x::text, ',' ORDER BY x::text) FROM (
          SELECT l.mode, count(*), sum(o.n) FROM tlih l JOIN tordh o ON l.k = o.k
          WHERE l.mode IN ('M1', 'M2') AND l.cd < l.rd AND l.sd < l.cd AND l.rd >= '1996-01-01'
            AND l.rd < '1997-01-01' GROUP BY 1) x) AS same_as_heap;
SELECT (SELECT count(*) FROM tord o WHERE o.k IN (SELECT k FROM tli WHERE sd = '1996-03-01')) =
       (SELECT count(*) FROM tordh o WHERE o.k IN (SELECT k FROM tlih WHERE sd = '1996-03-01')) AS semi_same_as_heap;
DROP TABLE tord, tli, tordh, tlih;
DROP FUNCTION plan_cost(text), cheaper_with_filter(text);

DROP TABLE jf, jfh, dim, dimh, bigd, bigm, sk, skh;
DROP FUNCTION same(text), removed(text), outcome(text);
