#!/usr/bin/env python3
"""Report of scripts/ch_bench.sh (CH-benCHmark with go-tpc): bench/results/ch.{md,json}.

Reads go-tpc's final summary from OUTD/run-<engine>.log: the `[Summary]` lines per TPC-C
transaction and per analytic query (count, total and average ms), `tpmC: ...` and `QphH: ...`.
Usage: ch_report.py OUTD RESULTS_DIR WAREHOUSES OLTP_THREADS AP_THREADS TIME
"""
import json
import os
import re
import subprocess
import sys

outd, resd, wh, th, ap, tm = sys.argv[1:7]
repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
git = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True,
                     text=True).stdout.strip()


def parse(path):
    text = open(path).read()
    # the summary follows the last "Finished" marker go-tpc prints (or is at the end)
    summary = text[text.rfind("Finished"):] if "Finished" in text else text
    r = {"ops": {}}
    for m in re.finditer(r"\[Summary\]\s*(\S+)\s*-\s*Takes\(s\):\s*([\d.]+),\s*Count:\s*(\d+),"
                         r"\s*TPM:\s*([\d.]+),\s*Sum\(ms\):\s*([\d.]+),\s*Avg\(ms\):\s*([\d.]+)", summary):
        r["ops"][m.group(1)] = dict(count=int(m.group(3)), tpm=float(m.group(4)),
                                    avg_ms=float(m.group(6)))
    for m in re.finditer(r"\[Summary\]\s*(Q\d+(?:_ERR)?)\s*-\s*Count:\s*(\d+),\s*Sum\(ms\):\s*([\d.]+),\s*Avg\(ms\):\s*([\d.]+)", summary):
        r["ops"][m.group(1)] = dict(count=int(m.group(2)), sum_ms=float(m.group(3)),
                                    avg_ms=float(m.group(4)))
    m = re.search(r"tpmC:\s*([\d.]+),\s*tpmTotal:\s*([\d.]+)", summary)
    if m:
        r["tpmC"], r["tpmTotal"] = float(m.group(1)), float(m.group(2))
    m = re.search(r"QphH:\s*([\d.]+)", summary)
    if m:
        r["QphH"] = float(m.group(1))
    return r


res = {"git": git, "warehouses": int(wh), "oltp_threads": int(th), "ap_threads": int(ap), "time": tm,
       "engines": {}}
for e in ("heap", "scoot"):
    p = os.path.join(outd, f"run-{e}.log")
    if os.path.exists(p):
        res["engines"][e] = parse(p)
        meta = os.path.join(outd, f"meta-{e}.env")
        if os.path.exists(meta):
            for line in open(meta):
                k, v = line.strip().split("=", 1)
                res["engines"][e][k] = int(v)
with open(os.path.join(resd, "ch.json"), "w") as f:
    json.dump(res, f, indent=1)

h, s = res["engines"].get("heap", {}), res["engines"].get("scoot", {})


def errs(e):
    return sum(v.get("count", 0) for k, v in e.get("ops", {}).items() if k.endswith("_ERR"))


def ratio(a, b):
    return f"{b / a:.2f}x" if a and b else "n/a"


lines = [
    "# CH-benCHmark (go-tpc `ch`), heap vs scoot (`make bench-ch`)",
    "",
    f"git {git}; go-tpc v1.0.9 `ch` workload (TPC-C + the 22 CH analytic queries, PostgreSQL driver), "
    f"{wh} warehouse(s), {th} TPC-C threads + {ap} analytic thread(s), {tm} per engine, one cluster "
    "(engines one after the other); scoot database: `default_table_access_method = scoot`, "
    "`scoot.olap = on` (analytic queries read OLAP snapshot images). Higher is better; "
    "`scoot/heap` > 1: scoot better.",
    "",
    "| metric | heap | scoot | scoot/heap |",
    "|---|---:|---:|---:|",
    f"| tpmC (NewOrder per minute) | {h.get('tpmC', 'n/a')} | {s.get('tpmC', 'n/a')} | {ratio(h.get('tpmC'), s.get('tpmC'))} |",
    f"| tpmTotal | {h.get('tpmTotal', 'n/a')} | {s.get('tpmTotal', 'n/a')} | {ratio(h.get('tpmTotal'), s.get('tpmTotal'))} |",
    f"| QphH (analytic queries per hour) | {h.get('QphH', 'n/a')} | {s.get('QphH', 'n/a')} | {ratio(h.get('QphH'), s.get('QphH'))} |",
    f"| failed transactions / queries (go-tpc `_ERR`; NEW_ORDER's 1% are TPC-C's intended rollbacks, "
    f"a query cut off at the end of the run counts too) | {errs(h)} | {errs(s)} | |",
    "",
    "Per analytic query: runs and average ms (lower is better).",
    "",
    "| query | heap runs | heap avg ms | scoot runs | scoot avg ms | heap/scoot |",
    "|---|---:|---:|---:|---:|---:|",
]
qs = sorted({k for e in (h, s) for k in e.get("ops", {}) if re.fullmatch(r"Q\d+", k)},
            key=lambda q: int(q[1:]))
for q in qs:
    a, b = h.get("ops", {}).get(q, {}), s.get("ops", {}).get(q, {})
    r = f"{a['avg_ms'] / b['avg_ms']:.2f}x" if a.get("avg_ms") and b.get("avg_ms") else "n/a"
    lines.append(f"| {q} | {a.get('count', '')} | {a.get('avg_ms', '')} | {b.get('count', '')} | "
                 f"{b.get('avg_ms', '')} | {r} |")
open(os.path.join(resd, "ch.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
