-- scoot_specific_index_cost: the index scans of scoot tables on the inner side of nested loops
-- cost scoot.index_fetch_cost more per row they fetch (src/exec/customscan.c,
-- cost_index_fetches). A row fetched by TID reads each
-- column from another place of its block and walks its version chain; a ScootScan reads column
-- runs. A nested loop that fetches most of a table through its primary key (CH-benCHmark Q12's
-- shape) becomes a hash join over a scan; point lookups and nested loops that fetch a few rows
-- keep their index scans; heap tables are untouched. Answers are compared with heap's.
SET client_min_messages = notice;
SET jit = off;
SET datestyle = 'ISO, YMD';
SET max_parallel_workers_per_gather = 0;
SET work_mem = '4MB';

CREATE TABLE ic_orders (w int, d int, o int, entry date, cnt int, PRIMARY KEY (w, d, o)) USING scoot;
CREATE TABLE ic_lines (w int, d int, o int, n int, amount numeric(6,2), delivery date, info char(24),
                       PRIMARY KEY (w, d, o, n)) USING scoot;
INSERT INTO ic_orders SELECT 1, d, o, date '2024-01-01' + (o % 60), 5 + o % 11
FROM generate_series(1, 10) d, generate_series(1, 3000) o;
INSERT INTO ic_lines SELECT 1, d, o, n, (o * n) % 100, date '2024-01-01' + ((o + n) % 90), 'x'
FROM generate_series(1, 10) d, generate_series(1, 3000) o, generate_series(1, 10) n;
CREATE TABLE ic_orders_h (LIKE ic_orders INCLUDING INDEXES) USING heap;
CREATE TABLE ic_lines_h (LIKE ic_lines INCLUDING INDEXES) USING heap;
INSERT INTO ic_orders_h SELECT * FROM ic_orders;
INSERT INTO ic_lines_h SELECT * FROM ic_lines;
VACUUM ANALYZE ic_orders, ic_lines, ic_orders_h, ic_lines_h;

SHOW scoot.index_fetch_cost;
SET scoot.index_fetch_cost = -1;

-- every order's lines through the primary key (300k rows): PostgreSQL's index costing picks the
-- nested loop; with the fetch cost it is a hash join over two ScootScans (row by row: eager
-- aggregation, which groups the lines per order first, is off until the answers are compared)
SET scoot.eager_agg = off;
SET scoot.index_fetch_cost = 0;
EXPLAIN (COSTS OFF)
SELECT o.cnt, count(*), sum(l.amount) FROM ic_orders o JOIN ic_lines l ON l.w = o.w AND l.d = o.d AND l.o = o.o
WHERE o.entry <= l.delivery AND l.delivery < date '2024-03-01' GROUP BY o.cnt ORDER BY o.cnt;
RESET scoot.index_fetch_cost;
EXPLAIN (COSTS OFF)
SELECT o.cnt, count(*), sum(l.amount) FROM ic_orders o JOIN ic_lines l ON l.w = o.w AND l.d = o.d AND l.o = o.o
WHERE o.entry <= l.delivery AND l.delivery < date '2024-03-01' GROUP BY o.cnt ORDER BY o.cnt;
-- the same answer either way, and heap's
CREATE FUNCTION answer(cost text, orders text, lines text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE a text;
BEGIN
  PERFORM set_config('scoot.index_fetch_cost', cost, true);
  EXECUTE format('SELECT md5(string_agg(x::text, ''|'' ORDER BY x::text)) FROM (
    SELECT o.cnt, count(*), sum(l.amount) FROM %s o JOIN %s l ON l.w = o.w AND l.d = o.d AND l.o = o.o
    WHERE o.entry <= l.delivery AND l.delivery < date ''2024-03-01'' GROUP BY o.cnt) x', orders, lines) INTO a;
  RETURN a;
END $$;
SELECT answer('0', 'ic_orders', 'ic_lines') = answer('0', 'ic_orders_h', 'ic_lines_h') AS nested_loop_same,
       answer('0.06', 'ic_orders', 'ic_lines') = answer('0', 'ic_orders_h', 'ic_lines_h') AS hash_join_same;
RESET scoot.eager_agg;
-- with eager aggregation (count mode): the lines grouped per order and delivery date, counted.
-- An order's ten lines have ten delivery dates, one row per group, which the table's sample
-- shows: the node is asked for with a group size of 1
SET scoot.eager_agg_min_group_size = 1;
EXPLAIN (COSTS OFF)
SELECT o.cnt, count(*), sum(l.amount) FROM ic_orders o JOIN ic_lines l ON l.w = o.w AND l.d = o.d AND l.o = o.o
WHERE o.entry <= l.delivery AND l.delivery < date '2024-03-01' GROUP BY o.cnt ORDER BY o.cnt;
SELECT answer('0.3', 'ic_orders', 'ic_lines') = answer('0', 'ic_orders_h', 'ic_lines_h') AS eager_same;
RESET scoot.eager_agg_min_group_size;

-- a few orders' lines: still the nested loop over the index
EXPLAIN (COSTS OFF)
SELECT o.o, sum(l.amount) FROM ic_orders o JOIN ic_lines l ON l.w = o.w AND l.d = o.d AND l.o = o.o
WHERE o.d = 3 AND o.o BETWEEN 100 AND 104 GROUP BY o.o ORDER BY o.o;
SELECT o.o, sum(l.amount) FROM ic_orders o JOIN ic_lines l ON l.w = o.w AND l.d = o.d AND l.o = o.o
WHERE o.d = 3 AND o.o BETWEEN 100 AND 104 GROUP BY o.o ORDER BY o.o;
-- point lookups and short ranges: index scans
EXPLAIN (COSTS OFF) SELECT amount FROM ic_lines WHERE w = 1 AND d = 2 AND o = 77 AND n = 3;
EXPLAIN (COSTS OFF) SELECT sum(amount) FROM ic_lines WHERE w = 1 AND d = 2 AND o = 77;
SELECT sum(amount) FROM ic_lines WHERE w = 1 AND d = 2 AND o = 77;

-- heap tables: PostgreSQL's plan whatever the setting
SET scoot.index_fetch_cost = 0;
EXPLAIN (COSTS OFF)
SELECT o.cnt, count(*) FROM ic_orders_h o JOIN ic_lines_h l ON l.w = o.w AND l.d = o.d AND l.o = o.o
WHERE o.entry <= l.delivery GROUP BY o.cnt;
SET scoot.index_fetch_cost = 1000;
EXPLAIN (COSTS OFF)
SELECT o.cnt, count(*) FROM ic_orders_h o JOIN ic_lines_h l ON l.w = o.w AND l.d = o.d AND l.o = o.o
WHERE o.entry <= l.delivery GROUP BY o.cnt;
RESET scoot.index_fetch_cost;
-- scoot.custom_scan = off: PostgreSQL's plans and costs (the nested loop)
SET scoot.custom_scan = off;
EXPLAIN (COSTS OFF)
SELECT o.cnt, count(*), sum(l.amount) FROM ic_orders o JOIN ic_lines l ON l.w = o.w AND l.d = o.d AND l.o = o.o
WHERE o.entry <= l.delivery AND l.delivery < date '2024-03-01' GROUP BY o.cnt ORDER BY o.cnt;
RESET scoot.custom_scan;
-- statements that write or lock rows keep PostgreSQL's costs (no ScootScan for them)
EXPLAIN (COSTS OFF)
UPDATE ic_lines l SET amount = amount + 1 FROM ic_orders o
WHERE l.w = o.w AND l.d = o.d AND l.o = o.o AND o.d = 3 AND o.o < 3;

-- a nested loop never walks a whole B-tree of a scoot table per outer row: a join on the second
-- column of a two-column primary key (CH Q2 joins stock's (s_w_id, s_i_id) on s_i_id) has no
-- condition on the index's first column, so its parameterized index scan reads every entry on
-- every loop (drop_whole_index_loops). Heap takes that nested loop for a one-row outer side
-- (CH Q2 gets it from an estimate of 1-2 rows where 339 come); scoot plans a hash join over a
-- scan, or an index scan that bounds the first column. Same answers.
CREATE TABLE ic_stock (w int, i int, qty int, info char(24), PRIMARY KEY (w, i)) USING scoot;
INSERT INTO ic_stock SELECT 1 + i % 2, i, i % 100, 'y' FROM generate_series(1, 60000) i;
CREATE TABLE ic_stock_h (LIKE ic_stock INCLUDING INDEXES) USING heap;
INSERT INTO ic_stock_h SELECT * FROM ic_stock;
CREATE TABLE ic_pick (i int, w int);
INSERT INTO ic_pick VALUES (4242, 1);
VACUUM ANALYZE ic_stock, ic_stock_h, ic_pick;
-- the rows of query `q` (%s: the table) on the scoot table and on its heap copy: equal?
CREATE FUNCTION ic_same(q text) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE a text; b text;
BEGIN
  EXECUTE format('SELECT md5(string_agg(x::text, ''|'' ORDER BY x::text)) FROM (' || q || ') x', 'ic_stock') INTO a;
  EXECUTE format('SELECT md5(string_agg(x::text, ''|'' ORDER BY x::text)) FROM (' || q || ') x', 'ic_stock_h') INTO b;
  RETURN a = b;
END $$;
SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_material = off;
EXPLAIN (COSTS OFF) SELECT p.i, s.qty FROM ic_pick p JOIN ic_stock_h s ON s.i = p.i;
EXPLAIN (COSTS OFF) SELECT p.i, s.qty FROM ic_pick p JOIN ic_stock s ON s.i = p.i;
SELECT ic_same('SELECT p.i, s.qty, s.w FROM ic_pick p JOIN %s s ON s.i = p.i');
-- the first column bound: the index nested loop stays
EXPLAIN (COSTS OFF) SELECT p.i, s.qty FROM ic_pick p JOIN ic_stock s ON s.i = p.i AND s.w = p.w;
SELECT ic_same('SELECT p.i, s.qty FROM ic_pick p JOIN %s s ON s.i = p.i AND s.w = p.w');
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT p.i, s.qty FROM ic_pick p JOIN ic_stock s ON s.i = p.i;
RESET enable_indexscan; RESET enable_hashjoin; RESET enable_mergejoin; RESET enable_material;
-- the costs as they come: heap walks the index for its one outer row, scoot hashes a scan
EXPLAIN (COSTS OFF) SELECT p.i, s.qty FROM ic_pick p JOIN ic_stock_h s ON s.i = p.i;
EXPLAIN (COSTS OFF) SELECT p.i, s.qty FROM ic_pick p JOIN ic_stock s ON s.i = p.i;
DROP TABLE ic_stock, ic_stock_h, ic_pick;
DROP FUNCTION ic_same(text);

DROP TABLE ic_orders, ic_lines, ic_orders_h, ic_lines_h;
DROP FUNCTION answer(text, text, text);
