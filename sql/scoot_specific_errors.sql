-- scoot_specific_errors: errors that only scoot raises. Values of columns with
-- STORAGE PLAIN are never compressed or moved out of line (heap refuses rows
-- over 8160 bytes then); scoot keeps them inside the block and refuses a row
-- whose variable-length data exceeds the block's var area. A too-large row must
-- fail with an error that mentions scoot, and must leave the table (and other
-- rows of the same statement) untouched. Large values of ordinary columns are
-- TOASTed like heap's: see toast.sql.
-- No heap-generated expected output: the reference is scoot itself.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE big_s (id int PRIMARY KEY, payload text, b bytea) USING scoot;
ALTER TABLE big_s ALTER COLUMN payload SET STORAGE PLAIN, ALTER COLUMN b SET STORAGE PLAIN;
INSERT INTO big_s VALUES (1, 'small', '\x00');

-- scoot_try(sql): 'ok' or 'error mentions scoot: <bool>' plus the SQLSTATE
CREATE FUNCTION scoot_try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN format('error (%s), mentions scoot: %s', SQLSTATE, SQLERRM ILIKE '%scoot%');
END $$;

-- 1 MB chunk of incompressible-looking text; repeated with a period far beyond
-- any compression window
CREATE TABLE big_chunk AS
SELECT string_agg(md5(i::text), '' ORDER BY i) AS c FROM generate_series(1, 32768) i;

SELECT scoot_try($q$INSERT INTO big_s SELECT 2, repeat(c, 16), NULL FROM big_chunk$q$) AS insert_16mb_text;
SELECT scoot_try($q$INSERT INTO big_s SELECT 3, NULL, convert_to(repeat(c, 16), 'UTF8') FROM big_chunk$q$) AS insert_16mb_bytea;
-- two columns that are each large, adding up
SELECT scoot_try($q$INSERT INTO big_s SELECT 4, repeat(c, 10), convert_to(repeat(c, 10), 'UTF8') FROM big_chunk$q$) AS insert_20mb_row;
-- UPDATE that makes a small row too large
SELECT scoot_try($q$UPDATE big_s SET payload = (SELECT repeat(c, 16) FROM big_chunk) WHERE id = 1$q$) AS update_to_16mb;
-- multi-row INSERT where only the last row is too large: nothing is inserted
SELECT scoot_try($q$INSERT INTO big_s SELECT g, 'fine', NULL::bytea FROM generate_series(10, 20) g
                    UNION ALL SELECT 21, repeat(c, 16), NULL FROM big_chunk$q$) AS multirow_insert;
-- COPY path
SELECT scoot_try($q$COPY big_s (id, payload) FROM PROGRAM 'printf "30\\t%020000000d\\n" 0'$q$) AS copy_20mb;
SELECT id, length(payload) AS plen, md5(payload) AS pmd5, length(b) AS blen FROM big_s ORDER BY id;

-- the exact error text for the too-large row (verbosity terse: message only)
\set VERBOSITY terse
INSERT INTO big_s SELECT 7, repeat(c, 16), NULL FROM big_chunk;
\set VERBOSITY default

-- the table is fully usable afterwards
INSERT INTO big_s VALUES (5, repeat('x', 1000), '\x01');
UPDATE big_s SET payload = 'still small' WHERE id = 1;
SELECT id, length(payload) AS plen, length(b) AS blen FROM big_s ORDER BY id;

-- values of ~100 kB (well below the limit) are fine, even with STORAGE PLAIN
SELECT scoot_try($q$INSERT INTO big_s SELECT 6, left(c, 100000), NULL FROM big_chunk$q$) AS insert_100kb;
SELECT id, length(payload) AS plen, pg_column_compression(payload) FROM big_s WHERE id = 6;
-- the same 16 MB value in an ordinary (EXTENDED) column is TOASTed
ALTER TABLE big_s ALTER COLUMN payload SET STORAGE EXTENDED;
SELECT scoot_try($q$INSERT INTO big_s SELECT 7, repeat(c, 16), NULL FROM big_chunk$q$) AS insert_16mb_extended;
SELECT id, length(payload) AS plen, md5(payload) FROM big_s WHERE id = 7;

DROP TABLE big_s, big_chunk;
DROP FUNCTION scoot_try(text);
