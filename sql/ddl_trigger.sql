-- ddl_trigger: row and statement triggers (BEFORE/AFTER, transition tables,
-- deferred constraint triggers), rules and row level security on scoot tables.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE trg_s (id int PRIMARY KEY, v text, n int DEFAULT 0, modified_by text) USING scoot;
CREATE TABLE trg_log (seq serial, tg text, op text, old_row text, new_row text) USING heap;

CREATE FUNCTION trg_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF OLD.v = 'protected' THEN RETURN NULL; END IF;
    RETURN OLD;
  END IF;
  IF NEW.v = 'skip' THEN RETURN NULL; END IF;
  NEW.modified_by := lower(TG_OP);
  NEW.n := coalesce(NEW.n, 0) + 1;
  RETURN NEW;
END $$;
CREATE FUNCTION trg_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO trg_log (tg, op, old_row, new_row)
  VALUES (TG_NAME, TG_OP,
          CASE WHEN TG_OP <> 'INSERT' THEN OLD::text END,
          CASE WHEN TG_OP <> 'DELETE' THEN NEW::text END);
  RETURN NULL;
END $$;
CREATE FUNCTION trg_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  n_old bigint := 0;
  n_new bigint := 0;
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN SELECT count(*) INTO n_old FROM old_rows; END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN SELECT count(*) INTO n_new FROM new_rows; END IF;
  INSERT INTO trg_log (tg, op, old_row, new_row) VALUES (TG_NAME, TG_OP, n_old::text, n_new::text);
  RETURN NULL;
END $$;

CREATE TRIGGER trg_s_before BEFORE INSERT OR UPDATE OR DELETE ON trg_s
  FOR EACH ROW EXECUTE FUNCTION trg_before();
CREATE TRIGGER trg_s_after AFTER INSERT OR UPDATE OR DELETE ON trg_s
  FOR EACH ROW EXECUTE FUNCTION trg_after();
CREATE TRIGGER trg_s_after_when AFTER UPDATE ON trg_s
  FOR EACH ROW WHEN (OLD.v IS DISTINCT FROM NEW.v) EXECUTE FUNCTION trg_after();
CREATE TRIGGER trg_s_stmt_ins AFTER INSERT ON trg_s
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION trg_stmt();
CREATE TRIGGER trg_s_stmt_upd AFTER UPDATE ON trg_s
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION trg_stmt();
CREATE TRIGGER trg_s_stmt_del AFTER DELETE ON trg_s
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION trg_stmt();

INSERT INTO trg_s (id, v) VALUES (1, 'one'), (2, 'skip'), (3, 'three'), (4, 'protected');
UPDATE trg_s SET v = v || '!' WHERE id = 1;
UPDATE trg_s SET n = n + 10 WHERE id = 3;
UPDATE trg_s SET v = 'skip' WHERE id = 3;
DELETE FROM trg_s WHERE id IN (1, 4);
INSERT INTO trg_s (id, v) SELECT g, 'bulk' FROM generate_series(10, 14) g;
UPDATE trg_s SET v = 'bulk2' WHERE v = 'bulk';
SELECT * FROM trg_s ORDER BY id;
-- row triggers fire in an order that depends on the scan: number the
-- statements (each ends with its statement trigger) and sort within them
SELECT tg, op, old_row, new_row
FROM (SELECT l.*, (SELECT count(*) FROM trg_log s
                   WHERE s.tg LIKE 'trg\_s\_stmt%' AND s.seq < l.seq) AS stmt
      FROM trg_log l) x
ORDER BY stmt, tg LIKE 'trg\_s\_stmt%', coalesce(new_row, old_row) COLLATE "C", tg COLLATE "C";
TRUNCATE trg_log;

-- AFTER triggers see the final row version even when the row was updated
-- several times in the transaction (trigger tuples are fetched by tid)
BEGIN;
UPDATE trg_s SET v = 'a' WHERE id = 3;
UPDATE trg_s SET v = 'b' WHERE id = 3;
UPDATE trg_s SET v = 'c' WHERE id = 3;
COMMIT;
SELECT tg, op, old_row, new_row FROM trg_log WHERE tg = 'trg_s_after' ORDER BY seq;
TRUNCATE trg_log;

-- an AFTER trigger that updates the same table (limited by a WHEN clause)
CREATE FUNCTION trg_cascade() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE trg_s SET n = n + 100 WHERE id = NEW.id + 1;
  RETURN NULL;
END $$;
CREATE TRIGGER trg_s_cascade AFTER UPDATE ON trg_s
  FOR EACH ROW WHEN (NEW.v = 'chain') EXECUTE FUNCTION trg_cascade();
UPDATE trg_s SET v = 'chain' WHERE id = 10;
SELECT id, v, n FROM trg_s WHERE id IN (10, 11) ORDER BY id;
DROP TRIGGER trg_s_cascade ON trg_s;

-- deferred constraint trigger
CREATE FUNCTION trg_check_sum() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT sum(n) FROM trg_s) > 1000 THEN
    RAISE EXCEPTION 'sum of n too large: %', (SELECT sum(n) FROM trg_s);
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER trg_s_sum AFTER INSERT OR UPDATE ON trg_s
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trg_check_sum();
BEGIN;
UPDATE trg_s SET n = 2000 WHERE id = 12;
UPDATE trg_s SET n = 0 WHERE id = 12;
COMMIT;
BEGIN;
UPDATE trg_s SET n = 2000 WHERE id = 12;
COMMIT;
SELECT id, n FROM trg_s WHERE id = 12;
DROP TRIGGER trg_s_sum ON trg_s;
TRUNCATE trg_log;

-- triggers on a heap table writing into a scoot table (audit into scoot)
CREATE TABLE trg_audit_s (seq serial, op text, data text) USING scoot;
CREATE TABLE trg_src_h (id int, v text) USING heap;
CREATE FUNCTION trg_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO trg_audit_s (op, data) VALUES (TG_OP, coalesce(NEW::text, OLD::text));
  RETURN NULL;
END $$;
CREATE TRIGGER trg_src_h_audit AFTER INSERT OR UPDATE OR DELETE ON trg_src_h
  FOR EACH ROW EXECUTE FUNCTION trg_audit();
INSERT INTO trg_src_h VALUES (1, 'x');
UPDATE trg_src_h SET v = 'y';
DELETE FROM trg_src_h;
SELECT seq, op, data FROM trg_audit_s ORDER BY seq;

-- rules
CREATE TABLE trg_rule_s (id int, v text) USING scoot;
CREATE VIEW trg_rule_v AS SELECT id, v FROM trg_rule_s;
CREATE RULE trg_rule_ins AS ON INSERT TO trg_rule_v DO INSTEAD
  INSERT INTO trg_rule_s VALUES (NEW.id * 10, upper(NEW.v));
INSERT INTO trg_rule_v VALUES (1, 'ruled');
SELECT * FROM trg_rule_s ORDER BY id;
-- auto-updatable view with check option over a scoot table
CREATE VIEW trg_upd_v AS SELECT id, v FROM trg_rule_s WHERE id < 100 WITH CHECK OPTION;
INSERT INTO trg_upd_v VALUES (5, 'via view');
INSERT INTO trg_upd_v VALUES (500, 'rejected');
UPDATE trg_upd_v SET v = 'updated via view' WHERE id = 5;
UPDATE trg_upd_v SET id = 1000 WHERE id = 5;
SELECT * FROM trg_rule_s ORDER BY id;

-- row level security
CREATE TABLE rls_s (id int, owner text, secret text) USING scoot;
INSERT INTO rls_s VALUES (1, 'scoot_rls_alice', 'a1'), (2, 'scoot_rls_bob', 'b1'), (3, 'scoot_rls_alice', 'a2');
SET client_min_messages = warning;
DROP ROLE IF EXISTS scoot_rls_alice;
RESET client_min_messages;
CREATE ROLE scoot_rls_alice;
GRANT SELECT, INSERT, UPDATE, DELETE ON rls_s TO scoot_rls_alice;
ALTER TABLE rls_s ENABLE ROW LEVEL SECURITY;
CREATE POLICY rls_own ON rls_s USING (owner = current_user) WITH CHECK (owner = current_user);
SET ROLE scoot_rls_alice;
SELECT * FROM rls_s ORDER BY id;
UPDATE rls_s SET secret = secret || '*';
DELETE FROM rls_s WHERE id = 2;
INSERT INTO rls_s VALUES (4, 'scoot_rls_bob', 'forged');
INSERT INTO rls_s VALUES (4, 'scoot_rls_alice', 'a3');
SELECT * FROM rls_s ORDER BY id;
RESET ROLE;
SELECT * FROM rls_s ORDER BY id;

DROP TABLE rls_s;
DROP ROLE scoot_rls_alice;
DROP VIEW trg_upd_v, trg_rule_v;
DROP TABLE trg_s, trg_log, trg_audit_s, trg_src_h, trg_rule_s;
DROP FUNCTION trg_before(), trg_after(), trg_stmt(), trg_cascade(), trg_check_sum(), trg_audit();
