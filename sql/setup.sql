-- setup: runs first, once per test database.
CREATE EXTENSION pg_scoot;
