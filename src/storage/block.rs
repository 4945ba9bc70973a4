//! The PAX block format (one arena block = rows of exactly one table).
//!
//! ```text
//! +--------------------+ 0
//! | BlockHeader        |  magic, natts, capacity, offsets (written once, at format time)
//! | ColDesc[natts]     |  per column: kind, width, validity-bitmap offset, values offset
//! +--------------------+ row_hdr_off (64-aligned)
//! | RowHdr[capacity]   |  per-row version header: xmin, xmax, cid, infomask, flags, next
//! +--------------------+ each region 64-aligned (Arrow's recommended alignment)
//! | col 0 validity     |  1 bit per row, 1 = valid (Arrow convention)
//! | col 0 values       |  fixed width: capacity * attlen, contiguous (an Arrow buffer)
//! |                    |  varlena: capacity * (u32 offset, u32 length) into the var area
//! | col 1 ...          |
//! +--------------------+ fixed_end
//! |   (free)           |
//! +--------------------+ var_low (moves down)
//! | variable-length    |  payloads without their varlena header, detoasted, uncompressed
//! | area               |  (the "relaxed Arrow" of the CMDB seed: freezing gathers them later)
//! +--------------------+ block_size
//! ```
//! Mutable counters (fill level, free list head, var_low, ...) live in `arena::BlockDesc`, outside
//! the block. This module is plain pointer arithmetic over one block; it knows nothing of locks.
use std::sync::atomic::{AtomicU16, Ordering};

pub const BLOCK_MAGIC: u32 = 0x5C00_B10C;
pub const FORMAT_VERSION: u16 = 1;

pub const KIND_ABSENT: u8 = 0; // dropped column: always NULL, no storage
pub const KIND_FIXED: u8 = 1;
pub const KIND_VAR: u8 = 2; // varlena: (offset, len) entry + payload in var area
pub const KIND_CSTRING: u8 = 3; // attlen -2: like VAR, payload includes the terminating NUL

pub const NO_SLOT: u32 = u32::MAX;
/// `next_slot` of a row deleted by a cross-partition UPDATE (heap's MovedPartitions marker).
pub const MOVED_SLOT: u32 = u32::MAX - 1;

#[repr(C)]
pub struct BlockHeader {
    pub magic: u32,
    pub version: u16,
    pub natts: u16,
    pub capacity: u32,
    pub row_hdr_off: u32,
    pub fixed_end: u32,
    pub table_id: u32,
    pub relnode: u32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ColDesc {
    pub attlen: i16,
    pub kind: u8,
    pub align: u8,
    pub width: u16,
    pub byval: u8,
    pub _pad: u8,
    pub bitmap_off: u32,
    pub values_off: u32,
}

/// Per-row version header. `infomask` uses PostgreSQL's heap `t_infomask` bit values so the
/// visibility rules (and PostgreSQL's combo-cid / multixact helpers) apply unchanged.
#[repr(C)]
pub struct RowHdr {
    pub xmin: u32,
    pub xmax: u32,
    pub cid: u32,
    pub infomask: AtomicU16,
    pub flags: u16,
    /// Newer version of this row (`NO_SLOT` in next_slot when none), or a speculative token.
    pub next_block: u32,
    pub next_slot: u32,
}

// slot states (low two bits of `flags`)
pub const ST_FREE: u16 = 0;
pub const ST_NORMAL: u16 = 1;
/// Chain root whose own version is gone: `next` points at the first live version.
pub const ST_REDIRECT: u16 = 2;
/// Row is dead to everyone but index entries may still point at it (VACUUM removes them).
pub const ST_DEAD: u16 = 3;
pub const ST_MASK: u16 = 3;
/// Version reached only through its chain root (no index entries point at it).
pub const F_HEAP_ONLY: u16 = 0x4;
/// Updated without new index entries: follow `next` from here in index fetches.
pub const F_HOT_UPDATED: u16 = 0x8;
/// The update/delete/lock in xmax changed key columns (heap's HEAP_KEYS_UPDATED).
pub const F_KEYS_UPDATED: u16 = 0x10;
/// `next_slot` holds a speculative insertion token (INSERT ... ON CONFLICT in progress).
pub const F_SPECULATIVE: u16 = 0x20;

impl RowHdr {
    #[inline]
    pub fn state(&self) -> u16 {
        self.flags & ST_MASK
    }
    #[inline]
    pub fn infomask(&self) -> u16 {
        self.infomask.load(Ordering::Relaxed)
    }
    #[inline]
    pub fn set_hint(&self, bits: u16) {
        self.infomask.fetch_or(bits, Ordering::Relaxed);
    }
    #[inline]
    pub fn has_next(&self) -> bool {
        self.next_slot != NO_SLOT && self.flags & F_SPECULATIVE == 0
    }
}

/// What the layout computation needs to know about one attribute.
#[derive(Clone, Copy, Debug)]
pub struct AttrSpec {
    pub attlen: i16,
    pub byval: bool,
    pub align: u8,
    pub dropped: bool,
    /// Expected payload size for variable-length columns (used to size the var area).
    pub est_var: u32,
}

fn align_up(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}

pub const ROW_HDR_SIZE: usize = std::mem::size_of::<RowHdr>();
const REGION_ALIGN: usize = 64;

/// A computed block layout for a tuple descriptor.
#[derive(Clone, Debug)]
pub struct Layout {
    pub natts: usize,
    pub capacity: u32,
    pub row_hdr_off: u32,
    pub fixed_end: u32,
    pub cols: Vec<ColDesc>,
}

pub fn header_size(natts: usize) -> usize {
    align_up(
        std::mem::size_of::<BlockHeader>() + natts * std::mem::size_of::<ColDesc>(),
        REGION_ALIGN,
    )
}

impl Layout {
    /// Chooses the row capacity so that the fixed part plus the expected variable-length data
    /// fill the block. Returns None when not even one row fits.
    pub fn compute(attrs: &[AttrSpec], block_size: usize, max_rows: u32) -> Option<Layout> {
        let natts = attrs.len();
        let hdr = header_size(natts);
        let mut per_row = ROW_HDR_SIZE as f64;
        let mut has_var = false;
        for a in attrs {
            if a.dropped {
                continue;
            }
            per_row += 0.125;
            if a.attlen > 0 {
                per_row += a.attlen as f64;
            } else {
                per_row += 8.0 + a.est_var as f64;
                has_var = true;
            }
        }
        let slack = hdr + (2 * natts + 2) * REGION_ALIGN;
        if block_size <= slack {
            return None;
        }
        let mut cap = (((block_size - slack) as f64) / per_row).floor() as usize;
        cap = cap.min(max_rows as usize);
        if has_var {
            // always leave at least a quarter of the block for variable-length data
            let fixed_per_row = per_row
                - attrs
                    .iter()
                    .filter(|a| !a.dropped && a.attlen <= 0)
                    .map(|a| a.est_var as f64)
                    .sum::<f64>();
            let max_fixed = (block_size - slack) * 3 / 4;
            cap = cap.min((max_fixed as f64 / fixed_per_row).floor() as usize);
        }
        // a whole number of bytes of validity bits per 8 rows keeps bitmaps byte-aligned
        if cap >= 8 {
            cap &= !7;
        }
        if cap == 0 {
            return None;
        }
        let mut off = hdr;
        let row_hdr_off = off;
        off = align_up(off + cap * ROW_HDR_SIZE, REGION_ALIGN);
        let mut cols = Vec::with_capacity(natts);
        for a in attrs {
            let mut c = ColDesc {
                attlen: a.attlen,
                align: a.align,
                byval: a.byval as u8,
                ..Default::default()
            };
            if a.dropped {
                c.kind = KIND_ABSENT;
            } else {
                c.kind = match a.attlen {
                    -1 => KIND_VAR,
                    -2 => KIND_CSTRING,
                    _ => KIND_FIXED,
                };
                c.width = if c.kind == KIND_FIXED {
                    a.attlen as u16
                } else {
                    8
                };
                c.bitmap_off = off as u32;
                off = align_up(off + cap.div_ceil(8), REGION_ALIGN);
                c.values_off = off as u32;
                off = align_up(off + cap * c.width as usize, REGION_ALIGN);
            }
            cols.push(c);
        }
        if off > block_size {
            return None;
        }
        Some(Layout {
            natts,
            capacity: cap as u32,
            row_hdr_off: row_hdr_off as u32,
            fixed_end: off as u32,
            cols,
        })
    }
}

/// A view of one formatted block. All accessors are unchecked pointer arithmetic; callers hold the
/// block's lock as `storage` documents.
#[derive(Clone, Copy)]
pub struct BlockRef {
    pub base: *mut u8,
}

impl BlockRef {
    #[inline]
    pub fn header(&self) -> &BlockHeader {
        unsafe { &*(self.base as *const BlockHeader) }
    }
    #[inline]
    pub fn natts(&self) -> usize {
        self.header().natts as usize
    }
    #[inline]
    pub fn col(&self, i: usize) -> &ColDesc {
        unsafe { &*((self.base.add(std::mem::size_of::<BlockHeader>()) as *const ColDesc).add(i)) }
    }
    #[inline]
    pub fn row(&self, slot: u32) -> &mut RowHdr {
        unsafe {
            &mut *((self.base.add(self.header().row_hdr_off as usize) as *mut RowHdr)
                .add(slot as usize))
        }
    }
    #[inline]
    pub fn is_valid(&self, c: &ColDesc, slot: u32) -> bool {
        if c.kind == KIND_ABSENT {
            return false;
        }
        unsafe {
            let byte = *self.base.add(c.bitmap_off as usize + (slot as usize >> 3));
            byte & (1 << (slot & 7)) != 0
        }
    }
    #[inline]
    pub fn set_valid(&self, c: &ColDesc, slot: u32, valid: bool) {
        if c.kind == KIND_ABSENT {
            return;
        }
        unsafe {
            let p = self.base.add(c.bitmap_off as usize + (slot as usize >> 3));
            if valid {
                *p |= 1 << (slot & 7);
            } else {
                *p &= !(1 << (slot & 7));
            }
        }
    }
    #[inline]
    pub fn value_ptr(&self, c: &ColDesc, slot: u32) -> *mut u8 {
        unsafe {
            self.base
                .add(c.values_off as usize + slot as usize * c.width as usize)
        }
    }
    /// (offset, length) of a variable-length value.
    #[inline]
    pub fn var_entry(&self, c: &ColDesc, slot: u32) -> (u32, u32) {
        unsafe {
            let p = self.value_ptr(c, slot) as *const u32;
            (p.read_unaligned(), p.add(1).read_unaligned())
        }
    }
    #[inline]
    pub fn set_var_entry(&self, c: &ColDesc, slot: u32, off: u32, len: u32) {
        unsafe {
            let p = self.value_ptr(c, slot) as *mut u32;
            p.write_unaligned(off);
            p.add(1).write_unaligned(len);
        }
    }
    /// Total variable-length bytes a slot holds.
    pub fn var_bytes(&self, slot: u32) -> u32 {
        let mut n = 0;
        for i in 0..self.natts() {
            let c = self.col(i);
            if (c.kind == KIND_VAR || c.kind == KIND_CSTRING) && self.is_valid(c, slot) {
                n += self.var_entry(c, slot).1;
            }
        }
        n
    }

    /// Writes the in-block header and column directory for `layout`.
    pub fn format(&self, layout: &Layout, table_id: u32, relnode: u32) {
        unsafe {
            std::ptr::write_bytes(self.base, 0, layout.fixed_end as usize);
            let h = &mut *(self.base as *mut BlockHeader);
            h.magic = BLOCK_MAGIC;
            h.version = FORMAT_VERSION;
            h.natts = layout.natts as u16;
            h.capacity = layout.capacity;
            h.row_hdr_off = layout.row_hdr_off;
            h.fixed_end = layout.fixed_end;
            h.table_id = table_id;
            h.relnode = relnode;
            let cols = self.base.add(std::mem::size_of::<BlockHeader>()) as *mut ColDesc;
            for (i, c) in layout.cols.iter().enumerate() {
                *cols.add(i) = *c;
            }
        }
    }

    /// Moves all live variable-length values to the end of the block, closing the gaps left by
    /// freed rows. `live(slot)` says which slots' values to keep. Returns the new `var_low`.
    pub fn compact_var(&self, hwm: u32, block_size: u32, live: impl Fn(u32) -> bool) -> u32 {
        let mut entries: Vec<(u32, u32, u32, usize)> = Vec::new(); // (off, len, slot, col)
        for slot in 0..hwm {
            if !live(slot) {
                continue;
            }
            for i in 0..self.natts() {
                let c = self.col(i);
                if (c.kind == KIND_VAR || c.kind == KIND_CSTRING) && self.is_valid(c, slot) {
                    let (off, len) = self.var_entry(c, slot);
                    entries.push((off, len, slot, i));
                }
            }
        }
        entries.sort_unstable_by(|a, b| b.0.cmp(&a.0));
        let mut top = block_size;
        for (off, len, slot, i) in entries {
            top -= len;
            if top != off {
                unsafe {
                    std::ptr::copy(
                        self.base.add(off as usize),
                        self.base.add(top as usize),
                        len as usize,
                    )
                };
            }
            let c = *self.col(i);
            self.set_var_entry(&c, slot, top, len);
        }
        top
    }
}

/// TID mapping: row `slot` of arena block `b` is TID (b * vpb + slot / 291, slot % 291 + 1).
pub mod tid {
    use crate::storage::arena::TID_OFFSETS_PER_PAGE;

    #[inline]
    pub fn encode(vpb: u32, block: u32, slot: u32) -> (u32, u16) {
        (
            block * vpb + slot / TID_OFFSETS_PER_PAGE,
            (slot % TID_OFFSETS_PER_PAGE + 1) as u16,
        )
    }

    /// Returns None for offsets outside 1..=291.
    #[inline]
    pub fn decode(vpb: u32, page: u32, off: u16) -> Option<(u32, u32)> {
        if off == 0 || off as u32 > TID_OFFSETS_PER_PAGE {
            return None;
        }
        Some((
            page / vpb,
            (page % vpb) * TID_OFFSETS_PER_PAGE + off as u32 - 1,
        ))
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
    use pgrx::prelude::*;

    fn spec(attlen: i16, est: u32) -> AttrSpec {
        AttrSpec {
            attlen,
            byval: attlen > 0 && attlen <= 8,
            align: 4,
            dropped: false,
            est_var: est,
        }
    }

    #[pg_test]
    fn layout_fits_and_is_aligned() {
        let attrs = [spec(4, 0), spec(4, 0), spec(4, 0), spec(-1, 84)];
        let l = Layout::compute(&attrs, 1 << 20, 32768).unwrap();
        assert!(
            l.capacity > 4000 && l.capacity <= 8192,
            "capacity {}",
            l.capacity
        );
        assert!(l.fixed_end as usize <= 1 << 20);
        for c in &l.cols {
            assert_eq!(c.values_off % 64, 0);
            assert_eq!(c.bitmap_off % 64, 0);
        }
        // var area left for at least est_var bytes per row
        assert!((1 << 20) - l.fixed_end as usize >= l.capacity as usize * 84);
    }

    #[pg_test]
    fn layout_capped_by_max_rows() {
        let l = Layout::compute(&[spec(4, 0)], 1 << 20, 32768).unwrap();
        assert_eq!(l.capacity, 32768);
    }

    #[pg_test]
    fn tid_roundtrip() {
        let vpb = 113;
        for (b, s) in [(0u32, 0u32), (0, 290), (0, 291), (5, 32767), (1000, 12345)] {
            let (p, o) = tid::encode(vpb, b, s);
            assert!((1..=291).contains(&o));
            assert_eq!(tid::decode(vpb, p, o), Some((b, s)));
        }
        assert_eq!(tid::decode(vpb, 0, 0), None);
        assert_eq!(tid::decode(vpb, 0, 292), None);
    }

    #[pg_test]
    fn compaction_keeps_values() {
        let bs = 64 * 1024;
        let l = Layout::compute(&[spec(-1, 16)], bs, 2048).unwrap();
        let mut mem = vec![0u8; bs];
        let b = BlockRef {
            base: mem.as_mut_ptr(),
        };
        b.format(&l, 1, 1);
        let c = *b.col(0);
        let mut low = bs as u32;
        for slot in 0..10u32 {
            let v = format!("value-{slot}-{}", "x".repeat(slot as usize));
            low -= v.len() as u32;
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), b.base.add(low as usize), v.len()) };
            b.set_var_entry(&c, slot, low, v.len() as u32);
            b.set_valid(&c, slot, true);
        }
        let new_low = b.compact_var(10, bs as u32, |s| s % 2 == 0);
        assert!(new_low > low);
        for slot in (0..10u32).step_by(2) {
            let (off, len) = b.var_entry(&c, slot);
            let got = unsafe { std::slice::from_raw_parts(b.base.add(off as usize), len as usize) };
            assert_eq!(
                got,
                format!("value-{slot}-{}", "x".repeat(slot as usize)).as_bytes()
            );
        }
    }
}
