#!/usr/bin/env bash
# Durability benchmark (`make bench-durability`) -> bench/results/durability.{md,json}
#
#   For each pgbench scale in $DUR_SCALES (scoot tables, throw-away cluster):
#     C. WAL-only recovery: the tables are built after the last image (an empty one), then
#        SIGKILL-style crash (pg_ctl stop -m immediate): recovery replays every scoot record;
#     B. image + WAL: the OLAP worker writes an image from a snapshot (scoot.checkpoint_interval),
#        a short pgbench run follows, crash: recovery loads the image and replays the tail;
#     A. clean restart: the shutdown image is loaded, nothing replayed.
#   Times: wall time of `pg_ctl start` (server up and accepting connections), and the server's
#   own numbers from scoot.checkpoints (image load ms, records replayed, redo ms).
#   Then the cost of writing images on OLTP: pgbench TPC-B, $DUR_CLIENTS clients, -P 1 for
#   $DUR_SECONDS s with scoot.checkpoint_interval = $DUR_IMAGE_EVERY s: TPS per second, and the
#   seconds in which an image was being written (from the server log).
#
# Knobs: DUR_SCALES ("10 40"), DUR_SECONDS (40), DUR_CLIENTS (4), DUR_IMAGE_EVERY (10),
#        SKIP_BUILD=1, SKIP_SETUP=1.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
SCALES=${DUR_SCALES:-10 40}
SECS=${DUR_SECONDS:-40}
CLIENTS=${DUR_CLIENTS:-4}
EVERY=${DUR_IMAGE_EVERY:-10}
RES=$SCOOT_REPO/bench/results
TMP=$RES/tmp-durability
rm -rf "$TMP"; mkdir -p "$TMP"

if [ "${SKIP_SETUP:-0}" != 1 ]; then step "setup"; bash scripts/setup.sh; fi
step "build + install (release)"
build_install
export SCOOT_ARENA_MB=${SCOOT_ARENA_MB:-6144}
SCOOT_EXTRA_CONF="scoot.checkpoint_interval = 0
log_min_messages = log" cluster_start || die "cluster did not start"
DATA=$SCOOT_CLUSTER_DIR/data
PGBENCH=$PG_BINDIR/pgbench
ms() { date +%s%3N; }
pgctl() { as_postgres "$PG_BINDIR/pg_ctl" -D "$DATA" -l "$SCOOT_CLUSTER_DIR/server.log" -w -t 600 "$@" >/dev/null; }
timed_start() { local t0; t0=$(ms); pgctl start || die "start failed"; echo $(($(ms) - t0)); }
ck() { psql_q -d dur -F'|' -c "SELECT $1 FROM scoot.checkpoints"; }
set_interval() {
  psql_q -d postgres -c "ALTER SYSTEM SET scoot.checkpoint_interval = $1" -c "SELECT pg_reload_conf()" >/dev/null
}

echo '[' >"$TMP/rows.json"
first=1
printf '| scale | scoot data (MiB) | WAL-only recovery: records | start (ms) | redo (ms) | image + WAL: records | start (ms) | image load (ms) | redo (ms) | clean stop incl. image write (ms) | clean restart: start (ms) | image load (ms) | image+WAL s/GiB | WAL-only s/GiB |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n' >"$TMP/recovery.md"
for S in $SCALES; do
  step "scale $S"
  psql_q -d postgres -c "DROP DATABASE IF EXISTS dur WITH (FORCE)" -c "CREATE DATABASE dur"
  psql_q -d dur -c "CREATE EXTENSION pg_scoot"
  # a fresh recovery base (empty image) right before the tables are built
  pgctl restart -m fast || die "restart failed"
  PGOPTIONS="-c default_table_access_method=scoot" "$PGBENCH" -i -q -s "$S" dur >/dev/null 2>&1 || die "pgbench -i failed"
  "$PGBENCH" -n -c 2 -T 5 dur >/dev/null 2>&1
  bytes=$(psql_q -d dur -c "SELECT sum(blocks)::bigint * (SELECT block_size FROM scoot.arena) FROM scoot.arena_tables")
  mib=$((bytes / 1048576))
  # C: WAL-only
  pgctl stop -m immediate
  c_start=$(timed_start)
  read -r c_rec c_redo <<<"$(ck "redo_records, round(redo_ms)" | tr '|' ' ')"
  # B: image (from a snapshot) + a WAL tail
  set_interval 1
  for _ in $(seq 1 120); do
    [ "$(ck "images_written")" -gt 0 ] && break
    psql_q -d dur -c "UPDATE pgbench_branches SET bbalance = bbalance WHERE bid = 1" >/dev/null
    sleep 1
  done
  set_interval 0
  "$PGBENCH" -n -c 2 -T 5 dur >/dev/null 2>&1
  pgctl stop -m immediate
  b_start=$(timed_start)
  read -r b_rec b_redo b_load <<<"$(ck "redo_records, round(redo_ms), round(load_ms)" | tr '|' ' ')"
  # A: clean restart
  pgctl restart -m fast || die "restart failed"
  t0=$(ms); pgctl stop -m fast; a_stop=$(($(ms) - t0))
  a_start=$(timed_start)
  a_load=$(ck "round(load_ms)")
  gib=$(awk -v b="$bytes" 'BEGIN { printf "%.3f", b / 1073741824 }')
  b_per=$(awk -v t="$b_start" -v g="$gib" 'BEGIN { printf "%.2f", t / 1000 / g }')
  c_per=$(awk -v t="$c_start" -v g="$gib" 'BEGIN { printf "%.2f", t / 1000 / g }')
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$S" "$mib" "$c_rec" "$c_start" "$c_redo" \
    "$b_rec" "$b_start" "$b_load" "$b_redo" "$a_stop" "$a_start" "$a_load" "$b_per" "$c_per" >>"$TMP/recovery.md"
  [ $first = 1 ] || echo ',' >>"$TMP/rows.json"; first=0
  printf '{"scale":%s,"bytes":%s,"wal_only":{"records":%s,"start_ms":%s,"redo_ms":%s},"image_wal":{"records":%s,"start_ms":%s,"load_ms":%s,"redo_ms":%s},"clean":{"stop_ms":%s,"start_ms":%s,"load_ms":%s}}' \
    "$S" "$bytes" "$c_rec" "$c_start" "$c_redo" "$b_rec" "$b_start" "$b_load" "$b_redo" "$a_stop" "$a_start" "$a_load" >>"$TMP/rows.json"
  tail -n 1 "$TMP/recovery.md"
done
echo ']' >>"$TMP/rows.json"

step "image cost on OLTP: pgbench TPC-B -c $CLIENTS -P 1 -T $SECS, an image every $EVERY s"
lines_before=$(wc -l <"$SCOOT_CLUSTER_DIR/server.log")
set_interval "$EVERY"
t_begin=$(date +%s)
"$PGBENCH" -n -M prepared -c "$CLIENTS" -j 2 -P 1 -T "$SECS" dur >"$TMP/pgbench.out" 2>"$TMP/pgbench.err"
set_interval 0
# images written during the run: "... wrote checkpoint image ... in N ms" with the log timestamp
tail -n +"$((lines_before + 1))" "$SCOOT_CLUSTER_DIR/server.log" | grep "wrote checkpoint image" >"$TMP/images.log" || true
python3 - "$TMP" "$t_begin" <<'PY'
import json, re, sys, datetime
tmp, t_begin = sys.argv[1], int(sys.argv[2])
tps = [(float(m.group(1)), float(m.group(2))) for m in re.finditer(r"progress: ([\d.]+) s, ([\d.]+) tps", open(f"{tmp}/pgbench.err").read())]
busy = set()
imgs = []
for line in open(f"{tmp}/images.log"):
    m = re.match(r"(\S+ \S+) UTC .* in (\d+) ms", line)
    if not m:
        continue
    end = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc).timestamp()
    dur = int(m.group(2)) / 1000
    imgs.append({"end_s": round(end - t_begin, 2), "ms": int(m.group(2))})
    s = int(end - dur - t_begin)
    for k in range(s, int(end - t_begin) + 2):
        busy.add(k)
during = [t for (s, t) in tps if int(s) in busy]
other = [t for (s, t) in tps if int(s) not in busy]
avg = lambda v: sum(v) / len(v) if v else float("nan")
res = {"tps_timeline": tps, "images": imgs, "tps_during_images": avg(during), "tps_otherwise": avg(other)}
json.dump(res, open(f"{tmp}/oltp.json", "w"))
with open(f"{tmp}/oltp.md", "w") as f:
    f.write(f"| images written | image write (ms, each) | TPS in seconds with an image being written | TPS otherwise | ratio |\n|---|---|---|---|---|\n")
    f.write(f"| {len(imgs)} | {', '.join(str(i['ms']) for i in imgs)} | {avg(during):.0f} | {avg(other):.0f} | {avg(during) / avg(other) if other and during else float('nan'):.2f} |\n")
    f.write("\nTPS per second: " + " ".join(f"{t:.0f}" for _, t in tps) + "\n")
PY

{
  echo "# Durability benchmark"
  echo
  echo "\`make bench-durability\` (scripts/durability_bench.sh), $(date -u +%Y-%m-%d), git $(git rev-parse --short HEAD), $(nproc) vCPU."
  echo "pgbench tables on scoot (\`pgbench -i -s S\` + a short TPC-B run); arena $SCOOT_ARENA_MB MB, default block size."
  echo
  echo "## Recovery time"
  echo
  echo "*WAL-only*: the tables were built after the last checkpoint image, so recovery replays every scoot record."
  echo "*image + WAL*: the OLAP worker wrote an image from a snapshot, then 5 s of pgbench; recovery loads the image and replays the tail."
  echo "*clean restart*: the shutdown image is loaded, nothing is replayed. \"start\" is the wall time of \`pg_ctl start\` (includes PostgreSQL's own recovery of heap catalogs and the pgbench history)."
  echo
  cat "$TMP/recovery.md"
  echo
  echo "## Cost of image writing on OLTP"
  echo
  cat "$TMP/oltp.md"
  echo
  echo "![TPS while images are written](durability_oltp.png)"
} >"$RES/durability.md"
{
  echo '{"recovery":'; cat "$TMP/rows.json"; echo ',"oltp":'; cat "$TMP/oltp.json"; echo '}'
} >"$RES/durability.json"
python3 bench/plot_durability.py "$RES/durability.json" || echo "(no plot: matplotlib missing?)"
cat "$RES/durability.md"
