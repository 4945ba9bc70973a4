-- scoot_specific_vacuum: the shared-memory arena must not grow without
-- bound when a table is updated and vacuumed over and over.  Uses the
-- scoot.arena view; its exact columns are not fixed yet, so the helper below
-- adds up every "block"/"byte" counter of the rows that belong to a table
-- (whatever the column is called) and every such counter overall.
-- No heap-generated expected output.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

SELECT count(*) > 0 AS arena_has_rows FROM scoot.arena;

-- usage counters of one table (rows of scoot.arena naming the table by oid or name)
-- per table: blocks + bytes from scoot.arena_tables; all: blocks used + bytes from scoot.arena
CREATE FUNCTION scoot_usage(rel regclass) RETURNS numeric LANGUAGE sql AS $$
  SELECT coalesce(sum(blocks::numeric * 1048576 + bytes), 0) FROM scoot.arena_tables WHERE relation = rel
$$;
CREATE FUNCTION scoot_usage_all() RETURNS numeric LANGUAGE sql AS $$
  SELECT blocks_used::numeric * block_size + used_bytes FROM scoot.arena
$$;
SELECT blocks_used + blocks_free = blocks_total AS block_counts_add_up FROM scoot.arena;

CREATE TABLE arena_s (id int PRIMARY KEY, n int, pad text) USING scoot;
CREATE TABLE arena_h (id int PRIMARY KEY, n int, pad text) USING heap;
INSERT INTO arena_s SELECT g, 0, repeat('p', 100) FROM generate_series(1, 5000) g;
INSERT INTO arena_h SELECT g, 0, repeat('p', 100) FROM generate_series(1, 5000) g;
SELECT scoot_usage('arena_s') > 0 AS table_is_in_arena;

CREATE TABLE arena_usage (round int, tbl numeric, total numeric, relsize bigint) USING heap;
-- 12 rounds of: update every row, VACUUM, record the usage
SELECT format($f$UPDATE arena_s SET n = n + 1, pad = repeat(chr(97 + %1$s %% 26), 100)$f$, r),
       format($f$UPDATE arena_h SET n = n + 1, pad = repeat(chr(97 + %1$s %% 26), 100)$f$, r),
       'VACUUM arena_s',
       format($f$INSERT INTO arena_usage SELECT %1$s, scoot_usage('arena_s'), scoot_usage_all(), pg_relation_size('arena_s')$f$, r)
FROM generate_series(1, 12) r \gexec
SELECT count(*) AS rounds FROM arena_usage;
SELECT (SELECT array_agg(x::text ORDER BY id) FROM arena_s x)
     = (SELECT array_agg(x::text ORDER BY id) FROM arena_h x) AS contents_same_as_heap;
SELECT n, count(*) FROM arena_s GROUP BY n ORDER BY n;
-- bounded growth: after the first few rounds the usage must level off (compared with the
-- largest of the first four rounds: VACUUM returns the last block to the arena in some rounds
-- and not in others)
SELECT (SELECT tbl FROM arena_usage WHERE round = 12) <= 1.5 * (SELECT max(tbl) FROM arena_usage WHERE round <= 4) + 16
         AS table_usage_bounded,
       (SELECT total FROM arena_usage WHERE round = 12) <= 1.5 * (SELECT max(total) FROM arena_usage WHERE round <= 4) + 16
         AS arena_usage_bounded,
       (SELECT relsize FROM arena_usage WHERE round = 12) <= 1.5 * (SELECT max(relsize) FROM arena_usage WHERE round <= 4) + 65536
         AS relation_size_bounded;

-- space of a dropped / truncated table goes back to the arena
CREATE TABLE arena_usage2 AS SELECT scoot_usage_all() AS before_drop;
TRUNCATE arena_s;
SELECT scoot_usage('arena_s') <= (SELECT tbl FROM arena_usage WHERE round = 1) AS truncate_released;
DROP TABLE arena_s;
SELECT scoot_usage_all() < (SELECT before_drop FROM arena_usage2) AS drop_released;

DROP TABLE arena_h, arena_usage, arena_usage2;
DROP FUNCTION scoot_usage(regclass);
DROP FUNCTION scoot_usage_all();
