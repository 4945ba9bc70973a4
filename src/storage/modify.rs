//! The modification layer: every change to a block goes through a function here (insert a row
//! version, set xmax, link a newer version, redirect/kill/free a slot, compact the var area).
//! The later WAL issue logs exactly these operations; the snapshot issue hooks the "write
//! section" around them. Callers hold the block's LWLock exclusively for every `&mut` operation
//! (see [`Locked`]), shared for reads.
//!
//! Blocks are addressed by their table-local number (`lb`); [`lock`] maps it to the arena block
//! and checks, under the lock, that the block still belongs to the table under that number.
//!
//! Locking rules (deadlock freedom): a backend holds at most one block lock exclusively and never
//! waits for a second lock while holding it. Index fetches hold the chain root's block shared
//! while visiting the rest of the chain (shared only); pruning redirects the root under its
//! exclusive lock before freeing any chain member, so a reader inside a chain never finds a
//! member freed under it.
use crate::storage::arena::{self, BlockDesc, LwGuard};
use crate::storage::block::infomask::*;
use crate::storage::block::*;
use crate::storage::changes;
use crate::storage::cow;
use crate::storage::row::{self, Prepared};
use crate::storage::tabledir::{self, TableRef};
use crate::storage::IdHasher;
use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::Ordering;

/// A block locked by this backend, checked to belong to the expected table.
pub struct Locked {
    /// table-local block number
    pub lb: u32,
    /// arena block number
    pub ab: u32,
    pub desc: &'static BlockDesc,
    pub blk: BlockRef,
    /// The table whose WAL record this exclusive lock writes at release (see `changes`).
    cap: Option<TableRef>,
    _g: LwGuard,
    /// exclusive locks are taken inside a write section (see `cow`); dropped after the lock
    _section: Option<cow::Section_>,
}

/// Starts collecting a logged table's changes of block `b` (exclusive lock just taken).
#[inline]
fn capture(t: TableRef, b: u32) -> Option<TableRef> {
    if changes::logging() && t.logged() {
        changes::begin(b);
        Some(t)
    } else {
        None
    }
}

impl Drop for Locked {
    /// Still holding the lock and the write section: the WAL record goes in before anyone can
    /// see or change the block, and before a snapshot gate can close on the change.
    fn drop(&mut self) {
        if let Some(t) = self.cap.take() {
            let (ranges, missed) = changes::end(self.ab);
            let conflict = changes::take_conflict();
            if !missed.is_empty() {
                pgrx::warning!(
                    "scoot.wal_check: block {} of relfilenode {}: bytes changed without being announced to the WAL: {:?}",
                    self.lb,
                    t.entry().key.rel,
                    &missed[..missed.len().min(8)]
                );
            }
            if !ranges.is_empty() {
                if conflict == 0 && changes::deferring(self.ab) {
                    changes::stash(t, self.lb, self.ab, ranges);
                } else {
                    if let Some(f) = unsafe { changes::LOG_BLOCK } {
                        f(t, self.lb, self.ab, &ranges, conflict);
                    }
                    changes::recycle(ranges);
                }
            }
        }
    }
}

/// Defers the WAL of block `lb` of `t` (see [`changes::defer`]) until [`DeferLog::finish`] or
/// the guard's drop (also on an error), which log what is still kept under the block's
/// exclusive lock.
pub struct DeferLog(bool);

impl DeferLog {
    pub fn new(t: TableRef, lb: u32) -> DeferLog {
        match tabledir::arena_block(t, lb) {
            Some(ab) if changes::logging() && t.logged() => {
                changes::defer(ab);
                DeferLog(true)
            }
            _ => DeferLog(false),
        }
    }

    /// Stops deferring: the next exclusive lock of the block logs the kept changes.
    pub fn finish(&mut self) {
        if self.0 {
            changes::undefer();
            self.0 = false;
        }
    }
}

impl Drop for DeferLog {
    fn drop(&mut self) {
        self.finish();
        // normally the caller's last lock of the block logged everything
        for (t, lb, ab) in changes::stashed() {
            drop(lock(t, lb, true));
            // pulled into that lock's record, or stale (the block is gone)
            changes::drop_stash(ab);
        }
    }
}

impl Locked {
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub fn row(&self, slot: u32) -> &mut RowHdr {
        self.blk.row(slot)
    }
    #[inline]
    pub fn hwm(&self) -> u32 {
        self.desc.hwm.load(Ordering::Acquire)
    }
    /// Records a modification: bumps the modification counter and thaws a cooling or frozen
    /// block (it is hot again; the freezer may freeze it later).
    #[inline]
    pub fn touch(&self) {
        self.desc.mod_count.fetch_add(1, Ordering::Relaxed);
        if self.desc.temp.load(Ordering::Relaxed) != arena::TEMP_HOT {
            thaw(self);
        }
    }
}

#[cold]
fn thaw(l: &Locked) {
    if l.desc.temp.swap(arena::TEMP_HOT, Ordering::Relaxed) == arena::TEMP_FROZEN {
        arena::ctl().thaws.fetch_add(1, Ordering::Relaxed);
    }
}

/// Announces a change of row `s`'s version header (WAL capture, its pre-image saved for live
/// snapshots) and returns the header to change it through: the block's, or the same bytes in the
/// arena's alias mapping where the kernel write-protects the page for a snapshot
/// (`cow::before_write_block_via`).
#[inline]
#[allow(clippy::mut_from_ref)]
fn touch_row(l: &Locked, s: u32) -> &mut RowHdr {
    let off = l.row(s) as *const RowHdr as usize - l.blk.base as usize;
    let base = cow::before_write_block_via(l.blk.base, &[(off as u32, ROW_HDR_SIZE as u32)]);
    unsafe { &mut *(base.add(off) as *mut RowHdr) }
}

/// Announces a change of slot `s`'s word of the block's free map and returns the block to change
/// it through (as [`touch_row`]).
#[inline]
fn touch_free_word(l: &Locked, s: u32) -> BlockRef {
    let off = l.blk.free_word_ptr(s) as usize - l.blk.base as usize;
    BlockRef {
        base: cow::before_write_block_via(l.blk.base, &[(off as u32, 8)]),
    }
}

#[inline]
fn belongs(d: &BlockDesc, t: TableRef, lb: u32) -> bool {
    d.owner.load(Ordering::Acquire) == t.owner() && d.local.load(Ordering::Acquire) == lb
}

/// Locks local block `lb` of `t` (shared or exclusive). None if the table has no such block.
#[inline]
pub fn lock(t: TableRef, lb: u32, exclusive: bool) -> Option<Locked> {
    let b = tabledir::arena_block(t, lb)?;
    let desc = arena::block_desc(b);
    if !belongs(desc, t, lb) {
        return None;
    }
    // a write section is entered before the lock is taken (never wait at the gate holding a lock)
    let section = exclusive.then(cow::Section_::enter);
    let g = if exclusive {
        desc.exclusive()
    } else {
        desc.share()
    };
    if !belongs(desc, t, lb) {
        return None;
    }
    Some(Locked {
        lb,
        ab: b,
        desc,
        blk: BlockRef {
            base: arena::block_ptr(b),
        },
        cap: if exclusive { capture(t, b) } else { None },
        _g: g,
        _section: section,
    })
}

/// [`lock`] exclusive, but gives up (None) instead of waiting when the block is locked.
pub fn try_lock(t: TableRef, lb: u32) -> Option<Locked> {
    try_lock_exclusive(t, lb, tabledir::arena_block(t, lb)?)
}

/// Like [`lock`] (exclusive) but gives up instead of waiting for the lock.
fn try_lock_exclusive(t: TableRef, lb: u32, b: u32) -> Option<Locked> {
    let desc = arena::block_desc(b);
    if !belongs(desc, t, lb) {
        return None;
    }
    let section = cow::Section_::enter();
    let g = LwGuard::try_exclusive(desc.lock_ptr())?;
    if !belongs(desc, t, lb) {
        return None;
    }
    Some(Locked {
        lb,
        ab: b,
        desc,
        blk: BlockRef {
            base: arena::block_ptr(b),
        },
        cap: capture(t, b),
        _g: g,
        _section: Some(section),
    })
}

/// Is `slot` an initialised slot of the locked block?
#[inline]
pub fn slot_in_range(l: &Locked, slot: u32) -> bool {
    slot < l.hwm()
}

thread_local! {
    /// Blocks new row versions must not go to while this backend compacts a table (its
    /// sparse source blocks, see `am::compact`): (table id, local blocks).
    static AVOID: RefCell<Option<(u32, std::collections::HashSet<u32>)>> = const { RefCell::new(None) };
}

/// While `blocks` of table `t` are set here, [`insert`] places no row in them (compaction moves
/// rows out of them); `None` lifts it.
pub fn set_avoid(t: TableRef, blocks: Option<std::collections::HashSet<u32>>) {
    AVOID.with(|a| *a.borrow_mut() = blocks.map(|b| (t.id, b)));
}

fn avoided(t: TableRef, lb: u32) -> bool {
    AVOID.with(|a| {
        a.borrow()
            .as_ref()
            .is_some_and(|(id, set)| *id == t.id && set.contains(&lb))
    })
}

thread_local! {
    /// This backend's current insert block (local number) per table id (looked up for every
    /// inserted row: a multiplicative hash instead of SipHash).
    static INSERT_BLOCK: RefCell<HashMap<u32, u32, BuildHasherDefault<IdHasher>>> =
        RefCell::new(HashMap::default());
}

fn has_room(d: &BlockDesc, sig: u64, var_need: u32) -> bool {
    if d.layout_sig.load(Ordering::Relaxed) != sig {
        return false;
    }
    let slot_free = d.nfree.load(Ordering::Relaxed) > 0
        || d.hwm.load(Ordering::Relaxed) < d.capacity.load(Ordering::Relaxed);
    if !slot_free {
        return false;
    }
    let fixed_end = d.fixed_end.load(Ordering::Relaxed);
    let room = d.var_low.load(Ordering::Relaxed) - fixed_end;
    if room >= var_need {
        return true;
    }
    // a compaction moves every live value of the block (up to the whole block): it must free
    // more than this one row needs, or a full block of wide rows whose updates each free one
    // old version would be compacted again for every update (go-tpc's customer table: 130 kB
    // of WAL per UPDATE before the compaction was logged as an operation, and still a
    // 700 kB move each time). Until then the row goes to another block, as heap puts an
    // update that does not fit its page on another page.
    let dead = d.var_dead.load(Ordering::Relaxed);
    let min_gain = (arena::block_size() as u32 - fixed_end) / COMPACT_MIN_GAIN_DIV;
    room + dead >= var_need && dead >= var_need.max(min_gain)
}

/// A compaction of a block's variable-length area must free at least 1/16 of that area.
const COMPACT_MIN_GAIN_DIV: u32 = 16;

/// Is the block close to full (slots or variable-length space)? Pruning then pays off, as heap
/// prunes a page whose free space fell below 10%.
pub fn nearly_full(d: &BlockDesc) -> bool {
    let cap = d.capacity.load(Ordering::Relaxed);
    let used = d.hwm.load(Ordering::Relaxed) - d.nfree.load(Ordering::Relaxed);
    let fixed_end = d.fixed_end.load(Ordering::Relaxed);
    let var_area = arena::block_size() as u32 - fixed_end;
    let var_free = d.var_low.load(Ordering::Relaxed) - fixed_end;
    used * 10 >= cap * 9 || var_free * 10 < var_area
}

/// The slot `take_slot` took last from above the block's high-water mark (arena block, slot): a
/// slot never used since the block was formatted, which `place` writes without comparing.
static mut FRESH_SLOT: (u32, u32) = (u32::MAX, u32::MAX);

/// Takes a free slot of a locked block that `has_room`; compacts the var area when needed.
fn take_slot(t: TableRef, l: &Locked, var_need: u32) -> u32 {
    let d = l.desc;
    let room = d.var_low.load(Ordering::Relaxed) - d.fixed_end.load(Ordering::Relaxed);
    if room < var_need {
        compact_var(t, l);
    }
    let reuse = if d.nfree.load(Ordering::Relaxed) > 0 {
        let found = l
            .blk
            .lowest_free(l.hwm(), d.free_hint.load(Ordering::Relaxed))
            .or_else(|| l.blk.lowest_free(l.hwm(), 0));
        if let Some((s, _)) = found {
            // only the free map's word of that slot changes (announcing the whole map put
            // ~1 kB into every insert's WAL record)
            touch_free_word(l, s).take_free(s);
        }
        found
    } else {
        None
    };
    if let Some((s, w)) = reuse {
        // the lowest free slot, as heap reuses the lowest unused line pointer
        d.free_hint.store(w, Ordering::Relaxed);
        d.nfree.fetch_sub(1, Ordering::Relaxed);
        s
    } else {
        let s = d.hwm.load(Ordering::Relaxed);
        d.hwm.store(s + 1, Ordering::Release);
        unsafe { FRESH_SLOT = (l.ab, s) };
        if s % TID_OFFSETS_PER_PAGE == 0 && l.lb + 1 >= tabledir::nlocal(t) {
            // the table's last block starts a new TID page: the relation grows by a page
            arena::with_alloc_lock(|| tabledir::publish_size(t));
        }
        s
    }
}

/// Compacts the variable-length area of a locked block (moves the live rows' values to the
/// block's end, closing the gaps of freed ones). For a WAL-logged table the changes so far are
/// logged first and the compaction itself as an operation (`changes::LOG_COMPACT`), which redo
/// repeats on the same bytes (`compact_redo`): heap logs its page defragmentation the same way
/// (a prune record, not the moved tuples). Up to a whole block's bytes move; their record is a
/// few dozen bytes.
fn compact_var(t: TableRef, l: &Locked) {
    let d = l.desc;
    let hwm = l.hwm();
    let logged = l.cap.is_some() && unsafe { (*(&raw const changes::LOG_COMPACT)).is_some() };
    if logged {
        let ranges = changes::cut(l.ab);
        if !ranges.is_empty() {
            if let Some(f) = unsafe { changes::LOG_BLOCK } {
                f(t, l.lb, l.ab, &ranges, changes::take_conflict());
            }
        }
    }
    // with the self check: redo's compaction of the bytes as they are now must give exactly
    // what this one gives
    let reference = (logged && changes::checking()).then(|| {
        let mut copy =
            unsafe { std::slice::from_raw_parts(l.blk.base, arena::block_size()).to_vec() };
        compact_redo(copy.as_mut_ptr(), hwm);
        copy
    });
    let work = || {
        let low = d.var_low.load(Ordering::Relaxed) as usize;
        // compaction moves values and rewrites their (offset, length) entries
        for i in 0..l.blk.natts() {
            let c = *l.blk.col(i);
            if c.kind == KIND_VAR || c.kind == KIND_CSTRING {
                cow::before_write(l.blk.value_ptr(&c, 0), hwm as usize * c.width as usize);
            }
        }
        cow::before_write(unsafe { l.blk.base.add(low) }, arena::block_size() - low);
        compact_redo(l.blk.base, hwm)
    };
    let low = if logged {
        changes::unnoted(l.ab, work)
    } else {
        work()
    };
    d.var_low.store(low, Ordering::Relaxed);
    d.var_dead.store(0, Ordering::Relaxed);
    if let Some(reference) = reference {
        let now = unsafe { std::slice::from_raw_parts(l.blk.base, arena::block_size()) };
        if reference != now {
            pgrx::warning!(
                "scoot.wal_check: block {} of relfilenode {}: redo of the compaction would differ",
                l.lb,
                t.entry().key.rel
            );
        }
    }
    if logged {
        if let Some(f) = unsafe { changes::LOG_COMPACT } {
            f(t, l.lb, hwm);
        }
    }
}

/// The compaction of the block at `base` below slot `hwm` (the live rows: state NORMAL), as
/// [`compact_var`] does it and redo repeats it. Returns the new `var_low`.
pub fn compact_redo(base: *mut u8, hwm: u32) -> u32 {
    let blk = BlockRef { base };
    blk.compact_var(hwm, arena::block_size() as u32, |s| {
        blk.row(s).state() == ST_NORMAL
    })
}

/// Allocates and formats a new block of `t` for `layout`.
fn new_block(t: TableRef, layout: &Layout) -> Locked {
    let section = cow::Section_::enter();
    let (b, lb) = arena::alloc_block(t);
    let desc = arena::block_desc(b);
    let g = desc.exclusive();
    let cap = capture(t, b);
    cow::before_write(arena::block_ptr(b), layout.fixed_end as usize);
    let blk = BlockRef {
        base: arena::block_ptr(b),
    };
    blk.format(layout, t.id, t.entry().key.rel);
    let bs = arena::block_size() as u32;
    desc.capacity.store(layout.capacity, Ordering::Relaxed);
    desc.fixed_end.store(layout.fixed_end, Ordering::Relaxed);
    desc.var_low.store(bs, Ordering::Relaxed);
    desc.var_dead.store(0, Ordering::Relaxed);
    desc.free_hint.store(0, Ordering::Relaxed);
    desc.nfree.store(0, Ordering::Relaxed);
    desc.ndead.store(0, Ordering::Relaxed);
    desc.nredirect.store(0, Ordering::Relaxed);
    desc.obsolete.store(0, Ordering::Relaxed);
    desc.layout_sig.store(layout.sig, Ordering::Relaxed);
    desc.hwm.store(0, Ordering::Release);
    t.entry().nblocks.fetch_add(1, Ordering::Relaxed);
    Locked {
        lb,
        ab: b,
        desc,
        blk,
        cap,
        _g: g,
        _section: Some(section),
    }
}

fn too_large(rel: pg_sys::Relation, need: u32, limit: u32) -> ! {
    crate::ffi::error_hint(pgrx::PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, format!(
            "row is too large for a scoot block: {} bytes of variable-length data in table \"{}\", the limit is {} bytes",
            need,
            unsafe { crate::ffi::rel_name(rel) },
            limit
        ), "Values of columns with STORAGE PLAIN or MAIN stay inside the block; use STORAGE EXTENDED or EXTERNAL, or increase scoot.block_size.");
}

/// Finds (or allocates) a block of `t` with `row`'s layout and room for it, and returns it locked
/// exclusively with a slot taken.
fn block_for_insert(
    rel: pg_sys::Relation,
    t: TableRef,
    row: &Prepared,
    prefer: Option<u32>,
) -> (Locked, u32) {
    let sig = row.layout.sig;
    let var_need = row.var_bytes;
    let bs = arena::block_size() as u32;
    if var_need > bs - row.layout.fixed_end {
        too_large(rel, var_need, bs - row.layout.fixed_end);
    }
    // 1. the preferred block (an updated row's block), this backend's insert block, the hint
    let mine = INSERT_BLOCK.with(|m| m.borrow().get(&t.id).copied());
    let hint = t.entry().insert_hint.load(Ordering::Relaxed);
    for lb in [prefer, mine, Some(hint)].into_iter().flatten() {
        if lb == arena::NO_BLOCK || avoided(t, lb) {
            continue;
        }
        let Some(b) = tabledir::arena_block(t, lb) else {
            continue;
        };
        if !has_room(arena::block_desc(b), sig, var_need) {
            continue;
        }
        if let Some(l) = lock(t, lb, true) {
            if has_room(l.desc, sig, var_need) {
                let s = take_slot(t, &l, var_need);
                return (l, s);
            }
        }
    }
    // 2. any block of the table with room (skip busy ones)
    for (lb, b) in tabledir::blocks_of(t) {
        let d = arena::block_desc(b);
        if !has_room(d, sig, var_need) || avoided(t, lb) {
            continue;
        }
        if let Some(l) = try_lock_exclusive(t, lb, b) {
            if has_room(l.desc, sig, var_need) {
                INSERT_BLOCK.with(|m| m.borrow_mut().insert(t.id, lb));
                t.entry().insert_hint.store(lb, Ordering::Relaxed);
                let s = take_slot(t, &l, var_need);
                return (l, s);
            }
        }
    }
    // 3. a new block
    let l = new_block(t, &row.layout);
    INSERT_BLOCK.with(|m| m.borrow_mut().insert(t.id, l.lb));
    t.entry().insert_hint.store(l.lb, Ordering::Relaxed);
    let s = take_slot(t, &l, var_need);
    (l, s)
}

/// Inserts a new row version. `flags` may carry F_HEAP_ONLY; `spec_token` marks a speculative
/// insertion. Returns (local block, slot).
pub fn insert(
    rel: pg_sys::Relation,
    t: TableRef,
    row: &Prepared,
    xmin: u32,
    cid: u32,
    flags: u16,
    spec_token: Option<u32>,
    prefer: Option<u32>,
) -> (u32, u32) {
    insert_then(rel, t, row, xmin, cid, flags, spec_token, prefer, |_, _| {})
}

/// [`insert`], then `after(block, slot)` still under the block's exclusive lock (an UPDATE
/// links the old version to the new one in the same lock session when both share a block).
pub fn insert_then<F: FnOnce(&Locked, u32)>(
    rel: pg_sys::Relation,
    t: TableRef,
    row: &Prepared,
    xmin: u32,
    cid: u32,
    flags: u16,
    spec_token: Option<u32>,
    prefer: Option<u32>,
    after: F,
) -> (u32, u32) {
    let (l, s) = block_for_insert(rel, t, row, prefer);
    place(t, &l, s, row, xmin, cid, flags, spec_token);
    after(&l, s);
    (l.lb, s)
}

/// Inserts the rows of a multi-insert (COPY): consecutive rows go into the same block under one
/// exclusive lock, as long as they fit, so a block takes one lock session and one WAL record
/// per batch instead of one per row. Appends each row's (local block, slot) to `out`.
pub fn insert_many(
    rel: pg_sys::Relation,
    t: TableRef,
    rows: &[Prepared],
    xmin: u32,
    cid: u32,
    out: &mut Vec<(u32, u32)>,
) {
    let mut i = 0;
    while i < rows.len() {
        let (l, s) = block_for_insert(rel, t, &rows[i], None);
        place(t, &l, s, &rows[i], xmin, cid, 0, None);
        out.push((l.lb, s));
        i += 1;
        while i < rows.len() && has_room(l.desc, rows[i].layout.sig, rows[i].var_bytes) {
            let s = take_slot(t, &l, rows[i].var_bytes);
            place(t, &l, s, &rows[i], xmin, cid, 0, None);
            out.push((l.lb, s));
            i += 1;
        }
    }
}

/// Writes a new row version into slot `s` of the locked block.
#[allow(clippy::too_many_arguments)]
#[inline]
fn place(
    t: TableRef,
    l: &Locked,
    s: u32,
    row: &Prepared,
    xmin: u32,
    cid: u32,
    flags: u16,
    spec_token: Option<u32>,
) {
    let d = l.desc;
    let fresh = unsafe { std::mem::replace(&mut *(&raw mut FRESH_SLOT), (u32::MAX, u32::MAX)) }
        == (l.ab, s);
    let low = unsafe { row::write_row(l.blk, s, row, d.var_low.load(Ordering::Relaxed), fresh) };
    d.var_low.store(low, Ordering::Relaxed);
    let h = touch_row(l, s);
    l.desc.vis_xid.store(0, Ordering::Relaxed);
    h.xmin = xmin;
    h.xmax = 0;
    h.cid = cid;
    let f = flags | if row.has_external { F_HAS_EXTERNAL } else { 0 };
    h.infomask.store(HEAP_XMAX_INVALID | f, Ordering::Relaxed);
    match spec_token {
        Some(tok) => h.set_spec_token(tok),
        None => h.clear_ctid(),
    }
    l.touch();
    t.entry().rows_inserted.fetch_add(1, Ordering::Relaxed);
}

/// Sets a new xmax (update/delete/lock) on a row. `keys_updated` sets heap's HEAP_KEYS_UPDATED;
/// `cmax` (update/delete only) is the command id to store and whether it is a combo id.
pub fn set_xmax(
    l: &Locked,
    s: u32,
    xmax: u32,
    infomask_bits: u16,
    keys_updated: bool,
    cmax: Option<(u32, bool)>,
) {
    let h = touch_row(l, s);
    l.desc.vis_xid.store(0, Ordering::Relaxed);
    let mut m = (h.infomask() & !HEAP_XMAX_BITS) | (infomask_bits & HEAP_XMAX_BITS);
    if let Some((c, combo)) = cmax {
        h.cid = c;
        if combo {
            m |= HEAP_COMBOCID;
        } else {
            m &= !HEAP_COMBOCID;
        }
        // a new update/delete supersedes any older (aborted) link
        m &= !F_HOT_UPDATED;
        h.clear_ctid();
        l.desc.obsolete.fetch_add(1, Ordering::Relaxed);
    }
    m &= !F_KEYS_UPDATED;
    if keys_updated {
        m |= F_KEYS_UPDATED;
    }
    h.xmax = xmax;
    h.infomask.store(m, Ordering::Relaxed);
    l.touch();
}

/// Links a row to its newer version (TID page, offset) after an update; `hot` = no new index
/// entries were made.
pub fn link_next(l: &Locked, s: u32, next: (u32, u16), hot: bool) {
    let h = touch_row(l, s);
    h.set_ctid(next.0, next.1);
    if hot {
        h.set_flag(F_HOT_UPDATED);
    }
    l.touch();
}

/// Drops the link of a row whose xmax is now a lock only (an aborted updater's link to its newer
/// version, and the heap-only-update flag); a moved row keeps its mark.
pub fn clear_update_link(l: &Locked, s: u32) {
    let h = touch_row(l, s);
    h.clear_flag(F_HOT_UPDATED);
    if !h.is_moved() {
        h.clear_ctid();
    }
    l.touch();
}

/// Marks a row deleted by a cross-partition UPDATE (heap's MovedPartitions ctid).
pub fn mark_moved(l: &Locked, s: u32) {
    let h = touch_row(l, s);
    h.set_moved();
    l.touch();
}

/// Ends a speculative insertion: success clears the token, failure kills the row.
pub fn finish_speculative(l: &Locked, s: u32, succeeded: bool) {
    let h = touch_row(l, s);
    l.desc.vis_xid.store(0, Ordering::Relaxed);
    h.clear_ctid();
    if !succeeded {
        // like heap_abort_speculative: an invalid xmin makes it dead to everyone at once
        h.set_hint(HEAP_XMIN_INVALID);
    }
    l.touch();
}

/// A normal row version `s` is about to be removed (pruned, killed, freed): a hot standby must
/// first cancel the queries that may still see it (see `changes::note_conflict`). Its xmax (a
/// plain xid, not a multixact) or, for a version never deleted, its xmin.
fn note_removed(l: &Locked, s: u32) {
    let h = l.row(s);
    if h.state() != ST_NORMAL {
        return;
    }
    let m = h.infomask();
    changes::note_conflict(h.xmin);
    if m & HEAP_XMAX_IS_MULTI == 0 && m & HEAP_XMAX_INVALID == 0 {
        changes::note_conflict(h.xmax);
    }
}

fn release_var(l: &Locked, s: u32) {
    let bytes = l.blk.var_bytes(s);
    l.desc.var_dead.fetch_add(bytes, Ordering::Relaxed);
}

/// Turns a dead chain root into a redirect to the chain's first live version (TID in `target`).
pub fn make_redirect(l: &Locked, s: u32, target: (u32, u16)) {
    note_removed(l, s);
    let h = touch_row(l, s);
    let st = h.state();
    if st == ST_NORMAL {
        release_var(l, s);
    }
    // a redirect's xmax field counts its re-targetings, so a pruner that recorded an older
    // target cannot mistake a reused slot for it (ABA)
    h.xmax = if st == ST_REDIRECT {
        h.xmax.wrapping_add(1)
    } else {
        l.desc.nredirect.fetch_add(1, Ordering::Relaxed);
        1
    };
    h.set_state(ST_REDIRECT);
    h.set_ctid(target.0, target.1);
    l.touch();
}

/// Marks a chain root dead (no live version left); VACUUM removes its index entries and frees it.
pub fn make_dead(l: &Locked, s: u32) {
    note_removed(l, s);
    let h = touch_row(l, s);
    let st = h.state();
    if st == ST_NORMAL {
        release_var(l, s);
    }
    if st != ST_DEAD {
        l.desc.ndead.fetch_add(1, Ordering::Relaxed);
    }
    if st == ST_REDIRECT {
        uncount_redirect(l.desc);
    }
    h.set_state(ST_DEAD);
    h.xmax = 0;
    h.clear_ctid();
    l.touch();
}

/// One redirect slot fewer (never below zero: a count recounted on a standby may lag).
fn uncount_redirect(d: &BlockDesc) {
    let _ = d
        .nredirect
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
}

/// Counts block `b`'s redirect slots again from its row headers (after redo, or after the
/// block was loaded from a checkpoint image: neither maintains the count). The caller owns the
/// arena (startup, end of recovery).
pub fn recount_redirects(b: u32) {
    let d = arena::block_desc(b);
    let blk = BlockRef {
        base: arena::block_ptr(b),
    };
    let hwm = d
        .hwm
        .load(Ordering::Relaxed)
        .min(d.capacity.load(Ordering::Relaxed));
    let n = (0..hwm)
        .filter(|&s| blk.row(s).state() == ST_REDIRECT)
        .count();
    d.nredirect.store(n as u32, Ordering::Relaxed);
}

/// Returns a slot to the block's free list.
pub fn free_slot(l: &Locked, s: u32) {
    note_removed(l, s);
    let h = touch_row(l, s);
    match h.state() {
        ST_NORMAL => release_var(l, s),
        ST_DEAD => {
            l.desc.ndead.fetch_sub(1, Ordering::Relaxed);
        }
        ST_REDIRECT => uncount_redirect(l.desc),
        ST_FREE => return,
        _ => {}
    }
    h.set_state(ST_FREE);
    h.xmax = 0;
    h.clear_ctid();
    touch_free_word(l, s).mark_free(s);
    if s / 64 < l.desc.free_hint.load(Ordering::Relaxed) {
        l.desc.free_hint.store(s / 64, Ordering::Relaxed);
    }
    l.desc.nfree.fetch_add(1, Ordering::Relaxed);
    l.touch();
}

/// Frees every block of a table (TRUNCATE of a new relfilenode, DROP at commit). The relation
/// file goes away with the relfilenode, so its size is left alone.
pub fn free_all_blocks(t: TableRef) {
    // one write section around the record and the frees: a snapshot (and so a checkpoint
    // image) sees either neither or both
    let _section = cow::Section_::enter();
    if changes::logging() && t.logged() {
        if let Some(f) = unsafe { changes::LOG_FREE_ALL } {
            f(t);
        }
    }
    let owner = t.owner();
    for b in 0..arena::nblocks() {
        let d = arena::block_desc(b);
        if d.owner.load(Ordering::Relaxed) != owner {
            continue;
        }
        let _g = d.exclusive();
        if d.owner.load(Ordering::Acquire) == owner {
            arena::free_block(t, b, false);
            t.entry().nblocks.fetch_sub(1, Ordering::Relaxed);
        }
    }
    t.entry()
        .insert_hint
        .store(arena::NO_BLOCK, Ordering::Relaxed);
    INSERT_BLOCK.with(|m| m.borrow_mut().remove(&t.id));
}

/// Narrows the block's zone maps to the row versions it still holds (VACUUM, after dead
/// versions were freed). Any version some snapshot can still see is such a row version.
pub fn recompute_zones(l: &Locked) {
    let hwm = l.hwm();
    for i in 0..l.blk.natts() {
        if !zoned(l.blk.col(i)) {
            continue;
        }
        let z = l
            .blk
            .compute_zone(i, hwm, |s| l.row(s).state() == ST_NORMAL);
        if z != l.blk.zone(i) {
            cow::before_write(l.blk.zone_ptr(i) as *const u8, std::mem::size_of::<Zone>());
            unsafe { l.blk.zone_ptr(i).write(z) };
        }
    }
}

/// Frees a block whose slots are all free (VACUUM). Caller holds it exclusively via `l`.
pub fn release_empty_block(t: TableRef, mut l: Locked) {
    if l.desc.nfree.load(Ordering::Relaxed) == l.hwm() {
        // the block's last changes, then its release (redo frees it after applying them)
        if let Some(ct) = l.cap.take() {
            let (ranges, _) = changes::end(l.ab);
            let conflict = changes::take_conflict();
            if !ranges.is_empty() {
                if let Some(f) = unsafe { changes::LOG_BLOCK } {
                    f(ct, l.lb, l.ab, &ranges, conflict);
                }
            }
            if let Some(f) = unsafe { changes::LOG_FREE } {
                f(ct, l.lb);
            }
        }
        arena::free_block(t, l.ab, true);
        t.entry().nblocks.fetch_sub(1, Ordering::Relaxed);
        let _ = t.entry().insert_hint.compare_exchange(
            l.lb,
            arena::NO_BLOCK,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        INSERT_BLOCK.with(|m| {
            let mut m = m.borrow_mut();
            if m.get(&t.id) == Some(&l.lb) {
                m.remove(&t.id);
            }
        });
    }
}

/// Sets a frozen xmin (VACUUM freezing): the row is visible to all and its xid may be recycled.
pub fn freeze_xmin(l: &Locked, s: u32) {
    let h = touch_row(l, s);
    // a standby query whose snapshot still counts xmin as running must not see it frozen
    changes::note_conflict(h.xmin);
    h.set_hint(HEAP_XMIN_FROZEN);
    l.touch();
}

/// Gathers the block's variable-length values per column (see `BlockRef::gather_var`) when it
/// freezes. Caller holds the block exclusively.
pub fn gather_var(l: &Locked) {
    let d = l.desc;
    let bs = arena::block_size();
    let low = d.var_low.load(Ordering::Relaxed) as usize;
    if low >= bs {
        return;
    }
    // the entries and the whole var area change: save their pre-images for live snapshots
    let hwm = l.hwm();
    for i in 0..l.blk.natts() {
        let c = *l.blk.col(i);
        if c.kind == KIND_VAR || c.kind == KIND_CSTRING {
            cow::before_write(l.blk.value_ptr(&c, 0), hwm as usize * c.width as usize);
        }
    }
    // the gathered values take at most the bytes they take now: they land in [low, bs)
    cow::before_write(unsafe { l.blk.base.add(low) }, bs - low);
    let new_low = l
        .blk
        .gather_var(hwm, bs as u32, |s| l.row(s).state() == ST_NORMAL);
    d.var_low.store(new_low, Ordering::Relaxed);
    d.var_dead.store(0, Ordering::Relaxed);
    l.touch();
}

/// Clears an xmax that no longer matters (aborted updater / finished lockers) before freezing.
pub fn clear_xmax(l: &Locked, s: u32) {
    let h = touch_row(l, s);
    let m = (h.infomask() & !(HEAP_XMAX_BITS | F_KEYS_UPDATED | F_HOT_UPDATED)) | HEAP_XMAX_INVALID;
    h.infomask.store(m, Ordering::Relaxed);
    h.xmax = 0;
    h.clear_ctid();
    l.touch();
}

/// Installs a copied version header (CLUSTER / VACUUM FULL keep xmin/xmax/cid/infomask).
pub fn set_header(l: &Locked, s: u32, xmax: u32, infomask: u16, keys_updated: bool) {
    let h = touch_row(l, s);
    l.desc.vis_xid.store(0, Ordering::Relaxed);
    h.xmax = xmax;
    let keep = h.infomask() & (F_HAS_EXTERNAL | F_HEAP_ONLY);
    let mut m = (infomask & HEAP_VISIBILITY_BITS) | keep;
    if keys_updated {
        m |= F_KEYS_UPDATED;
    }
    h.infomask.store(m, Ordering::Relaxed);
    l.touch();
}
