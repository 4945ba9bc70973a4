-- pidx is created with the session default access method (scoot in the test run)
SET default_table_access_method = scoot;
-- parallel index builds over chains with dead and updated versions
SET client_min_messages = notice;
SET max_parallel_maintenance_workers = 2;
SET min_parallel_table_scan_size = 0;
SET maintenance_work_mem = '64MB';
CREATE TABLE pidx (id int, k int, v text);
INSERT INTO pidx SELECT g, g, 'v' || g FROM generate_series(1, 50000) g;
DELETE FROM pidx WHERE id % 10 = 0;
INSERT INTO pidx SELECT g, g, 'again' FROM generate_series(10, 50000, 10) g;
UPDATE pidx SET k = k + 1000000 WHERE id % 7 = 0;
UPDATE pidx SET v = v || '!' WHERE id % 3 = 0;
ALTER TABLE pidx SET (parallel_workers = 2);
CREATE UNIQUE INDEX pidx_id ON pidx (id);
CREATE INDEX pidx_k ON pidx (k);
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT count(*), count(DISTINCT id), sum(k::bigint) FROM pidx WHERE id > 0;
SELECT count(*) FROM pidx WHERE k > 1000000;
SELECT count(*) FROM pidx WHERE k BETWEEN 1 AND 1000;
RESET enable_seqscan; RESET enable_bitmapscan;
SELECT count(*), count(DISTINCT id), sum(k::bigint) FROM pidx;
DROP TABLE pidx;
