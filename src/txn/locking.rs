//! Concurrency for row modifications: the "may I modify this version?" loop shared by UPDATE,
//! DELETE and SELECT ... FOR UPDATE/SHARE, with heap's tuple-lock modes, multixacts for shared
//! lockers, heavyweight tuple locks for queueing fairness, and waits on the holders' xids.
//! The same protocol as heap_update/heap_delete/heap_lock_tuple, reduced to what scoot needs.
use crate::ffi::{self, xid};
use crate::storage::block::RowHdr;
use crate::storage::modify::{self as storage, Locked};
use crate::storage::tabledir::TableRef;
use crate::txn::mvcc::{self, *};
use pgrx::pg_sys;
use pgrx::prelude::*;

pub type Mode = u32; // pg_sys::LockTupleMode::Type
pub const KEY_SHARE: Mode = pg_sys::LockTupleMode::LockTupleKeyShare;
pub const SHARE: Mode = pg_sys::LockTupleMode::LockTupleShare;
pub const NO_KEY_EXCL: Mode = pg_sys::LockTupleMode::LockTupleNoKeyExclusive;
pub const EXCL: Mode = pg_sys::LockTupleMode::LockTupleExclusive;

/// Heavyweight lock mode used to queue on a tuple (tupleLockExtraInfo[].hwlock).
fn hwlock(mode: Mode) -> pg_sys::LOCKMODE {
    (match mode {
        KEY_SHARE => pg_sys::AccessShareLock,
        SHARE => pg_sys::RowShareLock,
        NO_KEY_EXCL => pg_sys::ExclusiveLock,
        _ => pg_sys::AccessExclusiveLock,
    }) as pg_sys::LOCKMODE
}

fn lock_status(mode: Mode) -> pg_sys::MultiXactStatus::Type {
    use pg_sys::MultiXactStatus::*;
    match mode {
        KEY_SHARE => MultiXactStatusForKeyShare,
        SHARE => MultiXactStatusForShare,
        NO_KEY_EXCL => MultiXactStatusForNoKeyUpdate,
        _ => MultiXactStatusForUpdate,
    }
}

fn upd_status(mode: Mode) -> pg_sys::MultiXactStatus::Type {
    use pg_sys::MultiXactStatus::*;
    if mode == EXCL {
        MultiXactStatusUpdate
    } else {
        MultiXactStatusNoKeyUpdate
    }
}

fn status_mode(st: pg_sys::MultiXactStatus::Type) -> Mode {
    use pg_sys::MultiXactStatus::*;
    match st {
        MultiXactStatusForKeyShare => KEY_SHARE,
        MultiXactStatusForShare => SHARE,
        MultiXactStatusForNoKeyUpdate | MultiXactStatusNoKeyUpdate => NO_KEY_EXCL,
        _ => EXCL,
    }
}

fn status_is_update(st: pg_sys::MultiXactStatus::Type) -> bool {
    st == pg_sys::MultiXactStatus::MultiXactStatusNoKeyUpdate
        || st == pg_sys::MultiXactStatus::MultiXactStatusUpdate
}

/// Tuple lock conflict table (same as heap's, via the heavyweight modes).
pub fn modes_conflict(a: Mode, b: Mode) -> bool {
    match (a.min(b), a.max(b)) {
        (KEY_SHARE, EXCL) => true,
        (KEY_SHARE, _) => false,
        (SHARE, SHARE) => false,
        (SHARE, _) => true,
        _ => true,
    }
}

/// Mode in which a single-xid xmax holds the row.
fn single_xmax_mode(h: &RowHdr) -> Mode {
    let m = h.infomask();
    let keys = h.flags & crate::storage::block::F_KEYS_UPDATED != 0;
    if xmax_is_locked_only(m) {
        if m & HEAP_LOCK_MASK == HEAP_XMAX_SHR_LOCK {
            SHARE
        } else if m & HEAP_LOCK_MASK == HEAP_XMAX_KEYSHR_LOCK {
            KEY_SHARE
        } else if keys {
            EXCL
        } else {
            NO_KEY_EXCL
        }
    } else if keys {
        EXCL
    } else {
        NO_KEY_EXCL
    }
}

struct Members(Vec<(u32, pg_sys::MultiXactStatus::Type)>);

fn members(multi: u32) -> Members {
    unsafe {
        let mut arr: *mut pg_sys::MultiXactMember = std::ptr::null_mut();
        let n = pg_sys::GetMultiXactIdMembers(xid(multi), &mut arr, false, false);
        let mut v = Vec::new();
        for i in 0..n.max(0) as usize {
            let m = &*arr.add(i);
            v.push((m.xid.into_inner(), m.status));
        }
        if !arr.is_null() {
            pg_sys::pfree(arr as *mut std::ffi::c_void);
        }
        Members(v)
    }
}

pub enum Holder {
    /// another running transaction holds the row in a conflicting mode: wait for this xid/multi
    Conflict(u32),
    /// only compatible lockers (or ourselves): go ahead
    Compatible,
    /// the holder finished since the row was examined: look at the row again
    Changed,
}

/// Does the current xmax hold the row in a mode that conflicts with `mode`? Called right after
/// satisfies_update said TM_BeingModified, so a holder that is no longer running means the row's
/// state moved on (an update may just have committed) and must be re-evaluated.
fn conflicting_holder(h: &RowHdr, mode: Mode) -> Holder {
    let m = h.infomask();
    if m & HEAP_XMAX_INVALID != 0 {
        return Holder::Changed;
    }
    if m & HEAP_XMAX_IS_MULTI != 0 {
        let mut result = Holder::Compatible;
        for (x, st) in members(h.xmax).0 {
            if mvcc::is_current(x) {
                continue;
            }
            if !mvcc::in_progress(x) {
                if status_is_update(st) {
                    return Holder::Changed;
                }
                continue;
            }
            if modes_conflict(status_mode(st), mode) {
                result = Holder::Conflict(h.xmax);
            }
        }
        return result;
    }
    if mvcc::is_current(h.xmax) {
        return Holder::Compatible;
    }
    if !mvcc::in_progress(h.xmax) {
        return Holder::Changed;
    }
    if modes_conflict(single_xmax_mode(h), mode) {
        Holder::Conflict(h.xmax)
    } else {
        Holder::Compatible
    }
}

/// Waits until the holders of `xwait` that conflict with `mode` are gone.
fn wait_for(
    rel: pg_sys::Relation,
    tid: &mut pg_sys::ItemPointerData,
    xwait: u32,
    is_multi: bool,
    mode: Mode,
    oper: pg_sys::XLTW_Oper::Type,
) {
    unsafe {
        if is_multi {
            for (x, st) in members(xwait).0 {
                if !mvcc::is_current(x)
                    && mvcc::in_progress(x)
                    && modes_conflict(status_mode(st), mode)
                {
                    pg_sys::XactLockTableWait(xid(x), rel, tid, oper);
                }
            }
        } else {
            pg_sys::XactLockTableWait(xid(xwait), rel, tid, oper);
        }
    }
}

/// Hint bits for a multixact xmax (GetMultiXactIdHintBits): (infomask bits, keys_updated).
fn multi_hint_bits(multi: u32) -> (u16, bool) {
    let mut strongest = KEY_SHARE;
    let mut has_update = false;
    let mut keys = false;
    for (_, st) in members(multi).0 {
        let md = status_mode(st);
        strongest = strongest.max(md);
        has_update |= status_is_update(st);
        keys |= md == EXCL;
    }
    let mut bits = HEAP_XMAX_IS_MULTI
        | match strongest {
            KEY_SHARE => HEAP_XMAX_KEYSHR_LOCK,
            SHARE => HEAP_XMAX_SHR_LOCK,
            _ => HEAP_XMAX_EXCL_LOCK,
        };
    if !has_update {
        bits |= HEAP_XMAX_LOCK_ONLY;
    }
    (bits, keys)
}

fn fresh_bits(mode: Mode, is_update: bool) -> (u16, bool) {
    if is_update {
        (0, mode == EXCL)
    } else {
        let b = match mode {
            KEY_SHARE => HEAP_XMAX_KEYSHR_LOCK,
            SHARE => HEAP_XMAX_SHR_LOCK,
            _ => HEAP_XMAX_EXCL_LOCK,
        };
        (b | HEAP_XMAX_LOCK_ONLY, mode == EXCL)
    }
}

/// compute_new_xmax_infomask: the xmax (and bits) after `add` takes `mode` (lock or update).
pub fn compute_new_xmax(h: &RowHdr, add: u32, mode: Mode, is_update: bool) -> (u32, u16, bool) {
    let m = h.infomask();
    let new_status = if is_update {
        upd_status(mode)
    } else {
        lock_status(mode)
    };
    let fresh = |md: Mode| {
        let (b, k) = fresh_bits(md, is_update);
        (add, b, k)
    };
    if m & HEAP_XMAX_INVALID != 0 {
        return fresh(mode);
    }
    if m & HEAP_XMAX_IS_MULTI != 0 {
        if !mvcc::multi_running(h.xmax, xmax_is_locked_only(m)) {
            return fresh(mode);
        }
        let nm =
            unsafe { pg_sys::MultiXactIdExpand(xid(h.xmax), xid(add), new_status).into_inner() };
        let (b, k) = multi_hint_bits(nm);
        return (nm, b, k);
    }
    let old = h.xmax;
    let locked_only = xmax_is_locked_only(m);
    if old == add {
        if locked_only && !is_update {
            return fresh(mode.max(single_xmax_mode(h)));
        }
        return fresh(mode);
    }
    if mvcc::is_current(old) || mvcc::in_progress(old) {
        let old_status = if locked_only {
            lock_status(single_xmax_mode(h))
        } else {
            upd_status(single_xmax_mode(h))
        };
        if !locked_only && mvcc::is_current(old) && is_update {
            // our own (sub)transaction updated it before: the new update replaces it
            return fresh(mode);
        }
        let nm = unsafe {
            pg_sys::MultiXactIdCreate(xid(old), old_status, xid(add), new_status).into_inner()
        };
        let (b, k) = multi_hint_bits(nm);
        return (nm, b, k);
    }
    fresh(mode)
}

/// Fills TM_FailureData from a row that cannot be modified.
pub fn fill_tmfd(
    h: &RowHdr,
    self_tid: pg_sys::ItemPointerData,
    res: u32,
    tmfd: *mut pg_sys::TM_FailureData,
) {
    if tmfd.is_null() {
        return;
    }
    unsafe {
        (*tmfd).ctid = if h.has_next() && h.next_slot == crate::storage::block::MOVED_SLOT {
            // ItemPointerSetMovedPartitions
            let mut t = pg_sys::ItemPointerData::default();
            ffi::set_tid(&mut t, pg_sys::InvalidBlockNumber, 0xfffd);
            t
        } else if h.has_next() && res == pg_sys::TM_Result::TM_Updated {
            crate::am::tid_of(h.next_block, h.next_slot)
        } else {
            self_tid
        };
        (*tmfd).xmax = xid(mvcc::update_xid(h));
        (*tmfd).cmax = if res == pg_sys::TM_Result::TM_SelfModified {
            mvcc::cmax(h)
        } else {
            pg_sys::InvalidCommandId
        };
        (*tmfd).traversed = false;
    }
}

pub struct TupleLock {
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointerData,
    mode: pg_sys::LOCKMODE,
}

impl Drop for TupleLock {
    fn drop(&mut self) {
        unsafe { pg_sys::UnlockTuple(self.rel, &mut self.tid, self.mode) }
    }
}

pub enum Acquired {
    /// Exclusive lock on the row's block; TM_Ok: the caller may set xmax now.
    Ok(Locked, Option<TupleLock>),
    Fail(u32),
}

/// The wait loop of heap_update/heap_delete/heap_lock_tuple. `invisible_is_error`: UPDATE and
/// DELETE raise an error on TM_Invisible (heap does), row locks return it.
pub fn acquire(
    rel: pg_sys::Relation,
    t: TableRef,
    b: u32,
    s: u32,
    cid: u32,
    mode: Mode,
    policy: pg_sys::LockWaitPolicy::Type,
    oper: pg_sys::XLTW_Oper::Type,
    tmfd: *mut pg_sys::TM_FailureData,
) -> Acquired {
    let mut tid = crate::am::tid_of(b, s);
    let mut tuple_lock: Option<TupleLock> = None;
    loop {
        let Some(l) = storage::lock(t, b, true) else {
            return Acquired::Fail(pg_sys::TM_Result::TM_Deleted);
        };
        if !storage::slot_in_range(&l, s) || l.row(s).state() != crate::storage::block::ST_NORMAL {
            return Acquired::Fail(pg_sys::TM_Result::TM_Deleted);
        }
        let h = l.row(s);
        let res = mvcc::satisfies_update(h, cid);
        match res {
            pg_sys::TM_Result::TM_Ok => return Acquired::Ok(l, tuple_lock),
            pg_sys::TM_Result::TM_BeingModified => {
                let is_multi = h.infomask() & HEAP_XMAX_IS_MULTI != 0;
                let xwait = match conflicting_holder(h, mode) {
                    Holder::Compatible => return Acquired::Ok(l, tuple_lock),
                    Holder::Changed => continue,
                    Holder::Conflict(x) => x,
                };
                drop(l);
                match policy {
                    pg_sys::LockWaitPolicy::LockWaitSkip => {
                        return Acquired::Fail(pg_sys::TM_Result::TM_WouldBlock)
                    }
                    pg_sys::LockWaitPolicy::LockWaitError => {
                        ereport!(
                            PgLogLevel::ERROR,
                            PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
                            format!("could not obtain lock on row in relation \"{}\"", unsafe {
                                ffi::rel_name(rel)
                            })
                        );
                    }
                    _ => {}
                }
                if tuple_lock.is_none() {
                    let hw = hwlock(mode);
                    unsafe { pg_sys::LockTuple(rel, &mut tid, hw) };
                    tuple_lock = Some(TupleLock { rel, tid, mode: hw });
                }
                wait_for(rel, &mut tid, xwait, is_multi, mode, oper);
                continue;
            }
            _ => {
                fill_tmfd(h, tid, res, tmfd);
                return Acquired::Fail(res);
            }
        }
    }
}

/// The lockers an UPDATE must carry over to the new version (heap_update's `xmax_new_tuple`):
/// key-share lockers that are still running keep their lock on the row's newest version.
pub fn lockers_to_carry(h: &RowHdr) -> Option<(u32, u16)> {
    let m = h.infomask();
    if m & HEAP_XMAX_INVALID != 0 || !xmax_is_locked_only(m) {
        return None;
    }
    if m & HEAP_XMAX_IS_MULTI != 0 {
        if !mvcc::multi_running(h.xmax, true) {
            return None;
        }
        let (bits, _) = multi_hint_bits(h.xmax);
        return Some((h.xmax, bits));
    }
    if mvcc::is_current(h.xmax) || !mvcc::in_progress(h.xmax) {
        return None;
    }
    Some((h.xmax, HEAP_XMAX_KEYSHR_LOCK | HEAP_XMAX_LOCK_ONLY))
}

/// heap_lock_updated_tuple: a row lock taken on a version whose update is still in progress is
/// also placed on the newer versions, so it keeps protecting the row once the update commits.
pub fn lock_newer_versions(
    rel: pg_sys::Relation,
    t: TableRef,
    mut b: u32,
    mut s: u32,
    mut prior: u32,
    mode: Mode,
    add: u32,
) {
    for _ in 0..100_000 {
        let Some(l) = storage::lock(t, b, true) else {
            return;
        };
        if !storage::slot_in_range(&l, s) || l.row(s).state() != crate::storage::block::ST_NORMAL {
            return;
        }
        let h = l.row(s);
        if h.xmin != prior {
            return;
        }
        let m = h.infomask();
        if m & HEAP_XMAX_INVALID == 0 {
            match conflicting_holder(h, mode) {
                Holder::Conflict(x) => {
                    let multi = m & HEAP_XMAX_IS_MULTI != 0;
                    drop(l);
                    let mut tid = crate::am::tid_of(b, s);
                    wait_for(
                        rel,
                        &mut tid,
                        x,
                        multi,
                        mode,
                        pg_sys::XLTW_Oper::XLTW_LockUpdated,
                    );
                    continue;
                }
                Holder::Changed => {
                    // the holder finished: look again (it may have committed an update)
                    if !(m & HEAP_XMAX_IS_MULTI == 0
                        && !xmax_is_locked_only(m)
                        && mvcc::did_commit(h.xmax))
                    {
                        drop(l);
                        continue;
                    }
                }
                Holder::Compatible => {}
            }
        }
        let was_update = m & HEAP_XMAX_INVALID == 0 && !xmax_is_locked_only(m) && h.has_next();
        let (next_b, next_s, next_prior) = (h.next_block, h.next_slot, mvcc::update_xid(h));
        let (x, bits, keys) = compute_new_xmax(h, add, mode, false);
        if !(x == h.xmax && h.infomask() & HEAP_XMAX_BITS == bits) {
            storage::set_xmax(&l, s, x, bits, keys, None);
        }
        if !was_update || next_s == crate::storage::block::MOVED_SLOT {
            return;
        }
        b = next_b;
        s = next_s;
        prior = next_prior;
    }
}

/// Lockers that joined the old version's xmax (as a multixact) while our update of it was in
/// progress, other than ourselves: they must hold the new version too.
pub fn late_lockers(h: &RowHdr, me: u32) -> Vec<(u32, Mode)> {
    let m = h.infomask();
    if m & HEAP_XMAX_INVALID != 0 || m & HEAP_XMAX_IS_MULTI == 0 {
        return Vec::new();
    }
    members(h.xmax)
        .0
        .into_iter()
        .filter(|&(x, st)| {
            x != me && !status_is_update(st) && !mvcc::is_current(x) && mvcc::in_progress(x)
        })
        .map(|(x, st)| (x, status_mode(st)))
        .collect()
}
