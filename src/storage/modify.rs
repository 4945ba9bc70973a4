//! The modification layer: every change to a block goes through a function here (insert a row
//! version, set xmax, link a newer version, redirect/kill/free a slot, compact the var area).
//! The later WAL issue logs exactly these operations; the snapshot issue hooks the "write
//! section" around them. Callers hold the block's LWLock exclusively for every `&mut` operation
//! (see [`Locked`]), shared for reads.
//!
//! Locking rules (deadlock freedom): a backend holds at most one block lock exclusively and never
//! waits for a second lock while holding it. Index fetches hold the chain root's block shared
//! while visiting the rest of the chain (shared only); pruning redirects the root under its
//! exclusive lock before freeing any chain member, so a reader inside a chain never finds a
//! member freed under it.
use crate::ffi;
use crate::storage::arena::{self, BlockDesc, LwGuard};
use crate::storage::block::*;
use crate::storage::row::{self, Prepared};
use crate::storage::tabledir::TableRef;
use crate::txn::mvcc::HEAP_XMAX_INVALID;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// A block locked by this backend, checked to belong to the expected table.
pub struct Locked {
    pub b: u32,
    pub desc: &'static BlockDesc,
    pub blk: BlockRef,
    _g: LwGuard,
}

impl Locked {
    #[inline]
    pub fn row(&self, slot: u32) -> &mut RowHdr {
        self.blk.row(slot)
    }
    #[inline]
    pub fn hwm(&self) -> u32 {
        self.desc.hwm.load(Ordering::Acquire)
    }
    #[inline]
    pub fn touch(&self) {
        self.desc.mod_count.fetch_add(1, Ordering::Relaxed);
    }
}

/// Locks block `b` if it belongs to `t` (shared or exclusive). None if it does not (any more).
#[inline]
pub fn lock(t: TableRef, b: u32, exclusive: bool) -> Option<Locked> {
    if b >= arena::nblocks() {
        return None;
    }
    let desc = arena::block_desc(b);
    if desc.owner.load(Ordering::Acquire) != t.owner() {
        return None;
    }
    let g = if exclusive {
        desc.exclusive()
    } else {
        desc.share()
    };
    if desc.owner.load(Ordering::Acquire) != t.owner() {
        return None;
    }
    Some(Locked {
        b,
        desc,
        blk: BlockRef {
            base: arena::block_ptr(b),
        },
        _g: g,
    })
}

/// Is `slot` an initialised slot of the locked block?
#[inline]
pub fn slot_in_range(l: &Locked, slot: u32) -> bool {
    slot < l.hwm()
}

thread_local! {
    /// This backend's current insert block per table id.
    static INSERT_BLOCK: RefCell<HashMap<u32, u32>> = RefCell::new(HashMap::new());
}

fn has_room(d: &BlockDesc, natts: u32, var_need: u32) -> bool {
    if d.natts.load(Ordering::Relaxed) != natts {
        return false;
    }
    let slot_free = d.free_head.load(Ordering::Relaxed) != NO_SLOT
        || d.hwm.load(Ordering::Relaxed) < d.capacity.load(Ordering::Relaxed);
    if !slot_free {
        return false;
    }
    let room = d.var_low.load(Ordering::Relaxed) - d.fixed_end.load(Ordering::Relaxed);
    room >= var_need || room + d.var_dead.load(Ordering::Relaxed) >= var_need
}

/// Takes a free slot of a locked block that `has_room`; compacts the var area when needed.
fn take_slot(l: &Locked, var_need: u32) -> u32 {
    let d = l.desc;
    let room = d.var_low.load(Ordering::Relaxed) - d.fixed_end.load(Ordering::Relaxed);
    if room < var_need {
        let hwm = l.hwm();
        let low = l.blk.compact_var(hwm, arena::block_size() as u32, |s| {
            l.row(s).state() == ST_NORMAL
        });
        d.var_low.store(low, Ordering::Relaxed);
        d.var_dead.store(0, Ordering::Relaxed);
    }
    let head = d.free_head.load(Ordering::Relaxed);
    if head != NO_SLOT {
        d.free_head.store(l.row(head).next_slot, Ordering::Relaxed);
        d.nfree.fetch_sub(1, Ordering::Relaxed);
        head
    } else {
        let s = d.hwm.load(Ordering::Relaxed);
        d.hwm.store(s + 1, Ordering::Release);
        s
    }
}

/// Formats a freshly allocated block for `rel`'s current tuple descriptor.
fn new_block(rel: pg_sys::Relation, t: TableRef, var_need: u32) -> Locked {
    let layout = unsafe {
        let specs = row::attr_specs((*rel).rd_att);
        Layout::compute(&specs, arena::block_size(), arena::max_rows())
    };
    let Some(layout) = layout else {
        crate::ffi::error_hint(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!(
                "table \"{}\" has too many columns for a scoot block",
                unsafe { ffi::rel_name(rel) }
            ),
            "Increase scoot.block_size.",
        );
    };
    let bs = arena::block_size() as u32;
    if var_need > bs - layout.fixed_end {
        too_large(rel, var_need, bs - layout.fixed_end);
    }
    let b = arena::alloc_block(t.owner());
    let desc = arena::block_desc(b);
    let g = desc.exclusive();
    let blk = BlockRef {
        base: arena::block_ptr(b),
    };
    blk.format(&layout, t.id, t.entry().key.rel);
    desc.capacity.store(layout.capacity, Ordering::Relaxed);
    desc.fixed_end.store(layout.fixed_end, Ordering::Relaxed);
    desc.var_low.store(bs, Ordering::Relaxed);
    desc.var_dead.store(0, Ordering::Relaxed);
    desc.free_head.store(NO_SLOT, Ordering::Relaxed);
    desc.nfree.store(0, Ordering::Relaxed);
    desc.ndead.store(0, Ordering::Relaxed);
    desc.natts.store(layout.natts as u32, Ordering::Relaxed);
    desc.hwm.store(0, Ordering::Release);
    t.entry().nblocks.fetch_add(1, Ordering::Relaxed);
    Locked {
        b,
        desc,
        blk,
        _g: g,
    }
}

fn too_large(rel: pg_sys::Relation, need: u32, limit: u32) -> ! {
    crate::ffi::error_hint(PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, format!(
            "row is too large for a scoot block: {} bytes of variable-length data in table \"{}\", the limit is {} bytes",
            need,
            unsafe { ffi::rel_name(rel) },
            limit
        ), "Values are stored uncompressed inside one block; increase scoot.block_size to store larger rows.");
}

/// Finds (or allocates) a block of `t` with room for a row needing `var_need` var bytes and
/// returns it locked exclusively with a slot taken.
fn block_for_insert(
    rel: pg_sys::Relation,
    t: TableRef,
    var_need: u32,
    prefer: Option<u32>,
) -> (Locked, u32) {
    let natts = unsafe { ffi::rel_natts(rel) } as u32;
    let bs = arena::block_size() as u32;
    // 1. the preferred block (an updated row's block), this backend's insert block, the hint
    let local = INSERT_BLOCK.with(|m| m.borrow().get(&t.id).copied());
    let hint = t.entry().insert_hint.load(Ordering::Relaxed);
    for cand in [prefer, local, Some(hint)].into_iter().flatten() {
        if cand == arena::NO_BLOCK || cand >= arena::nblocks() {
            continue;
        }
        if !has_room(arena::block_desc(cand), natts, var_need) {
            continue;
        }
        if let Some(l) = lock(t, cand, true) {
            if has_room(l.desc, natts, var_need) {
                let s = take_slot(&l, var_need);
                return (l, s);
            }
        }
    }
    // 2. any block of the table with room (skip busy ones)
    let owner = t.owner();
    for b in 0..arena::nblocks() {
        let d = arena::block_desc(b);
        if d.owner.load(Ordering::Relaxed) != owner || !has_room(d, natts, var_need) {
            continue;
        }
        if let Some(g) = LwGuard::try_exclusive(d.lock_ptr()) {
            if d.owner.load(Ordering::Acquire) == owner && has_room(d, natts, var_need) {
                let l = Locked {
                    b,
                    desc: d,
                    blk: BlockRef {
                        base: arena::block_ptr(b),
                    },
                    _g: g,
                };
                INSERT_BLOCK.with(|m| m.borrow_mut().insert(t.id, b));
                t.entry().insert_hint.store(b, Ordering::Relaxed);
                let s = take_slot(&l, var_need);
                return (l, s);
            }
        }
    }
    // 3. a new block
    let l = new_block(rel, t, var_need);
    if var_need > bs - l.desc.fixed_end.load(Ordering::Relaxed) {
        too_large(rel, var_need, bs - l.desc.fixed_end.load(Ordering::Relaxed));
    }
    INSERT_BLOCK.with(|m| m.borrow_mut().insert(t.id, l.b));
    t.entry().insert_hint.store(l.b, Ordering::Relaxed);
    let s = take_slot(&l, var_need);
    (l, s)
}

/// Inserts a new row version. `flags` may carry F_HEAP_ONLY; `spec_token` marks a speculative
/// insertion. Returns (block, slot).
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
    let (l, s) = block_for_insert(rel, t, row.var_bytes, prefer);
    let d = l.desc;
    let low = unsafe { row::write_row(l.blk, s, row, d.var_low.load(Ordering::Relaxed)) };
    d.var_low.store(low, Ordering::Relaxed);
    let h = l.row(s);
    h.xmin = xmin;
    h.xmax = 0;
    h.cid = cid;
    h.infomask.store(HEAP_XMAX_INVALID, Ordering::Relaxed);
    h.flags = ST_NORMAL
        | flags
        | if spec_token.is_some() {
            F_SPECULATIVE
        } else {
            0
        };
    h.next_block = arena::NO_BLOCK;
    h.next_slot = spec_token.unwrap_or(NO_SLOT);
    l.touch();
    t.entry().rows_inserted.fetch_add(1, Ordering::Relaxed);
    (l.b, s)
}

/// Sets a new xmax (update/delete/lock) on a row. `keys_updated` sets heap's HEAP_KEYS_UPDATED;
/// `cmax` (update/delete only) stores the command id, possibly as a combo id.
pub fn set_xmax(
    l: &Locked,
    s: u32,
    xmax: u32,
    infomask_bits: u16,
    keys_updated: bool,
    cmax: Option<u32>,
) {
    let h = l.row(s);
    let mut m = h.infomask() & !crate::txn::mvcc::HEAP_XMAX_BITS;
    m |= infomask_bits;
    if let Some(cid) = cmax {
        let (c, combo) = crate::txn::mvcc::adjust_cmax(h, cid);
        h.cid = c;
        if combo {
            m |= crate::txn::mvcc::HEAP_COMBOCID;
        } else {
            m &= !crate::txn::mvcc::HEAP_COMBOCID;
        }
    }
    h.xmax = xmax;
    h.infomask.store(m, Ordering::Relaxed);
    h.flags &= !F_KEYS_UPDATED;
    if keys_updated {
        h.flags |= F_KEYS_UPDATED;
    }
    if cmax.is_some() {
        h.flags &= !F_HOT_UPDATED;
        l.desc.obsolete.fetch_add(1, Ordering::Relaxed);
        // a new update/delete supersedes any older (aborted) link
        h.next_block = arena::NO_BLOCK;
        h.next_slot = NO_SLOT;
    }
    l.touch();
}

/// Links a row to its newer version (after an update); `hot` = no new index entries were made.
pub fn link_next(l: &Locked, s: u32, nb: u32, ns: u32, hot: bool) {
    let h = l.row(s);
    h.next_block = nb;
    h.next_slot = ns;
    if hot {
        h.flags |= F_HOT_UPDATED;
    }
    l.touch();
}

/// Ends a speculative insertion: success clears the token, failure kills the row.
pub fn finish_speculative(l: &Locked, s: u32, succeeded: bool) {
    let h = l.row(s);
    h.flags &= !F_SPECULATIVE;
    h.next_block = arena::NO_BLOCK;
    h.next_slot = NO_SLOT;
    if !succeeded {
        // like heap_abort_speculative: xmin invalid makes it dead to everyone at once
        h.xmin = 0;
        h.infomask
            .fetch_or(crate::txn::mvcc::HEAP_XMIN_INVALID, Ordering::Relaxed);
    }
    l.touch();
}

fn release_var(l: &Locked, s: u32) {
    let bytes = l.blk.var_bytes(s);
    l.desc.var_dead.fetch_add(bytes, Ordering::Relaxed);
}

/// Turns a dead chain root into a redirect to the chain's first live version.
pub fn make_redirect(l: &Locked, s: u32, nb: u32, ns: u32) {
    let h = l.row(s);
    if h.state() == ST_NORMAL {
        release_var(l, s);
    }
    // a redirect's xmax field counts its re-targetings, so a pruner that recorded an older
    // target cannot mistake a reused slot for it (ABA)
    h.xmax = if h.state() == ST_REDIRECT {
        h.xmax.wrapping_add(1)
    } else {
        1
    };
    h.flags = ST_REDIRECT;
    h.next_block = nb;
    h.next_slot = ns;
    l.touch();
}

/// Marks a chain root dead (no live version left); VACUUM removes its index entries and frees it.
pub fn make_dead(l: &Locked, s: u32) {
    let h = l.row(s);
    if h.state() == ST_NORMAL {
        release_var(l, s);
    }
    if h.state() != ST_DEAD {
        l.desc.ndead.fetch_add(1, Ordering::Relaxed);
    }
    h.flags = ST_DEAD;
    h.next_block = arena::NO_BLOCK;
    h.next_slot = NO_SLOT;
    l.touch();
}

/// Returns a slot to the block's free list.
pub fn free_slot(l: &Locked, s: u32) {
    let h = l.row(s);
    match h.state() {
        ST_NORMAL => release_var(l, s),
        ST_DEAD => {
            l.desc.ndead.fetch_sub(1, Ordering::Relaxed);
        }
        ST_FREE => return,
        _ => {}
    }
    h.flags = ST_FREE;
    h.xmin = 0;
    h.xmax = 0;
    h.next_block = arena::NO_BLOCK;
    h.next_slot = l.desc.free_head.load(Ordering::Relaxed);
    l.desc.free_head.store(s, Ordering::Relaxed);
    l.desc.nfree.fetch_add(1, Ordering::Relaxed);
    l.touch();
}

/// Frees every block of a table (TRUNCATE of a new relfilenode, DROP at commit).
pub fn free_all_blocks(t: TableRef) {
    let owner = t.owner();
    for b in 0..arena::nblocks() {
        let d = arena::block_desc(b);
        if d.owner.load(Ordering::Relaxed) != owner {
            continue;
        }
        let _g = d.exclusive();
        if d.owner.load(Ordering::Acquire) == owner {
            arena::free_block(b);
            t.entry().nblocks.fetch_sub(1, Ordering::Relaxed);
        }
    }
    t.entry()
        .insert_hint
        .store(arena::NO_BLOCK, Ordering::Relaxed);
    INSERT_BLOCK.with(|m| m.borrow_mut().remove(&t.id));
}

/// Frees a block whose slots are all free (VACUUM). Caller holds it exclusively via `l`.
pub fn release_empty_block(t: TableRef, l: Locked) {
    if l.desc.nfree.load(Ordering::Relaxed) == l.hwm() {
        arena::free_block(l.b);
        t.entry().nblocks.fetch_sub(1, Ordering::Relaxed);
        let _ = t.entry().insert_hint.compare_exchange(
            l.b,
            arena::NO_BLOCK,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        INSERT_BLOCK.with(|m| {
            let mut m = m.borrow_mut();
            if m.get(&t.id) == Some(&l.b) {
                m.remove(&t.id);
            }
        });
    }
}

/// Sets a frozen xmin (VACUUM freezing): the row is visible to all and its xid may be recycled.
pub fn freeze_xmin(l: &Locked, s: u32) {
    let h = l.row(s);
    h.infomask
        .fetch_or(crate::txn::mvcc::HEAP_XMIN_FROZEN, Ordering::Relaxed);
    l.touch();
}

/// Clears an xmax that no longer matters (aborted updater / finished lockers) before freezing.
pub fn clear_xmax(l: &Locked, s: u32) {
    let h = l.row(s);
    let m = (h.infomask() & !crate::txn::mvcc::HEAP_XMAX_BITS) | HEAP_XMAX_INVALID;
    h.infomask.store(m, Ordering::Relaxed);
    h.xmax = 0;
    h.flags &= !(F_KEYS_UPDATED | F_HOT_UPDATED);
    l.touch();
}
