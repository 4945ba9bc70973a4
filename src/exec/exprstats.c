/*
 * Expression statistics for scoot tables (planner hooks): the number of distinct values and the
 * null fraction of an expression over one scoot table that a query compares by equality, so that
 * PostgreSQL estimates such joins from the data instead of its default.
 *
 * PostgreSQL knows the distinct values of columns (ANALYZE) but not of an expression of them
 * unless a user creates an expression index or extended statistics on exactly that expression.
 * Without them it assumes 200 distinct values, and a join on the expression gets a selectivity of
 * 1/200. CH-benCHmark Q5, Q7 and Q8 join customer to nation on `ascii(substr(c_state, 1, 1)) -
 * 65 = n_nationkey`: 26 distinct values, so every estimate above that join is 8 times too low,
 * and the planner picks index nested loops over order_line and stock that run 2-4 times slower
 * than the hash joins it would pick knowing the real count (`CREATE STATISTICS ... ON (expr)` on
 * the table gives those plans too).
 *
 * When the planner builds a scoot table's relation (get_relation_info_hook), every expression of
 * that table alone that the query's WHERE / JOIN clauses compare with `=` (built-in immutable
 * functions and operators only) gets its statistics: computed once per backend from the rows
 * (every row up to 30,000; up to 120,000 rows each row with the probability that samples about
 * 30,000; above that ANALYZE's block sampling of about 30,000 rows; fixed seeds: distinct values
 * counted by sorting, scaled to the table with the Duj1 estimator ANALYZE uses) and kept until the
 * table's row count changes by a fifth. They reach the estimator the way an expression index's
 * statistics do: a hypothetical index on the expression that no path can use (no operator
 * family, no scan support) is added to the relation, and get_index_stats_hook hands over a
 * pg_statistic row with the null fraction, width and distinct count. An expression whose
 * evaluation fails on some row (an overflow, a division by zero) gets no statistics: it is
 * evaluated in a subtransaction, and a cancel is passed on. A serializable transaction samples
 * nothing (the sample's scan would take a relation-wide predicate lock).
 */
#include "postgres.h"

#include <math.h>

#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_statistic.h"
#include "common/pg_prng.h"
#include "executor/executor.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "optimizer/plancat.h"
#include "parser/parsetree.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sampling.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "utils/selfuncs.h"
#include "utils/snapmgr.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

/* Rust side (src/exec/mod.rs) */
extern bool scoot_expression_stats_enabled(void);
extern bool scoot_relation_is_scoot(Relation rel);
extern void scoot_scan_set_columns(TableScanDesc scan, const bool *mask, int natts);
/* src/exec/samplecache.rs: samples shared by all backends */
extern bool scoot_sample_fresh(double made_for, double tuples);
extern bool scoot_sample_cache_get(int kind, Relation rel, const char *key, double tuples,
								   double *made_for, double *vals);
extern void scoot_sample_cache_put(int kind, Relation rel, const char *key, double tuples,
								   const double *vals);
#define SAMPLE_CACHE_EXPR 1

void		scoot_install_expr_stats(void);

static get_relation_info_hook_type prev_relation_info = NULL;
static get_index_stats_hook_type prev_index_stats = NULL;

#define SAMPLE_ROWS 30000
#define MAX_CACHED 256
/* Hypothetical index OIDs: from the top of the OID space down, one per cached expression. */
#define FAKE_OID_BASE ((Oid) 0xFFFFFF00)

/* One expression's statistics (backend memory, TopMemoryContext). */
typedef struct ExprStat
{
	Oid			relid;
	char	   *expr;			/* expr_key of the expression */
	double		tuples;			/* the table's row count when sampled */
	Oid			fake_oid;
	HeapTuple	stat;			/* a pg_statistic row, or NULL: none (evaluation failed) */
} ExprStat;

static ExprStat cached[MAX_CACHED];
static int	ncached = 0;

static bool
builtin_function(Oid func, void *context)
{
	return func >= FirstNormalObjectId;
}

/*
 * Does `node` call a function that is not built in, or read anything but the row's columns and
 * constants (a parameter: a lateral or outer reference, or $n; a placeholder; a sublink or
 * subplan; an aggregate or window function)?
 */
static bool
not_sampleable_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param) || IsA(node, PlaceHolderVar) || IsA(node, SubLink) ||
		IsA(node, SubPlan) || IsA(node, AlternativeSubPlan) || IsA(node, CurrentOfExpr) ||
		IsA(node, NextValueExpr) || IsA(node, Aggref) || IsA(node, WindowFunc) ||
		IsA(node, GroupingFunc))
		return true;
	if (IsA(node, Var) && (((Var *) node)->varlevelsup != 0 || ((Var *) node)->varattno <= 0))
		return true;
	if (check_functions_in_node(node, builtin_function, NULL))
		return true;
	return expression_tree_walker(node, not_sampleable_walker, context);
}

/* Is `e` (relabelings stripped) an expression of relation `relid` alone that may be sampled? */
static bool
candidate(Node *e, Index relid)
{
	Relids		varnos;

	if (e == NULL || IsA(e, Var) || IsA(e, Const) || IsA(e, Param) ||
		contain_mutable_functions(e) || not_sampleable_walker(e, NULL))
		return false;
	varnos = pull_varnos(NULL, e);
	return bms_membership(varnos) == BMS_SINGLETON && bms_is_member(relid, varnos);
}

/* The equality clauses' expressions of relation `relid` (no duplicates). */
static void
collect(Node *quals, Index relid, List **out)
{
	ListCell   *lc;

	if (quals == NULL)
		return;
	if (IsA(quals, List))
	{
		foreach(lc, (List *) quals)
			collect(lfirst(lc), relid, out);
		return;
	}
	if (IsA(quals, BoolExpr) && ((BoolExpr *) quals)->boolop == AND_EXPR)
	{
		collect((Node *) ((BoolExpr *) quals)->args, relid, out);
		return;
	}
	if (IsA(quals, OpExpr) && list_length(((OpExpr *) quals)->args) == 2 &&
		(op_mergejoinable(((OpExpr *) quals)->opno, exprType(linitial(((OpExpr *) quals)->args))) ||
		 op_hashjoinable(((OpExpr *) quals)->opno, exprType(linitial(((OpExpr *) quals)->args)))))
	{
		foreach(lc, ((OpExpr *) quals)->args)
		{
			Node	   *e = lfirst(lc);

			while (IsA(e, RelabelType))
				e = (Node *) ((RelabelType *) e)->arg;
			if (candidate(e, relid) && !list_member(*out, e))
				*out = lappend(*out, e);
		}
	}
}

static void
collect_jointree(Node *jt, Index relid, List **out)
{
	ListCell   *lc;

	if (jt == NULL)
		return;
	if (IsA(jt, FromExpr))
	{
		foreach(lc, ((FromExpr *) jt)->fromlist)
			collect_jointree(lfirst(lc), relid, out);
		collect(((FromExpr *) jt)->quals, relid, out);
	}
	else if (IsA(jt, JoinExpr))
	{
		collect_jointree(((JoinExpr *) jt)->larg, relid, out);
		collect_jointree(((JoinExpr *) jt)->rarg, relid, out);
		collect(((JoinExpr *) jt)->quals, relid, out);
	}
}

/* Evaluates `es` on the row in `slot`, counting it and feeding a non-null value to `ts`. */
static void
add_value(ExprState *es, ExprContext *econtext, TupleTableSlot *slot, Tuplesortstate *ts,
		  int16 typlen, int64 *n, int64 *nulls, double *total_width)
{
	Datum		v;
	bool		isnull;

	econtext->ecxt_scantuple = slot;
	v = ExecEvalExprSwitchContext(es, econtext, &isnull);
	if (isnull)
		(*nulls)++;
	else
	{
		(*n)++;
		*total_width += typlen > 0 ? (double) typlen :
			typlen == -1 ? (double) VARSIZE_ANY(DatumGetPointer(v)) :
			(double) strlen(DatumGetCString(v)) + 1;
		tuplesort_putdatum(ts, v, false);
	}
	ResetExprContext(econtext);
}

/*
 * Samples `e` over `rel`: fills the null fraction, average width, distinct count (> 0) or
 * fraction (< 0). False if the type cannot be sorted.
 */
static bool
sample(Relation rel, Expr *e, double tuples, float4 *nullfrac, int32 *width, float4 *distinct)
{
	Oid			typ = exprType((Node *) e);
	Oid			coll = exprCollation((Node *) e);
	TypeCacheEntry *tc = lookup_type_cache(typ, TYPECACHE_LT_OPR | TYPECACHE_EQ_OPR_FINFO);
	EState	   *estate;
	ExprContext *econtext;
	ExprState  *es;
	TupleTableSlot *slot;
	TableScanDesc scan;
	Tuplesortstate *ts;
	TupleDesc	desc = RelationGetDescr(rel);
	bool	   *mask;
	Bitmapset  *attrs = NULL;
	int			k = -1;
	int64		seen = 0,
				n = 0,
				nulls = 0,
				d = 0,
				f1 = 0,
				run = 0;
	double		p = tuples > SAMPLE_ROWS ? SAMPLE_ROWS / tuples : 1.0,
				total_width = 0;
	pg_prng_state rng;
	bool		complete;
	int16		typlen;
	bool		typbyval;
	Datum		prev = (Datum) 0;
	bool		have_prev = false;
	Datum		v;
	bool		isnull;

	if (!OidIsValid(tc->lt_opr) || !OidIsValid(tc->eq_opr_finfo.fn_oid))
		return false;
	get_typlenbyval(typ, &typlen, &typbyval);

	estate = CreateExecutorState();
	econtext = GetPerTupleExprContext(estate);
	es = ExecPrepareExpr(e, estate);
	slot = table_slot_create(rel, NULL);
	ts = tuplesort_begin_datum(typ, tc->lt_opr, coll, false, work_mem, NULL, TUPLESORT_NONE);
	if (tuples <= 4 * SAMPLE_ROWS)
	{
		/* a small table: a scan of the expression's columns, each row with probability p */
		scan = table_beginscan(rel, GetActiveSnapshot(), 0, NULL);
		pull_varattnos((Node *) e, ((Var *) linitial(pull_var_clause((Node *) e, 0)))->varno, &attrs);
		mask = palloc0(sizeof(bool) * Max(desc->natts, 1));
		while ((k = bms_next_member(attrs, k)) >= 0)
		{
			int			attno = k + FirstLowInvalidHeapAttributeNumber;

			if (attno > 0 && attno <= desc->natts)
				mask[attno - 1] = true;
		}
		scoot_scan_set_columns(scan, mask, desc->natts);
		/* a fixed seed: the same rows give the same statistics */
		pg_prng_seed(&rng, 0x5c007);
		while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			CHECK_FOR_INTERRUPTS();
			seen++;
			if (p < 1.0 && pg_prng_double(&rng) >= p)
				continue;
			add_value(es, econtext, slot, ts, typlen, &n, &nulls, &total_width);
		}
		complete = p >= 1.0;
	}
	else
	{
		/*
		 * a large table: ANALYZE's block sampling (TID pages chosen at random from a fixed seed)
		 * of about SAMPLE_ROWS rows, so that the work does not grow with the table
		 */
		BlockNumber nblocks = RelationGetNumberOfBlocks(rel);
		double		per_block = tuples / Max(nblocks, 1);
		BlockSamplerData bs;
		TransactionId oldest = GetOldestNonRemovableTransactionId(rel);
		double		live = 0,
					dead = 0;

		BlockSampler_Init(&bs, nblocks, (int) Min((double) nblocks, ceil(SAMPLE_ROWS / Max(per_block, 1.0))),
						  0x5c007);
		scan = table_beginscan_analyze(rel);
		while (BlockSampler_HasMore(&bs))
		{
			BlockNumber blk = BlockSampler_Next(&bs);

			CHECK_FOR_INTERRUPTS();
			if (!table_scan_analyze_next_block(scan, blk, NULL))
				continue;
			while (table_scan_analyze_next_tuple(scan, oldest, &live, &dead, slot))
			{
				seen++;
				add_value(es, econtext, slot, ts, typlen, &n, &nulls, &total_width);
			}
		}
		complete = false;
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);

	tuplesort_performsort(ts);
	while (tuplesort_getdatum(ts, true, &v, &isnull, NULL))
	{
		if (!have_prev ||
			!DatumGetBool(FunctionCall2Coll(&tc->eq_opr_finfo, coll, prev, v)))
		{
			if (run == 1)
				f1++;
			d++;
			run = 0;
			if (have_prev && !typbyval)
				pfree(DatumGetPointer(prev));
			prev = v;
			have_prev = true;
		}
		else if (!typbyval)
			pfree(DatumGetPointer(v));
		run++;
	}
	if (run == 1)
		f1++;
	tuplesort_end(ts);
	FreeExecutorState(estate);

	*nullfrac = (n + nulls) > 0 ? (float4) nulls / (n + nulls) : 0;
	*width = n > 0 ? (int32) (total_width / n) : Max(typlen, 4);
	if (n == 0)
		*distinct = 0;
	else if (complete)
		*distinct = d;			/* every row */
	else
	{
		/* Duj1 (Haas and Stokes), as ANALYZE estimates a column's distinct values */
		double		total = Max(tuples, (double) seen) * (1 - *nullfrac);
		double		est = f1 == 0 ? d : (double) n * d / ((double) (n - f1) + (double) f1 * n / total);

		est = Min(Max(est, (double) d), total);
		*distinct = (float4) floor(est + 0.5);
	}
	/* as ANALYZE stores it: a fraction of the rows when it grows with the table */
	if (*distinct > 0.1 * Max(tuples, 1.0))
		*distinct = -Min(1.0, *distinct / Max(tuples, 1.0));
	return true;
}

/* A pg_statistic row carrying these statistics (no slots), in TopMemoryContext. */
static HeapTuple
stat_tuple(Oid relid, float4 nullfrac, int32 width, float4 distinct)
{
	Relation	sd = table_open(StatisticRelationId, AccessShareLock);
	Datum		values[Natts_pg_statistic];
	bool		nulls[Natts_pg_statistic];
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	HeapTuple	t;

	memset(values, 0, sizeof(values));
	memset(nulls, false, sizeof(nulls));
	values[Anum_pg_statistic_starelid - 1] = ObjectIdGetDatum(relid);
	values[Anum_pg_statistic_staattnum - 1] = Int16GetDatum(1);
	values[Anum_pg_statistic_stainherit - 1] = BoolGetDatum(false);
	values[Anum_pg_statistic_stanullfrac - 1] = Float4GetDatum(nullfrac);
	values[Anum_pg_statistic_stawidth - 1] = Int32GetDatum(width);
	values[Anum_pg_statistic_stadistinct - 1] = Float4GetDatum(distinct);
	for (int i = 0; i < STATISTIC_NUM_SLOTS; i++)
	{
		values[Anum_pg_statistic_stakind1 - 1 + i] = Int16GetDatum(0);
		values[Anum_pg_statistic_staop1 - 1 + i] = ObjectIdGetDatum(InvalidOid);
		values[Anum_pg_statistic_stacoll1 - 1 + i] = ObjectIdGetDatum(InvalidOid);
		nulls[Anum_pg_statistic_stanumbers1 - 1 + i] = true;
		nulls[Anum_pg_statistic_stavalues1 - 1 + i] = true;
	}
	t = heap_form_tuple(RelationGetDescr(sd), values, nulls);
	MemoryContextSwitchTo(old);
	table_close(sd, AccessShareLock);
	return t;
}

/*
 * The key of expression `e` in the caches: its nodeToString without what differs between two
 * queries that compare the same expression of the same table (the token positions, the table's
 * range table index).
 */
static char *
expr_key(Expr *e)
{
	char	   *in = nodeToString(e);
	StringInfoData out;
	char	   *p = in;

	initStringInfo(&out);
	while (*p)
	{
		if (strncmp(p, " :location ", 11) == 0 || strncmp(p, " :varno ", 8) == 0 ||
			strncmp(p, " :varnosyn ", 11) == 0)
		{
			/* the field name stays, its number goes */
			const char *num = strchr(p + 2, ' ') + 1;

			appendBinaryStringInfo(&out, p, num - p);
			p = (char *) num;
			if (*p == '-')
				p++;
			while (*p >= '0' && *p <= '9')
				p++;
			continue;
		}
		appendStringInfoChar(&out, *p++);
	}
	pfree(in);
	return out.data;
}

/* The statistics of `e` over `rel` (cached), or NULL. */
static ExprStat *
stats_for(Relation rel, Expr *e, double tuples)
{
	char	   *key = expr_key(e);
	ExprStat   *s = NULL;
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	float4		nullfrac = 0,
				distinct = 0;
	int32		width = 0;
	bool		ok = false;
	bool		shared;
	double		made_for = 0;
	double		vals[4];

	for (int i = 0; i < ncached; i++)
		if (cached[i].relid == RelationGetRelid(rel) && strcmp(cached[i].expr, key) == 0)
		{
			s = &cached[i];
			break;
		}
	if (s != NULL && scoot_sample_fresh(s->tuples, tuples))
		return s->stat != NULL ? s : NULL;
	/* what another backend sampled for about this row count (samplecache.rs) */
	shared = scoot_sample_cache_get(SAMPLE_CACHE_EXPR, rel, key, tuples, &made_for, vals);
	/*
	 * no sampling in parallel mode, nor in a serializable transaction: the sample's scan would
	 * take a relation-wide predicate lock the query itself may not need (statistics sampled
	 * earlier, here or by another backend, are used)
	 */
	if (!shared && (IsInParallelMode() || IsolationIsSerializable()))
		return NULL;
	if (s == NULL)
	{
		if (ncached >= MAX_CACHED)
			return NULL;
		s = &cached[ncached];
		s->relid = RelationGetRelid(rel);
		s->expr = MemoryContextStrdup(TopMemoryContext, key);
		s->fake_oid = FAKE_OID_BASE - ncached;
		s->stat = NULL;
		ncached++;
	}
	s->tuples = shared ? made_for : tuples;
	if (s->stat != NULL)
		heap_freetuple(s->stat);
	s->stat = NULL;
	if (shared)
	{
		if (vals[0] != 0 && vals[3] != 0)
			s->stat = stat_tuple(RelationGetRelid(rel), (float4) vals[1], (int32) vals[2],
								 (float4) vals[3]);
		return s->stat != NULL ? s : NULL;
	}

	/* a failing evaluation (an overflow on some row) leaves the expression without statistics */
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		ok = sample(rel, e, tuples, &nullfrac, &width, &distinct);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN)
			ReThrowError(edata);
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	if (ok && distinct != 0)
		s->stat = stat_tuple(RelationGetRelid(rel), nullfrac, width, distinct);
	/* for the other backends (a failed evaluation too: they need not try again) */
	vals[0] = ok ? 1 : 0;
	vals[1] = nullfrac;
	vals[2] = width;
	vals[3] = distinct;
	scoot_sample_cache_put(SAMPLE_CACHE_EXPR, rel, key, tuples, vals);
	return s->stat != NULL ? s : NULL;
}

/* A hypothetical index on `e` that only carries statistics (no path can use it). */
static IndexOptInfo *
stats_index(RelOptInfo *rel, Expr *e, Oid oid)
{
	IndexOptInfo *ix = makeNode(IndexOptInfo);

	ix->indexoid = oid;
	ix->reltablespace = InvalidOid;
	ix->rel = rel;
	ix->pages = 1;
	ix->tuples = rel->tuples;
	ix->tree_height = -1;
	ix->ncolumns = ix->nkeycolumns = 1;
	ix->indexkeys = palloc0(sizeof(int));
	ix->indexcollations = palloc(sizeof(Oid));
	ix->indexcollations[0] = exprCollation((Node *) e);
	ix->opfamily = palloc(sizeof(Oid));
	ix->opfamily[0] = InvalidOid;	/* matches no clause */
	ix->opcintype = palloc(sizeof(Oid));
	ix->opcintype[0] = exprType((Node *) e);
	ix->sortopfamily = NULL;	/* no order */
	ix->canreturn = palloc0(sizeof(bool));
	ix->relam = InvalidOid;
	ix->indexprs = list_make1(copyObject(e));
	ix->indpred = NIL;
	ix->indextlist = list_make1(makeTargetEntry(copyObject(e), 1, NULL, false));
	ix->indrestrictinfo = NIL;
	ix->predOK = false;
	ix->unique = false;
	ix->immediate = true;
	ix->hypothetical = true;
	ix->amcanorderbyop = false;
	ix->amoptionalkey = false;	/* no path without a matching clause */
	ix->amsearcharray = false;
	ix->amsearchnulls = false;
	ix->amhasgettuple = false;
	ix->amhasgetbitmap = false;
	ix->amcanparallel = false;
	ix->amcanmarkpos = false;
	ix->amcostestimate = NULL;
	return ix;
}

static void
scoot_relation_info(PlannerInfo *root, Oid relid, bool inhparent, RelOptInfo *rel)
{
	RangeTblEntry *rte;
	Relation	r;
	List	   *exprs = NIL;
	ListCell   *lc;

	if (prev_relation_info)
		prev_relation_info(root, relid, inhparent, rel);
	if (inhparent || rel->reloptkind != RELOPT_BASEREL || !scoot_expression_stats_enabled() ||
		root->parse->jointree == NULL)
		return;
	rte = planner_rt_fetch(rel->relid, root);
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION)
		return;
	collect_jointree((Node *) root->parse->jointree, rel->relid, &exprs);
	if (exprs == NIL)
		return;
	r = table_open(relid, NoLock);
	if (scoot_relation_is_scoot(r) && !r->rd_rel->relrowsecurity)
	{
		foreach(lc, exprs)
		{
			ExprStat   *s = stats_for(r, lfirst(lc), Max(rel->tuples, 0));

			if (s != NULL)
				rel->indexlist = lappend(rel->indexlist, stats_index(rel, lfirst(lc), s->fake_oid));
		}
	}
	table_close(r, NoLock);
}

static void
no_free(HeapTuple tuple)
{
}

static bool
scoot_index_stats(PlannerInfo *root, Oid indexOid, AttrNumber indexattnum,
				  VariableStatData *vardata)
{
	for (int i = 0; i < ncached; i++)
	{
		RangeTblEntry *rte;

		if (cached[i].fake_oid != indexOid || cached[i].stat == NULL || indexattnum != 1)
			continue;
		vardata->statsTuple = cached[i].stat;
		vardata->freefunc = no_free;
		/* as for an expression index: the whole table must be selectable */
		rte = vardata->rel != NULL ? planner_rt_fetch(vardata->rel->relid, root) : NULL;
		vardata->acl_ok = rte != NULL && rte->securityQuals == NIL &&
			pg_class_aclcheck(cached[i].relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
		return true;
	}
	if (prev_index_stats)
		return prev_index_stats(root, indexOid, indexattnum, vardata);
	return false;
}

void
scoot_install_expr_stats(void)
{
	prev_relation_info = get_relation_info_hook;
	get_relation_info_hook = scoot_relation_info;
	prev_index_stats = get_index_stats_hook;
	get_index_stats_hook = scoot_index_stats;
}
