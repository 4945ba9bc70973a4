-- scoot.retain_query_memory: a backend running analytic statements (one reading an OLAP
-- snapshot, a ScootAgg or a ScootPreAgg) keeps the memory they free for the next one instead
-- of page-faulting fresh memory in again each time. Measured on the backend's own minor page
-- faults (/proc/self/stat, field 10) over the third of three runs of a grouping whose group
-- table takes tens of megabytes: a few hundred with the setting on, thousands with it off
-- (glibc's default thresholds: each large block mapped and unmapped per statement; the hash join
-- below 800-1,500 depending on the heap's layout, a few dozen at most when the memory is kept).
CREATE TABLE mem_t (k int, v int) USING scoot;
INSERT INTO mem_t SELECT i, i % 7 FROM generate_series(1, 300000) i;
-- statistics now, so that the plans (and what they allocate) do not depend on when autovacuum
-- analyzes the table
ANALYZE mem_t;
CREATE FUNCTION mem_minflt() RETURNS bigint LANGUAGE sql AS
$$ SELECT split_part(pg_read_file('/proc/self/stat'), ' ', 10)::bigint $$;
CREATE FUNCTION mem_faults(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE a bigint;
BEGIN
  EXECUTE q;
  EXECUTE q;
  a := mem_minflt();
  EXECUTE q;
  RETURN mem_minflt() - a;
END $$;
SET max_parallel_workers_per_gather = 0;
EXPLAIN (COSTS OFF) SELECT count(*), sum(s) FROM (SELECT k, sum(v) s FROM mem_t GROUP BY k) x;
SELECT count(*), sum(s) FROM (SELECT k, sum(v) s FROM mem_t GROUP BY k) x;
SET scoot.retain_query_memory = on;
SELECT mem_faults('SELECT count(*), sum(s) FROM (SELECT k, sum(v) s FROM mem_t GROUP BY k) x') < 500
  AS few_faults_when_kept;
SET scoot.retain_query_memory = off;
SELECT mem_faults('SELECT count(*), sum(s) FROM (SELECT k, sum(v) s FROM mem_t GROUP BY k) x') > 2000
  AS many_faults_when_returned;
RESET scoot.retain_query_memory;
SELECT mem_faults('SELECT count(*), sum(s) FROM (SELECT k, sum(v) s FROM mem_t GROUP BY k) x') < 500
  AS few_faults_by_default;
-- a statement reading an OLAP snapshot switches too, whatever its plan (a hash join over two
-- ScootScans, no ScootAgg: a fresh backend); one reading live rows does not (the backends of
-- OLTP statements keep glibc's behaviour). glibc's own dynamic thresholds may or may not keep a
-- freed block, so the live case runs in a backend set to its fixed default thresholds first (a
-- grouping with the setting on, then one with it off)
EXPLAIN (COSTS OFF) SELECT count(*) FROM (SELECT a.k FROM mem_t a JOIN mem_t b ON a.k = b.k + 1) x;
\c
SET max_parallel_workers_per_gather = 0;
SET work_mem = '64MB';
SET scoot.olap = on;
SELECT mem_faults('SELECT count(*) FROM (SELECT a.k FROM mem_t a JOIN mem_t b ON a.k = b.k + 1) x') < 500
  AS image_statement_keeps;
\c
SET max_parallel_workers_per_gather = 0;
SET work_mem = '64MB';
SET scoot.olap = off;
SELECT count(*) FROM (SELECT k, sum(v) s FROM mem_t GROUP BY k) x;
SET scoot.retain_query_memory = off;
SELECT count(*) FROM (SELECT k, sum(v) s FROM mem_t GROUP BY k) x;
RESET scoot.retain_query_memory;
SELECT mem_faults('SELECT count(*) FROM (SELECT a.k FROM mem_t a JOIN mem_t b ON a.k = b.k + 1) x') > 300
  AS live_statement_does_not;
DROP TABLE mem_t;
DROP FUNCTION mem_faults(text), mem_minflt();
