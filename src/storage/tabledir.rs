//! The table directory: which scoot relation (by relfilenode) owns which blocks.
//!
//! A fixed array of entries in the control region (`scoot.max_tables`), protected by one LWLock.
//! A table's id is its index + 1; a block's owner word is `(id << 32) | generation`, so a reused
//! entry never claims the blocks of a dropped table. Backends cache the lookup in the relcache
//! entry (`rd_amcache`) and re-validate it with two atomic loads.
//!
//! A table numbers its blocks 0, 1, 2, ... (`local` numbers, mapped to arena blocks by
//! `blockmap`); a new block takes the lowest free number, so the TID space stays dense. The
//! relation's main-fork file is kept (sparse, no disk used) at `nlocal * block_size` bytes: what
//! `pg_relation_size()` reports is the memory the table's blocks span, and smgr prefetches of
//! bitmap scans and ANALYZE (which PostgreSQL issues for every TID page) land inside the file.
//!
//! An entry also remembers that this server incarnation knows the table: a relation whose
//! relfilenode has no entry was created before the last restart and lost its rows (a crash or an
//! immediate shutdown: only a clean shutdown writes the checkpoint image that `wal` loads at the
//! next start), which `resolve` reports with a WARNING once.
use crate::ffi;
use crate::storage::arena::{self, LwGuard};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RelKey {
    pub spc: u32,
    pub db: u32,
    pub rel: u32,
    pub backend: i32,
}

pub const E_EMPTY: u32 = 0;
pub const E_USED: u32 = 1;

#[repr(C)]
pub struct TableEntry {
    pub key: RelKey,
    pub state: AtomicU32,
    pub gen: AtomicU32,
    /// A local block with free slots (a hint; validated under the block lock).
    pub insert_hint: AtomicU32,
    /// Local block numbers in use are below this.
    pub nlocal: AtomicU32,
    /// TID pages in use (the relation size in 8 kB pages, what `relation_size` reports): all
    /// pages of the blocks before the last one plus the started pages of the last. Published
    /// (under the allocation lock) only after the relation file has grown to it.
    pub tid_pages: AtomicU32,
    /// No local number below this is free (allocation search starts here).
    pub local_hint: AtomicU32,
    /// Columns (bit i = attribute i) that new blocks store as VAR because a value did not fit
    /// their compact encoding.
    pub var_mask: AtomicU64,
    pub nblocks: AtomicU32,
    /// pg_class oid at creation time (for views; informational).
    pub relid: AtomicU32,
    /// Lost its rows in a restart while its (persistent) indexes still reference them: refuse
    /// access until TRUNCATE gives it a new relfilenode with empty indexes.
    pub needs_truncate: AtomicU32,
    pub rows_inserted: AtomicU64,
    /// `relpersistence` of the relation (`b'p'`, `b'u'`, `b't'`): only permanent tables write WAL.
    pub persistence: AtomicU32,
    /// Row versions the background freezer pruned and could not report to the statistics (it
    /// has no Relation): the next scan or index fetch of the table reports them
    /// (`am::index::report_background_pruning`); VACUUM, which counts the truth, drops them.
    pub pruned_unreported: AtomicU32,
}

pub fn entry_size() -> usize {
    std::mem::size_of::<TableEntry>()
}

pub fn init(max_tables: u32) {
    for i in 0..max_tables {
        let e = entry(i + 1);
        e.state.store(E_EMPTY, Ordering::Relaxed);
        e.gen.store(0, Ordering::Relaxed);
        e.insert_hint.store(arena::NO_BLOCK, Ordering::Relaxed);
    }
}

#[inline]
pub fn entry(id: u32) -> &'static mut TableEntry {
    unsafe { &mut *((arena::tabledir_ptr() as *mut TableEntry).add(id as usize - 1)) }
}

/// A resolved table: id + generation, i.e. the owner word of its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableRef {
    pub id: u32,
    pub gen: u32,
}

impl TableRef {
    /// Does the table write WAL (a permanent table)?
    #[inline]
    pub fn logged(&self) -> bool {
        entry(self.id).persistence.load(Ordering::Relaxed) == b'p' as u32
    }
    #[inline]
    pub fn owner(&self) -> u64 {
        arena::owner_word(self.id, self.gen)
    }
    #[inline]
    pub fn entry(&self) -> &'static mut TableEntry {
        entry(self.id)
    }
    #[inline]
    pub fn is_current(&self) -> bool {
        let e = entry(self.id);
        e.state.load(Ordering::Acquire) == E_USED && e.gen.load(Ordering::Acquire) == self.gen
    }
}

pub fn key_of_rel(rel: pg_sys::Relation) -> RelKey {
    unsafe {
        let n = (*rel).rd_node;
        RelKey {
            spc: n.spcNode.into(),
            db: n.dbNode.into(),
            rel: n.relNode.into(),
            backend: (*rel).rd_backend,
        }
    }
}

pub fn key_of_node(node: &pg_sys::RelFileNode, backend: i32) -> RelKey {
    RelKey {
        spc: node.spcNode.into(),
        db: node.dbNode.into(),
        rel: node.relNode.into(),
        backend,
    }
}

fn find_locked(key: &RelKey) -> Option<TableRef> {
    let max = arena::ctl().max_tables;
    for id in 1..=max {
        let e = entry(id);
        if e.state.load(Ordering::Relaxed) == E_USED && e.key == *key {
            return Some(TableRef {
                id,
                gen: e.gen.load(Ordering::Relaxed),
            });
        }
    }
    None
}

pub fn lookup(key: &RelKey) -> Option<TableRef> {
    let _g = LwGuard::shared(&arena::ctl().dir_lock as *const _ as *mut _);
    find_locked(key)
}

/// Creates (or returns the existing) entry for `key`.
pub fn create(key: &RelKey, relid: u32, persistence: u8) -> TableRef {
    let _g = LwGuard::exclusive(&arena::ctl().dir_lock as *const _ as *mut _);
    if let Some(t) = find_locked(key) {
        return t;
    }
    let max = arena::ctl().max_tables;
    for id in 1..=max {
        let e = entry(id);
        if e.state.load(Ordering::Relaxed) == E_EMPTY {
            e.key = *key;
            let gen = e.gen.load(Ordering::Relaxed).wrapping_add(1).max(1);
            e.gen.store(gen, Ordering::Relaxed);
            e.insert_hint.store(arena::NO_BLOCK, Ordering::Relaxed);
            e.nblocks.store(0, Ordering::Relaxed);
            e.nlocal.store(0, Ordering::Relaxed);
            e.tid_pages.store(0, Ordering::Relaxed);
            e.local_hint.store(0, Ordering::Relaxed);
            e.var_mask.store(0, Ordering::Relaxed);
            e.relid.store(relid, Ordering::Relaxed);
            e.rows_inserted.store(0, Ordering::Relaxed);
            e.needs_truncate.store(0, Ordering::Relaxed);
            e.pruned_unreported.store(0, Ordering::Relaxed);
            e.persistence.store(persistence as u32, Ordering::Relaxed);
            e.state.store(E_USED, Ordering::Release);
            return TableRef { id, gen };
        }
    }
    drop(_g);
    crate::ffi::error_hint(
        PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        "too many scoot tables",
        format!("Increase scoot.max_tables (now {max}) and restart the server."),
    );
}

/// Start-up only: recreates the entry of a table from a checkpoint image (its blocks follow with
/// `arena::restore_block`, then `restore_done`).
pub fn restore_entry(
    key: &RelKey,
    relid: u32,
    var_mask: u64,
    rows_inserted: u64,
    needs_truncate: bool,
    persistence: u8,
) -> TableRef {
    let t = create(key, relid, persistence);
    let e = t.entry();
    e.var_mask.store(var_mask, Ordering::Relaxed);
    e.rows_inserted.store(rows_inserted, Ordering::Relaxed);
    e.needs_truncate
        .store(needs_truncate as u32, Ordering::Relaxed);
    t
}

/// Start-up only: the blocks of `t` are restored; sets the counters derived from them.
pub fn restore_done(t: TableRef, nlocal: u32, tid_pages: u32) {
    let e = t.entry();
    let n = (0..nlocal)
        .filter(|&lb| arena_block(t, lb).is_some())
        .count();
    e.nblocks.store(n as u32, Ordering::Relaxed);
    e.nlocal.store(nlocal, Ordering::Release);
    e.local_hint.store(0, Ordering::Relaxed);
    e.tid_pages.store(tid_pages, Ordering::Release);
}

/// Forgets an entry (its blocks must already be freed).
pub fn remove(t: TableRef) {
    let _g = LwGuard::exclusive(&arena::ctl().dir_lock as *const _ as *mut _);
    let e = entry(t.id);
    if e.state.load(Ordering::Relaxed) == E_USED && e.gen.load(Ordering::Relaxed) == t.gen {
        e.state.store(E_EMPTY, Ordering::Release);
    }
}

/// Points an entry at another relfilenode (ALTER TABLE SET TABLESPACE keeps the rows in place).
pub fn rekey(t: TableRef, key: &RelKey) {
    // the record and the change in one write section (see `modify::free_all_blocks`)
    let _section = crate::storage::cow::Section_::enter();
    if crate::storage::changes::logging() && t.logged() {
        if let Some(f) = unsafe { crate::storage::changes::LOG_REKEY } {
            f(&t.entry().key, key);
        }
    }
    {
        let _g = LwGuard::exclusive(&arena::ctl().dir_lock as *const _ as *mut _);
        entry(t.id).key = *key;
    }
    // the new relation file gets the table's size
    sync_file_size(t);
}

/// Every table currently in the directory.
pub fn all() -> Vec<(TableRef, RelKey, u32)> {
    let _g = LwGuard::shared(&arena::ctl().dir_lock as *const _ as *mut _);
    let mut v = Vec::new();
    for id in 1..=arena::ctl().max_tables {
        let e = entry(id);
        if e.state.load(Ordering::Relaxed) == E_USED {
            v.push((
                TableRef {
                    id,
                    gen: e.gen.load(Ordering::Relaxed),
                },
                e.key,
                e.relid.load(Ordering::Relaxed),
            ));
        }
    }
    v
}

/// Cached in `rel->rd_amcache` (palloc'd in CacheMemoryContext; the relcache frees it).
#[repr(C)]
struct AmCache {
    key: RelKey,
    t: TableRef,
    /// `row::current_layout`'s attribute-spec hash for `spec_mask` (`spec_set`: computed): the
    /// specs follow from the tuple descriptor, which changes only with a relcache invalidation,
    /// and that frees this cache
    spec_set: bool,
    spec_mask: u64,
    spec_hash: u64,
}

/// The attribute-spec hash `row::current_layout` cached for `rel` (table `t`, `var_mask`).
pub fn cached_spec_hash(rel: pg_sys::Relation, t: TableRef, var_mask: u64) -> Option<u64> {
    unsafe {
        let c = (*rel).rd_amcache as *const AmCache;
        (!c.is_null() && (*c).spec_set && (*c).t == t && (*c).spec_mask == var_mask)
            .then(|| (*c).spec_hash)
    }
}

/// Caches `row::current_layout`'s attribute-spec hash for `rel` (once `resolve` cached `t`).
pub fn cache_spec_hash(rel: pg_sys::Relation, t: TableRef, var_mask: u64, hash: u64) {
    unsafe {
        let c = (*rel).rd_amcache as *mut AmCache;
        if !c.is_null() && (*c).t == t {
            (*c).spec_set = true;
            (*c).spec_mask = var_mask;
            (*c).spec_hash = hash;
        }
    }
}

/// Resolves a relation to its table entry. A relation unknown to this server incarnation lost
/// its rows in a restart: warn once and register it (empty).
pub fn resolve(rel: pg_sys::Relation) -> TableRef {
    crate::ensure_preloaded();
    arena::register_tranche();
    unsafe {
        if !pg_sys::IsUnderPostmaster {
            // single-user mode loads no checkpoint image: the arena is empty, and a write here
            // would log changes to blocks the table's real contents already occupy
            crate::ffi::error_hint(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!(
                    "scoot table \"{}\" cannot be used in single-user mode",
                    ffi::rel_name(rel)
                ),
                "Start the server normally to use scoot tables.".to_string(),
            );
        }
        let key = key_of_rel(rel);
        let c = (*rel).rd_amcache as *mut AmCache;
        if !c.is_null() && (*c).key == key && (*c).t.is_current() {
            check_not_stale(rel, (*c).t);
            return (*c).t;
        }
        let t = match lookup(&key) {
            Some(t) => t,
            None if (*(*rel).rd_rel).relpersistence as u8 == b'u'
                && arena::ctl().crash_recovered.load(Ordering::Acquire) != 0 =>
            {
                // an unlogged table after a crash: empty, as on heap (PostgreSQL reset its
                // indexes from their init forks)
                create(&key, (*rel).rd_id.into(), b'u')
            }
            None if arena::ctl().rows_not_replayed.load(Ordering::Relaxed) != 0 => {
                // a base backup or standby: the rows are on the primary; refused until
                // TRUNCATE (check_not_stale says so)
                let t = create(
                    &key,
                    (*rel).rd_id.into(),
                    (*(*rel).rd_rel).relpersistence as u8,
                );
                t.entry().needs_truncate.store(1, Ordering::Release);
                t
            }
            None if std::fs::metadata(main_fork_path(&key)).is_ok_and(|m| m.len() == 0) => {
                // the table never had a block (created empty after the last image, or copied
                // empty by CREATE DATABASE): nothing was lost
                create(
                    &key,
                    (*rel).rd_id.into(),
                    (*(*rel).rd_rel).relpersistence as u8,
                )
            }
            None => {
                let t = create(
                    &key,
                    (*rel).rd_id.into(),
                    (*(*rel).rd_rel).relpersistence as u8,
                );
                // the file still has the size the lost rows spanned
                sync_file_size(t);
                if (*(*rel).rd_rel).relhasindex {
                    t.entry().needs_truncate.store(1, Ordering::Release);
                }
                ereport!(
                    PgLogLevel::WARNING,
                    PgSqlErrorCode::ERRCODE_WARNING,
                    format!(
                        "scoot table \"{}\" lost its rows in a server restart",
                        ffi::rel_name(rel)
                    ),
                    "The server started without a checkpoint image holding this table (pg_scoot/arena.img was missing, moved away or not usable); see the server log."
                );
                t
            }
        };
        let c = if c.is_null() {
            let p = pg_sys::MemoryContextAlloc(
                pg_sys::CacheMemoryContext,
                std::mem::size_of::<AmCache>(),
            ) as *mut AmCache;
            (*rel).rd_amcache = p as *mut std::ffi::c_void;
            p
        } else {
            c
        };
        (*c).key = key;
        (*c).t = t;
        (*c).spec_set = false;
        check_not_stale(rel, t);
        t
    }
}

/// On a standby whose arena was loaded from an image newer than where PostgreSQL opened for
/// queries (a restart: the image holds everything replayed before the shutdown, hot standby
/// opens at the older minimum recovery point), scoot rows would run ahead of the rest of the
/// database: wait until replay has passed the image, then read.
fn standby_caught_up(rel: pg_sys::Relation) {
    let c = arena::ctl();
    if c.from_backup.load(Ordering::Relaxed) == 0 || !unsafe { pg_sys::RecoveryInProgress() } {
        return;
    }
    let need = c.image_lsn.load(Ordering::Relaxed);
    let t0 = std::time::Instant::now();
    loop {
        let at = unsafe { pg_sys::GetXLogReplayRecPtr(std::ptr::null_mut()) };
        if at >= need {
            return;
        }
        if t0.elapsed() > std::time::Duration::from_secs(30) {
            crate::ffi::error_hint(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "scoot table \"{}\" cannot be read yet on this standby: replay is at {:X}/{:X}, its scoot rows are as of {:X}/{:X}",
                    unsafe { ffi::rel_name(rel) },
                    at >> 32,
                    at as u32,
                    need >> 32,
                    need as u32
                ),
                "Retry once the standby has replayed up to that position.".to_string(),
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        pgrx::check_for_interrupts!();
    }
}

/// Refuses a table that lost its rows in a restart but still has index entries for them: those
/// entries point at row addresses new rows would reuse, so index scans could return wrong rows.
fn check_not_stale(rel: pg_sys::Relation, t: TableRef) {
    standby_caught_up(rel);
    if t.entry().needs_truncate.load(Ordering::Acquire) != 0 {
        let name = unsafe { ffi::rel_name(rel) };
        if arena::ctl().rows_not_replayed.load(Ordering::Relaxed) != 0 {
            crate::ffi::error_hint(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("scoot table \"{name}\" has no rows on this server: it was restored from a base backup or runs as (or was promoted from) a physical standby, and pg_scoot could not replay the scoot WAL here (see pg_scoot/rows_not_replayed and the server log)"),
                format!("Read the table on the primary server. A standby made with pg_basebackup -R replays scoot tables when the primary still has the WAL since its last checkpoint image. On a writable server, TRUNCATE {name}; makes it usable here (empty)."),
            );
        }
        crate::ffi::error_hint(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("scoot table \"{name}\" lost its rows in a server restart and its indexes still reference them"),
            format!("Run TRUNCATE {name}; to reset the table and its indexes."),
        );
    }
}

/// The arena block holding local block `lb` of `t`, if any (the caller still checks the block's
/// owner under its lock: the mapping may change right after the lookup).
#[inline]
pub fn arena_block(t: TableRef, lb: u32) -> Option<u32> {
    arena::map().lookup(t.id, lb)
}

/// Local blocks in use are below this.
#[inline]
pub fn nlocal(t: TableRef) -> u32 {
    t.entry().nlocal.load(Ordering::Acquire)
}

/// (local, arena) of every block of `t`, in local (= TID) order.
pub fn blocks_of(t: TableRef) -> Vec<(u32, u32)> {
    let n = nlocal(t);
    (0..n)
        .filter_map(|lb| arena_block(t, lb).map(|b| (lb, b)))
        .collect()
}

/// Blocks of `t` whose rows VACUUM found visible to every transaction and that no write has
/// touched since (`BlockDesc::vis_xid` set): what heap's visibility map counts as all-visible.
pub fn all_visible_blocks(t: TableRef) -> u32 {
    (0..nlocal(t))
        .filter_map(|lb| arena_block(t, lb))
        .filter(|&b| arena::block_desc(b).vis_xid.load(Ordering::Relaxed) != 0)
        .count() as u32
}

/// Gives arena block `b` the lowest free local number of `t`. Caller holds the allocation lock.
/// Returns the number and whether the TID space grew.
pub(crate) fn assign_local(t: TableRef, b: u32) -> (u32, bool) {
    let e = t.entry();
    let mut lb = e.local_hint.load(Ordering::Relaxed);
    while arena_block(t, lb).is_some() {
        lb += 1;
    }
    arena::map().insert(t.id, lb, b);
    e.local_hint.store(lb + 1, Ordering::Relaxed);
    let grew = lb >= e.nlocal.load(Ordering::Relaxed);
    if grew {
        e.nlocal.store(lb + 1, Ordering::Release);
    }
    (lb, grew)
}

/// Frees local number `lb` of `t`. Caller holds the allocation lock. Returns whether the TID space
/// shrank (the last blocks are gone).
pub(crate) fn release_local(t: TableRef, lb: u32) -> bool {
    let e = t.entry();
    arena::map().remove(t.id, lb);
    if lb < e.local_hint.load(Ordering::Relaxed) {
        e.local_hint.store(lb, Ordering::Relaxed);
    }
    let mut n = e.nlocal.load(Ordering::Relaxed);
    if lb + 1 != n {
        return false;
    }
    while n > 0 && arena_block(t, n - 1).is_none() {
        n -= 1;
    }
    e.nlocal.store(n, Ordering::Release);
    true
}

/// The TID pages of `t` (its relation size in 8 kB pages).
#[inline]
pub fn tid_pages(t: TableRef) -> u32 {
    t.entry().tid_pages.load(Ordering::Acquire)
}

/// Recomputes the TID pages in use and, if they changed, resizes the relation file and then
/// publishes the new size. Caller holds the allocation lock (so resizes happen in order).
pub(crate) fn publish_size(t: TableRef) {
    let n = nlocal(t);
    let pages = if n == 0 {
        0
    } else {
        let last = arena_block(t, n - 1)
            .map(|b| arena::block_desc(b).hwm.load(Ordering::Acquire))
            .unwrap_or(0);
        (n - 1) * arena::vpb() + last.div_ceil(crate::storage::block::TID_OFFSETS_PER_PAGE)
    };
    let e = t.entry();
    if e.tid_pages.load(Ordering::Relaxed) != pages {
        if pages > e.tid_pages.load(Ordering::Relaxed) {
            write_file_size(t, pages);
            e.tid_pages.store(pages, Ordering::Release);
        } else {
            e.tid_pages.store(pages, Ordering::Release);
            write_file_size(t, pages);
        }
    }
}

/// Sets the relation file's size to the published TID pages (a new relfilenode, a restart).
pub(crate) fn sync_file_size(t: TableRef) {
    write_file_size(t, tid_pages(t));
}

/// The path of a relfilenode's main fork (its first segment), relative to the data directory.
pub fn main_fork_path(key: &RelKey) -> String {
    unsafe {
        let p = pg_sys::GetRelationPath(
            key.db.into(),
            key.spc.into(),
            key.rel.into(),
            key.backend,
            pg_sys::ForkNumber::MAIN_FORKNUM,
        );
        let s = std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
        pg_sys::pfree(p as *mut std::ffi::c_void);
        s
    }
}

/// Sets the size of the table's main-fork files (sparse: no disk is used) to `pages` 8 kB pages,
/// in 1 GB segments like md.c's, so pg_relation_size() reports the TID space in use and smgr
/// prefetches of those pages (bitmap scans, ANALYZE) stay inside the file. Best effort: a failure
/// only skews pg_relation_size().
fn write_file_size(t: TableRef, pages: u32) {
    let key = t.entry().key;
    let total = pages as u64 * pg_sys::BLCKSZ as u64;
    let seg = pg_sys::RELSEG_SIZE as u64 * pg_sys::BLCKSZ as u64;
    let base = main_fork_path(&key);
    for segno in 0u64.. {
        let want = total.saturating_sub(segno * seg).min(seg);
        let path = if segno == 0 {
            base.clone()
        } else {
            format!("{base}.{segno}")
        };
        let Ok(cpath) = std::ffi::CString::new(path) else {
            return;
        };
        // segments past the size are emptied, not unlinked (md.c keeps inactive segments as
        // empty files); the first missing one ends the walk
        let flags = libc::O_WRONLY | libc::O_CLOEXEC | if want > 0 { libc::O_CREAT } else { 0 };
        let fd = unsafe { libc::open(cpath.as_ptr(), flags, 0o600) };
        if fd < 0 {
            return;
        }
        unsafe {
            libc::ftruncate(fd, want as libc::off_t);
            libc::close(fd);
        }
    }
}
