//! Reading a scoot table from an OLAP snapshot image (see `snapshot/`): the scan, index-fetch
//! and TID-fetch callbacks use these helpers instead of locking live blocks when the snapshot
//! they are given belongs to an image. Blocks come from private materialized copies, visibility
//! is evaluated against the image's MVCC snapshot, and a block the snapshot marked all-visible
//! skips per-row visibility checks. Nothing here prunes, kills index entries or takes predicate
//! locks (images are never read by SERIALIZABLE transactions).
use super::index::hot_next;
use crate::snapshot::image::{self, BlockBuf, Image, TableImage};
use crate::snapshot::session;
use crate::storage::arena::{self, LwGuard};
use crate::storage::block::{BlockRef, RowHdr, F_HEAP_ONLY, ST_NORMAL, ST_REDIRECT};
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
}

impl ImgScan {
    pub fn new(image: Rc<Image>, table: Rc<TableImage>) -> ImgScan {
        ImgScan {
            xids: mvcc::ImageXids::new(image.snap),
            image,
            table,
            buf: None,
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
        let d = arena::block_desc(b.ab);
        let epoch = self.image.epoch;
        if d.saved_tag.load(Ordering::Acquire) < epoch {
            let g = d.share();
            if d.saved_tag.load(Ordering::Acquire) < epoch {
                let blk = BlockRef {
                    base: arena::block_ptr(b.ab),
                };
                return Some((blk, b.hwm, Some(g)));
            }
        }
        Some((image::cache_get(&self.image, b.ab), b.hwm, None))
    }

    /// Runs `f` on arena block `ab` as the image has it: the *live* block under its shared lock
    /// when no page of it was saved since the snapshot (see [`ImgScan::hop`]: no copy), else the
    /// scan's buffer loaded with a materialized copy. For block-at-a-time scans, which copy the
    /// values they need out of the block inside `f`.
    pub fn with_block<R>(&mut self, ab: u32, f: impl FnOnce(BlockRef) -> R) -> R {
        let d = arena::block_desc(ab);
        let epoch = self.image.epoch;
        if d.saved_tag.load(Ordering::Acquire) < epoch {
            let g = d.share();
            if d.saved_tag.load(Ordering::Acquire) < epoch {
                let r = f(BlockRef {
                    base: arena::block_ptr(ab),
                });
                drop(g);
                self.image.check_alive();
                return r;
            }
        }
        f(self.load(ab))
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
/// `f(local block, block, slot, header)` until it returns true.
pub fn walk_chain(
    s: &mut ImgScan,
    rb: u32,
    rs: u32,
    mut f: impl FnMut(u32, BlockRef, u32, &RowHdr) -> bool,
) -> Option<(u32, u32)> {
    let (root, hwm, g) = s.hop(rb)?;
    let mut live = g.is_some();
    if rs >= hwm {
        return None;
    }
    let rh = root.row(rs);
    let r = match rh.state() {
        ST_REDIRECT => {
            let (p, o) = rh.next()?;
            let (b, sl) = decode_tid_parts(p, o)?;
            drop(g);
            walk_members(s, rb, rs, b, sl, None, None, &mut live, &mut f)
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
    f: &mut impl FnMut(u32, BlockRef, u32, &RowHdr) -> bool,
) -> Option<(u32, u32)> {
    let mut first = true;
    for _ in 0..1_000_000 {
        let (blk, hwm, _g) = match at.take() {
            Some(a) => a,
            None => s.hop(cb)?,
        };
        *live |= _g.is_some();
        if cs >= hwm {
            return None;
        }
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
    walk_chain(s, rb, rs, |_, _, _, h| xids.visible(h))
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
    let h = blk.row(sl);
    if h.state() != ST_NORMAL || !s.xids.visible(h) {
        return false;
    }
    unsafe { super::store_row(rel, blk, lb, sl, slot) };
    if g.is_some() {
        drop(g);
        s.image.check_alive();
    }
    true
}
