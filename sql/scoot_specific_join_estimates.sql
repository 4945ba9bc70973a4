-- Join estimates for per-group extremes (src/exec/joinest.c): a scoot table joined to a grouped
-- subquery over the same table on the group key and on the group's min() / max() of one of its
-- columns returns at least one row per group. PostgreSQL multiplies the key's selectivity by
-- 1/200 for the aggregate (no statistics); scoot raises the extreme clause's selectivity so that
-- the pair matches at least one of the table's rows per group. The estimates with and without
-- (scoot.custom_scan = off), the shapes left alone (a heap table, another column, another table,
-- no key clause), a key reached through a third table (CH Q2's shape), the plan that changes,
-- and the answers (the estimates are exact here: tables under 30,000 rows are analyzed whole).
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;

-- 9,000 groups of 3 rows; x differs within a group, so every group's min and max is one row
CREATE TABLE je_t (k int, w int, x int, y int, pad text) USING scoot;
CREATE TABLE je_h (LIKE je_t) USING heap;
CREATE TABLE je_d (k int PRIMARY KEY, tag text) USING scoot;
INSERT INTO je_h SELECT k, w, (k * 7 + w * 13) % 100, (k + w) % 50, repeat('p', 20)
  FROM generate_series(1, 9000) k, generate_series(1, 3) w;
INSERT INTO je_t SELECT * FROM je_h;
INSERT INTO je_d SELECT k, CASE WHEN k % 50 = 0 THEN 'rare' ELSE 'common' END
  FROM generate_series(1, 9000) k;
CREATE INDEX je_t_k ON je_t (k);
ANALYZE je_t, je_h, je_d;

-- the argmin: one row per group (9,000), not 1/200 of that
SELECT scoot_estimate('SELECT t.* FROM je_t t, (SELECT k, min(x) AS mx FROM je_t GROUP BY k) m
               WHERE t.k = m.k AND t.x = m.mx');
SET scoot.custom_scan = off;
SELECT scoot_estimate('SELECT t.* FROM je_t t, (SELECT k, min(x) AS mx FROM je_t GROUP BY k) m
               WHERE t.k = m.k AND t.x = m.mx');
RESET scoot.custom_scan;
-- max, written the other way round
SELECT scoot_estimate('SELECT t.* FROM (SELECT k AS g, max(x) AS mx FROM je_t GROUP BY k) m, je_t t
               WHERE m.mx = t.x AND m.g = t.k');
-- the subquery filters and joins (its extreme is still one of the table''s rows)
SELECT scoot_estimate('SELECT t.* FROM je_t t,
                 (SELECT t2.k, min(t2.x) AS mx FROM je_t t2 JOIN je_d d ON d.k = t2.k
                  WHERE t2.w < 3 GROUP BY t2.k) m
               WHERE t.k = m.k AND t.x = m.mx');

-- left alone: a heap table
SELECT scoot_estimate('SELECT t.* FROM je_h t, (SELECT k, min(x) AS mx FROM je_h GROUP BY k) m
               WHERE t.k = m.k AND t.x = m.mx');
-- another column than the aggregate's
SELECT scoot_estimate('SELECT t.* FROM je_t t, (SELECT k, min(x) AS mx FROM je_t GROUP BY k) m
               WHERE t.k = m.k AND t.y = m.mx');
-- the aggregate over another table (the same rows, but not the joined table)
SELECT scoot_estimate('SELECT t.* FROM je_t t, (SELECT k, min(x) AS mx FROM je_h GROUP BY k) m
               WHERE t.k = m.k AND t.x = m.mx');
-- no key clause: the extreme alone says nothing about which rows match
SELECT scoot_estimate('SELECT t.* FROM je_t t, (SELECT k, min(x) AS mx FROM je_t GROUP BY k) m
               WHERE t.x = m.mx');
-- an aggregate whose value is not one of its inputs
SELECT scoot_estimate('SELECT t.* FROM je_t t, (SELECT k, avg(x)::int AS mx FROM je_t GROUP BY k) m
               WHERE t.k = m.k AND t.x = m.mx');

-- CH Q2's shape: the key also joins a third table that filters it
SELECT scoot_estimate('SELECT t.*, d.tag FROM je_t t, je_d d,
                 (SELECT k, min(x) AS mx FROM je_t GROUP BY k) m
               WHERE d.k = t.k AND d.k = m.k AND t.x = m.mx AND d.tag = ''rare''');
-- the plan that changes: with PostgreSQL's estimate (135 argmin rows) a nested loop probes je_d's
-- primary key once per row; knowing 9,000, a hash join reads je_d once
EXPLAIN (COSTS OFF)
SELECT t.k, t.x, d.tag FROM je_t t, je_d d,
  (SELECT k, min(x) AS mx FROM je_t GROUP BY k) m
WHERE d.k = t.k AND t.k = m.k AND t.x = m.mx AND d.tag = 'common';
SET scoot.custom_scan = off;
EXPLAIN (COSTS OFF)
SELECT t.k, t.x, d.tag FROM je_t t, je_d d,
  (SELECT k, min(x) AS mx FROM je_t GROUP BY k) m
WHERE d.k = t.k AND t.k = m.k AND t.x = m.mx AND d.tag = 'common';
RESET scoot.custom_scan;

-- the answers do not change: scoot with and without, and heap
SELECT d.tag, count(*), sum(t.k), sum(t.x), sum(t.w) FROM je_t t, je_d d,
  (SELECT k, min(x) AS mx FROM je_t GROUP BY k) m
WHERE d.k = t.k AND t.k = m.k AND t.x = m.mx GROUP BY d.tag ORDER BY d.tag;
SET scoot.custom_scan = off;
SELECT d.tag, count(*), sum(t.k), sum(t.x), sum(t.w) FROM je_t t, je_d d,
  (SELECT k, min(x) AS mx FROM je_t GROUP BY k) m
WHERE d.k = t.k AND t.k = m.k AND t.x = m.mx GROUP BY d.tag ORDER BY d.tag;
RESET scoot.custom_scan;
SELECT d.tag, count(*), sum(t.k), sum(t.x), sum(t.w) FROM je_h t, je_d d,
  (SELECT k, min(x) AS mx FROM je_h GROUP BY k) m
WHERE d.k = t.k AND t.k = m.k AND t.x = m.mx GROUP BY d.tag ORDER BY d.tag;
SELECT count(*), sum(t.w) FROM je_t t, (SELECT k, max(x) AS mx FROM je_t GROUP BY k) m
WHERE t.k = m.k AND t.x = m.mx;
SELECT count(*), sum(t.w) FROM je_h t, (SELECT k, max(x) AS mx FROM je_h GROUP BY k) m
WHERE t.k = m.k AND t.x = m.mx;

DROP TABLE je_t, je_h, je_d;
