"""scoot.arrow_stream and the pg_scoot Python package against a live server (PG* environment;
run by sql-tests/scenarios/90_arrow_export.sh in the README test command).

Every exported value is compared with what psycopg reads for the same row with a plain SELECT."""
import datetime
import decimal
import math
import os
import threading
import time
import uuid

import psycopg
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

import pg_scoot

DSN = os.environ.get("SCOOT_DSN", "")


@pytest.fixture
def conn():
    c = psycopg.connect(DSN, autocommit=True)
    c.execute("SET client_min_messages = warning")
    yield c
    c.close()


def chunks_table(c, sql, *args):
    data = b"".join(r[0] for r in c.cursor(binary=True).execute(sql, args))
    return ipc.open_stream(data).read_all()


ALL_TYPES = """id int, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, b bool, d date, ts timestamp,
  tz timestamptz, t time, iv interval, n numeric(12,2), nw numeric(38,6), nx numeric(38,0), nu numeric,
  tx text, vc varchar(10), ch char(3), by bytea, u uuid, j json, jb jsonb, nm name"""

ROWS = [
    "(1, 1, 2, 3, 1.5, 'NaN', true, '2024-02-29', '2024-01-01 12:34:56.789', '2024-01-01 00:00+02', "
    "'13:14:15', '1 year 2 mons 3 days 04:05:06.5', 12.34, 12345678901234567890123456789012.123456, "
    "99999999999999999999999999999999999999, 'NaN', 'héllo wörld', 'abcdefghij', 'x', '\\x00ff', "
    "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": 1}', '{\"b\": [1, 2]}', 'nm')",
    "(2, NULL, NULL, NULL, NULL, '-Infinity', NULL, 'infinity', 'infinity', '-infinity', NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(3, -32768, -2147483648, -9223372036854775808, '-inf', 0, false, '1970-01-01', '1970-01-01', "
    "'1999-12-31 23:59:59.999999+00', '24:00', '-1 day -00:00:00.000001', -0.01, "
    "-99999999999999999999999999999999.999999, -99999999999999999999999999999999999999, 1e100, '', "
    "'', '', '', '00000000-0000-0000-0000-000000000000', '[]', 'null', '')",
    "(4, 32767, 2147483647, 9223372036854775807, 'inf', 1e308, true, '4713-01-01 BC', "
    "'294246-12-31 23:59:59', '4714-11-24 00:00+00 BC', '00:00:00.000001', '-178000000 years', 0.00, "
    "0.000001, 0, -0.0000000001, repeat('z', 3000), 'ß', 'é', decode(repeat('ab', 5000), 'hex'), "
    "'ffffffff-ffff-ffff-ffff-ffffffffffff', '\"s\"', '{\"k\": {\"n\": null}}', repeat('n', 63))",
]


def expected_value(col, v):
    """psycopg's value of `col` as pyarrow's to_pylist() gives the exported one."""
    if v is None:
        return None
    if col == "tz":
        return v.astimezone(datetime.timezone.utc)
    if col == "by":
        return bytes(v)
    if col == "u":
        return v.bytes
    return v


@pytest.fixture
def all_types(conn):
    conn.execute("DROP TABLE IF EXISTS ar_types")
    conn.execute(f"CREATE TABLE ar_types ({ALL_TYPES}) USING scoot")
    conn.execute("INSERT INTO ar_types VALUES " + ", ".join(ROWS))
    yield "ar_types"
    conn.execute("DROP TABLE ar_types")


def test_schema_maps_every_type(conn, all_types):
    t = pg_scoot.read_arrow(conn, all_types)
    want = {
        "id": pa.int32(), "i2": pa.int16(), "i4": pa.int32(), "i8": pa.int64(), "f4": pa.float32(),
        "f8": pa.float64(), "b": pa.bool_(), "d": pa.date32(), "ts": pa.timestamp("us"),
        "tz": pa.timestamp("us", tz="UTC"), "t": pa.time64("us"), "iv": pa.month_day_nano_interval(),
        "n": pa.decimal128(12, 2), "nw": pa.decimal128(38, 6), "nx": pa.decimal128(38, 0),
        "nu": pa.string(), "tx": pa.string(), "vc": pa.string(), "ch": pa.string(), "by": pa.binary(),
        "u": pa.binary(16), "j": pa.string(), "jb": pa.string(), "nm": pa.string(),
    }
    assert {f.name: f.type for f in t.schema} == want
    assert t.num_rows == len(ROWS)


def test_values_round_trip(conn, all_types):
    t = pg_scoot.read_arrow(conn, all_types)
    got = {r["id"]: r for r in t.select([c for c in t.column_names if c not in ("d", "ts", "tz", "t", "iv")]).to_pylist()}
    cur = conn.cursor()
    cur.execute("SELECT id, i2, i4, i8, f4, f8, b, n, nw, nx, nu::text, tx, vc, ch, by, u, j::text, "
                "jb::text, nm::text FROM ar_types")
    names = [d.name for d in cur.description]
    for row in cur.fetchall():
        r = dict(zip(names, row))
        g = got[r["id"]]
        for col, v in r.items():
            e = expected_value(col, v)
            if isinstance(e, float) and math.isnan(e):
                assert math.isnan(g[col]), col
            else:
                assert g[col] == e, (r["id"], col, g[col], e)


def test_dates_times_intervals_as_integers(conn, all_types):
    """date32 / timestamp / time64 / interval values compared as the integers Arrow stores
    (Python's datetime cannot hold infinity, 24:00 or year 294276)."""
    t = pg_scoot.read_arrow(conn, all_types, columns=["id", "d", "ts", "tz", "t", "iv"])
    ids = t.column("id").to_pylist()
    d = t.column("d").cast(pa.int32()).to_pylist()
    ts = t.column("ts").cast(pa.int64()).to_pylist()
    tz = t.column("tz").cast(pa.int64()).to_pylist()
    tm = t.column("t").cast(pa.int64()).to_pylist()
    iv = t.column("iv").to_pylist()
    cur = conn.execute(
        "SELECT id, CASE WHEN isfinite(d) THEN d - date '1970-01-01' END, "
        "CASE WHEN isfinite(ts) THEN (extract(epoch FROM ts) * 1000000)::int8 END, "
        "CASE WHEN isfinite(tz) THEN (extract(epoch FROM tz) * 1000000)::int8 END, "
        "(extract(epoch FROM t) * 1000000)::int8, "
        "extract(year FROM iv)::int * 12 + extract(month FROM iv)::int, extract(day FROM iv)::int, "
        "(extract(epoch FROM iv - date_trunc('day', iv)) * 1000000)::int8, "
        "d::text, ts::text, tz::text FROM ar_types")
    rows = {r[0]: r for r in cur.fetchall()}
    for i, k in enumerate(ids):
        r = rows[k]
        for got, want, txt in ((d[i], r[1], r[8]), (ts[i], r[2], r[9]), (tz[i], r[3], r[10])):
            if txt is None:
                assert got is None
            elif txt in ("infinity", "-infinity"):
                bits = 32 if got is not None and abs(got) < 2**40 else 64
                assert got == (2 ** (bits - 1) - 1 if txt == "infinity" else -(2 ** (bits - 1))), (k, txt, got)
            else:
                assert got == want, (k, txt, got, want)
        assert tm[i] == r[4]
        if iv[i] is not None:
            assert (iv[i].months, iv[i].days) == (r[5], r[6]), k
            assert iv[i].nanoseconds == r[7] * 1000, (k, iv[i], r[7])


def test_empty_and_single_row(conn):
    conn.execute("DROP TABLE IF EXISTS ar_small; CREATE TABLE ar_small (a int, s text) USING scoot")
    t = pg_scoot.read_arrow(conn, "ar_small")
    assert t.num_rows == 0 and t.schema.names == ["a", "s"]
    conn.execute("INSERT INTO ar_small VALUES (NULL, NULL)")
    assert pg_scoot.read_arrow(conn, "ar_small").to_pylist() == [{"a": None, "s": None}]
    conn.execute("DROP TABLE ar_small")


def test_many_blocks_batches_toast_and_column_order(conn):
    conn.execute("DROP TABLE IF EXISTS ar_big")
    conn.execute("CREATE TABLE ar_big (id int8, v numeric(15,2), s text, c char(1)) USING scoot")
    conn.execute("INSERT INTO ar_big SELECT i, i / 100.0, CASE WHEN i % 1000 = 0 THEN repeat(md5(i::text), 200) "
                 "WHEN i % 7 = 0 THEN NULL ELSE 's' || i END, chr(65 + i % 3) FROM generate_series(1, 120000) i")
    # out-of-line (TOAST table) values, uncompressible
    conn.execute("UPDATE ar_big SET s = (SELECT string_agg(md5(g::text || id::text), '') FROM generate_series(1, 300) g) "
                 "WHERE id IN (5, 77777)")
    t = pg_scoot.read_arrow(conn, "ar_big", columns=["s", "id"], batch_rows=7000)
    assert t.schema.names == ["s", "id"]
    assert t.num_rows == 120000
    want = dict(conn.execute("SELECT id, s FROM ar_big").fetchall())
    got = dict(zip(t.column("id").to_pylist(), t.column("s").to_pylist()))
    assert got == want
    # batch sizes: all full but the last
    data = b"".join(r[0] for r in conn.cursor(binary=True).execute(
        "SELECT chunk FROM scoot.arrow_stream('ar_big', batch_rows => 7000) chunk"))
    sizes = [b.num_rows for b in ipc.open_stream(data)]
    assert sum(sizes) == 120000 and all(s == 7000 for s in sizes[:-1]) and 0 < sizes[-1] <= 7000
    s = conn.execute("SELECT sum(v), count(*) FILTER (WHERE c = 'B') FROM ar_big").fetchone()
    t = pg_scoot.read_arrow(conn, "ar_big", columns=["v", "c"])
    assert sum(t.column("v").to_pylist()) == s[0]
    assert t.column("c").to_pylist().count("B") == s[1]
    conn.execute("DROP TABLE ar_big")


def test_frozen_hot_and_mixed_blocks_equal_heap(conn, all_types):
    """Frozen blocks go out by copying column buffers (gathered text): the export of an all-frozen,
    a mixed (some blocks thawed by writes, some rows deleted) and an all-hot table equals the
    export of the same rows from heap, and the every-type table still round-trips when frozen."""
    conn.execute("DROP TABLE IF EXISTS ar_fz, ar_fz_h")
    cols = "id int8, a int4, f float8, s text, v varchar(20), n numeric(12,2), d date"
    conn.execute(f"CREATE TABLE ar_fz ({cols}) USING scoot")
    conn.execute(f"CREATE TABLE ar_fz_h ({cols}) USING heap")
    conn.execute("INSERT INTO ar_fz SELECT i, CASE WHEN i % 13 = 0 THEN NULL ELSE i * 3 END, i / 7.0, "
                 "CASE WHEN i % 9 = 0 THEN NULL WHEN i % 5000 = 0 THEN repeat(md5(i::text), 300) "
                 "ELSE repeat('é', i % 5) || i END, 'v' || i, i / 100.0, date '2020-01-01' + i % 999 "
                 "FROM generate_series(1, 150000) i")
    conn.execute("INSERT INTO ar_fz_h SELECT * FROM ar_fz")

    def same():
        a = pg_scoot.read_arrow(conn, "ar_fz", batch_rows=10000)
        b = pg_scoot.read_arrow(conn, "ar_fz_h", batch_rows=10000)
        assert a.schema == b.schema
        assert a.num_rows == b.num_rows
        assert a.sort_by("id").equals(b.sort_by("id"))

    same()  # all hot
    assert conn.execute("SELECT scoot.freeze('ar_fz')").fetchone()[0] > 1
    temps = dict(conn.execute("SELECT temperature, blocks FROM scoot.blocks "
                              "WHERE relation = 'ar_fz'::regclass").fetchall())
    assert temps["hot"] == 0 and temps["frozen"] > 1
    same()  # all frozen
    for t in ("ar_fz", "ar_fz_h"):
        conn.execute(f"UPDATE {t} SET s = 'upd' || id, a = -a WHERE id % 40000 = 1")
        conn.execute(f"DELETE FROM {t} WHERE id BETWEEN 70000 AND 70100")
    temps = dict(conn.execute("SELECT temperature, blocks FROM scoot.blocks "
                              "WHERE relation = 'ar_fz'::regclass").fetchall())
    assert temps["hot"] > 0 and temps["frozen"] > 0
    same()  # mixed
    conn.execute("VACUUM ar_fz")
    conn.execute("SELECT scoot.freeze('ar_fz')")
    same()
    conn.execute("DROP TABLE ar_fz, ar_fz_h")
    conn.execute(f"SELECT scoot.freeze('{all_types}')")
    test_values_round_trip(conn, all_types)


def test_column_ranges_equal_heap(conn):
    """Runs of consecutive visible rows (insert-only hot blocks, frozen blocks) are converted a
    column range at a time: char(n) cells copied whole when every value fills its cell, dates and
    timestamps shifted in one loop, scaled-integer numerics widened in one loop. Checked against
    the same rows from heap (converted datum by datum): full and short char(n) values (multibyte
    characters leave NUL padding), NULLs in some batches and not in others, +-infinity, both
    numeric widths; then NaN and an out-of-range timestamp deep inside a run, next to NULLs."""
    conn.execute("DROP TABLE IF EXISTS ar_rg, ar_rg_h")
    cols = ("id int8, c3 char(3), c10 char(10), v8 varchar(8), n64 numeric(12,2), "
            "n128 numeric(30,4), d date, ts timestamp, tz timestamptz")
    conn.execute(f"CREATE TABLE ar_rg ({cols}) USING scoot")
    conn.execute(f"CREATE TABLE ar_rg_h ({cols}) USING heap")
    # ids < 30000: no NULL at all (every batch of 10000 rows without NULLs); above: NULLs
    conn.execute("""INSERT INTO ar_rg SELECT i,
        CASE WHEN i >= 30000 AND i % 7 = 0 THEN NULL WHEN i % 11 = 0 THEN 'é' ELSE 'abc' END,
        CASE WHEN i >= 30000 AND i % 5 = 0 THEN NULL ELSE lpad(i::text, 10, 'x') END,
        CASE WHEN i % 3 = 0 THEN 'ü' || i % 100 ELSE 'v' || i % 1000 END,
        CASE WHEN i >= 30000 AND i % 6 = 0 THEN NULL ELSE (i - 40000) / 100.0 END,
        CASE WHEN i >= 30000 AND i % 4 = 0 THEN NULL ELSE (i - 40000) * 1234567890.1234 END,
        CASE WHEN i % 1000 = 1 THEN 'infinity'::date WHEN i % 1000 = 2 THEN '-infinity'::date
             WHEN i >= 30000 AND i % 8 = 0 THEN NULL ELSE date '1999-12-25' + i % 5000 END,
        CASE WHEN i % 1000 = 3 THEN 'infinity'::timestamp WHEN i >= 30000 AND i % 9 = 0 THEN NULL
             ELSE timestamp '1969-12-31 23:59:59.5' + i * interval '1 minute' END,
        CASE WHEN i % 1000 = 4 THEN '-infinity'::timestamptz
             ELSE timestamptz '2000-01-01 00:00+00' - i * interval '1 hour' END
        FROM generate_series(1, 60000) i""")
    conn.execute("INSERT INTO ar_rg_h SELECT * FROM ar_rg")

    def same():
        for br in (10000, 65536):
            a = pg_scoot.read_arrow(conn, "ar_rg", batch_rows=br)
            b = pg_scoot.read_arrow(conn, "ar_rg_h", batch_rows=br)
            assert a.schema == b.schema
            assert a.sort_by("id").equals(b.sort_by("id"))
        return a

    t = same()  # hot, insert-only
    assert t.column("c3").to_pylist()[10] == "é  "  # char(n) keeps its padding
    assert conn.execute("SELECT scoot.freeze('ar_rg')").fetchone()[0] > 0
    same()  # frozen
    # values without an Arrow form deep inside a frozen run, next to NULLs
    conn.execute("CREATE TABLE ar_rg_bad (id int, n numeric(12,2), ts timestamp) USING scoot")
    conn.execute("""INSERT INTO ar_rg_bad SELECT i, CASE WHEN i % 2 = 0 THEN NULL ELSE i END,
        CASE WHEN i % 2 = 0 THEN NULL ELSE timestamp '2000-01-01' END FROM generate_series(1, 9000) i""")
    conn.execute("UPDATE ar_rg_bad SET n = 'NaN', ts = '294276-12-31 23:59:59' WHERE id = 8001")
    conn.execute("VACUUM ar_rg_bad")
    conn.execute("SELECT scoot.freeze('ar_rg_bad')")
    assert pg_scoot.read_arrow(conn, "ar_rg_bad", columns=["id"]).num_rows == 9000
    with pytest.raises(psycopg.errors.FeatureNotSupported, match='column "n" holds NaN'):
        pg_scoot.read_arrow(conn, "ar_rg_bad", columns=["n"])
    with pytest.raises(psycopg.errors.DatetimeFieldOverflow, match='column "ts" is out of range'):
        pg_scoot.read_arrow(conn, "ar_rg_bad", columns=["ts"])
    conn.execute("DELETE FROM ar_rg_bad WHERE id = 8001")
    assert pg_scoot.read_arrow(conn, "ar_rg_bad", columns=["n", "ts"]).column("n").null_count == 4500
    conn.execute("DROP TABLE ar_rg, ar_rg_h, ar_rg_bad")


def test_read_arrow_keeps_received_chunks(conn):
    """read_arrow's arrays point into the chunks psycopg received (no copy): the table stays
    intact after its cursor, the connection and every other reference are gone."""
    import gc
    conn.execute("DROP TABLE IF EXISTS ar_keep")
    conn.execute("CREATE TABLE ar_keep (id int, s text) USING scoot")
    conn.execute("INSERT INTO ar_keep SELECT i, md5(i::text) FROM generate_series(1, 50000) i")
    want = [(r[0], r[1]) for r in conn.execute("SELECT id, s FROM ar_keep ORDER BY id")]
    c2 = psycopg.connect(DSN, autocommit=True)
    t = pg_scoot.read_arrow(c2, "ar_keep", batch_rows=5000)
    c2.close()
    del c2
    gc.collect()
    junk = [bytes(1 << 20) for _ in range(64)]  # reuse of freed memory would show below
    t = t.sort_by("id")
    assert list(zip(t.column("id").to_pylist(), t.column("s").to_pylist())) == want
    del junk
    conn.execute("DROP TABLE ar_keep")


def test_export_reads_olap_snapshot(conn):
    """With scoot.olap = on an export reads an OLAP snapshot image (pinned while the stream runs,
    seen in scoot.snapshots.readers), in an implicit transaction and in a REPEATABLE READ READ ONLY
    transaction (the transaction's image: the export equals the transaction's other reads, whatever
    another session commits meanwhile); with scoot.olap = off, or in a read-write transaction
    block, it reads live data and pins nothing."""
    conn.execute("DROP TABLE IF EXISTS ar_olap")
    conn.execute("CREATE TABLE ar_olap (id int8, s text) USING scoot")
    conn.execute("INSERT INTO ar_olap SELECT i, repeat('s', i % 50) FROM generate_series(1, 300000) i")
    c2 = psycopg.connect(DSN, autocommit=True)

    def readers():
        return c2.execute("SELECT coalesce(sum(readers), 0) FROM scoot.snapshots").fetchone()[0]

    def stream(sql):
        """(rows exported, readers seen after the first chunk) while c2 inserts meanwhile."""
        with conn.cursor(binary=True) as cur:
            it = cur.stream(sql)
            first = next(it)[0]
            r = readers()
            c2.execute("INSERT INTO ar_olap SELECT i, 'late' FROM generate_series(1, 1000) i")
            data = first + b"".join(row[0] for row in it)
        return ipc.open_stream(data).read_all().num_rows, r

    q = "SELECT scoot.arrow_stream('ar_olap', batch_rows => 500)"
    conn.execute("SET scoot.olap = off")
    n0 = conn.execute("SELECT count(*) FROM ar_olap").fetchone()[0]
    rows, r = stream(q)
    assert (rows, r) == (n0, 0)
    conn.execute("SET scoot.olap = on")
    conn.execute("SET scoot.snapshot_max_age = 0")  # every statement's image is taken after it starts
    n1 = conn.execute("SELECT count(*) FROM ar_olap").fetchone()[0]
    rows, r = stream(q)
    assert r >= 1 and rows == n1
    # a filtered export runs a query: it picks an image by the same rules
    n1 = conn.execute("SELECT count(*) FROM ar_olap WHERE id > 10").fetchone()[0]
    rows, r = stream("SELECT scoot.arrow_stream('ar_olap', batch_rows => 500, filter => 'id > 10')")
    assert r >= 1 and rows == n1
    # a read-write transaction block reads live data
    conn.execute("BEGIN")
    rows, r = stream(q)
    conn.execute("COMMIT")
    assert r == 0
    # REPEATABLE READ READ ONLY: one image for count(*) and the export, whatever c2 commits
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    n2 = conn.execute("SELECT count(*) FROM ar_olap").fetchone()[0]
    c2.execute("DELETE FROM ar_olap WHERE id <= 1000")
    rows, r = stream(q)
    n3 = conn.execute("SELECT count(*) FROM ar_olap").fetchone()[0]
    conn.execute("COMMIT")
    assert r >= 1 and rows == n2 == n3
    conn.execute("RESET scoot.olap")
    conn.execute("RESET scoot.snapshot_max_age")
    c2.close()
    conn.execute("DROP TABLE ar_olap")


def test_where_filter_and_other_tables(conn, all_types):
    t = pg_scoot.read_arrow(conn, all_types, columns=["id", "tx"], where="i4 < 0 OR tx = ''")
    assert t.to_pylist() == [{"id": 3, "tx": ""}]
    # the query path gives the same table as the block path
    a = pg_scoot.read_arrow(conn, all_types, columns=["id", "i8", "n", "tx", "by", "u", "jb", "nm"])
    b = pg_scoot.read_arrow(conn, all_types, columns=["id", "i8", "n", "tx", "by", "u", "jb", "nm"], where="true")
    assert a.sort_by("id").equals(b.sort_by("id"))
    # a heap table goes through a query
    conn.execute("DROP TABLE IF EXISTS ar_heap; CREATE TABLE ar_heap (a int, b text) USING heap")
    conn.execute("INSERT INTO ar_heap VALUES (1, 'x'), (2, NULL)")
    assert pg_scoot.read_arrow(conn, "ar_heap").sort_by("a").to_pylist() == [{"a": 1, "b": "x"}, {"a": 2, "b": None}]
    conn.execute("DROP TABLE ar_heap")


def test_added_column_default(conn):
    conn.execute("DROP TABLE IF EXISTS ar_add; CREATE TABLE ar_add (a int) USING scoot")
    conn.execute("INSERT INTO ar_add SELECT generate_series(1, 10)")
    conn.execute("ALTER TABLE ar_add ADD COLUMN b text DEFAULT 'dflt', ADD COLUMN c int")
    conn.execute("INSERT INTO ar_add VALUES (11, 'new', 5)")
    t = pg_scoot.read_arrow(conn, "ar_add").sort_by("a")
    assert t.column("b").to_pylist() == ["dflt"] * 10 + ["new"]
    assert t.column("c").to_pylist() == [None] * 10 + [5]
    conn.execute("DROP TABLE ar_add")


def test_errors_and_text_fallback(conn):
    conn.execute("DROP TABLE IF EXISTS ar_err")
    conn.execute("CREATE TABLE ar_err (p point, n numeric(10,2), a int[]) USING scoot")
    conn.execute("INSERT INTO ar_err VALUES ('(1,2)', 'NaN', '{{1,2},{3,4}}')")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match='column "p" has type point'):
        pg_scoot.read_arrow(conn, "ar_err")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match='column "n" holds NaN'):
        pg_scoot.read_arrow(conn, "ar_err", columns=["n"])
    with pytest.raises(psycopg.errors.FeatureNotSupported, match='column "a" holds a 2-dimensional array'):
        pg_scoot.read_arrow(conn, "ar_err", columns=["a"])
    with pytest.raises(psycopg.errors.UndefinedColumn, match='column "zz"'):
        pg_scoot.read_arrow(conn, "ar_err", columns=["zz"])
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        pg_scoot.read_arrow(conn, "ar_err", batch_rows=0)
    t = pg_scoot.read_arrow(conn, "ar_err", text_fallback=True)
    assert t.to_pylist() == [{"p": "(1,2)", "n": "NaN", "a": "{{1,2},{3,4}}"}]
    assert all(f.type == pa.string() for f in t.schema)
    # timestamps PostgreSQL accepts but 64-bit microseconds from 1970 cannot hold
    conn.execute("CREATE TABLE ar_far (ts timestamp) USING scoot")
    conn.execute("INSERT INTO ar_far VALUES ('294276-12-31 23:59:59')")
    with pytest.raises(psycopg.errors.DatetimeFieldOverflow, match='column "ts" is out of range'):
        pg_scoot.read_arrow(conn, "ar_far")
    conn.execute("DROP TABLE ar_far")
    conn.execute("DROP TABLE ar_err")


def test_arrays_and_enums(conn):
    conn.execute("DROP TABLE IF EXISTS ar_list; DROP TYPE IF EXISTS ar_mood")
    conn.execute("CREATE TYPE ar_mood AS ENUM ('sad', 'ok', 'happy')")
    conn.execute("CREATE TABLE ar_list (id int, ia int[], ta text[], na numeric(6,2)[], da date[], "
                 "m ar_mood, ma ar_mood[]) USING scoot")
    conn.execute("""INSERT INTO ar_list VALUES
        (1, '{1,NULL,3}', '{"a","b c",NULL}', '{1.50,-2.25}', '{2024-01-02}', 'ok', '{happy,sad}'),
        (2, '{}', '{}', NULL, '{}', NULL, '{}'),
        (3, NULL, NULL, '{NULL}', NULL, 'sad', NULL)""")
    conn.execute("INSERT INTO ar_list SELECT g, ARRAY[g, g + 1], ARRAY[g::text], NULL, NULL, "
                 "(ARRAY['sad','ok','happy']::ar_mood[])[g % 3 + 1], NULL FROM generate_series(4, 30000) g")
    t = pg_scoot.read_arrow(conn, "ar_list", batch_rows=7000)
    assert t.schema.field("ia").type == pa.list_(pa.int32())
    assert t.schema.field("ta").type == pa.list_(pa.string())
    assert t.schema.field("na").type == pa.list_(pa.decimal128(6, 2))
    assert t.schema.field("da").type == pa.list_(pa.date32())
    assert t.schema.field("m").type == pa.dictionary(pa.int32(), pa.string())
    assert t.schema.field("ma").type == pa.list_(pa.dictionary(pa.int32(), pa.string()))
    rows = {r["id"]: r for r in t.to_pylist()}
    assert rows[1] == {"id": 1, "ia": [1, None, 3], "ta": ["a", "b c", None],
                       "na": [decimal.Decimal("1.50"), decimal.Decimal("-2.25")],
                       "da": [datetime.date(2024, 1, 2)], "m": "ok", "ma": ["happy", "sad"]}
    assert rows[2] == {"id": 2, "ia": [], "ta": [], "na": None, "da": [], "m": None, "ma": []}
    assert rows[3] == {"id": 3, "ia": None, "ta": None, "na": [None], "da": None, "m": "sad", "ma": None}
    want = dict(conn.execute("SELECT id, m::text FROM ar_list").fetchall())
    assert {k: r["m"] for k, r in rows.items()} == want
    assert all(rows[g]["ia"] == [g, g + 1] for g in range(4, 30001))
    conn.execute("DROP TABLE ar_list; DROP TYPE ar_mood")


def test_privileges_and_row_level_security(conn):
    conn.execute("DROP TABLE IF EXISTS ar_priv; DROP ROLE IF EXISTS ar_reader")
    conn.execute("CREATE ROLE ar_reader")
    conn.execute("CREATE TABLE ar_priv (id int, secret text, owner name) USING scoot")
    conn.execute("INSERT INTO ar_priv VALUES (1, 's1', 'ar_reader'), (2, 's2', 'someone')")
    conn.execute("GRANT USAGE ON SCHEMA scoot TO ar_reader")
    conn.execute("SET ROLE ar_reader")
    try:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            pg_scoot.read_arrow(conn, "ar_priv")
        conn.execute("RESET ROLE")
        conn.execute("GRANT SELECT (id, owner) ON ar_priv TO ar_reader")
        conn.execute("SET ROLE ar_reader")
        assert pg_scoot.read_arrow(conn, "ar_priv", columns=["id"]).num_rows == 2
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            pg_scoot.read_arrow(conn, "ar_priv", columns=["id", "secret"])
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            pg_scoot.read_arrow(conn, "ar_priv", columns=["id", "secret"], where="true")
        assert pg_scoot.read_arrow(conn, "ar_priv", columns=["id"], where="id > 1").num_rows == 1
        conn.execute("RESET ROLE")
        conn.execute("GRANT SELECT ON ar_priv TO ar_reader")
        conn.execute("ALTER TABLE ar_priv ENABLE ROW LEVEL SECURITY")
        conn.execute("CREATE POLICY mine ON ar_priv FOR SELECT USING (owner = current_user)")
        conn.execute("SET ROLE ar_reader")
        # policies apply: only the reader's row
        assert pg_scoot.read_arrow(conn, "ar_priv").to_pylist() == [{"id": 1, "secret": "s1", "owner": "ar_reader"}]
        conn.execute("RESET ROLE")
        assert pg_scoot.read_arrow(conn, "ar_priv").num_rows == 2   # the owner bypasses
    finally:
        conn.execute("RESET ROLE")
        conn.execute("DROP TABLE ar_priv; REVOKE USAGE ON SCHEMA scoot FROM ar_reader; DROP ROLE ar_reader")


def test_consistent_while_others_write(conn):
    """A stream read batch by batch reflects its snapshot, while another session updates,
    deletes, inserts and vacuums between the batches."""
    conn.execute("DROP TABLE IF EXISTS ar_conc; CREATE TABLE ar_conc (id int, v int8) USING scoot")
    conn.execute("INSERT INTO ar_conc SELECT i, i FROM generate_series(1, 200000) i")
    other = psycopg.connect(DSN, autocommit=True)
    reader = psycopg.connect(DSN)
    try:
        with reader.transaction():
            reader.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            want = reader.execute("SELECT count(*), sum(v), sum(id * 7 + v) FROM ar_conc").fetchone()
            n = s = x = 0
            it = pg_scoot.stream_batches(reader, "ar_conc", batch_rows=5000)
            for i, b in enumerate(it):
                if i == 1:
                    other.execute("UPDATE ar_conc SET v = v + 1000000 WHERE id % 3 = 0")
                    other.execute("DELETE FROM ar_conc WHERE id % 5 = 0")
                    other.execute("INSERT INTO ar_conc SELECT i, i FROM generate_series(200001, 260000) i")
                    other.execute("VACUUM ar_conc")
                ids = b.column("id").to_pylist()
                vs = b.column("v").to_pylist()
                n += len(ids)
                s += sum(vs)
                x += sum(a * 7 + c for a, c in zip(ids, vs))
        assert (n, s, x) == tuple(want)
        # a new statement sees the writes
        now = other.execute("SELECT count(*), sum(v) FROM ar_conc").fetchone()
        t = pg_scoot.read_arrow(conn, "ar_conc")
        assert (t.num_rows, pa.compute.sum(t.column("v")).as_py()) == tuple(now)
    finally:
        other.close()
        reader.close()
        conn.execute("DROP TABLE ar_conc")


def move_amounts(table, n, amount, also, stop, done):
    """Until `stop` is set, commits transactions that move `amount` of column v from one row of
    `table` (ids 1..n) to another (the first row's update also sets `also`), keeping sum(v);
    counts them in done[0]."""
    w = psycopg.connect(DSN, autocommit=True)
    k = 0
    while not stop.is_set():
        k += 1
        a, b = (k * 7919) % n + 1, (k * 104729) % n + 1
        if a != b:
            with w.transaction():
                w.execute(f"UPDATE {table} SET v = v + {amount}{also} WHERE id = %s", (a,))
                w.execute(f"UPDATE {table} SET v = v - {amount} WHERE id = %s", (b,))
            done[0] += 1
    w.close()


def test_concurrent_writers_during_one_statement(conn):
    """read_arrow (one statement) while a thread commits updates all the time: the result is
    always one consistent state (the invariant sum(v) = 0 holds in every snapshot)."""
    conn.execute("DROP TABLE IF EXISTS ar_inv; CREATE TABLE ar_inv (id int PRIMARY KEY, v int8) USING scoot")
    conn.execute("INSERT INTO ar_inv SELECT i, 0 FROM generate_series(1, 50000) i")
    stop = threading.Event()
    th = threading.Thread(target=move_amounts, args=("ar_inv", 50000, 5, "", stop, [0]))
    th.start()
    try:
        for _ in range(15):
            t = pg_scoot.read_arrow(conn, "ar_inv", batch_rows=4000)
            assert t.num_rows == 50000
            assert pa.compute.sum(t.column("v")).as_py() == 0
    finally:
        stop.set()
        th.join()
        conn.execute("DROP TABLE ar_inv")


def test_column_subset_from_olap_snapshot_while_others_write(conn):
    """With scoot.olap = on, exporting some columns of a wide table reads blocks that writers
    changed since the snapshot as copies of those columns' pages only (the header, the row
    headers, their bitmaps and values): the invariant sum(v) = 0 and the untouched columns hold
    in every export, while a thread keeps moving amounts between rows."""
    conn.execute("DROP TABLE IF EXISTS ar_cols")
    conn.execute("CREATE TABLE ar_cols (id int PRIMARY KEY, v int8, pad char(40), w numeric(12,2), "
                 "t text) USING scoot")
    conn.execute("INSERT INTO ar_cols SELECT i, 0, 'p' || i, i / 4.0, md5(i::text) "
                 "FROM generate_series(1, 60000) i")
    want_w = conn.execute("SELECT sum(w) FROM ar_cols").fetchone()[0]
    stop = threading.Event()
    done = [0]
    reader = psycopg.connect(DSN, autocommit=True)
    reader.execute("SET scoot.olap = on")
    reader.execute("SET scoot.snapshot_max_age = 0")
    th = threading.Thread(target=move_amounts,
                          args=("ar_cols", 60000, 3, ", t = md5(random()::text)", stop, done))
    th.start()
    try:
        time.sleep(0.5)
        for _ in range(12):
            for cols in (["v"], ["id", "v", "w"]):
                t = pg_scoot.read_arrow(reader, "ar_cols", columns=cols, batch_rows=7000)
                assert t.num_rows == 60000
                assert pa.compute.sum(t.column("v")).as_py() == 0
                if "w" in cols:
                    assert sorted(t.column("id").to_pylist()) == list(range(1, 60001))
                    assert sum(t.column("w").to_pylist()) == want_w
        assert done[0] > 50, f"the writer committed only {done[0]} transfers"
    finally:
        stop.set()
        th.join()
        reader.close()
        conn.execute("DROP TABLE ar_cols")


def rss_anon_kb(pid):
    """The backend's private resident memory (palloc, malloc; not the shared arena)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError("no RssAnon")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_export_memory_is_bounded(conn):
    """The server exports batch by batch: its private memory stays far below the stream's size."""
    conn.execute("DROP TABLE IF EXISTS ar_mem")
    conn.execute("CREATE TABLE ar_mem (id int8, v numeric(15,2), s text, d date) USING scoot")
    conn.execute("INSERT INTO ar_mem SELECT i, i / 100.0, 'row ' || md5(i::text), date '2020-01-01' + i % 1000 "
                 "FROM generate_series(1, 1500000) i")
    pid = conn.info.backend_pid
    # the first export of a connection grows the backend once (code, allocator arenas): ~30 MB
    pg_scoot.read_arrow(conn, "ar_mem", batch_rows=65536, where="id <= 300000")
    base = rss_anon_kb(pid)
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.is_set():
            try:
                peak[0] = max(peak[0], rss_anon_kb(pid))
            except OSError:
                return
            done.wait(0.005)

    th = threading.Thread(target=sample)
    th.start()
    try:
        stream = b"".join(r[0] for r in conn.cursor(binary=True).execute(
            "SELECT chunk FROM scoot.arrow_stream('ar_mem', batch_rows => 65536) chunk"))
    finally:
        done.set()
        th.join()
    t = ipc.open_stream(stream).read_all()
    assert t.num_rows == 1500000
    grown_mb = (peak[0] - base) / 1024
    stream_mb = len(stream) / 1e6
    assert stream_mb > 60, stream_mb
    # a batch of 65536 rows is ~4 MB of Arrow; the whole stream is > 60 MB: memory per batch, not
    # per stream (a leak per batch or a materialised stream would grow by tens of MB)
    assert grown_mb < 16, f"backend grew {grown_mb:.1f} MB for a {stream_mb:.1f} MB stream"
    conn.execute("DROP TABLE ar_mem")


def test_cancel(conn):
    conn.execute("DROP TABLE IF EXISTS ar_cancel; CREATE TABLE ar_cancel (a int8, s text) USING scoot")
    conn.execute("INSERT INTO ar_cancel SELECT i, repeat('x', 50) FROM generate_series(1, 2000000) i")
    conn.execute("SET statement_timeout = '100ms'")
    with pytest.raises(psycopg.errors.QueryCanceled):
        pg_scoot.read_arrow(conn, "ar_cancel", batch_rows=1000)
    conn.execute("RESET statement_timeout")
    assert conn.execute("SELECT 1").fetchone() == (1,)
    conn.execute("DROP TABLE ar_cancel")


def test_pandas_polars_duckdb(conn, all_types):
    import duckdb
    import polars as pl

    cols = ["id", "i8", "f4", "n", "tx", "ch", "b"]
    df = pg_scoot.read_pandas(conn, all_types, columns=cols)
    assert list(df.columns) == cols and len(df) == len(ROWS)
    pdf = pg_scoot.read_polars(conn, all_types, columns=cols)
    assert isinstance(pdf, pl.DataFrame) and pdf.height == len(ROWS)
    assert pdf.sort("id")["tx"].to_list() == ["héllo wörld", None, "", "z" * 3000]
    # polars reads the raw IPC stream bytes too
    data = b"".join(r[0] for r in conn.cursor(binary=True).execute(
        "SELECT chunk FROM scoot.arrow_stream('ar_types', columns => %s) chunk", (cols,)))
    assert pl.read_ipc_stream(data).height == len(ROWS)
    tbl = pg_scoot.read_arrow(conn, all_types, columns=cols)
    r = duckdb.sql("SELECT count(*), sum(i8 % 1000), max(length(tx)) FROM tbl").fetchall()[0]
    want = conn.execute("SELECT count(*), sum(i8 % 1000), max(length(tx)) FROM ar_types").fetchone()
    assert r == want


def test_arrow_export_file(conn, all_types):
    """scoot.arrow_export writes an Arrow IPC file (random-access format) pyarrow and DuckDB open;
    it needs pg_write_server_files, and an error midway leaves no file."""
    import duckdb

    import pathlib
    import shutil
    import tempfile

    d = pathlib.Path(tempfile.mkdtemp(prefix="scoot_arrow_"))
    os.chmod(d, 0o777)   # the server (another OS user) writes here
    path = str(d / "types.arrow")
    n = conn.execute("SELECT scoot.arrow_export('ar_types', %s)", (path,)).fetchone()[0]
    assert n == len(ROWS)
    f = pa.ipc.open_file(path)
    t = f.read_all()
    s = pg_scoot.read_arrow(conn, all_types)
    assert t.schema == s.schema
    # the same values as the stream (NaN compares unequal: compare everything else)
    assert t.drop_columns(["f8"]).equals(s.drop_columns(["f8"]))
    tbl = t
    assert duckdb.sql("SELECT count(*), sum(i4) FROM tbl").fetchall()[0] == \
        conn.execute("SELECT count(*), sum(i4) FROM ar_types").fetchone()
    # columns, filter, batches
    p2 = str(d / "some.arrow")
    assert conn.execute("SELECT scoot.arrow_export('ar_types', %s, columns => ARRAY['id', 'tx'], "
                        "filter => 'id > 1', batch_rows => 1)", (p2,)).fetchone()[0] == 3
    f2 = pa.ipc.open_file(p2)
    assert f2.num_record_batches == 3 and f2.schema.names == ["id", "tx"]
    # an error midway (NaN in a decimal128 column of a later row) leaves no file behind
    conn.execute("DROP TABLE IF EXISTS ar_exp_err; CREATE TABLE ar_exp_err (n numeric(10,2)) USING scoot")
    conn.execute("INSERT INTO ar_exp_err SELECT g FROM generate_series(1, 100000) g")
    conn.execute("INSERT INTO ar_exp_err VALUES ('NaN')")
    p3 = str(d / "err.arrow")
    with pytest.raises(psycopg.errors.FeatureNotSupported):
        conn.execute("SELECT scoot.arrow_export('ar_exp_err', %s, batch_rows => 1000)", (p3,))
    assert not any(x.startswith("err.arrow") for x in os.listdir(d)), os.listdir(d)
    conn.execute("DROP TABLE ar_exp_err")
    with pytest.raises(psycopg.errors.InvalidName):
        conn.execute("SELECT scoot.arrow_export('ar_types', 'relative.arrow')")
    # privileges: not for ordinary roles
    conn.execute("DROP ROLE IF EXISTS ar_nofile; CREATE ROLE ar_nofile")
    conn.execute("GRANT USAGE ON SCHEMA scoot TO ar_nofile; GRANT SELECT ON ar_types TO ar_nofile")
    conn.execute("SET ROLE ar_nofile")
    try:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT scoot.arrow_export('ar_types', %s)", (str(d / "x.arrow"),))
    finally:
        conn.execute("RESET ROLE")
        conn.execute("REVOKE ALL ON ar_types FROM ar_nofile; REVOKE USAGE ON SCHEMA scoot FROM ar_nofile; "
                     "DROP ROLE ar_nofile")
    assert not os.path.exists(d / "x.arrow")
    shutil.rmtree(d, ignore_errors=True)
