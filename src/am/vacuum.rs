//! VACUUM for scoot tables: prune every version chain (redirect past dead versions), free dead
//! heap-only versions, remove dead chain roots from every index (ambulkdelete) and free them,
//! freeze old xmins, give empty blocks back to the arena, and report statistics.
use crate::ffi;
use crate::ffi::guard::boundary;
use crate::storage::block::{F_HEAP_ONLY, ST_DEAD, ST_NORMAL};
use crate::storage::modify as storage;
use crate::storage::tabledir;
use crate::txn::mvcc::{self, Htsv};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::c_void;

unsafe extern "C-unwind" fn dead_tid_callback(
    itemptr: pg_sys::ItemPointer,
    state: *mut c_void,
) -> bool {
    unsafe {
        let dead = &*(state as *const Vec<u64>);
        match super::decode_tid(itemptr) {
            Some((b, s)) => dead.binary_search(&(((b as u64) << 32) | s as u64)).is_ok(),
            None => false,
        }
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_vacuum(
    rel: pg_sys::Relation,
    params: *mut pg_sys::VacuumParams,
    bstrategy: pg_sys::BufferAccessStrategy,
) {
    boundary(|| unsafe {
        let t = tabledir::resolve(rel);
        // VACUUM reports the dead versions it leaves: what the background freezer pruned
        // before it is no longer news
        t.entry()
            .pruned_unreported
            .store(0, std::sync::atomic::Ordering::Relaxed);
        let p = &*params;
        let mut oldest_xmin = pg_sys::TransactionId::INVALID;
        let mut oldest_mxact = pg_sys::TransactionId::INVALID;
        let mut freeze_limit = pg_sys::TransactionId::INVALID;
        let mut multi_cutoff = pg_sys::TransactionId::INVALID;
        pg_sys::vacuum_set_xid_limits(
            rel,
            p.freeze_min_age,
            p.freeze_table_age,
            p.multixact_freeze_min_age,
            p.multixact_freeze_table_age,
            &mut oldest_xmin,
            &mut oldest_mxact,
            &mut freeze_limit,
            &mut multi_cutoff,
        );
        // scoot's horizon skips the readers of snapshot images (see txn::horizon)
        let horizon = crate::txn::horizon::vacuum_horizon(oldest_xmin.into_inner());
        let flimit = freeze_limit.into_inner();
        let mcut = multi_cutoff.into_inner();
        let classify = |h: &crate::storage::block::RowHdr| match mvcc::htsv(h, horizon) {
            Htsv::Dead => super::index::Prune::Dead,
            Htsv::RecentlyDead => super::index::Prune::Recent,
            _ => super::index::Prune::Keep,
        };

        let blocks: Vec<u32> = tabledir::blocks_of(t)
            .into_iter()
            .map(|(lb, _)| lb)
            .collect();
        let index_cleanup = p.index_cleanup != pg_sys::VacOptValue::VACOPTVALUE_DISABLED;
        let truncate = p.truncate != pg_sys::VacOptValue::VACOPTVALUE_DISABLED;
        // pass 1: prune chains, freeze, count
        let mut live = 0f64;
        let mut dead_versions = 0f64;
        for &b in &blocks {
            // one exclusive lock (one WAL record) per block, as heap_page_prune
            super::index::prune_block(t, b, &classify);
            pg_sys::vacuum_delay_point();
        }
        // pass 2: free dead heap-only versions (now unreachable), freeze, collect dead roots
        let mut dead_roots: Vec<u64> = Vec::new();
        // blocks whose rows are all visible to every transaction (heap's all-visible pages)
        let mut all_visible_blocks = 0u32;
        for &b in &blocks {
            let Some(l) = storage::lock(t, b, true) else {
                continue;
            };
            let mut all_visible = true;
            for s in 0..l.hwm() {
                let h = l.row(s);
                match h.state() {
                    ST_DEAD => {
                        all_visible &= index_cleanup;
                        dead_roots.push(((b as u64) << 32) | s as u64)
                    }
                    ST_NORMAL => match mvcc::htsv(h, horizon) {
                        Htsv::Dead => {
                            dead_versions += 1.0;
                            // Only versions whose inserter aborted are unreachable for sure:
                            // committed-dead versions are removed by chain pruning alone.
                            let aborted =
                                h.infomask() & mvcc::HEAP_XMIN_FROZEN == mvcc::HEAP_XMIN_INVALID;
                            if aborted && h.has_flag(F_HEAP_ONLY) {
                                storage::free_slot(&l, s);
                            } else if aborted {
                                storage::make_dead(&l, s);
                                dead_roots.push(((b as u64) << 32) | s as u64);
                                all_visible &= index_cleanup;
                            } else {
                                all_visible = false;
                            }
                        }
                        st => {
                            let m0 = h.infomask();
                            if st != Htsv::Live
                                || !(m0 & mvcc::HEAP_XMIN_FROZEN == mvcc::HEAP_XMIN_FROZEN
                                    || mvcc::precedes(h.xmin, horizon))
                            {
                                all_visible = false;
                            }
                            if st == Htsv::Live || st == Htsv::DeleteInProgress {
                                live += 1.0;
                            } else if st == Htsv::RecentlyDead {
                                dead_versions += 1.0;
                            }
                            let m = h.infomask();
                            if m & mvcc::HEAP_XMIN_COMMITTED != 0
                                && m & mvcc::HEAP_XMIN_FROZEN != mvcc::HEAP_XMIN_FROZEN
                                && mvcc::precedes(h.xmin, flimit)
                            {
                                storage::freeze_xmin(&l, s);
                            }
                            if st == Htsv::Live && m & mvcc::HEAP_XMAX_INVALID == 0 {
                                let old = if m & mvcc::HEAP_XMAX_IS_MULTI != 0 {
                                    pg_sys::MultiXactIdPrecedes(ffi::xid(h.xmax), ffi::xid(mcut))
                                } else {
                                    mvcc::precedes(h.xmax, flimit)
                                };
                                if old {
                                    storage::clear_xmax(&l, s);
                                }
                            }
                        }
                    },
                    _ => {}
                }
            }
            if all_visible {
                // snapshot scans skip per-row visibility on this block (see BlockDesc::vis_xid)
                l.desc
                    .vis_xid
                    .store(horizon, std::sync::atomic::Ordering::Relaxed);
            }
            drop(l);
            if all_visible {
                all_visible_blocks += 1;
            }
            pg_sys::vacuum_delay_point();
        }
        dead_roots.sort_unstable();

        // pass 3: index cleanup, then free the dead roots
        let mut nindexes: i32 = 0;
        let mut irel: *mut pg_sys::Relation = std::ptr::null_mut();
        pg_sys::vac_open_indexes(
            rel,
            pg_sys::RowExclusiveLock as i32,
            &mut nindexes,
            &mut irel,
        );
        if p.nworkers > 0 && nindexes > 1 && index_cleanup && ffi::rel_is_temp(rel) {
            // heap's message (parallel workers cannot see a temporary table)
            ereport!(
                PgLogLevel::WARNING,
                PgSqlErrorCode::ERRCODE_WARNING,
                format!(
                    "disabling parallel option of vacuum on \"{}\" --- cannot vacuum temporary tables in parallel",
                    ffi::rel_name(rel)
                )
            );
        }
        for i in 0..(if index_cleanup { nindexes as usize } else { 0 }) {
            let mut ivinfo: pg_sys::IndexVacuumInfo = std::mem::zeroed();
            ivinfo.index = *irel.add(i);
            ivinfo.analyze_only = false;
            ivinfo.report_progress = false;
            ivinfo.estimated_count = true;
            ivinfo.message_level = pg_sys::DEBUG2 as i32;
            ivinfo.num_heap_tuples = live;
            ivinfo.strategy = bstrategy;
            let mut stats: *mut pg_sys::IndexBulkDeleteResult = std::ptr::null_mut();
            if !dead_roots.is_empty() {
                stats = pg_sys::index_bulk_delete(
                    &mut ivinfo,
                    stats,
                    Some(dead_tid_callback),
                    &mut dead_roots as *mut Vec<u64> as *mut c_void,
                );
            }
            let stats = pg_sys::index_vacuum_cleanup(&mut ivinfo, stats);
            if !stats.is_null() {
                pg_sys::pfree(stats as *mut c_void);
            }
        }
        pg_sys::vac_close_indexes(nindexes, irel, pg_sys::NoLock as i32);
        if !index_cleanup {
            // INDEX_CLEANUP OFF: dead roots stay until a later VACUUM removes their index entries
            dead_roots.clear();
        }
        // a block's dead roots under one exclusive lock (one WAL record), as heap's
        // lazy_vacuum_heap_page frees a page's dead items (dead_roots is sorted by block)
        for group in dead_roots.chunk_by(|a, b| a >> 32 == b >> 32) {
            let b = (group[0] >> 32) as u32;
            if let Some(l) = storage::lock(t, b, true) {
                for &k in group {
                    let s = k as u32;
                    if l.row(s).state() == ST_DEAD {
                        storage::free_slot(&l, s);
                    }
                }
            }
            pg_sys::vacuum_delay_point();
        }
        // pass 4: zone maps are narrowed; empty blocks go back to the arena (unless TRUNCATE false / vacuum_truncate off
        // asks to keep the table's size, as heap then keeps its empty pages)
        for &b in &blocks {
            if let Some(l) = storage::lock(t, b, true) {
                // zone maps shrink to the versions left
                storage::recompute_zones(&l);
                if truncate {
                    storage::release_empty_block(t, l);
                }
            }
        }

        let pages = super::scan::tid_pages(t);
        let mut frozenxid_updated = false;
        let mut minmulti_updated = false;
        let all_visible_pages = (all_visible_blocks * crate::storage::arena::vpb()).min(pages);
        pg_sys::vac_update_relstats(
            rel,
            pages,
            live,
            all_visible_pages,
            nindexes > 0,
            freeze_limit,
            multi_cutoff,
            &mut frozenxid_updated,
            &mut minmulti_updated,
            false,
        );
        pg_sys::pgstat_report_vacuum(
            (*rel).rd_id,
            (*(*rel).rd_rel).relisshared,
            live as i64,
            dead_versions as i64,
        );
        let _ = oldest_mxact;
    })
}
