#!/usr/bin/env python3
"""Report of scripts/ch_bench.sh (CH-benCHmark with go-tpc): bench/results/ch.{md,json}, or
$CH_RESULT.{md,json} (`make bench-tpcc`: tpcc.{md,json}, TPC-C alone, no analytic thread).

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
for e in ("heap", "scoot", "scoot_nice"):
    p = os.path.join(outd, f"run-{e}.log")
    if os.path.exists(p):
        res["engines"][e] = parse(p)
        meta = os.path.join(outd, f"meta-{e}.env")
        if os.path.exists(meta):
            for line in open(meta):
                k, v = line.strip().split("=", 1)
                res["engines"][e][k] = int(v)
nice = os.environ.get("CH_NICE", "10")
if "scoot_nice" in res["engines"]:
    res["engines"]["scoot_nice"]["olap_nice"] = int(nice)
name = os.environ.get("CH_RESULT", "ch")
alone = int(ap) == 0
with open(os.path.join(resd, name + ".json"), "w") as f:
    json.dump(res, f, indent=1)

h = res["engines"].get("heap", {})
others = [e for e in ("scoot", "scoot_nice") if e in res["engines"]]
label = {"scoot": "scoot", "scoot_nice": f"scoot, olap_nice {nice}"}


def errs(e):
    return sum(v.get("count", 0) for k, v in e.get("ops", {}).items() if k.endswith("_ERR"))


def ratio(a, b):
    return f"{b / a:.2f}x" if a and b else "n/a"


def row(name, key):
    cells = [str(h.get(key, "n/a"))]
    for e in others:
        v = res["engines"][e].get(key)
        cells += [str(v if v is not None else "n/a"), ratio(h.get(key), v)]
    return f"| {name} | " + " | ".join(cells) + " |"


head = "| metric | heap | " + " | ".join(f"{label[e]} | {label[e]}/heap" for e in others) + " |"
lines = [
    "# TPC-C alone (go-tpc `ch` with no analytic thread), heap vs scoot (`make bench-tpcc`)"
    if alone else "# CH-benCHmark (go-tpc `ch`), heap vs scoot (`make bench-ch`)",
    "",
    f"git {git}; go-tpc v1.0.9 `ch` workload (TPC-C + the 22 CH analytic queries, PostgreSQL driver), "
    f"{wh} warehouse(s), {th} TPC-C threads + {ap} analytic thread(s), {tm} per engine, one cluster "
    "(engines one after the other); scoot databases: `default_table_access_method = scoot`, "
    "`scoot.olap = on` (analytic queries read OLAP snapshot images)"
    + (f"; the second scoot run also has `scoot.olap_nice = {nice}` (backends reading OLAP snapshots "
       f"run at nice {nice}, so the kernel prefers the OLTP backends when the CPUs are short)"
       if "scoot_nice" in others else "")
    + ". Higher is better; `x/heap` > 1: x better.",
    "",
    head,
    "|---|---:|" + "---:|---:|" * len(others),
    row("tpmC (NewOrder per minute)", "tpmC"),
    row("tpmTotal", "tpmTotal"),
    *([] if alone else [row("QphH (analytic queries per hour)", "QphH")]),
    "| failed transactions / queries (go-tpc `_ERR`; NEW_ORDER's 1% are TPC-C's intended rollbacks, "
    "a query cut off at the end of the run counts too) | " + str(errs(h)) + " | "
    + " | ".join(f"{errs(res['engines'][e])} | " for e in others) + " |",
    "",
    ("Per transaction type" if alone else "Per analytic query")
    + ": runs and average ms (lower is better); heap/x > 1: x faster.",
    "",
    f"| {'transaction' if alone else 'query'} | heap runs | heap avg ms | " + " | ".join(
        f"{label[e]} runs | {label[e]} avg ms | heap/{label[e].split(',')[0]}" for e in others) + " |",
    "|---|---:|---:|" + "---:|---:|---:|" * len(others),
]
if alone:
    qs = sorted({k for e in res["engines"].values() for k in e.get("ops", {})
                 if re.fullmatch(r"[A-Z_]+", k) and not k.endswith("_ERR")})
else:
    qs = sorted({k for e in res["engines"].values() for k in e.get("ops", {})
                 if re.fullmatch(r"Q\d+", k)}, key=lambda q: int(q[1:]))
for q in qs:
    a = h.get("ops", {}).get(q, {})
    cells = [str(a.get("count", "")), str(a.get("avg_ms", ""))]
    for e in others:
        b = res["engines"][e].get("ops", {}).get(q, {})
        r = f"{a['avg_ms'] / b['avg_ms']:.2f}x" if a.get("avg_ms") and b.get("avg_ms") else "n/a"
        cells += [str(b.get("count", "")), str(b.get("avg_ms", "")), r]
    lines.append(f"| {q} | " + " | ".join(cells) + " |")
open(os.path.join(resd, name + ".md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
