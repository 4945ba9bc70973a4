//! The slot type scoot returns rows in: PostgreSQL's virtual slot plus the row version's xmin,
//! xmax and command id, so the system columns xmin/xmax/cmin/cmax work (foreign-key triggers
//! and INSERT ... ON CONFLICT read xmin from the slot).
use crate::storage::block::RowHdr;
use pgrx::pg_sys;
use pgrx::prelude::*;

#[repr(C)]
pub struct ScootSlot {
    pub base: pg_sys::VirtualTupleTableSlot,
    pub xmin: u32,
    pub xmax: u32,
    pub cid: u32,
    /// Buffer for by-reference values, reused across rows (freed with the slot).
    pub buf: *mut u8,
    pub buf_cap: usize,
}

pub static mut SCOOT_SLOT_OPS: pg_sys::TupleTableSlotOps = unsafe { std::mem::zeroed() };
static mut VIRTUAL_CLEAR: Option<unsafe extern "C-unwind" fn(*mut pg_sys::TupleTableSlot)> = None;

/// Builds the ops table from PostgreSQL's virtual slot (called from `_PG_init`).
pub unsafe fn init() {
    unsafe {
        let ops = &raw mut SCOOT_SLOT_OPS;
        std::ptr::copy_nonoverlapping(&raw const pg_sys::TTSOpsVirtual, ops, 1);
        VIRTUAL_CLEAR = (*ops).clear;
        (*ops).base_slot_size = std::mem::size_of::<ScootSlot>();
        (*ops).clear = Some(clear);
        (*ops).release = Some(release);
        (*ops).getsysattr = Some(getsysattr);
    }
}

pub fn ops() -> *const pg_sys::TupleTableSlotOps {
    &raw const SCOOT_SLOT_OPS
}

#[pg_guard]
unsafe extern "C-unwind" fn clear(slot: *mut pg_sys::TupleTableSlot) {
    unsafe {
        (VIRTUAL_CLEAR.unwrap())(slot);
        let s = slot as *mut ScootSlot;
        (*s).xmin = 0;
        (*s).xmax = 0;
        (*s).cid = 0;
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn release(slot: *mut pg_sys::TupleTableSlot) {
    unsafe {
        let s = slot as *mut ScootSlot;
        if !(*s).buf.is_null() {
            pg_sys::pfree((*s).buf as *mut std::ffi::c_void);
            (*s).buf = std::ptr::null_mut();
            (*s).buf_cap = 0;
        }
    }
}

/// A buffer of at least `size` bytes owned by a scoot slot, reused for every row stored in it
/// (values point into it until the slot is cleared or materialized, like a buffer slot's values
/// point into a pinned page). None for other slot types.
pub unsafe fn reusable_buffer(slot: *mut pg_sys::TupleTableSlot, size: usize) -> Option<*mut u8> {
    unsafe {
        if (*slot).tts_ops != ops() {
            return None;
        }
        let s = slot as *mut ScootSlot;
        if (*s).buf_cap < size {
            if !(*s).buf.is_null() {
                pg_sys::pfree((*s).buf as *mut std::ffi::c_void);
            }
            let cap = size.next_power_of_two().max(256);
            (*s).buf = pg_sys::MemoryContextAlloc((*slot).tts_mcxt, cap) as *mut u8;
            (*s).buf_cap = cap;
        }
        Some((*s).buf)
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn getsysattr(
    slot: *mut pg_sys::TupleTableSlot,
    attnum: i32,
    isnull: *mut bool,
) -> pg_sys::Datum {
    unsafe {
        let s = slot as *mut ScootSlot;
        *isnull = false;
        match attnum {
            pg_sys::MinTransactionIdAttributeNumber | pg_sys::MaxTransactionIdAttributeNumber => {
                let x = if attnum == pg_sys::MinTransactionIdAttributeNumber {
                    (*s).xmin
                } else {
                    (*s).xmax
                };
                pg_sys::Datum::from(x)
            }
            pg_sys::MinCommandIdAttributeNumber | pg_sys::MaxCommandIdAttributeNumber => {
                pg_sys::Datum::from((*s).cid)
            }
            _ => {
                ereport!(
                    PgLogLevel::ERROR,
                    PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                    "cannot retrieve a system column in this context"
                );
                pg_sys::Datum::from(0usize)
            }
        }
    }
}

/// Records the version header's system columns in a scoot slot (no-op for other slot types).
pub unsafe fn set_sysattrs(slot: *mut pg_sys::TupleTableSlot, h: &RowHdr) {
    unsafe {
        if (*slot).tts_ops != ops() {
            return;
        }
        let s = slot as *mut ScootSlot;
        let m = h.infomask();
        (*s).xmin = if m & crate::storage::block::infomask::HEAP_XMIN_FROZEN
            == crate::storage::block::infomask::HEAP_XMIN_FROZEN
        {
            2
        } else {
            h.xmin
        };
        (*s).xmax = h.xmax;
        (*s).cid = h.cid;
    }
}

/// Sets a scoot slot's system columns directly (a row version this backend just wrote).
pub unsafe fn set_sys(slot: *mut pg_sys::TupleTableSlot, xmin: u32, xmax: u32, cid: u32) {
    unsafe {
        if (*slot).tts_ops != ops() {
            return;
        }
        let s = slot as *mut ScootSlot;
        (*s).xmin = xmin;
        (*s).xmax = xmax;
        (*s).cid = cid;
    }
}
