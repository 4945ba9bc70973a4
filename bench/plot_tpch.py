#!/usr/bin/env python3
"""Plots the TPC-H benchmark from bench/results/tpch.json (written by bench/tpch_bench.py,
`make bench-tpch`): per query, heap time / scoot time for scoot on live blocks, scoot on an OLAP
snapshot (both without workers, against heap without workers) and scoot with 2 workers (against
heap with 2 workers), log scale, with the geometric means -> bench/results/tpch.png."""
import json
import math
import os
import sys

RES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
PAIRS = [("scoot", "heap", "tab:green"),
         ("scoot OLAP snapshot", "heap", "tab:blue"),
         ("scoot, 2 workers", "heap, 2 workers", "tab:orange")]


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(RES, "tpch.json")
    d = json.load(open(src))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = {(r["query"], r["variant"]): r["ms"] for r in d["results"] if r.get("ms")}
    queries = sorted({q for q, _ in ms})
    fig, ax = plt.subplots(figsize=(12, 4.8))
    w = 0.27
    for k, (v, base, color) in enumerate(PAIRS):
        xs, ys = [], []
        for i, q in enumerate(queries):
            if (q, v) in ms and (q, base) in ms:
                xs.append(i + (k - 1) * w)
                ys.append(ms[(q, base)] / ms[(q, v)])
        gm = math.exp(sum(map(math.log, ys)) / len(ys)) if ys else float("nan")
        ax.bar(xs, ys, w, color=color, label=f"{v} vs {base} (geometric mean {gm:.2f}x)")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(queries)), [f"Q{q}" for q in queries])
    ax.set_ylabel("heap time / scoot time (> 1: scoot faster)")
    ax.set_title(f"TPC-H SF{d['sf']}, best of {d['reps']}, git {d['git']}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.2, 1.0))
    fig.tight_layout()
    out = os.path.join(RES, "tpch.png")
    fig.savefig(out, dpi=110)
    print("wrote", out)


if __name__ == "__main__":
    main()
