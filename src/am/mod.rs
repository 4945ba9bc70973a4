//! The `scoot` table access method: the PG15 `TableAmRoutine` and its callbacks, one file per
//! concern (modelled on PostgreSQL's tableam.h grouping):
//! - `scan`   — sequential, parallel, TID-range, bitmap, TABLESAMPLE and ANALYZE scans
//! - `index`  — index fetches (version chains), chain pruning, index build/validate, index delete
//! - `modify` — insert, multi-insert, speculative insert, delete, update, row locks, TID ops
//! - `ddl`    — new relfilenodes, truncate, copy (SET TABLESPACE, CLUSTER/VACUUM FULL), sizes
//! - `vacuum` — VACUUM: pruning, index cleanup, freezing, statistics
//! - `snapread` — the same reads on an OLAP snapshot image (no locks, image MVCC snapshot)
//!
//! TIDs: row `slot` of arena block `b` is (b * vpb + slot / 291, slot % 291 + 1); see `block::tid`.
use crate::ffi;
use crate::ffi::guard::boundary;
use crate::storage::block;
use pgrx::pg_sys;
use pgrx::prelude::*;

pub mod compact;
pub mod ddl;
pub mod freeze;
pub mod index;
pub mod modify;
pub mod scan;
pub mod snapread;
pub mod vacuum;

pub use crate::storage::{decode_tid, decode_tid_parts, tid_of};

/// Copies row `s` of local block `lb` (locked by the caller) into `slot`, with its TID and table
/// oid.
#[inline]
pub unsafe fn store_row(
    rel: pg_sys::Relation,
    blk: block::BlockRef,
    lb: u32,
    s: u32,
    slot: *mut pg_sys::TupleTableSlot,
) {
    unsafe {
        crate::storage::row::read_row(blk, s, slot);
        (*slot).tts_tid = tid_of(lb, s);
        (*slot).tts_tableOid = (*rel).rd_id;
    }
}

pub fn unsupported(what: &str) -> ! {
    ereport!(
        PgLogLevel::ERROR,
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("{what} is not supported on scoot tables")
    );
    unreachable!()
}

#[pg_extern(sql = "
CREATE FUNCTION scoot_tableam_handler(internal) RETURNS table_am_handler
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
CREATE ACCESS METHOD scoot TYPE TABLE HANDLER scoot_tableam_handler;
COMMENT ON ACCESS METHOD scoot IS 'scoot: PAX blocks in a shared-memory arena (HTAP)';
")]
fn scoot_tableam_handler(_fcinfo: pg_sys::FunctionCallInfo) -> PgBox<pg_sys::TableAmRoutine> {
    unsafe { PgBox::from_pg(&raw const SCOOT_ROUTINE as *mut pg_sys::TableAmRoutine) }
}

/// Is `rel` a scoot table?
pub fn is_scoot(rel: pg_sys::Relation) -> bool {
    unsafe { !rel.is_null() && (*rel).rd_tableam == &raw const SCOOT_ROUTINE }
}

/// Opens `rel` with ShareUpdateExclusiveLock (as VACUUM: no concurrent DDL, VACUUM or
/// maintenance function; reads and writes go on) for a maintenance function such as
/// `scoot.freeze` or `scoot.compact`: errors unless it is a scoot table (`hint` says what the
/// function does) owned by the current user.
pub unsafe fn open_for_maintenance(rel: pg_sys::Oid, hint: &str) -> pg_sys::Relation {
    unsafe {
        let r = pg_sys::table_open(rel, pg_sys::ShareUpdateExclusiveLock as i32);
        if !is_scoot(r) {
            let name = ffi::rel_name(r);
            ffi::error_hint(
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                format!("\"{name}\" is not a scoot table"),
                hint,
            );
        }
        if !pg_sys::pg_class_ownercheck(rel, pg_sys::GetUserId()) {
            pg_sys::aclcheck_error(
                pg_sys::AclResult::ACLCHECK_NOT_OWNER,
                pg_sys::get_relkind_objtype((*(*r).rd_rel).relkind),
                (*(*r).rd_rel).relname.data.as_ptr(),
            );
        }
        r
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn slot_callbacks(
    _rel: pg_sys::Relation,
) -> *const pg_sys::TupleTableSlotOps {
    boundary(|| crate::storage::slot::ops())
}

pub static SCOOT_ROUTINE: pg_sys::TableAmRoutine = pg_sys::TableAmRoutine {
    type_: pg_sys::NodeTag::T_TableAmRoutine,
    slot_callbacks: Some(slot_callbacks),
    scan_begin: Some(scan::scan_begin),
    scan_end: Some(scan::scan_end),
    scan_rescan: Some(scan::scan_rescan),
    scan_getnextslot: Some(scan::scan_getnextslot),
    scan_set_tidrange: Some(scan::scan_set_tidrange),
    scan_getnextslot_tidrange: Some(scan::scan_getnextslot_tidrange),
    parallelscan_estimate: Some(scan::parallelscan_estimate),
    parallelscan_initialize: Some(scan::parallelscan_initialize),
    parallelscan_reinitialize: Some(scan::parallelscan_reinitialize),
    index_fetch_begin: Some(index::index_fetch_begin),
    index_fetch_reset: Some(index::index_fetch_reset),
    index_fetch_end: Some(index::index_fetch_end),
    index_fetch_tuple: Some(index::index_fetch_tuple),
    tuple_fetch_row_version: Some(modify::tuple_fetch_row_version),
    tuple_tid_valid: Some(modify::tuple_tid_valid),
    tuple_get_latest_tid: Some(modify::tuple_get_latest_tid),
    tuple_satisfies_snapshot: Some(modify::tuple_satisfies_snapshot),
    index_delete_tuples: Some(index::index_delete_tuples),
    tuple_insert: Some(modify::tuple_insert),
    tuple_insert_speculative: Some(modify::tuple_insert_speculative),
    tuple_complete_speculative: Some(modify::tuple_complete_speculative),
    multi_insert: Some(modify::multi_insert),
    tuple_delete: Some(modify::tuple_delete),
    tuple_update: Some(modify::tuple_update),
    tuple_lock: Some(modify::tuple_lock),
    finish_bulk_insert: None,
    relation_set_new_filenode: Some(ddl::relation_set_new_filenode),
    relation_nontransactional_truncate: Some(ddl::relation_nontransactional_truncate),
    relation_copy_data: Some(ddl::relation_copy_data),
    relation_copy_for_cluster: Some(ddl::relation_copy_for_cluster),
    relation_vacuum: Some(vacuum::relation_vacuum),
    scan_analyze_next_block: Some(scan::scan_analyze_next_block),
    scan_analyze_next_tuple: Some(scan::scan_analyze_next_tuple),
    index_build_range_scan: Some(index::index_build_range_scan),
    index_validate_scan: Some(index::index_validate_scan),
    relation_size: Some(ddl::relation_size),
    relation_needs_toast_table: Some(ddl::relation_needs_toast_table),
    relation_toast_am: Some(ddl::relation_toast_am),
    relation_fetch_toast_slice: Some(ddl::relation_fetch_toast_slice),
    relation_estimate_size: Some(ddl::relation_estimate_size),
    scan_bitmap_next_block: Some(scan::scan_bitmap_next_block),
    scan_bitmap_next_tuple: Some(scan::scan_bitmap_next_tuple),
    scan_sample_next_block: Some(scan::scan_sample_next_block),
    scan_sample_next_tuple: Some(scan::scan_sample_next_tuple),
};

/// Serializable conflict-out check for a row seen by a read (HeapCheckForSerializableConflictOut).
pub fn check_conflict_out(
    rel: pg_sys::Relation,
    h: &block::RowHdr,
    visible: bool,
    snap: pg_sys::Snapshot,
) {
    use crate::txn::mvcc::{self, Htsv};
    unsafe {
        if !ffi::isolation_is_serializable()
            || !ffi::CheckForSerializableConflictOutNeeded(rel, snap)
        {
            return;
        }
        let txmin = pg_sys::TransactionXmin.into_inner();
        let x = match mvcc::htsv(h, txmin) {
            Htsv::Live => {
                if visible {
                    return;
                }
                h.xmin
            }
            Htsv::RecentlyDead | Htsv::DeleteInProgress => {
                let x = if visible { mvcc::update_xid(h) } else { h.xmin };
                if mvcc::precedes(x, txmin) {
                    return;
                }
                x
            }
            Htsv::InsertInProgress => h.xmin,
            Htsv::Dead => return,
        };
        if !ffi::xid_valid(x) || mvcc::precedes(x, txmin) {
            return;
        }
        let top = pg_sys::SubTransGetTopmostTransaction(ffi::xid(x)).into_inner();
        if mvcc::precedes(top, txmin) {
            return;
        }
        ffi::CheckForSerializableConflictOut(rel, ffi::xid(top), snap);
    }
}

/// Predicate lock on a row returned to a serializable transaction.
pub fn predicate_lock_row(
    rel: pg_sys::Relation,
    b: u32,
    s: u32,
    h: &block::RowHdr,
    snap: pg_sys::Snapshot,
) {
    if ffi::isolation_is_serializable() {
        let mut tid = tid_of(b, s);
        unsafe { ffi::PredicateLockTID(rel, &mut tid, snap, ffi::xid(h.xmin)) };
    }
}
