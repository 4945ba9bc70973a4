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

/// MVCC snapshot visibility (HeapTupleSatisfiesMVCC).
pub fn satisfies_mvcc(h: &RowHdr, snap: pg_sys::Snapshot) -> bool {
    let m = h.infomask();
    let curcid = unsafe { (*snap).curcid };
    if !xmin_committed(m) {
        if xmin_invalid(m) {
            return false;
        }
        if is_current(h.xmin) {
            if cmin(h) >= curcid {
                return false;
            }
            if m & HEAP_XMAX_INVALID != 0 || xmax_is_locked_only(m) {
                return true;
            }
            if m & HEAP_XMAX_IS_MULTI != 0 {
                let x = update_xid(h);
                if !is_current(x) {
                    return true;
                }
                return cmax(h) >= curcid;
            }
            if !is_current(h.xmax) {
                h.set_hint(HEAP_XMAX_INVALID);
                return true;
            }
            return cmax(h) >= curcid;
        } else if in_snapshot(h.xmin, snap) {
            return false;
        } else if did_commit(h.xmin) {
            h.set_hint(HEAP_XMIN_COMMITTED);
        } else {
            h.set_hint(HEAP_XMIN_INVALID);
            return false;
        }
    } else if !xmin_frozen(m) && in_snapshot(h.xmin, snap) {
        return false;
    }
    let m = h.infomask();
    if m & HEAP_XMAX_INVALID != 0 || xmax_is_locked_only(m) {
        return true;
    }
    if m & HEAP_XMAX_IS_MULTI != 0 {
        let x = update_xid(h);
        if is_current(x) {
            return cmax(h) >= curcid;
        }
        if in_snapshot(x, snap) {
            return true;
        }
        return !did_commit(x);
    }
    if m & HEAP_XMAX_COMMITTED == 0 {
        if is_current(h.xmax) {
            return cmax(h) >= curcid;
        }
        if in_snapshot(h.xmax, snap) {
            return true;
        }
        if !did_commit(h.xmax) {
            h.set_hint(HEAP_XMAX_INVALID);
            return true;
        }
        h.set_hint(HEAP_XMAX_COMMITTED);
    } else if in_snapshot(h.xmax, snap) {
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

/// [`visible`] without setting hint bits (OLAP image reads of live blocks, see
/// `block::NO_HINTS`).
pub fn visible_no_hints(h: &RowHdr, snap: pg_sys::Snapshot) -> bool {
    use std::sync::atomic::Ordering;
    let was = crate::storage::block::NO_HINTS.swap(true, Ordering::Relaxed);
    let v = visible(h, snap);
    crate::storage::block::NO_HINTS.store(was, Ordering::Relaxed);
    v
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
