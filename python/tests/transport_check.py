"""Transport checks of scoot.arrow_stream (run by sql-tests/scenarios/91_arrow_transport.sh against
its own cluster, which listens on localhost with TLS). Usage: transport_check.py <cluster dir> <port>.
Exits non-zero after printing every failed check."""
import os
import subprocess
import sys
import time

import psycopg
import pyarrow as pa
import pyarrow.ipc as ipc

import pg_scoot

DIR, PORT = sys.argv[1], sys.argv[2]
UNIX = f"host={DIR} port={PORT} user=postgres dbname=postgres"
TCP = f"host=localhost port={PORT} user=postgres dbname=postgres sslmode=disable"
TLS = f"host=localhost port={PORT} user=postgres dbname=postgres sslmode=require"
FAILS = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILS.append(what)


def connect(dsn):
    c = psycopg.connect(dsn, autocommit=True)
    c.execute("SET client_min_messages = warning")
    return c


def traced_sends(pid, run):
    """(send calls, bytes sent) of backend `pid` while run() runs, counted by strace"""
    log = f"/tmp/scoot_transport_strace.{pid}"
    tr = subprocess.Popen(["strace", "-q", "-e", "trace=sendto,write,writev,sendmsg", "-e",
                           "signal=none", "-o", log, "-p", str(pid)])
    time.sleep(1)   # attached
    result = run()
    time.sleep(0.5)
    tr.terminate()
    tr.wait()
    with open(log) as f:
        calls = [line for line in f if line.split("(")[0] in ("sendto", "write", "writev", "sendmsg")]
    os.unlink(log)
    sent = sum(int(line.rsplit("=", 1)[1].split()[0]) for line in calls if "= -1" not in line)
    return len(calls), sent, result


def sndbuf(pid):
    """SO_SNDBUF of the backend's client socket, from ss(8) (skmem tb), or None"""
    out = subprocess.run(["ss", "-xpm"], capture_output=True, text=True).stdout.splitlines()
    for i, line in enumerate(out):
        if f"pid={pid}," in line:
            for more in out[i:i + 2]:
                if "tb" in more:
                    return int(more.split("tb")[1].split(",")[0])
    return None


admin = connect(UNIX)
cols = ("id int8, s text, v varchar(40), c char(12), n numeric(14,3), w numeric(30,2), d date, "
        "ts timestamptz, f float8")
admin.execute("DROP TABLE IF EXISTS tr, tr_h")
admin.execute(f"CREATE TABLE tr ({cols}) USING scoot")
admin.execute(f"CREATE TABLE tr_h ({cols}) USING heap")
admin.execute("""INSERT INTO tr SELECT i, md5(i::text) || repeat('é', i % 7),
    CASE WHEN i % 10 = 0 THEN NULL ELSE 'v' || i END, 'c' || i % 1000, i / 1000.0,
    i * 12345.67, date '2001-01-01' + i % 3000, timestamptz '2020-01-01 00:00+00' + i * interval '1 s',
    i / 3.0 FROM generate_series(1, 400000) i""")
admin.execute("INSERT INTO tr_h SELECT * FROM tr")
admin.execute("SELECT scoot.freeze('tr')")
admin.execute("UPDATE tr SET s = 'updated' WHERE id % 50000 = 3")   # some blocks hot again
admin.execute("UPDATE tr_h SET s = 'updated' WHERE id % 50000 = 3")

want = {br: pg_scoot.read_arrow(admin, "tr_h", batch_rows=br).sort_by("id") for br in (1000, 65536)}
for name, dsn in (("unix socket", UNIX), ("tcp", TCP), ("tcp+tls", TLS)):
    c = connect(dsn)
    ssl = c.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()[0]
    check(ssl == (name == "tcp+tls"), f"{name}: pg_stat_ssl.ssl = {ssl}")
    for br in (1000, 65536):
        got = pg_scoot.read_arrow(c, "tr", batch_rows=br).sort_by("id")
        check(got.equals(want[br]), f"{name}, batch_rows {br}: {got.num_rows} rows equal heap's export")
    # the same connection afterwards: in protocol sync, notices and errors arrive whole
    notes = []
    c.add_notice_handler(lambda d: notes.append(d.message_primary))
    c.execute("SET client_min_messages = notice")
    c.execute("DO $$BEGIN RAISE NOTICE 'after the stream'; END$$")
    check(notes == ["after the stream"], f"{name}: a notice after the stream ({notes})")
    try:
        c.execute("SELECT 1 / 0")
        check(False, f"{name}: an error after the stream")
    except psycopg.errors.DivisionByZero:
        check(True, f"{name}: an error after the stream")
    check(c.execute("SELECT 41 + 1").fetchone()[0] == 42, f"{name}: a query after the stream")
    # inside a transaction and through a server-side cursor (chunks fetched by FETCH)
    with c.transaction():
        got = pa.Table.from_batches(list(pg_scoot.stream_batches(c, "tr", batch_rows=20000)))
    check(got.sort_by("id").equals(want[65536]), f"{name}: stream_batches (cursor) equals heap's export")
    # cut by statement_timeout while the client reads slowly, then the connection goes on (five
    # streams, 250 MB: more than loopback TCP buffers, up to 32 MB here, could hold)
    c.execute("SET statement_timeout = '700ms'")
    n, t0 = 0, time.time()
    try:
        with c.cursor(binary=True) as cur:
            for _ in cur.stream("SELECT scoot.arrow_stream('tr', batch_rows => 1000) "
                                "FROM generate_series(1, 5)"):
                n += 1
                time.sleep(0.02)
        check(False, f"{name}: statement_timeout cuts a slowly read stream (read {n} chunks "
                     f"in {time.time() - t0:.1f} s, no error)")
    except psycopg.errors.QueryCanceled:
        check(True, f"{name}: statement_timeout cuts a slowly read stream (after {n} chunks, "
                    f"{time.time() - t0:.1f} s)")
    c.execute("RESET statement_timeout")
    check(c.execute("SELECT count(*) FROM tr").fetchone()[0] == 400000, f"{name}: a query after the cut")
    c.close()

# COPY of the stream carries the same bytes as the chunks
c = connect(UNIX)
chunks = [bytes(r[0]) for r in c.cursor(binary=True).execute(
    "SELECT scoot.arrow_stream('tr', batch_rows => 50000)")]
copied = bytearray()
with c.cursor().copy("COPY (SELECT scoot.arrow_stream('tr', batch_rows => 50000)) TO STDOUT "
                     "(FORMAT binary)") as cp:
    for b in cp:
        copied += b
body = bytes(copied[19:-2])   # binary COPY: 19-byte header, trailer -1; each row: int16 1, int32 len
out, k = [], 0
while k < len(body):
    n = int.from_bytes(body[k + 2:k + 6], "big", signed=True)
    out.append(body[k + 6:k + 6 + n])
    k += 6 + n
check(out == chunks, f"COPY TO STDOUT carries the {len(chunks)} chunks byte for byte")
check(ipc.open_stream(b"".join(out)).read_all().num_rows == 400000, "the copied stream reads back")

# far fewer write calls than 8 kB pieces; the socket's send buffer comes back to its size
pid = c.info.backend_pid
before_buf = sndbuf(pid)
calls, sent, nbytes = traced_sends(pid, lambda: sum(
    len(r[0]) for r in c.cursor(binary=True).execute("SELECT scoot.arrow_stream('tr')")))
check(nbytes > 30_000_000 and sent > nbytes, f"the stream is {nbytes} bytes, {sent} bytes were sent")
check(calls < nbytes / 8192 / 4,
      f"{calls} send calls for {nbytes} bytes (8 kB pieces would take {nbytes // 8192})")
# a heap table's rows go PostgreSQL's own way: the same count would show 8 kB pieces
hcalls, hsent, _ = traced_sends(pid, lambda: c.execute(
    "SELECT string_agg(s, '') FROM tr_h GROUP BY id % 4").fetchall())
check(hcalls >= hsent // 8192, f"ordinary results: {hcalls} send calls for {hsent} bytes")
after_buf = sndbuf(pid)
check(before_buf is not None and after_buf == before_buf,
      f"send buffer before {before_buf}, after the stream {after_buf}")
c.close()

# a client that dies mid-stream ends its backend only
code = ("import psycopg, os, sys\n"
        f"c = psycopg.connect({UNIX!r})\n"
        "print(c.info.backend_pid, flush=True)\n"
        "it = c.cursor(binary=True).stream(\"SELECT scoot.arrow_stream('tr', batch_rows => 2000)\")\n"
        "next(it)\n"
        "os._exit(0)\n")
p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
dead = int(p.stdout.strip())
gone = False
for _ in range(100):
    if admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (dead,)).fetchone()[0] == 0:
        gone = True
        break
    time.sleep(0.1)
check(gone, "the backend of a client that died mid-stream ended")

# pg_terminate_backend of a reader whose client stopped reading (backend blocked in send)
c = connect(UNIX)
pid = c.info.backend_pid
it = c.cursor(binary=True).stream("SELECT scoot.arrow_stream('tr', batch_rows => 2000)")
next(it)
time.sleep(0.5)
state = admin.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
try:
    for _ in it:
        pass
    check(False, f"a terminated reader (waiting on {state}) gets an error")
except psycopg.OperationalError:
    check(True, f"a terminated reader (waiting on {state}) gets an error")
check(admin.execute("SELECT count(*) FROM tr").fetchone()[0] == 400000, "other sessions go on")
admin.execute("DROP TABLE tr, tr_h")
if FAILS:
    print(f"{len(FAILS)} check(s) failed")
    sys.exit(1)
print("all transport checks passed")
