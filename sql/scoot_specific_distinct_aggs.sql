-- DISTINCT aggregates by grouping (src/exec/distinctagg.c): a statement over scoot tables whose
-- aggregates are all count(DISTINCT x) (or min/max/sum/avg of a DISTINCT integer) over one x is
-- planned as GROUP BY (groups, x) under GROUP BY (groups). The plans, the shapes left alone, and
-- the answers: each query's rows with the rewrite, without it (scoot.distinct_aggs = off) and on
-- a heap copy of the data must be the same multiset.
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;

CREATE TABLE da_h (id int PRIMARY KEY, g int, h text, x int, b bigint, n numeric, d date, z text)
  USING heap;
INSERT INTO da_h
SELECT i, CASE WHEN i % 97 = 0 THEN NULL ELSE i % 40 END,
       CASE WHEN i % 89 = 0 THEN NULL ELSE 'h' || (i % 7) END,
       CASE WHEN i % 13 = 0 THEN NULL ELSE (i * 7919) % 300 END,
       CASE WHEN i % 11 = 0 THEN NULL ELSE (i % 50) * 9223372036854775 END,
       CASE WHEN i % 2 = 0 THEN ((i % 30) / 10.0)::numeric ELSE ((i % 30) / 10.00)::numeric END,
       date '2020-01-01' + (i % 400),
       CASE WHEN i % 17 = 0 THEN NULL ELSE 'z' || (i % 23) END
FROM generate_series(1, 20000) i;
CREATE TABLE da_t (LIKE da_h INCLUDING ALL) USING scoot;
INSERT INTO da_t SELECT * FROM da_h;
CREATE TABLE da_e (LIKE da_h) USING scoot;
ANALYZE da_h, da_t, da_e;

-- runs q (over da_t) with the rewrite, without it, and over da_h; rows, and rows not in all three
CREATE TEMP TABLE da_a (); CREATE TEMP TABLE da_b (); CREATE TEMP TABLE da_c ();
CREATE FUNCTION da_check(q text) RETURNS TABLE (rows bigint, differing bigint)
LANGUAGE plpgsql AS $$
BEGIN
  DROP TABLE IF EXISTS da_a, da_b, da_c;
  SET LOCAL scoot.distinct_aggs = on;
  EXECUTE 'CREATE TEMP TABLE da_a AS ' || q;
  SET LOCAL scoot.distinct_aggs = off;
  EXECUTE 'CREATE TEMP TABLE da_b AS ' || q;
  SET LOCAL scoot.distinct_aggs = on;
  EXECUTE 'CREATE TEMP TABLE da_c AS ' || replace(q, 'da_t', 'da_h');
  RETURN QUERY SELECT (SELECT count(*) FROM da_a),
    (SELECT count(*) FROM ((TABLE da_a EXCEPT ALL TABLE da_b) UNION ALL
                           (TABLE da_b EXCEPT ALL TABLE da_a) UNION ALL
                           (TABLE da_a EXCEPT ALL TABLE da_c) UNION ALL
                           (TABLE da_c EXCEPT ALL TABLE da_a)) x);
END $$;

-- the plan: one sort by (groups, x), a Group node, the count over the subquery's order
EXPLAIN (COSTS OFF) SELECT g, count(DISTINCT x) FROM da_t GROUP BY g ORDER BY g;
-- left alone without GROUP BY: PostgreSQL's plan sorts all x once already (and OLTP statements
-- such as TPC-C's stock level keep heap's plan)
EXPLAIN (COSTS OFF) SELECT count(DISTINCT x) FROM da_t;
-- HAVING, ORDER BY the aggregate, LIMIT stay on the outer query; WHERE goes inside
EXPLAIN (COSTS OFF) SELECT g, count(DISTINCT x) AS c FROM da_t WHERE id > 10 GROUP BY g
  HAVING count(DISTINCT x) > 5 ORDER BY c DESC, g LIMIT 3;
SELECT g, count(DISTINCT x) AS c FROM da_t WHERE id > 10 GROUP BY g
  HAVING count(DISTINCT x) > 5 ORDER BY c DESC, g LIMIT 3;
SET scoot.distinct_aggs = off;
EXPLAIN (COSTS OFF) SELECT g, count(DISTINCT x) FROM da_t GROUP BY g ORDER BY g;
SELECT g, count(DISTINCT x) AS c FROM da_t WHERE id > 10 GROUP BY g
  HAVING count(DISTINCT x) > 5 ORDER BY c DESC, g LIMIT 3;
RESET scoot.distinct_aggs;

-- left alone (PostgreSQL's Agg with DISTINCT inside): two different arguments, a DISTINCT and a
-- plain aggregate, sum of a DISTINCT numeric, FILTER, ORDER BY inside the aggregate, a column
-- grouped through the primary key, grouping sets, a window function, a sub-select in the
-- output, a heap table, scoot.custom_scan off
EXPLAIN (COSTS OFF) SELECT g, count(DISTINCT x), count(DISTINCT h) FROM da_t GROUP BY g;
EXPLAIN (COSTS OFF) SELECT g, count(DISTINCT x), count(*) FROM da_t GROUP BY g;
EXPLAIN (COSTS OFF) SELECT g, sum(DISTINCT n) FROM da_t GROUP BY g;
EXPLAIN (COSTS OFF) SELECT g, count(DISTINCT x) FILTER (WHERE id > 5) FROM da_t GROUP BY g;
EXPLAIN (COSTS OFF) SELECT g, string_agg(DISTINCT h, ',' ORDER BY h) FROM da_t GROUP BY g;
EXPLAIN (COSTS OFF) SELECT id, g, count(DISTINCT x) FROM da_t GROUP BY id;
EXPLAIN (COSTS OFF) SELECT g, h, count(DISTINCT x) FROM da_t GROUP BY GROUPING SETS ((g), (h));
EXPLAIN (COSTS OFF) SELECT g, count(DISTINCT x), rank() OVER (ORDER BY g) FROM da_t GROUP BY g;
EXPLAIN (COSTS OFF) SELECT g, count(DISTINCT x), (SELECT 1) FROM da_t GROUP BY g;
EXPLAIN (COSTS OFF) SELECT g, count(DISTINCT x) FROM da_h GROUP BY g;
SET scoot.custom_scan = off;
EXPLAIN (COSTS OFF) SELECT g, count(DISTINCT x) FROM da_t GROUP BY g;
RESET scoot.custom_scan;

-- the answers, shape by shape (NULL groups and NULL x included)
SELECT * FROM da_check('SELECT g, count(DISTINCT x) FROM da_t GROUP BY g');
SELECT * FROM da_check('SELECT count(DISTINCT x) FROM da_t');
SELECT * FROM da_check('SELECT count(DISTINCT x) FROM da_t WHERE id < 0');
SELECT * FROM da_check('SELECT g, count(DISTINCT x) FROM da_t WHERE id < 0 GROUP BY g');
SELECT * FROM da_check('SELECT count(DISTINCT x), sum(DISTINCT x), avg(DISTINCT x), min(DISTINCT x), max(DISTINCT x) FROM da_t');
SELECT * FROM da_check('SELECT g, h, count(DISTINCT z) FROM da_t GROUP BY g, h');
SELECT * FROM da_check('SELECT h, count(DISTINCT x) FROM da_t GROUP BY g, h');
SELECT * FROM da_check('SELECT upper(h) AS u, count(DISTINCT b), sum(DISTINCT b), avg(DISTINCT b) FROM da_t GROUP BY h');
SELECT * FROM da_check('SELECT substr(z, 1, 2) AS s, g % 3 AS m, count(DISTINCT (x % 7)) FROM da_t GROUP BY substr(z, 1, 2), g % 3');
SELECT * FROM da_check('SELECT g, count(DISTINCT n) AS c FROM da_t GROUP BY g HAVING count(DISTINCT n) > 2 AND g > 3');
SELECT * FROM da_check('SELECT g, min(DISTINCT d), max(DISTINCT d), count(DISTINCT d) FROM da_t GROUP BY g');
SELECT * FROM da_check('SELECT DISTINCT count(DISTINCT x) FROM da_t GROUP BY g');
SELECT * FROM da_check('SELECT g, count(DISTINCT x) + 1 AS c1, count(DISTINCT x) * g AS c2 FROM da_t GROUP BY g ORDER BY 2 DESC, 1 LIMIT 7');
SELECT * FROM da_check('SELECT t.g, count(DISTINCT u.x) FROM da_t t JOIN da_t u ON u.id = t.id + 1 WHERE t.h IN (SELECT h FROM da_t WHERE id < 100) GROUP BY t.g');
SELECT * FROM da_check('WITH c AS (SELECT g, x FROM da_t WHERE id % 2 = 0) SELECT g, count(DISTINCT x) FROM c JOIN da_t USING (g, x) GROUP BY g');
SELECT * FROM da_check('SELECT g, count(DISTINCT x) FROM da_e GROUP BY g');
SELECT * FROM da_check('SELECT count(DISTINCT x) FROM da_e');
SELECT * FROM da_check('SELECT g, count(DISTINCT (h, z)) FROM da_t GROUP BY g');

-- every query level: a view, a FROM subquery, a WITH query, sub-selects (correlated too: their
-- references to the enclosing query skip the new level), LATERAL, an outer column in the output
CREATE VIEW da_v AS SELECT g, h, count(DISTINCT x) AS c FROM da_t GROUP BY g, h;
EXPLAIN (COSTS OFF) SELECT * FROM da_v WHERE c > 3;
SELECT * FROM da_check('SELECT * FROM da_v WHERE c > 3');
SELECT * FROM da_check('SELECT g, sum(c) FROM (SELECT g, h, count(DISTINCT z) AS c FROM da_t GROUP BY g, h) s GROUP BY g');
SELECT * FROM da_check('WITH w AS (SELECT h, count(DISTINCT x) AS c FROM da_t GROUP BY h) SELECT t.g, sum(w.c) FROM da_t t JOIN w USING (h) WHERE t.id < 500 GROUP BY t.g');
SELECT * FROM da_check('SELECT o.id, (SELECT count(DISTINCT x) FROM da_t i WHERE i.g = o.g AND i.id < o.id GROUP BY i.g) FROM da_t o WHERE o.id % 97 = 1');
SELECT * FROM da_check('SELECT o.id FROM da_t o WHERE o.id < 3000 AND o.x > (SELECT count(DISTINCT i.x) + o.g FROM da_t i WHERE i.h = o.h AND i.id < 2000 GROUP BY i.h)');
SELECT * FROM da_check('SELECT o.id, l.c, l.m FROM da_t o, LATERAL (SELECT count(DISTINCT i.z) AS c, max(DISTINCT i.x) + o.g AS m FROM da_t i WHERE i.g = o.g AND i.id BETWEEN o.id AND o.id + 300 GROUP BY i.g) l WHERE o.id % 211 = 3');
SELECT * FROM da_check('SELECT o.id, (SELECT string_agg(s.c::text, '','' ORDER BY s.h) FROM (SELECT i.h, count(DISTINCT i.x) AS c FROM da_t i WHERE i.g = o.g GROUP BY i.h) s) FROM da_t o WHERE o.id % 401 = 5');
EXPLAIN (COSTS OFF) SELECT o.id, (SELECT count(DISTINCT x) FROM da_t i WHERE i.g = o.g AND i.id < o.id
  GROUP BY i.g) FROM da_t o WHERE o.id < 3;

-- a prepared statement (parameters in WHERE and HAVING), custom and generic plans
PREPARE da_p(int, int) AS SELECT g, count(DISTINCT x) FROM da_t WHERE id > $1 GROUP BY g
  HAVING count(DISTINCT x) > $2 ORDER BY g;
EXECUTE da_p(19000, 14);
SET plan_cache_mode = force_generic_plan;
EXECUTE da_p(19000, 14);
RESET plan_cache_mode;
SELECT g, count(DISTINCT x) FROM da_h WHERE id > 19000 GROUP BY g HAVING count(DISTINCT x) > 14
  ORDER BY g;
DEALLOCATE da_p;

-- random statements: group keys, a DISTINCT argument and aggregates of it, WHERE, HAVING,
-- ORDER BY / LIMIT drawn at random; each must give the same rows with the rewrite, without it and
-- on heap; those with GROUP BY are rewritten (their plan no longer computes a DISTINCT aggregate)
SELECT setseed(0.4242);
DO $$
DECLARE
  keys text[] := ARRAY['g', 'h', 'z', 'g % 3', 'substr(z, 1, 2)', 'd', 'x % 5'];
  args text[] := ARRAY['x', 'b', 'n', 'd', 'z', 'x % 7', '(h, z)', 'g + x', 'id % 50'];
  ints text[] := ARRAY['x', 'b', 'x % 7', 'g + x', 'id % 50'];
  preds text[] := ARRAY['id > 5000', 'x < 150', 'h IS NOT NULL', 'z LIKE ''z1%''', 'g BETWEEN 3 AND 20',
                        'b IS NULL', 'n > 1', 'd < date ''2020-06-01''', 'x IS NULL OR g = 7'];
  q text; sel text; grp text; arg text; k text; aggs text; plan text; line text; ord text;
  n int := 0; bad bigint := 0; rows bigint; d bigint; rewritten int := 0; nk int; ncols int;
BEGIN
  FOR i IN 1..300 LOOP
    arg := args[1 + floor(random() * array_length(args, 1))::int];
    ncols := 1;
    IF arg = ANY (ints) THEN
      aggs := (ARRAY['count', 'sum', 'avg', 'min', 'max'])[1 + floor(random() * 5)::int] || '(DISTINCT ' || arg || ') AS a';
      IF random() < 0.5 THEN aggs := aggs || ', count(DISTINCT ' || arg || ') + 1 AS c2'; ncols := 2; END IF;
    ELSIF arg = 'd' THEN
      aggs := (ARRAY['count', 'min', 'max'])[1 + floor(random() * 3)::int] || '(DISTINCT d) AS a';
    ELSE
      aggs := 'count(DISTINCT ' || arg || ') AS a';
    END IF;
    grp := ''; sel := '';
    nk := floor(random() * 3)::int;
    FOR j IN 1..nk LOOP
      k := keys[1 + floor(random() * array_length(keys, 1))::int];
      grp := grp || CASE WHEN grp = '' THEN '' ELSE ', ' END || k;
      IF random() < 0.8 THEN sel := sel || k || ' AS k' || j || ', '; ncols := ncols + 1; END IF;
    END LOOP;
    q := 'SELECT ' || sel || aggs || ' FROM da_t';
    IF random() < 0.6 THEN q := q || ' WHERE ' || preds[1 + floor(random() * array_length(preds, 1))::int]; END IF;
    IF grp <> '' THEN q := q || ' GROUP BY ' || grp; END IF;
    IF random() < 0.3 THEN q := q || ' HAVING count(DISTINCT ' || arg || ') > ' || floor(random() * 10)::int; END IF;
    IF random() < 0.2 THEN
      -- every output column in the ORDER BY: the rows LIMIT keeps do not depend on ties
      ord := '';
      FOR c IN 1..ncols LOOP ord := ord || CASE WHEN ord = '' THEN '' ELSE ', ' END || c; END LOOP;
      q := q || ' ORDER BY ' || ord || ' LIMIT 5';
    END IF;
    SELECT r.rows, r.differing INTO rows, d FROM da_check(q) r;
    IF d <> 0 THEN RAISE WARNING 'differs: %', q; END IF;
    bad := bad + d;
    n := n + 1;
    plan := '';
    FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP plan := plan || line || ' '; END LOOP;
    IF plan NOT LIKE '%(DISTINCT %' THEN rewritten := rewritten + 1; END IF;
  END LOOP;
  RAISE NOTICE 'random statements: %, differing rows: %, rewritten: %', n, bad, rewritten;
END $$;

-- errors raised inside the argument still reach the client
SELECT g, count(DISTINCT 1 / (x - x)) FROM da_t WHERE x IS NOT NULL GROUP BY g;

DROP FUNCTION da_check(text);
DROP TABLE IF EXISTS da_a, da_b, da_c;
DROP VIEW da_v;
DROP TABLE da_t, da_h, da_e;
