-- scoot_specific_plans: EXPLAIN (COSTS OFF) plans on scoot tables.  Plans
-- depend on the access method's size estimates, so this file has no
-- heap-generated expected output; each plan is forced with enable_* settings
-- so that it should normally match heap's (see sql-tests/heap-expected/).
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;
SET datestyle = 'ISO, YMD';

CREATE TABLE plan_s (id int PRIMARY KEY, a int, t text, j jsonb, arr int4[], ts timestamp, r int4range) USING scoot;
INSERT INTO plan_s
SELECT g, g % 100, 't' || (g % 1000), jsonb_build_object('k', g % 10), ARRAY[g % 7, g % 11],
       timestamp '2024-01-01' + g * interval '1 minute', int4range(g, g + 5)
FROM generate_series(1, 10000) g;
CREATE INDEX plan_s_a ON plan_s (a);
CREATE INDEX plan_s_t ON plan_s USING hash (t);
CREATE INDEX plan_s_j ON plan_s USING gin (j);
CREATE INDEX plan_s_arr ON plan_s USING gin (arr);
CREATE INDEX plan_s_ts ON plan_s USING brin (ts);
CREATE INDEX plan_s_r ON plan_s USING gist (r);
VACUUM ANALYZE plan_s;

SET enable_seqscan = off;
-- index scan
SET enable_bitmapscan = off;
SET enable_indexonlyscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE id = 42;
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE a = 3 ORDER BY a;
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE t = 't5';
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE r @> 500;
-- index only scan
SET enable_indexonlyscan = on;
EXPLAIN (COSTS OFF) SELECT id FROM plan_s WHERE id < 100;
EXPLAIN (COSTS OFF) SELECT a FROM plan_s WHERE a = 3;
SELECT count(*) FROM (SELECT id FROM plan_s WHERE id < 100) s;
-- bitmap heap scans, including BitmapAnd / BitmapOr
SET enable_indexscan = off;
SET enable_bitmapscan = on;
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE a = 3;
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE j @> '{"k": 3}';
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE arr @> ARRAY[3];
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE ts < '2024-01-02';
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE a = 3 AND id < 500;
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE a = 3 OR id < 50;
SELECT count(*) FROM plan_s WHERE a = 3 AND id < 500;
SELECT count(*) FROM plan_s WHERE a = 3 OR id < 50;
RESET enable_indexscan;
RESET enable_bitmapscan;
RESET enable_indexonlyscan;
RESET enable_seqscan;

-- TID scan and TID range scan
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE ctid = '(0,1)';
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE ctid = ANY (ARRAY['(0,1)', '(0,2)']::tid[]);
EXPLAIN (COSTS OFF) SELECT count(*) FROM plan_s WHERE ctid > '(0,0)';
EXPLAIN (COSTS OFF) SELECT count(*) FROM plan_s WHERE ctid >= '(1,0)' AND ctid < '(2,0)';

-- sample scans
EXPLAIN (COSTS OFF) SELECT count(*) FROM plan_s TABLESAMPLE SYSTEM (10) REPEATABLE (1);
EXPLAIN (COSTS OFF) SELECT count(*) FROM plan_s TABLESAMPLE BERNOULLI (10) REPEATABLE (1);

-- parallel seq scan and parallel bitmap heap scan (aggregate pushdown off: it is not parallel,
-- and would take these aggregates)
SET scoot.agg_pushdown = off;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET min_parallel_index_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT count(*), sum(a) FROM plan_s;
EXPLAIN (COSTS OFF) SELECT a, count(*) FROM plan_s GROUP BY a;
SELECT count(*), sum(a) FROM plan_s;
SET enable_seqscan = off;
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM plan_s WHERE a < 50;
SELECT count(*) FROM plan_s WHERE a < 50;
RESET enable_seqscan;
RESET enable_indexscan;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET min_parallel_index_scan_size;
RESET scoot.agg_pushdown;
RESET max_parallel_workers_per_gather;

-- a plain sequential scan and a filter
EXPLAIN (COSTS OFF) SELECT * FROM plan_s WHERE t LIKE 't1%';
-- UPDATE / DELETE / INSERT ON CONFLICT plans
EXPLAIN (COSTS OFF) UPDATE plan_s SET a = a + 1 WHERE id = 5;
EXPLAIN (COSTS OFF) DELETE FROM plan_s WHERE ctid = '(0,1)';
EXPLAIN (COSTS OFF) INSERT INTO plan_s (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET a = EXCLUDED.a;

DROP TABLE plan_s;
