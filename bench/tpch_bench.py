#!/usr/bin/env python3
"""TPC-H, heap vs scoot, side by side in one cluster (`make bench-tpch`).

Data from `tpchgen-cli` (crates.io; installed by scripts/tpch_bench.sh) at scale factor TPCH_SF
(default 1), loaded with COPY into schema `h` (heap) and schema `s` (scoot), primary keys and a
lineitem (l_partkey, l_suppkey) index on both, VACUUM ANALYZE. The 22 queries (bench/tpch/,
validation parameters) run on:
  heap, scoot (ScootScan + ScootAgg), scoot reading an OLAP snapshot (scoot.olap = on),
  each with max_parallel_workers_per_gather 0, and heap and scoot again with 2 workers.
Each query runs TPCH_REPS times per variant (default 3; the best counts) after a warm-up pass, variants
interleaved per query; every variant's answer is checked equal to heap's. Statements over
TPCH_TIMEOUT seconds (default 600) are cancelled and reported. Results:
bench/results/tpch.{md,json}: per-query times, heap/scoot ratios, geometric means; tpch.png: the
ratios per query (bench/plot_tpch.py).

Then the first statement of a new connection (TPCH_FIRST, default 1,6; empty: skip): for each of
those queries, TPCH_FIRST_REPS (default 5) times per variant (heap, scoot, scoot OLAP snapshot, no
workers), a new connection runs the query twice; the medians of the first and the second run go to
bench/results/tpch_first.{md,json}. A new backend maps the shared memory it reads page by page
(heap's shared buffers, scoot's arena): what a short-lived client (a script, `psql -c`, a BI
tool's query) pays every time. TPCH_MAIN=0 runs only this part (after one warm-up run per query
and variant).
"""
import glob
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from olap_bench import Cluster, REPO, log  # noqa: E402

SF = os.environ.get("TPCH_SF", "1")
REPS = int(os.environ.get("TPCH_REPS", "3"))
TIMEOUT = int(os.environ.get("TPCH_TIMEOUT", "600"))
ONLY = [int(x) for x in os.environ.get("TPCH_QUERIES", "").split(",") if x]
FIRST = [int(x) for x in os.environ.get("TPCH_FIRST", "1,6").split(",") if x]
FIRST_REPS = int(os.environ.get("TPCH_FIRST_REPS", "5"))
MAIN = os.environ.get("TPCH_MAIN", "1") != "0"
RES = os.path.join(REPO, "bench", "results")
TDIR = os.path.join(REPO, "bench", "tpch")
TABLES = ["region", "nation", "part", "supplier", "partsupp", "customer", "orders", "lineitem"]
# (label, schema, workers, settings)
VARIANTS = [
    ("heap", "h", 0, []),
    ("scoot", "s", 0, []),
    ("scoot OLAP snapshot", "s", 0, ["SET scoot.olap = on"]),
    ("heap, 2 workers", "h", 2, []),
    ("scoot, 2 workers", "s", 2, []),
]


def gen(dir_):
    # every table (the Arrow benchmark generates lineitem alone into the same directory)
    if all(os.path.exists(os.path.join(dir_, f"{t}.csv")) for t in TABLES):
        return
    os.makedirs(dir_, exist_ok=True)
    exe = os.environ.get("TPCHGEN", os.path.expanduser("~/.cargo/bin/tpchgen-cli"))
    t0 = time.time()
    subprocess.run([exe, "csv", "-s", SF, f"--output-dir={dir_}"], check=True)
    for f in glob.glob(os.path.join(dir_, "*.csv")):
        os.chmod(f, 0o644)
    os.chmod(dir_, 0o755)
    log("generated SF", SF, "in", round(time.time() - t0, 1), "s")


def main():
    git = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    data = f"/tmp/tpch_sf{SF}"
    gen(data)
    queries = {int(os.path.basename(p)[1:3]): open(p).read()
               for p in sorted(glob.glob(os.path.join(TDIR, "q*.sql")))}
    first_queries = {k: v for k, v in queries.items() if k in FIRST}
    if ONLY:
        queries = {k: v for k, v in queries.items() if k in ONLY}
    arena_mb = max(2048, int(float(SF) * 6144))
    cl = Cluster("tpch", 55691, arena_mb, ["max_parallel_workers_per_gather = 0", "jit = off",
                                            f"shared_buffers = '{max(1, int(float(SF) * 3))}GB'",
                                            "max_wal_size = '8GB'", "checkpoint_timeout = '30min'",
                                            "work_mem = '64MB'", "maintenance_work_mem = '512MB'"])
    load = {}
    try:
        cl.sql("CREATE EXTENSION pg_scoot")
        schema = open(os.path.join(TDIR, "schema.sql")).read()
        indexes = open(os.path.join(TDIR, "indexes.sql")).read()
        with cl.conn() as c:
            for sch, am in (("h", "heap"), ("s", "scoot")):
                c.execute(f"CREATE SCHEMA {sch}")
                c.execute(f"SET search_path = {sch}")
                c.execute(f"SET default_table_access_method = {am}")
                c.execute(schema)
                t0 = time.time()
                for t in TABLES:
                    c.execute(f"COPY {t} FROM '{data}/{t}.csv' WITH (FORMAT csv, HEADER true)")
                t1 = time.time()
                c.execute(indexes)
                t2 = time.time()
                c.execute("VACUUM ANALYZE")
                load[am] = dict(copy_s=round(t1 - t0, 1), index_s=round(t2 - t1, 1))
                log("loaded", am, load[am])
        if MAIN:
            res = dict(git=git, sf=SF, reps=REPS, timeout_s=TIMEOUT, load=load,
                       results=run_main(cl, queries))
            with open(os.path.join(RES, "tpch.json"), "w") as f:
                json.dump(res, f, indent=1)
            report(res)
        if first_queries:
            first = dict(git=git, sf=SF, reps=FIRST_REPS, warmed=MAIN,
                         results=run_first(cl, first_queries))
            with open(os.path.join(RES, "tpch_first.json"), "w") as f:
                json.dump(first, f, indent=1)
            report_first(first)
    finally:
        cl.stop()


FIRST_VARIANTS = [("heap", "h", []), ("scoot", "s", []),
                  ("scoot OLAP snapshot", "s", ["SET scoot.olap = on"])]


def run_first(cl, queries):
    """The first and second run of each query on new connections (median of FIRST_REPS each)."""
    def session(sch, sets):
        c = cl.conn()
        c.execute(f"SET statement_timeout = '{TIMEOUT}s'")
        c.execute(f"SET search_path = {sch}")
        c.execute("SET max_parallel_workers_per_gather = 0")
        for s in sets:
            c.execute(s)
        return c
    if not MAIN:    # the data into heap's shared buffers, scoot's arena pages are resident anyway
        for q in queries.values():
            for _, sch, sets in FIRST_VARIANTS:
                with session(sch, sets) as c:
                    c.execute(q).fetchall()
    out = []
    for qn, q in queries.items():
        runs = {vn: ([], []) for vn, *_ in FIRST_VARIANTS}
        for _ in range(FIRST_REPS):
            for vn, sch, sets in FIRST_VARIANTS:   # interleaved
                with session(sch, sets) as c:
                    for k in (0, 1):
                        t0 = time.perf_counter()
                        c.execute(q).fetchall()
                        runs[vn][k].append((time.perf_counter() - t0) * 1000)
        for vn, (a, b) in runs.items():
            out.append(dict(query=qn, variant=vn, first_ms=sorted(a)[len(a) // 2],
                            second_ms=sorted(b)[len(b) // 2], first_all=a, second_all=b))
        log("first statement Q", qn, {r["variant"]: (round(r["first_ms"]), round(r["second_ms"]))
                                       for r in out if r["query"] == qn})
    return out


def report_first(res):
    t = {(r["query"], r["variant"]): r for r in res["results"]}
    qs = sorted({r["query"] for r in res["results"]})
    L = [f"# TPC-H SF{res['sf']}: the first statement of a new connection (`make bench-tpch`)", "",
         f"git {res['git']}; the cluster and data of the TPC-H benchmark (shared buffers hold heap's tables), "
         f"{'after its main rounds (tpch.md)' if res['warmed'] else 'after one warm-up run per query and variant'}; "
         f"per query and variant, {res['reps']} new connections (variants interleaved) each run the "
         "query twice, no parallel workers; medians in ms. `x heap` = heap / scoot.", "",
         "| query | heap first | heap second | scoot first (x heap) | scoot second (x heap) | "
         "scoot OLAP snapshot first (x heap) | scoot OLAP snapshot second (x heap) |",
         "|---|---:|---:|---:|---:|---:|---:|"]
    for q in qs:
        h = t[(q, "heap")]
        cells = [f"Q{q}", f"{h['first_ms']:.0f}", f"{h['second_ms']:.0f}"]
        for vn in ("scoot", "scoot OLAP snapshot"):
            r = t[(q, vn)]
            cells.append(f"{r['first_ms']:.0f} ({h['first_ms'] / r['first_ms']:.2f}x)")
            cells.append(f"{r['second_ms']:.0f} ({h['second_ms'] / r['second_ms']:.2f}x)")
        L.append("| " + " | ".join(cells) + " |")
    with open(os.path.join(RES, "tpch_first.md"), "w") as fh:
        fh.write("\n".join(L) + "\n")
    print("\n".join(L))


def run_main(cl, queries):
    """The main rounds: every query on every variant, REPS times after a warm-up round."""
    times = {}
    answers = {}
    plans = {}
    with cl.conn() as c:
        c.execute(f"SET statement_timeout = '{TIMEOUT}s'")
        for r in range(REPS + 1):      # round 0 warms up (heap and scoot, no workers)
            for qn, q in queries.items():
                for vn, sch, workers, sets in VARIANTS:
                    if r == 0 and workers > 0:
                        continue
                    if r > 0 and times.get((qn, vn), 0) is None:
                        continue       # timed out before
                    c.execute("RESET ALL")
                    c.execute(f"SET statement_timeout = '{TIMEOUT}s'")
                    c.execute(f"SET search_path = {sch}")
                    c.execute(f"SET max_parallel_workers_per_gather = {workers}")
                    for s in sets:
                        c.execute(s)
                    t0 = time.perf_counter()
                    try:
                        rows = c.execute(q).fetchall()
                    except Exception as e:  # noqa: BLE001 (a cancelled statement is reported)
                        if "statement timeout" not in str(e):
                            raise
                        times[(qn, vn)] = None
                        log("Q", qn, vn, "timed out")
                        continue
                    ms = (time.perf_counter() - t0) * 1000
                    if r == 0 and vn == "heap":
                        answers[qn] = sorted(map(repr, rows))
                    elif qn in answers and sorted(map(repr, rows)) != answers[qn]:
                        raise RuntimeError(f"Q{qn} on {vn}: answer differs from heap's")
                    if r > 0:
                        prev = times.get((qn, vn))
                        times[(qn, vn)] = ms if prev is None else min(prev, ms)
                    if r == 1 and vn == "scoot":
                        plan = "\n".join(x[0] for x in c.execute("EXPLAIN " + q).fetchall())
                        plans[qn] = dict(scootagg="ScootAgg" in plan, scootscan="ScootScan" in plan)
                log("round", r, "Q", qn, {vn: round(times.get((qn, vn)) or -1) for vn, *_ in VARIANTS})
    return [dict(query=qn, variant=vn, ms=times.get((qn, vn)), **plans.get(qn, {}))
            for qn in queries for vn, *_ in VARIANTS]


def report(res):
    t = {(r["query"], r["variant"]): r["ms"] for r in res["results"]}
    qs = sorted({r["query"] for r in res["results"]})
    pushed = {r["query"]: r.get("scootagg") for r in res["results"]}

    def geo(a, b):
        xs = [t[(q, a)] / t[(q, b)] for q in qs if t.get((q, a)) and t.get((q, b))]
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
    L = [f"# TPC-H SF{res['sf']}, heap vs scoot (`make bench-tpch`)", "",
         f"git {res['git']}; tpchgen-cli data, COPY-loaded into a heap and a scoot schema of one cluster "
         f"(primary keys + lineitem (l_partkey, l_suppkey) on both), VACUUM ANALYZE, warm, jit off; "
         f"best of {res['reps']} after a warm-up pass; every answer checked equal to heap's. "
         "`x heap` = heap time / scoot time (> 1: scoot faster). `agg`: the plan pushes an aggregate "
         "into ScootAgg. Load: " + ", ".join(f"{am} COPY {v['copy_s']} s + indexes {v['index_s']} s"
                                             for am, v in res["load"].items()), "",
         "| query | agg | heap ms | scoot ms (x heap) | scoot OLAP snapshot ms (x heap) | heap 2 workers ms | "
         "scoot 2 workers ms (x heap 2 workers) |",
         "|---|:-:|---:|---:|---:|---:|---:|"]

    def f(v):
        return "timeout" if v is None else f"{v:.0f}"

    def x(a, b):
        return "" if not (t.get(a) and t.get(b)) else f" ({t[b] / t[a]:.2f}x)"
    for q in qs:
        L.append(f"| Q{q} | {'yes' if pushed.get(q) else ''} | {f(t.get((q, 'heap')))} | "
                 f"{f(t.get((q, 'scoot')))}{x((q, 'scoot'), (q, 'heap'))} | "
                 f"{f(t.get((q, 'scoot OLAP snapshot')))}{x((q, 'scoot OLAP snapshot'), (q, 'heap'))} | "
                 f"{f(t.get((q, 'heap, 2 workers')))} | "
                 f"{f(t.get((q, 'scoot, 2 workers')))}{x((q, 'scoot, 2 workers'), (q, 'heap, 2 workers'))} |")
    L += ["", f"Geometric mean of heap / scoot: no workers **{geo('heap', 'scoot'):.2f}x**, "
              f"OLAP snapshot {geo('heap', 'scoot OLAP snapshot'):.2f}x, "
              f"2 workers {geo('heap, 2 workers', 'scoot, 2 workers'):.2f}x."]
    with open(os.path.join(RES, "tpch.md"), "w") as fh:
        fh.write("\n".join(L) + "\n")
    print("\n".join(L))
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "plot_tpch.py")], check=False)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        report(json.load(open(os.path.join(RES, "tpch.json"))))
        if os.path.exists(os.path.join(RES, "tpch_first.json")):
            report_first(json.load(open(os.path.join(RES, "tpch_first.json"))))
    else:
        main()
