//! Scans over the blocks of a scoot table: sequential (forward/backward), parallel (local blocks
//! handed out by PostgreSQL's block allocator), TID range, bitmap heap scans, TABLESAMPLE and the
//! ANALYZE sampler.
//!
//! Sequential and parallel scans with an MVCC snapshot (and every scan of an OLAP snapshot image)
//! work a block at a time, like heap's page mode: on entering a block they decide under its
//! shared lock which rows they return (once for a block whose rows are all visible, see
//! `BlockDesc::vis_xid`) and copy the columns the query reads into a `storage::batch::Batch`,
//! then return the rows in lazily deformed slots without locking again. Other scans (non-MVCC
//! snapshots, other slot types) check and copy one row at a time under the lock. No pointer into
//! the arena survives a lock.
use super::snapread::{self, ImgScan};
use super::{check_conflict_out, predicate_lock_row};
use crate::ffi;
use crate::ffi::guard::boundary;
use crate::storage::arena;
use crate::storage::batch::Batch;
use crate::storage::block::TID_OFFSETS_PER_PAGE;
use crate::storage::block::{self, F_HEAP_ONLY, ST_NORMAL, ST_REDIRECT};
use crate::storage::filter::{self, BlockFilter, FilterOrder};
use crate::storage::modify as storage;
use crate::storage::tabledir::{self, TableRef};
use crate::txn::mvcc::{self, Htsv};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::{c_int, c_void};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pos {
    Start,
    End,
    At(usize, u32),
}

pub struct ScanState {
    pub t: TableRef,
    pub blocks: Vec<u32>,
    pos: Pos,
    tid_lo: i64,
    tid_hi: i64,
    pub pworker: pg_sys::ParallelBlockTableScanWorkerData,
    pstarted: bool,
    pcur: Option<(u32, u32)>,
    vis: Vec<(u32, u32)>,
    vis_pos: usize,
    /// bitmap heap scans: row of `batch` holding `vis[i]` (u32::MAX: not in it, the version
    /// is in another block)
    vis_row: Vec<u32>,
    page: u32,
    page_next: u32,
    page_end: u32,
    sample_started: bool,
    /// the scan reads an OLAP snapshot image (see `snapread`)
    pub img: Option<ImgScan>,
    /// block-at-a-time mode: the rows of the current block (see the module header)
    batch: Box<Batch>,
    /// index in `batch` of the row at `pos` / `pcur`
    bidx: usize,
    td: pg_sys::TupleDesc,
    /// block-at-a-time mode allowed (MVCC snapshot or image, page mode not disabled)
    pagemode: bool,
    /// ScootScan (see [`set_columns`]): how many leading columns a batch copies on entering a
    /// block
    eager: usize,
    /// ScootScan block filters (rows failing one are dropped before any column is copied); a
    /// block whose zone maps show no row can pass is skipped (also for ScootAgg's filters)
    filters: Vec<BlockFilter>,
    /// the order the filters run in, by their selectivity so far
    filter_order: FilterOrder,
    /// a ScootScan: nobody reads the rows' system columns (see [`set_columns`])
    no_sys: bool,
    /// blocks skipped by their zone maps
    pub zone_skipped: u64,
    /// ScootScan under a hash join: the join's hash table (see [`set_join_filter`])
    join: Option<JoinFilter>,
    /// rows the join filter dropped
    join_removed: u64,
    /// every block filter decided every row of the current batch exactly (see [`row_exact`]);
    /// false until a block is entered, and in row-at-a-time scans (which apply no filter)
    exact: bool,
    /// a filter the planner pushed could not be read (see [`filter_unusable`]): never exact
    filters_incomplete: bool,
}

/// The hash table of the hash join a ScootScan probes (`exec/customscan.c`): a row whose key
/// columns hash (as PostgreSQL's integer hash functions would) to a value `may_match` says the
/// table cannot hold is one the join would drop.
pub struct JoinFilter {
    pub table: *mut c_void,
    pub may_match: unsafe extern "C" fn(*mut c_void, u32) -> bool,
    /// asks for the join's bucket of one row ahead and the first tuple of another's (see
    /// [`JoinFilter::prefetch_ahead`])
    pub prefetch: Option<unsafe extern "C" fn(*mut c_void, u32, u32)>,
    /// each hash key, in the join's key order
    pub keys: Vec<JoinKey>,
    /// (column, width) of each key when every key is a plain column (the common case, hashed
    /// without running the key programs)
    plain: Option<Vec<(usize, u8)>>,
    /// rows looked up so far; the filter stops looking when it keeps nearly every row
    checked: u64,
    removed: u64,
    /// rows it looks up before it judges whether it pays
    trial: u64,
    /// still dropping rows (false once the trial showed it keeps nearly all: the hashes are
    /// still computed for the prefetches)
    filtering: bool,
    /// the hash value of each row of the current batch (same order), empty when the block's
    /// keys could not be hashed
    hashes: Vec<u32>,
}

/// A hash join key the scan computes from its columns: the width (2 / 4 / 8) of the integer
/// the join hashes, and the program that computes it ([`filter::eval_key`]; a plain column is
/// one `Var` of that width).
#[derive(Clone, Debug, PartialEq)]
pub struct JoinKey {
    pub width: u8,
    pub prog: Vec<filter::KeyTok>,
}

impl JoinKey {
    /// The column, when the key is a plain column of the hashed width.
    fn column(&self) -> Option<usize> {
        match self.prog[..] {
            [filter::KeyTok::Var(c, w)] if w == self.width => Some(c),
            _ => None,
        }
    }
}

/// How many rows ahead of the one returned the join's bucket (FAR) and the bucket's first
/// tuple (NEAR) are asked for: a hash join spends some hundreds of nanoseconds on each outer
/// row, a cache miss costs about one hundred.
const PROBE_FAR: usize = 4;
const PROBE_NEAR: usize = 2;

impl JoinFilter {
    /// Called as the scan returns row `r` of its batch: prefetches what the join's probes of
    /// rows `r + PROBE_FAR` and `r + PROBE_NEAR` will read first.
    #[inline]
    fn prefetch_ahead(&self, r: usize, batch_len: usize) {
        let Some(f) = self.prefetch else { return };
        let h = &self.hashes;
        if h.len() != batch_len || r + PROBE_NEAR >= h.len() {
            return;
        }
        let far = h[(r + PROBE_FAR).min(h.len() - 1)];
        unsafe { f(self.table, far, h[r + PROBE_NEAR]) };
    }
}

/// A palloc'd holder whose memory-context callback drops the Rust state if the scan is never
/// ended (error paths), and which `scan_end` empties.
#[repr(C)]
pub struct Holder<T> {
    cb: pg_sys::MemoryContextCallback,
    pub st: *mut T,
}

unsafe extern "C-unwind" fn holder_reset<T>(arg: *mut c_void) {
    unsafe {
        let h = arg as *mut Holder<T>;
        if !(*h).st.is_null() {
            drop(Box::from_raw((*h).st));
            (*h).st = std::ptr::null_mut();
        }
    }
}

pub fn new_holder<T>(v: T) -> *mut Holder<T> {
    new_holder_boxed(Box::new(v))
}

/// A holder of a value already boxed.
pub fn new_holder_boxed<T>(b: Box<T>) -> *mut Holder<T> {
    unsafe {
        let h = pg_sys::palloc0(std::mem::size_of::<Holder<T>>()) as *mut Holder<T>;
        (*h).st = Box::into_raw(b);
        (*h).cb.func = Some(holder_reset::<T>);
        (*h).cb.arg = h as *mut c_void;
        pg_sys::MemoryContextRegisterResetCallback(pg_sys::CurrentMemoryContext, &mut (*h).cb);
        h
    }
}

/// Takes the value out of a holder (which then drops nothing).
pub fn take_holder<T>(h: *mut Holder<T>) -> Option<Box<T>> {
    unsafe {
        let st = std::mem::replace(&mut (*h).st, std::ptr::null_mut());
        (!st.is_null()).then(|| Box::from_raw(st))
    }
}

pub fn drop_holder<T>(h: *mut Holder<T>) {
    unsafe { holder_reset::<T>(h as *mut c_void) }
}

#[repr(C)]
pub struct ScootScan {
    pub base: pg_sys::TableScanDescData,
    pub h: *mut Holder<ScanState>,
}

#[inline]
pub fn state<'a>(scan: pg_sys::TableScanDesc) -> &'a mut ScanState {
    unsafe { &mut *(*(*(scan as *mut ScootScan)).h).st }
}

/// TID pages of local block `lb` that count towards the relation size (all of them but in the
/// last block, whose started pages only).
fn block_pages(t: TableRef, lb: u32, hwm: u32) -> i64 {
    if lb + 1 >= tabledir::nlocal(t) {
        hwm.div_ceil(TID_OFFSETS_PER_PAGE) as i64
    } else {
        arena::vpb() as i64
    }
}

/// The table's local block numbers in TID order.
fn local_blocks(t: TableRef) -> Vec<u32> {
    tabledir::blocks_of(t)
        .into_iter()
        .map(|(lb, _)| lb)
        .collect()
}

fn ordinal(b: u32, s: u32) -> i64 {
    b as i64 * arena::max_rows() as i64 + s as i64
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_begin(
    rel: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    nkeys: c_int,
    key: *mut pg_sys::ScanKeyData,
    pscan: pg_sys::ParallelTableScanDesc,
    flags: u32,
) -> pg_sys::TableScanDesc {
    boundary(|| unsafe {
        let t = tabledir::resolve(rel);
        if nkeys > 0 {
            super::unsupported("a scan with scan keys");
        }
        super::index::report_background_pruning(rel, t);
        let scan = pg_sys::palloc0(std::mem::size_of::<ScootScan>()) as *mut ScootScan;
        (*scan).base.rs_rd = rel;
        (*scan).base.rs_snapshot = snapshot;
        (*scan).base.rs_nkeys = nkeys;
        (*scan).base.rs_key = key;
        (*scan).base.rs_flags = flags;
        (*scan).base.rs_parallel = pscan;
        let img = if snapshot.is_null() {
            None
        } else {
            snapread::image_scan(rel, t, snapshot)
        };
        if img.is_none() && !snapshot.is_null() {
            snapread::live_read(snapshot);
        }
        let blocks = if !pscan.is_null() {
            Vec::new()
        } else if let Some(i) = &img {
            i.table.blocks.iter().map(|b| b.local).collect()
        } else {
            local_blocks(t)
        };
        (*scan).h = new_holder(ScanState {
            t,
            blocks,
            pos: Pos::Start,
            tid_lo: 0,
            tid_hi: i64::MAX,
            pworker: std::mem::zeroed(),
            pstarted: false,
            pcur: None,
            vis: Vec::new(),
            vis_pos: 0,
            vis_row: Vec::new(),
            page: 0,
            page_next: 0,
            page_end: 0,
            sample_started: false,
            img,
            batch: Batch::take(),
            bidx: 0,
            td: (*rel).rd_att,
            pagemode: false,
            eager: 0,
            filters: Vec::new(),
            filter_order: FilterOrder::default(),
            no_sys: false,
            join: None,
            join_removed: 0,
            zone_skipped: 0,
            exact: false,
            filters_incomplete: false,
        });
        {
            let st = state(scan as pg_sys::TableScanDesc);
            st.pagemode = st.img.is_some()
                || (!snapshot.is_null()
                    && (*snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_MVCC
                    && flags & pg_sys::ScanOptions::SO_ALLOW_PAGEMODE != 0);
            st.batch.extend = Some(extend_batch);
            st.batch.ctx = st as *mut ScanState as *mut c_void;
        }
        if flags & (pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_TYPE_SAMPLESCAN)
            != 0
            && state(scan as pg_sys::TableScanDesc).img.is_none()
        {
            ffi::PredicateLockRelation(rel, snapshot);
        }
        if flags & pg_sys::ScanOptions::SO_TYPE_SEQSCAN != 0 {
            ffi::pgstat_count_scan(rel);
        }
        scan as pg_sys::TableScanDesc
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_end(scan: pg_sys::TableScanDesc) {
    boundary(|| unsafe {
        let s = scan as *mut ScootScan;
        Batch::recycle(std::mem::take(&mut state(scan).batch));
        if (*s).base.rs_flags & pg_sys::ScanOptions::SO_TEMP_SNAPSHOT != 0 {
            pg_sys::UnregisterSnapshot((*s).base.rs_snapshot);
        }
        drop_holder((*s).h);
        pg_sys::pfree(s as *mut c_void);
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_rescan(
    scan: pg_sys::TableScanDesc,
    _key: *mut pg_sys::ScanKeyData,
    set_params: bool,
    allow_strat: bool,
    allow_sync: bool,
    allow_pagemode: bool,
) {
    boundary(|| unsafe {
        if set_params {
            let f = &mut (*scan).rs_flags;
            let set = |f: &mut u32, bit: u32, on: bool| if on { *f |= bit } else { *f &= !bit };
            set(f, pg_sys::ScanOptions::SO_ALLOW_STRAT, allow_strat);
            set(f, pg_sys::ScanOptions::SO_ALLOW_SYNC, allow_sync);
            set(f, pg_sys::ScanOptions::SO_ALLOW_PAGEMODE, allow_pagemode);
        }
        let st = state(scan);
        st.batch.clear();
        let snap = (*scan).rs_snapshot;
        st.pagemode = st.img.is_some()
            || (!snap.is_null()
                && (*snap).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_MVCC
                && (*scan).rs_flags & pg_sys::ScanOptions::SO_ALLOW_PAGEMODE != 0);
        if (*scan).rs_parallel.is_null() {
            st.blocks = match &st.img {
                Some(i) => i.table.blocks.iter().map(|b| b.local).collect(),
                None => local_blocks(st.t),
            };
        }
        st.pos = Pos::Start;
        if (*scan).rs_flags & pg_sys::ScanOptions::SO_TYPE_SEQSCAN != 0 {
            ffi::pgstat_count_scan((*scan).rs_rd);
        }
        st.pstarted = false;
        st.pcur = None;
        st.sample_started = false;
        st.vis.clear();
        st.vis_pos = 0;
        st.vis_row.clear();
    })
}

/// Looks for the next visible row at or after (bi, s) (forward) or at or before (backward).
unsafe fn seek(
    scan: pg_sys::TableScanDesc,
    forward: bool,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    unsafe {
        if state(scan).pagemode && (*slot).tts_ops == crate::storage::slot::ops() {
            return seek_batch(scan, forward, slot);
        }
        if state(scan).img.is_some() {
            return seek_image(scan, forward, slot);
        }
        let rel = (*scan).rs_rd;
        let snap = (*scan).rs_snapshot;
        let st = state(scan);
        let n = st.blocks.len();
        let Some((mut bi, mut s)) = start_at(st.pos, forward, n) else {
            return false;
        };
        while bi >= 0 && (bi as usize) < n {
            let b = st.blocks[bi as usize];
            let entering = (forward && s == 0) || (!forward && s == i64::MAX);
            if entering {
                super::index::maybe_prune_block(rel, st.t, b);
            }
            if let Some(l) = storage::lock(st.t, b, false) {
                if entering {
                    ffi::pgstat_count_pages_hit(rel, block_pages(st.t, b, l.hwm()));
                }
                let hwm = l.hwm() as i64;
                if !forward && s >= hwm {
                    s = hwm - 1;
                }
                while s >= 0 && s < hwm {
                    let sl = s as u32;
                    let ord = ordinal(b, sl);
                    let h = l.row(sl);
                    if h.state() == ST_NORMAL && ord >= st.tid_lo && ord <= st.tid_hi {
                        let vis = mvcc::visible(h, snap);
                        check_conflict_out(rel, h, vis, snap);
                        if vis {
                            predicate_lock_row(rel, b, sl, h, snap);
                            super::store_row(rel, l.blk, b, sl, slot);
                            st.pos = Pos::At(bi as usize, sl);
                            return true;
                        }
                    }
                    s += if forward { 1 } else { -1 };
                }
            }
            if forward {
                bi += 1;
                s = 0;
            } else {
                bi -= 1;
                s = i64::MAX;
            }
        }
        st.pos = if forward { Pos::End } else { Pos::Start };
        false
    }
}

/// Block-at-a-time [`seek`]: returns the next row of the current block's batch, entering the
/// next block with rows when the batch is done.
unsafe fn seek_batch(
    scan: pg_sys::TableScanDesc,
    forward: bool,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    unsafe {
        let Some((lb, r)) = advance(scan, forward, slot) else {
            return false;
        };
        let st = state(scan);
        let s = st.batch.rows[r];
        if forward {
            if let Some(j) = &st.join {
                j.prefetch_ahead(r, st.batch.len());
            }
        }
        crate::storage::slot::store_batch_row(
            slot,
            &mut *st.batch,
            r,
            crate::storage::tid_of(lb, s),
            (*(*scan).rs_rd).rd_id,
        );
        true
    }
}

/// Moves a block-at-a-time scan to its next row in direction `forward`: (local block, index
/// in the batch), or None at the end. `slot` (may be null) is cleared before a new block is
/// entered: its row is about to be replaced, the batch need not materialize it.
unsafe fn advance(
    scan: pg_sys::TableScanDesc,
    forward: bool,
    slot: *mut pg_sys::TupleTableSlot,
) -> Option<(u32, usize)> {
    unsafe {
        let st = state(scan);
        let n = st.blocks.len() as isize;
        let dir: isize = if forward { 1 } else { -1 };
        let clear = |slot: *mut pg_sys::TupleTableSlot| {
            if !slot.is_null() {
                ffi::exec_clear_tuple(slot);
            }
        };
        // (block index, row index in the batch); a block index whose batch is not loaded yet
        // is entered first
        let (mut bi, mut idx, mut enter) = match st.pos {
            Pos::At(b, _) if st.batch.lb == st.blocks[b] => {
                (b as isize, st.bidx as isize + dir, false)
            }
            Pos::At(b, s) => {
                // the batch was given up (a non-batch read in between): re-enter the block
                // and continue after (or before) slot s
                let b = b as isize;
                clear(slot);
                enter_block(scan, st.blocks[b as usize]);
                let rows = &st.batch.rows;
                let i = if forward {
                    rows.partition_point(|&x| x <= s) as isize
                } else {
                    rows.partition_point(|&x| x < s) as isize - 1
                };
                (b, i, false)
            }
            Pos::Start if forward => (-1, 0, true),
            Pos::End if !forward => (n, 0, true),
            _ => return None,
        };
        loop {
            if !enter && idx >= 0 && (idx as usize) < st.batch.len() {
                let r = idx as usize;
                st.pos = Pos::At(bi as usize, st.batch.rows[r]);
                st.bidx = r;
                return Some((st.blocks[bi as usize], r));
            }
            enter = false;
            bi += dir;
            if bi < 0 || bi >= n {
                st.pos = if forward { Pos::End } else { Pos::Start };
                return None;
            }
            clear(slot);
            enter_block(scan, st.blocks[bi as usize]);
            idx = if forward {
                0
            } else {
                st.batch.len() as isize - 1
            };
        }
    }
}

/// Restricts the scan to the columns whose `mask` entry is set (the ScootScan custom scan,
/// which knows the columns its query reads): block batches copy exactly those, on entering a
/// block, and leave the others NULL.
///
/// Only ScootScans call this, and they never read `xmin`/`xmax`/`cmin`/`cmax` (queries that do
/// are left to plain scans): their batches record no system columns, and a dense all-visible
/// block is entered without reading its row headers.
pub fn set_columns(scan: pg_sys::TableScanDesc, mask: &[bool]) {
    let st = state(scan);
    st.no_sys = true;
    st.batch.rows_only = true;
    st.batch.mask = mask.to_vec();
    st.eager = mask.iter().rposition(|&m| m).map(|i| i + 1).unwrap_or(0);
}

/// Restricts a plain Seq Scan's batches to the columns whose `mask` entry is set (the others
/// read as NULL): for Seq Scan nodes whose scan slot is read only by their own quals and target
/// list, or by a join or aggregate above that reads the columns it names (see customscan.c,
/// `node_columns`). Unlike [`set_columns`], system columns stay readable and the columns are
/// still copied when a row asks for them.
pub fn set_plain_columns(scan: pg_sys::TableScanDesc, mask: &[bool]) {
    state(scan).batch.mask = mask.to_vec();
}

/// Copies at most the first `ncols` columns on entering a block (see `scoot_scan_set_eager`).
pub fn set_eager(scan: pg_sys::TableScanDesc, ncols: usize) {
    let st = state(scan);
    st.eager = st.eager.min(ncols);
}

/// Restricts the one-row batches of a bitmap heap scan's MVCC reads to the columns whose
/// `mask` entry is set (the others read as NULL): for bitmap heap scan nodes that project, whose
/// scan slot only their own quals and target list read.
pub fn set_bitmap_columns(scan: pg_sys::TableScanDesc, mask: &[bool]) {
    let st = state(scan);
    st.batch.mask = mask.to_vec();
    // copied for a bitmap page's rows under the lock that finds them (`bitmap_batch`)
    st.eager = mask.iter().rposition(|&m| m).map(|i| i + 1).unwrap_or(0);
}

/// Loads the batch with the rows of local block `lb` this scan returns (live block under its
/// shared lock, or the image's copy); columns are copied when a row asks for them.
unsafe fn enter_block(scan: pg_sys::TableScanDesc, lb: u32) {
    unsafe {
        let st = state(scan);
        // collect_block reads but never changes the filters
        let filters: *const Vec<BlockFilter> = &st.filters;
        let order: *mut FilterOrder = &mut st.filter_order;
        // nor the join filter (apart from its counters)
        let join: *mut Option<JoinFilter> = &mut st.join;
        let (td, eager) = (st.td, st.eager);
        let mut removed = 0;
        let mut exact = false;
        let cols = read_columns(&st.batch.mask, &st.filters, st.join.as_ref());
        collect_block(scan, lb, &cols, &mut |blk, batch| {
            exact = apply_filters(&*filters, &mut *order, batch, blk);
            if let Some(j) = &mut *join {
                removed = apply_join_filter(j, batch, blk);
            }
            batch.fill(blk, td, eager);
        });
        let st = state(scan);
        st.join_removed += removed;
        st.exact = exact && !st.filters_incomplete;
        if let Some(j) = &mut st.join {
            // a join that matches nearly every row: the lookups cost more than they save
            if j.filtering && j.checked >= j.trial && j.removed * 16 < j.checked {
                j.filtering = false;
                if j.prefetch.is_none() {
                    st.join = None;
                }
            }
        }
    }
}

/// The columns a ScootScan reads from an image's block (true: read; past the end: read): those
/// its batches copy (`mask`, see [`set_columns`]), its block filters' and its join filter's keys.
/// Empty: every column (a scan that did not name its columns).
fn read_columns(mask: &[bool], filters: &[BlockFilter], join: Option<&JoinFilter>) -> Vec<bool> {
    if mask.is_empty() {
        return Vec::new();
    }
    // as in `Batch::reads`, a column past the end of the mask is read
    let mut m = mask.to_vec();
    let mut add = |c: usize| {
        if let Some(x) = m.get_mut(c) {
            *x = true;
        }
    };
    for f in filters {
        f.for_each_column(&mut add);
    }
    if let Some(j) = join {
        for k in &j.keys {
            for t in &k.prog {
                if let filter::KeyTok::Var(c, _) = *t {
                    add(c);
                }
            }
        }
    }
    m
}

/// Drops the batch's rows whose key the join's hash table cannot hold; returns how many. A
/// block that stores a key column in another form (or not at all) keeps its rows, and so does
/// a row with a NULL key.
fn apply_join_filter(
    j: &mut JoinFilter,
    batch: &mut Batch,
    blk: crate::storage::block::BlockRef,
) -> u64 {
    j.hashes.clear();
    if batch.is_empty() || j.keys.len() > 4 {
        return 0;
    }
    if let Some(plain) = &j.plain {
        if plain.iter().any(|&(c, _)| c >= batch.block_natts) {
            return 0;
        }
        let Some((cols, n)) = filter::join_key_columns(blk, plain) else {
            return 0;
        };
        let cols = &cols[..n];
        // (hash, has a NULL key) of a row: a NULL key matches nothing, but the join decides that
        return join_filter_rows(j, batch, |s: u32| filter::join_key_hash(blk, cols, s));
    }
    // a key computed from columns: the descriptors of each key's columns
    let mut kcols = Vec::with_capacity(j.keys.len());
    for k in &j.keys {
        let ok = k.prog.iter().all(|t| match *t {
            filter::KeyTok::Var(c, _) => c < batch.block_natts,
            _ => true,
        });
        match filter::key_prog_columns(blk, &k.prog) {
            Some(c) if ok => kcols.push(c),
            _ => return 0,
        }
    }
    let keys = std::mem::take(&mut j.keys);
    let removed = join_filter_rows(j, batch, |s: u32| {
        let mut h = 0u32;
        for (k, (cols, _)) in keys.iter().zip(&kcols) {
            let v = filter::eval_key(&k.prog, |i| {
                let c = &cols[i];
                blk.is_valid(c, s).then(|| blk.read_int(c, s))
            });
            match v {
                filter::KeyVal::Val(v) => h = h.rotate_left(1) ^ filter::hash_int(v, k.width),
                // NULL: the join decides; an error: the join raises it as it computes the key
                filter::KeyVal::Null | filter::KeyVal::Error => return (h, true),
            }
        }
        (h, false)
    });
    j.keys = keys;
    removed
}

/// Drops the batch's rows whose hash (`key_hash`: the hash and whether the row must be kept
/// whatever it is) the join's table cannot hold; returns how many.
fn join_filter_rows(
    j: &mut JoinFilter,
    batch: &mut Batch,
    key_hash: impl Fn(u32) -> (u32, bool),
) -> u64 {
    if !j.filtering {
        let hashes = &mut j.hashes;
        hashes.extend(batch.rows.iter().map(|&s| key_hash(s).0));
        return 0;
    }
    let before = batch.len();
    let (table, may_match, hashes) = (j.table, j.may_match, &mut j.hashes);
    batch.retain(|s| {
        let (h, null) = key_hash(s);
        let keep = null || unsafe { may_match(table, h) };
        if keep {
            hashes.push(h);
        }
        keep
    });
    let removed = (before - batch.len()) as u64;
    j.checked += before as u64;
    j.removed += removed;
    removed
}

/// Sets (or, with a null table, removes) a ScootScan's join filter; it applies from the next
/// block the scan enters.
pub fn set_join_filter(
    scan: pg_sys::TableScanDesc,
    table: *mut c_void,
    may_match: Option<unsafe extern "C" fn(*mut c_void, u32) -> bool>,
    prefetch: Option<unsafe extern "C" fn(*mut c_void, u32, u32)>,
    trial: u64,
    keys: Vec<JoinKey>,
) {
    let st = state(scan);
    st.join = match may_match {
        Some(f) if !table.is_null() && !keys.is_empty() => Some(JoinFilter {
            table,
            may_match: f,
            prefetch,
            plain: keys
                .iter()
                .map(|k| k.column().map(|c| (c, k.width)))
                .collect(),
            keys,
            checked: 0,
            removed: 0,
            trial,
            filtering: true,
            hashes: Vec::new(),
        }),
        _ => None,
    };
}

/// Rows the join filter dropped so far.
pub fn join_filter_removed(scan: pg_sys::TableScanDesc) -> u64 {
    state(scan).join_removed
}

/// Is every row version of the block described by `d` visible to the MVCC snapshot `snap` (the
/// block's all-visible horizon precedes the snapshot's xmin)?
unsafe fn all_visible_to(d: &arena::BlockDesc, snap: pg_sys::Snapshot) -> bool {
    let vx = d.vis_xid.load(std::sync::atomic::Ordering::Relaxed);
    vx != 0 && !mvcc::precedes(unsafe { (*snap).xmin.into_inner() }, vx)
}

/// Collects into the scan's batch (reset, no columns) the rows of local block `lb` the scan
/// returns, then calls `then(block, batch)` while the block is still locked (or on the image's
/// copy of it).
unsafe fn collect_block(
    scan: pg_sys::TableScanDesc,
    lb: u32,
    cols: &[bool],
    then: &mut dyn FnMut(crate::storage::block::BlockRef, &mut Batch),
) {
    unsafe {
        let rel = (*scan).rs_rd;
        let snap = (*scan).rs_snapshot;
        let st = state(scan);
        let td = st.td;
        let natts = (*td).natts as usize;
        let (lo, hi) = (st.tid_lo, st.tid_hi);
        let ranged = lo > 0 || hi < i64::MAX;
        if let Some(im) = st.img.as_mut() {
            let Some(b) = im.table.block(lb).copied() else {
                st.batch.reset(lb, 0);
                return;
            };
            ffi::pgstat_count_pages_hit(rel, block_pages(st.t, lb, b.hwm));
            let xids = mvcc::ImageXids::new(im.image.snap);
            let batch = &mut st.batch;
            let (filters, skipped) = (&st.filters, &mut st.zone_skipped);
            // every slot a visible row: no row header to read
            let rows_free = b.all_visible && b.dense && !ranged && batch.rows_only;
            im.with_block_cols(b.ab, cols, !rows_free, |blk| {
                batch.reset(lb, blk.natts().min(natts));
                batch.src = b.ab;
                if !filters.is_empty() && filter::excluded(filters, blk) {
                    *skipped += 1;
                    return;
                }
                if rows_free {
                    batch.push_all(b.hwm);
                } else {
                    for sl in 0..b.hwm {
                        let h = blk.row(sl);
                        if h.state() == ST_NORMAL
                            && (!ranged || (lo..=hi).contains(&ordinal(lb, sl)))
                            && (b.all_visible || xids.visible(h))
                        {
                            batch.push(sl, h);
                        }
                    }
                }
                then(blk, batch);
            });
            return;
        }
        super::index::maybe_prune_block(rel, st.t, lb);
        let serializable = ffi::isolation_is_serializable();
        if let Some(ab) = tabledir::arena_block(st.t, lb) {
            // one call instead of a page fault per 4 kB on this backend's first visit; the row
            // headers only when the test below will read them (a hint: read without the lock)
            let d = arena::block_desc(ab);
            let rows_free = all_visible_to(d, snap)
                && !serializable
                && !ranged
                && st.batch.rows_only
                && d.dense(d.hwm.load(std::sync::atomic::Ordering::Relaxed));
            arena::populate(ab, cols, !rows_free);
        }
        let Some(l) = storage::lock(st.t, lb, false) else {
            st.batch.reset(lb, 0);
            return;
        };
        let hwm = l.hwm();
        ffi::pgstat_count_pages_hit(rel, block_pages(st.t, lb, hwm));
        st.batch.reset(lb, l.blk.natts().min(natts));
        if !st.filters.is_empty() && filter::excluded(&st.filters, l.blk) {
            st.zone_skipped += 1;
            return;
        }
        let all_visible = all_visible_to(l.desc, snap);
        if all_visible && !serializable && !ranged {
            if l.desc.dense(hwm) && st.batch.rows_only {
                // every slot a visible row: no row header to read
                st.batch.push_all(hwm);
            } else {
                let mut normal = 0;
                for sl in 0..hwm {
                    let h = l.row(sl);
                    if h.state() == ST_NORMAL {
                        st.batch.push(sl, h);
                        normal += 1;
                    }
                }
                if normal == hwm && hwm > 0 {
                    l.desc.set_dense(hwm);
                }
            }
            then(l.blk, &mut st.batch);
            return;
        }
        for sl in 0..hwm {
            let h = l.row(sl);
            if h.state() != ST_NORMAL || (ranged && !(lo..=hi).contains(&ordinal(lb, sl))) {
                continue;
            }
            if all_visible {
                if serializable {
                    predicate_lock_row(rel, lb, sl, h, snap);
                }
                st.batch.push(sl, h);
                continue;
            }
            let vis = mvcc::visible(h, snap);
            if serializable {
                check_conflict_out(rel, h, vis, snap);
            }
            if vis {
                if serializable {
                    predicate_lock_row(rel, lb, sl, h, snap);
                }
                st.batch.push(sl, h);
            }
        }
        then(l.blk, &mut st.batch);
    }
}

/// Visits every block of a serial block-at-a-time scan (an MVCC snapshot or an OLAP snapshot
/// image) in TID order: `f(block, rows)` gets the rows the scan returns (ascending slot numbers)
/// while the block is locked. `f` returns false to stop the scan. Returns false if the scan
/// cannot be visited this way (not block-at-a-time, or parallel).
///
/// `cols` (by index; true or past the end: read; empty: all) are the columns `f` reads: of an
/// image's changed block only they are copied (see [`ImgScan::with_block_cols`]).
pub unsafe fn visit_blocks(
    scan: pg_sys::TableScanDesc,
    cols: &[bool],
    f: &mut dyn FnMut(crate::storage::block::BlockRef, &[u32]) -> bool,
) -> bool {
    unsafe { visit_blocks_from(scan, 0, cols, f).is_some() }
}

/// [`visit_blocks`] from the first block whose local number is `>= from_lb` on. Returns None if
/// the scan cannot be visited this way, Some(None) at the end of the table, and Some(Some(lb))
/// when `f` stopped after block `lb - 1`: the next call continues at `lb` (an export streaming
/// a table in pieces, one short scan per piece under the same snapshot).
pub unsafe fn visit_blocks_from(
    scan: pg_sys::TableScanDesc,
    from_lb: u32,
    cols: &[bool],
    f: &mut dyn FnMut(crate::storage::block::BlockRef, &[u32]) -> bool,
) -> Option<Option<u32>> {
    unsafe {
        let st = state(scan);
        if !st.pagemode || !(*scan).rs_parallel.is_null() {
            return None;
        }
        let blocks: Vec<u32> = st
            .blocks
            .iter()
            .copied()
            .filter(|&b| b >= from_lb)
            .collect();
        st.batch.rows_only = true;
        let mut next = None;
        for lb in blocks {
            let mut go = true;
            collect_block(scan, lb, cols, &mut |blk, batch| {
                if !batch.is_empty() {
                    go = f(blk, &batch.rows);
                }
            });
            ffi::pgstat_count_getnext_n((*scan).rs_rd, state(scan).batch.len());
            if !go {
                next = Some(lb + 1);
                break;
            }
            pg_sys::check_for_interrupts!();
        }
        let st = state(scan);
        st.batch.clear();
        st.batch.rows_only = st.no_sys;
        st.pos = Pos::End;
        Some(next)
    }
}

/// Drops the batch's rows that fail a block filter (ScootScan), before columns are copied.
/// Returns whether the filters decided every remaining row exactly (each filter applied to the
/// block and judged every row itself, see [`BlockFilter::exact`]): then the rows pass the
/// clauses the filters came from, and the ScootScan does not evaluate those again.
fn apply_filters(
    filters: &[BlockFilter],
    order: &mut FilterOrder,
    batch: &mut Batch,
    blk: crate::storage::block::BlockRef,
) -> bool {
    let mut exact = true;
    let n = filters.len();
    for k in 0..n {
        if batch.is_empty() {
            break;
        }
        let i = order.order(n)[k];
        let f = &filters[i];
        let before = batch.len();
        if !f.uses_columns_below(batch.block_natts) {
            // a column added after the block was written: its default decides, in the recheck
            exact = false;
            continue;
        }
        match f.prepare_in(blk) {
            Some(p) => {
                let c = blk.col(f.col);
                batch.retain_by(|rows, sys| f.retain_with(&p, blk, c, rows, sys));
                order.record(i, before, batch.len());
                exact = exact && f.exact(&p, blk, c, &batch.rows);
            }
            None => exact = false,
        }
    }
    order.block_done(filters);
    exact
}

/// The ScootScan was given a filter it could not read: it evaluates every pushed clause itself.
pub fn filter_unusable(scan: pg_sys::TableScanDesc) {
    state(scan).filters_incomplete = true;
}

/// Did the block filters decide the row the scan returned last exactly (see [`apply_filters`])?
pub fn row_exact(scan: pg_sys::TableScanDesc) -> bool {
    state(scan).exact
}

/// Adds a block filter to a ScootScan's scan (see `storage::filter`).
pub fn add_filter(scan: pg_sys::TableScanDesc, f: BlockFilter) {
    state(scan).filters.push(f);
}

/// Removes a ScootScan's block filters (before its rescan adds them again with new runtime
/// values); the filter order learnt so far stays while the count does.
pub fn clear_filters(scan: pg_sys::TableScanDesc) {
    let st = state(scan);
    st.filters.clear();
    st.filters_incomplete = false;
}

/// Blocks the scan skipped by their zone maps so far.
pub fn zone_skipped(scan: pg_sys::TableScanDesc) -> u64 {
    state(scan).zone_skipped
}

/// [`Batch::extend`] for scans: adds columns to the current batch (a slot asked for more than
/// were copied), reading the block again. Its rows cannot have been pruned meanwhile: the scan's
/// MVCC snapshot keeps them visible (an image does not change at all). Every block starts with
/// no columns and is extended by its first row's request: what one row needs once (a copy of
/// the first row of a group, say) costs one block, not the rest of the scan.
unsafe fn extend_batch(ctx: *mut c_void, batch: &mut Batch, need: usize) {
    unsafe {
        let st = &mut *(ctx as *mut ScanState);
        if let Some(im) = st.img.as_mut() {
            let td = st.td;
            // the columns the block was entered with (`enter_block`): its copy serves them
            let cols = read_columns(&batch.mask, &st.filters, st.join.as_ref());
            im.with_block_cols(batch.src, &cols, false, |blk| batch.fill(blk, td, need));
            return;
        }
        match storage::lock(st.t, batch.lb, false) {
            Some(l) => batch.fill(l.blk, st.td, need),
            None => error!(
                "scoot: block {} of a table being scanned disappeared",
                batch.lb
            ),
        }
    }
}

/// Where a scan in direction `forward` continues from `pos` over `n` blocks: (block index,
/// slot; `i64::MAX` = the block's last slot), or None when it is at its end already.
fn start_at(pos: Pos, forward: bool, n: usize) -> Option<(isize, i64)> {
    Some(match (pos, forward) {
        (Pos::Start, true) => (0, 0),
        (Pos::At(b, s), true) => (b as isize, s as i64 + 1),
        (Pos::End, true) | (Pos::Start, false) => return None,
        (Pos::At(b, s), false) => (b as isize, s as i64 - 1),
        (Pos::End, false) => (n as isize - 1, i64::MAX),
    })
}

/// [`seek`] on an OLAP snapshot image: blocks are materialized copies, no lock is taken.
unsafe fn seek_image(
    scan: pg_sys::TableScanDesc,
    forward: bool,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    unsafe {
        let rel = (*scan).rs_rd;
        let st = state(scan);
        let n = st.blocks.len();
        let Some((mut bi, mut s)) = start_at(st.pos, forward, n) else {
            return false;
        };
        while bi >= 0 && (bi as usize) < n {
            let lb = st.blocks[bi as usize];
            let im = st.img.as_mut().unwrap();
            if let Some(b) = im.table.block(lb).copied() {
                let entering = (forward && s == 0) || (!forward && s == i64::MAX);
                if entering {
                    ffi::pgstat_count_pages_hit(rel, block_pages(st.t, lb, b.hwm));
                }
                let blk = im.load(b.ab);
                let hwm = b.hwm as i64;
                if !forward && s >= hwm {
                    s = hwm - 1;
                }
                while s >= 0 && s < hwm {
                    let sl = s as u32;
                    let ord = ordinal(lb, sl);
                    let h = blk.row(sl);
                    if h.state() == ST_NORMAL
                        && ord >= st.tid_lo
                        && ord <= st.tid_hi
                        && im.visible(b.all_visible, h)
                    {
                        super::store_row(rel, blk, lb, sl, slot);
                        st.pos = Pos::At(bi as usize, sl);
                        return true;
                    }
                    s += if forward { 1 } else { -1 };
                }
            }
            if forward {
                bi += 1;
                s = 0;
            } else {
                bi -= 1;
                s = i64::MAX;
            }
        }
        st.pos = if forward { Pos::End } else { Pos::Start };
        false
    }
}

/// Parallel scans: arena blocks are handed out by PostgreSQL's parallel block allocator.
unsafe fn next_parallel(scan: pg_sys::TableScanDesc, slot: *mut pg_sys::TupleTableSlot) -> bool {
    unsafe {
        if state(scan).pagemode && (*slot).tts_ops == crate::storage::slot::ops() {
            return next_parallel_batch(scan, slot);
        }
        let rel = (*scan).rs_rd;
        let snap = (*scan).rs_snapshot;
        let st = state(scan);
        let pb = (*scan).rs_parallel as pg_sys::ParallelBlockTableScanDesc;
        loop {
            let (b, s) = match st.pcur {
                Some(c) => c,
                None => {
                    if !st.pstarted {
                        pg_sys::table_block_parallelscan_startblock_init(rel, &mut st.pworker, pb);
                        st.pstarted = true;
                    }
                    let b = pg_sys::table_block_parallelscan_nextpage(rel, &mut st.pworker, pb);
                    if b == pg_sys::InvalidBlockNumber || b >= (*pb).phs_nblocks {
                        return false;
                    }
                    if let Some(im) = st.img.as_ref() {
                        if let Some(ib) = im.table.block(b) {
                            ffi::pgstat_count_pages_hit(rel, block_pages(st.t, b, ib.hwm));
                        }
                        (b, 0)
                    } else {
                        if b >= tabledir::nlocal(st.t) {
                            continue;
                        }
                        super::index::maybe_prune_block(rel, st.t, b);
                        if let Some(ab) = tabledir::arena_block(st.t, b) {
                            let hwm = arena::block_desc(ab)
                                .hwm
                                .load(std::sync::atomic::Ordering::Relaxed);
                            ffi::pgstat_count_pages_hit(rel, block_pages(st.t, b, hwm));
                        }
                        (b, 0)
                    }
                }
            };
            if let Some(im) = st.img.as_mut() {
                if let Some(ib) = im.table.block(b).copied() {
                    let blk = im.load(ib.ab);
                    let mut sl = s;
                    while sl < ib.hwm {
                        let h = blk.row(sl);
                        if h.state() == ST_NORMAL && im.visible(ib.all_visible, h) {
                            super::store_row(rel, blk, b, sl, slot);
                            st.pcur = Some((b, sl + 1));
                            return true;
                        }
                        sl += 1;
                    }
                }
                st.pcur = None;
                continue;
            }
            if let Some(l) = storage::lock(st.t, b, false) {
                let hwm = l.hwm();
                let mut sl = s;
                while sl < hwm {
                    let h = l.row(sl);
                    if h.state() == ST_NORMAL {
                        let vis = mvcc::visible(h, snap);
                        check_conflict_out(rel, h, vis, snap);
                        if vis {
                            predicate_lock_row(rel, b, sl, h, snap);
                            super::store_row(rel, l.blk, b, sl, slot);
                            st.pcur = Some((b, sl + 1));
                            return true;
                        }
                    }
                    sl += 1;
                }
            }
            st.pcur = None;
        }
    }
}

/// Block-at-a-time [`next_parallel`]: blocks come from PostgreSQL's parallel block allocator,
/// rows from the batch of the current one.
unsafe fn next_parallel_batch(
    scan: pg_sys::TableScanDesc,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    unsafe {
        let Some((b, r)) = advance_parallel(scan, slot) else {
            return false;
        };
        let st = state(scan);
        let sl = st.batch.rows[r];
        if let Some(j) = &st.join {
            j.prefetch_ahead(r, st.batch.len());
        }
        crate::storage::slot::store_batch_row(
            slot,
            &mut *st.batch,
            r,
            crate::storage::tid_of(b, sl),
            (*(*scan).rs_rd).rd_id,
        );
        true
    }
}

/// [`advance`] for parallel scans: (local block, index in the batch) of the next row.
unsafe fn advance_parallel(
    scan: pg_sys::TableScanDesc,
    slot: *mut pg_sys::TupleTableSlot,
) -> Option<(u32, usize)> {
    unsafe {
        let rel = (*scan).rs_rd;
        let st = state(scan);
        let pb = (*scan).rs_parallel as pg_sys::ParallelBlockTableScanDesc;
        loop {
            if let Some((b, s)) = st.pcur {
                // s: the next index in the batch
                if st.batch.lb == b && (s as usize) < st.batch.len() {
                    st.pcur = Some((b, s + 1));
                    return Some((b, s as usize));
                }
                st.pcur = None;
            }
            if !st.pstarted {
                pg_sys::table_block_parallelscan_startblock_init(rel, &mut st.pworker, pb);
                st.pstarted = true;
            }
            let b = pg_sys::table_block_parallelscan_nextpage(rel, &mut st.pworker, pb);
            if b == pg_sys::InvalidBlockNumber || b >= (*pb).phs_nblocks {
                return None;
            }
            if st.img.is_none() && b >= tabledir::nlocal(st.t) {
                continue;
            }
            if !slot.is_null() {
                ffi::exec_clear_tuple(slot);
            }
            enter_block(scan, b);
            st.pcur = Some((b, 0));
        }
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_getnextslot(
    scan: pg_sys::TableScanDesc,
    direction: pg_sys::ScanDirection::Type,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    boundary(|| unsafe {
        let found = if !(*scan).rs_parallel.is_null() {
            next_parallel(scan, slot)
        } else if direction == pg_sys::ScanDirection::NoMovementScanDirection {
            false
        } else {
            seek(
                scan,
                direction == pg_sys::ScanDirection::ForwardScanDirection,
                slot,
            )
        };
        if found {
            ffi::pgstat_count_getnext((*scan).rs_rd);
        } else {
            ffi::exec_clear_tuple(slot);
        }
        found
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_set_tidrange(
    scan: pg_sys::TableScanDesc,
    mintid: pg_sys::ItemPointer,
    maxtid: pg_sys::ItemPointer,
) {
    boundary(|| unsafe {
        let st = state(scan);
        let vpb = arena::vpb();
        let conv = |t: &pg_sys::ItemPointerData, lo: bool| -> i64 {
            let page = ffi::tid_page(t);
            let b = (page / vpb) as u64;
            let base = (page % vpb) as u64 * TID_OFFSETS_PER_PAGE as u64;
            let off = t.ip_posid as u64;
            let within = if off == 0 {
                if lo {
                    base as i64
                } else {
                    base as i64 - 1
                }
            } else {
                (base + off.min(TID_OFFSETS_PER_PAGE as u64) - 1) as i64
            };
            b as i64 * arena::max_rows() as i64 + within
        };
        st.tid_lo = conv(&*mintid, true);
        st.tid_hi = if ffi::tid_page(&*maxtid) == u32::MAX {
            i64::MAX
        } else {
            conv(&*maxtid, false)
        };
        st.pos = Pos::Start;
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_getnextslot_tidrange(
    scan: pg_sys::TableScanDesc,
    direction: pg_sys::ScanDirection::Type,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    boundary(|| unsafe { scan_getnextslot(scan, direction, slot) })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn parallelscan_estimate(rel: pg_sys::Relation) -> pg_sys::Size {
    boundary(|| unsafe { pg_sys::table_block_parallelscan_estimate(rel) })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn parallelscan_initialize(
    rel: pg_sys::Relation,
    pscan: pg_sys::ParallelTableScanDesc,
) -> pg_sys::Size {
    boundary(|| unsafe {
        let sz = pg_sys::table_block_parallelscan_initialize(rel, pscan);
        let pb = pscan as pg_sys::ParallelBlockTableScanDesc;
        // hand out the table's local blocks (those of the snapshot image it reads, if any)
        let t = tabledir::resolve(rel);
        let img_n = crate::snapshot::session::current_image()
            .filter(|i| i.has_table(t))
            .map(|i| i.table(t).nlocal)
            .unwrap_or(0);
        (*pb).phs_nblocks = tabledir::nlocal(t).max(img_n);
        (*pb).base.phs_syncscan = false;
        sz
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn parallelscan_reinitialize(
    rel: pg_sys::Relation,
    pscan: pg_sys::ParallelTableScanDesc,
) {
    boundary(|| unsafe { pg_sys::table_block_parallelscan_reinitialize(rel, pscan) })
}

// ---------------------------------------------------------------- bitmap heap scans

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_bitmap_next_block(
    scan: pg_sys::TableScanDesc,
    tbmres: *mut pg_sys::TBMIterateResult,
) -> bool {
    boundary(|| unsafe {
        let rel = (*scan).rs_rd;
        let snap = (*scan).rs_snapshot;
        let st = state(scan);
        st.vis.clear();
        st.vis_pos = 0;
        st.vis_row.clear();
        let page = (*tbmres).blockno;
        let vpb = arena::vpb();
        let b = page / vpb;
        let base = (page % vpb) * TID_OFFSETS_PER_PAGE;
        let ntuples = (*tbmres).ntuples;
        if let Some(im) = st.img.as_mut() {
            let Some((blk, hwm)) = im.cached(b) else {
                return false;
            };
            ffi::pgstat_count_pages_hit(rel, 1);
            let mut roots: Vec<u32> = Vec::new();
            if ntuples >= 0 {
                let offs = (*tbmres).offsets.as_ptr();
                for i in 0..ntuples as usize {
                    roots.push(base + *offs.add(i) as u32 - 1);
                }
            } else {
                for s in base..(base + TID_OFFSETS_PER_PAGE).min(hwm) {
                    let h = blk.row(s);
                    if (h.state() == ST_NORMAL && !h.has_flag(F_HEAP_ONLY))
                        || h.state() == ST_REDIRECT
                    {
                        roots.push(s);
                    }
                }
            }
            for s in roots {
                if let Some(found) = snapread::chain_visible(im, b, s) {
                    st.vis.push(found);
                }
            }
            // chain walks may have evicted the copy meanwhile: look it up again
            if let (Some((blk, _)), Some(ib)) = (im.cached(b), im.table.block(b).copied()) {
                bitmap_batch(st, b, ib.ab, blk);
            }
            return !st.vis.is_empty();
        }
        if b >= tabledir::nlocal(st.t) {
            return false;
        }
        ffi::pgstat_count_pages_hit(rel, 1);
        // every chain of the page under one shared lock of its block, as heap's
        // bitmapheap_next_block checks a page's tuples under one buffer lock (a lock per chain
        // was most of a correlated bitmap scan's time)
        let Some(l) = storage::lock(st.t, b, false) else {
            return false;
        };
        if ntuples >= 0 {
            let offs = (*tbmres).offsets.as_ptr();
            for i in 0..ntuples as usize {
                let s = base + *offs.add(i) as u32 - 1;
                if let Some(found) = super::index::chain_visible_locked(rel, st.t, &l, s, snap) {
                    st.vis.push(found);
                }
            }
        } else {
            // lossy page: every chain root in the page's slot range
            let hi = (base + TID_OFFSETS_PER_PAGE).min(l.hwm());
            for s in base..hi {
                let h = l.row(s);
                if (h.state() == ST_NORMAL && !h.has_flag(F_HEAP_ONLY)) || h.state() == ST_REDIRECT
                {
                    if let Some(found) = super::index::chain_visible_locked(rel, st.t, &l, s, snap)
                    {
                        st.vis.push(found);
                    }
                }
            }
        }
        if st.pagemode {
            bitmap_batch(st, b, u32::MAX, l.blk);
        }
        !st.vis.is_empty()
    })
}

/// Loads the scan's batch with the rows of `st.vis` that are in block `b` (read from `blk`, its
/// lock held or the image's copy; `src`: the image's arena block, for later column copies),
/// with the leading columns the plan reads (`eager`) copied now, column by column, and the
/// others when a row asks for them (`extend_batch`), as a sequential scan loads a block: the
/// per-row work of a one-row batch (and a decimal's numeric built for a row the qual then drops)
/// was most of a bitmap heap scan's time. Rows a chain walk found in another block are fetched
/// one at a time by `scan_bitmap_next_tuple`.
unsafe fn bitmap_batch(st: &mut ScanState, b: u32, src: u32, blk: crate::storage::block::BlockRef) {
    unsafe {
        st.vis_row.clear();
        let batch = &mut *st.batch;
        batch.reset(b, blk.natts().min((*st.td).natts as usize));
        batch.src = src;
        for &(fb, fs) in &st.vis {
            if fb == b {
                st.vis_row.push(batch.len() as u32);
                batch.push(fs, blk.row(fs));
            } else {
                st.vis_row.push(u32::MAX);
            }
        }
        if st.eager > 0 && !batch.is_empty() {
            batch.fill(blk, st.td, st.eager);
        }
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_bitmap_next_tuple(
    scan: pg_sys::TableScanDesc,
    _tbmres: *mut pg_sys::TBMIterateResult,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    boundary(|| unsafe {
        let rel = (*scan).rs_rd;
        let st = state(scan);
        while st.vis_pos < st.vis.len() {
            let (b, s) = st.vis[st.vis_pos];
            let r = st.vis_row.get(st.vis_pos).copied().unwrap_or(u32::MAX);
            st.vis_pos += 1;
            if r != u32::MAX && (*slot).tts_ops == crate::storage::slot::ops() {
                // the row of the page's batch (see `bitmap_batch`)
                let batch: *mut Batch = &mut *st.batch;
                crate::storage::slot::store_batch_row(
                    slot,
                    batch,
                    r as usize,
                    crate::storage::tid_of(b, s),
                    (*rel).rd_id,
                );
                ffi::pgstat_count_fetch(rel);
                return true;
            }
            // a version in another block (or a slot that is not scoot's): a copy of the row
            if let Some(im) = st.img.as_mut() {
                if let Some((blk, hwm)) = im.cached(b) {
                    if s < hwm && blk.row(s).state() == ST_NORMAL {
                        super::store_row(rel, blk, b, s, slot);
                        ffi::pgstat_count_fetch(rel);
                        return true;
                    }
                }
                continue;
            }
            if let Some(l) = storage::lock(st.t, b, false) {
                if storage::slot_in_range(&l, s) && l.row(s).state() == ST_NORMAL {
                    super::store_row(rel, l.blk, b, s, slot);
                    ffi::pgstat_count_fetch(rel);
                    return true;
                }
            }
        }
        ffi::exec_clear_tuple(slot);
        false
    })
}

// ---------------------------------------------------------------- TABLESAMPLE

/// Number of TID pages the table spans (relation_size / BLCKSZ).
pub fn tid_pages(t: TableRef) -> u32 {
    tabledir::tid_pages(t)
}

/// Slot range [lo, hi) of TID page `page` that holds initialised slots of `t`'s block.
fn page_slots(t: TableRef, page: u32) -> Option<(u32, u32, u32)> {
    let vpb = arena::vpb();
    let b = page / vpb;
    let d = arena::block_desc(tabledir::arena_block(t, b)?);
    if d.owner.load(std::sync::atomic::Ordering::Acquire) != t.owner()
        || d.local.load(std::sync::atomic::Ordering::Acquire) != b
    {
        return None;
    }
    let lo = (page % vpb) * TID_OFFSETS_PER_PAGE;
    let hi = (lo + TID_OFFSETS_PER_PAGE).min(d.hwm.load(std::sync::atomic::Ordering::Acquire));
    if hi <= lo {
        return None;
    }
    Some((b, lo, hi))
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_sample_next_block(
    scan: pg_sys::TableScanDesc,
    scanstate: *mut pg_sys::SampleScanState,
) -> bool {
    boundary(|| unsafe {
        let st = state(scan);
        let tsm = (*scanstate).tsmroutine;
        let nblocks = match st.img.as_ref() {
            Some(im) => im
                .table
                .blocks
                .last()
                .map(|b| b.local * arena::vpb() + b.hwm.div_ceil(TID_OFFSETS_PER_PAGE))
                .unwrap_or(0)
                .max(tid_pages(st.t)),
            None => tid_pages(st.t),
        };
        let page = if let Some(next) = (*tsm).NextSampleBlock {
            next(scanstate, nblocks)
        } else if !st.sample_started {
            if nblocks == 0 {
                pg_sys::InvalidBlockNumber
            } else {
                0
            }
        } else if st.page + 1 >= nblocks {
            pg_sys::InvalidBlockNumber
        } else {
            st.page + 1
        };
        st.sample_started = true;
        if page == pg_sys::InvalidBlockNumber {
            return false;
        }
        st.page = page;
        true
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_sample_next_tuple(
    scan: pg_sys::TableScanDesc,
    scanstate: *mut pg_sys::SampleScanState,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    boundary(|| unsafe {
        let rel = (*scan).rs_rd;
        let snap = (*scan).rs_snapshot;
        let st = state(scan);
        let tsm = (*scanstate).tsmroutine;
        let ps = match st.img.as_ref() {
            Some(im) => {
                let vpb = arena::vpb();
                let b = st.page / vpb;
                im.table.block(b).and_then(|ib| {
                    let lo = (st.page % vpb) * TID_OFFSETS_PER_PAGE;
                    let hi = (lo + TID_OFFSETS_PER_PAGE).min(ib.hwm);
                    (hi > lo).then_some((b, lo, hi))
                })
            }
            None => page_slots(st.t, st.page),
        };
        let Some((b, lo, hi)) = ps else {
            ffi::exec_clear_tuple(slot);
            return false;
        };
        let maxoff = (hi - lo) as u16;
        loop {
            let off = ((*tsm).NextSampleTuple.unwrap())(scanstate, st.page, maxoff);
            if off == 0 {
                ffi::exec_clear_tuple(slot);
                return false;
            }
            let s = lo + off as u32 - 1;
            if let Some(im) = st.img.as_mut() {
                if snapread::fetch(rel, im, b, s, slot) {
                    ffi::pgstat_count_getnext(rel);
                    return true;
                }
                continue;
            }
            if let Some(l) = storage::lock(st.t, b, false) {
                if s < l.hwm() {
                    let h = l.row(s);
                    if h.state() == ST_NORMAL {
                        let vis = mvcc::visible(h, snap);
                        check_conflict_out(rel, h, vis, snap);
                        if vis {
                            super::store_row(rel, l.blk, b, s, slot);
                            ffi::pgstat_count_getnext(rel);
                            return true;
                        }
                    }
                }
            }
        }
    })
}

// ---------------------------------------------------------------- ANALYZE

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_analyze_next_block(
    scan: pg_sys::TableScanDesc,
    blockno: pg_sys::BlockNumber,
    _bstrategy: pg_sys::BufferAccessStrategy,
) -> bool {
    boundary(|| {
        let st = state(scan);
        match page_slots(st.t, blockno) {
            Some((_, lo, hi)) => {
                st.page = blockno;
                st.page_next = lo;
                st.page_end = hi;
                st.bidx = usize::MAX;
                true
            }
            None => false,
        }
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_analyze_next_tuple(
    scan: pg_sys::TableScanDesc,
    oldest_xmin: pg_sys::TransactionId,
    liverows: *mut f64,
    deadrows: *mut f64,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    boundary(|| unsafe {
        let rel = (*scan).rs_rd;
        let st = state(scan);
        if st.page_next < st.page_end {
            let b = st.page / arena::vpb();
            // first call for this page: classify all its rows under one shared lock (heap holds
            // the buffer lock across a page's rows) and keep the ones to sample in the batch,
            // without their columns: ANALYZE copies only the rows its reservoir keeps, and
            // such a copy fills the batch's columns then (`extend_batch`). Kept rows cannot be
            // pruned meanwhile: ANALYZE's snapshot holds the xmin horizon.
            ffi::exec_clear_tuple(slot);
            let (lo, hi) = (st.page_next, st.page_end);
            st.page_next = st.page_end;
            st.bidx = 0;
            let Some(l) = storage::lock(st.t, b, false) else {
                st.batch.reset(b, 0);
                return false;
            };
            st.batch.reset(b, l.blk.natts().min((*st.td).natts as usize));
            // every row of a block VACUUM found all visible (and no write touched since) is
            // live to a horizon that does not precede the mark
            let vx = l.desc.vis_xid.load(std::sync::atomic::Ordering::Relaxed);
            let all_live = vx != 0 && !mvcc::precedes(oldest_xmin.into_inner(), vx);
            for s in lo..hi.min(l.hwm()) {
                let h = l.row(s);
                if h.state() != ST_NORMAL {
                    if h.state() == block::ST_DEAD {
                        *deadrows += 1.0;
                    }
                    continue;
                }
                let sample = if all_live {
                    *liverows += 1.0;
                    true
                } else {
                    analyze_sample(h, oldest_xmin.into_inner(), &mut *liverows, &mut *deadrows)
                };
                if sample {
                    st.batch.push(s, h);
                }
            }
        }
        // the current page's sampled rows (`scan_analyze_next_block` leaves none to return
        // until the classification above has loaded them)
        if st.bidx < st.batch.len() {
            let r = st.bidx;
            st.bidx += 1;
            let s = st.batch.rows[r];
            crate::storage::slot::store_batch_row(
                slot,
                &mut *st.batch,
                r,
                crate::storage::tid_of(st.batch.lb, s),
                (*rel).rd_id,
            );
            return true;
        }
        ffi::exec_clear_tuple(slot);
        false
    })
}

/// Counts row version `h` for ANALYZE as heap does (live or dead to `oldest_xmin`; rows being
/// inserted or deleted by this transaction as they will be at its end) and says whether it is
/// sampled.
fn analyze_sample(h: &block::RowHdr, oldest_xmin: u32, live: &mut f64, dead: &mut f64) -> bool {
    match mvcc::htsv(h, oldest_xmin) {
        Htsv::Live => {
            *live += 1.0;
            true
        }
        Htsv::Dead | Htsv::RecentlyDead => {
            *dead += 1.0;
            false
        }
        Htsv::InsertInProgress => {
            if mvcc::is_current(h.xmin) {
                *live += 1.0;
                true
            } else {
                false
            }
        }
        Htsv::DeleteInProgress => {
            if mvcc::is_current(mvcc::update_xid(h)) {
                *dead += 1.0;
                false
            } else {
                *live += 1.0;
                true
            }
        }
    }
}
