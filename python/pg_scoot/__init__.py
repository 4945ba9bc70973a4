"""Read pg_scoot tables as Apache Arrow.

    import psycopg
    from pg_scoot import read_arrow
    conn = psycopg.connect("dbname=app")
    tbl = read_arrow(conn, "lineitem", columns=["l_orderkey", "l_quantity"],
                     where="l_shipdate >= '1998-01-01'")
    df = tbl.to_pandas()            # or read_pandas(...), read_polars(...)

The server streams the table with ``scoot.arrow_stream`` as Arrow IPC (record batches built
from the table's column blocks); this module only concatenates the chunks and opens the stream.
The rows are those of one snapshot: the statement's (READ COMMITTED) or the transaction's
(REPEATABLE READ), whatever other sessions write meanwhile.
"""
import psycopg
import pyarrow as pa
import pyarrow.ipc as ipc
from psycopg.adapt import Loader

__all__ = ["read_arrow", "read_pandas", "read_polars", "stream_batches"]


def _query(table, columns, where, batch_rows, text_fallback):
    args = [str(table)]
    # in the select list (not FROM) the chunks stream out as they are made: a set-returning
    # function in FROM is first collected into a tuplestore by PostgreSQL
    sql = "SELECT scoot.arrow_stream(%s::regclass"
    if columns is not None:
        sql += ", columns => %s::text[]"
        args.append(list(columns))
    if batch_rows is not None:
        sql += ", batch_rows => %s"
        args.append(int(batch_rows))
    if text_fallback:
        sql += ", text_fallback => true"
    if where is not None:
        sql += ", filter => %s"
        args.append(where)
    return sql + ") AS chunk", args


class _ChunkReader:
    """A file-like object over the bytea chunks of a server-side cursor (streams, bounded memory)."""

    def __init__(self, cursor):
        self._cur = cursor
        self._buf = memoryview(b"")
        self._done = False

    def read(self, n=-1):
        out = []
        want = n
        while (want < 0 or want > 0) and not self._done:
            if not self._buf:
                row = self._cur.fetchone()
                if row is None:
                    self._done = True
                    break
                self._buf = memoryview(row[0])
            take = len(self._buf) if want < 0 else min(want, len(self._buf))
            out.append(self._buf[:take].tobytes())
            self._buf = self._buf[take:]
            if want > 0:
                want -= take
        return b"".join(out)

    @property
    def closed(self):
        return False


def stream_batches(conn, table, columns=None, where=None, batch_rows=None, text_fallback=False):
    """Yields the table's pyarrow.RecordBatch-es as they arrive (a server-side cursor; memory stays
    bounded by a few batches). `conn` is a psycopg 3 connection; the stream runs in its current
    transaction (or a new one, committed at the end, if it is in autocommit mode)."""
    sql, args = _query(table, columns, where, batch_rows, text_fallback)
    with conn.transaction():
        with conn.cursor(name="pg_scoot_arrow", binary=True) as cur:
            cur.itersize = 4
            cur.execute(sql, args)
            reader = ipc.open_stream(_ChunkReader(cur))
            for batch in reader:
                yield batch


class _ChunkLoader(Loader):
    """bytea (binary format) as the buffer psycopg hands the loader, not as a bytes copy: with
    psycopg's C implementation a memoryview of the libpq result, which it keeps alive; the
    Arrow arrays then point into the received chunks (no copy of the data in the client)."""

    format = psycopg.pq.Format.BINARY

    def load(self, data):
        return data


def read_arrow(conn, table, columns=None, where=None, batch_rows=None, text_fallback=False):
    """The table (or `columns` of it, rows matching `where`) as a pyarrow.Table."""
    sql, args = _query(table, columns, where, batch_rows, text_fallback)
    with conn.cursor(binary=True) as cur:
        cur.adapters.register_loader("bytea", _ChunkLoader)
        # rows as they arrive (libpq single-row mode): no result set of the whole table first
        return _table_from_chunks(r[0] for r in cur.stream(sql, args))


def _table_from_chunks(chunks):
    """The stream's table without copying: every chunk holds whole IPC messages (the server
    cuts the stream between messages), so each is read in place and the arrays point into it."""
    chunks = iter(chunks)
    first = next(chunks, None)
    if first is None:
        raise ValueError("scoot.arrow_stream returned no data")
    first_msg = next(iter(ipc.MessageReader.open_stream(pa.py_buffer(first))))
    schema = ipc.read_schema(first_msg)
    if _has_dictionary(schema):
        # dictionary messages (enums) need pyarrow's stream reader: read the concatenation
        return ipc.open_stream(pa.py_buffer(b"".join([first, *chunks]))).read_all()
    batches = []
    for n, chunk in enumerate(_chain(first, chunks)):
        for k, msg in enumerate(ipc.MessageReader.open_stream(pa.py_buffer(chunk))):
            if n == 0 and k == 0:
                continue       # the schema message
            batches.append(ipc.read_record_batch(msg, schema))
    return pa.Table.from_batches(batches, schema)


def _chain(first, rest):
    yield first
    yield from rest


def _has_dictionary(t):
    if isinstance(t, pa.Schema):
        return any(_has_dictionary(f.type) for f in t)
    if pa.types.is_dictionary(t):
        return True
    return any(_has_dictionary(t.field(i).type) for i in range(t.num_fields)) if t.num_fields else False


def read_pandas(conn, table, **kw):
    """read_arrow(...).to_pandas()"""
    return read_arrow(conn, table, **kw).to_pandas()


def read_polars(conn, table, **kw):
    """read_arrow(...) as a polars.DataFrame"""
    import polars as pl

    return pl.from_arrow(read_arrow(conn, table, **kw))
