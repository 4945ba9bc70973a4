#!/usr/bin/env python3
"""Analytic scans and aggregates, heap vs scoot, side by side in one cluster (`make bench-analytic`).

A 3M-row TPC-H lineitem-like table (bigint, int, 4 x numeric(15,2), 2 x char(1), date; the same
data in a heap and a scoot table, VACUUM ANALYZEd), warm, no parallel workers. Each query runs
on heap, on scoot with plain scans (`scoot.custom_scan = off`), on scoot with ScootScan under
PostgreSQL's Agg (`scoot.agg_pushdown = off`), on scoot with aggregate pushdown (ScootAgg), and
on an OLAP snapshot of scoot with ScootAgg (`scoot.olap = on`); rounds interleave the five,
median of REPS. Results: bench/results/analytic.{md,json}. Knobs: ANALYTIC_ROWS (3000000),
ANALYTIC_REPS (5).

The TPC-H benchmark proper (22 queries, tpchgen-cli data) is bench/tpch_bench.py; this one
isolates scans and single-table aggregates. The last two queries select a narrow range of the
load-ordered key, where zone maps let scoot skip the other blocks (neither table has an index)."""
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from olap_bench import Cluster, REPO, log  # noqa: E402

ROWS = int(os.environ.get("ANALYTIC_ROWS", "3000000"))
REPS = int(os.environ.get("ANALYTIC_REPS", "5"))
RES = os.path.join(REPO, "bench", "results")

QUERIES = [
    ("count(*)", "SELECT count(*) FROM {t}"),
    ("sum(int column)", "SELECT sum(l_partkey) FROM {t}"),
    ("TPC-H Q6", "SELECT sum(l_extendedprice * l_discount) FROM {t} WHERE l_shipdate >= date '1994-01-01' "
                 "AND l_shipdate < date '1995-01-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"),
    ("TPC-H Q1", "SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice), "
                 "sum(l_extendedprice * (1 - l_discount)), sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)), "
                 "avg(l_quantity), avg(l_extendedprice), avg(l_discount), count(*) FROM {t} "
                 "WHERE l_shipdate <= date '1998-12-01' - interval '90 day' GROUP BY 1, 2 ORDER BY 1, 2"),
    # block skipping by zone maps: a range over the load-ordered key (no index on either table)
    ("key range 1% (zone maps), agg", "SELECT count(*), sum(l_extendedprice) FROM {t} "
                                      "WHERE l_orderkey BETWEEN {k1} AND {k1} + {r1}"),
    ("key range 0.1% (zone maps), rows", "SELECT l_orderkey, l_quantity FROM {t} "
                                         "WHERE l_orderkey BETWEEN {k2} AND {k2} + {r2} ORDER BY 1"),
]
# (label, table, settings)
VARIANTS = [
    ("heap", "li_h", ["SET scoot.olap = off"]),
    ("scoot plain scan", "li_s", ["SET scoot.olap = off", "SET scoot.custom_scan = off"]),
    ("scoot ScootScan", "li_s", ["SET scoot.olap = off", "SET scoot.custom_scan = on",
                                 "SET scoot.agg_pushdown = off"]),
    ("scoot ScootAgg", "li_s", ["SET scoot.olap = off", "SET scoot.custom_scan = on",
                                "SET scoot.agg_pushdown = on"]),
    ("scoot ScootAgg, OLAP snapshot", "li_s", ["SET scoot.olap = on", "SET scoot.custom_scan = on",
                                               "SET scoot.agg_pushdown = on"]),
]


def main():
    git = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    cl = Cluster("analytic", 55690, 2048, ["max_parallel_workers_per_gather = 0", "jit = off"])
    try:
        cl.sql("CREATE EXTENSION pg_scoot")
        log("loading", ROWS, "rows")
        cl.sql(f"""CREATE TABLE li_h (l_orderkey int8, l_partkey int4, l_quantity numeric(15,2),
                   l_extendedprice numeric(15,2), l_discount numeric(15,2), l_tax numeric(15,2),
                   l_returnflag char(1), l_linestatus char(1), l_shipdate date);
                   INSERT INTO li_h SELECT i, (i * 7) % 200000, (i % 50) + 1, ((i % 50) + 1) * 1000.50,
                     (i % 11) / 100.0, (i % 9) / 100.0, (array['A','N','R'])[i % 3 + 1],
                     (array['F','O'])[i % 2 + 1], date '1992-01-01' + (i % 2500)
                   FROM generate_series(1, {ROWS}) i;
                   CREATE TABLE li_s (LIKE li_h) USING scoot;
                   INSERT INTO li_s SELECT * FROM li_h;""")
        cl.sql("VACUUM ANALYZE li_h")
        cl.sql("VACUUM ANALYZE li_s")
        times = {(q, v): [] for q, _ in QUERIES for v, _, _ in VARIANTS}
        answers = {}
        with cl.conn() as c:
            for r in range(REPS + 1):          # round 0 warms up
                for qn, q in QUERIES:
                    for vn, t, sets in VARIANTS:
                        c.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                        for s in sets:
                            c.execute(s.replace("SET ", "SET LOCAL ", 1))
                        t0 = time.perf_counter()
                        rows = c.execute(q.format(t=t, k1=ROWS // 2, r1=ROWS // 100,
                                                          k2=ROWS // 3, r2=ROWS // 1000)).fetchall()
                        ms = (time.perf_counter() - t0) * 1000
                        c.execute("COMMIT")
                        answers.setdefault(qn, rows)
                        if rows != answers[qn]:
                            raise RuntimeError(f"{qn} on {vn}: {rows} != heap's {answers[qn]}")
                        if r > 0:
                            times[(qn, vn)].append(ms)
                log("round", r, "done")
        res = dict(git=git, rows=ROWS, reps=REPS,
                   results=[dict(query=qn, variant=vn, median_ms=statistics.median(times[(qn, vn)]))
                            for qn, _ in QUERIES for vn, _, _ in VARIANTS])
    finally:
        cl.stop()
    with open(os.path.join(RES, "analytic.json"), "w") as f:
        json.dump(res, f, indent=1)
    med = {(r["query"], r["variant"]): r["median_ms"] for r in res["results"]}
    L = ["# Analytic scans, heap vs scoot (`make bench-analytic`)", "",
         f"git {git}; {ROWS:,} rows lineitem-like (bigint, int, 4 x numeric(15,2), 2 x char(1), date), warm, "
         f"no parallel workers, jit off; median of {REPS} interleaved rounds, each query's answer checked "
         "equal to heap's. `x heap` = heap time / scoot time (> 1: scoot faster).", "",
         "| query | heap ms | " + " | ".join(f"{v} ms (x heap)" for v, _, _ in VARIANTS[1:]) + " |",
         "|---|---:|" + "---:|" * (len(VARIANTS) - 1)]
    for qn, _ in QUERIES:
        h = med[(qn, "heap")]
        L.append(f"| {qn} | {h:.1f} | " + " | ".join(
            f"{med[(qn, v)]:.1f} ({h / med[(qn, v)]:.2f}x)" for v, _, _ in VARIANTS[1:]) + " |")
    with open(os.path.join(RES, "analytic.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    print("\n".join(L))


if __name__ == "__main__":
    main()
