CREATE EXTENSION pg_scoot;
-- for the scoot_specific_* tests whose freezing or pruning must succeed: waits (at most 10 s)
-- until no other backend holds back the xmin horizon (autovacuum may, for a moment)
CREATE PROCEDURE wait_horizon_free() LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..200 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity
                          WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid());
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
-- for the scoot_specific_* tests of planner estimates: the planner's row estimate for q, and the
-- actual row count
CREATE FUNCTION scoot_estimate(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE plan json; actual bigint;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
  EXECUTE 'SELECT count(*) FROM (' || q || ') x' INTO actual;
  RETURN format('estimate %s, actual %s', plan->0->'Plan'->>'Plan Rows', actual);
END $$;
