-- scoot_specific_hash_readahead: a hash join whose outer side is not a scoot scan reads that
-- side a few rows ahead and prefetches the buckets those rows will probe
-- (src/exec/readahead.c). The answers must not change; reading ahead must be invisible where
-- it could be told apart (volatile functions, rescans, LIMIT, cursors); and where it is on, a
-- function that lies about its volatility shows it (the order of its NOTICEs).
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;
SET enable_nestloop = off;
SET enable_mergejoin = off;

-- inner: a hash table of more than 1 MB (smaller ones are probed without read-ahead)
CREATE TABLE ra_big (k int, v int) USING scoot;
INSERT INTO ra_big SELECT i, i % 97 FROM generate_series(1, 40000) i;
-- outer: rows in insertion order, each matching one ra_big row
CREATE TABLE ra_mid (k int, b int) USING scoot;
INSERT INTO ra_mid SELECT i, (i * 7919) % 40000 + 1 FROM generate_series(1, 100000) i;
CREATE TABLE ra_dim (k int, name text) USING scoot;
INSERT INTO ra_dim SELECT i, 'd' || i FROM generate_series(0, 96) i;
CREATE TABLE ra_midh (LIKE ra_mid) USING heap;
INSERT INTO ra_midh SELECT * FROM ra_mid;
CREATE TABLE ra_bigh (LIKE ra_big) USING heap;
INSERT INTO ra_bigh SELECT * FROM ra_big;
ANALYZE ra_big, ra_mid, ra_dim, ra_midh, ra_bigh;

-- says which row it sees (the first four), returns k; marked STABLE although it is not
CREATE FUNCTION ra_note(tag text, k int) RETURNS int LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF k <= 4 THEN RAISE NOTICE '% %', tag, k; END IF;
  RETURN k;
END $$;
CREATE FUNCTION ra_note_v(tag text, k int) RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF k <= 4 THEN RAISE NOTICE '% %', tag, k; END IF;
  RETURN k;
END $$;

-- the join's outer side is a subquery (not a scoot scan), its inner side ra_big's 40k rows
EXPLAIN (COSTS OFF)
SELECT count(ra_note('top', x.k)), sum(x.o), sum(b.v)
FROM (SELECT k, b, ra_note('outer', k) AS o FROM ra_mid OFFSET 0) x JOIN ra_big b ON b.k = x.b;

-- off: each outer row is joined before the next one is read (outer 1, top 1, outer 2, top 2...)
SET scoot.hash_join_readahead = off;
SELECT count(ra_note('top', x.k)), sum(x.o), sum(b.v)
FROM (SELECT k, b, ra_note('outer', k) AS o FROM ra_mid OFFSET 0) x JOIN ra_big b ON b.k = x.b;
-- on: the outer rows are read in batches of 1, 2, 4, ... ahead of the join (outer 3 and outer 4
-- before top 3), the answer is the same
SET scoot.hash_join_readahead = on;
SELECT count(ra_note('top', x.k)), sum(x.o), sum(b.v)
FROM (SELECT k, b, ra_note('outer', k) AS o FROM ra_mid OFFSET 0) x JOIN ra_big b ON b.k = x.b;
-- a volatile function on the outer side: no read-ahead (strict alternation again)
SELECT count(ra_note('top', x.k)), sum(x.o), sum(b.v)
FROM (SELECT k, b, ra_note_v('outer', k) AS o FROM ra_mid OFFSET 0) x JOIN ra_big b ON b.k = x.b;
-- below a LIMIT (with nothing in between that reads everything): no read-ahead
SELECT ra_note('top', x.k) AS k, x.o, b.v
FROM (SELECT k, b, ra_note('outer', k) AS o FROM ra_mid OFFSET 0) x JOIN ra_big b ON b.k = x.b
LIMIT 3;
-- an error in an outer row the LIMIT never reaches stays unseen, as on heap
SELECT x.k, x.o, b.v
FROM (SELECT k, b, 1 / (k - 4) AS o FROM ra_mid OFFSET 0) x JOIN ra_big b ON b.k = x.b
LIMIT 3;
-- a LIMIT above a sort of the join: the join runs to its end anyway, read-ahead on
SELECT ra_note('top', x.k) AS k, x.o, b.v
FROM (SELECT k, b, ra_note('outer', k) AS o FROM ra_mid OFFSET 0) x JOIN ra_big b ON b.k = x.b
ORDER BY 1 LIMIT 2;

-- answers equal with and without read-ahead, and equal to heap's: a chain of joins (the upper
-- joins' outer side is a join), grouped
CREATE TEMP TABLE ra_answers (q text, mode text, answer text);
CREATE FUNCTION ra_check(q text, sql text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE m text; a text;
BEGIN
  FOREACH m IN ARRAY ARRAY['off', 'on'] LOOP
    PERFORM set_config('scoot.hash_join_readahead', m, true);
    EXECUTE 'SELECT md5(string_agg(r::text, ''|'' ORDER BY r::text)) FROM (' || sql || ') r' INTO a;
    INSERT INTO ra_answers VALUES (q, m, a);
  END LOOP;
  EXECUTE 'SELECT md5(string_agg(r::text, ''|'' ORDER BY r::text)) FROM (' ||
          replace(replace(sql, 'ra_mid ', 'ra_midh '), 'ra_big ', 'ra_bigh ') || ') r' INTO a;
  INSERT INTO ra_answers VALUES (q, 'heap', a);
END $$;
SELECT ra_check('chain', $q$
  SELECT d.name, count(*), sum(m.k), sum(b.v)
  FROM ra_mid m JOIN ra_big b ON b.k = m.b JOIN ra_mid m2 ON m2.k = b.k JOIN ra_dim d ON d.k = b.v
  GROUP BY d.name $q$);
-- the same over plain scans (no ScootScan prefetching for its join: every join reads ahead)
SET scoot.custom_scan = off;
SELECT ra_check('chain, plain scans', $q$
  SELECT d.name, count(*), sum(m.k), sum(b.v)
  FROM ra_mid m JOIN ra_big b ON b.k = m.b JOIN ra_mid m2 ON m2.k = b.k JOIN ra_dim d ON d.k = b.v
  GROUP BY d.name $q$);
RESET scoot.custom_scan;
SELECT ra_check('outer nulls', $q$
  SELECT x.k, b.v FROM (SELECT k, CASE WHEN k % 3 = 0 THEN NULL ELSE b END AS b FROM ra_mid OFFSET 0) x
  LEFT JOIN ra_big b ON b.k = x.b $q$);
SELECT ra_check('semi', $q$
  SELECT count(*) FROM (SELECT k, b FROM ra_mid OFFSET 0) x
  WHERE EXISTS (SELECT 1 FROM ra_big b WHERE b.k = x.b AND b.v < 50) $q$);
SELECT ra_check('wide outer', $q$
  SELECT x.k, x.t, b.v FROM (SELECT k, b, repeat('w', k % 50) || k AS t FROM ra_mid OFFSET 0) x
  JOIN ra_big b ON b.k = x.b $q$);
-- a hash join inside a correlated subquery (rerun per row): never read ahead
SELECT ra_check('subplan', $q$
  SELECT d.k, (SELECT count(*) FROM (SELECT k, b FROM ra_mid OFFSET 0) x JOIN ra_big b ON b.k = x.b
               WHERE x.k % 97 = d.k) FROM ra_dim d WHERE d.k < 5 $q$);
SELECT q, count(DISTINCT answer) AS answers, count(*) AS runs FROM ra_answers GROUP BY q ORDER BY q;

-- cursors: a partial FETCH stops the read-ahead; a scrollable one never has it
BEGIN;
DECLARE c CURSOR FOR
  SELECT ra_note('top', x.k) AS k, x.o, b.v
  FROM (SELECT k, b, ra_note('outer', k) AS o FROM ra_mid OFFSET 0) x JOIN ra_big b ON b.k = x.b;
FETCH 3 FROM c;
FETCH 2 FROM c;
CLOSE c;
DECLARE s SCROLL CURSOR FOR
  SELECT x.k, b.v FROM (SELECT k, b FROM ra_mid OFFSET 0) x JOIN ra_big b ON b.k = x.b;
FETCH 3 FROM s;
FETCH BACKWARD 2 FROM s;
MOVE ABSOLUTE 0 IN s;
FETCH 2 FROM s;
COMMIT;

DROP TABLE ra_big, ra_mid, ra_dim, ra_midh, ra_bigh;
DROP FUNCTION ra_note(text, int), ra_note_v(text, int), ra_check(text, text);
