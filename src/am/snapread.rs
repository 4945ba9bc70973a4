//! Reading a scoot table from an OLAP snapshot image (see `snapshot/`): the scan, index-fetch
//! and TID-fetch callbacks use these helpers instead of locking live blocks when the snapshot
//! they are given belongs to an image. Blocks come from private materialized copies (whole
//! blocks for scans; for row fetches only the pages they read, see `image::BlockCache`), visibility
//! is evaluated against the image's MVCC snapshot, and a block the snapshot marked all-visible
//! skips per-row visibility checks. Nothing here prunes, kills index entries or takes predicate
//! locks (images are never read by SERIALIZABLE transactions).
use super::index::hot_next;
use crate::snapshot::image::{self, BlockBuf, Image, TableImage};
use crate::snapshot::session;
use crate::storage::arena::{self, LwGuard};
use crate::storage::block::{
    BlockHeader, BlockRef, RowHdr, F_HEAP_ONLY, KIND_ABSENT, KIND_CSTRING, KIND_VAR, ROW_HDR_SIZE,
    ST_NORMAL, ST_REDIRECT, VAR_LEN_MASK,
};
use crate::storage::decode_tid_parts;
use crate::storage::tabledir::TableRef;
use crate::txn::mvcc;
use pgrx::pg_sys;
use std::rc::Rc;
use std::sync::atomic::Ordering;

/// What a scan of one table in one image needs.
pub struct ImgScan {
    pub image: Rc<Image>,
    pub table: Rc<TableImage>,
    /// visibility under the image's snapshot
    pub xids: mvcc::ImageXids,
    /// the block a sequential scan is on (allocated when first needed: index fetches use the
    /// backend's cache instead)
    buf: Option<BlockBuf>,
    /// the columns whose cells fetches make readable in sparse block copies (empty: all; an
    /// index scan that knows the columns it reads, see `index::set_fetch_columns`)
    pub cell_mask: Vec<bool>,
}

impl ImgScan {
    pub fn new(image: Rc<Image>, table: Rc<TableImage>) -> ImgScan {
        ImgScan {
            xids: mvcc::ImageXids::new(image.snap),
            image,
            table,
            buf: None,
            cell_mask: Vec::new(),
        }
    }

    /// Block `ab` of the image, materialized into this scan's own buffer (row-at-a-time scans
    /// that stay on a block for many rows).
    pub fn load(&mut self, ab: u32) -> BlockRef {
        let buf = self.buf.get_or_insert_with(BlockBuf::new);
        buf.load(&self.image, ab);
        buf.blk()
    }

    /// The image of block `lb` from the backend's cache of changed blocks (chain walks:
    /// an index range alternates between a row's original block and the blocks its newer
    /// versions moved to, so the cache holds several; see [`image::BlockCache`]):
    /// (block, high-water mark).
    pub fn cached(&mut self, lb: u32) -> Option<(BlockRef, u32)> {
        let b = *self.table.block(lb)?;
        Some((image::cache_get(&self.image, b.ab), b.hwm))
    }

    /// The image of block `lb` for a single fetch: a cached copy if there is one; else, if no
    /// page of the block was saved since the snapshot, the *live* block under its shared lock
    /// (held by the returned guard; writers save pages under the exclusive lock before they
    /// change anything, so an unsaved block is exactly what the snapshot saw — no 64 kB–1 MB
    /// copy for a row or two); else a copy made into the cache. Callers that got a live block
    /// call [`Image::check_alive`] when done (an abandoned snapshot's blocks may be reused).
    pub fn hop(&mut self, lb: u32) -> Option<(BlockRef, u32, Option<LwGuard>)> {
        let b = *self.table.block(lb)?;
        if let Some(blk) = image::cache_peek(&self.image, b.ab) {
            return Some((blk, b.hwm, None));
        }
        if let Some(g) = self.unchanged(b.ab) {
            let blk = BlockRef {
                base: arena::block_ptr(b.ab),
            };
            return Some((blk, b.hwm, Some(g)));
        }
        // a sparse copy: the pages a fetch reads are materialized as it reads them
        // (`ensure_hdr`, `ensure_cells`), the block header now
        let blk = image::cache_get_sparse(&self.image, b.ab);
        image::cache_ensure(&self.image, b.ab, |ensure| {
            // the header says where it ends (column descriptors and zone maps follow it)
            ensure(0, std::mem::size_of::<BlockHeader>());
            ensure(0, blk.header().row_hdr_off as usize);
        });
        Some((blk, b.hwm, None))
    }

    /// Makes row `slot`'s version header readable in `blk`, block `lb` as [`ImgScan::hop`]
    /// returned it (a cached copy, `live` false, may be sparse).
    #[inline]
    pub fn ensure_hdr(&self, lb: u32, blk: BlockRef, slot: u32, live: bool) {
        if live {
            return;
        }
        if let Some(b) = self.table.block(lb) {
            image::cache_ensure(&self.image, b.ab, |ensure| {
                ensure(blk.row_off(slot), ROW_HDR_SIZE)
            });
        }
    }

    /// Makes row `slot`'s cells (and variable-length payloads) readable in `blk`, block `lb` as
    /// [`ImgScan::hop`] returned it.
    pub fn ensure_cells(&self, lb: u32, blk: BlockRef, slot: u32, live: bool) {
        if live {
            return;
        }
        let Some(b) = self.table.block(lb) else {
            return;
        };
        let mask = &self.cell_mask;
        image::cache_ensure(&self.image, b.ab, |ensure| {
            for i in 0..blk.natts() {
                let c = blk.col(i);
                if c.kind == KIND_ABSENT
                    || !(mask.is_empty() || mask.get(i).copied().unwrap_or(true))
                {
                    continue;
                }
                // validity byte and cell, then the payload the cell points at
                ensure(c.bitmap_off as usize + (slot as usize >> 3), 1);
                ensure(
                    c.values_off as usize + slot as usize * c.width as usize,
                    c.width as usize,
                );
                if (c.kind == KIND_VAR || c.kind == KIND_CSTRING) && blk.is_valid(c, slot) {
                    let (off, len) = blk.var_entry(c, slot);
                    ensure(off as usize, (len & VAR_LEN_MASK) as usize);
                }
            }
        });
    }

    /// The shared lock of arena block `ab` when no page of it was saved since the snapshot
    /// (writers save pre-images under the exclusive lock before they change anything, so the
    /// live block is then exactly the image's); None: it changed.
    fn unchanged(&self, ab: u32) -> Option<LwGuard> {
        let d = arena::block_desc(ab);
        let epoch = self.image.epoch;
        if d.saved_tag.load(Ordering::Acquire) < epoch {
            let g = d.share();
            if d.saved_tag.load(Ordering::Acquire) < epoch {
                return Some(g);
            }
        }
        None
    }

    /// Runs `f` on arena block `ab` as the image has it: the *live* block under its shared lock
    /// when no page of it was saved since the snapshot (see [`ImgScan::hop`]: no copy), else the
    /// scan's buffer loaded with a copy, for block-at-a-time scans, which copy the values they
    /// need out of the block inside `f`. The scan reads only the columns `cols` (true: read; empty:
    /// all) of the block (and its row headers only if `rows`: what the backend maps of the live
    /// block, see [`arena::populate`]): a changed block is copied only as far as they need (see
    /// [`image::BlockBuf::load_columns`]) — under TPC-C load every block of `stock` changes
    /// between snapshots, and a scan reading 3 of its 17 columns copied all of each block.
    pub fn with_block_cols<R>(
        &mut self,
        ab: u32,
        cols: &[bool],
        rows: bool,
        f: impl FnOnce(BlockRef) -> R,
    ) -> R {
        // the live block's pages, mapped once per backend as a live scan does (not under the
        // block's lock; wasted only when the block changed since the snapshot)
        arena::populate(ab, cols, rows);
        if let Some(g) = self.unchanged(ab) {
            let r = f(BlockRef {
                base: arena::block_ptr(ab),
            });
            drop(g);
            self.image.check_alive();
            return r;
        }
        if cols.is_empty() || cols.iter().all(|&m| m) {
            return f(self.load(ab));
        }
        let buf = self.buf.get_or_insert_with(BlockBuf::new);
        buf.load_columns(&self.image, ab, cols);
        f(buf.blk())
    }

    /// Is row `h` of block `lb` visible to the image?
    #[inline]
    pub fn visible(&self, all_visible: bool, h: &RowHdr) -> bool {
        all_visible || self.xids.visible(h)
    }
}

/// The image that `snap` reads table `t` from, if any. A table that did not exist when the
/// snapshot was taken (created, truncated or rewritten since) cannot be read from it.
pub fn image_scan(rel: pg_sys::Relation, t: TableRef, snap: pg_sys::Snapshot) -> Option<ImgScan> {
    let img = session::image_for(snap)?;
    if !img.has_table(t) {
        crate::ffi::error_hint(
            pgrx::PgSqlErrorCode::ERRCODE_SNAPSHOT_TOO_OLD,
            format!(
                "table \"{}\" was created, truncated or rewritten after OLAP snapshot {} was taken",
                unsafe { crate::ffi::rel_name(rel) },
                img.id
            ),
            "Retry the statement (a new snapshot will include it), or SET scoot.olap = off.",
        );
    }
    let ti = img.table(t);
    Some(ImgScan::new(img, ti))
}

/// Notes a live read with an MVCC snapshot (the transaction then stays under the pruning
/// horizon).
#[inline]
pub fn live_read(snap: pg_sys::Snapshot) {
    if crate::ffi::is_mvcc_snapshot(snap) {
        session::note_live_read();
    }
}

/// Walks the chain rooted at (rb, rs) in the image, like `index::walk_chain` on live blocks:
/// `f(local block, block, slot, header)` until it returns true. With `cells`, the cells of each
/// member `f` sees are readable too (else only its header: sparse copies, see [`ImgScan::hop`]).
pub fn walk_chain(
    s: &mut ImgScan,
    rb: u32,
    rs: u32,
    cells: bool,
    mut f: impl FnMut(u32, BlockRef, u32, &RowHdr) -> bool,
) -> Option<(u32, u32)> {
    let (root, hwm, g) = s.hop(rb)?;
    let mut live = g.is_some();
    if rs >= hwm {
        return None;
    }
    s.ensure_hdr(rb, root, rs, live);
    let rh = root.row(rs);
    let r = match rh.state() {
        ST_REDIRECT => {
            let (p, o) = rh.next()?;
            let (b, sl) = decode_tid_parts(p, o)?;
            drop(g);
            walk_members(s, rb, rs, b, sl, None, None, &mut live, cells, &mut f)
        }
        // the root is the first member: its block, as just reached, serves it (no second hop)
        ST_NORMAL if !rh.has_flag(F_HEAP_ONLY) => walk_members(
            s,
            rb,
            rs,
            rb,
            rs,
            None,
            Some((root, hwm, g)),
            &mut live,
            cells,
            &mut f,
        ),
        _ => return None,
    };
    if live {
        s.image.check_alive();
    }
    r
}

/// Walks the members from (cb, cs) on; `at` is block `cb` already reached (with its guard, if
/// live), if the caller has it.
#[allow(clippy::too_many_arguments)]
fn walk_members(
    s: &mut ImgScan,
    rb: u32,
    rs: u32,
    mut cb: u32,
    mut cs: u32,
    mut prior: Option<u32>,
    mut at: Option<(BlockRef, u32, Option<LwGuard>)>,
    live: &mut bool,
    cells: bool,
    f: &mut impl FnMut(u32, BlockRef, u32, &RowHdr) -> bool,
) -> Option<(u32, u32)> {
    let mut first = true;
    for _ in 0..1_000_000 {
        let (blk, hwm, _g) = match at.take() {
            Some(a) => a,
            None => s.hop(cb)?,
        };
        let here_live = _g.is_some();
        *live |= here_live;
        if cs >= hwm {
            return None;
        }
        s.ensure_hdr(cb, blk, cs, here_live);
        let h = blk.row(cs);
        if h.state() != ST_NORMAL {
            return None;
        }
        if let Some(px) = prior {
            if h.xmin != px {
                return None;
            }
        }
        if !(first && cb == rb && cs == rs) && !h.has_flag(F_HEAP_ONLY) {
            return None;
        }
        first = false;
        if cells {
            s.ensure_cells(cb, blk, cs, here_live);
        }
        if f(cb, blk, cs, h) {
            return Some((cb, cs));
        }
        match hot_next(h) {
            Some((nb, ns, x)) => {
                cb = nb;
                cs = ns;
                prior = Some(x);
            }
            None => return None,
        }
    }
    None
}

/// The chain member the image sees (for bitmap scans).
pub fn chain_visible(s: &mut ImgScan, rb: u32, rs: u32) -> Option<(u32, u32)> {
    let xids = mvcc::ImageXids::new(s.image.snap);
    walk_chain(s, rb, rs, false, |_, _, _, h| xids.visible(h))
}

/// Copies row (lb, slot) of the image into `slot` if the image sees it.
pub unsafe fn fetch(
    rel: pg_sys::Relation,
    s: &mut ImgScan,
    lb: u32,
    sl: u32,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    let Some((blk, hwm, g)) = s.hop(lb) else {
        return false;
    };
    if sl >= hwm {
        return false;
    }
    s.ensure_hdr(lb, blk, sl, g.is_some());
    let h = blk.row(sl);
    if h.state() != ST_NORMAL || !s.xids.visible(h) {
        return false;
    }
    s.ensure_cells(lb, blk, sl, g.is_some());
    unsafe { super::store_row(rel, blk, lb, sl, slot) };
    if g.is_some() {
        drop(g);
        s.image.check_alive();
    }
    true
}
