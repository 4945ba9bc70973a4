-- The cost floor of pgbench's TPC-B transaction for ANY storage engine: the same five statements,
-- the same round trips, parameters and prepared statements, and a commit that flushes WAL, but the
-- three UPDATEs and the SELECT touch no table (the history INSERT stays, into the heap copy).
\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
SELECT :aid::int + :delta::int;
SELECT :aid::int;
SELECT :tid::int + :delta::int;
SELECT :bid::int + :delta::int;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
