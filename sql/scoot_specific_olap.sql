-- scoot_specific_olap: which statements read an OLAP snapshot (scoot.olap), what they see, and
-- how EXPLAIN and the views show it. The snapshot id, method and age vary from run to run, so
-- the EXPLAIN lines are masked by olap_plan().
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE olap_s (id int PRIMARY KEY, g int, v text) USING scoot;
INSERT INTO olap_s SELECT i, i % 10, 'v' || i FROM generate_series(1, 5000) i;
CREATE TABLE olap_h (id int PRIMARY KEY, w int);
INSERT INTO olap_h VALUES (1, 1), (2, 2);

-- EXPLAIN (COSTS OFF) with the snapshot line masked
CREATE FUNCTION olap_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    RETURN NEXT regexp_replace(l, 'Scoot Snapshot: \d+ \((uffd|software|copy), age [0-9.]+ ms\)',
                               'Scoot Snapshot: N (METHOD, age A ms)');
  END LOOP;
END $$;
-- the id of the snapshot a statement reads (NULL: it reads live data)
CREATE FUNCTION olap_snapshot_id(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE l text; m text[];
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    m := regexp_match(l, 'Scoot Snapshot: (\d+)');
    IF m IS NOT NULL THEN RETURN m[1]::bigint; END IF;
  END LOOP;
  RETURN NULL;
END $$;

-- off (the default): live reads
SHOW scoot.olap;
SELECT * FROM olap_plan('SELECT count(*) FROM olap_s');

SET scoot.olap = on;
-- a single-statement SELECT reads a snapshot; every scoot scan says so
SELECT * FROM olap_plan('SELECT count(*) FROM olap_s');
SELECT * FROM olap_plan('SELECT g, count(*) FROM olap_s JOIN olap_h USING (id) GROUP BY g');
SET enable_seqscan = off;
SELECT * FROM olap_plan('SELECT * FROM olap_s WHERE id = 7');
RESET enable_seqscan;
SELECT count(*), sum(g), min(v), max(v) FROM olap_s;
-- statements without scoot tables, writes, FOR UPDATE and writing CTEs stay live
SELECT * FROM olap_plan('SELECT * FROM olap_h');
SELECT * FROM olap_plan('SELECT * FROM olap_s WHERE id = 1 FOR UPDATE');
SELECT * FROM olap_plan('UPDATE olap_s SET g = g WHERE id = 1');
SELECT * FROM olap_plan('WITH d AS (DELETE FROM olap_h WHERE id = 0 RETURNING id) SELECT count(*) FROM olap_s');

-- read-your-writes: a committed change is visible to the next snapshot statement
INSERT INTO olap_s VALUES (5001, 1, 'new');
SELECT count(*), max(id) FROM olap_s;
UPDATE olap_s SET v = 'changed' WHERE id = 1;
SELECT v FROM olap_s WHERE id = 1;
DELETE FROM olap_s WHERE id = 5001;
SELECT count(*), max(id) FROM olap_s;

-- a single-statement transaction that reads a snapshot runs read-only: a function that writes
-- fails instead of writing data computed from a stale image
CREATE FUNCTION olap_writes(i int) RETURNS int LANGUAGE sql AS
  $$ INSERT INTO olap_h VALUES (i, i) RETURNING w $$;
SELECT olap_writes(10) FROM olap_s WHERE id = 1;
SELECT count(*) FROM olap_h;

-- explicit read-write transaction: live reads
BEGIN;
SELECT olap_snapshot_id('SELECT count(*) FROM olap_s') IS NULL AS live;
SELECT count(*) FROM olap_s;
COMMIT;
-- READ ONLY transaction at READ COMMITTED: snapshot reads
BEGIN READ ONLY;
SELECT olap_snapshot_id('SELECT count(*) FROM olap_s') IS NOT NULL AS snapshot;
COMMIT;
-- REPEATABLE READ READ ONLY: one snapshot for all statements
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
SELECT count(*) FROM olap_s;
SELECT olap_snapshot_id('SELECT count(*) FROM olap_s') = olap_snapshot_id('SELECT sum(g) FROM olap_s') AS same_snapshot;
SELECT pg_sleep(0.05);
SELECT olap_snapshot_id('SELECT 1 FROM olap_s LIMIT 1') = olap_snapshot_id('SELECT count(*) FROM olap_s') AS still_same;
COMMIT;
-- SERIALIZABLE transactions read live data (their predicate locks must see it)
BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY;
SELECT olap_snapshot_id('SELECT count(*) FROM olap_s') IS NULL AS live;
COMMIT;

-- cursors read the snapshot they were opened on
BEGIN READ ONLY;
DECLARE c CURSOR FOR SELECT id FROM olap_s WHERE id <= 3 ORDER BY id;
FETCH 2 FROM c;
FETCH ALL FROM c;
COMMIT;

-- parallel scans read the same snapshot as their leader (aggregate pushdown off: it is not
-- parallel, and would take these aggregates)
SET scoot.agg_pushdown = off;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SELECT * FROM olap_plan('SELECT count(*) FROM olap_s');
SELECT count(*), sum(g) FROM olap_s;
-- a live parallel statement right after, on an idle server: its snapshot equals the image's,
-- yet its workers read live data like their leader (no error, no image)
SET scoot.olap = off;
SELECT count(*), sum(g) FROM olap_s;
SELECT olap_snapshot_id('SELECT count(*) FROM olap_s') IS NULL AS reads_live;
SET scoot.olap = on;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET scoot.agg_pushdown;

-- TABLESAMPLE and TID scans on a snapshot
SELECT count(*) > 0 AS sampled FROM olap_s TABLESAMPLE SYSTEM (50) REPEATABLE (1);
SELECT id FROM olap_s WHERE ctid = '(0,2)';

-- structured EXPLAIN formats carry the snapshot as properties of the query and of each scan of a
-- scoot table (valid documents)
CREATE FUNCTION olap_explain_fmt(fmt text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text := ''; l text;
BEGIN
  FOR l IN EXECUTE format('EXPLAIN (COSTS OFF, FORMAT %s) %s', fmt, q) LOOP r := r || l; END LOOP;
  RETURN r;
END $$;
SELECT (j->0->>'Scoot Snapshot Id')::bigint > 0 AS json_id,
       j->0->>'Scoot Snapshot Method' IN ('uffd', 'software', 'copy') AS json_method,
       (j->0->>'Scoot Snapshot Age')::float8 >= 0 AS json_age,
       j->0->'Plan'->>'Node Type' AS json_plan_intact
FROM (SELECT olap_explain_fmt('JSON', 'SELECT count(*) FROM olap_s')::json AS j) s;
SELECT xpath_exists('/x:explain/x:Query/x:Scoot-Snapshot-Id',
                    olap_explain_fmt('XML', 'SELECT count(*) FROM olap_s')::xml,
                    ARRAY[ARRAY['x', 'http://www.postgresql.org/2009/explain']]) AS xml_ok;
SELECT olap_explain_fmt('YAML', 'SELECT count(*) FROM olap_s') ~ E'\n  Scoot Snapshot Id: \\d+\n  Scoot Snapshot Method: "(uffd|software|copy)"' AS yaml_ok;
-- and as properties of each node that scans a scoot table (not of other nodes)
CREATE TABLE olap_hp (id int) USING heap;
SELECT n->>'Node Type' AS node, n->>'Relation Name' AS rel,
       (n->>'Scoot Snapshot Id')::bigint = (j->0->>'Scoot Snapshot Id')::bigint AS node_has_snapshot,
       n->>'Scoot Snapshot Method' = j->0->>'Scoot Snapshot Method' AS node_method
FROM (SELECT olap_explain_fmt('JSON', 'SELECT * FROM olap_s s JOIN olap_hp h ON h.id = s.id')::jsonb AS j) x,
     LATERAL jsonb_path_query(j, 'strict $.** ? (exists (@."Relation Name"))') n
ORDER BY 2;
SELECT xpath_exists('//x:Plan[x:Relation-Name="olap_s"]/x:Scoot-Snapshot-Id',
                    olap_explain_fmt('XML', 'SELECT * FROM olap_s s JOIN olap_hp h ON h.id = s.id')::xml,
                    ARRAY[ARRAY['x', 'http://www.postgresql.org/2009/explain']]) AS xml_node_ok,
       xpath_exists('//x:Plan[x:Relation-Name="olap_hp"]/x:Scoot-Snapshot-Id',
                    olap_explain_fmt('XML', 'SELECT * FROM olap_s s JOIN olap_hp h ON h.id = s.id')::xml,
                    ARRAY[ARRAY['x', 'http://www.postgresql.org/2009/explain']]) AS xml_heap_node_has_none;
SELECT olap_explain_fmt('YAML', 'SELECT count(*) FROM olap_s') ~ E'Relation Name: "olap_s"\n +Scoot Snapshot Id: \\d+\n +Scoot Snapshot Method: "(uffd|software|copy)"\n +Scoot Snapshot Age: ' AS yaml_node_ok;
DROP TABLE olap_hp;
SET scoot.olap = off;
SELECT olap_explain_fmt('JSON', 'SELECT count(*) FROM olap_s')::json->0->'Scoot Snapshot Id' IS NULL AS live_has_none;
SET scoot.olap = on;
DROP FUNCTION olap_explain_fmt(text, text);

-- the views
SELECT count(*) >= 1 AS has_snapshots,
       bool_and(method IN ('uffd', 'software', 'copy')) AS method_ok,
       bool_and(age_ms >= 0) AS age_ok
FROM scoot.snapshots;
SELECT method IN ('uffd', 'software', 'copy') AS method_ok, method_reason <> '' AS has_reason,
       worker_pid IS NOT NULL AS worker_running, snapshots_taken > 0 AS taken,
       create_ms_avg >= gate_ms_avg AS create_ge_gate
FROM scoot.snapshot_stats;
SELECT backend_type FROM pg_stat_activity WHERE backend_type = 'pg_scoot olap worker';
-- resetting the counters (superuser; PUBLIC may not)
CREATE TEMP TABLE olap_stats_before AS
  SELECT snapshots_taken, pages_saved + first_write_copies + first_write_faults AS writes
  FROM scoot.snapshot_stats;
SELECT snapshots_taken >= 2 AS several_taken FROM olap_stats_before;
SELECT scoot.snapshot_stats_reset();
-- (the worker may take one snapshot right after the reset; nobody writes meanwhile)
SELECT s.snapshots_taken <= 1 AS reset_taken,
       s.pages_saved + s.first_write_copies + s.first_write_faults <= b.writes AS reset_writes,
       s.method IN ('uffd', 'software', 'copy') AS method_kept
FROM scoot.snapshot_stats s, olap_stats_before b;
SELECT has_function_privilege('public', 'scoot.snapshot_stats_reset()', 'EXECUTE') AS public_may_reset;

-- scoot.olap_nice: a backend lowers its priority when it starts reading snapshots, for good
CREATE FUNCTION olap_my_nice() RETURNS int LANGUAGE sql AS
  $$ SELECT split_part(split_part(pg_read_file('/proc/' || pg_backend_pid() || '/stat'), ') ', 2), ' ', 17)::int $$;
SET scoot.olap_nice = 5;
SELECT olap_my_nice() AS nice_before_snapshot_read;
SELECT count(*) FROM olap_s;
SELECT olap_my_nice() AS nice_after_snapshot_read;
SET scoot.olap_nice = 0;
SELECT count(*) FROM olap_s;
SELECT olap_my_nice() AS nice_kept;
RESET scoot.olap_nice;
DROP FUNCTION olap_my_nice();

RESET scoot.olap;
DROP TABLE olap_s, olap_h;
DROP FUNCTION olap_plan(text), olap_snapshot_id(text), olap_writes(int);
