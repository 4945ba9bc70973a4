//! scoot's pruning horizon: which deleted row versions no snapshot can see any more.
//!
//! PostgreSQL's horizon (`GlobalVisTestFor`, `GetOldestNonRemovableTransactionId`) counts every
//! backend's xmin. A backend that reads scoot tables only from OLAP snapshots (see `snapshot/`)
//! never reads the live arena with its own MVCC snapshot: the frozen image keeps what it needs.
//! Its xmin (and the OLAP worker's, which only protects the images' TOAST values in heap tables)
//! must not hold back the pruning of the live arena, or a long analytic query would bloat the
//! OLTP tables exactly as on heap. `removable` therefore also accepts a version dead before
//! [`live_horizon`], computed like `ComputeXidHorizons` over the processes that are not exempt.
//!
//! Removals that take index entries away (a chain root turning DEAD, killed index items,
//! VACUUM's index cleanup) must in addition respect the oldest live snapshot image, whose index
//! scans still use the live indexes: callers combine this with `image_horizon`.
use crate::storage::cow;
use crate::txn::mvcc::precedes;
use pgrx::pg_sys;
use std::cell::Cell;

const FIRST_NORMAL_XID: u32 = 3;

unsafe fn proc_array_lock() -> *mut pg_sys::LWLock {
    // ProcArrayLock is `&MainLWLockArray[4].lock` (lwlocknames.txt)
    unsafe { &mut (*pg_sys::MainLWLockArray.add(4)).lock }
}

fn older(a: u32, b: u32) -> u32 {
    if a < FIRST_NORMAL_XID && a != 2 {
        return b;
    }
    if b < FIRST_NORMAL_XID && b != 2 {
        return a;
    }
    if precedes(a, b) {
        a
    } else {
        b
    }
}

/// The oldest xid whose deletions may still matter to a process that reads the live arena
/// (`None` when PostgreSQL's own horizon must be used: recovery, vacuum_defer_cleanup_age).
pub fn compute_live_horizon() -> Option<u32> {
    unsafe {
        if pg_sys::RecoveryInProgress() || pg_sys::vacuum_defer_cleanup_age > 0 {
            return None;
        }
        let lock = proc_array_lock();
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_SHARED);
        let latest = (*pg_sys::ShmemVariableCache).latestCompletedXid.value as u32;
        let mut h = latest.wrapping_add(1);
        if h < FIRST_NORMAL_XID {
            h = FIRST_NORMAL_XID;
        }
        let pg = &*pg_sys::ProcGlobal;
        for i in 0..pg.allProcCount as usize {
            let p = pg.allProcs.add(i);
            let xid = std::ptr::read_volatile(&(*p).xid).into_inner();
            let xmin = std::ptr::read_volatile(&(*p).xmin).into_inner();
            let m = older(xmin, xid);
            if m < FIRST_NORMAL_XID {
                continue;
            }
            let flags = std::ptr::read_volatile(&(*p).statusFlags) as u32;
            if flags & (pg_sys::PROC_IN_VACUUM | pg_sys::PROC_IN_LOGICAL_DECODING) != 0 {
                continue;
            }
            // a reader of snapshot images (or the OLAP worker) never reads the live arena;
            // its own transaction's xid (none: it is read-only) would still count
            if cow::horizon_exempt(i) && !(xid >= FIRST_NORMAL_XID) {
                continue;
            }
            h = older(h, m);
        }
        pg_sys::LWLockRelease(lock);
        let mut slot_xmin = pg_sys::TransactionId::INVALID;
        let mut slot_catalog = pg_sys::TransactionId::INVALID;
        pg_sys::ProcArrayGetReplicationSlotXmin(&mut slot_xmin, &mut slot_catalog);
        h = older(h, slot_xmin.into_inner());
        Some(h)
    }
}

thread_local! {
    /// (horizon, when computed): an older horizon is always safe, so it is reused briefly.
    static CACHED: Cell<(u32, i64)> = const { Cell::new((0, 0)) };
}

/// [`compute_live_horizon`], recomputed at most every 10 ms in this backend (0: unknown).
pub fn live_horizon() -> u32 {
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    let (h, at) = CACHED.with(|c| c.get());
    if h != 0 && now - at < 10_000 {
        return h;
    }
    let h = compute_live_horizon().unwrap_or(0);
    CACHED.with(|c| c.set((h, now)));
    h
}

/// Is a version deleted by `x` invisible to every snapshot that reads the live arena?
/// `vistest` is PostgreSQL's test (it counts every backend); scoot's own horizon skips the
/// readers of snapshot images.
pub fn removable(x: u32, vistest: *mut pg_sys::GlobalVisState) -> bool {
    unsafe {
        if !vistest.is_null() && pg_sys::GlobalVisTestIsRemovableXid(vistest, crate::ffi::xid(x)) {
            return true;
        }
    }
    let h = live_horizon();
    h != 0 && precedes(x, h)
}

/// VACUUM's removal horizon: the newer of PostgreSQL's (`oldest_xmin`) and scoot's own.
pub fn vacuum_horizon(oldest_xmin: u32) -> u32 {
    match compute_live_horizon() {
        Some(h) if precedes(oldest_xmin, h) => h,
        _ => oldest_xmin,
    }
}

/// May the index entries of a chain whose newest member was deleted by `x` go away? Besides
/// [`removable`], no live snapshot image may still see the row (its index scans use the live
/// indexes).
pub fn index_removable(x: u32, vistest: *mut pg_sys::GlobalVisState) -> bool {
    let img = cow::image_horizon();
    removable(x, vistest) && (img == 0 || precedes(x, img))
}

/// Dead to everyone, including every live snapshot image (index entries may be killed).
pub fn dead_for_index(
    h: &crate::storage::block::RowHdr,
    vistest: *mut pg_sys::GlobalVisState,
) -> bool {
    use crate::txn::mvcc::{htsv_horizon, Htsv};
    match htsv_horizon(h) {
        (Htsv::Dead, _) => true,
        (Htsv::RecentlyDead, x) => index_removable(x, vistest),
        _ => false,
    }
}

/// A chain whose newest member was deleted by `x` (0: never visible) may lose its index entries
/// as far as live snapshot images are concerned.
pub fn image_allows(x: u32) -> bool {
    let img = cow::image_horizon();
    x == 0 || img == 0 || precedes(x, img)
}
