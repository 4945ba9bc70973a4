-- types_wide: wide values (~100 kB) in scoot tables, compressible and not,
-- compared with heap (which TOASTs / compresses them).
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE wide_s (id int PRIMARY KEY, t text, b bytea, j jsonb, arr int4[]) USING scoot;
CREATE TABLE wide_h (id int PRIMARY KEY, t text, b bytea, j jsonb, arr int4[]) USING heap;

-- 1: 100 kB compressible text; 2: 100 kB of incompressible-looking text;
-- 3: wide bytea; 4: wide jsonb; 5: wide array; 6: several medium columns;
-- 7: unicode (multi-byte) wide text; 8: small row next to the wide ones
WITH src AS (
  INSERT INTO wide_h VALUES
    (1, repeat('x', 100000), NULL, NULL, NULL),
    (2, (SELECT string_agg(md5(i::text), '' ORDER BY i) FROM generate_series(1, 3125) i), NULL, NULL, NULL),
    (3, NULL, (SELECT string_agg(decode(md5(i::text), 'hex'), '' ORDER BY i) FROM generate_series(1, 6250) i), NULL, NULL),
    (4, NULL, NULL, (SELECT jsonb_object_agg('k' || i, md5(i::text)) FROM generate_series(1, 2000) i), NULL),
    (5, NULL, NULL, NULL, (SELECT array_agg(i * 7919 % 100003 ORDER BY i) FROM generate_series(1, 25000) i)),
    (6, (SELECT string_agg(md5(i::text), '' ORDER BY i) FROM generate_series(1, 300) i),
        (SELECT string_agg(decode(md5((-i)::text), 'hex'), '' ORDER BY i) FROM generate_series(1, 600) i),
        '{"small": true}',
        (SELECT array_agg(i ORDER BY i) FROM generate_series(1, 2000) i)),
    (7, repeat('日本語😀ü', 10000), NULL, NULL, NULL),
    (8, 'small', '\x00', '[]', '{}')
  RETURNING *)
INSERT INTO wide_s SELECT * FROM src;

SELECT id, length(t) AS tlen, octet_length(t) AS toct, md5(t) AS tmd5,
       length(b) AS blen, md5(b) AS bmd5,
       length(j::text) AS jlen, md5(j::text) AS jmd5,
       cardinality(arr) AS alen, md5(arr::text) AS amd5
FROM wide_s ORDER BY id;

SELECT (SELECT array_agg(md5(x::text) ORDER BY id) FROM wide_s x)
     = (SELECT array_agg(md5(x::text) ORDER BY id) FROM wide_h x) AS wide_rows_equal;

-- partial access into wide values
SELECT id, substr(t, 99990, 10) AS tail, left(t, 8) AS head FROM wide_s WHERE t IS NOT NULL ORDER BY id;
SELECT j->>'k1234' AS k1234, j ? 'k2000' AS has_last, j ? 'k2001' AS has_missing FROM wide_s WHERE id = 4;
SELECT arr[1] AS a1, arr[25000] AS alast, arr[12345] AS amid FROM wide_s WHERE id = 5;
SELECT id FROM wide_s WHERE t LIKE '%ee1f%' ORDER BY id;
SELECT id FROM wide_s WHERE b = (SELECT b FROM wide_h WHERE id = 3);

-- update wide -> wide, wide -> small, small -> wide, and a non-wide column of a wide row
UPDATE wide_s SET t = t || 'y' WHERE id = 1;
UPDATE wide_h SET t = t || 'y' WHERE id = 1;
UPDATE wide_s SET t = 'now small' WHERE id = 2;
UPDATE wide_h SET t = 'now small' WHERE id = 2;
UPDATE wide_s SET t = repeat('z', 120000) WHERE id = 8;
UPDATE wide_h SET t = repeat('z', 120000) WHERE id = 8;
UPDATE wide_s SET j = '{"changed": 1}' WHERE id = 6;
UPDATE wide_h SET j = '{"changed": 1}' WHERE id = 6;
SELECT id, length(t), md5(t), md5(b), md5(j::text), md5(arr::text) FROM wide_s ORDER BY id;
SELECT (SELECT array_agg(md5(x::text) ORDER BY id) FROM wide_s x)
     = (SELECT array_agg(md5(x::text) ORDER BY id) FROM wide_h x) AS wide_rows_equal_after_update;

-- many wide rows
INSERT INTO wide_s SELECT 100 + g, repeat(chr(65 + g % 26), 50000 + g) FROM generate_series(1, 40) g;
INSERT INTO wide_h SELECT 100 + g, repeat(chr(65 + g % 26), 50000 + g) FROM generate_series(1, 40) g;
SELECT count(*), sum(length(t)) FROM wide_s WHERE id > 100;
SELECT (SELECT array_agg(md5(x::text) ORDER BY id) FROM wide_s x)
     = (SELECT array_agg(md5(x::text) ORDER BY id) FROM wide_h x) AS many_wide_equal;
DELETE FROM wide_s WHERE id > 100 AND id % 2 = 0;
DELETE FROM wide_h WHERE id > 100 AND id % 2 = 0;
SELECT count(*), sum(length(t)) FROM wide_s WHERE id > 100;

-- wide values flow out again into heap intact
CREATE TABLE wide_back (LIKE wide_h) USING heap;
INSERT INTO wide_back SELECT * FROM wide_s;
SELECT (SELECT array_agg(md5(x::text) ORDER BY id) FROM wide_back x)
     = (SELECT array_agg(md5(x::text) ORDER BY id) FROM wide_h x) AS roundtrip_equal;

DROP TABLE wide_s, wide_h, wide_back;
