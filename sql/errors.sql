-- errors: error behaviour that must be identical to heap: misuse of the
-- access method name, and statements failing half way leave no trace.
-- (scoot-only errors such as "row is too large for a scoot block" are in
-- scoot_specific_errors.sql.)
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

-- (CREATE INDEX ... USING scoot is not tested: PostgreSQL 15 calls the table
-- AM's handler as an index AM handler and reports its function oid)
CREATE TABLE err_s (id int PRIMARY KEY, v int CHECK (v < 1000), t text) USING scoot;
CREATE TABLE err_nosuch (a int) USING scoot_nosuch;
SET default_table_access_method = scoot_nosuch;
ALTER TABLE err_s SET ACCESS METHOD scoot_nosuch;

CREATE TABLE err_h (id int PRIMARY KEY, v int CHECK (v < 1000), t text) USING heap;
INSERT INTO err_s SELECT g, g, 'r' || g FROM generate_series(1, 500) g;
INSERT INTO err_h SELECT g, g, 'r' || g FROM generate_series(1, 500) g;
CREATE VIEW err_same AS
SELECT (SELECT array_agg(x::text ORDER BY id) FROM err_s x)
     = (SELECT array_agg(x::text ORDER BY id) FROM err_h x) AS same;

-- a multi-row INSERT that fails on a later row inserts nothing
INSERT INTO err_s SELECT g, g, 'new' FROM generate_series(501, 2000) g;
INSERT INTO err_s SELECT g, 1 / (2000 - g), 'new' FROM generate_series(501, 2000) g;
INSERT INTO err_s SELECT g, 1, 'new' FROM generate_series(501, 1000) g UNION ALL SELECT 1, 1, 'dup';
SELECT count(*) FROM err_s;
-- an UPDATE that fails part way changes nothing
UPDATE err_s SET v = v * 2;
UPDATE err_s SET v = 10 / (v - 250);
UPDATE err_s SET id = 1 WHERE id > 1;
SELECT count(*), sum(v) FROM err_s;
-- a DELETE that fails part way (through a trigger) deletes nothing
CREATE FUNCTION err_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.id = 400 THEN RAISE EXCEPTION 'refusing to delete %', OLD.id; END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER err_trg BEFORE DELETE ON err_s FOR EACH ROW EXECUTE FUNCTION err_trg();
DELETE FROM err_s WHERE id > 100;
SELECT count(*) FROM err_s;
DROP TRIGGER err_trg ON err_s;
SELECT * FROM err_same;

-- errors inside subtransactions: the surviving work is exactly right
BEGIN;
UPDATE err_s SET t = 'kept' WHERE id <= 10;
SAVEPOINT a;
UPDATE err_s SET t = 'lost' WHERE id <= 20;
UPDATE err_s SET v = 5000 WHERE id = 1;
ROLLBACK TO SAVEPOINT a;
DELETE FROM err_s WHERE id = 11;
SAVEPOINT b;
INSERT INTO err_s VALUES (11, 11, 'reinserted'), (12, 12, 'dup');
ROLLBACK TO SAVEPOINT b;
INSERT INTO err_s VALUES (11, 11, 'reinserted');
COMMIT;
BEGIN;
UPDATE err_h SET t = 'kept' WHERE id <= 10;
UPDATE err_h SET t = 'reinserted' WHERE id = 11;
COMMIT;
SELECT id, v, t FROM err_s WHERE id <= 21 ORDER BY id;
SELECT * FROM err_same;

-- an error in a function called per row, caught per row in plpgsql
DO $$
DECLARE r record; failures int := 0;
BEGIN
  FOR r IN SELECT id FROM err_s WHERE id <= 50 ORDER BY id LOOP
    BEGIN
      UPDATE err_s SET v = v + 990 WHERE id = r.id;
    EXCEPTION WHEN check_violation THEN
      failures := failures + 1;
    END;
  END LOOP;
  RAISE NOTICE 'check failures: %', failures;
END $$;
UPDATE err_h SET v = v + 990 WHERE id <= 9;
SELECT * FROM err_same;

-- data-type errors while reading stored values (the stored data is fine)
SELECT t::int FROM err_s WHERE id = 12;
SELECT count(*) FROM err_s WHERE t ~ '^r[0-9]+$' AND substr(t, 2)::int > 490;

-- statement timeout during a long scan of a scoot table leaves it intact
SET statement_timeout = '200ms';
SELECT count(*) FROM err_s a, err_s b, err_s c;
RESET statement_timeout;
SELECT * FROM err_same;

DROP VIEW err_same;
DROP TABLE err_s, err_h;
DROP FUNCTION err_trg();
