#!/usr/bin/env python3
"""Crash loop: acknowledged commits on scoot tables survive SIGKILL of the whole server.

Tables (all `USING scoot`, with indexes): `cr_acct(id PK, k, bal, note)`, `cr_hist(client, seq,
delta, pad; PK (client, seq))`, a `cr_big` table of TOASTed values, `cr_wide(id PK, n, c char(40),
t text, u text)` whose updates change only `n` (their WAL records copy the other values from the
old version within the block instead of carrying them), and pgbench's own tables
(`pgbench -i -s 2` with default_table_access_method = scoot).

Each iteration: 3 client threads run transfers (two UPDATEs of cr_acct + one INSERT into cr_hist
and two of cr_wide per transaction, some with large text, some rolled back, some touching cr_big), while `pgbench`
runs TPC-B on its tables; after a random 0.5-3 s the postmaster and every server process are
killed with SIGKILL (a machine crash for the processes; the WAL in the page cache survives,
as after any process crash). Then the server is started again (crash recovery: checkpoint image +
scoot WAL) and:
  * every commit a client saw acknowledged is present (its cr_hist row exists); at most the one
    in-flight transaction per client may also be present; nothing rolled back is;
  * sum(bal) over cr_acct is 0 (every transfer moves money between two accounts), and every
    account's balance equals the sum of its cr_hist deltas;
  * cr_wide: sum(n) is 0 and every row's c, t and u are exactly what they were loaded with;
  * pgbench: sum(abalance) = sum(tbalance) = sum(bbalance) = sum(delta) of pgbench_history;
  * index scans return what seq scans return (ids, k ranges, hist keys);
  * a CHECKPOINT at random moments (a redo start after the image) and VACUUMs are in the mix.
Env: PGHOST PGPORT PGUSER PGDATABASE; CRASH_ITERS (default 10), CRASH_SEED.
"""
import os
import random
import signal
import subprocess
import sys
import threading
import time

import psycopg

ITERS = int(os.environ.get("CRASH_ITERS", "10"))
SEED = int(os.environ.get("CRASH_SEED", str(int(time.time()))))
BIN = os.environ.get("SCOOT_BINDIR") or subprocess.run(
    ["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip() or "/usr/lib/postgresql/15/bin"
NACCT = 200
# cr_wide's values c, t, u as expressions of its id {x} (`g` at load, `id` when checked)
WIDE = ("md5({x}::text)", "repeat(md5({x}::text), 1 + {x} % 20)",
        "CASE WHEN {x} % 7 = 0 THEN NULL ELSE 'u' || {x} || repeat('-', {x} % 50) END")
NCLIENTS = 3
rng = random.Random(SEED)
print(f"seed {SEED}, {ITERS} iterations", flush=True)


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def connect(**kw):
    return psycopg.connect("", autocommit=True, **kw)


def q(sql, *args):
    with connect() as c:
        cur = c.execute(sql, args if args else None)
        return cur.fetchall() if cur.description else []


def wait_ready(timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        r = subprocess.run([f"{BIN}/pg_isready", "-q"])
        if r.returncode == 0:
            try:
                q("SELECT 1")
                return
            except Exception:
                pass
        time.sleep(0.3)
    fail("server not ready")


DATADIR = q("SHOW data_directory")[0][0]
LOGFILE = os.path.join(os.path.dirname(DATADIR), "server.log")
if not os.path.exists(LOGFILE):
    LOGFILE = "/tmp/scoot_crash_server.log"


def server_pids():
    with open(os.path.join(DATADIR, "postmaster.pid")) as f:
        pm = int(f.readline())
    kids = subprocess.run(["pgrep", "-P", str(pm)], capture_output=True, text=True).stdout.split()
    return pm, [int(k) for k in kids]


def crash():
    pm, kids = server_pids()
    for p in [pm] + kids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # wait until every process is gone (shared memory must be free for the restart)
    for p in [pm] + kids:
        for _ in range(200):
            try:
                os.kill(p, 0)
                time.sleep(0.05)
            except ProcessLookupError:
                break


def start():
    r = subprocess.run(["runuser", "-u", "postgres", "--", f"{BIN}/pg_ctl", "-D", DATADIR, "-l", LOGFILE,
                        "-w", "-t", "180", "start"], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        os.system(f"tail -n 40 {LOGFILE}")
        fail("pg_ctl start after the crash failed")
    wait_ready()


# ------------------------------------------------------------------ setup
with connect() as c:
    c.execute("SET client_min_messages = warning")
    for t in ("cr_acct", "cr_hist", "cr_big", "cr_wide"):
        c.execute(f"DROP TABLE IF EXISTS {t}")
    c.execute("CREATE TABLE cr_acct (id int PRIMARY KEY, k int, bal bigint NOT NULL, note text) USING scoot")
    c.execute("CREATE INDEX cr_acct_k ON cr_acct (k)")
    c.execute("CREATE TABLE cr_hist (client int, seq int, delta bigint, pad text, PRIMARY KEY (client, seq)) USING scoot")
    c.execute("CREATE TABLE cr_big (id int PRIMARY KEY, v text) USING scoot")
    c.execute(f"INSERT INTO cr_acct SELECT g, g % 17, 0, 'acct ' || g FROM generate_series(1, {NACCT}) g")
    c.execute("INSERT INTO cr_big SELECT g, repeat(md5(g::text), 200) FROM generate_series(1, 50) g")
    c.execute("CREATE TABLE cr_wide (id int PRIMARY KEY, n bigint NOT NULL, c char(40), t text, u text) USING scoot")
    c.execute("INSERT INTO cr_wide SELECT g, 0, {}, {}, {} FROM generate_series(1, {}) g".format(
        *(e.format(x="g") for e in WIDE), NACCT))
dbname = q("SELECT current_database()")[0][0]
# the OLAP worker writes checkpoint images from snapshots while the clients run (every second
# in even iterations): recovery then starts from an image taken in the middle of the load
q("ALTER SYSTEM SET scoot.checkpoint_interval = 1")
q("SELECT pg_reload_conf()")
env = dict(os.environ, PGOPTIONS="-c default_table_access_method=scoot -c client_min_messages=warning")
r = subprocess.run([f"{BIN}/pgbench", "-i", "-q", "-s", "2", dbname], env=env, capture_output=True, text=True)
if r.returncode != 0:
    fail("pgbench -i failed: " + r.stderr)
am = q("SELECT amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE relname = 'pgbench_accounts'")[0][0]
if am != "scoot":
    fail(f"pgbench_accounts uses {am}")

acked = {c: set() for c in range(NCLIENTS)}      # seqs whose COMMIT returned
inflight = {c: None for c in range(NCLIENTS)}    # seq whose COMMIT was sent, no answer yet
rolled = {c: set() for c in range(NCLIENTS)}     # seqs rolled back on purpose
next_seq = {c: 1 for c in range(NCLIENTS)}


def client(cid, stop, seed):
    r = random.Random(seed)
    try:
        conn = psycopg.connect("", autocommit=False)
    except Exception:
        return
    try:
        while not stop.is_set():
            seq = next_seq[cid]
            a, b = r.sample(range(1, NACCT + 1), 2)
            d = r.randint(1, 1000)
            pad = "x" * r.choice([0, 10, 3000]) + str(seq)
            try:
                conn.execute("UPDATE cr_acct SET bal = bal + %s WHERE id = %s", (d, a))
                conn.execute("UPDATE cr_acct SET bal = bal - %s, note = %s WHERE id = %s", (d, f"t{cid}.{seq}", b))
                conn.execute("UPDATE cr_wide SET n = n + %s WHERE id = %s", (d, a))
                conn.execute("UPDATE cr_wide SET n = n - %s WHERE id = %s", (d, b))
                conn.execute("INSERT INTO cr_hist VALUES (%s, %s, %s, %s), (%s, %s, %s, %s)",
                             (cid, seq, d, pad, cid, -seq, -d, ""))
                if r.random() < 0.05:
                    conn.execute("UPDATE cr_big SET v = v || %s WHERE id = %s", (str(seq), r.randint(1, 50)))
                next_seq[cid] = seq + 1
                if r.random() < 0.1:
                    conn.rollback()
                    rolled[cid].add(seq)
                    continue
                inflight[cid] = seq
                conn.commit()
                acked[cid].add(seq)
                inflight[cid] = None
            except Exception:
                return  # the server died
    finally:
        try:
            conn.close()
        except Exception:
            pass


def check(it):
    # every acknowledged commit present, nothing rolled back present
    for cid in range(NCLIENTS):
        have = {s for (s,) in q("SELECT seq FROM cr_hist WHERE client = %s AND seq > 0", cid)}
        missing = acked[cid] - have
        if missing:
            fail(f"iteration {it}: client {cid}: {len(missing)} acknowledged commits lost, e.g. {sorted(missing)[:5]}")
        extra = have - acked[cid] - ({inflight[cid]} if inflight[cid] else set())
        if extra:
            fail(f"iteration {it}: client {cid}: rows of transactions never acknowledged: {sorted(extra)[:5]}")
        if have & rolled[cid]:
            fail(f"iteration {it}: client {cid}: rolled-back transactions present: {sorted(have & rolled[cid])[:5]}")
        # the in-flight one is now either committed or not: record it
        if inflight[cid] is not None:
            if inflight[cid] in have:
                acked[cid].add(inflight[cid])
            else:
                rolled[cid].add(inflight[cid])
            inflight[cid] = None
    s = q("SELECT sum(bal), count(*) FROM cr_acct")[0]
    if s[0] != 0 or s[1] != NACCT:
        fail(f"iteration {it}: cr_acct sum(bal) = {s[0]} over {s[1]} rows, want 0 over {NACCT}")
    w = q("SELECT sum(n), count(*), count(*) FILTER (WHERE c IS DISTINCT FROM {} OR t IS DISTINCT FROM {} "
          "OR u IS DISTINCT FROM {}) FROM cr_wide".format(*(e.format(x="id") for e in WIDE)))[0]
    if w[0] != 0 or w[1] != NACCT or w[2] != 0:
        fail(f"iteration {it}: cr_wide sum(n) = {w[0]} over {w[1]} rows (want 0 over {NACCT}), {w[2]} rows with values an update did not write")
    bad = q("SELECT count(*) FROM cr_hist WHERE seq > 0 AND NOT EXISTS (SELECT 1 FROM cr_hist h2 WHERE h2.client = cr_hist.client AND h2.seq = -cr_hist.seq)")[0][0]
    if bad:
        fail(f"iteration {it}: {bad} half transactions in cr_hist")
    p = q("SELECT (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(tbalance) FROM pgbench_tellers), "
          "(SELECT sum(bbalance) FROM pgbench_branches), (SELECT coalesce(sum(delta), 0) FROM pgbench_history)")[0]
    if not (p[0] == p[1] == p[2] == p[3]):
        fail(f"iteration {it}: pgbench sums differ: accounts {p[0]}, tellers {p[1]}, branches {p[2]}, history {p[3]}")
    # index scans vs seq scans
    preds = [("cr_acct", "id BETWEEN 10 AND 150", "sum(id) + sum(bal)"), ("cr_acct", "k = 3", "sum(id) + sum(bal)"),
             ("cr_hist", "client = 1 AND seq BETWEEN -50 AND 400", "sum(seq) + sum(delta)"),
             ("pgbench_accounts", "aid BETWEEN 1000 AND 90000", "sum(aid::bigint) + sum(abalance)"),
             ("cr_big", "id < 30", "sum(length(v))")]
    for t, w, agg in preds:
        with connect() as c:
            c.execute("SET enable_indexscan = off; SET enable_bitmapscan = off")
            seq = c.execute(f"SELECT count(*), {agg} FROM {t} WHERE {w}").fetchone()
            c.execute("SET enable_indexscan = on; SET enable_seqscan = off")
            idx = c.execute(f"SELECT count(*), {agg} FROM {t} WHERE {w}").fetchone()
        if seq != idx:
            fail(f"iteration {it}: {t} WHERE {w}: seq scan {seq}, index scan {idx}")
    return p[0]


images_seen = 0
for it in range(1, ITERS + 1):
    q(f"ALTER SYSTEM SET scoot.checkpoint_interval = {1 if it % 2 == 0 else 0}")
    q("SELECT pg_reload_conf()")
    stop = threading.Event()
    threads = [threading.Thread(target=client, args=(cid, stop, rng.random())) for cid in range(NCLIENTS)]
    for t in threads:
        t.start()
    pgb = subprocess.Popen([f"{BIN}/pgbench", "-n", "-c", "2", "-T", "60", dbname], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run = rng.uniform(0.5, 3.0)
    t0 = time.time()
    did_ckpt = did_vac = False
    if it % 2 == 0:
        run += 1.5  # room for an image to be written
    while time.time() - t0 < run:
        x = rng.random()
        try:
            if x < 0.15 and not did_ckpt:
                q("CHECKPOINT"); did_ckpt = True
            elif x < 0.3 and not did_vac:
                q("VACUUM cr_acct"); did_vac = True
        except Exception:
            pass
        time.sleep(0.2)
    try:
        images_seen += q("SELECT images_written FROM scoot.checkpoints")[0][0]
    except Exception:
        pass
    crash()
    stop.set()
    for t in threads:
        t.join(timeout=30)
    pgb.wait(timeout=30)
    lines_before = sum(1 for _ in open(LOGFILE, errors="replace"))
    t1 = time.time()
    start()
    rec = time.time() - t1
    log = open(LOGFILE, errors="replace").readlines()[lines_before:]
    applied = [l.strip() for l in log if "crash recovery applied" in l or "scoot: replayed" in l]
    warn = [l.strip() for l in log if "lost its rows" in l]
    if warn:
        fail(f"iteration {it}: tables lost rows: {warn[:2]}")
    total = check(it)
    nack = sum(len(a) for a in acked.values())
    print(f"iteration {it}: ran {run:.1f}s (checkpoint {did_ckpt}, vacuum {did_vac}), restart {rec:.1f}s, "
          f"{nack} acknowledged transfers all present, pgbench sums {total}; {applied[-1].split('LOG:')[-1].strip() if applied else ''}",
          flush=True)

if ITERS >= 2 and images_seen == 0:
    fail("the OLAP worker wrote no checkpoint image in the iterations with scoot.checkpoint_interval = 1")
base, kept, slot, older = q("SELECT recovery_base_lsn::text, wal_kept_from::text, (SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = 'pg_scoot_wal'), wal_kept_from <= recovery_base_lsn FROM scoot.checkpoints")[0]
if kept != slot or not older:
    fail(f"the slot pg_scoot_wal keeps WAL from {slot}, want the oldest image's {kept} (<= the recovery base {base})")
print(f"{images_seen} checkpoint images written during the load; slot at the oldest image {kept} (recovery base {base})", flush=True)
q("ALTER SYSTEM RESET scoot.checkpoint_interval")
q("SELECT pg_reload_conf()")
# a final VACUUM + clean restart keeps everything too
q("VACUUM cr_acct"); q("VACUUM cr_hist")
subprocess.run(["runuser", "-u", "postgres", "--", f"{BIN}/pg_ctl", "-D", DATADIR, "-l", LOGFILE, "-w", "restart", "-m", "fast"],
               capture_output=True)
wait_ready()
check("final")
with connect() as c:
    for t in ("cr_acct", "cr_hist", "cr_big"):
        c.execute(f"DROP TABLE {t}")
    c.execute("DROP TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history")
print("PASS", flush=True)
