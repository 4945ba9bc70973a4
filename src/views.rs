//! Observability: `scoot.arena` (arena totals) and `scoot.arena_tables` (per-table usage:
//! blocks, live and dead row versions, bytes).
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
        let relid = if key.db == u32::from(unsafe { pg_sys::MyDatabaseId }) {
            let oid = unsafe { crate::ffi::RelidByRelfilenode(key.spc.into(), key.rel.into()) };
            if oid == pg_sys::InvalidOid {
                None
            } else {
                Some(oid)
            }
        } else {
            None
        };
        rows.push((
            relid,
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
