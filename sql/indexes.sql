-- indexes: btree, hash, gin, brin, gist, spgist indexes on scoot tables.
-- Every query is run with seq scans, index scans, bitmap scans and
-- index-only scans forced in turn; the answers must agree with each other and
-- with the same query on a heap table.  (Plans themselves are printed in
-- scoot_specific_plans.sql.)
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE idx_s (id int, a int, t text, j jsonb, arr int4[], ts timestamp,
                    b box, r int4range, p point, flag bool) USING scoot;
CREATE TABLE idx_h (id int, a int, t text, j jsonb, arr int4[], ts timestamp,
                    b box, r int4range, p point, flag bool) USING heap;

-- idx_check(query): "{t}" in the query is replaced by idx_s / idx_h.
CREATE FUNCTION idx_check(q text, OUT n bigint, OUT methods_agree bool, OUT same_as_heap bool)
LANGUAGE plpgsql AS $$
DECLARE
  m text;
  cnt bigint;
  dig text;
  first_dig text;
  heap_dig text;
  qq text;
BEGIN
  methods_agree := true;
  FOREACH m IN ARRAY ARRAY['seq', 'index', 'bitmap', 'indexonly'] LOOP
    PERFORM set_config('enable_seqscan', CASE WHEN m = 'seq' THEN 'on' ELSE 'off' END, true);
    PERFORM set_config('enable_indexscan', CASE WHEN m IN ('index', 'indexonly') THEN 'on' ELSE 'off' END, true);
    PERFORM set_config('enable_indexonlyscan', CASE WHEN m = 'indexonly' THEN 'on' ELSE 'off' END, true);
    PERFORM set_config('enable_bitmapscan', CASE WHEN m = 'bitmap' THEN 'on' ELSE 'off' END, true);
    qq := format('SELECT count(*), md5(coalesce(string_agg(x::text, %L ORDER BY x::text COLLATE "C"), %L)) FROM (%s) x',
                 '|', '', replace(q, '{t}', 'idx_s'));
    EXECUTE qq INTO cnt, dig;
    IF first_dig IS NULL THEN
      first_dig := dig;
      n := cnt;
    ELSIF dig <> first_dig THEN
      methods_agree := false;
      RAISE NOTICE 'method % disagrees for: %', m, q;
    END IF;
  END LOOP;
  PERFORM set_config('enable_seqscan', 'on', true);
  PERFORM set_config('enable_indexscan', 'on', true);
  PERFORM set_config('enable_indexonlyscan', 'on', true);
  PERFORM set_config('enable_bitmapscan', 'on', true);
  qq := format('SELECT md5(coalesce(string_agg(x::text, %L ORDER BY x::text COLLATE "C"), %L)) FROM (%s) x',
               '|', '', replace(q, '{t}', 'idx_h'));
  EXECUTE qq INTO heap_dig;
  same_as_heap := (heap_dig = first_dig);
END
$$;

INSERT INTO idx_h
SELECT g,
       g % 97,
       'text-' || lpad((g % 500)::text, 4, '0'),
       jsonb_build_object('g', g, 'm', g % 10, 'tags', jsonb_build_array('t' || (g % 7), 't' || (g % 11))),
       ARRAY[g % 13, g % 17, g % 19],
       timestamp '2024-01-01' + g * interval '1 minute',
       box(point(g % 100, g % 50), point(g % 100 + 1, g % 50 + 1)),
       int4range(g, g + 10),
       point(g % 71, g % 73),
       g % 3 = 0
FROM generate_series(1, 5000) g;
INSERT INTO idx_s SELECT * FROM idx_h;

-- indexes created on a populated table
CREATE INDEX idx_s_a ON idx_s (a);
CREATE UNIQUE INDEX idx_s_id ON idx_s (id);
CREATE INDEX idx_s_t ON idx_s (t COLLATE "C");
CREATE INDEX idx_s_multi ON idx_s (a, id DESC NULLS FIRST) INCLUDE (flag);
CREATE INDEX idx_s_expr ON idx_s ((lower(t) || a::text));
CREATE INDEX idx_s_partial ON idx_s (a) WHERE flag;
CREATE INDEX idx_s_hash ON idx_s USING hash (t);
CREATE INDEX idx_s_gin_j ON idx_s USING gin (j);
CREATE INDEX idx_s_gin_jp ON idx_s USING gin (j jsonb_path_ops);
CREATE INDEX idx_s_gin_arr ON idx_s USING gin (arr);
CREATE INDEX idx_s_brin ON idx_s USING brin (ts) WITH (pages_per_range = 2);
CREATE INDEX idx_s_gist_b ON idx_s USING gist (b);
CREATE INDEX idx_s_gist_r ON idx_s USING gist (r);
CREATE INDEX idx_s_spgist_p ON idx_s USING spgist (p);
CREATE INDEX idx_s_spgist_t ON idx_s USING spgist (t);
ANALYZE idx_s;
ANALYZE idx_h;

CREATE VIEW idx_queries (name, q) AS VALUES
  ('btree eq',          'SELECT id, a FROM {t} WHERE a = 42'),
  ('btree range',       'SELECT id FROM {t} WHERE id BETWEEN 100 AND 140'),
  ('btree in',          'SELECT id FROM {t} WHERE id IN (1, 77, 4999, 6000)'),
  ('btree ionly',       'SELECT a FROM {t} WHERE a < 3'),
  ('btree text',        'SELECT id, t FROM {t} WHERE t COLLATE "C" >= ''text-0490'''),
  ('btree multi',       'SELECT id, a, flag FROM {t} WHERE a = 5 AND id > 2000'),
  ('btree order',       'SELECT id FROM (SELECT id FROM {t} WHERE a = 7 ORDER BY a, id DESC LIMIT 10) s'),
  ('btree expr',        'SELECT id FROM {t} WHERE lower(t) || a::text = ''text-00100'''),
  ('btree partial',     'SELECT id FROM {t} WHERE flag AND a = 10'),
  ('btree null',        'SELECT id FROM {t} WHERE a IS NULL'),
  ('hash eq',           'SELECT id FROM {t} WHERE t = ''text-0123'''),
  ('gin jsonb @>',      'SELECT id FROM {t} WHERE j @> ''{"m": 3, "tags": ["t5"]}'''),
  ('gin jsonb ?',       'SELECT count(*) FROM {t} WHERE j ? ''tags'''),
  ('gin jsonb path',    'SELECT id FROM {t} WHERE j @? ''$.tags[*] ? (@ == "t10")'' AND id < 300'),
  ('gin array @>',      'SELECT id FROM {t} WHERE arr @> ARRAY[3, 5]'),
  ('gin array &&',      'SELECT count(*) FROM {t} WHERE arr && ARRAY[0]'),
  ('brin range',        'SELECT id FROM {t} WHERE ts BETWEEN ''2024-01-02 00:00'' AND ''2024-01-02 00:30'''),
  ('gist box',          'SELECT id FROM {t} WHERE b && box(point(10, 10), point(10.5, 10.5))'),
  ('gist range',        'SELECT id FROM {t} WHERE r @> 2500'),
  ('spgist point',      'SELECT id FROM {t} WHERE p <@ box(point(0, 0), point(2, 2))'),
  ('spgist prefix',     'SELECT id FROM {t} WHERE t ^@ ''text-049''');

SELECT name, (idx_check(q)).* FROM idx_queries ORDER BY name COLLATE "C";

-- the actual rows for a few of them
SET enable_seqscan = off;
SELECT id, a FROM idx_s WHERE a = 42 AND id < 500 ORDER BY id;
SELECT id, t FROM idx_s WHERE t = 'text-0123' ORDER BY id;
SELECT id, arr FROM idx_s WHERE arr @> ARRAY[3, 5] ORDER BY id LIMIT 5;
SELECT id, r FROM idx_s WHERE r @> 2500 ORDER BY id;
SELECT id, a FROM idx_s WHERE a = 7 ORDER BY a, id DESC LIMIT 5;
RESET enable_seqscan;

-- updates (indexed and non-indexed columns) and deletes, then the same checks
UPDATE idx_s SET flag = NOT flag WHERE id % 10 = 1;
UPDATE idx_h SET flag = NOT flag WHERE id % 10 = 1;
UPDATE idx_s SET a = a + 1, t = t || 'u', arr = arr || 100, j = j || '{"u": true}' WHERE id % 7 = 0;
UPDATE idx_h SET a = a + 1, t = t || 'u', arr = arr || 100, j = j || '{"u": true}' WHERE id % 7 = 0;
UPDATE idx_s SET a = NULL, r = 'empty', b = NULL WHERE id % 250 = 0;
UPDATE idx_h SET a = NULL, r = 'empty', b = NULL WHERE id % 250 = 0;
DELETE FROM idx_s WHERE id % 11 = 0;
DELETE FROM idx_h WHERE id % 11 = 0;
INSERT INTO idx_s SELECT * FROM idx_h WHERE id % 11 = 0;  -- nothing: rows were deleted on both
INSERT INTO idx_s (id, a, t, flag) VALUES (6001, 42, 'text-0123', true), (6002, NULL, NULL, NULL);
INSERT INTO idx_h (id, a, t, flag) VALUES (6001, 42, 'text-0123', true), (6002, NULL, NULL, NULL);

SELECT name, (idx_check(q)).* FROM idx_queries ORDER BY name COLLATE "C";

-- indexes built after the updates (must skip dead row versions), including
-- CREATE INDEX CONCURRENTLY
CREATE INDEX idx_s_a2 ON idx_s (a, t);
CREATE INDEX CONCURRENTLY idx_s_cc ON idx_s (t, a);
CREATE UNIQUE INDEX CONCURRENTLY idx_s_cc_u ON idx_s (id, a);
CREATE INDEX CONCURRENTLY idx_s_cc_gin ON idx_s USING gin (arr);
SELECT indexrelid::regclass AS index, indisvalid, indisready
FROM pg_index WHERE indrelid = 'idx_s'::regclass ORDER BY indexrelid::regclass::text COLLATE "C";
SELECT name, (idx_check(q)).* FROM idx_queries ORDER BY name COLLATE "C";
SELECT (idx_check('SELECT id, a, t FROM {t} WHERE t = ''text-0123u'' AND a > 0')).*;

-- unique violations and failed unique builds
INSERT INTO idx_s (id) VALUES (1);
UPDATE idx_s SET id = 2 WHERE id = 3;
-- (each has exactly one duplicated key: with several, which one is reported
-- depends on the order the rows reach the sort)
CREATE UNIQUE INDEX idx_s_bad ON idx_s (a) WHERE id IN (40, 137, 300);
CREATE UNIQUE INDEX CONCURRENTLY idx_s_bad_cc ON idx_s (t) WHERE id IN (124, 624, 1000);
SELECT indexrelid::regclass AS index, indisvalid FROM pg_index
WHERE indrelid = 'idx_s'::regclass AND NOT indisvalid ORDER BY 1;
DROP INDEX idx_s_bad_cc;
-- a unique index that only conflicts with a deleted row builds fine
DELETE FROM idx_s WHERE id = 6002;
DELETE FROM idx_h WHERE id = 6002;
CREATE UNIQUE INDEX idx_s_t_u ON idx_s (t) WHERE id > 6000;
INSERT INTO idx_s (id, t) VALUES (6003, 'text-0123');

-- REINDEX
REINDEX INDEX idx_s_a;
REINDEX INDEX idx_s_gin_j;
REINDEX TABLE idx_s;
REINDEX INDEX CONCURRENTLY idx_s_hash;
REINDEX TABLE CONCURRENTLY idx_s;
SELECT count(*) AS invalid_indexes FROM pg_index WHERE indrelid = 'idx_s'::regclass AND NOT indisvalid;
SELECT name, (idx_check(q)).* FROM idx_queries ORDER BY name COLLATE "C";

-- an index created in the same transaction as the rows, with rollback
BEGIN;
CREATE TABLE idx_tx (a int, b text) USING scoot;
INSERT INTO idx_tx SELECT g, g::text FROM generate_series(1, 1000) g;
DELETE FROM idx_tx WHERE a % 2 = 0;
CREATE INDEX idx_tx_a ON idx_tx (a);
SET LOCAL enable_seqscan = off;
SELECT count(*), sum(a) FROM idx_tx WHERE a > 500;
ROLLBACK;
SELECT count(*) FROM pg_class WHERE relname IN ('idx_tx', 'idx_tx_a');

-- index on a table created with data by CREATE TABLE AS
CREATE TABLE idx_ctas USING scoot AS SELECT g AS a, md5(g::text) AS m FROM generate_series(1, 2000) g;
CREATE INDEX idx_ctas_m ON idx_ctas (m);
SET enable_seqscan = off;
SELECT a FROM idx_ctas WHERE m = md5('1234');
RESET enable_seqscan;

DROP VIEW idx_queries;
DROP FUNCTION idx_check(text);
DROP TABLE idx_s, idx_h, idx_ctas;
