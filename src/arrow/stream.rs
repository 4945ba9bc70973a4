//! Streaming a scoot table out as Arrow IPC, one `bytea` chunk per call of the set-returning
//! function, memory bounded by the batch size whatever the table's size.
//!
//! Two sources of rows:
//! - **Blocks** (a scoot table, no filter, no row-level security for the caller): every call
//!   opens a short scan with the statement's active snapshot (the same snapshot for all calls of
//!   one statement) and continues at the block after the last one it read, so the stream is
//!   exactly the rows that snapshot sees, whatever concurrent writers do. Rows go from the
//!   share-locked block's column regions into the converters (no row is formed). No PostgreSQL
//!   resource (relation reference, scan) is held between calls: an aborted or abandoned stream
//!   leaves nothing to clean up but memory.
//! - **Query** (a `filter`, row-level security, or a table of another access method): an SPI
//!   cursor over `SELECT columns FROM table WHERE filter`, opened once (its snapshot is the
//!   statement's), fetched `batch_rows` rows per call; the executor applies privileges and
//!   policies, the converters take the datums.
//!
//! Finished record batches are encoded by arrow-rs (`StreamWriter`) after block locks are
//! released.
use super::schema::{self, ExportCol};
use super::types::Column;
use crate::storage::block::{BlockRef, KIND_ABSENT};
use crate::storage::row;
use arrow_array::RecordBatch;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{Field, Schema, SchemaRef};
use pgrx::pg_sys;
use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::sync::Arc;

pub const DEFAULT_BATCH_ROWS: usize = 65536;

/// The IPC writer's output: the bytes of the next chunk, written straight into a `bytea`
/// (palloc'd after a 4-byte header room in the memory context current at its first write), so
/// the chunk goes to PostgreSQL without another copy.
#[derive(Clone, Default)]
struct Sink(Rc<RefCell<ChunkBuf>>);

#[derive(Default)]
struct ChunkBuf {
    /// the varlena being filled; null until the first write after a take
    ptr: *mut u8,
    /// payload bytes written (after the header)
    len: usize,
    /// payload bytes allocated
    cap: usize,
    /// the size to allocate first (the previous chunk's: the next is likely as large)
    hint: usize,
}

/// The largest payload of one `bytea` (PostgreSQL's 1 GB allocation limit).
const MAX_CHUNK: usize = 0x3fff_ffff - pg_sys::VARHDRSZ; // MaxAllocSize

impl ChunkBuf {
    fn reserve(&mut self, extra: usize) {
        let need = self.len + extra;
        if need <= self.cap {
            return;
        }
        if need > MAX_CHUNK {
            crate::ffi::error_hint(
                pgrx::PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                "an Arrow record batch of the export exceeds 1 GB, the largest bytea",
                "Pass a smaller batch_rows.",
            );
        }
        // chunks of one stream are about equally large: the previous one's size and some slack,
        // so that the chunk is rarely moved by a repalloc
        let cap = need
            .max(self.hint + self.hint / 8)
            .max(self.cap * 2)
            .clamp(64 << 10, MAX_CHUNK);
        unsafe {
            self.ptr = if self.ptr.is_null() {
                pg_sys::palloc(pg_sys::VARHDRSZ + cap) as *mut u8
            } else {
                pg_sys::repalloc(self.ptr as *mut std::ffi::c_void, pg_sys::VARHDRSZ + cap)
                    as *mut u8
            };
        }
        self.cap = cap;
    }

    /// The chunk written so far as a complete `bytea`; the next write starts a new one.
    fn take(&mut self) -> Chunk {
        self.reserve(0);
        unsafe {
            if self.ptr.is_null() {
                self.ptr = pg_sys::palloc(pg_sys::VARHDRSZ) as *mut u8;
            }
            // SET_VARSIZE (4-byte header)
            *(self.ptr as *mut u32) = ((pg_sys::VARHDRSZ + self.len) as u32) << 2;
        }
        let chunk = Chunk(self.ptr);
        self.hint = self.len;
        self.ptr = std::ptr::null_mut();
        self.len = 0;
        self.cap = 0;
        chunk
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut b = self.0.borrow_mut();
        b.reserve(buf.len());
        // SAFETY: reserve made room for buf after the header and the bytes written
        unsafe {
            std::ptr::copy_nonoverlapping(
                buf.as_ptr(),
                b.ptr.add(pg_sys::VARHDRSZ + b.len),
                buf.len(),
            )
        };
        b.len += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One chunk of the stream: a palloc'd `bytea` handed to PostgreSQL as it is.
pub struct Chunk(*mut u8);

pgrx::impl_sql_translatable!(Chunk, "bytea");

// SAFETY: the datum is a complete varlena allocated in the memory context of the call that
// returns it (the function's result lives as long as PostgreSQL needs it there)
unsafe impl pgrx::callconv::BoxRet for Chunk {
    unsafe fn box_into<'fcx>(
        self,
        fcinfo: &mut pgrx::callconv::FcInfo<'fcx>,
    ) -> pgrx::datum::Datum<'fcx> {
        unsafe { fcinfo.return_raw_datum(pg_sys::Datum::from(self.0)) }
    }
}

enum Source {
    /// the next local block to read; None once the table is read
    Blocks { next: Option<u32> },
    /// the SPI cursor's portal name; None once it is exhausted
    Query { cursor: Option<std::ffi::CString> },
}

pub struct Export {
    relid: pg_sys::Oid,
    source: Source,
    cols: Vec<ExportCol>,
    conv: Vec<Box<dyn Column>>,
    pub schema: SchemaRef,
    batch_rows: usize,
    /// rows appended to the converters since the last batch
    pending: usize,
    done: bool,
    /// scratch for values read as datums
    buf: Vec<u64>,
    num: Vec<u8>,
    /// memory of one call (detoasted values, output-function strings, the scan)
    cxt: pg_sys::MemoryContext,
    pub rows: u64,
    /// an OLAP image's snapshot to read blocks with (`scoot.olap = on`); None: the statement's
    pub image_snap: Option<pg_sys::Snapshot>,
}

/// An export allocates a few MB per column and batch, frees them after encoding, and allocates
/// them again for the next batch. glibc serves such sizes with mmap/munmap at first (raising its
/// threshold only as big blocks are freed) and trims the heap top eagerly, so every batch paid
/// page faults on fresh memory: the first export in a backend ran at half speed. Once per backend,
/// blocks up to 64 MB come from the heap and up to 256 MB of freed heap stay with the process.
fn tune_malloc() {
    static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !DONE.swap(true, std::sync::atomic::Ordering::Relaxed) {
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        }
    }
}

fn ipc_error(e: arrow_schema::ArrowError) -> ! {
    pgrx::error!("scoot: Arrow IPC encoding failed: {e}")
}

impl Export {
    /// Checks the table and the caller's rights and prepares the stream (a query source opens
    /// its cursor; no block is read yet).
    ///
    /// # Safety
    /// Called inside a transaction, from the SQL function.
    pub unsafe fn new(
        relid: pg_sys::Oid,
        names: Option<Vec<String>>,
        batch_rows: usize,
        text_fallback: bool,
        filter: Option<String>,
    ) -> Export {
        unsafe {
            tune_malloc();
            let rel = pg_sys::table_open(relid, pg_sys::AccessShareLock as i32);
            let cols = schema::columns(rel, names, text_fallback);
            let blocks =
                crate::am::is_scoot(rel) && filter.is_none() && !schema::rls_applies(relid);
            let mut image_snap = None;
            let source = if blocks {
                schema::check_privileges(rel, &cols);
                image_snap = crate::snapshot::session::export_snapshot(
                    crate::storage::tabledir::resolve(rel),
                    &crate::ffi::rel_name(rel),
                );
                Source::Blocks { next: Some(0) }
            } else {
                Source::Query {
                    cursor: Some(open_cursor(rel, &cols, filter.as_deref())),
                }
            };
            pg_sys::table_close(rel, pg_sys::NoLock as i32);
            let fields: Vec<Field> = cols
                .iter()
                .map(|c| Field::new(c.name.clone(), c.mapping.data_type(), c.nullable))
                .collect();
            let schema: SchemaRef = Arc::new(Schema::new(fields));
            let conv = cols.iter().map(|c| c.mapping.column(&c.name)).collect();
            let cxt = pg_sys::AllocSetContextCreateExtended(
                pg_sys::CurrentMemoryContext,
                c"scoot arrow export".as_ptr(),
                pg_sys::ALLOCSET_DEFAULT_MINSIZE as usize,
                pg_sys::ALLOCSET_DEFAULT_INITSIZE as usize,
                pg_sys::ALLOCSET_DEFAULT_MAXSIZE as usize,
            );
            Export {
                relid,
                source,
                cols,
                conv,
                schema,
                batch_rows,
                pending: 0,
                done: false,
                buf: Vec::new(),
                num: Vec::new(),
                cxt,
                rows: 0,
                image_snap,
            }
        }
    }

    /// Appends rows `rows` of block `b` to every column.
    fn push_rows(&mut self, b: BlockRef, rows: &[u32]) {
        let natts = b.natts();
        // consecutive slots (every slot of a frozen or insert-only block is a visible row):
        // converters copy column buffers
        let range = match (rows.first(), rows.last()) {
            (Some(&f), Some(&l)) if (l - f) as usize + 1 == rows.len() => {
                Some((f, rows.len() as u32))
            }
            _ => None,
        };
        for (ec, conv) in self.cols.iter().zip(self.conv.iter_mut()) {
            if ec.att >= natts || b.col(ec.att).kind == KIND_ABSENT {
                // the block was written before the column was added: its missing value
                for _ in rows {
                    unsafe { conv.push_datum(ec.missing.0, ec.missing.1) };
                }
                continue;
            }
            let c = *b.col(ec.att);
            if let Some((first, n)) = range {
                if conv.push_range(b, &c, first, n) {
                    continue;
                }
            }
            if conv.push_block(b, &c, rows) {
                continue;
            }
            for &s in rows {
                if !b.is_valid(&c, s) {
                    unsafe { conv.push_datum(pg_sys::Datum::from(0usize), true) };
                    continue;
                }
                let need = row::value_size(b, &c, s) + 16;
                if self.buf.len() * 8 < need {
                    self.buf.resize(need.div_ceil(8), 0);
                }
                let mut pos = 0usize;
                let d = unsafe {
                    row::read_value(
                        b,
                        &c,
                        s,
                        ec.short_ok,
                        self.buf.as_mut_ptr() as *mut u8,
                        &mut pos,
                        &mut self.num,
                    )
                };
                match d {
                    Some(d) => unsafe { conv.push_datum(d, false) },
                    None => unsafe { conv.push_datum(pg_sys::Datum::from(0usize), true) },
                }
            }
        }
        self.pending += rows.len();
        self.rows += rows.len() as u64;
    }

    /// The converters' contents as a record batch.
    fn take_batch(&mut self) -> RecordBatch {
        let arrays = self.conv.iter_mut().map(|c| c.finish()).collect();
        // the row count matters when no column is exported
        let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(self.pending));
        self.pending = 0;
        RecordBatch::try_new_with_options(self.schema.clone(), arrays, &opts)
            .unwrap_or_else(|e| ipc_error(e))
    }

    /// Reads blocks from `from` on until at least one batch is complete (or the table ends);
    /// returns the batches and where to continue.
    unsafe fn read_blocks(&mut self, from: u32) -> (Vec<RecordBatch>, Option<u32>) {
        unsafe {
            let rel = pg_sys::table_open(self.relid, pg_sys::AccessShareLock as i32);
            let snap = self
                .image_snap
                .unwrap_or_else(|| pg_sys::GetActiveSnapshot());
            let flags =
                pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE;
            let scan = crate::am::scan::scan_begin(
                rel,
                snap,
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                flags,
            );
            let mut out = Vec::new();
            // the exported columns: of an OLAP image's changed block only they are copied
            let mut cols = vec![false; (*(*rel).rd_att).natts as usize];
            for ec in &self.cols {
                if let Some(x) = cols.get_mut(ec.att) {
                    *x = true;
                }
            }
            let this = &mut *self;
            let r = crate::am::scan::visit_blocks_from(scan, from, &cols, &mut |b, rows| {
                let mut i = 0;
                while i < rows.len() {
                    let k = (rows.len() - i).min(this.batch_rows - this.pending);
                    this.push_rows(b, &rows[i..i + k]);
                    i += k;
                    if this.pending == this.batch_rows {
                        out.push(this.take_batch());
                    }
                }
                out.is_empty()
            });
            crate::am::scan::scan_end(scan);
            pg_sys::table_close(rel, pg_sys::NoLock as i32);
            match r {
                Some(next) => (out, next),
                None => pgrx::error!("scoot: the table cannot be exported block by block"),
            }
        }
    }

    /// Fetches the next `batch_rows` rows of the cursor as a batch; None once it is exhausted
    /// (and closed).
    unsafe fn read_query(&mut self, cursor: &std::ffi::CStr) -> Option<RecordBatch> {
        unsafe {
            pg_sys::SPI_connect();
            let portal = pg_sys::SPI_cursor_find(cursor.as_ptr());
            if portal.is_null() {
                pgrx::error!("scoot: the export's cursor {cursor:?} is gone");
            }
            pg_sys::SPI_cursor_fetch(portal, true, self.batch_rows as std::ffi::c_long);
            let n = pg_sys::SPI_processed as usize;
            let tt = pg_sys::SPI_tuptable;
            if n > 0 {
                let td = (*tt).tupdesc;
                for r in 0..n {
                    let tup = *(*tt).vals.add(r);
                    for (j, conv) in self.conv.iter_mut().enumerate() {
                        let mut isnull = false;
                        let d = pg_sys::SPI_getbinval(tup, td, (j + 1) as i32, &mut isnull);
                        conv.push_datum(d, isnull);
                    }
                }
                self.pending += n;
                self.rows += n as u64;
            } else {
                pg_sys::SPI_cursor_close(portal);
            }
            pg_sys::SPI_freetuptable(tt);
            pg_sys::SPI_finish();
            (n > 0).then(|| self.take_batch())
        }
    }

    /// The next record batches (at least one unless the table is exhausted); None once all
    /// rows were handed out.
    pub unsafe fn next_batches(&mut self) -> Option<Vec<RecordBatch>> {
        unsafe {
            if self.done {
                return None;
            }
            pgrx::check_for_interrupts!();
            let old = pg_sys::MemoryContextSwitchTo(self.cxt);
            let (mut batches, more) = match &self.source {
                Source::Blocks { next: Some(from) } => {
                    let (b, next) = self.read_blocks(*from);
                    self.source = Source::Blocks { next };
                    (b, next.is_some())
                }
                Source::Query { cursor: Some(c) } => {
                    let c = c.clone();
                    match self.read_query(&c) {
                        Some(b) => (vec![b], true),
                        None => {
                            self.source = Source::Query { cursor: None };
                            (Vec::new(), false)
                        }
                    }
                }
                _ => (Vec::new(), false),
            };
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(self.cxt);
            if !more {
                if self.pending > 0 {
                    batches.push(self.take_batch());
                }
                self.done = true;
                if let Some(snap) = self.image_snap.take() {
                    crate::snapshot::session::end_export(snap);
                }
            }
            Some(batches)
        }
    }
}

/// How the stream's chunks reach the client while it goes out (restored when it ends; an error
/// restores the send path at the transaction's end, and leaves the socket's larger buffer to the
/// session):
/// - PostgreSQL 15 copies every message through an 8 kB send buffer and writes it 8 kB per
///   send(); chunk-sized messages are instead written straight from the message
///   (src/ffi/shim.c, what PostgreSQL 17 does for large messages);
/// - on a Unix-domain socket the kernel's send buffer is enlarged to a few MB (default ~200 kB):
///   the backend builds the next chunk while the client still reads the last one. TCP sockets
///   are left alone: setting SO_SNDBUF there turns off the kernel's own buffer sizing for the
///   rest of the session.
struct SendPath {
    /// the Unix socket and its send buffer size before the stream
    sndbuf: Option<(std::ffi::c_int, std::ffi::c_int)>,
}

/// What the export asks for (the kernel caps it at net.core.wmem_max).
const STREAM_SNDBUF: std::ffi::c_int = 8 << 20;

impl SendPath {
    fn begin() -> SendPath {
        unsafe { crate::ffi::scoot_direct_send_begin() };
        SendPath {
            sndbuf: unix_socket().and_then(|sock| {
                let old = get_sndbuf(sock)?;
                set_sndbuf(sock, STREAM_SNDBUF);
                Some((sock, old))
            }),
        }
    }
}

impl Drop for SendPath {
    fn drop(&mut self) {
        unsafe { crate::ffi::scoot_direct_send_end() };
        if let Some((sock, old)) = self.sndbuf {
            // getsockopt reports twice what setsockopt asked for (the kernel's bookkeeping share)
            set_sndbuf(sock, old / 2);
        }
    }
}

/// The client connection's socket if it is a Unix-domain one.
fn unix_socket() -> Option<std::ffi::c_int> {
    let sock = unsafe { crate::ffi::scoot_client_socket() };
    if sock < 0 {
        return None;
    }
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut alen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let r =
        unsafe { libc::getsockname(sock, &mut addr as *mut _ as *mut libc::sockaddr, &mut alen) };
    (r == 0 && addr.ss_family == libc::AF_UNIX as libc::sa_family_t).then_some(sock)
}

fn get_sndbuf(sock: std::ffi::c_int) -> Option<std::ffi::c_int> {
    let mut v: std::ffi::c_int = 0;
    let mut len = std::mem::size_of::<std::ffi::c_int>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            sock,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some(v)
}

fn set_sndbuf(sock: std::ffi::c_int, size: std::ffi::c_int) {
    unsafe {
        libc::setsockopt(
            sock,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            &size as *const _ as *const libc::c_void,
            std::mem::size_of::<std::ffi::c_int>() as libc::socklen_t,
        );
    }
}

/// The SQL function's iterator: an [`Export`] encoded as one IPC stream, a chunk per call (the
/// first starts with the schema message, the last ends with the end-of-stream marker).
pub struct IpcStream {
    export: Export,
    sink: Sink,
    writer: Option<StreamWriter<Sink>>,
    send: Option<SendPath>,
}

impl IpcStream {
    pub fn new(export: Export) -> IpcStream {
        let sink = Sink::default();
        let writer =
            StreamWriter::try_new(sink.clone(), &export.schema).unwrap_or_else(|e| ipc_error(e));
        IpcStream {
            export,
            sink,
            writer: Some(writer),
            send: Some(SendPath::begin()),
        }
    }
}

impl Iterator for IpcStream {
    type Item = Chunk;
    fn next(&mut self) -> Option<Chunk> {
        let writer = self.writer.as_mut()?;
        match unsafe { self.export.next_batches() } {
            Some(batches) => {
                for b in &batches {
                    writer.write(b).unwrap_or_else(|e| ipc_error(e));
                }
                if self.export.done {
                    let mut w = self.writer.take().expect("writer");
                    w.finish().unwrap_or_else(|e| ipc_error(e));
                }
            }
            None => {
                let mut w = self.writer.take().expect("writer");
                w.finish().unwrap_or_else(|e| ipc_error(e));
            }
        }
        if self.writer.is_none() {
            // the last chunk is still to be sent: PostgreSQL's own path is enough for it
            self.send = None;
        }
        Some(self.sink.0.borrow_mut().take())
    }
}

/// Writes an [`Export`] as an Arrow IPC file at `path` (through `path` + a temporary suffix,
/// renamed when complete: an error or cancel midway leaves no file). Returns the rows written.
pub fn write_file(mut export: Export, path: &str) -> u64 {
    /// Removes the temporary file unless the export completed (runs while an error unwinds).
    struct Tmp(String, bool);
    impl Drop for Tmp {
        fn drop(&mut self) {
            if !self.1 {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }
    let tmp_path = format!("{path}.scoot-tmp-{}", std::process::id());
    let io_err = |what: &str, e: std::io::Error| -> ! {
        pgrx::ereport!(
            ERROR,
            pgrx::PgSqlErrorCode::ERRCODE_IO_ERROR,
            format!("could not {what} file \"{path}\": {e}")
        );
    };
    let f = std::fs::File::create(&tmp_path).unwrap_or_else(|e| io_err("create", e));
    let mut tmp = Tmp(tmp_path.clone(), false);
    let mut w = arrow_ipc::writer::FileWriter::try_new(std::io::BufWriter::new(f), &export.schema)
        .unwrap_or_else(|e| ipc_error(e));
    while let Some(batches) = unsafe { export.next_batches() } {
        for b in &batches {
            w.write(b).unwrap_or_else(|e| ipc_error(e));
        }
    }
    w.finish().unwrap_or_else(|e| ipc_error(e));
    let f = w.into_inner().unwrap_or_else(|e| ipc_error(e));
    f.into_inner()
        .map_err(|e| e.into_error())
        .and_then(|f| f.sync_all())
        .unwrap_or_else(|e| io_err("write", e));
    std::fs::rename(&tmp_path, path).unwrap_or_else(|e| io_err("rename to", e));
    tmp.1 = true;
    export.rows
}

/// Opens the export's SPI cursor over `SELECT columns FROM rel WHERE filter`; returns its name.
unsafe fn open_cursor(
    rel: pg_sys::Relation,
    cols: &[ExportCol],
    filter: Option<&str>,
) -> std::ffi::CString {
    unsafe {
        let q = |s: &str| {
            let c = std::ffi::CString::new(s).expect("no NUL in a name");
            std::ffi::CStr::from_ptr(pg_sys::quote_identifier(c.as_ptr()))
                .to_string_lossy()
                .into_owned()
        };
        let nsp =
            std::ffi::CStr::from_ptr(pg_sys::get_namespace_name((*(*rel).rd_rel).relnamespace))
                .to_string_lossy()
                .into_owned();
        let list = if cols.is_empty() {
            String::new()
        } else {
            cols.iter()
                .map(|c| q(&c.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut sql = format!(
            "SELECT {list} FROM {}.{}",
            q(&nsp),
            q(&crate::ffi::rel_name(rel))
        );
        if let Some(f) = filter {
            sql.push_str(&format!(" WHERE ({f})"));
        }
        let sql = std::ffi::CString::new(sql)
            .unwrap_or_else(|_| pgrx::error!("scoot: the filter contains a NUL byte"));
        pg_sys::SPI_connect();
        let portal = pg_sys::SPI_cursor_open_with_args(
            std::ptr::null(),
            sql.as_ptr(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null(),
            true,
            0,
        );
        let name = std::ffi::CStr::from_ptr((*portal).name).to_owned();
        pg_sys::SPI_finish();
        name
    }
}
