-- conflict: INSERT ... ON CONFLICT on scoot tables with unique, partial
-- unique and exclusion constraints; results compared with heap.
\set VERBOSITY default
SET client_min_messages = notice;
SET jit = off;

CREATE TABLE conf_s (k int PRIMARY KEY, v text, cnt int DEFAULT 1, u int UNIQUE) USING scoot;
CREATE TABLE conf_h (k int PRIMARY KEY, v text, cnt int DEFAULT 1, u int UNIQUE) USING heap;

INSERT INTO conf_s (k, v, u) SELECT g, 'v' || g, g * 100 FROM generate_series(1, 10) g;
INSERT INTO conf_h (k, v, u) SELECT g, 'v' || g, g * 100 FROM generate_series(1, 10) g;

-- DO NOTHING: with and without conflict target, RETURNING only reports inserted rows
INSERT INTO conf_s (k, v) VALUES (1, 'dup'), (11, 'new') ON CONFLICT DO NOTHING RETURNING k, v;
INSERT INTO conf_h (k, v) VALUES (1, 'dup'), (11, 'new') ON CONFLICT DO NOTHING RETURNING k, v;
INSERT INTO conf_s (k, v) VALUES (2, 'dup') ON CONFLICT (k) DO NOTHING RETURNING k;
INSERT INTO conf_h (k, v) VALUES (2, 'dup') ON CONFLICT (k) DO NOTHING RETURNING k;
-- conflict on the other unique index is not covered by target (k)
INSERT INTO conf_s (k, v, u) VALUES (12, 'u dup', 300) ON CONFLICT (k) DO NOTHING;
INSERT INTO conf_s (k, v, u) VALUES (12, 'u dup', 300) ON CONFLICT (u) DO NOTHING RETURNING k;
INSERT INTO conf_h (k, v, u) VALUES (12, 'u dup', 300) ON CONFLICT (u) DO NOTHING RETURNING k;
INSERT INTO conf_s (k, v, u) VALUES (12, 'u dup', 300) ON CONFLICT DO NOTHING RETURNING k;

-- DO UPDATE with EXCLUDED, WHERE, and RETURNING
INSERT INTO conf_s (k, v) VALUES (3, 'upd') ON CONFLICT (k) DO UPDATE SET v = conf_s.v || '+' || EXCLUDED.v, cnt = conf_s.cnt + 1 RETURNING k, v, cnt;
INSERT INTO conf_h (k, v) VALUES (3, 'upd') ON CONFLICT (k) DO UPDATE SET v = conf_h.v || '+' || EXCLUDED.v, cnt = conf_h.cnt + 1 RETURNING k, v, cnt;
INSERT INTO conf_s (k, v) VALUES (3, 'again') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, cnt = conf_s.cnt + 1 RETURNING k, v, cnt;
INSERT INTO conf_h (k, v) VALUES (3, 'again') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, cnt = conf_h.cnt + 1 RETURNING k, v, cnt;
-- WHERE filters the update: no row returned
INSERT INTO conf_s (k, v) VALUES (4, 'filtered') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v WHERE conf_s.cnt > 5 RETURNING k, v;
INSERT INTO conf_h (k, v) VALUES (4, 'filtered') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v WHERE conf_h.cnt > 5 RETURNING k, v;
-- ON CONSTRAINT
INSERT INTO conf_s (k, v, u) VALUES (100, 'by constraint', 500) ON CONFLICT ON CONSTRAINT conf_s_u_key DO UPDATE SET v = EXCLUDED.v RETURNING k, v, u;
INSERT INTO conf_h (k, v, u) VALUES (100, 'by constraint', 500) ON CONFLICT ON CONSTRAINT conf_h_u_key DO UPDATE SET v = EXCLUDED.v RETURNING k, v, u;
-- multi-row upsert: a mix of inserts and updates
INSERT INTO conf_s (k, v) SELECT g, 'bulk' || g FROM generate_series(5, 15) g
  ON CONFLICT (k) DO UPDATE SET cnt = conf_s.cnt + 10, v = EXCLUDED.v;
INSERT INTO conf_h (k, v) SELECT g, 'bulk' || g FROM generate_series(5, 15) g
  ON CONFLICT (k) DO UPDATE SET cnt = conf_h.cnt + 10, v = EXCLUDED.v;
-- the same key twice in one command cannot be updated twice
INSERT INTO conf_s (k, v) VALUES (20, 'a'), (20, 'b') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v;
INSERT INTO conf_s (k, v) VALUES (20, 'a'), (20, 'b') ON CONFLICT (k) DO NOTHING;
INSERT INTO conf_h (k, v) VALUES (20, 'a'), (20, 'b') ON CONFLICT (k) DO NOTHING;
-- DO UPDATE changing the key itself
INSERT INTO conf_s (k, v) VALUES (20, 'x') ON CONFLICT (k) DO UPDATE SET k = conf_s.k + 1000 RETURNING k, v;
INSERT INTO conf_h (k, v) VALUES (20, 'x') ON CONFLICT (k) DO UPDATE SET k = conf_h.k + 1000 RETURNING k, v;
-- DO UPDATE causing a violation of the other unique constraint
INSERT INTO conf_s (k, v) VALUES (6, 'x') ON CONFLICT (k) DO UPDATE SET u = 700;
SELECT k, v, cnt, u FROM conf_s ORDER BY k;
SELECT (SELECT array_agg(x::text ORDER BY k) FROM conf_s x)
     = (SELECT array_agg(x::text ORDER BY k) FROM conf_h x) AS same_as_heap;

-- upsert inside a transaction with savepoints; the same row upserted repeatedly
BEGIN;
INSERT INTO conf_s (k, v) VALUES (30, 'first') ON CONFLICT (k) DO UPDATE SET cnt = conf_s.cnt + 1;
SAVEPOINT sp;
INSERT INTO conf_s (k, v) VALUES (30, 'second') ON CONFLICT (k) DO UPDATE SET cnt = conf_s.cnt + 1;
ROLLBACK TO SAVEPOINT sp;
INSERT INTO conf_s (k, v) VALUES (30, 'third') ON CONFLICT (k) DO UPDATE SET cnt = conf_s.cnt + 1, v = EXCLUDED.v;
INSERT INTO conf_s (k, v) VALUES (30, 'fourth') ON CONFLICT (k) DO UPDATE SET cnt = conf_s.cnt + 1, v = EXCLUDED.v;
COMMIT;
SELECT k, v, cnt FROM conf_s WHERE k = 30;
-- a row deleted in the same transaction no longer conflicts
BEGIN;
DELETE FROM conf_s WHERE k = 30;
INSERT INTO conf_s (k, v) VALUES (30, 'reborn') ON CONFLICT (k) DO UPDATE SET v = 'should not happen' RETURNING k, v, cnt;
COMMIT;

-- partial unique index and arbiter inference with a predicate
CREATE TABLE conf_part_s (id serial PRIMARY KEY, email text, active bool, note text) USING scoot;
CREATE UNIQUE INDEX conf_part_s_active ON conf_part_s (email) WHERE active;
CREATE TABLE conf_part_h (id serial PRIMARY KEY, email text, active bool, note text) USING heap;
CREATE UNIQUE INDEX conf_part_h_active ON conf_part_h (email) WHERE active;
INSERT INTO conf_part_s (email, active, note) VALUES ('a@x', true, 'a1'), ('a@x', false, 'a-old'), ('a@x', false, 'a-older'), ('b@x', true, 'b1');
INSERT INTO conf_part_h (email, active, note) VALUES ('a@x', true, 'a1'), ('a@x', false, 'a-old'), ('a@x', false, 'a-older'), ('b@x', true, 'b1');
INSERT INTO conf_part_s (email, active, note) VALUES ('a@x', true, 'a2');
INSERT INTO conf_part_s (email, active, note) VALUES ('a@x', true, 'a2') ON CONFLICT (email) WHERE active DO UPDATE SET note = conf_part_s.note || '+' || EXCLUDED.note RETURNING email, note;
INSERT INTO conf_part_h (email, active, note) VALUES ('a@x', true, 'a2') ON CONFLICT (email) WHERE active DO UPDATE SET note = conf_part_h.note || '+' || EXCLUDED.note RETURNING email, note;
INSERT INTO conf_part_s (email, active, note) VALUES ('a@x', false, 'inactive ok') ON CONFLICT (email) WHERE active DO NOTHING RETURNING email, note;
INSERT INTO conf_part_h (email, active, note) VALUES ('a@x', false, 'inactive ok') ON CONFLICT (email) WHERE active DO NOTHING RETURNING email, note;
-- no arbiter index matches without the predicate
INSERT INTO conf_part_s (email, active, note) VALUES ('c@x', true, 'c') ON CONFLICT (email) DO NOTHING;
SELECT email, active, note FROM conf_part_s ORDER BY id;
SELECT (SELECT array_agg((email, active, note)::text ORDER BY id) FROM conf_part_s x)
     = (SELECT array_agg((email, active, note)::text ORDER BY id) FROM conf_part_h x) AS partial_same_as_heap;

-- expression unique index as arbiter
CREATE TABLE conf_expr_s (id int, name text) USING scoot;
CREATE UNIQUE INDEX conf_expr_s_lower ON conf_expr_s (lower(name));
INSERT INTO conf_expr_s VALUES (1, 'Alice'), (2, 'Bob');
INSERT INTO conf_expr_s VALUES (3, 'ALICE') ON CONFLICT (lower(name)) DO UPDATE SET name = EXCLUDED.name, id = conf_expr_s.id * 10 RETURNING id, name;
INSERT INTO conf_expr_s VALUES (4, 'bob');
SELECT id, name FROM conf_expr_s ORDER BY id;

-- exclusion constraints (range and box overlap); DO NOTHING is supported,
-- DO UPDATE is not (same as heap)
CREATE TABLE conf_excl_s (id int, r int4range, b box, EXCLUDE USING gist (r WITH &&)) USING scoot;
CREATE TABLE conf_excl_h (id int, r int4range, b box, EXCLUDE USING gist (r WITH &&)) USING heap;
INSERT INTO conf_excl_s VALUES (1, '[1,10)', '(0,0),(1,1)'), (2, '[10,20)', '(2,2),(3,3)');
INSERT INTO conf_excl_h VALUES (1, '[1,10)', '(0,0),(1,1)'), (2, '[10,20)', '(2,2),(3,3)');
INSERT INTO conf_excl_s VALUES (3, '[5,15)', NULL);
INSERT INTO conf_excl_s VALUES (3, '[5,15)', NULL) ON CONFLICT DO NOTHING RETURNING id;
INSERT INTO conf_excl_s VALUES (4, '[20,30)', NULL) ON CONFLICT DO NOTHING RETURNING id;
INSERT INTO conf_excl_h VALUES (4, '[20,30)', NULL) ON CONFLICT DO NOTHING RETURNING id;
INSERT INTO conf_excl_s VALUES (5, '[25,26)', NULL) ON CONFLICT ON CONSTRAINT conf_excl_s_r_excl DO NOTHING RETURNING id;
INSERT INTO conf_excl_s VALUES (6, '[25,26)', NULL) ON CONFLICT ON CONSTRAINT conf_excl_s_r_excl DO UPDATE SET id = 0;
UPDATE conf_excl_s SET r = '[0,15)' WHERE id = 1;
UPDATE conf_excl_s SET r = '[0,5)' WHERE id = 1;
UPDATE conf_excl_h SET r = '[0,5)' WHERE id = 1;
DELETE FROM conf_excl_s WHERE id = 2;
DELETE FROM conf_excl_h WHERE id = 2;
INSERT INTO conf_excl_s VALUES (7, '[12,18)', NULL);
INSERT INTO conf_excl_h VALUES (7, '[12,18)', NULL);
CREATE TABLE conf_box_s (id int, b box, EXCLUDE USING gist (b WITH &&)) USING scoot;
INSERT INTO conf_box_s VALUES (1, '(0,0),(1,1)'), (2, '(2,2),(3,3)');
INSERT INTO conf_box_s VALUES (3, '(0.5,0.5),(1.5,1.5)');
INSERT INTO conf_box_s VALUES (3, '(0.5,0.5),(1.5,1.5)') ON CONFLICT DO NOTHING;
INSERT INTO conf_box_s VALUES (4, '(5,5),(6,6)') ON CONFLICT DO NOTHING;
SELECT id, b FROM conf_box_s ORDER BY id;
SELECT id, r FROM conf_excl_s ORDER BY id;
SELECT (SELECT array_agg(x::text ORDER BY id) FROM conf_excl_s x)
     = (SELECT array_agg(x::text ORDER BY id) FROM conf_excl_h x) AS excl_same_as_heap;

-- deferrable unique constraint: temporary duplicates inside a transaction
CREATE TABLE conf_def_s (k int UNIQUE DEFERRABLE INITIALLY DEFERRED, v text) USING scoot;
INSERT INTO conf_def_s VALUES (1, 'a'), (2, 'b'), (3, 'c');
UPDATE conf_def_s SET k = k + 1;
SELECT k, v FROM conf_def_s ORDER BY k;
BEGIN;
INSERT INTO conf_def_s VALUES (2, 'dup for now');
DELETE FROM conf_def_s WHERE v = 'a';
COMMIT;
BEGIN;
INSERT INTO conf_def_s VALUES (3, 'dup at commit');
COMMIT;
SELECT k, v FROM conf_def_s ORDER BY k, v COLLATE "C";
-- deferrable constraints cannot be arbiters
INSERT INTO conf_def_s VALUES (2, 'x') ON CONFLICT (k) DO NOTHING;

DROP TABLE conf_s, conf_h, conf_part_s, conf_part_h, conf_expr_s, conf_excl_s, conf_excl_h,
    conf_box_s, conf_def_s;
