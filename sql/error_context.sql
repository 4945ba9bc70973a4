-- error_context: errors raised while scoot code is on the stack must read
-- exactly as with heap: CONTEXT lines of SQL/PL functions called from index
-- expressions and predicates, the constraint/table names and position that
-- VERBOSITY verbose shows, errors of the TOAST and lock-wait code.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE ectx_s (i int PRIMARY KEY, a int, b int, t text) USING scoot;
INSERT INTO ectx_s SELECT g, g, g % 3, 'r' || g FROM generate_series(1, 20) g;

-- an expression error during CREATE INDEX, inside SQL and PL/pgSQL functions
CREATE FUNCTION ectx_inv(x int) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT 100 / x';
CREATE FUNCTION ectx_wrap(x int) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT ectx_inv(x) + 1';
CREATE FUNCTION ectx_pl(x int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
  IF x = 0 THEN RAISE EXCEPTION 'ectx_pl got zero' USING DETAIL = 'x was ' || x, HINT = 'do not pass zero'; END IF;
  RETURN x;
END $$;
CREATE INDEX ectx_idx1 ON ectx_s (ectx_wrap(b));
CREATE INDEX ectx_idx2 ON ectx_s (ectx_pl(b));
CREATE INDEX ectx_idx3 ON ectx_s (a) WHERE ectx_wrap(b) > 0;
CREATE INDEX CONCURRENTLY ectx_idx4 ON ectx_s ((a / b));
DROP INDEX IF EXISTS ectx_idx4;
-- the same error from an index on an existing table during INSERT
CREATE INDEX ectx_idx5 ON ectx_s (ectx_wrap(b + 1));
INSERT INTO ectx_s VALUES (100, 1, -1, 'x');

-- ANALYZE inside ANALYZE (index expression running ANALYZE) and during VACUUM FULL
CREATE TABLE ectx_vac (i int PRIMARY KEY) USING scoot;
CREATE FUNCTION ectx_do_analyze() RETURNS void VOLATILE LANGUAGE sql AS 'ANALYZE pg_am';
CREATE FUNCTION ectx_wrap_analyze(c int) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT $1 FROM public.ectx_do_analyze()';
CREATE INDEX ON ectx_vac (ectx_wrap_analyze(i));
INSERT INTO ectx_vac VALUES (1), (2);
ANALYZE ectx_vac;
VACUUM FULL ectx_vac;

-- constraint violations with every field shown
\set VERBOSITY verbose
INSERT INTO ectx_s VALUES (1, 1, 1, 'dup');
CREATE UNIQUE INDEX ectx_uniq ON ectx_s (b);
ALTER TABLE ectx_s ADD CONSTRAINT ectx_chk CHECK (a < 10);
\set VERBOSITY default

-- an error inside a trigger fired by a scoot modification
CREATE FUNCTION ectx_trig() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM ectx_inv(NEW.b);
  RETURN NEW;
END $$;
CREATE TRIGGER ectx_t BEFORE UPDATE ON ectx_s FOR EACH ROW EXECUTE FUNCTION ectx_trig();
UPDATE ectx_s SET t = 'upd' WHERE i = 3;

-- a row-lock wait that times out names the row (the first row is (0,1) in both
-- access methods) and the relation
CREATE TABLE ectx_lock (i int) USING scoot;
INSERT INTO ectx_lock VALUES (1);
BEGIN;
UPDATE ectx_lock SET i = 2;
PREPARE TRANSACTION 'ectx_lock_holder';
SET lock_timeout = '20ms';
UPDATE ectx_lock SET i = 3;
DELETE FROM ectx_lock;
SELECT * FROM ectx_lock FOR UPDATE;
RESET lock_timeout;
ROLLBACK PREPARED 'ectx_lock_holder';

-- a cancel (statement timeout) that arrives inside scoot's VACUUM code: no Rust
-- backtrace or anything else is added to it (heap's CONTEXT names the block it
-- was scanning, so CONTEXT lines are hidden here; DETAIL lines are not)
CREATE TABLE ectx_big (i int) USING scoot;
INSERT INTO ectx_big SELECT generate_series(1, 300000);
DELETE FROM ectx_big WHERE i % 2 = 0;
\set SHOW_CONTEXT never
SET statement_timeout = '5ms';
VACUUM ectx_big;
RESET statement_timeout;
\set SHOW_CONTEXT errors

DROP TABLE ectx_s, ectx_vac, ectx_lock, ectx_big;
DROP FUNCTION ectx_inv(int), ectx_wrap(int), ectx_pl(int), ectx_do_analyze(), ectx_wrap_analyze(int), ectx_trig();
