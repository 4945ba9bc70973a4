//! Concurrency for row modifications: the "may I modify this version?" protocols of heap_delete,
//! heap_update and heap_lock_tuple (heapam.c), ported step for step onto scoot's version headers:
//! heap's tuple-lock modes, multixacts for shared lockers, heavyweight tuple locks for queueing
//! fairness, waits on the holders' xids in PostgreSQL's lock manager (visible in pg_locks,
//! cancellable, deadlock-checked), and after every wait a re-check that either starts over
//! (the xmax changed) or decides from the finished holder's outcome, so no loop spins.
//!
//! Waits run through `ffi::guard::catch`, so an error raised while waiting (deadlock, cancel,
//! lock_timeout) reaches the client with heap's CONTEXT line ("while updating tuple ...").
use crate::ffi::guard::{self, raw};
use crate::ffi::{self, xid};
use crate::storage::block::{RowHdr, F_KEYS_UPDATED, ST_NORMAL};
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

type Status = pg_sys::MultiXactStatus::Type;

/// Heavyweight lock mode used to queue on a tuple (tupleLockExtraInfo[].hwlock).
fn hwlock(mode: Mode) -> pg_sys::LOCKMODE {
    (match mode {
        KEY_SHARE => pg_sys::AccessShareLock,
        SHARE => pg_sys::RowShareLock,
        NO_KEY_EXCL => pg_sys::ExclusiveLock,
        _ => pg_sys::AccessExclusiveLock,
    }) as pg_sys::LOCKMODE
}

/// get_mxact_status_for_lock
fn status_for(mode: Mode, is_update: bool) -> Status {
    use pg_sys::MultiXactStatus::*;
    match (mode, is_update) {
        (KEY_SHARE, false) => MultiXactStatusForKeyShare,
        (SHARE, false) => MultiXactStatusForShare,
        (NO_KEY_EXCL, false) => MultiXactStatusForNoKeyUpdate,
        (_, false) => MultiXactStatusForUpdate,
        (EXCL, true) => MultiXactStatusUpdate,
        (_, true) => MultiXactStatusNoKeyUpdate,
    }
}

/// TUPLOCK_from_mxstatus
fn status_mode(st: Status) -> Mode {
    use pg_sys::MultiXactStatus::*;
    match st {
        MultiXactStatusForKeyShare => KEY_SHARE,
        MultiXactStatusForShare => SHARE,
        MultiXactStatusForNoKeyUpdate | MultiXactStatusNoKeyUpdate => NO_KEY_EXCL,
        _ => EXCL,
    }
}

/// ISUPDATE_from_mxstatus
fn status_is_update(st: Status) -> bool {
    st == pg_sys::MultiXactStatus::MultiXactStatusNoKeyUpdate
        || st == pg_sys::MultiXactStatus::MultiXactStatusUpdate
}

/// DoLockModesConflict on the tuple locks' heavyweight modes.
pub fn modes_conflict(a: Mode, b: Mode) -> bool {
    match (a.min(b), a.max(b)) {
        (KEY_SHARE, EXCL) => true,
        (KEY_SHARE, _) => false,
        (SHARE, SHARE) => false,
        (SHARE, _) => true,
        _ => true,
    }
}

#[inline]
fn keyshr_locked(m: u16) -> bool {
    m & HEAP_LOCK_MASK == HEAP_XMAX_KEYSHR_LOCK
}
#[inline]
fn shr_locked(m: u16) -> bool {
    m & HEAP_LOCK_MASK == HEAP_XMAX_SHR_LOCK
}
#[inline]
fn excl_locked(m: u16) -> bool {
    m & HEAP_LOCK_MASK == HEAP_XMAX_EXCL_LOCK
}

/// xmax_infomask_changed
#[inline]
fn xmax_infomask_changed(new: u16, old: u16) -> bool {
    let interesting = HEAP_XMAX_IS_MULTI | HEAP_XMAX_LOCK_ONLY | HEAP_LOCK_MASK;
    new & interesting != old & interesting
}

/// The status a single-xid xmax holds the row in.
fn single_status(m: u16, keys: bool) -> Status {
    use pg_sys::MultiXactStatus::*;
    if xmax_is_locked_only(m) {
        if keyshr_locked(m) {
            MultiXactStatusForKeyShare
        } else if shr_locked(m) {
            MultiXactStatusForShare
        } else if keys {
            MultiXactStatusForUpdate
        } else {
            MultiXactStatusForNoKeyUpdate
        }
    } else if keys {
        MultiXactStatusUpdate
    } else {
        MultiXactStatusNoKeyUpdate
    }
}

fn members(multi: u32, lock_only: bool) -> Vec<(u32, Status)> {
    unsafe {
        let mut arr: *mut pg_sys::MultiXactMember = std::ptr::null_mut();
        let n = pg_sys::GetMultiXactIdMembers(xid(multi), &mut arr, false, lock_only);
        let mut v = Vec::new();
        for i in 0..n.max(0) as usize {
            let m = &*arr.add(i);
            v.push((m.xid.into_inner(), m.status));
        }
        if !arr.is_null() {
            pg_sys::pfree(arr as *mut std::ffi::c_void);
        }
        v
    }
}

/// DoesMultiXactIdConflict: (a member conflicts with `mode`, we are a member ourselves).
fn multi_conflicts(multi: u32, infomask: u16, mode: Mode) -> (bool, bool) {
    let mut result = false;
    let mut current_is_member = false;
    for (x, st) in members(multi, xmax_is_locked_only(infomask)) {
        if result && current_is_member {
            break;
        }
        if mvcc::is_current(x) {
            current_is_member = true;
            continue;
        } else if result {
            continue;
        }
        if !modes_conflict(status_mode(st), mode) {
            continue;
        }
        if status_is_update(st) {
            if mvcc::did_abort(x) {
                continue;
            }
        } else if !mvcc::in_progress(x) {
            continue;
        }
        result = true;
    }
    (result, current_is_member)
}

/// Do_MultiXactIdWait: waits for the members whose locks conflict with `status`. With `nowait`
/// returns false instead of waiting. `remaining` counts members still running afterwards.
fn multi_wait(
    rel: pg_sys::Relation,
    tid: &mut pg_sys::ItemPointerData,
    multi: u32,
    status: Status,
    infomask: u16,
    oper: pg_sys::XLTW_Oper::Type,
    nowait: bool,
) -> (bool, u32) {
    let mut remain = 0;
    for (x, st) in members(multi, xmax_is_locked_only(infomask)) {
        if mvcc::is_current(x) {
            remain += 1;
            continue;
        }
        if !modes_conflict(status_mode(st), status_mode(status)) {
            if mvcc::in_progress(x) {
                remain += 1;
            }
            continue;
        }
        if nowait {
            if !guard::catch(|| unsafe { raw::ConditionalXactLockTableWait(xid(x)) }) {
                return (false, remain);
            }
        } else {
            xact_wait(rel, tid, x, oper);
        }
    }
    (true, remain)
}

/// XactLockTableWait with heap's error context.
fn xact_wait(
    rel: pg_sys::Relation,
    tid: &mut pg_sys::ItemPointerData,
    x: u32,
    oper: pg_sys::XLTW_Oper::Type,
) {
    let tidp: *mut pg_sys::ItemPointerData = tid;
    guard::catch(|| unsafe { raw::XactLockTableWait(xid(x), rel, tidp, oper) });
}

/// UpdateXmaxHintBits after waiting for a single xid.
fn update_xmax_hint(h: &RowHdr) {
    let m = h.infomask();
    if m & (HEAP_XMAX_COMMITTED | HEAP_XMAX_INVALID) == 0 {
        if !xmax_is_locked_only(m) && mvcc::did_commit(h.xmax) {
            h.set_hint(HEAP_XMAX_COMMITTED);
        } else {
            h.set_hint(HEAP_XMAX_INVALID);
        }
    }
}

/// GetMultiXactIdHintBits: (infomask bits, keys_updated).
fn multi_hint_bits(multi: u32) -> (u16, bool) {
    let mut strongest = KEY_SHARE;
    let mut has_update = false;
    let mut keys = false;
    for (_, st) in members(multi, false) {
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

/// compute_new_xmax_infomask: the xmax (and bits, keys_updated) after `add` (our xid) takes
/// `mode` as a lock or an update, given the row's current xmax.
pub fn compute_new_xmax(
    xmax: u32,
    mut old: u16,
    old_keys: bool,
    add: u32,
    mut mode: Mode,
    is_update: bool,
) -> (u32, u16, bool) {
    loop {
        if old & HEAP_XMAX_INVALID != 0 {
            if is_update {
                return (add, 0, mode == EXCL);
            }
            let b = match mode {
                KEY_SHARE => HEAP_XMAX_KEYSHR_LOCK,
                SHARE => HEAP_XMAX_SHR_LOCK,
                _ => HEAP_XMAX_EXCL_LOCK,
            };
            return (add, b | HEAP_XMAX_LOCK_ONLY, mode == EXCL);
        }
        if old & HEAP_XMAX_IS_MULTI != 0 {
            if !mvcc::multi_running(xmax, xmax_is_locked_only(old))
                && (xmax_is_locked_only(old) || !mvcc::did_commit(mvcc::update_xid_raw(xmax, old)))
            {
                old = (old & !HEAP_XMAX_IS_MULTI) | HEAP_XMAX_INVALID;
                continue;
            }
            let nm = unsafe {
                pg_sys::MultiXactIdExpand(xid(xmax), xid(add), status_for(mode, is_update))
                    .into_inner()
            };
            let (b, k) = multi_hint_bits(nm);
            return (nm, b, k);
        }
        if old & HEAP_XMAX_COMMITTED != 0 {
            let st = single_status(old & !HEAP_XMAX_LOCK_ONLY, old_keys);
            return new_multi(xmax, st, add, status_for(mode, is_update));
        }
        if mvcc::in_progress(xmax) {
            let old_status = single_status(old, old_keys);
            if xmax == add {
                mode = mode.max(status_mode(old_status));
                old |= HEAP_XMAX_INVALID;
                continue;
            }
            return new_multi(xmax, old_status, add, status_for(mode, is_update));
        }
        if !xmax_is_locked_only(old) && mvcc::did_commit(xmax) {
            let st = single_status(old, old_keys);
            return new_multi(xmax, st, add, status_for(mode, is_update));
        }
        old |= HEAP_XMAX_INVALID;
    }
}

fn new_multi(x1: u32, s1: Status, x2: u32, s2: Status) -> (u32, u16, bool) {
    let nm = unsafe { pg_sys::MultiXactIdCreate(xid(x1), s1, xid(x2), s2).into_inner() };
    let (b, k) = multi_hint_bits(nm);
    (nm, b, k)
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
        let mut t = pg_sys::ItemPointerData::default();
        (*tmfd).ctid = if h.is_moved() {
            ffi::set_tid(
                &mut t,
                pg_sys::InvalidBlockNumber,
                crate::storage::block::MOVED_OFF,
            );
            t
        } else if let Some((p, o)) = h.next() {
            ffi::set_tid(&mut t, p, o);
            t
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

/// A heavyweight tuple lock held while queueing for a row; released on drop.
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

/// heap_acquire_tuplock: false when the policy says not to wait and the lock is busy.
fn acquire_tuplock(
    rel: pg_sys::Relation,
    tid: &mut pg_sys::ItemPointerData,
    mode: Mode,
    policy: pg_sys::LockWaitPolicy::Type,
    have: &mut Option<TupleLock>,
) -> bool {
    if have.is_some() {
        return true;
    }
    let hw = hwlock(mode);
    let tidp: *mut pg_sys::ItemPointerData = tid;
    match policy {
        pg_sys::LockWaitPolicy::LockWaitBlock => {
            guard::catch(|| unsafe { raw::LockTuple(rel, tidp, hw) });
        }
        _ => {
            if !guard::catch(|| unsafe { raw::ConditionalLockTuple(rel, tidp, hw) }) {
                if policy == pg_sys::LockWaitPolicy::LockWaitError {
                    lock_not_available(rel);
                }
                return false;
            }
        }
    }
    *have = Some(TupleLock {
        rel,
        tid: *tid,
        mode: hw,
    });
    true
}

fn lock_not_available(rel: pg_sys::Relation) -> ! {
    ereport!(
        PgLogLevel::ERROR,
        PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
        format!("could not obtain lock on row in relation \"{}\"", unsafe {
            ffi::rel_name(rel)
        })
    );
    unreachable!()
}

/// Locks version (lb, s) exclusively if it is still a row version.
fn lock_version(t: TableRef, lb: u32, s: u32) -> Option<Locked> {
    let l = storage::lock(t, lb, true)?;
    (storage::slot_in_range(&l, s) && l.row(s).state() == ST_NORMAL).then_some(l)
}

/// A row version ready to be updated/deleted/locked by us (its block locked exclusively).
pub struct Acquired {
    pub l: Locked,
    pub tuple_lock: Option<TupleLock>,
    /// the xmax holders were waited for (heap's checked_lockers)
    pub checked_lockers: bool,
    /// some of them are still running (heap's locker_remains)
    pub locker_remains: bool,
}

pub enum Outcome {
    Ok(Acquired),
    /// TM_Result (Updated, Deleted, SelfModified, Invisible, BeingModified when not waiting)
    Fail(u32),
}

/// The wait loop of heap_update (`key_intact` = no key column changes, mode NO_KEY_EXCL) and
/// heap_delete (mode EXCL). With `wait` false, a concurrent modifier yields TM_BeingModified.
pub fn acquire_for_write(
    rel: pg_sys::Relation,
    t: TableRef,
    lb: u32,
    s: u32,
    cid: u32,
    mode: Mode,
    is_delete: bool,
    wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
) -> Outcome {
    let mut tid = crate::storage::tid_of(lb, s);
    let mut tuple_lock: Option<TupleLock> = None;
    let key_intact = mode != EXCL;
    let oper = if is_delete {
        pg_sys::XLTW_Oper::XLTW_Delete
    } else {
        pg_sys::XLTW_Oper::XLTW_Update
    };
    let status = status_for(mode, true);
    'l2: loop {
        let Some(l) = lock_version(t, lb, s) else {
            return Outcome::Fail(pg_sys::TM_Result::TM_Deleted);
        };
        let h = l.row(s);
        let mut checked_lockers = false;
        let mut locker_remains = false;
        let res = mvcc::satisfies_update(h, cid);
        if res == pg_sys::TM_Result::TM_BeingModified && wait {
            let xwait = h.xmax;
            let infomask = h.infomask();
            let mut can_continue = false;
            if infomask & HEAP_XMAX_IS_MULTI != 0 {
                let (conflict, current_is_member) = multi_conflicts(xwait, infomask, mode);
                if conflict {
                    drop(l);
                    if !current_is_member {
                        acquire_tuplock(
                            rel,
                            &mut tid,
                            mode,
                            pg_sys::LockWaitPolicy::LockWaitBlock,
                            &mut tuple_lock,
                        );
                    }
                    let (_, remain) =
                        multi_wait(rel, &mut tid, xwait, status, infomask, oper, false);
                    checked_lockers = true;
                    locker_remains = remain != 0;
                    let Some(l2) = lock_version(t, lb, s) else {
                        return Outcome::Fail(pg_sys::TM_Result::TM_Deleted);
                    };
                    let h2 = l2.row(s);
                    if xmax_infomask_changed(h2.infomask(), infomask) || h2.xmax != xwait {
                        continue 'l2;
                    }
                    return finish_write(
                        l2,
                        s,
                        tid,
                        tuple_lock,
                        is_delete,
                        checked_lockers,
                        locker_remains,
                        tmfd,
                    );
                }
                if is_delete {
                    return finish_write(l, s, tid, tuple_lock, true, false, false, tmfd);
                }
                let update_xact = if !xmax_is_locked_only(h.infomask()) {
                    mvcc::update_xid(h)
                } else {
                    0
                };
                if !ffi::xid_valid(update_xact) || mvcc::did_abort(update_xact) {
                    can_continue = true;
                }
            } else if mvcc::is_current(xwait) {
                if is_delete {
                    return finish_write(l, s, tid, tuple_lock, true, false, false, tmfd);
                }
                checked_lockers = true;
                locker_remains = true;
                can_continue = true;
            } else if !is_delete && keyshr_locked(infomask) && key_intact {
                checked_lockers = true;
                locker_remains = true;
                can_continue = true;
            } else {
                drop(l);
                acquire_tuplock(
                    rel,
                    &mut tid,
                    mode,
                    pg_sys::LockWaitPolicy::LockWaitBlock,
                    &mut tuple_lock,
                );
                xact_wait(rel, &mut tid, xwait, oper);
                checked_lockers = true;
                let Some(l2) = lock_version(t, lb, s) else {
                    return Outcome::Fail(pg_sys::TM_Result::TM_Deleted);
                };
                let h2 = l2.row(s);
                if xmax_infomask_changed(h2.infomask(), infomask) || h2.xmax != xwait {
                    continue 'l2;
                }
                update_xmax_hint(h2);
                if is_delete {
                    return finish_write(l2, s, tid, tuple_lock, true, true, false, tmfd);
                }
                let can = h2.infomask() & HEAP_XMAX_INVALID != 0;
                return decide(l2, s, tid, tuple_lock, can, checked_lockers, false, tmfd);
            }
            return decide(
                l,
                s,
                tid,
                tuple_lock,
                can_continue,
                checked_lockers,
                locker_remains,
                tmfd,
            );
        }
        if res == pg_sys::TM_Result::TM_BeingModified {
            // not waiting (table_tuple_update/delete with wait = false)
            fill_tmfd(h, tid, res, tmfd);
            return Outcome::Fail(res);
        }
        if res != pg_sys::TM_Result::TM_Ok {
            if res != pg_sys::TM_Result::TM_Invisible {
                fill_tmfd(h, tid, res, tmfd);
            }
            return Outcome::Fail(res);
        }
        return Outcome::Ok(Acquired {
            l,
            tuple_lock,
            checked_lockers,
            locker_remains,
        });
    }
}

/// heap_update's verdict after dealing with the holders: proceed, or report Updated/Deleted.
fn decide(
    l: Locked,
    s: u32,
    tid: pg_sys::ItemPointerData,
    tuple_lock: Option<TupleLock>,
    can_continue: bool,
    checked_lockers: bool,
    locker_remains: bool,
    tmfd: *mut pg_sys::TM_FailureData,
) -> Outcome {
    if can_continue {
        return Outcome::Ok(Acquired {
            l,
            tuple_lock,
            checked_lockers,
            locker_remains,
        });
    }
    let h = l.row(s);
    let res = if h.has_next() || h.is_moved() {
        pg_sys::TM_Result::TM_Updated
    } else {
        pg_sys::TM_Result::TM_Deleted
    };
    fill_tmfd(h, tid, res, tmfd);
    Outcome::Fail(res)
}

/// heap_delete's verdict: we may overwrite if the previous xmax aborted or only locked.
fn finish_write(
    l: Locked,
    s: u32,
    tid: pg_sys::ItemPointerData,
    tuple_lock: Option<TupleLock>,
    is_delete: bool,
    checked_lockers: bool,
    locker_remains: bool,
    tmfd: *mut pg_sys::TM_FailureData,
) -> Outcome {
    if !is_delete {
        // heap_update after waiting on a multixact
        let h = l.row(s);
        let update_xact = if !xmax_is_locked_only(h.infomask()) {
            mvcc::update_xid(h)
        } else {
            0
        };
        let can = !ffi::xid_valid(update_xact) || mvcc::did_abort(update_xact);
        return decide(
            l,
            s,
            tid,
            tuple_lock,
            can,
            checked_lockers,
            locker_remains,
            tmfd,
        );
    }
    let h = l.row(s);
    let m = h.infomask();
    let ok = m & HEAP_XMAX_INVALID != 0 || xmax_is_locked_only(m) || mvcc::is_only_locked(h);
    decide(
        l,
        s,
        tid,
        tuple_lock,
        ok,
        checked_lockers,
        locker_remains,
        tmfd,
    )
}

/// heap_update's xmax for the new version: the old version's lockers that are still around (or
/// were not checked) keep their lock on the row's newest version.
pub fn xmax_for_new_version(h: &RowHdr, a: &Acquired) -> Option<(u32, u16)> {
    let m = h.infomask();
    if m & HEAP_XMAX_INVALID != 0 || (a.checked_lockers && !a.locker_remains) {
        return None;
    }
    if !xmax_is_locked_only(m) && m & HEAP_XMAX_IS_MULTI == 0 {
        // a single updater that aborted: nothing to carry
        return None;
    }
    if m & HEAP_XMAX_IS_MULTI != 0 {
        let (bits, _) = multi_hint_bits(h.xmax);
        return Some((h.xmax, bits));
    }
    Some((h.xmax, HEAP_XMAX_KEYSHR_LOCK | HEAP_XMAX_LOCK_ONLY))
}

/// heap_lock_tuple: lock version (lb, s) in `mode`. On TM_Ok the row's xmax holds our lock; on
/// failure `tmfd` describes the newer version. `follow_updates` also locks newer versions of an
/// update still in progress (heap_lock_updated_tuple), so the lock survives it.
pub fn lock_tuple(
    rel: pg_sys::Relation,
    t: TableRef,
    lb: u32,
    s: u32,
    cid: u32,
    mode: Mode,
    policy: pg_sys::LockWaitPolicy::Type,
    follow_updates: bool,
    tmfd: *mut pg_sys::TM_FailureData,
) -> u32 {
    use pg_sys::TM_Result::*;
    let mut tid = crate::storage::tid_of(lb, s);
    let mut tuple_lock: Option<TupleLock> = None;
    let mut first_time = true;
    let mut skip_tuple_lock = false;
    let me = unsafe { pg_sys::GetCurrentTransactionId().into_inner() };
    'l3: loop {
        let Some(mut l) = lock_version(t, lb, s) else {
            return TM_Deleted;
        };
        let h = l.row(s);
        let mut result = mvcc::satisfies_update(h, cid);
        if result == TM_Invisible {
            return TM_Invisible;
        }
        if result == TM_BeingModified || result == TM_Updated || result == TM_Deleted {
            let mut require_sleep;
            let xwait = h.xmax;
            let infomask = h.infomask();
            let keys = h.has_flag(F_KEYS_UPDATED);
            let t_ctid = h.next();
            let moved = h.is_moved();
            drop(l);
            if first_time {
                first_time = false;
                if infomask & HEAP_XMAX_IS_MULTI != 0 {
                    for (x, st) in members(xwait, xmax_is_locked_only(infomask)) {
                        if !mvcc::is_current(x) {
                            continue;
                        }
                        if status_mode(st) >= mode {
                            return TM_Ok;
                        }
                        skip_tuple_lock = true;
                    }
                } else if mvcc::is_current(xwait) {
                    let held = match mode {
                        KEY_SHARE => true,
                        SHARE => shr_locked(infomask) || excl_locked(infomask),
                        NO_KEY_EXCL => excl_locked(infomask),
                        _ => excl_locked(infomask) && keys,
                    };
                    if held {
                        return TM_Ok;
                    }
                }
            }
            require_sleep = true;
            let updated = !xmax_is_locked_only(infomask);
            let relock = || lock_version(t, lb, s);
            if mode == KEY_SHARE {
                if !keys {
                    if follow_updates && updated && !moved {
                        if let Some(next) = t_ctid {
                            let r = lock_updated(rel, t, infomask, xwait, next, me, mode);
                            if r != TM_Ok {
                                let Some(l2) = relock() else {
                                    return TM_Deleted;
                                };
                                fill_tmfd(l2.row(s), tid, r, tmfd);
                                return r;
                            }
                        }
                    }
                    let Some(l2) = relock() else {
                        return TM_Deleted;
                    };
                    let h2 = l2.row(s);
                    if !mvcc::is_only_locked(h2) && (h2.has_flag(F_KEYS_UPDATED) || !updated) {
                        continue 'l3;
                    }
                    require_sleep = false;
                    l = l2;
                } else {
                    l = match relock() {
                        Some(x) => x,
                        None => return TM_Deleted,
                    };
                }
            } else if mode == SHARE && xmax_is_locked_only(infomask) && !excl_locked(infomask) {
                let Some(l2) = relock() else {
                    return TM_Deleted;
                };
                let m2 = l2.row(s).infomask();
                if !xmax_is_locked_only(m2) || excl_locked(m2) {
                    continue 'l3;
                }
                require_sleep = false;
                l = l2;
            } else if mode == NO_KEY_EXCL
                && ((infomask & HEAP_XMAX_IS_MULTI != 0
                    && !multi_conflicts(xwait, infomask, mode).0)
                    || (infomask & HEAP_XMAX_IS_MULTI == 0 && keyshr_locked(infomask)))
            {
                let Some(l2) = relock() else {
                    return TM_Deleted;
                };
                let h2 = l2.row(s);
                if xmax_infomask_changed(h2.infomask(), infomask) || h2.xmax != xwait {
                    continue 'l3;
                }
                require_sleep = false;
                l = l2;
            } else {
                l = match relock() {
                    Some(x) => x,
                    None => return TM_Deleted,
                };
            }
            if require_sleep && infomask & HEAP_XMAX_IS_MULTI == 0 && mvcc::is_current(xwait) {
                let h2 = l.row(s);
                if xmax_infomask_changed(h2.infomask(), infomask) || h2.xmax != xwait {
                    continue 'l3;
                }
                require_sleep = false;
            }
            if require_sleep && (result == TM_Updated || result == TM_Deleted) {
                fill_tmfd(l.row(s), tid, result, tmfd);
                return result;
            } else if require_sleep {
                drop(l);
                if !skip_tuple_lock
                    && !acquire_tuplock(rel, &mut tid, mode, policy, &mut tuple_lock)
                {
                    return would_block(t, lb, s, tid, tmfd);
                }
                if infomask & HEAP_XMAX_IS_MULTI != 0 {
                    let status = status_for(mode, false);
                    let nowait = policy != pg_sys::LockWaitPolicy::LockWaitBlock;
                    let (done, _) = multi_wait(
                        rel,
                        &mut tid,
                        xwait,
                        status,
                        infomask,
                        pg_sys::XLTW_Oper::XLTW_Lock,
                        nowait,
                    );
                    if !done {
                        if policy == pg_sys::LockWaitPolicy::LockWaitError {
                            lock_not_available(rel);
                        }
                        return would_block(t, lb, s, tid, tmfd);
                    }
                } else if policy == pg_sys::LockWaitPolicy::LockWaitBlock {
                    xact_wait(rel, &mut tid, xwait, pg_sys::XLTW_Oper::XLTW_Lock);
                } else if !guard::catch(|| unsafe { raw::ConditionalXactLockTableWait(xid(xwait)) })
                {
                    if policy == pg_sys::LockWaitPolicy::LockWaitError {
                        lock_not_available(rel);
                    }
                    return would_block(t, lb, s, tid, tmfd);
                }
                if follow_updates && updated && !moved {
                    if let Some(next) = t_ctid {
                        let r = lock_updated(rel, t, infomask, xwait, next, me, mode);
                        if r != TM_Ok {
                            let Some(l2) = relock() else {
                                return TM_Deleted;
                            };
                            fill_tmfd(l2.row(s), tid, r, tmfd);
                            return r;
                        }
                    }
                }
                let Some(l2) = relock() else {
                    return TM_Deleted;
                };
                let h2 = l2.row(s);
                if xmax_infomask_changed(h2.infomask(), infomask) || h2.xmax != xwait {
                    continue 'l3;
                }
                if infomask & HEAP_XMAX_IS_MULTI == 0 {
                    update_xmax_hint(h2);
                }
                l = l2;
            }
            let h2 = l.row(s);
            let m2 = h2.infomask();
            result = if !require_sleep
                || m2 & HEAP_XMAX_INVALID != 0
                || xmax_is_locked_only(m2)
                || mvcc::is_only_locked(h2)
            {
                TM_Ok
            } else if h2.has_next() || h2.is_moved() {
                TM_Updated
            } else {
                TM_Deleted
            };
        }
        if result != TM_Ok {
            fill_tmfd(l.row(s), tid, result, tmfd);
            return result;
        }
        // set our lock
        let h = l.row(s);
        unsafe { pg_sys::MultiXactIdSetOldestMember() };
        let (x, bits, keys) = compute_new_xmax(
            h.xmax,
            h.infomask(),
            h.has_flag(F_KEYS_UPDATED),
            me,
            mode,
            false,
        );
        let unchanged = x == h.xmax
            && h.infomask() & HEAP_XMAX_BITS == bits
            && h.has_flag(F_KEYS_UPDATED) == keys;
        if !unchanged {
            storage::set_xmax(&l, s, x, bits, keys, None);
            if xmax_is_locked_only(bits) {
                // a lock-only xmax: the row is not updated (an aborted updater's link goes)
                storage::clear_update_link(&l, s);
            }
        }
        drop(tuple_lock);
        return TM_Ok;
    }
}

fn would_block(
    t: TableRef,
    lb: u32,
    s: u32,
    tid: pg_sys::ItemPointerData,
    tmfd: *mut pg_sys::TM_FailureData,
) -> u32 {
    if let Some(l) = lock_version(t, lb, s) {
        fill_tmfd(l.row(s), tid, pg_sys::TM_Result::TM_WouldBlock, tmfd);
    }
    pg_sys::TM_Result::TM_WouldBlock
}

/// test_lockmode_for_conflict: (result, need to wait).
fn lockmode_conflict(st: Status, x: u32, mode: Mode, h: &RowHdr) -> (u32, bool) {
    use pg_sys::TM_Result::*;
    let wanted = status_for(mode, false);
    if mvcc::is_current(x) {
        return (TM_SelfModified, false);
    }
    if mvcc::in_progress(x) {
        return (TM_Ok, modes_conflict(status_mode(st), status_mode(wanted)));
    }
    if mvcc::did_abort(x) {
        return (TM_Ok, false);
    }
    if mvcc::did_commit(x) {
        if !status_is_update(st) {
            return (TM_Ok, false);
        }
        if modes_conflict(status_mode(st), status_mode(wanted)) {
            return (
                if h.has_next() || h.is_moved() {
                    TM_Updated
                } else {
                    TM_Deleted
                },
                false,
            );
        }
    }
    (TM_Ok, false)
}

/// heap_lock_updated_tuple(_rec): puts our `mode` lock on every newer version of an update whose
/// chain starts at `next`, waiting for conflicting holders on the way.
fn lock_updated(
    rel: pg_sys::Relation,
    t: TableRef,
    prior_infomask: u16,
    prior_raw_xmax: u32,
    next: (u32, u16),
    me: u32,
    mode: Mode,
) -> u32 {
    use pg_sys::TM_Result::*;
    unsafe { pg_sys::MultiXactIdSetOldestMember() };
    let mut prior = if prior_infomask & HEAP_XMAX_IS_MULTI != 0 {
        mvcc::update_xid_raw(prior_raw_xmax, prior_infomask)
    } else {
        prior_raw_xmax
    };
    let Some((mut lb, mut s)) = crate::storage::decode_tid_parts(next.0, next.1) else {
        return TM_Ok;
    };
    loop {
        pgrx::check_for_interrupts!();
        let Some(l) = lock_version(t, lb, s) else {
            return TM_Ok;
        };
        let h = l.row(s);
        if ffi::xid_valid(prior) && h.xmin != prior {
            return TM_Ok;
        }
        if mvcc::did_abort(h.xmin) {
            return TM_Ok;
        }
        let m = h.infomask();
        let mut skip = false;
        if m & HEAP_XMAX_INVALID == 0 {
            let holders: Vec<(u32, Status)> = if m & HEAP_XMAX_IS_MULTI != 0 {
                members(h.xmax, xmax_is_locked_only(m))
            } else {
                vec![(h.xmax, single_status(m, h.has_flag(F_KEYS_UPDATED)))]
            };
            for (x, st) in holders {
                let (r, needwait) = lockmode_conflict(st, x, mode, h);
                if r == TM_SelfModified {
                    skip = true;
                    break;
                }
                if needwait {
                    drop(l);
                    let mut tid = crate::storage::tid_of(lb, s);
                    xact_wait(rel, &mut tid, x, pg_sys::XLTW_Oper::XLTW_LockUpdated);
                    // look at this version again
                    return lock_updated_from(rel, t, prior, lb, s, me, mode);
                }
                if r != TM_Ok {
                    return r;
                }
            }
        }
        if !skip {
            let (x, bits, keys) =
                compute_new_xmax(h.xmax, m, h.has_flag(F_KEYS_UPDATED), me, mode, false);
            storage::set_xmax(&l, s, x, bits, keys, None);
        }
        let h = l.row(s);
        let m = h.infomask();
        if m & HEAP_XMAX_INVALID != 0 || h.is_moved() || !h.has_next() || mvcc::is_only_locked(h) {
            return TM_Ok;
        }
        prior = mvcc::update_xid(h);
        let Some((p, o)) = h.next() else { return TM_Ok };
        let Some((nlb, ns)) = crate::storage::decode_tid_parts(p, o) else {
            return TM_Ok;
        };
        lb = nlb;
        s = ns;
    }
}

fn lock_updated_from(
    rel: pg_sys::Relation,
    t: TableRef,
    prior: u32,
    lb: u32,
    s: u32,
    me: u32,
    mode: Mode,
) -> u32 {
    // re-enter the loop at (lb, s) with the same prior xmin: encode as a "prior update" of a
    // plain xid so lock_updated resolves it to `prior`
    let (p, o) = crate::storage::block::tid::encode(crate::storage::arena::vpb(), lb, s);
    lock_updated(rel, t, 0, prior, (p, o), me, mode)
}

/// Lockers that joined the old version's xmax (as a multixact) while our update of it was in
/// progress, other than ourselves: they must hold the new version too.
pub fn late_lockers(h: &RowHdr, me: u32) -> Vec<(u32, Mode)> {
    let m = h.infomask();
    if m & HEAP_XMAX_INVALID != 0 || m & HEAP_XMAX_IS_MULTI == 0 {
        return Vec::new();
    }
    members(h.xmax, false)
        .into_iter()
        .filter(|&(x, st)| {
            x != me && !status_is_update(st) && !mvcc::is_current(x) && mvcc::in_progress(x)
        })
        .map(|(x, st)| (x, status_mode(st)))
        .collect()
}
