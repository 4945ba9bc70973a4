//! The shared arena: where scoot tuples live.
//!
//! * The **arena** is one memfd mapped `MAP_SHARED` by the postmaster at preload time, so every
//!   backend (forked afterwards) sees it at the same address. It is carved into fixed-size blocks
//!   (`scoot.block_size`). Only block *contents* (in-block header, row version headers, column
//!   regions, variable-length area) live in the arena; this is the memory a later snapshot will
//!   write-protect, so nothing that changes on every access lives here.
//! * The **control region** lives in PostgreSQL shared memory (`ShmemInitStruct`): one
//!   [`BlockDesc`] per block (its LWLock, owner, fill counters, modification counter), the block
//!   free stack, and the table directory (see `tabledir`). Lock words and counters stay outside
//!   the arena, as the snapshot design requires.
//!
//! Block allocation pops a free stack under a short LWLock; freeing pushes it back and punches the
//! block's pages out of the memfd, so dropped tables give memory back to the OS.
use crate::ffi;
use crate::guc;
use crate::storage::block::{self, TID_OFFSETS_PER_PAGE};
use crate::storage::blockmap::{self, BlockMap};
use crate::storage::cow;
use crate::storage::tabledir::{self, TableRef};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub const CTL_MAGIC: u64 = 0x5C00_7A4E_A000_0002;
pub const NO_BLOCK: u32 = u32::MAX;

/// Per-block descriptor, in PostgreSQL shared memory (never in the arena).
#[repr(C)]
pub struct BlockDesc {
    /// Content lock: shared to read rows, exclusive to change them.
    pub lock: pg_sys::LWLock,
    /// `(table_id << 32) | generation`, 0 when the block is free.
    pub owner: AtomicU64,
    /// Bumped on every modification (used by snapshots/freezing later).
    pub mod_count: AtomicU64,
    /// Slots `[0, hwm)` have been handed out at least once.
    pub hwm: AtomicU32,
    /// Number of slots currently on the block's free list.
    pub nfree: AtomicU32,
    /// Rows this block can hold (fixed at format time).
    pub capacity: AtomicU32,
    /// The free-slot bitmap has no free slot in the 64-slot words below this one.
    pub free_hint: AtomicU32,
    /// Start of the variable-length area (it grows downwards from the block end).
    pub var_low: AtomicU32,
    /// Bytes in the variable-length area that belong to no live slot any more.
    pub var_dead: AtomicU32,
    /// End of the fixed part (row headers + column regions).
    pub fixed_end: AtomicU32,
    /// Signature of the layout (column encodings) the block was formatted with.
    pub layout_sig: AtomicU64,
    /// The block's number within its table (TIDs are built from it).
    pub local: AtomicU32,
    /// Next block on the arena free stack.
    pub next_free: AtomicU32,
    /// Slots in state DEAD (waiting for index cleanup by VACUUM).
    pub ndead: AtomicU32,
    /// Slots in state REDIRECT (chain roots whose versions are gone; they take a whole slot
    /// where heap's take a 4-byte line pointer, so the planner's size estimate leaves them out).
    /// Maintained by the modification layer; not WAL-logged: recounted from the block after
    /// redo and after a checkpoint image is loaded (`modify::recount_redirects`), so a hot
    /// standby's count is as of its start (it is only an estimate).
    pub nredirect: AtomicU32,
    /// Versions in this block superseded by an update/delete since the last prune (a hint that
    /// pruning the block's chains would free space).
    pub obsolete: AtomicU32,
    /// Snapshot epoch current when the block was allocated: snapshots up to this epoch do not
    /// contain it, so its pages need no preservation for them (see `cow`).
    pub born: AtomicU32,
    /// Newest epoch a page of this block was preserved for (see `cow`): a snapshot `e` with
    /// `saved_tag < e` finds the whole block unchanged since it was taken.
    pub saved_tag: AtomicU32,
    /// Epoch at which the OLAP worker write-protected this block in the registered writers
    /// (`uffd` method; 0: never). Writers let the kernel preserve pages only of blocks armed for
    /// the newest snapshot.
    pub armed: AtomicU32,
    /// Freed while snapshots that contain it were alive: the epoch current at the free. The
    /// block stays out of use (its contents readable by those snapshots) until they are gone.
    pub zombie: AtomicU32,
    /// All rows of the block are visible to every snapshot whose xmin does not precede this
    /// xid (set by VACUUM, cleared by any change of a row's visibility; 0: unknown). Snapshot
    /// scans skip per-row visibility checks on such blocks.
    pub vis_xid: AtomicU32,
    /// Temperature (`TEMP_HOT`, `TEMP_COOLING`, `TEMP_FROZEN`; see `txn::freeze`). Any
    /// modification sets it back to hot (`modify::Locked::touch`).
    pub temp: AtomicU32,
    /// `dense_hwm`: a scan saw every slot below this high-water mark in state NORMAL while
    /// `mod_count` was `dense_at - 1` (0: never seen). Every slot state change bumps
    /// `mod_count`, so the fact holds exactly while both still match ([`BlockDesc::dense`]):
    /// scans of an all-visible dense block then take every slot without reading a row header.
    pub dense_at: AtomicU64,
    pub dense_hwm: AtomicU32,
}

/// Block temperatures (the CMDB seed's states; "freezing" is the exclusive-locked
/// transformation itself, never observable).
pub const TEMP_HOT: u32 = 0;
/// Unchanged for a while: the freezer freezes it next unless a write makes it hot again.
pub const TEMP_COOLING: u32 = 1;
/// Every row is frozen (visible to all), variable-length values gathered per column.
pub const TEMP_FROZEN: u32 = 2;

/// The control region header; followed by `BlockDesc[nblocks]` and the table directory.
#[repr(C)]
pub struct ArenaCtl {
    pub magic: u64,
    pub arena_bytes: u64,
    pub block_size: u32,
    pub nblocks: u32,
    /// Rows a block can hold at most (`vpb * 291`).
    pub max_rows: u32,
    /// TID pages per block (`block_size / 8192`): a table's TID space is as large as its blocks.
    pub vpb: u32,
    pub max_tables: u32,
    pub tranche: i32,
    pub alloc_lock: pg_sys::LWLock,
    pub dir_lock: pg_sys::LWLock,
    pub free_top: AtomicU32,
    pub nfree_blocks: AtomicU32,
    /// Bumped every time the control region is (re)initialised: a server start or crash restart.
    pub incarnation: AtomicU64,
    pub blocks_allocated_total: AtomicU64,
    /// Write sequence of the block map (a seqlock; see `blockmap`).
    pub map_seq: AtomicU64,
    /// Blocks frozen / frozen blocks thawed by a write, and the time spent freezing (ns), since
    /// the server started.
    pub freezes: AtomicU64,
    pub thaws: AtomicU64,
    pub freeze_ns: AtomicU64,
    /// The checkpoint image loaded at this start (see `wal::checkpoint_image`; 0: none): its
    /// checkpoint LSN, tables, blocks and load time.
    pub image_lsn: AtomicU64,
    pub image_tables: AtomicU64,
    pub image_blocks: AtomicU64,
    pub image_load_us: AtomicU64,
    /// The base crash recovery replays the scoot WAL onto: the checkpoint image stamped
    /// `base_lsn` (valid only when `base_valid` is 1; see `wal`).
    pub base_lsn: AtomicU64,
    pub base_valid: AtomicU32,
    /// Scoot WAL records applied by the last crash recovery, and its duration.
    pub redo_records: AtomicU64,
    pub redo_us: AtomicU64,
    /// This start ran crash recovery (PostgreSQL reset unlogged relations, indexes included).
    pub crash_recovered: AtomicU32,
    /// Checkpoint images the OLAP worker wrote since the server started.
    pub images_written: AtomicU64,
    /// The oldest checkpoint image kept on disk (the previous one, a fallback should the newest
    /// be damaged): the replication slot keeps the WAL since this LSN.
    pub keep_lsn: AtomicU64,
    /// Which image this start loaded: 0 none, 1 the newest, 2 the previous one (the newest was
    /// damaged or unreadable).
    pub loaded_file: AtomicU32,
    /// This start replayed scoot WAL in the postmaster (a clean shutdown whose own image was
    /// missing, stale or damaged).
    pub replayed_at_start: AtomicU32,
    /// Crash start: the postmaster replayed the scoot WAL from the base image up to this LSN (the
    /// last checkpoint's redo point); PostgreSQL's redo applies the records from there on.
    pub replayed_to: AtomicU64,
    /// This server started from a base backup or as a standby (now or earlier, see
    /// `wal::checkpoint_image::NOT_REPLAYED`): scoot tables from before have no rows here.
    pub rows_not_replayed: AtomicU32,
    /// This start follows a base backup or runs as a standby, with a checkpoint image (copied
    /// from the primary, or written by this standby at its last clean shutdown) as its base: the
    /// scoot WAL is replayed, also while hot standby queries read the arena.
    pub from_backup: AtomicU32,
    /// The base image is older than PostgreSQL's redo start and the WAL between them is not in
    /// pg_wal: the startup process fetches it from the primary (`wal::rm_startup`) and replays
    /// it up to `gap_to` on timeline `gap_tli` before PostgreSQL's redo starts.
    pub gap_to: AtomicU64,
    pub gap_tli: AtomicU32,
    /// The background compactor (`am::compact`) while it runs: its pid and database (0: none).
    /// Statements that need a database without other connections (DROP DATABASE, CREATE
    /// DATABASE ... TEMPLATE, ...) stop it first, as PostgreSQL stops autovacuum workers.
    pub compactor_pid: std::sync::atomic::AtomicI32,
    pub compactor_db: AtomicU32,
}

static mut ARENA_BASE: *mut u8 = std::ptr::null_mut();
static mut ARENA_BYTES: usize = 0;
static mut ARENA_FD: i32 = -1;
/// A second mapping of the arena's memfd, never registered for userfaultfd: see [`alias_of`].
static mut ALIAS_BASE: *mut u8 = std::ptr::null_mut();
static mut CTL: *mut ArenaCtl = std::ptr::null_mut();
static mut PREV_SHMEM_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP: pg_sys::shmem_startup_hook_type = None;
static mut TRANCHE_REGISTERED: bool = false;

/// Start of the arena mapping.
#[inline]
pub fn base() -> *mut u8 {
    unsafe { ARENA_BASE }
}

/// The arena address of `p` when `p` lies in the alias mapping ([`alias_of`]), else `p`: the WAL
/// capture and the snapshots' pre-images take arena addresses, whichever mapping a write
/// announced goes through.
#[inline]
pub fn unalias(p: *const u8) -> *const u8 {
    unsafe {
        let a = ALIAS_BASE as usize;
        let x = p as usize;
        if a != 0 && x >= a && x < a + ARENA_BYTES {
            (ARENA_BASE as usize + (x - a)) as *const u8
        } else {
            p
        }
    }
}

/// Size of the arena mapping in bytes.
#[inline]
pub fn bytes() -> usize {
    unsafe { ARENA_BYTES }
}

/// The address of arena byte `p` in the arena's *alias*: a second shared mapping of the same
/// memfd (same memory), made by the postmaster with the arena and inherited by every process,
/// that no process registers for userfaultfd. A writer whose arena pages the kernel
/// write-protects for a snapshot writes bytes it has announced, and whose pre-images it has
/// saved, through the alias (`cow::before_write_block_via`): no trapped write, no ioctl to lift
/// the protection and no second (dirty-tracking) fault per page, while every write it did not
/// announce still goes through the protected mapping and traps. None without a memfd.
#[inline]
pub fn alias_of(p: *const u8) -> Option<*mut u8> {
    unsafe {
        if ALIAS_BASE.is_null() {
            None
        } else {
            Some(ALIAS_BASE.add(p as usize - ARENA_BASE as usize))
        }
    }
}

static mut POOL_BASE: *mut u8 = std::ptr::null_mut();

fn cow_frames() -> usize {
    guc::SNAPSHOT_MEMORY_MB.get() as usize * 1024 * 1024 / cow::PAGE
}

fn cow_sections() -> usize {
    unsafe { pg_sys::MaxBackends as usize + 1024 }
}

fn cow_bytes() -> usize {
    cow::shmem_bytes(
        unsafe { ARENA_BYTES } / cow::PAGE,
        cow_frames(),
        cow_sections(),
    )
}

pub fn is_ready() -> bool {
    unsafe { !CTL.is_null() && !ARENA_BASE.is_null() }
}

#[inline]
pub fn ctl() -> &'static ArenaCtl {
    unsafe { &*CTL }
}

#[inline]
pub fn block_size() -> usize {
    ctl().block_size as usize
}

#[inline]
pub fn nblocks() -> u32 {
    ctl().nblocks
}

#[inline]
pub fn vpb() -> u32 {
    ctl().vpb
}

#[inline]
pub fn max_rows() -> u32 {
    ctl().max_rows
}

#[inline]
pub fn block_desc(b: u32) -> &'static BlockDesc {
    debug_assert!(b < nblocks());
    unsafe {
        let base = (CTL as *mut u8).add(blocks_offset()) as *const BlockDesc;
        &*base.add(b as usize)
    }
}

#[inline]
pub fn block_ptr(b: u32) -> *mut u8 {
    unsafe { ARENA_BASE.add(b as usize * block_size()) }
}

/// The parts of each arena block this backend populated (a mask per block: bit `p` for part
/// `p` of [`block::BlockRef::read_parts`]).
static mut POPULATED: Vec<u64> = Vec::new();

/// [`populate`]'s list of a block's parts.
static mut PARTS: Vec<(u32, usize, usize)> = Vec::new();

/// Maps into this process's page tables, in one call per contiguous range (MADV_POPULATE_READ,
/// Linux 5.14+; a no-op where unsupported), the parts of block `b` that a reader of columns
/// `cols` (as [`block::BlockRef::read_parts`] takes them; empty: all; `rows`: and the row version
/// headers) touches: a backend's first read of a block otherwise takes one page fault per 4 kB,
/// which a whole-table read of a fresh connection (and every parallel worker, a new process each
/// time) pays for every block. Only the read columns' regions: mapping a whole 1 MB block for a
/// query reading 4 of 16 columns cost a fresh connection's first TPC-H Q6 four fifths of its time.
pub fn populate(b: u32, cols: &[bool], rows: bool) {
    const MADV_POPULATE_READ: i32 = 22;
    let blk = block::BlockRef { base: block_ptr(b) };
    let bs = block_size();
    // reused: a backend enters blocks by the thousand (single-threaded, never re-entered)
    #[allow(static_mut_refs)]
    let parts = unsafe { &mut PARTS };
    parts.clear();
    // the header tells where the parts are: it is read (faulted in) here, possibly while the
    // block is being formatted by another backend, so every range is clamped to the block; the
    // mapping is only ever a hint
    let var_low = block_desc(b).var_low.load(Ordering::Relaxed) as usize;
    let h = blk.header();
    let sane = h.magic == block::BLOCK_MAGIC
        && (h.natts as usize + 1) * std::mem::size_of::<block::ColDesc>() < bs / 2;
    if sane {
        blk.read_parts(cols, rows, var_low, bs, parts);
    } else {
        parts.push((block::PART_HEAD, 0, bs));
    }
    let want = parts.iter().fold(0u64, |m, &(p, _, _)| m | 1 << p);
    // once per part, block and backend: the page tables stay (a freed block's pages are zapped
    // in every process, which then merely faults them in again one by one); populating already
    // mapped pages still walks their page-table entries, which an OLTP statement scanning a small
    // table would pay every time
    #[allow(static_mut_refs)]
    let missing = unsafe {
        let w = b as usize;
        if POPULATED.len() <= w {
            POPULATED.resize(w + 1, 0);
        }
        let missing = want & !POPULATED[w];
        POPULATED[w] |= want;
        missing
    };
    if missing == 0 {
        return;
    }
    let page = 4096usize;
    let mut ranges: Vec<(usize, usize)> = parts
        .iter()
        .filter(|&&(p, _, _)| missing & (1 << p) != 0)
        .map(|&(_, off, len)| (off / page * page, (off + len).div_ceil(page) * page))
        .collect();
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (from, to) in ranges {
        match merged.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => merged.push((from, to)),
        }
    }
    for (from, to) in merged {
        let to = to.min(bs);
        if from < to {
            unsafe {
                libc::madvise(
                    block_ptr(b).add(from) as *mut libc::c_void,
                    to - from,
                    MADV_POPULATE_READ,
                );
            }
        }
    }
}

/// Pointer to the start of the table directory entries.
pub fn tabledir_ptr() -> *mut u8 {
    unsafe {
        if TABLEDIR.is_null() {
            TABLEDIR = (CTL as *mut u8).add(tabledir_offset());
        }
        TABLEDIR
    }
}

/// [`tabledir_ptr`] once computed (every table lookup asks for it; the offset takes a division).
static mut TABLEDIR: *mut u8 = std::ptr::null_mut();

fn align_up(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}

fn blocks_offset() -> usize {
    align_up(std::mem::size_of::<ArenaCtl>(), 64)
}

fn tabledir_offset() -> usize {
    let n = unsafe { ARENA_BYTES } / block_size_setting();
    align_up(blocks_offset() + n * std::mem::size_of::<BlockDesc>(), 64)
}

fn block_size_setting() -> usize {
    guc::BLOCK_SIZE_KB.get() as usize * 1024
}

fn map_offset() -> usize {
    align_up(
        tabledir_offset() + guc::MAX_TABLES.get() as usize * crate::storage::tabledir::entry_size(),
        64,
    )
}

fn arena_nblocks() -> u32 {
    (unsafe { ARENA_BYTES } / block_size_setting()) as u32
}

fn ctl_size() -> usize {
    map_offset() + blockmap::bytes_for(arena_nblocks()) + 64
}

static mut MAP: Option<BlockMap> = None;

/// The (table, local block) -> arena block map.
#[inline]
pub fn map() -> &'static BlockMap {
    unsafe { (*(&raw const MAP)).as_ref().unwrap_unchecked() }
}

/// Called from `_PG_init` in the postmaster: validates settings, maps the arena, installs hooks.
pub unsafe fn install_hooks() {
    unsafe {
        let bs = block_size_setting();
        if !bs.is_power_of_two() {
            ereport!(
                PgLogLevel::ERROR,
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!(
                    "scoot.block_size must be a power of two (got {} kB)",
                    bs / 1024
                )
            );
        }
        let want = guc::ARENA_SIZE_MB.get() as usize * 1024 * 1024;
        if want < 2 * bs {
            ereport!(
                PgLogLevel::ERROR,
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                "scoot.arena_size must hold at least two blocks of scoot.block_size"
            );
        }
        let bytes = want / bs * bs;
        if bytes / bs >= (1usize << 31) {
            crate::ffi::error_hint(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!(
                    "scoot.arena_size / scoot.block_size gives {} blocks, at most 2^31 are supported",
                    bytes / bs
                ),
                "Increase scoot.block_size or lower scoot.arena_size.",
            );
        }
        map_arena(bytes);
        // the pre-image pool of OLAP snapshots, populated lazily like the arena
        let pool_bytes = guc::SNAPSHOT_MEMORY_MB.get() as usize * 1024 * 1024;
        let pfd = libc::memfd_create(c"scoot_snapshot_pool".as_ptr(), 0);
        if pfd >= 0 && libc::ftruncate(pfd, pool_bytes as libc::off_t) == 0 {
            if let Some(p) = map_shared(pool_bytes, pfd) {
                POOL_BASE = p;
            }
        }
        if POOL_BASE.is_null() {
            crate::ffi::error_hint(
                PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
                format!(
                    "could not map the scoot snapshot pool ({} MB)",
                    pool_bytes >> 20
                ),
                "Lower scoot.snapshot_memory.",
            );
        }
        PREV_SHMEM_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(shmem_request);
        PREV_SHMEM_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
    }
}

unsafe fn map_arena(bytes: usize) {
    unsafe {
        let fd = libc::memfd_create(c"scoot_arena".as_ptr(), 0);
        let (fd, base) = if fd >= 0 && libc::ftruncate(fd, bytes as libc::off_t) == 0 {
            (fd, map_shared(bytes, fd))
        } else {
            // No memfd: anonymous shared memory still works for everything but later snapshots.
            (-1, map_shared(bytes, -1))
        };
        let Some(base) = base else {
            crate::ffi::error_hint(
                PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
                format!("could not map the scoot arena ({} MB)", bytes >> 20),
                "Lower scoot.arena_size.",
            );
        };
        ARENA_FD = fd;
        ARENA_BASE = base;
        ARENA_BYTES = bytes;
        if fd >= 0 {
            // the alias (see `alias_of`); without it writers lift the protection page by page
            if let Some(a) = map_shared(bytes, fd) {
                ALIAS_BASE = a;
            }
        }
    }
}

/// Maps `bytes` of memfd `fd` (anonymous shared memory for -1) read-write, shared and without
/// reserving swap (populated lazily); None if the kernel refuses.
unsafe fn map_shared(bytes: usize, fd: libc::c_int) -> Option<*mut u8> {
    let anon = if fd < 0 { libc::MAP_ANONYMOUS } else { 0 };
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_NORESERVE | anon,
            fd,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as *mut u8)
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST {
            prev();
        }
        pg_sys::RequestAddinShmemSpace(ctl_size());
        pg_sys::RequestAddinShmemSpace(cow_bytes());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP {
            prev();
        }
        let init_lock = ffi::addin_shmem_init_lock();
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let p = pg_sys::ShmemInitStruct(c"pg_scoot control".as_ptr(), ctl_size(), &mut found);
        CTL = p as *mut ArenaCtl;
        TABLEDIR = std::ptr::null_mut();
        MAP = Some(BlockMap::new(
            (p as *mut u8).add(map_offset()),
            arena_nblocks(),
            &(*CTL).map_seq,
        ));
        if !found {
            init_ctl();
        }
        let fresh = !found;
        let mut cfound = false;
        let cp = pg_sys::ShmemInitStruct(
            c"pg_scoot snapshot pages".as_ptr(),
            cow_bytes(),
            &mut cfound,
        );
        cow::attach(
            cp as *mut u8,
            !cfound,
            ARENA_BYTES / cow::PAGE,
            cow_frames(),
            cow_sections(),
            POOL_BASE,
        );
        if !cfound {
            libc::madvise(
                POOL_BASE as *mut c_void,
                cow_frames() * cow::PAGE,
                libc::MADV_REMOVE,
            );
        }
        pg_sys::LWLockRelease(init_lock);
        if fresh {
            // the durability layer sits above storage; it registered itself at preload time
            if let Some(f) = ON_INITIALISED {
                f();
            }
        }
    }
}

/// Called once the control region of a new incarnation is initialised, in the process that
/// created it (set by `_PG_init`; `wal` restores a checkpoint image there).
pub static mut ON_INITIALISED: Option<fn()> = None;

/// (Re)initialises the control region: every block free, every table forgotten. After a crash
/// restart this also throws the old arena contents away (`wal::checkpoint_image` refills the
/// arena from an image after a clean shutdown).
unsafe fn init_ctl() {
    unsafe {
        std::ptr::write_bytes(CTL as *mut u8, 0, ctl_size());
        let c = &mut *CTL;
        let bs = block_size_setting();
        c.magic = CTL_MAGIC;
        c.arena_bytes = ARENA_BYTES as u64;
        c.block_size = bs as u32;
        c.nblocks = (ARENA_BYTES / bs) as u32;
        // a block spans block_size / 8 kB TID pages of up to 291 offsets each, so a table's TID
        // space (relation size) equals its blocks' bytes, whatever the arena size
        c.vpb = (bs / pg_sys::BLCKSZ as usize) as u32;
        c.max_rows = c.vpb * TID_OFFSETS_PER_PAGE;
        c.max_tables = guc::MAX_TABLES.get() as u32;
        c.tranche = pg_sys::LWLockNewTrancheId();
        pg_sys::LWLockRegisterTranche(c.tranche, c"scoot".as_ptr());
        TRANCHE_REGISTERED = true;
        pg_sys::LWLockInitialize(&mut c.alloc_lock, c.tranche);
        pg_sys::LWLockInitialize(&mut c.dir_lock, c.tranche);
        c.incarnation.store(
            (pg_sys::GetCurrentTimestamp() as u64) ^ (libc::getpid() as u64),
            Ordering::Relaxed,
        );
        // free stack: block 0 on top
        let n = c.nblocks;
        for b in (0..n).rev() {
            let d = block_desc(b) as *const BlockDesc as *mut BlockDesc;
            pg_sys::LWLockInitialize(&mut (*d).lock, c.tranche);
            (*d).next_free
                .store(c.free_top.load(Ordering::Relaxed), Ordering::Relaxed);
            c.free_top.store(b, Ordering::Relaxed);
        }
        if n == 0 {
            c.free_top.store(NO_BLOCK, Ordering::Relaxed);
        } else {
            block_desc(n - 1)
                .next_free
                .store(NO_BLOCK, Ordering::Relaxed);
        }
        c.nfree_blocks.store(n, Ordering::Relaxed);
        crate::storage::tabledir::init(c.max_tables);
        map().clear();
        // release whatever a previous incarnation left in the memfd
        libc::madvise(ARENA_BASE as *mut c_void, ARENA_BYTES, libc::MADV_REMOVE);
    }
}

/// Start-up only (no other process exists yet): forgets every table and block again, as at
/// creation (a damaged checkpoint image was partly loaded before an older one is tried).
pub fn reinit() {
    unsafe { init_ctl() }
}

/// Registers the tranche name in this backend (for wait-event display); cheap and idempotent.
#[inline]
pub fn register_tranche() {
    unsafe {
        if !TRANCHE_REGISTERED {
            pg_sys::LWLockRegisterTranche(ctl().tranche, c"scoot".as_ptr());
            TRANCHE_REGISTERED = true;
        }
    }
}

pub fn owner_word(table_id: u32, gen: u32) -> u64 {
    ((table_id as u64) << 32) | gen as u64
}

/// Pops a free block, makes it owned by table `t` under the lowest free local number, and grows
/// the table's (sparse) relation file when its TID space grew. Raises `out of scoot arena memory`
/// when no block is left. Returns (arena block, local number).
pub fn alloc_block(t: TableRef) -> (u32, u32) {
    let c = ctl();
    if c.free_top.load(Ordering::Acquire) == NO_BLOCK && cow::is_ready() {
        reclaim_zombies(cow::oldest_live_epoch());
    }
    let (b, lb) = {
        let _g = LwGuard::exclusive(&c.alloc_lock as *const _ as *mut _);
        let top = c.free_top.load(Ordering::Relaxed);
        if top == NO_BLOCK {
            (NO_BLOCK, 0)
        } else {
            let d = block_desc(top);
            c.free_top
                .store(d.next_free.load(Ordering::Relaxed), Ordering::Relaxed);
            c.nfree_blocks.fetch_sub(1, Ordering::Relaxed);
            let (lb, grew) = tabledir::assign_local(t, top);
            d.local.store(lb, Ordering::Relaxed);
            d.born.store(
                if cow::is_ready() {
                    cow::ctl().last_epoch.load(Ordering::Acquire)
                } else {
                    0
                },
                Ordering::Release,
            );
            d.saved_tag.store(0, Ordering::Relaxed);
            d.armed.store(0, Ordering::Relaxed);
            d.vis_xid.store(0, Ordering::Relaxed);
            d.temp.store(TEMP_HOT, Ordering::Relaxed);
            d.owner.store(t.owner(), Ordering::Release);
            if grew {
                tabledir::publish_size(t);
            }
            (top, lb)
        }
    };
    if b == NO_BLOCK {
        crate::ffi::error_hint(PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY, "out of scoot arena memory", format!(
                "All {} blocks of {} kB are in use. Increase scoot.arena_size (now {} MB), or free space with VACUUM, TRUNCATE or DROP TABLE.",
                c.nblocks,
                c.block_size / 1024,
                c.arena_bytes >> 20
            ));
    }
    c.blocks_allocated_total.fetch_add(1, Ordering::Relaxed);
    (b, lb)
}

/// Start-up only (no other process exists yet): takes a free block for local block `lb` of `t`,
/// which a checkpoint image is about to fill. The caller restores the descriptor's persistent
/// fields; the per-incarnation ones (snapshot epochs) start fresh.
pub fn restore_block(t: TableRef, lb: u32) -> u32 {
    let c = ctl();
    let top = c.free_top.load(Ordering::Relaxed);
    assert!(
        top != NO_BLOCK,
        "restore_block: arena full (checked by the caller)"
    );
    let d = block_desc(top);
    c.free_top
        .store(d.next_free.load(Ordering::Relaxed), Ordering::Relaxed);
    c.nfree_blocks.fetch_sub(1, Ordering::Relaxed);
    map().insert(t.id, lb, top);
    d.born.store(0, Ordering::Relaxed);
    d.saved_tag.store(0, Ordering::Relaxed);
    d.armed.store(0, Ordering::Relaxed);
    d.zombie.store(0, Ordering::Relaxed);
    d.owner.store(t.owner(), Ordering::Release);
    c.blocks_allocated_total.fetch_add(1, Ordering::Relaxed);
    top
}

/// Returns block `b` of table `t` to the arena. Caller holds the block's lock exclusively (or owns
/// it alone). `resize_file`: shrink the relation file when the table's TID space shrank (not
/// needed when the whole relfilenode goes away).
pub fn free_block(t: TableRef, b: u32, resize_file: bool) {
    let _section = cow::Section_::enter();
    let c = ctl();
    let d = block_desc(b);
    d.owner.store(0, Ordering::Release);
    d.hwm.store(0, Ordering::Relaxed);
    d.nfree.store(0, Ordering::Relaxed);
    d.ndead.store(0, Ordering::Relaxed);
    d.nredirect.store(0, Ordering::Relaxed);
    d.obsolete.store(0, Ordering::Relaxed);
    d.capacity.store(0, Ordering::Relaxed);
    d.layout_sig.store(0, Ordering::Relaxed);
    d.vis_xid.store(0, Ordering::Relaxed);
    d.temp.store(TEMP_HOT, Ordering::Relaxed);
    d.mod_count.fetch_add(1, Ordering::Relaxed);
    // a live snapshot may contain the block: keep its memory until no such snapshot is left
    let zombie = cow::live_epoch().is_some();
    if zombie {
        d.zombie.store(
            cow::ctl().last_epoch.load(Ordering::Acquire).max(1),
            Ordering::Release,
        );
    } else {
        unsafe {
            libc::madvise(block_ptr(b) as *mut c_void, block_size(), libc::MADV_REMOVE);
        }
    }
    let _g = LwGuard::exclusive(&c.alloc_lock as *const _ as *mut _);
    let shrank = tabledir::release_local(t, d.local.load(Ordering::Relaxed));
    if shrank && resize_file {
        tabledir::publish_size(t);
    }
    if !zombie {
        push_free(b);
    }
}

/// Pushes block `b` on the free stack. Caller holds the allocation lock.
fn push_free(b: u32) {
    let c = ctl();
    let d = block_desc(b);
    d.next_free
        .store(c.free_top.load(Ordering::Relaxed), Ordering::Relaxed);
    c.free_top.store(b, Ordering::Relaxed);
    c.nfree_blocks.fetch_add(1, Ordering::Relaxed);
}

/// Returns to the free stack the blocks freed while snapshots held them, once every snapshot
/// that may contain them is gone (`oldest_live`: oldest live epoch, 0 if none). Returns how many.
pub fn reclaim_zombies(oldest_live: u32) -> u32 {
    let c = ctl();
    let mut n = 0;
    for b in 0..c.nblocks {
        let d = block_desc(b);
        let z = d.zombie.load(Ordering::Acquire);
        // snapshots taken after the free (epoch > z) do not contain the block
        if z == 0 || (oldest_live != 0 && oldest_live <= z) {
            continue;
        }
        let _g = LwGuard::exclusive(&c.alloc_lock as *const _ as *mut _);
        if d.zombie.load(Ordering::Acquire) != z {
            continue;
        }
        unsafe {
            libc::madvise(block_ptr(b) as *mut c_void, block_size(), libc::MADV_REMOVE);
        }
        d.zombie.store(0, Ordering::Release);
        push_free(b);
        n += 1;
    }
    n
}

/// Blocks waiting for snapshots to release them.
pub fn zombie_blocks() -> u32 {
    let c = ctl();
    (0..c.nblocks)
        .filter(|&b| block_desc(b).zombie.load(Ordering::Relaxed) != 0)
        .count() as u32
}

/// RAII LWLock holder. Dropping (also while unwinding from an error) releases the lock.
///
/// Taken for every block a scan enters or a writer changes, so the four calls go without pgrx's
/// FFI guard (a `sigsetjmp` each, 3% of a TPC-C backend's time): `LWLockAcquire` raises an error
/// only past 200 locks held at once and `LWLockRelease` only for a lock not held (checked
/// first), both bugs that no Rust state survives anyway (the transaction's abort releases every
/// LWLock); the other two never raise one.
pub struct LwGuard {
    lock: *mut pg_sys::LWLock,
}

mod lw {
    use pgrx::pg_sys;
    extern "C-unwind" {
        pub fn LWLockAcquire(lock: *mut pg_sys::LWLock, mode: pg_sys::LWLockMode::Type) -> bool;
        pub fn LWLockConditionalAcquire(
            lock: *mut pg_sys::LWLock,
            mode: pg_sys::LWLockMode::Type,
        ) -> bool;
        pub fn LWLockRelease(lock: *mut pg_sys::LWLock);
        pub fn LWLockHeldByMe(lock: *mut pg_sys::LWLock) -> bool;
    }
}

impl LwGuard {
    #[inline]
    pub fn shared(lock: *mut pg_sys::LWLock) -> LwGuard {
        unsafe { lw::LWLockAcquire(lock, pg_sys::LWLockMode::LW_SHARED) };
        LwGuard { lock }
    }
    #[inline]
    pub fn exclusive(lock: *mut pg_sys::LWLock) -> LwGuard {
        unsafe { lw::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) };
        LwGuard { lock }
    }
    #[inline]
    pub fn try_exclusive(lock: *mut pg_sys::LWLock) -> Option<LwGuard> {
        if unsafe { lw::LWLockConditionalAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) } {
            Some(LwGuard { lock })
        } else {
            None
        }
    }
}

impl Drop for LwGuard {
    #[inline]
    fn drop(&mut self) {
        unsafe {
            if lw::LWLockHeldByMe(self.lock) {
                lw::LWLockRelease(self.lock)
            }
        }
    }
}

impl BlockDesc {
    /// Is every slot below `hwm` a NORMAL row, as a scan last recorded (see `dense_at`)? The
    /// caller holds the block's lock (or the snapshot gate), so nothing changes in between.
    #[inline]
    pub fn dense(&self, hwm: u32) -> bool {
        self.dense_at.load(Ordering::Relaxed) == self.mod_count.load(Ordering::Relaxed) + 1
            && self.dense_hwm.load(Ordering::Relaxed) == hwm
    }
    /// Records that every slot below `hwm` is a NORMAL row (the caller holds the block's lock,
    /// shared at least: no slot state changes meanwhile).
    #[inline]
    pub fn set_dense(&self, hwm: u32) {
        self.dense_hwm.store(hwm, Ordering::Relaxed);
        self.dense_at.store(
            self.mod_count.load(Ordering::Relaxed) + 1,
            Ordering::Relaxed,
        );
    }
    #[inline]
    pub fn lock_ptr(&self) -> *mut pg_sys::LWLock {
        &self.lock as *const _ as *mut _
    }
    #[inline]
    pub fn share(&self) -> LwGuard {
        LwGuard::shared(self.lock_ptr())
    }
    #[inline]
    pub fn exclusive(&self) -> LwGuard {
        LwGuard::exclusive(self.lock_ptr())
    }
}

/// Runs `f` under the allocation lock (block allocation, the block map and relation sizes).
pub fn with_alloc_lock<R>(f: impl FnOnce() -> R) -> R {
    let _g = LwGuard::exclusive(&ctl().alloc_lock as *const _ as *mut _);
    f()
}
