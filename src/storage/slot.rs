//! The slot type scoot returns rows in: PostgreSQL's virtual slot plus the row version's xmin,
//! xmax and command id, so the system columns xmin/xmax/cmin/cmax work (foreign-key triggers
//! and INSERT ... ON CONFLICT read xmin from the slot).
//!
//! A scan may instead point the slot at a row of a block batch (`batch`): the slot is then
//! deformed lazily, only as far as the executor asks (`getsomeattrs`), and detaches itself from
//! the batch when it is cleared, copied or materialized.
use crate::storage::batch::Batch;
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
    /// The batch the current row is in (its values are read from there on demand), or null.
    batch: *mut Batch,
    /// The row's index in `batch`.
    brow: usize,
}

pub static mut SCOOT_SLOT_OPS: pg_sys::TupleTableSlotOps = unsafe { std::mem::zeroed() };
type SlotFn = unsafe extern "C-unwind" fn(*mut pg_sys::TupleTableSlot);
static mut VIRTUAL_CLEAR: Option<SlotFn> = None;
static mut VIRTUAL_MATERIALIZE: Option<SlotFn> = None;
static mut VIRTUAL_COPYSLOT: Option<
    unsafe extern "C-unwind" fn(*mut pg_sys::TupleTableSlot, *mut pg_sys::TupleTableSlot),
> = None;
static mut VIRTUAL_COPY_HEAP: Option<
    unsafe extern "C-unwind" fn(*mut pg_sys::TupleTableSlot) -> pg_sys::HeapTuple,
> = None;
static mut VIRTUAL_COPY_MINIMAL: Option<
    unsafe extern "C-unwind" fn(*mut pg_sys::TupleTableSlot) -> pg_sys::MinimalTuple,
> = None;

/// Builds the ops table from PostgreSQL's virtual slot (called from `_PG_init`).
pub unsafe fn init() {
    unsafe {
        let ops = &raw mut SCOOT_SLOT_OPS;
        std::ptr::copy_nonoverlapping(&raw const pg_sys::TTSOpsVirtual, ops, 1);
        VIRTUAL_CLEAR = (*ops).clear;
        VIRTUAL_MATERIALIZE = (*ops).materialize;
        VIRTUAL_COPYSLOT = (*ops).copyslot;
        VIRTUAL_COPY_HEAP = (*ops).copy_heap_tuple;
        VIRTUAL_COPY_MINIMAL = (*ops).copy_minimal_tuple;
        (*ops).base_slot_size = std::mem::size_of::<ScootSlot>();
        (*ops).clear = Some(clear);
        (*ops).release = Some(release);
        (*ops).getsysattr = Some(getsysattr);
        (*ops).getsomeattrs = Some(getsomeattrs);
        (*ops).materialize = Some(materialize);
        (*ops).copyslot = Some(copyslot);
        (*ops).copy_heap_tuple = Some(copy_heap_tuple);
        (*ops).copy_minimal_tuple = Some(copy_minimal_tuple);
    }
}

/// Detaches a slot from its batch (if any); its values stay as they are.
#[inline]
unsafe fn detach(slot: *mut pg_sys::TupleTableSlot) {
    unsafe {
        let s = slot as *mut ScootSlot;
        if !(*s).batch.is_null() {
            (*(*s).batch).detach(slot);
            (*s).batch = std::ptr::null_mut();
        }
    }
}

/// Makes every attribute of `slot` valid (a batch row is deformed lazily).
#[inline]
unsafe fn deform_all(slot: *mut pg_sys::TupleTableSlot) {
    unsafe {
        let natts = (*(*slot).tts_tupleDescriptor).natts;
        if ((*slot).tts_nvalid as i32) < natts {
            pg_sys::slot_getsomeattrs_int(slot, natts);
        }
    }
}

/// Stores row `s` of local block `lb` (read from `blk`, version header `h`) into `slot` as the
/// one row of `batch` (index and bitmap fetches), with columns `[0, fill)` copied now from
/// `blk` (0: none; the others when the slot asks for them, through the batch's `extend`).
///
/// # Safety
/// `blk` holds the row (its lock held or an image copy), `td` is the relation's descriptor and
/// `slot` a scoot slot.
#[allow(clippy::too_many_arguments)]
pub unsafe fn store_one_row(
    slot: *mut pg_sys::TupleTableSlot,
    batch: *mut Batch,
    blk: crate::storage::block::BlockRef,
    lb: u32,
    s: u32,
    h: &RowHdr,
    td: pg_sys::TupleDesc,
    fill: usize,
    table_oid: pg_sys::Oid,
) {
    unsafe {
        let b = &mut *batch;
        b.reset(lb, blk.natts().min((*td).natts as usize));
        b.push(s, h);
        if fill > 0 {
            b.fill(blk, td, fill);
        }
        store_batch_row(slot, batch, 0, crate::storage::tid_of(lb, s), table_oid);
    }
}

/// Points the scoot slot `slot` at row `r` of `batch` (lazily deformed, see the module header).
///
/// # Safety
/// `slot` is a scoot slot, `batch` outlives the attachment (it releases its slots before its
/// rows change), `r < batch.len()`.
#[inline]
pub unsafe fn store_batch_row(
    slot: *mut pg_sys::TupleTableSlot,
    batch: *mut Batch,
    r: usize,
    tid: pg_sys::ItemPointerData,
    table_oid: pg_sys::Oid,
) {
    unsafe {
        debug_assert!((*slot).tts_ops == ops());
        let s = slot as *mut ScootSlot;
        if (*s).batch == batch {
            (VIRTUAL_CLEAR.unwrap())(slot);
        } else {
            crate::ffi::exec_clear_tuple(slot);
            (*batch).attach(slot);
            (*s).batch = batch;
        }
        (*s).brow = r;
        // a batch that records no system columns (a ScootScan's) gives zeros
        [(*s).xmin, (*s).xmax, (*s).cid] = (&(*batch).sys).get(r).copied().unwrap_or_default();
        (*slot).tts_flags &= !(pg_sys::TTS_FLAG_EMPTY as u16);
        (*slot).tts_nvalid = 0;
        (*slot).tts_tid = tid;
        (*slot).tts_tableOid = table_oid;
    }
}

/// Called by a batch about to be reused for a slot still attached to it (already removed from
/// the batch's list): the slot takes all its values and copies them into its own memory.
pub unsafe fn detach_materialize(slot: *mut pg_sys::TupleTableSlot, batch: *mut Batch) {
    unsafe {
        let s = slot as *mut ScootSlot;
        if (*s).batch != batch {
            return;
        }
        deform_all(slot);
        (*s).batch = std::ptr::null_mut();
        (VIRTUAL_MATERIALIZE.unwrap())(slot);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn getsomeattrs(slot: *mut pg_sys::TupleTableSlot, natts: i32) {
    unsafe {
        let s = slot as *mut ScootSlot;
        let b = (*s).batch;
        if b.is_null() {
            // a virtual slot is always fully deformed; only a batch row can be partially
            error!("scoot slot: attributes requested from a slot without a row");
        }
        let b = &mut *b;
        let need = (natts as usize).min(b.block_natts);
        if b.ncols() < need {
            let extend = b.extend.expect("scoot batch without a block source");
            extend(b.ctx, b, need);
        }
        let r = (*s).brow;
        let values = (*slot).tts_values;
        let isnull = (*slot).tts_isnull;
        for i in (*slot).tts_nvalid as usize..need {
            let (d, n) = b.value(i, r);
            *values.add(i) = d;
            *isnull.add(i) = n;
        }
        // columns the block has no storage for (added later): PostgreSQL fills in their missing
        // values after this returns
        if need > (*slot).tts_nvalid as usize {
            (*slot).tts_nvalid = need as i16;
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn materialize(slot: *mut pg_sys::TupleTableSlot) {
    unsafe {
        let s = slot as *mut ScootSlot;
        if !(*s).batch.is_null() {
            deform_all(slot);
            detach(slot);
        }
        (VIRTUAL_MATERIALIZE.unwrap())(slot);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn copyslot(
    dst: *mut pg_sys::TupleTableSlot,
    src: *mut pg_sys::TupleTableSlot,
) {
    unsafe {
        detach(dst);
        (VIRTUAL_COPYSLOT.unwrap())(dst, src);
    }
}

/// A heap tuple of the row that, like heap's copies, carries the row's TID and table: the
/// virtual slot's copy leaves `t_self` invalid, and ANALYZE sorts its sample by `t_self` before
/// it computes each column's correlation with the physical order (random without it: 0.1 for
/// a table loaded in key order, which priced index scans of scoot tables as if every row lay
/// elsewhere and turned TPC-C's item lookup into a bitmap scan where heap has an index scan).
#[pg_guard]
unsafe extern "C-unwind" fn copy_heap_tuple(
    slot: *mut pg_sys::TupleTableSlot,
) -> pg_sys::HeapTuple {
    unsafe {
        deform_all(slot);
        let tup = (VIRTUAL_COPY_HEAP.unwrap())(slot);
        (*tup).t_self = (*slot).tts_tid;
        (*tup).t_tableOid = (*slot).tts_tableOid;
        tup
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn copy_minimal_tuple(
    slot: *mut pg_sys::TupleTableSlot,
) -> pg_sys::MinimalTuple {
    unsafe {
        deform_all(slot);
        (VIRTUAL_COPY_MINIMAL.unwrap())(slot)
    }
}

pub fn ops() -> *const pg_sys::TupleTableSlotOps {
    &raw const SCOOT_SLOT_OPS
}

#[pg_guard]
unsafe extern "C-unwind" fn clear(slot: *mut pg_sys::TupleTableSlot) {
    unsafe {
        detach(slot);
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
        detach(slot);
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
        [(*s).xmin, (*s).xmax, (*s).cid] = sys_of(h);
    }
}

/// The system columns xmin, xmax and cmin/cmax of a version header (a frozen xmin reads as 2,
/// FrozenTransactionId, as on heap).
#[inline]
pub fn sys_of(h: &RowHdr) -> [u32; 3] {
    let m = h.infomask();
    let frozen = crate::storage::block::infomask::HEAP_XMIN_FROZEN;
    [if m & frozen == frozen { 2 } else { h.xmin }, h.xmax, h.cid]
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
