-- dml: INSERT / UPDATE / DELETE / RETURNING on scoot, mirrored on heap.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE dml_s (id int PRIMARY KEY, k int, v text, n numeric DEFAULT 0) USING scoot;
CREATE INDEX dml_s_k ON dml_s (k);
CREATE TABLE dml_h (id int PRIMARY KEY, k int, v text, n numeric DEFAULT 0) USING heap;
CREATE INDEX dml_h_k ON dml_h (k);

-- a view that says whether both tables hold exactly the same rows
CREATE VIEW dml_same AS
SELECT (SELECT coalesce(array_agg(x::text ORDER BY id), '{}') FROM dml_s x)
     = (SELECT coalesce(array_agg(x::text ORDER BY id), '{}') FROM dml_h x) AS same;

-- single-row and multi-row INSERT with RETURNING
INSERT INTO dml_s VALUES (1, 10, 'one') RETURNING *;
INSERT INTO dml_h VALUES (1, 10, 'one') RETURNING *;
INSERT INTO dml_s (id, k, v) VALUES (2, 20, 'two'), (3, 30, 'three'), (4, 40, NULL) RETURNING id, v, n;
INSERT INTO dml_h (id, k, v) VALUES (2, 20, 'two'), (3, 30, 'three'), (4, 40, NULL) RETURNING id, v, n;
INSERT INTO dml_s SELECT g, g % 7, 'row ' || g, g * 1.5 FROM generate_series(5, 1000) g;
INSERT INTO dml_h SELECT g, g % 7, 'row ' || g, g * 1.5 FROM generate_series(5, 1000) g;
SELECT count(*), sum(id), sum(k), sum(n), count(v) FROM dml_s;
SELECT * FROM dml_same;

-- UPDATE of a non-indexed column
-- (RETURNING order follows the physical scan order, so sort it)
WITH u AS (UPDATE dml_s SET v = v || '!' WHERE id % 10 = 0 RETURNING id, v)
SELECT count(*), min(id), max(id), string_agg(v, ',' ORDER BY id) FILTER (WHERE id % 100 = 0) FROM u;
WITH u AS (UPDATE dml_h SET v = v || '!' WHERE id % 10 = 0 RETURNING id, v)
SELECT count(*), min(id), max(id), string_agg(v, ',' ORDER BY id) FILTER (WHERE id % 100 = 0) FROM u;
-- UPDATE of an indexed column, then look it up through the index and a seq scan
UPDATE dml_s SET k = k + 100 WHERE id BETWEEN 100 AND 110;
UPDATE dml_h SET k = k + 100 WHERE id BETWEEN 100 AND 110;
SET enable_seqscan = off;
SELECT id, k FROM dml_s WHERE k >= 100 ORDER BY id;
SELECT count(*) FROM dml_s WHERE k = 3;
RESET enable_seqscan;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SELECT id, k FROM dml_s WHERE k >= 100 ORDER BY id;
SELECT count(*) FROM dml_s WHERE k = 3;
RESET enable_indexscan;
RESET enable_bitmapscan;
-- UPDATE of the primary key
WITH u AS (UPDATE dml_s SET id = id + 10000 WHERE id > 990 RETURNING id) SELECT array_agg(id ORDER BY id) FROM u;
WITH u AS (UPDATE dml_h SET id = id + 10000 WHERE id > 990 RETURNING id) SELECT array_agg(id ORDER BY id) FROM u;
SELECT id, k, v FROM dml_s WHERE id > 990 ORDER BY id;
-- UPDATE setting columns to NULL and back
UPDATE dml_s SET v = NULL, n = NULL WHERE id BETWEEN 200 AND 205;
UPDATE dml_h SET v = NULL, n = NULL WHERE id BETWEEN 200 AND 205;
UPDATE dml_s SET v = 'back', n = -1 WHERE id BETWEEN 203 AND 210;
UPDATE dml_h SET v = 'back', n = -1 WHERE id BETWEEN 203 AND 210;
SELECT id, v, n FROM dml_s WHERE id BETWEEN 199 AND 211 ORDER BY id;
-- UPDATE that changes nothing, and one that matches nothing
UPDATE dml_s SET v = v WHERE id = 1;
UPDATE dml_h SET v = v WHERE id = 1;
UPDATE dml_s SET v = 'never' WHERE id < 0;
-- UPDATE from a join with heap
WITH u AS (UPDATE dml_s s SET n = s.n + h.id FROM dml_h h WHERE h.id = s.id AND h.id BETWEEN 300 AND 305 RETURNING s.id, s.n)
SELECT * FROM u ORDER BY id;
WITH u AS (UPDATE dml_h s SET n = s.n + h.id FROM dml_s h WHERE h.id = s.id AND h.id BETWEEN 300 AND 305 RETURNING s.id, s.n)
SELECT * FROM u ORDER BY id;
-- the same row updated by consecutive statements
UPDATE dml_s SET n = n + 1 WHERE id = 2;
UPDATE dml_s SET n = n + 1 WHERE id = 2;
UPDATE dml_s SET n = n + 1 WHERE id = 2;
UPDATE dml_h SET n = n + 3 WHERE id = 2;
SELECT id, n FROM dml_s WHERE id = 2;
SELECT * FROM dml_same;

-- DELETE with RETURNING, USING, and subquery
WITH d AS (DELETE FROM dml_s WHERE id % 3 = 0 AND id < 100 RETURNING id) SELECT count(*), sum(id) FROM d;
WITH d AS (DELETE FROM dml_h WHERE id % 3 = 0 AND id < 100 RETURNING id) SELECT count(*), sum(id) FROM d;
DELETE FROM dml_s WHERE id = 1 RETURNING *;
DELETE FROM dml_h WHERE id = 1 RETURNING *;
DELETE FROM dml_s s USING dml_h h WHERE s.id = h.id AND h.k = 5 AND h.id > 900;
DELETE FROM dml_h h WHERE h.k = 5 AND h.id > 900;
DELETE FROM dml_s WHERE id IN (SELECT id FROM dml_h WHERE v LIKE '%!' AND id > 500);
DELETE FROM dml_h WHERE id IN (SELECT id FROM dml_h WHERE v LIKE '%!' AND id > 500);
DELETE FROM dml_s WHERE id = -1;
SELECT count(*), sum(id), sum(k), sum(n) FROM dml_s;
SELECT * FROM dml_same;

-- self-referencing INSERT ... SELECT (must not see its own new rows)
CREATE TABLE dml_self (a int, b text) USING scoot;
INSERT INTO dml_self SELECT g, 'gen' FROM generate_series(1, 100) g;
INSERT INTO dml_self SELECT a + 100, b || '2' FROM dml_self;
INSERT INTO dml_self SELECT a + 200, b || '3' FROM dml_self;
SELECT count(*), min(a), max(a), count(DISTINCT a) FROM dml_self;
SELECT b, count(*) FROM dml_self GROUP BY b ORDER BY b COLLATE "C";
-- self-referencing UPDATE and DELETE with subqueries on the same table
UPDATE dml_self SET a = a + (SELECT max(a) FROM dml_self) WHERE b = 'gen';
SELECT min(a), max(a) FROM dml_self WHERE b = 'gen';
DELETE FROM dml_self WHERE a > (SELECT avg(a) FROM dml_self);
SELECT count(*), min(a), max(a) FROM dml_self;

-- ctid-based queries (ctids are never printed, only compared)
CREATE TABLE dml_ctid (id int, v text) USING scoot;
INSERT INTO dml_ctid SELECT g, 'v' || g FROM generate_series(1, 50) g;
SELECT count(DISTINCT ctid) = count(*) AS ctids_unique FROM dml_ctid;
SELECT id, v FROM dml_ctid WHERE ctid = (SELECT ctid FROM dml_ctid WHERE id = 17);
SELECT id FROM dml_ctid WHERE ctid IN (SELECT ctid FROM dml_ctid WHERE id IN (3, 30)) ORDER BY id;
UPDATE dml_ctid SET v = 'via ctid' WHERE ctid = (SELECT ctid FROM dml_ctid WHERE id = 5) RETURNING id, v;
DELETE FROM dml_ctid WHERE ctid = (SELECT ctid FROM dml_ctid WHERE id = 6) RETURNING id, v;
SELECT count(*) FROM dml_ctid;
-- a row's ctid stays stable while it is not updated
CREATE TABLE dml_ctid_snap AS SELECT id, ctid AS c FROM dml_ctid;
UPDATE dml_ctid SET v = v || '+' WHERE id > 40;
SELECT count(*) FILTER (WHERE d.ctid = s.c) AS same_ctid_unchanged_rows
FROM dml_ctid d JOIN dml_ctid_snap s USING (id) WHERE id <= 40;
-- the ctid returned by RETURNING is the one a subsequent lookup finds
CREATE TABLE dml_ctid_ret AS WITH r AS (INSERT INTO dml_ctid VALUES (99, 'new') RETURNING ctid AS c) SELECT c FROM r;
SELECT d.id, d.v FROM dml_ctid d, dml_ctid_ret r WHERE d.ctid = r.c;
-- after an UPDATE, the old ctid no longer finds a visible row with the old value
CREATE TABLE dml_ctid_old AS SELECT ctid AS c FROM dml_ctid WHERE id = 7;
UPDATE dml_ctid SET v = 'moved' WHERE id = 7;
SELECT count(*) AS old_version_visible FROM dml_ctid d, dml_ctid_old o WHERE d.ctid = o.c AND d.v = 'v7';
SELECT id, v FROM dml_ctid WHERE id = 7;

-- CTEs with data-modifying statements
CREATE TABLE dml_log (op text, id int, v text) USING scoot;
WITH moved AS (
    DELETE FROM dml_ctid WHERE id BETWEEN 10 AND 14 RETURNING id, v
), logged AS (
    INSERT INTO dml_log SELECT 'del', id, v FROM moved RETURNING *
)
SELECT count(*) FROM logged;
WITH upd AS (
    UPDATE dml_ctid SET v = upper(v) WHERE id BETWEEN 20 AND 22 RETURNING id, v
)
INSERT INTO dml_log SELECT 'upd', id, v FROM upd;
-- the outer query sees the pre-statement snapshot of the table
WITH ins AS (INSERT INTO dml_ctid VALUES (500, 'cte') RETURNING id)
SELECT (SELECT count(*) FROM dml_ctid WHERE id = 500) AS visible_in_same_stmt, (SELECT count(*) FROM ins) AS inserted;
SELECT count(*) FROM dml_ctid WHERE id = 500;
-- two modifications of the same table in one statement
WITH a AS (UPDATE dml_ctid SET v = 'a' WHERE id = 30 RETURNING id),
     b AS (DELETE FROM dml_ctid WHERE id = 31 RETURNING id)
SELECT (SELECT array_agg(id) FROM a) AS a, (SELECT array_agg(id) FROM b) AS b;
SELECT * FROM dml_log ORDER BY op COLLATE "C", id;
SELECT id, v FROM dml_ctid WHERE id BETWEEN 18 AND 32 ORDER BY id;

-- INSERT ... SELECT between scoot and heap both ways, larger batch
CREATE TABLE dml_big_s (a int, b int, c text) USING scoot;
CREATE TABLE dml_big_h (a int, b int, c text) USING heap;
INSERT INTO dml_big_h SELECT g, (g * 37) % 1000, repeat('c', g % 50) FROM generate_series(1, 20000) g;
INSERT INTO dml_big_s SELECT * FROM dml_big_h;
UPDATE dml_big_s SET b = b + 1 WHERE a % 4 = 0;
UPDATE dml_big_h SET b = b + 1 WHERE a % 4 = 0;
DELETE FROM dml_big_s WHERE a % 5 = 0;
DELETE FROM dml_big_h WHERE a % 5 = 0;
SELECT count(*), sum(a), sum(b), sum(length(c)) FROM dml_big_s;
SELECT (SELECT array_agg(x::text ORDER BY a) FROM dml_big_s x)
     = (SELECT array_agg(x::text ORDER BY a) FROM dml_big_h x) AS big_same;
SELECT count(*) FROM (SELECT * FROM dml_big_s EXCEPT ALL SELECT * FROM dml_big_h) d;
SELECT count(*) FROM (SELECT * FROM dml_big_h EXCEPT ALL SELECT * FROM dml_big_s) d;

-- constraint violations leave the table unchanged
INSERT INTO dml_s VALUES (2, 0, 'dup');
INSERT INTO dml_s (id) VALUES (NULL);
UPDATE dml_s SET id = 2 WHERE id = 4;
UPDATE dml_s SET id = NULL WHERE id = 4;
INSERT INTO dml_s SELECT g, 0, 'batch' FROM generate_series(2000, 2010) g UNION ALL SELECT 2, 0, 'dup';
SELECT count(*) FROM dml_s WHERE id BETWEEN 2000 AND 2010;
SELECT * FROM dml_same;

DROP VIEW dml_same;
DROP TABLE dml_s, dml_h, dml_self, dml_ctid, dml_ctid_snap, dml_ctid_ret, dml_ctid_old,
    dml_log, dml_big_s, dml_big_h;
