-- Expression statistics: an expression of one scoot table's columns that a query compares with
-- = gets its distinct values and null fraction from the table's rows (scoot.expression_stats),
-- where PostgreSQL assumes 200 distinct values. The planner's row estimates with and without
-- them (the estimates are exact here: tables under 30,000 rows are read whole), a large table
-- (sampled), which expressions are left alone (a heap table, a user-defined function, an
-- expression that fails on some row), a refresh after the table grows, and the answers.
SET client_min_messages = notice;
SET jit = off;
SET max_parallel_workers_per_gather = 0;

CREATE TABLE xs_c (id int PRIMARY KEY, state char(2), x int, big int) USING scoot;
CREATE TABLE xs_n (key int PRIMARY KEY, name text) USING scoot;
CREATE TABLE xs_ch (LIKE xs_c INCLUDING INDEXES) USING heap;
CREATE TABLE xs_nh (LIKE xs_n INCLUDING INDEXES) USING heap;
-- CH-benCHmark's shape: a state's first letter names the nation (26 letters, 25 nations)
INSERT INTO xs_ch SELECT i, chr(65 + (i * 7) % 26) || chr(65 + i % 26),
  CASE WHEN i % 10 = 0 THEN NULL ELSE i % 50 END, i FROM generate_series(1, 20000) i;
INSERT INTO xs_nh SELECT k, 'nation' || k FROM generate_series(0, 24) k;
INSERT INTO xs_c SELECT * FROM xs_ch;
INSERT INTO xs_n SELECT * FROM xs_nh;
ANALYZE xs_c, xs_n, xs_ch, xs_nh;

CREATE FUNCTION xs_rows(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
  RETURN (plan->0->'Plan'->>'Plan Rows')::float8;
END $$;

-- the join on the expression: 26 distinct values, not 200
SELECT scoot_estimate('SELECT * FROM xs_c c JOIN xs_n n ON ascii(substr(c.state, 1, 1)) - 65 = n.key');
SET scoot.expression_stats = off;
SELECT scoot_estimate('SELECT * FROM xs_c c JOIN xs_n n ON ascii(substr(c.state, 1, 1)) - 65 = n.key');
RESET scoot.expression_stats;
-- heap tables keep PostgreSQL's default
SELECT scoot_estimate('SELECT * FROM xs_ch c JOIN xs_nh n ON ascii(substr(c.state, 1, 1)) - 65 = n.key');
-- a restriction clause, and an expression with NULLs (x is NULL in a tenth of the rows)
SELECT scoot_estimate('SELECT * FROM xs_c WHERE ascii(substr(state, 2, 1)) - 65 = 3');
SELECT scoot_estimate('SELECT * FROM xs_c c JOIN xs_n n ON c.x + 1 = n.key');
SET scoot.expression_stats = off;
SELECT scoot_estimate('SELECT * FROM xs_c c JOIN xs_n n ON c.x + 1 = n.key');
RESET scoot.expression_stats;

-- a user-defined function is not run at planning time: PostgreSQL's default (an SQL function
-- the planner inlines into built-in ones is sampled)
CREATE FUNCTION xs_first(t text) RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT ascii(t) - 65 $$;
CREATE FUNCTION xs_first_p(t text) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN ascii(t) - 65; END $$;
SELECT scoot_estimate('SELECT * FROM xs_c c JOIN xs_n n ON xs_first_p(c.state) = n.key');
SELECT scoot_estimate('SELECT * FROM xs_c c JOIN xs_n n ON xs_first(c.state) = n.key');
-- an expression that fails on some row gets no statistics; planning does not fail
EXPLAIN (COSTS OFF) SELECT * FROM xs_c c JOIN xs_n n ON 100 / (c.big - 7) = n.key;
SELECT scoot_estimate('SELECT * FROM xs_c c JOIN xs_n n ON 100 / (c.big - 7) = n.key AND c.big <> 7');

-- a serializable transaction samples nothing (the sample's scan would take a relation-wide
-- predicate lock): PostgreSQL's default there, the sampled statistics after it
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT scoot_estimate('SELECT * FROM xs_c c JOIN xs_n n ON c.x * 3 = n.key');
COMMIT;
SELECT scoot_estimate('SELECT * FROM xs_c c JOIN xs_n n ON c.x * 3 = n.key');

-- a table above 30,000 rows is sampled (each row with a probability): 1,000 distinct values
-- estimated within 10%
CREATE TABLE xs_big (i int) USING scoot;
INSERT INTO xs_big SELECT i FROM generate_series(1, 80000) i;
ANALYZE xs_big;
SELECT xs_rows('SELECT * FROM xs_big WHERE (i * 7) % 1000 = 5') BETWEEN 72 AND 88 AS within_10_percent;
-- above 120,000 rows ANALYZE's block sampling reads about 30,000 of them
INSERT INTO xs_big SELECT i FROM generate_series(80001, 200000) i;
ANALYZE xs_big;
SELECT xs_rows('SELECT * FROM xs_big WHERE (i * 7) % 1000 = 5') BETWEEN 180 AND 220 AS within_10_percent;

-- the table grows by more than a fifth with 26 new values: sampled again (52 distinct values
-- now: 19,231 estimated; the old statistics would give 38,462)
INSERT INTO xs_c SELECT i, chr(97 + i % 26) || 'x', i % 50, i FROM generate_series(20001, 40000) i;
ANALYZE xs_c;
SELECT scoot_estimate('SELECT * FROM xs_c c JOIN xs_n n ON ascii(substr(c.state, 1, 1)) - 65 = n.key');
SELECT scoot_estimate('SELECT * FROM xs_c c JOIN xs_n n ON ascii(substr(c.state, 1, 1)) - 97 = n.key');

-- the answers do not depend on the statistics
SELECT count(*), sum(c.id), min(n.name), max(n.name)
FROM xs_c c JOIN xs_n n ON ascii(substr(c.state, 1, 1)) - 65 = n.key;
SET scoot.expression_stats = off;
SELECT count(*), sum(c.id), min(n.name), max(n.name)
FROM xs_c c JOIN xs_n n ON ascii(substr(c.state, 1, 1)) - 65 = n.key;
RESET scoot.expression_stats;

DROP TABLE xs_c, xs_n, xs_ch, xs_nh, xs_big;
DROP FUNCTION xs_rows(text);
DROP FUNCTION xs_first(text);
DROP FUNCTION xs_first_p(text);
