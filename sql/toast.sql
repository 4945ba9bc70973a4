-- toast: values of any size heap stores are storable in scoot tables. Wide rows
-- are TOASTed exactly as heap does it (compressed with the column's compression
-- method, moved out of line to the table's TOAST relation), and the out-of-line
-- values follow the row through UPDATE, DELETE, rollback, VACUUM, TRUNCATE and
-- rewrites. Contents are compared through md5 and lengths; nothing physical is
-- printed.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE toast_s (id int PRIMARY KEY, t text, b bytea, j jsonb) USING scoot;
CREATE TABLE toast_h (LIKE toast_s INCLUDING ALL) USING heap;
-- a TOAST relation like heap's
SELECT c.relname, c.reltoastrelid <> 0 AS has_toast, t.relkind
  FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid
 WHERE c.relname IN ('toast_s', 'toast_h') ORDER BY c.relname;

-- 1 MB of md5 hex, the building block (not very compressible)
CREATE TEMP TABLE toast_chunk AS
SELECT string_agg(md5(i::text), '' ORDER BY i) AS c FROM generate_series(1, 32768) i;

-- 100 MB text, 100 MB bytea, a 10 MB jsonb document, compressible and small values
INSERT INTO toast_s SELECT 1, repeat(c, 100), NULL, NULL FROM toast_chunk;
INSERT INTO toast_s SELECT 2, NULL, convert_to(repeat(c, 100), 'UTF8'), NULL FROM toast_chunk;
INSERT INTO toast_s SELECT 3, NULL, NULL,
       (SELECT jsonb_object_agg('key' || g, repeat(md5(g::text), 10)) FROM generate_series(1, 30000) g);
INSERT INTO toast_s VALUES (4, repeat('compressible ', 100000), decode(repeat('00', 50000), 'hex'), '{"small": 1}');
INSERT INTO toast_s VALUES (5, 'small', '\x01', '[1, 2, 3]');
INSERT INTO toast_h SELECT * FROM toast_s;

SELECT id, length(t), md5(t), length(b), md5(b), pg_column_size(j) > 10000000 AS j_over_10mb,
       md5(j::text), pg_column_compression(t) AS tc, pg_column_compression(b) AS bc
  FROM toast_s ORDER BY id;
SELECT id, length(t), md5(t), length(b), md5(b), pg_column_size(j) > 10000000 AS j_over_10mb,
       md5(j::text), pg_column_compression(t) AS tc, pg_column_compression(b) AS bc
  FROM toast_h ORDER BY id;
-- the same stored sizes (compressed or not) as heap
SELECT bool_and(pg_column_size(s.t) IS NOT DISTINCT FROM pg_column_size(h.t)
            AND pg_column_size(s.b) IS NOT DISTINCT FROM pg_column_size(h.b)
            AND pg_column_size(s.j) IS NOT DISTINCT FROM pg_column_size(h.j)) AS same_sizes
  FROM toast_s s JOIN toast_h h USING (id);
-- slices and jsonb access work on the out-of-line values
SELECT substr(t, 1000000, 20), substr(b, 50000000, 8), j->>'key12345' FROM toast_s WHERE id IN (1, 2, 3) ORDER BY id;

-- UPDATE of another column keeps the out-of-line value (no copy), UPDATE of the
-- value replaces it
UPDATE toast_s SET j = '{"updated": true}' WHERE id = 1;
UPDATE toast_h SET j = '{"updated": true}' WHERE id = 1;
UPDATE toast_s SET t = t || 'tail' WHERE id = 4;
UPDATE toast_h SET t = t || 'tail' WHERE id = 4;
UPDATE toast_s SET b = substr(b, 1, 10000000) WHERE id = 2;
UPDATE toast_h SET b = substr(b, 1, 10000000) WHERE id = 2;
SELECT id, length(t), md5(t), length(b), md5(b), md5(j::text) FROM toast_s ORDER BY id;
SELECT (SELECT array_agg(md5(x::text) ORDER BY id) FROM toast_s x) = (SELECT array_agg(md5(x::text) ORDER BY id) FROM toast_h x) AS same_after_update;

-- rolled back changes and savepoints
BEGIN;
UPDATE toast_s SET t = repeat('z', 3000000) WHERE id = 1;
DELETE FROM toast_s WHERE id = 2;
SAVEPOINT s1;
INSERT INTO toast_s SELECT 6, repeat(c, 3), NULL, NULL FROM toast_chunk;
ROLLBACK TO s1;
INSERT INTO toast_s SELECT 7, repeat(c, 2), NULL, NULL FROM toast_chunk;
ROLLBACK;
SELECT id, length(t), md5(t), length(b) FROM toast_s ORDER BY id;

-- DELETE, then VACUUM of the table (and its TOAST relation)
DELETE FROM toast_s WHERE id = 4;
DELETE FROM toast_h WHERE id = 4;
VACUUM toast_s;
SELECT id, length(t), md5(t), length(b), md5(b) FROM toast_s ORDER BY id;

-- rewrites move the out-of-line values to the new TOAST relation
VACUUM FULL toast_s;
SELECT id, length(t), md5(t), length(b), md5(b), md5(j::text) FROM toast_s ORDER BY id;
CLUSTER toast_s USING toast_s_pkey;
ALTER TABLE toast_s ALTER COLUMN j TYPE json;
ALTER TABLE toast_h ALTER COLUMN j TYPE json;
SELECT (SELECT array_agg(md5(x::text) ORDER BY id) FROM toast_s x) = (SELECT array_agg(md5(x::text) ORDER BY id) FROM toast_h x) AS same_after_rewrites;

-- column compression methods and storage settings
ALTER TABLE toast_s ALTER COLUMN t SET COMPRESSION pglz;
ALTER TABLE toast_h ALTER COLUMN t SET COMPRESSION pglz;
ALTER TABLE toast_s ALTER COLUMN b SET STORAGE EXTERNAL;
ALTER TABLE toast_h ALTER COLUMN b SET STORAGE EXTERNAL;
INSERT INTO toast_s VALUES (8, repeat('pglz ', 20000), decode(repeat('ab', 20000), 'hex'), NULL);
INSERT INTO toast_h VALUES (8, repeat('pglz ', 20000), decode(repeat('ab', 20000), 'hex'), NULL);
SELECT id, pg_column_compression(t), pg_column_compression(b), pg_column_size(b) FROM toast_s WHERE id = 8;
SELECT id, pg_column_compression(t), pg_column_compression(b), pg_column_size(b) FROM toast_h WHERE id = 8;

-- values copied between tables (INSERT ... SELECT, CREATE TABLE AS) are re-toasted
CREATE TABLE toast_copy_s USING scoot AS SELECT * FROM toast_s;
SELECT (SELECT array_agg(md5(x::text) ORDER BY id) FROM toast_copy_s x) = (SELECT array_agg(md5(x::text) ORDER BY id) FROM toast_s x) AS same_copy;
INSERT INTO toast_copy_s SELECT id + 100, t, b, j FROM toast_h;
SELECT count(*), sum(length(t)), sum(length(b)) FROM toast_copy_s;

-- TRUNCATE empties the TOAST relation too
TRUNCATE toast_s;
SELECT count(*) FROM toast_s;
INSERT INTO toast_s SELECT 9, repeat(c, 5), NULL, NULL FROM toast_chunk;
SELECT id, length(t), md5(t) FROM toast_s;

DROP TABLE toast_s, toast_h, toast_copy_s, toast_chunk;
