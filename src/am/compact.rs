//! `scoot.compact(rel)`: moves the live rows of a table's sparse blocks together, so that the
//! emptied blocks go back to the arena (the CMDB seed's compaction of cold blocks).
//!
//! A row moves exactly as an UPDATE that changes its TID: the caller's transaction gives the old
//! version an xmax and writes a new version (same values, new xmin) into a block that is not
//! being emptied, with new entries in every index (`ExecInsertIndexTuples`, as the executor
//! does; unique and exclusion checks run as for an UPDATE). No trigger fires (as with VACUUM
//! FULL or CLUSTER, the row's contents do not change). The move is WAL-logged like any update and
//! rolls back with the transaction. A chain's root (whose row a HOT update may have put in another
//! block) is freed only when that row moves, so the row it leads to moves. Rows that
//! another transaction has locked or changed since the caller's snapshot are left where they are
//! (no waiting); a transaction that started before the compaction and then updates a moved row
//! behaves as with any concurrent update (READ COMMITTED follows the row to its new place;
//! REPEATABLE READ gets a serialization failure).
//!
//! The emptied blocks hold only dead versions once the compacting transaction commits; VACUUM
//! (or autovacuum) removes them and their index entries and frees the blocks, as it does for the
//! old versions of any update.
//!
//! In the background: when the OLAP worker's freezer finds a table with frozen blocks less than
//! `scoot.compact_below` full whose rows fit in fewer blocks (blocks frozen and untouched for
//! another `scoot.freeze_after`), it starts the `pg_scoot compactor`, a dynamic background
//! worker connected to the table's database. It compacts the frozen sparse blocks in one
//! transaction (skipping the table if DDL or VACUUM holds it), waits until no snapshot can see
//! the moved rows' old versions, and VACUUMs the table, which frees the emptied blocks.
use crate::am::modify::{self, set_moving};
use crate::am::tid_of;
use crate::storage::arena;
use crate::storage::block::{F_HEAP_ONLY, ST_NORMAL, ST_REDIRECT};
use crate::storage::modify as storage;
use crate::storage::tabledir;
use pgrx::bgworkers::*;
use pgrx::prelude::*;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// A full block in [`block_fill`]'s unit.
pub const FULL: u32 = 1000;

/// How full a block is, in thousandths: the larger of its row slots in use and its
/// variable-length area in use (a block of long values fills its area long before its slots;
/// judged by slots alone, the blocks the rows move into would look as sparse as the ones they
/// left, and compaction would go round in circles).
pub fn block_fill(d: &arena::BlockDesc) -> u32 {
    use std::sync::atomic::Ordering::Relaxed;
    let cap = d.capacity.load(Relaxed).max(1) as u64;
    let slots = (d.hwm.load(Relaxed).saturating_sub(d.nfree.load(Relaxed))) as u64;
    let bs = arena::block_size() as u64;
    let fixed_end = d.fixed_end.load(Relaxed) as u64;
    let area = bs.saturating_sub(fixed_end).max(1);
    let var_used = bs
        .saturating_sub(d.var_low.load(Relaxed) as u64)
        .saturating_sub(d.var_dead.load(Relaxed) as u64);
    let f = (slots * FULL as u64 / cap).max(var_used * FULL as u64 / area);
    f.min(FULL as u64) as u32
}

/// Which blocks to empty: those at most `fill_below` full (live row versions / capacity),
/// least full first, as long as their rows fit in fewer blocks than they span (a lone sparse
/// block gains nothing). Input: (local block, fill, capacity) in any one unit (the callers pass
/// [`block_fill`] and [`FULL`]). Plain logic, unit-tested.
pub fn pick_sources(blocks: &[(u32, u32, u32)], fill_below: f64) -> Vec<u32> {
    let mut sparse: Vec<(u32, u32, u32)> = blocks
        .iter()
        .copied()
        .filter(|&(_, used, cap)| cap > 0 && (used as f64) < fill_below * cap as f64)
        .collect();
    sparse.sort_by_key(|&(lb, used, cap)| ((used as u64 * 1_000_000) / cap as u64, lb));
    // the longest prefix whose rows fit in at least one block fewer than it spans
    let mut best = 0;
    let (mut rows, mut cap_sum) = (0u64, 0u64);
    for (i, &(_, used, cap)) in sparse.iter().enumerate() {
        rows += used as u64;
        cap_sum += cap as u64;
        let avg_cap = cap_sum / (i as u64 + 1);
        let needed = rows.div_ceil(avg_cap.max(1));
        if needed < i as u64 + 1 {
            best = i + 1;
        }
    }
    sparse.truncate(best);
    sparse.into_iter().map(|(lb, _, _)| lb).collect()
}

/// Restores normal update placement however the compaction ends (error, cancel).
struct Moving(tabledir::TableRef);
impl Drop for Moving {
    fn drop(&mut self) {
        set_moving(false);
        storage::set_avoid(self.0, None);
    }
}

/// What one compaction did.
pub struct Summary {
    pub moved: i64,
    pub skipped: i64,
    pub sources: usize,
}

/// Moves the live rows of `r`'s sparse blocks (see [`pick_sources`]; with `only_frozen`, only
/// frozen blocks are considered, as the background compactor does) in the current transaction.
/// The caller holds ShareUpdateExclusiveLock on `r` and has an active snapshot.
pub unsafe fn compact_rel(r: pg_sys::Relation, fill_below: f64, only_frozen: bool) -> Summary {
    unsafe {
        let t = tabledir::resolve(r);
        let blocks: Vec<(u32, u32, u32)> = tabledir::blocks_of(t)
            .into_iter()
            .filter(|&(_, b)| {
                !only_frozen
                    || arena::block_desc(b)
                        .temp
                        .load(std::sync::atomic::Ordering::Relaxed)
                        == arena::TEMP_FROZEN
            })
            .map(|(lb, b)| (lb, block_fill(arena::block_desc(b)), FULL))
            .collect();
        let sources = pick_sources(&blocks, fill_below);
        let mut moved = 0i64;
        let mut skipped = 0i64;
        if !sources.is_empty() {
            let snapshot = pg_sys::GetActiveSnapshot();
            let cid = pg_sys::GetCurrentCommandId(true);
            let estate = pg_sys::CreateExecutorState();
            let rri = pg_sys::palloc0(std::mem::size_of::<pg_sys::ResultRelInfo>())
                as *mut pg_sys::ResultRelInfo;
            (*rri).type_ = pg_sys::NodeTag::T_ResultRelInfo;
            pg_sys::InitResultRelInfo(rri, r, 0, std::ptr::null_mut(), 0);
            pg_sys::ExecOpenIndices(rri, false);
            let slot = pg_sys::table_slot_create(r, std::ptr::null_mut());
            storage::set_avoid(t, Some(sources.iter().copied().collect::<HashSet<u32>>()));
            set_moving(true);
            let guard = Moving(t);
            let mut visited: HashSet<(u32, u32)> = HashSet::new();
            for &lb in &sources {
                let hwm = match tabledir::arena_block(t, lb) {
                    Some(b) => arena::block_desc(b)
                        .hwm
                        .load(std::sync::atomic::Ordering::Relaxed),
                    None => continue,
                };
                for s in 0..hwm {
                    pg_sys::check_for_interrupts!();
                    // A chain's root (a version the index entries point at, or the redirect
                    // pruning left of it) goes away only when the chain's row moves, wherever
                    // its visible version lives: a HOT update that found the block full put it
                    // in another block (without this, blocks of such roots stayed sparse
                    // forever and every compaction round picked them again). A heap-only
                    // version moves itself. The fetch applies our snapshot.
                    let state = storage::lock(t, lb, false)
                        .filter(|l| storage::slot_in_range(l, s))
                        .map(|l| (l.row(s).state(), l.row(s).has_flag(F_HEAP_ONLY)));
                    let (vb, vs) = match state {
                        Some((ST_NORMAL, true)) => (lb, s),
                        Some((ST_NORMAL | ST_REDIRECT, _)) => {
                            match crate::am::index::chain_visible(r, t, lb, s, snapshot) {
                                Some(member) => member,
                                None => continue,
                            }
                        }
                        _ => continue,
                    };
                    // a chain's member can be reached from its root and from its own slot
                    if !visited.insert((vb, vs)) {
                        continue;
                    }
                    let mut tid = tid_of(vb, vs);
                    if !modify::tuple_fetch_row_version(r, &mut tid, snapshot, slot) {
                        continue;
                    }
                    let mut tmfd: pg_sys::TM_FailureData = std::mem::zeroed();
                    let mut lockmode: pg_sys::LockTupleMode::Type = 0;
                    let mut update_indexes = false;
                    let res = modify::tuple_update(
                        r,
                        &mut tid,
                        slot,
                        cid,
                        snapshot,
                        std::ptr::null_mut(),
                        false,
                        &mut tmfd,
                        &mut lockmode,
                        &mut update_indexes,
                    );
                    if res != pg_sys::TM_Result::TM_Ok {
                        // locked or changed by someone else: stays where it is
                        skipped += 1;
                        continue;
                    }
                    if update_indexes && (*rri).ri_NumIndices > 0 {
                        let recheck = pg_sys::ExecInsertIndexTuples(
                            rri,
                            slot,
                            estate,
                            false,
                            false,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                        );
                        pg_sys::list_free(recheck);
                    }
                    let ec = (*estate).es_per_tuple_exprcontext;
                    if !ec.is_null() {
                        pg_sys::MemoryContextReset((*ec).ecxt_per_tuple_memory);
                    }
                    moved += 1;
                }
            }
            drop(guard);
            pg_sys::ExecDropSingleTupleTableSlot(slot);
            pg_sys::ExecCloseIndices(rri);
            pg_sys::FreeExecutorState(estate);
        }
        Summary {
            moved,
            skipped,
            sources: sources.len(),
        }
    }
}

#[pg_extern(sql = false)]
fn compact_table(rel: pg_sys::Oid, fill_below: f64) -> i64 {
    crate::ensure_preloaded();
    if !(fill_below > 0.0 && fill_below <= 1.0) {
        ereport!(
            PgLogLevel::ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("scoot.compact: fill_below must be in (0, 1], not {fill_below}")
        );
    }
    unsafe {
        if pg_sys::RecoveryInProgress() {
            ereport!(
                PgLogLevel::ERROR,
                PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
                "scoot.compact cannot run during recovery"
            );
        }
        pg_sys::PreventCommandIfReadOnly(c"scoot.compact()".as_ptr());
        let r = crate::am::open_for_maintenance(
            rel,
            "scoot.compact moves the rows of tables created USING scoot.",
        );
        let Summary {
            moved,
            skipped,
            sources,
        } = compact_rel(r, fill_below, false);
        let name = crate::ffi::rel_name(r);
        let msg = format!(
            "scoot.compact: moved {moved} row(s) out of {} sparse block(s) of \"{name}\"{}",
            sources,
            if skipped > 0 {
                format!("; {skipped} row(s) locked or changed by other transactions stay")
            } else {
                String::new()
            }
        );
        pgrx::pg_sys::panic::ErrorReport::new(
            PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
            msg,
            "pg_scoot",
        )
        .set_hint(
            "VACUUM the table after this transaction commits (and older transactions end) to free the emptied blocks.",
        )
        .report(PgLogLevel::NOTICE);
        pg_sys::table_close(r, pg_sys::NoLock as i32);
        moved
    }
}

extension_sql!(
    r#"
CREATE FUNCTION compact(rel regclass, fill_below float8 DEFAULT 0.5) RETURNS bigint
    LANGUAGE c VOLATILE PARALLEL UNSAFE STRICT
    AS 'MODULE_PATHNAME', 'compact_table_wrapper';
COMMENT ON FUNCTION compact(regclass, float8) IS
    'moves the live rows of a scoot table''s blocks that are less than fill_below full into other blocks, as updates that change the rows'' TIDs (new index entries, no triggers), in the caller''s transaction; VACUUM afterwards frees the emptied blocks; returns the number of rows moved';
"#,
    name = "compact_sql",
    requires = ["freeze_sql"],
);

/// Starts the background compactor for the table with relfilenode `rel` in tablespace `spc` of
/// database `db` (the OLAP worker; at most one runs at a time).
pub fn launch(db: u32, spc: u32, rel: u32, fill_below: f64) -> Option<DynamicBackgroundWorker> {
    BackgroundWorkerBuilder::new("pg_scoot compactor")
        .set_type("pg_scoot compactor")
        .set_library("pg_scoot")
        .set_function("scoot_compactor_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(None)
        .set_argument(Some(pg_sys::Datum::from(db)))
        .set_extra(&format!("{spc} {rel} {fill_below}"))
        .load_dynamic()
        .ok()
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn scoot_compactor_main(arg: pg_sys::Datum) {
    unsafe {
        // SIGTERM as in a regular backend: exit at the next interrupt check (between rows, in
        // waits), so that DROP DATABASE & co. can stop the compactor (see txn::xact)
        pg_sys::pqsignal(libc::SIGTERM, Some(crate::ffi::pg_die));
        pg_sys::BackgroundWorkerUnblockSignals();
    }
    let db = pg_sys::Oid::from(arg.value() as u32);
    let mut it = BackgroundWorker::get_extra().split(' ');
    let (Some(spc), Some(rel), Some(fill)) = (
        it.next().and_then(|x| x.parse::<u32>().ok()),
        it.next().and_then(|x| x.parse::<u32>().ok()),
        it.next().and_then(|x| x.parse::<f64>().ok()),
    ) else {
        return;
    };
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(db), None);
    let c = arena::ctl();
    c.compactor_db
        .store(u32::from(db), std::sync::atomic::Ordering::Release);
    c.compactor_pid.store(
        unsafe { pg_sys::MyProcPid },
        std::sync::atomic::Ordering::Release,
    );
    unsafe { pg_sys::before_shmem_exit(Some(compactor_gone), pg_sys::Datum::from(0)) };
    let done = BackgroundWorker::transaction(|| unsafe {
        let relid = crate::ffi::RelidByRelfilenode(spc.into(), rel.into());
        if relid == pg_sys::InvalidOid
            || !pg_sys::ConditionalLockRelationOid(relid, pg_sys::ShareUpdateExclusiveLock as i32)
        {
            return None;
        }
        let r = pg_sys::try_table_open(relid, pg_sys::NoLock as i32);
        if r.is_null() {
            return None;
        }
        if !crate::am::is_scoot(r) || u32::from((*r).rd_node.relNode) != rel {
            pg_sys::table_close(r, pg_sys::NoLock as i32);
            return None;
        }
        let s = compact_rel(r, fill, true);
        let xid = pg_sys::GetCurrentTransactionIdIfAny().into_inner();
        if s.moved > 0 {
            log!(
                "pg_scoot compactor: moved {} row(s) out of {} frozen block(s) of \"{}\"",
                s.moved,
                s.sources,
                crate::ffi::rel_name(r)
            );
        }
        pg_sys::table_close(r, pg_sys::NoLock as i32);
        (s.moved > 0).then_some((relid, xid))
    });
    let Some((relid, xid)) = done else {
        return;
    };
    // the emptied blocks go back to the arena once VACUUM can remove the old versions: wait
    // (at most a minute) until no snapshot or snapshot image can see them
    let start = Instant::now();
    loop {
        if crate::txn::mvcc::precedes(xid, crate::txn::freeze::horizon())
            && crate::txn::horizon::image_allows(xid)
        {
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            return;
        }
        unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                100,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
        pg_sys::check_for_interrupts!();
    }
    unsafe { vacuum(relid) };
}

#[pg_guard]
unsafe extern "C-unwind" fn compactor_gone(_code: i32, _arg: pg_sys::Datum) {
    let c = arena::ctl();
    c.compactor_pid
        .store(0, std::sync::atomic::Ordering::Release);
    c.compactor_db
        .store(0, std::sync::atomic::Ordering::Release);
}

/// VACUUM of one table from a background worker, as autovacuum runs it (own transactions, skip
/// the table if it is locked).
unsafe fn vacuum(relid: pg_sys::Oid) {
    unsafe {
        if pg_sys::PortalContext.is_null() {
            pg_sys::PortalContext = pg_sys::AllocSetContextCreateExtended(
                pg_sys::TopMemoryContext,
                c"scoot compactor portal".as_ptr(),
                pg_sys::ALLOCSET_DEFAULT_MINSIZE as usize,
                pg_sys::ALLOCSET_DEFAULT_INITSIZE as usize,
                pg_sys::ALLOCSET_DEFAULT_MAXSIZE as usize,
            );
        }
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        let mut params: pg_sys::VacuumParams = std::mem::zeroed();
        params.options = pg_sys::VACOPT_VACUUM | pg_sys::VACOPT_SKIP_LOCKED;
        params.freeze_min_age = -1;
        params.freeze_table_age = -1;
        params.multixact_freeze_min_age = -1;
        params.multixact_freeze_table_age = -1;
        params.log_min_duration = -1;
        params.index_cleanup = pg_sys::VacOptValue::VACOPTVALUE_UNSPECIFIED;
        params.truncate = pg_sys::VacOptValue::VACOPTVALUE_UNSPECIFIED;
        params.nworkers = -1;
        let vr = pg_sys::makeVacuumRelation(std::ptr::null_mut(), relid, std::ptr::null_mut());
        let rels = pg_sys::lappend(std::ptr::null_mut(), vr as *mut std::ffi::c_void);
        pg_sys::vacuum(rels, &mut params, std::ptr::null_mut(), true);
        pg_sys::CommitTransactionCommand();
    }
}

#[cfg(test)]
mod tests {
    use super::pick_sources;

    #[test]
    fn sources_are_sparse_blocks_worth_merging() {
        // a lone sparse block: nothing to gain
        assert!(pick_sources(&[(0, 100, 1000), (1, 1000, 1000)], 0.5).is_empty());
        // two 10% blocks fit in one
        assert_eq!(
            pick_sources(&[(0, 100, 1000), (1, 1000, 1000), (2, 100, 1000)], 0.5),
            vec![0, 2]
        );
        // three 40% blocks fit in two; least full first
        assert_eq!(
            pick_sources(&[(5, 400, 1000), (6, 390, 1000), (7, 410, 1000)], 0.5),
            vec![6, 5, 7]
        );
        // 45% + 45% + 45% + 45%: 1800 rows need two blocks, four emptied
        assert_eq!(
            pick_sources(
                &[
                    (0, 450, 1000),
                    (1, 450, 1000),
                    (2, 450, 1000),
                    (3, 450, 1000)
                ],
                0.5
            )
            .len(),
            4
        );
        // above the threshold: left alone; empty blocks are VACUUM's business but harmless
        assert!(pick_sources(&[(0, 600, 1000), (1, 600, 1000)], 0.5).is_empty());
        assert_eq!(pick_sources(&[(0, 0, 1000), (1, 0, 1000)], 0.5), vec![0, 1]);
    }
}
