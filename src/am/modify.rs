//! Row modifications and TID-based access: INSERT (single, COPY's multi-insert, ON CONFLICT's
//! speculative insert), DELETE, UPDATE (HOT-style when no indexed column changes: the new
//! version is heap-only and reached through the old one, so no new index entries), row locks,
//! and fetching / validating row versions by TID.
use super::{decode_tid, tid_of};
use crate::ffi;
use crate::storage::arena;
use crate::storage::block::{F_HEAP_ONLY, ST_NORMAL};
use crate::storage::modify as storage;
use crate::storage::row;
use crate::storage::tabledir;
use crate::txn::locking::{self, Acquired, EXCL, NO_KEY_EXCL};
use crate::txn::mvcc::{self, HEAP_XMAX_INVALID};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::c_int;

fn my_xid() -> u32 {
    unsafe { pg_sys::GetCurrentTransactionId().into_inner() }
}

unsafe fn insert_one(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    cid: u32,
    spec: Option<u32>,
) {
    unsafe {
        let t = tabledir::resolve(rel);
        let prepared = row::prepare(slot);
        ffi::CheckForSerializableConflictIn(rel, std::ptr::null_mut(), pg_sys::InvalidBlockNumber);
        let (b, s) = storage::insert(rel, t, &prepared, my_xid(), cid, 0, spec, None);
        (*slot).tts_tableOid = (*rel).rd_id;
        (*slot).tts_tid = tid_of(b, s);
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_insert(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _options: c_int,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    unsafe {
        insert_one(rel, slot, cid, None);
        pg_sys::pgstat_count_heap_insert(rel, 1);
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn multi_insert(
    rel: pg_sys::Relation,
    slots: *mut *mut pg_sys::TupleTableSlot,
    nslots: c_int,
    cid: pg_sys::CommandId,
    _options: c_int,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    unsafe {
        for i in 0..nslots as usize {
            insert_one(rel, *slots.add(i), cid, None);
        }
        pg_sys::pgstat_count_heap_insert(rel, nslots as i64);
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_insert_speculative(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _options: c_int,
    _bistate: *mut pg_sys::BulkInsertStateData,
    spec_token: u32,
) {
    unsafe {
        insert_one(rel, slot, cid, Some(spec_token));
        pg_sys::pgstat_count_heap_insert(rel, 1);
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_complete_speculative(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    _spec_token: u32,
    succeeded: bool,
) {
    unsafe {
        let t = tabledir::resolve(rel);
        let Some((b, s)) = decode_tid(&(*slot).tts_tid) else {
            return;
        };
        if let Some(l) = storage::lock(t, b, true) {
            storage::finish_speculative(&l, s, succeeded);
        }
    }
}

fn invisible_error(what: &str) -> ! {
    ereport!(
        PgLogLevel::ERROR,
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("attempted to {what} invisible tuple")
    );
    unreachable!()
}

fn bad_tid(rel: pg_sys::Relation) -> ! {
    ereport!(
        PgLogLevel::ERROR,
        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        format!("invalid TID for scoot table \"{}\"", unsafe {
            ffi::rel_name(rel)
        })
    );
    unreachable!()
}

/// Crosscheck snapshot failure (RI checks under REPEATABLE READ / SERIALIZABLE).
fn crosscheck_fails(h: &crate::storage::block::RowHdr, crosscheck: pg_sys::Snapshot) -> bool {
    !crosscheck.is_null() && !mvcc::satisfies_mvcc(h, crosscheck)
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_delete(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    cid: pg_sys::CommandId,
    _snapshot: pg_sys::Snapshot,
    crosscheck: pg_sys::Snapshot,
    wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    changing_part: bool,
) -> pg_sys::TM_Result::Type {
    unsafe {
        let t = tabledir::resolve(rel);
        let Some((b, s)) = decode_tid(tid) else {
            bad_tid(rel)
        };
        ffi::CheckForSerializableConflictIn(rel, tid, ffi::tid_page(&*tid));
        let policy = if wait {
            pg_sys::LockWaitPolicy::LockWaitBlock
        } else {
            pg_sys::LockWaitPolicy::LockWaitSkip
        };
        match locking::acquire(
            rel,
            t,
            b,
            s,
            cid,
            EXCL,
            policy,
            pg_sys::XLTW_Oper::XLTW_Delete,
            tmfd,
        ) {
            Acquired::Ok(l, _tuple_lock) => {
                let h = l.row(s);
                if crosscheck_fails(h, crosscheck) {
                    locking::fill_tmfd(h, *tid, pg_sys::TM_Result::TM_Updated, tmfd);
                    return pg_sys::TM_Result::TM_Updated;
                }
                pg_sys::MultiXactIdSetOldestMember();
                let (x, bits, _) = locking::compute_new_xmax(h, my_xid(), EXCL, true);
                storage::set_xmax(&l, s, x, bits, true, Some(cid));
                if changing_part {
                    // the row moved to another partition: concurrent updaters must error out
                    storage::link_next(
                        &l,
                        s,
                        arena::NO_BLOCK,
                        crate::storage::block::MOVED_SLOT,
                        false,
                    );
                }
                drop(l);
                pg_sys::pgstat_count_heap_delete(rel);
                pg_sys::TM_Result::TM_Ok
            }
            Acquired::Fail(pg_sys::TM_Result::TM_Invisible) => invisible_error("delete"),
            Acquired::Fail(pg_sys::TM_Result::TM_WouldBlock) => pg_sys::TM_Result::TM_BeingModified,
            Acquired::Fail(r) => r,
        }
    }
}

/// Compares the old version with the new values on indexed columns: (no indexed column changed,
/// a key column changed).
unsafe fn modified_columns(
    rel: pg_sys::Relation,
    l: &storage::Locked,
    s: u32,
    new: &row::Prepared,
) -> (bool, bool) {
    unsafe {
        if !(*(*rel).rd_rel).relhasindex {
            // no index to spare: plain updates let VACUUM reclaim the old version outright
            return (false, false);
        }
        let hot_attrs = pg_sys::RelationGetIndexAttrBitmap(
            rel,
            pg_sys::IndexAttrBitmapKind::INDEX_ATTR_BITMAP_ALL,
        );
        let key_attrs = pg_sys::RelationGetIndexAttrBitmap(
            rel,
            pg_sys::IndexAttrBitmapKind::INDEX_ATTR_BITMAP_KEY,
        );
        let mut hot = true;
        let mut key_changed = false;
        // a whole-row reference in an index expression blocks HOT
        if pg_sys::bms_is_member(0 - pg_sys::FirstLowInvalidHeapAttributeNumber, hot_attrs) {
            hot = false;
        }
        for (i, v) in new.vals.iter().enumerate() {
            let bit = (i as i32 + 1) - pg_sys::FirstLowInvalidHeapAttributeNumber;
            let in_hot = pg_sys::bms_is_member(bit, hot_attrs);
            let in_key = pg_sys::bms_is_member(bit, key_attrs);
            if !in_hot && !in_key {
                continue;
            }
            if !row::value_equals(l.blk, s, i, v) {
                if in_hot {
                    hot = false;
                }
                if in_key {
                    key_changed = true;
                }
            }
        }
        pg_sys::bms_free(hot_attrs);
        pg_sys::bms_free(key_attrs);
        (hot, key_changed)
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_update(
    rel: pg_sys::Relation,
    otid: pg_sys::ItemPointer,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _snapshot: pg_sys::Snapshot,
    crosscheck: pg_sys::Snapshot,
    wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    lockmode: *mut pg_sys::LockTupleMode::Type,
    update_indexes: *mut bool,
) -> pg_sys::TM_Result::Type {
    unsafe {
        let t = tabledir::resolve(rel);
        let Some((b, s)) = decode_tid(otid) else {
            bad_tid(rel)
        };
        let prepared = row::prepare(slot);
        ffi::CheckForSerializableConflictIn(rel, otid, ffi::tid_page(&*otid));
        let (hot, key_changed) = {
            let Some(l) = storage::lock(t, b, false) else {
                bad_tid(rel)
            };
            if !storage::slot_in_range(&l, s) || l.row(s).state() != ST_NORMAL {
                bad_tid(rel);
            }
            modified_columns(rel, &l, s, &prepared)
        };
        let mode = if key_changed { EXCL } else { NO_KEY_EXCL };
        *lockmode = mode;
        let policy = if wait {
            pg_sys::LockWaitPolicy::LockWaitBlock
        } else {
            pg_sys::LockWaitPolicy::LockWaitSkip
        };
        let xid = my_xid();
        let (_tuple_lock, carry) = match locking::acquire(
            rel,
            t,
            b,
            s,
            cid,
            mode,
            policy,
            pg_sys::XLTW_Oper::XLTW_Update,
            tmfd,
        ) {
            Acquired::Ok(l, tl) => {
                let h = l.row(s);
                if crosscheck_fails(h, crosscheck) {
                    locking::fill_tmfd(h, *otid, pg_sys::TM_Result::TM_Updated, tmfd);
                    return pg_sys::TM_Result::TM_Updated;
                }
                pg_sys::MultiXactIdSetOldestMember();
                let carry = locking::lockers_to_carry(h);
                let (x, bits, _) = locking::compute_new_xmax(h, xid, mode, true);
                storage::set_xmax(&l, s, x, bits, key_changed, Some(cid));
                (tl, carry)
            }
            Acquired::Fail(pg_sys::TM_Result::TM_Invisible) => invisible_error("update"),
            Acquired::Fail(pg_sys::TM_Result::TM_WouldBlock) => {
                return pg_sys::TM_Result::TM_BeingModified
            }
            Acquired::Fail(r) => return r,
        };
        // the old version is marked; place the new one, then link old -> new
        let (nb, ns) = storage::insert(
            rel,
            t,
            &prepared,
            xid,
            cid,
            if hot { F_HEAP_ONLY } else { 0 },
            None,
            hot.then_some(b),
        );
        if let Some((cx, cbits)) = carry {
            // still-running key-share lockers (FK checks) keep their lock on the new version
            if let Some(l) = storage::lock(t, nb, true) {
                storage::set_xmax(&l, ns, cx, cbits, false, None);
            }
        }
        let late = match storage::lock(t, b, true) {
            Some(l) => {
                storage::link_next(&l, s, nb, ns, hot);
                locking::late_lockers(l.row(s), xid)
            }
            None => Vec::new(),
        };
        if !late.is_empty() {
            if let Some(l) = storage::lock(t, nb, true) {
                for (x, md) in late {
                    let h = l.row(ns);
                    let (nx, bits, keys) = locking::compute_new_xmax(h, x, md, false);
                    storage::set_xmax(&l, ns, nx, bits, keys, None);
                }
            }
        }
        (*slot).tts_tableOid = (*rel).rd_id;
        (*slot).tts_tid = tid_of(nb, ns);
        *update_indexes = !hot;
        pg_sys::pgstat_count_heap_update(rel, hot);
        pg_sys::TM_Result::TM_Ok
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_lock(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    _snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    mode: pg_sys::LockTupleMode::Type,
    wait_policy: pg_sys::LockWaitPolicy::Type,
    flags: u8,
    tmfd: *mut pg_sys::TM_FailureData,
) -> pg_sys::TM_Result::Type {
    unsafe {
        let t = tabledir::resolve(rel);
        let Some((mut b, mut s)) = decode_tid(tid) else {
            bad_tid(rel)
        };
        let follow = flags as u32 & pg_sys::TUPLE_LOCK_FLAG_FIND_LAST_VERSION != 0;
        let mut traversed = false;
        let xid = my_xid();
        loop {
            match locking::acquire(
                rel,
                t,
                b,
                s,
                cid,
                mode,
                wait_policy,
                pg_sys::XLTW_Oper::XLTW_Lock,
                tmfd,
            ) {
                Acquired::Ok(l, _tl) => {
                    let h = l.row(s);
                    pg_sys::MultiXactIdSetOldestMember();
                    // an update of this version still in progress: the lock must follow it
                    let m = h.infomask();
                    let follow_update =
                        flags as u32 & pg_sys::TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS != 0
                            && m & mvcc::HEAP_XMAX_INVALID == 0
                            && !mvcc::xmax_is_locked_only(m)
                            && h.has_next()
                            && h.next_slot != crate::storage::block::MOVED_SLOT;
                    let next = (h.next_block, h.next_slot, mvcc::update_xid(h));
                    let (x, bits, keys) = locking::compute_new_xmax(h, xid, mode, false);
                    let unchanged = x == h.xmax && h.infomask() & mvcc::HEAP_XMAX_BITS == bits;
                    if !unchanged {
                        storage::set_xmax(&l, s, x, bits, keys, None);
                    }
                    if follow_update {
                        let rowslot_b = b;
                        let rowslot_s = s;
                        drop(l);
                        locking::lock_newer_versions(rel, t, next.0, next.1, next.2, mode, xid);
                        let Some(l) = storage::lock(t, rowslot_b, false) else {
                            return pg_sys::TM_Result::TM_Deleted;
                        };
                        super::store_row(rel, l.blk, rowslot_b, rowslot_s, slot);
                        if !tmfd.is_null() {
                            (*tmfd).traversed = traversed;
                        }
                        return pg_sys::TM_Result::TM_Ok;
                    }
                    super::store_row(rel, l.blk, b, s, slot);
                    if !tmfd.is_null() {
                        (*tmfd).traversed = traversed;
                    }
                    return pg_sys::TM_Result::TM_Ok;
                }
                Acquired::Fail(pg_sys::TM_Result::TM_Updated) if follow => {
                    if ffi::tid_page(&(*tmfd).ctid) == pg_sys::InvalidBlockNumber {
                        ereport!(
                            PgLogLevel::ERROR,
                            PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                            "tuple to be locked was already moved to another partition due to concurrent update"
                        );
                    }
                    let prior = (*tmfd).xmax.into_inner();
                    let Some((nb, ns)) = decode_tid(&(*tmfd).ctid) else {
                        return pg_sys::TM_Result::TM_Deleted;
                    };
                    // the newer version must be the one the update created
                    let ok = storage::lock(t, nb, false)
                        .map(|l| {
                            storage::slot_in_range(&l, ns)
                                && l.row(ns).state() == ST_NORMAL
                                && l.row(ns).xmin == prior
                        })
                        .unwrap_or(false);
                    if !ok {
                        return pg_sys::TM_Result::TM_Deleted;
                    }
                    b = nb;
                    s = ns;
                    // like heapam_tuple_lock: the caller retries on the version we lock
                    *tid = tid_of(b, s);
                    traversed = true;
                    (*tmfd).traversed = true;
                }
                Acquired::Fail(r) => {
                    if !tmfd.is_null() {
                        (*tmfd).traversed = traversed;
                        if r == pg_sys::TM_Result::TM_Updated
                            && ffi::tid_page(&(*tmfd).ctid) == pg_sys::InvalidBlockNumber
                        {
                            ereport!(
                                PgLogLevel::ERROR,
                                PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                                "tuple to be locked was already moved to another partition due to concurrent update"
                            );
                        }
                    }
                    // like heapam_tuple_lock, the slot holds the row version even on failure
                    // (ON CONFLICT reads its xmin)
                    if let Some(l) = storage::lock(t, b, false) {
                        if storage::slot_in_range(&l, s) && l.row(s).state() == ST_NORMAL {
                            super::store_row(rel, l.blk, b, s, slot);
                        }
                    }
                    return r;
                }
            }
        }
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_fetch_row_version(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    unsafe {
        let t = tabledir::resolve(rel);
        if let Some((b, s)) = decode_tid(tid) {
            if let Some(l) = storage::lock(t, b, false) {
                if storage::slot_in_range(&l, s) && l.row(s).state() == ST_NORMAL {
                    let h = l.row(s);
                    let vis = mvcc::visible(h, snapshot);
                    super::check_conflict_out(rel, h, vis, snapshot);
                    if vis {
                        super::predicate_lock_row(rel, b, s, h, snapshot);
                        row::read_row(l.blk, s, slot);
                        (*slot).tts_tid = *tid;
                        (*slot).tts_tableOid = (*rel).rd_id;
                        return true;
                    }
                }
            }
        }
        ffi::exec_clear_tuple(slot);
        false
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_tid_valid(
    scan: pg_sys::TableScanDesc,
    tid: pg_sys::ItemPointer,
) -> bool {
    let st = super::scan::state(scan);
    match decode_tid(tid) {
        Some((b, s)) => storage::lock(st.t, b, false)
            .map(|l| storage::slot_in_range(&l, s))
            .unwrap_or(false),
        None => false,
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_get_latest_tid(
    scan: pg_sys::TableScanDesc,
    tid: pg_sys::ItemPointer,
) {
    unsafe {
        let st = super::scan::state(scan);
        let snap = (*scan).rs_snapshot;
        let Some(mut cur) = decode_tid(tid) else {
            return;
        };
        let mut prior: Option<u32> = None;
        for _ in 0..1_000_000 {
            let Some(l) = storage::lock(st.t, cur.0, false) else {
                return;
            };
            if !storage::slot_in_range(&l, cur.1) || l.row(cur.1).state() != ST_NORMAL {
                return;
            }
            let h = l.row(cur.1);
            if let Some(p) = prior {
                if h.xmin != p {
                    return;
                }
            }
            if mvcc::visible(h, snap) {
                *tid = tid_of(cur.0, cur.1);
            }
            let m = h.infomask();
            if m & HEAP_XMAX_INVALID != 0 || mvcc::xmax_is_locked_only(m) || !h.has_next() {
                return;
            }
            prior = Some(mvcc::update_xid(h));
            cur = (h.next_block, h.next_slot);
        }
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_satisfies_snapshot(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    snapshot: pg_sys::Snapshot,
) -> bool {
    unsafe {
        let t = tabledir::resolve(rel);
        let Some((b, s)) = decode_tid(&(*slot).tts_tid) else {
            return false;
        };
        storage::lock(t, b, false)
            .map(|l| {
                storage::slot_in_range(&l, s)
                    && l.row(s).state() == ST_NORMAL
                    && mvcc::visible(l.row(s), snapshot)
            })
            .unwrap_or(false)
    }
}
