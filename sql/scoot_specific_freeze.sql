-- Frozen blocks (issue 8): scoot.freeze(rel) and the background freezer (scoot.freeze_after)
-- turn blocks whose row versions are all visible to every transaction into frozen blocks (rows
-- frozen, variable-length values gathered per column). Checked here: scoot.blocks, the same
-- results as heap for every SQL operation on frozen blocks (scans, filters, index fetches,
-- UPDATE/DELETE, row locks, VACUUM, ADD COLUMN, OLAP snapshot reads), a write thawing its block,
-- blocks that cannot freeze yet (uncommitted rows, running locks), blocks whose dead versions
-- the freezer prunes first, privileges and wrong objects, and the background freezer.
\set VERBOSITY default
SET client_min_messages = notice;
SET max_parallel_workers_per_gather = 0;
-- an OLAP snapshot an earlier test read holds back the horizon blocks freeze to until the worker
-- drops it (10 s after its last reader): wait for that
DO $$ BEGIN FOR i IN 1..400 LOOP EXIT WHEN NOT EXISTS (SELECT FROM scoot.snapshots); PERFORM pg_sleep(0.05); END LOOP; END $$;
-- freezing also needs every row version visible to all: CALL wait_horizon_free() (setup.sql)
-- before each freeze that must succeed (autovacuum on an earlier test's table held the horizon
-- back once)

CREATE TABLE fz (id int PRIMARY KEY, g int, t text, v varchar(40), n numeric(10,2), b bytea) USING scoot
  WITH (autovacuum_enabled = off);
CREATE TABLE fz_h (LIKE fz INCLUDING ALL) USING heap WITH (autovacuum_enabled = off);
INSERT INTO fz
SELECT i, i % 7, CASE WHEN i % 11 = 0 THEN NULL ELSE repeat('x', i % 37) || i END, 'v' || i,
       i / 3.0, CASE WHEN i % 5 = 0 THEN NULL ELSE int4send(i) END
FROM generate_series(1, 30000) i;
-- a compressed and a TOASTed value stay as they are (gathered, not expanded)
INSERT INTO fz VALUES (0, 0, repeat('long', 5000), 'big', 0, NULL),
                      (-1, 0, (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) i), 'ext', 0, NULL);
INSERT INTO fz_h SELECT * FROM fz;
CREATE VIEW fz_diff AS
  SELECT (SELECT md5(string_agg(f::text, ',' ORDER BY id)) FROM fz f) =
         (SELECT md5(string_agg(h::text, ',' ORDER BY id)) FROM fz_h h) AS same_as_heap;

SELECT temperature, blocks > 1 AS several, rows FROM scoot.blocks WHERE relation = 'fz'::regclass ORDER BY 1;
CALL wait_horizon_free();
SELECT scoot.freeze('fz') > 1 AS froze_several;
SELECT temperature, blocks > 1 AS several, rows FROM scoot.blocks WHERE relation = 'fz'::regclass ORDER BY 1;
SELECT scoot.freeze('fz') AS nothing_left;
SELECT * FROM fz_diff;
SELECT count(*), sum(g), sum(length(t)), count(t), count(b), sum(n) FROM fz;
SELECT count(*), sum(g), sum(length(t)), count(t), count(b), sum(n) FROM fz_h;
SELECT id, g, v FROM fz WHERE t LIKE 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx%' ORDER BY id LIMIT 3;
SELECT length(t), v FROM fz WHERE id IN (0, -1) ORDER BY id;
-- index fetches on frozen blocks
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT id, g, t, v, n, b FROM fz WHERE id IN (1, 5, 11, 29999) ORDER BY id;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- a write thaws its block; the others stay frozen
SELECT blocks_thawed AS thawed_before FROM scoot.freeze_stats \gset
UPDATE fz SET g = -1, t = 'changed' WHERE id = 100;
UPDATE fz_h SET g = -1, t = 'changed' WHERE id = 100;
SELECT temperature, blocks FROM scoot.blocks WHERE relation = 'fz'::regclass AND temperature <> 'frozen' AND blocks > 0;
SELECT blocks_thawed > :thawed_before AS thaw_counted FROM scoot.freeze_stats;
-- the old version's block holds a superseded version: scoot.freeze prunes it (as VACUUM's first
-- pass does) and freezes the block; the new version's block freezes at once
CALL wait_horizon_free();
SELECT scoot.freeze('fz');
SELECT * FROM fz_diff;
SET enable_seqscan = off;
SELECT id, g, t FROM fz WHERE id BETWEEN 99 AND 101 ORDER BY id;
RESET enable_seqscan;
VACUUM fz;
CALL wait_horizon_free();
SELECT scoot.freeze('fz');
SELECT temperature, blocks > 1 AS several FROM scoot.blocks WHERE relation = 'fz'::regclass AND blocks > 0;
-- VACUUM leaves frozen blocks frozen
VACUUM fz;
SELECT temperature FROM scoot.blocks WHERE relation = 'fz'::regclass AND blocks > 0;

-- DELETE and a rolled-back UPDATE on frozen blocks
DELETE FROM fz WHERE id BETWEEN 200 AND 260;
DELETE FROM fz_h WHERE id BETWEEN 200 AND 260;
BEGIN;
UPDATE fz SET v = 'rolled back' WHERE id BETWEEN 20000 AND 20010;
ROLLBACK;
SELECT * FROM fz_diff;
SELECT count(*) FROM fz WHERE v = 'rolled back';

-- uncommitted rows and running row locks keep a block from freezing
VACUUM fz;
CALL wait_horizon_free();
SELECT scoot.freeze('fz') >= 1 AS refrozen;
BEGIN;
SELECT id FROM fz WHERE id = 7 FOR SHARE;
SELECT temperature, blocks FROM scoot.blocks WHERE relation = 'fz'::regclass AND temperature = 'hot';
SELECT scoot.freeze('fz');
COMMIT;
-- the lock's transaction ended: the block freezes (its finished lock is cleared)
CALL wait_horizon_free();
SELECT scoot.freeze('fz');
BEGIN;
INSERT INTO fz VALUES (40000, 1, 'new', 'new', 1, NULL);
SELECT scoot.freeze('fz');
ROLLBACK;
-- the aborted row is dead: pruned, then the block freezes
CALL wait_horizon_free();
SELECT scoot.freeze('fz');
SELECT * FROM fz_diff;
VACUUM fz;
CALL wait_horizon_free();
SELECT scoot.freeze('fz');
SELECT temperature FROM scoot.blocks WHERE relation = 'fz'::regclass AND blocks > 0;

-- row locks, UPDATE with key change and upsert on frozen rows behave as on heap
SELECT id, g FROM fz WHERE id IN (1, 2) ORDER BY id FOR UPDATE;
INSERT INTO fz VALUES (3, 0, 'upsert', 'u', 0, NULL) ON CONFLICT (id) DO UPDATE SET t = excluded.t;
INSERT INTO fz_h VALUES (3, 0, 'upsert', 'u', 0, NULL) ON CONFLICT (id) DO UPDATE SET t = excluded.t;
UPDATE fz SET id = 50000 WHERE id = 4;
UPDATE fz_h SET id = 50000 WHERE id = 4;
INSERT INTO fz VALUES (1, 0, 'dup', 'd', 0, NULL);
SELECT * FROM fz_diff;

-- a column added after freezing: old frozen blocks give its default
VACUUM fz;
CALL wait_horizon_free();
SELECT scoot.freeze('fz') >= 1 AS refrozen;
ALTER TABLE fz ADD COLUMN extra int DEFAULT 42;
ALTER TABLE fz_h ADD COLUMN extra int DEFAULT 42;
SELECT count(*), sum(extra) FROM fz;
SELECT * FROM fz_diff;

-- an OLAP snapshot reads frozen blocks like the live table
SET scoot.olap = on;
SELECT count(*), sum(id), sum(length(t)) FROM fz;
RESET scoot.olap;
SELECT count(*), sum(id), sum(length(t)) FROM fz_h;

-- wrong objects and privileges
SELECT scoot.freeze('fz_h');
SELECT scoot.freeze('fz_pkey');
CREATE ROLE scoot_fz_user;
GRANT SELECT ON fz TO scoot_fz_user;
GRANT USAGE ON SCHEMA scoot TO scoot_fz_user;
SET ROLE scoot_fz_user;
SELECT scoot.freeze('fz');
RESET ROLE;
DROP OWNED BY scoot_fz_user;
DROP ROLE scoot_fz_user;
-- an empty table
CREATE TABLE fz_empty (a int) USING scoot;
SELECT scoot.freeze('fz_empty');

-- the row versions pruned before a block freezes count as reclaimed in the statistics, as
-- opportunistic pruning reports them (scoot_specific_hot): 200 superseded versions of one row
-- (pruning off while they are made), then scoot.freeze prunes and reports them in its backend
CREATE TABLE fz_dt (id int PRIMARY KEY, v int) USING scoot WITH (autovacuum_enabled = off);
CREATE TABLE fz_dt_bg (id int PRIMARY KEY, v int) USING scoot WITH (autovacuum_enabled = off);
INSERT INTO fz_dt SELECT g, 0 FROM generate_series(1, 10) g;
INSERT INTO fz_dt_bg SELECT g, 0 FROM generate_series(1, 10) g;
SET scoot.opportunistic_prune = off;
SET enable_seqscan = off; SET enable_bitmapscan = off;
\set ECHO none
\o /dev/null
SELECT 'UPDATE fz_dt SET v = v + 1 WHERE id = 3' FROM generate_series(1, 200) \gexec
SELECT 'UPDATE fz_dt_bg SET v = v + 1 WHERE id = 3' FROM generate_series(1, 200) \gexec
\o
\set ECHO all
RESET enable_seqscan; RESET enable_bitmapscan;
SELECT pg_stat_force_next_flush();
SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE relname IN ('fz_dt', 'fz_dt_bg') ORDER BY 1;
SELECT scoot.freeze('fz_dt');
SELECT pg_stat_force_next_flush();
SELECT n_dead_tup < 10 AS reclaimed FROM pg_stat_user_tables WHERE relname = 'fz_dt';

-- the background freezer: blocks unchanged for scoot.freeze_after freeze on their own
ALTER SYSTEM SET scoot.freeze_after = '200ms';
SELECT pg_reload_conf();
CREATE TABLE fz_bg (a int, s text) USING scoot;
INSERT INTO fz_bg SELECT i, 's' || i FROM generate_series(1, 20000) i;
DO $$
BEGIN
  FOR i IN 1..300 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN (SELECT blocks FROM scoot.blocks WHERE relation = 'fz_bg'::regclass AND temperature = 'frozen') > 0
          AND (SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'fz_bg'::regclass AND temperature <> 'frozen') = 0
          AND (SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'fz_dt_bg'::regclass AND temperature <> 'frozen') = 0;
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT temperature, rows FROM scoot.blocks WHERE relation = 'fz_bg'::regclass ORDER BY 1;
SELECT count(*), sum(a), sum(length(s)) FROM fz_bg;
-- the background freezer pruned fz_dt_bg's chain before freezing its block; having no relation
-- to report them with, it leaves them to the next backend that reads the table (this one)
SELECT temperature, blocks FROM scoot.blocks WHERE relation = 'fz_dt_bg'::regclass AND blocks > 0;
SELECT count(*), sum(v) FROM fz_dt_bg;
SELECT pg_stat_force_next_flush();
SELECT n_dead_tup < 10 AS reclaimed FROM pg_stat_user_tables WHERE relname = 'fz_dt_bg';
RESET scoot.opportunistic_prune;
ALTER SYSTEM RESET scoot.freeze_after;
SELECT pg_reload_conf();
SELECT avg_freeze_us > 0 AS freezing_timed FROM scoot.freeze_stats;

DROP TABLE fz, fz_h, fz_empty, fz_bg, fz_dt, fz_dt_bg CASCADE;
