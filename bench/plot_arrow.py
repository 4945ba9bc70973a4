#!/usr/bin/env python3
"""Plots the Arrow export benchmark from bench/results/arrow.json (written by bench/arrow_bench.py,
`make bench-arrow`): seconds until a pyarrow.Table of TPC-H lineitem is in the client, per method
and table (log scale), all 16 columns -> bench/results/arrow.png."""
import json
import os
import sys

RES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(RES, "arrow.json")
    d = json.load(open(src))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in d["results"] if r["arrow"] and "2 int columns" not in r["method"]]
    rows.sort(key=lambda r: r["seconds"])
    labels = [f"{r['method']} on {r['table']}" for r in rows]
    secs = [r["seconds"] for r in rows]
    colors = ["tab:green" if r["method"].startswith("pg_scoot") else "tab:gray" for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.2))
    ax.barh(range(len(rows)), secs, color=colors)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    for i, s in enumerate(secs):
        ax.text(s * 1.05, i, f"{s:.2f} s  ({r_per_s(rows[i])})", va="center", fontsize=8)
    ax.set_xlabel("seconds until the pyarrow.Table is in the client (log scale; lower is better)")
    ax.set_xlim(min(secs) / 1.5, max(secs) * 4)
    ax.set_title(f"TPC-H lineitem SF{d['sf']}, 16 columns, client and server on one 2-vCPU machine "
                 f"(git {d['git']})", fontsize=9)
    fig.tight_layout()
    out = os.path.join(RES, "arrow.png")
    fig.savefig(out, dpi=110)
    print("wrote", out)


def r_per_s(r):
    return f"{r['rows_per_s'] / 1e6:.1f}M rows/s"


if __name__ == "__main__":
    main()
