/*
 * ScootScan: the CustomScan for analytic reads of scoot tables (planner path, plan, executor
 * node, EXPLAIN, parallel DSM), in C like the other executor hooks (src/ffi/shim.c) so that no
 * Rust frame sits between PostgreSQL's executor and the node: errors unwind through C only.
 *
 * What it adds over a plain Seq Scan: projection pushdown, block filters (below) and the join
 * filter (further below). Projection pushdown: the planner knows which columns
 * the query reads from the relation (its target list and restriction clauses); the node hands
 * that set to the scoot table scan (scoot_scan_set_columns, Rust: src/exec/mod.rs), whose block
 * batches then copy only those columns and leave the others NULL. The scan slot is scoot's own
 * slot type (a row of the block batch, deformed as far as someone asks). Under a join or an
 * aggregate the node gets the "physical" target list (all columns, see physical_tlists) and
 * does not project, so the parent reads the columns it needs from that slot when it needs
 * them; nothing above the node reads a column the planner did not ask for, so the NULLs are
 * never seen. A whole-row reference reads all. Restriction clauses that are block filters are
 * decided on the blocks' column values (scoot_next rechecks them where a filter could not judge
 * a row); the other quals and the projection are PostgreSQL's own (ExecScan). The table scan underneath is the scoot table AM's, so OLAP snapshot images,
 * visibility and block batches work exactly as for a Seq Scan. Parallel-aware like
 * nodeSeqscan.c (the AM's parallel block scan).
 *
 * Only read-only SELECTs without row marks get the path (the scanned rows never feed a write);
 * `SET scoot.custom_scan = off` returns to plain scans.
 */
#include "postgres.h"

#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_class.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/pg_list.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planner.h"
#include "optimizer/restrictinfo.h"
#include "access/sysattr.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/date.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "parser/parsetree.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "mb/pg_wchar.h"
#include "utils/rel.h"
#include "utils/memutils.h"
#include "utils/ruleutils.h"
#include "utils/typcache.h"
#include "executor/hashjoin.h"
#include "executor/nodeHash.h"

#include "aggnode.h"
#include "hashbuild.h"

/* Rust side (src/exec/mod.rs) */
extern bool scoot_custom_scan_enabled(void);
extern double scoot_index_fetch_cost(void);
extern bool scoot_relation_is_scoot(Relation rel);
extern void scoot_scan_set_columns(TableScanDesc scan, const bool *mask, int natts);
extern void scoot_scan_set_filter(TableScanDesc scan, const char *filter);
extern int64 scoot_scan_zone_skipped(TableScanDesc scan);
extern bool scoot_scan_row_exact(TableScanDesc scan);
extern void scoot_scan_set_eager(TableScanDesc scan, int ncols);
extern void scoot_scan_clear_filters(TableScanDesc scan);

char	   *scoot_block_filter(RelOptInfo *rel, Expr *clause, char **describe, Relation r);
double		scoot_column_share(RelOptInfo *rel, int natts, bool *all);
char	   *scoot_describe_filters(List *described);

void		scoot_install_custom_scan(void);

static set_rel_pathlist_hook_type prev_set_rel_pathlist = NULL;

/* custompreagg.c */
extern void scoot_preagg_paths(PlannerInfo *root, RelOptInfo *rel, RangeTblEntry *rte, Relation r);
extern List *scoot_preagg_hash_join(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *outerrel,
									RelOptInfo *innerrel, JoinType jointype,
									JoinPathExtraData *extra);
extern void scoot_preagg_restore_buckets(List *saved);
bool		scoot_hash_clause_sides(RestrictInfo *ri, RelOptInfo *joinrel, RelOptInfo *outerrel,
									RelOptInfo *innerrel, JoinType jointype, Expr **outer_side,
									Expr **inner_side);

#define SCOOT_JOIN_FILTER_MAX_KEYS 4
#define SCOOT_KEY_MAX_TOKENS 15		/* tokens of one join filter key (storage/filter.rs KeyTok) */

/*
 * A Bloom filter of the hash values in a hash join's table (the batch it probes), so the join
 * filter tests two bits of one word in a compact array (~2 bytes per key, mostly in cache)
 * instead of walking a bucket chain through the table's tuples (a cache miss or two per row).
 * Built once per table and batch from its tuple chunks, which lie in memory in order (a Parallel
 * Hash's from its shared buckets, see bloom_build); batch < 0: none, the filter walks the
 * buckets.
 */
typedef struct ScootJoinBloom
{
	HashJoinTable ht;
	int			batch;			/* the batch whose tuples set the bits */
	int			shift;			/* 64 - log2(number of words) */
	uint64	   *bits;
} ScootJoinBloom;

typedef struct ScootScanState
{
	CustomScanState css;
	TableScanDesc scan;
	bool	   *mask;			/* columns read, by attribute number - 1 */
	int			natts;

	/*
	 * Join filter: the hash join this node is the outer (probe) side of, when every outer hash
	 * key is an integer column of the table or an integer expression over them (see
	 * join_filter_candidate); probe_ht is the hash table the scan was last given (NULL: none,
	 * the scan keeps every row). Each key as an expression over the table's columns (for
	 * EXPLAIN), the width of its value, and all keys encoded for the scan (compile_join_key).
	 */
	HashJoinState *probe_hj;
	int			probe_nkeys;
	Expr	   *probe_exprs[SCOOT_JOIN_FILTER_MAX_KEYS];
	int			probe_keyw[SCOOT_JOIN_FILTER_MAX_KEYS];
	int64		probe_prog[SCOOT_JOIN_FILTER_MAX_KEYS * (2 + 3 * SCOOT_KEY_MAX_TOKENS)];
	int			probe_proglen;
	HashJoinTable probe_ht;
	ScootJoinBloom probe_bloom;	/* probe_ht's hash values (see ScootJoinBloom) */

	/* the clauses the block filters stand for, for rows they did not decide (scoot_next) */
	ExprState  *recheck;
	int			eager;			/* columns copied on entering a block (-1: all read) */
	int64		recheck_removed;	/* rows the recheck rejected (EXPLAIN ANALYZE) */

	/*
	 * Runtime filters (see runtime_filter_clause): per clause "column op expression over
	 * Params", the expression's state; evaluated at every (re)scan into a block filter.
	 */
	int			nruntime;
	OpExpr	  **rt_clause;		/* the clauses (their Var's varno as planned) */
	int		   *rt_side;		/* the argument (0 or 1) that is the Param expression */
	ExprState **rt_expr;		/* that argument's state */
	MemoryContext rt_cxt;		/* the values and their encodings, reset per (re)scan */
	int			rt_applied;		/* runtime filters the last (re)scan could encode */

	/* the Hash node above, when the scan writes its rows into the join's table (hashbuild.c) */
	ScootHashBuild *build;
} ScootScanState;

/* Rust side of the join filter (src/exec/mod.rs, am/scan.rs) */
extern bool scoot_join_filter_enabled(void);
extern bool scoot_join_filter_expressions_enabled(void);
extern void scoot_scan_set_join_filter(TableScanDesc scan, void *hashtable,
									   bool (*may_match) (void *, uint32),
									   void (*prefetch) (void *, uint32, uint32),
									   int64 trial, int nkeys, const int64 *prog, int proglen);
extern int64 scoot_scan_join_filter_removed(TableScanDesc scan);
extern bool scoot_hash_build_enabled(void);
bool		scoot_hj_may_match(void *hashtable, uint32 hashvalue);
bool		scoot_node_prefetches_for(PlanState *outer, HashJoinState *hj);
extern void scoot_hj_readahead_setup(QueryDesc *qd, int eflags);
extern void scoot_statement_started(QueryDesc *qd);
void		scoot_hj_prefetch(void *filter, uint32 far, uint32 near);

static Plan *scoot_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
							 List *tlist, List *clauses, List *custom_plans);
static Node *scoot_create_state(CustomScan *cscan);
static void scoot_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *scoot_exec(CustomScanState *node);
static void scoot_end(CustomScanState *node);
static void scoot_rescan(CustomScanState *node);
static void scoot_explain(CustomScanState *node, List *ancestors, ExplainState *es);
static Size scoot_estimate_dsm(CustomScanState *node, ParallelContext *pcxt);
static void scoot_init_dsm(CustomScanState *node, ParallelContext *pcxt, void *coordinate);
static void scoot_reinit_dsm(CustomScanState *node, ParallelContext *pcxt, void *coordinate);
static void scoot_init_worker(CustomScanState *node, shm_toc *toc, void *coordinate);

static const CustomPathMethods scoot_path_methods = {
	.CustomName = "ScootScan",
	.PlanCustomPath = scoot_plan_path,
};

static const CustomScanMethods scoot_scan_methods = {
	.CustomName = "ScootScan",
	.CreateCustomScanState = scoot_create_state,
};

static const CustomExecMethods scoot_exec_methods = {
	.CustomName = "ScootScan",
	.BeginCustomScan = scoot_begin,
	.ExecCustomScan = scoot_exec,
	.EndCustomScan = scoot_end,
	.ReScanCustomScan = scoot_rescan,
	.EstimateDSMCustomScan = scoot_estimate_dsm,
	.InitializeDSMCustomScan = scoot_init_dsm,
	.ReInitializeDSMCustomScan = scoot_reinit_dsm,
	.InitializeWorkerCustomScan = scoot_init_worker,
	.ExplainCustomScan = scoot_explain,
};

/* The columns (attribute numbers) the query reads from `rel`; NIL with *all set for all. */
static List *
needed_columns(RelOptInfo *rel, int natts, bool *all, bool *sysattrs)
{
	Bitmapset  *attrs = NULL;
	ListCell   *lc;
	List	   *cols = NIL;
	int			k;

	pull_varattnos((Node *) rel->reltarget->exprs, rel->relid, &attrs);
	foreach(lc, rel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		pull_varattnos((Node *) ri->clause, rel->relid, &attrs);
	}
	*all = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs);
	/* queries reading xmin/xmax/cmin/cmax are left to plain scans (ctid and tableoid work) */
	*sysattrs = bms_is_member(MinTransactionIdAttributeNumber - FirstLowInvalidHeapAttributeNumber, attrs) ||
		bms_is_member(MaxTransactionIdAttributeNumber - FirstLowInvalidHeapAttributeNumber, attrs) ||
		bms_is_member(MinCommandIdAttributeNumber - FirstLowInvalidHeapAttributeNumber, attrs) ||
		bms_is_member(MaxCommandIdAttributeNumber - FirstLowInvalidHeapAttributeNumber, attrs);
	k = -1;
	while ((k = bms_next_member(attrs, k)) >= 0)
	{
		int			attno = k + FirstLowInvalidHeapAttributeNumber;

		if (attno > 0 && attno <= natts)
			cols = lappend_int(cols, attno);
	}
	return cols;
}

/* The share of `rel`'s columns a query reads (for costs); *all: a whole-row reference. */
double
scoot_column_share(RelOptInfo *rel, int natts, bool *all)
{
	bool		sysattrs;
	List	   *cols = needed_columns(rel, natts, all, &sysattrs);

	if (*all || natts <= 0)
		return 1.0;
	return (double) Max(list_length(cols), 1) / natts;
}

/* costsize.c's get_parallel_divisor (static there) */
static double
parallel_divisor(int workers)
{
	double		divisor = workers;

	if (parallel_leader_participation)
	{
		double		leader = 1.0 - (0.3 * workers);

		if (leader > 0)
			divisor += leader;
	}
	return divisor;
}

/*
 * What a ScootScan costs per execution beyond a Seq Scan: its qual and projection compiled a
 * second time for its slot, its block filters parsed and its runtime filters encoded from their
 * Params, the block's filter order and batch set up. Measured in one backend, prepared
 * statements alternating: 8-12 us per execution on a table of 1 and of 10 rows (TPC-C's
 * warehouse and district, read by primary key in most of its transactions), which a Seq Scan
 * of such a table reads faster than the node starts. So a table whose Seq Scan costs below 10
 * (a page or two and some hundreds of rows) keeps the Seq Scan. Added to the total only:
 * add_path compares costs within 1%, cost_path's 0.99 makes the node's total the lower one, and
 * a higher startup cost would hand every scan costing below ~1,000 to the Seq Scan (fuzzily
 * equal totals, lower startup).
 */
#define SCOOT_SCAN_SETUP_COST 0.1

/*
 * A Seq Scan's cost, 1% below it so that the node is chosen consistently over a Seq Scan of the
 * same table (plus SCOOT_SCAN_SETUP_COST, which leaves the smallest tables to it). Not scaled
 * down by the share of columns read (it was until TPC-H showed why): the join strategies
 * PostgreSQL costs around a scan assume heap's scan costs, and a scan made to look several times
 * cheaper than heap's turned index nested loops into hash joins over whole tables that ran 3-5x
 * slower (TPC-H Q4, Q5, Q8). Plans stay heap's; the node makes them faster.
 */
static void
cost_path(PlannerInfo *root, RelOptInfo *rel, Path *path, int ncols, int natts, int workers)
{
	Cost		disk = seq_page_cost * rel->pages * 0.99;
	Cost		cpu = (cpu_tuple_cost + rel->baserestrictcost.per_tuple) * rel->tuples * 0.99;

	if (workers > 0)
	{
		double		d = parallel_divisor(workers);

		cpu /= d;
		path->rows = clamp_row_est(rel->rows / d);
	}
	else
		path->rows = rel->rows;
	path->startup_cost = rel->baserestrictcost.startup + path->pathtarget->cost.startup;
	/* it is a sequential scan: enable_seqscan = off applies to it too */
	if (!enable_seqscan)
		path->startup_cost += disable_cost;
	path->total_cost = path->startup_cost + cpu + disk
		+ path->pathtarget->cost.per_tuple * path->rows + SCOOT_SCAN_SETUP_COST;
}

/* btree strategy numbers 1..5 as operators, for EXPLAIN */
static const char *const strategy_op[] = {"", "<", "<=", "=", ">=", ">"};

/* the filters' strategy number for "<>": the negator of the btree equality */
#define SCOOT_STRATEGY_NE 12

/* Is `opno` the negator of `opfamily`'s equality of (ltype, rtype)? */
static bool
is_ne_operator(Oid opfamily, Oid ltype, Oid rtype, Oid opno)
{
	Oid			eq = get_opfamily_member(opfamily, ltype, rtype, BTEqualStrategyNumber);

	return OidIsValid(eq) && get_negator(eq) == opno;
}

/* A strategy number (1..5, or SCOOT_STRATEGY_NE) as an operator, for EXPLAIN. */
static const char *
strategy_name(int strategy)
{
	return strategy == SCOOT_STRATEGY_NE ? "<>" : strategy_op[strategy];
}

static char *
column_name(Relation r, Var *var)
{
	return (char *) quote_identifier(get_attname(RelationGetRelid(r), var->varattno, false));
}

/* The elements of a constant array (NULL elements flagged in *nulls). */
static void
const_array_elems(Const *c, Oid elemtype, Datum **elems, bool **nulls, int *n)
{
	int16		elmlen;
	bool		elmbyval;
	char		elmalign;

	get_typlenbyvalalign(elemtype, &elmlen, &elmbyval, &elmalign);
	deconstruct_array(DatumGetArrayTypeP(c->constvalue), elemtype, elmlen, elmbyval, elmalign,
					  elems, nulls, n);
}

/* Block filters' descriptions joined for EXPLAIN's "Scoot Block Filter" (NULL for none). */
char *
scoot_describe_filters(List *described)
{
	StringInfoData f;
	ListCell   *lc;

	if (described == NIL)
		return NULL;
	initStringInfo(&f);
	foreach(lc, described)
	{
		if (f.len > 0)
			appendStringInfoString(&f, " AND ");
		appendStringInfoString(&f, strVal(lfirst(lc)));
	}
	return f.data;
}

/*
 * The default B-tree operator family of a type (InvalidOid: none), from the type cache.
 * GetDefaultOpClass scans pg_opclass on every call, and a runtime filter is encoded on every
 * execution of its statement (a prepared OLTP statement's parameter): that scan was 3% of
 * TPC-C's backend time.
 */
/* Is `p` a ScootScan path (customunique.c)? */
bool
scoot_is_scan_path(Path *p)
{
	return p != NULL && IsA(p, CustomPath) && ((CustomPath *) p)->methods == &scoot_path_methods;
}

Oid
scoot_btree_opfamily(Oid typ)
{
	return lookup_type_cache(typ, TYPECACHE_BTREE_OPFAMILY)->btree_opf;
}

static bool
int_type(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID;
}

/* "integer column op integer constant" of different widths, from integer_ops' cross-type members */
static char *
int_cross_filter(OpExpr *op, Var *var, Const *c, bool commuted, char **describe, Relation r)
{
	Oid			opfamily = scoot_btree_opfamily(INT8OID);
	Oid			lt = commuted ? c->consttype : var->vartype,
				rt = commuted ? var->vartype : c->consttype;
	int64		v;
	int			strategy = 0,
				k;

	for (k = 1; k <= 5; k++)
		if (get_opfamily_member(opfamily, lt, rt, k) == op->opno)
			strategy = k;
	if (strategy == 0)
		return NULL;
	if (commuted)
		strategy = 6 - strategy;
	v = c->consttype == INT2OID ? DatumGetInt16(c->constvalue) :
		c->consttype == INT4OID ? DatumGetInt32(c->constvalue) : DatumGetInt64(c->constvalue);
	if (describe)
		*describe = psprintf("%s %s '" INT64_FORMAT "'",
						 column_name(r, var),
						 strategy_op[strategy], v);
	return psprintf("%d %d int " INT64_FORMAT, var->varattno, strategy, v);
}

/*
 * "date column op timestamp constant" (date '...' + interval '...' is a timestamp): the date d
 * compares as the timestamp d * USECS_PER_DAY, so the filter compares d with the constant's day,
 * rounded the way that keeps each comparison exact (equality only with a whole day).
 */
static char *
date_timestamp_filter(RelOptInfo *rel, OpExpr *op, Var *var, Const *c, bool commuted,
					  char **describe, Relation r)
{
	Oid			opfamily = scoot_btree_opfamily(DATEOID);
	Timestamp	ts = DatumGetTimestamp(c->constvalue);
	int64		fl,
				ce;
	int			strategy = 0,
				k;

	for (k = 1; k <= 5; k++)
		if (get_opfamily_member(opfamily, DATEOID, TIMESTAMPOID, k) == op->opno ||
			get_opfamily_member(opfamily, TIMESTAMPOID, DATEOID, k) == op->opno)
			strategy = k;
	if (strategy == 0 || TIMESTAMP_NOT_FINITE(ts))
		return NULL;
	if (commuted)
		strategy = 6 - strategy;
	fl = ts / USECS_PER_DAY;
	if (ts % USECS_PER_DAY != 0 && ts < 0)
		fl--;
	ce = fl + (ts % USECS_PER_DAY != 0 ? 1 : 0);
	if (strategy == 3 && fl != ce)
		return NULL;
	if (describe)
		*describe = psprintf("%s %s %s",
						 column_name(r, var),
						 strategy_op[strategy],
						 quote_literal_cstr(DatumGetCString(DirectFunctionCall1(timestamp_out, c->constvalue))));
	/* d*D < ts <=> d < ceil; d*D <= ts <=> d <= floor; >= ceil; > floor */
	return psprintf("%d %d int " INT64_FORMAT, var->varattno, strategy,
					(strategy == 1 || strategy == 4) ? ce : fl);
}

/*
 * Block filters (see also block_filter below): restriction clauses "column op constant" (either
 * side) with op one of the
 * column type's own btree comparisons, on int2/int4/int8, date, timestamp, timestamptz and
 * numeric columns. The scan evaluates them on each block's column values before copying any row
 * (a row failing one is never returned). A filter is exactly its clause (storage/filter.rs), so
 * the clause leaves the plan's qual (scoot_plan_path) and is evaluated only on rows of blocks
 * where some filter could not judge every row (scoot_next). Each is encoded as a
 * string "attno strategy type value" (value as an integer, or the numeric's text).
 */
/*
 * float4/float8 column op float4/float8 constant (float_ops, cross-type members included: they
 * compare as float8). The constant goes as the bits of its float8 value, so the block compares
 * exactly what PostgreSQL compares, NaN (above every number, equal to itself) and -0 = 0
 * included.
 */
static char *
float_filter(OpExpr *op, Var *var, Const *c, bool commuted, char **describe, Relation r)
{
	Oid			opfamily = scoot_btree_opfamily(var->vartype);
	int			strategy = 0,
				k;
	double		v;
	union
	{
		double		d;
		uint64		u;
	}			bits;

	if (!OidIsValid(opfamily))
		return NULL;
	for (k = 1; k <= 5; k++)
		if (get_opfamily_member(opfamily, commuted ? c->consttype : var->vartype,
								commuted ? var->vartype : c->consttype, k) == op->opno)
			strategy = k;
	if (strategy == 0 &&
		is_ne_operator(opfamily, commuted ? c->consttype : var->vartype,
					   commuted ? var->vartype : c->consttype, op->opno))
		strategy = SCOOT_STRATEGY_NE;
	if (strategy == 0)
		return NULL;
	if (commuted && strategy != SCOOT_STRATEGY_NE)
		strategy = 6 - strategy;
	v = c->consttype == FLOAT4OID ? (double) DatumGetFloat4(c->constvalue) : DatumGetFloat8(c->constvalue);
	bits.d = v;
	{
		Oid			out;
		bool		varlena;

		getTypeOutputInfo(c->consttype, &out, &varlena);
		if (describe)
			*describe = psprintf("%s %s %s", column_name(r, var), strategy_name(strategy),
							 quote_literal_cstr(OidOutputFunctionCall(out, c->constvalue)));
	}
	return psprintf("%d %d float %016llx", var->varattno, strategy, (unsigned long long) bits.u);
}

/*
 * "column op column" of one row: two columns of the same integer-like type (int2, int4, int8,
 * date, timestamp, timestamptz: compared as integers, infinities included) with one of the
 * type's own btree comparisons. Encoded "attno strategy col attno2".
 */
static char *
column_pair_filter(RelOptInfo *rel, OpExpr *op, Var *a, Var *b, char **describe, Relation r)
{
	Oid			typ = a->vartype,
				btree_opf;
	int			strategy = 0,
				k;

	if (a->varno != (int) rel->relid || b->varno != (int) rel->relid || a->varattno <= 0 ||
		b->varattno <= 0 || a->varlevelsup != 0 || b->varlevelsup != 0 || b->vartype != typ ||
		a->varattno == b->varattno)
		return NULL;
	if (!(int_type(typ) || typ == DATEOID || typ == TIMESTAMPOID || typ == TIMESTAMPTZOID))
		return NULL;
	btree_opf = scoot_btree_opfamily(typ);
	if (!OidIsValid(btree_opf))
		return NULL;
	for (k = 1; k <= 5; k++)
		if (get_opfamily_member(btree_opf, typ, typ, k) == op->opno)
			strategy = k;
	if (strategy == 0)
		return NULL;
	if (describe)
		*describe = psprintf("%s %s %s", column_name(r, a), strategy_op[strategy], column_name(r, b));
	return psprintf("%d %d col %d", a->varattno, strategy, b->varattno);
}

static char *
comparison_filter(RelOptInfo *rel, Expr *clause, char **describe, Relation r)
{
	OpExpr	   *op;
	Node	   *l,
			   *rt;
	Var		   *var;
	Const	   *c;
	Oid			opno,
				typ,
				opfamily;
	int			strategy = 0,
				k;
	bool		commuted = false;
	char	   *value;
	const char *tname;

	if (!IsA(clause, OpExpr) || list_length(((OpExpr *) clause)->args) != 2)
		return NULL;
	op = (OpExpr *) clause;
	l = strip_implicit_coercions(linitial(op->args));
	rt = strip_implicit_coercions(lsecond(op->args));
	if (IsA(l, Var) && IsA(rt, Var))
		return column_pair_filter(rel, op, (Var *) l, (Var *) rt, describe, r);
	if (IsA(l, Var) && IsA(rt, Const))
	{
		var = (Var *) l;
		c = (Const *) rt;
	}
	else if (IsA(l, Const) && IsA(rt, Var))
	{
		var = (Var *) rt;
		c = (Const *) l;
		commuted = true;
	}
	else
		return NULL;
	if (var->varno != (int) rel->relid || var->varattno <= 0 || var->varlevelsup != 0 || c->constisnull)
		return NULL;
	typ = var->vartype;
	if (typ == DATEOID && c->consttype == TIMESTAMPOID)
		return date_timestamp_filter(rel, op, var, c, commuted, describe, r);
	if ((typ == FLOAT4OID || typ == FLOAT8OID) &&
		(c->consttype == FLOAT4OID || c->consttype == FLOAT8OID))
		return float_filter(op, var, c, commuted, describe, r);
	if (c->consttype != typ)
	{
		/* integer column vs integer constant of another width (int48lt, int24eq, ...) */
		if (int_type(typ) && int_type(c->consttype))
			return int_cross_filter(op, var, c, commuted, describe, r);
		return NULL;
	}
	switch (typ)
	{
		case INT2OID: tname = "int"; break;
		case INT4OID: tname = "int"; break;
		case INT8OID: tname = "int"; break;
		case DATEOID: tname = "int"; break;
		case TIMESTAMPOID: tname = "int"; break;
		case TIMESTAMPTZOID: tname = "int"; break;
		case NUMERICOID: tname = "numeric"; break;
		default: return NULL;
	}
	opno = op->opno;
	opfamily = scoot_btree_opfamily(typ);
	if (!OidIsValid(opfamily))
		return NULL;
	for (k = 1; k <= 5; k++)
		if (get_opfamily_member(opfamily, typ, typ, k) == opno)
			strategy = k;
	if (strategy == 0 && is_ne_operator(opfamily, typ, typ, opno))
		strategy = SCOOT_STRATEGY_NE;
	if (strategy == 0)
		return NULL;
	if (commuted && strategy != SCOOT_STRATEGY_NE)	/* const op var: var (mirrored op) const */
		strategy = 6 - strategy;
	switch (typ)
	{
		case INT2OID: value = psprintf("%d", (int) DatumGetInt16(c->constvalue)); break;
		case INT4OID: value = psprintf("%d", DatumGetInt32(c->constvalue)); break;
		case INT8OID: value = psprintf(INT64_FORMAT, DatumGetInt64(c->constvalue)); break;
		case DATEOID:
			if (DATE_NOT_FINITE(DatumGetDateADT(c->constvalue)))
				return NULL;
			value = psprintf("%d", (int) DatumGetDateADT(c->constvalue));
			break;
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			if (TIMESTAMP_NOT_FINITE(DatumGetTimestamp(c->constvalue)))
				return NULL;
			value = psprintf(INT64_FORMAT, (int64) DatumGetTimestamp(c->constvalue));
			break;
		default:
			if (numeric_is_nan(DatumGetNumeric(c->constvalue)) ||
				numeric_is_inf(DatumGetNumeric(c->constvalue)))
				return NULL;
			value = DatumGetCString(DirectFunctionCall1(numeric_out, c->constvalue));
			{
				/*
				 * blocks hold numeric(p, s) as integers scaled by 10^s (unconstrained numeric:
				 * as varlena, never filtered); a constant with more significant decimals than s
				 * could not be compared exactly
				 */
				int32		typmod = var->vartypmod;
				const char *dot = strchr(value, '.');
				int			decimals = 0;

				if (typmod < (int32) VARHDRSZ)
					return NULL;
				if (dot)
				{
					decimals = strlen(dot + 1);
					while (decimals > 0 && dot[decimals] == '0')
						decimals--;
				}
				if (decimals > (((typmod - VARHDRSZ) & 0x7ff) ^ 1024) - 1024)
					return NULL;
			}
	}
	{
		Oid			out;
		bool		varlena;

		getTypeOutputInfo(typ, &out, &varlena);
		if (describe)
			*describe = psprintf("%s %s %s",
							 column_name(r, var),
							 strategy_name(strategy),
							 quote_literal_cstr(OidOutputFunctionCall(out, c->constvalue)));
	}
	return psprintf("%d %d %s %s", var->varattno, strategy, tname, value);
}

/* A filterable type's short name in the encoding ("int" or "numeric"), or NULL. */
static const char *
filter_type(Oid typ)
{
	switch (typ)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return "int";
		case NUMERICOID:
			return "numeric";
		default:
			return NULL;
	}
}

/* A non-null constant of a filterable type as the encoding writes it; NULL if it cannot be one. */
static char *
filter_value(Oid typ, Datum v)
{
	switch (typ)
	{
		case INT2OID: return psprintf("%d", (int) DatumGetInt16(v));
		case INT4OID: return psprintf("%d", DatumGetInt32(v));
		case INT8OID: return psprintf(INT64_FORMAT, DatumGetInt64(v));
		case DATEOID:
			return DATE_NOT_FINITE(DatumGetDateADT(v)) ? NULL : psprintf("%d", (int) DatumGetDateADT(v));
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return TIMESTAMP_NOT_FINITE(DatumGetTimestamp(v)) ? NULL :
				psprintf(INT64_FORMAT, (int64) DatumGetTimestamp(v));
		case NUMERICOID:
			if (numeric_is_nan(DatumGetNumeric(v)) || numeric_is_inf(DatumGetNumeric(v)))
				return NULL;
			return DatumGetCString(DirectFunctionCall1(numeric_out, v));
		default:
			return NULL;
	}
}

/*
 * Character filters, on char(n), varchar(n) and text columns (stored in n-byte cells or as
 * variable-length values; a compressed or toasted value is never judged by the filter):
 * "column = constant", "column IN (constants)" and "column LIKE 'prefix%'" under a
 * deterministic collation (byte equality is equality then). The type in the encoding says how
 * to compare: "bpchar" ignores trailing spaces (bpchareq), "bytes" does not (texteq); values
 * are hex.
 */
static const char *
char_filter_type(Oid typ)
{
	return typ == BPCHAROID ? "bpchar" : (typ == VARCHAROID || typ == TEXTOID) ? "bytes" : NULL;
}

/* The type of the constants a character column is compared with (varchar uses text's). */
static Oid
char_const_type(Oid typ)
{
	return typ == BPCHAROID ? BPCHAROID : TEXTOID;
}

static char *
hex_of(const char *p, int len, bool trim_spaces)
{
	StringInfoData h;
	int			i;

	if (trim_spaces)
		while (len > 0 && p[len - 1] == ' ')
			len--;
	initStringInfo(&h);
	for (i = 0; i < len; i++)
		appendStringInfo(&h, "%02x", (unsigned char) p[i]);
	if (h.len == 0)
		appendStringInfoString(&h, "~");	/* the empty string */
	return h.data;
}

/* The btree equality of a character column's type (varchar uses text's operators). */
static Oid
char_eq_operator(Oid typ)
{
	Oid			optype = char_const_type(typ);
	Oid			btree_opf = scoot_btree_opfamily(optype);

	if (!OidIsValid(btree_opf))
		return InvalidOid;
	return get_opfamily_member(btree_opf, optype, optype, BTEqualStrategyNumber);
}

static char *
char_filter(RelOptInfo *rel, Expr *clause, char **describe, Relation r)
{
	OpExpr	   *op;
	Node	   *l,
			   *rt;
	Var		   *var;
	Const	   *c;
	const char *tname;
	text	   *t;

	bool		commuted = false;

	if (!IsA(clause, OpExpr) || list_length(((OpExpr *) clause)->args) != 2)
		return NULL;
	op = (OpExpr *) clause;
	l = strip_implicit_coercions(linitial(op->args));
	rt = strip_implicit_coercions(lsecond(op->args));
	if (IsA(l, RelabelType))
		l = (Node *) ((RelabelType *) l)->arg;
	if (IsA(rt, RelabelType))
		rt = (Node *) ((RelabelType *) rt)->arg;
	if (IsA(l, Const) && IsA(rt, Var))
	{
		/* constant op column: the same comparison seen from the column */
		Node	   *tmp = l;

		l = rt;
		rt = tmp;
		commuted = true;
	}
	if (!IsA(l, Var) || !IsA(rt, Const))
		return NULL;
	var = (Var *) l;
	c = (Const *) rt;
	if (var->varno != (int) rel->relid || var->varattno <= 0 || var->varlevelsup != 0 || c->constisnull)
		return NULL;
	tname = char_filter_type(var->vartype);
	if (tname == NULL ||
		!(c->consttype == var->vartype || c->consttype == TEXTOID || c->consttype == BPCHAROID))
		return NULL;
	if (OidIsValid(op->inputcollid) && !get_collation_isdeterministic(op->inputcollid))
		return NULL;
	set_opfuncid(op);
	t = DatumGetTextPP(c->constvalue);
	if (c->consttype == char_const_type(var->vartype) && OidIsValid(op->inputcollid) &&
		lc_collate_is_c(op->inputcollid))
	{
		/*
		 * <, <=, >, >= under the C collation: byte order (bpchar without its trailing spaces, as
		 * bpcharcmp compares), which the filters and zone maps apply; other collations order
		 * differently and are left to PostgreSQL
		 */
		Oid			optype = char_const_type(var->vartype);
		Oid			btree_opf = scoot_btree_opfamily(optype);
		int			st = OidIsValid(btree_opf) ?
			get_op_opfamily_strategy(op->opno, btree_opf) : 0;
		static const char *const names[] = {"", "<", "<=", "=", ">=", ">"};

		if (st >= 1 && st <= 5 && st != BTEqualStrategyNumber)
		{
			if (commuted)
				st = 6 - st;
			if (describe)
				*describe = psprintf("%s %s %s", column_name(r, var), names[st],
								 quote_literal_cstr(text_to_cstring(t)));
			return psprintf("%d %d %s %s", var->varattno, st, tname,
							hex_of(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), var->vartype == BPCHAROID));
		}
	}
	if (commuted)
		return NULL;
	if (op->opno == char_eq_operator(var->vartype) && c->consttype == char_const_type(var->vartype))
	{
		if (describe)
			*describe = psprintf("%s = %s", column_name(r, var), quote_literal_cstr(text_to_cstring(t)));
		return psprintf("%d 3 %s %s", var->varattno, tname,
						hex_of(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), var->vartype == BPCHAROID));
	}
	if (OidIsValid(char_eq_operator(var->vartype)) &&
		op->opno == get_negator(char_eq_operator(var->vartype)) &&
		c->consttype == char_const_type(var->vartype))
	{
		if (describe)
			*describe = psprintf("%s <> %s", column_name(r, var), quote_literal_cstr(text_to_cstring(t)));
		return psprintf("%d %d %s %s", var->varattno, SCOOT_STRATEGY_NE, tname,
						hex_of(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), var->vartype == BPCHAROID));
	}
	if (((op->opfuncid == F_BPCHARLIKE || op->opfuncid == F_BPCHARNLIKE) && var->vartype == BPCHAROID) ||
		((op->opfuncid == F_TEXTLIKE || op->opfuncid == F_TEXTNLIKE) &&
		 (var->vartype == VARCHAROID || var->vartype == TEXTOID)))
	{
		/*
		 * [NOT] LIKE with no wildcard but '%' and no escape: the value's bytes (char(n) with its
		 * padding, as bpcharlike sees it) hold the pattern's literal pieces in order. 'prefix%'
		 * is its own filter (zone maps can skip on it); other patterns look for pieces inside
		 * the value, which byte comparison gets right in UTF-8 and single-byte encodings only
		 * (in others a piece could match across a character boundary).
		 */
		const char *p = VARDATA_ANY(t);
		int			len = VARSIZE_ANY_EXHDR(t),
					i,
					pcts = 0;
		bool		neg = op->opfuncid == F_BPCHARNLIKE || op->opfuncid == F_TEXTNLIKE;

		for (i = 0; i < len; i++)
		{
			if (p[i] == '_' || p[i] == '\\')
				return NULL;
			if (p[i] == '%')
				pcts++;
		}
		if (describe)
			*describe = psprintf("%s %sLIKE %s", column_name(r, var), neg ? "NOT " : "",
							 quote_literal_cstr(text_to_cstring(t)));
		if (!neg && len >= 2 && pcts == 1 && p[len - 1] == '%')
			return psprintf("%d 9 bytes %s", var->varattno, hex_of(p, len - 1, false));
		if (GetDatabaseEncoding() != PG_UTF8 && pg_database_encoding_max_length() != 1)
			return NULL;
		return psprintf("%d %d like %s", var->varattno, neg ? 11 : 10, hex_of(p, len, false));
	}
	return NULL;
}

/* "character column IN (constants)" with the type's equality (see char_filter) */
static char *
char_in_filter(ScalarArrayOpExpr *sa, Var *var, Const *c, char **describe, Relation r)
{
	Oid			elemtype = get_element_type(c->consttype);
	Datum	   *elems;
	bool	   *nulls;
	int			n,
				i;
	StringInfoData vals,
				desc;

	if (sa->opno != char_eq_operator(var->vartype) || elemtype != char_const_type(var->vartype))
		return NULL;
	if (OidIsValid(sa->inputcollid) && !get_collation_isdeterministic(sa->inputcollid))
		return NULL;
	const_array_elems(c, elemtype, &elems, &nulls, &n);
	if (n > 1000)
		return NULL;
	initStringInfo(&vals);
	initStringInfo(&desc);
	for (i = 0; i < n; i++)
	{
		text	   *t;

		if (nulls[i])
			continue;
		t = DatumGetTextPP(elems[i]);
		appendStringInfo(&vals, "%s%s", vals.len > 0 ? "," : "",
						 hex_of(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), var->vartype == BPCHAROID));
		appendStringInfo(&desc, "%s%s", desc.len > 0 ? ", " : "", quote_literal_cstr(text_to_cstring(t)));
	}
	if (describe)
		*describe = psprintf("%s IN (%s)", column_name(r, var), desc.data);
	return psprintf("%d 8 %s %s", var->varattno, char_filter_type(var->vartype),
					vals.len > 0 ? vals.data : "-");
}

/*
 * More block filters: "column IS [NOT] NULL" (any column: strategies 6 and 7) and
 * "column = ANY (constant array)" / "column IN (constants)" with the type's btree equality
 * (strategy 8, value a comma-separated list; NULL elements match nothing and are left out, an
 * element the column's scale cannot hold exactly cannot equal a stored value either).
 * `describe` (may be NULL: not wanted) receives the filter as EXPLAIN shows it.
 */
static char *
leaf_filter(RelOptInfo *rel, Expr *clause, char **describe, Relation r)
{
	if (IsA(clause, NullTest))
	{
		NullTest   *nt = (NullTest *) clause;
		Var		   *var = (Var *) nt->arg;

		if (nt->argisrow || !IsA(var, Var) || var->varno != (int) rel->relid ||
			var->varattno <= 0 || var->varlevelsup != 0)
			return NULL;
		if (describe)
			*describe = psprintf("%s IS %sNULL", column_name(r, var),
							 nt->nulltesttype == IS_NULL ? "" : "NOT ");
		return psprintf("%d %d null -", var->varattno, nt->nulltesttype == IS_NULL ? 6 : 7);
	}
	if (IsA(clause, ScalarArrayOpExpr))
	{
		ScalarArrayOpExpr *sa = (ScalarArrayOpExpr *) clause;
		Node	   *l = strip_implicit_coercions(linitial(sa->args));
		Node	   *a = strip_implicit_coercions(lsecond(sa->args));
		Var		   *var;

		if (IsA(l, RelabelType))
			l = (Node *) ((RelabelType *) l)->arg;
		var = (Var *) l;
		Const	   *c = (Const *) a;
		Oid			typ,
					btree_opf;
		const char *tname;
		Datum	   *elems;
		bool	   *nulls;
		int			n,
					i;
		StringInfoData vals,
					desc;
		Oid			out;
		bool		varlena;

		if (!sa->useOr || list_length(sa->args) != 2 || !IsA(l, Var) || !IsA(a, Const) ||
			c->constisnull || var->varno != (int) rel->relid || var->varattno <= 0 ||
			var->varlevelsup != 0)
			return NULL;
		typ = var->vartype;
		if (char_filter_type(typ) != NULL)
			return char_in_filter(sa, var, c, describe, r);
		tname = filter_type(typ);
		if (tname == NULL || get_element_type(c->consttype) != typ)
			return NULL;
		btree_opf = scoot_btree_opfamily(typ);
		if (!OidIsValid(btree_opf) ||
			get_opfamily_member(btree_opf, typ, typ, BTEqualStrategyNumber) != sa->opno)
			return NULL;
		if (typ == NUMERICOID && var->vartypmod < (int32) VARHDRSZ)
			return NULL;
		const_array_elems(c, typ, &elems, &nulls, &n);
		if (n > 1000)
			return NULL;
		getTypeOutputInfo(typ, &out, &varlena);
		initStringInfo(&vals);
		initStringInfo(&desc);
		for (i = 0; i < n; i++)
		{
			char	   *v;

			if (nulls[i])
				continue;
			v = filter_value(typ, elems[i]);
			if (v == NULL)
				return NULL;	/* NaN, infinity: leave the clause to PostgreSQL */
			appendStringInfo(&vals, "%s%s", vals.len > 0 ? "," : "", v);
			appendStringInfo(&desc, "%s%s", desc.len > 0 ? ", " : "",
							 quote_literal_cstr(OidOutputFunctionCall(out, elems[i])));
		}
		if (describe)
			*describe = psprintf("%s IN (%s)", column_name(r, var), desc.data);
		return psprintf("%d 8 %s %s", var->varattno, tname, vals.len > 0 ? vals.data : "-");
	}
	{
		char	   *f = char_filter(rel, clause, describe, r);

		if (f)
			return f;
	}
	return comparison_filter(rel, clause, describe, r);
}

/* the filters' strategy number for an OR of block filters (storage/filter.rs) */
#define SCOOT_STRATEGY_OR 13
/* at most this many block filters in one OR: each row may test them all */
#define SCOOT_OR_MAX_LEAVES 32

/*
 * An OR of block filters: "a OR b OR ...", each arm one block filter or an AND of them (a
 * BETWEEN, say; no OR nested deeper), on any columns of the table. PostgreSQL keeps such a
 * clause whole (and derives one per table from an OR of ANDs spanning a join: CH Q19, TPC-H
 * Q19), so without this the scan would hand every row to the qual. Encoded as "attno 13 or
 * arms" (attno: the first filter's), arms separated by '|', the filters of an arm by '&' (no
 * filter's encoding holds either character). A row passes when every filter of some arm does:
 * the clause is true exactly then (NULL arms are not true), and the filters of an arm that could
 * not judge a value (a compressed one) pass it, so the block is then not exact and PostgreSQL
 * evaluates the clause.
 */
static char *
or_filter(RelOptInfo *rel, BoolExpr *or, char **describe, Relation r)
{
	StringInfoData enc,
				desc;
	ListCell   *lc;
	int			leaves = 0,
				first = 0;

	initStringInfo(&enc);
	initStringInfo(&desc);
	foreach(lc, or->args)
	{
		Expr	   *arm = (Expr *) lfirst(lc);
		List	   *ands = is_andclause(arm) ? ((BoolExpr *) arm)->args : list_make1(arm);
		ListCell   *lc2;
		StringInfoData armdesc;
		int			n = 0;

		initStringInfo(&armdesc);
		if (enc.len > 0)
		{
			appendStringInfoChar(&enc, '|');
			appendStringInfoString(&desc, " OR ");
		}
		foreach(lc2, ands)
		{
			char	   *d = NULL;
			char	   *f;

			if (is_orclause(lfirst(lc2)) || is_andclause(lfirst(lc2)) ||
				++leaves > SCOOT_OR_MAX_LEAVES)
				return NULL;
			f = leaf_filter(rel, (Expr *) lfirst(lc2), describe ? &d : NULL, r);
			if (f == NULL)
				return NULL;
			if (first == 0)
				first = atoi(f);
			if (n++ > 0)
			{
				appendStringInfoChar(&enc, '&');
				appendStringInfoString(&armdesc, " AND ");
			}
			appendStringInfoString(&enc, f);
			if (describe)
				appendStringInfoString(&armdesc, d);
		}
		if (n == 0)
			return NULL;
		if (describe)
			appendStringInfo(&desc, n > 1 ? "(%s)" : "%s", armdesc.data);
	}
	if (leaves == 0 || first <= 0)
		return NULL;
	if (describe)
		*describe = psprintf("(%s)", desc.data);
	return psprintf("%d %d or %s", first, SCOOT_STRATEGY_OR, enc.data);
}

/*
 * A restriction clause as a block filter (see above; ORs: or_filter), or NULL. `describe` (may
 * be NULL: not wanted) receives the filter as EXPLAIN shows it.
 */
char *
scoot_block_filter(RelOptInfo *rel, Expr *clause, char **describe, Relation r)
{
	if (is_orclause(clause))
		return or_filter(rel, (BoolExpr *) clause, describe, r);
	return leaf_filter(rel, clause, describe, r);
}

/*
 * Runtime filters: a restriction clause "column op expression" whose expression is a Param
 * (PARAM_EXEC: a correlated subquery's outer value, an initplan's result, a nested loop's outer
 * value; PARAM_EXTERN: a prepared statement's parameter in a generic plan), through implicit
 * coercions at most, cannot be a block filter at plan time: its value is known only when the
 * scan starts. The node evaluates the expression at every (re)scan, encodes "column op value"
 * exactly as scoot_block_filter encodes a constant (same types, same exactness rules), and
 * adds it to the scan's block filters, with zone maps. The clause also stays in the plan's qual,
 * so a value that cannot be encoded (NULL, NaN, a numeric finer than the column's scale, ...)
 * only loses the filtering, never a row. A correlated subquery scanning a table once per outer
 * row then compares column batches instead of handing every row to PostgreSQL's qual (go-tpc's
 * TPC-C consistency check: 30,000 scans of history).
 *
 * Evaluating at scan start is what PostgreSQL's index scans do with such keys
 * (ExecIndexEvalRuntimeKeys): an initplan runs even if the table turns out to be empty.
 */
static bool
runtime_filter_type(Oid t)
{
	/* the types scoot_block_filter encodes constants of */
	return filter_type(t) != NULL || char_filter_type(t) != NULL || t == FLOAT4OID ||
		t == FLOAT8OID;
}

/* A runtime filter's column side (argument 1 - side), without implicit casts, as a node. */
static Node *
runtime_filter_var(OpExpr *op, int side)
{
	Node	   *v = strip_implicit_coercions(list_nth(op->args, 1 - side));

	if (IsA(v, RelabelType))
		v = (Node *) ((RelabelType *) v)->arg;
	return v;
}

/* The argument (0 or 1) of `clause` that makes it a runtime filter of `rel`, or -1. */
static int
runtime_filter_side(RelOptInfo *rel, Expr *clause)
{
	OpExpr	   *op;
	int			side;

	if (!IsA(clause, OpExpr) || list_length(((OpExpr *) clause)->args) != 2)
		return -1;
	op = (OpExpr *) clause;
	for (side = 0; side < 2; side++)
	{
		Node	   *v = runtime_filter_var(op, side);
		Node	   *a = list_nth(op->args, side);
		Node	   *p = strip_implicit_coercions(a);

		if (!IsA(v, Var) || !IsA(p, Param))
			continue;
		if (((Var *) v)->varno != (int) rel->relid || ((Var *) v)->varattno <= 0 ||
			((Var *) v)->varlevelsup != 0)
			continue;
		if (((Param *) p)->paramkind != PARAM_EXEC && ((Param *) p)->paramkind != PARAM_EXTERN)
			continue;
		if (!runtime_filter_type(exprType(a)) || !runtime_filter_type(((Var *) v)->vartype) ||
			contain_volatile_functions(a))
			continue;
		return side;
	}
	return -1;
}

static CustomPath *
make_path(PlannerInfo *root, RelOptInfo *rel, List *cols, bool all, int natts, int workers,
		  List *filters, List *described)
{
	CustomPath *cp = makeNode(CustomPath);

	cp->path.pathtype = T_CustomScan;
	cp->path.parent = rel;
	cp->path.pathtarget = rel->reltarget;
	cp->path.param_info = get_baserel_parampathinfo(root, rel, rel->lateral_relids);
	cp->path.parallel_aware = workers > 0;
	cp->path.parallel_safe = rel->consider_parallel;
	cp->path.parallel_workers = workers;
	cp->path.pathkeys = NIL;
	/* cursors may move backwards (not in parallel: nor may a Parallel Seq Scan) */
	cp->flags = workers > 0 ? 0 : CUSTOMPATH_SUPPORT_BACKWARD_SCAN;
	/*
	 * custom_private: (all columns?, column list, block filters, their descriptions); a block
	 * filter is its encoding (a String) or a runtime filter's clause (an OpExpr)
	 */
	cp->custom_private = list_make4(makeBoolean(all), cols, filters, described);
	cp->methods = &scoot_path_methods;
	cost_path(root, rel, &cp->path, all ? natts : list_length(cols), natts, workers);
	return cp;
}

/* list_sort order of add_path's lists */
static int
compare_total_cost(const ListCell *a, const ListCell *b)
{
	return compare_path_costs(lfirst(a), lfirst(b), TOTAL_COST);
}

/*
 * Index fetches cost more on scoot than PostgreSQL's index costing assumes.
 *
 * cost_index prices a fetched heap row like a scanned one (cpu_tuple_cost plus its share of a
 * page, usually cached). A scoot row fetched by TID costs several times that: its columns lie
 * in as many places of its block (one cache miss each on a block not just read) and its version
 * chain is walked. A scanned row costs a fraction: a ScootScan reads column runs a block at a
 * time. So nested loops that fetch many rows through an index looked cheaper than a hash join
 * over a scan, and ran slower: CH Q12 probes order_line's primary key for every order (264k
 * rows, 290 ms); its hash join over a ScootScan of order_line takes 100 ms. Each parameterized
 * index path of a scoot relation (the inner side of a nested loop; index-only ones too, which skip
 * the rows of all-visible blocks but are costed as if they did not: see relation_estimate_size in
 * src/am/ddl.rs) gets scoot.index_fetch_cost per row it fetches per loop
 * (its index selectivity times the relation's rows, shared among a parallel path's workers). A
 * point lookup fetches a row or a few: its plans do not change.
 *
 * Unparameterized index paths keep PostgreSQL's costs: they compete with scans and with each
 * other for sorted input, and raising them changed which side of a merge join PostgreSQL 15
 * sorts, where a cross-type operator without a commutator then fails in createplan.c
 * ("could not find commutator", the core suite's equivclass test).
 */
static void
cost_index_fetches(RelOptInfo *rel, List *paths)
{
	double		per = scoot_index_fetch_cost();
	bool		raised = false;
	ListCell   *lc;

	if (per <= 0)
		return;
	foreach(lc, paths)
	{
		Path	   *p = (Path *) lfirst(lc);
		IndexPath  *ip;
		double		fetched;

		if (!IsA(p, IndexPath) || p->param_info == NULL)
			continue;
		ip = (IndexPath *) p;
		fetched = clamp_row_est(ip->indexselectivity * rel->tuples);
		if (p->parallel_workers > 0)
			fetched /= p->parallel_workers + 1;
		p->total_cost += fetched * per;
		raised = true;
	}
	/* add_path keeps its lists in total-cost order: restore that */
	if (raised)
		list_sort(paths, compare_total_cost);
}

/*
 * Does index path `ip` walk its whole B-tree on every loop? PostgreSQL 15 has no skip scan: with
 * no condition on the index's first column a B-tree scan reads every entry, whatever it asks of
 * the others.
 */
static bool
walks_whole_index(IndexPath *ip)
{
	ListCell   *lc;

	if (ip->indexinfo->relam != BTREE_AM_OID || ip->indexinfo->nkeycolumns < 2)
		return false;
	foreach(lc, ip->indexclauses)
		if (lfirst_node(IndexClause, lc)->indexcol == 0)
			return false;
	return true;
}

/*
 * No nested loop over a scoot table walks a whole B-tree per outer row. A parameterized index
 * path whose conditions leave out the index's first column (a join on the second column of a
 * two-column primary key: CH Q2 joins stock's (s_w_id, s_i_id) key on s_i_id) reads every index
 * entry on every loop. PostgreSQL prices that walk, but a nested loop's outer row estimate is
 * often far too low (CH Q2: 1-2 estimated, 339 real), and then the walk runs hundreds of times:
 * Q2 took 400-760 ms on scoot and on heap with that plan, 35-120 ms without it. A ScootScan reads
 * the same column faster than the walk and its fetches even for one outer row, so such paths are
 * dropped for scoot relations (bitmap scans over one such index too); the scans, hash joins and
 * the index paths that bound the first column remain.
 */
static void
drop_whole_index_loops(RelOptInfo *rel)
{
	ListCell   *lc;

	foreach(lc, rel->pathlist)
	{
		Path	   *p = (Path *) lfirst(lc);

		if (p->param_info == NULL)
			continue;
		if ((IsA(p, IndexPath) && walks_whole_index((IndexPath *) p)) ||
			(IsA(p, BitmapHeapPath) && IsA(((BitmapHeapPath *) p)->bitmapqual, IndexPath) &&
			 walks_whole_index((IndexPath *) ((BitmapHeapPath *) p)->bitmapqual)))
			rel->pathlist = foreach_delete_current(rel->pathlist, lc);
	}
}

static void
scoot_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	Relation	r;
	bool		is_scoot;
	int			natts;
	List	   *cols;
	bool		all;
	bool		sysattrs;
	List	   *filters = NIL;
	List	   *described = NIL;
	ListCell   *lc;

	if (prev_set_rel_pathlist)
		prev_set_rel_pathlist(root, rel, rti, rte);
	if (!scoot_custom_scan_enabled())
		return;
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION || rte->inh ||
		rte->tablesample != NULL)
		return;
	if (rel->reloptkind != RELOPT_BASEREL && rel->reloptkind != RELOPT_OTHER_MEMBER_REL)
		return;
	/* read-only statements only: scanned rows never feed a write or a row lock */
	if (root->parse->commandType != CMD_SELECT || root->parse->rowMarks != NIL)
		return;
	r = table_open(rte->relid, NoLock);
	is_scoot = scoot_relation_is_scoot(r);
	natts = RelationGetDescr(r)->natts;
	table_close(r, NoLock);
	if (!is_scoot)
		return;

	drop_whole_index_loops(rel);
	cost_index_fetches(rel, rel->pathlist);
	cost_index_fetches(rel, rel->partial_pathlist);

	cols = needed_columns(rel, natts, &all, &sysattrs);
	if (sysattrs)
		return;
	r = table_open(rte->relid, NoLock);
	foreach(lc, rel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		char	   *d = NULL;
		char	   *f;

		if (ri->pseudoconstant)
			continue;
		f = scoot_block_filter(rel, ri->clause, &d, r);
		if (f)
		{
			filters = lappend(filters, makeString(f));
			described = lappend(described, makeString(d));
		}
		else if (runtime_filter_side(rel, ri->clause) >= 0)
			filters = lappend(filters, copyObject(ri->clause));	/* a runtime filter */
	}
	add_path(rel, (Path *) make_path(root, rel, cols, all, natts, 0, filters, described));
	if (rel->consider_parallel && rel->lateral_relids == NULL)
	{
		int			workers = compute_parallel_worker(rel, rel->pages, -1,
													  max_parallel_workers_per_gather);

		if (workers > 0)
			add_partial_path(rel, (Path *) make_path(root, rel, cols, all, natts, workers,
													 filters, described));
	}
	/* eager aggregation below the joins (custompreagg.c) may replace these paths */
	scoot_preagg_paths(root, rel, rte, r);
	table_close(r, NoLock);
}

static Plan *
scoot_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
				List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cs = makeNode(CustomScan);
	List	   *quals = NIL,
			   *pushed = NIL;
	ListCell   *lc;
	Relation	r = table_open(planner_rt_fetch(rel->relid, root)->relid, NoLock);

	/*
	 * The restriction clauses that became block filters (the same test as in
	 * scoot_set_rel_pathlist) go to custom_exprs: the scan evaluates them only on rows of blocks
	 * where a filter could not decide every row itself (a compressed value, a column added
	 * later, a block storing the column in another form); the rest stay the plan's qual.
	 */
	foreach(lc, clauses)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		char	   *d = NULL;

		if (ri->pseudoconstant)
			continue;
		if (list_member_ptr(rel->baserestrictinfo, ri) &&
			scoot_block_filter(rel, ri->clause, &d, r) != NULL)
			pushed = lappend(pushed, ri->clause);
		else
			quals = lappend(quals, ri->clause);
	}
	table_close(r, NoLock);

	cs->methods = &scoot_scan_methods;
	cs->scan.plan.targetlist = tlist;
	cs->scan.plan.qual = quals;
	cs->custom_exprs = pushed;
	cs->scan.scanrelid = rel->relid;
	cs->flags = best_path->flags;
	cs->custom_private = best_path->custom_private;
	return &cs->scan.plan;
}

static Node *
scoot_create_state(CustomScan *cscan)
{
	ScootScanState *s = (ScootScanState *) newNode(sizeof(ScootScanState), T_CustomScanState);

	s->css.methods = &scoot_exec_methods;
	return (Node *) s;
}

static void
scoot_begin(CustomScanState *node, EState *estate, int eflags)
{
	ScootScanState *s = (ScootScanState *) node;
	CustomScan *cs = (CustomScan *) node->ss.ps.plan;
	Relation	rel = node->ss.ss_currentRelation;
	bool		all = boolVal(linitial(cs->custom_private));
	List	   *cols = (List *) lsecond(cs->custom_private);
	ListCell   *lc;

	s->natts = RelationGetDescr(rel)->natts;
	s->mask = palloc0(sizeof(bool) * Max(s->natts, 1));
	foreach(lc, cols)
	{
		int			attno = lfirst_int(lc);

		if (attno > 0 && attno <= s->natts)
			s->mask[attno - 1] = true;
	}
	if (all)
		memset(s->mask, 1, sizeof(bool) * s->natts);

	/*
	 * The scan slot: scoot's own slot type in place of the virtual slot ExecInitCustomScan
	 * made. It points at a row of the scan's current block batch and is deformed only as far
	 * as someone asks, so a parent that reads it unprojected (a hash join probing with its
	 * key, say) and drops the row never pays for the row's other values (numerics are built
	 * per row, on demand: storage/batch.rs). The qual and projection were compiled for a
	 * virtual slot (which reads values without asking): compile them again for this one.
	 */
	{
		TupleTableSlot *slot = table_slot_create(rel, &estate->es_tupleTable);

		node->ss.ss_ScanTupleSlot = slot;
		node->ss.ps.scanops = slot->tts_ops;
		node->ss.ps.scanopsfixed = true;
		node->ss.ps.scanopsset = true;
		ExecAssignScanProjectionInfoWithVarno(&node->ss, cs->scan.scanrelid);
		node->ss.ps.qual = ExecInitQual(cs->scan.plan.qual, (PlanState *) node);
		s->recheck = cs->custom_exprs != NIL ?
			ExecInitQual(cs->custom_exprs, (PlanState *) node) : NULL;
	}

	/* runtime filters (see runtime_filter_side): their Param expressions, ready to evaluate */
	{
		List	   *rt = NIL;
		int			i = 0;

		foreach(lc, (List *) lthird(cs->custom_private))
			if (IsA(lfirst(lc), OpExpr))
				rt = lappend(rt, lfirst(lc));
		s->nruntime = list_length(rt);
		if (s->nruntime > 0)
		{
			s->rt_clause = palloc(sizeof(OpExpr *) * s->nruntime);
			s->rt_side = palloc(sizeof(int) * s->nruntime);
			s->rt_expr = palloc(sizeof(ExprState *) * s->nruntime);
			s->rt_cxt = AllocSetContextCreate(estate->es_query_cxt, "scoot runtime filters",
											  ALLOCSET_SMALL_SIZES);
			foreach(lc, rt)
			{
				OpExpr	   *op = lfirst_node(OpExpr, lc);

				s->rt_clause[i] = op;
				/* the Param side: the one whose other argument is the Var */
				s->rt_side[i] = IsA(runtime_filter_var(op, 1), Var) ? 1 : 0;
				s->rt_expr[i] = ExecInitExpr((Expr *) list_nth(op->args, s->rt_side[i]),
											 (PlanState *) node);
				i++;
			}
		}
	}

	/*
	 * A column only the pushed clauses read (o_comment of NOT LIKE '%special%requests%', say) is
	 * not copied on entering a block: only up to the last column the target list or the rest of
	 * the qual reads. A recheck on a block the filters did not decide asks for it, and the
	 * batch copies it then.
	 */
	s->eager = -1;
	if (cs->custom_exprs != NIL)
	{
		Bitmapset  *used = NULL;
		int			k = -1;

		/*
		 * a physical target list (physical_tlists) names every column: the parent reads only
		 * up to the column physical_tlist_child noted
		 */
		if (list_length(cs->custom_private) > 4)
		{
			if (intVal(list_nth(cs->custom_private, 4)) > 0)
				used = bms_add_member(used, intVal(list_nth(cs->custom_private, 4)) -
									  FirstLowInvalidHeapAttributeNumber);
		}
		else
			pull_varattnos((Node *) cs->scan.plan.targetlist, cs->scan.scanrelid, &used);
		pull_varattnos((Node *) cs->scan.plan.qual, cs->scan.scanrelid, &used);
		s->eager = 0;
		while ((k = bms_next_member(used, k)) >= 0)
		{
			int			attno = k + FirstLowInvalidHeapAttributeNumber;

			if (attno == 0)
				s->eager = s->natts;	/* a whole-row reference */
			else if (attno > s->eager)
				s->eager = attno;
		}
	}
}

/*
 * A runtime filter's block filter encoding for the value `v` of its expression (see
 * runtime_filter_side), or NULL when there is none: the clause with the value as a constant
 * goes through scoot_block_filter, so it is encoded exactly as a planned constant would be.
 */
static char *
runtime_filter_encode(ScootScanState *s, int i, Datum v, bool isnull)
{
	OpExpr	   *op = s->rt_clause[i];
	OpExpr		with = *op;
	Node	   *a = list_nth(op->args, s->rt_side[i]);
	Node	   *var = runtime_filter_var(op, s->rt_side[i]);
	Oid			t = exprType(a);
	int16		len;
	bool		byval;
	Const	   *c;
	RelOptInfo	rel;

	if (isnull)
		return NULL;
	get_typlenbyval(t, &len, &byval);
	c = makeConst(t, exprTypmod(a), exprCollation(a), len, v, false, byval);
	with.args = s->rt_side[i] == 1 ? list_make2(linitial(op->args), c) :
		list_make2(c, lsecond(op->args));
	/* scoot_block_filter checks the column belongs to `rel` (as planned) and reads nothing else */
	memset(&rel, 0, sizeof(rel));
	rel.relid = ((Var *) var)->varno;
	/* no description: EXPLAIN shows the planned clause, and building one costs per execution */
	return scoot_block_filter(&rel, (Expr *) &with, NULL, s->css.ss.ss_currentRelation);
}

/* Hands the scan its block filters: the planned ones, and the runtime ones evaluated now. */
static void
set_filters(ScootScanState *s)
{
	CustomScan *cs = (CustomScan *) s->css.ss.ps.plan;
	ListCell   *lc;

	foreach(lc, (List *) lthird(cs->custom_private))
		if (IsA(lfirst(lc), String))
			scoot_scan_set_filter(s->scan, strVal(lfirst(lc)));
	if (s->nruntime > 0)
	{
		ExprContext *econtext = s->css.ss.ps.ps_ExprContext;
		MemoryContext old;
		int			i;

		MemoryContextReset(s->rt_cxt);
		old = MemoryContextSwitchTo(s->rt_cxt);
		s->rt_applied = 0;
		for (i = 0; i < s->nruntime; i++)
		{
			bool		isnull;
			Datum		v = ExecEvalExpr(s->rt_expr[i], econtext, &isnull);
			char	   *f = runtime_filter_encode(s, i, v, isnull);

			if (f)
			{
				scoot_scan_set_filter(s->scan, f);
				s->rt_applied++;
			}
		}
		MemoryContextSwitchTo(old);
	}
}

static void
set_columns(ScootScanState *s)
{
	scoot_scan_set_columns(s->scan, s->mask, s->natts);
	set_filters(s);
	if (s->eager >= 0)
		scoot_scan_set_eager(s->scan, s->eager);
}

/*
 * Join filter.
 *
 * A ScootScan that is the outer (probing) side of a hash join hands the join every row that
 * passes its own filters, and the join hashes each row's key and looks it up: in TPC-H Q17 six
 * million lineitem rows go up for 587 matches, each row a slot, an ExecProcNode call, an
 * expression evaluation of its key and a bucket walk. Once the join has built its hash table,
 * the scan does that lookup itself, a block at a time on the key columns, before any row is
 * formed, and keeps only the rows whose hash value may be in the table (or in a batch on disk,
 * or in a skew bucket): every row the join could match, and ~1-2% of the others (it tests a
 * Bloom filter of the table's hash values, ScootJoinBloom, not the table itself, except for a
 * big shared table probed by few rows); the join checks them again as always. Only for inner, semi and right joins (which drop unmatched outer rows), a built table
 * (a private one, or the shared table of the batch a Parallel Hash probes), and keys that are
 * plain int2/int4/int8/date columns hashed by
 * hashint2/hashint4/hashint8, whose hash the scan computes as PostgreSQL does (storage/filter.rs
 * hash_int, checked against PostgreSQL's functions in a #[pg_test]), and a scan whose qual and
 * target list call no volatile function (the rows dropped skip them). A row whose key is NULL
 * is kept; a join that keeps nearly every row makes the scan stop looking (am/scan.rs: after
 * 64k rows with a Bloom filter, after 4k with a shared table that has none, whose lookups are
 * bucket walks).
 * `SET scoot.join_filter = off` turns it off; EXPLAIN ANALYZE shows the rows it removed.
 *
 * The same hash values serve the join's own probes: as the scan returns a row, it prefetches
 * the bucket of a row a few ahead and the first tuple of a nearer one's bucket
 * (scoot_hj_prefetch), so the join's bucket walk finds them in cache. That goes on after the
 * filter stopped looking.
 */
#define SCOOT_HJ_BUILD_HASHTABLE 1	/* nodeHashjoin.c's HJ_BUILD_HASHTABLE */

/* The word of the Bloom filter and the two bits in it that stand for `hashvalue`. */
static inline uint64
bloom_probe(const ScootJoinBloom *b, uint32 hashvalue, uint64 *mask)
{
	uint64		x = (uint64) hashvalue * UINT64CONST(0x9E3779B97F4A7C15);

	*mask = (UINT64CONST(1) << (x & 63)) | (UINT64CONST(1) << ((x >> 6) & 63));
	return x >> b->shift;
}

/* An empty filter of about 16 bits per tuple for `ntuples` tuples (b->bits, b->shift). */
static void
bloom_alloc(ScootJoinBloom *b, double ntuples, MemoryContext cxt)
{
	int			logw = 6;
	size_t		words;

	/*
	 * 16 bits per tuple, at least 64 words, at most 2^24 (128 MB; the batch in memory itself
	 * takes hash_mem, at 16+ bytes per tuple, so this is a fraction of it)
	 */
	while (logw < 24 && ((double) (UINT64CONST(1) << logw)) * 64 < ntuples * 16)
		logw++;
	words = (size_t) 1 << logw;
	b->bits = MemoryContextAllocHuge(cxt, words * sizeof(uint64));
	memset(b->bits, 0, words * sizeof(uint64));
	b->shift = 64 - logw;
}

/*
 * Sets b's bits from the tuples of ht's current batch (a private table: its tuples lie in the
 * table's chunks, as ExecHashIncreaseNumBatches walks them; skew-bucket tuples are not there,
 * and scoot_hj_may_match keeps their rows anyway). About 16 bits per tuple: with two bits per
 * key in one word, some 1-2% of the absent keys pass.
 *
 * A Parallel Hash's shared table (the batch being probed, read-only while it is) gets one too,
 * from its buckets, which are what the join's probes read (its chunk list is not: growing the
 * buckets moves the chunks away): one bucket walk per tuple, once per participant and batch,
 * so only when the scan expects at least twice as many rows (`probes`, its plan's estimate per
 * participant) as the table holds, or the table is small. Without one, each lookup walks the
 * bucket (TPC-H Q5 with 2 workers: lineitem's filter took 377 ms per process against 245 ms
 * for the whole table with a Bloom filter in a serial plan).
 */
static void
bloom_build(ScootJoinBloom *b, HashJoinTable ht, double probes, MemoryContext cxt)
{
	HashMemoryChunk chunk;
	double		ntuples = 0;

	if (b->bits != NULL)
		pfree(b->bits);
	b->bits = NULL;
	b->ht = ht;
	b->batch = -1;
	if (ht == NULL)
		return;
	if (ht->parallel_state != NULL)
	{
		int			i;

		/* PostgreSQL keeps about one tuple per bucket (NTUP_PER_BUCKET) */
		if (ht->curbatch < 0 || ht->buckets.shared == NULL ||
			(ht->nbuckets > 65536 && (double) ht->nbuckets * 2 > probes))
			return;
		bloom_alloc(b, Max(ht->nbuckets, 1024), cxt);
		for (i = 0; i < ht->nbuckets; i++)
		{
			dsa_pointer p = dsa_pointer_atomic_read(&ht->buckets.shared[i]);

			while (DsaPointerIsValid(p))
			{
				HashJoinTuple t = (HashJoinTuple) dsa_get_address(ht->area, p);
				uint64		mask;

				b->bits[bloom_probe(b, t->hashvalue, &mask)] |= mask;
				p = t->next.shared;
			}
		}
		b->batch = ht->curbatch;
		return;
	}
	for (chunk = ht->chunks; chunk != NULL; chunk = chunk->next.unshared)
	{
		size_t		idx = 0;

		while (idx < chunk->used)
		{
			HashJoinTuple t = (HashJoinTuple) (HASH_CHUNK_DATA(chunk) + idx);

			idx += MAXALIGN(HJTUPLE_OVERHEAD + HJTUPLE_MINTUPLE(t)->t_len);
			ntuples++;
		}
	}
	bloom_alloc(b, ntuples, cxt);
	for (chunk = ht->chunks; chunk != NULL; chunk = chunk->next.unshared)
	{
		size_t		idx = 0;

		while (idx < chunk->used)
		{
			HashJoinTuple t = (HashJoinTuple) (HASH_CHUNK_DATA(chunk) + idx);
			uint64		mask;

			b->bits[bloom_probe(b, t->hashvalue, &mask)] |= mask;
			idx += MAXALIGN(HJTUPLE_OVERHEAD + HJTUPLE_MINTUPLE(t)->t_len);
		}
	}
	b->batch = ht->curbatch;
}

/*
 * Could the hash table hold a row with this hash value (for the batch it is probing now)?
 * `filter` is the scan's ScootJoinBloom.
 */
bool
scoot_hj_may_match(void *filter, uint32 hashvalue)
{
	ScootJoinBloom *b = (ScootJoinBloom *) filter;
	HashJoinTable ht = b->ht;
	int			bucketno,
				batchno;
	HashJoinTuple t;

	if (ht->skewEnabled && ExecHashGetSkewBucket(ht, hashvalue) != INVALID_SKEW_BUCKET_NO)
		return true;
	ExecHashGetBucketAndBatch(ht, hashvalue, &bucketno, &batchno);
	if (batchno != ht->curbatch)
		return true;			/* the join writes the row to that batch's file */
	if (b->batch == ht->curbatch)
	{
		uint64		mask;
		uint64		w = b->bits[bloom_probe(b, hashvalue, &mask)];

		return (w & mask) == mask;
	}
	if (ht->parallel_state != NULL)
	{
		/* Parallel Hash: the current batch's shared buckets, read-only while it is probed */
		dsa_pointer p = dsa_pointer_atomic_read(&ht->buckets.shared[bucketno]);

		while (DsaPointerIsValid(p))
		{
			t = (HashJoinTuple) dsa_get_address(ht->area, p);
			if (t->hashvalue == hashvalue)
				return true;
			p = t->next.shared;
		}
		return false;
	}
	for (t = ht->buckets.unshared[bucketno]; t != NULL; t = t->next.unshared)
		if (t->hashvalue == hashvalue)
			return true;
	return false;
}

/*
 * Asks the CPU for what the hash join will read when it probes for rows a few ahead of the one
 * the scan returns now: the bucket of the row `far` rows ahead (hash value `far`), and the
 * first tuple of the bucket of a nearer row (`near`, whose bucket head the previous calls
 * brought in). The join's probe otherwise stalls on two cache misses per outer row (the bucket
 * array and the tuple are megabytes for a table of 100k rows); issued early, they overlap with
 * the work on the rows in between. A hint only: nothing is read that the join might change,
 * and a wrong guess (a row another batch holds, a filtered row) just costs a load.
 */
void
scoot_hj_prefetch(void *filter, uint32 far, uint32 near)
{
	ScootJoinBloom *b = (ScootJoinBloom *) filter;
	HashJoinTable ht = b->ht;
	int			bucketno,
				batchno;

	if (ht->parallel_state != NULL)
	{
		dsa_pointer p;

		ExecHashGetBucketAndBatch(ht, far, &bucketno, &batchno);
		if (batchno == ht->curbatch)
			__builtin_prefetch(&ht->buckets.shared[bucketno]);
		ExecHashGetBucketAndBatch(ht, near, &bucketno, &batchno);
		if (batchno != ht->curbatch)
			return;
		p = dsa_pointer_atomic_read(&ht->buckets.shared[bucketno]);
		if (DsaPointerIsValid(p))
			__builtin_prefetch(dsa_get_address(ht->area, p));
		return;
	}
	ExecHashGetBucketAndBatch(ht, far, &bucketno, &batchno);
	if (batchno == ht->curbatch)
		__builtin_prefetch(&ht->buckets.unshared[bucketno]);
	ExecHashGetBucketAndBatch(ht, near, &bucketno, &batchno);
	if (batchno == ht->curbatch && ht->buckets.unshared[bucketno] != NULL)
		__builtin_prefetch(ht->buckets.unshared[bucketno]);
}

/* The width of an integer type the join filter computes with (date is an int4), else 0. */
static int
join_key_type_width(Oid type)
{
	switch (type)
	{
		case INT2OID:
			return 2;
		case INT4OID:
		case DATEOID:
			return 4;
		case INT8OID:
			return 8;
		default:
			return 0;
	}
}

/*
 * Appends to `out` (room for `room` words; *len counts them) the tokens of `e`, an integer
 * expression over table `relid`'s columns, in the encoding storage/filter.rs KeyTok reads
 * (exec/mod.rs parse_join_keys: (1, attno, width) a column, (2, value, 0) a constant, (3,
 * operator, result width) an operation, (4, width, 0) a cast); returns the value's width, or 0
 * if `e` is not such an expression. The operations are PostgreSQL's integer +, -, *, % / mod()
 * and integer casts, whose errors (overflow, division by zero) the scan recognizes and leaves
 * to the join (see KeyVal::Error).
 */
static int
key_tokens(Expr *e, Index relid, int64 *out, int room, int *len)
{
	Oid			funcid;
	List	   *args;
	int			op = 0,
				w = 0;
	ListCell   *lc;

	while (IsA(e, RelabelType))
		e = ((RelabelType *) e)->arg;
	if (*len + 3 > room)
		return 0;
	if (IsA(e, Var))
	{
		Var		   *v = (Var *) e;

		w = join_key_type_width(v->vartype);
		if (v->varno != (int) relid || v->varlevelsup != 0 || v->varattno <= 0 || w == 0)
			return 0;
		out[(*len)++] = 1;
		out[(*len)++] = v->varattno;
		out[(*len)++] = w;
		return w;
	}
	if (IsA(e, Const))
	{
		Const	   *c = (Const *) e;

		w = c->constisnull ? 0 : join_key_type_width(c->consttype);
		if (w == 0 || c->consttype == DATEOID)
			return 0;
		out[(*len)++] = 2;
		out[(*len)++] = w == 2 ? DatumGetInt16(c->constvalue) :
			w == 4 ? DatumGetInt32(c->constvalue) : DatumGetInt64(c->constvalue);
		out[(*len)++] = 0;
		return w;
	}
	if (IsA(e, OpExpr))
	{
		set_opfuncid((OpExpr *) e);
		funcid = ((OpExpr *) e)->opfuncid;
		args = ((OpExpr *) e)->args;
	}
	else if (IsA(e, FuncExpr))
	{
		funcid = ((FuncExpr *) e)->funcid;
		args = ((FuncExpr *) e)->args;
	}
	else
		return 0;
	/* the operation (0: a cast); the value's width is its result type's */
	switch (funcid)
	{
		case F_INT2PL:
		case F_INT4PL:
		case F_INT24PL:
		case F_INT42PL:
		case F_INT8PL:
		case F_INT48PL:
		case F_INT84PL:
		case F_INT28PL:
		case F_INT82PL:
			op = '+';
			break;
		case F_INT2MI:
		case F_INT4MI:
		case F_INT24MI:
		case F_INT42MI:
		case F_INT8MI:
		case F_INT48MI:
		case F_INT84MI:
		case F_INT28MI:
		case F_INT82MI:
			op = '-';
			break;
		case F_INT2MUL:
		case F_INT4MUL:
		case F_INT24MUL:
		case F_INT42MUL:
		case F_INT8MUL:
		case F_INT48MUL:
		case F_INT84MUL:
		case F_INT28MUL:
		case F_INT82MUL:
			op = '*';
			break;
		case F_INT2MOD:
		case F_MOD_INT2_INT2:
		case F_INT4MOD:
		case F_MOD_INT4_INT4:
		case F_INT8MOD:
		case F_MOD_INT8_INT8:
			op = '%';
			break;
		case F_INT4_INT2:		/* int2 -> int4 */
		case F_INT2_INT4:		/* int4 -> int2 */
		case F_INT8_INT4:
		case F_INT4_INT8:
		case F_INT8_INT2:
		case F_INT2_INT8:
			break;
		default:
			return 0;
	}
	w = join_key_type_width(exprType((Node *) e));
	if (list_length(args) != (op != 0 ? 2 : 1) || w == 0)
		return 0;
	foreach(lc, args)
	{
		if (key_tokens((Expr *) lfirst(lc), relid, out, room, len) == 0)
			return 0;
	}
	if (*len + 3 > room)
		return 0;
	out[(*len)++] = op != 0 ? 3 : 4;
	out[(*len)++] = op != 0 ? op : w;
	out[(*len)++] = op != 0 ? w : 0;
	return w;
}

/*
 * Encodes join key `e` (an integer column of table `relid`, or an integer expression over its
 * columns: see key_tokens) for the join filter into `out` (room for `room` words), after the
 * *len words already there: its width, its token count, its tokens. Returns the key's width, 0
 * if it cannot be encoded (then *len is unchanged).
 */
static int
compile_join_key(Expr *e, Index relid, int64 *out, int room, int *len)
{
	int			start = *len,
				n = start + 2,
				w;

	if (start + 2 > room)
		return 0;
	while (IsA(e, RelabelType))
		e = ((RelabelType *) e)->arg;
	if (!IsA(e, Var) && !scoot_join_filter_expressions_enabled())
		return 0;
	w = key_tokens(e, relid, out, Min(room, start + 2 + 3 * SCOOT_KEY_MAX_TOKENS), &n);
	if (w == 0)
		return 0;
	out[start] = w;
	out[start + 1] = (n - start - 2) / 3;
	*len = n;
	return w;
}

/*
 * `node` (a hash join's outer key) with each Var of the outer plan (OUTER_VAR) replaced by that
 * plan's target entry: the key as an expression over the outer plan's input.
 */
static Node *
resolve_outer_vars(Node *node, List *tlist)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var) && ((Var *) node)->varno == OUTER_VAR)
	{
		Var		   *v = (Var *) node;

		if (v->varattno <= 0 || v->varattno > list_length(tlist))
			elog(ERROR, "scoot: hash key references no column of the join's outer plan");
		return copyObject((Node *) list_nth_node(TargetEntry, tlist, v->varattno - 1)->expr);
	}
	return expression_tree_mutator(node, resolve_outer_vars, (void *) tlist);
}

/*
 * The widths of the join's first `n` outer hash keys if it hashes each with hashint2, hashint4 or
 * hashint8 (what the join filters compute themselves); false for any other hash function.
 */
static bool
integer_hash_widths(HashJoinTable ht, int n, int *widths)
{
	return scoot_integer_hash_widths(ht->outer_hashfunctions, n, widths);
}

/*
 * The hash join `hj` probes with the groups of ScootPreAgg `a`: if each outer hash key is one
 * of the node's group keys (a plain column of its scan row, which lists the keys first), the
 * node may drop the groups the join's table cannot match and prefetch the buckets of the next
 * ones, as a ScootScan does with rows. Whether the keys are integers the join hashes with
 * hashint2/4/8 is known once the table and the groups exist (scoot_agg_probe_update).
 */
static void
preagg_join_filter_candidate(HashJoinState *hj, ScootAggState *a)
{
	HashJoin   *plan = (HashJoin *) hj->js.ps.plan;
	CustomScan *cs = (CustomScan *) a->css.ss.ps.plan;
	int			nkeys = intVal(lsecond(cs->custom_private));
	int			keys[SCOOT_JOIN_FILTER_MAX_KEYS];
	int			n = 0;
	ListCell   *lc;

	foreach(lc, plan->hashkeys)
	{
		Var		   *v = (Var *) lfirst(lc);
		Var		   *col;

		if (!IsA(v, Var) || v->varno != OUTER_VAR || v->varattno <= 0 ||
			v->varattno > list_length(cs->scan.plan.targetlist))
			return;
		col = (Var *) list_nth_node(TargetEntry, cs->scan.plan.targetlist, v->varattno - 1)->expr;
		/* the scan row's key columns: INDEX_VAR references to custom_scan_tlist's first ones */
		if (!IsA(col, Var) || col->varno != INDEX_VAR || col->varattno <= 0 ||
			col->varattno > nkeys || col->varlevelsup != 0)
			return;
		keys[n++] = col->varattno - 1;
	}
	a->probe_hj = hj;
	a->probe_nkeys = n;
	memcpy(a->probe_keys, keys, sizeof(int) * n);
	a->probe_ht = NULL;
}

extern int	scoot_agg_key_hash(void *agg, int64 g, int n, const int *cols, const int *widths,
							   uint32 *hash);

/*
 * Before a ScootPreAgg returns a group: give it the join's hash table once the table is built
 * (again after a rebuild), or take it away when it is gone, as join_filter_update does for a
 * ScootScan. The filter is set up only when the join hashes every key with an integer hash
 * function of the key's width.
 */
void
scoot_agg_probe_update(ScootAggState *s)
{
	HashJoinState *hj = s->probe_hj;
	HashJoinTable ht = hj->hj_HashTable;
	ScootJoinBloom *b;
	uint32		h;

	if (ht != NULL && hj->hj_JoinState == SCOOT_HJ_BUILD_HASHTABLE)
		ht = NULL;
	if (ht != NULL && ht->parallel_state != NULL && ht->curbatch < 0)
		ht = NULL;
	if ((void *) ht == s->probe_ht)
		return;
	if (ht != NULL && !integer_hash_widths(ht, s->probe_nkeys, s->probe_widths))
		ht = NULL;
	/* keys of another type or width in the engine (-1 for any group): no filter */
	if (ht != NULL && s->agg != NULL && s->ngroups > 0 &&
		scoot_agg_key_hash(s->agg, 0, s->probe_nkeys, s->probe_keys, s->probe_widths, &h) < 0)
		ht = NULL;
	if (ht == NULL && s->probe_ht == NULL)
		return;
	s->probe_ht = ht;
	if (s->probe_filter == NULL)
		s->probe_filter = MemoryContextAllocZero(s->css.ss.ps.state->es_query_cxt,
												 sizeof(ScootJoinBloom));
	b = (ScootJoinBloom *) s->probe_filter;
	bloom_build(b, ht, s->css.ss.ps.plan->plan_rows, s->css.ss.ps.state->es_query_cxt);
	s->probe_filtering = ht != NULL;
}

/* The hash join `ps` (if it is one) can filter its outer ScootScan: remember it there. */
static void
join_filter_candidate(PlanState *ps)
{
	HashJoinState *hj = (HashJoinState *) ps;
	HashJoin   *plan = (HashJoin *) ps->plan;
	PlanState  *outer = outerPlanState(ps);
	ScootScanState *s;
	int			scanrelid,
				n = 0,
				len;
	Expr	   *exprs[SCOOT_JOIN_FILTER_MAX_KEYS];
	int			widths[SCOOT_JOIN_FILTER_MAX_KEYS];
	ListCell   *lc;

	if (!IsA(ps, HashJoinState) || outer == NULL || !IsA(outer, CustomScanState))
		return;
	if (((CustomScanState *) outer)->methods != &scoot_exec_methods &&
		!scoot_is_preagg_state(outer))
		return;
	if (!(hj->js.jointype == JOIN_INNER || hj->js.jointype == JOIN_SEMI ||
		  hj->js.jointype == JOIN_RIGHT) || !scoot_join_filter_enabled())
		return;
	if (list_length(plan->hashkeys) == 0 || list_length(plan->hashkeys) > SCOOT_JOIN_FILTER_MAX_KEYS)
		return;
	/* rows it drops would skip the scan's qual and projection: only if nothing there can tell */
	if (contain_volatile_functions((Node *) outer->plan->qual) ||
		contain_volatile_functions((Node *) outer->plan->targetlist))
		return;
	if (scoot_is_preagg_state(outer))
	{
		preagg_join_filter_candidate(hj, (ScootAggState *) outer);
		return;
	}
	scanrelid = ((Scan *) outer->plan)->scanrelid;
	s = (ScootScanState *) outer;
	len = 0;
	foreach(lc, plan->hashkeys)
	{
		/* the key as an expression over the scan's columns */
		Expr	   *e = (Expr *) resolve_outer_vars((Node *) lfirst(lc), outer->plan->targetlist);
		int			w;

		if (e == NULL)
			return;
		w = compile_join_key(e, scanrelid, s->probe_prog, lengthof(s->probe_prog), &len);
		if (w == 0)
			return;
		while (IsA(e, RelabelType))
			e = ((RelabelType *) e)->arg;
		exprs[n] = e;
		widths[n++] = w;
	}
	s->probe_hj = hj;
	s->probe_nkeys = n;
	memcpy(s->probe_exprs, exprs, sizeof(Expr *) * n);
	memcpy(s->probe_keyw, widths, sizeof(int) * n);
	s->probe_proglen = len;
	s->probe_ht = NULL;
}

/*
 * Before each row: give the scan the join's hash table once it is built (again after a rescan
 * rebuilt it), or take it away when it is gone.
 */
static void
join_filter_update(ScootScanState *s)
{
	HashJoinState *hj = s->probe_hj;
	HashJoinTable ht = hj->hj_HashTable;
	int			widths[SCOOT_JOIN_FILTER_MAX_KEYS];
	int			k;

	if (ht != NULL && hj->hj_JoinState == SCOOT_HJ_BUILD_HASHTABLE)
		ht = NULL;				/* not built yet (the join reads a first outer row before) */
	if (ht == s->probe_ht)
		return;
	if (ht != NULL)
	{
		/*
		 * Parallel Hash: the shared table of the batch being probed; while the join partitions
		 * its outer side into batches (still in its build state) the scan keeps every row
		 */
		if (ht->parallel_state != NULL && ht->curbatch < 0)
			ht = NULL;
		if (ht != NULL && !integer_hash_widths(ht, s->probe_nkeys, widths))
			ht = NULL;
		/* each key's value is an integer of the width the join hashes */
		for (k = 0; ht != NULL && k < s->probe_nkeys; k++)
			if (widths[k] != s->probe_keyw[k])
				ht = NULL;
	}
	if (ht == NULL && s->probe_ht == NULL)
		return;
	s->probe_ht = ht;
	bloom_build(&s->probe_bloom, ht, s->css.ss.ps.plan->plan_rows,
				s->css.ss.ps.state->es_query_cxt);
	/*
	 * Lookups that hit the Bloom filter (a few hundred kB) cost little: a long trial. A shared
	 * (Parallel Hash) table without one has each lookup walk the bucket as the join's own probe
	 * will, so the filter must prove itself sooner.
	 */
	scoot_scan_set_join_filter(s->scan, ht ? &s->probe_bloom : NULL, scoot_hj_may_match,
							   scoot_hj_prefetch,
							   ht && s->probe_bloom.bits == NULL ? 4096 : 65536,
							   ht ? s->probe_nkeys : 0, s->probe_prog, s->probe_proglen);
}

static TupleTableSlot *
scoot_next(ScanState *ss)
{
	ScootScanState *s = (ScootScanState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;

	if (s->scan == NULL)
	{
		s->scan = table_beginscan(ss->ss_currentRelation, ss->ps.state->es_snapshot, 0, NULL);
		set_columns(s);
	}
	if (s->probe_hj != NULL)
		join_filter_update(s);
	while (table_scan_getnextslot(s->scan, ss->ps.state->es_direction, slot))
	{
		ExprContext *econtext;

		/* the block filters decided the row exactly: its pushed clauses hold */
		if (s->recheck == NULL || scoot_scan_row_exact(s->scan))
			return slot;
		econtext = ss->ps.ps_ExprContext;
		econtext->ecxt_scantuple = slot;
		if (ExecQual(s->recheck, econtext))
			return slot;
		s->recheck_removed++;
		ResetExprContext(econtext);
		CHECK_FOR_INTERRUPTS();
	}
	return NULL;
}

static bool
scoot_recheck(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
scoot_exec(CustomScanState *node)
{
	ScootScanState *s = (ScootScanState *) node;
	HashJoinTable ht;

	if (s->build != NULL && (ht = scoot_hash_build_table(s->build)) != NULL)
		return scoot_hash_build_run(&node->ss, s->build, ht, (ExecScanAccessMtd) scoot_next,
									(ExecScanRecheckMtd) scoot_recheck);
	return ExecScan(&node->ss, (ExecScanAccessMtd) scoot_next, (ExecScanRecheckMtd) scoot_recheck);
}

static void
scoot_end(CustomScanState *node)
{
	ScootScanState *s = (ScootScanState *) node;

	if (node->ss.ps.ps_ResultTupleSlot)
		ExecClearTuple(node->ss.ps.ps_ResultTupleSlot);
	ExecClearTuple(node->ss.ss_ScanTupleSlot);
	if (s->scan)
		table_endscan(s->scan);
	s->scan = NULL;
}

static void
scoot_rescan(CustomScanState *node)
{
	ScootScanState *s = (ScootScanState *) node;

	/* the join may destroy or rebuild its hash table: the next row asks again */
	if (s->scan && s->probe_ht != NULL)
		scoot_scan_set_join_filter(s->scan, NULL, NULL, NULL, 0, 0, NULL, 0);
	s->probe_ht = NULL;
	if (s->scan)
	{
		table_rescan(s->scan, NULL);
		/* the Params may have changed: the runtime filters take their new values */
		if (s->nruntime > 0)
		{
			scoot_scan_clear_filters(s->scan);
			set_filters(s);
		}
	}
	ExecScanReScan(&node->ss);
}

static void
scoot_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	ScootScanState *s = (ScootScanState *) node;
	Relation	rel = node->ss.ss_currentRelation;
	TupleDesc	td = RelationGetDescr(rel);
	StringInfoData buf;
	int			n = 0,
				live = 0,
				i;

	initStringInfo(&buf);
	for (i = 0; i < s->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(td, i);

		if (a->attisdropped)
			continue;
		live++;
		if (!s->mask[i])
			continue;
		if (n++ > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoString(&buf, quote_identifier(NameStr(a->attname)));
	}
	if (n == 0)
		appendStringInfoString(&buf, "(none)");
	ExplainPropertyText("Scoot Columns", buf.data, es);
	{
		CustomScan *cs = (CustomScan *) node->ss.ps.plan;
		char	   *f = scoot_describe_filters((List *) lfourth(cs->custom_private));

		if (f)
			ExplainPropertyText("Scoot Block Filter", f, es);
	}
	if (s->nruntime > 0)
	{
		List	   *ctx = set_deparse_context_plan(es->deparse_cxt, node->ss.ps.plan, ancestors);
		bool		useprefix = list_length(es->rtable) > 1 || es->verbose;
		StringInfoData rf;
		int			i;

		initStringInfo(&rf);
		for (i = 0; i < s->nruntime; i++)
		{
			OpExpr	   *op = s->rt_clause[i];
			char	   *col,
					   *val;

			col = column_name(rel, (Var *) runtime_filter_var(op, s->rt_side[i]));
			val = deparse_expression(list_nth(op->args, s->rt_side[i]), ctx, useprefix, false);
			if (i > 0)
				appendStringInfoString(&rf, " AND ");
			if (s->rt_side[i] == 1)
				appendStringInfo(&rf, "%s %s %s", col, get_opname(op->opno), val);
			else
				appendStringInfo(&rf, "%s %s %s", val, get_opname(op->opno), col);
		}
		ExplainPropertyText("Scoot Runtime Filter", rf.data, es);
	}
	if (s->probe_hj != NULL)
	{
		StringInfoData jf;
		int			k;

		initStringInfo(&jf);
		for (k = 0; k < s->probe_nkeys; k++)
		{
			Expr	   *e = s->probe_exprs[k];

			if (k > 0)
				appendStringInfoString(&jf, ", ");
			if (IsA(e, Var))
				appendStringInfoString(&jf, quote_identifier(NameStr(TupleDescAttr(td, ((Var *) e)->varattno - 1)->attname)));
			else
				appendStringInfoString(&jf, deparse_expression((Node *) e,
															   set_deparse_context_plan(es->deparse_cxt, node->ss.ps.plan, ancestors),
															   false, false));
		}
		appendStringInfoString(&jf, " in the hash join's table");
		ExplainPropertyText("Scoot Join Filter", jf.data, es);
		if (es->analyze && s->scan)
			ExplainPropertyInteger("Rows Removed by Scoot Join Filter", NULL,
								   scoot_scan_join_filter_removed(s->scan), es);
	}
	if (es->analyze && s->build != NULL &&
		(es->format != EXPLAIN_FORMAT_TEXT || s->build->rows_in_place > 0))
		ExplainPropertyInteger("Rows Written into the Hash Table by Scoot", NULL,
							   s->build->rows_in_place, es);
	if (es->analyze && s->recheck != NULL &&
		(es->format != EXPLAIN_FORMAT_TEXT || s->recheck_removed > 0))
		ExplainPropertyInteger("Rows Removed by Scoot Block Filter Recheck", NULL,
							   s->recheck_removed, es);
	if (es->analyze && s->scan && !s->scan->rs_parallel)
	{
		int64		skipped = scoot_scan_zone_skipped(s->scan);

		if (es->format != EXPLAIN_FORMAT_TEXT || skipped > 0)
			ExplainPropertyInteger("Scoot Blocks Skipped by Zone Maps", NULL, skipped, es);
	}
	if (es->format != EXPLAIN_FORMAT_TEXT)
	{
		ExplainPropertyInteger("Scoot Columns Read", NULL, n, es);
		ExplainPropertyInteger("Scoot Columns Total", NULL, live, es);
	}
}

static Size
scoot_estimate_dsm(CustomScanState *node, ParallelContext *pcxt)
{
	return table_parallelscan_estimate(node->ss.ss_currentRelation,
									   node->ss.ps.state->es_snapshot);
}

static void
scoot_init_dsm(CustomScanState *node, ParallelContext *pcxt, void *coordinate)
{
	ScootScanState *s = (ScootScanState *) node;
	ParallelTableScanDesc pscan = (ParallelTableScanDesc) coordinate;

	table_parallelscan_initialize(node->ss.ss_currentRelation, pscan,
								  node->ss.ps.state->es_snapshot);
	s->scan = table_beginscan_parallel(node->ss.ss_currentRelation, pscan);
	set_columns(s);
}

static void
scoot_reinit_dsm(CustomScanState *node, ParallelContext *pcxt, void *coordinate)
{
	table_parallelscan_reinitialize(node->ss.ss_currentRelation,
									(ParallelTableScanDesc) coordinate);
}

static void
scoot_init_worker(CustomScanState *node, shm_toc *toc, void *coordinate)
{
	ScootScanState *s = (ScootScanState *) node;

	s->scan = table_beginscan_parallel(node->ss.ss_currentRelation,
									   (ParallelTableScanDesc) coordinate);
	set_columns(s);
}

/*
 * Plain PostgreSQL scan nodes over scoot tables, adjusted once the executor has set them up:
 *
 * - Bitmap heap scans prefetch the pages they are about to visit (posix_fadvise on the
 *   relation's file, effective_io_concurrency). A scoot table's rows are in the arena, never in
 *   its file, so that is a wasted system call per block (5% of TPC-H Q17): switched off.
 * - Index and bitmap heap scans that project read only the columns of their own quals and
 *   target list from their scan slot (nothing else sees that slot). A scoot row's columns lie in
 *   as many places of its block, so the fetches are told which columns to copy; the others read
 *   as NULL. A whole-row reference, or a node that hands its scan slot up unprojected, reads
 *   every column.
 * - Plain Seq Scans likewise (a table of a few rows, every scan with `scoot.custom_scan = off`):
 *   PostgreSQL's slots deform a row up to the last column asked for, which costs a heap tuple a
 *   walk over the columns before it, but costs a scoot batch a conversion of each of those
 *   columns (a numeric is rebuilt from its scaled integer): `count(*) ... WHERE l_comment LIKE`
 *   over a lineitem-like table converted the four numerics before l_comment on every row.
 *
 * Subplans and parallel workers (whose ExecutorStart runs this hook too) included.
 */
extern void scoot_bitmap_set_columns(TableScanDesc scan, const bool *mask, int natts);
extern void scoot_seq_scan_set_columns(TableScanDesc scan, const bool *mask, int natts);
extern void scoot_index_fetch_set_columns(struct IndexFetchTableData *fetch, const bool *mask, int natts);
extern bool scoot_index_fetch_columns_set(struct IndexFetchTableData *fetch);
extern uint64 scoot_index_fetch_index_only(struct IndexFetchTableData *fetch);
extern void scoot_index_fetch_pending_columns(Oid relid, const bool *mask, int natts,
											  bool index_only);

static ExecutorStart_hook_type prev_executor_start = NULL;
static ExecProcNodeMtd index_scan_exec = NULL;
static ExecProcNodeMtd index_only_scan_exec = NULL;
static ExecProcNodeMtd seq_scan_exec = NULL;

/* Is `tlist` the physical target list of a relation with `natts` columns (column i at i)? */
static bool
is_physical_tlist(List *tlist, int natts)
{
	ListCell   *lc;
	int			i = 0;

	if (list_length(tlist) != natts)
		return false;
	foreach(lc, tlist)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);

		i++;
		if (te->resjunk || te->resno != i)
			return false;
		/* dropped columns are NULL constants */
		if (IsA(te->expr, Var) ? ((Var *) te->expr)->varattno != i : !IsA(te->expr, Const))
			return false;
	}
	return true;
}

/*
 * The join whose outer or inner child `target` is (*inner says which), or the aggregate whose
 * input it is, searching `p` and the plans under it; NULL if `target` is neither.
 */
static Plan *
reading_parent(Plan *p, Plan *target, bool *inner)
{
	ListCell   *lc;
	Plan	   *r = NULL;

	if (p == NULL)
		return NULL;
	if ((IsA(p, NestLoop) || IsA(p, HashJoin) || IsA(p, MergeJoin)) &&
		(p->lefttree == target || p->righttree == target))
	{
		*inner = p->righttree == target;
		return p;
	}
	/* an aggregate reads its input slot like a join's outer side (no grouping sets) */
	if (IsA(p, Agg) && p->lefttree == target && ((Agg *) p)->groupingSets == NIL &&
		((Agg *) p)->chain == NIL)
	{
		*inner = false;
		return p;
	}
	if ((r = reading_parent(p->lefttree, target, inner)) != NULL ||
		(r = reading_parent(p->righttree, target, inner)) != NULL)
		return r;
	if (IsA(p, Append))
		foreach(lc, ((Append *) p)->appendplans)
			if ((r = reading_parent(lfirst(lc), target, inner)) != NULL)
				return r;
	if (IsA(p, MergeAppend))
		foreach(lc, ((MergeAppend *) p)->mergeplans)
			if ((r = reading_parent(lfirst(lc), target, inner)) != NULL)
				return r;
	if (IsA(p, SubqueryScan))
		return reading_parent(((SubqueryScan *) p)->subplan, target, inner);
	if (IsA(p, CustomScan))
		foreach(lc, ((CustomScan *) p)->custom_plans)
			if ((r = reading_parent(lfirst(lc), target, inner)) != NULL)
				return r;
	return NULL;
}

/*
 * The columns (by attribute number - 1) that anything reads from scan node `ps`'s scan slot;
 * NULL: all of them (or no saving). `more1`, `more2`: the node's expressions besides its quals
 * and target list (index quals for rechecks, ORDER BY). A node that projects: its own
 * expressions. A node that hands its scan slot up unprojected (a physical target list) to a
 * join, which always projects: its quals and the join's expressions on that side; to an
 * aggregate: its quals, the aggregate's expressions and its grouping columns. Anything else
 * (a Hash, Sort or Material above, which copy the slot for later readers): every column.
 */
static bool *
node_columns(PlanState *ps, Index scanrelid, List *more1, List *more2, int natts)
{
	Plan	   *plan = ps->plan;
	Bitmapset  *attrs = NULL;
	bool	   *mask;
	int			k = -1;

	if (ps->ps_ProjInfo == NULL)
	{
		Plan	   *parent = NULL;
		bool		inner = false;
		PlannedStmt *ps_stmt = ps->state->es_plannedstmt;
		ListCell   *lc;
		Index		side;

		if (!is_physical_tlist(plan->targetlist, natts) || ps_stmt == NULL)
			return NULL;
		parent = reading_parent(ps_stmt->planTree, plan, &inner);
		if (parent == NULL)
			foreach(lc, ps_stmt->subplans)
				if ((parent = reading_parent(lfirst(lc), plan, &inner)) != NULL)
					break;
		if (parent == NULL)
			return NULL;
		side = inner ? INNER_VAR : OUTER_VAR;
		pull_varattnos((Node *) parent->targetlist, side, &attrs);
		pull_varattnos((Node *) parent->qual, side, &attrs);
		if (!IsA(parent, Agg))
			pull_varattnos((Node *) ((Join *) parent)->joinqual, side, &attrs);
		if (IsA(parent, NestLoop))
			foreach(lc, ((NestLoop *) parent)->nestParams)
				pull_varattnos((Node *) ((NestLoopParam *) lfirst(lc))->paramval, side, &attrs);
		else if (IsA(parent, Agg))
		{
			Agg		   *agg = (Agg *) parent;
			int			i;

			/*
			 * The aggregate's Vars (in its target list and HAVING qual, aggregate arguments
			 * and FILTERs included) read its input; so do its grouping columns, positions in
			 * the physical target list, which are attribute numbers.
			 */
			for (i = 0; i < agg->numCols; i++)
				attrs = bms_add_member(attrs, agg->grpColIdx[i] - FirstLowInvalidHeapAttributeNumber);
		}
		else if (IsA(parent, HashJoin))
		{
			/* the inner side is a Hash node, never this scan */
			pull_varattnos((Node *) ((HashJoin *) parent)->hashclauses, side, &attrs);
			pull_varattnos((Node *) ((HashJoin *) parent)->hashkeys, side, &attrs);
		}
		else
			pull_varattnos((Node *) ((MergeJoin *) parent)->mergeclauses, side, &attrs);
		/* the join's Vars number the scan's physical target list: attribute numbers */
		pull_varattnos((Node *) plan->qual, scanrelid, &attrs);
	}
	else
	{
		pull_varattnos((Node *) plan->targetlist, scanrelid, &attrs);
		pull_varattnos((Node *) plan->qual, scanrelid, &attrs);
	}
	pull_varattnos((Node *) more1, scanrelid, &attrs);
	pull_varattnos((Node *) more2, scanrelid, &attrs);
	if (bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs))
		return NULL;
	mask = palloc0(sizeof(bool) * Max(natts, 1));
	while ((k = bms_next_member(attrs, k)) >= 0)
	{
		int			attno = k + FirstLowInvalidHeapAttributeNumber;

		if (attno > 0 && attno <= natts)
			mask[attno - 1] = true;
	}
	bms_free(attrs);
	return mask;
}

/* The columns an index scan node's fetches copy (see node_columns); palloc'd, never NULL */
static bool *
index_scan_mask(IndexScanState *n, int natts)
{
	IndexScan  *plan = (IndexScan *) n->ss.ps.plan;

	/*
	 * The index conditions are evaluated on the row only when the index asks for a recheck
	 * (ExecIndexScan; an EvalPlanQual recheck reads a whole row fetched otherwise): a B-tree
	 * never does, so their columns need not be copied (an index nested loop's probe would copy
	 * its join keys for every row it fetches)
	 */
	bool		lossless = n->iss_RelationDesc != NULL &&
		n->iss_RelationDesc->rd_rel->relam == BTREE_AM_OID && plan->indexorderbyorig == NIL;
	bool	   *mask = node_columns(&n->ss.ps, plan->scan.scanrelid,
									lossless ? NIL : plan->indexqualorig,
									plan->indexorderbyorig, natts);

	if (mask == NULL)
	{
		mask = palloc(sizeof(bool) * Max(natts, 1));
		memset(mask, true, sizeof(bool) * Max(natts, 1));
	}
	return mask;
}

/*
 * Runs a scan node's first ExecProcNode call with `mask` as the columns its index fetch takes
 * (and, for an index-only scan, `index_only`: am/index.rs, index_only_skipped) when the node begins
 * its index scan (PostgreSQL begins it lazily, inside that call): a
 * statement that fetches one row (most of TPC-C) copies only what it reads. The runtime keys
 * are computed first, as the node would (they may run subplans, whose own index scans must not
 * take the columns); nothing else begins an index fetch before the node's own. The pending
 * columns are withdrawn when the call returns or fails (an EvalPlanQual recheck never begins
 * the scan).
 */
static TupleTableSlot *
first_call_with_columns(PlanState *ps, ExecProcNodeMtd exec, Relation rel, bool *mask,
						int natts, bool keys_pending, bool index_only)
{
	TupleTableSlot *volatile r = NULL;

	if (keys_pending)
		ExecReScan(ps);
	scoot_index_fetch_pending_columns(RelationGetRelid(rel), mask, natts, index_only);
	PG_TRY();
	{
		r = exec(ps);
	}
	PG_FINALLY();
	{
		scoot_index_fetch_pending_columns(InvalidOid, NULL, 0, false);
	}
	PG_END_TRY();
	return r;
}

/*
 * ExecIndexScan, with the fetch's columns set when the node begins its index scan. A parallel
 * index scan is begun before the node's first call (ExecIndexScanInitializeDSM / Worker): its
 * fetch gets them after the call that finds it without them.
 */
static TupleTableSlot *
scoot_index_scan_exec(PlanState *ps)
{
	IndexScanState *n = (IndexScanState *) ps;
	TupleTableSlot *r;
	int			natts = RelationGetDescr(n->ss.ss_currentRelation)->natts;
	bool	   *mask = NULL;

	if (n->iss_ScanDesc == NULL)
	{
		mask = index_scan_mask(n, natts);
		r = first_call_with_columns(ps, index_scan_exec, n->ss.ss_currentRelation, mask, natts,
									n->iss_NumRuntimeKeys != 0 && !n->iss_RuntimeKeysReady, false);
	}
	else
		r = index_scan_exec(ps);
	if (n->iss_ScanDesc != NULL && n->iss_ScanDesc->xs_heapfetch != NULL &&
		!scoot_index_fetch_columns_set(n->iss_ScanDesc->xs_heapfetch))
	{
		if (mask == NULL)
			mask = index_scan_mask(n, natts);
		scoot_index_fetch_set_columns(n->iss_ScanDesc->xs_heapfetch, mask, natts);
	}
	if (mask != NULL)
		pfree(mask);
	return r;
}

/*
 * ExecIndexOnlyScan, with the fetch's columns (none) set when the node begins its index scan, as
 * for index scans. An index-only scan fetches a scoot row only to learn whether it is visible
 * and clears the table slot at once; its values come from the index tuple. PostgreSQL asks the
 * visibility map first, which a scoot table does not have (every entry is fetched), so once its
 * index scan has begun the fetch is marked index-only: entries whose row lies in a block VACUUM
 * found all-visible are answered from the block's horizon without reading the row
 * (am/index.rs, root_all_visible), and those answers are taken back out of the node's "Heap
 * Fetches" count, which PostgreSQL raised before asking.
 */
static TupleTableSlot *
scoot_index_only_scan_exec(PlanState *ps)
{
	IndexOnlyScanState *n = (IndexOnlyScanState *) ps;
	TupleTableSlot *r;
	int			natts = RelationGetDescr(n->ss.ss_currentRelation)->natts;
	bool	   *mask = NULL;

	if (n->ioss_ScanDesc == NULL)
	{
		mask = palloc0(sizeof(bool) * Max(natts, 1));
		r = first_call_with_columns(ps, index_only_scan_exec, n->ss.ss_currentRelation, mask,
									natts, n->ioss_NumRuntimeKeys != 0 && !n->ioss_RuntimeKeysReady,
									true);
	}
	else
		r = index_only_scan_exec(ps);
	if (n->ioss_ScanDesc != NULL && n->ioss_ScanDesc->xs_heapfetch != NULL &&
		!scoot_index_fetch_columns_set(n->ioss_ScanDesc->xs_heapfetch))
	{
		if (mask == NULL)
			mask = palloc0(sizeof(bool) * Max(natts, 1));
		scoot_index_fetch_set_columns(n->ioss_ScanDesc->xs_heapfetch, mask, natts);
	}
	if (n->ioss_ScanDesc != NULL && n->ioss_ScanDesc->xs_heapfetch != NULL)
	{
		/* marks the fetch (a parallel scan's was begun without the pending flag) */
		uint64		skipped = scoot_index_fetch_index_only(n->ioss_ScanDesc->xs_heapfetch);

		if (skipped > 0 && ps->instrument != NULL)
			ps->instrument->ntuples2 -= (double) skipped;
	}
	if (mask != NULL)
		pfree(mask);
	return r;
}

/*
 * ExecSeqScan, with the scan's columns set before it reads a row, on the node's first call:
 * PostgreSQL begins a scan that is not parallel inside that call (SeqNext), so it is begun here
 * first, the same way; a parallel one was begun by ExecSeqScanInitializeDSM / Worker. Then the
 * node runs PostgreSQL's own function directly (rescans keep the scan and its columns).
 */
static TupleTableSlot *
scoot_seq_scan_exec(PlanState *ps)
{
	SeqScanState *n = (SeqScanState *) ps;
	Relation	rel = n->ss.ss_currentRelation;
	int			natts = RelationGetDescr(rel)->natts;
	bool	   *mask;

	if (n->ss.ss_currentScanDesc == NULL)
		n->ss.ss_currentScanDesc = table_beginscan(rel, ps->state->es_snapshot, 0, NULL);
	mask = node_columns(ps, ((Scan *) ps->plan)->scanrelid, NIL, NIL, natts);
	if (mask != NULL)
	{
		scoot_seq_scan_set_columns(n->ss.ss_currentScanDesc, mask, natts);
		pfree(mask);
	}
	ps->ExecProcNodeReal = seq_scan_exec;
	if (ps->ExecProcNode == scoot_seq_scan_exec)
		ps->ExecProcNode = seq_scan_exec;
	return seq_scan_exec(ps);
}

/*
 * A ScootScan, ScootPreAgg or ScootAgg under a private Hash node writes its rows into the table
 * (hashbuild.c).
 */
static void
hash_build_candidate(HashState *h)
{
	PlanState  *child = outerPlanState(h);
	ScootHashBuild **build;

	if (child == NULL || !IsA(child, CustomScanState) || h->ps.plan->parallel_aware ||
		!scoot_hash_build_enabled())
		return;
	if (((CustomScanState *) child)->methods == &scoot_exec_methods)
		build = &((ScootScanState *) child)->build;
	else if (scoot_is_agg_state(child))
		build = &((ScootAggState *) child)->build;
	else
		return;
	*build = MemoryContextAlloc(h->ps.state->es_query_cxt, sizeof(ScootHashBuild));
	scoot_hash_build_init(*build, h);
}

/* EXPLAIN without ANALYZE: only the join filters (so that the plan shows them) */
static bool
mark_join_filters(PlanState *ps, void *context)
{
	if (ps == NULL)
		return false;
	if (IsA(ps, HashJoinState))
		join_filter_candidate(ps);
	return planstate_tree_walker(ps, mark_join_filters, context);
}

/*
 * A scan node of a scoot table runs `wrapper` (which calls PostgreSQL's own ExecProcNode
 * function for that node type, remembered in *orig) instead of it.
 */
static void
wrap_scan_exec(ScanState *ss, ExecProcNodeMtd *orig, ExecProcNodeMtd wrapper)
{
	if (ss->ss_currentRelation == NULL || !scoot_relation_is_scoot(ss->ss_currentRelation))
		return;
	if (*orig == NULL)
		*orig = ss->ps.ExecProcNodeReal;
	if (ss->ps.ExecProcNodeReal == *orig)
		ss->ps.ExecProcNodeReal = wrapper;
}

static bool
adjust_scan_nodes(PlanState *ps, void *context)
{
	if (ps == NULL)
		return false;
	if (IsA(ps, HashJoinState))
		join_filter_candidate(ps);
	else if (IsA(ps, HashState))
		hash_build_candidate((HashState *) ps);
	else if (IsA(ps, BitmapHeapScanState))
	{
		BitmapHeapScanState *b = (BitmapHeapScanState *) ps;
		Relation	rel = b->ss.ss_currentRelation;

		if (rel != NULL && scoot_relation_is_scoot(rel))
		{
			b->prefetch_maximum = 0;
			if (b->ss.ss_currentScanDesc != NULL)
			{
				BitmapHeapScan *plan = (BitmapHeapScan *) ps->plan;
				int			natts = RelationGetDescr(rel)->natts;
				bool	   *mask = node_columns(ps, plan->scan.scanrelid,
												plan->bitmapqualorig, NIL, natts);

				if (mask != NULL)
				{
					scoot_bitmap_set_columns(b->ss.ss_currentScanDesc, mask, natts);
					pfree(mask);
				}
			}
		}
	}
	else if (IsA(ps, IndexScanState))
		wrap_scan_exec((ScanState *) ps, &index_scan_exec, scoot_index_scan_exec);
	else if (IsA(ps, IndexOnlyScanState))
		wrap_scan_exec((ScanState *) ps, &index_only_scan_exec, scoot_index_only_scan_exec);
	else if (IsA(ps, SeqScanState))
		wrap_scan_exec((ScanState *) ps, &seq_scan_exec, scoot_seq_scan_exec);
	return planstate_tree_walker(ps, adjust_scan_nodes, context);
}

/*
 * Does `outer`, a hash join's outer child, prefetch that join's buckets itself (a ScootScan or
 * ScootPreAgg with a join filter)? Then the join needs no read-ahead (readahead.c).
 */
bool
scoot_node_prefetches_for(PlanState *outer, HashJoinState *hj)
{
	if (outer == NULL || !IsA(outer, CustomScanState))
		return false;
	if (((CustomScanState *) outer)->methods == &scoot_exec_methods)
		return ((ScootScanState *) outer)->probe_hj == hj;
	if (scoot_is_agg_state(outer))
		return ((ScootAggState *) outer)->probe_hj == hj;
	return false;
}

static void
scoot_scan_nodes_executor_start(QueryDesc *qd, int eflags)
{
	if (prev_executor_start)
		prev_executor_start(qd, eflags);
	else
		standard_ExecutorStart(qd, eflags);
	if (qd->planstate != NULL && !(eflags & EXEC_FLAG_EXPLAIN_ONLY))
	{
		adjust_scan_nodes(qd->planstate, NULL);
		scoot_hj_readahead_setup(qd, eflags);
		/* one reading an OLAP snapshot keeps the memory it frees (exec/memory.rs) */
		scoot_statement_started(qd);
	}
	else if (qd->planstate != NULL)
		mark_join_filters(qd->planstate, NULL);
}

/*
 * Physical target lists for ScootScans read by a join or an aggregate.
 *
 * PostgreSQL gives a custom scan the target list of the columns the query needs (it never
 * uses the "physical" one, all columns in order, for a CustomPath), so the node projects:
 * every row it returns is deformed and copied into a result slot, numerics built and all,
 * even when the join above drops it at once (a hash join probing with lineitem keeps one row
 * in a thousand in TPC-H Q17). A Seq Scan of a heap table in the same place returns its scan
 * slot and the join deforms only the key.
 *
 * After planning, a ScootScan whose target list is plain columns of its table and whose
 * parent is a join or an aggregate gets the physical target list, and the parent's references
 * to its output (OUTER_VAR / INNER_VAR by position, grouping column positions) are renumbered
 * to attribute numbers, as set_plan_references would have numbered them. The node then does
 * not project; its scan slot (a lazily deformed row of the block batch) goes to the parent,
 * which asks for the columns it reads when it reads them. The columns the query does not need
 * are NULL in that slot, and nothing reads them. Other parents (Gather, Append, Sort,
 * Material, Hash ...) need exactly the target list they were planned with: left alone.
 */
typedef struct RemapContext
{
	int			varno;			/* OUTER_VAR or INNER_VAR */
	AttrNumber *map;			/* output position - 1 -> attribute number */
	int			nmap;
} RemapContext;

static Node *
remap_mutator(Node *node, RemapContext *ctx)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var) && ((Var *) node)->varno == ctx->varno && ((Var *) node)->varlevelsup == 0)
	{
		Var		   *v = (Var *) copyObject(node);

		if (v->varattno > 0 && v->varattno <= ctx->nmap)
			v->varattno = ctx->map[v->varattno - 1];
		else
			elog(ERROR, "scoot: unexpected reference to column %d of a scan's output", v->varattno);
		return (Node *) v;
	}
	return expression_tree_mutator(node, remap_mutator, (void *) ctx);
}

#define REMAP(field, ctx) ((field) = (void *) remap_mutator((Node *) (field), (ctx)))

/* Gives `child` (of `parent`, read through `varno`) the physical target list, if it qualifies. */
static void
physical_tlist_child(PlannedStmt *stmt, Plan *parent, Plan *child, int varno)
{
	CustomScan *cs;
	RangeTblEntry *rte;
	Relation	r;
	TupleDesc	desc;
	AttrNumber *map;
	List	   *tlist = NIL;
	ListCell   *lc;
	RemapContext ctx;
	int			k = 0;
	int			i;
	bool		same = true;

	if (child == NULL || !IsA(child, CustomScan))
		return;
	cs = (CustomScan *) child;
	if (cs->methods != &scoot_scan_methods || cs->scan.scanrelid == 0 || cs->custom_scan_tlist != NIL)
		return;
	map = palloc(sizeof(AttrNumber) * Max(list_length(cs->scan.plan.targetlist), 1));
	foreach(lc, cs->scan.plan.targetlist)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);
		Var		   *v = (Var *) te->expr;

		if (!IsA(v, Var) || (Index) v->varno != cs->scan.scanrelid || v->varattno <= 0 ||
			v->varlevelsup != 0 || te->resjunk)
			return;
		map[k] = v->varattno;
		same = same && v->varattno == k + 1;
		k++;
	}
	rte = rt_fetch(cs->scan.scanrelid, stmt->rtable);
	r = table_open(rte->relid, NoLock);
	desc = RelationGetDescr(r);
	if (same && k == desc->natts)
	{
		table_close(r, NoLock);
		return;
	}
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Expr	   *e;

		if (att->attisdropped)
			e = (Expr *) makeNullConst(INT4OID, -1, InvalidOid);
		else
			e = (Expr *) makeVar(cs->scan.scanrelid, i + 1, att->atttypid, att->atttypmod,
								 att->attcollation, 0);
		tlist = lappend(tlist, makeTargetEntry(e, i + 1, NULL, false));
	}
	table_close(r, NoLock);
	cs->scan.plan.targetlist = tlist;
	{
		/* the last column the parent reads, for the node's eager copy (scoot_begin) */
		int			last = 0;

		for (i = 0; i < k; i++)
			last = Max(last, map[i]);
		cs->custom_private = lappend(list_copy(cs->custom_private), makeInteger(last));
	}

	ctx.varno = varno;
	ctx.map = map;
	ctx.nmap = k;
	REMAP(parent->targetlist, &ctx);
	REMAP(parent->qual, &ctx);
	if (IsA(parent, Agg))
	{
		Agg		   *agg = (Agg *) parent;

		for (i = 0; i < agg->numCols; i++)
			agg->grpColIdx[i] = map[agg->grpColIdx[i] - 1];
		return;
	}
	REMAP(((Join *) parent)->joinqual, &ctx);
	if (IsA(parent, NestLoop))
	{
		foreach(lc, ((NestLoop *) parent)->nestParams)
			REMAP(((NestLoopParam *) lfirst(lc))->paramval, &ctx);
	}
	else if (IsA(parent, HashJoin))
	{
		REMAP(((HashJoin *) parent)->hashclauses, &ctx);
		REMAP(((HashJoin *) parent)->hashkeys, &ctx);
	}
	else
		REMAP(((MergeJoin *) parent)->mergeclauses, &ctx);
}

static void
physical_tlists(PlannedStmt *stmt, Plan *p)
{
	ListCell   *lc;

	if (p == NULL)
		return;
	check_stack_depth();
	if (IsA(p, NestLoop) || IsA(p, HashJoin) || IsA(p, MergeJoin))
	{
		physical_tlist_child(stmt, p, p->lefttree, OUTER_VAR);
		physical_tlist_child(stmt, p, p->righttree, INNER_VAR);
	}
	else if (IsA(p, Agg) && ((Agg *) p)->groupingSets == NIL && ((Agg *) p)->chain == NIL)
		physical_tlist_child(stmt, p, p->lefttree, OUTER_VAR);
	physical_tlists(stmt, p->lefttree);
	physical_tlists(stmt, p->righttree);
	if (IsA(p, Append))
		foreach(lc, ((Append *) p)->appendplans)
			physical_tlists(stmt, lfirst(lc));
	else if (IsA(p, MergeAppend))
		foreach(lc, ((MergeAppend *) p)->mergeplans)
			physical_tlists(stmt, lfirst(lc));
	else if (IsA(p, SubqueryScan))
		physical_tlists(stmt, ((SubqueryScan *) p)->subplan);
	else if (IsA(p, CustomScan))
		foreach(lc, ((CustomScan *) p)->custom_plans)
			physical_tlists(stmt, lfirst(lc));
}

static planner_hook_type prev_planner = NULL;

/* customshare.c: grouped subqueries a statement reads twice are tagged while it is planned */
extern List *scoot_share_tag_duplicates(Query *parse);
extern void scoot_share_restore_tags(List *saved);

/* distinctagg.c: DISTINCT aggregates computed by grouping on their argument first */
extern Query *scoot_distinct_agg_rewrite(Query *parse);

/* olapparallel.c: parallel workers of statements reading OLAP snapshots yield to busy sessions */
extern int	scoot_olap_parallel_cap(Query *parse);

static PlannedStmt *
plan_statement(Query *parse, const char *query_string, int cursorOptions, ParamListInfo boundParams)
{
	PlannedStmt *volatile stmt;
	ListCell   *lc;

	List	   *saved_tags;
	int			saved_workers = max_parallel_workers_per_gather;
	int			cap = scoot_olap_parallel_cap(parse);

	saved_tags = scoot_share_tag_duplicates(parse);
	PG_TRY();
	{
		if (cap >= 0)
			max_parallel_workers_per_gather = cap;
		if (prev_planner)
			stmt = prev_planner(parse, query_string, cursorOptions, boundParams);
		else
			stmt = standard_planner(parse, query_string, cursorOptions, boundParams);
	}
	PG_FINALLY();
	{
		scoot_share_restore_tags(saved_tags);
		max_parallel_workers_per_gather = saved_workers;
	}
	PG_END_TRY();
	if (stmt->commandType == CMD_SELECT && scoot_custom_scan_enabled())
	{
		physical_tlists(stmt, stmt->planTree);
		foreach(lc, stmt->subplans)
			physical_tlists(stmt, lfirst(lc));
	}
	return stmt;
}

static PlannedStmt *
scoot_planner(Query *parse, const char *query_string, int cursorOptions, ParamListInfo boundParams)
{
	return plan_statement(scoot_distinct_agg_rewrite(parse), query_string, cursorOptions,
						  boundParams);
}

/*
 * Costing the join filter.
 *
 * PostgreSQL costs the two ways round of a hash join over tables of 1.5M and 30k rows about
 * the same (a row hashed into the table costs as much as a row looked up in it), and keeps
 * the first: often the big table ends up hashed (TPC-H Q12 builds a 92 MB table of every order
 * to probe it with 31k lineitem rows). In truth the way round with a ScootScan on the probing
 * side is far cheaper: its join filter drops the rows that cannot match before they are
 * formed, and the table stays small. So for each way round where the outer side is a base
 * scoot relation whose ScootScan the join filter can serve (inner, semi or right join; every
 * hash key a plain int2/int4/int8/date column hashed by hashint2/4/8; no volatile function in
 * the scan's clauses), this adds the hash join path with that ScootScan as outer, costed by
 * PostgreSQL's own hash join costing as if the scan returned only the rows the filter lets
 * through: those expected to find a partner (at most the join's rows), 2% of the others (the
 * Bloom filter's false positives), and all rows of batches not in memory. The dropped rows
 * save the scan cpu_tuple_cost each and the join their hashing and bucket walk. A path the
 * filter would not pay for (under 1/8 of the rows dropped) is left as PostgreSQL costs it.
 * `scoot.join_filter = off` turns this off with the filter.
 */
static set_join_pathlist_hook_type prev_set_join_pathlist = NULL;

/* The unparameterized ScootScan path in `paths` (parallel-aware ones for a partial list). */
static CustomPath *
scoot_scan_path_in(List *paths, bool partial)
{
	ListCell   *lc;

	foreach(lc, paths)
	{
		Path	   *p = (Path *) lfirst(lc);

		if (IsA(p, CustomPath) && ((CustomPath *) p)->methods == &scoot_path_methods &&
			p->param_info == NULL && p->parallel_aware == partial)
			return (CustomPath *) p;
	}
	return NULL;
}

/* The column number of `e` if it is a plain column of `rel` (under any relabeling), else 0. */
static AttrNumber
rel_column(Expr *e, RelOptInfo *rel)
{
	while (IsA(e, RelabelType))
		e = ((RelabelType *) e)->arg;
	if (IsA(e, Var) && ((Var *) e)->varno == (int) rel->relid && ((Var *) e)->varlevelsup == 0 &&
		((Var *) e)->varattno > 0)
		return ((Var *) e)->varattno;
	return 0;
}

/*
 * Is `e` (the outer side of a hash clause) a column of `rel` the join filter can hash, or an
 * integer expression over its columns it can compute (compile_join_key)?
 */
static bool
join_filter_key(Expr *e, RelOptInfo *rel, Oid hashop)
{
	RegProcedure lproc,
				rproc;
	int64		prog[2 + 3 * SCOOT_KEY_MAX_TOKENS];
	int			len = 0;

	if (compile_join_key(e, rel->relid, prog, lengthof(prog), &len) == 0)
		return false;
	if (!get_op_hash_functions(hashop, &lproc, &rproc))
		return false;
	/* the function for this side: the operator's left input is its first argument */
	return (lproc == F_HASHINT2 || lproc == F_HASHINT4 || lproc == F_HASHINT8) &&
		(rproc == F_HASHINT2 || rproc == F_HASHINT4 || rproc == F_HASHINT8);
}

/*
 * Adds the hash join of `outer` (a ScootScan path) and `inner`, costed as if the scan returned
 * only the rows its join filter lets through: `share` of them are dropped (divided by the
 * number of batches: rows of batches on disk pass; a multi-batch Parallel Hash partitions its
 * outer side before any table exists, so nothing is dropped there). A partial path when
 * `partial`.
 */
static void
add_filtered_hashjoin(PlannerInfo *root, RelOptInfo *joinrel, JoinType jointype,
					  JoinPathExtraData *extra, List *hashclauses, CustomPath *outer, Path *inner,
					  double share, bool parallel_hash, bool partial)
{
	JoinCostWorkspace ws;
	CustomPath	fake;
	HashPath   *hp;
	double		rows = outer->path.rows;
	double		dropped;

	initial_cost_hashjoin(root, &ws, jointype, hashclauses, &outer->path, inner, extra,
						  parallel_hash);
	if (parallel_hash && ws.numbatches > 1)
		return;
	dropped = rows * share / Max(ws.numbatches, 1);
	if (dropped * 8 < rows)
		return;

	/*
	 * Cost the join as PostgreSQL does, but with an outer side that hands it only the rows
	 * that pass the filter (the dropped ones cost the scan no tuple and the join no hashing or
	 * bucket walk), then give the path the real scan.
	 */
	fake = *outer;
	fake.path.rows = rows - dropped;
	fake.path.total_cost = Max(fake.path.startup_cost,
							   fake.path.total_cost - dropped * cpu_tuple_cost);
	initial_cost_hashjoin(root, &ws, jointype, hashclauses, &fake.path, inner, extra,
						  parallel_hash);
	if (partial && !add_partial_path_precheck(joinrel, ws.total_cost, NIL))
		return;
	hp = create_hashjoin_path(root, joinrel, jointype, &ws, extra, &fake.path, inner,
							  parallel_hash, extra->restrictlist, NULL, hashclauses);
	hp->jpath.outerjoinpath = &outer->path;
	if (partial)
		add_partial_path(joinrel, (Path *) hp);
	else
		add_path(joinrel, (Path *) hp);
}

/*
 * Memoize nodes that can never hit.
 *
 * A nested loop may cache its parameterized inner scan in a Memoize node, costed by the number
 * of distinct cache keys PostgreSQL expects among the outer rows. For keys that are several
 * columns of one table, estimate_num_groups clamps that number to a tenth of the table's rows
 * ("the Vars are probably correlated"), even when the columns are a unique key of the table:
 * a nested loop over the 30,000 rows of TPC-C's orders, probing order_line by the order's
 * primary key (CH-benCHmark Q10, Q12, Q18), is costed as if 90% of the probes were cache hits.
 * None is: each probe misses, and the Memoize node copies every inner row into its cache and
 * evicts it again (Q12: 300 ms with the Memoize node, 100 ms without it). Where the inner scan
 * is of a scoot table and the cache keys provably differ on every outer row (they cover the
 * columns of a unique index of a base relation whose rows the outer side returns at most
 * once each), the nested loop here probes the inner scan directly. Its cost stays what
 * PostgreSQL computed (results are the same either way; only the useless cache goes).
 * `scoot.custom_scan = off` keeps PostgreSQL's plan.
 */

/* Do the plain Vars of `rel` among `exprs` cover the key columns of one of its unique indexes? */
static bool
covers_unique_index(RelOptInfo *rel, List *exprs)
{
	Bitmapset  *attrs = NULL;
	ListCell   *lc;

	foreach(lc, exprs)
	{
		AttrNumber	a = rel_column((Expr *) lfirst(lc), rel);

		if (a > 0)
			attrs = bms_add_member(attrs, a);
	}
	if (attrs == NULL)
		return false;
	/* columns the relation's own restrictions fix to one value ("w = 1") vary with no key */
	foreach(lc, rel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		OpExpr	   *op = (OpExpr *) ri->clause;
		Expr	   *l,
				   *r;
		AttrNumber	a;

		if (!IsA(op, OpExpr) || list_length(op->args) != 2 ||
			get_mergejoin_opfamilies(op->opno) == NIL)
			continue;
		l = linitial(op->args);
		r = lsecond(op->args);
		if (rel_column(l, rel) == 0)
		{
			Expr	   *t = l;

			l = r;
			r = t;
		}
		while (IsA(r, RelabelType))
			r = ((RelabelType *) r)->arg;
		a = rel_column(l, rel);
		if (a > 0 && (IsA(r, Const) || IsA(r, Param)))
			attrs = bms_add_member(attrs, a);
	}
	foreach(lc, rel->indexlist)
	{
		IndexOptInfo *ix = (IndexOptInfo *) lfirst(lc);
		int			i;

		if (!ix->unique || ix->hypothetical || (ix->indpred != NIL && !ix->predOK))
			continue;
		for (i = 0; i < ix->nkeycolumns; i++)
			if (ix->indexkeys[i] <= 0 || !bms_is_member(ix->indexkeys[i], attrs))
				break;
		if (i == ix->nkeycolumns)
			return true;
	}
	return false;
}

static bool returns_rel_rows_once(PlannerInfo *root, Path *path, Index relid);

/*
 * Does each row of one side of `jp` (`of_outer`: the outer side) meet at most one row of the
 * other side? It does when the join's equality clauses (with those the inner scan takes as
 * parameters) equate values of that side to the columns of a unique index of a base relation
 * of the other side, and the other side returns each row of that relation at most once.
 */
static bool
matches_once(PlannerInfo *root, JoinPath *jp, bool of_outer)
{
	Path	   *other = of_outer ? jp->innerjoinpath : jp->outerjoinpath;
	Relids		this_relids = (of_outer ? jp->outerjoinpath : jp->innerjoinpath)->parent->relids;
	Relids		other_relids = other->parent->relids;
	List	   *clauses = jp->joinrestrictinfo;
	List	   *keys = NIL;
	ListCell   *lc;
	int			relid = -1;

	if (jp->innerjoinpath->param_info != NULL)
		clauses = list_concat_copy(clauses, jp->innerjoinpath->param_info->ppi_clauses);
	foreach(lc, clauses)
	{
		RestrictInfo *ri = (RestrictInfo *) lfirst(lc);

		if (!ri->can_join || (ri->mergeopfamilies == NIL && !OidIsValid(ri->hashjoinoperator)))
			continue;
		if (bms_is_subset(ri->left_relids, this_relids) &&
			bms_is_subset(ri->right_relids, other_relids))
			keys = lappend(keys, get_rightop(ri->clause));
		else if (bms_is_subset(ri->left_relids, other_relids) &&
				 bms_is_subset(ri->right_relids, this_relids))
			keys = lappend(keys, get_leftop(ri->clause));
	}
	if (keys == NIL)
		return false;
	while ((relid = bms_next_member(other_relids, relid)) >= 0)
	{
		RelOptInfo *rel = root->simple_rel_array[relid];

		if (rel != NULL && rel->reloptkind == RELOPT_BASEREL && covers_unique_index(rel, keys) &&
			returns_rel_rows_once(root, other, relid))
			return true;
	}
	return false;
}

/* Does `path` return each row of base relation `relid` at most once? */
static bool
returns_rel_rows_once(PlannerInfo *root, Path *path, Index relid)
{
	for (;;)
	{
		if (path->parent->reloptkind == RELOPT_BASEREL)
			return path->parent->relid == relid;
		if (IsA(path, NestPath) || IsA(path, HashPath) || IsA(path, MergePath))
		{
			JoinPath   *jp = (JoinPath *) path;

			if (bms_is_member(relid, jp->outerjoinpath->parent->relids))
			{
				/* an outer row comes out once per inner row it meets (once if none) */
				if (!(jp->jointype == JOIN_SEMI || jp->jointype == JOIN_ANTI ||
					  ((jp->jointype == JOIN_INNER || jp->jointype == JOIN_LEFT) &&
					   (jp->inner_unique || matches_once(root, jp, true)))))
					return false;
				path = jp->outerjoinpath;
			}
			else if (bms_is_member(relid, jp->innerjoinpath->parent->relids))
			{
				/* an inner row comes out once per outer row it meets */
				if (jp->jointype != JOIN_INNER || !matches_once(root, jp, false))
					return false;
				path = jp->innerjoinpath;
			}
			else
				return false;
		}
		else if (IsA(path, MaterialPath))
			path = ((MaterialPath *) path)->subpath;
		else if (IsA(path, MemoizePath))
			path = ((MemoizePath *) path)->subpath;
		else if (IsA(path, SortPath) || IsA(path, IncrementalSortPath))
			path = ((SortPath *) path)->subpath;
		else if (IsA(path, ProjectionPath))
			path = ((ProjectionPath *) path)->subpath;
		else if (IsA(path, GatherPath))
			path = ((GatherPath *) path)->subpath;
		else if (IsA(path, GatherMergePath))
			path = ((GatherMergePath *) path)->subpath;
		else
			return false;
	}
}

/* Is `p` a nested loop whose inner side is a Memoize over a scoot scan that cannot hit? */
static bool
memoize_never_hits(PlannerInfo *root, Path *p)
{
	NestPath   *np;
	MemoizePath *mp;
	RelOptInfo *inner;
	RangeTblEntry *rte;
	Relation	r;
	bool		is_scoot;
	int			relid;

	if (!IsA(p, NestPath))
		return false;
	np = (NestPath *) p;
	if (!IsA(np->jpath.innerjoinpath, MemoizePath))
		return false;
	mp = (MemoizePath *) np->jpath.innerjoinpath;
	inner = mp->subpath->parent;
	if (inner->reloptkind != RELOPT_BASEREL)
		return false;
	rte = planner_rt_fetch(inner->relid, root);
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION)
		return false;
	r = table_open(rte->relid, NoLock);
	is_scoot = scoot_relation_is_scoot(r);
	table_close(r, NoLock);
	if (!is_scoot)
		return false;
	relid = -1;
	while ((relid = bms_next_member(np->jpath.outerjoinpath->parent->relids, relid)) >= 0)
	{
		RelOptInfo *rel = root->simple_rel_array[relid];

		if (rel != NULL && rel->reloptkind == RELOPT_BASEREL &&
			covers_unique_index(rel, mp->param_exprs) &&
			returns_rel_rows_once(root, np->jpath.outerjoinpath, relid))
			return true;
	}
	return false;
}

/* Takes the Memoize node out of every nested loop of `paths` that would never hit it. */
static void
drop_useless_memoize(PlannerInfo *root, List *paths)
{
	ListCell   *lc;

	foreach(lc, paths)
	{
		Path	   *p = (Path *) lfirst(lc);

		if (memoize_never_hits(root, p))
			((NestPath *) p)->jpath.innerjoinpath =
				((MemoizePath *) ((NestPath *) p)->jpath.innerjoinpath)->subpath;
	}
}

/*
 * Is `ri` a hash clause of the join of `outerrel` and `innerrel`, as hash_inner_and_outer picks
 * them (hashable, one side from each relation, not an outer join's pushed-down qual)? Then
 * marks which side is the outer one and returns both sides' expressions (either may be NULL).
 */
bool
scoot_hash_clause_sides(RestrictInfo *ri, RelOptInfo *joinrel, RelOptInfo *outerrel,
						RelOptInfo *innerrel, JoinType jointype, Expr **outer_side,
						Expr **inner_side)
{
	if (IS_OUTER_JOIN(jointype) && RINFO_IS_PUSHED_DOWN(ri, joinrel->relids))
		return false;
	if (!ri->can_join || ri->hashjoinoperator == InvalidOid)
		return false;
	if (bms_is_subset(ri->left_relids, outerrel->relids) &&
		bms_is_subset(ri->right_relids, innerrel->relids))
		ri->outer_is_left = true;
	else if (bms_is_subset(ri->left_relids, innerrel->relids) &&
			 bms_is_subset(ri->right_relids, outerrel->relids))
		ri->outer_is_left = false;
	else
		return false;
	if (outer_side)
		*outer_side = (Expr *) (ri->outer_is_left ? get_leftop(ri->clause) : get_rightop(ri->clause));
	if (inner_side)
		*inner_side = (Expr *) (ri->outer_is_left ? get_rightop(ri->clause) : get_leftop(ri->clause));
	return true;
}

/* The hash joins with a join filter on their outer ScootScan (see "Costing the join filter"). */
static void
join_filter_paths(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *outerrel,
				  RelOptInfo *innerrel, JoinType jointype, JoinPathExtraData *extra)
{
	CustomPath *outer;
	Path	   *inner;
	List	   *hashclauses = NIL;
	ListCell   *lc;
	double		outer_rows,
				matched,
				share;

	if (!scoot_join_filter_enabled() || !enable_hashjoin)
		return;
	if (!(jointype == JOIN_INNER || jointype == JOIN_SEMI || jointype == JOIN_RIGHT))
		return;
	if (outerrel->reloptkind != RELOPT_BASEREL || outerrel->lateral_relids != NULL ||
		innerrel->cheapest_total_path == NULL)
		return;
	outer = scoot_scan_path_in(outerrel->pathlist, false);
	inner = innerrel->cheapest_total_path;
	if (outer == NULL || inner->param_info != NULL ||
		contain_volatile_functions((Node *) outerrel->baserestrictinfo) ||
		contain_volatile_functions((Node *) outerrel->reltarget->exprs))
		return;
	foreach(lc, extra->restrictlist)
	{
		RestrictInfo *ri = (RestrictInfo *) lfirst(lc);
		Expr	   *outer_side;

		if (!scoot_hash_clause_sides(ri, joinrel, outerrel, innerrel, jointype, &outer_side, NULL))
			continue;
		if (!join_filter_key(outer_side, outerrel, ri->hashjoinoperator))
			return;				/* the filter needs every key (the join hashes them all) */
		hashclauses = lappend(hashclauses, ri);
	}
	if (hashclauses == NIL || list_length(hashclauses) > SCOOT_JOIN_FILTER_MAX_KEYS)
		return;
	outer_rows = outer->path.rows;
	matched = Min(outer_rows, joinrel->rows);
	share = outer_rows > 0 ? (outer_rows - matched) * 0.98 / outer_rows : 0;
	add_filtered_hashjoin(root, joinrel, jointype, extra, hashclauses, outer, inner, share,
						  false, false);

	/* the same for partial paths (PostgreSQL's own rules: inner and semi joins) */
	if (!joinrel->consider_parallel || !(jointype == JOIN_INNER || jointype == JOIN_SEMI) ||
		!bms_is_empty(joinrel->lateral_relids))
		return;
	outer = scoot_scan_path_in(outerrel->partial_pathlist, true);
	if (outer == NULL)
		return;
	if (enable_parallel_hash && innerrel->partial_pathlist != NIL)
	{
		Path	   *pin = (Path *) linitial(innerrel->partial_pathlist);

		if (pin->param_info == NULL && pin->parallel_safe)
			add_filtered_hashjoin(root, joinrel, jointype, extra, hashclauses, outer, pin, share,
								  true, true);
	}
	if (inner->parallel_safe)
		add_filtered_hashjoin(root, joinrel, jointype, extra, hashclauses, outer, inner, share,
							  false, true);
}

static void
scoot_set_join_pathlist(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *outerrel,
						RelOptInfo *innerrel, JoinType jointype, JoinPathExtraData *extra)
{
	List	   *buckets;

	if (prev_set_join_pathlist)
		prev_set_join_pathlist(root, joinrel, outerrel, innerrel, jointype, extra);
	if (!scoot_custom_scan_enabled())
		return;
	drop_useless_memoize(root, joinrel->pathlist);
	drop_useless_memoize(root, joinrel->partial_pathlist);
	/* hash joins onto a ScootPreAgg inner side, with its buckets' true size (custompreagg.c) */
	buckets = scoot_preagg_hash_join(root, joinrel, outerrel, innerrel, jointype, extra);
	join_filter_paths(root, joinrel, outerrel, innerrel, jointype, extra);
	scoot_preagg_restore_buckets(buckets);
}

void
scoot_install_custom_scan(void)
{
	RegisterCustomScanMethods(&scoot_scan_methods);
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = scoot_scan_nodes_executor_start;
	prev_set_rel_pathlist = set_rel_pathlist_hook;
	set_rel_pathlist_hook = scoot_set_rel_pathlist;
	prev_set_join_pathlist = set_join_pathlist_hook;
	set_join_pathlist_hook = scoot_set_join_pathlist;
	prev_planner = planner_hook;
	planner_hook = scoot_planner;
}
