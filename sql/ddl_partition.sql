-- ddl_partition: partitioned tables with scoot partitions (mixed with heap),
-- inheritance, temporary and unlogged scoot tables, materialized views.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

-- a partitioned table itself has no storage: USING is rejected (as for heap)
CREATE TABLE part_bad (a int) PARTITION BY RANGE (a) USING scoot;

CREATE TABLE part_p (id int, k int, v text, PRIMARY KEY (k, id)) PARTITION BY RANGE (k);
CREATE TABLE part_p1 PARTITION OF part_p FOR VALUES FROM (0) TO (100) USING scoot;
CREATE TABLE part_p2 PARTITION OF part_p FOR VALUES FROM (100) TO (200) USING heap;
-- a sub-partitioned partition, with scoot leaves
CREATE TABLE part_p3 PARTITION OF part_p FOR VALUES FROM (200) TO (300) PARTITION BY RANGE (id);
CREATE TABLE part_p3_lo PARTITION OF part_p3 FOR VALUES FROM (MINVALUE) TO (1000) USING scoot;
CREATE TABLE part_p3_hi PARTITION OF part_p3 FOR VALUES FROM (1000) TO (MAXVALUE) USING scoot;
SET default_table_access_method = scoot;
CREATE TABLE part_pdef PARTITION OF part_p DEFAULT;
RESET default_table_access_method;
SELECT c.relname, c.relkind, am.amname
FROM pg_class c LEFT JOIN pg_am am ON am.oid = c.relam
WHERE c.relname LIKE 'part\_p%' AND c.relkind IN ('r', 'p') ORDER BY 1;

CREATE TABLE part_h (id int, k int, v text, PRIMARY KEY (k, id)) USING heap;

INSERT INTO part_p SELECT g, g % 400, 'v' || g FROM generate_series(1, 2000) g;
INSERT INTO part_h SELECT g, g % 400, 'v' || g FROM generate_series(1, 2000) g;
SELECT tableoid::regclass AS part, count(*), min(k), max(k) FROM part_p GROUP BY 1 ORDER BY tableoid::regclass::text COLLATE "C";

-- partition pruning gives the same answers
SELECT count(*), sum(id) FROM part_p WHERE k = 50;
SELECT count(*), sum(id) FROM part_p WHERE k BETWEEN 150 AND 250;
SELECT count(*), sum(id) FROM part_p WHERE k >= 300;
-- updates within a partition and moving rows between partitions (scoot -> heap -> scoot -> default)
UPDATE part_p SET v = v || '!' WHERE k = 10;
UPDATE part_h SET v = v || '!' WHERE k = 10;
UPDATE part_p SET k = k + 100 WHERE k BETWEEN 20 AND 22;
UPDATE part_h SET k = k + 100 WHERE k BETWEEN 20 AND 22;
UPDATE part_p SET k = k + 101 WHERE k BETWEEN 150 AND 152;
UPDATE part_h SET k = k + 101 WHERE k BETWEEN 150 AND 152;
UPDATE part_p SET k = k + 500 WHERE k BETWEEN 251 AND 253;
UPDATE part_h SET k = k + 500 WHERE k BETWEEN 251 AND 253;
DELETE FROM part_p WHERE id % 17 = 0;
DELETE FROM part_h WHERE id % 17 = 0;
SELECT tableoid::regclass AS part, count(*), min(k), max(k) FROM part_p GROUP BY 1 ORDER BY tableoid::regclass::text COLLATE "C";
SELECT (SELECT array_agg(x::text ORDER BY k, id) FROM part_p x)
     = (SELECT array_agg(x::text ORDER BY k, id) FROM part_h x) AS same_as_heap;
-- upsert through the partitioned table
INSERT INTO part_p VALUES (1, 1, 'upsert') ON CONFLICT (k, id) DO UPDATE SET v = EXCLUDED.v RETURNING tableoid::regclass, *;
INSERT INTO part_p VALUES (5000, 5, 'fresh') ON CONFLICT (k, id) DO NOTHING RETURNING tableoid::regclass, *;
-- COPY into the partitioned table
COPY part_p (id, k, v) FROM STDIN;
9001	1	copy-p1
9002	101	copy-p2
9003	201	copy-p3hi
904	202	copy-p3lo
9005	999	copy-default
\.
SELECT tableoid::regclass AS part, id, k, v FROM part_p WHERE id > 9000 OR id = 904 ORDER BY id;

-- DETACH / ATTACH (attach validates the partition constraint by scanning)
ALTER TABLE part_p DETACH PARTITION part_p1;
SELECT count(*) FROM part_p WHERE k < 100;
SELECT count(*) FROM part_p1;
INSERT INTO part_p1 VALUES (7777, 150, 'out of range');
ALTER TABLE part_p ATTACH PARTITION part_p1 FOR VALUES FROM (0) TO (100);
DELETE FROM part_p1 WHERE id = 7777;
ALTER TABLE part_p ATTACH PARTITION part_p1 FOR VALUES FROM (0) TO (100);
SELECT count(*) FROM part_p WHERE k < 100;
-- a new scoot table attached as a partition
CREATE TABLE part_p4 (id int, k int, v text, PRIMARY KEY (k, id)) USING scoot;
INSERT INTO part_p4 SELECT g, 1000 + g, 'p4' FROM generate_series(1, 10) g;
ALTER TABLE part_p ATTACH PARTITION part_p4 FOR VALUES FROM (1000) TO (2000);
SELECT tableoid::regclass AS part, count(*) FROM part_p WHERE k >= 1000 GROUP BY 1 ORDER BY tableoid::regclass::text COLLATE "C";
-- TRUNCATE a partition, then the whole tree
TRUNCATE part_p3;
SELECT count(*) FROM part_p WHERE k BETWEEN 200 AND 299;
TRUNCATE part_p;
SELECT count(*) FROM part_p;

-- inheritance: heap parent with a scoot child, and scoot parent with a heap child
CREATE TABLE inh_parent_h (id int, v text) USING heap;
CREATE TABLE inh_child_s (extra int) INHERITS (inh_parent_h) USING scoot;
CREATE TABLE inh_parent_s (id int, v text) USING scoot;
CREATE TABLE inh_child_h (extra int) INHERITS (inh_parent_s) USING heap;
CREATE TABLE inh_grandchild_s () INHERITS (inh_child_h) USING scoot;
INSERT INTO inh_parent_h VALUES (1, 'parent h');
INSERT INTO inh_child_s VALUES (2, 'child s', 20);
INSERT INTO inh_parent_s VALUES (3, 'parent s');
INSERT INTO inh_child_h VALUES (4, 'child h', 40);
INSERT INTO inh_grandchild_s VALUES (5, 'grandchild s', 50);
SELECT tableoid::regclass AS tbl, * FROM inh_parent_h ORDER BY id;
SELECT tableoid::regclass AS tbl, * FROM ONLY inh_parent_h ORDER BY id;
SELECT tableoid::regclass AS tbl, * FROM inh_parent_s ORDER BY id;
UPDATE inh_parent_s SET v = v || ' (upd)' WHERE id >= 4;
DELETE FROM inh_parent_h WHERE id = 2;
SELECT tableoid::regclass AS tbl, * FROM inh_parent_s ORDER BY id;
SELECT count(*) FROM inh_child_s;
ALTER TABLE inh_parent_s ADD COLUMN added int DEFAULT 9;
SELECT tableoid::regclass AS tbl, id, added FROM inh_parent_s ORDER BY id;

-- temporary scoot tables
CREATE TEMP TABLE tmp_s (id int PRIMARY KEY, v text) USING scoot;
INSERT INTO tmp_s SELECT g, 'tmp' || g FROM generate_series(1, 500) g;
UPDATE tmp_s SET v = v || '!' WHERE id % 50 = 0;
DELETE FROM tmp_s WHERE id % 7 = 0;
SELECT count(*), count(*) FILTER (WHERE v LIKE '%!') FROM tmp_s;
SELECT id, v FROM tmp_s WHERE id IN (50, 100, 101) ORDER BY id;
SELECT relpersistence, am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam WHERE c.relname = 'tmp_s';
BEGIN;
TRUNCATE tmp_s;
ROLLBACK;
SELECT count(*) FROM tmp_s;
CREATE TEMP TABLE tmp_commit_drop (a int) USING scoot ON COMMIT DROP;
BEGIN;
CREATE TEMP TABLE tmp_commit_drop (a int) USING scoot ON COMMIT DROP;
INSERT INTO tmp_commit_drop VALUES (1);
SELECT count(*) FROM tmp_commit_drop;
COMMIT;
SELECT count(*) FROM pg_class WHERE relname = 'tmp_commit_drop';
BEGIN;
CREATE TEMP TABLE tmp_delete_rows (a int) USING scoot ON COMMIT DELETE ROWS;
INSERT INTO tmp_delete_rows VALUES (1), (2);
SELECT count(*) FROM tmp_delete_rows;
COMMIT;
SELECT count(*) FROM tmp_delete_rows;
CREATE TEMP TABLE tmp_ctas USING scoot AS SELECT * FROM tmp_s WHERE id < 10;
SELECT count(*) FROM tmp_ctas;

-- unlogged scoot tables
CREATE UNLOGGED TABLE unl_s (id int PRIMARY KEY, v text) USING scoot;
INSERT INTO unl_s SELECT g, 'u' || g FROM generate_series(1, 300) g;
UPDATE unl_s SET v = 'upd' WHERE id <= 10;
SELECT count(*), count(*) FILTER (WHERE v = 'upd') FROM unl_s;
SELECT relpersistence FROM pg_class WHERE relname = 'unl_s';
SET enable_seqscan = off;
SELECT id, v FROM unl_s WHERE id = 150;
RESET enable_seqscan;

-- materialized views stored with scoot
CREATE TABLE mv_src (id int, grp int, amount numeric) USING heap;
INSERT INTO mv_src SELECT g, g % 5, g * 1.5 FROM generate_series(1, 100) g;
CREATE MATERIALIZED VIEW mv_s USING scoot AS
  SELECT grp, count(*) AS n, sum(amount) AS total FROM mv_src GROUP BY grp;
CREATE MATERIALIZED VIEW mv_nodata USING scoot AS SELECT * FROM mv_src WITH NO DATA;
SELECT * FROM mv_s ORDER BY grp;
SELECT count(*) FROM mv_nodata;
INSERT INTO mv_src SELECT g, g % 7, 1 FROM generate_series(101, 150) g;
SELECT * FROM mv_s ORDER BY grp;
REFRESH MATERIALIZED VIEW mv_s;
SELECT * FROM mv_s ORDER BY grp;
CREATE UNIQUE INDEX mv_s_grp ON mv_s (grp);
DELETE FROM mv_src WHERE grp = 6;
UPDATE mv_src SET amount = amount * 2 WHERE grp = 0;
REFRESH MATERIALIZED VIEW CONCURRENTLY mv_s;
SELECT * FROM mv_s ORDER BY grp;
REFRESH MATERIALIZED VIEW mv_nodata;
SELECT count(*) FROM mv_nodata;
REFRESH MATERIALIZED VIEW mv_nodata WITH NO DATA;
SELECT count(*) FROM mv_nodata;
SELECT c.relname, am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam
WHERE c.relname IN ('mv_s', 'mv_nodata') ORDER BY 1;

DROP MATERIALIZED VIEW mv_s, mv_nodata;
DROP TABLE mv_src, unl_s, tmp_s, tmp_ctas, tmp_delete_rows;
DROP TABLE inh_grandchild_s, inh_child_h, inh_child_s, inh_parent_h, inh_parent_s;
DROP TABLE part_p, part_h;
