-- scoot_specific_wal: what the scoot WAL records for row changes (pg_walinspect names them:
-- resource manager pg_scoot, record types BLOCK, CONFLICT, FREE, ...), and the developer self
-- check scoot.wal_check, which reports any block byte a change wrote without logging it.
--
-- An UPDATE marks the old version, places the new one and links them: three exclusive lock
-- sessions on the old version's block, but one BLOCK record for it (the first two are kept
-- and logged with the link, src/storage/changes.rs `defer`); an INSERT's free-slot reuse logs
-- the one word of the free map it changes, not the map.
SET client_min_messages = notice;
CREATE EXTENSION IF NOT EXISTS pg_walinspect;
SET scoot.wal_check = on;

CREATE TABLE wt (id int PRIMARY KEY, v int, pad text) USING scoot;
INSERT INTO wt SELECT i, i, 'p' || i FROM generate_series(1, 100) i;
-- the pg_scoot records a statement wrote: its start LSN, the statement (committed, so its WAL
-- is flushed and readable), then pg_get_wal_records_info from there
\set walrecs 'SELECT record_type, count(*) AS n, max(record_length) < 400 AS small FROM pg_get_wal_records_info(:''a'', pg_current_wal_flush_lsn()) WHERE resource_manager = ''pg_scoot'' GROUP BY 1 ORDER BY 1'
-- pruning needs the superseded versions to be dead to every transaction: CALL
-- wait_horizon_free() (setup.sql) before it
-- exactly one record: the block's, carrying the conflict xid (BLOCK+CONFLICT; a separate CONFLICT
-- record before the BLOCK record until b378e7c)
\set onerec 'SELECT count(*) FILTER (WHERE record_type = ''BLOCK+CONFLICT'') = 1 AS one_record, count(*) FILTER (WHERE record_type = ''CONFLICT'') = 0 AS no_conflict_record, count(*) FILTER (WHERE record_type <> ''BLOCK+CONFLICT'') = 0 AS nothing_else FROM pg_get_wal_records_info(:''a'', pg_current_wal_flush_lsn()) WHERE resource_manager = ''pg_scoot'''

-- a HOT update within one block: one BLOCK record
SELECT pg_current_wal_insert_lsn() AS a \gset
UPDATE wt SET v = v + 1 WHERE id = 7;
:walrecs;
-- an update of an indexed column, of a long value, a delete, an insert
SELECT pg_current_wal_insert_lsn() AS a \gset
UPDATE wt SET id = 1007 WHERE id = 8;
:walrecs;
SELECT pg_current_wal_insert_lsn() AS a \gset
UPDATE wt SET pad = repeat('x', 3000) WHERE id = 9;
:walrecs;
SELECT pg_current_wal_insert_lsn() AS a \gset
DELETE FROM wt WHERE id = 10;
:walrecs;
SELECT pg_current_wal_insert_lsn() AS a \gset
INSERT INTO wt VALUES (2000, 1, 'new');
:walrecs;
-- ten rows of one block: ten records (one per row's update)
SELECT pg_current_wal_insert_lsn() AS a \gset
UPDATE wt SET v = v + 1 WHERE id BETWEEN 20 AND 29;
:walrecs;
-- an update of a row this transaction locked first (the lock, then the update)
SELECT pg_current_wal_insert_lsn() AS a \gset
BEGIN;
SELECT id FROM wt WHERE id = 30 FOR SHARE;
UPDATE wt SET v = 0 WHERE id = 30;
COMMIT;
:walrecs;
-- an update that fails on the unique index after marking the old version (its record is
-- written when the statement unwinds), then a rolled-back one: nothing is lost
UPDATE wt SET id = 12 WHERE id = 11;
BEGIN;
UPDATE wt SET v = -1 WHERE id BETWEEN 40 AND 45;
ROLLBACK;
SELECT count(*), sum(v), sum(length(pad)) FROM wt;
SELECT id, v, length(pad) FROM wt WHERE id IN (7, 9, 11, 12, 30, 40, 1007, 2000) ORDER BY id;

-- opportunistic pruning (a scan entering a block with at least 64 superseded versions) removes
-- the dead versions of every chain of the block under one exclusive lock: one BLOCK+CONFLICT
-- record for the block (each chain's redirect and each freed version wrote its own records
-- before: ten chains and seventy freed versions here). Seven updates of every row: the
-- seventh one's scan saw 60 superseded versions (no pruning yet), the SELECT sees 70.
-- The background freezer prunes a block before it freezes it: it is kept out of the way here (a
-- block it pruned while wait_horizon_free() waited left the scan nothing to prune, and no record).
ALTER SYSTEM SET scoot.freeze_after = -1;
SELECT pg_reload_conf();
CREATE TABLE wp (id int PRIMARY KEY, v int) USING scoot WITH (autovacuum_enabled = off);
INSERT INTO wp SELECT i, 0 FROM generate_series(1, 10) i;
SELECT 'UPDATE wp SET v = v + 1' FROM generate_series(1, 7) \gexec
SET scoot.custom_scan = off;
SELECT live_rows, dead_rows FROM scoot.arena_tables WHERE relation = 'wp'::regclass;
CALL wait_horizon_free();
SELECT pg_current_wal_insert_lsn() AS a \gset
-- (in a transaction with an xid, whose commit flushes the WAL for pg_walinspect to read it)
BEGIN;
SELECT txid_current() > 0 AS has_xid;
SELECT count(*), sum(v) FROM wp;
COMMIT;
:onerec;
-- the superseded versions are gone (all of them unless a backend held the horizon back)
SELECT live_rows, dead_rows < 70 AS pruned FROM scoot.arena_tables WHERE relation = 'wp'::regclass;
SELECT id, v FROM wp WHERE id IN (1, 10) ORDER BY id;
-- an index fetch that walks a chain of 8 or more versions prunes that chain, also under one
-- exclusive lock (before: one BLOCK record for the redirect and one per freed version). Seven
-- updates of row 1 through the index: the seventh one's fetch walked 7 versions, the SELECT's 8.
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT 'UPDATE wp SET v = v + 1 WHERE id = 1' FROM generate_series(1, 7) \gexec
SELECT dead_rows AS dead_before FROM scoot.arena_tables WHERE relation = 'wp'::regclass \gset
CALL wait_horizon_free();
SELECT pg_current_wal_insert_lsn() AS a \gset
BEGIN;
SELECT txid_current() > 0 AS has_xid;
SELECT v FROM wp WHERE id = 1;
COMMIT;
:onerec;
SELECT live_rows, dead_rows < :dead_before AS pruned FROM scoot.arena_tables WHERE relation = 'wp'::regclass;
RESET enable_seqscan;
RESET enable_bitmapscan;
RESET scoot.custom_scan;
DROP TABLE wp;
ALTER SYSTEM RESET scoot.freeze_after;
SELECT pg_reload_conf();

-- an UPDATE that changes one number of a row with long unchanged values, its new version in the
-- old one's block: the record copies those values from the old version within the block
-- (BLOCK+COPY; "copies N copied M" in its description) instead of carrying them (709 bytes
-- for a TPC-C customer update before, 343 after); wal_check is on
CREATE TABLE ww (id int PRIMARY KEY, n int, c char(30), t text) USING scoot;
INSERT INTO ww SELECT i, 0, 'c' || i, repeat(md5(i::text), 20) FROM generate_series(1, 10) i;
SELECT pg_current_wal_insert_lsn() AS a \gset
UPDATE ww SET n = n + 1 WHERE id = 3;
SELECT record_type, (substring(description from 'copied (\d+)'))::int >= 640 + 30 AS copied_both,
       record_length < 300 AS small
FROM pg_get_wal_records_info(:'a', pg_current_wal_flush_lsn()) WHERE resource_manager = 'pg_scoot';
SELECT id, n, c, t = repeat(md5(id::text), 20) AS t_same FROM ww WHERE id BETWEEN 2 AND 4 ORDER BY id;
DROP TABLE ww;

DROP TABLE wt;
RESET scoot.wal_check;
