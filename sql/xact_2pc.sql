-- xact_2pc: two-phase commit on scoot tables.
-- Needs max_prepared_transactions > 0 on the test cluster.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE xact2pc_s (id int PRIMARY KEY, v text) USING scoot;
INSERT INTO xact2pc_s SELECT g, 'v' || g FROM generate_series(1, 10) g;

-- PREPARE TRANSACTION then COMMIT PREPARED
BEGIN;
INSERT INTO xact2pc_s VALUES (11, 'prepared insert');
UPDATE xact2pc_s SET v = 'prepared update' WHERE id = 1;
DELETE FROM xact2pc_s WHERE id = 2;
PREPARE TRANSACTION 'scoot_2pc_commit';
-- not yet visible
SELECT id, v FROM xact2pc_s WHERE id IN (1, 2, 11) ORDER BY id;
SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'scoot_2pc%' ORDER BY gid;
-- the prepared transaction holds its row locks (terse: the CONTEXT line of a
-- lock timeout names the tuple id, which is AM specific)
\set VERBOSITY terse
SET lock_timeout = '100ms';
UPDATE xact2pc_s SET v = 'blocked' WHERE id = 1;
DELETE FROM xact2pc_s WHERE id = 2;
INSERT INTO xact2pc_s VALUES (11, 'dup of prepared');
RESET lock_timeout;
\set VERBOSITY default
-- other rows are free
UPDATE xact2pc_s SET v = 'free' WHERE id = 3;
COMMIT PREPARED 'scoot_2pc_commit';
SELECT id, v FROM xact2pc_s WHERE id IN (1, 2, 3, 11) ORDER BY id;

-- PREPARE TRANSACTION then ROLLBACK PREPARED
BEGIN;
INSERT INTO xact2pc_s VALUES (12, 'rolled back');
UPDATE xact2pc_s SET v = 'rolled back' WHERE id = 4;
DELETE FROM xact2pc_s WHERE id = 5;
PREPARE TRANSACTION 'scoot_2pc_rollback';
ROLLBACK PREPARED 'scoot_2pc_rollback';
SELECT id, v FROM xact2pc_s WHERE id IN (4, 5, 12) ORDER BY id;

-- prepared transaction with savepoints, and with an aborted subtransaction
BEGIN;
INSERT INTO xact2pc_s VALUES (13, 'top');
SAVEPOINT a;
INSERT INTO xact2pc_s VALUES (14, 'sub aborted');
ROLLBACK TO SAVEPOINT a;
SAVEPOINT b;
INSERT INTO xact2pc_s VALUES (15, 'sub kept');
RELEASE SAVEPOINT b;
UPDATE xact2pc_s SET v = v || '+' WHERE id = 13;
PREPARE TRANSACTION 'scoot_2pc_sub';
COMMIT PREPARED 'scoot_2pc_sub';
SELECT id, v FROM xact2pc_s WHERE id >= 13 ORDER BY id;

SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'scoot_2pc%';

-- compare with heap going through the same statements
CREATE TABLE xact2pc_h (id int PRIMARY KEY, v text) USING heap;
INSERT INTO xact2pc_h SELECT g, 'v' || g FROM generate_series(1, 10) g;
UPDATE xact2pc_h SET v = 'prepared update' WHERE id = 1;
DELETE FROM xact2pc_h WHERE id = 2;
UPDATE xact2pc_h SET v = 'free' WHERE id = 3;
INSERT INTO xact2pc_h VALUES (11, 'prepared insert'), (13, 'top+'), (15, 'sub kept');
SELECT (SELECT array_agg(x::text ORDER BY id) FROM xact2pc_s x)
     = (SELECT array_agg(x::text ORDER BY id) FROM xact2pc_h x) AS same_as_heap;

DROP TABLE xact2pc_s, xact2pc_h;

-- DDL inside prepared transactions: the scoot storage follows COMMIT PREPARED /
-- ROLLBACK PREPARED (in this or another session)
BEGIN;
CREATE TABLE xact2pc_new (id int PRIMARY KEY, v text) USING scoot;
INSERT INTO xact2pc_new SELECT g, 'n' || g FROM generate_series(1, 100) g;
PREPARE TRANSACTION 'scoot_2pc_create_commit';
COMMIT PREPARED 'scoot_2pc_create_commit';
SELECT count(*), min(v COLLATE "C"), max(v COLLATE "C") FROM xact2pc_new;

BEGIN;
CREATE TABLE xact2pc_gone (id int) USING scoot;
INSERT INTO xact2pc_gone VALUES (1);
PREPARE TRANSACTION 'scoot_2pc_create_rollback';
ROLLBACK PREPARED 'scoot_2pc_create_rollback';
SELECT count(*) FROM pg_class WHERE relname = 'xact2pc_gone';

BEGIN;
TRUNCATE xact2pc_new;
INSERT INTO xact2pc_new VALUES (1000, 'after truncate');
PREPARE TRANSACTION 'scoot_2pc_truncate_rollback';
ROLLBACK PREPARED 'scoot_2pc_truncate_rollback';
SELECT count(*) FROM xact2pc_new;

BEGIN;
TRUNCATE xact2pc_new;
INSERT INTO xact2pc_new VALUES (1000, 'after truncate');
PREPARE TRANSACTION 'scoot_2pc_truncate_commit';
COMMIT PREPARED 'scoot_2pc_truncate_commit';
SELECT id, v FROM xact2pc_new;

BEGIN;
DROP TABLE xact2pc_new;
PREPARE TRANSACTION 'scoot_2pc_drop_rollback';
ROLLBACK PREPARED 'scoot_2pc_drop_rollback';
SELECT id, v FROM xact2pc_new;

BEGIN;
DROP TABLE xact2pc_new;
PREPARE TRANSACTION 'scoot_2pc_drop_commit';
COMMIT PREPARED 'scoot_2pc_drop_commit';
SELECT count(*) FROM pg_class WHERE relname = 'xact2pc_new';

-- a temporary scoot table: PostgreSQL's own refusal
CREATE TEMP TABLE xact2pc_temp (i int) USING scoot;
BEGIN;
INSERT INTO xact2pc_temp VALUES (1);
PREPARE TRANSACTION 'scoot_2pc_temp';
SELECT count(*) FROM xact2pc_temp;
