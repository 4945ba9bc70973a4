//! The `scoot.*` settings (GUCs). Postmaster-level ones size the arena and are fixed at start.
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};

/// `scoot.arena_size`: size of the shared arena in MB (postmaster).
pub static ARENA_SIZE_MB: GucSetting<i32> = GucSetting::<i32>::new(1024);
/// `scoot.block_size`: PAX block size in kB (postmaster; a power of two, 64 kB .. 64 MB).
pub static BLOCK_SIZE_KB: GucSetting<i32> = GucSetting::<i32>::new(1024);
/// `scoot.max_tables`: number of scoot relations (relfilenodes) the arena can track (postmaster).
pub static MAX_TABLES: GucSetting<i32> = GucSetting::<i32>::new(4096);

/// `scoot.olap`: analytic statements read an OLAP snapshot of the arena (user).
pub static OLAP: GucSetting<bool> = GucSetting::<bool>::new(false);
/// `scoot.snapshot_max_age`: how old (ms) a snapshot may be for an OLAP read (user).
pub static SNAPSHOT_MAX_AGE_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// `scoot.snapshot_interval`: how often (ms) the OLAP worker takes a snapshot when anything
/// changed (sighup).
pub static SNAPSHOT_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// `scoot.freeze_after`: blocks unchanged this long (ms) are frozen by the OLAP worker; -1: never
/// (sighup).
pub static FREEZE_AFTER_MS: GucSetting<i32> = GucSetting::<i32>::new(10_000);
/// `scoot.compact_below`: frozen blocks less full than this (fraction of their rows) are
/// compacted in the background when their rows fit in fewer blocks; 0: never (sighup).
pub static COMPACT_BELOW: GucSetting<f64> = GucSetting::<f64>::new(0.5);
/// `scoot.index_fetch_cost`: planner cost added per row a parameterized index scan of a scoot table fetches
/// (user; see `cost_index_fetches` in exec/customscan.c).
pub static INDEX_FETCH_COST: GucSetting<f64> = GucSetting::<f64>::new(0.3);
/// `scoot.checkpoint_interval`: the OLAP worker writes a checkpoint image from a snapshot this
/// often (s) while scoot tables change, so crash recovery replays and the server keeps only the
/// WAL since then; 0: images only at a clean shutdown (sighup).
pub static CHECKPOINT_INTERVAL_S: GucSetting<i32> = GucSetting::<i32>::new(300);
/// `scoot.snapshot_fetch_cache`: memory a backend may hold in private copies of blocks changed
/// since the OLAP snapshot its row fetches read, MB (user; see `snapshot::image::BlockCache`).
pub static SNAPSHOT_FETCH_CACHE_MB: GucSetting<i32> = GucSetting::<i32>::new(128);
/// `scoot.snapshot_memory`: pre-image memory for snapshots, MB (postmaster).
pub static SNAPSHOT_MEMORY_MB: GucSetting<i32> = GucSetting::<i32>::new(256);
/// `scoot.snapshot_method`: uffd | software | copy (postmaster).
pub static SNAPSHOT_METHOD: GucSetting<Option<std::ffi::CString>> =
    GucSetting::<Option<std::ffi::CString>>::new(Some(c"uffd"));

/// `scoot.olap_nice`: the nice value a backend (and its parallel workers) takes when it starts
/// reading OLAP snapshots (user; 0: unchanged). Lowering a priority cannot be undone without
/// privileges, so it lasts for the rest of the connection.
pub static OLAP_NICE: GucSetting<i32> = GucSetting::<i32>::new(0);

/// `scoot.uffd_writer_resolves`: with the `uffd` method, a backend resolves the kernel's trap of
/// its own announced writes (saves the pre-image, lifts its own protection) instead of waiting
/// for the OLAP worker's fault handler.
pub static UFFD_WRITER_RESOLVES: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `scoot.custom_scan`: the planner may read scoot tables with the ScootScan custom scan.
pub static CUSTOM_SCAN: GucSetting<bool> = GucSetting::<bool>::new(true);
/// Developer self check of the scoot WAL (see `storage::changes`).
pub static WAL_CHECK: GucSetting<bool> = GucSetting::<bool>::new(false);
/// Developer fault injection (tests): sleep this long per block written to a checkpoint image,
/// and per scoot WAL record replayed, so a test can crash the server in the middle.
pub static DEBUG_IMAGE_DELAY_MS: GucSetting<i32> = GucSetting::<i32>::new(0);
pub static DEBUG_REDO_DELAY_US: GucSetting<i32> = GucSetting::<i32>::new(0);

/// `scoot.agg_pushdown`: with `scoot.custom_scan`, aggregates over one scoot table may be
/// computed a block at a time by the ScootAgg custom scan.
pub static AGG_PUSHDOWN: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `scoot.eager_agg`: a join query whose aggregates are sums, minima and maxima of a scoot
/// table's columns (or counts and sums weighed by each group's row count: count mode) reads that
/// table pre-aggregated by the columns the joins and groups need (`exec/custompreagg.c`).
pub static EAGER_AGG: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `scoot.unique_groups`: the final aggregation of a query whose groups are provably one input
/// row each is computed per row (ScootUniqueGroups, `exec/customunique.c`).
pub static UNIQUE_GROUPS: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `scoot.having_pushdown`: HAVING conjuncts of a ScootUniqueGroups that read one ScootPreAgg's
/// columns only filter its groups before the joins (`exec/customunique.c`, push_having).
pub static HAVING_PUSHDOWN: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `scoot.shared_groups`: a grouped subquery over scoot tables that a statement reads more than
/// once (a view joined and also aggregated in a subquery) is computed once (`exec/customshare.c`).
pub static SHARED_GROUPS: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `scoot.distinct_aggs`: grouped `count(DISTINCT x)` (and min/max/sum/avg of DISTINCT integers) over
/// scoot tables is planned as a GROUP BY of the groups and x under a GROUP BY of the groups
/// (`exec/distinctagg.c`).
pub static DISTINCT_AGGS: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `scoot.olap_parallel_yield`: statements that read OLAP snapshots plan no more parallel
/// workers than there are CPUs not taken by other busy sessions (`exec/olapparallel.c`).
pub static OLAP_PARALLEL_YIELD: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `scoot.olap_parallel_cpus`: the CPUs `scoot.olap_parallel_yield` counts with (0: the online
/// CPUs the kernel reports, which in a container may be more than its CPU quota).
pub static OLAP_PARALLEL_CPUS: GucSetting<i32> = GucSetting::<i32>::new(0);
/// `scoot.expression_stats`: the planner samples expressions over a scoot table that a query
/// compares by equality for their distinct values (`exec/exprstats.c`).
pub static EXPRESSION_STATS: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `scoot.eager_agg_min_group_size`: eager aggregation only where the planner expects at least
/// this many rows per pre-aggregated group.
pub static EAGER_AGG_MIN_GROUP: GucSetting<f64> = GucSetting::<f64>::new(2.0);

/// `scoot.join_filter`: a ScootScan probing a hash join drops the rows whose key the join's hash
/// table cannot hold, before forming them (`exec/customscan.c`).
pub static JOIN_FILTER: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `scoot.hash_build`: a ScootScan, ScootPreAgg or ScootAgg under a hash join's Hash node writes
/// its rows straight into the join's hash table (`exec/hashbuild.c`).
pub static HASH_BUILD: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `scoot.hash_join_readahead`: a hash join in a SELECT over scoot tables reads its outer side a
/// few rows ahead and prefetches their buckets (`exec/readahead.c`).
pub static HASH_JOIN_READAHEAD: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `scoot.join_filter_expressions`: the join filter also computes keys that are integer
/// expressions over the scan's columns (`mod((s_w_id * s_i_id), 10000)`), not only columns.
pub static JOIN_FILTER_EXPRESSIONS: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `scoot.opportunistic_prune`: prune version chains during scans and index fetches (debugging aid).
pub static OPPORTUNISTIC_PRUNE: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `scoot.retain_query_memory`: backends running analytic statements keep the memory they free
/// (`exec/memory.rs`).
pub static RETAIN_QUERY_MEMORY: GucSetting<bool> = GucSetting::<bool>::new(true);

pub fn define() {
    GucRegistry::define_bool_guc(
        c"scoot.retain_query_memory",
        c"Backends that run analytic statements keep the memory their statements free for the next one.",
        c"A statement reading an OLAP snapshot, or running a ScootAgg or ScootPreAgg, switches its backend's malloc to serve requests below 32 MB from its heap and to keep up to 1 GB of freed heap mapped, so that the next statement does not page-fault fresh memory in again; the memory stays with the backend until it exits. Off: glibc's default thresholds from the next analytic statement on.",
        &RETAIN_QUERY_MEMORY,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.olap",
        c"Read-only analytic statements on scoot tables read an OLAP snapshot of the arena.",
        c"Statements of READ ONLY transactions and single-statement SELECTs on scoot tables (which then run as read-only transactions) read a transaction-consistent copy-on-write snapshot at most scoot.snapshot_max_age old.",
        &OLAP,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"scoot.olap_nice",
        c"Nice value a backend takes when it starts reading OLAP snapshots (0: unchanged).",
        c"Lets the kernel prefer OLTP backends over analytic ones on a loaded machine. It cannot be undone: the backend keeps the lower priority until the connection ends.",
        &OLAP_NICE,
        0,
        19,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"scoot.debug_image_delay",
        c"Developer fault injection: sleep this long per block written to a checkpoint image.",
        c"For tests that crash the server while an image is being written. Never set it in production.",
        &DEBUG_IMAGE_DELAY_MS,
        0,
        10_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS | GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_int_guc(
        c"scoot.debug_redo_delay",
        c"Developer fault injection: sleep this many microseconds per scoot WAL record replayed by recovery.",
        c"For tests that crash the server during recovery. Never set it in production.",
        &DEBUG_REDO_DELAY_US,
        0,
        1_000_000,
        GucContext::Sighup,
        GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_bool_guc(
        c"scoot.wal_check",
        c"Developer check: report block bytes a modification changed without logging them.",
        c"Copies each block when a backend locks it for writing and compares it at release against the ranges the scoot WAL record carries (slow; for tests).",
        &WAL_CHECK,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.custom_scan",
        c"Read-only queries may read scoot tables with the ScootScan custom scan.",
        c"ScootScan reads only the columns a query uses from the PAX blocks (EXPLAIN: Scoot Columns). Off: plain Seq Scans.",
        &CUSTOM_SCAN,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.agg_pushdown",
        c"Aggregates over one scoot table may be computed by the ScootAgg custom scan (needs scoot.custom_scan).",
        c"ScootAgg computes count, sum, avg, min and max, grouped by plain columns or not, a block at a time on the column regions (EXPLAIN: Scoot Aggregates). Off: PostgreSQL's Agg over a scan.",
        &AGG_PUSHDOWN,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.eager_agg",
        c"Join queries aggregate a scoot table's rows before the joins where that is exact (needs scoot.custom_scan and scoot.agg_pushdown).",
        c"When every aggregate of a query is a sum of a numeric column, or a min or max, and the summed columns of one scoot table are used nowhere else, that table is read as one row per group of the columns the joins, groups and output need, with the sums, minima and maxima of its group (EXPLAIN: Custom Scan (ScootPreAgg)); the joins and PostgreSQL's aggregate above then handle fewer rows. Counts and integer or numeric sums of other columns (count mode) weigh each group by its row count, which the node also counts. The inner side of an EXISTS / NOT EXISTS that compares one of its columns by <, <=, > or >= (the others by equality) is read as one row per group with that column's max or min, likewise. Off: every row goes to the joins.",
        &EAGER_AGG,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.unique_groups",
        c"Aggregate queries over scoot tables whose groups are provably one row each skip the hash table (needs scoot.custom_scan and scoot.agg_pushdown).",
        c"When the GROUP BY columns determine a unique key of every table the query joins (inner joins only; a ScootPreAgg's groups are unique on their keys), each group is one joined row: ScootUniqueGroups computes sum, min, max and count from that row, then HAVING and the output, instead of PostgreSQL's Agg. Off: PostgreSQL's Agg.",
        &UNIQUE_GROUPS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.having_pushdown",
        c"HAVING conditions on one pre-aggregated table's groups run before the joins when each group is one row (needs scoot.unique_groups).",
        c"When ScootUniqueGroups computes a query's groups from one joined row each and a HAVING condition reads only the partial aggregates and keys of one ScootPreAgg (CH-benCHmark Q18: sum(ol_amount) > 200), the condition filters that node's groups, so the groups it removes are never joined (EXPLAIN: the ScootPreAgg's Filter, and Scoot HAVING Pushed Down to). Volatile conditions, and parallel-unsafe ones under a Gather, stay on top. Off: HAVING runs after the joins.",
        &HAVING_PUSHDOWN,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.shared_groups",
        c"A grouped subquery over scoot tables that a statement reads more than once is computed once (needs scoot.custom_scan).",
        c"When the same uncorrelated GROUP BY / aggregate subquery (typically a view) occurs more than once in a statement, each occurrence's aggregation is wrapped in a ScootShare node: the first to run computes the groups into a tuplestore, the others read them there, and each applies its own HAVING. Off: every occurrence is computed on its own, as PostgreSQL does.",
        &SHARED_GROUPS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.distinct_aggs",
        c"DISTINCT aggregates over scoot tables are computed by grouping on their argument first (needs scoot.custom_scan).",
        c"A statement with GROUP BY reading a scoot table whose aggregates are all count(DISTINCT x) (or min, max, sum, avg of DISTINCT integer x) over one argument x is planned as a GROUP BY of its groups and x, sorted, under a GROUP BY of its groups, so one sort serves both, instead of a sort per group inside PostgreSQL's Agg. Off: PostgreSQL's Agg sorts each group's values.",
        &DISTINCT_AGGS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.olap_parallel_yield",
        c"Statements that read OLAP snapshots plan no more parallel workers than there are CPUs not taken by other busy sessions.",
        c"A statement that will read an OLAP snapshot (scoot.olap) is planned with at most max(0, online CPUs - busy sessions) parallel workers per Gather (and never more than max_parallel_workers_per_gather), where a busy session is another client backend holding a transaction id or a snapshot: on a server running transactions, parallel workers would only time-slice with them. Off: PostgreSQL's max_parallel_workers_per_gather alone.",
        &OLAP_PARALLEL_YIELD,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"scoot.olap_parallel_cpus",
        c"The CPUs scoot.olap_parallel_yield counts with (0: the online CPUs).",
        c"Set it to the CPU quota of a container whose kernel reports more CPUs than the server may use.",
        &OLAP_PARALLEL_CPUS,
        0,
        4096,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.expression_stats",
        c"The planner estimates equality clauses on expressions over scoot tables from sampled statistics (needs scoot.custom_scan).",
        c"An expression of one scoot table's columns that a query's WHERE or JOIN clauses compare with = (built-in immutable functions only) gets its distinct values and null fraction from up to 30,000 of the table's rows, sampled once per backend and again when the table's row count changes by a fifth, instead of PostgreSQL's default of 200 distinct values. Off: PostgreSQL's default (as for heap tables without CREATE STATISTICS on the expression).",
        &EXPRESSION_STATS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"scoot.eager_agg_min_group_size",
        c"Eager aggregation only where the planner expects at least this many rows per group.",
        c"The estimate is PostgreSQL's number of distinct values of the grouping columns.",
        &EAGER_AGG_MIN_GROUP,
        1.0,
        1.0e9,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.join_filter",
        c"A ScootScan on the probing side of a hash join drops rows whose key is not in the join's hash table (needs scoot.custom_scan).",
        c"Once the join has built its hash table, the scan looks each row's key up in it (integer and date keys) before forming the row, and keeps only rows the join could match (EXPLAIN ANALYZE: Rows Removed by Scoot Join Filter); it also prefetches the join's buckets for the rows a few ahead. Off: every row goes to the join, nothing is prefetched.",
        &JOIN_FILTER,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.hash_join_readahead",
        c"A hash join in a SELECT over scoot tables reads its outer side a few rows ahead and prefetches the buckets those rows will probe.",
        c"Up to 32 outer rows are copied and hashed ahead of the join, and their buckets and first chain tuples asked of the CPU, so that the join's probes do not stall on memory; only for joins the statement runs once, with no volatile function on the outer side, not for Parallel Hash and not where a ScootScan or ScootPreAgg probing the join prefetches already. Off: the join reads its outer rows one at a time.",
        &HASH_JOIN_READAHEAD,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.hash_build",
        c"A ScootScan, ScootPreAgg or ScootAgg under a hash join's Hash node writes its rows straight into the join's hash table.",
        c"The scan computes each row's hash value (inline for integer key columns) and forms the row in the table's memory, as PostgreSQL's Hash node would (EXPLAIN ANALYZE: Rows Written into the Hash Table by Scoot); not for Parallel Hash or skew-optimized joins. Off: the Hash node pulls the rows one by one as always.",
        &HASH_BUILD,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.join_filter_expressions",
        c"The join filter also serves hash keys that are integer expressions over the scan's columns.",
        c"With scoot.join_filter, a hash key such as mod((s_w_id * s_i_id), 10000) (integer +, -, *, %, mod() and casts over int2/int4/int8 columns and constants) is computed by the scan for each row as PostgreSQL would (a row whose key would raise an error, such as an overflow, is kept for the join to raise it), and the planner costs such joins as filtered. Off: only keys that are plain columns.",
        &JOIN_FILTER_EXPRESSIONS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.uffd_writer_resolves",
        c"With snapshot_method uffd, a backend resolves the write-protection fault of its own announced writes.",
        c"It saves the page's pre-image and lifts its own protection of the page (one ioctl) instead of a round trip to the OLAP worker's fault handler; writes not announced still trap into the worker. Off: every first write traps into the worker (for comparison).",
        &UFFD_WRITER_RESOLVES,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"scoot.snapshot_max_age",
        c"Maximum age of the OLAP snapshot an analytic statement reads.",
        c"",
        &SNAPSHOT_MAX_AGE_MS,
        0,
        3_600_000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"scoot.snapshot_interval",
        c"How often the OLAP worker takes a snapshot when anything changed.",
        c"",
        &SNAPSHOT_INTERVAL_MS,
        10,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"scoot.checkpoint_interval",
        c"Write a checkpoint image of the scoot tables from an OLAP snapshot this often (0: only at clean shutdown).",
        c"Crash recovery replays the scoot WAL written since the last image, and the replication slot pg_scoot_wal keeps exactly that WAL. A standby writes its own images this often while it replays scoot records.",
        &CHECKPOINT_INTERVAL_S,
        0,
        86_400,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"scoot.freeze_after",
        c"Freeze scoot blocks not modified for this long (-1: never freeze in the background).",
        c"Frozen blocks hold only rows visible to everyone, with variable-length values gathered per column: scans skip visibility checks and Arrow export copies their column buffers. A write thaws a block.",
        &FREEZE_AFTER_MS,
        -1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_float_guc(
        c"scoot.compact_below",
        c"Compact frozen scoot blocks less full than this fraction in the background (0: never).",
        c"The pg_scoot compactor moves their rows into fewer blocks, as updates that change the rows' TIDs (new index entries, no triggers), then VACUUMs the table, which frees the emptied blocks. scoot.compact(rel) does the same on demand.",
        &COMPACT_BELOW,
        0.0,
        1.0,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"scoot.index_fetch_cost",
        c"Planner cost added for each row the inner index scan of a nested loop over a scoot table fetches (needs scoot.custom_scan).",
        c"A row fetched by TID reads each of its columns from another place of its block and walks its version chain, where a scan reads column runs: several times a heap fetch, and several times a scanned row. With this the planner weighs nested loops that fetch many rows against hash joins over a scan. 0: PostgreSQL's own index costs.",
        &INDEX_FETCH_COST,
        0.0,
        1.0e6,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"scoot.snapshot_memory",
        c"Memory for the pre-images snapshots keep of changed pages.",
        c"Past it the oldest snapshot is abandoned: its readers fail with 'snapshot too old'.",
        &SNAPSHOT_MEMORY_MB,
        1,
        1 << 20,
        GucContext::Postmaster,
        GucFlags::UNIT_MB,
    );
    GucRegistry::define_int_guc(
        c"scoot.snapshot_fetch_cache",
        c"Memory a backend may use for copies of blocks changed since the OLAP snapshots it reads.",
        c"A row fetched (index, bitmap or TID fetch) from a block that changed since the snapshot is read from a private copy of the block as the snapshot saw it; the backend keeps up to this much of them (at least 4 blocks), shared by all its scans and kept between statements. Too little for the blocks a nested loop visits makes it copy a block per row.",
        &SNAPSHOT_FETCH_CACHE_MB,
        1,
        1 << 20,
        GucContext::Userset,
        GucFlags::UNIT_MB,
    );
    GucRegistry::define_string_guc(
        c"scoot.snapshot_method",
        c"How snapshots preserve pages: uffd (kernel copy-on-write), software (writers copy), copy (eager copy).",
        c"uffd falls back to software where userfaultfd is unavailable.",
        &SNAPSHOT_METHOD,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"scoot.opportunistic_prune",
        c"Prune dead row versions while reading (like heap's page pruning).",
        c"",
        &OPPORTUNISTIC_PRUNE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"scoot.arena_size",
        c"Size of the scoot shared-memory arena that holds all scoot tables.",
        c"Set at server start. Tables that do not fit fail with 'out of scoot arena memory'.",
        &ARENA_SIZE_MB,
        16,
        1 << 22,
        GucContext::Postmaster,
        GucFlags::UNIT_MB,
    );
    GucRegistry::define_int_guc(
        c"scoot.block_size",
        c"Size of one scoot PAX block.",
        c"A power of two between 64kB and 64MB. A row's variable-length data must fit in about half a block.",
        &BLOCK_SIZE_KB,
        64,
        65536,
        GucContext::Postmaster,
        GucFlags::UNIT_KB,
    );
    GucRegistry::define_int_guc(
        c"scoot.max_tables",
        c"Maximum number of scoot relations (including TRUNCATE/rewrite generations) at once.",
        c"",
        &MAX_TABLES,
        16,
        1 << 20,
        GucContext::Postmaster,
        GucFlags::default(),
    );
}
