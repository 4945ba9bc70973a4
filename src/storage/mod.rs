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

/// Hashes small integer keys (table ids, arena block numbers, image ids) with one
/// multiplication per word (Fibonacci hashing), for the per-backend maps looked up once per
/// row: SipHash, the std default, showed in their profiles.
#[derive(Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0 ^ v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
