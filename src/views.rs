//! Observability: `scoot.arena` (arena totals), `scoot.arena_tables` (per-table usage: blocks,
//! live and dead row versions, bytes), `scoot.blocks` (blocks by temperature) and
//! `scoot.freeze_stats`, `scoot.checkpoints` (the checkpoint image).
use crate::storage::arena;
use crate::storage::block::{ST_DEAD, ST_NORMAL, ST_REDIRECT};
use crate::storage::modify as storage;
use crate::storage::tabledir;
use crate::txn::mvcc::{self, Htsv};
use pgrx::prelude::*;
use std::sync::atomic::Ordering;

#[pg_extern]
fn arena_info() -> TableIterator<
    'static,
    (
        name!(arena_bytes, i64),
        name!(block_size, i32),
        name!(blocks_total, i32),
        name!(blocks_used, i32),
        name!(blocks_free, i32),
        name!(tables, i32),
        name!(used_bytes, i64),
    ),
> {
    crate::ensure_preloaded();
    let c = arena::ctl();
    let free = c.nfree_blocks.load(Ordering::Relaxed);
    let tables = tabledir::all();
    let used_bytes: u64 = tables
        .iter()
        .map(|(t, _, _)| crate::am::ddl::table_usage(*t).0)
        .sum();
    TableIterator::once((
        c.arena_bytes as i64,
        c.block_size as i32,
        c.nblocks as i32,
        (c.nblocks - free) as i32,
        free as i32,
        tables.len() as i32,
        used_bytes as i64,
    ))
}

#[pg_extern]
fn arena_tables() -> TableIterator<
    'static,
    (
        name!(relid, Option<pg_sys::Oid>),
        name!(relfilenode, pg_sys::Oid),
        name!(blocks, i32),
        name!(live_rows, i64),
        name!(dead_rows, i64),
        name!(bytes, i64),
    ),
> {
    crate::ensure_preloaded();
    let horizon =
        unsafe { pg_sys::GetOldestNonRemovableTransactionId(std::ptr::null_mut()).into_inner() };
    let mut rows = Vec::new();
    for (t, key, _) in tabledir::all() {
        let blocks = tabledir::blocks_of(t);
        let (mut live, mut dead) = (0i64, 0i64);
        for &(b, _) in &blocks {
            let Some(l) = storage::lock(t, b, false) else {
                continue;
            };
            for s in 0..l.hwm() {
                let h = l.row(s);
                match h.state() {
                    ST_NORMAL => match mvcc::htsv(h, horizon) {
                        Htsv::Live | Htsv::DeleteInProgress | Htsv::InsertInProgress => live += 1,
                        _ => dead += 1,
                    },
                    ST_DEAD => dead += 1,
                    ST_REDIRECT => {}
                    _ => {}
                }
            }
        }
        rows.push((
            relid_of(&key),
            pg_sys::Oid::from(key.rel),
            blocks.len() as i32,
            live,
            dead,
            crate::am::ddl::table_usage(t).0 as i64,
        ));
    }
    TableIterator::new(rows)
}

extension_sql!(
    r#"
CREATE VIEW arena AS SELECT * FROM arena_info();
CREATE VIEW arena_tables AS
    SELECT relid::regclass AS relation, relfilenode, blocks, live_rows, dead_rows, bytes
    FROM arena_tables();
COMMENT ON VIEW arena IS 'scoot shared arena: size, blocks total/used/free, tables, bytes used by rows';
COMMENT ON VIEW arena_tables IS 'scoot tables in this server: blocks, live and dead row versions, bytes';
"#,
    name = "arena_views",
    requires = [arena_info, arena_tables]
);

/// Per table and temperature: blocks, slots in use and bytes (`scoot.blocks`).
#[pg_extern]
fn blocks_info() -> TableIterator<
    'static,
    (
        name!(relid, Option<pg_sys::Oid>),
        name!(relfilenode, pg_sys::Oid),
        name!(temperature, String),
        name!(blocks, i32),
        name!(rows, i64),
        name!(bytes, i64),
    ),
> {
    crate::ensure_preloaded();
    let mut out = Vec::new();
    let bs = arena::block_size() as i64;
    for (t, key, _) in tabledir::all() {
        let mut n = [(0i32, 0i64); 3];
        for (_, b) in tabledir::blocks_of(t) {
            let d = arena::block_desc(b);
            if d.owner.load(Ordering::Acquire) != t.owner() {
                continue;
            }
            let k = (d.temp.load(Ordering::Relaxed) as usize).min(2);
            n[k].0 += 1;
            n[k].1 += (d.hwm.load(Ordering::Relaxed) - d.nfree.load(Ordering::Relaxed)) as i64;
        }
        let relid = relid_of(&key);
        for (k, name) in ["hot", "cooling", "frozen"].iter().enumerate() {
            out.push((
                relid,
                pg_sys::Oid::from(key.rel),
                name.to_string(),
                n[k].0,
                n[k].1,
                n[k].0 as i64 * bs,
            ));
        }
    }
    TableIterator::new(out)
}

/// Freezing since the server started (`scoot.freeze_stats`).
#[pg_extern]
fn freeze_stats_info() -> TableIterator<
    'static,
    (
        name!(blocks_frozen, i64),
        name!(blocks_thawed, i64),
        name!(freeze_ms, f64),
        name!(avg_freeze_us, Option<f64>),
    ),
> {
    crate::ensure_preloaded();
    let c = arena::ctl();
    let n = c.freezes.load(Ordering::Relaxed) as i64;
    let ns = c.freeze_ns.load(Ordering::Relaxed) as f64;
    TableIterator::once((
        n,
        c.thaws.load(Ordering::Relaxed) as i64,
        ns / 1e6,
        (n > 0).then(|| ns / 1e3 / n as f64),
    ))
}

/// The checkpoint image (`scoot.checkpoints`): the file on disk and what this start loaded.
#[pg_extern]
fn checkpoints_info() -> TableIterator<
    'static,
    (
        name!(image, String),
        name!(bytes, Option<i64>),
        name!(checkpoint_lsn, Option<String>),
        name!(written_at_us, Option<i64>),
        name!(loaded_at_start, bool),
        name!(loaded_lsn, Option<String>),
        name!(tables_loaded, i64),
        name!(blocks_loaded, i64),
        name!(load_ms, Option<f64>),
        name!(base_lsn, Option<String>),
        name!(crash_recovered, bool),
        name!(redo_records, i64),
        name!(redo_ms, Option<f64>),
        name!(images_written, i64),
        name!(loaded_image, Option<String>),
        name!(previous_checkpoint_lsn, Option<String>),
        name!(previous_bytes, Option<i64>),
        name!(keep_lsn, Option<String>),
        name!(replayed_at_start, bool),
        name!(standby_replay, bool),
    ),
> {
    crate::ensure_preloaded();
    use crate::wal::checkpoint_image as img;
    let c = arena::ctl();
    let lsn = |l: u64| format!("{:X}/{:X}", l >> 32, l as u32);
    let d = img::on_disk(img::FILE);
    let p = img::on_disk(img::PREV);
    let loaded = c.image_lsn.load(Ordering::Relaxed);
    TableIterator::once((
        img::FILE.to_string(),
        d.as_ref().map(|d| d.bytes as i64),
        d.as_ref()
            .filter(|d| d.valid_header)
            .map(|d| lsn(d.checkpoint)),
        d.as_ref().filter(|d| d.valid_header).map(|d| d.written_at),
        loaded != 0,
        (loaded != 0).then(|| lsn(loaded)),
        c.image_tables.load(Ordering::Relaxed) as i64,
        c.image_blocks.load(Ordering::Relaxed) as i64,
        (loaded != 0).then(|| c.image_load_us.load(Ordering::Relaxed) as f64 / 1e3),
        (c.base_valid.load(Ordering::Acquire) != 0)
            .then(|| lsn(c.base_lsn.load(Ordering::Relaxed))),
        c.crash_recovered.load(Ordering::Relaxed) != 0,
        c.redo_records.load(Ordering::Relaxed) as i64,
        (c.crash_recovered.load(Ordering::Relaxed) != 0
            || c.replayed_at_start.load(Ordering::Relaxed) != 0)
            .then(|| c.redo_us.load(Ordering::Relaxed) as f64 / 1e3),
        c.images_written.load(Ordering::Relaxed) as i64,
        match c.loaded_file.load(Ordering::Relaxed) {
            1 => Some(img::FILE.to_string()),
            2 => Some(img::PREV.to_string()),
            _ => None,
        },
        p.as_ref()
            .filter(|d| d.valid_header)
            .map(|d| lsn(d.checkpoint)),
        p.as_ref().map(|d| d.bytes as i64),
        (c.base_valid.load(Ordering::Acquire) != 0).then(|| {
            let k = c.keep_lsn.load(Ordering::Relaxed);
            let b = c.base_lsn.load(Ordering::Relaxed);
            lsn(if k != 0 { k.min(b) } else { b })
        }),
        c.replayed_at_start.load(Ordering::Relaxed) != 0,
        c.from_backup.load(Ordering::Relaxed) != 0,
    ))
}

/// The relation of a table of this database (None: another database's, or dropped).
fn relid_of(key: &tabledir::RelKey) -> Option<pg_sys::Oid> {
    if key.db == u32::from(unsafe { pg_sys::MyDatabaseId }) {
        let oid = unsafe { crate::ffi::RelidByRelfilenode(key.spc.into(), key.rel.into()) };
        (oid != pg_sys::InvalidOid).then_some(oid)
    } else {
        None
    }
}

extension_sql!(
    r#"
CREATE VIEW blocks AS
    SELECT relid::regclass AS relation, relfilenode, temperature, blocks, rows, bytes
    FROM blocks_info();
CREATE VIEW freeze_stats AS SELECT * FROM freeze_stats_info();
COMMENT ON VIEW blocks IS 'scoot tables by block temperature (hot, cooling, frozen): blocks, rows (slots in use) and bytes';
COMMENT ON VIEW freeze_stats IS 'scoot block freezing since the server started: blocks frozen, frozen blocks thawed by writes, time spent freezing';
"#,
    name = "block_views",
    requires = [blocks_info, freeze_stats_info]
);

extension_sql!(
    r#"
CREATE VIEW checkpoints AS
    SELECT image, bytes, checkpoint_lsn::pg_lsn AS checkpoint_lsn,
           timestamptz '2000-01-01 00:00:00+00' + written_at_us * interval '1 microsecond' AS written_at,
           loaded_at_start, loaded_lsn::pg_lsn AS loaded_lsn, tables_loaded, blocks_loaded, load_ms,
           base_lsn::pg_lsn AS recovery_base_lsn,
           pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END,
                           keep_lsn::pg_lsn)::bigint AS wal_retained_bytes,
           crash_recovered, redo_records, redo_ms, images_written,
           loaded_image, previous_checkpoint_lsn::pg_lsn AS previous_checkpoint_lsn, previous_bytes,
           keep_lsn::pg_lsn AS wal_kept_from, replayed_at_start, standby_replay
    FROM checkpoints_info();
COMMENT ON VIEW checkpoints IS 'scoot durability: the newest checkpoint image on disk (size, checkpoint LSN, time) and the previous one kept as a fallback, what this start loaded, the recovery base (image LSN), the WAL kept since the older image, and the recovery of this start (scoot WAL records replayed, time), and whether this server replays the scoot WAL as a standby or from a base backup';
"#,
    name = "checkpoint_views",
    requires = [checkpoints_info]
);

/// Every row version slot of a scoot table with its version header (for debugging and tests).
#[pg_extern]
fn row_versions(
    rel: pg_sys::Oid,
) -> TableIterator<
    'static,
    (
        name!(tid, pg_sys::ItemPointerData),
        name!(state, String),
        name!(xmin, i64),
        name!(xmax, i64),
        name!(infomask, i32),
        name!(flags, i32),
        name!(next, Option<pg_sys::ItemPointerData>),
    ),
> {
    crate::ensure_preloaded();
    let mut rows = Vec::new();
    unsafe {
        let r = pg_sys::relation_open(rel, pg_sys::AccessShareLock as i32);
        if !crate::am::is_scoot(r) {
            pg_sys::relation_close(r, pg_sys::AccessShareLock as i32);
            error!("\"{}\" is not a scoot table", crate::ffi::rel_name(r));
        }
        let t = tabledir::resolve(r);
        for (b, _) in tabledir::blocks_of(t) {
            let Some(l) = storage::lock(t, b, false) else {
                continue;
            };
            for s in 0..l.hwm() {
                let h = l.row(s);
                let st = match h.state() {
                    ST_NORMAL => "normal",
                    ST_REDIRECT => "redirect",
                    ST_DEAD => "dead",
                    _ => "free",
                };
                let next = match h.next() {
                    Some((p, o)) if h.state() != crate::storage::block::ST_FREE => {
                        let mut tid = pg_sys::ItemPointerData::default();
                        crate::ffi::set_tid(&mut tid, p, o);
                        Some(tid)
                    }
                    _ => None,
                };
                rows.push((
                    crate::am::tid_of(b, s),
                    st.to_string(),
                    h.xmin as i64,
                    h.xmax as i64,
                    h.infomask() as i32,
                    h.flags() as i32,
                    next,
                ));
            }
        }
        pg_sys::relation_close(r, pg_sys::AccessShareLock as i32);
    }
    TableIterator::new(rows)
}

// ---------------------------------------------------------------- OLAP snapshots

fn ts(t: i64) -> Option<pgrx::datum::TimestampWithTimeZone> {
    (t != 0)
        .then(|| unsafe {
            pgrx::datum::TimestampWithTimeZone::from_datum(pg_sys::Datum::from(t), false)
        })
        .flatten()
}

#[pg_extern]
fn snapshots_info() -> TableIterator<
    'static,
    (
        name!(id, i64),
        name!(method, String),
        name!(state, String),
        name!(taken_at, Option<pgrx::datum::TimestampWithTimeZone>),
        name!(age_ms, f64),
        name!(readers, i32),
        name!(blocks, i32),
        name!(pages_preserved, i64),
        name!(bytes_preserved, i64),
        name!(gate_ms, f64),
        name!(create_ms, f64),
        name!(writers_armed, i32),
        name!(bytes_armed, i64),
        name!(bytes_copied, i64),
        name!(xmin, i64),
    ),
> {
    use crate::snapshot::registry;
    use crate::storage::cow;
    crate::ensure_preloaded();
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    let mut rows = Vec::new();
    for i in 0..cow::MAX_SNAPSHOTS {
        let s = registry::slot(i);
        if s.state.load(Ordering::Acquire) != registry::S_LIVE {
            continue;
        }
        let epoch = s.epoch.load(Ordering::Acquire);
        let live = cow::slot_live(i, epoch);
        let pages = if live { cow::pages_for_epoch(epoch) } else { 0 };
        let taken = s.taken_at.load(Ordering::Acquire);
        rows.push((
            s.id.load(Ordering::Acquire) as i64,
            registry::method_name(s.method.load(Ordering::Acquire)).to_string(),
            if !live {
                "abandoned".to_string()
            } else if registry::reg().newest.load(Ordering::Acquire) == i as u32 {
                "newest".to_string()
            } else {
                "live".to_string()
            },
            ts(taken),
            (now - taken) as f64 / 1000.0,
            s.pins.load(Ordering::Acquire) as i32,
            s.blocks.load(Ordering::Acquire) as i32,
            pages as i64,
            (pages * cow::PAGE as u64) as i64,
            s.gate_us.load(Ordering::Acquire) as f64 / 1000.0,
            s.create_us.load(Ordering::Acquire) as f64 / 1000.0,
            s.writers_armed.load(Ordering::Acquire) as i32,
            s.armed_bytes.load(Ordering::Acquire) as i64,
            s.copied_bytes.load(Ordering::Acquire) as i64,
            s.xmin.load(Ordering::Acquire) as i64,
        ));
    }
    rows.sort_by_key(|r| r.0);
    TableIterator::new(rows)
}

#[pg_extern]
fn snapshot_stats_info() -> TableIterator<
    'static,
    (
        name!(method, String),
        name!(method_reason, String),
        name!(worker_pid, Option<i32>),
        name!(snapshots_taken, i64),
        name!(snapshots_released, i64),
        name!(snapshots_abandoned, i64),
        name!(abandoned_for_memory, i64),
        name!(gate_timeouts, i64),
        name!(create_failures, i64),
        name!(skipped_suboverflowed, i64),
        name!(create_ms_avg, f64),
        name!(create_ms_max, f64),
        name!(gate_ms_avg, f64),
        name!(gate_ms_max, f64),
        name!(pages_saved, i64),
        name!(save_us_avg, f64),
        name!(write_faults, i64),
        name!(fault_us_avg, f64),
        name!(first_write_copies, i64),
        name!(first_write_copy_us_p50, f64),
        name!(first_write_copy_us_p99, f64),
        name!(first_write_faults, i64),
        name!(first_write_fault_us_p50, f64),
        name!(first_write_fault_us_p99, f64),
        name!(pool_bytes, i64),
        name!(pool_bytes_used, i64),
        name!(zombie_blocks, i32),
        name!(first_writes_via_alias, i64),
    ),
> {
    use crate::snapshot::registry;
    use crate::storage::cow;
    crate::ensure_preloaded();
    let r = registry::reg();
    let c = cow::ctl();
    let created = r.created.load(Ordering::Relaxed);
    let saves = c.saves.load(Ordering::Relaxed);
    let faults = r.uffd_faults.load(Ordering::Relaxed);
    let avg = |tot: u64, n: u64, div: f64| {
        if n == 0 {
            0.0
        } else {
            tot as f64 / n as f64 / div
        }
    };
    let pid = r.worker_pid.load(Ordering::Acquire);
    let hc = cow::hist_summary(&c.hist_copy);
    let hf = cow::hist_summary(&c.hist_fault);
    TableIterator::once((
        registry::method_name(r.method.load(Ordering::Acquire)).to_string(),
        registry::reason(),
        (pid != 0).then_some(pid),
        created as i64,
        r.released.load(Ordering::Relaxed) as i64,
        (r.abandoned.load(Ordering::Relaxed) + c.abandoned_for_memory.load(Ordering::Relaxed))
            as i64,
        c.abandoned_for_memory.load(Ordering::Relaxed) as i64,
        r.gate_timeouts.load(Ordering::Relaxed) as i64,
        r.create_failures.load(Ordering::Relaxed) as i64,
        r.skipped_overflow.load(Ordering::Relaxed) as i64,
        avg(r.create_us_total.load(Ordering::Relaxed), created, 1000.0),
        r.create_us_max.load(Ordering::Relaxed) as f64 / 1000.0,
        avg(r.gate_us_total.load(Ordering::Relaxed), created, 1000.0),
        r.gate_us_max.load(Ordering::Relaxed) as f64 / 1000.0,
        saves as i64,
        avg(c.save_ns.load(Ordering::Relaxed), saves, 1000.0),
        faults as i64,
        avg(r.uffd_fault_ns.load(Ordering::Relaxed), faults, 1000.0),
        hc.0 as i64,
        hc.1,
        hc.2,
        hf.0 as i64,
        hf.1,
        hf.2,
        (c.nframes as u64 * cow::PAGE as u64) as i64,
        (cow::frames_in_use() as u64 * cow::PAGE as u64) as i64,
        arena::zombie_blocks() as i32,
        c.alias_writes.load(Ordering::Relaxed) as i64,
    ))
}

/// `scoot.snapshot_stats_reset()`: zeroes the counters of `scoot.snapshot_stats` (like
/// `pg_stat_reset()`); the method, pool usage and zombie blocks are state, not counters.
#[pg_extern(volatile, parallel_unsafe)]
fn snapshot_stats_reset() {
    use crate::snapshot::registry;
    use crate::storage::cow;
    crate::ensure_preloaded();
    let r = registry::reg();
    for a in [
        &r.created,
        &r.released,
        &r.abandoned,
        &r.gate_timeouts,
        &r.create_failures,
        &r.skipped_overflow,
        &r.create_us_total,
        &r.create_us_max,
        &r.gate_us_total,
        &r.gate_us_max,
        &r.uffd_faults,
        &r.uffd_fault_ns,
    ] {
        a.store(0, Ordering::Relaxed);
    }
    cow::reset_stats();
}

extension_sql!(
    r#"
CREATE VIEW snapshots AS SELECT * FROM snapshots_info();
CREATE VIEW snapshot_stats AS SELECT * FROM snapshot_stats_info();
COMMENT ON VIEW snapshots IS 'OLAP snapshots of the scoot arena: id, method, age, readers, pre-image pages preserved, creation cost';
REVOKE EXECUTE ON FUNCTION snapshot_stats_reset() FROM PUBLIC;
COMMENT ON FUNCTION snapshot_stats_reset() IS 'zeroes the counters of scoot.snapshot_stats (superuser, or granted like pg_stat_reset)';
COMMENT ON VIEW snapshot_stats IS 'OLAP snapshot worker statistics: method in use and why, snapshots taken/abandoned, creation and gate-closed times, pre-image saves and write faults, the cost of a first write to a page after a snapshot as writers see it (p50/p99 from log2 histograms)';
"#,
    name = "snapshot_views",
    requires = [snapshots_info, snapshot_stats_info, snapshot_stats_reset]
);

/// `scoot.planner_samples`: what the planner sampled from scoot tables, shared by all backends
/// (`exec::samplecache`).
#[pg_extern]
fn planner_samples_info() -> TableIterator<
    'static,
    (
        name!(relid, pg_sys::Oid),
        name!(kind, String),
        name!(sampled_at_rows, f64),
        name!(estimate, Option<f64>),
        name!(hits, i64),
    ),
> {
    use crate::exec::samplecache;
    // as pg_stats: only tables the user may read, none whose row security applies to the user
    // (and none dropped since they were sampled)
    let readable = |relid: u32| unsafe {
        let oid = pg_sys::Oid::from(relid);
        pg_sys::SearchSysCacheExists(
            pg_sys::SysCacheIdentifier::RELOID as i32,
            pg_sys::Datum::from(oid),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
        ) && pg_sys::pg_class_aclcheck(oid, pg_sys::GetUserId(), pg_sys::ACL_SELECT as _)
            == pg_sys::AclResult::ACLCHECK_OK
            && pg_sys::check_enable_rls(oid, pg_sys::InvalidOid, true)
                != pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
    };
    let rows: Vec<_> = samplecache::entries()
        .into_iter()
        .filter(|e| readable(e.0))
        .map(|(relid, kind, tuples, est, hits)| {
            let k = match kind {
                samplecache::KIND_EXPR => "expression statistics",
                samplecache::KIND_GROUPS => "group count",
                _ => "other",
            };
            (
                pg_sys::Oid::from(relid),
                k.to_string(),
                tuples,
                est,
                hits as i64,
            )
        })
        .collect();
    TableIterator::new(rows)
}

/// `scoot.planner_samples_reset()`: forgets the current database's shared planner samples (the
/// next backend to plan over a table samples it again; a backend's own results stay until its
/// table's row count moves).
#[pg_extern(volatile, parallel_unsafe)]
fn planner_samples_reset() {
    crate::exec::samplecache::reset();
}

extension_sql!(
    r#"
CREATE VIEW planner_samples AS
  SELECT relid::regclass AS relation, kind, sampled_at_rows, estimate, hits FROM planner_samples_info();
COMMENT ON VIEW planner_samples IS 'what the planner sampled from the scoot tables the user may read (expression statistics: distinct values, negative = a fraction of the rows; group counts for eager aggregation), shared by all backends so that new connections do not sample again; hits = plans of other backends answered from it';
REVOKE EXECUTE ON FUNCTION planner_samples_reset() FROM PUBLIC;
COMMENT ON FUNCTION planner_samples_reset() IS 'forgets the shared planner samples of the current database (superuser)';
"#,
    name = "planner_sample_views",
    requires = [planner_samples_info, planner_samples_reset]
);
