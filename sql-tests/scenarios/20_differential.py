#!/usr/bin/env python3
"""Differential test: the same random DML script on a heap table and on a scoot table.

N worker threads each own a connection PAIR (one for the heap table, one for the scoot table) and a
seeded RNG. A worker runs its random script (BEGIN, INSERT .. ON CONFLICT, plain INSERT that may hit
a duplicate, UPDATE by id / by k range, DELETE by id / by k, SAVEPOINT / ROLLBACK TO, ROLLBACK,
COMMIT, SET LOCAL enable_* plan switches, reads inside the transaction) statement by statement on
both connections in lockstep and requires identical results (row counts, RETURNING rows, errors).

Worker w only touches ids with id % N = w, and its k values live in a band of its own, so the
outcome does not depend on timing: concurrency exercises the engine's scans, locks and visibility
(other workers' in-progress rows are in the same table) without making results racy. A background
thread VACUUMs both tables while the workers run, and there is a deterministic midway VACUUM with
all workers paused.

After every COMMIT/ROLLBACK the worker's own rows are compared; at the end the full contents and a
set of queries (aggregates, jsonb, forced seq / index / index-only / bitmap / parallel scans, k
ranges, ORDER BY LIMIT, self joins) are compared, then again after VACUUM.

A last phase has truly concurrent conflicting updates of shared hot rows: in READ COMMITTED
UPDATE v = v + 1, INSERT .. ON CONFLICT DO UPDATE, updates of the indexed column, rolled-back
updates, and client-side read-modify-write under SELECT .. FOR UPDATE; in REPEATABLE READ updates
retried on serialization failure. M times per worker; no update may be lost on either table.

Env: PGHOST PGPORT PGUSER PGDATABASE. Knobs: DIFF_STEPS (default 1500), DIFF_SEED (default 20240601),
DIFF_HOT_M (default 250).
"""
import difflib
import os
import random
import sys
import threading
import time
import traceback

try:
    import psycopg
    from psycopg import errors as pgerrors
except ImportError:  # pragma: no cover
    import subprocess
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "psycopg[binary]"])
    import psycopg
    from psycopg import errors as pgerrors

from psycopg.types.json import Jsonb  # noqa: E402

N = 4
STEPS = int(os.environ.get("DIFF_STEPS", "1500"))
SEED = int(os.environ.get("DIFF_SEED", "20240601"))
HOT_M = int(os.environ.get("DIFF_HOT_M", "250"))
IDS_PER_WORKER = 400          # worker w: ids N*i + w, i in [0, IDS_PER_WORKER)
KBAND = 100000                # worker w: k in [w*KBAND, (w+1)*KBAND)
HEAP, SCOOT = "diff_heap", "diff_scoot"
TABLES = (HEAP, SCOOT)
CONNOPTS = "-c statement_timeout=90s -c lock_timeout=60s -c jit=off -c client_min_messages=warning"

failed = threading.Event()
fail_lock = threading.Lock()
fail_msgs = []
barriers = []                 # broken on failure so that nobody waits for a dead worker
t_start = time.time()


def log(msg):
    print(f"[{time.time() - t_start:6.1f}s] {msg}", flush=True)


def fail(msg):
    with fail_lock:
        if not fail_msgs:
            fail_msgs.append(msg)
            print("\n" + "=" * 70 + "\nMISMATCH / ERROR:\n" + msg + "\n" + "=" * 70, flush=True)
    failed.set()
    for b in barriers:
        b.abort()


class Stop(Exception):
    pass


def connect():
    return psycopg.connect(autocommit=True, options=CONNOPTS)


def run(conn, sql, params=None):
    """Executes; returns ('ok', rowcount, rows or None) or ('err', sqlstate, message)."""
    try:
        cur = conn.execute(sql, params)
        rows = cur.fetchall() if cur.description is not None else None
        return ("ok", cur.rowcount, rows)
    except psycopg.Error as e:
        # timeouts (57014) and lost connections are reported like any other unexpected error
        return ("err", e.sqlstate or "connection", str(e).strip())


def fmt_rows(rows, limit=None):
    out = [repr(tuple(r)) for r in rows]
    return out if limit is None else out[:limit]


def diff_text(a, b, name_a="heap", name_b="scoot", maxlines=60):
    la = a if isinstance(a, list) else [str(a)]
    lb = b if isinstance(b, list) else [str(b)]
    d = list(difflib.unified_diff(la, lb, name_a, name_b, lineterm="", n=2))
    if len(d) > maxlines:
        d = d[:maxlines] + [f"... ({len(d) - maxlines} more diff lines)"]
    return "\n".join(d)


def shorten(rows):
    """Long text values are shown as length+md5 prefix in diffs."""
    import hashlib
    out = []
    for r in rows:
        rr = []
        for x in r:
            if isinstance(x, str) and len(x) > 60:
                rr.append(f"<text len={len(x)} md5={hashlib.md5(x.encode()).hexdigest()[:10]}>")
            else:
                rr.append(x)
        out.append(tuple(rr))
    return out


def compare_results(ctx, sql, params, rh, rs, sort_rows=True):
    """rh/rs: results of run() on heap and scoot. Fails on any difference."""
    if params is not None:
        sql = sql.replace("%%", "%")
    if rh[0] != rs[0] or (rh[0] == "err" and rh[1] != rs[1]):
        fail(f"{ctx}: different outcome for\n  {sql}\n  params={params}\n"
             f"  heap : {rh[0]} {rh[1]} {rh[2] if rh[0] == 'err' else ''}\n"
             f"  scoot: {rs[0]} {rs[1]} {rs[2] if rs[0] == 'err' else ''}")
        raise Stop()
    if rh[0] == "err":
        return rh
    if rh[1] != rs[1]:
        fail(f"{ctx}: row count differs for\n  {sql}\n  params={params}\n  heap={rh[1]} scoot={rs[1]}\n"
             + (diff_text(fmt_rows(shorten(sorted(rh[2], key=repr))), fmt_rows(shorten(sorted(rs[2], key=repr))))
                if rh[2] is not None and rs[2] is not None else ""))
        raise Stop()
    a, b = rh[2], rs[2]
    if a is not None or b is not None:
        if sort_rows:
            a, b = sorted(a, key=repr), sorted(b, key=repr)
        if a != b:
            fail(f"{ctx}: different rows for\n  {sql}\n  params={params}\n"
                 + diff_text(fmt_rows(shorten(a)), fmt_rows(shorten(b))))
            raise Stop()
    return rh


OWN_ROWS_SQL = ("SELECT id, k, v, length(t), md5(t), j::text, updated_at FROM {tbl} "
                "WHERE id %% {n} = %s ORDER BY id")
FULL_SQL = "SELECT id, k, v, t, j::text, updated_at FROM {tbl} ORDER BY id"


# ------------------------------------------------------------------------------ the worker script
class Worker(threading.Thread):
    def __init__(self, w, barrier):
        super().__init__(name=f"worker{w}", daemon=True)
        self.w = w
        self.rng = random.Random(SEED * 1000 + w)
        self.barrier = barrier
        self.ch = connect()
        self.cs = connect()
        self.step = 0
        self.in_tx = False
        self.aborted = False      # transaction failed (both sides), only ROLLBACK is possible
        self.savepoints = []      # active savepoint names
        self.sp_seq = 0
        self.tx_left = 0
        self.stats = {}
        self.hot_ok = False

    # both connections, lockstep; sql has {tbl}
    def both(self, sql, params=None, may_fail=(), sort_rows=True):
        qh = sql.format(tbl=HEAP, n=N)
        qs = sql.format(tbl=SCOOT, n=N)
        rh = run(self.ch, qh, params)
        rs = run(self.cs, qs, params)
        ctx = f"worker {self.w} step {self.step}"
        r = compare_results(ctx, qh, params, rh, rs, sort_rows)
        self.stats["statements"] = self.stats.get("statements", 0) + 1
        if r[0] == "ok" and r[1] > 0 and sql.split()[0] in ("INSERT", "UPDATE", "DELETE"):
            self.stats["rows_" + sql.split()[0].lower()] = self.stats.get("rows_" + sql.split()[0].lower(), 0) + r[1]
        if r[0] == "err":
            if r[1] not in may_fail:
                fail(f"{ctx}: unexpected error (same on heap and scoot) for\n  {qs}\n  params={params}\n"
                     f"  {r[1]}: {r[2]}")
                raise Stop()
            self.stats["err:" + r[1]] = self.stats.get("err:" + r[1], 0) + 1
        return r

    def own_key(self):
        return N * self.rng.randrange(IDS_PER_WORKER) + self.w

    def kval(self):
        return self.w * KBAND + self.rng.randrange(IDS_PER_WORKER * 10)

    def krange(self):
        lo = self.kval()
        return lo, lo + self.rng.choice([0, 5, 20, 60, 200])

    def text(self):
        r = self.rng.random()
        if r < 0.08:
            return None
        if r < 0.18:
            n = self.rng.randrange(500, 30000)     # wide values (heap toasts/compresses them; scoot spans blocks)
        else:
            n = self.rng.randrange(0, 40)
        alphabet = "abcdefghijklmnopqrstuvwxyzäöü0123456789 "
        s = "".join(self.rng.choice(alphabet) for _ in range(min(n, 60)))
        return (s * (n // max(len(s), 1) + 1))[:n] if s else ""

    def jval(self):
        r = self.rng.random()
        if r < 0.07:
            return None
        d = {"a": self.rng.randrange(10), "tag": self.rng.choice(["red", "green", "blue", "x"]),
             "arr": [self.rng.randrange(100) for _ in range(self.rng.randrange(4))]}
        if self.rng.random() < 0.1:
            d["big"] = [self.rng.randrange(1000) for _ in range(self.rng.randrange(50, 300))]
        return Jsonb(d)

    def end_check(self, what):
        self.both(OWN_ROWS_SQL, (self.w,), sort_rows=False)

    def begin(self):
        iso = self.rng.random()
        if iso < 0.2:
            self.both("BEGIN ISOLATION LEVEL REPEATABLE READ")
        else:
            self.both("BEGIN")
        self.in_tx, self.aborted, self.savepoints = True, False, []
        self.tx_left = self.rng.randrange(1, 10)

    def finish(self):
        if self.aborted or self.rng.random() < 0.15:
            self.both("ROLLBACK")
            self.stats["rollback"] = self.stats.get("rollback", 0) + 1
        else:
            self.both("COMMIT")
            self.stats["commit"] = self.stats.get("commit", 0) + 1
        self.in_tx, self.aborted, self.savepoints = False, False, []
        self.end_check("end of transaction")

    def dml(self):
        """One random data statement. Returns its result."""
        rng = self.rng
        op = rng.random()
        st = self.step
        if op < 0.22:
            i = self.own_key()
            k = self.w * KBAND + (i // N) * 10 + rng.randrange(10)
            if rng.random() < 0.5:
                return self.both(
                    "INSERT INTO {tbl} AS x (id, k, v, t, j, updated_at) VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET v = x.v + excluded.v, t = excluded.t, updated_at = excluded.updated_at "
                    "RETURNING id, k, v, t",
                    (i, k, rng.randrange(1000), self.text(), self.jval(), st))
            return self.both(
                "INSERT INTO {tbl} (id, k, v, t, j, updated_at) VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING RETURNING id",
                (i, k, rng.randrange(1000), self.text(), self.jval(), st))
        if op < 0.26:
            # plain insert: a duplicate key raises unique_violation (23505) on both
            i = self.own_key()
            k = self.w * KBAND + (i // N) * 10 + rng.randrange(10)
            if rng.random() < 0.25:
                rows = [(N * rng.randrange(IDS_PER_WORKER) + self.w, k + d, d, self.text(), None, st) for d in range(3)]
                ph = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(rows))
                return self.both(f"INSERT INTO {{tbl}} (id, k, v, t, j, updated_at) VALUES {ph}",
                                 tuple(x for r in rows for x in r), may_fail=("23505",))
            return self.both("INSERT INTO {tbl} (id, k, v, t, j, updated_at) VALUES (%s, %s, %s, %s, %s, %s)",
                             (i, k, rng.randrange(1000), self.text(), self.jval(), st), may_fail=("23505",))
        if op < 0.45:
            i = self.own_key()
            c = rng.random()
            if c < 0.4:
                return self.both("UPDATE {tbl} SET v = v + %s, updated_at = %s WHERE id = %s RETURNING id, v",
                                 (rng.randrange(-50, 50), st, i))
            if c < 0.6:
                return self.both("UPDATE {tbl} SET t = %s, j = %s, updated_at = %s WHERE id = %s RETURNING id, length(t)",
                                 (self.text(), self.jval(), st, i))
            if c < 0.8:
                return self.both("UPDATE {tbl} SET k = %s, updated_at = %s WHERE id = %s RETURNING id, k",
                                 (self.kval(), st, i))
            # update twice in one statement chain: j path update
            return self.both("UPDATE {tbl} SET j = jsonb_set(coalesce(j, '{{}}'), '{{a}}', to_jsonb(%s::int)), "
                             "v = v * 2 %% 100000, updated_at = %s WHERE id = %s RETURNING id, j->>'a'",
                             (rng.randrange(10), st, i))
        if op < 0.62:
            lo, hi = self.krange()
            if rng.random() < 0.5:   # non-indexed column
                return self.both("UPDATE {tbl} SET v = v + 1, updated_at = %s WHERE k BETWEEN %s AND %s RETURNING id, v",
                                 (st, lo, hi))
            # the indexed column moves (stays within the worker's band)
            d = rng.choice([1, 3, 7, -2, 50])
            return self.both("UPDATE {tbl} SET k = k + %s, updated_at = %s WHERE k BETWEEN %s AND %s "
                             "AND k + %s BETWEEN %s AND %s RETURNING id, k",
                             (d, st, lo, hi, d, self.w * KBAND, self.w * KBAND + KBAND - 1))
        if op < 0.70:
            return self.both("DELETE FROM {tbl} WHERE id = %s RETURNING id, k, v", (self.own_key(),))
        if op < 0.75:
            return self.both("DELETE FROM {tbl} WHERE k = %s RETURNING id", (self.kval(),))
        if op < 0.78:
            lo, hi = self.krange()
            return self.both("DELETE FROM {tbl} WHERE k BETWEEN %s AND %s AND v %% 3 = 0 RETURNING id", (lo, hi))
        if op < 0.83:
            lo, hi = self.krange()
            return self.both("SELECT id, k, v, md5(t), j->>'tag' FROM {tbl} WHERE k BETWEEN %s AND %s ORDER BY id",
                             (lo, hi), sort_rows=False)
        if op < 0.86:
            return self.both("SELECT count(*), sum(v), sum(length(t)) FROM {tbl} WHERE id %% {n} = %s", (self.w,))
        if op < 0.89:
            tag = rng.choice(["red", "green", "blue", "x"])
            return self.both("UPDATE {tbl} SET v = v + 7 WHERE id %% {n} = %s AND j->>'tag' = %s AND k %% 5 = %s "
                             "RETURNING id", (self.w, tag, rng.randrange(5)))
        if op < 0.92:
            # SELECT .. FOR UPDATE / FOR SHARE of own rows
            lo, hi = self.krange()
            mode = rng.choice(["FOR UPDATE", "FOR NO KEY UPDATE", "FOR SHARE", "FOR KEY SHARE"])
            return self.both(f"SELECT id FROM {{tbl}} WHERE k BETWEEN %s AND %s ORDER BY id {mode}", (lo, hi),
                             sort_rows=False)
        if op < 0.95:
            # update through a subquery (self join on the same table)
            return self.both("UPDATE {tbl} a SET v = a.v + b.v %% 10 FROM {tbl} b "
                             "WHERE b.id = a.id + %s AND a.id %% {n} = %s AND a.k BETWEEN %s AND %s RETURNING a.id, a.v",
                             (N, self.w) + self.krange())
        # bulk insert of a run of new ids (often conflicting), then partial delete
        base = self.own_key()
        return self.both("INSERT INTO {tbl} (id, k, v, t, j, updated_at) "
                         "SELECT g, %s + (g / {n}) %% 2000, g %% 97, repeat('r', g %% 300), NULL, %s "
                         "FROM generate_series(%s, %s, {n}) g ON CONFLICT DO NOTHING RETURNING id",
                         (self.w * KBAND, st, base, base + N * rng.randrange(1, 25)))

    def one_step(self):
        rng = self.rng
        if not self.in_tx:
            if rng.random() < 0.12:
                # autocommit statement
                self.dml()
                self.end_check("autocommit")
                return
            self.begin()
            return
        if self.aborted:
            if self.savepoints and rng.random() < 0.8:
                sp = self.savepoints.pop()
                self.both(f"ROLLBACK TO SAVEPOINT {sp}")
                self.aborted = False
                return
            self.finish()
            return
        if self.tx_left <= 0:
            self.finish()
            return
        self.tx_left -= 1
        c = rng.random()
        if c < 0.10:
            self.sp_seq += 1
            sp = f"sp{self.sp_seq}"
            self.both(f"SAVEPOINT {sp}")
            self.savepoints.append(sp)
            self.tx_left += 2
            return
        if c < 0.15 and self.savepoints:
            sp = self.rng.choice(self.savepoints)
            idx = self.savepoints.index(sp)
            if rng.random() < 0.6:
                self.both(f"ROLLBACK TO SAVEPOINT {sp}")
                del self.savepoints[idx + 1:]
            else:
                self.both(f"RELEASE SAVEPOINT {sp}")
                del self.savepoints[idx:]
            return
        if c < 0.20:
            g = rng.choice(["SET LOCAL enable_seqscan = off",
                            "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off",
                            "SET LOCAL enable_indexscan = off; SET LOCAL enable_seqscan = off",
                            "SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off"])
            for part in g.split("; "):
                self.both(part)
            return
        r = self.dml()
        if r[0] == "err":
            self.aborted = True

    def run(self):
        paused = False
        try:
            while self.step < STEPS and not failed.is_set():
                if not paused and self.step >= STEPS // 2 and not self.in_tx:
                    # deterministic midway VACUUM with every worker paused outside a transaction
                    self.barrier.wait(timeout=600)
                    self.barrier.wait(timeout=600)
                    paused = True
                self.one_step()
                self.step += 1
            if self.in_tx and not failed.is_set():
                self.finish()
            if not paused and not failed.is_set():
                self.barrier.wait(timeout=600)
                self.barrier.wait(timeout=600)
        except Stop:
            pass
        except threading.BrokenBarrierError:
            if not failed.is_set():
                fail(f"worker {self.w}: midway barrier broken")
        except Exception:
            fail(f"worker {self.w} step {self.step}: unexpected exception\n{traceback.format_exc()}")

    # -------------------------------------------------------------------------- hot rows phase
    def hot(self):
        try:
            rng = random.Random(SEED * 7 + self.w)
            for m in range(HOT_M):
                if failed.is_set():
                    return
                for conn, tbl in ((self.ch, HEAP), (self.cs, SCOOT)):
                    kind = m % 10
                    if kind == 3:
                        # rolled back increments do not count
                        conn.execute("BEGIN")
                        conn.execute(f"UPDATE {tbl} SET v = v + 1000 WHERE id = -1")
                        time.sleep(rng.random() * 0.002)
                        conn.execute("ROLLBACK")
                    if kind == 5:
                        # hold the row lock for a moment inside a transaction
                        conn.execute("BEGIN")
                        conn.execute(f"UPDATE {tbl} SET v = v + 1 WHERE id = -1")
                        time.sleep(rng.random() * 0.003)
                        conn.execute("COMMIT")
                    else:
                        cur = conn.execute(f"UPDATE {tbl} SET v = v + 1 WHERE id = -1")
                        if cur.rowcount != 1:
                            fail(f"worker {self.w} hot update #{m} on {tbl}: updated {cur.rowcount} rows, want 1")
                            return
                    cur = conn.execute(
                        f"INSERT INTO {tbl} AS x (id, k, v, updated_at) VALUES (-2, -2, 1, 0) "
                        f"ON CONFLICT (id) DO UPDATE SET v = x.v + 1")
                    if cur.rowcount != 1:
                        fail(f"worker {self.w} hot upsert #{m} on {tbl}: rowcount {cur.rowcount}, want 1")
                        return
                    cur = conn.execute(f"UPDATE {tbl} SET k = k + 1, v = v + 1 WHERE id = -3")
                    if cur.rowcount != 1:
                        fail(f"worker {self.w} hot k-update #{m} on {tbl}: updated {cur.rowcount} rows, want 1")
                        return
                    # read-modify-write on the client under SELECT .. FOR UPDATE
                    conn.execute("BEGIN")
                    v = conn.execute(f"SELECT v FROM {tbl} WHERE id = -5 FOR UPDATE").fetchone()[0]
                    cur = conn.execute(f"UPDATE {tbl} SET v = %s WHERE id = -5", (v + 1,))
                    conn.execute("COMMIT")
                    if cur.rowcount != 1:
                        fail(f"worker {self.w} hot FOR UPDATE #{m} on {tbl}: updated {cur.rowcount} rows, want 1")
                        return
                    # REPEATABLE READ: a concurrent update must raise 40001, then retry
                    for attempt in range(1000):
                        try:
                            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                            cur = conn.execute(f"UPDATE {tbl} SET v = v + 1 WHERE id = -6")
                            conn.execute("COMMIT")
                            if cur.rowcount != 1:
                                fail(f"worker {self.w} hot RR update #{m} on {tbl}: updated {cur.rowcount} rows")
                                return
                            break
                        except pgerrors.SerializationFailure:
                            conn.execute("ROLLBACK")
                            self.stats["40001_" + tbl] = self.stats.get("40001_" + tbl, 0) + 1
                    else:
                        fail(f"worker {self.w} hot RR update #{m} on {tbl}: 1000 serialization failures in a row")
                        return
            self.hot_ok = True
        except psycopg.Error as e:
            fail(f"worker {self.w}: hot-row phase error: {e.sqlstate}: {str(e).strip()}")
        except Exception:
            fail(f"worker {self.w}: hot-row phase exception\n{traceback.format_exc()}")


# ------------------------------------------------------------------------------ whole-table checks
FINAL_QUERIES = [
    ("full contents", [], FULL_SQL),
    ("count/sum", [], "SELECT count(*), sum(v), sum(k), count(t), count(j), sum(length(t)) FROM {tbl}"),
    ("group by k%7", [], "SELECT k % 7, count(*), sum(v), max(updated_at) FROM {tbl} GROUP BY 1 ORDER BY 1"),
    ("min/max t", [], "SELECT min(t COLLATE \"C\"), max(t COLLATE \"C\"), min(length(t)), max(length(t)) FROM {tbl}"),
    ("jsonb ->>", [], "SELECT j->>'tag', count(*), sum((j->>'a')::int) FROM {tbl} GROUP BY 1 ORDER BY 1 NULLS FIRST"),
    ("jsonb @>", [], "SELECT id FROM {tbl} WHERE j @> '{{\"tag\": \"red\", \"a\": 3}}' ORDER BY id"),
    ("jsonb arr", [], "SELECT id, jsonb_array_length(j->'arr') FROM {tbl} WHERE j ? 'big' ORDER BY id"),
    ("seq scan k range", ["SET enable_indexscan = off", "SET enable_bitmapscan = off",
                          "SET scoot.custom_scan = off"],
     "SELECT id, k, v FROM {tbl} WHERE k BETWEEN 100500 AND 101800 ORDER BY id", "Seq Scan"),
    ("ScootScan k range (block filter)", ["SET enable_indexscan = off", "SET enable_bitmapscan = off"],
     "SELECT id, k, v FROM {tbl} WHERE k BETWEEN 100500 AND 101800 ORDER BY id",
     ("Seq Scan", "Scoot Block Filter")),
    ("ScootScan IN / IS NULL", ["SET enable_indexscan = off", "SET enable_bitmapscan = off"],
     "SELECT id, k, v FROM {tbl} WHERE v IN (1, 2, 3, 5, 8, 13) OR t IS NULL ORDER BY id",
     ("Seq Scan", "Custom Scan (ScootScan)")),
    ("index scan k range", ["SET enable_seqscan = off", "SET enable_bitmapscan = off"],
     "SELECT id, k, v FROM {tbl} WHERE k BETWEEN 200100 AND 201900 ORDER BY id", "Index Scan"),
    ("index scan per worker", ["SET enable_seqscan = off", "SET enable_bitmapscan = off"],
     "SELECT k / 100000, count(*), sum(v) FROM {tbl} WHERE k BETWEEN 0 AND 399999 GROUP BY 1 ORDER BY 1",
     "Index Scan"),
    ("index only scan", ["SET enable_seqscan = off", "SET enable_bitmapscan = off"],
     "SELECT k FROM {tbl} WHERE k BETWEEN 300000 AND 301500 ORDER BY k", "Index Only Scan"),
    ("pk index scan", ["SET enable_seqscan = off", "SET enable_bitmapscan = off"],
     "SELECT id, v, md5(t) FROM {tbl} WHERE id IN (1, 2, 3, 4, 5, 100, 101, 102, 103, 555, 999) ORDER BY id",
     "Index Scan"),
    ("bitmap scan k range", ["SET enable_seqscan = off", "SET enable_indexscan = off"],
     "SELECT id, k, v FROM {tbl} WHERE k BETWEEN 1000 AND 2900 ORDER BY id", "Bitmap Heap Scan"),
    ("bitmap or", ["SET enable_seqscan = off", "SET enable_indexscan = off"],
     "SELECT id FROM {tbl} WHERE k BETWEEN 10 AND 500 OR id < 80 ORDER BY id", "Bitmap Heap Scan"),
    ("order by k limit", [], "SELECT k, id, v FROM {tbl} ORDER BY k, id LIMIT 25"),
    ("order by k desc limit (index)", ["SET enable_seqscan = off"],
     "SELECT k, id FROM {tbl} WHERE k < 300000 ORDER BY k DESC, id DESC LIMIT 25"),
    ("self join k", [], "SELECT a.id, b.id FROM {tbl} a JOIN {tbl} b ON a.k = b.k AND a.id < b.id ORDER BY 1, 2"),
    ("self join id+N", [], "SELECT count(*), sum(a.v - b.v) FROM {tbl} a JOIN {tbl} b ON b.id = a.id + 4"),
    ("nested loop via index", ["SET enable_hashjoin = off", "SET enable_mergejoin = off", "SET enable_seqscan = off"],
     "SELECT count(*), sum(b.v) FROM {tbl} a JOIN {tbl} b ON b.id = a.id + 8 WHERE a.k < 150000"),
    ("parallel seq scan", ["SET parallel_setup_cost = 0", "SET parallel_tuple_cost = 0",
                           "SET min_parallel_table_scan_size = 0", "SET max_parallel_workers_per_gather = 2",
                           "SET enable_indexscan = off", "SET enable_bitmapscan = off"],
     "SELECT count(*), sum(v), sum(length(t)) FROM {tbl} WHERE v > 10", "Gather"),
    ("hot rows", [], "SELECT id, k, v FROM {tbl} WHERE id < 0 ORDER BY id"),
]


def plan_of(conn, q):
    return "\n".join(r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " + q).fetchall())


def compare_tables(label, ch, cs):
    """Runs FINAL_QUERIES on both tables; returns False after reporting the first mismatch."""
    for entry in FINAL_QUERIES:
        name, sets, q = entry[0], entry[1], entry[2]
        node = entry[3] if len(entry) > 3 else None
        res = []
        for conn, tbl in ((ch, HEAP), (cs, SCOOT)):
            try:
                conn.execute("BEGIN")
                for s in sets:
                    conn.execute(s.replace("SET ", "SET LOCAL ", 1))
                sql = q.format(tbl=tbl)
                if node is not None:
                    p = plan_of(conn, sql)
                    # (heap's node, scoot's) where they differ (scoot reads with ScootScan)
                    want = node if isinstance(node, str) else node[0 if tbl == HEAP else 1]
                    if want not in p:
                        conn.execute("ROLLBACK")
                        fail(f"{label} / {name}: plan on {tbl} does not use '{node}':\n{p}")
                        return False
                rows = conn.execute(sql).fetchall()
                conn.execute("COMMIT")
            except psycopg.Error as e:
                fail(f"{label} / {name}: error on {tbl}: {e.sqlstate}: {str(e).strip()}\n  {q.format(tbl=tbl)}")
                return False
            res.append(rows)
        if res[0] != res[1]:
            fail(f"{label} / {name}: results differ\n  {q}\n  settings: {sets}\n  heap {len(res[0])} rows, "
                 f"scoot {len(res[1])} rows\n" + diff_text(fmt_rows(shorten(res[0])), fmt_rows(shorten(res[1]))))
            return False
    return True


def vacuum_both(conn, extra=""):
    for tbl in TABLES:
        conn.execute(f"VACUUM {extra} {tbl}")


class Vacuumer(threading.Thread):
    """VACUUMs both tables now and then while the workers run."""

    def __init__(self):
        super().__init__(name="vacuumer", daemon=True)
        self.stop = threading.Event()
        self.count = 0

    def run(self):
        try:
            conn = connect()
            i = 0
            while not self.stop.wait(1.5) and not failed.is_set():
                vacuum_both(conn, "(ANALYZE)" if i % 3 == 2 else "")
                self.count += 1
                i += 1
            conn.close()
        except psycopg.Error as e:
            fail(f"background VACUUM failed: {e.sqlstate}: {str(e).strip()}")
        except Exception:
            fail(f"background VACUUM exception\n{traceback.format_exc()}")


def scoot_dead_rows(conn):
    r = conn.execute("SELECT live_rows, dead_rows, blocks FROM scoot.arena_tables WHERE relation = %s::regclass",
                     (SCOOT,)).fetchone()
    return r


def main():
    log(f"differential heap vs scoot: N={N} workers, {STEPS} steps each, seed {SEED}, hot M={HOT_M}")
    admin = connect()
    admin.execute(f"DROP TABLE IF EXISTS {HEAP}, {SCOOT}")
    for tbl, am in ((HEAP, "heap"), (SCOOT, "scoot")):
        admin.execute(f"CREATE TABLE {tbl} (id int PRIMARY KEY, k int, v int, t text, j jsonb, updated_at int) USING {am}")
        admin.execute(f"CREATE INDEX {tbl}_k ON {tbl} (k)")
        # shared hot rows (no worker partition: id % N < 0), and a few initial rows per worker
        admin.execute(f"INSERT INTO {tbl} (id, k, v, updated_at) VALUES (-1, -1, 0, 0), (-3, -3000, 0, 0), "
                      f"(-5, -5, 0, 0), (-6, -6, 0, 0)")
        admin.execute(f"INSERT INTO {tbl} (id, k, v, t, j, updated_at) "
                      f"SELECT g, (g % {N}) * {KBAND} + (g / {N}) * 10, g % 13, 'init' || g, "
                      f"jsonb_build_object('a', g % 10, 'tag', 'x'), 0 FROM generate_series(0, {N * IDS_PER_WORKER - 1}, 3) g")
    am = admin.execute(f"SELECT a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = '{SCOOT}'::regclass").fetchone()[0]
    if am != "scoot":
        print(f"FAIL: {SCOOT} uses access method {am}")
        return 1

    rc = 1
    workers = []
    vac = None
    try:
        barrier = threading.Barrier(N + 1)
        barriers.append(barrier)
        workers = [Worker(w, barrier) for w in range(N)]
        vac = Vacuumer()
        for t in workers:
            t.start()
        vac.start()
        # midway: all workers paused outside transactions -> VACUUM, compare everything, resume
        try:
            barrier.wait(timeout=600)
            log("midway: workers paused; VACUUM both tables and compare")
            vacuum_both(admin)
            ch, cs = connect(), connect()
            ok = compare_tables("midway after VACUUM", ch, cs)
            ch.close(); cs.close()
            barrier.wait(timeout=60)
            if not ok:
                raise Stop()
        except threading.BrokenBarrierError:
            if not failed.is_set():
                fail("midway barrier broken (a worker stopped early?)")
        except Stop:
            pass
        finally:
            if failed.is_set():
                barrier.abort()
        for t in workers:
            t.join(timeout=900)
            if t.is_alive():
                fail(f"{t.name} did not finish")
        vac.stop.set()
        vac.join(timeout=120)
        if failed.is_set():
            return 1
        stats = {}
        for t in workers:
            for k, v in t.stats.items():
                stats[k] = stats.get(k, 0) + v
        log(f"random phase done: {stats}; background VACUUMs: {vac.count}")

        ch, cs = connect(), connect()
        if not compare_tables("after random phase", ch, cs):
            return 1
        log("after random phase: contents and queries identical")

        # ---------------------------------------------------------------- hot rows phase
        log(f"hot-row phase: {N} workers x {HOT_M} conflicting updates per row per table")
        hts = [threading.Thread(target=t.hot, name=f"hot{t.w}", daemon=True) for t in workers]
        for t in hts:
            t.start()
        for t in hts:
            t.join(timeout=600)
            if t.is_alive():
                fail(f"{t.name} did not finish (hang in the hot-row phase?)")
        if failed.is_set():
            return 1
        want = [(-6, -6, N * HOT_M), (-5, -5, N * HOT_M), (-3, -3000 + N * HOT_M, N * HOT_M), (-2, -2, N * HOT_M),
                (-1, -1, N * HOT_M)]
        for conn, tbl in ((ch, HEAP), (cs, SCOOT)):
            got = [tuple(r) for r in conn.execute(f"SELECT id, k, v FROM {tbl} WHERE id < 0 ORDER BY id").fetchall()]
            if got != want:
                fail(f"hot rows on {tbl} (lost or extra updates): got {got}, want {want}")
                return 1
            for sets in ([], ["SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off"]):
                conn.execute("BEGIN")
                for s in sets:
                    conn.execute(s)
                got = [tuple(r) for r in conn.execute(
                    f"SELECT id, k, v FROM {tbl} WHERE k IN (-3000 + {N * HOT_M}, -2, -1, -5, -6) ORDER BY id").fetchall()]
                conn.execute("COMMIT")
                if got != want:
                    fail(f"hot rows on {tbl} via k {'(index scan)' if sets else '(seq scan)'}: got {got}, want {want}")
                    return 1
        ser = {k: sum(t.stats.get(k, 0) for t in workers) for k in ("40001_" + HEAP, "40001_" + SCOOT)}
        log(f"hot rows: no lost updates on either table ({want}); REPEATABLE READ retries: {ser}")

        # ---------------------------------------------------------------- final VACUUM + re-check
        before = scoot_dead_rows(admin)
        vacuum_both(admin)
        after = scoot_dead_rows(admin)
        log(f"final VACUUM: scoot (live, dead, blocks) {tuple(before)} -> {tuple(after)}")
        if not compare_tables("after final VACUUM", ch, cs):
            return 1
        n_heap = ch.execute(f"SELECT count(*) FROM {HEAP}").fetchone()[0]
        if after is None or after[0] != n_heap:
            fail(f"scoot.arena_tables live_rows {after and after[0]} != count(*) {n_heap} after VACUUM")
            return 1
        log("after final VACUUM: contents and queries identical")
        ch.close(); cs.close()
        rc = 0
    finally:
        failed.set() if rc else None
        if vac is not None:
            vac.stop.set()
        for t in workers:
            for c in (t.ch, t.cs):
                try:
                    c.cancel()
                except Exception:
                    pass
                try:
                    c.close()
                except Exception:
                    pass
        try:
            admin.execute("SET lock_timeout = '20s'")
            admin.execute(f"DROP TABLE IF EXISTS {HEAP}, {SCOOT}")
        except psycopg.Error as e:
            print(f"cleanup: DROP TABLE failed: {e}")
        admin.close()
    return rc


if __name__ == "__main__":
    try:
        rc = main()
    except Exception:
        traceback.print_exc()
        rc = 1
    if rc == 0 and fail_msgs:
        rc = 1
    print("PASS" if rc == 0 else "FAIL: " + (fail_msgs[0].splitlines()[0] if fail_msgs else "see above"), flush=True)
    sys.stdout.flush()
    os._exit(rc)
