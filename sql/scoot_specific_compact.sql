-- Compaction (issue 8): scoot.compact(rel, fill_below) moves the live rows of a table's sparse
-- blocks into other blocks, as updates that change the rows' TIDs (new index entries, unique and
-- exclusion checks, no triggers), in the caller's transaction; VACUUM then frees the emptied
-- blocks. Checked here: fewer blocks for the same rows, every index (btree, expression, partial,
-- unique, deferrable unique, exclusion) answering as a heap copy does, TOASTed and compressed
-- values, frozen blocks, rollback, triggers not fired, nothing to do, errors and privileges.
\set VERBOSITY default
SET client_min_messages = notice;
SET max_parallel_workers_per_gather = 0;

CREATE TABLE cp (id int PRIMARY KEY, g int, t text, n numeric(10,2), c circle,
                 u int UNIQUE DEFERRABLE INITIALLY DEFERRED,
                 EXCLUDE USING gist (c WITH &&)) USING scoot;
CREATE INDEX cp_t ON cp (t) WHERE length(t) < 100;
CREATE INDEX cp_expr ON cp ((g * 2)) WHERE n > 100;
CREATE TABLE cp_h (LIKE cp) USING heap;
INSERT INTO cp
SELECT i, i % 7, CASE WHEN i % 11 = 0 THEN NULL ELSE 't' || i END, i / 3.0,
       circle(point(i * 10, 0), 1), i
FROM generate_series(1, 60000) i;
-- a compressed and a TOASTed value move as they are
UPDATE cp SET t = repeat('long', 5000) WHERE id = 30;
UPDATE cp SET t = (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) i) WHERE id = 40;
INSERT INTO cp_h SELECT * FROM cp;
CREATE VIEW cp_diff AS
  SELECT (SELECT md5(string_agg(f::text, ',' ORDER BY id)) FROM cp f) =
         (SELECT md5(string_agg(h::text, ',' ORDER BY id)) FROM cp_h h) AS same_as_heap;
CREATE FUNCTION cp_blocks() RETURNS bigint LANGUAGE sql AS
  $$ SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'cp'::regclass $$;
-- an UPDATE trigger: a move is not an update of the row's contents, it must not fire
CREATE TABLE cp_fired (n int);
CREATE FUNCTION cp_trig() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO cp_fired VALUES (1); RETURN NEW; END $$;
CREATE TRIGGER cp_upd BEFORE UPDATE ON cp FOR EACH ROW EXECUTE FUNCTION cp_trig();

-- VACUUM cannot remove row versions a live OLAP snapshot image older than their deletion still
-- holds: read a fresh image first, and wait until the worker has released the older ones
SET scoot.snapshot_max_age = 0;

-- a dense table: nothing to move
SELECT scoot.compact('cp');
-- delete 90% of the rows everywhere, vacuum, freeze: sparse frozen blocks
DELETE FROM cp WHERE id % 10 <> 0 AND id NOT IN (30, 40);
DELETE FROM cp_h WHERE id % 10 <> 0 AND id NOT IN (30, 40);
SET scoot.olap = on;
SELECT count(*) >= 0 AS fresh_image FROM cp;
RESET scoot.olap;
DO $$ BEGIN FOR i IN 1..200 LOOP EXIT WHEN NOT EXISTS (SELECT FROM scoot.snapshots WHERE state <> 'newest'); PERFORM pg_sleep(0.05); END LOOP; END $$;
VACUUM cp;
SELECT scoot.freeze('cp') > 0 AS froze;
CREATE TEMP TABLE cp_before AS SELECT cp_blocks() AS blocks, (SELECT count(*) FROM cp) AS rows;
SELECT blocks > 5 AS several_blocks, rows FROM cp_before;

-- rolled back: nothing moved, nothing lost
BEGIN;
SELECT scoot.compact('cp') > 0 AS moved;
SELECT count(*) FROM cp;
ROLLBACK;
SELECT * FROM cp_diff;
SET scoot.olap = on;
SELECT count(*) >= 0 AS fresh_image FROM cp;
RESET scoot.olap;
DO $$ BEGIN FOR i IN 1..200 LOOP EXIT WHEN NOT EXISTS (SELECT FROM scoot.snapshots WHERE state <> 'newest'); PERFORM pg_sleep(0.05); END LOOP; END $$;
VACUUM cp;
SELECT cp_blocks() = (SELECT blocks FROM cp_before) AS same_blocks_after_rollback;

-- compaction, then VACUUM frees the emptied blocks
SELECT scoot.compact('cp') = (SELECT rows FROM cp_before) AS moved_every_row;
SELECT count(*) AS trigger_fired FROM cp_fired;
SELECT * FROM cp_diff;
SET scoot.olap = on;
SELECT count(*) >= 0 AS fresh_image FROM cp;
RESET scoot.olap;
DO $$ BEGIN FOR i IN 1..200 LOOP EXIT WHEN NOT EXISTS (SELECT FROM scoot.snapshots WHERE state <> 'newest'); PERFORM pg_sleep(0.05); END LOOP; END $$;
VACUUM cp;
SELECT cp_blocks() * 3 < (SELECT blocks FROM cp_before) AS fewer_blocks;
-- (dead versions an older snapshot image still holds may remain until the next VACUUM)
SELECT relation::text, live_rows FROM scoot.arena_tables WHERE relation = 'cp'::regclass;
SELECT * FROM cp_diff;

-- every index answers as before (index, bitmap and index-only scans)
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT id, g, n FROM cp WHERE id IN (10, 30, 40, 59990, 60000) ORDER BY id;
SELECT id FROM cp WHERE t = 't12340' AND length(t) < 100;
SELECT count(*), sum(id) FROM cp WHERE g * 2 = 6 AND n > 100;
SELECT id FROM cp WHERE c && circle(point(500000, 0), 2);
SELECT length(t), md5(t) FROM cp WHERE id IN (30, 40) ORDER BY id;
SET enable_indexscan = off;
SET enable_bitmapscan = on;
SELECT count(*), sum(id) FROM cp WHERE id BETWEEN 1000 AND 20000;
SELECT count(*) FROM cp WHERE t > 't5';
RESET enable_seqscan;
RESET enable_bitmapscan;
RESET enable_indexscan;
-- constraints still hold on moved rows
INSERT INTO cp (id, g) VALUES (100, 0);
INSERT INTO cp (id, c) VALUES (-5, circle(point(1000, 0), 3));
BEGIN;
INSERT INTO cp (id, u) VALUES (-6, 200);
COMMIT;
-- moved rows update, lock and delete like any row
UPDATE cp SET g = -1 WHERE id = 50000;
UPDATE cp_h SET g = -1 WHERE id = 50000;
DELETE FROM cp WHERE id = 40000;
DELETE FROM cp_h WHERE id = 40000;
SELECT id, g FROM cp WHERE id IN (40000, 50000) FOR UPDATE;
SELECT count(*) AS trigger_fired FROM cp_fired;
SELECT * FROM cp_diff;
-- the Arrow export of the compacted table has every row
SELECT count(*) > 0 AND sum(length(c)) > 6000 * 4 AS exported FROM scoot.arrow_stream('cp'::regclass, columns => ARRAY['id', 'n']) c;

-- a lone sparse block gains nothing
SELECT scoot.compact('cp') AS nothing_to_gain;
-- blocks 60% full: below the default threshold they stay; fill_below => 0.7 merges them
CREATE TABLE cq (id int, v int) USING scoot;
INSERT INTO cq SELECT i, i FROM generate_series(1, 150000) i;
-- TID offsets 1..291 of every TID page: delete 40% of each block's rows
DELETE FROM cq WHERE (ctid::text::point)[1]::int % 5 < 2;
SET scoot.olap = on;
SELECT count(*) >= 0 AS fresh_image FROM cp;
RESET scoot.olap;
DO $$ BEGIN FOR i IN 1..200 LOOP EXIT WHEN NOT EXISTS (SELECT FROM scoot.snapshots WHERE state <> 'newest'); PERFORM pg_sleep(0.05); END LOOP; END $$;
VACUUM cq;
CREATE TEMP TABLE cq_before AS
  SELECT (SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'cq'::regclass) AS blocks,
         (SELECT count(*) || '/' || sum(id) || '/' || sum(v) FROM cq) AS content;
SELECT blocks >= 4 AS several_blocks FROM cq_before;
SELECT scoot.compact('cq', fill_below => 0.01) AS below_one_percent;
SET client_min_messages = warning;
SELECT scoot.compact('cq', fill_below => 0.7) > 0 AS moved;
RESET client_min_messages;
SET scoot.olap = on;
SELECT count(*) >= 0 AS fresh_image FROM cp;
RESET scoot.olap;
DO $$ BEGIN FOR i IN 1..200 LOOP EXIT WHEN NOT EXISTS (SELECT FROM scoot.snapshots WHERE state <> 'newest'); PERFORM pg_sleep(0.05); END LOOP; END $$;
VACUUM cq;
SELECT (SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'cq'::regclass) < blocks AS fewer_blocks,
       (SELECT count(*) || '/' || sum(id) || '/' || sum(v) FROM cq) = content AS same_rows
FROM cq_before;
DROP TABLE cq;

-- a row whose HOT update found its block full lives in another block, and its chain's root
-- stays behind as a redirect the index entries point at: a block of such roots empties only
-- when the rows they lead to move, wherever those live (before, compaction moved nothing out of
-- such blocks, and the background compactor picked them again every round)
CREATE TABLE cr (id int PRIMARY KEY, v int) USING scoot;
INSERT INTO cr SELECT i, i FROM generate_series(1, 150000) i;
UPDATE cr SET v = v + 1 WHERE id % 10 < 3;
DELETE FROM cr WHERE id % 10 >= 3;
SET scoot.olap = on;
SELECT count(*) >= 0 AS fresh_image FROM cr;
RESET scoot.olap;
DO $$ BEGIN FOR i IN 1..200 LOOP EXIT WHEN NOT EXISTS (SELECT FROM scoot.snapshots WHERE state <> 'newest'); PERFORM pg_sleep(0.05); END LOOP; END $$;
VACUUM cr;
CREATE TEMP TABLE cr_before AS
  SELECT (SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'cr'::regclass) AS blocks,
         (SELECT sum(rows) FROM scoot.blocks WHERE relation = 'cr'::regclass) AS slots,
         (SELECT count(*) || '/' || sum(id) || '/' || sum(v) FROM cr) AS content;
-- the redirects outnumber the rows
SELECT blocks >= 4 AS several_blocks, slots > 60000 AS redirects_kept FROM cr_before;
SET client_min_messages = warning;
SELECT scoot.compact('cr') AS moved_every_row;
RESET client_min_messages;
SET scoot.olap = on;
SELECT count(*) >= 0 AS fresh_image FROM cr;
RESET scoot.olap;
DO $$ BEGIN FOR i IN 1..200 LOOP EXIT WHEN NOT EXISTS (SELECT FROM scoot.snapshots WHERE state <> 'newest'); PERFORM pg_sleep(0.05); END LOOP; END $$;
CALL wait_horizon_free();
VACUUM cr;
SELECT (SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'cr'::regclass) * 2 <= blocks AS half_the_blocks,
       (SELECT sum(rows) FROM scoot.blocks WHERE relation = 'cr'::regclass) AS slots_in_use,
       (SELECT count(*) || '/' || sum(id) || '/' || sum(v) FROM cr) = content AS same_rows
FROM cr_before;
SET enable_seqscan = off;
SELECT * FROM cr WHERE id IN (10, 77771, 149992) ORDER BY id;
RESET enable_seqscan;
DROP TABLE cr;

RESET scoot.snapshot_max_age;

-- errors
SELECT scoot.compact('cp', 0);
SELECT scoot.compact('cp', 1.5);
SELECT scoot.compact('cp_h');
BEGIN READ ONLY;
SELECT scoot.compact('cp');
ROLLBACK;
CREATE ROLE cp_other;
GRANT SELECT, UPDATE ON cp TO cp_other;
GRANT USAGE ON SCHEMA scoot TO cp_other;
SET ROLE cp_other;
SELECT scoot.compact('cp');
RESET ROLE;
DROP OWNED BY cp_other;
DROP ROLE cp_other;

DROP VIEW cp_diff;
DROP TABLE cp, cp_h, cp_fired;
DROP FUNCTION cp_blocks();
DROP FUNCTION cp_trig();

-- in the background: frozen blocks less than scoot.compact_below full are compacted by the
-- pg_scoot compactor, which then VACUUMs the table once no snapshot sees the old versions (the
-- wait loop commits, so that its own snapshot does not hold them); rows and index stay the same
CREATE TABLE cb (id int PRIMARY KEY, v text) USING scoot;
INSERT INTO cb SELECT i, 'v' || i FROM generate_series(1, 150000) i;
DELETE FROM cb WHERE id % 10 <> 0;
SET scoot.olap = on;
SELECT count(*) >= 0 AS fresh_image FROM cb;
RESET scoot.olap;
DO $$ BEGIN FOR i IN 1..200 LOOP EXIT WHEN NOT EXISTS (SELECT FROM scoot.snapshots WHERE state <> 'newest'); PERFORM pg_sleep(0.05); END LOOP; END $$;
VACUUM cb;
CREATE TEMP TABLE cb_before AS
  SELECT (SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'cb'::regclass) AS blocks,
         (SELECT count(*) || '/' || sum(id) || '/' || max(v) FROM cb) AS content;
SELECT blocks >= 5 AS several_blocks FROM cb_before;
ALTER SYSTEM SET scoot.freeze_after = '200ms';
SELECT pg_reload_conf();
DO $$
BEGIN
  FOR i IN 1..600 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN (SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'cb'::regclass) * 3
              < (SELECT blocks FROM cb_before)
          AND (SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'cb'::regclass AND temperature <> 'frozen') = 0;
    COMMIT;
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
ALTER SYSTEM RESET scoot.freeze_after;
SELECT pg_reload_conf();
SELECT (SELECT sum(blocks) FROM scoot.blocks WHERE relation = 'cb'::regclass) * 3 < blocks AS compacted_in_background,
       (SELECT count(*) || '/' || sum(id) || '/' || max(v) FROM cb) = content AS same_rows
FROM cb_before;
SET enable_seqscan = off;
SELECT * FROM cb WHERE id IN (10, 77770, 150000) ORDER BY id;
RESET enable_seqscan;
DROP TABLE cb;
