//! Storage layer: *where do tuples live*. The shared arena and its block descriptors (`arena`), the
//! PAX block format (`block`), the table directory (`tabledir`), converting executor rows to and
//! from block rows (`row`) and the slot type rows are returned in (`slot`), and the one
//! modification layer every block change goes through (`modify`), which announces each change to
//! the WAL capture (`changes`). Nothing here knows about transactions beyond the version header fields.
pub mod arena;
pub mod batch;
pub mod block;
pub mod blockmap;
pub mod changes;
pub mod cow;
pub mod encoding;
pub mod filter;
pub mod modify;
pub mod row;
pub mod slot;
pub mod tabledir;

use pgrx::pg_sys;

/// The TID of row `s` of local block `lb` (see `block::tid`).
#[inline]
pub fn tid_of(lb: u32, s: u32) -> pg_sys::ItemPointerData {
    let (page, off) = block::tid::encode(arena::vpb(), lb, s);
    let mut t = pg_sys::ItemPointerData::default();
    crate::ffi::set_tid(&mut t, page, off);
    t
}

/// (local block, slot) of a TID page and offset; None for offsets outside 1..=291.
#[inline]
pub fn decode_tid_parts(page: u32, off: u16) -> Option<(u32, u32)> {
    block::tid::decode(arena::vpb(), page, off)
}

/// (local block, slot) of a TID.
#[inline]
pub fn decode_tid(tid: *const pg_sys::ItemPointerData) -> Option<(u32, u32)> {
    unsafe { decode_tid_parts(crate::ffi::tid_page(&*tid), (*tid).ip_posid) }
}
