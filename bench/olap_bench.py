#!/usr/bin/env python3
"""OLAP snapshot benchmarks (issue 6): `bash scripts/olap_bench.sh` (= `make bench-olap`).

Parts (each on its own throw-away clusters, started with scripts/cluster.sh):

  creation   snapshot creation time (gate closed, and the whole creation incl. uffd arming) vs
             arena data size (1, 2, 4, 8 GiB) and hot-block fraction, for uffd / software / copy,
             plus fork() of a process holding the same amount of private memory (HyPer baseline)
  scan       idle scans of one scoot table, live (olap off) vs its snapshot image (olap on),
             after VACUUM and after updates: the image must be at least as fast
  htap       pgbench TPC-B (scale 10, 4 clients) alone, then with 1 and 2 nonstop analytic query
             streams, for heap and for scoot (olap on, uffd and software), in one run: OLTP TPS
             kept and analytic latency; and the first-write cost per method from the writers'
             histograms (scoot.snapshot_stats)
  timeline   pgbench --log latency timeline with snapshots every 100 ms and every 1 s (uffd), with
             the snapshot creation instants: plots and the spike ratio

Writes bench/results/olap.md, olap.json and PNG plots in bench/results/.
Knobs: OLAP_BENCH_PARTS="creation htap timeline", OLAP_BENCH_QUICK=1 (small sizes, short runs),
       OLAP_BENCH_SECONDS (htap run length, default 30).
"""
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

import psycopg

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RES = os.path.join(REPO, "bench", "results")
TMP = os.path.join(RES, "tmp", "olap")
BIN = os.environ.get("SCOOT_BINDIR", "/usr/lib/postgresql/15/bin")
QUICK = os.environ.get("OLAP_BENCH_QUICK") == "1"
PARTS = os.environ.get("OLAP_BENCH_PARTS", "creation scan htap control timeline").split()
SECS = int(os.environ.get("OLAP_BENCH_SECONDS", "10" if QUICK else "30"))
METHODS = ["uffd", "software", "copy"]


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


class Cluster:
    """A throw-away cluster from scripts/cluster.sh."""

    def __init__(self, name, port, arena_mb, conf=()):
        self.dir = f"/tmp/scoot_olapbench_{name}_{os.getpid()}"
        env = dict(os.environ, SCOOT_ARENA_MB=str(arena_mb), SCOOT_PORT=str(port),
                   SCOOT_EXTRA_CONF="\n".join(conf))
        env.pop("RUST_BACKTRACE", None)
        out = subprocess.run(["bash", f"{REPO}/scripts/cluster.sh", "start", self.dir], env=env,
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"cluster {name}: {out.stderr[-2000:]}")
        m = re.search(r"PGPORT=(\d+)", out.stdout)
        self.port = int(m.group(1))
        self.env = dict(os.environ, PGHOST=self.dir, PGPORT=str(self.port), PGUSER="postgres")

    def dsn(self, db="postgres"):
        return f"host={self.dir} port={self.port} user=postgres dbname={db}"

    def conn(self, db="postgres", olap=None):
        c = psycopg.connect(self.dsn(db), autocommit=True)
        # psycopg prepares a statement run 5 times and reuses its cached plan, which would keep a
        # plan made under one variant's settings (scoot.custom_scan, workers) for the next
        c.prepare_threshold = None
        if olap is not None:
            c.execute(f"SET scoot.olap = {'on' if olap else 'off'}")
        return c

    def sql(self, q, db="postgres"):
        with self.conn(db) as c:
            cur = c.execute(q)
            return cur.fetchall() if cur.description else None

    def pgbench(self, db, args, env=None):
        e = dict(self.env, **(env or {}))
        return subprocess.run([f"{BIN}/pgbench", *args, db], env=e, capture_output=True, text=True)

    def stop(self):
        subprocess.run(["bash", f"{REPO}/scripts/cluster.sh", "stop", self.dir, "--remove"],
                       capture_output=True)


def tps_of(out):
    m = re.search(r"^tps = ([0-9.]+)", out, re.M)
    return float(m.group(1)) if m else None


# ------------------------------------------------------------------ creation


def fork_baseline(gib):
    """fork() time of a process holding `gib` GiB of touched private memory (median of 5)."""
    n = gib << 30
    buf = bytearray(n)
    mv = memoryview(buf)
    for i in range(0, n, 4096):
        mv[i] = 1
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        times.append((time.perf_counter() - t0) * 1000)
        os.waitpid(pid, 0)
    del mv, buf
    return statistics.median(times)


def creation_part(results):
    sizes = [1, 2] if QUICK else [1, 2, 4, 8]
    fractions = [0.05, 1.0] if QUICK else [0.01, 0.05, 0.25, 1.0]
    reps = 3 if QUICK else 5
    rows = []
    for method in METHODS:
        top = sizes[-1]
        pool_mb = (top * 1024 + 512) if method == "copy" else 1024
        cl = Cluster(f"create_{method}", 55600, top * 1024 + 1024,
                     [f"scoot.snapshot_method = '{method}'", f"scoot.snapshot_memory = {pool_mb}",
                      "scoot.snapshot_interval = 3600000"])
        try:
            cl.sql("CREATE EXTENSION pg_scoot")
            cl.sql("CREATE TABLE big (id int, a bigint, pad text) USING scoot")
            cl.sql("CREATE TABLE tiny (i int) USING scoot")
            cl.sql("INSERT INTO tiny VALUES (1)")
            # writer processes registered with the worker (uffd arms each of them)
            writers = [cl.conn() for _ in range(4)]
            for w in writers:
                w.execute("INSERT INTO tiny VALUES (2)")
            upd = cl.conn()
            reader = cl.conn(olap=True)
            reader.execute("SET scoot.snapshot_max_age = 0")
            next_id = 1
            per_block = None
            for s in sizes:
                # grow the table to s GiB of arena blocks
                while True:
                    used = cl.sql("SELECT blocks_used::bigint * block_size FROM scoot.arena")[0][0]
                    if used >= s << 30:
                        break
                    cl.sql(f"INSERT INTO big SELECT g, 0, repeat('x', 900) FROM generate_series({next_id}, {next_id + 199999}) g")
                    next_id += 200000
                nblocks = cl.sql("SELECT blocks FROM scoot.arena_tables WHERE relation = 'big'::regclass")[0][0]
                per_block = max(1, (next_id - 1) // nblocks)
                for f in fractions:
                    step = max(1, int(per_block / f))
                    g, c = [], []
                    for _ in range(reps):
                        # make a fraction f of the blocks hot (one row changes in each)
                        upd.execute(f"UPDATE big SET a = a + 1 WHERE id % {step} = 0")
                        reader.execute("SELECT count(*) FROM tiny").fetchall()
                        # uffd arms the hot blocks after publishing the snapshot: wait for it
                        for _ in range(300):
                            r = cl.sql("SELECT gate_ms, create_ms, bytes_armed, writers_armed FROM scoot.snapshots ORDER BY id DESC LIMIT 1")[0]
                            if method != "uffd" or r[3] > 0:
                                break
                            time.sleep(0.05)
                        g.append(r[0])
                        c.append(r[1])
                    row = dict(method=method, gib=s, hot=f, gate_ms=statistics.median(g),
                               create_ms=statistics.median(c), gate_ms_max=max(g),
                               create_ms_max=max(c))
                    rows.append(row)
                    log("creation", row)
            for w in writers:
                w.close()
        finally:
            cl.stop()
    forks = []
    for s in sizes:
        ms = fork_baseline(s)
        forks.append(dict(gib=s, fork_ms=ms))
        log("fork", s, "GiB:", round(ms, 2), "ms")
    results["creation"] = dict(rows=rows, fork=forks, sizes=sizes, fractions=fractions)


# ------------------------------------------------------------------ htap

ANALYTIC = "SELECT bid, count(*), sum(abalance), avg(abalance) FROM pgbench_accounts GROUP BY bid"


NICE = 0   # scoot.olap_nice of the analytic streams (set per htap config)


def stream(cl, db, olap, stop, lat):
    with cl.conn(db, olap=olap) as c:
        if NICE:
            c.execute(f"SET scoot.olap_nice = {NICE}")
        while not stop.is_set():
            t0 = time.perf_counter()
            c.execute(ANALYTIC).fetchall()
            lat.append((time.perf_counter() - t0) * 1000)


def light_stream(cl, db, olap, stop, lat):
    """A light reader: a tiny snapshot query every 50 ms keeps the worker taking snapshots."""
    with cl.conn(db, olap=olap) as c:
        while not stop.is_set():
            t0 = time.perf_counter()
            c.execute("SELECT sum(bbalance) FROM pgbench_branches").fetchall()
            lat.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.05)


def htap_run(cl, db, olap, nstreams):
    stop = threading.Event()
    lats = []
    if nstreams == "light":
        threads = [threading.Thread(target=light_stream, args=(cl, db, olap, stop, lats))]
    else:
        threads = [threading.Thread(target=stream, args=(cl, db, olap, stop, lats)) for _ in range(nstreams)]
    for t in threads:
        t.start()
    time.sleep(1 if nstreams != 0 else 0)
    out = cl.pgbench(db, ["-n", "-c", "4", "-j", "2", "-T", str(SECS), "-M", "prepared"])
    stop.set()
    for t in threads:
        t.join()
    return tps_of(out.stdout), (statistics.median(lats) if lats else None), len(lats)


def htap_part(results):
    rows = []
    firstwrite = []
    global NICE
    # (engine, method, olap_nice, uffd_writer_resolves): the default uffd (writers resolve their
    # own announced traps), uffd with every first write resolved by the worker's fault handler,
    # software, and uffd with the analytic backends at nice 10
    configs = [("heap", None, 0, True), ("scoot", "uffd", 0, True), ("scoot", "uffd", 0, False),
               ("scoot", "software", 0, True), ("scoot", "uffd", 10, True)]
    for engine, method, nice, resolves in configs:
        NICE = nice
        name = ((engine if method is None else f"{engine}_{method}") + ("" if resolves else "_handler")
                + (f"_nice{nice}" if nice else ""))
        conf = [] if method is None else [f"scoot.snapshot_method = '{method}'",
                                          f"scoot.uffd_writer_resolves = {'on' if resolves else 'off'}"]
        cl = Cluster(f"htap_{name}", 55620, 2048, conf)
        try:
            cl.sql("CREATE EXTENSION pg_scoot")
            env = {"PGOPTIONS": "-c default_table_access_method=scoot"} if engine == "scoot" else {}
            o = cl.pgbench("postgres", ["-i", "-s", "10", "-q"], env)
            if o.returncode != 0:
                raise RuntimeError(o.stderr)
            cl.sql("VACUUM ANALYZE")
            base = None
            for n in (0, "light", 1, 2):
                if engine == "scoot":
                    cl.sql("SELECT scoot.snapshot_stats_reset()")
                tps, lat, nq = htap_run(cl, "postgres", engine == "scoot", n)
                base = base or tps
                row = dict(engine=name, streams=n, tps=tps, kept=tps / base, analytic_ms=lat,
                           analytic_queries=nq)
                rows.append(row)
                log("htap", row)
                if engine == "scoot" and n != 0:
                    st = cl.sql("""SELECT method, snapshots_taken, gate_ms_avg, gate_ms_max, create_ms_avg,
                                          first_write_copies, first_write_copy_us_p50, first_write_copy_us_p99,
                                          first_write_faults, first_write_fault_us_p50, first_write_fault_us_p99,
                                          fault_us_avg, save_us_avg, write_faults
                                   FROM scoot.snapshot_stats""")[0]
                    keys = ["method", "snapshots_taken", "gate_ms_avg", "gate_ms_max", "create_ms_avg",
                            "copies", "copy_us_p50", "copy_us_p99", "faults", "fault_us_p50",
                            "fault_us_p99", "handler_us_avg", "save_us_avg", "handler_faults"]
                    fw = dict(zip(keys, st), streams=n, nice=nice, writer_resolves=resolves)
                    firstwrite.append(fw)
                    log("first write", fw)
        finally:
            cl.stop()
    results["htap"] = dict(rows=rows, seconds=SECS, query=ANALYTIC)
    results["firstwrite"] = firstwrite


# ------------------------------------------------------------------ scan


SCAN_QUERIES = [
    ("seq: group by", ANALYTIC),
    ("seq: filtered sum", "SELECT sum(abalance), count(*) FROM pgbench_accounts WHERE abalance <> 0 OR aid % 7 = 0"),
    ("index: 50k-row range", "SELECT sum(abalance) FROM pgbench_accounts WHERE aid BETWEEN 200000 AND 250000"),
]


def timed(c, q, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        c.execute(q).fetchall()
        ts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ts)


def scan_part(results):
    """Idle scans of the same scoot table: live (olap off) vs snapshot image (olap on), after
    VACUUM (blocks marked all-visible) and after updates (versions to check, pre-images saved)."""
    reps = 5 if QUICK else 11
    rows = []
    for method in ("uffd", "software"):
        cl = Cluster(f"scan_{method}", 55660, 2048, [f"scoot.snapshot_method = '{method}'",
                                                    "max_parallel_workers_per_gather = 0"])
        try:
            cl.sql("CREATE EXTENSION pg_scoot")
            o = cl.pgbench("postgres", ["-i", "-s", "10", "-q"],
                           {"PGOPTIONS": "-c default_table_access_method=scoot"})
            if o.returncode != 0:
                raise RuntimeError(o.stderr)
            cl.sql("VACUUM ANALYZE")
            for state in ("after VACUUM", "after 5 s of TPC-B updates"):
                if state != "after VACUUM":
                    cl.pgbench("postgres", ["-n", "-c", "4", "-j", "2", "-T", "5", "-M", "prepared"])
                with cl.conn(olap=False) as live, cl.conn(olap=True) as img:
                    # one snapshot for the whole comparison: a REPEATABLE READ read-only transaction
                    img.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    for name, q in SCAN_QUERIES:
                        timed(live, q, 1)
                        timed(img, q, 1)   # warm-up
                        # interleaved, so that the host's drift hits both alike
                        lvs, ims = [], []
                        for _ in range(reps):
                            lvs.append(timed(live, q, 1))
                            ims.append(timed(img, q, 1))
                        lv, im = statistics.median(lvs), statistics.median(ims)
                        row = dict(method=method, state=state, query=name, live_ms=lv, image_ms=im,
                                   ratio=im / lv)
                        rows.append(row)
                        log("scan", row)
                    img.execute("COMMIT")
        finally:
            cl.stop()
    results["scan"] = dict(rows=rows, reps=reps, queries=SCAN_QUERIES)


# ------------------------------------------------------------------ control


def control_part(results):
    """How much does *any* CPU use on the other core cost TPC-B on this machine? heap alone, then
    with a busy loop at the lowest priority the kernel has (SCHED_IDLE) that touches no memory."""
    cl = Cluster("control", 55680, 1024)
    rows = []
    try:
        o = cl.pgbench("postgres", ["-i", "-s", "10", "-q"])
        if o.returncode != 0:
            raise RuntimeError(o.stderr)
        cl.sql("VACUUM ANALYZE")
        for burn in (False, True, False):
            p = subprocess.Popen(["chrt", "-i", "0", "sh", "-c", "while :; do :; done"]) if burn else None
            try:
                out = cl.pgbench("postgres", ["-n", "-c", "4", "-j", "2", "-T", str(SECS), "-M", "prepared"])
            finally:
                if p:
                    p.kill()
                    p.wait()
            rows.append(dict(burner=burn, tps=tps_of(out.stdout)))
            log("control", rows[-1])
    finally:
        cl.stop()
    results["control"] = rows


# ------------------------------------------------------------------ timeline


def timeline_part(results):
    out = []
    for interval in (100, 1000):
        cl = Cluster(f"timeline_{interval}", 55640, 2048,
                     ["scoot.snapshot_method = 'uffd'", f"scoot.snapshot_interval = {interval}",
                      f"scoot.snapshot_max_age = {max(interval * 2, 200)}"])
        wd = os.path.join(TMP, f"timeline_{interval}")
        shutil.rmtree(wd, ignore_errors=True)
        os.makedirs(wd)
        os.chmod(wd, 0o777)
        try:
            cl.sql("CREATE EXTENSION pg_scoot")
            o = cl.pgbench("postgres", ["-i", "-s", "10", "-q"],
                           {"PGOPTIONS": "-c default_table_access_method=scoot"})
            if o.returncode != 0:
                raise RuntimeError(o.stderr)
            stop = threading.Event()
            snaps = {}

            def poll():
                with cl.conn() as c:
                    while not stop.is_set():
                        for sid, taken in c.execute("SELECT id, extract(epoch FROM taken_at) FROM scoot.snapshots"):
                            snaps[sid] = float(taken)
                        time.sleep(0.01)

            def reader():
                # a light analytic reader keeps the worker taking snapshots at its interval
                with cl.conn(olap=True) as c:
                    while not stop.is_set():
                        c.execute("SELECT count(*) FROM pgbench_branches").fetchall()
                        time.sleep(0.05)

            th = [threading.Thread(target=poll), threading.Thread(target=reader)]
            for t in th:
                t.start()
            time.sleep(1)
            secs = 10 if QUICK else 20
            r = subprocess.run([f"{BIN}/pgbench", "-n", "-c", "4", "-j", "2", "-T", str(secs), "-M", "prepared",
                                "--log", f"--log-prefix={wd}/tx", "--progress", "1", "postgres"],
                               env=cl.env, capture_output=True, text=True, cwd=wd)
            stop.set()
            for t in th:
                t.join()
            tx = []
            for fn in os.listdir(wd):
                with open(os.path.join(wd, fn)) as f:
                    for line in f:
                        p = line.split()
                        # client_id transaction_no time script_no time_epoch time_us
                        lat_ms = int(p[2]) / 1000.0
                        end = int(p[4]) + int(p[5]) / 1e6
                        tx.append((end - lat_ms / 1000.0, lat_ms))
            tx.sort()
            t_start = tx[0][0]
            st = sorted(t for t in snaps.values() if t >= t_start - 1)
            lats = [l for _, l in tx]
            med = statistics.median(lats)
            # transactions that began within 20 ms after a snapshot was taken
            near = []
            j = 0
            for ts, l in tx:
                while j + 1 < len(st) and st[j + 1] <= ts:
                    j += 1
                if st and st[j] <= ts < st[j] + 0.02:
                    near.append(l)
            # 100 ms windows: median latency per window
            win = {}
            for ts, l in tx:
                win.setdefault(int((ts - t_start) * 10), []).append(l)
            wmed = [statistics.median(v) for k, v in sorted(win.items())]
            row = dict(interval_ms=interval, transactions=len(tx), tps=tps_of(r.stdout),
                       snapshots=len(st), median_ms=med,
                       p99_ms=sorted(lats)[int(len(lats) * 0.99)],
                       near_snapshot_median_ms=statistics.median(near) if near else None,
                       near_snapshot_p99_ms=sorted(near)[int(len(near) * 0.99)] if near else None,
                       near_snapshot_n=len(near),
                       worst_100ms_window_median_ms=max(wmed),
                       spike_ratio=max(wmed) / med)
            out.append(row)
            log("timeline", row)
            plot_timeline(tx, st, t_start, interval, med)
        finally:
            cl.stop()
    results["timeline"] = out


def plot_timeline(tx, st, t0, interval, med):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(11, 4))
    xs = [t - t0 for t, _ in tx]
    ax.scatter(xs, [l for _, l in tx], s=1, alpha=0.3, label="transaction latency")
    for s in st:
        ax.axvline(s - t0, color="red", alpha=0.15, linewidth=0.6)
    ax.axhline(med * 2, color="black", linestyle="--", linewidth=0.8, label="2 x median")
    ax.set_yscale("log")
    ax.set_xlabel("seconds")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"pgbench TPC-B latency, scoot uffd snapshots every {interval} ms (red: snapshot taken)")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(os.path.join(RES, f"olap_timeline_{interval}ms.png"), dpi=110)
    plt.close(fig)


def plot_creation(c):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axs = plt.subplots(1, 2, figsize=(12, 4.5))
    hot = 0.05 if 0.05 in c["fractions"] else c["fractions"][0]
    for m in METHODS:
        pts = [(r["gib"], r["gate_ms"]) for r in c["rows"] if r["method"] == m and r["hot"] == hot]
        axs[0].plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{m} (gate closed)")
        if m == "uffd":
            pts = [(r["gib"], r["create_ms"]) for r in c["rows"] if r["method"] == m and r["hot"] == hot]
            axs[0].plot([p[0] for p in pts], [p[1] for p in pts], marker="x", linestyle="--",
                        label="uffd (incl. arming, gate open)")
    axs[0].plot([f["gib"] for f in c["fork"]], [f["fork_ms"] for f in c["fork"]], marker="s",
                label="fork() of a process with that much private memory")
    axs[0].set_xlabel("arena data (GiB)")
    axs[0].set_ylabel("ms")
    axs[0].set_yscale("log")
    axs[0].set_title(f"snapshot creation vs size ({int(hot * 100)}% hot blocks)")
    axs[0].legend(fontsize=7)
    top = max(c["sizes"])
    for m in METHODS:
        pts = [(r["hot"] * 100, r["gate_ms"]) for r in c["rows"] if r["method"] == m and r["gib"] == top]
        axs[1].plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{m} (gate closed)")
        if m == "uffd":
            pts = [(r["hot"] * 100, r["create_ms"]) for r in c["rows"] if r["method"] == m and r["gib"] == top]
            axs[1].plot([p[0] for p in pts], [p[1] for p in pts], marker="x", linestyle="--",
                        label="uffd (incl. arming)")
    axs[1].set_xlabel("hot blocks (% modified since the previous snapshot)")
    axs[1].set_ylabel("ms")
    axs[1].set_yscale("log")
    axs[1].set_title(f"snapshot creation vs hot fraction ({top} GiB)")
    axs[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(RES, "olap_creation.png"), dpi=110)
    plt.close(fig)


def fmt(x, d=2):
    return "-" if x is None else f"{x:.{d}f}"


def write_md(results):
    L = ["# OLAP snapshots: benchmark results", "",
         f"`bash scripts/olap_bench.sh` ({'OLAP_BENCH_QUICK=1, ' if QUICK else ''}machine: {results['machine']}, "
         f"git {results['git']}). Each part's numbers come from one run of that part"
         + ("; parts and the commit they ran at: " + ", ".join(f"{k} {v}" for k, v in results.get("part_git", {}).items())
            if results.get("part_git") else "") + ".", ""]
    c = results.get("creation")
    if c:
        L += ["## 1. Snapshot creation time", "",
              "Median of the runs; `gate` = writers held at the gate (catalog capture; `copy` also copies "
              "the used arena there), `create` = whole creation (uffd: arming of the hot blocks in 5 "
              "registered writer processes, done after the gate reopened). fork() = the same amount of "
              "touched private memory in one process.", "",
              "| GiB | hot | uffd gate ms | uffd create ms | software gate ms | copy gate ms | fork() ms |",
              "|---|---|---|---|---|---|---|"]
        fk = {f["gib"]: f["fork_ms"] for f in c["fork"]}
        for s in c["sizes"]:
            for f in c["fractions"]:
                def g(m, k):
                    r = [x for x in c["rows"] if x["method"] == m and x["gib"] == s and x["hot"] == f]
                    return r[0][k] if r else None
                L.append(f"| {s} | {int(f * 100)}% | {fmt(g('uffd', 'gate_ms'), 3)} | {fmt(g('uffd', 'create_ms'))} | "
                         f"{fmt(g('software', 'gate_ms'), 3)} | {fmt(g('copy', 'gate_ms'))} | {fmt(fk.get(s))} |")
        L += ["", "![creation](olap_creation.png)", ""]
    fw = results.get("firstwrite")
    if fw:
        L += ["## 2. First write to a page after a snapshot (as the writer sees it)", "",
              "From the writers' histograms (quarter-octave buckets) during the HTAP runs below, per run "
              "(`scoot.snapshot_stats_reset()` before each): 4 TPC-B clients with 1 or 2 nonstop analytic "
              "streams on the 2 cores. `copy` has no first-write cost: its pages were copied at creation. "
              "uffd, default (`scoot.uffd_writer_resolves = on`): a write the storage layer announces is "
              "resolved by the writer itself (it saves the pre-image and lifts its own protection of the "
              "page with one ioctl on its own descriptor); `handler faults` = writes that still trapped "
              "into the worker's fault handler (a block armed between a writer's check and its write). "
              "`resolves = off`: every first write traps and waits for the worker's handler. "
              "`handler us` = the worker's fault handling (save + unprotect in every writer), excluding "
              "the wake-ups.", "",
              "| method | streams | first writes | median us | p99 us | handler faults | handler us avg | snapshots | gate ms avg / max |",
              "|---|---|---|---|---|---|---|---|---|"]
        for r in fw:
            if r["method"] == "uffd":
                n = r.get("streams", "-")
                if r.get("nice"):
                    continue
                label = ("uffd, default (kernel trap, writer resolves it)" if r.get("writer_resolves", False)
                         else "uffd, resolves = off (kernel trap, worker saves)")
                L.append(f"| {label} | {n} | {r['faults']} | {fmt(r['fault_us_p50'])} | {fmt(r['fault_us_p99'])} | {r.get('handler_faults', '')} | {fmt(r['handler_us_avg'])} | {r['snapshots_taken']} | {fmt(r['gate_ms_avg'], 3)} / {fmt(r['gate_ms_max'], 3)} |")
                L.append(f"| uffd: blocks not armed yet (writer copies) | {n} | {r['copies']} | {fmt(r['copy_us_p50'])} | {fmt(r['copy_us_p99'])} | | | | |")
            else:
                L.append(f"| {r['method']} (writer copies) | {r.get('streams', '-')} | {r['copies']} | {fmt(r['copy_us_p50'])} | {fmt(r['copy_us_p99'])} | | | {r['snapshots_taken']} | {fmt(r['gate_ms_avg'], 3)} / {fmt(r['gate_ms_max'], 3)} |")
        L.append("")
    sc = results.get("scan")
    if sc:
        L += ["## 2b. Snapshot scan vs live scan of the same table", "",
              f"Idle server, pgbench_accounts (scale 10, 1M rows, scoot), no parallel workers, median of {sc['reps']}; "
              "`image` = `scoot.olap = on` inside one REPEATABLE READ READ ONLY transaction (one snapshot); "
              "`live` = `scoot.olap = off`. ratio < 1: the snapshot scan is faster.", "",
              "| method | state | query | live ms | image ms | image / live |", "|---|---|---|---|---|---|"]
        for r in sc["rows"]:
            L.append(f"| {r['method']} | {r['state']} | {r['query']} | {fmt(r['live_ms'])} | {fmt(r['image_ms'])} | {fmt(r['ratio'])} |")
        L.append("")
    h = results.get("htap")
    if h:
        L += ["## 3. HTAP: TPC-B (scale 10, 4 clients) with nonstop analytic streams", "",
              f"{h['seconds']} s per run; analytic query: `{h['query']}` (scoot: `scoot.olap = on`). "
              "`kept` = TPS relative to the same engine without analytic streams; streams `light` = one "
              "reader running `SELECT sum(bbalance) FROM pgbench_branches` every 50 ms (snapshots keep "
              "being taken and pages preserved, almost no analytic CPU). `_nice10`: the analytic streams "
              "run with `scoot.olap_nice = 10` (their backends take nice 10 when they start reading "
              "snapshots, so the kernel prefers the OLTP backends).", "",
              "| engine | streams | TPS | kept | analytic median ms | analytic queries |", "|---|---|---|---|---|---|"]
        for r in h["rows"]:
            L.append(f"| {r['engine']} | {r['streams']} | {fmt(r['tps'], 0)} | {r['kept'] * 100:.0f}% | {fmt(r['analytic_ms'], 1)} | {r['analytic_queries']} |")
        L.append("")
    ct = results.get("control")
    if ct:
        L += ["### Control: what any CPU use on the second core costs here", "",
              "heap TPC-B (scale 10, 4 clients), alone / with a `SCHED_IDLE` busy loop (`chrt -i 0 sh -c 'while :; do :; done'`: "
              "lowest priority, touches no memory) / alone again. The busy loop takes no lock and reads no table, yet:", "",
              "| run | TPS | vs first run |", "|---|---|---|"]
        for i, r in enumerate(ct):
            L.append(f"| {'with SCHED_IDLE busy loop' if r['burner'] else 'alone'} | {fmt(r['tps'], 0)} | {r['tps'] / ct[0]['tps'] * 100:.0f}% |")
        L.append("")
    t = results.get("timeline")
    if t:
        L += ["## 4. Latency timeline across snapshots (uffd)", "",
              "pgbench TPC-B, 4 clients, per-transaction log; `near snapshot` = transactions that began "
              "within 20 ms after a snapshot was taken; `worst window` = the highest median of any "
              "100 ms window.", "",
              "| interval | TPS | snapshots | median ms | p99 ms | near snapshot median / p99 ms (n) | worst window median ms | worst window / median |",
              "|---|---|---|---|---|---|---|---|"]
        for r in t:
            L.append(f"| {r['interval_ms']} ms | {fmt(r['tps'], 0)} | {r['snapshots']} | {fmt(r['median_ms'], 3)} | {fmt(r['p99_ms'], 3)} | "
                     f"{fmt(r['near_snapshot_median_ms'], 3)} / {fmt(r['near_snapshot_p99_ms'], 3)} ({r['near_snapshot_n']}) | "
                     f"{fmt(r['worst_100ms_window_median_ms'], 3)} | {fmt(r['spike_ratio'])} |")
        L += ["", "![timeline 100 ms](olap_timeline_100ms.png)", "", "![timeline 1 s](olap_timeline_1000ms.png)", ""]
    with open(os.path.join(RES, "olap.md"), "w") as f:
        f.write("\n".join(L))


def main():
    os.makedirs(TMP, exist_ok=True)
    os.chmod(TMP, 0o777)
    git = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    results = dict(machine=f"{os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') >> 30} GiB, "
                           f"Linux {platform.release()}", git=git, quick=QUICK)
    path = os.path.join(RES, "olap.json")
    if os.path.exists(path):
        try:
            old = json.load(open(path))
            for k in ("creation", "scan", "htap", "firstwrite", "control", "timeline", "part_git"):
                if k in old and k not in results:
                    results[k] = old[k]   # parts not re-run keep their last numbers
        except Exception:
            pass
    results.setdefault("part_git", {})
    for part in PARTS:
        results["part_git"][part] = git
    if "creation" in PARTS:
        creation_part(results)
        plot_creation(results["creation"])
    if "scan" in PARTS:
        scan_part(results)
    if "htap" in PARTS:
        htap_part(results)
    if "control" in PARTS:
        control_part(results)
    if "timeline" in PARTS:
        timeline_part(results)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    write_md(results)
    log("wrote", os.path.join(RES, "olap.md"))


if __name__ == "__main__":
    sys.exit(main())
