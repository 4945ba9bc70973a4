//! Analytic execution over PAX blocks: *how analytic queries read scoot tables fast*.
//!
//! `custompreagg.c` is ScootPreAgg, eager aggregation: a scoot table read below joins as one row
//! per group with partial sums, minima and maxima, computed by the same engine (`agg.rs`).
//!
//! `customunique.c` is ScootUniqueGroups: the final aggregation of groups proved to be one input
//! row each (typically a join of pre-aggregated groups to tables by their unique keys) computed
//! per row, without a hash table.
//!
//! `customshare.c` is ScootShare: a grouped subquery (typically a view) that a statement reads
//! more than once is computed once into a tuplestore that every occurrence reads, each applying
//! its own HAVING.
//!
//! `olapparallel.c` caps the parallel workers of statements that read OLAP snapshots at the CPUs
//! other busy sessions leave (`scoot.olap_parallel_yield`).
//!
//! `exprstats.c` gives the planner statistics of expressions over scoot tables that queries
//! compare by equality (distinct values and null fraction, sampled once per backend), so that
//! joins on them are estimated from the data.
//!
//! `samplecache.rs` keeps what the planner learns from a table's rows (expression statistics,
//! group-count samples) in shared memory, so a new connection's first plans do not sample again.
//!
//! `joinest.c` corrects PostgreSQL's estimate of a join of a scoot table to a grouped subquery on
//! the group key and the group's min() / max() of one of its columns (the argmin of CH / TPC-H Q2):
//! at least one row per group, not the 1/200 of one that independent clauses give.
//!
//! `distinctagg.c` rewrites a grouped statement whose aggregates are all `count(DISTINCT x)` into a
//! GROUP BY of its groups and x under a GROUP BY of its groups, before PostgreSQL plans it, so
//! the distinct values are found by hashing or one shared sort instead of a sort per group.
//!
//! `memory.rs` is the malloc policy of backends running analytic statements: they keep the
//! memory their statements free for the next one (`scoot.retain_query_memory`).
//!
//! `customagg.c` + `agg.rs` are ScootAgg, aggregate pushdown (count/sum/avg/min/max with or
//! without GROUP BY computed a block at a time on the column regions).
//!
//! `customscan.c` is the ScootScan custom scan node (planner path, plan, executor node,
//! EXPLAIN, parallel DSM; C, like the other executor hooks, so that errors unwind through C
//! frames only). This module is its Rust side: the `scoot.custom_scan` switch and handing the
//! set of columns a query reads to the table scan underneath (`am::scan::set_columns`), whose
//! block batches then copy just those.
use crate::storage::filter;
use crate::{am, guc};
use pgrx::pg_sys;

pub mod agg;
pub mod memory;
pub mod samplecache;

unsafe extern "C" {
    fn scoot_install_custom_scan();
    fn scoot_install_custom_agg();
    fn scoot_install_custom_preagg();
    fn scoot_install_custom_unique();
    fn scoot_install_custom_share();
    fn scoot_install_expr_stats();
    fn scoot_install_join_estimates();
}

/// Registers the custom scan and its planner hook (`_PG_init`, preloaded only).
pub fn install() {
    unsafe {
        scoot_install_custom_scan();
        scoot_install_custom_agg();
        scoot_install_custom_preagg();
        scoot_install_custom_unique();
        scoot_install_custom_share();
        scoot_install_expr_stats();
        scoot_install_join_estimates();
    }
    samplecache::install();
}

/// Does the planner push aggregates into ScootAgg (`scoot.agg_pushdown`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_agg_pushdown_enabled() -> bool {
    guc::AGG_PUSHDOWN.get()
}

/// May the planner replace the final aggregation of one-row groups (`scoot.unique_groups`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_unique_groups_enabled() -> bool {
    scoot_custom_scan_enabled() && guc::AGG_PUSHDOWN.get() && guc::UNIQUE_GROUPS.get()
}

/// May ScootUniqueGroups move HAVING conjuncts into a ScootPreAgg below (`scoot.having_pushdown`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_unique_having_enabled() -> bool {
    guc::HAVING_PUSHDOWN.get()
}

/// May the planner group DISTINCT aggregates' arguments first (`scoot.distinct_aggs`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_distinct_aggs_enabled() -> bool {
    guc::DISTINCT_AGGS.get()
}

/// May the planner compute a grouped subquery read twice once (`scoot.shared_groups`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_shared_groups_enabled() -> bool {
    scoot_custom_scan_enabled() && guc::SHARED_GROUPS.get()
}

unsafe extern "C" {
    fn scoot_busy_sessions() -> i32;
    fn scoot_online_cpus() -> i32;
}

/// `scoot.olap_parallel_budget()`: what `scoot.olap_parallel_yield` would allow a SELECT of scoot
/// tables planned now: the CPUs it counts with (`scoot.olap_parallel_cpus` or the online ones), other busy sessions (client backends holding a transaction id
/// or a snapshot), whether the cap applies (the setting is on and the statement would read an
/// OLAP snapshot), and the parallel workers per Gather it may plan.
#[pgrx::pg_extern]
fn olap_parallel_budget() -> pgrx::iter::TableIterator<
    'static,
    (
        pgrx::name!(cpus, i32),
        pgrx::name!(busy_sessions, i32),
        pgrx::name!(applies, bool),
        pgrx::name!(workers, i32),
    ),
> {
    crate::ensure_preloaded();
    let (cpus, busy) = unsafe { (scoot_online_cpus(), scoot_busy_sessions()) };
    let applies = scoot_olap_parallel_yield_applies();
    let max = unsafe { pg_sys::max_parallel_workers_per_gather };
    let workers = if applies {
        max.min((cpus - busy).max(0))
    } else {
        max
    };
    pgrx::iter::TableIterator::once((cpus, busy, applies, workers))
}

/// `scoot.olap_parallel_cpus`, 0 for the online CPUs.
#[unsafe(no_mangle)]
pub extern "C" fn scoot_olap_parallel_cpus_setting() -> i32 {
    guc::OLAP_PARALLEL_CPUS.get()
}

/// Does `scoot.olap_parallel_yield` apply to a SELECT of scoot tables planned now (it is on and
/// such a statement would read an OLAP snapshot)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_olap_parallel_yield_applies() -> bool {
    guc::OLAP_PARALLEL_YIELD.get() && crate::snapshot::session::select_would_read_image()
}

/// May the planner sample expressions over scoot tables for statistics (`scoot.expression_stats`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_expression_stats_enabled() -> bool {
    scoot_custom_scan_enabled() && guc::EXPRESSION_STATS.get()
}

/// Does the planner offer ScootScan paths (`scoot.custom_scan`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_custom_scan_enabled() -> bool {
    let preloaded = unsafe { crate::PRELOADED };
    preloaded && guc::CUSTOM_SCAN.get()
}

/// Is `rel` a scoot table?
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_relation_is_scoot(rel: pg_sys::Relation) -> bool {
    am::is_scoot(rel)
}

/// The scan reads only the columns whose `mask` entry (by attribute number - 1) is set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_scan_set_columns(
    scan: pg_sys::TableScanDesc,
    mask: *const bool,
    natts: i32,
) {
    unsafe {
        let m = std::slice::from_raw_parts(mask, natts.max(0) as usize);
        am::scan::set_columns(scan, m);
    }
}

/// A bitmap heap scan of a scoot table reads only the columns whose `mask` entry is set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_bitmap_set_columns(
    scan: pg_sys::TableScanDesc,
    mask: *const bool,
    natts: i32,
) {
    unsafe {
        let m = std::slice::from_raw_parts(mask, natts.max(0) as usize);
        am::scan::set_bitmap_columns(scan, m);
    }
}

/// A plain Seq Scan of a scoot table reads only the columns whose `mask` entry is set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_seq_scan_set_columns(
    scan: pg_sys::TableScanDesc,
    mask: *const bool,
    natts: i32,
) {
    unsafe {
        let m = std::slice::from_raw_parts(mask, natts.max(0) as usize);
        am::scan::set_plain_columns(scan, m);
    }
}

/// An index scan's fetches from a scoot table read only the columns whose `mask` entry is set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_index_fetch_set_columns(
    fetch: *mut pg_sys::IndexFetchTableData,
    mask: *const bool,
    natts: i32,
) {
    unsafe {
        let m = std::slice::from_raw_parts(mask, natts.max(0) as usize);
        am::index::set_fetch_columns(fetch, m);
    }
}

/// The next index fetch begun on table `relid` reads only the columns whose `mask` entry is set
/// (an index scan node's first call, which begins its scan), and serves an index-only scan if
/// `index_only`; `InvalidOid` withdraws it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_index_fetch_pending_columns(
    relid: pg_sys::Oid,
    mask: *const bool,
    natts: i32,
    index_only: bool,
) {
    unsafe {
        if relid == pg_sys::InvalidOid || mask.is_null() {
            am::index::set_pending_columns(None);
        } else {
            let m = std::slice::from_raw_parts(mask, natts.max(0) as usize);
            am::index::set_pending_columns(Some((relid, m.to_vec(), index_only)));
        }
    }
}

/// `fetch` serves an index-only scan; returns its fetches answered without reading the row since
/// the last call (`am::index::index_only_skipped`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_index_fetch_index_only(
    fetch: *mut pg_sys::IndexFetchTableData,
) -> u64 {
    unsafe { am::index::index_only_skipped(fetch) }
}

/// Has [`scoot_index_fetch_set_columns`] been called on `fetch`?
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_index_fetch_columns_set(
    fetch: *mut pg_sys::IndexFetchTableData,
) -> bool {
    unsafe { am::index::fetch_columns_set(fetch) }
}

/// Adds a block filter ("attno strategy type value", see `filter.rs`) to a ScootScan's scan;
/// one the scan cannot read is ignored, and the scan then evaluates every pushed clause itself.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_scan_set_filter(
    scan: pg_sys::TableScanDesc,
    f: *const std::ffi::c_char,
) {
    let s = unsafe { std::ffi::CStr::from_ptr(f) }.to_string_lossy();
    match filter::BlockFilter::parse(&s) {
        Some(bf) => am::scan::add_filter(scan, bf),
        // the scan evaluates the clauses itself (`scoot_scan_row_exact` is never true)
        None => am::scan::filter_unusable(scan),
    }
}

/// Drops a ScootScan's block filters (a rescan then hands it the runtime filters' new values
/// with the planned ones: `set_filters` in customscan.c).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_scan_clear_filters(scan: pg_sys::TableScanDesc) {
    am::scan::clear_filters(scan);
}

/// A ScootScan copies only the first `ncols` columns on entering a block (the others when a row
/// asks for them): those its target list and remaining qual read, fewer than the columns its
/// block filters read too.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_scan_set_eager(scan: pg_sys::TableScanDesc, ncols: i32) {
    am::scan::set_eager(scan, ncols.max(0) as usize);
}

/// Did the ScootScan's block filters decide the row it returned last exactly? Then the clauses
/// they came from need no evaluation (`scoot_next` in customscan.c).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_scan_row_exact(scan: pg_sys::TableScanDesc) -> bool {
    am::scan::row_exact(scan)
}

/// The planner cost added per row an index scan of a scoot table fetches
/// (`scoot.index_fetch_cost`).
#[unsafe(no_mangle)]
pub extern "C" fn scoot_index_fetch_cost() -> f64 {
    guc::INDEX_FETCH_COST.get()
}

/// Does the planner pre-aggregate scoot tables below joins (`scoot.eager_agg`), and from how
/// many expected rows per group (`scoot.eager_agg_min_group_size`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_eager_agg_min_group() -> f64 {
    if guc::EAGER_AGG.get() && guc::AGG_PUSHDOWN.get() {
        guc::EAGER_AGG_MIN_GROUP.get()
    } else {
        0.0
    }
}

/// Does a ScootScan filter the rows it hands a hash join (`scoot.join_filter`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_join_filter_enabled() -> bool {
    guc::JOIN_FILTER.get()
}

/// Does a ScootScan under a Hash node write into the join's table (`scoot.hash_build`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_hash_build_enabled() -> bool {
    guc::HASH_BUILD.get()
}

/// Do hash joins read their outer side ahead (`scoot.hash_join_readahead`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_hash_join_readahead_enabled() -> bool {
    guc::HASH_JOIN_READAHEAD.get()
}

/// May the join filter compute keys that are expressions (`scoot.join_filter_expressions`)?
#[unsafe(no_mangle)]
pub extern "C" fn scoot_join_filter_expressions_enabled() -> bool {
    guc::JOIN_FILTER_EXPRESSIONS.get()
}

/// Gives a ScootScan's scan the hash table of the join it probes (null: none): from the next
/// block on, rows whose keys (`nkeys` columns or integer expressions over columns, encoded in
/// `prog`, see [`parse_join_keys`]) hash to a value the table cannot hold are dropped (see `join_filter` in customscan.c) — until `trial`
/// rows showed that the filter keeps nearly all — and the join's buckets for the rows a few
/// ahead are prefetched (`prefetch`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_scan_set_join_filter(
    scan: pg_sys::TableScanDesc,
    hashtable: *mut std::ffi::c_void,
    may_match: Option<unsafe extern "C" fn(*mut std::ffi::c_void, u32) -> bool>,
    prefetch: Option<unsafe extern "C" fn(*mut std::ffi::c_void, u32, u32)>,
    trial: i64,
    nkeys: i32,
    prog: *const i64,
    proglen: i32,
) {
    let keys = if hashtable.is_null() || nkeys <= 0 || proglen <= 0 {
        Vec::new()
    } else {
        parse_join_keys(
            unsafe { std::slice::from_raw_parts(prog, proglen as usize) },
            nkeys as usize,
        )
        .unwrap_or_default()
    };
    am::scan::set_join_filter(
        scan,
        hashtable,
        may_match,
        prefetch,
        trial.max(0) as u64,
        keys,
    );
}

/// The join keys `customscan.c` encodes (compile_join_key): per key its hashed width and token
/// count, then three words per token: (1, attno, width) a column, (2, value, 0) a constant,
/// (3, operator byte, result width) an operation, (4, width, 0) a cast. None if malformed.
fn parse_join_keys(p: &[i64], nkeys: usize) -> Option<Vec<am::scan::JoinKey>> {
    use crate::storage::filter::KeyTok;
    let mut keys = Vec::with_capacity(nkeys);
    let mut i = 0;
    let width = |w: i64| matches!(w, 2 | 4 | 8).then_some(w as u8);
    for _ in 0..nkeys {
        let (w, n) = (width(*p.get(i)?)?, *p.get(i + 1)? as usize);
        i += 2;
        let mut prog = Vec::with_capacity(n);
        for _ in 0..n {
            let t = p.get(i..i + 3)?;
            i += 3;
            prog.push(match t[0] {
                1 if t[1] >= 1 => KeyTok::Var((t[1] - 1) as usize, width(t[2])?),
                2 => KeyTok::Const(t[1]),
                3 if [b'+', b'-', b'*', b'%'].contains(&(t[1] as u8)) => {
                    KeyTok::Arith(t[1] as u8, width(t[2])?)
                }
                4 => KeyTok::Cast(width(t[1])?),
                _ => return None,
            });
        }
        if prog.is_empty() {
            return None;
        }
        keys.push(am::scan::JoinKey { width: w, prog });
    }
    (i == p.len()).then_some(keys)
}

/// Rows a ScootScan's join filter dropped (EXPLAIN ANALYZE).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_scan_join_filter_removed(scan: pg_sys::TableScanDesc) -> i64 {
    am::scan::join_filter_removed(scan) as i64
}

/// Blocks a ScootScan's scan skipped by their zone maps (EXPLAIN ANALYZE).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_scan_zone_skipped(scan: pg_sys::TableScanDesc) -> i64 {
    am::scan::zone_skipped(scan) as i64
}

// Count mode of eager aggregation (custompreagg.c): counts and sums above a pre-aggregated
// table's groups weigh each group by its row count with these two (plain sums of bigints: the
// count's is 0 over no rows, as count's).
pgrx::extension_sql!(
    r#"
CREATE AGGREGATE eager_count(bigint) (
    SFUNC = int8pl, STYPE = bigint, INITCOND = '0', COMBINEFUNC = int8pl, PARALLEL = SAFE);
COMMENT ON AGGREGATE eager_count(bigint) IS
    'internal (eager aggregation): count(*) over pre-aggregated groups, each weighing its row count';
CREATE AGGREGATE eager_sum(bigint) (
    SFUNC = int8pl, STYPE = bigint, COMBINEFUNC = int8pl, PARALLEL = SAFE);
COMMENT ON AGGREGATE eager_sum(bigint) IS
    'internal (eager aggregation): sum(integer x) over pre-aggregated groups, as the sum of x times each group''s row count';
"#,
    name = "eager_agg_weighted",
);
