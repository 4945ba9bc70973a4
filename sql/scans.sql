-- scans: sequential, sampled, parallel, TID and TID range scans, bitmap
-- AND/OR, joins with heap, aggregates, window functions, LIMIT/OFFSET.
-- Each answer is compared with the same query on a heap copy.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE scan_s (id int, g int, x float8, t text, flag bool) USING scoot;
CREATE TABLE scan_h (id int, g int, x float8, t text, flag bool) USING heap;
INSERT INTO scan_h SELECT i, i % 10, (i * 7919 % 10007) / 100.0, 't' || (i % 100), i % 4 = 0
FROM generate_series(1, 20000) i;
INSERT INTO scan_s SELECT * FROM scan_h;
-- some dead rows and updated rows in the scoot table
UPDATE scan_s SET x = x + 1 WHERE id % 9 = 0;
UPDATE scan_h SET x = x + 1 WHERE id % 9 = 0;
DELETE FROM scan_s WHERE id % 13 = 0;
DELETE FROM scan_h WHERE id % 13 = 0;
ANALYZE scan_s;
ANALYZE scan_h;

-- sequential scan with filters, aggregates, grouping
SELECT count(*), sum(id), sum(g), sum(x::numeric), count(*) FILTER (WHERE flag) FROM scan_s;
SELECT count(*), sum(id), sum(g), sum(x::numeric), count(*) FILTER (WHERE flag) FROM scan_h;
SELECT g, count(*), min(id), max(id), round(avg(x::numeric), 4) FROM scan_s GROUP BY g ORDER BY g;
SELECT (SELECT array_agg(row(g, count, min, max)::text ORDER BY g) FROM (SELECT g, count(*), min(id), max(id) FROM scan_s GROUP BY g) a)
     = (SELECT array_agg(row(g, count, min, max)::text ORDER BY g) FROM (SELECT g, count(*), min(id), max(id) FROM scan_h GROUP BY g) a) AS groups_same;
SELECT t, count(*) FROM scan_s WHERE t LIKE 't9%' GROUP BY t ORDER BY t COLLATE "C";
SELECT count(DISTINCT t), count(DISTINCT x) FROM scan_s;
SELECT g, string_agg(id::text, ',' ORDER BY id) FROM scan_s WHERE id < 40 GROUP BY g ORDER BY g;
-- GROUPING SETS / ROLLUP
SELECT g, flag, count(*) FROM scan_s WHERE g < 3 GROUP BY ROLLUP (g, flag) ORDER BY g NULLS LAST, flag NULLS LAST;
-- window functions
SELECT id, g, row_number() OVER w, rank() OVER (PARTITION BY g ORDER BY x, id),
       sum(id) OVER (PARTITION BY g ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW),
       lag(id) OVER w, lead(id, 2) OVER w
FROM scan_s WHERE id <= 30 WINDOW w AS (PARTITION BY g ORDER BY id) ORDER BY g, id;
SELECT (SELECT md5(string_agg(r::text, '|' ORDER BY id))
        FROM (SELECT id, rank() OVER (PARTITION BY g ORDER BY x, id), sum(x) OVER (PARTITION BY g ORDER BY id) FROM scan_s) r)
     = (SELECT md5(string_agg(r::text, '|' ORDER BY id))
        FROM (SELECT id, rank() OVER (PARTITION BY g ORDER BY x, id), sum(x) OVER (PARTITION BY g ORDER BY id) FROM scan_h) r) AS windows_same;
-- LIMIT / OFFSET (with a total order)
SELECT id, x FROM scan_s ORDER BY x DESC, id LIMIT 5;
SELECT id, x FROM scan_s ORDER BY x DESC, id LIMIT 5 OFFSET 100;
SELECT id FROM scan_s ORDER BY id OFFSET 18440;
SELECT id FROM scan_s ORDER BY id FETCH FIRST 3 ROWS WITH TIES;
SELECT g, count(*) FROM (SELECT g FROM scan_s ORDER BY g FETCH FIRST 3 ROWS WITH TIES) s GROUP BY g;
-- LIMIT without ORDER BY: only the count is deterministic
SELECT count(*) FROM (SELECT * FROM scan_s LIMIT 17) s;
SELECT count(*) FROM (SELECT * FROM scan_s WHERE g = 3 LIMIT 17 OFFSET 3) s;
-- EXISTS / IN / correlated subqueries against the same table
SELECT count(*) FROM scan_s a WHERE EXISTS (SELECT 1 FROM scan_s b WHERE b.id = a.id + 1 AND b.g = 0);
SELECT count(*) FROM scan_s a WHERE a.id IN (SELECT id * 2 FROM scan_s WHERE flag);
SELECT id, (SELECT count(*) FROM scan_s b WHERE b.g = a.g AND b.id < a.id) AS before FROM scan_s a WHERE id IN (5, 500, 5000) ORDER BY id;

-- joins between scoot and heap tables, every join method
CREATE TABLE scan_dim_h (g int PRIMARY KEY, name text) USING heap;
INSERT INTO scan_dim_h SELECT i, 'group ' || i FROM generate_series(0, 9) i;
CREATE TABLE scan_dim_s (g int PRIMARY KEY, name text) USING scoot;
INSERT INTO scan_dim_s SELECT * FROM scan_dim_h;
CREATE INDEX scan_s_g ON scan_s (g);
CREATE INDEX scan_s_id ON scan_s (id);
CREATE FUNCTION scan_join_digest(q text) RETURNS TABLE (method text, n bigint, digest text)
LANGUAGE plpgsql AS $$
DECLARE m text;
BEGIN
  FOREACH m IN ARRAY ARRAY['hash', 'merge', 'nestloop'] LOOP
    PERFORM set_config('enable_hashjoin', (m = 'hash')::text, true);
    PERFORM set_config('enable_mergejoin', (m = 'merge')::text, true);
    PERFORM set_config('enable_nestloop', (m = 'nestloop')::text, true);
    method := m;
    EXECUTE format('SELECT count(*), md5(string_agg(x::text, %L ORDER BY x::text COLLATE "C")) FROM (%s) x', '|', q)
      INTO n, digest;
    RETURN NEXT;
  END LOOP;
  PERFORM set_config('enable_hashjoin', 'on', true);
  PERFORM set_config('enable_mergejoin', 'on', true);
  PERFORM set_config('enable_nestloop', 'on', true);
END $$;
SELECT count(DISTINCT digest) AS distinct_answers, min(n) AS n FROM scan_join_digest(
  'SELECT s.id, d.name FROM scan_s s JOIN scan_dim_h d ON d.g = s.g WHERE s.id % 100 = 1');
SELECT count(DISTINCT digest) AS distinct_answers, min(n) AS n FROM scan_join_digest(
  'SELECT h.id, d.name FROM scan_h h JOIN scan_dim_s d ON d.g = h.g WHERE h.id % 100 = 1');
SELECT count(DISTINCT digest) AS distinct_answers, min(n) AS n FROM scan_join_digest(
  'SELECT s.id, h.x FROM scan_s s JOIN scan_h h ON h.id = s.id AND h.x = s.x');
SELECT count(DISTINCT digest) AS distinct_answers, min(n) AS n FROM scan_join_digest(
  'SELECT a.id, b.id FROM scan_s a JOIN scan_s b ON a.id = b.id + 1 WHERE a.g = 5');
SELECT count(DISTINCT digest) AS distinct_answers, min(n) AS n FROM scan_join_digest(
  'SELECT s.id, d.g FROM scan_dim_s d LEFT JOIN scan_s s ON s.g = d.g AND s.id < 3');
SELECT count(DISTINCT digest) AS distinct_answers, min(n) AS n FROM scan_join_digest(
  'SELECT h.id FROM scan_h h WHERE NOT EXISTS (SELECT 1 FROM scan_s s WHERE s.id = h.id)');
SELECT (SELECT digest FROM scan_join_digest('SELECT s.id, d.name FROM scan_s s JOIN scan_dim_s d USING (g) WHERE s.flag') WHERE method = 'hash')
     = (SELECT digest FROM scan_join_digest('SELECT s.id, d.name FROM scan_h s JOIN scan_dim_h d USING (g) WHERE s.flag') WHERE method = 'hash') AS join_same_as_heap;
SELECT d.name, count(*), sum(s.id) FROM scan_s s JOIN scan_dim_h d USING (g) GROUP BY d.name ORDER BY d.name COLLATE "C";
SELECT s.id, d.name FROM scan_s s RIGHT JOIN scan_dim_s d ON d.g = s.g AND s.id <= 3 ORDER BY d.g, s.id;
SELECT count(*) FROM scan_s s FULL JOIN scan_dim_s d ON d.g = s.g + 5;

-- bitmap AND / OR (forced), compared with a seq scan
CREATE INDEX scan_s_x ON scan_s (x);
SET enable_seqscan = off;
SET enable_indexscan = off;
SELECT count(*), sum(id) FROM scan_s WHERE g = 3 AND x < 20;
SELECT count(*), sum(id) FROM scan_s WHERE g = 3 OR x < 1;
SELECT count(*), sum(id) FROM scan_s WHERE (g = 3 OR g = 7) AND (id < 1000 OR id > 19000);
SELECT count(*), sum(id) FROM scan_s WHERE id = ANY (ARRAY[1, 2, 3, 13, 26, 100, 19999]);
RESET enable_seqscan;
RESET enable_indexscan;
SET enable_bitmapscan = off;
SET enable_indexscan = off;
SELECT count(*), sum(id) FROM scan_s WHERE g = 3 AND x < 20;
SELECT count(*), sum(id) FROM scan_s WHERE g = 3 OR x < 1;
SELECT count(*), sum(id) FROM scan_s WHERE (g = 3 OR g = 7) AND (id < 1000 OR id > 19000);
SELECT count(*), sum(id) FROM scan_s WHERE id = ANY (ARRAY[1, 2, 3, 13, 26, 100, 19999]);
RESET enable_bitmapscan;
RESET enable_indexscan;

-- TID scans: ctids are only compared, never printed
SELECT id, g FROM scan_s WHERE ctid = (SELECT ctid FROM scan_s WHERE id = 777);
SELECT id FROM scan_s WHERE ctid = ANY (ARRAY(SELECT ctid FROM scan_s WHERE id IN (1, 2, 19999))) ORDER BY id;
SELECT count(*) FROM scan_s WHERE ctid = '(0,0)';
SELECT count(*) FROM scan_s WHERE ctid = '(4294967295,1)';
SELECT count(*) FROM scan_s WHERE ctid IN ('(0,0)', '(4294967294,65535)');
-- a tid that belonged to a deleted row finds nothing
CREATE TEMP TABLE scan_dead_tid AS SELECT ctid AS c FROM scan_s WHERE id = 20000;
DELETE FROM scan_s WHERE id = 20000;
SELECT count(*) FROM scan_s s, scan_dead_tid d WHERE s.ctid = d.c;
DELETE FROM scan_h WHERE id = 20000;
-- TID range scans
SELECT count(*) = (SELECT count(*) FROM scan_s) AS all_rows FROM scan_s WHERE ctid > '(0,0)';
SELECT count(*) = (SELECT count(*) FROM scan_s) AS all_rows FROM scan_s WHERE ctid >= '(0,0)' AND ctid <= '(4294967295,65535)';
SELECT count(*) FROM scan_s WHERE ctid < '(0,0)';
SELECT count(*) FROM scan_s WHERE ctid > '(4294967295,65535)';
-- ranges split at a row's own tid partition the table
CREATE TEMP TABLE scan_mid AS SELECT ctid AS c FROM scan_s WHERE id = 10001;
SELECT (SELECT count(*) FROM scan_s, scan_mid WHERE scan_s.ctid < c)
     + (SELECT count(*) FROM scan_s, scan_mid WHERE scan_s.ctid >= c) = (SELECT count(*) FROM scan_s) AS partitions_table;
SELECT id FROM scan_s, scan_mid WHERE scan_s.ctid >= c AND scan_s.ctid <= c;
-- TID range scan and a plain filter on ctid return the same rows
CREATE TEMP TABLE scan_tidrange AS
SELECT array_agg(id ORDER BY id) AS ids FROM scan_s WHERE ctid >= (SELECT c FROM scan_mid) AND ctid < '(4294967295,1)';
SET enable_tidscan = off;
SELECT (SELECT array_agg(id ORDER BY id) FROM scan_s WHERE ctid >= (SELECT c FROM scan_mid) AND ctid < '(4294967295,1)')
     = (SELECT ids FROM scan_tidrange) AS tid_range_consistent;
RESET enable_tidscan;

-- TABLESAMPLE: only deterministic properties
SELECT count(*) <= (SELECT count(*) FROM scan_s) AS bounded FROM scan_s TABLESAMPLE SYSTEM (10) REPEATABLE (42);
SELECT count(*) <= (SELECT count(*) FROM scan_s) AS bounded FROM scan_s TABLESAMPLE BERNOULLI (10) REPEATABLE (42);
SELECT count(*) = (SELECT count(*) FROM scan_s) AS everything FROM scan_s TABLESAMPLE SYSTEM (100);
SELECT count(*) = (SELECT count(*) FROM scan_s) AS everything FROM scan_s TABLESAMPLE BERNOULLI (100);
SELECT count(*) FROM scan_s TABLESAMPLE SYSTEM (0);
SELECT count(*) FROM scan_s TABLESAMPLE BERNOULLI (0);
SELECT (SELECT array_agg(id ORDER BY id) FROM scan_s TABLESAMPLE SYSTEM (20) REPEATABLE (7))
     IS NOT DISTINCT FROM (SELECT array_agg(id ORDER BY id) FROM scan_s TABLESAMPLE SYSTEM (20) REPEATABLE (7)) AS system_repeatable;
SELECT (SELECT array_agg(id ORDER BY id) FROM scan_s TABLESAMPLE BERNOULLI (20) REPEATABLE (7))
     IS NOT DISTINCT FROM (SELECT array_agg(id ORDER BY id) FROM scan_s TABLESAMPLE BERNOULLI (20) REPEATABLE (7)) AS bernoulli_repeatable;
-- every sampled row is a real, live row
SELECT count(*) FROM scan_s TABLESAMPLE BERNOULLI (30) REPEATABLE (1) WHERE id % 13 = 0;
SELECT bool_and(s.x = h.x) AS sampled_rows_valid FROM scan_s s TABLESAMPLE BERNOULLI (30) REPEATABLE (3) JOIN scan_h h USING (id);

-- parallel sequential scans give the serial answers
CREATE TEMP TABLE scan_serial AS
SELECT count(*) AS n, sum(id) AS s, sum(g) AS sg, sum(x::numeric) AS sx, count(*) FILTER (WHERE flag) AS f
FROM scan_s;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = on;
SELECT row(count(*), sum(id), sum(g), sum(x::numeric), count(*) FILTER (WHERE flag))::text
     = (SELECT row(n, s, sg, sx, f)::text FROM scan_serial) AS parallel_agg_same
FROM scan_s;
SELECT g, count(*), sum(id) FROM scan_s GROUP BY g ORDER BY g;
SELECT (SELECT array_agg(id ORDER BY id) FROM scan_s WHERE x < 5)
     = (SELECT array_agg(id ORDER BY id) FROM scan_h WHERE x < 5) AS parallel_filter_same;
SELECT count(*) FROM scan_s s JOIN scan_dim_h d USING (g) WHERE d.name = 'group 4';
SET parallel_leader_participation = off;
SELECT row(count(*), sum(id), sum(g), sum(x::numeric), count(*) FILTER (WHERE flag))::text
     = (SELECT row(n, s, sg, sx, f)::text FROM scan_serial) AS parallel_agg_same_workers_only
FROM scan_s;
RESET parallel_leader_participation;
-- parallel scan inside a transaction that modified the table is not allowed
-- to use workers (but must still see the changes)
BEGIN;
DELETE FROM scan_s WHERE id <= 100;
SELECT count(*) = (SELECT n FROM scan_serial) - 93 AS sees_own_delete FROM scan_s;
ROLLBACK;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;

-- the final comparison of the whole table
SELECT (SELECT array_agg(x::text ORDER BY id) FROM scan_s x)
     = (SELECT array_agg(x::text ORDER BY id) FROM scan_h x) AS same_as_heap;

DROP FUNCTION scan_join_digest(text);
DROP TABLE scan_s, scan_h, scan_dim_h, scan_dim_s, scan_dead_tid, scan_mid, scan_tidrange, scan_serial;
