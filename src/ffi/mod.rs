//! The thin unsafe layer: PostgreSQL declarations pgrx does not bind (predicate locking) and the
//! C inline functions/macros the callbacks need (slot helpers, tuple descriptor access, ...).
pub mod guard;

use pgrx::pg_sys;

extern "C-unwind" {
    /// xlogutils.c's WAL segment callbacks, as raw C functions (for an `XLogReaderRoutine`).
    pub fn wal_segment_open(
        state: *mut pg_sys::XLogReaderState,
        next_seg_no: pg_sys::XLogSegNo,
        tli_p: *mut pg_sys::TimeLineID,
    );
    pub fn wal_segment_close(state: *mut pg_sys::XLogReaderState);
    pub fn PredicateLockRelation(relation: pg_sys::Relation, snapshot: pg_sys::Snapshot);
    pub fn PredicateLockTID(
        relation: pg_sys::Relation,
        tid: pg_sys::ItemPointer,
        snapshot: pg_sys::Snapshot,
        tuple_xid: pg_sys::TransactionId,
    );
    pub fn CheckForSerializableConflictOutNeeded(
        relation: pg_sys::Relation,
        snapshot: pg_sys::Snapshot,
    ) -> bool;
    pub fn CheckForSerializableConflictOut(
        relation: pg_sys::Relation,
        xid: pg_sys::TransactionId,
        snapshot: pg_sys::Snapshot,
    );
    pub static max_prepared_xacts: std::ffi::c_int;
    /// The client connection's socket, -1 without one (src/ffi/shim.c).
    pub fn scoot_client_socket() -> std::ffi::c_int;
    /// Large messages straight to the socket while an Arrow stream goes out (src/ffi/shim.c).
    pub fn scoot_direct_send_begin();
    pub fn scoot_direct_send_end();
    pub fn RelidByRelfilenode(reltablespace: pg_sys::Oid, relfilenode: pg_sys::Oid) -> pg_sys::Oid;
    /// A regular backend's SIGTERM handler (sets ProcDiePending; exits at the next interrupt
    /// check), as a plain C function pointer for `pqsignal`.
    #[link_name = "die"]
    pub fn pg_die(postgres_signal_arg: std::ffi::c_int);
    pub fn CheckForSerializableConflictIn(
        relation: pg_sys::Relation,
        tid: pg_sys::ItemPointer,
        blkno: pg_sys::BlockNumber,
    );
}

/// `AddinShmemInitLock` (a macro in C: `&MainLWLockArray[21].lock`).
pub unsafe fn addin_shmem_init_lock() -> *mut pg_sys::LWLock {
    unsafe { &mut (*pg_sys::MainLWLockArray.add(21)).lock }
}

/// `ShmemInitStruct(name, size)` under `AddinShmemInitLock`, as a `shmem_startup_hook` does it:
/// `attach(pointer, fresh)` runs with the lock held (`fresh`: this call created the struct, whose
/// memory is not initialised).
pub unsafe fn shmem_init_struct(
    name: &std::ffi::CStr,
    size: usize,
    attach: impl FnOnce(*mut u8, bool),
) {
    unsafe {
        let lock = addin_shmem_init_lock();
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let p = pg_sys::ShmemInitStruct(name.as_ptr(), size, &mut found);
        attach(p as *mut u8, !found);
        pg_sys::LWLockRelease(lock);
    }
}

#[inline]
pub unsafe fn tupdesc_attr(td: pg_sys::TupleDesc, i: usize) -> *mut pg_sys::FormData_pg_attribute {
    unsafe { (*td).attrs.as_mut_ptr().add(i) }
}

#[inline]
pub unsafe fn slot_getallattrs(slot: *mut pg_sys::TupleTableSlot) {
    unsafe {
        let natts = (*(*slot).tts_tupleDescriptor).natts;
        if ((*slot).tts_nvalid as i32) < natts {
            pg_sys::slot_getsomeattrs_int(slot, natts);
        }
    }
}

#[inline]
pub unsafe fn exec_clear_tuple(slot: *mut pg_sys::TupleTableSlot) {
    unsafe { ((*(*slot).tts_ops).clear.unwrap())(slot) }
}

#[inline]
pub unsafe fn exec_materialize_slot(slot: *mut pg_sys::TupleTableSlot) {
    unsafe { ((*(*slot).tts_ops).materialize.unwrap())(slot) }
}

pub const TTS_FLAG_SHOULDFREE: u16 = 1 << 2;

#[inline]
pub fn set_tid(tid: &mut pg_sys::ItemPointerData, page: u32, off: u16) {
    tid.ip_blkid.bi_hi = (page >> 16) as u16;
    tid.ip_blkid.bi_lo = (page & 0xffff) as u16;
    tid.ip_posid = off;
}

#[inline]
pub fn tid_page(tid: &pg_sys::ItemPointerData) -> u32 {
    ((tid.ip_blkid.bi_hi as u32) << 16) | tid.ip_blkid.bi_lo as u32
}

#[inline]
pub unsafe fn rel_natts(rel: pg_sys::Relation) -> usize {
    unsafe { (*(*rel).rd_att).natts as usize }
}

/// `RelationGetRelationName`
pub unsafe fn rel_name(rel: pg_sys::Relation) -> String {
    unsafe {
        std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr())
            .to_string_lossy()
            .into_owned()
    }
}

#[inline]
pub fn is_mvcc_snapshot(snap: pg_sys::Snapshot) -> bool {
    unsafe {
        !snap.is_null()
            && ((*snap).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_MVCC
                || (*snap).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_HISTORIC_MVCC)
    }
}

/// `IsolationIsSerializable()`
#[inline]
pub fn isolation_is_serializable() -> bool {
    unsafe { pg_sys::XactIsoLevel == pg_sys::XACT_SERIALIZABLE as i32 }
}

#[inline]
pub fn xid_valid(x: u32) -> bool {
    x != pg_sys::InvalidTransactionId.into_inner()
}

#[inline]
pub fn xid(x: u32) -> pg_sys::TransactionId {
    pg_sys::TransactionId::from(x)
}

/// ERROR with a HINT line (pgrx's `ereport!` 4th argument is the DETAIL).
#[track_caller]
pub fn error_hint(
    code: pgrx::PgSqlErrorCode,
    msg: impl Into<String>,
    hint: impl Into<String>,
) -> ! {
    let msg: String = msg.into();
    pgrx::pg_sys::panic::ErrorReport::new(code, msg, "pg_scoot")
        .set_hint(hint)
        .report(pgrx::PgLogLevel::ERROR);
    unreachable!()
}

/// WARNING with a HINT line.
#[track_caller]
pub fn warning_hint(msg: impl Into<String>, hint: impl Into<String>) {
    let msg: String = msg.into();
    pgrx::pg_sys::panic::ErrorReport::new(pgrx::PgSqlErrorCode::ERRCODE_WARNING, msg, "pg_scoot")
        .set_hint(hint)
        .report(pgrx::PgLogLevel::WARNING);
}

/// `pgstat_should_count_relation` (a macro in C).
#[inline]
unsafe fn pgstat_counting(rel: pg_sys::Relation) -> bool {
    unsafe {
        if !(*rel).pgstat_info.is_null() {
            return true;
        }
        if (*rel).pgstat_enabled {
            pg_sys::pgstat_assoc_relation(rel);
            return !(*rel).pgstat_info.is_null();
        }
        false
    }
}

/// `pgstat_count_heap_scan`: a sequential scan started.
#[inline]
pub unsafe fn pgstat_count_scan(rel: pg_sys::Relation) {
    unsafe {
        if pgstat_counting(rel) {
            (*(*rel).pgstat_info).t_counts.t_numscans += 1;
        }
    }
}

/// `pgstat_count_heap_getnext`: a row returned by a sequential (or sample/TID range) scan.
#[inline]
pub unsafe fn pgstat_count_getnext(rel: pg_sys::Relation) {
    unsafe {
        if pgstat_counting(rel) {
            (*(*rel).pgstat_info).t_counts.t_tuples_returned += 1;
        }
    }
}

/// `pgstat_count_heap_getnext` for `n` rows at once.
#[inline]
pub unsafe fn pgstat_count_getnext_n(rel: pg_sys::Relation, n: usize) {
    unsafe {
        if pgstat_counting(rel) {
            (*(*rel).pgstat_info).t_counts.t_tuples_returned += n as i64;
        }
    }
}

/// `pgstat_count_heap_fetch`: a row fetched by a bitmap heap scan.
#[inline]
pub unsafe fn pgstat_count_fetch(rel: pg_sys::Relation) {
    unsafe {
        if pgstat_counting(rel) {
            (*(*rel).pgstat_info).t_counts.t_tuples_fetched += 1;
        }
    }
}

/// `RelationUsesLocalBuffers`: a temporary table.
#[inline]
pub unsafe fn rel_is_temp(rel: pg_sys::Relation) -> bool {
    unsafe { (*(*rel).rd_rel).relpersistence as u8 == pg_sys::RELPERSISTENCE_TEMP }
}

/// `pgstat_count_buffer_read` + `pgstat_count_buffer_hit`: `n` table pages read, all from memory
/// (what heap reports for pages found in shared buffers; shows in pg_statio_*_tables).
#[inline]
pub unsafe fn pgstat_count_pages_hit(rel: pg_sys::Relation, n: i64) {
    unsafe {
        if n > 0 && pgstat_counting(rel) {
            (*(*rel).pgstat_info).t_counts.t_blocks_fetched += n;
            (*(*rel).pgstat_info).t_counts.t_blocks_hit += n;
        }
    }
}
