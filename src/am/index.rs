//! Index access to scoot rows. Index entries point at a chain *root*; an update that changes no
//! indexed column (HOT-style) adds a heap-only version anywhere in the arena and links it from
//! the older version, so the root TID (and the index) stays valid. Index fetches walk the chain
//! under the root block's shared lock and return the version the snapshot sees.
//!
//! Pruning replaces a chain's dead prefix by a redirect at the root (under the root block's
//! exclusive lock, so no walker is inside the chain) and frees the dead heap-only versions;
//! a fully dead chain leaves a DEAD root for VACUUM to remove from the indexes.
use super::{check_conflict_out, predicate_lock_row, tid_of};
use crate::ffi;
use crate::ffi::guard::{self, boundary, raw};
use crate::storage::block::{RowHdr, F_HEAP_ONLY, F_HOT_UPDATED, ST_DEAD, ST_NORMAL, ST_REDIRECT};
use crate::storage::decode_tid_parts;
use crate::storage::modify::{self as storage, Locked};
use crate::storage::row;
use crate::storage::tabledir::{self, TableRef};
use crate::txn::horizon;
use crate::txn::mvcc::{self, Htsv, HEAP_XMAX_INVALID};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::c_void;

/// Does `h` continue its chain with a heap-only newer version? (local block, slot, its xmin)
#[inline]
pub fn hot_next(h: &RowHdr) -> Option<(u32, u32, u32)> {
    if h.has_flag(F_HOT_UPDATED) && h.infomask() & HEAP_XMAX_INVALID == 0 {
        let (p, o) = h.next()?;
        let (lb, s) = decode_tid_parts(p, o)?;
        Some((lb, s, mvcc::update_xid(h)))
    } else {
        None
    }
}

/// Where a redirect points (local block, slot).
#[inline]
fn redirect_target(h: &RowHdr) -> Option<(u32, u32)> {
    let (p, o) = h.next()?;
    decode_tid_parts(p, o)
}

/// Walks the chain rooted at (rb, rs), calling `f(lock, slot, hdr)` for each member until it
/// returns true. Holds the root's block shared for the whole walk. Returns the member on which
/// `f` stopped.
pub fn walk_chain(
    t: TableRef,
    rb: u32,
    rs: u32,
    f: impl FnMut(&Locked, u32, &RowHdr) -> bool,
) -> Option<(u32, u32)> {
    let root = storage::lock(t, rb, false)?;
    walk_chain_locked(t, &root, rs, f)
}

/// [`walk_chain`] with the root's block already held (shared or exclusive) by the caller: a
/// bitmap heap scan walks all the chains of a block under one lock.
pub fn walk_chain_locked(
    t: TableRef,
    root: &Locked,
    rs: u32,
    mut f: impl FnMut(&Locked, u32, &RowHdr) -> bool,
) -> Option<(u32, u32)> {
    let rb = root.lb;
    if !storage::slot_in_range(root, rs) {
        return None;
    }
    let rh = root.row(rs);
    let (mut cb, mut cs, mut prior): (u32, u32, Option<u32>) = match rh.state() {
        ST_REDIRECT => {
            let (b, s) = redirect_target(rh)?;
            (b, s, None)
        }
        ST_NORMAL if !rh.has_flag(F_HEAP_ONLY) => (rb, rs, None),
        _ => return None,
    };
    let mut first = true;
    for _ in 0..1_000_000 {
        let other;
        let l: &Locked = if cb == rb {
            root
        } else {
            other = storage::lock(t, cb, false)?;
            &other
        };
        if !storage::slot_in_range(l, cs) {
            return None;
        }
        let h = l.row(cs);
        if h.state() != ST_NORMAL {
            return None;
        }
        if let Some(px) = prior {
            if h.xmin != px {
                return None;
            }
        }
        if !(first && cb == rb && cs == rs) && !h.has_flag(F_HEAP_ONLY) {
            return None; // a redirect must lead to a heap-only member
        }
        first = false;
        if f(l, cs, h) {
            return Some((cb, cs));
        }
        match hot_next(h) {
            Some((nb, ns, x)) => {
                cb = nb;
                cs = ns;
                prior = Some(x);
            }
            None => return None,
        }
    }
    None
}

/// The chain member visible to `snap` (MVCC), with serializable bookkeeping.
pub fn chain_visible(
    rel: pg_sys::Relation,
    t: TableRef,
    rb: u32,
    rs: u32,
    snap: pg_sys::Snapshot,
) -> Option<(u32, u32)> {
    let root = storage::lock(t, rb, false)?;
    chain_visible_locked(rel, t, &root, rs, snap)
}

/// [`chain_visible`] for a chain rooted in the block `root` the caller holds: the walk and the
/// predicate lock of a member in that block need no lock of their own.
pub fn chain_visible_locked(
    rel: pg_sys::Relation,
    t: TableRef,
    root: &Locked,
    rs: u32,
    snap: pg_sys::Snapshot,
) -> Option<(u32, u32)> {
    walk_chain_locked(t, root, rs, |_l, _s, h| {
        let vis = mvcc::visible(h, snap);
        check_conflict_out(rel, h, vis, snap);
        vis
    })
    .inspect(|&(b, s)| {
        if b == root.lb {
            predicate_lock_row(rel, b, s, root.row(s), snap);
        } else if let Some(l) = storage::lock(t, b, false) {
            predicate_lock_row(rel, b, s, l.row(s), snap);
        }
    })
}

/// How pruning classifies a chain member.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Prune {
    /// removable
    Dead,
    /// committed-deleted but maybe still visible to someone: keep walking (a later DEAD member
    /// makes it removable too, exactly like heap_prune_chain's "latestdead")
    Recent,
    /// live or in progress: the chain's dead part ends before it
    Keep,
}

/// The removable prefix of a chain, as a walk classifies its members one by one (shared by
/// [`prune_chain`] and the block pruning's `local_chain`).
#[derive(Default)]
struct DeadPrefix {
    /// index of the newest DEAD member walked
    last: Option<usize>,
    /// the xid that deleted it (0: its inserter aborted)
    last_x: u32,
}

impl DeadPrefix {
    /// Classifies member number `i` of the walk; true: a Keep member (the walk stops before it).
    fn see(&mut self, i: usize, h: &RowHdr, classify: &dyn Fn(&RowHdr) -> Prune) -> bool {
        match classify(h) {
            Prune::Keep => return true,
            Prune::Dead => {
                self.last = Some(i);
                self.last_x = match mvcc::htsv_horizon(h) {
                    (mvcc::Htsv::RecentlyDead, x) => x,
                    _ => 0,
                };
            }
            Prune::Recent => {}
        }
        false
    }

    /// After walking `n` members (`stopped`: at a Keep member, `ended`: to the chain's end): the
    /// members to remove, `..=last_dead`, and the one the root must then lead to (an index below
    /// `n`, or `n` for the Keep member the walk stopped at; None: the whole chain is dead).
    /// None: nothing to remove, or the walk broke off (a concurrent change): leave it alone.
    fn plan(&self, n: usize, stopped: bool, ended: bool) -> Option<(usize, Option<usize>)> {
        let mut ld = self.last?;
        // the first member after the removable part: a Recent member, or the Keep member
        let mut keep = if ld + 1 < n {
            Some(ld + 1)
        } else {
            stopped.then_some(n)
        };
        let mut whole_chain_dead = keep.is_none() && ended && ld + 1 == n;
        if whole_chain_dead && !horizon::image_allows(self.last_x) {
            // a live snapshot image may still see the row through the index: keep the chain's
            // newest member (and the index entries leading to it), free the older ones
            if ld == 0 {
                return None;
            }
            keep = Some(ld);
            ld -= 1;
            whole_chain_dead = false;
        }
        if keep.is_none() && !whole_chain_dead {
            return None;
        }
        Some((ld, keep))
    }
}

/// Removes the dead part of the chain rooted at (rb, rs): every member up to the last DEAD one
/// (members before a dead version are older, hence dead as well). `classify` uses a fixed
/// horizon for VACUUM and the GlobalVis test for opportunistic pruning. Returns true if the
/// root became DEAD (the whole chain is gone and index entries must be removed).
pub fn prune_chain(t: TableRef, rb: u32, rs: u32, classify: &dyn Fn(&RowHdr) -> Prune) -> bool {
    // phase 1: record the chain under shared locks
    let root_state;
    let root_target;
    let root_xmin;
    {
        let Some(root) = storage::lock(t, rb, false) else {
            return false;
        };
        if !storage::slot_in_range(&root, rs) {
            return false;
        }
        let h = root.row(rs);
        root_state = h.state();
        root_target = (h.ctid, h.xmax);
        root_xmin = h.xmin;
        if root_state == ST_DEAD || (root_state == ST_NORMAL && h.has_flag(F_HEAP_ONLY)) {
            return root_state == ST_DEAD;
        }
    }
    let mut members: Vec<(u32, u32, u32)> = Vec::new();
    let mut dead = DeadPrefix::default();
    let mut ended = false;
    let stop = walk_chain(t, rb, rs, |l, s, h| {
        if dead.see(members.len(), h, classify) {
            return true;
        }
        members.push((l.lb, s, h.xmin));
        if hot_next(h).is_none() {
            ended = true;
        }
        false
    });
    let Some((ld, keep)) = dead.plan(members.len(), stop.is_some(), ended) else {
        return false;
    };
    let keep_target = keep.map(|k| match members.get(k) {
        Some(&(b, s, _)) => (b, s),
        None => stop.expect("the Keep member the walk stopped at"),
    });
    let whole_chain_dead = keep_target.is_none();
    // phase 2: redirect (or kill) the root under its exclusive lock, verifying nothing changed
    {
        let Some(root) = storage::lock(t, rb, true) else {
            return false;
        };
        let h = root.row(rs);
        let same = h.state() == root_state
            && match root_state {
                ST_REDIRECT => (h.ctid, h.xmax) == root_target,
                _ => h.xmin == root_xmin,
            };
        if !same {
            return false;
        }
        match keep_target {
            Some((lb, ls)) if (lb, ls) != (rb, rs) => {
                let tid = crate::storage::tid_of(lb, ls);
                storage::make_redirect(&root, rs, (crate::ffi::tid_page(&tid), tid.ip_posid));
                if root_state == ST_NORMAL {
                    count_removed(1);
                }
            }
            Some(_) => return false,
            None => storage::make_dead(&root, rs),
        }
    }
    // phase 3: free the removed heap-only members (no walker can reach them any more)
    for &(b, s, xmin) in &members[..=ld] {
        if (b, s) == (rb, rs) {
            continue;
        }
        if let Some(l) = storage::lock(t, b, true) {
            let h = l.row(s);
            if storage::slot_in_range(&l, s)
                && h.state() == ST_NORMAL
                && h.has_flag(F_HEAP_ONLY)
                && h.xmin == xmin
            {
                storage::free_slot(&l, s);
                count_removed(1);
            }
        }
    }
    whole_chain_dead
}

thread_local! {
    /// Row versions pruning removed in this backend within the current [`removed_by`]: a root
    /// version replaced by a redirect, and every heap-only member freed (a root marked DEAD is
    /// not counted: it stays a dead row until VACUUM, as heap's LP_DEAD items do).
    static REMOVED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn count_removed(n: u32) {
    REMOVED.with(|c| c.set(c.get().saturating_add(n)));
}

/// Row versions pruning `f` removed (the count of an enclosing caller is kept).
fn removed_by(f: impl FnOnce()) -> u32 {
    let outer = REMOVED.with(|c| c.replace(0));
    f();
    REMOVED.with(|c| c.replace(outer))
}

/// Tells the statistics collector that `n` dead row versions of `rel` were reclaimed, as
/// heap_page_prune_opt does (pgstat_update_heap_dead_tuples): without it `n_dead_tup` counts
/// every superseded version until the next VACUUM, and autovacuum runs as if none had been
/// pruned.
pub fn report_reclaimed(rel: pg_sys::Relation, n: u64) {
    if n > 0 {
        unsafe { pg_sys::pgstat_update_heap_dead_tuples(rel, n.min(i32::MAX as u64) as i32) };
    }
}

/// Runs opportunistic pruning `f` of `rel` and reports what it reclaimed ([`report_reclaimed`]).
fn pruning_reported(rel: pg_sys::Relation, f: impl FnOnce()) {
    report_reclaimed(rel, removed_by(f) as u64);
}

/// Reports the row versions the background freezer pruned in `t` since the last report (see
/// `TableEntry::pruned_unreported`) as reclaimed dead versions of `rel`: called as a scan or an
/// index fetch of the table begins (one relaxed load when there is nothing to report).
pub fn report_background_pruning(rel: pg_sys::Relation, t: TableRef) {
    use std::sync::atomic::Ordering::Relaxed;
    let e = t.entry();
    if e.pruned_unreported.load(Relaxed) != 0 {
        report_reclaimed(rel, e.pruned_unreported.swap(0, Relaxed) as u64);
    }
}

/// What [`local_chain`] found for one chain of a block held exclusively.
enum LocalChain {
    /// nothing to remove (or the chain is inconsistent: left alone, as `prune_chain` does)
    Keep,
    /// a member lies in another block: prune it on its own with [`prune_chain`]
    Spill,
    /// remove `members[..=last_dead]`; the root becomes a redirect to `keep` (a slot of this
    /// block) or, with `None`, dead
    Remove { last_dead: usize, keep: Option<u32> },
}

/// Plans the pruning of the chain rooted at slot `rs` of the exclusively locked block `l`
/// (starting at `start`: the root, or where its redirect points), with the same rules as
/// [`prune_chain`]. Fills `members` with the slots walked.
fn local_chain(
    l: &Locked,
    rs: u32,
    start: u32,
    classify: &dyn Fn(&RowHdr) -> Prune,
    members: &mut Vec<u32>,
) -> LocalChain {
    members.clear();
    let hwm = l.hwm();
    let mut dead = DeadPrefix::default();
    let mut ended = false;
    let mut stop: Option<u32> = None;
    let (mut cs, mut prior): (u32, Option<u32>) = (start, None);
    let mut first = true;
    for _ in 0..=hwm {
        // the checks of walk_chain: a broken chain ends the walk (stop stays None)
        if cs >= hwm {
            break;
        }
        let h = l.row(cs);
        if h.state() != ST_NORMAL
            || prior.is_some_and(|px| h.xmin != px)
            || (!(first && cs == rs) && !h.has_flag(F_HEAP_ONLY))
        {
            break;
        }
        first = false;
        if dead.see(members.len(), h, classify) {
            stop = Some(cs);
            break;
        }
        members.push(cs);
        match hot_next(h) {
            Some((nb, ns, x)) => {
                if nb != l.lb {
                    return LocalChain::Spill;
                }
                cs = ns;
                prior = Some(x);
            }
            None => {
                ended = true;
                break;
            }
        }
    }
    let Some((last_dead, keep)) = dead.plan(members.len(), stop.is_some(), ended) else {
        return LocalChain::Keep;
    };
    let keep = keep.map(|k| members.get(k).copied().or(stop).expect("the Keep member"));
    match keep {
        Some(k) if k == rs => LocalChain::Keep,
        _ => LocalChain::Remove { last_dead, keep },
    }
}

/// Prunes the version chains rooted in block `b` of `t` under **one** exclusive lock of the
/// block, so the whole block's pruning is one WAL record (and one standby conflict), as
/// heap_page_prune does for a page. Chains whose members leave the block are pruned one by
/// one afterwards with [`prune_chain`]. `classify` as for [`prune_chain`].
pub fn prune_block(t: TableRef, b: u32, classify: &dyn Fn(&RowHdr) -> Prune) {
    let mut spill: Vec<u32> = Vec::new();
    if let Some(l) = storage::lock(t, b, true) {
        let mut members: Vec<u32> = Vec::new();
        for rs in 0..l.hwm() {
            if !prune_root_locked(&l, rs, classify, &mut members) {
                spill.push(rs);
            }
        }
    }
    for rs in spill {
        prune_chain(t, b, rs, classify);
    }
}

/// Prunes the one chain rooted at (rb, rs) under one exclusive lock of its block (one WAL
/// record) when all its members lie in that block, else with [`prune_chain`].
pub fn prune_root(t: TableRef, rb: u32, rs: u32, classify: &dyn Fn(&RowHdr) -> Prune) {
    let local = match storage::lock(t, rb, true) {
        Some(l) => {
            !storage::slot_in_range(&l, rs) || prune_root_locked(&l, rs, classify, &mut Vec::new())
        }
        None => true,
    };
    if !local {
        prune_chain(t, rb, rs, classify);
    }
}

/// Prunes the chain rooted at slot `rs` of the exclusively locked block `l` if it is one (a
/// redirect or a normal version that is not heap-only). False: a member lies in another block
/// (nothing was changed; the caller prunes it with [`prune_chain`]).
fn prune_root_locked(
    l: &Locked,
    rs: u32,
    classify: &dyn Fn(&RowHdr) -> Prune,
    members: &mut Vec<u32>,
) -> bool {
    let b = l.lb;
    let h = l.row(rs);
    let start = match h.state() {
        ST_REDIRECT => match redirect_target(h) {
            Some((tb, ts)) if tb == b => ts,
            Some(_) => return false,
            None => return true,
        },
        ST_NORMAL if !h.has_flag(F_HEAP_ONLY) => rs,
        _ => return true,
    };
    match local_chain(l, rs, start, classify, members) {
        LocalChain::Keep => {}
        LocalChain::Spill => return false,
        LocalChain::Remove { last_dead, keep } => {
            let root_version = l.row(rs).state() == ST_NORMAL;
            match keep {
                Some(k) => {
                    let tid = crate::storage::tid_of(b, k);
                    storage::make_redirect(l, rs, (ffi::tid_page(&tid), tid.ip_posid));
                    if root_version {
                        count_removed(1);
                    }
                }
                None => storage::make_dead(l, rs),
            }
            for &s in &members[..=last_dead] {
                if s != rs {
                    storage::free_slot(l, s);
                    count_removed(1);
                }
            }
        }
    }
    true
}

/// Opportunistic classification with the GlobalVis test (and scoot's own horizon, which skips
/// the readers of snapshot images).
pub fn classify_globalvis(h: &RowHdr, vistest: *mut pg_sys::GlobalVisState) -> Prune {
    match mvcc::htsv_horizon(h) {
        (Htsv::Dead, _) => Prune::Dead,
        (Htsv::RecentlyDead, x) => {
            if horizon::removable(x, vistest) {
                Prune::Dead
            } else {
                Prune::Recent
            }
        }
        _ => Prune::Keep,
    }
}

// ---------------------------------------------------------------- index fetch

#[repr(C)]
struct IndexFetch {
    base: pg_sys::IndexFetchTableData,
    t: TableRef,
    /// for call_again with non-MVCC snapshots: the member returned last
    last: Option<(u32, u32)>,
    /// ... and the root of its chain (`*tid` now names the member, as heap's does)
    root: (u32, u32),
    vistest: *mut pg_sys::GlobalVisState,
    /// fetches through an OLAP snapshot image (per image, dropped with the memory context)
    img: *mut super::scan::Holder<Option<super::snapread::ImgScan>>,
    /// the snapshot `img` was set up for: later fetches with it skip the image lookup
    img_snap: pg_sys::Snapshot,
    /// MVCC fetches into scoot slots: the row found, as a one-row block batch whose columns are
    /// copied when the executor asks for them (an index scan usually needs a few of a row's
    /// columns; copying all of them was most of an index nested loop's time)
    batch: *mut super::scan::Holder<crate::storage::batch::Batch>,
    /// [`set_fetch_columns`] was called (the columns an index scan node reads are known)
    masked: bool,
    /// ... and the columns `[0, eager)` hold every one it reads: copied while the chain walk
    /// holds the block's lock, instead of locking it again when the slot is read (all columns
    /// before [`set_fetch_columns`])
    eager: usize,
    /// fetched for an index-only scan ([`index_only_skipped`]): the row's values are not wanted,
    /// only whether a version is visible, so a root in an all-visible block needs no fetch
    index_only: bool,
    /// fetches answered that way since [`index_only_skipped`] last asked (EXPLAIN's "Heap Fetches")
    skipped: u64,
}

thread_local! {
    /// Columns for the next index fetch begun on a table (see [`set_pending_columns`]).
    static PENDING_COLUMNS: std::cell::RefCell<Option<(pg_sys::Oid, Vec<bool>, bool)>> =
        const { std::cell::RefCell::new(None) };
}

/// The next [`index_fetch_begin`] on table `relid` starts with [`set_fetch_columns`]`(mask)`
/// (an index scan node about to begin its scan; `None` withdraws it).
pub fn set_pending_columns(p: Option<(pg_sys::Oid, Vec<bool>, bool)>) {
    PENDING_COLUMNS.with(|c| *c.borrow_mut() = p);
}

/// Restricts the rows this fetch copies into scoot slots to the columns whose `mask` entry is
/// set; the others read as NULL. For index scan nodes that project (their scan slot is read by
/// their own quals and target list only, which is where `mask` comes from: src/exec).
pub unsafe fn set_fetch_columns(data: *mut pg_sys::IndexFetchTableData, mask: &[bool]) {
    unsafe {
        let f = &mut *(data as *mut IndexFetch);
        if let Some(b) = (*f.batch).st.as_mut() {
            b.mask = mask.to_vec();
        }
        f.masked = true;
        f.eager = mask.iter().rposition(|&m| m).map(|i| i + 1).unwrap_or(0);
    }
}

/// Marks this fetch as serving an index-only scan (the node only asks whether the entry's row is
/// visible and clears the slot at once, so [`index_fetch_tuple`] may answer from all-visible
/// horizons without reading the row, see [`root_all_visible`]) and returns the fetches answered
/// that way since the last call (resetting the count): called after each of the node's calls.
pub unsafe fn index_only_skipped(data: *mut pg_sys::IndexFetchTableData) -> u64 {
    unsafe {
        let f = &mut *(data as *mut IndexFetch);
        f.index_only = true;
        std::mem::take(&mut f.skipped)
    }
}

/// Does the index entry (local block `lb`, slot `s`) name a chain with a version that every MVCC
/// snapshot with xmin `xmin` sees, by all-visible horizons alone (no lock, no row read beyond
/// headers)? What heap's index-only scans learn from the visibility map: `BlockDesc::vis_xid` is
/// set by VACUUM (and the freezer) only when every row version of the block is visible to every
/// snapshot whose xmin does not precede it, and cleared under the block's lock by every change
/// of a row's visibility (insert, delete, update, lock, a speculative insertion's end, a copied
/// header) before that lock is released.
///
/// Why no lock is needed (nodeIndexonlyscan.c's argument for the visibility map): an entry
/// this scan read in the index was inserted after its row was placed and the block's horizon
/// cleared, and the index page's lock orders that insert before this read, so a new row is
/// never taken for an old one. A deletion or update the horizon does not reflect yet is not
/// visible to the scan's snapshot anyway (it committed after the snapshot was taken, or it is
/// this transaction's own later command, which cleared the horizon before the snapshot of any
/// later command of it). The entry keeps its slot meanwhile: VACUUM removes index entries
/// before it frees slots, and cannot remove those of the index page an index-only scan holds
/// pinned.
///
/// The root is a plain row (visible to all, so not replaced by a committed update: the chain's
/// version), or a redirect to a heap-only version (an updated row whose older versions VACUUM
/// removed) whose own block is all visible too; a redirect can change under a pruning backend
/// without its block's horizon changing (the chain's dead members may lie in other blocks), so
/// it is read again after its target was judged, and must not have moved. Anything else (a dead
/// or free root, a slot above the high-water mark): the caller fetches.
pub fn root_all_visible(t: TableRef, lb: u32, s: u32, xmin: u32) -> bool {
    let Some(blk) = all_visible_block(t, lb, s, xmin) else {
        return false;
    };
    let h = read_hdr(blk, s);
    match h.state() {
        ST_NORMAL => !h.has_flag(F_HEAP_ONLY),
        ST_REDIRECT => {
            let Some((tb, ts)) = redirect_target(&h) else {
                return false;
            };
            let Some(tblk) = all_visible_block(t, tb, ts, xmin) else {
                return false;
            };
            let m = read_hdr(tblk, ts);
            if m.state() != ST_NORMAL || !m.has_flag(F_HEAP_ONLY) {
                return false;
            }
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            let again = read_hdr(blk, s);
            again.state() == ST_REDIRECT && redirect_target(&again) == Some((tb, ts))
        }
        _ => false,
    }
}

/// Local block `lb` of `t`, if it exists, its all-visible horizon covers snapshots with xmin
/// `xmin`, and slot `s` lies below its high-water mark.
fn all_visible_block(
    t: TableRef,
    lb: u32,
    s: u32,
    xmin: u32,
) -> Option<crate::storage::block::BlockRef> {
    use crate::storage::arena;
    use std::sync::atomic::Ordering;
    let ab = tabledir::arena_block(t, lb)?;
    let d = arena::block_desc(ab);
    let vx = d.vis_xid.load(Ordering::Acquire);
    if vx == 0 || mvcc::precedes(xmin, vx) || s >= d.hwm.load(Ordering::Acquire) {
        return None;
    }
    Some(crate::storage::block::BlockRef {
        base: arena::block_ptr(ab),
    })
}

/// A copy of row `s`'s version header, read without the block's lock (volatile: each call
/// reads memory again).
fn read_hdr(blk: crate::storage::block::BlockRef, s: u32) -> RowHdr {
    unsafe { std::ptr::read_volatile(blk.row(s) as *const RowHdr) }
}

/// Has [`set_fetch_columns`] been called on this fetch?
pub unsafe fn fetch_columns_set(data: *mut pg_sys::IndexFetchTableData) -> bool {
    unsafe { (*(data as *mut IndexFetch)).masked }
}

/// [`Batch::extend`](crate::storage::batch::Batch) for index fetches: copies more columns of
/// the row found, locking its block again. The version cannot have been pruned or changed: it is
/// visible to the MVCC snapshot the fetch used, which the executor still holds (as for the
/// block batches of sequential scans).
unsafe fn extend_fetched(ctx: *mut c_void, batch: &mut crate::storage::batch::Batch, need: usize) {
    unsafe {
        let f = &*(ctx as *const IndexFetch);
        let td = (*f.base.rel).rd_att;
        match storage::lock(f.t, batch.lb, false) {
            Some(l) => batch.fill(l.blk, td, need),
            None => error!(
                "scoot: block {} of a row fetched through an index disappeared",
                batch.lb
            ),
        }
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn index_fetch_begin(
    rel: pg_sys::Relation,
) -> *mut pg_sys::IndexFetchTableData {
    boundary(|| unsafe {
        let t = tabledir::resolve(rel);
        report_background_pruning(rel, t);
        let f = pg_sys::palloc0(std::mem::size_of::<IndexFetch>()) as *mut IndexFetch;
        (*f).base.rel = rel;
        (*f).t = t;
        (*f).last = None;
        (*f).vistest = std::ptr::null_mut();
        (*f).img = super::scan::new_holder(None);
        (*f).img_snap = std::ptr::null_mut();
        let mut b = crate::storage::batch::Batch::take();
        b.extend = Some(extend_fetched);
        b.ctx = f as *mut c_void;
        (*f).batch = super::scan::new_holder_boxed(b);
        (*f).masked = false;
        (*f).index_only = false;
        (*f).skipped = 0;
        // an index scan node names its columns as it begins its scan (pending, src/exec); any
        // other fetch copies every column under the chain walk's lock: copying them later would
        // lock the block again
        (*f).eager = (*(*rel).rd_att).natts.max(0) as usize;
        let pending = PENDING_COLUMNS.with(|c| {
            let mut c = c.borrow_mut();
            match c.as_ref() {
                Some((relid, _, _)) if *relid == (*rel).rd_id => c.take().map(|p| (p.1, p.2)),
                _ => None,
            }
        });
        if let Some((mask, index_only)) = pending {
            set_fetch_columns(f as *mut pg_sys::IndexFetchTableData, &mask);
            (*f).index_only = index_only;
        }
        f as *mut pg_sys::IndexFetchTableData
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn index_fetch_reset(data: *mut pg_sys::IndexFetchTableData) {
    boundary(|| unsafe { (*(data as *mut IndexFetch)).last = None })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn index_fetch_end(data: *mut pg_sys::IndexFetchTableData) {
    boundary(|| unsafe {
        let f = data as *mut IndexFetch;
        super::scan::drop_holder((*f).img);
        if let Some(b) = super::scan::take_holder((*f).batch) {
            // slots still showing the last row take their values now
            crate::storage::batch::Batch::recycle(b);
        }
        super::scan::drop_holder((*f).batch);
        pg_sys::pfree(data as *mut c_void)
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn index_fetch_tuple(
    scan: *mut pg_sys::IndexFetchTableData,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
    call_again: *mut bool,
    all_dead: *mut bool,
) -> bool {
    boundary(|| unsafe {
        let f = &mut *(scan as *mut IndexFetch);
        let rel = f.base.rel;
        if !f.t.is_current() {
            f.t = tabledir::resolve(rel);
        }
        let t = f.t;
        let continuing = *call_again;
        if !continuing {
            f.last = None;
        }
        if !all_dead.is_null() {
            *all_dead = false;
        }
        if !snapshot.is_null() && snapshot == f.img_snap && (*(*f.img).st).is_some() {
            return fetch_image_ready(f, rel, tid, slot, call_again);
        }
        if let Some(img) = crate::snapshot::session::image_for(snapshot) {
            let r = fetch_image(f, rel, t, img, tid, slot, call_again);
            f.img_snap = snapshot;
            return r;
        }
        f.img_snap = std::ptr::null_mut();
        super::snapread::live_read(snapshot);
        // an index-only scan's entry whose row is visible to all: no fetch (the visibility map's
        // role; serializable transactions fetch, for their predicate locks)
        if f.index_only
            && !continuing
            && ffi::is_mvcc_snapshot(snapshot)
            && !ffi::isolation_is_serializable()
        {
            if let Some((rb, rs)) = super::decode_tid(tid) {
                if root_all_visible(t, rb, rs, (*snapshot).xmin.into_inner()) {
                    // the node clears the slot itself (it holds no row now: cleared after the
                    // previous fetch)
                    f.skipped += 1;
                    f.last = None;
                    *call_again = false;
                    return true;
                }
            }
        }
        let (rb, rs) = if continuing && f.last.is_some() {
            f.root
        } else {
            let Some(r) = super::decode_tid(tid) else {
                *call_again = false;
                return false;
            };
            r
        };
        if f.vistest.is_null() {
            f.vistest = pg_sys::GlobalVisTestFor(rel);
        }
        let vistest = f.vistest;
        let mvcc_snap = ffi::is_mvcc_snapshot(snapshot);
        // lazily copied row (see `IndexFetch::batch`): MVCC snapshots into scoot slots
        let lazy = mvcc_snap && (*slot).tts_ops == crate::storage::slot::ops();
        let batch: *mut crate::storage::batch::Batch = (*f.batch).st;
        if lazy {
            // the slot lets go of the previous row without copying it (it is replaced)
            ffi::exec_clear_tuple(slot);
        }
        let relid = (*rel).rd_id;
        let (td, eager) = ((*rel).rd_att, f.eager);
        let mut skipping = f.last.is_some();
        let last = f.last;
        let mut dead_prefix = 0u32;
        let mut seen_live = false;
        let mut members = 0u32;
        let mut more = false;
        ffi::pgstat_count_pages_hit(rel, 1);
        let found = walk_chain(t, rb, rs, |l, s, h| {
            members += 1;
            if skipping {
                if Some((l.lb, s)) == last {
                    skipping = false;
                }
                return false;
            }
            let vis = mvcc::visible(h, snapshot);
            check_conflict_out(rel, h, vis, snapshot);
            if vis {
                predicate_lock_row(rel, l.lb, s, h, snapshot);
                if lazy {
                    crate::storage::slot::store_one_row(
                        slot, batch, l.blk, l.lb, s, h, td, eager, relid,
                    );
                } else {
                    super::store_row(rel, l.blk, l.lb, s, slot);
                }
                more = hot_next(h).is_some();
                return true;
            }
            if !seen_live && horizon::dead_for_index(h, vistest) {
                dead_prefix += 1;
            } else {
                seen_live = true;
            }
            false
        });
        match found {
            Some(pos) => {
                f.last = Some(pos);
                f.root = (rb, rs);
                *call_again = !mvcc_snap && more;
                // like heap_hot_search_buffer: the TID of the version found
                *tid = tid_of(pos.0, pos.1);
            }
            None => {
                f.last = None;
                *call_again = false;
                if !all_dead.is_null() && !continuing {
                    // every member dead to everyone (or the root is already dead): the index
                    // entry can be killed
                    let root_dead = storage::lock(t, rb, false)
                        .map(|l| storage::slot_in_range(&l, rs) && l.row(rs).state() == ST_DEAD)
                        .unwrap_or(false);
                    *all_dead = root_dead || (members > 0 && !seen_live && dead_prefix == members);
                }
            }
        }
        // opportunistic pruning keeps hot chains short (heap_page_prune_opt's job)
        let prune = members >= 8
            || ((members >= 3 || (found.is_none() && dead_prefix >= 1))
                && tabledir::arena_block(t, rb)
                    .is_some_and(|ab| storage::nearly_full(crate::storage::arena::block_desc(ab))));
        if may_prune() && mvcc_snap && prune {
            pruning_reported(rel, || {
                prune_root(t, rb, rs, &|h| classify_globalvis(h, vistest))
            });
        }
        if found.is_none() {
            ffi::exec_clear_tuple(slot);
        }
        found.is_some()
    })
}

/// `index_fetch_tuple` on an OLAP snapshot image: the chain as the image has it, the member
/// its MVCC snapshot sees. No pruning, and index entries are never reported dead.
unsafe fn fetch_image(
    f: &mut IndexFetch,
    rel: pg_sys::Relation,
    t: TableRef,
    img: std::rc::Rc<crate::snapshot::image::Image>,
    tid: pg_sys::ItemPointer,
    slot: *mut pg_sys::TupleTableSlot,
    call_again: *mut bool,
) -> bool {
    unsafe {
        *call_again = false;
        let h = &mut *f.img;
        let st = &mut *h.st;
        if st.as_ref().is_none_or(|s| s.image.id != img.id) {
            *st = super::snapread::image_scan(rel, t, img.snap);
            if st.is_none() {
                // the image maps from the statement snapshot; fall back to this image
                if !img.has_table(t) {
                    super::snapread::image_scan(rel, t, std::ptr::null_mut());
                }
                let ti = img.table(t);
                *st = Some(super::snapread::ImgScan::new(img.clone(), ti));
            }
        }
        fetch_image_ready(f, rel, tid, slot, call_again)
    }
}

/// [`fetch_image`] once the fetch's image scan is set up.
unsafe fn fetch_image_ready(
    f: &mut IndexFetch,
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    slot: *mut pg_sys::TupleTableSlot,
    call_again: *mut bool,
) -> bool {
    unsafe {
        *call_again = false;
        let s = (*(*f.img).st).as_mut().unwrap();
        let Some((rb, rs)) = super::decode_tid(tid) else {
            ffi::exec_clear_tuple(slot);
            return false;
        };
        // an index-only scan's entry whose chain starts in a block all visible to the image:
        // its first member is the version the image sees (visible, so not replaced by an update
        // the image sees), and the node wants nothing of it but that; the image does not change,
        // so this is [`root_all_visible`] without its races (redirects included)
        if f.index_only && s.table.block(rb).is_some_and(|b| b.all_visible) {
            let table = s.table.clone();
            let mut first_all_visible = false;
            super::snapread::walk_chain(s, rb, rs, false, |lb, _, _, _| {
                first_all_visible = table.block(lb).is_some_and(|b| b.all_visible);
                true
            });
            if first_all_visible {
                f.skipped += 1;
                return true;
            }
        }
        ffi::pgstat_count_pages_hit(rel, 1);
        let xids = mvcc::ImageXids::new(s.image.snap);
        // the columns the plan reads are known: a one-row batch with just those (the others
        // NULL), filled now from the image's block, never extended later
        let batch: *mut crate::storage::batch::Batch = (*f.batch).st;
        let lazy = f.masked && (*slot).tts_ops == crate::storage::slot::ops();
        if lazy {
            ffi::exec_clear_tuple(slot);
        }
        // the columns the chain walk makes readable in a sparse block copy: those the batch reads
        let mask: &[bool] = if lazy { &(*batch).mask } else { &[] };
        if s.cell_mask.as_slice() != mask {
            s.cell_mask = mask.to_vec();
        }
        let (td, relid) = ((*rel).rd_att, (*rel).rd_id);
        let natts = (*td).natts as usize;
        let found = super::snapread::walk_chain(s, rb, rs, true, |lb, blk, sl, h| {
            if xids.visible(h) {
                if lazy {
                    crate::storage::slot::store_one_row(
                        slot, batch, blk, lb, sl, h, td, natts, relid,
                    );
                } else {
                    super::store_row(rel, blk, lb, sl, slot);
                }
                true
            } else {
                false
            }
        });
        match found {
            Some(pos) => {
                *tid = tid_of(pos.0, pos.1);
                true
            }
            None => {
                ffi::exec_clear_tuple(slot);
                false
            }
        }
    }
}

// ---------------------------------------------------------------- index_delete_tuples

#[pg_guard]
pub unsafe extern "C-unwind" fn index_delete_tuples(
    rel: pg_sys::Relation,
    delstate: *mut pg_sys::TM_IndexDeleteOp,
) -> pg_sys::TransactionId {
    boundary(|| unsafe {
        let t = tabledir::resolve(rel);
        let vistest = pg_sys::GlobalVisTestFor(rel);
        let d = &mut *delstate;
        let mut latest: u32 = 0;
        for i in 0..d.ndeltids as usize {
            let del = &*d.deltids.add(i);
            let Some((rb, rs)) = super::decode_tid(&del.tid) else {
                continue;
            };
            let mut all_dead = true;
            let mut members = 0;
            let root_dead = storage::lock(t, rb, false)
                .map(|l| storage::slot_in_range(&l, rs) && l.row(rs).state() == ST_DEAD)
                .unwrap_or(false);
            if !root_dead {
                walk_chain(t, rb, rs, |_l, _s, h| {
                    members += 1;
                    if horizon::dead_for_index(h, vistest) {
                        let x = mvcc::update_xid(h);
                        if ffi::xid_valid(x) && (latest == 0 || mvcc::precedes(latest, x)) {
                            latest = x;
                        }
                        false
                    } else {
                        all_dead = false;
                        true
                    }
                });
            }
            if root_dead || (members > 0 && all_dead) {
                (*d.status.add(del.id as usize)).knowndeletable = true;
            }
        }
        ffi::xid(latest)
    })
}

// ---------------------------------------------------------------- index build

/// Evaluates an index predicate (ExecQual, inline in C).
unsafe fn exec_qual(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> bool {
    unsafe {
        if state.is_null() {
            return true;
        }
        let old = pg_sys::MemoryContextSwitchTo((*econtext).ecxt_per_tuple_memory);
        let mut isnull = false;
        let isnullp: *mut bool = &mut isnull;
        // user code: errors keep their CONTEXT (see ffi::guard)
        let d = guard::catch(|| ((*state).evalfunc.unwrap())(state, econtext, isnullp));
        pg_sys::MemoryContextSwitchTo(old);
        !isnull && d.value() != 0
    }
}

/// Iterates the chain roots of the table (optionally only the arena blocks a parallel scan hands
/// this worker), in TID order.
unsafe fn for_each_block(
    rel: pg_sys::Relation,
    t: TableRef,
    scan: pg_sys::TableScanDesc,
    mut f: impl FnMut(u32),
) {
    unsafe {
        if !scan.is_null() && !(*scan).rs_parallel.is_null() {
            let st = super::scan::state(scan);
            let pb = (*scan).rs_parallel as pg_sys::ParallelBlockTableScanDesc;
            pg_sys::table_block_parallelscan_startblock_init(rel, &mut st.pworker, pb);
            loop {
                let b = pg_sys::table_block_parallelscan_nextpage(rel, &mut st.pworker, pb);
                if b == pg_sys::InvalidBlockNumber || b >= tabledir::nlocal(t) {
                    break;
                }
                f(b);
            }
        } else {
            for (lb, _) in tabledir::blocks_of(t) {
                f(lb);
            }
        }
    }
}

/// Is opportunistic pruning allowed here? Never on a hot standby: its arena changes only by
/// replaying the primary's WAL (heap_page_prune_opt does not prune in recovery either).
fn may_prune() -> bool {
    crate::guc::OPPORTUNISTIC_PRUNE.get() && !unsafe { pg_sys::RecoveryInProgress() }
}

/// Opportunistic pruning of a block's chains when enough of its versions were superseded
/// (heap prunes a page whenever it reads it and sees garbage; this is the scoot equivalent).
pub fn maybe_prune_block(rel: pg_sys::Relation, t: TableRef, b: u32) {
    if !may_prune() {
        return;
    }
    let Some(ab) = tabledir::arena_block(t, b) else {
        return;
    };
    let d = crate::storage::arena::block_desc(ab);
    let obsolete = d.obsolete.load(std::sync::atomic::Ordering::Relaxed);
    let hwm = d.hwm.load(std::sync::atomic::Ordering::Relaxed);
    // like heap_page_prune_opt: prune a block that is running out of room; otherwise only
    // when a good part of it is superseded versions
    if obsolete == 0 || (!storage::nearly_full(d) && obsolete < 64.max(hwm / 4)) {
        return;
    }
    d.obsolete.store(0, std::sync::atomic::Ordering::Relaxed);
    let vistest = unsafe { pg_sys::GlobalVisTestFor(rel) };
    pruning_reported(rel, || {
        prune_block(t, b, &|h| classify_globalvis(h, vistest))
    });
}

/// Prunes the version chains rooted in block `b` of `t` with a fixed horizon (`oldest_xmin`:
/// versions deleted by transactions before it are dead to everyone), as VACUUM's first pass
/// does: the freezer's step before it freezes a block that still holds dead versions.
/// Returns the number of row versions reclaimed, as opportunistic pruning counts them for the
/// statistics (`count_removed`).
pub fn prune_block_horizon(t: TableRef, b: u32, oldest_xmin: u32) -> u32 {
    let classify = |h: &RowHdr| match mvcc::htsv(h, oldest_xmin) {
        Htsv::Dead => Prune::Dead,
        Htsv::RecentlyDead => Prune::Recent,
        _ => Prune::Keep,
    };
    removed_by(|| prune_block(t, b, &classify))
}

/// Roots (slots that start a chain) of block `b`.
pub fn roots_of(t: TableRef, b: u32) -> Vec<u32> {
    let mut v = Vec::new();
    if let Some(l) = storage::lock(t, b, false) {
        for s in 0..l.hwm() {
            let h = l.row(s);
            if (h.state() == ST_NORMAL && !h.has_flag(F_HEAP_ONLY)) || h.state() == ST_REDIRECT {
                v.push(s);
            }
        }
    }
    v
}

/// Executor state for computing index entries from scoot rows (index expressions and the
/// partial-index predicate), shared by index builds and CREATE INDEX CONCURRENTLY's validation.
struct IndexEval {
    estate: *mut pg_sys::EState,
    econtext: *mut pg_sys::ExprContext,
    slot: *mut pg_sys::TupleTableSlot,
    predicate: *mut pg_sys::ExprState,
    index_info: *mut pg_sys::IndexInfo,
    values: [pg_sys::Datum; pg_sys::INDEX_MAX_KEYS as usize],
    isnull: [bool; pg_sys::INDEX_MAX_KEYS as usize],
}

impl IndexEval {
    unsafe fn new(table_rel: pg_sys::Relation, index_info: *mut pg_sys::IndexInfo) -> IndexEval {
        unsafe {
            let estate = pg_sys::CreateExecutorState();
            let econtext = pg_sys::MakePerTupleExprContext(estate);
            let slot = pg_sys::table_slot_create(table_rel, std::ptr::null_mut());
            (*econtext).ecxt_scantuple = slot;
            let predicate = pg_sys::ExecPrepareQual((*index_info).ii_Predicate, estate);
            IndexEval {
                estate,
                econtext,
                slot,
                predicate,
                index_info,
                values: [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize],
                isnull: [false; pg_sys::INDEX_MAX_KEYS as usize],
            }
        }
    }

    /// Reads row version (b, s) and forms its index datums. None if the version is gone,
    /// Some(false) if it fails the partial-index predicate.
    unsafe fn form(&mut self, t: TableRef, b: u32, s: u32) -> Option<bool> {
        unsafe {
            let l = storage::lock(t, b, false)?;
            if !storage::slot_in_range(&l, s) || l.row(s).state() != ST_NORMAL {
                return None;
            }
            pg_sys::MemoryContextReset((*self.econtext).ecxt_per_tuple_memory);
            let old = pg_sys::MemoryContextSwitchTo((*self.econtext).ecxt_per_tuple_memory);
            row::read_row(l.blk, s, self.slot);
            drop(l);
            pg_sys::MemoryContextSwitchTo(old);
            (*self.slot).tts_tid = tid_of(b, s);
            if !exec_qual(self.predicate, self.econtext) {
                return Some(false);
            }
            let (ii, sl, es) = (self.index_info, self.slot, self.estate);
            let (vals, nulls) = (self.values.as_mut_ptr(), self.isnull.as_mut_ptr());
            guard::catch(|| raw::FormIndexDatum(ii, sl, es, vals, nulls));
            Some(true)
        }
    }

    unsafe fn finish(self) {
        unsafe {
            pg_sys::ExecDropSingleTupleTableSlot(self.slot);
            pg_sys::FreeExecutorState(self.estate);
            (*self.index_info).ii_ExpressionsState = std::ptr::null_mut();
            (*self.index_info).ii_PredicateState = std::ptr::null_mut();
        }
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn index_build_range_scan(
    table_rel: pg_sys::Relation,
    index_rel: pg_sys::Relation,
    index_info: *mut pg_sys::IndexInfo,
    _allow_sync: bool,
    anyvisible: bool,
    _progress: bool,
    start_blockno: pg_sys::BlockNumber,
    numblocks: pg_sys::BlockNumber,
    callback: pg_sys::IndexBuildCallback,
    callback_state: *mut c_void,
    scan: pg_sys::TableScanDesc,
) -> f64 {
    boundary(|| unsafe {
        let t = tabledir::resolve(table_rel);
        let callback = callback.unwrap();
        let mut ev = IndexEval::new(table_rel, index_info);

        // which snapshot: a parallel scan's, a fresh MVCC one for concurrent builds, else all
        let mut registered: pg_sys::Snapshot = std::ptr::null_mut();
        let snapshot: pg_sys::Snapshot = if !scan.is_null()
            && (*(*scan).rs_snapshot).snapshot_type != pg_sys::SnapshotType::SNAPSHOT_ANY
        {
            // a parallel build's MVCC snapshot (SnapshotAny means: decide by the xmin horizon)
            (*scan).rs_snapshot
        } else if (*index_info).ii_Concurrent {
            registered = pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot());
            registered
        } else {
            std::ptr::null_mut()
        };
        let oldest_xmin = if snapshot.is_null() && !anyvisible {
            pg_sys::GetOldestNonRemovableTransactionId(table_rel).into_inner()
        } else {
            0
        };
        let page_ok = |b: u32, s: u32| -> bool {
            if numblocks == pg_sys::InvalidBlockNumber && start_blockno == 0 {
                return true;
            }
            let page = ffi::tid_page(&tid_of(b, s));
            page >= start_blockno
                && (numblocks == pg_sys::InvalidBlockNumber || page < start_blockno + numblocks)
        };
        let mut reltuples = 0f64;
        for_each_block(table_rel, t, scan, |b| {
            for rs in roots_of(t, b) {
                if !page_ok(b, rs) {
                    continue;
                }
                // decide which chain members get an index entry (all under the root tid)
                let mut to_index: Vec<(u32, u32, bool)> = Vec::new();
                walk_chain(t, b, rs, |l, s, h| {
                    if !snapshot.is_null() {
                        if mvcc::visible(h, snapshot) {
                            to_index.push((l.lb, s, true));
                            return true;
                        }
                        return false;
                    }
                    let state = if anyvisible {
                        match mvcc::htsv_horizon(h).0 {
                            Htsv::Dead => Htsv::Dead,
                            _ => Htsv::Live,
                        }
                    } else {
                        mvcc::htsv(h, oldest_xmin)
                    };
                    match state {
                        Htsv::Dead => {}
                        Htsv::Live | Htsv::InsertInProgress => to_index.push((l.lb, s, true)),
                        Htsv::RecentlyDead | Htsv::DeleteInProgress => {
                            if hot_next(h).is_some() {
                                (*index_info).ii_BrokenHotChain = true;
                            } else {
                                to_index.push((l.lb, s, false));
                            }
                        }
                    }
                    false
                });
                for (mb, ms, alive) in to_index {
                    let Some(passes) = ev.form(t, mb, ms) else {
                        continue;
                    };
                    if alive {
                        reltuples += 1.0;
                    }
                    if !passes {
                        continue;
                    }
                    let mut root_tid = tid_of(b, rs);
                    let tidp: *mut pg_sys::ItemPointerData = &mut root_tid;
                    let (vals, nulls) = (ev.values.as_mut_ptr(), ev.isnull.as_mut_ptr());
                    // the index AM (unique checks, expression errors) with its full error
                    guard::catch(|| callback(index_rel, tidp, vals, nulls, alive, callback_state));
                }
            }
        });
        ev.finish();
        if !registered.is_null() {
            pg_sys::UnregisterSnapshot(registered);
        }
        reltuples
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn index_validate_scan(
    table_rel: pg_sys::Relation,
    index_rel: pg_sys::Relation,
    index_info: *mut pg_sys::IndexInfo,
    snapshot: pg_sys::Snapshot,
    state: *mut pg_sys::ValidateIndexState,
) {
    boundary(|| unsafe {
        let t = tabledir::resolve(table_rel);
        // TIDs already in the index (sorted)
        let mut in_index: Vec<u64> = Vec::new();
        loop {
            let mut d = pg_sys::Datum::from(0usize);
            let mut isnull = false;
            if !pg_sys::tuplesort_getdatum(
                (*state).tuplesort,
                true,
                &mut d,
                &mut isnull,
                std::ptr::null_mut(),
            ) {
                break;
            }
            let mut tid = pg_sys::ItemPointerData::default();
            pg_sys::itemptr_decode(&mut tid, d.value() as i64);
            if let Some((b, s)) = super::decode_tid(&tid) {
                in_index.push(((b as u64) << 32) | s as u64);
            }
            (*state).itups += 1.0;
        }
        in_index.sort_unstable();
        let mut ev = IndexEval::new(table_rel, index_info);
        let unique = if (*index_info).ii_Unique {
            pg_sys::IndexUniqueCheck::UNIQUE_CHECK_YES
        } else {
            pg_sys::IndexUniqueCheck::UNIQUE_CHECK_NO
        };
        for (b, _) in tabledir::blocks_of(t) {
            for rs in roots_of(t, b) {
                let Some((mb, ms)) = walk_chain(t, b, rs, |_l, _s, h| mvcc::visible(h, snapshot))
                else {
                    continue;
                };
                (*state).htups += 1.0;
                if in_index
                    .binary_search(&(((b as u64) << 32) | rs as u64))
                    .is_ok()
                {
                    continue;
                }
                if ev.form(t, mb, ms) != Some(true) {
                    continue;
                }
                let mut root_tid = tid_of(b, rs);
                let tidp: *mut pg_sys::ItemPointerData = &mut root_tid;
                let (vals, nulls) = (ev.values.as_mut_ptr(), ev.isnull.as_mut_ptr());
                guard::catch(|| {
                    raw::index_insert(
                        index_rel, vals, nulls, tidp, table_rel, unique, false, index_info,
                    )
                });
                (*state).tups_inserted += 1.0;
            }
        }
        ev.finish();
    })
}
