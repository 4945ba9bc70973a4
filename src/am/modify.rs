//! Row modifications and TID-based access: INSERT (single, COPY's multi-insert, ON CONFLICT's
//! speculative insert), DELETE, UPDATE (HOT-style when no indexed column changes: the new
//! version is heap-only and reached through the old one, so no new index entries), row locks,
//! and fetching / validating row versions by TID. Values are TOASTed as heap does (see
//! `storage::row`); the concurrency protocol is heap's (see `txn::locking`).
use super::{decode_tid, decode_tid_parts, tid_of};
use crate::ffi;
use crate::ffi::guard::{self, boundary, raw};
use crate::storage::block::{F_HAS_EXTERNAL, F_HEAP_ONLY, ST_NORMAL};
use crate::storage::modify as storage;
use crate::storage::row::{self, Toast};
use crate::storage::tabledir::{self, TableRef};
use crate::txn::locking::{self, Outcome, EXCL, NO_KEY_EXCL};
use crate::txn::mvcc;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::c_int;

thread_local! {
    /// Set while `am::compact` moves rows: updates then make a new version with new index
    /// entries outside the old version's block (never HOT).
    static MOVING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes this backend's updates move rows (see [`MOVING`]) until called with false.
pub fn set_moving(on: bool) {
    MOVING.with(|m| m.set(on));
}

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
        let options = if spec.is_some() {
            pg_sys::HEAP_INSERT_SPECULATIVE as i32
        } else {
            0
        };
        let prepared = row::prepare(rel, t, slot, Toast::Now(options), false);
        ffi::CheckForSerializableConflictIn(rel, std::ptr::null_mut(), pg_sys::InvalidBlockNumber);
        let xid = my_xid();
        let (lb, s) = storage::insert(rel, t, &prepared, xid, cid, 0, spec, None);
        (*slot).tts_tableOid = (*rel).rd_id;
        (*slot).tts_tid = tid_of(lb, s);
        // RETURNING xmin/xmax/cmin see the new version's header, as with heap
        crate::storage::slot::set_sys(slot, xid, 0, cid);
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
    boundary(|| unsafe {
        insert_one(rel, slot, cid, None);
        pg_sys::pgstat_count_heap_insert(rel, 1);
    })
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
    boundary(|| unsafe {
        // as heap_multi_insert: every row prepared (and TOASTed) first, one serializable
        // conflict check for the relation, then the rows placed a block at a time
        let n = nslots as usize;
        let t = tabledir::resolve(rel);
        let prepared: Vec<row::Prepared> = (0..n)
            .map(|i| row::prepare(rel, t, *slots.add(i), Toast::Now(0), false))
            .collect();
        ffi::CheckForSerializableConflictIn(rel, std::ptr::null_mut(), pg_sys::InvalidBlockNumber);
        let xid = my_xid();
        let mut tids = Vec::with_capacity(n);
        storage::insert_many(rel, t, &prepared, xid, cid, &mut tids);
        for (i, &(lb, s)) in tids.iter().enumerate() {
            let slot = *slots.add(i);
            (*slot).tts_tableOid = (*rel).rd_id;
            (*slot).tts_tid = tid_of(lb, s);
            crate::storage::slot::set_sys(slot, xid, 0, cid);
        }
        pg_sys::pgstat_count_heap_insert(rel, nslots as i64);
    })
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
    boundary(|| unsafe {
        insert_one(rel, slot, cid, Some(spec_token));
        pg_sys::pgstat_count_heap_insert(rel, 1);
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_complete_speculative(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    _spec_token: u32,
    succeeded: bool,
) {
    boundary(|| unsafe {
        let t = tabledir::resolve(rel);
        let Some((lb, s)) = decode_tid(&(*slot).tts_tid) else {
            return;
        };
        let mut external = Vec::new();
        if let Some(l) = storage::lock(t, lb, true) {
            if !succeeded && l.row(s).has_flag(F_HAS_EXTERNAL) {
                external = row::external_values(l.blk, s);
            }
            storage::finish_speculative(&l, s, succeeded);
        }
        // like heap_abort_speculative: the out-of-line values go at once
        row::delete_external(rel, &external, true);
    })
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
    boundary(|| unsafe {
        let t = tabledir::resolve(rel);
        let Some((lb, s)) = decode_tid(tid) else {
            bad_tid(rel)
        };
        ffi::CheckForSerializableConflictIn(rel, tid, ffi::tid_page(&*tid));
        match locking::acquire_for_write(rel, t, lb, s, cid, EXCL, true, wait, tmfd) {
            Outcome::Ok(a) => {
                let l = &a.l;
                let h = l.row(s);
                if crosscheck_fails(h, crosscheck) {
                    locking::fill_tmfd(h, *tid, pg_sys::TM_Result::TM_Updated, tmfd);
                    return pg_sys::TM_Result::TM_Updated;
                }
                pg_sys::MultiXactIdSetOldestMember();
                let (x, bits, _) = locking::compute_new_xmax(
                    h.xmax,
                    h.infomask(),
                    h.has_flag(crate::storage::block::F_KEYS_UPDATED),
                    my_xid(),
                    EXCL,
                    true,
                );
                storage::set_xmax(l, s, x, bits, true, Some(mvcc::adjust_cmax(h, cid)));
                if changing_part {
                    // the row moved to another partition: concurrent updaters must error out
                    storage::mark_moved(l, s);
                }
                let external = if h.has_flag(F_HAS_EXTERNAL) {
                    row::external_values(l.blk, s)
                } else {
                    Vec::new()
                };
                drop(a);
                // heap_toast_delete: the out-of-line values are deleted with the row
                row::delete_external(rel, &external, false);
                pg_sys::pgstat_count_heap_delete(rel);
                pg_sys::TM_Result::TM_Ok
            }
            Outcome::Fail(pg_sys::TM_Result::TM_Invisible) => invisible_error("delete"),
            Outcome::Fail(r) => r,
        }
    })
}

/// `bms_is_member` read in place (PostgreSQL 15's `Bitmapset`: `nwords`, then 64-bit words):
/// called twice per column of every UPDATE, the FFI call's error guard cost more than the test.
unsafe fn bms_has(set: *const pg_sys::Bitmapset, x: i32) -> bool {
    if set.is_null() || x < 0 {
        return false;
    }
    let w = (x / 64) as usize;
    unsafe {
        if w >= (*set).nwords as usize {
            return false;
        }
        let word: u64 = *(*set).words.as_ptr().add(w);
        (word >> (x % 64)) & 1 != 0
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
        if bms_has(hot_attrs, 0 - pg_sys::FirstLowInvalidHeapAttributeNumber) {
            hot = false;
        }
        for i in 0..new.cells.len() {
            let bit = (i as i32 + 1) - pg_sys::FirstLowInvalidHeapAttributeNumber;
            let in_hot = bms_has(hot_attrs, bit);
            let in_key = bms_has(key_attrs, bit);
            if !in_hot && !in_key {
                continue;
            }
            if !row::value_equals(l.blk, s, i, new) {
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

/// The old version as a heap tuple (for the toaster, which compares old and new values to find
/// the out-of-line values the update no longer needs). Caller holds the block lock.
unsafe fn old_heap_tuple(rel: pg_sys::Relation, l: &storage::Locked, s: u32) -> pg_sys::HeapTuple {
    unsafe {
        let slot = pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, &pg_sys::TTSOpsVirtual);
        row::read_row(l.blk, s, slot);
        let tup = pg_sys::heap_form_tuple((*rel).rd_att, (*slot).tts_values, (*slot).tts_isnull);
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        tup
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
    boundary(|| unsafe {
        let t = tabledir::resolve(rel);
        let Some((lb, s)) = decode_tid(otid) else {
            bad_tid(rel)
        };
        // values as the executor gave them; TOAST runs once the old version is ours
        let mut prepared = row::prepare(rel, t, slot, Toast::Defer, false);
        ffi::CheckForSerializableConflictIn(rel, otid, ffi::tid_page(&*otid));
        let (hot, key_changed) = {
            let Some(l) = storage::lock(t, lb, false) else {
                bad_tid(rel)
            };
            if !storage::slot_in_range(&l, s) || l.row(s).state() != ST_NORMAL {
                bad_tid(rel);
            }
            let (hot, key_changed) = modified_columns(rel, &l, s, &prepared);
            (hot && !MOVING.with(|m| m.get()), key_changed)
        };
        let mode = if key_changed { EXCL } else { NO_KEY_EXCL };
        *lockmode = mode;
        pg_sys::MultiXactIdSetOldestMember();
        let xid = my_xid();
        // marking the old version, placing the new one (often in the same block) and linking
        // them: one WAL record for the old version's block (`changes::defer`)
        let mut defer = crate::storage::modify::DeferLog::new(t, lb);
        let (_tuple_lock, carry, oldtup, old_external) =
            match locking::acquire_for_write(rel, t, lb, s, cid, mode, false, wait, tmfd) {
                Outcome::Ok(a) => {
                    let l = &a.l;
                    let h = l.row(s);
                    if crosscheck_fails(h, crosscheck) {
                        locking::fill_tmfd(h, *otid, pg_sys::TM_Result::TM_Updated, tmfd);
                        return pg_sys::TM_Result::TM_Updated;
                    }
                    let carry = locking::xmax_for_new_version(h, &a);
                    // keys_updated as heap computes it: a lock we already hold in a stronger mode
                    // (ON CONFLICT's update lock) carries over to the update
                    let (x, bits, keys) = locking::compute_new_xmax(
                        h.xmax,
                        h.infomask(),
                        h.has_flag(crate::storage::block::F_KEYS_UPDATED),
                        xid,
                        mode,
                        true,
                    );
                    storage::set_xmax(l, s, x, bits, keys, Some(mvcc::adjust_cmax(h, cid)));
                    let old_external = h.has_flag(F_HAS_EXTERNAL);
                    let oldtup = if old_external || prepared.needs_toast {
                        old_heap_tuple(rel, l, s)
                    } else {
                        std::ptr::null_mut()
                    };
                    (a.tuple_lock, carry, oldtup, old_external)
                }
                Outcome::Fail(pg_sys::TM_Result::TM_Invisible) => invisible_error("update"),
                Outcome::Fail(r) => return r,
            };
        if !oldtup.is_null() {
            // the old version is marked as being updated by us: run the toaster like heap_update
            prepared = row::prepare(rel, t, slot, Toast::WithOld(oldtup), old_external);
        }
        // The old version is marked; place the new one, then link old -> new. When the new
        // version lands in the old one's block (the common case), the link, the lockers' carried
        // locks and the slot's system columns are done in the insertion's lock session, whose
        // WAL record then also holds the kept mark (`defer` ends first; a new version in another
        // block leaves the mark kept for the link's session below).
        defer.finish();
        let mut linked = false;
        let (nb, ns) = storage::insert_then(
            rel,
            t,
            &prepared,
            xid,
            cid,
            if hot { F_HEAP_ONLY } else { 0 },
            None,
            hot.then_some(lb),
            |l, ns| {
                if let Some((cx, cbits)) = carry {
                    // lockers still around (FK checks) keep their lock on the new version
                    storage::set_xmax(l, ns, cx, cbits, false, None);
                }
                if l.lb == lb {
                    // the WAL record may copy the new version's unchanged values from the old
                    crate::storage::changes::note_copy(l.ab, ns, s);
                    for (x, md) in link_old(l, s, lb, ns, hot, xid) {
                        carry_late_locker(l, ns, x, md);
                    }
                    crate::storage::slot::set_sysattrs(slot, l.row(ns));
                    linked = true;
                }
            },
        );
        let new_tid = tid_of(nb, ns);
        if !linked {
            let late = match storage::lock(t, lb, true) {
                Some(l) => link_old(&l, s, nb, ns, hot, xid),
                None => Vec::new(),
            };
            if !late.is_empty() {
                if let Some(l) = storage::lock(t, nb, true) {
                    for (x, md) in late {
                        carry_late_locker(&l, ns, x, md);
                    }
                }
            }
            if let Some(l) = storage::lock(t, nb, false) {
                crate::storage::slot::set_sysattrs(slot, l.row(ns));
            }
        }
        (*slot).tts_tableOid = (*rel).rd_id;
        (*slot).tts_tid = new_tid;
        *update_indexes = !hot;
        pg_sys::pgstat_count_heap_update(rel, hot);
        pg_sys::TM_Result::TM_Ok
    })
}

/// Links old version `s` of the locked block to the new version (nb, ns); returns the lockers
/// that locked the old version meanwhile and must keep their lock on the new one.
fn link_old(
    l: &storage::Locked,
    s: u32,
    nb: u32,
    ns: u32,
    hot: bool,
    xid: u32,
) -> Vec<(u32, locking::Mode)> {
    let new_tid = tid_of(nb, ns);
    storage::link_next(l, s, (ffi::tid_page(&new_tid), new_tid.ip_posid), hot);
    locking::late_lockers(l.row(s), xid)
}

/// A locker that took its lock on an updated row's old version while the update was placing the
/// new one (`locking::late_lockers`) keeps it on new version `ns` of the locked block.
fn carry_late_locker(l: &storage::Locked, ns: u32, x: u32, md: locking::Mode) {
    let h = l.row(ns);
    let (nx, bits, keys) = locking::compute_new_xmax(
        h.xmax,
        h.infomask(),
        h.has_flag(crate::storage::block::F_KEYS_UPDATED),
        x,
        md,
        false,
    );
    storage::set_xmax(l, ns, nx, bits, keys, None);
}

/// Stores version (lb, s) into `slot` (for tuple_lock's caller, on success and failure alike).
unsafe fn fetch_into(
    rel: pg_sys::Relation,
    t: TableRef,
    lb: u32,
    s: u32,
    slot: *mut pg_sys::TupleTableSlot,
) {
    unsafe {
        if let Some(l) = storage::lock(t, lb, false) {
            if storage::slot_in_range(&l, s) && l.row(s).state() == ST_NORMAL {
                super::store_row(rel, l.blk, lb, s, slot);
            }
        }
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
    boundary(|| unsafe {
        use pg_sys::TM_Result::*;
        let t = tabledir::resolve(rel);
        let Some((mut lb, mut s)) = decode_tid(tid) else {
            bad_tid(rel)
        };
        let find_last = flags as u32 & pg_sys::TUPLE_LOCK_FLAG_FIND_LAST_VERSION != 0;
        let follow_updates = flags as u32 & pg_sys::TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS != 0;
        (*tmfd).traversed = false;
        'retry: loop {
            let res =
                locking::lock_tuple(rel, t, lb, s, cid, mode, wait_policy, follow_updates, tmfd);
            if res == TM_Updated && find_last {
                // heapam_tuple_lock: look at the updated version(s)
                let mut next = (*tmfd).ctid;
                let mut prior = (*tmfd).xmax.into_inner();
                (*tmfd).traversed = true;
                loop {
                    if ffi::tid_page(&next) == pg_sys::InvalidBlockNumber
                        && next.ip_posid == crate::storage::block::MOVED_OFF
                    {
                        moved_error();
                    }
                    let Some((nlb, ns)) = decode_tid_parts(ffi::tid_page(&next), next.ip_posid)
                    else {
                        return TM_Deleted;
                    };
                    let Some(l) = storage::lock(t, nlb, false) else {
                        return TM_Deleted;
                    };
                    if !storage::slot_in_range(&l, ns) || l.row(ns).state() != ST_NORMAL {
                        return TM_Deleted;
                    }
                    let h = l.row(ns);
                    if h.xmin != prior {
                        return TM_Deleted;
                    }
                    let mut dirty: pg_sys::SnapshotData = std::mem::zeroed();
                    dirty.snapshot_type = pg_sys::SnapshotType::SNAPSHOT_DIRTY;
                    if mvcc::visible(h, &mut dirty) {
                        if ffi::xid_valid(dirty.xmin.into_inner()) {
                            ereport!(
                                PgLogLevel::ERROR,
                                PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                                format!(
                                    "t_xmin {} is uncommitted in tuple to be updated in table \"{}\"",
                                    dirty.xmin.into_inner(),
                                    ffi::rel_name(rel)
                                )
                            );
                        }
                        let xwait = dirty.xmax.into_inner();
                        if ffi::xid_valid(xwait) {
                            drop(l);
                            let mut ntid = tid_of(nlb, ns);
                            let ntidp: *mut pg_sys::ItemPointerData = &mut ntid;
                            match wait_policy {
                                pg_sys::LockWaitPolicy::LockWaitBlock => {
                                    guard::catch(|| {
                                        raw::XactLockTableWait(
                                            ffi::xid(xwait),
                                            rel,
                                            ntidp,
                                            pg_sys::XLTW_Oper::XLTW_FetchUpdated,
                                        )
                                    });
                                }
                                _ => {
                                    if !guard::catch(|| {
                                        raw::ConditionalXactLockTableWait(ffi::xid(xwait))
                                    }) {
                                        if wait_policy == pg_sys::LockWaitPolicy::LockWaitError {
                                            ereport!(
                                                PgLogLevel::ERROR,
                                                PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
                                                format!(
                                                    "could not obtain lock on row in relation \"{}\"",
                                                    ffi::rel_name(rel)
                                                )
                                            );
                                        }
                                        return TM_WouldBlock;
                                    }
                                }
                            }
                            continue;
                        }
                        if mvcc::is_current(prior) && mvcc::cmin(h) >= cid {
                            (*tmfd).xmax = ffi::xid(prior);
                            (*tmfd).cmax = mvcc::cmin(h);
                            return TM_SelfModified;
                        }
                        // a live version: lock it (the caller re-checks the row there)
                        lb = nlb;
                        s = ns;
                        *tid = tid_of(lb, s);
                        continue 'retry;
                    }
                    // not visible even dirty: updated or deleted by a committed transaction (or
                    // us); a row moved to another partition cannot be followed
                    if h.is_moved() {
                        moved_error();
                    }
                    match h.next() {
                        Some((p, o)) => {
                            prior = mvcc::update_xid(h);
                            ffi::set_tid(&mut next, p, o);
                        }
                        None => return TM_Deleted,
                    }
                }
            }
            // like heapam_tuple_lock, the slot holds the row version even on failure (ON CONFLICT
            // reads its xmin)
            fetch_into(rel, t, lb, s, slot);
            return res;
        }
    })
}

fn moved_error() -> ! {
    ereport!(
        PgLogLevel::ERROR,
        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
        "tuple to be locked was already moved to another partition due to concurrent update"
    );
    unreachable!()
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_fetch_row_version(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    boundary(|| unsafe {
        let t = tabledir::resolve(rel);
        if let Some(mut im) = super::snapread::image_scan(rel, t, snapshot) {
            if let Some((lb, s)) = decode_tid(tid) {
                if super::snapread::fetch(rel, &mut im, lb, s, slot) {
                    (*slot).tts_tid = *tid;
                    return true;
                }
            }
            ffi::exec_clear_tuple(slot);
            return false;
        }
        super::snapread::live_read(snapshot);
        if let Some((lb, s)) = decode_tid(tid) {
            if let Some(l) = storage::lock(t, lb, false) {
                if storage::slot_in_range(&l, s) && l.row(s).state() == ST_NORMAL {
                    let h = l.row(s);
                    let vis = mvcc::visible(h, snapshot);
                    super::check_conflict_out(rel, h, vis, snapshot);
                    if vis {
                        super::predicate_lock_row(rel, lb, s, h, snapshot);
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
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_tid_valid(
    scan: pg_sys::TableScanDesc,
    tid: pg_sys::ItemPointer,
) -> bool {
    boundary(|| {
        let st = super::scan::state(scan);
        match decode_tid(tid) {
            Some((lb, _)) => lb < tabledir::nlocal(st.t),
            None => false,
        }
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_get_latest_tid(
    scan: pg_sys::TableScanDesc,
    tid: pg_sys::ItemPointer,
) {
    boundary(|| unsafe {
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
            if m & mvcc::HEAP_XMAX_INVALID != 0 || mvcc::xmax_is_locked_only(m) {
                return;
            }
            let Some((p, o)) = h.next() else {
                return;
            };
            let Some(next) = decode_tid_parts(p, o) else {
                return;
            };
            prior = Some(mvcc::update_xid(h));
            cur = next;
        }
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_satisfies_snapshot(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    snapshot: pg_sys::Snapshot,
) -> bool {
    boundary(|| unsafe {
        let t = tabledir::resolve(rel);
        let Some((lb, s)) = decode_tid(&(*slot).tts_tid) else {
            return false;
        };
        if let Some(mut im) = super::snapread::image_scan(rel, t, snapshot) {
            return match im.cached(lb) {
                Some((blk, hwm)) => {
                    s < hwm
                        && blk.row(s).state() == ST_NORMAL
                        && mvcc::visible(blk.row(s), im.image.snap)
                }
                None => false,
            };
        }
        storage::lock(t, lb, false)
            .map(|l| {
                storage::slot_in_range(&l, s)
                    && l.row(s).state() == ST_NORMAL
                    && mvcc::visible(l.row(s), snapshot)
            })
            .unwrap_or(false)
    })
}
