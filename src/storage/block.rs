//! The PAX block format (one arena block = rows of exactly one table). Format version 2.
//!
//! ```text
//! +--------------------+ 0
//! | BlockHeader        |  magic, version, natts, capacity, offsets, layout signature
//! | ColDesc[natts]     |  per column: encoding, width, scale, validity-bitmap offset, values offset
//! | Zone[natts]        |  per column: min and max of the values written (zone map, see below)
//! +--------------------+ row_hdr_off (64-aligned)
//! | RowHdr[capacity]   |  20-byte version header per row: xmin, xmax, cid, infomask, ctid
//! | free-slot bitmap   |  1 bit per slot: freed and reusable (the lowest free slot is reused
//! |                    |  first, as heap reuses the lowest unused line pointer)
//! +--------------------+ each region 64-aligned (Arrow's recommended alignment)
//! | col 0 validity     |  1 bit per row, 1 = valid (Arrow convention)
//! | col 0 values       |  capacity * width bytes, contiguous (an Arrow buffer for fixed widths)
//! | col 1 ...          |
//! +--------------------+ fixed_end
//! |   (free)           |
//! +--------------------+ var_low (moves down)
//! | variable-length    |  varlena payloads (the "relaxed Arrow" of the CMDB seed: freezing
//! | area               |  gathers them into Arrow offsets + data later)
//! +--------------------+ block_size
//! ```
//!
//! Column encodings (`ColDesc::kind`), chosen per block when it is formatted, so a block always
//! describes itself and different blocks of one table may encode a column differently:
//! - `FIXED`: attlen bytes per row (int2/4/8, float4/8, bool, date, timestamp, uuid, ...).
//! - `DEC64` / `DEC128`: `numeric(p, s)` with `p <= 18` / `p <= 38` and `0 <= s <= p`, as the value
//!   scaled by 10^s in a little-endian i64 / i128 (Arrow decimal128 for the latter); the minimum
//!   value of the type marks NaN.
//! - `CHARN`: `char(n)` / `varchar(n)` of small n: `width` bytes, the value's bytes padded with
//!   NUL (text never contains NUL). A value longer than `width` bytes does not fit the block; the
//!   table then switches that column to `VAR` for new blocks.
//! - `VAR` / `CSTRING`: an (offset u32, length u32) entry per row into the var area. The payload
//!   is the value without its varlena header; with [`VAR_RAW`] set in the length the payload is a
//!   complete varlena as TOAST left it (inline-compressed, or an 18-byte external TOAST pointer).
//! - `ABSENT`: a dropped column; no storage, always NULL.
//!
//! Zone maps: for integer-like fixed columns (byval, 2/4/8 bytes, read as signed), scaled
//! decimals, float4/float8 and text/varchar/char columns, `Zone[i]` holds the least and greatest
//! key of the values ever written to the column in this block (i128; `min > max` while no
//! non-NULL value was written). A key orders like the values it stands for, in PostgreSQL's
//! order: integers are themselves, a decimal NaN is +infinity, a float's key is its
//! [`float_key`] (NaN above every number, -0 = 0), a character value's key its first 16 bytes
//! ([`bytes_key`]; trailing spaces trimmed for `char(n)`, as its equality ignores them), so equal
//! values have equal keys and a key range bounds the values. A compressed or toasted character
//! value has no key: it widens the zone to everything. Float and character columns say so in
//! `ColDesc::scale` ([`ZORDER_FLOAT`], [`ZORDER_BYTES`], [`ZORDER_BPCHAR`]; 0 in blocks written
//! before these zones existed, which are then not zoned for them). Writers only widen it, so it bounds every row version any snapshot can see in the
//! block; VACUUM recomputes it from the versions that remain. OLAP snapshot images read it as of
//! their epoch like every other byte of the block. Block filters skip a block whose zone cannot
//! satisfy them (`storage::filter`).
//!
//! TIDs are table-local: row `slot` of the table's local block `lb` is TID page
//! `lb * vpb + slot / 291`, offset `slot % 291 + 1`, with `vpb = block_size / 8192`, so the TID
//! address space of a table is exactly as large as its blocks are (relation size = blocks *
//! block_size, like heap's pages * 8 kB) and offsets stay within `MaxHeapTuplesPerPage`.
//!
//! Mutable counters (fill level, free list head, var_low, ...) live in `arena::BlockDesc`, outside
//! the block. This module is plain pointer arithmetic over one block; it knows nothing of locks.
use std::sync::atomic::{AtomicU16, Ordering};

pub const BLOCK_MAGIC: u32 = 0x5C00_B10C;
pub const FORMAT_VERSION: u16 = 3;

pub const KIND_ABSENT: u8 = 0;
pub const KIND_FIXED: u8 = 1;
pub const KIND_VAR: u8 = 2;
pub const KIND_CSTRING: u8 = 3;
pub const KIND_DEC64: u8 = 4;
pub const KIND_DEC128: u8 = 5;
pub const KIND_CHARN: u8 = 6;

/// Set in a var entry's length: the payload is a complete varlena (compressed or TOAST pointer).
pub const VAR_RAW: u32 = 0x8000_0000;
pub const VAR_LEN_MASK: u32 = 0x7FFF_FFFF;

/// Parts of a block a reader maps separately ([`BlockRef::read_parts`]): the header, the row
/// headers, the variable-length area, then one per column (the last one shared by all further
/// columns).
pub const PART_HEAD: u32 = 0;
pub const PART_ROWS: u32 = 1;
pub const PART_VAR: u32 = 2;
pub const PART_COL0: u32 = 3;
pub const PART_COLS: u32 = 61;

/// Heap's line-pointer limit for 8 kB pages: TID offsets stay in 1..=291.
pub const TID_OFFSETS_PER_PAGE: u32 = 291;

pub const NO_SLOT: u32 = u32::MAX;

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
    /// offset of the free-slot bitmap (1 bit per row slot, 1 = free for reuse)
    pub free_map_off: u32,
    pub layout_sig: u64,
    /// offset of the zone map (`Zone[natts]`)
    pub zone_off: u32,
    pub _reserved: u32,
}

/// One column's zone map entry: the least and greatest value written (see the module header).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Zone {
    pub min: i128,
    pub max: i128,
}

impl Zone {
    pub const EMPTY: Zone = Zone {
        min: i128::MAX,
        max: i128::MIN,
    };
    /// No non-NULL value was written.
    pub fn is_empty(&self) -> bool {
        self.min > self.max
    }
}

/// `ColDesc::scale` of a float4/float8 FIXED column: zone keys are [`float_key`]s.
pub const ZORDER_FLOAT: u8 = 1;
/// `ColDesc::scale` of a text/varchar VAR or CHARN column: zone keys are [`bytes_key`]s.
pub const ZORDER_BYTES: u8 = 2;
/// The same for char(n) (bpchar): keys of the value without its trailing spaces.
pub const ZORDER_BPCHAR: u8 = 3;

/// Does column `c` keep a zone map?
#[inline]
pub fn zoned(c: &ColDesc) -> bool {
    (c.kind == KIND_FIXED && c.byval != 0 && matches!(c.attlen, 2 | 4 | 8))
        || matches!(c.kind, KIND_DEC64 | KIND_DEC128)
        || (matches!(c.kind, KIND_VAR | KIND_CHARN)
            && matches!(c.scale, ZORDER_BYTES | ZORDER_BPCHAR))
}

/// Asks the CPU to bring the cache line of `p` in (a hint: no effect on results).
#[inline(always)]
pub fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The zone key of a float in PostgreSQL's order (`float8_cmp_internal`): monotone, -0 and 0
/// share a key, every NaN has the one key above all numbers. A float4 is keyed as its (exact)
/// float8 value, so both compare with float8 constants.
#[inline]
pub fn float_key(x: f64) -> i128 {
    if x.is_nan() {
        return 1i128 << 64;
    }
    let u = (if x == 0.0 { 0.0f64 } else { x }).to_bits();
    (if u >> 63 == 1 { !u } else { u | 1 << 63 }) as i128
}

/// The zone key of a character value: its first 16 bytes, big-endian, NUL-padded (text holds no
/// NUL), shifted to signed. Weakly monotone in byte order: `a <= b` implies
/// `bytes_key(a) <= bytes_key(b)`; equal up to 16 bytes only for equal strings of <= 16 bytes.
#[inline]
pub fn bytes_key(v: &[u8]) -> i128 {
    let mut b = [0u8; 16];
    let n = v.len().min(16);
    b[..n].copy_from_slice(&v[..n]);
    (u128::from_be_bytes(b) ^ (1u128 << 127)) as i128
}

/// `v` without its trailing spaces (bpchar's comparisons ignore them).
#[inline]
pub fn trim_spaces(mut v: &[u8]) -> &[u8] {
    while let [rest @ .., b' '] = v {
        v = rest;
    }
    v
}

const ZONE_OFF: usize = std::mem::size_of::<BlockHeader>();
const _: () = assert!(std::mem::size_of::<BlockHeader>() % 16 == 0);

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColDesc {
    pub attlen: i16,
    pub kind: u8,
    pub align: u8,
    pub width: u16,
    pub byval: u8,
    /// decimal scale for DEC64/DEC128; for FIXED, VAR and CHARN columns the zone-map order
    /// (`ZORDER_*`, 0 = none or integer)
    pub scale: u8,
    pub bitmap_off: u32,
    pub values_off: u32,
}

/// PostgreSQL's heap `t_infomask` bit values (the visibility rules and PostgreSQL's combo-cid /
/// multixact helpers apply unchanged). The four low bits are tuple-format bits in heap
/// (HASNULL, HASVARWIDTH, HASEXTERNAL, HASOID_OLD) that scoot does not need; it keeps its own
/// row flags there.
pub mod infomask {
    pub const HEAP_XMAX_KEYSHR_LOCK: u16 = 0x0010;
    pub const HEAP_COMBOCID: u16 = 0x0020;
    pub const HEAP_XMAX_EXCL_LOCK: u16 = 0x0040;
    pub const HEAP_XMAX_LOCK_ONLY: u16 = 0x0080;
    pub const HEAP_XMAX_SHR_LOCK: u16 = HEAP_XMAX_EXCL_LOCK | HEAP_XMAX_KEYSHR_LOCK;
    pub const HEAP_LOCK_MASK: u16 =
        HEAP_XMAX_SHR_LOCK | HEAP_XMAX_EXCL_LOCK | HEAP_XMAX_KEYSHR_LOCK;
    pub const HEAP_XMIN_COMMITTED: u16 = 0x0100;
    pub const HEAP_XMIN_INVALID: u16 = 0x0200;
    pub const HEAP_XMIN_FROZEN: u16 = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID;
    pub const HEAP_XMAX_COMMITTED: u16 = 0x0400;
    pub const HEAP_XMAX_INVALID: u16 = 0x0800;
    pub const HEAP_XMAX_IS_MULTI: u16 = 0x1000;
    pub const HEAP_XMAX_BITS: u16 = HEAP_XMAX_COMMITTED
        | HEAP_XMAX_INVALID
        | HEAP_XMAX_IS_MULTI
        | HEAP_LOCK_MASK
        | HEAP_XMAX_LOCK_ONLY;
    /// heap's bits that visibility code looks at (everything but the tuple-format bits)
    pub const HEAP_VISIBILITY_BITS: u16 = 0xFFF0;
}

// scoot row flags, kept in the four low infomask bits
/// Version reached only through its chain root (no index entries point at it).
pub const F_HEAP_ONLY: u16 = 0x1;
/// Updated without new index entries: follow `ctid` from here in index fetches.
pub const F_HOT_UPDATED: u16 = 0x2;
/// Some value is stored out of line in the TOAST relation.
pub const F_HAS_EXTERNAL: u16 = 0x4;
/// The update/delete/lock in xmax changed key columns (heap's HEAP_KEYS_UPDATED).
pub const F_KEYS_UPDATED: u16 = 0x8;
pub const F_MASK: u16 = 0xF;

// slot states. A NORMAL slot is a row version (xmin != 0); any other slot has xmin == 0 and its
// state in `cid`.
pub const ST_FREE: u16 = 0;
pub const ST_NORMAL: u16 = 1;
/// Chain root whose own version is gone: `ctid` points at the first live version.
pub const ST_REDIRECT: u16 = 2;
/// Row is dead to everyone but index entries may still point at it (VACUUM removes them).
pub const ST_DEAD: u16 = 3;

// special ctid offsets (heap's values where heap has them)
/// `ctid` page holds a speculative insertion token (heap's SpecTokenOffsetNumber).
pub const SPEC_TOKEN_OFF: u16 = 0xfffe;
/// Deleted by a cross-partition UPDATE (heap's MovedPartitionsOffsetNumber, page invalid).
pub const MOVED_OFF: u16 = 0xfffd;
const INVALID_PAGE: u32 = u32::MAX;

/// Per-row version header, 20 bytes: heap's xmin/xmax/cid/infomask/ctid without the tuple-format
/// fields (natts, hoff, null bitmap), which the block's column directory replaces.
#[repr(C)]
pub struct RowHdr {
    pub xmin: u32,
    pub xmax: u32,
    /// command id (cmin, cmax or combo id); the slot state for a non-NORMAL slot
    pub cid: u32,
    pub infomask: AtomicU16,
    /// newer version's TID (bi_hi, bi_lo, posid), a speculative token, or a redirect target
    pub ctid: [u16; 3],
}

const _: () = assert!(std::mem::size_of::<RowHdr>() == 20);

impl RowHdr {
    #[inline]
    pub fn state(&self) -> u16 {
        if self.xmin != 0 {
            ST_NORMAL
        } else {
            self.cid as u16
        }
    }
    /// Turns the slot into a non-row state (FREE / REDIRECT / DEAD).
    #[inline]
    pub fn set_state(&mut self, st: u16) {
        debug_assert!(st != ST_NORMAL);
        self.xmin = 0;
        self.cid = st as u32;
        self.infomask.store(0, Ordering::Relaxed);
    }
    #[inline]
    pub fn infomask(&self) -> u16 {
        self.infomask.load(Ordering::Relaxed)
    }
    #[inline]
    pub fn flags(&self) -> u16 {
        self.infomask() & F_MASK
    }
    #[inline]
    pub fn has_flag(&self, f: u16) -> bool {
        self.infomask() & f != 0
    }
    #[inline]
    pub fn set_flag(&self, f: u16) {
        self.infomask.fetch_or(f, Ordering::Relaxed);
    }
    #[inline]
    pub fn clear_flag(&self, f: u16) {
        self.infomask.fetch_and(!f, Ordering::Relaxed);
    }
    /// Sets hint bits (readers may do so under a shared block lock); the page's pre-image is
    /// saved first for live OLAP snapshots (and the bits written through the arena's alias
    /// mapping where the kernel write-protects the page: `cow::before_write_via`).
    #[inline]
    pub fn set_hint(&self, bits: u16) {
        if self.infomask() & bits != bits {
            let p = &self.infomask as *const AtomicU16 as *mut u8;
            let w = crate::storage::cow::before_write_via(p, 2);
            unsafe { &*(w as *const AtomicU16) }.fetch_or(bits, Ordering::Relaxed);
        }
    }
    /// Replaces the heap bits in `mask`, keeping everything else (the scoot flags).
    #[inline]
    pub fn set_bits(&self, mask: u16, bits: u16) {
        let m = self.infomask();
        self.infomask
            .store((m & !mask) | (bits & mask), Ordering::Relaxed);
    }
    #[inline]
    pub fn ctid_page(&self) -> u32 {
        ((self.ctid[0] as u32) << 16) | self.ctid[1] as u32
    }
    #[inline]
    pub fn ctid_off(&self) -> u16 {
        self.ctid[2]
    }
    #[inline]
    pub fn set_ctid(&mut self, page: u32, off: u16) {
        self.ctid = [(page >> 16) as u16, page as u16, off];
    }
    #[inline]
    pub fn clear_ctid(&mut self) {
        self.set_ctid(INVALID_PAGE, 0);
    }
    /// The newer version's TID, if this version was updated.
    #[inline]
    pub fn next(&self) -> Option<(u32, u16)> {
        let off = self.ctid_off();
        if off >= 1 && off as u32 <= TID_OFFSETS_PER_PAGE && self.ctid_page() != INVALID_PAGE {
            Some((self.ctid_page(), off))
        } else {
            None
        }
    }
    #[inline]
    pub fn has_next(&self) -> bool {
        self.next().is_some()
    }
    #[inline]
    pub fn spec_token(&self) -> Option<u32> {
        (self.ctid_off() == SPEC_TOKEN_OFF).then(|| self.ctid_page())
    }
    #[inline]
    pub fn set_spec_token(&mut self, token: u32) {
        self.set_ctid(token, SPEC_TOKEN_OFF);
    }
    #[inline]
    pub fn is_moved(&self) -> bool {
        self.ctid_off() == MOVED_OFF && self.ctid_page() == INVALID_PAGE
    }
    #[inline]
    pub fn set_moved(&mut self) {
        self.set_ctid(INVALID_PAGE, MOVED_OFF);
    }
}

/// How a column is to be stored, as decided from its type (see `row::attr_specs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enc {
    Absent,
    Fixed,
    Var,
    CString,
    Dec64 { scale: u8 },
    Dec128 { scale: u8 },
    CharN { width: u16 },
}

/// What the layout computation needs to know about one attribute.
#[derive(Clone, Copy, Debug)]
pub struct AttrSpec {
    pub attlen: i16,
    pub byval: bool,
    pub align: u8,
    pub enc: Enc,
    /// Expected payload size for variable-length columns (used to size the var area).
    pub est_var: u32,
    /// zone-map order of a FIXED, VAR or CHARN column (`ZORDER_*`, 0 = none or integer)
    pub zorder: u8,
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
    pub free_map_off: u32,
    pub fixed_end: u32,
    pub cols: Vec<ColDesc>,
    /// identifies the column encodings: blocks with the same signature accept the same rows
    pub sig: u64,
}

pub fn header_size(natts: usize) -> usize {
    align_up(
        std::mem::size_of::<BlockHeader>()
            + natts * (std::mem::size_of::<ColDesc>() + std::mem::size_of::<Zone>()),
        REGION_ALIGN,
    )
}

fn kind_width(enc: Enc, attlen: i16) -> (u8, u16, u8) {
    match enc {
        Enc::Absent => (KIND_ABSENT, 0, 0),
        Enc::Fixed => (KIND_FIXED, attlen as u16, 0),
        Enc::Var => (KIND_VAR, 8, 0),
        Enc::CString => (KIND_CSTRING, 8, 0),
        Enc::Dec64 { scale } => (KIND_DEC64, 8, scale),
        Enc::Dec128 { scale } => (KIND_DEC128, 16, scale),
        Enc::CharN { width } => (KIND_CHARN, width, 0),
    }
}

impl Layout {
    /// Chooses the row capacity so that the fixed part plus the expected variable-length data
    /// fill the block. Returns None when not even one row fits.
    pub fn compute(attrs: &[AttrSpec], block_size: usize, max_rows: u32) -> Option<Layout> {
        let natts = attrs.len();
        let hdr = header_size(natts);
        let mut per_row = ROW_HDR_SIZE as f64 + 0.125;
        let mut var_per_row = 0f64;
        for a in attrs {
            let (kind, width, _) = kind_width(a.enc, a.attlen);
            if kind == KIND_ABSENT {
                continue;
            }
            per_row += 0.125 + width as f64;
            if kind == KIND_VAR || kind == KIND_CSTRING {
                var_per_row += a.est_var as f64;
            }
        }
        let slack = hdr + (2 * natts + 2) * REGION_ALIGN;
        if block_size <= slack {
            return None;
        }
        let mut cap = (((block_size - slack) as f64) / (per_row + var_per_row)).floor() as usize;
        cap = cap.min(max_rows as usize);
        if var_per_row > 0.0 {
            // always leave at least a quarter of the block for variable-length data
            let max_fixed = (block_size - slack) * 3 / 4;
            cap = cap.min((max_fixed as f64 / per_row).floor() as usize);
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
        let free_map_off = off;
        off = align_up(off + cap.div_ceil(64) * 8, REGION_ALIGN);
        let mut cols = Vec::with_capacity(natts);
        let mut sig: u64 = 0xcbf2_9ce4_8422_2325 ^ natts as u64;
        for a in attrs {
            let (kind, width, mut scale) = kind_width(a.enc, a.attlen);
            if matches!(kind, KIND_FIXED | KIND_VAR | KIND_CHARN) {
                scale = a.zorder;
            }
            let mut c = ColDesc {
                attlen: a.attlen,
                kind,
                align: a.align,
                width,
                byval: a.byval as u8,
                scale,
                ..Default::default()
            };
            if kind != KIND_ABSENT {
                c.bitmap_off = off as u32;
                off = align_up(off + cap.div_ceil(8), REGION_ALIGN);
                c.values_off = off as u32;
                off = align_up(off + cap * width as usize, REGION_ALIGN);
            }
            for v in [
                kind as u64,
                width as u64,
                scale as u64,
                a.attlen as u16 as u64,
                a.byval as u64,
                a.align as u64,
            ] {
                sig = (sig ^ v).wrapping_mul(0x0000_0100_0000_01b3);
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
            free_map_off: free_map_off as u32,
            fixed_end: off as u32,
            cols,
            sig,
        })
    }
}

/// A view of one formatted block. All accessors are unchecked pointer arithmetic; callers hold the
/// block's lock as `modify` documents.
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
    /// Column `i`'s zone map entry (16-aligned in the block).
    #[inline]
    pub fn zone_ptr(&self, i: usize) -> *mut Zone {
        unsafe { (self.base.add(self.header().zone_off as usize) as *mut Zone).add(i) }
    }
    #[inline]
    pub fn zone(&self, i: usize) -> Zone {
        unsafe { self.zone_ptr(i).read() }
    }
    /// The zone-map keys row `slot`'s value in zoned column `c` spans (None: NULL): one key,
    /// or every key for a compressed or toasted character value (see the module header).
    #[inline]
    pub fn zone_span(&self, c: &ColDesc, slot: u32) -> Option<(i128, i128)> {
        if !self.is_valid(c, slot) {
            return None;
        }
        let p = self.value_ptr(c, slot);
        let chars = |v: &[u8]| {
            let k = bytes_key(if c.scale == ZORDER_BPCHAR {
                trim_spaces(v)
            } else {
                v
            });
            (k, k)
        };
        match c.kind {
            KIND_VAR => {
                return Some(if self.var_entry(c, slot).1 & VAR_RAW != 0 {
                    (i128::MIN, i128::MAX)
                } else {
                    chars(self.var_payload(c, slot))
                })
            }
            KIND_CHARN => {
                let cell = unsafe { std::slice::from_raw_parts(p, c.width as usize) };
                let n = cell.iter().position(|&b| b == 0).unwrap_or(cell.len());
                return Some(chars(&cell[..n]));
            }
            _ => {}
        }
        let k = unsafe {
            match (c.kind, c.attlen) {
                (KIND_FIXED, 4) if c.scale == ZORDER_FLOAT => {
                    float_key((p as *const f32).read_unaligned() as f64)
                }
                (KIND_FIXED, 8) if c.scale == ZORDER_FLOAT => {
                    float_key((p as *const f64).read_unaligned())
                }
                (KIND_DEC64, _) => match (p as *const i64).read_unaligned() {
                    i64::MIN => i128::MAX,
                    x => x as i128,
                },
                (KIND_DEC128, _) => match (p as *const i128).read_unaligned() {
                    i128::MIN => i128::MAX,
                    x => x,
                },
                (_, 2) => (p as *const i16).read_unaligned() as i128,
                (_, 4) => (p as *const i32).read_unaligned() as i128,
                _ => (p as *const i64).read_unaligned() as i128,
            }
        };
        Some((k, k))
    }
    /// The zone of column `i` recomputed over the slots `live` says hold row versions.
    pub fn compute_zone(&self, i: usize, hwm: u32, live: impl Fn(u32) -> bool) -> Zone {
        let c = *self.col(i);
        let mut z = Zone::EMPTY;
        for s in 0..hwm {
            if live(s) {
                if let Some((lo, hi)) = self.zone_span(&c, s) {
                    z.min = z.min.min(lo);
                    z.max = z.max.max(hi);
                }
            }
        }
        z
    }
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub fn row(&self, slot: u32) -> &mut RowHdr {
        unsafe { &mut *(self.base.add(self.row_off(slot)) as *mut RowHdr) }
    }
    /// Prefetches the cells (value and validity byte) of row `slot` in the first `ncols`
    /// columns. A row's cells lie in as many column regions (pages) as it has columns: asking
    /// for all of them first lets their cache and TLB misses overlap instead of coming one by one.
    #[inline]
    pub fn prefetch_row(&self, slot: u32, ncols: usize) {
        for i in 0..ncols {
            let c = self.col(i);
            if c.kind != KIND_ABSENT {
                prefetch_line(self.value_ptr(c, slot));
                prefetch_line(unsafe {
                    self.base.add(c.bitmap_off as usize + (slot as usize >> 3))
                });
            }
        }
    }
    /// Byte offset of row `slot`'s version header in the block.
    #[inline]
    pub fn row_off(&self, slot: u32) -> usize {
        self.header().row_hdr_off as usize + slot as usize * ROW_HDR_SIZE
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
    /// The fixed-width integer cell of `slot` (`c.attlen` 1, 2, 4 or 8 bytes), sign-extended.
    #[inline]
    pub fn read_int(&self, c: &ColDesc, slot: u32) -> i64 {
        let p = self.value_ptr(c, slot);
        unsafe {
            match c.attlen {
                1 => *(p as *const i8) as i64,
                2 => (p as *const i16).read_unaligned() as i64,
                4 => (p as *const i32).read_unaligned() as i64,
                _ => (p as *const i64).read_unaligned(),
            }
        }
    }
    /// The column's validity bitmap (bit `slot` set: not NULL); not for `KIND_ABSENT` columns.
    #[inline]
    pub fn bitmap_ptr(&self, c: &ColDesc) -> *const u8 {
        unsafe { self.base.add(c.bitmap_off as usize) }
    }
    #[inline]
    pub fn value_ptr(&self, c: &ColDesc, slot: u32) -> *mut u8 {
        unsafe {
            self.base
                .add(c.values_off as usize + slot as usize * c.width as usize)
        }
    }
    /// (offset, length | VAR_RAW) of a variable-length value.
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
    /// Bytes of the var-area payload of (column, slot).
    #[inline]
    pub fn var_payload(&self, c: &ColDesc, slot: u32) -> &[u8] {
        let (off, len) = self.var_entry(c, slot);
        unsafe {
            std::slice::from_raw_parts(self.base.add(off as usize), (len & VAR_LEN_MASK) as usize)
        }
    }
    #[inline]
    fn free_word(&self, w: u32) -> *mut u64 {
        unsafe { (self.base.add(self.header().free_map_off as usize) as *mut u64).add(w as usize) }
    }
    /// Address of the free-map word holding `slot`'s bit.
    #[inline]
    pub fn free_word_ptr(&self, slot: u32) -> *const u8 {
        self.free_word(slot / 64) as *const u8
    }
    /// Marks `slot` free for reuse.
    #[inline]
    pub fn mark_free(&self, slot: u32) {
        unsafe { *self.free_word(slot / 64) |= 1u64 << (slot % 64) }
    }
    /// The lowest free slot below `hwm`, searching from 64-slot word `from` (nothing changes:
    /// the caller announces the word, then [`BlockRef::take_free`]s the slot). Returns the slot
    /// and the word to start the next search from.
    pub fn lowest_free(&self, hwm: u32, from: u32) -> Option<(u32, u32)> {
        for w in from..hwm.div_ceil(64) {
            let bits = unsafe { *self.free_word(w) };
            if bits != 0 {
                let slot = w * 64 + bits.trailing_zeros();
                if slot >= hwm {
                    return None;
                }
                return Some((slot, w));
            }
        }
        None
    }
    /// Marks free `slot` used.
    #[inline]
    pub fn take_free(&self, slot: u32) {
        unsafe { *self.free_word(slot / 64) &= !(1u64 << (slot % 64)) }
    }
    /// The byte ranges a reader of columns `cols` (by index; true or past the end: read; empty:
    /// all) touches, as `(part, offset, length)` clamped to `block_size`: [`PART_HEAD`] is the
    /// header (column descriptors, zone maps), [`PART_ROWS`] (with `rows`: a reader that looks at
    /// row version headers) the row headers and free-slot bitmap up to the first column region,
    /// [`PART_VAR`] the variable-length area from `var_low` on (when a read column keeps its
    /// values there), `PART_COL0 + i` column `i`'s validity bitmap and values. Columns past
    /// [`PART_COLS`] share the last part.
    pub fn read_parts(
        &self,
        cols: &[bool],
        rows: bool,
        var_low: usize,
        block_size: usize,
        out: &mut Vec<(u32, usize, usize)>,
    ) {
        let mut push = |part: u32, from: usize, len: usize| {
            let from = from.min(block_size);
            let len = len.min(block_size - from);
            if len > 0 {
                out.push((part, from, len));
            }
        };
        let natts = self.natts();
        let cap = self.header().capacity as usize;
        let first_col = (0..natts)
            .map(|i| self.col(i))
            .filter(|c| c.kind != KIND_ABSENT)
            .map(|c| c.bitmap_off as usize)
            .min()
            .unwrap_or(block_size);
        let row_hdr_off = (self.header().row_hdr_off as usize).min(first_col);
        push(PART_HEAD, 0, row_hdr_off);
        if rows {
            push(PART_ROWS, row_hdr_off, first_col - row_hdr_off);
        }
        let mut var = false;
        for i in (0..natts).filter(|&i| cols.is_empty() || cols.get(i).copied().unwrap_or(true)) {
            let c = *self.col(i);
            if c.kind == KIND_ABSENT {
                continue;
            }
            let part = PART_COL0 + (i as u32).min(PART_COLS - 1);
            push(part, c.bitmap_off as usize, cap.div_ceil(8));
            push(part, c.values_off as usize, cap * c.width as usize);
            var |= matches!(c.kind, KIND_VAR | KIND_CSTRING);
        }
        if var {
            push(PART_VAR, var_low, block_size.saturating_sub(var_low));
        }
    }
    /// Total variable-length bytes a slot holds.
    pub fn var_bytes(&self, slot: u32) -> u32 {
        let mut n = 0;
        for i in 0..self.natts() {
            let c = self.col(i);
            if (c.kind == KIND_VAR || c.kind == KIND_CSTRING) && self.is_valid(c, slot) {
                n += self.var_entry(c, slot).1 & VAR_LEN_MASK;
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
            h.free_map_off = layout.free_map_off;
            h.layout_sig = layout.sig;
            h.zone_off = (ZONE_OFF + layout.natts * std::mem::size_of::<ColDesc>()) as u32;
            let cols = self.base.add(std::mem::size_of::<BlockHeader>()) as *mut ColDesc;
            for (i, c) in layout.cols.iter().enumerate() {
                *cols.add(i) = *c;
                self.zone_ptr(i).write_unaligned(Zone::EMPTY);
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
            let n = len & VAR_LEN_MASK;
            top -= n;
            if top != off {
                unsafe {
                    std::ptr::copy(
                        self.base.add(off as usize),
                        self.base.add(top as usize),
                        n as usize,
                    )
                };
            }
            let c = *self.col(i);
            self.set_var_entry(&c, slot, top, len);
        }
        top
    }

    /// Rewrites the variable-length area column by column, each column's values in slot order
    /// and back to back (the CMDB seed's *gathering*, done when a block freezes): a column's
    /// values of consecutive rows are then one contiguous byte range whose entries are Arrow
    /// offsets plus a constant, so an export copies the range instead of each value. Values
    /// stored raw (compressed, TOAST pointers) are gathered too but stay raw. `live(slot)` says
    /// which slots' values to keep. Returns the new `var_low`.
    pub fn gather_var(&self, hwm: u32, block_size: u32, live: impl Fn(u32) -> bool) -> u32 {
        let mut data: Vec<u8> = Vec::new();
        let mut moves: Vec<(usize, u32, u32, u32)> = Vec::new(); // (col, slot, new off, len)
        for i in 0..self.natts() {
            let c = *self.col(i);
            if c.kind != KIND_VAR && c.kind != KIND_CSTRING {
                continue;
            }
            for slot in 0..hwm {
                if !live(slot) || !self.is_valid(&c, slot) {
                    continue;
                }
                let (_, len) = self.var_entry(&c, slot);
                moves.push((i, slot, data.len() as u32, len));
                data.extend_from_slice(self.var_payload(&c, slot));
            }
        }
        let low = block_size - data.len() as u32;
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(low as usize), data.len())
        };
        for (i, slot, off, len) in moves {
            let c = *self.col(i);
            self.set_var_entry(&c, slot, low + off, len);
        }
        low
    }
}

/// TID mapping: row `slot` of local block `lb` is TID (lb * vpb + slot / 291, slot % 291 + 1).
pub mod tid {
    use super::TID_OFFSETS_PER_PAGE;

    #[inline]
    pub fn encode(vpb: u32, lb: u32, slot: u32) -> (u32, u16) {
        (
            lb * vpb + slot / TID_OFFSETS_PER_PAGE,
            (slot % TID_OFFSETS_PER_PAGE + 1) as u16,
        )
    }

    /// (local block, slot); None for offsets outside 1..=291.
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
            enc: match attlen {
                -1 => Enc::Var,
                -2 => Enc::CString,
                _ => Enc::Fixed,
            },
            est_var: est,
            zorder: 0,
        }
    }

    /// The ranges a reader maps: the rows part always, a read column's bitmap and values, the
    /// variable-length area only for a variable-length column, nothing past the block.
    #[pg_test]
    fn read_parts_cover_what_a_reader_touches() {
        let attrs = [spec(4, 0), spec(8, 0), spec(-1, 8), spec(2, 0)];
        let bs = 1 << 16;
        let l = Layout::compute(&attrs, bs, 64).unwrap();
        let mut buf = vec![0u64; bs / 8];
        let b = BlockRef {
            base: buf.as_mut_ptr() as *mut u8,
        };
        b.format(&l, 1, 1);
        let cap = b.header().capacity as usize;
        let parts = |cols: &[bool], var_low: usize| {
            let mut v = Vec::new();
            b.read_parts(cols, true, var_low, bs, &mut v);
            v
        };
        let first = (0..4).map(|i| b.col(i).bitmap_off as usize).min().unwrap();
        let rho = b.header().row_hdr_off as usize;
        let head = (PART_HEAD, 0, rho);
        let rows = (PART_ROWS, rho, first - rho);
        let col = |i: usize| {
            let c = *b.col(i);
            [
                (PART_COL0 + i as u32, c.bitmap_off as usize, cap.div_ceil(8)),
                (
                    PART_COL0 + i as u32,
                    c.values_off as usize,
                    cap * c.width as usize,
                ),
            ]
        };
        assert!(first >= rho + cap * ROW_HDR_SIZE);
        // fixed columns 1 and 3 only: no var area, no column 0 or 2
        let mut want = vec![head, rows];
        want.extend(col(1));
        want.extend(col(3));
        assert_eq!(parts(&[false, true, false, true], bs - 100), want);
        // a reader that never looks at row headers does not map them
        let mut v = Vec::new();
        b.read_parts(&[false, true, false, true], false, bs - 100, bs, &mut v);
        want.remove(1);
        assert_eq!(v, want);
        // the variable-length column brings the var area from var_low to the block's end
        let mut want = vec![head, rows];
        want.extend(col(2));
        want.push((PART_VAR, bs - 100, 100));
        assert_eq!(parts(&[false, false, true, false], bs - 100), want);
        // empty and short masks read everything (a column past the mask is read)
        let all = parts(&[], bs - 100);
        assert_eq!(all, parts(&[true], bs - 100));
        assert_eq!(all.len(), 2 + 4 * 2 + 1);
        // clamped: nothing reaches past the block
        for (_, off, len) in parts(&[], bs + 10) {
            assert!(off + len <= bs);
        }
        assert!(parts(&[], bs + 10).iter().all(|&(p, _, _)| p != PART_VAR));
    }

    /// Zone keys: signed integers of each width, decimal NaN as +infinity, NULLs ignored.
    #[pg_test]
    fn zone_keys_and_recompute() {
        let mut attrs = [spec(2, 0), spec(8, 0), spec(8, 0), spec(-1, 8)];
        attrs[2].enc = Enc::Dec64 { scale: 2 };
        let l = Layout::compute(&attrs, 1 << 16, 64).unwrap();
        let mut buf = vec![0u64; (1 << 16) / 8];
        let b = BlockRef {
            base: buf.as_mut_ptr() as *mut u8,
        };
        b.format(&l, 1, 1);
        for i in 0..4 {
            assert!(b.zone(i).is_empty());
        }
        assert!(zoned(b.col(0)) && zoned(b.col(1)) && zoned(b.col(2)) && !zoned(b.col(3)));
        let vals: [(i16, i64, i64); 4] = [
            (-7, i64::MIN + 1, 5),
            (3, 9, i64::MIN),
            (0, 0, -2),
            (1, 1, 1),
        ];
        for (s, (a, x, d)) in vals.iter().enumerate() {
            let s = s as u32;
            unsafe {
                (b.value_ptr(b.col(0), s) as *mut i16).write_unaligned(*a);
                (b.value_ptr(b.col(1), s) as *mut i64).write_unaligned(*x);
                (b.value_ptr(b.col(2), s) as *mut i64).write_unaligned(*d);
            }
            for c in 0..3 {
                b.set_valid(&{ *b.col(c) }, s, s != 3 || c != 0);
            }
        }
        let all = |_| true;
        assert_eq!(b.compute_zone(0, 4, all), Zone { min: -7, max: 3 });
        assert_eq!(
            b.compute_zone(1, 4, all),
            Zone {
                min: (i64::MIN + 1) as i128,
                max: 9
            }
        );
        // slot 1 holds NaN: +infinity
        assert_eq!(
            b.compute_zone(2, 4, all),
            Zone {
                min: -2,
                max: i128::MAX
            }
        );
        assert_eq!(b.compute_zone(2, 4, |s| s != 1), Zone { min: -2, max: 5 });
        assert!(b.compute_zone(0, 4, |s| s == 3).is_empty());
    }

    #[pg_test]
    fn header_is_20_bytes() {
        assert_eq!(ROW_HDR_SIZE, 20);
    }

    #[pg_test]
    fn layout_fits_and_is_aligned() {
        let attrs = [spec(4, 0), spec(4, 0), spec(4, 0), spec(-1, 84)];
        let l = Layout::compute(&attrs, 1 << 20, 128 * 291).unwrap();
        assert!(
            l.capacity > 4000 && l.capacity <= 9000,
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
        let l = Layout::compute(&[spec(4, 0)], 1 << 20, 128 * 291).unwrap();
        assert_eq!(l.capacity, (128 * 291) & !7);
    }

    #[pg_test]
    fn layout_signature_tracks_encodings() {
        let a = [spec(8, 0), spec(-1, 16)];
        let mut b = a;
        b[1].enc = Enc::CharN { width: 1 };
        let la = Layout::compute(&a, 1 << 20, 37248).unwrap();
        let lb = Layout::compute(&b, 1 << 20, 37248).unwrap();
        assert_ne!(la.sig, lb.sig);
        assert_eq!(la.sig, Layout::compute(&a, 1 << 20, 37248).unwrap().sig);
    }

    #[pg_test]
    fn tid_roundtrip() {
        let vpb = 128;
        for (b, s) in [(0u32, 0u32), (0, 290), (0, 291), (5, 37247), (1000, 12345)] {
            let (p, o) = tid::encode(vpb, b, s);
            assert!((1..=291).contains(&o));
            assert_eq!(tid::decode(vpb, p, o), Some((b, s)));
        }
        assert_eq!(tid::decode(vpb, 0, 0), None);
        assert_eq!(tid::decode(vpb, 0, 292), None);
    }

    #[pg_test]
    fn ctid_states() {
        let mut mem = [0u32; 5];
        let h = unsafe { &mut *(mem.as_mut_ptr() as *mut RowHdr) };
        h.xmin = 100;
        h.clear_ctid();
        assert_eq!(h.state(), ST_NORMAL);
        assert!(!h.has_next());
        h.set_ctid(70_000, 5);
        assert_eq!(h.next(), Some((70_000, 5)));
        h.set_spec_token(42);
        assert_eq!(h.spec_token(), Some(42));
        assert!(!h.has_next());
        h.set_moved();
        assert!(h.is_moved() && !h.has_next());
        h.set_flag(F_HOT_UPDATED);
        h.set_bits(infomask::HEAP_XMAX_BITS, infomask::HEAP_XMAX_INVALID);
        assert!(h.has_flag(F_HOT_UPDATED));
        h.set_state(ST_DEAD);
        assert_eq!(h.state(), ST_DEAD);
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
            let raw = if slot == 3 { VAR_RAW } else { 0 };
            b.set_var_entry(&c, slot, low, v.len() as u32 | raw);
            b.set_valid(&c, slot, true);
        }
        let new_low = b.compact_var(10, bs as u32, |s| s % 2 == 0 || s == 3);
        assert!(new_low > low);
        for slot in (0..10u32).filter(|s| s % 2 == 0 || *s == 3) {
            let (off, len) = b.var_entry(&c, slot);
            assert!(off >= new_low);
            assert_eq!(len & VAR_RAW != 0, slot == 3);
            assert_eq!(
                b.var_payload(&c, slot),
                format!("value-{slot}-{}", "x".repeat(slot as usize)).as_bytes()
            );
        }
    }
}
