#!/usr/bin/env python3
"""Plots the OLTP cost of checkpoint images from bench/results/durability.json (written by
scripts/durability_bench.sh): pgbench TPS per second with the intervals in which the OLAP worker was
writing an image shaded -> bench/results/durability_oltp.png."""
import json
import os
import sys

RES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(RES, "durability.json")
    d = json.load(open(src))["oltp"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p[0] for p in d["tps_timeline"]]
    ys = [p[1] for p in d["tps_timeline"]]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for i, img in enumerate(d["images"]):
        end = img["end_s"]
        ax.axvspan(end - img["ms"] / 1000, end, color="tab:orange", alpha=0.25,
                   label="image being written" if i == 0 else None)
    ax.plot(xs, ys, color="tab:blue", marker=".", label="pgbench TPS (per second)")
    ax.axhline(d["tps_otherwise"], color="tab:blue", ls=":", lw=1, label=f"mean otherwise {d['tps_otherwise']:.0f}")
    ax.axhline(d["tps_during_images"], color="tab:orange", ls=":", lw=1,
               label=f"mean while writing {d['tps_during_images']:.0f}")
    ax.set_xlabel("seconds")
    ax.set_ylabel("TPS")
    ax.set_ylim(bottom=0)
    ax.set_title("TPC-B on scoot tables while checkpoint images are written")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    out = os.path.join(RES, "durability_oltp.png")
    fig.savefig(out, dpi=110)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
