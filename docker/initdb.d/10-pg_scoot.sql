-- Run once by the postgres image's entrypoint on a fresh data directory (in $POSTGRES_DB).
-- The entrypoint's temporary init server gets the same `-c shared_preload_libraries=pg_scoot`.
CREATE EXTENSION IF NOT EXISTS pg_scoot;
