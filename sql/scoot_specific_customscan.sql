-- ScootScan, the custom scan for read-only queries on scoot tables: which
-- plans get it (EXPLAIN shows the columns it reads), which do not (writes,
-- row locks, xmin/xmax, scoot.custom_scan = off), and a differential check:
-- random column subsets and predicates over data with NULLs answer exactly
-- as the same query on a heap copy and with scoot.custom_scan = off.
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;

CREATE TABLE cs_s (id int, a int, b int8, n numeric(12,2), w numeric(30,6), c char(2), v varchar(8),
                   t text, d date, ts timestamp, f float8, ok bool) USING scoot;
CREATE TABLE cs_h (LIKE cs_s) USING heap;
INSERT INTO cs_h
SELECT i,
       CASE WHEN i % 13 = 0 THEN NULL ELSE (i * 7919) % 1000 - 500 END,
       CASE WHEN i % 17 = 0 THEN NULL ELSE i::int8 * 1000003 % 99991 END,
       CASE WHEN i % 11 = 0 THEN NULL ELSE ((i * 31) % 20000) / 100.0 - 50 END,
       CASE WHEN i % 19 = 0 THEN NULL ELSE (i::int8 * 104729 % 1000003) / 7.0 END,
       CASE WHEN i % 7 = 0 THEN NULL ELSE chr(65 + i % 5) || chr(65 + i % 3) END,
       CASE WHEN i % 23 = 0 THEN NULL ELSE 'v' || (i % 50) END,
       CASE WHEN i % 29 = 0 THEN NULL ELSE repeat('t', i % 7) || (i % 300) END,
       CASE WHEN i % 31 = 0 THEN NULL ELSE date '2020-01-01' + (i % 900) END,
       CASE WHEN i % 37 = 0 THEN NULL ELSE timestamp '2020-01-01' + (i % 5000) * interval '17 minutes' END,
       CASE WHEN i % 41 = 0 THEN NULL ELSE ((i * 13) % 1000) / 8.0 END,
       CASE WHEN i % 43 = 0 THEN NULL ELSE i % 3 = 0 END
FROM generate_series(1, 30000) i;
-- edge values: NaN, type bounds, infinite dates and timestamps
INSERT INTO cs_h (id, a, b, n, w, d, ts) VALUES
  (30001, 2147483647, 9223372036854775807, 'NaN', 'NaN', 'infinity', 'infinity'),
  (30002, -2147483648, -9223372036854775808, -9999999999.99, -99999999999999999999999.999999, '-infinity', '-infinity'),
  (30003, 0, 0, 0, 0, '2020-01-01', '2020-01-01');
-- float edge values, and text values stored compressed or toasted (never judged by a filter)
INSERT INTO cs_h (id, f, t) VALUES
  (30004, 'NaN', repeat('tt5', 3000)), (30005, '-Infinity', ''), (30006, '-0', 'tt5'),
  (30007, 'Infinity', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 200) g)),
  (30008, 0, 'tt' || repeat('x', 3000)), (30009, 'NaN', 'x'), (30010, 1, repeat('ab', 3000));
INSERT INTO cs_s SELECT * FROM cs_h;
UPDATE cs_s SET a = a + 1 WHERE id % 10 = 0;
UPDATE cs_h SET a = a + 1 WHERE id % 10 = 0;
DELETE FROM cs_s WHERE id % 97 = 0;
DELETE FROM cs_h WHERE id % 97 = 0;
ANALYZE cs_s;
ANALYZE cs_h;

-- plans: the columns read
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s;
EXPLAIN (COSTS OFF) SELECT sum(n) FROM cs_s WHERE d >= '2021-01-01';
EXPLAIN (COSTS OFF) SELECT c, count(*), avg(w) FROM cs_s WHERE t LIKE 'tt%' GROUP BY c;
EXPLAIN (COSTS OFF) SELECT s FROM cs_s s WHERE id = 5;
EXPLAIN (COSTS OFF) SELECT ctid, tableoid::regclass, id FROM cs_s WHERE id < 3;
EXPLAIN (COSTS OFF) SELECT s.id, h.t FROM cs_s s JOIN cs_h h USING (id) WHERE s.a > 400;
EXPLAIN (COSTS OFF, FORMAT JSON) SELECT sum(a) FROM cs_s WHERE ok;
-- block filters: column op constant on integer, date, timestamp and numeric columns
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s WHERE a >= 10 AND 100 > a AND d < '2021-06-01' AND n <= 12.5 AND ts > '2020-03-01' AND b = 5;
-- character filters on char(n)/varchar(n)/text: =, IN, LIKE 'prefix%' (not other patterns)
EXPLAIN (COSTS OFF) SELECT id FROM cs_s WHERE c = 'AB' AND v IN ('v1', 'v2') AND v LIKE 'v%' AND c LIKE '%B' AND t = 'x';
EXPLAIN (COSTS OFF) SELECT id FROM cs_s WHERE t IN ('tt5', 'x') AND t LIKE 'tt%' AND t LIKE '%5';
-- [NOT] LIKE with '%' as the only wildcard (any pattern: pieces searched inside the value;
-- char(n) with its padding, as bpcharlike sees it), and column op column on integer, date and
-- timestamp columns of one type; a pushed clause leaves the Filter line (the block filter
-- decides it), '_' patterns and mixed types stay PostgreSQL's
EXPLAIN (COSTS OFF) SELECT id FROM cs_s WHERE t LIKE '%t5%' AND t NOT LIKE 'tt%x' AND v NOT LIKE '%1%%2' AND c LIKE 'A%B' AND t LIKE 'a_b%' AND t NOT LIKE '%\%%';
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s WHERE a < id AND id >= a AND b > a AND ts > d AND id <> a;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT id FROM cs_s WHERE t LIKE '%t5%' AND t NOT LIKE '%tt5tt5%';
SELECT id, length(t) FROM cs_s WHERE t LIKE '%t5%' AND t NOT LIKE '%tt5tt5%' AND id > 29900 ORDER BY id;
SELECT id, length(t) FROM cs_h WHERE t LIKE '%t5%' AND t NOT LIKE '%tt5tt5%' AND id > 29900 ORDER BY id;
SELECT id FROM cs_s WHERE t LIKE '%5tt5%' ORDER BY id;
SELECT id FROM cs_h WHERE t LIKE '%5tt5%' ORDER BY id;
-- under a join that probes with the scan's rows and reads only their id and a: the filtered
-- column is copied only for the recheck of the block with the toasted values (30004's
-- compressed 'tt5tt5...' passes the filters unjudged; the recheck drops it)
SET enable_nestloop = off;
SET enable_mergejoin = off;
EXPLAIN (COSTS OFF) SELECT count(*), sum(s.a) FROM cs_s s JOIN cs_h h ON h.id = s.id AND h.id % 3 = 1 WHERE s.t LIKE '%t5%' AND s.t NOT LIKE '%tt5tt5%';
SELECT count(*), sum(s.a), sum(h.b) FROM cs_s s JOIN cs_h h ON h.id = s.id AND h.id % 3 = 1 WHERE s.t LIKE '%t5%' AND s.t NOT LIKE '%tt5tt5%';
SELECT count(*), sum(s.a), sum(h.b) FROM cs_h s JOIN cs_h h ON h.id = s.id AND h.id % 3 = 1 WHERE s.t LIKE '%t5%' AND s.t NOT LIKE '%tt5tt5%';
SELECT count(*), sum(s.a), sum(h.b) FROM cs_s s JOIN cs_h h ON h.id = s.id AND h.id % 3 = 1 WHERE s.t LIKE '%5tt5%';
SELECT count(*), sum(s.a), sum(h.b) FROM cs_h s JOIN cs_h h ON h.id = s.id AND h.id % 3 = 1 WHERE s.t LIKE '%5tt5%';
RESET enable_nestloop;
RESET enable_mergejoin;
-- the clauses a block filter stands for are evaluated on blocks it could not judge: a toasted
-- value (above), a column added after the block was written
CREATE TABLE cs_add (id int, a int) USING scoot;
INSERT INTO cs_add SELECT g, g % 10 FROM generate_series(1, 1000) g;
ALTER TABLE cs_add ADD COLUMN b int DEFAULT 4, ADD COLUMN t text DEFAULT 'abc';
INSERT INTO cs_add SELECT g, g % 10, g % 7, 'x' || g FROM generate_series(1001, 1100) g;
SELECT count(*), sum(id) FROM cs_add WHERE a < b;
SELECT count(*), sum(id) FROM cs_add WHERE a < b AND t NOT LIKE '%b%';
SELECT count(*), sum(id) FROM cs_add WHERE t LIKE '%1%' AND a >= b;
SET scoot.custom_scan = off;
SELECT count(*), sum(id) FROM cs_add WHERE a < b;
SELECT count(*), sum(id) FROM cs_add WHERE a < b AND t NOT LIKE '%b%';
SELECT count(*), sum(id) FROM cs_add WHERE t LIKE '%1%' AND a >= b;
RESET scoot.custom_scan;
DROP TABLE cs_add;
-- multibyte UTF-8 values: pieces match whole characters
CREATE TABLE cs_mb (id int, t text, c char(4)) USING scoot;
INSERT INTO cs_mb VALUES (1, 'añb', 'ñ'), (2, 'ñ', 'añ'), (3, 'aéñ', 'é é'), (4, '', ''), (5, NULL, NULL), (6, 'ñaña', 'ñañ');
SELECT id FROM cs_mb WHERE t LIKE '%ñ%' ORDER BY id;
SELECT id FROM cs_mb WHERE t NOT LIKE '%ñ' ORDER BY id;
SELECT id FROM cs_mb WHERE t LIKE 'ñ%ñ%' ORDER BY id;
SELECT id FROM cs_mb WHERE t LIKE '%' ORDER BY id;
SELECT id FROM cs_mb WHERE t LIKE '' ORDER BY id;
SELECT id FROM cs_mb WHERE c LIKE '%ñ' ORDER BY id;
SELECT id FROM cs_mb WHERE c LIKE '%ñ %' ORDER BY id;
SELECT id FROM cs_mb WHERE c NOT LIKE '%é%' ORDER BY id;
DROP TABLE cs_mb;
-- <> (the negator of the type's equality) on every filterable type, either operand order
EXPLAIN (COSTS OFF) SELECT id FROM cs_s WHERE a <> 5 AND 7 <> b AND n <> 1.5 AND c <> 'AB' AND t <> 'x' AND d <> '2020-01-05' AND f <> 0.5;
SELECT count(*), sum(id) FROM cs_s WHERE t <> 'tt5' AND n <> 'NaN' AND f <> 'NaN';
SELECT count(*), sum(id) FROM cs_h WHERE t <> 'tt5' AND n <> 'NaN' AND f <> 'NaN';
-- float comparisons (float8 and float4 constants)
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s WHERE f > 2.5 AND f <= 'NaN' AND f <> 3 AND f >= 1::float4;
SELECT count(*), count(f), sum(CASE WHEN f = 'NaN' THEN 1 ELSE 0 END) FROM cs_s WHERE f >= 'NaN';
SELECT count(*) FROM cs_s WHERE f = 0;
SELECT count(*) FROM cs_s WHERE f = '-0';
SELECT count(*) FROM cs_s WHERE f < '-Infinity';
SELECT count(*) FROM cs_s WHERE f <= '-Infinity';
SELECT count(*) FROM cs_s WHERE f > 'Infinity';
SELECT id, length(t) FROM cs_s WHERE t = 'tt5' ORDER BY id;
SELECT id, length(t) FROM cs_s WHERE t LIKE 'tt5%' AND id > 29990 ORDER BY id;
SELECT count(*), sum(length(t)) FROM cs_s WHERE t IN ('tt5', '', 'x');
-- ScootAgg with a text filter over blocks holding compressed values (it falls back to rows
-- there): the same answer as heap
SELECT c, count(*), sum(length(t)), sum(f) FROM cs_s WHERE t LIKE 'tt%' GROUP BY c ORDER BY c;
SELECT c, count(*), sum(length(t)), sum(f) FROM cs_h WHERE t LIKE 'tt%' GROUP BY c ORDER BY c;
CREATE TABLE cs_t (id int, t text) USING scoot;
INSERT INTO cs_t SELECT g, 'tt' || g FROM generate_series(1, 1000) g;
INSERT INTO cs_t VALUES (1001, repeat('ab', 3000)), (1002, repeat('tt', 3000));
EXPLAIN (COSTS OFF) SELECT count(*), sum(id) FROM cs_t WHERE t LIKE 'tt%';
SELECT count(*), sum(id) FROM cs_t WHERE t LIKE 'tt%';
SELECT count(*), sum(id) FROM cs_t WHERE t IN ('tt7', 'tt8');
DROP TABLE cs_t;
-- not filters: other types, expressions, a constant the column's scale cannot hold (n is
-- numeric(12,2)), an unconstrained numeric, text ordering in a linguistic collation; an integer constant of another
-- width is one
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s WHERE ok < true AND a < 5::int8 AND a + 1 < 5 AND n < 0.125 AND t > 'x' COLLATE "und-x-icu" AND n::numeric < 5.0;
-- ... but text ordering in the C collation (byte order) is one, whatever the database's collation
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s WHERE t > 'x' COLLATE "C";
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s WHERE n < 0.120;
-- IS [NOT] NULL on any column, IN lists (NULL elements match nothing; an element the scale
-- cannot hold matches nothing; NaN or infinity elements leave the clause to PostgreSQL)
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s WHERE t IS NULL AND a IS NOT NULL AND a IN (1, 2, NULL) AND n = ANY ('{0.25, 1.5, 0.125}');
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s WHERE n IN (1.5, 'NaN') AND d IN ('2020-01-01', 'infinity');
SELECT count(*), sum(a) FROM cs_s WHERE t IS NULL AND a IS NOT NULL;
SELECT count(*), sum(a) FROM cs_h WHERE t IS NULL AND a IS NOT NULL;
SELECT count(*), sum(a) FROM cs_s WHERE a IN (1, 2, 3, -500, 499, NULL) OR n IN (0.25, 0.125, 'NaN');
SELECT count(*), sum(a) FROM cs_h WHERE a IN (1, 2, 3, -500, 499, NULL) OR n IN (0.25, 0.125, 'NaN');
SELECT count(*) FROM cs_s WHERE n IN (0.25, 0.125);
SELECT count(*) FROM cs_h WHERE n IN (0.25, 0.125);
SELECT count(*) FROM cs_s WHERE n IN ('NaN', 0.25);
SELECT count(*) FROM cs_h WHERE n IN ('NaN', 0.25);
SELECT count(*) FROM cs_s WHERE a = ANY ('{}'::int[]);
SELECT count(*) FROM cs_s WHERE n > 199.5;
SELECT count(*) FROM cs_h WHERE n > 199.5;
SELECT count(*), min(id), max(id) FROM cs_s WHERE n >= 'NaN' OR w = 'NaN';
SELECT count(*), min(id), max(id) FROM cs_h WHERE n >= 'NaN' OR w = 'NaN';
SELECT count(*) FROM cs_s WHERE n < 'NaN' AND n >= -9999999999.99;
SELECT count(*) FROM cs_h WHERE n < 'NaN' AND n >= -9999999999.99;
SELECT id FROM cs_s WHERE a >= 2147483647 OR b <= -9223372036854775808 OR d > '2999-01-01' OR ts < '1900-01-01' ORDER BY id;
SELECT id FROM cs_h WHERE a >= 2147483647 OR b <= -9223372036854775808 OR d > '2999-01-01' OR ts < '1900-01-01' ORDER BY id;
SELECT id FROM cs_s WHERE d > '2999-01-01' ORDER BY id;
SELECT id FROM cs_s WHERE ts < '1900-01-01' ORDER BY id;
SELECT id FROM cs_s WHERE w < -99999999999999999999999 ORDER BY id;
SELECT count(*) FROM cs_s WHERE n > 199.5 AND n < 199.50001;
-- not for: xmin/xmax, row locks, writes, scoot.custom_scan = off
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s WHERE xmin::text <> '0';
EXPLAIN (COSTS OFF) SELECT id FROM cs_s WHERE a = 1 FOR UPDATE;
EXPLAIN (COSTS OFF) UPDATE cs_s SET a = a WHERE b = 1;
EXPLAIN (COSTS OFF) DELETE FROM cs_s WHERE id IN (SELECT a FROM cs_s WHERE b = 1);
SET scoot.custom_scan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s;
RESET scoot.custom_scan;
-- enable_seqscan = off applies to it (an index scan is chosen instead)
CREATE INDEX cs_s_id ON cs_s (id);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT a FROM cs_s WHERE id = 5;
RESET enable_seqscan;
-- point lookups keep the index
EXPLAIN (COSTS OFF) SELECT a FROM cs_s WHERE id = 5;
-- cursors move both ways (as over a Seq Scan, without SCROLL)
BEGIN;
EXPLAIN (COSTS OFF) SELECT id, n, t FROM cs_s WHERE id % 1000 = 1;
DECLARE cc CURSOR FOR SELECT id, n, t FROM cs_s WHERE id % 1000 = 1;
FETCH 3 FROM cc;
FETCH BACKWARD 2 FROM cc;
FETCH 30 FROM cc;
FETCH BACKWARD 3 FROM cc;
COMMIT;
-- parallel-aware (aggregate pushdown, which is not, off)
SET scoot.agg_pushdown = off;
SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT c, sum(n) FROM cs_s GROUP BY c;
SELECT c, sum(n), count(*), count(t) FROM cs_s GROUP BY c ORDER BY c;
SELECT c, sum(n), count(*), count(t) FROM cs_h GROUP BY c ORDER BY c;
SET max_parallel_workers_per_gather = 0;
RESET scoot.agg_pushdown;

-- A hash join probing with a ScootScan reads the scan's slot unprojected (the scan gets the
-- physical target list, VERBOSE shows it): a row's values are
-- deformed only as far as the join asks, and numerics are built only for the rows it keeps
-- (storage/batch.rs). Matched and dropped rows, NULLs, repeated values, and a sort that copies
-- every row out of its block batch, each against the heap copy.
CREATE TABLE cs_keys (k int, tag text) USING heap;
INSERT INTO cs_keys SELECT i * 7, 'k' || i FROM generate_series(1, 400) i;
ANALYZE cs_keys;
SET enable_nestloop = off;
SET enable_mergejoin = off;
EXPLAIN (COSTS OFF, VERBOSE) SELECT sum(s.n), sum(s.w), count(s.n), max(k.tag) FROM cs_s s JOIN cs_keys k ON k.k = s.id;
SELECT sum(s.n), sum(s.w), count(s.n), max(k.tag) FROM cs_s s JOIN cs_keys k ON k.k = s.id;
SELECT sum(s.n), sum(s.w), count(s.n), max(k.tag) FROM cs_h s JOIN cs_keys k ON k.k = s.id;
SELECT md5(string_agg(s.id || ':' || coalesce(s.n::text, '-') || ':' || coalesce(s.b::text, '-'), ',' ORDER BY s.id, k.tag)), count(*)
  FROM cs_s s JOIN cs_keys k ON k.k = s.a;
SELECT md5(string_agg(s.id || ':' || coalesce(s.n::text, '-') || ':' || coalesce(s.b::text, '-'), ',' ORDER BY s.id, k.tag)), count(*)
  FROM cs_h s JOIN cs_keys k ON k.k = s.a;
SELECT md5(string_agg(coalesce(n::text, '-'), ',' ORDER BY n DESC NULLS FIRST, id)) FROM (SELECT id, n FROM cs_s ORDER BY n DESC NULLS FIRST, id) x;
SELECT md5(string_agg(coalesce(n::text, '-'), ',' ORDER BY n DESC NULLS FIRST, id)) FROM (SELECT id, n FROM cs_h ORDER BY n DESC NULLS FIRST, id) x;
RESET enable_nestloop;
RESET enable_mergejoin;
DROP TABLE cs_keys;

-- the answers: random column subsets and predicates, ScootScan vs heap vs a plain Seq Scan
CREATE FUNCTION cs_check(n int, seed float8) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  cols text[] := ARRAY['id','a','b','n','w','c','v','t','d','ts','f','ok'];
  preds text[] := ARRAY[
    'a > %s', 'a BETWEEN %s AND %s + 200', 'a IS NULL', 'b < %s * 100', 'n >= %s / 10.0',
    'n IS NOT NULL AND n < %s / 7.0', 'w > %s * 3', 'c = ''AB''', 'c IN (''BA'', ''CC'', ''EB'')',
    'v LIKE ''v1%%''', 't LIKE ''tt%%''', 't IS NULL', 'd < date ''2020-06-01'' + %s',
    'ts >= timestamp ''2020-02-01'' + %s * interval ''1 hour''', 'f < %s / 4.0', 'ok',
    'NOT ok', 'ok IS NULL', 'id %% 7 = 3', 'coalesce(a, 0) + coalesce(n, 0) > %s',
    'a IN (%s, %s, 7, -3, NULL)', 'n IN (1.50, 0.25, -49.69, 12.345)', 'b IS NOT NULL AND a IS NOT NULL',
    'd = ANY (ARRAY[date ''2020-01-05'', date ''2021-03-01'', NULL])', 'c IS NOT NULL', 'w IS NULL',
    'ts IN (timestamp ''2020-01-01 00:17'', timestamp ''2020-01-02'')', 'b IN (%s, 100, 200)',
    't = ''tt5''', 't IN (''t7'', ''tt5'', '''', ''ttttt12'')', 't LIKE ''tt5%%''', 't = ''x''',
    'f = %s / 8.0', 'f >= ''NaN''', 'f > %s / 4.0 AND f <= 100', 'f <= %s::float4 / 8', 'f = ''-0''',
    'f < ''-Infinity''', 'f <> 0.5 AND f IS NOT NULL',
    't LIKE ''%%t5%%''', 't NOT LIKE ''tt%%5''', 't LIKE ''%%x''', 't NOT LIKE ''%%ab%%''',
    't LIKE ''%%t%%t%%1%%''', 'v NOT LIKE ''%%1%%''', 'v LIKE ''v%%0''', 'c LIKE ''%%B''',
    'c NOT LIKE ''A%%C''', 't LIKE ''%%''', 't NOT LIKE ''''', 'a < id', 'id >= a', 'a = id',
    'b > id', 'a <= id AND b >= id',
    'a <> %s', 'b <> 100', 'n <> 1.50', 'n <> %s / 4.0', 'w <> 0', 'c <> ''AB''', 'v <> ''v1''',
    't <> ''tt5''', 'd <> date ''2020-01-05''', 'ts <> timestamp ''2020-01-01 00:17''', 'f <> %s / 8.0',
    'f <> ''NaN''', 'f <> ''-0''', 'a IS NOT NULL AND %s <> a'];
  live text[];
  i int; k int; sel text; pred text; q_s text; q_h text; r_s text; r_h text; r_off text;
  checked int := 0; plans int := 0; p text;
BEGIN
  PERFORM setseed(seed);
  -- columns dropped meanwhile are left out
  SELECT array_agg(attname::text ORDER BY attnum) INTO live FROM pg_attribute
   WHERE attrelid = 'cs_s'::regclass AND attnum > 0 AND NOT attisdropped;
  cols := ARRAY(SELECT x FROM unnest(cols) x WHERE x = ANY (live));
  preds := ARRAY(SELECT x FROM unnest(preds) x
                  WHERE split_part(x, ' ', 1) = ANY (live || ARRAY['NOT', 'coalesce(a,']));
  FOR i IN 1..n LOOP
    sel := '';
    FOR k IN 1..array_length(cols, 1) LOOP
      IF random() < 0.3 THEN sel := sel || ', ' || cols[k]; END IF;
    END LOOP;
    pred := format(preds[1 + floor(random() * array_length(preds, 1))::int],
                   floor(random() * 1000 - 500)::int, floor(random() * 1000 - 500)::int);
    IF random() < 0.4 THEN
      pred := pred || ' AND ' || format(preds[1 + floor(random() * array_length(preds, 1))::int],
                                        floor(random() * 1000)::int, floor(random() * 1000)::int);
    END IF;
    -- ORs (block filters when every arm is one or an AND of them)
    k := floor(random() * 10)::int;
    IF k < 3 THEN
      pred := format('(%s) OR (%s)', pred,
                     format(preds[1 + floor(random() * array_length(preds, 1))::int],
                            floor(random() * 1000 - 500)::int, floor(random() * 1000)::int));
    ELSIF k < 4 THEN
      pred := format('(%s) OR %s OR (%s AND %s)', pred,
                     format(preds[1 + floor(random() * array_length(preds, 1))::int],
                            floor(random() * 1000 - 500)::int, floor(random() * 1000)::int),
                     format(preds[1 + floor(random() * array_length(preds, 1))::int],
                            floor(random() * 1000 - 500)::int, floor(random() * 1000)::int),
                     format(preds[1 + floor(random() * array_length(preds, 1))::int],
                            floor(random() * 1000 - 500)::int, floor(random() * 1000)::int));
    END IF;
    IF random() < 0.3 THEN
      -- an aggregate over the selected columns
      q_s := format('SELECT count(*), count(t), sum(a), sum(n), max(t), min(d), sum(f) FROM cs_s WHERE %s', pred);
    ELSE
      q_s := format('SELECT id%s FROM cs_s WHERE %s', sel, pred);
    END IF;
    q_h := replace(q_s, 'cs_s', 'cs_h');
    EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) || count(*) FROM (%s) x', q_s) INTO r_s;
    EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) || count(*) FROM (%s) x', q_h) INTO r_h;
    FOR p IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q_s LOOP
      IF p LIKE '%ScootScan%' THEN plans := plans + 1; END IF;
    END LOOP;
    SET LOCAL scoot.custom_scan = off;
    EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) || count(*) FROM (%s) x', q_s) INTO r_off;
    SET LOCAL scoot.custom_scan = on;
    IF r_s <> r_h OR r_s <> r_off THEN
      RAISE EXCEPTION 'query % differs: scoot % heap % plain %', q_s, r_s, r_h, r_off;
    END IF;
    checked := checked + 1;
  END LOOP;
  RETURN format('%s queries agree (%s planned with ScootScan)', checked, CASE WHEN plans >= checked * 9 / 10 THEN 'most' ELSE 'FEW: ' || plans END);
END $$;
BEGIN;
SELECT cs_check(300, 0.42);
COMMIT;
-- ORs of block filters: each arm one filter or an AND of them, on any columns; the clause
-- leaves the Filter line like any pushed clause. An arm that is no block filter, or an OR
-- nested in an arm, keeps the whole clause in the Filter line.
EXPLAIN (COSTS OFF) SELECT id FROM cs_s WHERE a < -490 OR (t LIKE '%5' AND d >= '2021-06-01') OR n IS NULL;
EXPLAIN (COSTS OFF) SELECT id FROM cs_s WHERE c IN ('AB', 'BA') OR v LIKE '%9' OR f > 120 OR a = id;
EXPLAIN (COSTS OFF) SELECT id FROM cs_s WHERE a < -490 OR id % 7 = 3;
EXPLAIN (COSTS OFF) SELECT id FROM cs_s WHERE a < -490 OR (b > 5 AND (c = 'AB' OR t LIKE 'tt%'));
-- the answers against heap: an arm that is NULL is not true; values stored compressed or
-- toasted (ids 30004..30010) are not judged by the filter: PostgreSQL decides them
SELECT count(*), md5(string_agg(id::text, ',' ORDER BY id)) FROM cs_s WHERE a < -490 OR (t LIKE '%5' AND d >= '2021-06-01') OR n IS NULL;
SELECT count(*), md5(string_agg(id::text, ',' ORDER BY id)) FROM cs_h WHERE a < -490 OR (t LIKE '%5' AND d >= '2021-06-01') OR n IS NULL;
SELECT count(*), md5(string_agg(id::text, ',' ORDER BY id)) FROM cs_s WHERE t LIKE '%t5%' OR t NOT LIKE '%a%' OR f >= 'NaN' OR (n > 40 AND w < 10);
SELECT count(*), md5(string_agg(id::text, ',' ORDER BY id)) FROM cs_h WHERE t LIKE '%t5%' OR t NOT LIKE '%a%' OR f >= 'NaN' OR (n > 40 AND w < 10);
SELECT count(*), md5(string_agg(id::text, ',' ORDER BY id)) FROM cs_s WHERE (a <> 3 AND b IS NULL) OR (ts < '2020-01-02' AND c <> 'AB') OR t = 'x';
SELECT count(*), md5(string_agg(id::text, ',' ORDER BY id)) FROM cs_h WHERE (a <> 3 AND b IS NULL) OR (ts < '2020-01-02' AND c <> 'AB') OR t = 'x';
-- the same after VACUUM (all-visible blocks skip per-row visibility) and after a column
-- was added with a default and one dropped
VACUUM cs_s;
VACUUM cs_h;
ALTER TABLE cs_s ADD COLUMN extra int DEFAULT 5;
ALTER TABLE cs_h ADD COLUMN extra int DEFAULT 5;
ALTER TABLE cs_s DROP COLUMN v;
ALTER TABLE cs_h DROP COLUMN v;
EXPLAIN (COSTS OFF) SELECT * FROM cs_s WHERE extra > 5;
SELECT sum(extra), count(extra) FROM cs_s WHERE a > 0;
SELECT sum(extra), count(extra) FROM cs_h WHERE a > 0;
-- a join above a ScootScan with a dropped column (a NULL in its physical target list)
SELECT md5(string_agg(s.id || coalesce(s.t, '-') || s.extra || coalesce(s.n::text, '-'), ',' ORDER BY s.id)), count(*)
  FROM cs_s s JOIN generate_series(1, 30010, 3) g(k) ON g.k = s.id;
SELECT md5(string_agg(s.id || coalesce(s.t, '-') || s.extra || coalesce(s.n::text, '-'), ',' ORDER BY s.id)), count(*)
  FROM cs_h s JOIN generate_series(1, 30010, 3) g(k) ON g.k = s.id;
BEGIN;
SELECT cs_check(200, 0.17);
COMMIT;

-- Runtime filters: "column op Param" (a correlated subquery's outer value, an initplan's
-- result, a generic plan's parameter) is a block filter whose value the scan takes at every
-- (re)scan, encoded like a constant; the clause stays in the Filter line too.
EXPLAIN (COSTS OFF) SELECT g, (SELECT count(*) FROM cs_s WHERE a = g AND d > '2020-03-01') FROM generate_series(1, 3) g;
EXPLAIN (COSTS OFF) SELECT count(*) FROM cs_s WHERE n > (SELECT 10.5) AND c = (SELECT 'AB'::bpchar);
PREPARE cs_rt(int8, text) AS SELECT count(*) FROM cs_s WHERE b < $1 AND $2 = t;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE cs_rt(5000, 'tt5');
EXECUTE cs_rt(5000, 'tt5');
EXECUTE cs_rt(NULL, 'tt5');
RESET plan_cache_mode;
DEALLOCATE cs_rt;
-- a value the column's encoding cannot hold exactly (more decimals than numeric(12,2)) or NULL:
-- no block filter, the qual alone decides
SELECT x, (SELECT count(*) FROM cs_s WHERE n = x), (SELECT count(*) FROM cs_h WHERE n = x)
  FROM unnest('{1.5,1.505,NULL,NaN,-49.69}'::numeric[]) x;
-- blocks skipped by zone maps once the value is known
SET enable_indexscan = off; SET enable_indexonlyscan = off; SET enable_bitmapscan = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM cs_s WHERE id > (SELECT 29990);
SELECT count(*) FROM cs_s WHERE id > (SELECT 29990);
RESET enable_indexscan; RESET enable_indexonlyscan; RESET enable_bitmapscan;

-- the answers: random columns, operators, parameter types and values (NULLs, infinities, NaN,
-- out-of-range integers, values finer than the column's scale), as correlated subqueries
-- (rescanned once per value), initplans and generic plans; scoot vs heap vs plain scans
CREATE FUNCTION rt_check(n int, seed float8) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  -- column, parameter type, values (an array literal of that type)
  cases text[] := ARRAY[
    'a|int|{NULL,-500,0,7,250,499,2147483647}', 'a|int8|{NULL,-500,3000000000,-3000000000,42}',
    'a|int2|{NULL,-3,100,32767}', 'b|int8|{NULL,0,50000,99990,9223372036854775807}',
    'b|int|{NULL,0,50000,-1}', 'n|numeric|{NULL,0,12.5,-49.69,1.005,NaN,150.00,Infinity}',
    'w|numeric|{NULL,0,1000.5,70000.142857,NaN,0.0000001}', 'c|bpchar|{NULL,AB,"BA ",C,ZZ}',
    'c|text|{NULL,AB,BA,""}', 'v|text|{NULL,v1,v10,v49,""}', 'v|varchar|{NULL,v1,v7}',
    't|text|{NULL,tt5,t7,"",x,ttttt12}', 'd|date|{NULL,2020-01-05,2021-03-01,infinity,-infinity}',
    'd|timestamp|{NULL,"2020-01-05 00:00","2020-06-01 12:00",infinity}',
    'ts|timestamp|{NULL,"2020-01-01 00:17",2020-02-01,infinity,-infinity}',
    'ts|timestamptz|{NULL,"2020-02-01 00:00+00"}',
    'f|float8|{NULL,0,-0,62.5,NaN,Infinity,-Infinity,100}', 'f|float4|{NULL,0.5,62.5,NaN}',
    'id|int|{1,15000,30000,NULL}', 'ok|bool|{true,false,NULL}'];
  ops text[] := ARRAY['=', '<', '<=', '>', '>=', '<>'];
  extras text[] := ARRAY['', '', ' AND a > 0', ' AND d IS NOT NULL', ' AND t LIKE ''tt%'''];
  cs text[]; col text; typ text; vals text; op text; cmp text; extra text; kind int; v text;
  i int; q_s text; q_h text; r_s text; r_h text; r_off text; checked int := 0; plans int := 0; p text;
  live text[];
BEGIN
  PERFORM setseed(seed);
  -- columns dropped meanwhile are left out
  SELECT array_agg(attname::text ORDER BY attnum) INTO live FROM pg_attribute
   WHERE attrelid = 'cs_s'::regclass AND attnum > 0 AND NOT attisdropped;
  cases := ARRAY(SELECT x FROM unnest(cases) x WHERE split_part(x, '|', 1) = ANY (live));
  FOR i IN 1..n LOOP
    cs := string_to_array(cases[1 + floor(random() * array_length(cases, 1))::int], '|');
    col := cs[1]; typ := cs[2]; vals := cs[3];
    op := ops[1 + floor(random() * array_length(ops, 1))::int];
    IF typ = 'bool' THEN op := '='; END IF;
    extra := extras[1 + floor(random() * array_length(extras, 1))::int];
    kind := floor(random() * 3)::int;
    IF kind = 0 THEN
      -- correlated: one rescan per value
      cmp := CASE WHEN random() < 0.5 THEN format('%s %s g.x', col, op) ELSE format('g.x %s %s', op, col) END;
      q_s := format('SELECT g.o, (SELECT count(*) || '':'' || coalesce(sum(id), 0) || '':'' || coalesce(max(t), ''-'') FROM cs_s WHERE %s%s) '
                    'FROM unnest(%L::%s[]) WITH ORDINALITY g(x, o)', cmp, extra, vals, typ);
    ELSE
      v := (SELECT x FROM unnest(vals::text[]) x ORDER BY random() LIMIT 1);
      IF kind = 1 THEN
        cmp := format('%s %s (SELECT %L::%s)', col, op, v, typ);
      ELSE
        cmp := format('%s %s $1', col, op);
      END IF;
      q_s := format('SELECT count(*) || '':'' || coalesce(sum(id), 0) || '':'' || coalesce(max(t), ''-'') FROM cs_s WHERE %s%s', cmp, extra);
    END IF;
    q_h := replace(q_s, 'cs_s', 'cs_h');
    IF kind = 2 THEN
      SET LOCAL plan_cache_mode = force_generic_plan;
      EXECUTE format('PREPARE rt_s(%s) AS %s', typ, q_s);
      EXECUTE format('PREPARE rt_h(%s) AS %s', typ, q_h);
      EXECUTE format('EXECUTE rt_s(%L)', v) INTO r_s;
      EXECUTE format('EXECUTE rt_h(%L)', v) INTO r_h;
      FOR p IN EXECUTE format('EXPLAIN (COSTS OFF) EXECUTE rt_s(%L)', v) LOOP
        IF p LIKE '%Runtime Filter%' THEN plans := plans + 1; END IF;
      END LOOP;
      SET LOCAL scoot.custom_scan = off;
      DEALLOCATE rt_s;
      EXECUTE format('PREPARE rt_s(%s) AS %s', typ, q_s);
      EXECUTE format('EXECUTE rt_s(%L)', v) INTO r_off;
      SET LOCAL scoot.custom_scan = on;
      DEALLOCATE rt_s;
      DEALLOCATE rt_h;
      SET LOCAL plan_cache_mode = auto;
      q_s := q_s || ' -- $1 = ' || coalesce(v, 'NULL');
    ELSE
      EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) || count(*) FROM (%s) x', q_s) INTO r_s;
      EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) || count(*) FROM (%s) x', q_h) INTO r_h;
      FOR p IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q_s LOOP
        IF p LIKE '%Runtime Filter%' THEN plans := plans + 1; END IF;
      END LOOP;
      SET LOCAL scoot.custom_scan = off;
      EXECUTE format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) || count(*) FROM (%s) x', q_s) INTO r_off;
      SET LOCAL scoot.custom_scan = on;
    END IF;
    IF r_s IS DISTINCT FROM r_h OR r_s IS DISTINCT FROM r_off THEN
      RAISE EXCEPTION 'query % differs: scoot % heap % plain %', q_s, r_s, r_h, r_off;
    END IF;
    checked := checked + 1;
  END LOOP;
  RETURN format('%s queries agree (%s planned with a runtime filter)', checked,
                CASE WHEN plans >= checked * 3 / 4 THEN 'most' ELSE 'FEW: ' || plans END);
END $$;
BEGIN;
SELECT rt_check(400, 0.31);
COMMIT;
-- on an OLAP snapshot image
SET scoot.olap = on;
SELECT g, (SELECT count(*) FROM cs_s WHERE a = g AND d > '2020-03-01'),
          (SELECT count(*) FROM cs_h WHERE a = g AND d > '2020-03-01') FROM generate_series(-3, 3) g;
CREATE FUNCTION rt_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    RETURN NEXT regexp_replace(l, 'Scoot Snapshot: \d+ \(\w+, age [0-9.]+ ms\)', 'Scoot Snapshot: N');
  END LOOP;
END $$;
SELECT rt_plan('SELECT g, (SELECT count(*) FROM cs_s WHERE a = g) FROM generate_series(-3, 3) g');
RESET scoot.olap;
DROP FUNCTION rt_check;
DROP FUNCTION rt_plan;

DROP FUNCTION cs_check;
DROP TABLE cs_s, cs_h;

-- in a multibyte encoding other than UTF-8 a piece could match across a character boundary:
-- only 'prefix%' patterns become block filters there
SELECT current_database() AS cs_db \gset
CREATE DATABASE cs_eucjp ENCODING 'EUC_JP' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
\c cs_eucjp
SET client_min_messages = warning;
CREATE EXTENSION pg_scoot;
CREATE TABLE cs_e (id int, t text) USING scoot;
INSERT INTO cs_e SELECT g, 'x' || g FROM generate_series(1, 100) g;
EXPLAIN (COSTS OFF) SELECT id FROM cs_e WHERE t LIKE 'x1%' AND t LIKE '%1%';
SELECT count(*) FROM cs_e WHERE t LIKE 'x1%' AND t LIKE '%1%';
\c :cs_db
DROP DATABASE cs_eucjp;

-- a table of a few rows keeps the Seq Scan (the node's setup per execution costs more than
-- reading them: SCOOT_SCAN_SETUP_COST), a table of thousands gets the node; both read the same
-- rows, also as prepared generic plans whose filter is a Param (TPC-C's warehouse / district)
CREATE TABLE cs_tiny (id int PRIMARY KEY, name text) USING scoot;
INSERT INTO cs_tiny SELECT g, 'n' || g FROM generate_series(1, 10) g;
CREATE TABLE cs_more (id int PRIMARY KEY, name text) USING scoot;
INSERT INTO cs_more SELECT g, 'n' || g FROM generate_series(1, 2000) g;
ANALYZE cs_tiny, cs_more;
SET plan_cache_mode = force_generic_plan;
PREPARE cs_tiny_q(int) AS SELECT name FROM cs_tiny WHERE id = $1;
PREPARE cs_more_q(int) AS SELECT name FROM cs_more WHERE id = $1;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) EXECUTE cs_tiny_q(3);
EXPLAIN (COSTS OFF) EXECUTE cs_more_q(3);
EXECUTE cs_tiny_q(3);
EXECUTE cs_more_q(3);
EXECUTE cs_more_q(1999);
RESET enable_indexscan;
RESET enable_bitmapscan;
RESET plan_cache_mode;
DEALLOCATE cs_tiny_q;
DEALLOCATE cs_more_q;
DROP TABLE cs_tiny, cs_more;
