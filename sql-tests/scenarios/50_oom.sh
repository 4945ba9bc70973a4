#!/usr/bin/env bash
# Out of scoot arena memory, on an OWN throw-away cluster with a 16 MB arena:
#  - inserting until the arena is full fails with 'ERROR:  out of scoot arena memory' and a HINT
#    naming scoot.arena_size; the failed statement has no effect (count unchanged);
#  - heap tables in the same database keep working, and so does the server;
#  - TRUNCATE and DROP TABLE give the blocks back (scoot.arena blocks_used back to 0), DELETE +
#    VACUUM makes room for new rows, and inserts work again afterwards.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=${SCOOT_REPO:-$(cd "$HERE/../.." && pwd)}
CLUSTER_SH=$REPO/scripts/cluster.sh
[ -f "$CLUSTER_SH" ] || CLUSTER_SH=/work/main/scripts/cluster.sh
DIR=/tmp/scoot_oom_$$
WORK=$(mktemp -d /tmp/scoot_oom_work.XXXXXX)
SOFT_FAILS=()
soft_fail() { echo "FAIL (continuing): $*"; SOFT_FAILS+=("$*"); }
fail() { echo "FAIL: $*"; for m in "${SOFT_FAILS[@]}"; do echo "FAIL (earlier): $m"; done; [ -f "$DIR/server.log" ] && { echo "----- $DIR/server.log (tail)"; tail -n 20 "$DIR/server.log"; }; exit 1; }
cleanup() {
  bash "$CLUSTER_SH" stop "$DIR" --remove >/dev/null 2>&1
  rm -rf "$WORK" "$DIR"
}
trap cleanup EXIT

echo "--- starting a cluster with scoot.arena_size = 16 MB in $DIR"
env_lines=$(SCOOT_ARENA_MB=16 SCOOT_PORT=55499 SCOOT_KEEP_CLUSTER=0 bash "$CLUSTER_SH" start "$DIR" 2>"$WORK/start.err") ||
  { cat "$WORK/start.err"; fail "could not start the small-arena cluster"; }
eval "$env_lines"
export PGDATABASE=postgres
BIN=${SCOOT_BINDIR:-/usr/lib/postgresql/15/bin}
echo "    PGHOST=$PGHOST PGPORT=$PGPORT"
q() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
q -c "CREATE EXTENSION pg_scoot" || fail "CREATE EXTENSION failed"
[ "$(q -c 'SHOW scoot.arena_size')" = 16MB ] || [ "$(q -c 'SHOW scoot.arena_size')" = 16 ] ||
  fail "scoot.arena_size is '$(q -c 'SHOW scoot.arena_size')', want 16MB"
arena() { q -F ' ' -c "SELECT blocks_total, blocks_used, blocks_free, tables FROM scoot.arena"; }
read -r BT BU BF NT <<<"$(arena)"
echo "    scoot.arena: blocks_total=$BT blocks_used=$BU blocks_free=$BF tables=$NT"
[ "$BU" -eq 0 ] && [ $((BU + BF)) -eq "$BT" ] && [ "$BT" -ge 2 ] || fail "unexpected initial arena: $(arena)"

q -c "CREATE TABLE oom_s (id int, t text) USING scoot" -c "CREATE TABLE oom_h (id int, t text) USING heap" ||
  fail "CREATE TABLE failed"

# fill <table>: insert 1000-row chunks (~1 MB) until a statement fails; sets FILLED (rows before the
# failed statement) and leaves the error output in $WORK/fill.err
fill() {
  local tbl=$1 n=0 i before after
  FILLED=
  for i in $(seq 1 400); do
    before=$(q -c "SELECT count(*) FROM $tbl") || fail "count($tbl) failed"
    if ! q -c "INSERT INTO $tbl SELECT g, repeat(md5(g::text), 30) FROM generate_series($((n + 1)), $((n + 1000))) g" \
        >/dev/null 2>"$WORK/fill.err"; then
      FILLED=$before
      return 0
    fi
    n=$((n + 1000))
  done
  fail "inserted $n rows into $tbl without running out of a 16 MB arena"
}

echo "--- filling oom_s until the arena is full"
fill oom_s
cat "$WORK/fill.err"
grep -q "^ERROR:  out of scoot arena memory" "$WORK/fill.err" ||
  fail "the failing INSERT did not report 'ERROR:  out of scoot arena memory': $(cat "$WORK/fill.err")"
grep -q "^HINT:  .*scoot.arena_size" "$WORK/fill.err" ||
  soft_fail "the out-of-arena error has no HINT mentioning scoot.arena_size (README: 'hint naming scoot.arena_size'); got: $(tr '\n' ' ' <"$WORK/fill.err")"
N1=$FILLED
[ "$N1" -gt 0 ] || fail "no rows fitted before the arena was full"
after=$(q -c "SELECT count(*) FROM oom_s") || fail "count after the failed INSERT failed"
[ "$after" = "$N1" ] || fail "the failed INSERT left rows behind: count $after, was $N1 before the statement"
r=$(q -c "SELECT count(*) FROM oom_s WHERE id > $N1") || fail "count failed"
[ "$r" = 0 ] || fail "$r rows of the failed INSERT are visible"
echo "    ok: $N1 rows fitted; the failed statement left no rows; arena now: $(arena)"

echo "--- a new scoot table cannot grow in the full arena either"
q -c "CREATE TABLE oom_s2 (id int) USING scoot" || fail "CREATE TABLE oom_s2 failed"
if q -c "INSERT INTO oom_s2 SELECT generate_series(1, 100000)" >/dev/null 2>"$WORK/s2.err"; then
  fail "100000 rows fitted into a new table of a full arena"
fi
grep -q "out of scoot arena memory" "$WORK/s2.err" || fail "oom_s2: unexpected error $(cat "$WORK/s2.err")"
[ "$(q -c 'SELECT count(*) FROM oom_s2')" = 0 ] || fail "oom_s2 has rows of a failed statement"
echo "    ok"

echo "--- OOM inside a savepoint"
r=$(q -v ON_ERROR_STOP=0 2>"$WORK/sp.err" <<SQL
BEGIN;
INSERT INTO oom_h VALUES (-1, 'in tx');
SAVEPOINT a;
INSERT INTO oom_s SELECT g, repeat('z', 900) FROM generate_series(1000001, 1100000) g;
ROLLBACK TO SAVEPOINT a;
SELECT count(*) FROM oom_s;
COMMIT;
SQL
) || fail "savepoint script failed: $(cat "$WORK/sp.err")"
grep -q "out of scoot arena memory" "$WORK/sp.err" || fail "savepoint script: no OOM error: $(cat "$WORK/sp.err")"
[ "$r" = "$N1" ] || fail "after ROLLBACK TO SAVEPOINT count(oom_s) = '$r', want $N1"
echo "    ok"

echo "--- heap table and server still work"
q -c "INSERT INTO oom_h SELECT g, repeat('h', 1000) FROM generate_series(1, 20000) g" || fail "heap INSERT failed"
r=$(q -c "SELECT count(*) FROM oom_h") || fail "heap count failed"
[ "$r" = 20001 ] || fail "oom_h has $r rows, want 20001"
[ "$(q -c "SELECT count(*), sum(id) FROM oom_s")" = "$N1|$((N1 * (N1 + 1) / 2))" ] || fail "oom_s contents changed"
echo "    ok"

echo "--- TRUNCATE gives the blocks back"
used_full=$(q -c "SELECT blocks_used FROM scoot.arena")
q -c "TRUNCATE oom_s" || fail "TRUNCATE failed"
q -c "DROP TABLE oom_s2" || fail "DROP TABLE oom_s2 failed"
read -r BT BU BF NT <<<"$(arena)"
echo "    blocks_used $used_full -> $BU after TRUNCATE oom_s + DROP oom_s2 (arena: $(arena))"
[ "$BU" -eq 0 ] || fail "blocks_used is $BU after TRUNCATE of the only non-empty scoot table (want 0)"
[ $((BU + BF)) -eq "$BT" ] || fail "blocks_used + blocks_free != blocks_total: $(arena)"
[ "$(q -c 'SELECT count(*) FROM oom_s')" = 0 ] || fail "oom_s not empty after TRUNCATE"

echo "--- inserts work again; the arena holds as much as before"
fill oom_s
grep -q "out of scoot arena memory" "$WORK/fill.err" || fail "second fill: unexpected error $(cat "$WORK/fill.err")"
N2=$FILLED
echo "    second fill: $N2 rows (first: $N1)"
[ "$N2" -ge $((N1 - 1000)) ] || fail "after TRUNCATE only $N2 rows fit, before $N1 did (blocks not reused?)"
[ "$(q -c 'SELECT count(*) FROM oom_s')" = "$N2" ] || fail "count after the second failed INSERT != $N2"

echo "--- DELETE + VACUUM make room"
q -c "DELETE FROM oom_s WHERE id % 2 = 0" -c "VACUUM oom_s" || fail "DELETE/VACUUM failed"
q -c "INSERT INTO oom_s SELECT g, repeat(md5(g::text), 30) FROM generate_series(-2000, -1) g" ||
  fail "INSERT of 2000 rows after deleting half of a full table and VACUUM failed"
r=$(q -c "SELECT count(*) FROM oom_s")
[ "$r" = $((N2 - N2 / 2 + 2000)) ] || fail "count after DELETE/VACUUM/INSERT = $r, want $((N2 - N2 / 2 + 2000))"
echo "    ok"

echo "--- DROP TABLE gives the blocks back"
q -c "DROP TABLE oom_s" || fail "DROP TABLE failed"
read -r BT BU BF NT <<<"$(arena)"
echo "    arena after DROP: blocks_total=$BT blocks_used=$BU blocks_free=$BF tables=$NT"
[ "$BU" -eq 0 ] && [ "$BF" -eq "$BT" ] || fail "blocks_used is $BU after DROP TABLE (want 0)"
q -c "CREATE TABLE oom_s3 (id int PRIMARY KEY, t text) USING scoot" \
  -c "INSERT INTO oom_s3 SELECT g, repeat('n', 500) FROM generate_series(1, 5000) g" || fail "INSERT after DROP TABLE failed"
r=$(q -c "SELECT count(*) FROM oom_s3")
[ "$r" = 5000 ] || fail "oom_s3 has $r rows, want 5000"
q -c "DROP TABLE oom_s3, oom_h" || fail "final DROP failed"
[ "$(q -c 'SELECT blocks_used FROM scoot.arena')" = 0 ] || fail "blocks_used not 0 at the end: $(arena)"
grep -E 'PANIC|TRAP|terminated by signal' "$DIR/server.log" && fail "server log shows a crash"
if [ ${#SOFT_FAILS[@]} -gt 0 ]; then
  for m in "${SOFT_FAILS[@]}"; do echo "FAIL: $m"; done
  exit 1
fi
echo "PASS"
