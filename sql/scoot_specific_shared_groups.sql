-- ScootShare: a grouped subquery over scoot tables that a statement reads more than once (a view
-- joined and aggregated again in a subquery, as CH-benCHmark's and TPC-H's Q15) is computed once;
-- every occurrence reads the same rows and applies its own HAVING. Which statements share (EXPLAIN
-- counts the nodes and says which one computed the rows), which must not (a correlated
-- reference, a qual pushed into one reference's WHERE, volatile functions, heap tables,
-- scoot.shared_groups = off), rescans of a shared node under changing parameters, and a
-- differential check: every statement answers as on heap copies and with sharing off.
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;

CREATE TABLE sh_l (i int, w int, amount numeric(10,2), d date) USING scoot;
CREATE TABLE sh_s (i int, w int, qty int) USING scoot;
CREATE TABLE sh_sup (k int PRIMARY KEY, name text) USING scoot;
CREATE TABLE sh_lh (LIKE sh_l) USING heap;
CREATE TABLE sh_sh (LIKE sh_s) USING heap;
CREATE TABLE sh_suph (LIKE sh_sup INCLUDING INDEXES) USING heap;
INSERT INTO sh_lh
SELECT 1 + (n * 7) % 500, 1 + n % 2, CASE WHEN n % 13 = 0 THEN NULL ELSE (n % 997) / 10.0 END,
       date '2024-01-01' + n % 60
FROM generate_series(1, 6000) n;
INSERT INTO sh_sh SELECT i, w, (i * w) % 17 FROM generate_series(1, 500) i, generate_series(1, 2) w;
INSERT INTO sh_suph SELECT k, 'supplier ' || k FROM generate_series(0, 49) k;
INSERT INTO sh_l SELECT * FROM sh_lh;
INSERT INTO sh_s SELECT * FROM sh_sh;
INSERT INTO sh_sup SELECT * FROM sh_suph;
ANALYZE sh_l, sh_s, sh_sup, sh_lh, sh_sh, sh_suph;

-- Q15's view: revenue per supplier (a hash of the stock row)
CREATE VIEW sh_rev (k, total) AS
  SELECT mod(s.w * s.i, 50), sum(l.amount) FROM sh_l l, sh_s s
  WHERE l.i = s.i AND l.w = s.w AND l.d >= date '2024-01-05' GROUP BY mod(s.w * s.i, 50);
CREATE VIEW sh_revh (k, total) AS
  SELECT mod(s.w * s.i, 50), sum(l.amount) FROM sh_lh l, sh_sh s
  WHERE l.i = s.i AND l.w = s.w AND l.d >= date '2024-01-05' GROUP BY mod(s.w * s.i, 50);
-- ... with a HAVING of its own on an aggregate it does not return
CREATE VIEW sh_busy (k, total) AS
  SELECT mod(s.w * s.i, 50), sum(l.amount) FROM sh_l l, sh_s s
  WHERE l.i = s.i AND l.w = s.w GROUP BY mod(s.w * s.i, 50) HAVING count(l.amount) > 110;
CREATE VIEW sh_busyh (k, total) AS
  SELECT mod(s.w * s.i, 50), sum(l.amount) FROM sh_lh l, sh_sh s
  WHERE l.i = s.i AND l.w = s.w GROUP BY mod(s.w * s.i, 50) HAVING count(l.amount) > 110;
-- ... and one that calls a volatile function
CREATE VIEW sh_vol (k, total) AS
  SELECT mod(s.w * s.i, 50), sum(l.amount) + (random() * 0)::int FROM sh_l l, sh_s s
  WHERE l.i = s.i AND l.w = s.w GROUP BY mod(s.w * s.i, 50);
CREATE VIEW sh_volh (k, total) AS
  SELECT mod(s.w * s.i, 50), sum(l.amount) + (random() * 0)::int FROM sh_lh l, sh_sh s
  WHERE l.i = s.i AND l.w = s.w GROUP BY mod(s.w * s.i, 50);

-- the statement that computes q's answer (an md5 of its sorted rows and their count)
CREATE FUNCTION sh_wrap(q text) RETURNS text LANGUAGE sql AS $$
  SELECT format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) || '' '' || count(*) FROM (%s) x', q)
$$;
CREATE FUNCTION sh_run(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE sh_wrap(q) INTO r;
  RETURN r;
END $$;
-- how many ScootShare nodes the plan computing q's answer has and how many of them share, after
-- raising unless q answers as its heap version hq and with scoot.shared_groups = off
CREATE FUNCTION sh_check(q text, hq text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r_s text; r_h text; r_off text; p text; nodes int := 0; shared int := 0;
BEGIN
  FOR p IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || sh_wrap(q) LOOP
    IF p LIKE '%Custom Scan (ScootShare)%' THEN nodes := nodes + 1; END IF;
    IF p LIKE '%Scoot Shared Result: computed%' OR p LIKE '%Scoot Shared Result: read%' THEN
      shared := shared + 1;
    END IF;
  END LOOP;
  r_s := sh_run(q);
  r_h := sh_run(hq);
  SET LOCAL scoot.shared_groups = off;
  r_off := sh_run(q);
  SET LOCAL scoot.shared_groups = on;
  IF r_s <> r_h OR r_s <> r_off THEN
    RAISE EXCEPTION 'query % differs: scoot % heap % off %', q, r_s, r_h, r_off;
  END IF;
  RETURN format('%s ScootShare node(s), %s sharing, rows %s', nodes, shared, split_part(r_s, ' ', 2));
END $$;
CREATE FUNCTION sh_check(q text) RETURNS text LANGUAGE sql AS $$
  SELECT sh_check(q, replace(replace(replace(replace(replace(replace(q, 'sh_rev ', 'sh_revh '),
         'sh_busy ', 'sh_busyh '), 'sh_vol ', 'sh_volh '), 'sh_l ', 'sh_lh '), 'sh_s ', 'sh_sh '), 'sh_sup ', 'sh_suph '))
$$;
-- EXPLAIN ANALYZE without the numbers that vary between runs
CREATE FUNCTION sh_analyze(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE p text;
BEGIN
  FOR p IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF p NOT LIKE '%Memory%' AND p NOT LIKE '%Scoot Snapshot%' AND p NOT LIKE '%Scoot Blocks%' THEN
      RETURN NEXT p;
    END IF;
  END LOOP;
END $$;

-- Q15's shape: the view joined to the suppliers, its maximum in a subquery. The subquery's
-- reference computes nothing itself: the first node to run fills the shared rows
SELECT sh_analyze($q$
SELECT s.k, s.name, r.total FROM sh_sup s, sh_rev r
WHERE s.k = r.k AND r.total = (SELECT max(total) FROM sh_rev) ORDER BY s.k$q$);
SELECT s.k, s.name, r.total FROM sh_sup s, sh_rev r
WHERE s.k = r.k AND r.total = (SELECT max(total) FROM sh_rev) ORDER BY s.k;
SELECT sh_check($q$
SELECT s.k, s.name, r.total FROM sh_sup s, sh_rev r
WHERE s.k = r.k AND r.total = (SELECT max(total) FROM sh_rev) ORDER BY s.k$q$);
-- the same with sorted aggregation
SET enable_hashagg = off;
SELECT sh_check($q$
SELECT s.k, s.name, r.total FROM sh_sup s, sh_rev r
WHERE s.k = r.k AND r.total = (SELECT max(total) FROM sh_rev) ORDER BY s.k$q$);
RESET enable_hashagg;
-- three references, one under a UNION ALL, one with a HAVING pushed into it
SELECT sh_check($q$
SELECT k, total FROM sh_rev UNION ALL SELECT k, total FROM sh_rev
UNION ALL SELECT k, total FROM sh_rev WHERE total > (SELECT avg(total) FROM sh_rev )$q$);
-- the view's own HAVING (on an aggregate it does not return) and one pushed from outside
SELECT sh_check($q$
SELECT b.k, b.total FROM sh_busy b WHERE b.total >= (SELECT max(total) - 40 FROM sh_busy )$q$);
-- a reference rescanned with a new parameter per outer row: the rows are computed once, the
-- pushed-down HAVING (total > a value of the outer row) is applied on every rescan. (A
-- reference that does not read `total` would differ: PostgreSQL drops the unread output.)
SELECT sh_analyze($q$
SELECT s.k, (SELECT sum(total) FROM sh_rev r WHERE r.total > 5600 + s.k) AS above,
       (SELECT max(total) FROM sh_rev) AS top
FROM sh_sup s WHERE s.k < 5 ORDER BY s.k$q$);
SELECT sh_check($q$
SELECT s.k, (SELECT sum(total) FROM sh_rev r WHERE r.total > 5600 + s.k) AS above,
       (SELECT max(total) FROM sh_rev ) AS top
FROM sh_sup s ORDER BY s.k$q$);

-- not shared: a reference correlated through a grouped column (the qual moves into its WHERE)
SELECT sh_check($q$
SELECT s.k, (SELECT max(total) FROM sh_rev r WHERE r.k = s.k), (SELECT sum(total) FROM sh_rev )
FROM sh_sup s ORDER BY s.k$q$);
-- ... a qual on a grouped column pushed into one reference's WHERE: the nodes are there, but their
-- subqueries differ, so each computes its own rows
SELECT sh_check($q$
SELECT r.k, r.total, (SELECT max(total) FROM sh_rev ) FROM sh_rev r WHERE r.k < 10$q$);
-- ... a volatile function
SELECT sh_check($q$
SELECT k, total FROM sh_vol UNION ALL SELECT k, total FROM sh_vol $q$);
-- ... heap tables only
SELECT sh_check($q$
SELECT k, total FROM sh_revh UNION ALL SELECT k, total FROM sh_revh$q$);
-- ... scoot.shared_groups = off
SET scoot.shared_groups = off;
EXPLAIN (COSTS OFF)
SELECT s.k, s.name, r.total FROM sh_sup s, sh_rev r
WHERE s.k = r.k AND r.total = (SELECT max(total) FROM sh_rev) ORDER BY s.k;
RESET scoot.shared_groups;

-- rows written in the same transaction, then read twice by one statement
BEGIN;
INSERT INTO sh_l SELECT i, 1, 1000, date '2024-02-01' FROM generate_series(1, 500, 7) i;
INSERT INTO sh_lh SELECT i, 1, 1000, date '2024-02-01' FROM generate_series(1, 500, 7) i;
SELECT sh_check($q$
SELECT s.k, s.name, r.total FROM sh_sup s, sh_rev r
WHERE s.k = r.k AND r.total = (SELECT max(total) FROM sh_rev) ORDER BY s.k$q$);
ROLLBACK;

-- a cursor read in both directions over a shared statement (the plan adds what scrolling needs)
BEGIN;
DECLARE c SCROLL CURSOR FOR
  SELECT k, total FROM sh_rev WHERE total > (SELECT avg(total) FROM sh_rev) ORDER BY total DESC, k;
FETCH 3 FROM c;
FETCH BACKWARD 2 FROM c;
FETCH ABSOLUTE 5 FROM c;
COMMIT;

DROP VIEW sh_rev, sh_revh, sh_busy, sh_busyh, sh_vol, sh_volh;
DROP TABLE sh_l, sh_s, sh_sup, sh_lh, sh_sh, sh_suph;
DROP FUNCTION sh_wrap, sh_run, sh_check(text, text), sh_check(text), sh_analyze;
