//! Row-version visibility: PostgreSQL's heap rules (heapam_visibility.c) applied to scoot's
//! per-row version headers. `infomask` carries heap's bit values, so combo command ids and
//! multixact update xids are resolved with PostgreSQL's own functions on a stack copy of the
//! header. Hint bits are set with an atomic OR (callers hold the block lock, shared or exclusive).
use crate::ffi::xid;
pub use crate::storage::block::infomask::*;
use crate::storage::block::{RowHdr, F_KEYS_UPDATED};
use pgrx::pg_sys;
use pgrx::prelude::*;

const HEAP_KEYS_UPDATED_2: u16 = 0x2000;

#[inline]
pub fn xmax_is_locked_only(infomask: u16) -> bool {
    (infomask & HEAP_XMAX_LOCK_ONLY) != 0
        || (infomask & (HEAP_XMAX_IS_MULTI | HEAP_LOCK_MASK)) == HEAP_XMAX_EXCL_LOCK
}

#[inline]
fn xmin_committed(m: u16) -> bool {
    m & HEAP_XMIN_COMMITTED != 0
}
#[inline]
fn xmin_invalid(m: u16) -> bool {
    m & HEAP_XMIN_FROZEN == HEAP_XMIN_INVALID
}
#[inline]
fn xmin_frozen(m: u16) -> bool {
    m & HEAP_XMIN_FROZEN == HEAP_XMIN_FROZEN
}

#[inline]
pub fn is_current(x: u32) -> bool {
    unsafe { pg_sys::TransactionIdIsCurrentTransactionId(xid(x)) }
}
#[inline]
pub fn in_progress(x: u32) -> bool {
    unsafe { pg_sys::TransactionIdIsInProgress(xid(x)) }
}
#[inline]
pub fn did_commit(x: u32) -> bool {
    unsafe { pg_sys::TransactionIdDidCommit(xid(x)) }
}
#[inline]
pub fn did_abort(x: u32) -> bool {
    unsafe { pg_sys::TransactionIdDidAbort(xid(x)) }
}
#[inline]
fn in_snapshot(x: u32, snap: pg_sys::Snapshot) -> bool {
    unsafe { pg_sys::XidInMVCCSnapshot(xid(x), snap) }
}
#[inline]
pub fn multi_running(m: u32, lock_only: bool) -> bool {
    unsafe { pg_sys::MultiXactIdIsRunning(xid(m), lock_only) }
}
#[inline]
pub fn precedes(a: u32, b: u32) -> bool {
    unsafe { pg_sys::TransactionIdPrecedes(xid(a), xid(b)) }
}

/// A stack copy of the header in heap's layout, for PostgreSQL's helper functions.
fn fake(h: &RowHdr) -> pg_sys::HeapTupleHeaderData {
    let mut t: pg_sys::HeapTupleHeaderData = unsafe { std::mem::zeroed() };
    t.t_choice.t_heap.t_xmin = xid(h.xmin);
    t.t_choice.t_heap.t_xmax = xid(h.xmax);
    t.t_choice.t_heap.t_field3.t_cid = h.cid;
    t.t_infomask = h.infomask() & HEAP_VISIBILITY_BITS;
    t.t_infomask2 = if h.has_flag(F_KEYS_UPDATED) {
        HEAP_KEYS_UPDATED_2
    } else {
        0
    };
    t
}

/// A stack header with just an xmax and its bits (for PostgreSQL's multixact helpers).
fn fake_xmax(xmax: u32, infomask: u16, keys_updated: bool) -> pg_sys::HeapTupleHeaderData {
    let mut t: pg_sys::HeapTupleHeaderData = unsafe { std::mem::zeroed() };
    t.t_choice.t_heap.t_xmax = xid(xmax);
    t.t_infomask = infomask & HEAP_VISIBILITY_BITS;
    t.t_infomask2 = if keys_updated { HEAP_KEYS_UPDATED_2 } else { 0 };
    t
}

/// The updating xid of an xmax (resolving a multixact); 0 when it only locks.
pub fn update_xid_raw(xmax: u32, infomask: u16) -> u32 {
    if infomask & HEAP_XMAX_INVALID == 0
        && infomask & HEAP_XMAX_IS_MULTI != 0
        && !xmax_is_locked_only(infomask)
    {
        let mut t = fake_xmax(xmax, infomask, false);
        unsafe { pg_sys::HeapTupleGetUpdateXid(&mut t).into_inner() }
    } else {
        xmax
    }
}

/// HeapTupleHeaderIsOnlyLocked: the xmax does not (or no longer: its updater aborted) update.
pub fn is_only_locked(h: &RowHdr) -> bool {
    let mut t = fake(h);
    unsafe { pg_sys::HeapTupleHeaderIsOnlyLocked(&mut t) }
}

pub fn cmin(h: &RowHdr) -> u32 {
    let mut t = fake(h);
    unsafe { pg_sys::HeapTupleHeaderGetCmin(&mut t) }
}

pub fn cmax(h: &RowHdr) -> u32 {
    let mut t = fake(h);
    unsafe { pg_sys::HeapTupleHeaderGetCmax(&mut t) }
}

/// Returns (cid to store, is combo) for setting cmax on `h` to `cid` (HeapTupleHeaderAdjustCmax).
pub fn adjust_cmax(h: &RowHdr, cid: u32) -> (u32, bool) {
    let mut t = fake(h);
    let mut c = cid;
    let mut combo = false;
    unsafe { pg_sys::HeapTupleHeaderAdjustCmax(&mut t, &mut c, &mut combo) };
    (c, combo)
}

/// The xid that updated/deleted the row (resolving a multixact), or raw xmax.
pub fn update_xid(h: &RowHdr) -> u32 {
    let m = h.infomask();
    if m & HEAP_XMAX_INVALID == 0 && m & HEAP_XMAX_IS_MULTI != 0 && m & HEAP_XMAX_LOCK_ONLY == 0 {
        let mut t = fake(h);
        unsafe { pg_sys::HeapTupleGetUpdateXid(&mut t).into_inner() }
    } else {
        h.xmax
    }
}

/// The transaction-status questions heap's MVCC rules ask, answered for a live read
/// ([`LiveXids`]: PostgreSQL's functions, hint bits set) or for an OLAP image ([`ImageXids`]).
trait XidOracle {
    /// may the rules set hint bits on the row?
    const HINTS: bool;
    fn is_current(&self, x: u32) -> bool;
    fn in_snapshot(&self, x: u32) -> bool;
    fn did_commit(&self, x: u32) -> bool;
}

struct LiveXids(pg_sys::Snapshot);

impl XidOracle for LiveXids {
    const HINTS: bool = true;
    #[inline]
    fn is_current(&self, x: u32) -> bool {
        is_current(x)
    }
    #[inline]
    fn in_snapshot(&self, x: u32) -> bool {
        in_snapshot(x, self.0)
    }
    #[inline]
    fn did_commit(&self, x: u32) -> bool {
        did_commit(x)
    }
}

/// TransactionIdPrecedes in Rust (transam.c): plain comparison when either id is special,
/// modulo-2^32 otherwise.
#[inline]
pub fn precedes_raw(a: u32, b: u32) -> bool {
    const FIRST_NORMAL: u32 = 3; // FirstNormalTransactionId
    if a < FIRST_NORMAL || b < FIRST_NORMAL {
        return a < b;
    }
    (a.wrapping_sub(b) as i32) < 0
}

/// Transaction status as an OLAP image's MVCC snapshot sees it. Rows in an image were written
/// before its snapshot, so most of their xids precede the snapshot's xmin: such an xid is
/// neither running in the snapshot (XidInMVCCSnapshot's first test) nor one of the reading
/// transaction's own (a transaction's xids are assigned while it runs, so one that ran before
/// the image's snapshot was taken is at or above its xmin). Those two questions are then
/// answered here without a call into PostgreSQL; the rest (and every commit-status lookup) go
/// to PostgreSQL's functions. No hint bits are set: an image may be read from a *live* block
/// that no writer changed since the snapshot, and a hint is a write that saves the page's
/// pre-image for the live snapshots (an image reader filling the pre-image pool with its own
/// hint writes would get its snapshot abandoned).
pub struct ImageXids {
    snap: pg_sys::Snapshot,
    xmin: u32,
    xmax: u32,
}

impl ImageXids {
    pub fn new(snap: pg_sys::Snapshot) -> ImageXids {
        unsafe {
            ImageXids {
                snap,
                xmin: (*snap).xmin.into_inner(),
                xmax: (*snap).xmax.into_inner(),
            }
        }
    }

    /// Is row `h` visible to the image's snapshot? (Callers skip this for all-visible blocks.)
    #[inline]
    pub fn visible(&self, h: &RowHdr) -> bool {
        mvcc_rules(h, self, unsafe { (*self.snap).curcid })
    }
}

impl XidOracle for ImageXids {
    const HINTS: bool = false;
    #[inline]
    fn is_current(&self, x: u32) -> bool {
        !precedes_raw(x, self.xmin) && is_current(x)
    }
    #[inline]
    fn in_snapshot(&self, x: u32) -> bool {
        if precedes_raw(x, self.xmin) {
            return false;
        }
        if !precedes_raw(x, self.xmax) {
            return true;
        }
        in_snapshot(x, self.snap)
    }
    #[inline]
    fn did_commit(&self, x: u32) -> bool {
        did_commit(x)
    }
}

#[inline]
fn hint<X: XidOracle>(h: &RowHdr, bits: u16) {
    if X::HINTS {
        h.set_hint(bits);
    }
}

/// MVCC snapshot visibility (HeapTupleSatisfiesMVCC).
pub fn satisfies_mvcc(h: &RowHdr, snap: pg_sys::Snapshot) -> bool {
    mvcc_rules(h, &LiveXids(snap), unsafe { (*snap).curcid })
}

/// HeapTupleSatisfiesMVCC's rules, the status questions asked through `o`.
#[inline]
fn mvcc_rules<X: XidOracle>(h: &RowHdr, o: &X, curcid: u32) -> bool {
    let m = h.infomask();
    if !xmin_committed(m) {
        if xmin_invalid(m) {
            return false;
        }
        if o.is_current(h.xmin) {
            if cmin(h) >= curcid {
                return false;
            }
            if m & HEAP_XMAX_INVALID != 0 || xmax_is_locked_only(m) {
                return true;
            }
            if m & HEAP_XMAX_IS_MULTI != 0 {
                let x = update_xid(h);
                if !o.is_current(x) {
                    return true;
                }
                return cmax(h) >= curcid;
            }
            if !o.is_current(h.xmax) {
                hint::<X>(h, HEAP_XMAX_INVALID);
                return true;
            }
            return cmax(h) >= curcid;
        } else if o.in_snapshot(h.xmin) {
            return false;
        } else if o.did_commit(h.xmin) {
            hint::<X>(h, HEAP_XMIN_COMMITTED);
        } else {
            hint::<X>(h, HEAP_XMIN_INVALID);
            return false;
        }
    } else if !xmin_frozen(m) && o.in_snapshot(h.xmin) {
        return false;
    }
    let m = h.infomask();
    if m & HEAP_XMAX_INVALID != 0 || xmax_is_locked_only(m) {
        return true;
    }
    if m & HEAP_XMAX_IS_MULTI != 0 {
        let x = update_xid(h);
        if o.is_current(x) {
            return cmax(h) >= curcid;
        }
        if o.in_snapshot(x) {
            return true;
        }
        return !o.did_commit(x);
    }
    if m & HEAP_XMAX_COMMITTED == 0 {
        if o.is_current(h.xmax) {
            return cmax(h) >= curcid;
        }
        if o.in_snapshot(h.xmax) {
            return true;
        }
        if !o.did_commit(h.xmax) {
            hint::<X>(h, HEAP_XMAX_INVALID);
            return true;
        }
        hint::<X>(h, HEAP_XMAX_COMMITTED);
    } else if o.in_snapshot(h.xmax) {
        return true;
    }
    false
}

/// SnapshotSelf / SnapshotDirty share this logic (HeapTupleSatisfiesSelf/Dirty). With `dirty`,
/// in-progress inserters/deleters are reported through the snapshot's xmin/xmax fields.
fn satisfies_self_dirty(h: &RowHdr, dirty: Option<pg_sys::Snapshot>) -> bool {
    unsafe {
        if let Some(s) = dirty {
            (*s).xmin = xid(0);
            (*s).xmax = xid(0);
            (*s).speculativeToken = 0;
        }
    }
    let m = h.infomask();
    if !xmin_committed(m) {
        if xmin_invalid(m) {
            return false;
        }
        if is_current(h.xmin) {
            if m & HEAP_XMAX_INVALID != 0 || xmax_is_locked_only(m) {
                return true;
            }
            if m & HEAP_XMAX_IS_MULTI != 0 {
                return !is_current(update_xid(h));
            }
            if !is_current(h.xmax) {
                h.set_hint(HEAP_XMAX_INVALID);
                return true;
            }
            return false;
        } else if in_progress(h.xmin) {
            if let Some(s) = dirty {
                // dirty: an in-progress insert is visible, the caller may wait for it
                if let Some(tok) = h.spec_token() {
                    unsafe { (*s).speculativeToken = tok };
                }
                unsafe { (*s).xmin = xid(h.xmin) };
                return true;
            }
            return false;
        } else if did_commit(h.xmin) {
            h.set_hint(HEAP_XMIN_COMMITTED);
        } else {
            h.set_hint(HEAP_XMIN_INVALID);
            return false;
        }
    }
    let m = h.infomask();
    if m & HEAP_XMAX_INVALID != 0 || xmax_is_locked_only(m) {
        return true;
    }
    if m & HEAP_XMAX_COMMITTED != 0 {
        return false;
    }
    if m & HEAP_XMAX_IS_MULTI != 0 {
        let x = update_xid(h);
        if is_current(x) {
            return false;
        }
        if in_progress(x) {
            if let Some(s) = dirty {
                unsafe { (*s).xmax = xid(x) };
            }
            return true;
        }
        return !did_commit(x);
    }
    if is_current(h.xmax) {
        return false;
    }
    if in_progress(h.xmax) {
        if let Some(s) = dirty {
            unsafe { (*s).xmax = xid(h.xmax) };
        }
        return true;
    }
    if !did_commit(h.xmax) {
        h.set_hint(HEAP_XMAX_INVALID);
        return true;
    }
    h.set_hint(HEAP_XMAX_COMMITTED);
    false
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Htsv {
    Dead,
    Live,
    RecentlyDead,
    InsertInProgress,
    DeleteInProgress,
}

/// HeapTupleSatisfiesVacuumHorizon: the row's state plus, for RecentlyDead, the xid after whose
/// end it becomes removable.
pub fn htsv_horizon(h: &RowHdr) -> (Htsv, u32) {
    let m = h.infomask();
    if !xmin_committed(m) {
        if xmin_invalid(m) {
            return (Htsv::Dead, 0);
        }
        if is_current(h.xmin) {
            if m & HEAP_XMAX_INVALID != 0 || xmax_is_locked_only(m) {
                return (Htsv::InsertInProgress, 0);
            }
            if is_current(update_xid(h)) {
                return (Htsv::DeleteInProgress, 0);
            }
            return (Htsv::InsertInProgress, 0);
        } else if in_progress(h.xmin) {
            return (Htsv::InsertInProgress, 0);
        } else if did_commit(h.xmin) {
            h.set_hint(HEAP_XMIN_COMMITTED);
        } else {
            h.set_hint(HEAP_XMIN_INVALID);
            return (Htsv::Dead, 0);
        }
    }
    let m = h.infomask();
    if m & HEAP_XMAX_INVALID != 0 {
        return (Htsv::Live, 0);
    }
    if xmax_is_locked_only(m) {
        if m & HEAP_XMAX_COMMITTED == 0 {
            if m & HEAP_XMAX_IS_MULTI != 0 {
                if multi_running(h.xmax, true) {
                    return (Htsv::Live, 0);
                }
            } else if in_progress(h.xmax) {
                return (Htsv::Live, 0);
            }
            h.set_hint(HEAP_XMAX_INVALID);
        }
        return (Htsv::Live, 0);
    }
    if m & HEAP_XMAX_IS_MULTI != 0 {
        let x = update_xid(h);
        if is_current(x) || in_progress(x) {
            return (Htsv::DeleteInProgress, 0);
        } else if did_commit(x) {
            return (Htsv::RecentlyDead, x);
        } else if !multi_running(h.xmax, false) {
            h.set_hint(HEAP_XMAX_INVALID);
        }
        return (Htsv::Live, 0);
    }
    if m & HEAP_XMAX_COMMITTED == 0 {
        if in_progress(h.xmax) {
            return (Htsv::DeleteInProgress, 0);
        } else if did_commit(h.xmax) {
            h.set_hint(HEAP_XMAX_COMMITTED);
        } else {
            h.set_hint(HEAP_XMAX_INVALID);
            return (Htsv::Live, 0);
        }
    }
    (Htsv::RecentlyDead, h.xmax)
}

/// HeapTupleSatisfiesVacuum with a fixed horizon.
pub fn htsv(h: &RowHdr, oldest_xmin: u32) -> Htsv {
    let (r, dead_after) = htsv_horizon(h);
    if r == Htsv::RecentlyDead && precedes(dead_after, oldest_xmin) {
        Htsv::Dead
    } else {
        r
    }
}

/// Dead to every snapshot that exists or can exist (GlobalVis test).
pub fn dead_to_all(h: &RowHdr, vistest: *mut pg_sys::GlobalVisState) -> bool {
    match htsv_horizon(h) {
        (Htsv::Dead, _) => true,
        (Htsv::RecentlyDead, x) => unsafe { pg_sys::GlobalVisTestIsRemovableXid(vistest, xid(x)) },
        _ => false,
    }
}

/// Visibility under any kind of snapshot (HeapTupleSatisfiesVisibility).
pub fn visible(h: &RowHdr, snap: pg_sys::Snapshot) -> bool {
    unsafe {
        match (*snap).snapshot_type {
            pg_sys::SnapshotType::SNAPSHOT_MVCC => satisfies_mvcc(h, snap),
            pg_sys::SnapshotType::SNAPSHOT_SELF => satisfies_self_dirty(h, None),
            pg_sys::SnapshotType::SNAPSHOT_ANY => true,
            pg_sys::SnapshotType::SNAPSHOT_TOAST => !xmin_invalid(h.infomask()),
            pg_sys::SnapshotType::SNAPSHOT_DIRTY => satisfies_self_dirty(h, Some(snap)),
            pg_sys::SnapshotType::SNAPSHOT_NON_VACUUMABLE => !dead_to_all(h, (*snap).vistest),
            _ => {
                ereport!(
                    PgLogLevel::ERROR,
                    PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                    "scoot tables do not support historic (logical decoding) snapshots"
                );
                false
            }
        }
    }
}

/// HeapTupleSatisfiesUpdate: can the row version be updated/deleted/locked by command `curcid`?
/// `has_next` distinguishes an update (newer version exists) from a delete.
pub fn satisfies_update(h: &RowHdr, curcid: u32) -> u32 {
    use pg_sys::TM_Result::*;
    let m = h.infomask();
    if !xmin_committed(m) {
        if xmin_invalid(m) {
            return TM_Invisible;
        }
        if is_current(h.xmin) {
            if cmin(h) >= curcid {
                return TM_Invisible;
            }
            if m & HEAP_XMAX_INVALID != 0 {
                return TM_Ok;
            }
            if xmax_is_locked_only(m) {
                if m & HEAP_XMAX_IS_MULTI != 0 {
                    return if multi_running(h.xmax, true) {
                        TM_BeingModified
                    } else {
                        TM_Ok
                    };
                }
                return if in_progress(h.xmax) {
                    TM_BeingModified
                } else {
                    TM_Ok
                };
            }
            if m & HEAP_XMAX_IS_MULTI != 0 {
                let x = update_xid(h);
                if !is_current(x) {
                    return if multi_running(h.xmax, false) {
                        TM_BeingModified
                    } else {
                        TM_Ok
                    };
                }
                return if cmax(h) >= curcid {
                    TM_SelfModified
                } else {
                    TM_Invisible
                };
            }
            if !is_current(h.xmax) {
                h.set_hint(HEAP_XMAX_INVALID);
                return TM_Ok;
            }
            return if cmax(h) >= curcid {
                TM_SelfModified
            } else {
                TM_Invisible
            };
        } else if in_progress(h.xmin) {
            return TM_Invisible;
        } else if did_commit(h.xmin) {
            h.set_hint(HEAP_XMIN_COMMITTED);
        } else {
            h.set_hint(HEAP_XMIN_INVALID);
            return TM_Invisible;
        }
    }
    let m = h.infomask();
    // heap: t_ctid != t_self means updated (a row moved to another partition counts as updated)
    let updated_or_deleted = || {
        if h.has_next() || h.is_moved() {
            TM_Updated
        } else {
            TM_Deleted
        }
    };
    if m & HEAP_XMAX_INVALID != 0 {
        return TM_Ok;
    }
    if m & HEAP_XMAX_COMMITTED != 0 {
        if xmax_is_locked_only(m) {
            return TM_Ok;
        }
        return updated_or_deleted();
    }
    if m & HEAP_XMAX_IS_MULTI != 0 {
        if xmax_is_locked_only(m) {
            if multi_running(h.xmax, true) {
                return TM_BeingModified;
            }
            h.set_hint(HEAP_XMAX_INVALID);
            return TM_Ok;
        }
        let x = update_xid(h);
        if !crate::ffi::xid_valid(x) {
            if multi_running(h.xmax, false) {
                return TM_BeingModified;
            }
        }
        if is_current(x) {
            return if cmax(h) >= curcid {
                TM_SelfModified
            } else {
                TM_Invisible
            };
        }
        if multi_running(h.xmax, false) {
            return TM_BeingModified;
        }
        if did_commit(x) {
            return updated_or_deleted();
        }
        if !multi_running(h.xmax, false) {
            h.set_hint(HEAP_XMAX_INVALID);
            return TM_Ok;
        }
        return TM_BeingModified;
    }
    if is_current(h.xmax) {
        if xmax_is_locked_only(m) {
            return TM_BeingModified;
        }
        return if cmax(h) >= curcid {
            TM_SelfModified
        } else {
            TM_Invisible
        };
    }
    if in_progress(h.xmax) {
        return TM_BeingModified;
    }
    if !did_commit(h.xmax) {
        h.set_hint(HEAP_XMAX_INVALID);
        return TM_Ok;
    }
    if xmax_is_locked_only(m) {
        h.set_hint(HEAP_XMAX_INVALID);
        return TM_Ok;
    }
    h.set_hint(HEAP_XMAX_COMMITTED);
    updated_or_deleted()
}

#[cfg(test)]
mod tests {
    use super::precedes_raw;

    /// transam.c's TransactionIdPrecedes: special ids (< 3) compare as plain numbers, normal
    /// ids modulo 2^32 (each precedes the 2^31 - 1 ids after it).
    #[test]
    fn precedes_like_transam() {
        assert!(precedes_raw(3, 4) && !precedes_raw(4, 3) && !precedes_raw(5, 5));
        assert!(precedes_raw(0, 1) && precedes_raw(2, 3) && !precedes_raw(3, 2));
        assert!(precedes_raw(2, u32::MAX) && !precedes_raw(u32::MAX, 2));
        // across the wraparound: 4294967295 precedes 3; 3 precedes 2^31 + 2 (2^31 - 1 ids on),
        // but 2^31 + 4 precedes 3 (2^31 - 1 ids on through the wraparound)
        assert!(precedes_raw(u32::MAX, 3) && !precedes_raw(3, u32::MAX));
        assert!(precedes_raw(3, (1 << 31) + 2) && !precedes_raw((1 << 31) + 2, 3));
        assert!(!precedes_raw(3, (1 << 31) + 4) && precedes_raw((1 << 31) + 4, 3));
    }
}
