-- scoot_specific_hot: an UPDATE that changes no indexed column adds no index entries
-- (the new version is reached through its chain root), so indexes do not grow;
-- an UPDATE of an indexed column does add entries (shows the check can fail).
SET client_min_messages = notice;
CREATE TABLE hot_s (id int PRIMARY KEY, k int, v int, pad text) USING scoot;
CREATE INDEX hot_s_k ON hot_s (k);
INSERT INTO hot_s SELECT g, g, 0, repeat('x', 50) FROM generate_series(1, 20000) g;
CREATE TABLE hot_sizes (phase text, pkey bigint, kidx bigint) USING heap;
INSERT INTO hot_sizes SELECT 'start', pg_relation_size('hot_s_pkey'), pg_relation_size('hot_s_k');
-- ten rounds of non-key updates of every row
SELECT 'UPDATE hot_s SET v = v + 1, pad = repeat(''y'', 50)' FROM generate_series(1, 10) \gexec
INSERT INTO hot_sizes SELECT 'after non-key updates', pg_relation_size('hot_s_pkey'), pg_relation_size('hot_s_k');
SELECT count(*), sum(v) FROM hot_s;
SELECT (SELECT pkey FROM hot_sizes WHERE phase = 'start') = (SELECT pkey FROM hot_sizes WHERE phase = 'after non-key updates') AS pkey_unchanged,
       (SELECT kidx FROM hot_sizes WHERE phase = 'start') = (SELECT kidx FROM hot_sizes WHERE phase = 'after non-key updates') AS kidx_unchanged;
-- index scans still find every row through the chains
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT count(*) FILTER (WHERE v = 10) AS found_by_index FROM hot_s WHERE id BETWEEN 1 AND 20000;
SELECT count(*) AS found_by_k FROM hot_s WHERE k BETWEEN 100 AND 199;
RESET enable_seqscan; RESET enable_bitmapscan;
-- an indexed column changes: new index entries are needed
UPDATE hot_s SET k = k + 100000;
INSERT INTO hot_sizes SELECT 'after key update', pg_relation_size('hot_s_pkey'), pg_relation_size('hot_s_k');
SELECT (SELECT kidx FROM hot_sizes WHERE phase = 'after key update') > (SELECT kidx FROM hot_sizes WHERE phase = 'after non-key updates') AS kidx_grew;
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT count(*) AS new_keys_found FROM hot_s WHERE k BETWEEN 100100 AND 100199;
SELECT count(*) AS old_keys_gone FROM hot_s WHERE k BETWEEN 100 AND 199;
RESET enable_seqscan; RESET enable_bitmapscan;
-- VACUUM removes the dead index entries and keeps every live row reachable
VACUUM hot_s;
SELECT count(*), sum(v), min(k), max(k) FROM hot_s;
DROP TABLE hot_s, hot_sizes;
-- opportunistic pruning tells the statistics what it reclaimed (heap_page_prune_opt's
-- pgstat_update_heap_dead_tuples): n_dead_tup does not keep counting pruned versions, and
-- autovacuum is not started for them (with scoot.opportunistic_prune off every one stays dead)
CREATE TABLE hot_dt (id int PRIMARY KEY, v int) USING scoot WITH (autovacuum_enabled = off);
CREATE TABLE hot_dt_off (id int PRIMARY KEY, v int) USING scoot WITH (autovacuum_enabled = off);
INSERT INTO hot_dt SELECT g, 0 FROM generate_series(1, 10) g;
INSERT INTO hot_dt_off SELECT g, 0 FROM generate_series(1, 10) g;
SET enable_seqscan = off; SET enable_bitmapscan = off;
\set ECHO none
\o /dev/null
SELECT 'UPDATE hot_dt SET v = v + 1 WHERE id = 3' FROM generate_series(1, 200) \gexec
-- an older snapshot elsewhere (an autovacuum ANALYZE of another table) can hold pruning back for
-- a moment: read the row again a few times (each read prunes its chain while it is long)
SELECT 'SELECT pg_sleep(0.2), v FROM hot_dt WHERE id = 3' FROM generate_series(1, 5) \gexec
SET scoot.opportunistic_prune = off;
SELECT 'UPDATE hot_dt_off SET v = v + 1 WHERE id = 3' FROM generate_series(1, 200) \gexec
\o
\set ECHO all
-- (still without pruning: this read would prune hot_dt_off's chain, and report it)
SELECT (SELECT v FROM hot_dt WHERE id = 3) AS v, (SELECT v FROM hot_dt_off WHERE id = 3) AS v_off;
SELECT pg_stat_force_next_flush();
SELECT relname, n_tup_upd, n_dead_tup < 100 AS few_dead FROM pg_stat_user_tables
WHERE relname IN ('hot_dt', 'hot_dt_off') ORDER BY 1;
RESET scoot.opportunistic_prune;
RESET enable_seqscan; RESET enable_bitmapscan;
DROP TABLE hot_dt, hot_dt_off;
