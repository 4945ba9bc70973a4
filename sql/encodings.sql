-- encodings: the compact column encodings (numeric(p,s) as scaled int64/int128,
-- char(n)/varchar(n) inline) must return exactly what heap returns, including
-- NaN, zero, negative zero, extremes, empty strings, NULLs, values that do not
-- fit the compact form (multibyte text -> the column switches to variable
-- length for new blocks, old blocks keep theirs), typmod changes without a
-- rewrite, and varlena alignment (float8[] with non-default bounds).
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;
SET extra_float_digits = 1;

CREATE TABLE enc_s (
    k   int PRIMARY KEY,
    n2  numeric(15,2),
    n0  numeric(18,0),
    n18 numeric(18,18),
    n4  numeric(4,1),
    w   numeric(38,6),
    w0  numeric(38,0),
    u   numeric,
    c1  char(1),
    c5  char(5),
    v3  varchar(3),
    v16 varchar(16),
    t   text
) USING scoot;
CREATE TABLE enc_h (LIKE enc_s INCLUDING ALL) USING heap;

INSERT INTO enc_s VALUES
 (1, 0, 0, 0, 0, 0, 0, 0, 'A', 'abc', '', '', ''),
 (2, -0.00, -0, -0.0, -0.0, -0.000000, -0, -0.000, 'N', 'abcde', 'x', 'sixteen chars ok', 'long text'),
 (3, 'NaN', 'NaN', 'NaN', 'NaN', 'NaN', 'NaN', 'NaN', 'R', 'a', 'xyz', 'a', 'NaN'),
 (4, 9999999999999.99, 999999999999999999, 0.999999999999999999, 999.9,
     99999999999999999999999999999999.999999, 99999999999999999999999999999999999999,
     1e100, 'Z', '     ', 'ab', 'abcdefghijklmnop', 'x'),
 (5, -9999999999999.99, -999999999999999999, -0.999999999999999999, -999.9,
     -99999999999999999999999999999999.999999, -99999999999999999999999999999999999999,
     -1e-100, 'z', 'a b', 'a b', ' ', NULL),
 (6, 0.01, 1, 0.000000000000000001, 0.1, 0.000001, 1, 0.5, NULL, NULL, NULL, NULL, NULL),
 (7, 12345.67, 10000, 0.1, 10.0, 1234567.123456, 10000000000000000000, 123.456, ' ', 'ab  ', 'ab ', 'trailing  ', ' lead'),
 (8, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'q', 'qqqqq', 'qqq', 'qqqqqqqqqqqqqqqq', 'q');
INSERT INTO enc_s SELECT g, g * 1.01, g * 1000, g / 1000000.0, g % 1000 / 10.0, g * 123.456789,
       g::numeric * 1e20, g / 7.0, chr(65 + g % 26), repeat(chr(97 + g % 26), g % 6),
       repeat('v', g % 4), repeat('w', g % 17), 'row ' || g
FROM generate_series(9, 2000) g;
INSERT INTO enc_h SELECT * FROM enc_s;

-- identical rows, identical text renderings (display scale included)
SELECT (SELECT array_agg(x::text ORDER BY k) FROM enc_s x) = (SELECT array_agg(x::text ORDER BY k) FROM enc_h x) AS same_rows;
SELECT * FROM enc_s WHERE k <= 8 ORDER BY k;
SELECT k, n2::text, n18::text, w::text, c5 || '|', octet_length(c5), v3 || '|', octet_length(v16) FROM enc_s WHERE k <= 8 ORDER BY k;
-- arithmetic and aggregates on the decoded values
SELECT sum(n2), avg(n0), max(n18), min(n4), sum(w), sum(w0), count(DISTINCT c1), string_agg(c5, ',' ORDER BY k) FILTER (WHERE k < 12) FROM enc_s;
SELECT sum(n2), avg(n0), max(n18), min(n4), sum(w), sum(w0), count(DISTINCT c1), string_agg(c5, ',' ORDER BY k) FILTER (WHERE k < 12) FROM enc_h;
-- comparisons and grouping on encoded columns
SELECT c1, count(*), sum(n2) FROM enc_s WHERE n4 > 50 GROUP BY c1 ORDER BY c1 COLLATE "C";
SELECT count(*) FROM enc_s WHERE c5 = 'aaa' OR v3 = 'vv' OR n2 = 1.01 OR n2 = 'NaN';
SELECT count(*) FROM enc_h WHERE c5 = 'aaa' OR v3 = 'vv' OR n2 = 1.01 OR n2 = 'NaN';
-- the datum is byte-identical to heap's (hash and binary send of the stored value)
SELECT bool_and(hs = hh) AS same_hashes FROM (
  SELECT hash_numeric(s.n2) + hash_numeric(s.w) + hashbpchar(s.c5) + hashtext(s.v16) AS hs,
         hash_numeric(h.n2) + hash_numeric(h.w) + hashbpchar(h.c5) + hashtext(h.v16) AS hh
  FROM enc_s s JOIN enc_h h USING (k) WHERE s.n2 IS NOT NULL AND s.c5 IS NOT NULL) q;
SELECT bool_and(numeric_send(s.n2) = numeric_send(h.n2) AND numeric_send(s.w0) = numeric_send(h.w0)) AS same_send
  FROM enc_s s JOIN enc_h h USING (k) WHERE s.n2 IS NOT NULL;

-- indexes on encoded columns, index and bitmap plans give the same answers
CREATE INDEX enc_s_n2 ON enc_s (n2);
CREATE INDEX enc_s_c5 ON enc_s (c5);
SET enable_seqscan = off;
SELECT k, n2 FROM enc_s WHERE n2 BETWEEN 100 AND 105 ORDER BY n2, k;
SELECT k FROM enc_s WHERE c5 = 'bbbb' ORDER BY k LIMIT 5;
RESET enable_seqscan;

-- values that do not fit the compact form: multibyte text in char(1) and
-- varchar(3); the rest of the table is unaffected
INSERT INTO enc_s (k, c1, v3, c5, n2) VALUES (3001, 'é', 'äöü', 'ñññññ', 1.5), (3002, '€', 'x€y', 'e', 2.5);
INSERT INTO enc_h (k, c1, v3, c5, n2) VALUES (3001, 'é', 'äöü', 'ñññññ', 1.5), (3002, '€', 'x€y', 'e', 2.5);
INSERT INTO enc_s (k, c1, v3) SELECT g, 'a', 'bcd' FROM generate_series(3003, 3100) g;
INSERT INTO enc_h (k, c1, v3) SELECT g, 'a', 'bcd' FROM generate_series(3003, 3100) g;
SELECT k, c1, v3, c5, octet_length(c1), octet_length(v3) FROM enc_s WHERE k IN (3001, 3002, 3003, 1, 2) ORDER BY k;
-- updates move rows between blocks of different encodings
UPDATE enc_s SET c1 = 'ß' WHERE k IN (1, 3003);
UPDATE enc_h SET c1 = 'ß' WHERE k IN (1, 3003);
UPDATE enc_s SET c1 = 'a', n2 = n2 + 1 WHERE k = 3001;
UPDATE enc_h SET c1 = 'a', n2 = n2 + 1 WHERE k = 3001;
SELECT (SELECT array_agg(x::text ORDER BY k) FROM enc_s x) = (SELECT array_agg(x::text ORDER BY k) FROM enc_h x) AS same_after_fallback;

-- typmod changes without a rewrite (old blocks keep their encoding)
ALTER TABLE enc_s ALTER COLUMN v3 TYPE varchar(20);
ALTER TABLE enc_h ALTER COLUMN v3 TYPE varchar(20);
ALTER TABLE enc_s ALTER COLUMN n2 TYPE numeric(17,2);
ALTER TABLE enc_h ALTER COLUMN n2 TYPE numeric(17,2);
INSERT INTO enc_s (k, v3, n2) VALUES (4001, 'twenty characters!!!', 999999999999999.99);
INSERT INTO enc_h (k, v3, n2) VALUES (4001, 'twenty characters!!!', 999999999999999.99);
ALTER TABLE enc_s ALTER COLUMN n0 TYPE numeric;
ALTER TABLE enc_h ALTER COLUMN n0 TYPE numeric;
INSERT INTO enc_s (k, n0) VALUES (4002, 1.23456789), (4003, 'Infinity'), (4004, '-Infinity');
INSERT INTO enc_h (k, n0) VALUES (4002, 1.23456789), (4003, 'Infinity'), (4004, '-Infinity');
UPDATE enc_s SET n0 = n0 + 0.5 WHERE k IN (2, 7);
UPDATE enc_h SET n0 = n0 + 0.5 WHERE k IN (2, 7);
SELECT k, v3, n2, n0 FROM enc_s WHERE k IN (2, 7, 4001, 4002, 4003, 4004) ORDER BY k;
SELECT (SELECT array_agg(x::text ORDER BY k) FROM enc_s x) = (SELECT array_agg(x::text ORDER BY k) FROM enc_h x) AS same_after_alter;
-- a rewrite re-encodes everything
ALTER TABLE enc_s ALTER COLUMN n4 TYPE numeric(6,3);
ALTER TABLE enc_h ALTER COLUMN n4 TYPE numeric(6,3);
VACUUM FULL enc_s;
SELECT (SELECT array_agg(x::text ORDER BY k) FROM enc_s x) = (SELECT array_agg(x::text ORDER BY k) FROM enc_h x) AS same_after_rewrite;

-- varlena alignment: arrays with non-default bounds next to other columns
-- (a float8[] must come back 8-byte aligned)
CREATE TABLE enc_arr_s (a int2[], b int4[][][], c name[], d text[][], e float8[], f char(5)[], g varchar(5)[]) USING scoot;
CREATE TABLE enc_arr_h (LIKE enc_arr_s) USING heap;
INSERT INTO enc_arr_s (a[1:5], b[1:1][1:2][1:2], c, d, f, g) VALUES ('{1,2,3,4,5}', '{{{0,0},{1,2}}}', '{}', '{}', '{}', '{}');
INSERT INTO enc_arr_h (a[1:5], b[1:1][1:2][1:2], c, d, f, g) VALUES ('{1,2,3,4,5}', '{{{0,0},{1,2}}}', '{}', '{}', '{}', '{}');
UPDATE enc_arr_s SET e[0] = '1.1';
UPDATE enc_arr_h SET e[0] = '1.1';
UPDATE enc_arr_s SET e[1] = '2.2';
UPDATE enc_arr_h SET e[1] = '2.2';
SELECT a, b, e FROM enc_arr_s;
SELECT (SELECT array_agg(x::text) FROM enc_arr_s x) = (SELECT array_agg(x::text) FROM enc_arr_h x) AS same_arrays;
INSERT INTO enc_arr_s (a, e) SELECT ARRAY[g::int2], ARRAY[g * 0.5, g * 0.25]::float8[] FROM generate_series(1, 50) g;
INSERT INTO enc_arr_h (a, e) SELECT ARRAY[g::int2], ARRAY[g * 0.5, g * 0.25]::float8[] FROM generate_series(1, 50) g;
SELECT sum(e[1] + e[2])::numeric, sum(array_length(e, 1)) FROM enc_arr_s;
SELECT sum(e[1] + e[2])::numeric, sum(array_length(e, 1)) FROM enc_arr_h;

-- the values a scan hands out: numerics rebuilt from scaled integers get a 4-byte varlena header
-- (numeric's functions read their arguments unpacked: a 1-byte header, which heap's stored
-- numerics have, is copied out on every call); a numeric stored as-is (u), char(n) and varchar
-- keep heap's 1-byte form. So pg_column_size() of a scaled column is 3 bytes more than heap's.
SELECT s.k, pg_column_size(s.n2) - pg_column_size(h.n2) AS n2, pg_column_size(s.w) - pg_column_size(h.w) AS w,
       pg_column_size(s.u) - pg_column_size(h.u) AS u, pg_column_size(s.c5) - pg_column_size(h.c5) AS c5,
       pg_column_size(s.v16) - pg_column_size(h.v16) AS v16
FROM enc_s s JOIN enc_h h USING (k) WHERE k IN (1, 7, 9) ORDER BY k;
BEGIN;
SET LOCAL scoot.custom_scan = off;
SELECT k, pg_column_size(n2) AS n2, pg_column_size(w) AS w FROM enc_s WHERE k IN (1, 7, 9) ORDER BY k;
COMMIT;
SELECT k, pg_column_size(n2) AS n2, pg_column_size(w) AS w FROM enc_h WHERE k IN (1, 7, 9) ORDER BY k;

DROP TABLE enc_s, enc_h, enc_arr_s, enc_arr_h;
