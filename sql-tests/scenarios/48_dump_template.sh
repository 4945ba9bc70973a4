#!/usr/bin/env bash
# Moving scoot tables between databases:
#  - pg_dump -Fc / pg_restore round-trips scoot tables (access method, rows of every type, NULLs,
#    TOASTed values, indexes, constraints) into another database; plain-format pg_dump too;
#  - CREATE DATABASE ... TEMPLATE of a database whose scoot tables have rows fails with a clear
#    error (PostgreSQL copies relation files, the rows live in the arena); with empty scoot tables
#    it works and the copies are empty and usable, without a lost-rows WARNING.
set -uo pipefail
BIN=${SCOOT_BINDIR:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
WORK=$(mktemp -d /tmp/scoot_dump.XXXXXX)
chmod 777 "$WORK"
fail() { echo "FAIL: $*"; exit 1; }
q() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
cleanup() {
  for d in scoot_dump_src scoot_dump_dst scoot_dump_plain scoot_dump_tmpl scoot_dump_copy scoot_dump_copy2; do
    q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
cleanup_dbs() { for d in "$@"; do q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1; done; }
cleanup_dbs scoot_dump_src scoot_dump_dst scoot_dump_plain scoot_dump_tmpl scoot_dump_copy scoot_dump_copy2

q -d postgres -c "CREATE DATABASE scoot_dump_src" || fail "createdb failed"
q -d scoot_dump_src -c "CREATE EXTENSION pg_scoot" \
  -c "CREATE TABLE d_types (id int PRIMARY KEY, i8 int8, f8 float8, n numeric, t text, big text, by bytea,
        ts timestamptz, j jsonb, a int[], u uuid) USING scoot" \
  -c "INSERT INTO d_types SELECT g, g::int8 * 1000003, CASE WHEN g % 50 = 0 THEN 'NaN' ELSE g / 7.0 END, g * 1.5 - 100,
        CASE WHEN g % 9 = 0 THEN NULL ELSE 'text ' || g END,
        CASE WHEN g % 97 = 0 THEN (SELECT string_agg(md5((g * 1000 + s)::text), '') FROM generate_series(1, 200) s) END,
        decode(md5(g::text), 'hex'), timestamptz '2020-01-01 00:00+00' + g * interval '1 minute',
        jsonb_build_object('g', g), ARRAY[g, NULL], md5(g::text)::uuid
      FROM generate_series(1, 5000) g" \
  -c "DELETE FROM d_types WHERE id % 13 = 0" \
  -c "CREATE TABLE d_child (id int REFERENCES d_types, note text NOT NULL CHECK (note <> '')) USING scoot" \
  -c "INSERT INTO d_child SELECT id, 'n' || id FROM d_types WHERE id % 10 = 1" \
  -c "CREATE INDEX d_child_note ON d_child (note)" >/dev/null || fail "setup failed"
digest() {
  q -d "$1" -c "SELECT (SELECT count(*) || '/' || md5(string_agg(x::text, ',' ORDER BY id)) FROM d_types x)
                 || ' ' || (SELECT count(*) || '/' || md5(string_agg(x::text, ',' ORDER BY id)) FROM d_child x)"
}
want=$(digest scoot_dump_src) || fail "digest failed"

echo "=== pg_dump -Fc | pg_restore"
runuser -u postgres -- "$BIN/pg_dump" -Fc -f "$WORK/src.dump" -h "${PGHOST:-/tmp}" -p "${PGPORT:-5432}" -U postgres scoot_dump_src 2>"$WORK/dump.err" ||
  fail "pg_dump failed: $(cat "$WORK/dump.err")"
q -d postgres -c "CREATE DATABASE scoot_dump_dst" || fail "createdb failed"
runuser -u postgres -- "$BIN/pg_restore" -d scoot_dump_dst -h "${PGHOST:-/tmp}" -p "${PGPORT:-5432}" -U postgres "$WORK/src.dump" 2>"$WORK/restore.err" ||
  fail "pg_restore failed: $(cat "$WORK/restore.err")"
got=$(digest scoot_dump_dst) || fail "digest after restore failed"
[ "$got" = "$want" ] || fail "restored rows differ: '$got', want '$want'"
am=$(q -d scoot_dump_dst -c "SELECT string_agg(c.relname || ':' || a.amname, ',' ORDER BY c.relname) FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.relname IN ('d_types', 'd_child')")
[ "$am" = "d_child:scoot,d_types:scoot" ] || fail "restored tables have access methods '$am'"
r=$(q -d scoot_dump_dst -c "SET enable_seqscan = off" -c "SELECT count(*) FROM d_child WHERE note = 'n11'")
[ "$r" = 1 ] || fail "index on the restored table: '$r'"
if q -d scoot_dump_dst -c "INSERT INTO d_child VALUES (13, 'x')" 2>/dev/null; then fail "the restored foreign key did not refuse a missing parent"; fi
echo "    ok: same rows, scoot access method, indexes and constraints"

echo "=== plain pg_dump | psql"
runuser -u postgres -- "$BIN/pg_dump" -h "${PGHOST:-/tmp}" -p "${PGPORT:-5432}" -U postgres scoot_dump_src >"$WORK/src.sql" 2>"$WORK/dump.err" ||
  fail "plain pg_dump failed: $(cat "$WORK/dump.err")"
grep -q "default_table_access_method = scoot" "$WORK/src.sql" || fail "the plain dump does not set the table access method"
q -d postgres -c "CREATE DATABASE scoot_dump_plain" || fail "createdb failed"
q -d scoot_dump_plain -f "$WORK/src.sql" >/dev/null 2>"$WORK/plain.err" || fail "replaying the plain dump failed: $(cat "$WORK/plain.err")"
got=$(digest scoot_dump_plain)
[ "$got" = "$want" ] || fail "rows restored from the plain dump differ: '$got', want '$want'"
echo "    ok"

echo "=== CREATE DATABASE ... TEMPLATE"
q -d postgres -c "CREATE DATABASE scoot_dump_tmpl" || fail "createdb failed"
q -d scoot_dump_tmpl -c "CREATE EXTENSION pg_scoot" -c "CREATE TABLE tm (id int PRIMARY KEY, t text) USING scoot" \
  -c "CREATE TABLE tm_heap (id int)" -c "INSERT INTO tm_heap VALUES (1)" -c "INSERT INTO tm VALUES (1, 'one')" || fail "template setup failed"
if q -d postgres -c "CREATE DATABASE scoot_dump_copy TEMPLATE scoot_dump_tmpl" >"$WORK/o" 2>"$WORK/e"; then
  fail "CREATE DATABASE copied a template with scoot rows"
fi
grep -q "ERROR: .*CREATE DATABASE cannot copy the rows of scoot tables: template database \"scoot_dump_tmpl\" has 1 scoot table(s) with rows" "$WORK/e" ||
  fail "unexpected error: $(cat "$WORK/e")"
grep -q "HINT: .*pg_dump and pg_restore" "$WORK/e" || fail "no HINT: $(cat "$WORK/e")"
[ "$(q -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = 'scoot_dump_copy'")" = 0 ] || fail "the database was created anyway"
echo "    ok: refused with a clear error"
q -d scoot_dump_tmpl -c "TRUNCATE tm" || fail "TRUNCATE failed"
q -d postgres -c "CREATE DATABASE scoot_dump_copy2 TEMPLATE scoot_dump_tmpl" || fail "CREATE DATABASE from a template with empty scoot tables failed"
q -d scoot_dump_copy2 -c "SELECT count(*) FROM tm" >"$WORK/o" 2>"$WORK/e" || fail "reading the copied empty table failed: $(cat "$WORK/e")"
[ "$(cat "$WORK/o")" = 0 ] || fail "the copied empty table has rows: $(cat "$WORK/o")"
[ -s "$WORK/e" ] && fail "reading the copied empty table printed: $(cat "$WORK/e")"
q -d scoot_dump_copy2 -c "INSERT INTO tm VALUES (2, 'two')" || fail "insert into the copy failed"
[ "$(q -d scoot_dump_copy2 -c "SELECT string_agg(t, ',') FROM tm")" = two ] || fail "copy contents wrong"
[ "$(q -d scoot_dump_copy2 -c "SELECT count(*) FROM tm_heap")" = 1 ] || fail "heap table not copied"
[ "$(q -d scoot_dump_tmpl -c "SELECT count(*) FROM tm")" = 0 ] || fail "the template changed"
echo "    ok: empty scoot tables copy fine"
echo "PASS"
