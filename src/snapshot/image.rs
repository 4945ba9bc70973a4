//! The reader's side of an OLAP snapshot: an [`Image`] is a pinned snapshot seen from one
//! backend — its MVCC snapshot, its block and table catalogs — and blocks are read from it by
//! *materializing* them into a private buffer as they were when the gate closed:
//!
//! 1. Fast path: if no page of the block was preserved for an epoch at or after the image's
//!    (`BlockDesc::saved_tag < epoch`), the live block is unchanged since the snapshot: copy it,
//!    then re-check the tag (a writer saves before it writes, so a copy that raced with a write
//!    sees the tag move) and fall back to step 2 if it moved.
//! 2. Page by page: the live page, replaced by the oldest version saved for an epoch `>=` the
//!    image's when there is one (`cow::read_page`).
//! 3. Finally the snapshot must still be alive: one abandoned under memory pressure may have
//!    lost pre-images, and its readers get `snapshot too old` (SQLSTATE 72000).
//!
//! Nothing here takes a block lock: readers never block writers, and the copy is private, so
//! visibility checks and value reads run on it without any synchronisation.
use crate::snapshot::registry::{self, CatEntry};
use crate::storage::arena;
use crate::storage::block::BlockRef;
use crate::storage::cow;
use crate::storage::tabledir::TableRef;
use crate::storage::IdHasher;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::rc::Rc;
use std::sync::atomic::{fence, Ordering};

/// One block of a table as the image has it.
#[derive(Clone, Copy, Debug)]
pub struct ImgBlock {
    pub local: u32,
    pub ab: u32,
    pub hwm: u32,
    /// every row of the block is visible to the image's MVCC snapshot
    pub all_visible: bool,
    /// every slot below `hwm` is a NORMAL row (see `BlockDesc::dense`)
    pub dense: bool,
}

/// A table as the image has it: its blocks in local (TID) order.
pub struct TableImage {
    pub blocks: Vec<ImgBlock>,
    /// local block number -> index in `blocks` (u32::MAX: none), dense: index fetches look
    /// a block up per row
    by_local: Vec<u32>,
    pub nlocal: u32,
}

impl TableImage {
    pub fn block(&self, local: u32) -> Option<&ImgBlock> {
        match self.by_local.get(local as usize) {
            Some(&i) if i != u32::MAX => Some(&self.blocks[i as usize]),
            _ => None,
        }
    }
}

/// A pinned snapshot, as seen from this backend.
pub struct Image {
    pub slot: usize,
    pub id: u64,
    pub epoch: u32,
    pub method: u32,
    pub taken_at: i64,
    pub xmin: u32,
    /// the MVCC snapshot of the instant the gate closed (palloc'd in TopMemoryContext)
    pub snap: pg_sys::Snapshot,
    tables: RefCell<HashMap<u32, Rc<TableImage>>>,
}

impl Drop for Image {
    fn drop(&mut self) {
        unsafe {
            if !self.snap.is_null() {
                pg_sys::pfree(self.snap as *mut std::ffi::c_void);
            }
        }
        release_pin(self.slot);
    }
}

thread_local! {
    /// The table images of the last snapshot this backend read, by (table id, generation). Each
    /// statement pins its image anew (a new [`Image`]), and building a table's image scans the
    /// whole block catalog (every arena block): for short statements on OLAP snapshots (index
    /// lookups) that scan was about 8% of a point query. A snapshot's catalog never changes after it is
    /// taken, and snapshot ids are not reused, so statements reading the same snapshot share them.
    static LAST_TABLES: RefCell<(u64, HashMap<(u32, u32), Rc<TableImage>>)> =
        RefCell::new((0, HashMap::new()));
    /// pins this process holds, per slot (a slot is pinned once in the registry)
    static PINS: RefCell<[u32; cow::MAX_SNAPSHOTS]> = const { RefCell::new([0; cow::MAX_SNAPSHOTS]) };
}

fn release_pin(slot: usize) {
    let last = PINS.with(|p| {
        let mut p = p.borrow_mut();
        p[slot] = p[slot].saturating_sub(1);
        p[slot] == 0
    });
    if last {
        registry::unpin(slot);
    }
}

/// Builds a palloc'd MVCC snapshot (one chunk, like CopySnapshot) with slot `i`'s contents.
unsafe fn build_snapshot(i: usize, cxt: pg_sys::MemoryContext) -> pg_sys::Snapshot {
    unsafe {
        let s = registry::slot(i);
        let xcnt = s.xcnt.load(Ordering::Acquire) as usize;
        let subxcnt = s.subxcnt.load(Ordering::Acquire) as usize;
        let head = std::mem::size_of::<pg_sys::SnapshotData>();
        let size = head + (xcnt + subxcnt) * 4;
        let p = pg_sys::MemoryContextAllocZero(cxt, size) as pg_sys::Snapshot;
        (*p).snapshot_type = pg_sys::SnapshotType::SNAPSHOT_MVCC;
        (*p).xmin = crate::ffi::xid(s.xmin.load(Ordering::Acquire));
        (*p).xmax = crate::ffi::xid(s.xmax.load(Ordering::Acquire));
        let xip = (p as *mut u8).add(head) as *mut pg_sys::TransactionId;
        let src = registry::xip(i);
        for k in 0..xcnt {
            *xip.add(k) = crate::ffi::xid(src[k]);
        }
        (*p).xip = xip;
        (*p).xcnt = xcnt as u32;
        let subxip = xip.add(xcnt);
        let src = registry::subxip(i);
        for k in 0..subxcnt {
            *subxip.add(k) = crate::ffi::xid(src[k]);
        }
        (*p).subxip = subxip;
        (*p).subxcnt = subxcnt as i32;
        (*p).suboverflowed = false;
        (*p).takenDuringRecovery = false;
        (*p).copied = true;
        (*p).curcid = pg_sys::FirstCommandId;
        (*p).whenTaken = s.taken_at.load(Ordering::Acquire);
        p
    }
}

impl Image {
    /// Pins slot `i` (snapshot `id`) for this backend. None if it is gone.
    pub fn pin(i: usize, id: u64) -> Option<Rc<Image>> {
        let first = PINS.with(|p| p.borrow()[i] == 0);
        if first {
            if !registry::pin(i, id) {
                return None;
            }
        } else if registry::slot(i).id.load(Ordering::Acquire) != id {
            return None;
        }
        PINS.with(|p| p.borrow_mut()[i] += 1);
        let s = registry::slot(i);
        let snap = unsafe { build_snapshot(i, pg_sys::TopMemoryContext) };
        Some(Rc::new(Image {
            slot: i,
            id,
            epoch: s.epoch.load(Ordering::Acquire),
            method: s.method.load(Ordering::Acquire),
            taken_at: s.taken_at.load(Ordering::Acquire),
            xmin: s.xmin.load(Ordering::Acquire),
            snap,
            tables: RefCell::new(HashMap::new()),
        }))
    }

    /// A fresh palloc'd copy of the image's MVCC snapshot (in `cxt`), for use as a statement's
    /// snapshot.
    pub fn snapshot_copy(&self, cxt: pg_sys::MemoryContext) -> pg_sys::Snapshot {
        unsafe { build_snapshot(self.slot, cxt) }
    }

    /// Did table `t` (this relfilenode) exist when the snapshot was taken?
    pub fn has_table(&self, t: TableRef) -> bool {
        let g = registry::tables(self.slot);
        (t.id as usize) >= 1 && (t.id as usize) <= g.len() && g[t.id as usize - 1] == t.gen
    }

    /// Table `t` as the image has it (built once per image from the block catalog).
    pub fn table(&self, t: TableRef) -> Rc<TableImage> {
        if let Some(ti) = self.tables.borrow().get(&t.id) {
            return ti.clone();
        }
        let cached = LAST_TABLES.with(|c| {
            let c = c.borrow();
            let hit = c.1.get(&(t.id, t.gen)).filter(|_| c.0 == self.id);
            hit.cloned()
        });
        if let Some(ti) = cached {
            self.tables.borrow_mut().insert(t.id, ti.clone());
            return ti;
        }
        let owner = t.owner();
        let cat: &[CatEntry] = registry::catalog(self.slot);
        let mut blocks: Vec<ImgBlock> = Vec::new();
        for (ab, e) in cat.iter().enumerate() {
            if e.owner == owner {
                blocks.push(ImgBlock {
                    local: e.local,
                    ab: ab as u32,
                    hwm: e.hwm,
                    all_visible: e.vis_xid != 0
                        && !crate::txn::mvcc::precedes(self.xmin, e.vis_xid),
                    dense: e.dense != 0,
                });
            }
        }
        blocks.sort_by_key(|b| b.local);
        let nlocal = blocks.last().map(|b| b.local + 1).unwrap_or(0);
        let mut by_local = vec![u32::MAX; nlocal as usize];
        for (i, b) in blocks.iter().enumerate() {
            by_local[b.local as usize] = i as u32;
        }
        let ti = Rc::new(TableImage {
            blocks,
            by_local,
            nlocal,
        });
        self.tables.borrow_mut().insert(t.id, ti.clone());
        LAST_TABLES.with(|c| {
            let mut c = c.borrow_mut();
            if c.0 != self.id {
                *c = (self.id, HashMap::new());
            }
            c.1.insert((t.id, t.gen), ti.clone());
        });
        ti
    }

    /// Raises `snapshot too old` if the snapshot was abandoned (its pre-images may be gone).
    pub fn check_alive(&self) {
        fence(Ordering::SeqCst);
        if !cow::slot_live(self.slot, self.epoch) {
            too_old(self.id);
        }
    }

    /// Copies arena block `ab` as the snapshot saw it into `dst` (block-sized).
    pub fn materialize(&self, ab: u32, dst: &mut [u8]) {
        let bs = arena::block_size();
        debug_assert!(dst.len() >= bs);
        let d = arena::block_desc(ab);
        let src = arena::block_ptr(ab);
        if d.saved_tag.load(Ordering::Acquire) < self.epoch {
            unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), bs) };
            fence(Ordering::Acquire);
            if d.saved_tag.load(Ordering::Acquire) < self.epoch {
                self.check_alive();
                return;
            }
        }
        let first = (ab as usize * bs / cow::PAGE) as u32;
        for k in 0..(bs / cow::PAGE) {
            cow::read_page(first + k as u32, self.epoch, unsafe {
                dst.as_mut_ptr().add(k * cow::PAGE)
            });
        }
        self.check_alive();
    }
}

pub fn too_old(id: u64) -> ! {
    crate::ffi::error_hint(
        PgSqlErrorCode::ERRCODE_SNAPSHOT_TOO_OLD,
        format!("snapshot too old: OLAP snapshot {id} was abandoned"),
        "The pre-image memory (scoot.snapshot_memory) filled up, or the OLAP worker restarted. Increase scoot.snapshot_memory or shorten analytic queries, then retry.",
    );
}

/// A block materialized from an image (block-sized, 4 kB aligned buffer).
pub struct BlockBuf {
    buf: Vec<u8>,
    off: usize,
    pub ab: u32,
    /// `ab` holds only the header, the row headers and these columns (see
    /// [`BlockBuf::load_columns`]); None: the whole block
    cols: Option<Vec<bool>>,
}

impl BlockBuf {
    fn alloc() -> BlockBuf {
        let bs = arena::block_size();
        let buf = vec![0u8; bs + cow::PAGE];
        let off = buf.as_ptr().align_offset(cow::PAGE);
        BlockBuf {
            buf,
            off,
            ab: u32::MAX,
            cols: None,
        }
    }
    /// A buffer from this backend's spares (see [`SPARE_BUFS`]), or a new one.
    pub fn new() -> BlockBuf {
        SPARE
            .with(|s| s.borrow_mut().pop())
            .unwrap_or_else(BlockBuf::alloc)
    }
    pub fn slice(&mut self) -> &mut [u8] {
        let bs = arena::block_size();
        &mut self.buf[self.off..self.off + bs]
    }
    pub fn blk(&self) -> BlockRef {
        BlockRef {
            base: unsafe { self.buf.as_ptr().add(self.off) as *mut u8 },
        }
    }
    /// Makes this buffer hold arena block `ab` of `img` (a buffer belongs to one image: a
    /// scan's, or an entry of the cache that is keyed by image).
    pub fn load(&mut self, img: &Image, ab: u32) {
        if self.ab == ab && self.cols.is_none() {
            return;
        }
        self.ab = u32::MAX;
        img.materialize(ab, self.slice());
        self.cols = None;
        self.ab = ab;
    }

    /// Makes this buffer hold what a block-at-a-time scan reading the columns `cols` (by index;
    /// true or past the end: read) of arena block `ab` of `img` reads: the block header with its column
    /// descriptors and zone maps, the row headers and free-slot bitmap, and each such column's
    /// validity bitmap and values, page by page — a fraction of the block when the scan reads a
    /// few of many columns. The other bytes of the buffer are stale: only for columns stored in
    /// the block itself (no variable-length payloads; see [`sparse_ok`]).
    pub fn load_columns(&mut self, img: &Image, ab: u32, cols: &[bool]) {
        if self.ab == ab && self.cols.as_deref().is_none_or(|c| c == cols) {
            return;
        }
        self.ab = u32::MAX;
        let bs = arena::block_size();
        let dst = self.slice().as_mut_ptr();
        let first = (ab as usize * bs / cow::PAGE) as u32;
        let mut done = vec![false; bs / cow::PAGE];
        let mut copy = |from: usize, len: usize| {
            if len == 0 {
                return;
            }
            let end = (from + len).min(bs);
            for k in from / cow::PAGE..end.div_ceil(cow::PAGE) {
                if !done[k] {
                    done[k] = true;
                    cow::read_page(first + k as u32, img.epoch, unsafe {
                        dst.add(k * cow::PAGE)
                    });
                }
            }
        };
        // the header first: it says where everything else is
        copy(0, std::mem::size_of::<crate::storage::block::BlockHeader>());
        let blk = self.blk();
        copy(0, blk.header().row_hdr_off as usize);
        if !sparse_ok(blk, cols) {
            img.materialize(ab, self.slice());
            self.cols = None;
            self.ab = ab;
            return;
        }
        let natts = blk.natts();
        let cols_off = (0..natts)
            .map(|i| blk.col(i))
            .filter(|c| c.kind != crate::storage::block::KIND_ABSENT)
            .map(|c| c.bitmap_off as usize)
            .min()
            .unwrap_or(bs);
        // row headers and the free-slot bitmap: up to the first column region
        copy(0, cols_off);
        let cap = blk.header().capacity as usize;
        for i in (0..natts).filter(|&i| cols.get(i).copied().unwrap_or(true)) {
            let c = *blk.col(i);
            if c.kind == crate::storage::block::KIND_ABSENT {
                continue;
            }
            copy(c.bitmap_off as usize, cap.div_ceil(8));
            copy(c.values_off as usize, cap * c.width as usize);
        }
        img.check_alive();
        self.cols = Some(cols.to_vec());
        self.ab = ab;
    }
}

impl Default for BlockBuf {
    fn default() -> Self {
        Self::new()
    }
}

/// Can a scan that reads the columns `cols` (true, or past the end: read) of block `blk` (a
/// header as materialized) read a
/// [`BlockBuf::load_columns`] copy? Not when one of them keeps variable-length payloads in the
/// block's var area.
pub fn sparse_ok(blk: BlockRef, cols: &[bool]) -> bool {
    use crate::storage::block::{KIND_CSTRING, KIND_VAR};
    (0..blk.natts())
        .filter(|&i| cols.get(i).copied().unwrap_or(true))
        .all(|i| !matches!(blk.col(i).kind, KIND_VAR | KIND_CSTRING))
}

/// How many freed scan buffers a backend keeps for the next scan.
const SPARE_BUFS: usize = 8;

impl Drop for BlockBuf {
    /// Back to the spares: a fresh megabyte costs its page faults and the kernel's zeroing of
    /// every page (in CH-benCHmark's analytic queries, a fifth of the time went there).
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let buf = std::mem::take(&mut self.buf);
        let off = self.off;
        let _ = SPARE.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if s.len() < SPARE_BUFS && buf.len() == arena::block_size() + cow::PAGE {
                    s.push(BlockBuf {
                        buf,
                        off,
                        ab: u32::MAX,
                        cols: None,
                    });
                }
            }
        });
    }
}

thread_local! {
    static SPARE: RefCell<Vec<BlockBuf>> = const { RefCell::new(Vec::new()) };
    static CACHE: RefCell<BlockCache> = RefCell::new(BlockCache::default());
}

/// The backend's copies of changed blocks as images saw them, for row fetches (index, bitmap
/// and TID fetches, chain walks across blocks): keyed by (image, arena block), least recently
/// used evicted first, at most `scoot.snapshot_fetch_cache` (at least 4 blocks).
///
/// One cache per backend, not per scan: the budget then bounds the backend, whatever the number
/// of scans in its plans; the buffers stay allocated between statements (a new megabyte costs
/// page faults and zeroing), and statements that run on the same image (it is reused while
/// nothing changed or for up to `scoot.snapshot_max_age`) find the copies the previous ones
/// made. A copy is the block as its image saw it, so an entry never goes stale; entries of
/// older images are simply the least recently used.
///
/// A copy is either *full* (every page materialized: bitmap heap scans, which read whole TID
/// pages) or *sparse*: index and TID fetches materialize only the pages they read, page by page
/// ([`cache_ensure`]): the block header, the row headers of the slots they visit and the cells
/// of the rows they return. Under OLTP load nearly every block of a table like `stock` changes
/// while an analytic query runs, so an index nested loop over it used to copy a megabyte per block
/// (and fault in a fresh megabyte per block in every parallel worker) to read a row or two.
#[derive(Default)]
pub struct BlockCache {
    bufs: Vec<BlockBuf>,
    /// the image id each buffer holds a block of
    ids: Vec<u64>,
    clock: Vec<u64>,
    /// per buffer, the pages materialized (a bit per page); empty: all of them (a full copy)
    valid: Vec<Vec<u64>>,
    index: HashMap<(u64, u32), usize, BuildHasherDefault<IdHasher>>,
    tick: u64,
}

/// `scoot.snapshot_fetch_cache` in blocks (at least 4: a chain walk holds a few blocks at once).
fn cache_cap() -> usize {
    let bytes = crate::guc::SNAPSHOT_FETCH_CACHE_MB.get() as usize * (1 << 20);
    (bytes / arena::block_size()).max(4)
}

impl BlockCache {
    /// The entry of block `ab` of image `id`, marked used.
    fn touch(&mut self, id: u64, ab: u32) -> Option<usize> {
        let i = *self.index.get(&(id, ab))?;
        self.tick += 1;
        self.clock[i] = self.tick;
        Some(i)
    }

    fn peek(&mut self, id: u64, ab: u32) -> Option<BlockRef> {
        self.touch(id, ab).map(|i| self.bufs[i].blk())
    }

    /// A full copy of block `ab` of `img` (a sparse one is completed).
    fn get(&mut self, img: &Image, ab: u32, cap: usize) -> BlockRef {
        if let Some(i) = self.touch(img.id, ab) {
            if !self.valid[i].is_empty() {
                let pages = arena::block_size() / cow::PAGE;
                self.fill_pages(img, i, 0, pages - 1);
                self.valid[i].clear();
            }
            return self.bufs[i].blk();
        }
        let i = self.slot_for(cap);
        // not indexed while it is being filled (`materialize` may raise snapshot too old)
        self.bufs[i].ab = u32::MAX;
        img.materialize(ab, self.bufs[i].slice());
        self.bufs[i].ab = ab;
        self.ids[i] = img.id;
        self.valid[i].clear();
        self.index.insert((img.id, ab), i);
        self.bufs[i].blk()
    }

    /// A copy of block `ab` of `img` whose pages are materialized when [`BlockCache::ensure`]d
    /// (a new one has none).
    fn get_sparse(&mut self, img: &Image, ab: u32, cap: usize) -> BlockRef {
        if let Some(b) = self.peek(img.id, ab) {
            return b;
        }
        let i = self.slot_for(cap);
        let words = (arena::block_size() / cow::PAGE).div_ceil(64);
        self.valid[i].clear();
        self.valid[i].resize(words, 0);
        self.bufs[i].ab = ab;
        self.ids[i] = img.id;
        self.index.insert((img.id, ab), i);
        self.bufs[i].blk()
    }

    /// Materializes, in the cached copy of block `ab` of `img`, the pages under each byte range
    /// `(offset, length)` that `ranges` passes to its argument, in order (a later range may be
    /// read from bytes an earlier one made readable). A full copy does not call `ranges`.
    fn ensure(&mut self, img: &Image, ab: u32, ranges: impl FnOnce(&mut dyn FnMut(usize, usize))) {
        let Some(&i) = self.index.get(&(img.id, ab)) else {
            // the caller's reference came from this cache a moment ago: never evicted since
            pgrx::error!("scoot: an OLAP snapshot block copy was evicted while in use");
        };
        if self.valid[i].is_empty() {
            return;
        }
        let bs = arena::block_size();
        ranges(&mut |off, len| {
            if len > 0 {
                let (first, last) = (off / cow::PAGE, ((off + len).min(bs) - 1) / cow::PAGE);
                self.fill_pages(img, i, first, last);
            }
        });
    }

    /// Reads the missing pages `[first, last]` of sparse buffer `i` from the image.
    fn fill_pages(&mut self, img: &Image, i: usize, first: usize, last: usize) {
        let ab = self.bufs[i].ab;
        let base_page = (ab as usize * arena::block_size() / cow::PAGE) as u32;
        let mut read = false;
        for k in first..=last {
            let (w, bit) = (k / 64, 1u64 << (k % 64));
            if self.valid[i][w] & bit != 0 {
                continue;
            }
            let dst = unsafe { self.bufs[i].blk().base.add(k * cow::PAGE) };
            cow::read_page(base_page + k as u32, img.epoch, dst);
            self.valid[i][w] |= bit;
            read = true;
        }
        if read {
            img.check_alive();
        }
    }

    /// The buffer a new entry takes: a new one while under `cap`, else the least recently used
    /// one's (unindexed).
    fn slot_for(&mut self, cap: usize) -> usize {
        self.tick += 1;
        while self.bufs.len() > cap {
            // the budget was lowered: drop the least recently used
            let i = self.lru();
            self.index.remove(&(self.ids[i], self.bufs[i].ab));
            self.bufs.swap_remove(i);
            self.ids.swap_remove(i);
            self.clock.swap_remove(i);
            self.valid.swap_remove(i);
            if i < self.bufs.len() {
                self.index.insert((self.ids[i], self.bufs[i].ab), i);
            }
        }
        let i = if self.bufs.len() < cap {
            self.bufs.push(BlockBuf::alloc());
            self.ids.push(0);
            self.clock.push(0);
            self.valid.push(Vec::new());
            self.bufs.len() - 1
        } else {
            // a linear pass, only when a block is copied anyway
            let i = self.lru();
            self.index.remove(&(self.ids[i], self.bufs[i].ab));
            i
        };
        self.clock[i] = self.tick;
        i
    }

    fn lru(&self) -> usize {
        (0..self.bufs.len()).min_by_key(|&i| self.clock[i]).unwrap()
    }
}

/// This backend's cached copy of arena block `ab` as `img` saw it, if there is one.
pub fn cache_peek(img: &Image, ab: u32) -> Option<BlockRef> {
    CACHE.with(|c| c.borrow_mut().peek(img.id, ab))
}

/// Arena block `ab` as `img` saw it, from this backend's cache (copied into it if needed). The
/// reference stays valid until a few more blocks were copied (the cache evicts the least
/// recently used of at least 4).
pub fn cache_get(img: &Image, ab: u32) -> BlockRef {
    let cap = cache_cap();
    CACHE.with(|c| c.borrow_mut().get(img, ab, cap))
}

/// Arena block `ab` as `img` saw it, from this backend's cache, as a sparse copy: only the pages
/// [`cache_ensure`]d since it was made are materialized (all of them if it is a full copy).
/// Valid like [`cache_get`]'s reference.
pub fn cache_get_sparse(img: &Image, ab: u32) -> BlockRef {
    let cap = cache_cap();
    CACHE.with(|c| c.borrow_mut().get_sparse(img, ab, cap))
}

/// Materializes the byte ranges `ranges` passes to its argument in the cached copy of block `ab`
/// of `img` (which the caller just got from the cache); nothing to do for a full copy.
pub fn cache_ensure(img: &Image, ab: u32, ranges: impl FnOnce(&mut dyn FnMut(usize, usize))) {
    CACHE.with(|c| c.borrow_mut().ensure(img, ab, ranges))
}
