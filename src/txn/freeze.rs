//! Freezing: a block that stopped changing becomes *frozen* (the CMDB seed's block states).
//!
//! - **hot**: written recently (every modification makes a block hot, `modify::Locked::touch`).
//! - **cooling**: the OLAP worker saw no modification for half of `scoot.freeze_after`; a write
//!   cancels it (the block is hot again).
//! - **freezing**: the transformation below, done under the block's exclusive lock (a short
//!   latch: one pass over the row headers and one copy of the variable-length area).
//! - **frozen**: every row version in the block is visible to every snapshot (xmin frozen, no
//!   xmax), and the variable-length values are gathered per column in slot order, so a column's
//!   values are one contiguous range (Arrow offsets + data). Scans skip per-row visibility on it
//!   and Arrow export copies its column buffers. A frozen block is never written while it stays
//!   frozen, so the `uffd` snapshot method never arms it again.
//!
//! A write to a frozen block thaws it: it is an ordinary hot block again (the layout is the same,
//! nothing has to be undone). Every SQL operation keeps working on frozen blocks unchanged,
//! because freezing only does what VACUUM's freezing does to row headers (plus moving var bytes).
//!
//! A block freezes only when each of its row versions is live and inserted by a transaction
//! older than every snapshot that reads the live arena (`txn::horizon`), with at most a lock by
//! a finished transaction. A block holding versions that are dead to every such snapshot is
//! reported [`Outcome::Prunable`]: the freezer (and `scoot.freeze`) prunes its version chains
//! with the same horizon (`am::index::prune_block_horizon`, as VACUUM's first pass does) and
//! freezes it then; chain roots left dead keep their index entries until VACUUM (freezing never
//! removes index entries; TIDs never change). Moving rows between sparse blocks (compaction) is
//! not done.
use crate::storage::arena::{self, TEMP_FROZEN};
use crate::storage::block::infomask::*;
use crate::storage::block::ST_NORMAL;
use crate::storage::modify as storage;
use crate::storage::tabledir::TableRef;
use crate::txn::mvcc::{self, Htsv};
use pgrx::pg_sys;
use std::sync::atomic::Ordering;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Frozen,
    AlreadyFrozen,
    /// a row version is not yet visible to all (recent insert or delete, running lock)
    NotYet,
    /// nothing but versions dead to every snapshot stands in the way: prune, then freeze
    Prunable,
    /// the block is locked by a writer (only when not waiting) or no longer the table's
    Busy,
}

/// The xid every row version to be frozen must precede: the oldest xmin of the processes that
/// read the live arena (readers of snapshot images do not count: freezing saves the pages it
/// changes for their images like any write).
pub fn horizon() -> u32 {
    match crate::txn::horizon::compute_live_horizon() {
        Some(h) => h,
        None => unsafe {
            pg_sys::GetOldestNonRemovableTransactionId(std::ptr::null_mut()).into_inner()
        },
    }
}

/// Freezes local block `lb` of `t` if every row version in it is visible to all (see the
/// module header). `wait`: wait for the block's lock (`scoot.freeze`) rather than give up (the
/// background freezer).
pub fn freeze_block(t: TableRef, lb: u32, horizon: u32, wait: bool) -> Outcome {
    let l = if wait {
        storage::lock(t, lb, true)
    } else {
        storage::try_lock(t, lb)
    };
    let Some(l) = l else {
        return Outcome::Busy;
    };
    if l.desc.temp.load(Ordering::Relaxed) == TEMP_FROZEN {
        return Outcome::AlreadyFrozen;
    }
    let t0 = std::time::Instant::now();
    let hwm = l.hwm();
    // pass 1: decide (hint bits may be set, nothing else changes)
    let mut clear = Vec::new();
    let mut prunable = false;
    for s in 0..hwm {
        let h = l.row(s);
        if h.state() != ST_NORMAL {
            continue; // free, redirect or dead-with-index-entries: not a row version
        }
        match mvcc::htsv_horizon(h) {
            (Htsv::Live, _) => {}
            (Htsv::Dead, _) => {
                prunable = true;
                continue;
            }
            (Htsv::RecentlyDead, x) if mvcc::precedes(x, horizon) => {
                prunable = true;
                continue;
            }
            _ => return Outcome::NotYet,
        }
        let m = h.infomask();
        if m & HEAP_XMIN_FROZEN != HEAP_XMIN_FROZEN && !mvcc::precedes(h.xmin, horizon) {
            return Outcome::NotYet;
        }
        if m & HEAP_XMAX_INVALID == 0 {
            // live with an xmax: a lock, or an update/delete that aborted
            let running = if m & HEAP_XMAX_IS_MULTI != 0 {
                mvcc::multi_running(h.xmax, false)
            } else {
                mvcc::in_progress(h.xmax) || mvcc::is_current(h.xmax)
            };
            if running {
                return Outcome::NotYet;
            }
            clear.push(s);
        }
    }
    if prunable {
        return Outcome::Prunable;
    }
    // pass 2: freeze
    for s in 0..hwm {
        let h = l.row(s);
        if h.state() == ST_NORMAL && h.infomask() & HEAP_XMIN_FROZEN != HEAP_XMIN_FROZEN {
            storage::freeze_xmin(&l, s);
        }
    }
    for s in clear {
        storage::clear_xmax(&l, s);
    }
    storage::gather_var(&l);
    // scans skip per-row visibility (every snapshot's xmin is at least the horizon)
    l.desc.vis_xid.store(horizon, Ordering::Relaxed);
    l.desc.temp.store(TEMP_FROZEN, Ordering::Release);
    let c = arena::ctl();
    c.freezes.fetch_add(1, Ordering::Relaxed);
    c.freeze_ns
        .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    Outcome::Frozen
}
