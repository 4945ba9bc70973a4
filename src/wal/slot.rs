//! The physical replication slot `pg_scoot_wal`: keeps the WAL since the oldest checkpoint image
//! kept on disk (the previous one: the fallback should the newest be damaged), which recovery
//! replays onto it. Set by the OLAP worker at
//! start; PostgreSQL then removes only older WAL.
use crate::storage::arena;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::atomic::Ordering;

pub const NAME: &std::ffi::CStr = c"pg_scoot_wal";

/// A new checkpoint image at `lsn` is in place: it is the recovery base now, and the WAL before
/// it may go.
pub fn advance_base(lsn: u64) {
    arena::ctl().images_written.fetch_add(1, Ordering::Relaxed);
    crate::wal::checkpoint_image::set_base(unsafe { pg_sys::GetSystemIdentifier() }, lsn);
    retain_from_base();
}

/// Points the slot at the current recovery base (creating it if needed). Errors become a
/// WARNING: without the slot, crash recovery may find the WAL it needs removed (and then stops
/// with a clear error).
pub fn retain_from_base() {
    let c = arena::ctl();
    if c.base_valid.load(Ordering::Acquire) == 0 {
        pgrx::warning!("scoot: no checkpoint image to recover from; scoot tables are not crash safe until the next clean shutdown");
        return;
    }
    let base = c.base_lsn.load(Ordering::Relaxed);
    let keep = c.keep_lsn.load(Ordering::Relaxed);
    let lsn = if keep != 0 { keep.min(base) } else { base };
    let r = PgTryBuilder::new(|| unsafe {
        if pg_sys::SearchNamedReplicationSlot(NAME.as_ptr(), true).is_null() {
            pg_sys::ReplicationSlotCreate(
                NAME.as_ptr(),
                false,
                pg_sys::ReplicationSlotPersistency::RS_PERSISTENT,
                false,
            );
        } else {
            pg_sys::ReplicationSlotAcquire(NAME.as_ptr(), true);
        }
        let s = pg_sys::MyReplicationSlot;
        pg_sys::SpinLockAcquire(&mut (*s).mutex);
        (*s).data.restart_lsn = lsn;
        pg_sys::SpinLockRelease(&mut (*s).mutex);
        pg_sys::ReplicationSlotMarkDirty();
        pg_sys::ReplicationSlotSave();
        pg_sys::ReplicationSlotsComputeRequiredLSN();
        pg_sys::ReplicationSlotRelease();
        true
    })
    .catch_others(|e| {
        if let pgrx::pg_sys::panic::CaughtError::PostgresError(r) = &e {
            pgrx::warning!(
                "scoot: could not set the replication slot {:?} that keeps the WAL for crash recovery: {}; scoot tables are not crash safe",
                NAME,
                r.message()
            );
        }
        false
    })
    .execute();
    if r {
        pgrx::log!(
            "scoot: replication slot {:?} keeps the WAL since the oldest checkpoint image at {:X}/{:X}",
            NAME,
            lsn >> 32,
            lsn as u32
        );
    }
}
