#!/usr/bin/env python3
"""Turn the raw output of scripts/bench.sh into bench/results/latest.{md,json}.

Input directory (--tmp) layout, written by scripts/bench.sh:
  runs.tsv                   one line per pgbench run: mode clients engine rc name
  <name>.out                 pgbench stdout+stderr
  <name>.log.*               pgbench --log per-transaction logs (one file per thread)
  storage-<when>-<engine>.txt  "table_bytes index_bytes total_bytes" of the pgbench tables
  arena-<when>.txt           SELECT row_to_json(a) FROM scoot.arena a  (or the error text)
  meta.env                   KEY=VALUE lines (settings, versions)
Only the Python standard library is used.
"""
import argparse
import datetime
import glob
import json
import math
import os
import platform
import re
import subprocess
import sys

MODE_LABEL = {"tpcb": "TPC-B (sort of)", "select": "select-only (-S)"}


def parse_pgbench_out(text):
    r = {}
    pats = {
        "tps": r"^tps = ([0-9.]+) \(without initial connection time\)",
        "latency_avg_ms": r"^latency average = ([0-9.]+) ms",
        "latency_stddev_ms": r"^latency stddev = ([0-9.]+) ms",
        "transactions": r"^number of transactions actually processed: ([0-9]+)",
        "failed_transactions": r"^number of failed transactions: ([0-9]+)",
        "initial_connection_ms": r"^initial connection time = ([0-9.]+) ms",
    }
    for k, p in pats.items():
        m = re.search(p, text, re.M)
        if m:
            v = m.group(1)
            r[k] = int(v) if k in ("transactions", "failed_transactions") else float(v)
    return r


def read_latencies_us(prefix):
    """pgbench --log lines: client_id transaction_no time script_no time_epoch time_us [lag].
    `time` is the transaction's elapsed time in microseconds (or 'failed'/'skipped')."""
    lats = []
    for f in sorted(glob.glob(glob.escape(prefix) + ".*")):
        with open(f) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 3 and parts[2].isdigit():
                    lats.append(int(parts[2]))
    return lats


def percentile(sorted_vals, q):
    """Nearest-rank percentile (q in 0..100) of an already sorted list."""
    if not sorted_vals:
        return None
    k = max(1, math.ceil(q / 100.0 * len(sorted_vals)))
    return sorted_vals[k - 1]


def read_storage(tmp, when, engine):
    p = os.path.join(tmp, f"storage-{when}-{engine}.txt")
    try:
        t, i, tot = open(p).read().split()[:3]
        return {"table_bytes": int(t), "index_bytes": int(i), "total_bytes": int(tot)}
    except Exception:
        return None


def read_tables(tmp, when):
    """tables-<when>.tsv: name, heap pg_table_size, scoot blocks*block_size, scoot row bytes,
    scoot pg_table_size (empty fields when not measured)."""
    p = os.path.join(tmp, f"tables-{when}.tsv")
    out = []
    if not os.path.exists(p):
        return out
    for line in open(p):
        f = line.rstrip("\n").split("\t")
        if len(f) < 5:
            continue
        num = lambda x: int(x) if x.strip().isdigit() else None
        out.append({"table": f[0], "heap_table_bytes": num(f[1]), "scoot_block_bytes": num(f[2]),
                    "scoot_row_bytes": num(f[3]), "scoot_relation_size": num(f[4])})
    return out


def read_arena(tmp, when):
    p = os.path.join(tmp, f"arena-{when}.txt")
    if not os.path.exists(p):
        return None, "not measured"
    rows, err = [], []
    for line in open(p):
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            err.append(line)
    if err and not rows:
        return None, " ".join(err)[:300]
    return rows, None


def arena_bytes(rows):
    """Best-effort 'bytes in use' from the scoot.arena view, whatever its exact columns are:
    prefer a numeric column named like used/allocated bytes; sum it over the view's rows."""
    if not rows:
        return None, None
    keys = [k for k, v in rows[0].items() if isinstance(v, (int, float))]
    def score(k):
        kl = k.lower()
        s = 0
        if "byte" in kl: s += 2
        if "used" in kl or "alloc" in kl or "in_use" in kl: s += 3
        if "total" in kl or "size" in kl or "capacity" in kl or "free" in kl: s -= 1
        if "mb" in kl or "kb" in kl: s -= 2
        return s
    cands = sorted((k for k in keys if score(k) > 0), key=score, reverse=True)
    if not cands:
        return None, None
    k = cands[0]
    return sum(r.get(k) or 0 for r in rows), k


def mb(b):
    return None if b is None else b / (1024.0 * 1024.0)


def fmt(v, nd=2):
    return "n/a" if v is None else f"{v:,.{nd}f}"


def machine_info(meta):
    info = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "machine": platform.machine(),
    }
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["mem_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    try:
        info["os"] = [l.split("=", 1)[1].strip().strip('"') for l in open("/etc/os-release")
                      if l.startswith("PRETTY_NAME=")][0]
    except Exception:
        pass
    info.update(meta)
    return info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--out", required=True, help="output path without extension")
    a = ap.parse_args()

    meta = {}
    mp = os.path.join(a.tmp, "meta.env")
    if os.path.exists(mp):
        for line in open(mp):
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                meta[k] = v

    runs = []
    for line in open(os.path.join(a.tmp, "runs.tsv")):
        f = line.split()
        if len(f) < 5:
            continue
        mode, clients, engine, rc, name = f[0], int(f[1]), f[2], int(f[3]), f[4]
        out_text = ""
        try:
            out_text = open(os.path.join(a.tmp, name + ".out"), errors="replace").read()
        except OSError:
            pass
        r = {"mode": mode, "clients": clients, "engine": engine, "exit_code": rc}
        r.update(parse_pgbench_out(out_text))
        lats = sorted(read_latencies_us(os.path.join(a.tmp, name + ".log")))
        if lats:
            r["logged_transactions"] = len(lats)
            r["latency_p50_ms"] = percentile(lats, 50) / 1000.0
            r["latency_p99_ms"] = percentile(lats, 99) / 1000.0
            r["latency_max_ms"] = lats[-1] / 1000.0
            r["latency_log_avg_ms"] = sum(lats) / len(lats) / 1000.0
        r["ok"] = rc == 0 and "tps" in r
        if not r["ok"]:
            r["error"] = "\n".join(l for l in out_text.splitlines()
                                   if "error" in l.lower() or "fatal" in l.lower())[:1000]
        runs.append(r)

    storage = {}
    for when in ("after_init", "after_runs"):
        s = {e: read_storage(a.tmp, when, e) for e in ("heap", "scoot")}
        rows, err = read_arena(a.tmp, when)
        ab, col = arena_bytes(rows)
        s["scoot_arena_rows"] = rows
        s["scoot_arena_error"] = err
        s["scoot_arena_used_bytes"] = ab
        s["scoot_arena_used_column"] = col
        s["tables"] = read_tables(a.tmp, when)
        storage[when] = s

    info = machine_info(meta)
    result = {"machine": info, "runs": runs, "storage": storage}
    with open(a.out + ".json", "w") as fh:
        json.dump(result, fh, indent=2, sort_keys=False)
        fh.write("\n")

    # ---------------------------------------------------------------- markdown
    by = {(r["mode"], r["clients"], r["engine"]): r for r in runs}
    modes = []
    for r in runs:
        if r["mode"] not in modes:
            modes.append(r["mode"])
    L = []
    L.append("# pg_scoot vs heap: pgbench")
    L.append("")
    L.append(f"- date: {info['date_utc']}")
    L.append(f"- machine: {info.get('nproc')} CPUs ({info.get('cpu', '?')}), {info.get('mem_gib', '?')} GiB RAM, "
             f"kernel {info.get('kernel')}, {info.get('os', '')}")
    for k in ("postgres", "pg_scoot", "git", "scale", "seconds", "threads", "query_mode", "settings"):
        if k in meta:
            L.append(f"- {k}: {meta[k]}")
    L.append("- latency avg: pgbench's `latency average`; p99: nearest-rank 99th percentile of the "
             "per-transaction `--log` times")
    L.append("")
    L.append("| mode | clients | heap TPS | scoot TPS | scoot/heap | heap lat avg / p99 (ms) | scoot lat avg / p99 (ms) |")
    L.append("|---|---:|---:|---:|---:|---:|---:|")
    clients_all = sorted({r["clients"] for r in runs})
    for m in modes:
        for c in clients_all:
            h, s = by.get((m, c, "heap")), by.get((m, c, "scoot"))
            if h is None and s is None:
                continue
            def tps(r):
                if r is None: return "—"
                return fmt(r.get("tps"), 0) if r["ok"] else "FAILED"
            def lat(r):
                if r is None or not r["ok"]: return "—"
                return f"{fmt(r.get('latency_avg_ms'), 3)} / {fmt(r.get('latency_p99_ms'), 3)}"
            ratio = "—"
            if h and s and h["ok"] and s["ok"] and h.get("tps"):
                ratio = f"{s['tps'] / h['tps']:.2f}x"
            L.append(f"| {MODE_LABEL.get(m, m)} | {c} | {tps(h)} | {tps(s)} | {ratio} | {lat(h)} | {lat(s)} |")
    L.append("")
    failed = [r for r in runs if not r["ok"]]
    if failed:
        L.append("Failed runs:")
        for r in failed:
            L.append(f"- {r['mode']} c={r['clients']} {r['engine']}: exit {r['exit_code']} "
                     f"{(r.get('error') or '').splitlines()[0] if r.get('error') else ''}")
        L.append("")
    L.append("## Storage per table")
    L.append("")
    L.append("heap: `pg_table_size` (table + FSM/VM + TOAST). scoot: the arena memory its blocks hold "
             "(blocks x block size, from `scoot.arena_tables`), and the bytes its rows occupy in them.")
    L.append("")
    L.append("| when | table | heap bytes | scoot arena bytes | scoot/heap | scoot row bytes |")
    L.append("|---|---|---:|---:|---:|---:|")
    for when in ("after_init", "after_runs"):
        for t in storage[when].get("tables", []):
            hb, sb = t["heap_table_bytes"], t["scoot_block_bytes"]
            ratio = f"{sb / hb:.2f}x" if hb and sb else "—"
            L.append(f"| {when.replace('_', ' ')} | {t['table']} | {fmt(mb(hb), 1) + ' MB' if hb is not None else '—'} | "
                     f"{fmt(mb(sb), 1) + ' MB' if sb is not None else '—'} | {ratio} | "
                     f"{fmt(mb(t['scoot_row_bytes']), 1) + ' MB' if t['scoot_row_bytes'] is not None else '—'} |")
    L.append("")
    L.append("## Storage (pgbench tables)")
    L.append("")
    for when in ("after_init", "after_runs"):
        s = storage[when]
        h, sc = s.get("heap"), s.get("scoot")
        if h is None and sc is None and s["scoot_arena_rows"] is None:
            continue
        parts = []
        if h:
            parts.append(f"heap: tables {fmt(mb(h['table_bytes']), 1)} MB + indexes {fmt(mb(h['index_bytes']), 1)} MB "
                         f"= pg_total_relation_size {fmt(mb(h['total_bytes']), 1)} MB")
        if sc:
            parts.append(f"scoot db: pg_total_relation_size {fmt(mb(sc['total_bytes']), 1)} MB "
                         f"(tables {fmt(mb(sc['table_bytes']), 1)} MB, indexes {fmt(mb(sc['index_bytes']), 1)} MB)")
        if s["scoot_arena_used_bytes"] is not None:
            line = f"scoot arena: {fmt(mb(s['scoot_arena_used_bytes']), 1)} MB ({s['scoot_arena_used_column']})"
            if h and h["table_bytes"]:
                line += f", {s['scoot_arena_used_bytes'] / h['table_bytes']:.2f}x the heap tables"
            parts.append(line)
        elif s["scoot_arena_rows"]:
            parts.append("scoot arena: no bytes-used column recognised; raw view: "
                         + json.dumps(s["scoot_arena_rows"])[:400])
        elif s["scoot_arena_error"] and "scoot" in (meta.get("engines") or ""):
            parts.append(f"scoot arena: not available ({s['scoot_arena_error']})")
        L.append(f"- {when.replace('_', ' ')}: " + "; ".join(parts))
        if s["scoot_arena_rows"]:
            L.append(f"  - `SELECT * FROM scoot.arena`: `{json.dumps(s['scoot_arena_rows'])[:600]}`")
    L.append("")
    with open(a.out + ".md", "w") as fh:
        fh.write("\n".join(L))
    sys.stdout.write("\n".join(L))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
