-- scans_batch: block-at-a-time sequential scans and lazily deformed slots.
-- A scan copies a block's visible rows column by column, only the columns
-- asked for, and slots point at them until cleared, copied or materialized.
-- Every query here must answer exactly as on heap: partial column requests,
-- a row copied while the scan goes on (first row of a group, DISTINCT ON,
-- window frames), scroll cursors moving both ways across block boundaries,
-- columns added and dropped after rows were written, self-referencing DML,
-- nested-loop rescans, parallel workers and JIT-compiled expressions.
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE sb (id int, q numeric(15,2), w numeric(30,4), flag char(1), code varchar(5),
                 t text, d date, big int8, ok bool, u uuid, iv interval, f float8) USING scoot;
INSERT INTO sb SELECT i, (i % 50) + 0.25, (i * 7919 % 100003) / 7.0, (array['A','N','R'])[i % 3 + 1],
       'c' || (i % 97), repeat('x', i % 40) || i, date '2000-01-01' + (i % 3000), i::int8 * 1000003,
       i % 5 = 0, md5(i::text)::uuid, make_interval(days => i % 31, secs => i % 60), i / 3.0
FROM generate_series(1, 60000) i;
UPDATE sb SET q = NULL, t = NULL WHERE id % 11 = 0;
DELETE FROM sb WHERE id % 17 = 0;

-- nothing, an early column, a late column, a filter on a late column
SELECT count(*) FROM sb;
SELECT sum(id) FROM sb;
SELECT sum(f)::numeric(20,2), count(u) FROM sb;
SELECT sum(q), sum(w), count(*) FROM sb WHERE d >= '2005-01-01' AND d < '2006-01-01';
SELECT flag, count(*), sum(q), min(code), max(t), avg(big)::numeric(30,2) FROM sb GROUP BY flag ORDER BY flag;
SELECT sum(iv), count(DISTINCT u) FROM sb WHERE ok;
-- a copy of one row while the scan continues (first row of each group, DISTINCT ON)
SELECT DISTINCT ON (flag) flag, id, q, t FROM sb ORDER BY flag, id;
SELECT (array_agg(t ORDER BY id))[1:3], (array_agg(w ORDER BY id DESC))[1:2] FROM sb;
SELECT id, q, sum(q) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM sb WHERE id BETWEEN 29990 AND 30010 ORDER BY id;
-- whole rows and system columns
SELECT count(*) FROM sb s WHERE s::text LIKE '%,A,%';
SELECT count(*) FROM sb WHERE xmin::text::bigint > 0 AND ctid IS NOT NULL;
SELECT md5(string_agg(s::text, '|' ORDER BY id)) FROM sb s;

-- scroll cursor across block boundaries, both directions
BEGIN;
-- (rows never updated: the same physical order as on heap)
DECLARE c SCROLL CURSOR FOR SELECT id, q, t FROM sb WHERE id % 11 <> 0;
FETCH 3 FROM c;
FETCH ABSOLUTE 25000 FROM c;
FETCH BACKWARD 3 FROM c;
FETCH FORWARD 2 FROM c;
FETCH LAST FROM c;
FETCH PRIOR FROM c;
FETCH ABSOLUTE 1 FROM c;
FETCH BACKWARD 1 FROM c;
FETCH NEXT FROM c;
MOVE ABSOLUTE 40000 IN c;
FETCH RELATIVE -20000 FROM c;
COMMIT;

-- columns added (missing values) and dropped after rows were written
ALTER TABLE sb ADD COLUMN extra int DEFAULT 7, ADD COLUMN note text DEFAULT 'n';
ALTER TABLE sb DROP COLUMN code;
INSERT INTO sb (id, q, flag, extra, note) VALUES (70001, 1.5, 'Z', 8, 'new');
SELECT extra, note, count(*) FROM sb GROUP BY 1, 2 ORDER BY 1, 2;
SELECT sum(extra), max(note), sum(id) FILTER (WHERE extra = 8) FROM sb;
SELECT id, flag, extra, note FROM sb WHERE id > 69990 OR id < 3 ORDER BY id;

-- DML reading the table it writes
INSERT INTO sb (id, q, flag) SELECT id + 100000, q, flag FROM sb WHERE id < 200;
SELECT count(*), sum(id) FROM sb;
UPDATE sb a SET q = b.q + 1 FROM sb b WHERE a.id = b.id + 100000 AND b.id < 50;
SELECT sum(q) FROM sb WHERE id > 100000;
DELETE FROM sb WHERE id IN (SELECT id FROM sb WHERE id > 100000 AND id % 2 = 0);
SELECT count(*) FROM sb;

-- nested loop with the scoot scan as the rescanned inner side
CREATE TABLE sb_small (k int) USING scoot;
INSERT INTO sb_small VALUES (3), (1000), (59999);
SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_material = off;
SELECT k, (SELECT count(*) FROM sb WHERE id <= k AND flag = 'A') FROM sb_small ORDER BY k;
SELECT k, s.t FROM sb_small, sb s WHERE s.id = k ORDER BY k;
RESET enable_hashjoin; RESET enable_mergejoin; RESET enable_material;

-- parallel workers and JIT-compiled expressions
SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT count(*), sum(q), sum(w), max(t), sum(extra) FROM sb;
SELECT flag, count(*), sum(f)::numeric(20,2) FROM sb GROUP BY flag ORDER BY flag;
SELECT id, q, t FROM sb WHERE id % 9973 = 0 ORDER BY id;
RESET max_parallel_workers_per_gather; RESET parallel_setup_cost; RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
SET jit = on; SET jit_above_cost = 0; SET jit_inline_above_cost = 0; SET jit_optimize_above_cost = 0;
SELECT flag, count(*), sum(q), sum(w), max(t), min(d) FROM sb WHERE d > '2001-06-01' GROUP BY flag ORDER BY flag;
RESET jit_above_cost; RESET jit_inline_above_cost; RESET jit_optimize_above_cost; SET jit = off;

DROP TABLE sb, sb_small;
