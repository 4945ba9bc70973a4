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
