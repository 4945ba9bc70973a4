-- xact: transactions, savepoints, subtransaction aborts, cursors and
-- combo command ids on scoot tables.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE xact_s (id int PRIMARY KEY, v int, t text) USING scoot;
INSERT INTO xact_s SELECT g, g * 10, 'r' || g FROM generate_series(1, 10) g;

-- COMMIT / ROLLBACK
BEGIN;
INSERT INTO xact_s VALUES (11, 110, 'r11');
UPDATE xact_s SET v = -v WHERE id = 1;
DELETE FROM xact_s WHERE id = 2;
SELECT id, v FROM xact_s WHERE id IN (1, 2, 11) ORDER BY id;
ROLLBACK;
SELECT id, v FROM xact_s WHERE id IN (1, 2, 11) ORDER BY id;
SELECT count(*) FROM xact_s;

BEGIN;
INSERT INTO xact_s VALUES (11, 110, 'r11');
UPDATE xact_s SET v = -v WHERE id = 1;
DELETE FROM xact_s WHERE id = 2;
COMMIT;
SELECT id, v FROM xact_s WHERE id IN (1, 2, 11) ORDER BY id;
SELECT count(*) FROM xact_s;

-- a failed statement aborts the whole transaction
BEGIN;
INSERT INTO xact_s VALUES (12, 120, 'r12');
INSERT INTO xact_s VALUES (1, 0, 'dup');
SELECT 1;
COMMIT;
SELECT count(*) FROM xact_s WHERE id = 12;

-- savepoints: rollback to, release, nested
BEGIN;
INSERT INTO xact_s VALUES (20, 200, 'sp0');
SAVEPOINT a;
INSERT INTO xact_s VALUES (21, 210, 'sp-a');
UPDATE xact_s SET t = 'in a' WHERE id = 3;
SAVEPOINT b;
INSERT INTO xact_s VALUES (22, 220, 'sp-b');
DELETE FROM xact_s WHERE id = 4;
UPDATE xact_s SET t = 'in b' WHERE id = 3;
SELECT id, t FROM xact_s WHERE id IN (3, 4, 20, 21, 22) ORDER BY id;
ROLLBACK TO SAVEPOINT b;
SELECT id, t FROM xact_s WHERE id IN (3, 4, 20, 21, 22) ORDER BY id;
SAVEPOINT c;
INSERT INTO xact_s VALUES (23, 230, 'sp-c');
RELEASE SAVEPOINT c;
ROLLBACK TO SAVEPOINT a;
SELECT id, t FROM xact_s WHERE id IN (3, 4, 20, 21, 22, 23) ORDER BY id;
SAVEPOINT d;
UPDATE xact_s SET t = 'in d' WHERE id = 5;
RELEASE SAVEPOINT d;
COMMIT;
SELECT id, t FROM xact_s WHERE id IN (3, 4, 5, 20, 21, 22, 23) ORDER BY id;

-- subtransaction abort after an error, then continue in the same transaction
BEGIN;
SAVEPOINT s1;
INSERT INTO xact_s VALUES (1, 0, 'dup');
ROLLBACK TO SAVEPOINT s1;
INSERT INTO xact_s VALUES (24, 240, 'after error');
SAVEPOINT s2;
UPDATE xact_s SET v = 1 / (v - v) WHERE id = 24;
ROLLBACK TO SAVEPOINT s2;
UPDATE xact_s SET v = v + 1 WHERE id = 24;
COMMIT;
SELECT id, v, t FROM xact_s WHERE id = 24;

-- exception blocks in plpgsql are subtransactions too
DO $$
BEGIN
  FOR i IN 30..39 LOOP
    BEGIN
      INSERT INTO xact_s VALUES (i, i, 'plpgsql');
      IF i % 3 = 0 THEN
        RAISE EXCEPTION 'abort %', i;
      END IF;
    EXCEPTION WHEN raise_exception THEN
      NULL;
    END;
  END LOOP;
END
$$;
SELECT array_agg(id ORDER BY id) FROM xact_s WHERE t = 'plpgsql';

-- a subtransaction that updates a row, aborts, and the row is updated again
BEGIN;
UPDATE xact_s SET v = 1000 WHERE id = 6;
SAVEPOINT x;
UPDATE xact_s SET v = 2000 WHERE id = 6;
DELETE FROM xact_s WHERE id = 6;
ROLLBACK TO SAVEPOINT x;
SELECT id, v FROM xact_s WHERE id = 6;
UPDATE xact_s SET v = v + 1 WHERE id = 6;
COMMIT;
SELECT id, v FROM xact_s WHERE id = 6;

-- rows inserted and deleted within the same transaction
BEGIN;
INSERT INTO xact_s SELECT g, g, 'tmp' FROM generate_series(100, 199) g;
DELETE FROM xact_s WHERE id BETWEEN 100 AND 149;
UPDATE xact_s SET t = 'tmp2' WHERE id BETWEEN 150 AND 159;
SELECT t, count(*) FROM xact_s WHERE id >= 100 GROUP BY t ORDER BY t COLLATE "C";
COMMIT;
SELECT t, count(*) FROM xact_s WHERE id >= 100 GROUP BY t ORDER BY t COLLATE "C";
DELETE FROM xact_s WHERE id >= 100;

-- combo cids: several updates of the same row in one transaction, with a
-- cursor that was opened before them still seeing the original values
BEGIN;
DECLARE c_before CURSOR FOR SELECT id, v FROM xact_s WHERE id <= 5 ORDER BY id;
UPDATE xact_s SET v = v + 1 WHERE id <= 5;
DECLARE c_mid CURSOR FOR SELECT id, v FROM xact_s WHERE id <= 5 ORDER BY id;
UPDATE xact_s SET v = v + 1 WHERE id <= 5;
UPDATE xact_s SET v = v + 1 WHERE id <= 5;
DELETE FROM xact_s WHERE id = 5;
INSERT INTO xact_s VALUES (5, 5, 'reinserted');
UPDATE xact_s SET v = v + 100 WHERE id = 5;
FETCH ALL FROM c_before;
FETCH ALL FROM c_mid;
SELECT id, v, t FROM xact_s WHERE id <= 5 ORDER BY id;
COMMIT;
SELECT id, v, t FROM xact_s WHERE id <= 5 ORDER BY id;

-- a row inserted and updated many times in one transaction, then rolled back
BEGIN;
INSERT INTO xact_s VALUES (50, 0, 'many');
UPDATE xact_s SET v = v + 1 WHERE id = 50;
UPDATE xact_s SET v = v + 1 WHERE id = 50;
UPDATE xact_s SET v = v + 1 WHERE id = 50;
UPDATE xact_s SET v = v + 1 WHERE id = 50;
SELECT v FROM xact_s WHERE id = 50;
ROLLBACK;
SELECT count(*) FROM xact_s WHERE id = 50;

-- SCROLL cursors
CREATE TABLE xact_cur (id int, v text) USING scoot;
INSERT INTO xact_cur SELECT g, 'c' || g FROM generate_series(1, 20) g;
BEGIN;
DECLARE sc SCROLL CURSOR FOR SELECT id, v FROM xact_cur ORDER BY id;
FETCH 3 FROM sc;
FETCH BACKWARD 2 FROM sc;
FETCH PRIOR FROM sc;
FETCH PRIOR FROM sc;
FETCH ABSOLUTE 10 FROM sc;
FETCH RELATIVE -3 FROM sc;
FETCH LAST FROM sc;
FETCH NEXT FROM sc;
FETCH ABSOLUTE -2 FROM sc;
FETCH FIRST FROM sc;
MOVE FORWARD 5 IN sc;
FETCH FROM sc;
CLOSE sc;
COMMIT;
-- a scroll cursor over a plain seq scan (no sort): backward fetches must
-- return exactly the rows seen going forward, in reverse
CREATE TEMP TABLE xact_fwd (n serial, id int);
CREATE TEMP TABLE xact_bwd (n serial, id int);
BEGIN;
DECLARE sc2 SCROLL CURSOR FOR SELECT id FROM xact_cur;
DO $$
DECLARE
  r record;
  c refcursor := 'sc2';
BEGIN
  FOR i IN 1..20 LOOP
    FETCH NEXT FROM c INTO r;
    INSERT INTO xact_fwd (id) VALUES (r.id);
  END LOOP;
  FOR i IN 1..19 LOOP
    FETCH PRIOR FROM c INTO r;
    INSERT INTO xact_bwd (id) VALUES (r.id);
  END LOOP;
END
$$;
SELECT count(*) FROM xact_fwd;
SELECT (SELECT array_agg(id ORDER BY n DESC) FROM xact_fwd WHERE n < 20)
     = (SELECT array_agg(id ORDER BY n) FROM xact_bwd) AS backward_matches_forward;
SELECT (SELECT array_agg(id ORDER BY id) FROM xact_fwd) = (SELECT array_agg(g) FROM generate_series(1, 20) g) AS all_rows_once;
FETCH ABSOLUTE 0 FROM sc2;
FETCH PRIOR FROM sc2;
COMMIT;

-- a cursor sees its snapshot even when the table changes under it
BEGIN;
DECLARE snap CURSOR FOR SELECT id, v FROM xact_cur WHERE id <= 6 ORDER BY id;
FETCH 2 FROM snap;
UPDATE xact_cur SET v = 'changed' WHERE id <= 6;
DELETE FROM xact_cur WHERE id = 4;
FETCH ALL FROM snap;
ROLLBACK;

-- WITH HOLD cursors survive COMMIT (and are materialized at commit)
BEGIN;
DECLARE hc SCROLL CURSOR WITH HOLD FOR SELECT id, v FROM xact_cur WHERE id % 5 = 0 ORDER BY id;
FETCH 1 FROM hc;
COMMIT;
UPDATE xact_cur SET v = 'after commit' WHERE id % 5 = 0;
FETCH ALL FROM hc;
FETCH BACKWARD 2 FROM hc;
CLOSE hc;
-- WITH HOLD cursor declared outside an explicit transaction
DECLARE hc2 CURSOR WITH HOLD FOR SELECT id, v FROM xact_cur WHERE id > 17 ORDER BY id;
DELETE FROM xact_cur WHERE id > 17;
FETCH ALL FROM hc2;
CLOSE hc2;

-- cursor-based UPDATE / DELETE (WHERE CURRENT OF)
BEGIN;
DECLARE cu CURSOR FOR SELECT id, v FROM xact_cur WHERE id BETWEEN 1 AND 3 ORDER BY id FOR UPDATE;
FETCH 1 FROM cu;
UPDATE xact_cur SET v = 'current-of' WHERE CURRENT OF cu;
FETCH 1 FROM cu;
DELETE FROM xact_cur WHERE CURRENT OF cu;
COMMIT;
SELECT id, v FROM xact_cur WHERE id <= 3 ORDER BY id;
-- WHERE CURRENT OF over a plain (non-FOR UPDATE) seq scan cursor
BEGIN;
DECLARE cu2 CURSOR FOR SELECT id FROM xact_cur WHERE id = 10;
FETCH 1 FROM cu2;
UPDATE xact_cur SET v = 'current-of-2' WHERE CURRENT OF cu2;
COMMIT;
SELECT id, v FROM xact_cur WHERE id = 10;

-- read-only transaction and transaction isolation levels (single session)
BEGIN TRANSACTION READ ONLY;
SELECT count(*) FROM xact_cur;
INSERT INTO xact_cur VALUES (0, 'no');
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM xact_cur;
INSERT INTO xact_cur VALUES (100, 'rr');
SELECT count(*) FROM xact_cur;
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
UPDATE xact_cur SET v = 'ser' WHERE id = 100;
SELECT id, v FROM xact_cur WHERE id = 100;
COMMIT;

-- the final state compared with a heap table that went through the same history
CREATE TABLE xact_h (id int PRIMARY KEY, v int, t text) USING heap;
INSERT INTO xact_h VALUES
  (1, -7, 'r1'), (3, 33, 'r3'), (4, 43, 'r4'), (5, 105, 'reinserted'), (6, 1001, 'r6'),
  (7, 70, 'r7'), (8, 80, 'r8'), (9, 90, 'r9'), (10, 100, 'r10'), (11, 110, 'r11'),
  (20, 200, 'sp0'), (24, 241, 'after error'),
  (31, 31, 'plpgsql'), (32, 32, 'plpgsql'), (34, 34, 'plpgsql'), (35, 35, 'plpgsql'),
  (37, 37, 'plpgsql'), (38, 38, 'plpgsql');
SELECT id, v, t FROM xact_s ORDER BY id;
SELECT (SELECT array_agg(x::text ORDER BY id) FROM xact_s x)
     = (SELECT array_agg(x::text ORDER BY id) FROM xact_h x) AS same_as_heap;

DROP TABLE xact_s, xact_cur, xact_h, xact_fwd, xact_bwd;
