-- Planner samples shared by all backends (scoot.planner_samples). What the planner learns from a
-- scoot table's rows while planning (expression statistics, eager aggregation's group count) is
-- kept in shared memory: a new connection plans with it instead of sampling again (which cost a
-- fresh connection's first CH Q10 plan 45 ms instead of 4). Checked: the first plan samples, a
-- new backend's plan of the same (or a differently written, same) expression is answered from
-- the shared entry with the same estimates, a table that grew by more than a fifth is sampled
-- again, a reset forgets, the answers do not change, and the view shows only what the user may
-- read.
SET max_parallel_workers_per_gather = 0;
SELECT scoot.planner_samples_reset();

CREATE TABLE ps_c (id int PRIMARY KEY, state char(2)) USING scoot;
CREATE TABLE ps_n (key int PRIMARY KEY, name text) USING scoot;
INSERT INTO ps_c SELECT i, chr(65 + (i * 7) % 26) || chr(65 + i % 26) FROM generate_series(1, 20000) i;
INSERT INTO ps_n SELECT k, 'nation' || k FROM generate_series(0, 24) k;
-- pre-aggregation candidates: 50,000 rows in groups of four (o, n) rows
CREATE TABLE ps_r (o int, n int, v numeric(10,2)) USING scoot;
INSERT INTO ps_r SELECT i / 40, i % 10, i % 97 FROM generate_series(1, 50000) i;
CREATE TABLE ps_o (o int PRIMARY KEY, note varchar(10)) USING scoot;
INSERT INTO ps_o SELECT i, 'note' || (i % 7) FROM generate_series(0, 1250) i;
ANALYZE ps_c, ps_n, ps_r, ps_o;

-- nothing sampled yet
SELECT count(*) FROM scoot.planner_samples WHERE relation::text LIKE 'ps\_%';
-- this backend samples: one entry per table and kind, not yet used by anyone else (the count(*)
-- in scoot_estimate also considered pre-aggregating ps_c by state: 26 groups)
SELECT scoot_estimate('SELECT * FROM ps_c c JOIN ps_n n ON ascii(substr(c.state, 1, 1)) - 65 = n.key');
EXPLAIN (COSTS OFF) SELECT o.note, r.n, sum(r.v) FROM ps_r r, ps_o o WHERE r.o = o.o GROUP BY o.note, r.n;
SELECT relation, kind, sampled_at_rows, round(estimate::numeric) AS estimate, hits
FROM scoot.planner_samples WHERE relation::text LIKE 'ps\_%' ORDER BY 1, 2;

-- a new backend: the same estimates and plan, answered from the shared entries (hits), also for
-- the expression written differently (other spacing, other table order and aliases)
\c
SET max_parallel_workers_per_gather = 0;
SELECT scoot_estimate('SELECT * FROM ps_n x,   ps_c y WHERE ascii(substr(y.state, 1, 1))   - 65 = x.key');
EXPLAIN (COSTS OFF) SELECT o.note, r.n, sum(r.v) FROM ps_r r, ps_o o WHERE r.o = o.o GROUP BY o.note, r.n;
SELECT relation, kind, sampled_at_rows, round(estimate::numeric) AS estimate, hits
FROM scoot.planner_samples WHERE relation::text LIKE 'ps\_%' ORDER BY 1, 2;

-- the answers are those of heap
CREATE TABLE ps_ch (LIKE ps_c) USING heap;
CREATE TABLE ps_nh (LIKE ps_n) USING heap;
INSERT INTO ps_ch SELECT * FROM ps_c;
INSERT INTO ps_nh SELECT * FROM ps_n;
SELECT (SELECT count(*) FROM ps_c c JOIN ps_n n ON ascii(substr(c.state, 1, 1)) - 65 = n.key) =
       (SELECT count(*) FROM ps_ch c JOIN ps_nh n ON ascii(substr(c.state, 1, 1)) - 65 = n.key) AS same;

-- the table grows by more than a fifth: a new backend samples again, at the new row count
INSERT INTO ps_c SELECT i, chr(65 + i % 25) || 'Z' FROM generate_series(20001, 30000) i;
ANALYZE ps_c;
\c
SET max_parallel_workers_per_gather = 0;
SELECT scoot_estimate('SELECT * FROM ps_c c JOIN ps_n n ON ascii(substr(c.state, 1, 1)) - 65 = n.key');
SELECT relation, kind, sampled_at_rows, hits
FROM scoot.planner_samples WHERE relation = 'ps_c'::regclass;

-- a reset forgets this database's samples; the next plan samples again
SELECT scoot.planner_samples_reset();
SELECT count(*) FROM scoot.planner_samples WHERE relation::text LIKE 'ps\_%';
\c
SET max_parallel_workers_per_gather = 0;
SELECT scoot_estimate('SELECT * FROM ps_c c JOIN ps_n n ON ascii(substr(c.state, 1, 1)) - 65 = n.key');
SELECT relation, kind, sampled_at_rows, hits
FROM scoot.planner_samples WHERE relation::text LIKE 'ps\_%' ORDER BY 1, 2;

-- the view shows what pg_stats would: only tables the user may read, none whose row security
-- applies to the user, none dropped
CREATE ROLE regress_ps_reader;
GRANT USAGE ON SCHEMA scoot TO regress_ps_reader;
GRANT SELECT ON scoot.planner_samples TO regress_ps_reader;
SET ROLE regress_ps_reader;
SELECT count(*) FROM scoot.planner_samples WHERE relation::text LIKE 'ps\_%';
RESET ROLE;
GRANT SELECT ON ps_c TO regress_ps_reader;
SET ROLE regress_ps_reader;
SELECT count(*) FROM scoot.planner_samples WHERE relation::text LIKE 'ps\_%';
RESET ROLE;
ALTER TABLE ps_c ENABLE ROW LEVEL SECURITY;
SET ROLE regress_ps_reader;
SELECT count(*) FROM scoot.planner_samples WHERE relation::text LIKE 'ps\_%';
RESET ROLE;

-- dead row versions form no groups: an UPDATE rewrote every key and nothing vacuumed, so 50,000
-- dead versions hold unique keys; the group-count sample counts the groups of the live rows
-- (1,000; counting the dead versions too estimated about 4,200)
CREATE TABLE ps_d (o int, n int, v numeric(10,2)) USING scoot WITH (autovacuum_enabled = off);
INSERT INTO ps_d SELECT i, i, 1 FROM generate_series(1, 50000) i;
UPDATE ps_d SET o = o % 1000, n = o % 10;
ANALYZE ps_d;
EXPLAIN (COSTS OFF) SELECT o.note, d.n, sum(d.v) FROM ps_d d, ps_o o WHERE d.o = o.o GROUP BY o.note, d.n;
SELECT relation, kind, estimate BETWEEN 800 AND 1250 AS about_the_live_groups
FROM scoot.planner_samples WHERE relation = 'ps_d'::regclass;
-- unique keys over several blocks: the sample draws distinct row slots, sees every key once and
-- estimates a group per row, so the rows go to the join unaggregated (a sample drawn with
-- replacement met a few slots twice, which Duj1 reads as every key occurring about twice: half
-- the rows estimated, and a ScootPreAgg that grouped nothing)
CREATE TABLE ps_u (o int, n int, v numeric(10,2)) USING scoot;
INSERT INTO ps_u SELECT i / 10, i % 10, 1 FROM generate_series(1, 120000) i;
ANALYZE ps_u;
SELECT count(*) > 1 AS several_blocks FROM (SELECT DISTINCT (ctid::text::point)[0] FROM ps_u) b;
EXPLAIN (COSTS OFF) SELECT o.note, u.n, sum(u.v) FROM ps_u u, ps_o o WHERE u.o = o.o GROUP BY o.note, u.n;
SELECT relation, kind, round(estimate::numeric) AS estimate
FROM scoot.planner_samples WHERE relation = 'ps_u'::regclass;
DROP TABLE ps_c, ps_n, ps_r, ps_o, ps_ch, ps_nh, ps_d, ps_u;
SELECT count(*) FROM scoot.planner_samples WHERE relation::text LIKE 'ps\_%';
REVOKE SELECT ON scoot.planner_samples FROM regress_ps_reader;
REVOKE USAGE ON SCHEMA scoot FROM regress_ps_reader;
DROP ROLE regress_ps_reader;
