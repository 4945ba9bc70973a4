-- ScootUniqueGroups: the final aggregation of a query whose groups are provably one input row
-- each (the GROUP BY columns determine a unique key of every joined table; a ScootPreAgg's
-- groups are unique on their keys) is computed per row instead of by PostgreSQL's Agg. Which
-- queries it applies to (EXPLAIN names the key that proves each table), which it must leave
-- alone because a group may hold several rows (a non-unique or nullable key, a deferrable or
-- partial unique index, outer and semi joins, unsupported aggregates), the ScootPreAgg fallback
-- underneath, and a differential check: every query answers as on heap copies and with
-- scoot.unique_groups = off.
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;

CREATE TABLE ug_c (w int, d int, id int, name text, city varchar(12), nick text,
                   PRIMARY KEY (w, d, id)) USING scoot;
CREATE TABLE ug_o (w int, d int, id int, cust int, placed date, note text, cnt int2,
                   PRIMARY KEY (w, d, id)) USING scoot;
CREATE TABLE ug_l (w int, d int, o int, n numeric(12,2), i int, b bigint, f float8, s int2)
  USING scoot;
CREATE TABLE ug_ch (LIKE ug_c INCLUDING INDEXES) USING heap;
CREATE TABLE ug_oh (LIKE ug_o INCLUDING INDEXES) USING heap;
CREATE TABLE ug_lh (LIKE ug_l) USING heap;
INSERT INTO ug_ch
SELECT 1, d, id, 'name' || (id % 40), 'city' || (id % 7), CASE WHEN id % 5 = 0 THEN NULL ELSE 'n' || id END
FROM generate_series(1, 4) d, generate_series(1, 300) id;
INSERT INTO ug_oh
SELECT 1, d, id, 1 + (id * 7) % 300, date '2024-01-01' + id % 40,
       CASE WHEN id % 3 = 0 THEN NULL ELSE 'note' || (id % 9) END, (id % 12)::int2
FROM generate_series(1, 4) d, generate_series(1, 1500) id;
INSERT INTO ug_lh
SELECT 1, d, o, CASE WHEN (o + k) % 17 = 0 THEN NULL ELSE ((o * 31 + k * 7) % 10000) / 100.0 END,
       CASE WHEN k = 3 THEN NULL ELSE (o * k) % 1000 END, o::bigint * 1000000007,
       (o + k) / 4.0, (k * 1000)::int2
FROM generate_series(1, 4) d, generate_series(1, 1500) o, generate_series(1, 1 + o % 9) k;
INSERT INTO ug_c SELECT * FROM ug_ch;
INSERT INTO ug_o SELECT * FROM ug_oh;
INSERT INTO ug_l SELECT * FROM ug_lh;
UPDATE ug_l SET n = n + 1 WHERE o % 10 = 0;
UPDATE ug_lh SET n = n + 1 WHERE o % 10 = 0;
DELETE FROM ug_l WHERE o % 97 = 0;
DELETE FROM ug_lh WHERE o % 97 = 0;
ANALYZE ug_c, ug_o, ug_l, ug_ch, ug_oh, ug_lh;

-- the statement that computes q's answer (an md5 of its sorted rows and their count)
CREATE FUNCTION ug_wrap(q text) RETURNS text LANGUAGE sql AS $$
  SELECT format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) || '' '' || count(*) FROM (%s) x', q)
$$;
CREATE FUNCTION ug_run(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE ug_wrap(q) INTO r;
  RETURN r;
EXCEPTION WHEN OTHERS THEN
  RETURN 'ERROR: ' || SQLERRM;
END $$;
-- whether the plan computing q's answer has the node, after raising unless q answers as on
-- heap (hq) and with scoot.unique_groups = off
CREATE FUNCTION ug_agree(q text, hq text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r_s text; r_h text; r_off text; p text; used bool := false;
BEGIN
  FOR p IN EXECUTE 'EXPLAIN (COSTS OFF) ' || ug_wrap(q) LOOP
    used := used OR p LIKE '%ScootUniqueGroups%';
  END LOOP;
  r_s := ug_run(q);
  r_h := ug_run(hq);
  SET LOCAL scoot.unique_groups = off;
  r_off := ug_run(q);
  SET LOCAL scoot.unique_groups = on;
  IF r_s <> r_h OR r_s <> r_off OR r_s LIKE 'ERROR%' THEN
    RAISE EXCEPTION 'query % differs: scoot % heap % off %', q, r_s, r_h, r_off;
  END IF;
  RETURN CASE WHEN used THEN 'one row per group' ELSE 'PostgreSQL''s Agg' END || ', rows ' ||
         split_part(r_s, ' ', 2);
END $$;
-- q on scoot tables and on their heap copies
CREATE FUNCTION ug_check(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  RETURN ug_agree(q, replace(replace(replace(q, 'ug_c ', 'ug_ch '), 'ug_o ', 'ug_oh '), 'ug_l ', 'ug_lh '));
END $$;

-- CH-benCHmark Q18's shape: order lines grouped per order below the joins, orders and customers
-- joined by their primary keys: each final group is one joined row
EXPLAIN (COSTS OFF)
SELECT c.name, o.id, o.placed, o.cnt, sum(l.n)
FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.id, o.w, o.d, c.id, c.name, o.placed, o.cnt
HAVING sum(l.n) > 200 ORDER BY sum(l.n) DESC, o.placed, o.id, o.d LIMIT 8;
SELECT c.name, o.id, o.placed, o.cnt, sum(l.n)
FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.id, o.w, o.d, c.id, c.name, o.placed, o.cnt
HAVING sum(l.n) > 200 ORDER BY sum(l.n) DESC, o.placed, o.id, o.d LIMIT 8;
SET scoot.unique_groups = off;
SELECT c.name, o.id, o.placed, o.cnt, sum(l.n)
FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.id, o.w, o.d, c.id, c.name, o.placed, o.cnt
HAVING sum(l.n) > 200 ORDER BY sum(l.n) DESC, o.placed, o.id, o.d LIMIT 8;
RESET scoot.unique_groups;
-- HAVING below the joins: a condition on the pre-aggregated groups alone (sums, minima, maxima of
-- their rows, their keys) filters the ScootPreAgg's groups before they are joined (each is its
-- final group's one row); conditions on another table's columns, volatile ones and, under a
-- Gather, parallel-unsafe ones stay on top
EXPLAIN (COSTS OFF)
SELECT c.name, o.id, sum(l.n), max(l.i) FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.id, o.w, o.d, c.id, c.name
HAVING sum(l.n) > 100 AND max(l.i) < 900 AND max(c.name) < 'name3' AND sum(l.n) + random() * 0 > 50;
SELECT ug_check($q$
SELECT c.name, o.id, sum(l.n), max(l.i) FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.id, o.w, o.d, c.id, c.name
HAVING sum(l.n) > 100 AND max(l.i) < 900 AND max(c.name) < 'name3' AND sum(l.n) + random() * 0 > 50$q$);
-- NULL sums (every line's amount NULL) fail the condition below as they would on top
SELECT ug_check($q$
SELECT o.id, o.d, sum(l.n) FROM ug_o o, ug_l l WHERE l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.w, o.d, o.id HAVING sum(l.n) IS NULL OR sum(l.n) < 20$q$);
-- parallel scans of the other tables under the joins: the groups are still filtered first
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF)
SELECT c.name, o.id, sum(l.n) FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.id, o.w, o.d, c.id, c.name HAVING sum(l.n) > 100;
SELECT ug_check($q$
SELECT c.name, o.id, sum(l.n) FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.id, o.w, o.d, c.id, c.name HAVING sum(l.n) > 100$q$);
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
SET max_parallel_workers_per_gather = 0;
SET scoot.having_pushdown = off;
EXPLAIN (COSTS OFF)
SELECT o.id, sum(l.n) FROM ug_o o, ug_l l WHERE l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.w, o.d, o.id HAVING sum(l.n) > 100;
RESET scoot.having_pushdown;
-- ... and a differential check of random HAVING conditions over CH Q18's shape: conjuncts on the
-- pre-aggregated lines' sums, minima, maxima and row count (pushed down), on other tables'
-- columns, mixing both, or volatile (kept on top); every answer as on heap and with the
-- setting off
CREATE FUNCTION ug_having_check(n int, seed float8) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  conds text[] := ARRAY['sum(l.n) > %s', 'sum(l.n) < %s', 'sum(l.n) BETWEEN %s AND %s + 200',
                        'max(l.i) > %s', 'min(l.i) < %s', 'min(l.i) IS NULL', 'sum(l.n) IS NOT NULL',
                        'max(l.b) %% 7 = %s %% 7', 'sum(l.f) > %s / 3.0', 'count(*) > %s %% 6',
                        'max(c.name) < ''name%s''', 'sum(l.n) > o.cnt * %s / 100.0',
                        'sum(l.n) + random() * 0 > %s', 'max(l.i) + min(c.id) > %s',
                        'NOT (sum(l.n) > %s)', 'sum(l.n) > %s OR max(l.i) < %s'];
  sels text[] := ARRAY['c.name, o.id, o.d, sum(l.n)', 'o.id, o.d, sum(l.n), max(l.i)',
                       'o.id, sum(l.n), min(l.i), max(l.b), count(*)', 'c.name, o.id, sum(l.f), sum(l.n)'];
  i int; j int; q text; h text; r text; pushed int := 0; plan text;
BEGIN
  PERFORM setseed(seed);
  FOR i IN 1..n LOOP
    h := '';
    FOR j IN 1..(1 + floor(random() * 3))::int LOOP
      h := h || CASE WHEN h = '' THEN '' ELSE ' AND ' END ||
           format(conds[1 + floor(random() * array_length(conds, 1))::int],
                  floor(random() * 600 - 100)::int, floor(random() * 600)::int);
    END LOOP;
    q := format('SELECT %s FROM ug_c c, ug_o o, ug_l l WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d '
                'AND l.w = o.w AND l.d = o.d AND l.o = o.id GROUP BY o.id, o.w, o.d, c.id, c.name HAVING %s',
                sels[1 + floor(random() * array_length(sels, 1))::int], h);
    r := ug_check(q);
    FOR plan IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
      IF plan LIKE '%HAVING Pushed Down%' THEN pushed := pushed + 1; END IF;
    END LOOP;
  END LOOP;
  RETURN format('%s queries agree (%s with HAVING pushed down)', n,
                CASE WHEN pushed >= n / 3 THEN 'many' ELSE 'FEW: ' || pushed END);
END $$;
SELECT ug_having_check(150, 0.31);
SET scoot.olap = on;
SELECT ug_having_check(40, 0.62);
RESET scoot.olap;
DROP FUNCTION ug_having_check(int, float8);

-- eager aggregation's count mode below: each order's lines counted, the counts and the sums of
-- another table's column weighed by them; over one row per group, the weight itself
EXPLAIN (COSTS OFF)
SELECT o.id, o.d, count(*), sum(o.cnt), sum(l.n) FROM ug_o o, ug_l l
WHERE l.w = o.w AND l.d = o.d AND l.o = o.id GROUP BY o.w, o.d, o.id;
SELECT ug_check($$SELECT o.id, o.d, count(*), sum(o.cnt), sum(l.n) FROM ug_o o, ug_l l
WHERE l.w = o.w AND l.d = o.d AND l.o = o.id GROUP BY o.w, o.d, o.id$$);
SELECT ug_check($$SELECT o.id, count(*), sum(o.cnt) FROM ug_o o, ug_l l
WHERE l.w = o.w AND l.d = o.d AND l.o = o.id AND o.id % 5 = 1 GROUP BY o.w, o.d, o.id HAVING count(*) > 2$$);
-- ... where HAVING on the count reads the group's row count: below the joins too (the count
-- travels in the node's tableoid column, so its Filter shows COALESCE(tableoid, 0))
EXPLAIN (COSTS OFF)
SELECT o.id, count(*), sum(o.cnt) FROM ug_o o, ug_l l
WHERE l.w = o.w AND l.d = o.d AND l.o = o.id AND o.id % 5 = 1 GROUP BY o.w, o.d, o.id HAVING count(*) > 2;

-- the differential check, and which plan each query gets
SELECT ug_check($q$
SELECT c.name, o.id, o.d, sum(l.n) FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.id, o.w, o.d, c.id, c.name HAVING sum(l.n) > 200$q$);
-- every supported aggregate, and expressions over them, on orders joined to customers by
-- primary keys: sum of int2 / int4 / bigint / float8 (bigint, numeric and float8 results), min,
-- max, count(*), count of a nullable column; HAVING on counts and grouped columns
SELECT ug_check($q$
SELECT o.id, o.d, sum(o.cnt) * 2 AS twice, count(*), count(o.note), count(c.nick), sum(o.cnt),
       sum(c.id), sum(o.id::bigint * 1000000007), sum(o.cnt / 3.0::float8), min(c.nick),
       max(c.city), max(o.placed), min(o.note), pg_typeof(sum(o.cnt))::text,
       pg_typeof(sum(o.id::bigint))::text
FROM ug_c c, ug_o o
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d
GROUP BY o.w, o.d, o.id HAVING count(*) = 1 AND o.id % 3 = 1 AND count(o.note) > 0$q$);
-- ... and over the pre-aggregated order lines: sums of numeric, minima and maxima
SELECT ug_check($q$
SELECT o.id, o.d, sum(l.n), min(l.i), max(l.b), sum(l.n) - min(l.i), max(o.note)
FROM ug_o o, ug_l l WHERE l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.w, o.d, o.id HAVING min(l.i) IS NOT NULL AND o.id % 3 = 0 AND sum(l.n) > 10$q$);
-- a constant instead of a grouped column: o.w = 1 is known in every row
SELECT ug_check($q$
SELECT o.id, o.d, sum(l.n) FROM ug_o o, ug_l l
WHERE l.w = o.w AND l.d = o.d AND l.o = o.id AND o.w = 1
GROUP BY o.d, o.id$q$);
-- one table grouped by its primary key
SELECT ug_check($q$
SELECT w, d, id, sum(cnt), max(note), count(note) FROM ug_o  GROUP BY w, d, id HAVING sum(cnt) > 5$q$);
-- the customer determined through the order (o.cust = c.id), grouped by the order only
SELECT ug_check($q$
SELECT o.id, o.d, max(c.name), sum(l.n) FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.w, o.d, o.id$q$);

-- groups that may hold several rows keep PostgreSQL's Agg: a key not determined (the district)
SELECT ug_check($q$
SELECT o.id, sum(l.n) FROM ug_o o, ug_l l WHERE l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.w, o.id$q$);
-- ... several orders per customer
SELECT ug_check($q$
SELECT c.id, c.d, sum(l.n) FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY c.w, c.d, c.id$q$);
-- ... order lines not pre-aggregated (an aggregate ScootPreAgg cannot take: count(l.i))
SELECT ug_check($q$
SELECT o.id, o.d, sum(l.n), count(l.i) FROM ug_o o, ug_l l WHERE l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.w, o.d, o.id$q$);
-- ... an aggregate without a one-row form (avg), a DISTINCT or FILTER aggregate
SELECT ug_check($q$
SELECT w, d, id, avg(cnt) FROM ug_o  GROUP BY w, d, id$q$);
SELECT ug_check($q$
SELECT w, d, id, count(DISTINCT cnt), sum(cnt) FILTER (WHERE cnt > 3) FROM ug_o  GROUP BY w, d, id$q$);
-- ... an outer join and a semi join
SELECT ug_check($q$
SELECT o.id, o.d, sum(l.n) FROM ug_o o LEFT JOIN ug_l l ON l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.w, o.d, o.id$q$);
SELECT ug_check($q$
SELECT w, d, id, sum(cnt) FROM ug_o o WHERE EXISTS (SELECT 1 FROM ug_c c WHERE c.id = o.cust)
GROUP BY w, d, id$q$);
-- ... grouped by an expression of the key, not the key
SELECT ug_check($q$
SELECT id + 0, sum(cnt) FROM ug_o  WHERE w = 1 AND d = 1 GROUP BY id + 0$q$);

-- unique indexes that do not make a row unique per group: on a nullable column (NULLs repeat),
-- deferrable (checked at commit), partial; a NOT NULL unique index does. Each table is joined
-- to customers by a column it determines, so that a wrong proof would emit a group per row.
CREATE TABLE ug_u (k int, nk int UNIQUE, dk int UNIQUE DEFERRABLE INITIALLY DEFERRED, pk int, v int,
                   nn int NOT NULL) USING scoot;
CREATE UNIQUE INDEX ug_u_pk ON ug_u (pk) WHERE pk > 0;
CREATE UNIQUE INDEX ug_u_nn ON ug_u (nn);
CREATE TABLE ug_uh (LIKE ug_u INCLUDING INDEXES) USING heap;
INSERT INTO ug_u SELECT i, CASE WHEN i % 3 = 0 THEN NULL ELSE i END, i, CASE WHEN i % 4 = 0 THEN -i ELSE i END, i % 7, i
FROM generate_series(1, 300) i;
UPDATE ug_u SET pk = -1 WHERE pk < 0;
INSERT INTO ug_uh SELECT * FROM ug_u;
ANALYZE ug_u, ug_uh;
CREATE FUNCTION ug_ucheck(col text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE q text := format('SELECT u.%s, sum(u.v), count(*), max(c.name) FROM ug_u u, ug_c c
  WHERE c.w = 1 AND c.d = 1 AND c.id = u.k GROUP BY u.%s', col, col);
BEGIN
  RETURN col || ': ' || ug_agree(q, replace(replace(q, 'ug_u ', 'ug_uh '), 'ug_c ', 'ug_ch '));
END $$;
SELECT ug_ucheck('nk');
SELECT ug_ucheck('pk');
SELECT ug_ucheck('nn');
BEGIN;
UPDATE ug_u SET dk = 1 WHERE k = 2;
UPDATE ug_uh SET dk = 1 WHERE k = 2;
SELECT ug_ucheck('dk');
ROLLBACK;
DROP FUNCTION ug_ucheck(text);

-- the pre-aggregated groups computed by PostgreSQL (the engine cannot answer a NaN): still
-- unique per order, and the answer is exact
UPDATE ug_l SET f = 'NaN', n = 'NaN' WHERE o = 7 AND d = 1;
UPDATE ug_lh SET f = 'NaN', n = 'NaN' WHERE o = 7 AND d = 1;
SELECT ug_check($q$
SELECT c.name, o.id, o.d, sum(l.n) FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.id, o.w, o.d, c.id, c.name$q$);
SELECT c.name, o.id, o.d, sum(l.n) FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
  AND o.id = 7
GROUP BY o.id, o.w, o.d, c.id, c.name ORDER BY o.d;
-- ... with HAVING pushed below the joins onto those groups (NaN sorts above every number)
SELECT ug_check($q$
SELECT c.name, o.id, o.d, sum(l.n) FROM ug_c c, ug_o o, ug_l l
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND l.w = o.w AND l.d = o.d AND l.o = o.id
GROUP BY o.id, o.w, o.d, c.id, c.name HAVING sum(l.n) > 150$q$);

-- inside a prepared statement run with a parameter, and rescanned below a nested loop
PREPARE ug_p(int) AS
SELECT o.id, o.d, sum(l.n) FROM ug_o o, ug_l l WHERE l.w = o.w AND l.d = o.d AND l.o = o.id
  AND o.id < $1 GROUP BY o.w, o.d, o.id ORDER BY 1, 2;
SET plan_cache_mode = force_generic_plan;
EXECUTE ug_p(4);
EXECUTE ug_p(3);
RESET plan_cache_mode;
DEALLOCATE ug_p;
SELECT d.k, x.total FROM (VALUES (1), (2)) d(k),
  LATERAL (SELECT sum(s) AS total FROM (
    SELECT o.id, sum(l.n) AS s FROM ug_o o, ug_l l
    WHERE l.w = o.w AND l.d = o.d AND l.o = o.id AND o.d = d.k AND o.id < 20
    GROUP BY o.w, o.d, o.id) g) x ORDER BY 1;
-- rescanned with a changed parameter below a Memoize: the node passes the change down, so the
-- cache is purged and the customers are filtered anew for each outer row
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SELECT ug_check($q$SELECT d.k, g.id, g.d, g.n, g.m FROM (VALUES (1), (2), (3)) d(k),
  LATERAL (SELECT o.id, o.d, count(*) AS n, max(c.name) AS m FROM ug_o o, ug_c c
           WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d AND c.id % 4 <> d.k AND o.id < 40
           GROUP BY o.w, o.d, o.id) g$q$);
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;

-- on by default; scoot.unique_groups = off, scoot.agg_pushdown = off and scoot.custom_scan = off:
-- PostgreSQL's Agg
EXPLAIN (COSTS OFF) SELECT o.id, o.d, count(*), max(c.name) FROM ug_o o, ug_c c
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d GROUP BY o.w, o.d, o.id;
SET scoot.unique_groups = off;
EXPLAIN (COSTS OFF) SELECT o.id, o.d, count(*), max(c.name) FROM ug_o o, ug_c c
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d GROUP BY o.w, o.d, o.id;
RESET scoot.unique_groups;
SET scoot.agg_pushdown = off;
EXPLAIN (COSTS OFF) SELECT o.id, o.d, count(*), max(c.name) FROM ug_o o, ug_c c
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d GROUP BY o.w, o.d, o.id;
RESET scoot.agg_pushdown;
SET scoot.custom_scan = off;
EXPLAIN (COSTS OFF) SELECT o.id, o.d, count(*), max(c.name) FROM ug_o o, ug_c c
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d GROUP BY o.w, o.d, o.id;
RESET scoot.custom_scan;
-- heap tables alone are PostgreSQL's business
EXPLAIN (COSTS OFF) SELECT o.id, o.d, count(*), max(c.name) FROM ug_oh o, ug_ch c
WHERE c.id = o.cust AND c.w = o.w AND c.d = o.d GROUP BY o.w, o.d, o.id;

DROP TABLE ug_c, ug_o, ug_l, ug_ch, ug_oh, ug_lh, ug_u, ug_uh;
DROP FUNCTION ug_check(text);
DROP FUNCTION ug_agree(text, text);
DROP FUNCTION ug_run(text);
DROP FUNCTION ug_wrap(text);
