-- vacuum: many updates and deletes followed by VACUUM; contents (and index
-- answers) must stay identical to heap, and space from dead rows must be
-- reusable without disturbing live rows.  (Arena growth is checked in
-- scoot_specific_vacuum.sql.)
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE vac_s (id int PRIMARY KEY, n int, pad text) USING scoot;
CREATE INDEX vac_s_n ON vac_s (n);
CREATE TABLE vac_h (id int PRIMARY KEY, n int, pad text) USING heap;
CREATE INDEX vac_h_n ON vac_h (n);
INSERT INTO vac_s SELECT g, 0, repeat('p', 50) FROM generate_series(1, 3000) g;
INSERT INTO vac_h SELECT g, 0, repeat('p', 50) FROM generate_series(1, 3000) g;
CREATE VIEW vac_same AS
SELECT (SELECT array_agg(x::text ORDER BY id) FROM vac_s x)
     = (SELECT array_agg(x::text ORDER BY id) FROM vac_h x) AS same;

-- VACUUM on a fresh table, an empty table and with options
VACUUM vac_s;
CREATE TABLE vac_empty (a int) USING scoot;
VACUUM vac_empty;
VACUUM (ANALYZE) vac_empty;
INSERT INTO vac_empty VALUES (1);
DELETE FROM vac_empty;
VACUUM vac_empty;
SELECT count(*) FROM vac_empty;
INSERT INTO vac_empty VALUES (2);
SELECT * FROM vac_empty;

-- rounds of updates (all rows, indexed column) + deletes + inserts, VACUUM after each
DO $$
BEGIN
  FOR r IN 1..5 LOOP
    UPDATE vac_s SET n = n + 1;
    UPDATE vac_s SET pad = repeat(chr(97 + r), 50 + r) WHERE id % 5 = r % 5;
    DELETE FROM vac_s WHERE id % 97 = r;
    INSERT INTO vac_s SELECT id, n, 'reinserted' FROM (SELECT g AS id, r AS n FROM generate_series(1, 3000) g) s
      WHERE id % 97 = r;
    UPDATE vac_h SET n = n + 1;
    UPDATE vac_h SET pad = repeat(chr(97 + r), 50 + r) WHERE id % 5 = r % 5;
    DELETE FROM vac_h WHERE id % 97 = r;
    INSERT INTO vac_h SELECT id, n, 'reinserted' FROM (SELECT g AS id, r AS n FROM generate_series(1, 3000) g) s
      WHERE id % 97 = r;
  END LOOP;
END $$;
SELECT * FROM vac_same;
VACUUM vac_s;
SELECT * FROM vac_same;
SELECT n, count(*) FROM vac_s GROUP BY n ORDER BY n;

-- many updates of the same few rows (long update chains), then VACUUM
DO $$
BEGIN
  FOR i IN 1..200 LOOP
    UPDATE vac_s SET n = n + 1 WHERE id <= 5;
    UPDATE vac_h SET n = n + 1 WHERE id <= 5;
  END LOOP;
END $$;
SELECT id, n FROM vac_s WHERE id <= 5 ORDER BY id;
VACUUM vac_s;
SELECT id, n FROM vac_s WHERE id <= 5 ORDER BY id;
SELECT * FROM vac_same;

-- index answers after vacuum: old index entries must not find reused slots
INSERT INTO vac_s SELECT g, -g, 'new after vacuum' FROM generate_series(3001, 4000) g;
INSERT INTO vac_h SELECT g, -g, 'new after vacuum' FROM generate_series(3001, 4000) g;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*), sum(id) FROM vac_s WHERE n BETWEEN 1 AND 4;
SELECT count(*), sum(id) FROM vac_s WHERE n < 0;
SELECT id, n, pad FROM vac_s WHERE n >= 205 ORDER BY id;
RESET enable_bitmapscan;
SET enable_indexscan = off;
SELECT count(*), sum(id) FROM vac_s WHERE n BETWEEN 1 AND 4;
SELECT count(*), sum(id) FROM vac_s WHERE n < 0;
RESET enable_indexscan;
RESET enable_seqscan;
SELECT count(*), sum(id) FROM vac_h WHERE n BETWEEN 1 AND 4;
SELECT * FROM vac_same;

-- VACUUM variants
VACUUM (FREEZE) vac_s;
VACUUM (ANALYZE, INDEX_CLEANUP off) vac_s;
VACUUM (TRUNCATE off) vac_s;
VACUUM (DISABLE_PAGE_SKIPPING) vac_s;
VACUUM (PARALLEL 2) vac_s;
VACUUM (SKIP_LOCKED) vac_s;
VACUUM (PROCESS_TOAST off) vac_s;
VACUUM vac_s, vac_h, vac_empty;
VACUUM ANALYZE vac_s (n);
SELECT * FROM vac_same;

-- VACUUM while an older snapshot still needs the old row versions
-- (a REPEATABLE READ transaction can't run concurrently in one session, so use
-- a WITH HOLD cursor that was materialised before the updates)
BEGIN;
DECLARE vac_cur CURSOR WITH HOLD FOR SELECT id, n FROM vac_s WHERE id <= 3 ORDER BY id;
COMMIT;
UPDATE vac_s SET n = -100 WHERE id <= 3;
VACUUM vac_s;
FETCH ALL FROM vac_cur;
CLOSE vac_cur;
SELECT id, n FROM vac_s WHERE id <= 3 ORDER BY id;
UPDATE vac_h SET n = -100 WHERE id <= 3;

-- delete everything, vacuum, and refill
DELETE FROM vac_s;
DELETE FROM vac_h;
VACUUM vac_s;
SELECT count(*) FROM vac_s;
INSERT INTO vac_s SELECT g, g, 'refill' FROM generate_series(1, 1000) g;
INSERT INTO vac_h SELECT g, g, 'refill' FROM generate_series(1, 1000) g;
SET enable_seqscan = off;
SELECT id, n FROM vac_s WHERE n IN (1, 500, 1000) ORDER BY id;
RESET enable_seqscan;
SELECT * FROM vac_same;

-- VACUUM of a table with aborted inserts
BEGIN;
INSERT INTO vac_s SELECT g, g, 'aborted' FROM generate_series(5000, 6000) g;
ROLLBACK;
VACUUM vac_s;
SELECT count(*) FROM vac_s WHERE pad = 'aborted';
SELECT * FROM vac_same;

DROP VIEW vac_same;
DROP TABLE vac_s, vac_h, vac_empty;
