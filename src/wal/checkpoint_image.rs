//! Checkpoint images: every scoot table's blocks in one file, `$PGDATA/pg_scoot/arena.img`.
//!
//! ```text
//! file header   magic "SCOOTIMG", image version, block format version, block size, tables,
//!               system identifier, checkpoint LSN, written at; CRC
//! per table     key (tablespace, database, relfilenode), relid, var_mask, counters, blocks; CRC
//!   per block   local number + the block descriptor's persistent fields; CRC over these and
//!               the payload; payload = bytes [0, fixed_end) and [var_low, block_size)
//! trailer       "END!", total blocks, CRC
//! ```
//! The writer goes to `arena.img.tmp`, fsyncs it, renames it over `arena.img` and fsyncs the
//! directory, so a crash while writing leaves the previous image (which the checkpoint LSN check
//! then refuses, as it must: it is older than the data). The reader checks every CRC; a damaged
//! image that *should* be loaded stops the server start with a clear error instead of silently
//! starting with empty tables.
//!
//! The encoding of headers is plain Rust over byte vectors (`Enc`/`Dec`); only the callers touch
//! the arena and PostgreSQL.
use crate::storage::arena::{self, BlockDesc};
use crate::storage::block;
use crate::storage::tabledir::{self, RelKey};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::sync::atomic::Ordering;

pub const DIR: &str = "pg_scoot";
pub const FILE: &str = "pg_scoot/arena.img";
/// The image before the newest one, kept (with the WAL since it) as a fallback.
pub const PREV: &str = "pg_scoot/arena.img.prev";
/// Where a damaged image is moved (for inspection) once an older one replaced it.
pub const DAMAGED: &str = "pg_scoot/arena.img.damaged";
const TMP: &str = "pg_scoot/arena.img.tmp";
/// Marker: this data directory started from a base backup or as a physical standby, where
/// pg_scoot does not replay scoot WAL (yet): tables from before that have no rows here and
/// report an error until TRUNCATE. Written once, kept (delete it by hand once every such table
/// was truncated or dropped).
pub const NOT_REPLAYED: &str = "pg_scoot/rows_not_replayed";

/// PostgreSQL starts from a base backup (`backup_label`), for archive recovery or as a standby:
/// the image (if any) came from another server and the WAL since it is not here.
fn started_from_backup() -> bool {
    ["standby.signal", "recovery.signal", "backup_label"]
        .iter()
        .any(|f| std::path::Path::new(f).exists())
}

const MAGIC: u64 = u64::from_le_bytes(*b"SCOOTIMG");
const IMAGE_VERSION: u32 = 2;
const TAG_TABLE: u32 = u32::from_le_bytes(*b"TABL");
const TAG_BLOCK: u32 = u32::from_le_bytes(*b"BLCK");
const TAG_END: u32 = u32::from_le_bytes(*b"END!");

/// What `pg_control` says (the fields this module needs; layout of PostgreSQL 15's
/// `ControlFileData`, which starts system_identifier u64, pg_control_version u32,
/// catalog_version_no u32, state u32, pad, time i64, checkPoint u64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Control {
    pub system_identifier: u64,
    pub state: u32,
    pub checkpoint: u64,
    /// The last checkpoint's REDO pointer (where crash recovery starts) and timeline.
    pub redo: u64,
    pub tli: u32,
}

/// `DBState::DB_SHUTDOWNED`: the last shutdown checkpoint completed and nothing ran since.
pub const DB_SHUTDOWNED: u32 = 1;
/// `DB_SHUTDOWNED_IN_RECOVERY`: a standby shut down cleanly.
pub const DB_SHUTDOWNED_IN_RECOVERY: u32 = 2;

pub fn read_control() -> Result<Control, String> {
    let mut f = File::open("global/pg_control").map_err(|e| format!("global/pg_control: {e}"))?;
    let mut b = [0u8; 52];
    f.read_exact(&mut b)
        .map_err(|e| format!("global/pg_control: {e}"))?;
    let mut d = Dec::new(&b);
    let system_identifier = d.u64();
    let _version = d.u32();
    let _catalog = d.u32();
    let state = d.u32();
    let _pad = d.u32();
    let _time = d.u64();
    let checkpoint = d.u64();
    let redo = d.u64();
    let tli = d.u32();
    Ok(Control {
        system_identifier,
        state,
        checkpoint,
        redo,
        tli,
    })
}

/// Little-endian encoder of header records.
pub struct Enc(pub Vec<u8>);
impl Enc {
    pub fn new() -> Enc {
        Enc(Vec::with_capacity(128))
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends the CRC of everything so far (and of `payload` parts hashed by the caller).
    pub fn seal(&mut self, h: crc32fast::Hasher) -> &[u8] {
        let mut h = h;
        h.update(&self.0);
        let c = h.finalize();
        self.u32(c);
        &self.0
    }
}

impl Default for Enc {
    fn default() -> Self {
        Enc::new()
    }
}

/// Little-endian decoder (the caller sized the buffer).
pub struct Dec<'a> {
    b: &'a [u8],
    at: usize,
}
impl<'a> Dec<'a> {
    pub fn new(b: &'a [u8]) -> Dec<'a> {
        Dec { b, at: 0 }
    }
    pub fn u32(&mut self) -> u32 {
        let v = u32::from_le_bytes(self.b[self.at..self.at + 4].try_into().unwrap());
        self.at += 4;
        v
    }
    pub fn u64(&mut self) -> u64 {
        let v = u64::from_le_bytes(self.b[self.at..self.at + 8].try_into().unwrap());
        self.at += 8;
        v
    }
}

const HEADER_LEN: usize = 8 + 4 * 4 + 8 * 3 + 4;
const TABLE_LEN: usize = 4 + 4 * 4 + 4 + 8 + 8 + 4 * 5 + 4;
const BLOCK_LEN: usize = 4 + 4 * 12 + 8 + 4;
const END_LEN: usize = 4 + 8 + 4;

/// Persistent fields of a block descriptor (everything else is per-incarnation state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockMeta {
    pub local: u32,
    pub hwm: u32,
    pub nfree: u32,
    pub capacity: u32,
    pub free_hint: u32,
    pub var_low: u32,
    pub var_dead: u32,
    pub fixed_end: u32,
    pub ndead: u32,
    pub obsolete: u32,
    pub vis_xid: u32,
    pub temp: u32,
    pub layout_sig: u64,
}

impl BlockMeta {
    /// Encoded size of the fields (without a record tag or CRC).
    pub const FIELDS_LEN: usize = 4 * 12 + 8;
    pub fn encode_fields(&self, e: &mut Enc) {
        e.u32(self.local)
            .u32(self.hwm)
            .u32(self.nfree)
            .u32(self.capacity)
            .u32(self.free_hint)
            .u32(self.var_low)
            .u32(self.var_dead)
            .u32(self.fixed_end)
            .u32(self.ndead)
            .u32(self.obsolete)
            .u32(self.vis_xid)
            .u32(self.temp)
            .u64(self.layout_sig);
    }
    pub fn decode_fields(d: &mut Dec) -> BlockMeta {
        BlockMeta {
            local: d.u32(),
            hwm: d.u32(),
            nfree: d.u32(),
            capacity: d.u32(),
            free_hint: d.u32(),
            var_low: d.u32(),
            var_dead: d.u32(),
            fixed_end: d.u32(),
            ndead: d.u32(),
            obsolete: d.u32(),
            vis_xid: d.u32(),
            temp: d.u32(),
            layout_sig: d.u64(),
        }
    }
    pub fn of(d: &BlockDesc) -> BlockMeta {
        BlockMeta {
            local: d.local.load(Ordering::Relaxed),
            hwm: d.hwm.load(Ordering::Relaxed),
            nfree: d.nfree.load(Ordering::Relaxed),
            capacity: d.capacity.load(Ordering::Relaxed),
            free_hint: d.free_hint.load(Ordering::Relaxed),
            var_low: d.var_low.load(Ordering::Relaxed),
            var_dead: d.var_dead.load(Ordering::Relaxed),
            fixed_end: d.fixed_end.load(Ordering::Relaxed),
            ndead: d.ndead.load(Ordering::Relaxed),
            obsolete: d.obsolete.load(Ordering::Relaxed),
            vis_xid: d.vis_xid.load(Ordering::Relaxed),
            temp: d.temp.load(Ordering::Relaxed),
            layout_sig: d.layout_sig.load(Ordering::Relaxed),
        }
    }
    pub fn apply(&self, d: &BlockDesc) {
        d.local.store(self.local, Ordering::Relaxed);
        d.hwm.store(self.hwm, Ordering::Relaxed);
        d.nfree.store(self.nfree, Ordering::Relaxed);
        d.capacity.store(self.capacity, Ordering::Relaxed);
        d.free_hint.store(self.free_hint, Ordering::Relaxed);
        d.var_low.store(self.var_low, Ordering::Relaxed);
        d.var_dead.store(self.var_dead, Ordering::Relaxed);
        d.fixed_end.store(self.fixed_end, Ordering::Relaxed);
        d.ndead.store(self.ndead, Ordering::Relaxed);
        d.obsolete.store(self.obsolete, Ordering::Relaxed);
        d.vis_xid.store(self.vis_xid, Ordering::Relaxed);
        d.temp.store(self.temp, Ordering::Relaxed);
        d.layout_sig.store(self.layout_sig, Ordering::Relaxed);
    }
    fn encode(&self) -> Enc {
        let mut e = Enc::new();
        e.u32(TAG_BLOCK);
        self.encode_fields(&mut e);
        e
    }
    fn decode(b: &[u8]) -> (u32, BlockMeta) {
        let mut d = Dec::new(b);
        let tag = d.u32();
        (tag, BlockMeta::decode_fields(&mut d))
    }
    /// The payload ranges are inside the block and do not overlap.
    pub fn sane(&self, block_size: u32) -> bool {
        self.fixed_end as usize >= std::mem::size_of::<block::BlockHeader>()
            && self.fixed_end <= self.var_low
            && self.var_low <= block_size
            && self.hwm <= self.capacity
    }
}

/// Per-table record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableMeta {
    pub key: RelKey,
    pub relid: u32,
    pub var_mask: u64,
    pub rows_inserted: u64,
    pub needs_truncate: u32,
    pub nblocks: u32,
    pub nlocal: u32,
    pub tid_pages: u32,
    pub persistence: u32,
}

impl TableMeta {
    fn encode(&self) -> Enc {
        let mut e = Enc::new();
        e.u32(TAG_TABLE)
            .u32(self.key.spc)
            .u32(self.key.db)
            .u32(self.key.rel)
            .u32(self.key.backend as u32)
            .u32(self.relid)
            .u64(self.var_mask)
            .u64(self.rows_inserted)
            .u32(self.needs_truncate)
            .u32(self.nblocks)
            .u32(self.nlocal)
            .u32(self.tid_pages)
            .u32(self.persistence);
        e
    }
    fn decode(b: &[u8]) -> (u32, TableMeta) {
        let mut d = Dec::new(b);
        let tag = d.u32();
        let key = RelKey {
            spc: d.u32(),
            db: d.u32(),
            rel: d.u32(),
            backend: d.u32() as i32,
        };
        let m = TableMeta {
            key,
            relid: d.u32(),
            var_mask: d.u64(),
            rows_inserted: d.u64(),
            needs_truncate: d.u32(),
            nblocks: d.u32(),
            nlocal: d.u32(),
            tid_pages: d.u32(),
            persistence: d.u32(),
        };
        (tag, m)
    }
}

fn crc_ok(rec: &[u8], payload: &[&[u8]]) -> bool {
    let n = rec.len() - 4;
    let mut h = crc32fast::Hasher::new();
    for p in payload {
        h.update(p);
    }
    h.update(&rec[..n]);
    h.finalize() == u32::from_le_bytes(rec[n..].try_into().unwrap())
}

// ------------------------------------------------------------------ writing

/// Tables whose rows an image keeps: permanent and unlogged ones (temporary tables die with
/// their sessions).
fn persistent_tables() -> Vec<(tabledir::TableRef, RelKey, u32)> {
    tabledir::all()
        .into_iter()
        .filter(|(_, k, _)| k.backend < 0)
        .collect()
}

/// Writes the image after a clean shutdown (all backends gone, the shutdown checkpoint done).
/// Never raises: a failure is logged and leaves the previous image (which the next start will
/// not load: its checkpoint is older).
pub fn write_at_shutdown() {
    if !arena::is_ready() {
        return;
    }
    let ctl = match read_control() {
        Ok(c) => c,
        Err(e) => {
            log(&format!("scoot: no checkpoint image written: {e}"));
            return;
        }
    };
    let mut ctl = ctl;
    if ctl.state == DB_SHUTDOWNED_IN_RECOVERY {
        // a standby: the arena holds every scoot record replayed so far, stamp it with the
        // replay position (the next start replays the WAL from there)
        let c = arena::ctl();
        if c.from_backup.load(Ordering::Relaxed) == 0 || c.gap_to.load(Ordering::Relaxed) != 0 {
            log("scoot: no checkpoint image written: this standby does not replay scoot WAL");
            return;
        }
        ctl.checkpoint = unsafe { pg_sys::GetXLogReplayRecPtr(std::ptr::null_mut()) };
    } else if ctl.state != DB_SHUTDOWNED {
        log("scoot: no checkpoint image written: the server did not shut down cleanly");
        return;
    }
    let t0 = std::time::Instant::now();
    match write_image(&ctl) {
        Ok((tables, blocks, bytes)) => log(&format!(
            "scoot: wrote checkpoint image {FILE}: {tables} tables, {blocks} blocks, {} MB at checkpoint {:X}/{:X} in {} ms",
            bytes >> 20,
            ctl.checkpoint >> 32,
            ctl.checkpoint as u32,
            t0.elapsed().as_millis()
        )),
        Err(e) => {
            let _ = std::fs::remove_file(TMP);
            warn(&format!(
                "scoot: could not write the checkpoint image {FILE}: {e}; the next start replays the scoot WAL since the last image instead"
            ));
        }
    }
}

/// Writes an image of the arena stamped `lsn` (the arena must not change meanwhile: all other
/// processes are gone, or none exist yet).
pub fn write_image_at(sysid: u64, lsn: u64) -> std::io::Result<(u32, u64, u64)> {
    write_image(&Control {
        system_identifier: sysid,
        state: 0,
        checkpoint: lsn,
        redo: lsn,
        tli: 0,
    })
}

fn write_image(ctl: &Control) -> std::io::Result<(u32, u64, u64)> {
    let tables = capture_tables(false);
    write_tables(
        ctl.system_identifier,
        ctl.checkpoint,
        tables,
        |ab, dst| {
            let bs = arena::block_size();
            unsafe { std::ptr::copy_nonoverlapping(arena::block_ptr(ab), dst.as_mut_ptr(), bs) };
            Ok(())
        },
        || Ok(()),
    )
}

/// A table as an image holds it: its record and its blocks (arena block, descriptor fields).
pub struct ImgTable {
    pub meta: TableMeta,
    pub blocks: Vec<(u32, BlockMeta)>,
}

/// The tables (permanent and unlogged, or only permanent with `permanent_only`) and their
/// blocks' descriptors as they are now. The caller keeps the arena still meanwhile (all other
/// processes gone, or the snapshot gate closed).
pub fn capture_tables(permanent_only: bool) -> Vec<ImgTable> {
    let mut out = Vec::new();
    for (t, key, relid) in persistent_tables() {
        let en = t.entry();
        let persistence = en.persistence.load(Ordering::Relaxed);
        if permanent_only && persistence != b'p' as u32 {
            continue;
        }
        let blocks: Vec<(u32, BlockMeta)> = tabledir::blocks_of(t)
            .into_iter()
            .map(|(_lb, b)| (b, BlockMeta::of(arena::block_desc(b))))
            .collect();
        out.push(ImgTable {
            meta: TableMeta {
                key,
                relid,
                var_mask: en.var_mask.load(Ordering::Relaxed),
                rows_inserted: en.rows_inserted.load(Ordering::Relaxed),
                needs_truncate: en.needs_truncate.load(Ordering::Relaxed),
                nblocks: blocks.len() as u32,
                nlocal: tabledir::nlocal(t),
                tid_pages: tabledir::tid_pages(t),
                persistence,
            },
            blocks,
        });
    }
    out
}

/// Writes an image of `tables` stamped `lsn` to the temporary file, then `before_publish` (the
/// snapshot writer checks its snapshot is still intact and flushes the WAL up to `lsn`), then
/// renames it into place. `read(ab, dst)` fills `dst` (block-sized) with block `ab`'s bytes.
pub fn write_tables(
    sysid: u64,
    lsn: u64,
    tables: Vec<ImgTable>,
    mut read: impl FnMut(u32, &mut [u8]) -> Result<(), String>,
    before_publish: impl FnOnce() -> Result<(), String>,
) -> std::io::Result<(u32, u64, u64)> {
    let mut w = ImageWriter::begin(sysid, lsn, tables)?;
    while !w.step(None, &mut read)? {}
    w.finish(before_publish)
}

/// An image being written, a slice at a time (the OLAP worker interleaves it with its other
/// duties): `begin` writes the header to the temporary file, `step` more blocks, `finish` the
/// trailer, fsyncs and publishes (the newest image becomes the previous one).
pub struct ImageWriter {
    w: BufWriter<File>,
    tables: Vec<ImgTable>,
    /// next table / block of it to write; `header_done`: the table's record is written
    ti: usize,
    bi: usize,
    header_done: bool,
    buf: Vec<u8>,
    bs: u32,
    nblocks: u64,
    bytes: u64,
    /// bytes handed to the kernel's writeback so far (see `start_writeback`)
    synced: u64,
}

/// Start the kernel's writeback of the image every this many bytes, so the final fsync does not
/// push a whole image to the disk at once (stalling the WAL's fsyncs behind it).
const WRITEBACK_EVERY: u64 = 32 << 20;

/// Hands bytes [from, to) of the image file to the kernel's writeback (asynchronous: starts
/// writing the dirty pages, does not wait for them).
fn start_writeback(w: &mut BufWriter<File>, from: u64, to: u64) -> std::io::Result<()> {
    w.flush()?;
    use std::os::unix::io::AsRawFd;
    let fd = w.get_ref().as_raw_fd();
    unsafe {
        libc::sync_file_range(
            fd,
            from as i64,
            (to - from) as i64,
            libc::SYNC_FILE_RANGE_WRITE,
        )
    };
    Ok(())
}

impl ImageWriter {
    pub fn begin(sysid: u64, lsn: u64, tables: Vec<ImgTable>) -> std::io::Result<ImageWriter> {
        std::fs::create_dir_all(DIR)?;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(TMP)?;
        let mut w = BufWriter::with_capacity(4 << 20, f);
        let bs = arena::block_size() as u32;
        let mut e = Enc::new();
        e.u64(MAGIC)
            .u32(IMAGE_VERSION)
            .u32(block::FORMAT_VERSION as u32)
            .u32(bs)
            .u32(tables.len() as u32)
            .u64(sysid)
            .u64(lsn)
            .u64(unsafe { pg_sys::GetCurrentTimestamp() } as u64);
        w.write_all(e.seal(crc32fast::Hasher::new()))?;
        Ok(ImageWriter {
            w,
            tables,
            ti: 0,
            bi: 0,
            header_done: false,
            buf: vec![0u8; bs as usize],
            bs,
            nblocks: 0,
            bytes: HEADER_LEN as u64,
            synced: 0,
        })
    }

    /// Writes blocks until all are written (returns true) or `until` has passed.
    pub fn step(
        &mut self,
        until: Option<std::time::Instant>,
        read: &mut impl FnMut(u32, &mut [u8]) -> Result<(), String>,
    ) -> std::io::Result<bool> {
        while self.ti < self.tables.len() {
            let t = &self.tables[self.ti];
            if !self.header_done {
                self.w
                    .write_all(t.meta.encode().seal(crc32fast::Hasher::new()))?;
                self.bytes += TABLE_LEN as u64;
                self.header_done = true;
            }
            while self.bi < t.blocks.len() {
                if until.is_some_and(|u| std::time::Instant::now() >= u) {
                    return Ok(false);
                }
                let (b, m) = &t.blocks[self.bi];
                if !m.sane(self.bs) {
                    return Err(std::io::Error::other(format!(
                        "block {b} of relfilenode {} has an inconsistent descriptor {m:?}",
                        t.meta.key.rel
                    )));
                }
                read(*b, &mut self.buf).map_err(std::io::Error::other)?;
                let delay = crate::guc::DEBUG_IMAGE_DELAY_MS.get();
                if delay > 0 {
                    std::thread::sleep(std::time::Duration::from_millis(delay as u64));
                }
                let head = &self.buf[..m.fixed_end as usize];
                let tail = &self.buf[m.var_low as usize..];
                let mut h = crc32fast::Hasher::new();
                h.update(head);
                h.update(tail);
                self.w.write_all(m.encode().seal(h))?;
                self.w.write_all(head)?;
                self.w.write_all(tail)?;
                self.nblocks += 1;
                self.bytes += (BLOCK_LEN + head.len() + tail.len()) as u64;
                self.bi += 1;
                if self.bytes - self.synced >= WRITEBACK_EVERY {
                    start_writeback(&mut self.w, self.synced, self.bytes)?;
                    self.synced = self.bytes;
                }
            }
            self.ti += 1;
            self.bi = 0;
            self.header_done = false;
        }
        Ok(true)
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn finish(
        mut self,
        before_publish: impl FnOnce() -> Result<(), String>,
    ) -> std::io::Result<(u32, u64, u64)> {
        let mut e = Enc::new();
        e.u32(TAG_END).u64(self.nblocks);
        self.w.write_all(e.seal(crc32fast::Hasher::new()))?;
        self.bytes += END_LEN as u64;
        let f = self.w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        drop(f);
        before_publish().map_err(std::io::Error::other)?;
        // the newest image becomes the previous one (a crash between the renames leaves the
        // previous image and the temporary file, which the next start removes)
        if std::path::Path::new(FILE).exists() {
            std::fs::rename(FILE, PREV)?;
        }
        std::fs::rename(TMP, FILE)?;
        File::open(DIR)?.sync_all()?;
        Ok((self.tables.len() as u32, self.nblocks, self.bytes))
    }
}

/// Removes a partly written image (after a failure).
pub fn discard_tmp() {
    let _ = std::fs::remove_file(TMP);
}

// ------------------------------------------------------------------ loading

/// What loading one image file gave.
struct Loaded {
    lsn: u64,
    tables: u32,
    blocks: u64,
}

/// Why an image file was not loaded.
enum NotLoaded {
    /// Not this system's image, or not consistent with `pg_control`: the arena is untouched.
    Skipped(String),
    /// Truncated or a checksum failed part-way: the arena holds part of it.
    Damaged(String),
}

/// Loads the checkpoint image into the freshly initialised arena (postmaster, before any other
/// process exists), trying the newest image first and the previous one if the newest is
/// damaged:
///
/// * after a clean shutdown whose own image is there, nothing else is needed;
/// * after a crash the loaded image is the *base* that crash recovery replays the scoot WAL
///   onto, from the image's LSN (`wal::rm_startup`);
/// * after a clean shutdown whose image is missing, stale (its write failed) or damaged, the
///   older image is loaded and the scoot WAL up to the shutdown checkpoint is replayed here;
///   then a new image is written.
///
/// The WAL since the oldest image is kept by the replication slot `pg_scoot_wal`. When no image
/// can be used although one exists, the start stops with a FATAL error and a hint: never a
/// silent start with empty tables.
pub fn load_at_startup() {
    let ctl = match read_control() {
        Ok(c) => c,
        Err(e) => fatal(format!("scoot: cannot read pg_control: {e}")),
    };
    let clean = ctl.state == DB_SHUTDOWNED;
    // a crash while an image was written leaves its temporary file
    discard_tmp();
    let from_backup = started_from_backup();
    if std::path::Path::new(NOT_REPLAYED).exists() {
        arena::ctl().rows_not_replayed.store(1, Ordering::Relaxed);
    }
    if from_backup {
        if arena::ctl().rows_not_replayed.load(Ordering::Relaxed) != 0 {
            // replay failed here before (or this data directory predates standby replay)
            for f in [FILE, PREV] {
                let _ = std::fs::remove_file(f);
            }
            log("scoot: this server started from a base backup or as a standby without a usable scoot base (see pg_scoot/rows_not_replayed): scoot WAL is not replayed here; scoot tables from before have no rows on this server and report an error until TRUNCATE");
            return;
        }
        load_for_standby(&ctl);
        return;
    }
    let files: Vec<&str> = [FILE, PREV]
        .into_iter()
        .filter(|p| std::path::Path::new(p).exists())
        .collect();
    if files.is_empty() {
        if clean {
            new_base(&ctl, "no checkpoint image");
        }
        return;
    }
    let mut problems: Vec<String> = Vec::new();
    let mut damaged = false;
    for (i, path) in files.iter().enumerate() {
        let t0 = std::time::Instant::now();
        match load_file(path, &ctl, clean) {
            Ok(l) => {
                let c = arena::ctl();
                note_loaded(path, &l, t0);
                if i > 0 {
                    warn(&format!(
                        "scoot: using the older checkpoint image {path} of {:X}/{:X} ({}); the scoot WAL since it is replayed",
                        l.lsn >> 32,
                        l.lsn as u32,
                        problems.join("; ")
                    ));
                    if damaged && std::path::Path::new(FILE).exists() {
                        // out of the way of the next image, kept for inspection
                        let _ = std::fs::rename(FILE, DAMAGED);
                    }
                }
                // the WAL up to the last checkpoint (clean: the shutdown checkpoint; crash: the
                // redo point, from which PostgreSQL's redo takes over) is replayed here: after
                // a crash PostgreSQL skips redo altogether when nothing follows the checkpoint
                let replay_to = if clean { ctl.checkpoint } else { ctl.redo };
                let replay_here = l.lsn < replay_to;
                log(&format!(
                    "scoot: loaded checkpoint image {path} of {:X}/{:X}: {} tables, {} blocks in {} ms{}",
                    l.lsn >> 32,
                    l.lsn as u32,
                    l.tables,
                    l.blocks,
                    t0.elapsed().as_millis(),
                    if replay_here {
                        "; replaying the scoot WAL since then"
                    } else if !clean {
                        "; crash recovery replays the scoot WAL from there"
                    } else {
                        ""
                    }
                ));
                // the loaded image is the recovery base (until a newer one is written)
                set_base(ctl.system_identifier, l.lsn);
                if !clean {
                    c.crash_recovered.store(1, Ordering::Relaxed);
                }
                if replay_here {
                    let n = crate::wal::replay_at_start(l.lsn, replay_to, ctl.tli);
                    log(&format!(
                        "scoot: replayed {n} scoot WAL records from {:X}/{:X} to {} {:X}/{:X}",
                        l.lsn >> 32,
                        l.lsn as u32,
                        if clean {
                            "the shutdown checkpoint"
                        } else {
                            "the redo start"
                        },
                        replay_to >> 32,
                        replay_to as u32
                    ));
                }
                c.replayed_to.store(l.lsn.max(replay_to), Ordering::Relaxed);
                if clean && replay_here {
                    // the arena is now as of the shutdown checkpoint: make that the new base
                    new_base(&ctl, "an image older than the shutdown checkpoint");
                }
                return;
            }
            Err(NotLoaded::Skipped(m)) => {
                log(&m);
                problems.push(m);
            }
            Err(NotLoaded::Damaged(m)) => {
                warn(&m);
                problems.push(m);
                damaged = true;
                // empty the arena again: the damaged image was partly loaded
                arena::reinit();
            }
        }
    }
    if damaged {
        fatal(format!(
            "scoot: no usable checkpoint image: {}",
            problems.join("; ")
        ));
    }
    if clean {
        new_base(&ctl, "no usable checkpoint image");
    }
}

/// Where PostgreSQL's redo starts on a server started from a base backup or as a standby: the
/// backup's start (`backup_label`) or, on a standby that ran before, the last restartpoint.
fn redo_start(ctl: &Control) -> (u64, u32) {
    if let Ok(label) = std::fs::read_to_string("backup_label") {
        let mut lsn = None;
        let mut tli = None;
        for line in label.lines() {
            if let Some(rest) = line.strip_prefix("START WAL LOCATION: ") {
                lsn = rest.split_whitespace().next().and_then(parse_lsn);
            } else if let Some(rest) = line.strip_prefix("START TIMELINE: ") {
                tli = rest.trim().parse().ok();
            }
        }
        if let (Some(l), Some(t)) = (lsn, tli) {
            return (l, t);
        }
    }
    (ctl.redo, ctl.tli)
}

/// "16/B374D848" as an LSN.
pub fn parse_lsn(s: &str) -> Option<u64> {
    let (hi, lo) = s.split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

/// Records that this data directory cannot replay the scoot WAL (no usable base, or the WAL
/// since it could not be had): scoot tables from before refuse reads until TRUNCATE.
pub fn mark_not_replayed(why: &str) {
    let _ = std::fs::create_dir_all(DIR);
    let _ = std::fs::write(
        NOT_REPLAYED,
        format!("This data directory started from a base backup or as a physical standby and pg_scoot could not replay the scoot WAL: {why}\nScoot tables from before have no rows here.\n"),
    );
    arena::ctl().rows_not_replayed.store(1, Ordering::Relaxed);
}

/// Start from a base backup or as a standby: the newest usable image of this system (copied by
/// pg_basebackup from the primary, or written by this standby at its last clean shutdown) is
/// the base, and the scoot WAL from its LSN on is replayed, as on the primary after a crash.
/// When the image is older than the redo start, the WAL between them is replayed here if
/// pg_wal has it, or else fetched from the primary by the startup process (`wal::rm_startup`).
fn load_for_standby(ctl: &Control) {
    let (redo, tli) = redo_start(ctl);
    let mut problems = Vec::new();
    for path in [FILE, PREV] {
        if !std::path::Path::new(path).exists() {
            continue;
        }
        let t0 = std::time::Instant::now();
        match load_file(path, ctl, false) {
            Ok(l) => {
                let c = arena::ctl();
                note_loaded(path, &l, t0);
                c.crash_recovered.store(1, Ordering::Relaxed);
                c.from_backup.store(1, Ordering::Relaxed);
                set_base(ctl.system_identifier, l.lsn);
                c.replayed_to.store(l.lsn, Ordering::Relaxed);
                let gap = l.lsn < redo;
                let local = gap && wal_is_local(l.lsn, redo, tli);
                log(&format!(
                    "scoot: base backup or standby: loaded checkpoint image {path} of {:X}/{:X}: {} tables, {} blocks in {} ms; {}",
                    l.lsn >> 32,
                    l.lsn as u32,
                    l.tables,
                    l.blocks,
                    t0.elapsed().as_millis(),
                    if !gap {
                        "the scoot WAL is replayed from there".to_string()
                    } else if local {
                        format!("replaying the scoot WAL up to the redo start {:X}/{:X} from pg_wal", redo >> 32, redo as u32)
                    } else {
                        format!("the WAL up to the redo start {:X}/{:X} is fetched from the primary", redo >> 32, redo as u32)
                    }
                ));
                if local {
                    let n = crate::wal::replay_at_start(l.lsn, redo, tli);
                    c.replayed_to.store(redo, Ordering::Relaxed);
                    log(&format!("scoot: replayed {n} scoot WAL records"));
                } else if gap {
                    c.gap_tli.store(tli, Ordering::Relaxed);
                    c.gap_to.store(redo, Ordering::Relaxed);
                }
                return;
            }
            Err(NotLoaded::Skipped(m)) => problems.push(m),
            Err(NotLoaded::Damaged(m)) => {
                warn(&m);
                problems.push(m);
                arena::reinit();
            }
        }
    }
    let why = if problems.is_empty() {
        "no checkpoint image was copied".to_string()
    } else {
        problems.join("; ")
    };
    log(&format!("scoot: this server starts from a base backup or as a standby without a usable checkpoint image ({why}): scoot WAL is not replayed here; scoot tables from before have no rows on this server and report an error until TRUNCATE"));
    for f in [FILE, PREV] {
        let _ = std::fs::remove_file(f);
    }
    mark_not_replayed(&why);
}

/// Does pg_wal hold every WAL segment of [from, to) on timeline `tli`?
fn wal_is_local(from: u64, to: u64, tli: u32) -> bool {
    crate::wal::segment_names(from, to, tli)
        .iter()
        .all(|n| crate::wal::segment_is_local(n))
}

/// The image stamped `lsn` is the recovery base now; the WAL is kept from the oldest image on
/// disk (the previous one, the fallback), or from `lsn`.
pub fn set_base(sysid: u64, lsn: u64) {
    let c = arena::ctl();
    c.base_lsn.store(lsn, Ordering::Relaxed);
    c.base_valid.store(1, Ordering::Release);
    let keep = oldest_image_lsn(sysid).unwrap_or(lsn).min(lsn);
    c.keep_lsn.store(keep, Ordering::Relaxed);
}

/// The LSN of the oldest image on disk of this system.
fn oldest_image_lsn(sysid: u64) -> Option<u64> {
    [FILE, PREV]
        .into_iter()
        .filter_map(|p| header_of(p))
        .filter(|h| h.valid && h.sysid == sysid)
        .map(|h| h.lsn)
        .min()
}

struct Header {
    valid: bool,
    version: u32,
    fmt: u32,
    bs: u32,
    ntables: u32,
    sysid: u64,
    lsn: u64,
    written_at: u64,
}

fn decode_header(hb: &[u8; HEADER_LEN]) -> Header {
    let mut d = Dec::new(hb);
    let magic = d.u64();
    Header {
        version: d.u32(),
        fmt: d.u32(),
        bs: d.u32(),
        ntables: d.u32(),
        sysid: d.u64(),
        lsn: d.u64(),
        written_at: d.u64(),
        valid: magic == MAGIC && crc_ok(hb, &[]),
    }
}

fn header_of(path: &str) -> Option<Header> {
    let mut f = File::open(path).ok()?;
    let mut hb = [0u8; HEADER_LEN];
    f.read_exact(&mut hb).ok()?;
    Some(decode_header(&hb))
}

/// Where a block's payload goes.
enum Dst {
    /// the arena block's memory (only this loader touches it: start-up, before any other process)
    Arena(*mut u8),
    /// not kept: read to check it, then dropped
    Scratch,
}

/// One block's payload in the image file and its record (for the CRC).
struct Payload {
    dst: Dst,
    off: u64,
    head_len: usize,
    var_low: usize,
    tail_len: usize,
    rec: [u8; BLOCK_LEN],
    rel: u32,
    local: u32,
}

// the arena pointers of different payloads never overlap (each is its own block)
unsafe impl Send for Payload {}
unsafe impl Sync for Payload {}

fn read_payloads(f: &File, jobs: &[Payload]) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let mut scratch = Vec::new();
    for j in jobs {
        let (head, tail): (&mut [u8], &mut [u8]) = match j.dst {
            Dst::Arena(p) => unsafe {
                (
                    std::slice::from_raw_parts_mut(p, j.head_len),
                    std::slice::from_raw_parts_mut(p.add(j.var_low), j.tail_len),
                )
            },
            Dst::Scratch => {
                scratch.resize(j.head_len + j.tail_len, 0);
                let (h, t) = scratch.split_at_mut(j.head_len);
                (h, t)
            }
        };
        f.read_exact_at(head, j.off)
            .and_then(|_| f.read_exact_at(tail, j.off + j.head_len as u64))
            .map_err(|e| format!("truncated: {e}"))?;
        if !crc_ok(&j.rec, &[head, tail]) {
            return Err(format!(
                "damaged: checksum mismatch in block {} of relfilenode {}",
                j.local, j.rel
            ));
        }
    }
    Ok(())
}

/// Loads one image file into the (empty) arena. Configuration mismatches (block size, format
/// version, arena too small) stop the start at once: an older image would not help.
fn load_file(path: &str, ctl: &Control, clean: bool) -> Result<Loaded, NotLoaded> {
    let f = File::open(path).map_err(|e| {
        NotLoaded::Damaged(format!("scoot: cannot open checkpoint image {path}: {e}"))
    })?;
    // unbuffered, positioned reads: block payloads go straight into the arena (one copy out of
    // the page cache), the few small records cost a system call each
    let mut r = f;
    let mut hb = [0u8; HEADER_LEN];
    if let Err(e) = r.read_exact(&mut hb) {
        return Err(NotLoaded::Damaged(format!(
            "scoot: checkpoint image {path} is truncated: {e}"
        )));
    }
    let h = decode_header(&hb);
    if !h.valid {
        return Err(NotLoaded::Damaged(format!(
            "scoot: {path} is not a valid checkpoint image (bad header)"
        )));
    }
    if h.sysid != ctl.system_identifier {
        return Err(NotLoaded::Skipped(format!(
            "scoot: ignoring checkpoint image {path}: it was written by another database system (system identifier {})",
            h.sysid
        )));
    }
    let lsn = h.lsn;
    if lsn > ctl.checkpoint && clean {
        return Err(NotLoaded::Skipped(format!(
            "scoot: ignoring checkpoint image {path} of {:X}/{:X}: it is newer than the last checkpoint {:X}/{:X} in pg_control",
            lsn >> 32,
            lsn as u32,
            ctl.checkpoint >> 32,
            ctl.checkpoint as u32
        )));
    }
    // the tables as of a crash (or of an older image replayed forward): unlogged ones restart
    // empty, as on heap, whose init fork resets them
    let for_recovery = !clean || lsn != ctl.checkpoint;
    if h.version != IMAGE_VERSION || h.fmt != block::FORMAT_VERSION as u32 {
        fatal(format!(
            "scoot: checkpoint image {path} has image version {} / block format {}, this pg_scoot reads {IMAGE_VERSION} / {}",
            h.version,
            h.fmt,
            block::FORMAT_VERSION
        ));
    }
    let bs = h.bs;
    if bs as usize != arena::block_size() {
        fatal(format!(
            "scoot: checkpoint image {path} has blocks of {} kB but scoot.block_size is {} kB",
            bs / 1024,
            arena::block_size() / 1024
        ));
    }
    let damaged =
        |what: String| NotLoaded::Damaged(format!("scoot: checkpoint image {path} is {what}"));
    use std::os::unix::fs::FileExt;
    // pass 1 (this thread): the table and block records, following the payload lengths through
    // the file; entries and arena blocks are created, payloads not read yet
    let mut pos = HEADER_LEN as u64;
    let mut tables = 0u32;
    let mut blocks = 0u64;
    let mut tb = [0u8; TABLE_LEN];
    let mut jobs: Vec<Payload> = Vec::new();
    let mut metas: Vec<(u32, BlockMeta)> = Vec::new();
    for _ in 0..h.ntables {
        r.read_exact_at(&mut tb, pos)
            .map_err(|e| damaged(format!("truncated: {e}")))?;
        pos += TABLE_LEN as u64;
        let (tag, tm) = TableMeta::decode(&tb);
        if tag != TAG_TABLE || !crc_ok(&tb, &[]) {
            return Err(damaged(format!("damaged (table record {tables})")));
        }
        // a table dropped with its database while the entry lingered: skip its blocks
        let exists = relation_file_exists(&tm.key);
        // (after a crash PostgreSQL resets unlogged tables and their indexes from the init
        // forks: they are empty; after a clean shutdown it does not, so an unlogged table whose
        // rows are gone gets no entry and its first access reports the loss)
        let unlogged_reset = for_recovery && tm.persistence != b'p' as u32;
        let keep = exists && !unlogged_reset;
        if exists && unlogged_reset && !clean {
            tabledir::restore_entry(
                &tm.key,
                tm.relid,
                tm.var_mask,
                0,
                false,
                tm.persistence as u8,
            );
        }
        let t = if keep {
            if arena::ctl().nfree_blocks.load(Ordering::Relaxed) < tm.nblocks {
                fatal(format!(
                    "scoot: checkpoint image {path} needs more blocks than scoot.arena_size holds ({} MB)",
                    arena::ctl().arena_bytes >> 20
                ));
            }
            Some(tabledir::restore_entry(
                &tm.key,
                tm.relid,
                tm.var_mask,
                tm.rows_inserted,
                tm.needs_truncate != 0,
                tm.persistence as u8,
            ))
        } else {
            None
        };
        for _ in 0..tm.nblocks {
            let mut bb = [0u8; BLOCK_LEN];
            r.read_exact_at(&mut bb, pos)
                .map_err(|e| damaged(format!("truncated: {e}")))?;
            pos += BLOCK_LEN as u64;
            let (tag, m) = BlockMeta::decode(&bb);
            if tag != TAG_BLOCK || !m.sane(bs) {
                return Err(damaged(format!(
                    "damaged (block record of relfilenode {})",
                    tm.key.rel
                )));
            }
            let head_len = m.fixed_end as usize;
            let tail_len = (bs - m.var_low) as usize;
            // not kept blocks are read into scratch memory: checked all the same
            let dst = match t {
                Some(t) => {
                    let b = arena::restore_block(t, m.local);
                    metas.push((b, m));
                    blocks += 1;
                    Dst::Arena(arena::block_ptr(b))
                }
                None => Dst::Scratch,
            };
            jobs.push(Payload {
                dst,
                off: pos,
                head_len,
                var_low: m.var_low as usize,
                tail_len,
                rec: bb,
                rel: tm.key.rel,
                local: m.local,
            });
            pos += (head_len + tail_len) as u64;
        }
        if let Some(t) = t {
            tabledir::restore_done(t, tm.nlocal, tm.tid_pages);
            tables += 1;
        }
    }
    let mut eb = [0u8; END_LEN];
    r.read_exact_at(&mut eb, pos)
        .map_err(|e| damaged(format!("truncated (no trailer): {e}")))?;
    let mut d = Dec::new(&eb);
    if d.u32() != TAG_END || !crc_ok(&eb, &[]) {
        return Err(damaged("damaged (trailer)".into()));
    }
    // pass 2: the payloads, straight from the page cache into the arena, checked against their
    // records' CRCs, in parallel (plain memory and file reads: no PostgreSQL call in the threads)
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4);
    let total: usize = jobs.iter().map(|j| j.head_len + j.tail_len).sum();
    let mut chunks: Vec<&[Payload]> = Vec::new();
    let mut start = 0;
    let mut acc = 0usize;
    for (i, j) in jobs.iter().enumerate() {
        acc += j.head_len + j.tail_len;
        if acc >= total / threads * (chunks.len() + 1) && chunks.len() + 1 < threads {
            chunks.push(&jobs[start..=i]);
            start = i + 1;
        }
    }
    chunks.push(&jobs[start..]);
    let file = &r;
    let results: Vec<Result<(), String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = chunks
            .iter()
            .map(|c| sc.spawn(move || read_payloads(file, c)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a loader thread panicked".into()))
            })
            .collect()
    });
    for res in results {
        res.map_err(damaged)?;
    }
    for (b, m) in metas {
        m.apply(arena::block_desc(b));
        crate::storage::modify::recount_redirects(b);
    }
    Ok(Loaded {
        lsn,
        tables,
        blocks,
    })
}

/// Records in the arena's control region which image this start loaded (`scoot.checkpoints`).
fn note_loaded(path: &str, l: &Loaded, t0: std::time::Instant) {
    let c = arena::ctl();
    c.image_lsn.store(l.lsn, Ordering::Relaxed);
    c.image_tables.store(l.tables as u64, Ordering::Relaxed);
    c.image_blocks.store(l.blocks, Ordering::Relaxed);
    c.image_load_us
        .store(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    c.loaded_file
        .store(if path == FILE { 1 } else { 2 }, Ordering::Relaxed);
}

/// Starts a new recovery base: an image of the (empty) arena stamped with the checkpoint the
/// server starts from, so that a crash later replays the scoot WAL from there.
fn new_base(ctl: &Control, why: &str) {
    match write_image_at(ctl.system_identifier, ctl.checkpoint) {
        Ok(_) => set_base(ctl.system_identifier, ctl.checkpoint),
        Err(e) => {
            discard_tmp();
            if arena::ctl().base_valid.load(Ordering::Acquire) != 0 {
                warn(&format!(
                    "scoot: {why}, and could not write a new one ({FILE}: {e}): the loaded image and the WAL since it stay in use"
                ))
            } else {
                warn(&format!(
                    "scoot: {why}, and could not write a new one ({FILE}: {e}): scoot tables are not crash safe until the next clean shutdown"
                ))
            }
        }
    }
}

pub fn relation_file_exists(key: &RelKey) -> bool {
    let path = tabledir::main_fork_path(key);
    std::path::Path::new(&path).exists()
}

fn log(msg: &str) {
    ereport!(
        PgLogLevel::LOG,
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        msg.to_string()
    );
}

fn warn(msg: &str) {
    ereport!(
        PgLogLevel::WARNING,
        PgSqlErrorCode::ERRCODE_WARNING,
        msg.to_string()
    );
}

fn fatal(msg: String) -> ! {
    pgrx::pg_sys::panic::ErrorReport::new(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, msg, "pg_scoot")
        .set_hint(format!(
            "Fix the cause, or move {FILE} and {PREV} out of the data directory to start with empty scoot tables (their rows are then lost)."
        ))
        .report(PgLogLevel::FATAL);
    unreachable!()
}

/// The image file on disk, as its header describes it (for `scoot.checkpoints`).
pub struct OnDisk {
    pub bytes: u64,
    pub checkpoint: u64,
    pub written_at: i64,
    pub tables: u32,
    pub valid_header: bool,
}

pub fn on_disk(path: &str) -> Option<OnDisk> {
    let bytes = std::fs::metadata(path).ok()?.len();
    let h = header_of(path);
    Some(OnDisk {
        bytes,
        checkpoint: h.as_ref().map_or(0, |h| h.lsn),
        written_at: h.as_ref().map_or(0, |h| h.written_at as i64),
        tables: h.as_ref().map_or(0, |h| h.ntables),
        valid_header: h.is_some_and(|h| h.valid),
    })
}
