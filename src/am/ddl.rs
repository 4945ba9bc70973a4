//! Relation-level callbacks: new relfilenodes (CREATE TABLE, TRUNCATE, rewrites), truncation,
//! ALTER TABLE SET TABLESPACE (the rows stay where they are: the table entry is re-keyed),
//! CLUSTER / VACUUM FULL (copy of the non-dead versions into the new relfilenode), and sizes.
//!
//! `relation_size` reports the table's TID address space (what bitmap, BRIN, ANALYZE and
//! TABLESAMPLE page numbers range over); `relation_estimate_size` reports the bytes the rows
//! really occupy, which is what the planner should cost.
use crate::ffi;
use crate::ffi::guard::boundary;
use crate::storage::arena;
use crate::storage::block::{self, ST_NORMAL};
use crate::storage::modify as storage;
use crate::storage::row;
use crate::storage::tabledir::{self, TableRef};
use crate::txn::mvcc::{self, Htsv};
use crate::txn::xact;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::c_char;
use std::sync::atomic::Ordering;

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_set_new_filenode(
    rel: pg_sys::Relation,
    newrnode: *const pg_sys::RelFileNode,
    persistence: c_char,
    freeze_xid: *mut pg_sys::TransactionId,
    minmulti: *mut pg_sys::MultiXactId,
) {
    boundary(|| unsafe {
        crate::ensure_preloaded();
        arena::register_tranche();
        *freeze_xid = pg_sys::RecentXmin;
        *minmulti = pg_sys::GetOldestMultiXactId();
        let srel = pg_sys::RelationCreateStorage(*newrnode, persistence, true);
        pg_sys::smgrclose(srel);
        let newkey = tabledir::key_of_node(&*newrnode, (*rel).rd_backend);
        let oldkey = tabledir::key_of_rel(rel);
        tabledir::create(&newkey, (*rel).rd_id.into(), persistence as u8);
        xact::drop_on_abort(newkey);
        if oldkey != newkey && tabledir::lookup(&oldkey).is_some() {
            // TRUNCATE / rewrite: PostgreSQL unlinks the old relfilenode at commit, so do we
            xact::drop_on_commit(oldkey);
        }
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_nontransactional_truncate(rel: pg_sys::Relation) {
    boundary(|| {
        let t = tabledir::resolve(rel);
        storage::free_all_blocks(t);
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_copy_data(
    rel: pg_sys::Relation,
    newrnode: *const pg_sys::RelFileNode,
) {
    boundary(|| unsafe {
        let t = tabledir::resolve(rel);
        let srel = pg_sys::RelationCreateStorage(*newrnode, (*(*rel).rd_rel).relpersistence, true);
        pg_sys::smgrclose(srel);
        let oldkey = tabledir::key_of_rel(rel);
        let newkey = tabledir::key_of_node(&*newrnode, (*rel).rd_backend);
        tabledir::rekey(t, &newkey);
        xact::rekey_on_abort(t, oldkey);
        // like heap: the old relfilenode's (empty) files are unlinked at commit
        pg_sys::RelationDropStorage(rel);
    })
}

/// Header fields copied verbatim by CLUSTER / VACUUM FULL.
struct HdrCopy {
    xmin: u32,
    xmax: u32,
    cid: u32,
    infomask: u16,
    keys: bool,
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_copy_for_cluster(
    old_table: pg_sys::Relation,
    new_table: pg_sys::Relation,
    old_index: pg_sys::Relation,
    _use_sort: bool,
    oldest_xmin: pg_sys::TransactionId,
    xid_cutoff: *mut pg_sys::TransactionId,
    multi_cutoff: *mut pg_sys::MultiXactId,
    num_tuples: *mut f64,
    tups_vacuumed: *mut f64,
    tups_recently_dead: *mut f64,
) {
    boundary(|| unsafe {
        let told = tabledir::resolve(old_table);
        let tnew = tabledir::resolve(new_table);
        let oldest = oldest_xmin.into_inner();
        let freeze_limit = (*xid_cutoff).into_inner();
        let mcutoff = (*multi_cutoff).into_inner();
        let slot = pg_sys::table_slot_create(old_table, std::ptr::null_mut());
        let tmpcxt = pg_sys::AllocSetContextCreateExtended(
            pg_sys::CurrentMemoryContext,
            c"scoot cluster".as_ptr(),
            0,
            8 * 1024,
            8 * 1024 * 1024,
        );
        // the versions to copy, in index order when CLUSTER gives an index, else in TID order
        let mut order: Vec<(u32, u32)> = Vec::new();
        if !old_index.is_null() {
            let iscan = pg_sys::index_beginscan(
                old_table,
                old_index,
                &raw mut pg_sys::SnapshotAnyData,
                0,
                0,
            );
            pg_sys::index_rescan(iscan, std::ptr::null_mut(), 0, std::ptr::null_mut(), 0);
            while pg_sys::index_getnext_slot(
                iscan,
                pg_sys::ScanDirection::ForwardScanDirection,
                slot,
            ) {
                if let Some(p) = super::decode_tid(&(*slot).tts_tid) {
                    order.push(p);
                }
            }
            pg_sys::index_endscan(iscan);
            // versions not reachable from the index (none expected) still get copied
            let mut seen = order.clone();
            seen.sort_unstable();
            for (b, _) in tabledir::blocks_of(told) {
                if let Some(l) = storage::lock(told, b, false) {
                    for s in 0..l.hwm() {
                        if l.row(s).state() == ST_NORMAL && seen.binary_search(&(b, s)).is_err() {
                            order.push((b, s));
                        }
                    }
                }
            }
        } else {
            for (b, _) in tabledir::blocks_of(told) {
                if let Some(l) = storage::lock(told, b, false) {
                    for s in 0..l.hwm() {
                        if l.row(s).state() == ST_NORMAL {
                            order.push((b, s));
                        }
                    }
                }
            }
        }
        for (b, s) in order {
            pg_sys::MemoryContextReset(tmpcxt);
            let old = pg_sys::MemoryContextSwitchTo(tmpcxt);
            let copy = {
                let Some(l) = storage::lock(told, b, false) else {
                    pg_sys::MemoryContextSwitchTo(old);
                    continue;
                };
                if !storage::slot_in_range(&l, s) || l.row(s).state() != ST_NORMAL {
                    pg_sys::MemoryContextSwitchTo(old);
                    continue;
                }
                let h = l.row(s);
                match mvcc::htsv(h, oldest) {
                    Htsv::Dead => {
                        *tups_vacuumed += 1.0;
                        None
                    }
                    st => {
                        if st == Htsv::RecentlyDead {
                            *tups_recently_dead += 1.0;
                        } else {
                            *num_tuples += 1.0;
                        }
                        row::read_row(l.blk, s, slot);
                        let mut m = h.infomask();
                        let mut xmax = h.xmax;
                        // freeze what is older than the cutoffs, as heap's rewrite does
                        if m & mvcc::HEAP_XMIN_COMMITTED != 0
                            && mvcc::precedes(h.xmin, freeze_limit)
                        {
                            m |= mvcc::HEAP_XMIN_FROZEN;
                        }
                        if st == Htsv::Live && m & mvcc::HEAP_XMAX_INVALID == 0 {
                            let old_enough = if m & mvcc::HEAP_XMAX_IS_MULTI != 0 {
                                pg_sys::MultiXactIdPrecedes(ffi::xid(xmax), ffi::xid(mcutoff))
                            } else {
                                mvcc::precedes(xmax, freeze_limit)
                            };
                            if old_enough {
                                m = (m & !mvcc::HEAP_XMAX_BITS) | mvcc::HEAP_XMAX_INVALID;
                                xmax = 0;
                            }
                        }
                        Some(HdrCopy {
                            xmin: h.xmin,
                            xmax,
                            cid: h.cid,
                            infomask: m,
                            keys: h.has_flag(block::F_KEYS_UPDATED),
                        })
                    }
                }
            };
            if let Some(c) = copy {
                // values are TOASTed into the new relation's TOAST table, as heap's rewrite does
                let prepared = row::prepare(
                    new_table,
                    tnew,
                    slot,
                    row::Toast::Now(pg_sys::HEAP_INSERT_NO_LOGICAL as i32),
                    false,
                );
                let (nb, ns) =
                    storage::insert(new_table, tnew, &prepared, c.xmin, c.cid, 0, None, None);
                if let Some(l) = storage::lock(tnew, nb, true) {
                    storage::set_header(&l, ns, c.xmax, c.infomask, c.keys);
                }
            }
            pg_sys::MemoryContextSwitchTo(old);
        }
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::MemoryContextDelete(tmpcxt);
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_size(
    rel: pg_sys::Relation,
    fork: pg_sys::ForkNumber::Type,
) -> u64 {
    boundary(|| {
        if fork != pg_sys::ForkNumber::MAIN_FORKNUM && fork != pg_sys::ForkNumber::InvalidForkNumber
        {
            return 0;
        }
        let t = tabledir::resolve(rel);
        super::scan::tid_pages(t) as u64 * pg_sys::BLCKSZ as u64
    })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_needs_toast_table(rel: pg_sys::Relation) -> bool {
    boundary(|| unsafe { row::needs_toast_table(rel) })
}

/// Out-of-line values go to an ordinary heap TOAST table, as for heap tables.
#[pg_guard]
pub unsafe extern "C-unwind" fn relation_toast_am(_rel: pg_sys::Relation) -> pg_sys::Oid {
    pg_sys::HEAP_TABLE_AM_OID
}

/// Only called on a TOAST relation of this access method, which never exists (scoot tables'
/// TOAST relations are heap tables).
#[pg_guard]
pub unsafe extern "C-unwind" fn relation_fetch_toast_slice(
    _toastrel: pg_sys::Relation,
    _valueid: pg_sys::Oid,
    _attrsize: i32,
    _sliceoffset: i32,
    _slicelength: i32,
    _result: *mut pg_sys::varlena,
) {
    boundary(|| super::unsupported("a scoot table as TOAST relation"))
}

/// Bytes and row versions a table occupies: (bytes, versions).
pub fn table_usage(t: TableRef) -> (u64, u64) {
    let u = usage(t);
    (u.bytes, u.versions)
}

/// What a table's blocks hold.
struct Usage {
    /// bytes of the slots in use (fixed part, their share) and of the variable-length areas
    bytes: u64,
    /// slots in use
    versions: u64,
    /// ... of which redirects
    redirects: u64,
    /// the fixed-part bytes of those redirect slots
    redirect_bytes: u64,
}

fn usage(t: TableRef) -> Usage {
    let mut u = Usage {
        bytes: 0,
        versions: 0,
        redirects: 0,
        redirect_bytes: 0,
    };
    let bs = arena::block_size() as u64;
    for (_, b) in tabledir::blocks_of(t) {
        let d = arena::block_desc(b);
        let hwm = d.hwm.load(Ordering::Relaxed) as u64;
        let used = hwm.saturating_sub(d.nfree.load(Ordering::Relaxed) as u64);
        let redirects = (d.nredirect.load(Ordering::Relaxed) as u64).min(used);
        let cap = d.capacity.load(Ordering::Relaxed).max(1) as u64;
        let fixed = d.fixed_end.load(Ordering::Relaxed) as u64;
        let var = bs
            .saturating_sub(d.var_low.load(Ordering::Relaxed) as u64)
            .saturating_sub(d.var_dead.load(Ordering::Relaxed) as u64);
        u.bytes += fixed * used / cap + var;
        u.versions += used;
        u.redirects += redirects;
        u.redirect_bytes += fixed * redirects / cap;
    }
    u
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_estimate_size(
    rel: pg_sys::Relation,
    attr_widths: *mut i32,
    pages: *mut pg_sys::BlockNumber,
    tuples: *mut f64,
    allvisfrac: *mut f64,
) {
    boundary(|| unsafe {
        // heap's table_block_relation_estimate_size, with two page counts: the planner costs the
        // pages the rows' bytes would fill (what a heap table of the same rows spans), and the
        // row count comes from pg_class's density (reltuples per TID page, as VACUUM and ANALYZE
        // measure it) times the current TID pages
        let t = tabledir::resolve(rel);
        let u = usage(t);
        // the pages a heap table of these rows would span: heap's 28 bytes of per-row overhead
        // (tuple header + line pointer) and tuple alignment instead of scoot's 20-byte header,
        // 8168 usable bytes per page, minus the fillfactor's reserve. A redirect (a HOT chain
        // root whose versions are gone) is a 4-byte line pointer in heap but a whole slot here:
        // counted as heap's (an updated table would otherwise look up to twice its rows' size,
        // and scans of it that much dearer than heap's)
        let bytes = u.bytes - u.redirect_bytes;
        let versions = u.versions - u.redirects;
        let heap_bytes = bytes + versions * 12 + u.redirects * 4;
        let per_page = (pg_sys::BLCKSZ as u64 - 24) * fill_factor(rel) as u64 / 100;
        let tid_pages = super::scan::tid_pages(t) as f64;
        let r = &*(*rel).rd_rel;
        let relpages = r.relpages as f64;
        let reltuples = r.reltuples as f64;
        let relallvisible = r.relallvisible as f64;
        let mut curpages = heap_bytes.div_ceil(per_page.max(1)) as pg_sys::BlockNumber;
        if curpages < 10 && reltuples < 0.0 && !r.relhassubclass {
            // never vacuumed or analyzed: do not trust a small size yet (heap's 10-page rule)
            curpages = 10;
        }
        *pages = curpages;
        if curpages == 0 {
            *tuples = 0.0;
            *allvisfrac = 0.0;
            return;
        }
        *tuples = if reltuples >= 0.0 && relpages > 0.0 && tid_pages > 0.0 {
            (reltuples / relpages * tid_pages).round()
        } else {
            let width = pg_sys::get_rel_data_width(rel, attr_widths) + 28;
            let fillfactor = fill_factor(rel);
            let density = ((pg_sys::BLCKSZ as i32 - 24) * fillfactor / 100 / width.max(1)) as f64;
            (density * curpages as f64).round()
        };
        // an index-only scan of a scoot table skips the rows of all-visible blocks as heap's skips
        // the pages its visibility map marks (am/index.rs, root_all_visible), but with the
        // scoot-aware planning of `scoot.custom_scan` on the planner still charges it the row
        // fetches of a plain index scan: told the all-visible share, it read whole tables for
        // aggregates through parallel index-only scans, where a ScootScan is several times faster
        // (sql/scoot_specific_plans); with it off, plans stay heap's (VACUUM's all-visible
        // count). ANALYZE (autovacuum's too) overwrites pg_class's count with the visibility map's,
        // which is 0 for a table without one, where heap's stays what VACUUM left: the blocks still
        // all visible now count as well
        let all_visible = if crate::PRELOADED && !crate::guc::CUSTOM_SCAN.get() && tid_pages > 0.0 {
            let live = (tabledir::all_visible_blocks(t) * crate::storage::arena::vpb()) as f64;
            relallvisible.max(live.min(tid_pages))
        } else {
            relallvisible
        };
        *allvisfrac = if crate::PRELOADED && crate::guc::CUSTOM_SCAN.get() {
            0.0
        } else if all_visible == 0.0 || tid_pages <= 0.0 {
            0.0
        } else {
            (all_visible / tid_pages).min(1.0)
        };
    })
}

/// The table's fillfactor reloption (RelationGetFillFactor, default 100).
unsafe fn fill_factor(rel: pg_sys::Relation) -> i32 {
    unsafe {
        let o = (*rel).rd_options as *const pg_sys::StdRdOptions;
        if o.is_null() {
            100
        } else {
            (*o).fillfactor
        }
    }
}
