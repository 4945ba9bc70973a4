-- rowsys: row-version details visible through SQL: RETURNING xmin/xmax/cmin
-- after INSERT/UPDATE/ON CONFLICT, the first row's ctid, TID scans on it, and a
-- deferred exclusion constraint re-checked at COMMIT after a HOT-style update
-- (the index fetch must report the TID of the version it found).
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE rsys_s (a int PRIMARY KEY, b text) USING scoot;
BEGIN;
INSERT INTO rsys_s VALUES (1, 'x')
  RETURNING xmin = pg_current_xact_id()::xid AS xmin_ok, xmax, cmin;
UPDATE rsys_s SET b = 'y'
  RETURNING xmin = pg_current_xact_id()::xid AS xmin_ok, xmax, cmin;
INSERT INTO rsys_s VALUES (1, 'z') ON CONFLICT (a) DO UPDATE SET b = 'z'
  RETURNING xmin = pg_current_xact_id()::xid AS xmin_ok, xmax = pg_current_xact_id()::xid AS xmax_ok;
SELECT xmax = pg_current_xact_id()::xid AS xmax_is_mine, b FROM rsys_s;
COMMIT;
SELECT xmin = xmax AS locked_by_updater, b FROM rsys_s;

-- a table's first row is at (0,1), like heap's
CREATE TABLE rsys_t (i int) USING scoot;
INSERT INTO rsys_t SELECT generate_series(1, 5);
SELECT ctid, i FROM rsys_t ORDER BY i;
SELECT i FROM rsys_t WHERE ctid = '(0,1)';
SELECT i FROM rsys_t WHERE ctid = ANY (ARRAY['(0,2)', '(0,4)']::tid[]) ORDER BY i;
SELECT count(*) FROM rsys_t WHERE ctid > '(0,2)' AND ctid <= '(0,4)';
SELECT count(*) FROM rsys_t WHERE ctid < '(0,0)';

-- deferred exclusion constraint: delete the conflicting row before COMMIT
CREATE TABLE rsys_excl (i int, CONSTRAINT rsys_excl_i EXCLUDE (i WITH =) DEFERRABLE INITIALLY DEFERRED) USING scoot;
INSERT INTO rsys_excl VALUES (1), (2);
BEGIN;
INSERT INTO rsys_excl VALUES (1);
DELETE FROM rsys_excl WHERE ctid = (SELECT min(ctid) FROM rsys_excl WHERE i = 1);
UPDATE rsys_excl SET i = i WHERE i = 2;
COMMIT;
BEGIN;
UPDATE rsys_excl SET i = 2 WHERE i = 1;
COMMIT;
SELECT i FROM rsys_excl ORDER BY i;
-- a non-deferred unique check after a HOT-style update of the same row
CREATE TABLE rsys_u (k int, v int) USING scoot;
CREATE UNIQUE INDEX rsys_u_k ON rsys_u (k);
INSERT INTO rsys_u VALUES (1, 1);
UPDATE rsys_u SET v = 2;
UPDATE rsys_u SET v = 3;
INSERT INTO rsys_u VALUES (1, 4);
SELECT k, v FROM rsys_u;

DROP TABLE rsys_s, rsys_t, rsys_excl, rsys_u;
