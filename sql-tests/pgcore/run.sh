#!/usr/bin/env bash
# PostgreSQL 15's own test suites on scoot: the core regression suite (src/test/regress,
# parallel_schedule) and the isolation suite (src/test/isolation, isolation_schedule), each run
# with default_table_access_method=scoot on a throw-away cluster with pg_scoot preloaded.
# Heap's results come from the same run with default_table_access_method=heap (cached per suite
# and PostgreSQL version under $WORK).
#
#   sql-tests/pgcore/run.sh regress|isolation [heap|scoot|both]
#
# The scoot run reads plain scans (scoot.custom_scan = off), so its plans are heap's; each suite
# then runs once more with the ScootScan custom scan on, and each test's output
# must equal the plain run's except in EXPLAIN plans (plan_only.py; CUSTOM_SCAN_CHECK=0 skips).
#
# Prints "failing under scoot only: ..." and a last line
#   "<suite>: scoot N passed, M failed; heap N passed, M failed; unexpected: <tests>"
# where unexpected = tests failing only under scoot (or under both, with output other than
# heap's) that are not listed in
# sql-tests/pgcore/accepted_<suite>.txt (the documented, accepted differences). Exit status 1 if
# any unexpected failure or a server crash, else 0.
#
# Sources: Debian's postgresql-15 source package (deb-src is enabled if missing); the regress
# module is built once. Knobs: WORK (default /tmp/pg-core-regress), PORT (55499), ARENA (4GB).
set -u
unset RUST_BACKTRACE   # a deployed server has none; error output as users see it
SUITE=${1:?regress|isolation}
WHICH=${2:-both}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${WORK:-/tmp/pg-core-regress}; PORT=${PORT:-55499}; ARENA=${ARENA:-4GB}
B=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
[ -x "$B/postgres" ] || B=/usr/lib/postgresql/15/bin
PGXS_SRC=$(dirname "$(dirname "$(pg_config --pgxs)")")
mkdir -p "$WORK"
R=$WORK/regress
# the suites of the installed server's own version: another minor version's expected files differ
# (15.18's fail 10 tests on a 15.20 server under heap too, which would hide scoot failures there)
want=$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null)
if [ ! -x "$R/pg_regress" ] || [ ! -d "$WORK/isolation" ] ||
   [ "$(cat "$WORK/suite-version" 2>/dev/null)" != "$want" ]; then
  if ! ls /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | xargs grep -qs "deb-src"; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > /etc/apt/sources.list.d/debsrc.sources
  fi
  apt-get update -qq >/dev/null 2>&1
  apt-get install -y -qq build-essential bison flex dpkg-dev >/dev/null 2>&1
  src=$WORK/src; mkdir -p "$src"; cd "$src" || exit 2
  got=
  for v in $want $(apt-cache showsrc postgresql-15 | awk '/^Version/{print $2}' | sort -rV); do
    apt-get source -qq --download-only "postgresql-15=$v" >/dev/null 2>&1 && { got=$v; break; }
  done
  [ -n "$got" ] || { echo "could not download the postgresql-15 source package"; exit 2; }
  [ "$got" = "$want" ] || echo "warning: suites of postgresql-15 $got, server $want"
  up=${got%%-*}
  tarball=postgresql-15_$up.orig.tar.bz2
  [ -f "$tarball" ] || { echo "no $tarball after downloading postgresql-15 $got"; exit 2; }
  [ -d "postgresql-$up" ] || tar xjf "$tarball"
  cd "postgresql-$up" || exit 2
  if [ ! -f src/Makefile.global ]; then
    ./configure --without-icu --without-readline --without-zlib >"$WORK/configure.log" 2>&1 || { echo "configure failed ($WORK/configure.log)"; exit 2; }
  fi
  make -C src/test/regress -j2 >"$WORK/make.log" 2>&1 || { echo "building the regress module failed ($WORK/make.log)"; exit 2; }
  rm -rf "$R"; cp -r src/test/regress "$R"
  rm -rf "$WORK/isolation"; cp -r src/test/isolation "$WORK/isolation"
  rm -rf "$WORK"/out-*-heap   # heap's cached results came from the old suites
  echo "$want" > "$WORK/suite-version"
fi
id postgres >/dev/null 2>&1 || useradd -m postgres
chown -R postgres: "$WORK"

run() {  # $1 = access method, $2 = run name (default: $1), $3 = extra postgresql.conf lines; prints "N M"
  local am=$1 name=${2:-$1} extra=${3:-} d=$WORK/pgdata-$SUITE-${2:-$1} out
  runuser -u postgres -- "$B/pg_ctl" -D "$d" stop -m immediate >/dev/null 2>&1; rm -rf "$d"
  runuser -u postgres -- "$B/initdb" -D "$d" -A trust --no-locale -E UTF8 >/dev/null
  cat >> "$d/postgresql.conf" <<CONF
shared_preload_libraries = 'pg_scoot'
port = $PORT
unix_socket_directories = '/tmp'
listen_addresses = ''
scoot.arena_size = '$ARENA'
max_prepared_transactions = 10
$extra
CONF
  runuser -u postgres -- env -u RUST_BACKTRACE "$B/pg_ctl" -D "$d" -l "$d.log" -w start >/dev/null || { echo "server start failed ($d.log)" >&2; return 1; }
  local P="$B/psql -qX -h /tmp -p $PORT -U postgres"
  # the suites create their databases from template0: give it the extension there too
  $P -d postgres -c "UPDATE pg_database SET datallowconn = true WHERE datname = 'template0'" >/dev/null
  for db in template0 template1 postgres; do $P -d $db -c "CREATE EXTENSION IF NOT EXISTS pg_scoot" >/dev/null; done
  $P -d postgres -c "UPDATE pg_database SET datallowconn = false WHERE datname = 'template0'" >/dev/null
  out=$WORK/out-$SUITE-$name; rm -rf "$out"; mkdir -p "$out"; chown postgres: "$out"
  if [ "$SUITE" = regress ]; then
    (cd "$R" && runuser -u postgres -- env PGOPTIONS="-c default_table_access_method=$am" ./pg_regress \
       --host=/tmp --port=$PORT --user=postgres --bindir="$B" --dlpath="$R" --inputdir="$R" \
       --outputdir="$out" --max-connections=4 --schedule="$R/parallel_schedule" >"$out/summary.txt" 2>&1)
  else
    local I=$WORK/isolation
    (cd "$I" && runuser -u postgres -- env PGOPTIONS="-c default_table_access_method=$am" \
       "$PGXS_SRC/test/isolation/pg_isolation_regress" \
       --host=/tmp --port=$PORT --user=postgres --bindir="$B" --inputdir="$I" \
       --outputdir="$out" --schedule="$I/isolation_schedule" >"$out/summary.txt" 2>&1)
  fi
  grep -E "terminated by signal|PANIC" "$d.log" | sed "s/^/server crash ($name): /" >&2
  grep -qE "terminated by signal|PANIC" "$d.log" && touch "$out/CRASHED"
  runuser -u postgres -- "$B/pg_ctl" -D "$d" stop -m fast >/dev/null 2>&1
  echo "$(grep -cE '\.\.\. ok' "$out/summary.txt") $(grep -cE '\.\.\. FAILED|failed \(ignored\)' "$out/summary.txt")"
}
counts() { echo "$(grep -cE '\.\.\. ok' "$1/summary.txt" 2>/dev/null || echo 0) $(grep -cE '\.\.\. FAILED|failed \(ignored\)' "$1/summary.txt" 2>/dev/null || echo 0)"; }
# The runs are independent clusters: scoot with plain scans on PORT and scoot with the custom scan
# (checked below) on PORT+1 go at the same time, and for the isolation suite heap too (PORT+2).
# The isolation suite mostly waits (locks, sleeps, round trips): all three together take what one
# takes (~70 s; one after the other ~180 s). The regression suite keeps the CPUs busier: two at
# a time (~105 s) after heap's (~60 s) is quicker than all three at once (~185 s).
heap_pid= heap_ran=
if [ "$WHICH" != scoot ] || [ ! -f "$WORK/out-$SUITE-heap/summary.txt" ]; then
  rm -f "$WORK/counts-$SUITE-heap"; heap_ran=1
  if [ "$SUITE" = isolation ]; then
    PORT=$((PORT + 2)) run heap >"$WORK/counts-$SUITE-heap" &
    heap_pid=$!
  else
    run heap >"$WORK/counts-$SUITE-heap"
  fi
fi
heap_done() {   # waits for the heap run (in this shell: its child) and sets hp / hf
  [ -n "$heap_pid" ] && wait "$heap_pid"
  if [ -n "$heap_ran" ]; then read -r hp hf <"$WORK/counts-$SUITE-heap"
  else read -r hp hf <<<"$(counts "$WORK/out-$SUITE-heap")"; fi
}
if [ "$WHICH" = heap ]; then
  heap_done
  echo "$SUITE: heap $hp passed, $hf failed"; exit 0
fi
# the comparison with heap reads plain scans (plans as heap's); the ScootScan custom scan is
# checked separately below
if [ "${CUSTOM_SCAN_CHECK:-1}" = 1 ]; then
  PORT=$((PORT + 1)) run scoot customscan "scoot.custom_scan = on" >/dev/null &
  cs_pid=$!
fi
read -r ap af <<<"$(run scoot scoot "scoot.custom_scan = off")"
heap_done
fails() { grep -E '\.\.\. FAILED' "$WORK/out-$SUITE-$1/summary.txt" | sed -E 's/^(test |not ok [0-9]+ +- )? *([^ ]+) +\.\.\..*/\2/' | sort; }
only=$(comm -13 <(fails heap) <(fails scoot))
# a test that fails under heap too (another minor version's suite, a machine's locale) must give
# scoot exactly heap's output
for t in $(comm -12 <(fails heap) <(fails scoot)); do
  cmp -s "$WORK/out-$SUITE-heap/results/$t.out" "$WORK/out-$SUITE-scoot/results/$t.out" ||
    only=$(printf '%s\n%s\n' "$only" "$t" | sed '/^$/d' | sort -u)
done
accepted=$(grep -vE '^\s*(#|$)' "$HERE/accepted_$SUITE.txt" 2>/dev/null | awk '{print $1}' | sort)
unexpected=$(comm -23 <(echo "$only" | sed '/^$/d') <(echo "$accepted" | sed '/^$/d') | tr '\n' ' ')
echo "failing under scoot only: $(echo $only)"
echo "diffs: $WORK/out-$SUITE-scoot/regression.diffs"
crash=""; [ -f "$WORK/out-$SUITE-scoot/CRASHED" ] && crash=" SERVER CRASH"
# ScootScan (scoot.custom_scan = on, the default): every test's output must equal the plain-scan
# run's except in query plans (EXPLAIN shows "Custom Scan (ScootScan)" where heap shows a Seq
# Scan); any other difference counts as unexpected
if [ "${CUSTOM_SCAN_CHECK:-1}" = 1 ]; then
  wait "$cs_pid"
  [ -f "$WORK/out-$SUITE-customscan/CRASHED" ] && crash="$crash SERVER CRASH (custom scan)"
  cs_diff=0
  for f in "$WORK/out-$SUITE-scoot/results/"*.out; do
    t=$(basename "$f" .out); g=$WORK/out-$SUITE-customscan/results/$t.out
    [ -f "$g" ] || continue
    cmp -s "$f" "$g" && continue
    cs_diff=$((cs_diff + 1))
    if ! diff -U3 "$f" "$g" | python3 "$HERE/plan_only.py" &&
       ! grep -qE "^$t\b" "$HERE/accepted_customscan.txt"; then
      unexpected="$unexpected customscan:$t"
    fi
  done
  echo "custom scan: $cs_diff tests differ from plain scans, in plans only unless listed as customscan:<test>"
fi
echo "$SUITE: scoot $ap passed, $af failed; heap $hp passed, $hf failed; unexpected: ${unexpected:-none}$crash"
[ -z "$unexpected" ] && [ -z "$crash" ]
