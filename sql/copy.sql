-- copy: COPY FROM STDIN (text, csv), binary round trip, COPY TO STDOUT and
-- COPY (query) TO with scoot tables; contents compared with heap.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;
SET datestyle = 'ISO, YMD';

CREATE TABLE copy_s (id int PRIMARY KEY, name text, qty numeric, tags text[], d date, note text DEFAULT 'dflt') USING scoot;
CREATE TABLE copy_h (id int PRIMARY KEY, name text, qty numeric, tags text[], d date, note text DEFAULT 'dflt') USING heap;

-- text format, with NULLs (\N), escapes and an empty string
COPY copy_s (id, name, qty, tags, d) FROM STDIN;
1	apple	1.5	{red,green}	2024-01-01
2	tab\there	\N	{}	\N
3	new\nline	-3	{"a b",NULL}	2000-02-29
4		0	\N	1999-12-31
5	back\\slash	1e3	{x}	2024-06-30
\.
COPY copy_h (id, name, qty, tags, d) FROM STDIN;
1	apple	1.5	{red,green}	2024-01-01
2	tab\there	\N	{}	\N
3	new\nline	-3	{"a b",NULL}	2000-02-29
4		0	\N	1999-12-31
5	back\\slash	1e3	{x}	2024-06-30
\.

-- csv format with header, quoting, an explicit NULL marker and FORCE_NULL
COPY copy_s (id, name, qty, tags, d, note) FROM STDIN WITH (FORMAT csv, HEADER true, NULL 'NIL', FORCE_NULL (note));
id,name,qty,tags,d,note
10,"comma, inside",10,"{a,b}",2024-02-02,plain
11,"quote "" inside",11.25,{},2024-02-03,""
12,NIL,NIL,NIL,NIL,NIL
13,"multi
line",13,{z},2024-02-04,"NIL"
14,ünïcödé 日本,14,{😀},2024-02-05,
\.
COPY copy_h (id, name, qty, tags, d, note) FROM STDIN WITH (FORMAT csv, HEADER true, NULL 'NIL', FORCE_NULL (note));
id,name,qty,tags,d,note
10,"comma, inside",10,"{a,b}",2024-02-02,plain
11,"quote "" inside",11.25,{},2024-02-03,""
12,NIL,NIL,NIL,NIL,NIL
13,"multi
line",13,{z},2024-02-04,"NIL"
14,ünïcödé 日本,14,{😀},2024-02-05,
\.

-- other delimiters and a WHERE clause
COPY copy_s (id, name) FROM STDIN WITH (DELIMITER '|') WHERE id % 2 = 0;
20|twenty
21|twenty-one
22|twenty-two
\.
COPY copy_h (id, name) FROM STDIN WITH (DELIMITER '|') WHERE id % 2 = 0;
20|twenty
21|twenty-one
22|twenty-two
\.

SELECT id, name, qty, tags, d, note FROM copy_s ORDER BY id;
SELECT (SELECT array_agg(x::text ORDER BY id) FROM copy_s x)
     = (SELECT array_agg(x::text ORDER BY id) FROM copy_h x) AS same_as_heap;

-- errors abort the whole COPY: bad data, and a duplicate key after good rows
COPY copy_s (id, name, qty) FROM STDIN;
30	ok	1
31	bad	notanumber
\.
COPY copy_s (id, name) FROM STDIN;
40	fine
41	fine
1	duplicate
\.
SELECT count(*) FROM copy_s WHERE id >= 30;

-- COPY (query) TO STDOUT, text and csv
COPY (SELECT id, name, qty, tags, d, note FROM copy_s ORDER BY id) TO STDOUT;
COPY (SELECT id, name, qty, note FROM copy_s WHERE id >= 10 ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER, FORCE_QUOTE (name));
COPY (SELECT s.id, h.name FROM copy_s s JOIN copy_h h USING (id) WHERE s.id < 5 ORDER BY s.id DESC) TO STDOUT WITH (FORMAT csv);

-- COPY table TO STDOUT (physical order: use a one-row table and a table of identical rows)
CREATE TABLE copy_one (a int, b text, c bool) USING scoot;
INSERT INTO copy_one VALUES (1, 'only row', true);
COPY copy_one TO STDOUT;
COPY copy_one (c, a) TO STDOUT WITH (FORMAT csv, HEADER);
CREATE TABLE copy_same (a int, b text) USING scoot;
INSERT INTO copy_same SELECT 7, 'same' FROM generate_series(1, 5);
COPY copy_same TO STDOUT;
COPY copy_same TO STDOUT WITH (FORMAT csv, DELIMITER ';', QUOTE '''', FORCE_QUOTE *);

-- a large COPY FROM (multi-insert path with buffer flushes), into a table with indexes
CREATE TABLE copy_big_s (n int, sq int8, t text) USING scoot;
CREATE INDEX copy_big_s_n ON copy_big_s (n);
CREATE TABLE copy_big_h (n int, sq int8, t text) USING heap;
COPY copy_big_s (n) FROM PROGRAM 'seq 1 5000';
COPY copy_big_h (n) FROM PROGRAM 'seq 1 5000';
UPDATE copy_big_s SET sq = n::int8 * n, t = repeat('t', n % 100);
UPDATE copy_big_h SET sq = n::int8 * n, t = repeat('t', n % 100);
SELECT count(*), sum(n), sum(sq), sum(length(t)) FROM copy_big_s;
SET enable_seqscan = off;
SELECT n, sq FROM copy_big_s WHERE n IN (1, 2500, 5000) ORDER BY n;
RESET enable_seqscan;
SELECT (SELECT array_agg(x::text ORDER BY n) FROM copy_big_s x)
     = (SELECT array_agg(x::text ORDER BY n) FROM copy_big_h x) AS big_same;

-- binary round trip: scoot -> binary file (in the data directory) -> scoot
CREATE TABLE copy_bin (LIKE copy_s) USING scoot;
DO $$
DECLARE f text := current_setting('data_directory') || '/pg_scoot_copy_regress.bin';
BEGIN
  EXECUTE format('COPY copy_s TO %L WITH (FORMAT binary)', f);
  EXECUTE format('COPY copy_bin FROM %L WITH (FORMAT binary)', f);
  -- the program reads what COPY writes before it exits (else the write may meet a closed pipe)
  EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', 'cat > /dev/null; rm -f ' || f);
END $$;
SELECT (SELECT array_agg(x::text ORDER BY id) FROM copy_bin x)
     = (SELECT array_agg(x::text ORDER BY id) FROM copy_h x) AS binary_roundtrip_same;

-- COPY FREEZE into a table created in the same transaction
BEGIN;
CREATE TABLE copy_frozen (a int, b text) USING scoot;
COPY copy_frozen FROM STDIN WITH (FREEZE);
1	one
2	two
3	three
\.
COMMIT;
SELECT * FROM copy_frozen ORDER BY a;
BEGIN;
TRUNCATE copy_frozen;
COPY copy_frozen FROM STDIN WITH (FREEZE, FORMAT csv);
4,four
\.
COMMIT;
SELECT * FROM copy_frozen ORDER BY a;

-- COPY into a table with a BEFORE trigger that modifies and filters rows
CREATE FUNCTION copy_trig() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.a < 0 THEN RETURN NULL; END IF;
  NEW.b := upper(NEW.b);
  RETURN NEW;
END $$;
CREATE TRIGGER copy_trig BEFORE INSERT ON copy_frozen FOR EACH ROW EXECUTE FUNCTION copy_trig();
COPY copy_frozen FROM STDIN;
5	five
-6	minus six
7	seven
\.
SELECT * FROM copy_frozen ORDER BY a;

-- multi-insert batches (COPY hands rows to the table AM up to 1000 at a time; scoot places a
-- batch's rows into a block under one lock): 3000 rows of ~700 bytes span several blocks, a
-- numeric(15,2) 'NaN' in the middle of a batch switches the column's compact encoding (rows
-- prepared before it keep the old layout), and a foreign key check and an AFTER ROW trigger
-- fetch every row back by the TID its insert returned
CREATE TABLE copy_mb_parent (k int PRIMARY KEY) USING scoot;
INSERT INTO copy_mb_parent SELECT generate_series(0, 9);
CREATE TABLE copy_mb_s (id int, k int REFERENCES copy_mb_parent, amount numeric(15,2), pad text) USING scoot;
CREATE TABLE copy_mb_h (id int, k int, amount numeric(15,2), pad text) USING heap;
CREATE TABLE copy_mb_log (id int, amount numeric(15,2), padlen int);
CREATE FUNCTION copy_mb_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO copy_mb_log VALUES (NEW.id, NEW.amount, length(NEW.pad)); RETURN NULL; END $$;
CREATE TRIGGER copy_mb_after AFTER INSERT ON copy_mb_s FOR EACH ROW EXECUTE FUNCTION copy_mb_trg();
CREATE FUNCTION copy_mb_load(bad_at int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE f text := current_setting('data_directory') || '/pg_scoot_copy_mb.csv';
BEGIN
  EXECUTE format($q$COPY (SELECT g, CASE WHEN g = %s THEN 99 ELSE g %% 10 END,
      CASE WHEN g = 1500 THEN 'NaN'::numeric ELSE g * 1.25 END, repeat(chr(97 + g %% 26), 700 + g %% 7)
    FROM generate_series(1, 3000) g) TO %L (FORMAT csv)$q$, bad_at, f);
  BEGIN
    EXECUTE format('COPY copy_mb_s FROM %L (FORMAT csv)', f);
  EXCEPTION WHEN foreign_key_violation THEN
    RAISE NOTICE 'COPY failed: %', SQLERRM;
  END;
  IF bad_at = 0 THEN
    EXECUTE format('COPY copy_mb_h FROM %L (FORMAT csv)', f);
  END IF;
  -- the program reads what COPY writes before it exits (else the write may meet a closed pipe)
  EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', 'cat > /dev/null; rm -f ' || f);
END $$;
SELECT copy_mb_load(0);
SELECT count(*), count(DISTINCT ctid), sum(id) FROM copy_mb_s;
SELECT blocks >= 3 AS spans_blocks FROM scoot.arena_tables WHERE relation = 'copy_mb_s'::regclass;
SELECT id, amount FROM copy_mb_s WHERE id IN (1, 1499, 1500, 1501, 3000) ORDER BY id;
SELECT (SELECT array_agg(x::text ORDER BY id) FROM copy_mb_s x)
     = (SELECT array_agg(x::text ORDER BY id) FROM copy_mb_h x) AS batches_same_as_heap;
SELECT (SELECT array_agg((id, amount, padlen)::text ORDER BY id) FROM copy_mb_log)
     = (SELECT array_agg((id, amount, length(pad))::text ORDER BY id) FROM copy_mb_s)
       AS trigger_saw_each_row;
-- a foreign key violation in the middle of the second batch: the whole COPY is undone
SELECT copy_mb_load(1200);
SELECT count(*), sum(id) FROM copy_mb_s;
SELECT count(*) FROM copy_mb_log;

DROP TABLE copy_s, copy_h, copy_bin, copy_one, copy_same, copy_big_s, copy_big_h, copy_frozen;
DROP TABLE copy_mb_s, copy_mb_h, copy_mb_log, copy_mb_parent;
DROP FUNCTION copy_trig();
DROP FUNCTION copy_mb_trg();
DROP FUNCTION copy_mb_load(int);
