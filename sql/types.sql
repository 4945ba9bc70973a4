-- types: round-trip many data types through a scoot table and compare every
-- row with the same data stored in a heap table.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET extra_float_digits = 1;
SET bytea_output = 'hex';

CREATE DOMAIN types_posint AS int4 CHECK (VALUE > 0);
CREATE TYPE types_mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE types_pair AS (x int4, y text);

CREATE TABLE types_s (
    id          int4 NOT NULL,
    c_bool      bool,
    c_int2      int2,
    c_int8      int8,
    c_char1     "char",
    c_int4      int4,
    c_float4    float4,
    c_float8    float8,
    c_numeric   numeric,
    c_num       numeric(12,3),
    c_text      text,
    c_varchar   varchar(10),
    c_char      char(5),
    c_bytea     bytea,
    c_date      date,
    c_time      time,
    c_timetz    timetz,
    c_ts        timestamp,
    c_tstz      timestamptz,
    c_interval  interval,
    c_uuid      uuid,
    c_json      json,
    c_jsonb     jsonb,
    c_int4arr   int4[],
    c_textarr   text[],
    c_dom       types_posint,
    c_enum      types_mood,
    c_inet      inet,
    c_cidr      cidr,
    c_macaddr   macaddr,
    c_point     point,
    c_box       box,
    c_range     int4range,
    c_tsvector  tsvector,
    c_bit       bit(4),
    c_varbit    varbit,
    c_oid       oid,
    c_name      name,
    c_composite types_pair
) USING scoot;

CREATE TABLE types_h (LIKE types_s) USING heap;

-- the same literal rows go into both tables: typed by the heap INSERT, the
-- RETURNING rows are then inserted into the scoot table
WITH src AS (
  INSERT INTO types_h VALUES
  (1, true, 1, 1, 'a', 1, 1.5, 1.25, 1.5, 1.5, 'one', 'one', 'one', '\x01',
   '2024-01-01', '01:02:03', '01:02:03+02', '2024-01-01 01:02:03', '2024-01-01 01:02:03+00',
   '1 day', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": 1,  "b": [1, 2]}', '{"a": 1,  "b": [1, 2]}',
   '{1,2,3}', '{a,b,c}', 1, 'sad', '192.168.0.1', '10.0.0.0/8', '08:00:2b:01:02:03',
   '(1,2)', '(0,0),(1,1)', '[1,10)', 'a fat cat sat', B'1010', B'1', 1, 'name1', ROW(1, 'x')),
  (2, false, -32768, -9223372036854775808, 'z', -2147483648, '-Infinity', 'NaN', 'NaN', -999999999.999,
   '', '', '', '\x', '4713-01-01 BC', '00:00:00', '00:00:00-12', '-infinity', '-infinity',
   '-178000000 years', '00000000-0000-0000-0000-000000000000', 'null', 'null', '{}', '{}',
   2147483647, 'happy', '::1', '::/0', '00:00:00:00:00:00', '(-1e300,1e-300)', '(-1,-1),(-2,-2)',
   'empty', '', B'0000', B'', 4294967295, '', ROW(NULL, NULL)),
  (3, NULL, 32767, 9223372036854775807, NULL, 2147483647, 'Infinity', '-0',
   '12345678901234567890.12345678901234567890', 0.001,
   E'tab\tand ''quote'' and \\backslash\nnewline', '0123456789', 'ab', '\xdeadbeef00ff',
   '5874897-12-31', '24:00:00', '23:59:59.999999+14', 'infinity', 'infinity',
   '1 year 2 mons 3 days 04:05:06.789', 'ffffffff-ffff-ffff-ffff-ffffffffffff',
   '[1, "two", {"three": 3.0}]', '[1, "two", {"three": 3.0}]', '{{1,2},{3,4}}',
   '{{"a b",NULL},{"",x}}', 3, 'ok', '2001:db8::1/64', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff',
   '(0.5,-0.5)', '(1e10,1e10),(0,0)', '[-5,5]', '''quoted'' words:1A,2B', B'1111',
   B'1010101010101010101', 0, 'a longer name with spaces', ROW(3, 'with "quotes"')),
  (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (5, true, 0, 0, ' ', 0, 3.4028235e38, 1.7976931348623157e308, -0.0000000000000000000001, 0,
   U&'h\00e9llo w\00f6rld 日本語 😀 e\0301', 'ünïcödé', '日本', '\x00', '2000-02-29', '12:00',
   '12:00-00:30', '2000-02-29 12:00:00.123456', '2000-02-29 12:00:00.123456-08', '-1 day +02:00',
   'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"ü": "日本", "emoji": "😀"}',
   '{"ü": "日本", "emoji": "😀"}', '{NULL,1,NULL}', '{NULL,"😀",NULL}', 5, 'sad', '0.0.0.0',
   '0.0.0.0/0', '01:23:45:67:89:ab', '(0,0)', '(0,0),(0,0)', '(,)', '日本語 テキスト', B'0101',
   B'0', 42, 'ünïcödé', ROW(-1, '日本'))
  RETURNING *)
INSERT INTO types_s SELECT * FROM src;

SELECT count(*) FROM types_s;

\x on
SELECT * FROM types_s ORDER BY id;
\x off

-- row-by-row comparison with heap (text form handles types without "=")
SELECT s.id,
       s::text = h::text AS same_text,
       s.c_jsonb = h.c_jsonb AS same_jsonb,
       s.c_numeric = h.c_numeric AS same_numeric,
       s.c_bytea = h.c_bytea AS same_bytea
FROM types_s s FULL JOIN types_h h ON s.id = h.id
ORDER BY coalesce(s.id, h.id);

SELECT (SELECT array_agg(x::text ORDER BY id) FROM types_s x)
     = (SELECT array_agg(x::text ORDER BY id) FROM types_h x) AS all_rows_equal;

-- which columns are NULL, per row
SELECT id, num_nulls(VARIADIC ARRAY[c_bool::text, c_int2::text, c_int8::text, c_char1::text,
        c_int4::text, c_float4::text, c_float8::text, c_numeric::text, c_num::text, c_text,
        c_varchar::text, c_char::text, c_bytea::text, c_date::text, c_time::text,
        c_timetz::text, c_ts::text, c_tstz::text, c_interval::text, c_uuid::text,
        c_json::text, c_jsonb::text, c_int4arr::text, c_textarr::text, c_dom::text,
        c_enum::text, c_inet::text, c_cidr::text, c_macaddr::text, c_point::text,
        c_box::text, c_range::text, c_tsvector::text, c_bit::text, c_varbit::text,
        c_oid::text, c_name::text, c_composite::text]) AS nulls
FROM types_s ORDER BY id;

-- lengths of unicode and padded values
SELECT id, length(c_text) AS len, octet_length(c_text) AS octets,
       length(c_char) AS char_len, octet_length(c_char) AS char_octets,
       length(c_varchar) AS vlen, octet_length(c_bytea) AS blen
FROM types_s ORDER BY id;

-- predicates on many types (evaluated against stored values)
SELECT id FROM types_s WHERE c_text = 'one' ORDER BY id;
SELECT id FROM types_s WHERE c_char = 'ab' ORDER BY id;
SELECT id FROM types_s WHERE c_float8 = 'NaN' ORDER BY id;
SELECT id FROM types_s WHERE c_float4 > 1e30 ORDER BY id;
SELECT id FROM types_s WHERE c_numeric > 1e10 ORDER BY id;
SELECT id FROM types_s WHERE c_jsonb @> '{"a": 1}' ORDER BY id;
SELECT id FROM types_s WHERE c_jsonb ? 'emoji' ORDER BY id;
SELECT id, c_json->>'a' AS a, c_jsonb->'b' AS b FROM types_s ORDER BY id;
SELECT id FROM types_s WHERE c_int4arr @> ARRAY[2] ORDER BY id;
SELECT id FROM types_s WHERE 'b' = ANY (c_textarr) ORDER BY id;
SELECT id, c_int4arr[1] AS first, array_length(c_int4arr, 1) AS len, array_ndims(c_int4arr) AS ndims FROM types_s ORDER BY id;
SELECT id FROM types_s WHERE c_enum > 'sad' ORDER BY id;
SELECT id FROM types_s WHERE c_inet << '192.168.0.0/16' ORDER BY id;
SELECT id FROM types_s WHERE c_range @> 3 ORDER BY id;
SELECT id FROM types_s WHERE c_tsvector @@ 'cat'::tsquery ORDER BY id;
SELECT id FROM types_s WHERE c_box && '(0.5,0.5),(2,2)'::box ORDER BY id;
SELECT id FROM types_s WHERE c_point <@ '(0,0),(1,2)'::box ORDER BY id;
SELECT id FROM types_s WHERE c_uuid = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' ORDER BY id;
SELECT id FROM types_s WHERE c_tstz < '2000-01-01' ORDER BY id;
SELECT id FROM types_s WHERE c_interval < '0' ORDER BY id;
SELECT id FROM types_s WHERE (c_composite).x > 0 ORDER BY id;
SELECT id FROM types_s WHERE c_bytea = '\xdeadbeef00ff' ORDER BY id;
SELECT id FROM types_s WHERE c_bool IS NULL ORDER BY id;
SELECT id FROM types_s WHERE c_bool IS NOT TRUE ORDER BY id;
SELECT id FROM types_s WHERE c_varbit = B'1' ORDER BY id;

-- type-specific errors are raised before the row reaches the table
INSERT INTO types_s (id, c_varchar) VALUES (100, '01234567890');
INSERT INTO types_s (id, c_dom) VALUES (100, 0);
INSERT INTO types_s (id, c_enum) VALUES (100, 'angry');
INSERT INTO types_s (id, c_num) VALUES (100, 1e10);
INSERT INTO types_s (id, c_bit) VALUES (100, B'101');
INSERT INTO types_s (id, c_int2) VALUES (100, 32768);
SELECT count(*) FROM types_s WHERE id = 100;

-- varchar(n)/char(n) silently truncate trailing spaces only
INSERT INTO types_s (id, c_varchar, c_char) VALUES (6, 'abc       ', 'xy   ');
INSERT INTO types_h (id, c_varchar, c_char) VALUES (6, 'abc       ', 'xy   ');
SELECT id, '[' || c_varchar || ']' AS v, '[' || c_char::text || ']' AS c, c_char = 'xy' AS eq FROM types_s WHERE id = 6;

-- writing values that come from another table (datums may arrive compressed
-- or out of line), and updating every column
CREATE TABLE types_s2 (LIKE types_s) USING scoot;
INSERT INTO types_s2 SELECT * FROM types_h;
SELECT (SELECT array_agg(x::text ORDER BY id) FROM types_s2 x)
     = (SELECT array_agg(x::text ORDER BY id) FROM types_h x) AS copied_from_heap_equal;

UPDATE types_s2 t SET (c_bool, c_int2, c_int8, c_char1, c_int4, c_float4, c_float8,
        c_numeric, c_num, c_text, c_varchar, c_char, c_bytea, c_date, c_time, c_timetz,
        c_ts, c_tstz, c_interval, c_uuid, c_json, c_jsonb, c_int4arr, c_textarr, c_dom,
        c_enum, c_inet, c_cidr, c_macaddr, c_point, c_box, c_range, c_tsvector, c_bit,
        c_varbit, c_oid, c_name, c_composite) =
    (SELECT h.c_bool, h.c_int2, h.c_int8, h.c_char1, h.c_int4, h.c_float4, h.c_float8,
        h.c_numeric, h.c_num, h.c_text, h.c_varchar, h.c_char, h.c_bytea, h.c_date, h.c_time, h.c_timetz,
        h.c_ts, h.c_tstz, h.c_interval, h.c_uuid, h.c_json, h.c_jsonb, h.c_int4arr, h.c_textarr, h.c_dom,
        h.c_enum, h.c_inet, h.c_cidr, h.c_macaddr, h.c_point, h.c_box, h.c_range, h.c_tsvector, h.c_bit,
        h.c_varbit, h.c_oid, h.c_name, h.c_composite
     FROM types_h h WHERE h.id = (CASE WHEN t.id = 6 THEN 6 ELSE 6 - t.id END));
UPDATE types_h t SET (c_bool, c_int2, c_int8, c_char1, c_int4, c_float4, c_float8,
        c_numeric, c_num, c_text, c_varchar, c_char, c_bytea, c_date, c_time, c_timetz,
        c_ts, c_tstz, c_interval, c_uuid, c_json, c_jsonb, c_int4arr, c_textarr, c_dom,
        c_enum, c_inet, c_cidr, c_macaddr, c_point, c_box, c_range, c_tsvector, c_bit,
        c_varbit, c_oid, c_name, c_composite) =
    (SELECT h.c_bool, h.c_int2, h.c_int8, h.c_char1, h.c_int4, h.c_float4, h.c_float8,
        h.c_numeric, h.c_num, h.c_text, h.c_varchar, h.c_char, h.c_bytea, h.c_date, h.c_time, h.c_timetz,
        h.c_ts, h.c_tstz, h.c_interval, h.c_uuid, h.c_json, h.c_jsonb, h.c_int4arr, h.c_textarr, h.c_dom,
        h.c_enum, h.c_inet, h.c_cidr, h.c_macaddr, h.c_point, h.c_box, h.c_range, h.c_tsvector, h.c_bit,
        h.c_varbit, h.c_oid, h.c_name, h.c_composite
     FROM types_s h WHERE h.id = (CASE WHEN t.id = 6 THEN 6 ELSE 6 - t.id END));
SELECT (SELECT array_agg(x::text ORDER BY id) FROM types_s2 x)
     = (SELECT array_agg(x::text ORDER BY id) FROM types_h x) AS updated_equal;
SELECT id, c_int4, c_text, c_enum FROM types_s2 ORDER BY id;

-- a wide table: 120 columns, NULLs at many positions (null bitmap > 8 bytes)
DO $$
DECLARE
  cols text;
  vals text;
BEGIN
  SELECT string_agg(format('c%s %s', i, CASE i % 4 WHEN 0 THEN 'int8' WHEN 1 THEN 'text'
                                                 WHEN 2 THEN 'int2' ELSE 'float8' END), ', ' ORDER BY i),
         string_agg(format('CASE WHEN (g + %s) %% %s = 0 THEN NULL ELSE (g * %s)::%s END',
                           i, 2 + i % 7, i,
                           CASE i % 4 WHEN 0 THEN 'int8' WHEN 1 THEN 'text'
                                      WHEN 2 THEN 'int2' ELSE 'float8' END), ', ' ORDER BY i)
    INTO cols, vals
    FROM generate_series(1, 120) i;
  EXECUTE format('CREATE TABLE types_wide_s (id int, %s) USING scoot', cols);
  EXECUTE format('CREATE TABLE types_wide_h (id int, %s) USING heap', cols);
  EXECUTE format('INSERT INTO types_wide_s SELECT g, %s FROM generate_series(1, 50) g', vals);
  EXECUTE format('INSERT INTO types_wide_h SELECT g, %s FROM generate_series(1, 50) g', vals);
END
$$;
SELECT count(*) FROM types_wide_s;
SELECT (SELECT array_agg(x::text ORDER BY id) FROM types_wide_s x)
     = (SELECT array_agg(x::text ORDER BY id) FROM types_wide_h x) AS wide_equal;
SELECT id, c1, c2, c3, c4, c117, c118, c119, c120 FROM types_wide_s WHERE id <= 6 ORDER BY id;
SELECT id, num_nulls(c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c60, c100, c120) FROM types_wide_s WHERE id <= 10 ORDER BY id;
-- all-NULL row and zero-column-ish row
INSERT INTO types_wide_s (id) VALUES (NULL);
SELECT count(*) FROM types_wide_s WHERE id IS NULL AND c1 IS NULL AND c120 IS NULL;

-- a table with no columns at all
CREATE TABLE types_nocols () USING scoot;
INSERT INTO types_nocols DEFAULT VALUES;
INSERT INTO types_nocols SELECT FROM generate_series(1, 9);
SELECT count(*) FROM types_nocols;
SELECT * FROM types_nocols LIMIT 1;

DROP TABLE types_s, types_h, types_s2, types_wide_s, types_wide_h, types_nocols;
DROP TYPE types_pair;
DROP TYPE types_mood;
DROP DOMAIN types_posint;
