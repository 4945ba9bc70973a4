-- scoot_specific_memoize: a nested loop probing a scoot table through an index keeps no
-- Memoize cache when its cache keys cover a unique key of the outer rows (every probe would
-- miss; PostgreSQL clamps the estimate of distinct keys to a tenth of the table and expects
-- 90% hits). Plans on a heap copy are the control: PostgreSQL's own choice, with Memoize.
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;

CREATE TABLE mo_orders (w int, d int, o int, entry date, cnt int, PRIMARY KEY (w, d, o)) USING scoot;
CREATE TABLE mo_lines (w int, d int, o int, n int, amount numeric(6,2), delivery date,
                       PRIMARY KEY (w, d, o, n)) USING scoot;
INSERT INTO mo_orders SELECT 1, d, o, date '2024-01-01', 5 FROM generate_series(1, 10) d, generate_series(1, 1000) o;
INSERT INTO mo_lines SELECT 1, d, o, n, (o * n) % 100, date '2024-01-01' + (o % 30)
FROM generate_series(1, 10) d, generate_series(1, 1000) o, generate_series(1, 5) n;
CREATE TABLE mo_orders_h (LIKE mo_orders INCLUDING INDEXES) USING heap;
CREATE TABLE mo_lines_h (LIKE mo_lines INCLUDING INDEXES) USING heap;
INSERT INTO mo_orders_h SELECT * FROM mo_orders;
INSERT INTO mo_lines_h SELECT * FROM mo_lines;
VACUUM mo_orders, mo_lines, mo_orders_h, mo_lines_h;
-- the plans with scoot.custom_scan = off depend on the share of all-visible blocks: VACUUM marks
-- none while a snapshot older than the rows runs (an autovacuum ANALYZE's): vacuum ten times more,
-- waiting while a table has none, silently (see scoot_specific_allvisible)
\set ECHO none
\o /dev/null
SELECT 'SELECT pg_sleep(0.5) WHERE EXISTS (SELECT FROM pg_class WHERE relname IN (''mo_orders'', ''mo_lines'', ''mo_orders_h'', ''mo_lines_h'') AND relallvisible = 0)',
       'VACUUM mo_orders, mo_lines, mo_orders_h, mo_lines_h' FROM generate_series(1, 10) \gexec
\o
\set ECHO all
ANALYZE mo_orders, mo_lines, mo_orders_h, mo_lines_h;

-- nested loops only, so that the plans do not depend on the two access methods' costs
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_seqscan = off;
SET enable_bitmapscan = off;

-- the outer rows are the orders, once each; the cache key holds their primary key: no Memoize
EXPLAIN (COSTS OFF)
SELECT sum(amount) FROM mo_orders, mo_lines
WHERE mo_orders.w = 1 AND mo_lines.w = mo_orders.w AND mo_lines.d = mo_orders.d AND mo_lines.o = mo_orders.o
  AND mo_orders.entry <= mo_lines.delivery;
EXPLAIN (COSTS OFF)
SELECT sum(amount) FROM mo_orders_h o, mo_lines_h l
WHERE o.w = 1 AND l.w = o.w AND l.d = o.d AND l.o = o.o AND o.entry <= l.delivery;
SELECT sum(amount), count(*) FROM mo_orders, mo_lines
WHERE mo_lines.w = mo_orders.w AND mo_lines.d = mo_orders.d AND mo_lines.o = mo_orders.o
  AND mo_orders.entry <= mo_lines.delivery;
SELECT sum(amount), count(*) FROM mo_orders_h o, mo_lines_h l
WHERE l.w = o.w AND l.d = o.d AND l.o = o.o AND o.entry <= l.delivery;

-- scoot.custom_scan = off: PostgreSQL's plan, with its Memoize
SET scoot.custom_scan = off;
EXPLAIN (COSTS OFF)
SELECT sum(amount) FROM mo_orders, mo_lines
WHERE mo_lines.w = mo_orders.w AND mo_lines.d = mo_orders.d AND mo_lines.o = mo_orders.o
  AND mo_orders.entry <= mo_lines.delivery;
RESET scoot.custom_scan;

-- the outer side joins the orders to something unique per order (here: the order itself
-- again): still one row per order, no Memoize (PostgreSQL's plan has one)
EXPLAIN (COSTS OFF)
SELECT sum(amount) FROM mo_orders a JOIN mo_orders b USING (w, d, o), mo_lines l
WHERE l.w = a.w AND l.d = a.d AND l.o = a.o AND a.entry <= l.delivery;
SET scoot.custom_scan = off;
EXPLAIN (COSTS OFF)
SELECT sum(amount) FROM mo_orders a JOIN mo_orders b USING (w, d, o), mo_lines l
WHERE l.w = a.w AND l.d = a.d AND l.o = a.o AND a.entry <= l.delivery;
RESET scoot.custom_scan;

-- keys that repeat among the outer rows (each order once per line): Memoize stays
EXPLAIN (COSTS OFF)
SELECT count(*) FROM (SELECT * FROM mo_lines WHERE n <= 5 OFFSET 0) l, mo_orders o
WHERE o.w = l.w AND o.d = l.d AND o.o = l.o AND o.entry <= l.delivery;
SELECT count(*) FROM (SELECT * FROM mo_lines WHERE n <= 5 OFFSET 0) l, mo_orders o
WHERE o.w = l.w AND o.d = l.d AND o.o = l.o AND o.entry <= l.delivery;
-- ... and a key that is only part of a unique key (the district): Memoize stays
EXPLAIN (COSTS OFF)
SELECT count(*) FROM mo_orders a, mo_lines l WHERE a.o = 7 AND l.w = 1 AND l.d = a.d AND l.o = 3;

DROP TABLE mo_orders, mo_lines, mo_orders_h, mo_lines_h;
