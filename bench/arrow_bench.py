#!/usr/bin/env python3
"""Arrow export benchmark (`make bench-arrow`): TPC-H lineitem (tpchgen-cli, scale factor
ARROW_SF, default 1 = 6M rows, 16 columns) in a heap and a scoot table of one cluster; the time
until a pyarrow.Table holding all rows is in the client, for:

- pg_scoot.read_arrow on the scoot table, all columns and two integer columns, with its blocks
  all hot (record batches built from the column regions), all frozen (`scoot.freeze`: column
  buffers copied, text gathered) and mixed (one row in 500 of the first fifth of the table
  updated: the blocks it touched are hot again and hold a dead version each, the rest stay
  frozen); the time `scoot.freeze` takes per block;
- the ADBC PostgreSQL driver (adbc-driver-postgresql; COPY BINARY parsed in C++) on heap and scoot;
- ConnectorX (single connection) on heap and scoot;
- psycopg (binary) fetching 100k-row pieces + pyarrow.RecordBatch.from_pylist, on heap;
- and, for reference, raw `COPY lineitem TO STDOUT (FORMAT binary)` bytes (no Arrow table).

Every Arrow result is checked against heap (row count, sum of l_orderkey, sum of l_quantity).
Best of ARROW_REPS runs (the psycopg one runs once). The background freezer is off
(`scoot.freeze_after = -1`) so that each phase has the block temperatures it names. Results:
bench/results/arrow.{md,json}.
"""
import json
import os
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from olap_bench import Cluster, REPO, log  # noqa: E402
import pg_scoot  # noqa: E402

SF = os.environ.get("ARROW_SF", "1")
REPS = int(os.environ.get("ARROW_REPS", "3"))
RES = os.path.join(REPO, "bench", "results")


def gen(dir_):
    if os.path.exists(os.path.join(dir_, "lineitem.csv")):
        return
    os.makedirs(dir_, exist_ok=True)
    exe = os.environ.get("TPCHGEN", os.path.expanduser("~/.cargo/bin/tpchgen-cli"))
    subprocess.run([exe, "csv", "-s", SF, "--tables=lineitem", f"--output-dir={dir_}"], check=True)
    os.chmod(os.path.join(dir_, "lineitem.csv"), 0o644)
    os.chmod(dir_, 0o755)


def check(tbl, want, label):
    got = (tbl.num_rows, pc.sum(tbl.column("l_orderkey")).as_py(),
           str(pc.sum(tbl.column("l_quantity").cast(pa.decimal128(20, 2))).as_py()))
    if got != want:
        raise RuntimeError(f"{label}: {got} != heap's {want}")


def main():
    git = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    data = f"/tmp/tpch_sf{SF}"
    gen(data)
    cl = Cluster("arrow", 55692, max(3072, int(float(SF) * 3072)),
                 ["jit = off", "shared_buffers = '2GB'", "max_wal_size = '8GB'", "work_mem = '64MB'",
                  "scoot.freeze_after = -1"])
    res = []
    try:
        cl.sql("CREATE EXTENSION pg_scoot")
        ddl = open(os.path.join(REPO, "bench", "tpch", "schema.sql")).read()
        li = ddl[ddl.index("CREATE TABLE lineitem"):]
        li = li[:li.index(";") + 1]
        with cl.conn() as c:
            for sch, am in (("h", "heap"), ("s", "scoot")):
                c.execute(f"CREATE SCHEMA {sch}")
                c.execute(f"SET search_path = {sch}")
                c.execute(f"SET default_table_access_method = {am}")
                c.execute(li)
                t0 = time.time()
                c.execute(f"COPY lineitem FROM '{data}/lineitem.csv' WITH (FORMAT csv, HEADER true)")
                c.execute("VACUUM ANALYZE lineitem")
                log("loaded", am, round(time.time() - t0, 1), "s")
            want = c.execute("SELECT count(*), sum(l_orderkey), sum(l_quantity)::text FROM h.lineitem").fetchone()
            want = (want[0], int(want[1]), want[2])
            rows = want[0]

        def run(label, table, fn, reps=REPS, checked=True, arrow=True):
            best = None
            nbytes = 0
            for _ in range(reps):
                t0 = time.perf_counter()
                out = fn()
                dt = time.perf_counter() - t0
                if arrow and checked:
                    check(out, want, label)
                nbytes = out.nbytes if arrow else out
                best = dt if best is None else min(best, dt)
                del out
            res.append(dict(method=label, table=table, seconds=round(best, 3), rows=rows,
                            rows_per_s=round(rows / best), mb_per_s=round(nbytes / best / 1e6, 1),
                            arrow=arrow))
            log(label, table, f"{best:.3f}s", f"{rows / best / 1e6:.2f}M rows/s")

        import adbc_driver_postgresql.dbapi as adbc
        import connectorx as cx
        import psycopg

        uri = f"postgresql://postgres@localhost:{cl.port}/postgres?host={cl.dir}"
        freeze = {}
        mixed_temps = {}
        with cl.conn() as c:
            def temps():
                return dict(c.execute("SELECT temperature, blocks FROM scoot.blocks "
                                      "WHERE relation = 's.lineitem'::regclass").fetchall())

            def scoot_runs(state):
                run(f"pg_scoot.read_arrow ({state} blocks)", "scoot",
                    lambda: pg_scoot.read_arrow(c, "s.lineitem"))
                run(f"pg_scoot.read_arrow, 2 int columns ({state} blocks)", "scoot",
                    lambda: pg_scoot.read_arrow(c, "s.lineitem", columns=["l_orderkey", "l_partkey"]),
                    checked=False)
            log("blocks", temps())
            scoot_runs("hot")
            t0 = time.perf_counter()
            nb = c.execute("SELECT scoot.freeze('s.lineitem')").fetchone()[0]
            dt = time.perf_counter() - t0
            freeze = dict(blocks=nb, seconds=round(dt, 3), us_per_block=round(dt * 1e6 / max(nb, 1)),
                          block_kb=c.execute("SELECT block_size / 1024 FROM scoot.arena").fetchone()[0])
            log("freeze", freeze, temps())
            scoot_runs("frozen")
            # the first fifth of the table (rows are loaded in l_orderkey order): those blocks
            # turn hot and hold a dead version per updated row, the others stay frozen
            c.execute("UPDATE s.lineitem SET l_comment = l_comment || '' WHERE l_orderkey % 500 = 7 "
                      "AND l_orderkey < (SELECT max(l_orderkey) / 5 FROM s.lineitem)")
            mixed_temps.update(temps())
            log("blocks after updates", mixed_temps)
            scoot_runs("mixed")
        for sch, am in (("h", "heap"), ("s", "scoot")):
            with adbc.connect(uri) as ac:
                def adbc_fetch():
                    with ac.cursor() as cur:
                        cur.execute(f"SELECT * FROM {sch}.lineitem")
                        return cur.fetch_arrow_table()
                run("ADBC (adbc-driver-postgresql)", am, adbc_fetch)
            run("ConnectorX", am, lambda: cx.read_sql(uri, f"SELECT * FROM {sch}.lineitem", return_type="arrow"))
        with cl.conn() as c:
            def psy():
                cur = c.cursor(name="b", binary=True)
                with c.transaction():
                    cur.execute("SELECT * FROM h.lineitem")
                    names = None
                    batches = []
                    while True:
                        part = cur.fetchmany(100000)
                        if not part:
                            break
                        names = names or [d.name for d in cur.description]
                        batches.append(pa.RecordBatch.from_pylist([dict(zip(names, r)) for r in part]))
                    cur.close()
                return pa.Table.from_batches(batches)
            run("psycopg fetch + RecordBatch.from_pylist", "heap", psy, reps=1)
            for sch, am in (("h", "heap"), ("s", "scoot")):
                def copy_bytes():
                    n = 0
                    with c.cursor().copy(f"COPY {sch}.lineitem TO STDOUT (FORMAT binary)") as cp:
                        for b in cp:
                            n += len(b)
                    return n
                run("COPY TO STDOUT (FORMAT binary), bytes only", am, copy_bytes, arrow=False)
    finally:
        cl.stop()
    out = dict(git=git, sf=SF, reps=REPS, results=res, freeze=freeze, mixed_blocks=mixed_temps)
    with open(os.path.join(RES, "arrow.json"), "w") as f:
        json.dump(out, f, indent=1)
    base = {r["table"]: r["seconds"] for r in res if r["method"].startswith("ADBC")}
    L = ["# Arrow export, TPC-H lineitem (`make bench-arrow`)", "",
         f"git {git}; scale factor {SF} ({res[0]['rows']:,} rows, 16 columns), one cluster, client on the "
         f"same machine; time until a pyarrow.Table is in the client, best of {REPS} (psycopg: 1 run). "
         "`x ADBC heap` = ADBC-on-heap time / this time. MB/s = Arrow bytes per second. "
         "Scoot blocks hot (as loaded), frozen (`scoot.freeze`), mixed (then one row in 500 of the first "
         "fifth of the table updated: the blocks touched are hot again and hold dead versions, the "
         "others stay frozen: " + ", ".join(f"{v} {k}" for k, v in mixed_temps.items() if v) + " blocks).", "",
         "| method | table | seconds | rows/s | MB/s | x ADBC heap |", "|---|---|---:|---:|---:|---:|"]
    for r in res:
        x = base.get("heap", 0) / r["seconds"] if r["seconds"] else 0
        L.append(f"| {r['method']} | {r['table']} | {r['seconds']:.3f} | {r['rows_per_s'] / 1e6:.2f}M | "
                 f"{r['mb_per_s'] if r['arrow'] else '(' + str(r['mb_per_s']) + ' wire)'} | {x:.1f}x |")
    L += ["", f"`scoot.freeze('lineitem')`: {freeze.get('blocks')} blocks of {freeze.get('block_kb')} kB in "
          f"{freeze.get('seconds')} s, {freeze.get('us_per_block')} µs per block."]
    L += ["", "![Arrow export](arrow.png)"]
    with open(os.path.join(RES, "arrow.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    print("\n".join(L))
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "plot_arrow.py")], check=False)


if __name__ == "__main__":
    main()
