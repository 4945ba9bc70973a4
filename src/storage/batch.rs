//! Block-at-a-time reading: the rows of one block that a scan returns, materialized column by
//! column, and handed to the executor through lazily deformed scoot slots.
//!
//! A scan enters a block once: under the block's shared lock it decides which rows it returns
//! (visibility per row, or once for a block whose rows are all visible), records their version
//! headers and copies only the columns asked for so far into column arrays (`Datum`s and NULL
//! flags; by-reference values into buffers owned by the batch). It then releases the lock and
//! returns the rows one by one without touching the block. A returned slot points at its row
//! here (`tts_nvalid = 0`); `slot_getsomeattrs(n)` copies the first `n` values from the column
//! arrays, and asks the scan to add the columns it lacks (the scan locks the block again; the
//! rows it returns cannot be pruned while its MVCC snapshot is held). So a block copies just the
//! columns its first row is asked for: `count(*)` copies none, `sum(c2)` the first two.
//!
//! Lifetimes: by-reference datums point into the batch, as a buffer slot's point into its pinned
//! page. Before a batch is reused (next block, rescan, end of scan) every slot still pointing at
//! it is deformed completely and materialized (its values copied into the slot's own memory),
//! and a slot that is cleared or materialized detaches itself.
//!
//! Plain data plus pointer arithmetic over blocks; the scan (in `am`) supplies the block access.
use crate::storage::block::{
    BlockRef, ColDesc, RowHdr, KIND_CHARN, KIND_DEC128, KIND_DEC64, KIND_FIXED,
};
use crate::storage::{encoding, row};
use pgrx::pg_sys;
use std::ffi::c_void;

/// Adds columns `[batch.ncols(), need)` to `batch` (the scan re-reads its block).
pub type ExtendFn = unsafe fn(ctx: *mut c_void, batch: &mut Batch, need: usize);

/// Fewer rows than this are converted value by value (see [`Batch::fill_memo`]).
const MEMO_MIN_ROWS: usize = 16;
/// Up to this many rows, [`Batch::fill`] prefetches the cells it is about to read.
const PREFETCH_MAX_ROWS: usize = 4;

use crate::storage::block::prefetch_line;

pub struct Batch {
    /// local block the rows come from
    pub lb: u32,
    /// where the scan reads that block from (an image scan: the arena block number)
    pub src: u32,
    /// the rows returned, ascending slot numbers
    pub rows: Vec<u32>,
    /// their system columns (xmin, xmax, cmin/cmax) from the version headers
    pub sys: Vec<[u32; 3]>,
    /// columns the block stores (min of its and the tuple descriptor's); later ones are missing
    pub block_natts: usize,
    ncols: usize,
    /// column-major: value of row `r` of column `c` at `c * rows.len() + r`
    vals: Vec<pg_sys::Datum>,
    nulls: Vec<bool>,
    /// by-reference values (8-byte aligned chunks, one per column filled; never moved)
    data: Vec<Vec<u64>>,
    spare: Vec<Vec<u64>>,
    num: Vec<u8>,
    /// slots pointing at rows of this batch
    slots: Vec<*mut pg_sys::TupleTableSlot>,
    pub extend: Option<ExtendFn>,
    pub ctx: *mut c_void,
    /// Columns read (by attribute number - 1; empty: all). The others are returned as NULL:
    /// set by a scan whose query never looks at them.
    pub mask: Vec<bool>,
    /// Only the row numbers are collected, no system columns: block visitors (aggregate
    /// pushdown, Arrow export) that read the block themselves, and ScootScans, which never
    /// return system columns (their slots read zeros).
    pub rows_only: bool,
    /// Per column filled: index into `deferred`, or `NOT_DEFERRED`.
    defer_of: Vec<u8>,
    /// Scaled-integer decimal columns whose numeric datums are built only for the rows a slot
    /// asks for (see [`Deferred`]).
    deferred: Vec<Deferred>,
}

const NOT_DEFERRED: u8 = u8::MAX;
/// Entries of a deferred column's memo of converted values.
const DEFER_MEMO: usize = 256;

/// A `KIND_DEC64` column of a block batch whose rows are converted to PostgreSQL numerics one
/// at a time, when a slot asks for them (`vals` holds the raw scaled integer until then, copied
/// under the block's lock like any value). A join or a filter above the scan that drops most
/// rows then never pays for their numerics (TPC-H's lineitem probes of hash joins: two or three
/// numerics per row, 6M rows). Row `r`'s datum is written at `buf + r * per`; equal values
/// share the bytes of the first one converted (datums are read-only).
struct Deferred {
    scale: u32,
    align: u8,
    short_ok: bool,
    buf: *mut u8,
    per: usize,
    /// row already converted (its `vals` entry is the datum)
    done: Vec<bool>,
    memo_key: [i64; DEFER_MEMO],
    memo_val: [pg_sys::Datum; DEFER_MEMO],
    memo_set: [bool; DEFER_MEMO],
}

impl Default for Batch {
    fn default() -> Self {
        Batch {
            lb: u32::MAX,
            src: u32::MAX,
            rows: Vec::new(),
            sys: Vec::new(),
            block_natts: 0,
            ncols: 0,
            vals: Vec::new(),
            nulls: Vec::new(),
            data: Vec::new(),
            spare: Vec::new(),
            num: Vec::new(),
            slots: Vec::new(),
            extend: None,
            ctx: std::ptr::null_mut(),
            mask: Vec::new(),
            rows_only: false,
            defer_of: Vec::new(),
            deferred: Vec::new(),
        }
    }
}

/// Batches of ended scans, kept for the next ones with their vectors' capacity: an OLTP
/// statement begins and ends scans and index fetches all the time, and growing fresh vectors
/// for each showed in TPC-C's profile. Per backend (only the backend's own thread uses it).
static mut POOL: Vec<Box<Batch>> = Vec::new();
/// Batches kept at most, and the most memory one may keep to be kept.
const POOL_MAX: usize = 4;
const POOL_MAX_BYTES: usize = 1 << 20;

impl Batch {
    /// A batch for a new scan: a recycled one (empty, default settings) when there is one.
    pub fn take() -> Box<Batch> {
        unsafe { (*(&raw mut POOL)).pop() }.unwrap_or_default()
    }

    /// Gives back the batch of an ending scan: its slots take their values now (as
    /// [`Batch::clear`]); it is kept for [`Batch::take`] unless the pool is full or it holds
    /// much memory.
    pub fn recycle(mut b: Box<Batch>) {
        b.clear();
        let bytes = b.rows.capacity() * 4
            + b.sys.capacity() * 12
            + b.vals.capacity() * 8
            + b.nulls.capacity()
            + b.num.capacity()
            + b.spare.iter().map(|c| c.capacity() * 8).sum::<usize>();
        let pool = unsafe { &mut *(&raw mut POOL) };
        if pool.len() >= POOL_MAX || bytes > POOL_MAX_BYTES {
            return;
        }
        b.src = u32::MAX;
        b.extend = None;
        b.ctx = std::ptr::null_mut();
        b.mask.clear();
        b.rows_only = false;
        b.slots.clear();
        pool.push(b);
    }

    /// Starts a new block: detaches (materializes) the slots still pointing at the old rows.
    pub fn reset(&mut self, lb: u32, block_natts: usize) {
        self.release_slots();
        self.lb = lb;
        self.rows.clear();
        self.sys.clear();
        self.block_natts = block_natts;
        self.ncols = 0;
        self.vals.clear();
        self.nulls.clear();
        self.spare.append(&mut self.data);
        self.defer_of.clear();
        self.deferred.clear();
    }

    /// Empties the batch (rescan, end of scan).
    pub fn clear(&mut self) {
        self.reset(u32::MAX, 0);
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// Keeps only the rows `keep` says yes to; only before the columns are filled.
    pub fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        debug_assert!(self.ncols == 0);
        let mut w = 0;
        let sys = self.sys.len() == self.rows.len();
        for r in 0..self.rows.len() {
            if keep(self.rows[r]) {
                self.rows[w] = self.rows[r];
                if sys {
                    self.sys[w] = self.sys[r];
                }
                w += 1;
            }
        }
        self.rows.truncate(w);
        self.sys.truncate(w.min(self.sys.len()));
    }

    /// Lets `f` drop rows from the row list and, in step, from their system columns (`sys` is
    /// empty for a rows-only batch); only before the columns are filled.
    pub fn retain_by(&mut self, f: impl FnOnce(&mut Vec<u32>, &mut Vec<[u32; 3]>)) {
        debug_assert!(self.ncols == 0);
        f(&mut self.rows, &mut self.sys);
        debug_assert!(self.sys.is_empty() || self.sys.len() == self.rows.len());
    }

    /// Adds slots `0..n` of a rows-only batch (every slot a visible row).
    pub fn push_all(&mut self, n: u32) {
        debug_assert!(self.ncols == 0 && self.rows_only && self.rows.is_empty());
        self.rows.extend(0..n);
    }

    /// Adds a row (its slot and version header); only before the columns are filled.
    #[inline]
    pub fn push(&mut self, slot: u32, h: &RowHdr) {
        debug_assert!(self.ncols == 0);
        self.rows.push(slot);
        if !self.rows_only {
            self.sys.push(crate::storage::slot::sys_of(h));
        }
    }

    /// Copies columns `[ncols, need)` of the rows from block `b` (its lock held by the caller).
    ///
    /// # Safety
    /// `b` is the block the rows were collected from, `td` the relation's tuple descriptor.
    pub unsafe fn fill(&mut self, b: BlockRef, td: pg_sys::TupleDesc, need: usize) {
        let need = need.min(self.block_natts);
        if self.rows.len() <= PREFETCH_MAX_ROWS && need > self.ncols + 1 {
            self.prefetch(b, need);
        }
        for i in self.ncols..need {
            let c = b.col(i);
            self.vals.reserve(self.rows.len());
            self.nulls.reserve(self.rows.len());
            self.defer_of.push(NOT_DEFERRED);
            if !self.reads(i) {
                let n = self.rows.len();
                self.vals
                    .resize(self.vals.len() + n, pg_sys::Datum::from(0usize));
                self.nulls.resize(self.nulls.len() + n, true);
                continue;
            }
            match c.kind {
                KIND_FIXED if c.byval != 0 => self.fill_byval(b, c),
                KIND_DEC64 if self.rows.len() >= MEMO_MIN_ROWS => unsafe {
                    self.fill_deferred(b, c, i, row::scan_short_ok(td, i, c))
                },
                // the memo costs a few KiB of set-up: only worth it for a block's rows, not
                // for the one row of an index fetch
                KIND_DEC64 | KIND_DEC128 if self.rows.len() >= MEMO_MIN_ROWS => unsafe {
                    self.fill_memo(b, c, row::scan_short_ok(td, i, c))
                },
                KIND_CHARN if c.width <= 16 && self.rows.len() >= MEMO_MIN_ROWS => unsafe {
                    self.fill_memo(b, c, row::scan_short_ok(td, i, c))
                },
                _ => unsafe { self.fill_any(b, c, row::scan_short_ok(td, i, c)) },
            }
        }
        if need > self.ncols {
            self.ncols = need;
        }
    }

    /// Index fetches read one row, whose columns lie in as many places of the block (each one a
    /// cache miss on a cold block, where a heap tuple is one or two lines): asks for all of them
    /// at once, then for the variable-length payloads the entries point at, so the misses
    /// overlap instead of queueing one behind the other.
    fn prefetch(&self, b: BlockRef, need: usize) {
        for i in self.ncols..need {
            let c = b.col(i);
            if c.kind == crate::storage::block::KIND_ABSENT || !self.reads(i) {
                continue;
            }
            for &s in &self.rows {
                prefetch_line(b.value_ptr(c, s));
                prefetch_line(unsafe { b.base.add(c.bitmap_off as usize + (s as usize >> 3)) });
            }
        }
        for i in self.ncols..need {
            let c = b.col(i);
            if c.kind != crate::storage::block::KIND_VAR || !self.reads(i) {
                continue;
            }
            for &s in &self.rows {
                if b.is_valid(c, s) {
                    let (off, _) = b.var_entry(c, s);
                    prefetch_line(unsafe { b.base.add(off as usize) });
                }
            }
        }
    }

    /// Is column `i` read (see `mask`)?
    #[inline]
    fn reads(&self, i: usize) -> bool {
        self.mask.is_empty() || self.mask.get(i).copied().unwrap_or(true)
    }

    /// A new buffer of at least `bytes` bytes for by-reference values (stable address).
    fn chunk(&mut self, bytes: usize) -> *mut u8 {
        let mut chunk = self.spare.pop().unwrap_or_default();
        chunk.clear();
        // uninitialized: only bytes written by `read_value` are ever read
        chunk.reserve(bytes.div_ceil(8));
        self.data.push(chunk);
        self.data.last_mut().unwrap().as_mut_ptr() as *mut u8
    }

    /// Fixed-width by-value column: one load per row, no copies.
    fn fill_byval(&mut self, b: BlockRef, c: &ColDesc) {
        for &s in &self.rows {
            let valid = b.is_valid(c, s);
            let p = b.value_ptr(c, s);
            let d = unsafe {
                match c.attlen {
                    1 => *(p as *const i8) as isize,
                    2 => (p as *const i16).read_unaligned() as isize,
                    4 => (p as *const i32).read_unaligned() as isize,
                    _ => (p as *const i64).read_unaligned() as isize,
                }
            };
            self.nulls.push(!valid);
            self.vals
                .push(pg_sys::Datum::from(if valid { d } else { 0 }));
        }
    }

    /// A `KIND_DEC64` column: the raw scaled integers now, the numerics when asked for
    /// ([`Deferred`]).
    unsafe fn fill_deferred(&mut self, b: BlockRef, c: &ColDesc, i: usize, short_ok: bool) {
        let n = self.rows.len();
        let align = c.align.max(1);
        let per = 4 + encoding::max_numeric_payload(false) + align as usize;
        let buf = self.chunk(n * per);
        for &s in &self.rows {
            let valid = b.is_valid(c, s);
            let v = if valid {
                unsafe { (b.value_ptr(c, s) as *const i64).read_unaligned() }
            } else {
                0
            };
            self.nulls.push(!valid);
            self.vals.push(pg_sys::Datum::from(v as isize));
        }
        debug_assert!(self.deferred.len() < NOT_DEFERRED as usize);
        self.defer_of[i] = self.deferred.len() as u8;
        self.deferred.push(Deferred {
            scale: c.scale as u32,
            align,
            short_ok,
            buf,
            per,
            done: vec![false; n],
            memo_key: [0; DEFER_MEMO],
            memo_val: [pg_sys::Datum::from(0usize); DEFER_MEMO],
            memo_set: [false; DEFER_MEMO],
        });
    }

    /// The datum of deferred column `d`'s valid row `r` (value index `k`), converted now if it
    /// was not yet.
    fn convert_deferred(&mut self, d: usize, r: usize, k: usize) -> pg_sys::Datum {
        let def = &mut self.deferred[d];
        if def.done[r] {
            return self.vals[k];
        }
        let v = self.vals[k].value() as i64;
        let h = ((v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % DEFER_MEMO;
        let datum = if def.memo_set[h] && def.memo_key[h] == v {
            def.memo_val[h]
        } else {
            let mut fast = [0u8; encoding::SHORT_PAYLOAD_MAX];
            let payload = match encoding::i64_numeric_payload(v, def.scale, &mut fast) {
                Some(len) => &fast[..len],
                None => {
                    encoding::i64_to_numeric(v, def.scale, &mut self.num);
                    &self.num[..]
                }
            };
            let mut pos = r * def.per;
            // SAFETY: row r's `per` bytes of `buf` (allocated for every row) are its own
            let datum =
                unsafe { row::put_varlena(def.buf, &mut pos, def.align, def.short_ok, payload) };
            debug_assert!(pos <= (r + 1) * def.per);
            def.memo_key[h] = v;
            def.memo_val[h] = datum;
            def.memo_set[h] = true;
            datum
        };
        def.done[r] = true;
        self.vals[k] = datum;
        datum
    }

    /// Scaled-integer decimal and short `char(n)` columns: each distinct value of the block is
    /// converted once (a small direct-mapped memo; analytic columns such as quantities,
    /// discounts, tax rates and flags repeat a lot) and rows with equal values share its bytes
    /// (datums are read-only).
    unsafe fn fill_memo(&mut self, b: BlockRef, c: &ColDesc, short_ok: bool) {
        const MEMO: usize = 256;
        let wide = c.kind == KIND_DEC128;
        let per = match c.kind {
            KIND_CHARN => 4 + c.width as usize,
            _ => 4 + encoding::max_numeric_payload(wide),
        } + c.align.max(1) as usize;
        let buf = self.chunk(self.rows.len() * per);
        let mut pos = 0usize;
        let mut memo_key = [0i128; MEMO];
        let mut memo_val = [pg_sys::Datum::from(0usize); MEMO];
        let mut memo_set = [false; MEMO];
        for &s in &self.rows {
            if !b.is_valid(c, s) {
                self.nulls.push(true);
                self.vals.push(pg_sys::Datum::from(0usize));
                continue;
            }
            let p = b.value_ptr(c, s);
            let v: i128 = unsafe {
                match c.kind {
                    KIND_DEC128 => (p as *const i128).read_unaligned(),
                    KIND_DEC64 => (p as *const i64).read_unaligned() as i128,
                    _ => {
                        // char(n), n <= 16: the NUL-padded cell itself
                        let mut k = [0u8; 16];
                        std::ptr::copy_nonoverlapping(p, k.as_mut_ptr(), c.width as usize);
                        i128::from_le_bytes(k)
                    }
                }
            };
            let h = (((v as u64) ^ ((v >> 64) as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56)
                as usize
                % MEMO;
            let d = if memo_set[h] && memo_key[h] == v {
                memo_val[h]
            } else {
                let d = unsafe { row::read_value(b, c, s, short_ok, buf, &mut pos, &mut self.num) }
                    .unwrap_or(pg_sys::Datum::from(0usize));
                memo_key[h] = v;
                memo_val[h] = d;
                memo_set[h] = true;
                d
            };
            self.nulls.push(false);
            self.vals.push(d);
        }
    }

    /// Any other column: one buffer for its by-reference values, sized by a first pass.
    unsafe fn fill_any(&mut self, b: BlockRef, c: &ColDesc, short_ok: bool) {
        let mut size = 0usize;
        if c.byval == 0 {
            for &s in &self.rows {
                let v = row::value_size(b, c, s);
                if v > 0 {
                    size += v + c.align.max(1) as usize;
                }
            }
        }
        let buf = if size > 0 {
            self.chunk(size)
        } else {
            std::ptr::null_mut()
        };
        let mut pos = 0usize;
        for &s in &self.rows {
            let d = if b.is_valid(c, s) {
                unsafe { row::read_value(b, c, s, short_ok, buf, &mut pos, &mut self.num) }
            } else {
                None
            };
            self.nulls.push(d.is_none());
            self.vals.push(d.unwrap_or(pg_sys::Datum::from(0usize)));
        }
        debug_assert!(pos <= size);
    }

    /// Value of column `c` of row `r`: (datum, is null); `c < ncols()`.
    #[inline]
    pub fn value(&mut self, c: usize, r: usize) -> (pg_sys::Datum, bool) {
        let k = c * self.rows.len() + r;
        if self.nulls[k] {
            return (pg_sys::Datum::from(0usize), true);
        }
        if !self.deferred.is_empty() {
            let d = self.defer_of[c];
            if d != NOT_DEFERRED {
                return (self.convert_deferred(d as usize, r, k), false);
            }
        }
        (self.vals[k], false)
    }

    pub(crate) fn attach(&mut self, slot: *mut pg_sys::TupleTableSlot) {
        if !self.slots.contains(&slot) {
            self.slots.push(slot);
        }
    }

    pub(crate) fn detach(&mut self, slot: *mut pg_sys::TupleTableSlot) {
        self.slots.retain(|&s| s != slot);
    }

    /// Every slot still pointing at this batch gets all its values and copies them into its own
    /// memory (the batch's buffers are about to be reused or freed).
    pub fn release_slots(&mut self) {
        while let Some(s) = self.slots.pop() {
            unsafe { crate::storage::slot::detach_materialize(s, self) };
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // dropped by scan end (slots already released) or by a memory-context reset on error,
        // when the slots may be gone: never touch them here
        self.slots.clear();
    }
}
