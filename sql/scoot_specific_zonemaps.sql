-- Zone maps: every block keeps the least and greatest value written to each integer-like,
-- date/timestamp, scaled-numeric, float and character column; ScootScan and ScootAgg skip a block no row of which
-- can pass the block filters (EXPLAIN ANALYZE: "Scoot Blocks Skipped by Zone Maps"). Checked
-- here: skipping on clustered data, no block wrongly skipped after UPDATE, DELETE, VACUUM (which
-- narrows the zones), rollbacks, NULL-only columns, NaN, a column added with a default (absent
-- from old blocks), an OLAP snapshot image; and a differential check of random range queries
-- against a heap copy and against plain scans, between rounds of random writes.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;

CREATE TABLE zm_s (id int8, s int2, a int4, n numeric(12,2), d date, ts timestamp, nn int4, t text) USING scoot;
CREATE TABLE zm_h (LIKE zm_s) USING heap;
-- clustered on id, d, ts, n (insert order); a is spread; nn is NULL everywhere
INSERT INTO zm_s
SELECT i, (i % 20000 - 10000)::int2, (i * 7919) % 100000, i / 100.0, date '2020-01-01' + i / 1000,
       timestamp '2020-01-01' + i * interval '1 minute', NULL, 't' || (i % 10)
FROM generate_series(1, 200000) i;
INSERT INTO zm_h SELECT * FROM zm_s;
ANALYZE zm_s, zm_h;
SELECT count(*) > 4 AS several_blocks FROM (SELECT DISTINCT (ctid::text::point)[0]::int / 128 FROM zm_s) b;

-- a narrow range of a clustered column reads one or two blocks
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM zm_s WHERE id BETWEEN 100000 AND 100500;
SELECT count(*), sum(n) FROM zm_s WHERE id BETWEEN 100000 AND 100500;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT id, a FROM zm_s WHERE d = date '2020-03-01';
SELECT count(*), min(id), max(id) FROM (SELECT id, a FROM zm_s WHERE d = date '2020-03-01') q;
-- an OR skips a block only when none of its arms can pass there: two narrow ranges read their
-- blocks only; an arm on the spread column (or the NULL-only one's IS NULL) reads them all
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM zm_s WHERE id BETWEEN 1000 AND 1500 OR id > 199500;
SELECT count(*), sum(n) FROM zm_s WHERE id BETWEEN 1000 AND 1500 OR id > 199500;
SELECT count(*), sum(n) FROM zm_h WHERE id BETWEEN 1000 AND 1500 OR id > 199500;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM zm_s WHERE (id < 100 AND a > 5) OR a = 77;
SELECT count(*) FROM zm_s WHERE (id < 100 AND a > 5) OR a = 77;
SELECT count(*) FROM zm_h WHERE (id < 100 AND a > 5) OR a = 77;
SELECT count(*) FROM zm_s WHERE id > 10000000 OR nn IS NULL;
SELECT count(*) FROM zm_s WHERE id > 10000000 OR nn > 0;
-- nothing matches: every block skipped; NULL-only column: IS NOT NULL and comparisons skip all
SELECT count(*) FROM zm_s WHERE id > 10000000;
SELECT count(*) FROM zm_s WHERE nn > 0;
SELECT count(*) FROM zm_s WHERE nn IS NOT NULL;
SELECT count(*) FROM zm_s WHERE nn IS NULL;
-- IN lists, cross-width constants, numeric and timestamp ranges
SELECT count(*) FROM zm_s WHERE id IN (5, 150000, 99999999);
SELECT count(*) FROM zm_s WHERE s < int8 '-9990';
SELECT count(*) FROM zm_s WHERE n >= 1999.99;
SELECT count(*) FROM zm_s WHERE ts < timestamp '2020-01-01 00:05';
SELECT count(*) FROM zm_s WHERE d >= date '2020-06-01' + interval '1 day';

-- UPDATE moves a row's value far outside its block's old range; the new version's block widens
UPDATE zm_s SET id = 5000000, n = -77.5 WHERE id = 12345;
UPDATE zm_h SET id = 5000000, n = -77.5 WHERE id = 12345;
SELECT id, n FROM zm_s WHERE id > 4000000;
SELECT id, n FROM zm_s WHERE n < 0;
SELECT count(*) FROM zm_s WHERE id = 12345;
-- a rolled-back insert widened a zone; the row stays invisible
BEGIN;
INSERT INTO zm_s (id, n) VALUES (-1, 1e9);
SELECT count(*) FROM zm_s WHERE id < 0;
ROLLBACK;
SELECT count(*) FROM zm_s WHERE id < 0;
SELECT count(*) FROM zm_s WHERE n > 1e8;
-- NaN sorts above every number: it passes > and >=
INSERT INTO zm_s (id, n) VALUES (7000000, 'NaN');
INSERT INTO zm_h (id, n) VALUES (7000000, 'NaN');
SELECT id, n FROM zm_s WHERE n > 5000 ORDER BY id;
SELECT count(*) FROM zm_s WHERE n = 5000;

-- DELETE then VACUUM: the zones narrow to the rows left, so more blocks are skipped
DELETE FROM zm_s WHERE id BETWEEN 150001 AND 200000;
DELETE FROM zm_h WHERE id BETWEEN 150001 AND 200000;
CREATE TEMP TABLE zm_skips (phase text, skipped int);
CREATE FUNCTION zm_skipped(q text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE l text; BEGIN
  FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF l LIKE '%Skipped by Zone Maps%' THEN RETURN substring(l FROM ': (\d+)')::int; END IF;
  END LOOP;
  RETURN 0;
END $$;
INSERT INTO zm_skips SELECT 'before vacuum', zm_skipped('SELECT count(*) FROM zm_s WHERE id > 150000 AND id < 1000000');
-- a live OLAP snapshot image older than the DELETE would keep the deleted rows (and the zones):
-- read a fresh one first, so that the older images are released
SET scoot.olap = on;
SET scoot.snapshot_max_age = 0;
SELECT count(*) FROM zm_s WHERE id > 150000;
RESET scoot.snapshot_max_age;
RESET scoot.olap;
DO $$ BEGIN FOR i IN 1..200 LOOP EXIT WHEN NOT EXISTS (SELECT FROM scoot.snapshots WHERE state <> 'newest'); PERFORM pg_sleep(0.05); END LOOP; END $$;
VACUUM zm_s;
INSERT INTO zm_skips SELECT 'after vacuum', zm_skipped('SELECT count(*) FROM zm_s WHERE id > 150000 AND id < 1000000');
SELECT (SELECT skipped FROM zm_skips WHERE phase = 'after vacuum')
     > (SELECT skipped FROM zm_skips WHERE phase = 'before vacuum') AS vacuum_narrowed;
SELECT count(*) FROM zm_s WHERE id > 150000 AND id < 1000000;
SELECT count(*) FROM zm_s WHERE id > 150000;

-- a column added with a default: old blocks do not store it, and are never skipped for it
ALTER TABLE zm_s ADD COLUMN extra int DEFAULT 5;
ALTER TABLE zm_h ADD COLUMN extra int DEFAULT 5;
INSERT INTO zm_s (id, extra) VALUES (8000000, 9);
INSERT INTO zm_h (id, extra) VALUES (8000000, 9);
SELECT count(*) FROM zm_s WHERE extra = 5;
SELECT count(*) FROM zm_s WHERE extra > 6;
SELECT sum(extra) FROM zm_s WHERE extra >= 5;

-- differential: random range filters after random writes, scoot vs heap vs plain scans
CREATE FUNCTION zm_check(n int, seed float8) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  preds text[] := ARRAY[
    'id > %s', 'id <= %s', 'id BETWEEN %s AND %s', 'id = %s', 'id IN (%s, %s, 77)',
    'a < %s', 'a >= %s AND a < %s', 's > %s %% 10000', 's = %s %% 10000',
    'n > %s / 1.5', 'n BETWEEN %s AND %s', 'n = %s',
    'd < date ''2020-01-01'' + %s / 1000', 'd = date ''2020-01-01'' + %s / 1000',
    'ts >= timestamp ''2020-01-01'' + %s * interval ''1 minute''', 'nn > %s', 'nn IS NOT NULL',
    'extra > %s %% 10', 'extra = 5', 'id IS NULL'];
  i int; pred text; q text; r_s text; r_h text; r_off text; checked int := 0; skipping int := 0;
  x int; y int;
BEGIN
  PERFORM setseed(seed);
  FOR i IN 1..n LOOP
    x := floor(random() * 220000)::int - 10000;
    y := x + floor(random() * 20000)::int;
    pred := format(preds[1 + floor(random() * array_length(preds, 1))::int], x, y);
    IF random() < 0.3 THEN
      pred := pred || ' AND ' || format(preds[1 + floor(random() * array_length(preds, 1))::int], y, x + 30000);
    END IF;
    q := format('SELECT count(*), sum(id), sum(n), max(ts)::text FROM zm_s WHERE %s', pred);
    EXECUTE 'SELECT row(q.*)::text FROM (' || q || ') q' INTO r_s;
    EXECUTE 'SELECT row(q.*)::text FROM (' || replace(q, 'zm_s', 'zm_h') || ') q' INTO r_h;
    SET LOCAL scoot.custom_scan = off;
    EXECUTE 'SELECT row(q.*)::text FROM (' || q || ') q' INTO r_off;
    SET LOCAL scoot.custom_scan = on;
    IF r_s <> r_h OR r_s <> r_off THEN
      RAISE EXCEPTION 'query % differs: scoot % heap % plain %', q, r_s, r_h, r_off;
    END IF;
    checked := checked + 1;
    IF zm_skipped(q) > 0 THEN skipping := skipping + 1; END IF;
  END LOOP;
  RETURN format('%s queries agree, zone maps skipped blocks in over 20%% of them: %s', checked, skipping > n / 5);
END $$;
CREATE FUNCTION zm_writes(seed float8) RETURNS void LANGUAGE plpgsql AS $$
DECLARE x int; t text; BEGIN
  PERFORM setseed(seed);
  x := floor(random() * 200000)::int;
  FOREACH t IN ARRAY ARRAY['zm_s', 'zm_h'] LOOP
    EXECUTE format('UPDATE %I SET id = id + 300000, a = -a, n = n * 2 WHERE id BETWEEN %s AND %s', t, x, x + 3000);
    EXECUTE format('DELETE FROM %I WHERE id BETWEEN %s AND %s', t, x + 5000, x + 9000);
    EXECUTE format('INSERT INTO %I (id, s, a, n, d, ts, nn) SELECT g, (g %% 300)::int2, g, g / 3.0, date ''2021-01-01'' + g %% 50, timestamp ''2019-06-01'' + g * interval ''1 second'', g FROM generate_series(%s, %s) g', t, x, x + 700);
  END LOOP;
END $$;
SELECT zm_check(200, 0.21);
SELECT zm_writes(0.4);
SELECT zm_check(200, 0.22);
SELECT zm_writes(0.6);
VACUUM zm_s;
SELECT zm_check(200, 0.23);

-- an OLAP snapshot image skips blocks by the zones it holds (filtered scans of an image while
-- rows are deleted and vacuumed: the olap-frozen isolation spec)
SELECT pg_sleep(1.2);
SET scoot.olap = on;
SELECT count(*), sum(id) FROM zm_s WHERE id BETWEEN 1000 AND 90000;
SELECT zm_skipped('SELECT count(*), sum(id) FROM zm_s WHERE id BETWEEN 1000 AND 90000') > 0 AS image_skips;
RESET scoot.olap;
SELECT count(*), sum(id) FROM zm_h WHERE id BETWEEN 1000 AND 90000;

-- float and character zone maps: float4/float8 in PostgreSQL's order (-0 = 0, NaN above
-- every number), text/varchar/char(n) by their first 16 bytes (=, IN, LIKE 'prefix%'; char(n)
-- ignores trailing spaces for =); a compressed value widens its block's zone to everything
CREATE TABLE zt_s (id int, f float8, r float4, t text, v varchar(12), c char(6), lt text) USING scoot;
CREATE TABLE zt_h (LIKE zt_s) USING heap;
INSERT INTO zt_s
SELECT i, i / 7.0 - 5000, (i % 1000 + i / 1000 * 1000)::float4 / 3, lpad(i::text, 8, '0'),
       'v' || lpad(i::text, 7, '0'), lpad((i / 100)::text, 4, '0'),
       'same-long-prefix-0123456789-' || lpad(i::text, 8, '0')
FROM generate_series(1, 100000) i;
INSERT INTO zt_h SELECT * FROM zt_s;
-- NaN, infinities, -0, NULLs, a compressed value (widens its block's zone)
INSERT INTO zt_s VALUES (100001, 'NaN', 'NaN', NULL, NULL, NULL, NULL), (100002, '-Infinity', '-0', 'zzz', 'v', 'ab', repeat('x', 100000)),
                         (100003, '-0', 'Infinity', repeat('00000042', 5000), NULL, 'ab  ', NULL);
INSERT INTO zt_h SELECT * FROM zt_s WHERE id > 100000;
ANALYZE zt_s, zt_h;
SELECT zm_skipped('SELECT count(*) FROM zt_s WHERE f > 9000') > 0 AS float_skips,
       zm_skipped('SELECT count(*) FROM zt_s WHERE r < 10') > 0 AS float4_skips,
       zm_skipped('SELECT count(*) FROM zt_s WHERE t = ''00050000''') > 0 AS text_skips,
       zm_skipped('SELECT count(*) FROM zt_s WHERE v IN (''v0000007'', ''v0099999'')') > 0 AS varchar_skips,
       zm_skipped('SELECT count(*) FROM zt_s WHERE t LIKE ''0009%''') > 0 AS like_skips,
       zm_skipped('SELECT count(*) FROM zt_s WHERE c = ''0500''') > 0 AS char_skips,
       zm_skipped('SELECT count(*) FROM zt_s WHERE lt = ''same-long-prefix-0123456789-00000001''') AS long_prefix_skips;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM zt_s WHERE t LIKE '0009%';
SELECT count(*) FROM zt_s WHERE f = 'NaN';
SELECT count(*) FROM zt_s WHERE f > 'Infinity';
SELECT count(*) FROM zt_s WHERE f >= 'Infinity';
SELECT count(*) FROM zt_s WHERE f = 0;
SELECT count(*) FROM zt_s WHERE r = float8 '-0';
SELECT count(*) FROM zt_s WHERE r > 1e30;
SELECT count(*) FROM zt_s WHERE f < -4999.8;
SELECT count(*) FROM zt_s WHERE t = repeat('00000042', 5000);
SELECT count(*) FROM zt_s WHERE t LIKE '00000042000%';
SELECT count(*) FROM zt_s WHERE c = 'ab';
SELECT count(*) FROM zt_s WHERE c LIKE 'ab %';
SELECT count(*) FROM zt_s WHERE lt LIKE 'xxx%';
-- ordering comparisons on character columns are pushed down under the C collation only (byte
-- order; char(n) without trailing spaces) and skip blocks by the 16-byte keys
SELECT zm_skipped('SELECT count(*) FROM zt_s WHERE t >= ''00099000'' COLLATE "C"') > 0 AS text_range_skips,
       zm_skipped('SELECT count(*) FROM zt_s WHERE ''00000100'' COLLATE "C" > t') > 0 AS commuted_skips;
EXPLAIN (COSTS OFF) SELECT id FROM zt_s WHERE c < 'ab ' COLLATE "C" AND t >= '0009' COLLATE "C";
EXPLAIN (COSTS OFF) SELECT id FROM zt_s WHERE t < '0001' COLLATE "und-x-icu";
SELECT count(*) FROM zt_s WHERE c <= 'ab' COLLATE "C";
SELECT count(*) FROM zt_s WHERE c <= 'ab';
SELECT count(*) FROM zt_s WHERE c < 'ab ';
-- differential: scoot vs heap vs plain scans, between random writes and VACUUM
CREATE FUNCTION zt_check(n int, seed float8) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  preds text[] := ARRAY[
    'f > %s', 'f <= %s / 3.0', 'f BETWEEN %s AND %s', 'f = %s / 7.0 - 5000', 'r < %s', 'r >= (%s)::float4 / 3',
    'r = (%s %% 1000 + %s / 1000 * 1000)::float4 / 3', 'f = ''NaN''', 'r > ''Infinity''', 'f < ''-Infinity''',
    't = lpad((%s)::text, 8, ''0'')', 't IN (lpad((%s)::text, 8, ''0''), lpad((%s)::text, 8, ''0''))',
    't LIKE left(lpad((%s)::text, 8, ''0''), 5) || ''%%''', 'v = ''v'' || lpad((%s)::text, 7, ''0'')',
    'v LIKE ''v00'' || left((%s)::text, 2) || ''%%''', 'c = lpad((%s / 100)::text, 4, ''0'')',
    'c IN (''ab'', lpad((%s / 100)::text, 4, ''0''))',
    'lt = ''same-long-prefix-0123456789-'' || lpad((%s)::text, 8, ''0'')', 'lt LIKE ''same-long%%''',
    't IS NULL', 'f > %s AND t < ''5''',
    't < lpad((%s)::text, 8, ''0'') COLLATE "C"', 't >= lpad((%s)::text, 8, ''0'') COLLATE "C"',
    'lpad((%s)::text, 8, ''0'') COLLATE "C" > t', 'v <= ''v'' || lpad((%s)::text, 7, ''0'') COLLATE "C"',
    'c > lpad((%s / 100)::text, 4, ''0'')::bpchar COLLATE "C"', 'c <= ''ab'' COLLATE "C"',
    'lt < ''same-long-prefix-0123456789-'' || lpad((%s)::text, 8, ''0'') COLLATE "C"', 'c >= ''zz'' COLLATE "C"',
    't < lpad((%s)::text, 8, ''0'')'];
  i int; pred text; q text; r_s text; r_h text; r_off text; checked int := 0; skipping int := 0;
  x int; y int;
BEGIN
  PERFORM setseed(seed);
  FOR i IN 1..n LOOP
    x := floor(random() * 110000)::int - 5000;
    y := x + floor(random() * 20000)::int;
    pred := format(preds[1 + floor(random() * array_length(preds, 1))::int], x, y);
    q := format('SELECT count(*), sum(id), min(f), max(r), max(t) FROM zt_s WHERE %s', pred);
    EXECUTE 'SELECT row(q.*)::text FROM (' || q || ') q' INTO r_s;
    EXECUTE 'SELECT row(q.*)::text FROM (' || replace(q, 'zt_s', 'zt_h') || ') q' INTO r_h;
    SET LOCAL scoot.custom_scan = off;
    EXECUTE 'SELECT row(q.*)::text FROM (' || q || ') q' INTO r_off;
    SET LOCAL scoot.custom_scan = on;
    IF r_s <> r_h OR r_s <> r_off THEN
      RAISE EXCEPTION 'query % differs: scoot % heap % plain %', q, r_s, r_h, r_off;
    END IF;
    checked := checked + 1;
    IF zm_skipped(q) > 0 THEN skipping := skipping + 1; END IF;
  END LOOP;
  RETURN format('%s queries agree, zone maps skipped blocks in over 20%% of them: %s', checked, skipping > n / 5);
END $$;
CREATE FUNCTION zt_writes(seed float8) RETURNS void LANGUAGE plpgsql AS $$
DECLARE x int; tb text; BEGIN
  PERFORM setseed(seed);
  x := floor(random() * 100000)::int;
  FOREACH tb IN ARRAY ARRAY['zt_s', 'zt_h'] LOOP
    EXECUTE format('UPDATE %I SET f = -f, r = r + 1e6, t = ''9'' || t, v = ''w'', c = ''zz'' WHERE id BETWEEN %s AND %s', tb, x, x + 2000);
    EXECUTE format('DELETE FROM %I WHERE id BETWEEN %s AND %s', tb, x + 4000, x + 7000);
    EXECUTE format('INSERT INTO %I SELECT g, g * 1e10, -g, ''0'' || g, ''v'' || g, ''ab'', NULL FROM generate_series(%s, %s) g', tb, x, x + 500);
  END LOOP;
END $$;
SELECT zt_check(150, 0.31);
SELECT zt_writes(0.5);
SELECT zt_check(150, 0.32);
SELECT zt_writes(0.7);
VACUUM zt_s;
SELECT zt_check(150, 0.33);
DROP FUNCTION zt_check(int, float8);
DROP FUNCTION zt_writes(float8);
DROP TABLE zt_s, zt_h;

DROP FUNCTION zm_check(int, float8);
DROP FUNCTION zm_writes(float8);
DROP FUNCTION zm_skipped(text);
DROP TABLE zm_s, zm_h;
