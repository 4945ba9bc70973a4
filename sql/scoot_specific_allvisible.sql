-- scoot_specific_allvisible: with plain scans (scoot.custom_scan = off) plans are heap's, and an
-- index-only scan's cost depends on the share of the table VACUUM found all visible
-- (pg_class.relallvisible, heap's visibility map). ANALYZE overwrites that count with the
-- visibility map's, 0 for a scoot table (it has none), where heap's stays: the planner also counts
-- the blocks still all visible since their VACUUM (src/am/ddl.rs, relation_estimate_size), so a
-- VACUUM ANALYZE or an autovacuum ANALYZE does not turn an index-only scan into a bitmap scan.
SET scoot.custom_scan = off;
SET max_parallel_workers_per_gather = 0;
CREATE TABLE av (a int, b int, c text) USING scoot WITH (autovacuum_enabled = off);
INSERT INTO av SELECT i % 1000, i, 'x' || i FROM generate_series(1, 20000) i;
CREATE INDEX av_ab ON av (a, b);
CREATE TABLE avh (a int, b int, c text) USING heap WITH (autovacuum_enabled = off);
INSERT INTO avh SELECT * FROM av;
CREATE INDEX avh_ab ON avh (a, b);

-- the plan for both after VACUUM, then ANALYZE (as VACUUM ANALYZE: the ANALYZE runs last)
CREATE FUNCTION plan_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE l text; r text := '';
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    l := regexp_replace(ltrim(l, ' ->'), '( using| on) .*$', '');
    IF l !~ '^(Index Cond|Recheck Cond|Sort Key|Filter)' THEN
      r := r || CASE WHEN r = '' THEN '' ELSE ' / ' END || l;
    END IF;
  END LOOP;
  RETURN r;
END $$;
VACUUM av, avh;
-- VACUUM marks a block (a heap page) all visible only if no snapshot still running is older
-- than its rows: an autovacuum ANALYZE of another table can hold one. Vacuum ten times more,
-- each time after waiting half a second while a table has no all-visible block (VACUUM sets
-- relallvisible, scoot's from its own count); silently: the waits depend on the other sessions.
\set ECHO none
\o /dev/null
SELECT 'SELECT pg_sleep(0.5) WHERE EXISTS (SELECT FROM pg_class WHERE relname IN (''av'', ''avh'') AND relallvisible = 0)',
       'VACUUM av, avh' FROM generate_series(1, 10) \gexec
\o
\set ECHO all
SELECT relname, relallvisible > 0 AS all_visible_pages FROM pg_class WHERE relname IN ('av', 'avh') ORDER BY 1;
ANALYZE av, avh;
SELECT plan_of('SELECT a, b FROM av WHERE a >= 997 ORDER BY a, b') AS scoot,
       plan_of('SELECT a, b FROM avh WHERE a >= 997 ORDER BY a, b') AS heap;
SELECT (SELECT array_agg(b ORDER BY a, b) FROM av WHERE a >= 997) =
       (SELECT array_agg(b ORDER BY a, b) FROM avh WHERE a >= 997) AS same_rows;

-- a plain ANALYZE afterwards: still the index-only scan
ANALYZE av, avh;
SELECT plan_of('SELECT a, b FROM av WHERE a >= 997 ORDER BY a, b') AS scoot,
       plan_of('SELECT a, b FROM avh WHERE a >= 997 ORDER BY a, b') AS heap;

-- writes everywhere: the blocks are no longer all visible until the next VACUUM (as heap's pages)
UPDATE av SET c = c || 'y';
UPDATE avh SET c = c || 'y';
ANALYZE av, avh;
SELECT plan_of('SELECT a, b FROM av WHERE a >= 997 ORDER BY a, b') AS scoot,
       plan_of('SELECT a, b FROM avh WHERE a >= 997 ORDER BY a, b') AS heap;
VACUUM av, avh;
\set ECHO none
\o /dev/null
SELECT 'SELECT pg_sleep(0.5) WHERE EXISTS (SELECT FROM pg_class WHERE relname IN (''av'', ''avh'') AND relallvisible = 0)',
       'VACUUM av, avh' FROM generate_series(1, 10) \gexec
\o
\set ECHO all
ANALYZE av, avh;
SELECT plan_of('SELECT a, b FROM av WHERE a >= 997 ORDER BY a, b') AS scoot,
       plan_of('SELECT a, b FROM avh WHERE a >= 997 ORDER BY a, b') AS heap;
SELECT (SELECT array_agg(b ORDER BY a, b) FROM av WHERE a >= 997) =
       (SELECT array_agg(b ORDER BY a, b) FROM avh WHERE a >= 997) AS same_rows;

-- and the index-only scan reads no row of a block VACUUM found all visible, as heap's reads no
-- page its visibility map marks (src/am/index.rs, root_all_visible): EXPLAIN's "Heap Fetches"
-- counts the rows it still had to read
CREATE FUNCTION fetches_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE l text; r text := '';
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF l ~ 'Index Only Scan' THEN
      r := r || 'Index Only Scan rows=' || substring(l from 'actual rows=(\d+)');
    ELSIF l ~ 'Heap Fetches' THEN
      r := r || ', ' || ltrim(l);
    ELSIF l ~ 'Scoot Snapshot' THEN
      r := r || ', reads an image';
    END IF;
  END LOOP;
  RETURN r;
END $$;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT fetches_of('SELECT count(*) FROM av WHERE a >= 990') AS scoot,
       fetches_of('SELECT count(*) FROM avh WHERE a >= 990') AS heap;
SET scoot.custom_scan = on;
SELECT fetches_of('SELECT count(*) FROM av WHERE a >= 990') AS scoot_custom_scan;
-- an OLAP snapshot image's all-visible blocks likewise (the statement reads an image)
SET scoot.olap = on;
SELECT fetches_of('SELECT count(*) FROM av WHERE a >= 990') AS scoot_image;
RESET scoot.olap;
-- a transaction's own changes clear the horizon of the block they touch: its rows are read
-- again, and the scan sees the changes (deleted rows gone, the new one there) as heap's does
BEGIN;
DELETE FROM av WHERE a = 995;
DELETE FROM avh WHERE a = 995;
INSERT INTO av VALUES (999, -1, 'new');
INSERT INTO avh VALUES (999, -1, 'new');
SELECT fetches_of('SELECT count(*) FROM av WHERE a >= 990') ~ 'rows=181, Heap Fetches: [1-9]' AS scoot_fetches_again;
SELECT (SELECT array_agg(b ORDER BY a, b) FROM av WHERE a >= 990) =
       (SELECT array_agg(b ORDER BY a, b) FROM avh WHERE a >= 990) AS same_rows,
       (SELECT count(*) FROM av WHERE a >= 990) AS n;
ROLLBACK;
RESET scoot.custom_scan;
RESET enable_seqscan;
RESET enable_bitmapscan;

DROP TABLE av, avh;
DROP FUNCTION plan_of(text);
DROP FUNCTION fetches_of(text);
RESET scoot.custom_scan;
