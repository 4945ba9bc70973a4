#!/usr/bin/env bash
# Documented error behaviours on the shared cluster:
#  - a row whose variable-length data does not fit in a scoot block fails with
#    'row is too large for a scoot block' (INSERT, multi-row INSERT, UPDATE, COPY, inside a
#    savepoint); the statement has no effect and the table, the session and the server stay usable.
#    Only values of STORAGE PLAIN columns can be that large (everything else is TOASTed like heap):
#    the scoot table's text column is set to STORAGE PLAIN; heap (TOAST) stores the same value;
#  - scoot.arena / scoot.arena_tables report consistent numbers.
# (Out-of-arena-memory needs a small arena: see 50_oom.sh.)
set -uo pipefail
BIN=${SCOOT_BINDIR:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
WORK=$(mktemp -d /tmp/scoot_errors.XXXXXX)
SOFT_FAILS=()
soft_fail() { echo "FAIL (continuing): $*"; SOFT_FAILS+=("$*"); }
fail() { echo "FAIL: $*"; for m in "${SOFT_FAILS[@]}"; do echo "FAIL (earlier): $m"; done; exit 1; }
q() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
cleanup() {
  "$BIN/psql" -X -qAt -c "DROP TABLE IF EXISTS err_scoot, err_heap" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

# expect_error <label> <pattern> <sql...>: the LAST statement must fail with a message matching pattern
expect_error() {
  local label=$1 pat=$2; shift 2
  local out rc=0
  out=$("$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@" 2>&1) && rc=0 || rc=$?
  if [ $rc -eq 0 ]; then fail "$label: expected an error matching '$pat', the statement succeeded (output: $out)"; fi
  if ! grep -qE -- "$pat" <<<"$out"; then fail "$label: expected an error matching '$pat', got: $out"; fi
  echo "    ok: $label -> $(grep -m1 -E 'ERROR' <<<"$out" | cut -c1-150)"
}
server_alive() { q -c "SELECT 1" >/dev/null 2>&1 || fail "$1: server/connection not usable any more"; }

q -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS err_scoot, err_heap" \
  -c "CREATE TABLE err_scoot (id int PRIMARY KEY, t text) USING scoot" \
  -c "ALTER TABLE err_scoot ALTER COLUMN t SET STORAGE PLAIN" \
  -c "CREATE TABLE err_heap (id int PRIMARY KEY, t text) USING heap" \
  -c "INSERT INTO err_scoot SELECT g, 'row ' || g FROM generate_series(1, 100) g" \
  -c "INSERT INTO err_heap SELECT g, 'row ' || g FROM generate_series(1, 100) g" || fail "setup failed"

state() { q -c "SELECT count(*) || ' ' || coalesce(sum(length(t)), 0) || ' ' || coalesce(max(id), 0) FROM err_scoot"; }
base=$(state) || fail "count failed"
[ "$base" = "100 592 100" ] || fail "initial state of err_scoot: '$base', want '100 592 100'"

echo "--- too-large rows (2 MB values)"
PAT='row is too large for a scoot block'
expect_error "INSERT 2 MB text" "$PAT" -c "INSERT INTO err_scoot VALUES (1000, repeat('x', 2*1024*1024))"
server_alive "after INSERT"
# README: SQLSTATE 54000 and a hint to raise scoot.block_size
out=$("$BIN/psql" -X -qAt -v VERBOSITY=verbose -c "INSERT INTO err_scoot VALUES (1000, repeat('x', 2*1024*1024))" 2>&1)
grep -q "^ERROR:  54000: $PAT" <<<"$out" || soft_fail "too-large row: SQLSTATE is not 54000: $out"
grep -q "^HINT:  .*scoot.block_size" <<<"$out" ||
  soft_fail "too-large row: no HINT mentioning scoot.block_size (README: 'hint to raise scoot.block_size'); got: $(tr '\n' ' ' <<<"$out")"
[ "$(state)" = "$base" ] || fail "err_scoot changed after the failed INSERT: '$(state)' vs '$base'"

expect_error "multi-row INSERT with one 2 MB row" "$PAT" \
  -c "INSERT INTO err_scoot SELECT g, CASE WHEN g = 1005 THEN repeat('y', 2*1024*1024) ELSE 'ok' END FROM generate_series(1001, 1010) g"
[ "$(state)" = "$base" ] || fail "err_scoot changed after the failed multi-row INSERT: '$(state)' vs '$base'"

expect_error "UPDATE to a 2 MB value" "$PAT" -c "UPDATE err_scoot SET t = repeat('z', 2*1024*1024) WHERE id = 7"
[ "$(state)" = "$base" ] || fail "err_scoot changed after the failed UPDATE: '$(state)' vs '$base'"
r=$(q -c "SELECT t FROM err_scoot WHERE id = 7") || fail "select after failed update"
[ "$r" = "row 7" ] || fail "row 7 after the failed UPDATE is '$r', want 'row 7'"

# COPY FROM (multi-insert path)
{ for i in $(seq 2001 2005); do echo -e "$i\tsmall"; done
  printf '2006\t'; head -c $((2*1024*1024)) /dev/zero | tr '\0' 'c'; echo
  for i in $(seq 2007 2010); do echo -e "$i\tsmall"; done; } >"$WORK/big.copy"
expect_error "COPY with one 2 MB row" "$PAT" -c "\\copy err_scoot FROM '$WORK/big.copy'"
[ "$(state)" = "$base" ] || fail "err_scoot changed after the failed COPY: '$(state)' vs '$base'"

# inside a transaction: the error aborts only up to the savepoint
r=$(q -v ON_ERROR_STOP=0 2>"$WORK/sp.err" <<'SQL'
BEGIN;
INSERT INTO err_scoot VALUES (3001, 'before savepoint');
SAVEPOINT s1;
INSERT INTO err_scoot VALUES (3002, repeat('q', 2*1024*1024));
ROLLBACK TO SAVEPOINT s1;
INSERT INTO err_scoot VALUES (3003, 'after savepoint');
COMMIT;
SELECT string_agg(id || ':' || t, ',' ORDER BY id) FROM err_scoot WHERE id > 3000;
SQL
) || fail "savepoint script failed: $(cat "$WORK/sp.err")"
grep -q "$PAT" "$WORK/sp.err" || fail "savepoint script: no '$PAT' error (stderr: $(cat "$WORK/sp.err"))"
[ "$r" = "3001:before savepoint,3003:after savepoint" ] || fail "savepoint script: rows after COMMIT '$r'"
echo "    ok: error inside a savepoint, ROLLBACK TO SAVEPOINT, COMMIT keeps the other rows"
q -c "DELETE FROM err_scoot WHERE id > 3000" >/dev/null || fail "delete failed"

# a failed transaction block is rolled back entirely
r=$(q -v ON_ERROR_STOP=0 2>"$WORK/tx.err" <<'SQL'
BEGIN;
INSERT INTO err_scoot VALUES (4001, 'in failed tx');
INSERT INTO err_scoot VALUES (4002, repeat('q', 2*1024*1024));
COMMIT;
SELECT count(*) FROM err_scoot WHERE id > 4000;
SQL
) || fail "failed-transaction script failed: $(cat "$WORK/tx.err")"
[ "$r" = 0 ] || fail "rows of a transaction that failed on a too-large row are visible: count=$r"
echo "    ok: a transaction with a too-large row commits nothing"

server_alive "after the too-large rows"
[ "$(state)" = "$base" ] || fail "err_scoot changed: '$(state)' vs '$base'"

echo "--- the table is still usable"
q -c "INSERT INTO err_scoot VALUES (101, 'after errors'), (102, repeat('m', 200000))" \
  -c "UPDATE err_scoot SET t = t || '!' WHERE id <= 10" -c "DELETE FROM err_scoot WHERE id BETWEEN 50 AND 59" ||
  fail "DML on err_scoot after the errors failed"
r=$(q -c "SELECT count(*), sum(length(t)), count(*) FILTER (WHERE t LIKE '%!') FROM err_scoot") || fail "select failed"
[ "$r" = "92|200554|10" ] || fail "err_scoot after DML: '$r', want '92|200554|10'"
r=$(q -c "SET enable_seqscan = off" -c "SELECT t FROM err_scoot WHERE id = 101") || fail "index lookup failed"
[ "$r" = "after errors" ] || fail "index lookup of id 101: '$r'"
echo "    ok: INSERT/UPDATE/DELETE/index scan after the errors"

echo "--- heap stores the same 2 MB value"
q -c "INSERT INTO err_heap VALUES (1000, repeat('x', 2*1024*1024))" || fail "heap could not store a 2 MB value"
r=$(q -c "SELECT length(t) FROM err_heap WHERE id = 1000") || fail "heap select failed"
[ "$r" = 2097152 ] || fail "heap 2 MB value has length '$r'"
echo "    ok: heap stored it (length $r)"

echo "--- scoot.arena sanity"
r=$(q -F ' ' -c "SELECT arena_bytes, block_size, blocks_total, blocks_used, blocks_free, tables, used_bytes FROM scoot.arena") ||
  fail "SELECT * FROM scoot.arena failed"
echo "    scoot.arena: $r"
read -r ab bs bt bu bf nt ub <<<"$r"
[ "$(q -c "SELECT count(*) FROM scoot.arena")" = 1 ] || fail "scoot.arena does not have exactly one row"
[ "$bs" -gt 0 ] && [ "$bt" -ge 2 ] || fail "block_size=$bs blocks_total=$bt"
[ $((bu + bf)) -eq "$bt" ] || fail "blocks_used ($bu) + blocks_free ($bf) != blocks_total ($bt)"
[ "$bu" -ge 1 ] && [ "$bf" -ge 0 ] || fail "blocks_used=$bu blocks_free=$bf (err_scoot has rows, so >= 1 block is used)"
[ $((bt * bs)) -le "$ab" ] || fail "blocks_total*block_size ($((bt * bs))) > arena_bytes ($ab)"
[ "$ab" -eq $((2048 * 1024 * 1024)) ] || echo "    note: arena_bytes=$ab (runner sets scoot.arena_size=2048)"
[ "$ub" -ge 0 ] && [ "$ub" -le $((bu * bs)) ] || fail "used_bytes ($ub) not within 0..blocks_used*block_size ($((bu * bs)))"
[ "$nt" -ge 1 ] || fail "scoot.arena.tables=$nt but err_scoot exists"
r=$(q -F ' ' -c "SELECT count(*), coalesce(sum(blocks), 0), count(*) FILTER (WHERE relation = 'err_scoot'::regclass) FROM scoot.arena_tables") ||
  fail "scoot.arena_tables failed"
read -r at_n at_blocks at_mine <<<"$r"
[ "$at_n" -eq "$nt" ] || fail "scoot.arena.tables ($nt) != rows of scoot.arena_tables ($at_n)"
[ "$at_blocks" -le "$bu" ] || fail "sum(scoot.arena_tables.blocks) ($at_blocks) > blocks_used ($bu)"
[ "$at_mine" -eq 1 ] || fail "err_scoot appears $at_mine times in scoot.arena_tables"
r=$(q -F ' ' -c "SELECT blocks, live_rows, dead_rows, bytes FROM scoot.arena_tables WHERE relation = 'err_scoot'::regclass") ||
  fail "arena_tables row"
echo "    err_scoot in scoot.arena_tables: blocks live dead bytes = $r"
read -r tb tl td tby <<<"$r"
[ "$tb" -ge 1 ] && [ "$tby" -gt 0 ] && [ "$tby" -le $((tb * bs)) ] || fail "err_scoot blocks=$tb bytes=$tby"
[ "$tl" -eq 92 ] || fail "err_scoot live_rows=$tl, want 92"
[ "$td" -ge 0 ] || fail "err_scoot dead_rows=$td"
q -c "VACUUM err_scoot" || fail "VACUUM failed"
r=$(q -F ' ' -c "SELECT live_rows, dead_rows FROM scoot.arena_tables WHERE relation = 'err_scoot'::regclass")
[ "$r" = "92 0" ] || fail "err_scoot after VACUUM: live/dead = '$r', want '92 0'"
echo "    ok: after VACUUM live/dead = $r"

if [ ${#SOFT_FAILS[@]} -gt 0 ]; then
  for m in "${SOFT_FAILS[@]}"; do echo "FAIL: $m"; done
  exit 1
fi
echo "PASS"
