/*
 * ScootPreAgg: eager aggregation below joins for scoot tables (planner decision, plan, executor
 * node, EXPLAIN). The aggregation itself is ScootAgg's engine (src/exec/agg.rs), run by the
 * executor side the two nodes share (aggnode.h, in customagg.c).
 *
 * A join query whose aggregates sum a scoot table F's columns (CH-benCHmark Q18: orders,
 * customer and order_line joined, sum(ol_amount) per order) hands every row of F to the joins
 * and the Agg above them, although the joins only need F's columns they compare and output.
 * Grouping F's rows by exactly those columns first, with each group's partial sums, changes
 * nothing above: rows of one group match the same join partners and land in the same final
 * group, so the final sum over the joined groups' partial sums equals the sum over the joined
 * rows. Minima and maxima likewise; they do not depend on how many rows there are, so they may
 * read any table; so do DISTINCT aggregates. Counts and sums over other columns do depend on it:
 * in count mode (CH Q12: orders by their lines' delivery dates, counted) each group also carries
 * its row count and those aggregates are rewritten to weigh each joined group by it (see
 * weigh_aggref). avg and float sums, and two pre-aggregated tables (each would drop the other's
 * multiplicity), keep PostgreSQL's plan.
 *
 * Decided per query level, when the planner builds F's scan paths (set_rel_pathlist_hook, from
 * customscan.c), if all of these hold: a read-only SELECT with aggregates and no grouping sets,
 * window functions, set-returning target functions, sublinks, LATERAL references or outer /
 * semi / anti joins, over more than one table; F is the table of the first sum (or, in count
 * mode when no sum reads a numeric column plainly, the table with the most rows); every sum of
 * F's numeric(p, s) columns reads a column that appears nowhere else but in sums (its own
 * filters aside: they run first, on the rows), directly or as a CASE choosing between it and
 * 0 / NULL on conditions over other columns; every other aggregate is a plain min or max, a
 * DISTINCT aggregate, or (count mode) count(*), count(x) or an integer / numeric sum; F's other
 * columns the plan needs are group keys the engine can read (integers, dates, timestamps,
 * numeric(p <= 38, s), char/varchar(n <= 16); four words at most); each restriction clause of
 * F is a block filter; and PostgreSQL's estimate of the groups leaves at least
 * scoot.eager_agg_min_group_size rows per group, and the keys do not include a unique index's
 * columns (a row per group). Then F's unparameterized paths are replaced by the ScootPreAgg path
 * and F's row estimate becomes the group count, so the joins above are planned for the rows they
 * will get; parameterized index paths stay (a nested loop may still fetch F's rows one by one:
 * sums, minima and maxima above are exact either way), except in count mode, where every row
 * must come with its group's count.
 *
 * The inner side of a semi or anti join (EXISTS / NOT EXISTS; CH Q4 and Q21) is grouped the same
 * way when it is one scoot table whose join clauses compare all but one of its columns by
 * equality and that one only by <, <=, > or >= in one direction (semi_join_uses): its groups
 * carry that column's max or min, which satisfies the clauses exactly when some row of the group
 * does. Same filters, key types, group-size rule and replaced paths as above; the query need not
 * aggregate at all.
 *
 * The node's scan row is the group key columns then the partial aggregates, each in the column
 * of F it aggregates (custom_scan_tlist: plain Vars of F, so every expression above reads them
 * unchanged). It carries PostgreSQL's hash aggregation of F's plain scan by the same keys as its
 * child and runs that instead, from the start, when the engine cannot answer exactly (a block
 * storing a column in another form, a NaN, an overflow): the node's rows are then the same groups
 * computed by PostgreSQL, unique on the keys either way.
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_aggregate.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/selfuncs.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "parser/parse_func.h"

#include "aggnode.h"

/* customscan.c */
extern char *scoot_block_filter(RelOptInfo *rel, Expr *clause, char **describe, Relation r);
extern char *scoot_describe_filters(List *described);
extern Oid scoot_btree_opfamily(Oid typ);

extern bool scoot_hash_clause_sides(RestrictInfo *ri, RelOptInfo *joinrel, RelOptInfo *outerrel,
									RelOptInfo *innerrel, JoinType jointype, Expr **outer_side,
									Expr **inner_side);

/* customagg.c */
extern char *scoot_agg_type_code(Oid typ, int32 typmod, bool key);

/* Rust side (src/exec/mod.rs) */
extern double scoot_eager_agg_min_group(void);
extern double scoot_agg_sample_groups(const char *spec, Relation rel, double ntuples);

void		scoot_preagg_paths(PlannerInfo *root, RelOptInfo *rel, RangeTblEntry *rte, Relation r);
void		scoot_install_custom_preagg(void);
List	   *scoot_preagg_path_keys(Path *p);
List	   *scoot_preagg_hash_join(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *outerrel,
								   RelOptInfo *innerrel, JoinType jointype,
								   JoinPathExtraData *extra);
void		scoot_preagg_restore_buckets(List *saved);

static Plan *preagg_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
							  List *tlist, List *clauses, List *custom_plans);
static Node *preagg_create_state(CustomScan *cscan);
static Oid	hash_eq_op(Oid typ);
static Oid	builtin_agg(const char *kind, Oid typ, Oid *transtype);
static Plan *fallback_agg(Plan *scan, List *cols, int nkeys, List *kinds, double groups);
static void preagg_explain(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomPathMethods preagg_path_methods = {
	.CustomName = "ScootPreAgg",
	.PlanCustomPath = preagg_plan_path,
};

static const CustomScanMethods preagg_scan_methods = {
	.CustomName = "ScootPreAgg",
	.CreateCustomScanState = preagg_create_state,
};

static const CustomExecMethods preagg_exec_methods = {
	.CustomName = "ScootPreAgg",
	.BeginCustomScan = scoot_aggnode_begin,
	.ExecCustomScan = scoot_aggnode_exec,
	.EndCustomScan = scoot_aggnode_end,
	.ReScanCustomScan = scoot_aggnode_rescan,
	.ExplainCustomScan = preagg_explain,
};

/* How a column of F is used above its scan (bits). */
#define USE_SUM		1			/* as the argument of sum() */
#define USE_MIN		2			/* as the argument of min() */
#define USE_MAX		4			/* as the argument of max() */
#define USE_OTHER	8			/* anywhere else */

typedef struct UseContext
{
	Index		relid;			/* F (0: not chosen yet) */
	int			natts;			/* F's columns (when chosen) */
	char	   *use;			/* per attribute number: USE_* bits */
	bool		bad;			/* an aggregate or reference that rules eager aggregation out */
	bool		weighted;		/* an aggregate needs each group's row count (count mode) */
} UseContext;

static bool use_walker(Node *node, UseContext *cx);

typedef struct WeighContext
{
	Index		relid;			/* F */
	Oid			count_fn;		/* scoot.eager_count(bigint) */
	Oid			sum_fn;			/* scoot.eager_sum(bigint) */
	List	   *done;			/* Aggrefs already rewritten (the same node reached twice) */
} WeighContext;

/* A plain pg_catalog aggregate of this name, with one argument and nothing else? */
static bool
plain_agg(Aggref *a, const char *name)
{
	return a->aggsplit == AGGSPLIT_SIMPLE && a->aggdistinct == NIL && a->aggorder == NIL &&
		a->aggfilter == NULL && !a->aggvariadic && a->aggkind == AGGKIND_NORMAL &&
		a->agglevelsup == 0 && a->aggdirectargs == NIL && !a->aggstar &&
		list_length(a->args) == 1 &&
		get_func_namespace(a->aggfnoid) == PG_CATALOG_NAMESPACE &&
		strcmp(get_func_name(a->aggfnoid), name) == 0;
}

/* The aggregate's argument if it is a plain column of relid (NULL otherwise). */
static Var *
agg_var(Aggref *a, Index relid)
{
	Node	   *n = (Node *) ((TargetEntry *) linitial(a->args))->expr;

	if (IsA(n, Var) && ((Var *) n)->varno == (int) relid && ((Var *) n)->varlevelsup == 0 &&
		((Var *) n)->varattno > 0)
		return (Var *) n;
	return NULL;
}

static void
note_use(UseContext *cx, AttrNumber att, char use)
{
	if (att <= 0 || att > cx->natts)
	{
		cx->bad = true;			/* a system column or a whole-row reference */
		return;
	}
	cx->use[att] |= use;
}


/*
 * An aggregate count mode answers over F's groups by weighing each group's row count (the
 * weighted forms: weigh_aggref): count(*) and count(x), FILTER allowed, and sum(x) of an
 * integer or numeric x.
 */
static bool
weighable(Aggref *a)
{
	if (a->aggsplit != AGGSPLIT_SIMPLE || a->aggdistinct != NIL || a->aggorder != NIL ||
		a->aggvariadic || a->aggkind != AGGKIND_NORMAL || a->agglevelsup != 0 ||
		a->aggdirectargs != NIL)
		return false;
	switch (a->aggfnoid)
	{
		case F_COUNT_:
			return a->aggstar;
		case F_COUNT_ANY:
		case F_SUM_INT2:
		case F_SUM_INT4:
		case F_SUM_INT8:
		case F_SUM_NUMERIC:
			return !a->aggstar && list_length(a->args) == 1;
		default:
			return false;
	}
}

/* A numeric constant 0, or NULL? */
static bool
zero_or_null(Node *n)
{
	Const	   *c = (Const *) n;

	if (!IsA(n, Const) || c->consttype != NUMERICOID)
		return false;
	if (c->constisnull)
		return true;
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, c->constvalue,
											 DirectFunctionCall1(int4_numeric, Int32GetDatum(0)))) == 0;
}

/*
 * The column a sum adds up, if its argument is a plain numeric column or linear in one:
 * CASE [x] WHEN cond THEN col ... ELSE 0 END (each result the same column, 0 or NULL; CH Q14's
 * sum(CASE WHEN i_data LIKE 'PR%' THEN ol_amount ELSE 0 END)). Such a CASE over a group's
 * partial sum is the sum of the CASE over its rows when the conditions read no summed column
 * (they are walked as ordinary uses: a summed column in them rules the table out). NULL
 * otherwise.
 */
static Var *
summed_var(Node *arg, UseContext *cx)
{
	Var		   *v = NULL;
	ListCell   *lc;
	CaseExpr   *ce;

	if (IsA(arg, Var))
		v = (Var *) arg;
	else if (IsA(arg, CaseExpr) && ((CaseExpr *) arg)->casetype == NUMERICOID)
	{
		ce = (CaseExpr *) arg;
		foreach(lc, ce->args)
		{
			CaseWhen   *w = lfirst_node(CaseWhen, lc);
			Node	   *r = (Node *) w->result;

			if (IsA(r, Var) && (v == NULL || equal(r, v)))
				v = (Var *) r;
			else if (!zero_or_null(r))
				return NULL;
		}
		if (ce->defresult != NULL)
		{
			Node	   *r = (Node *) ce->defresult;

			if (IsA(r, Var) && (v == NULL || equal(r, v)))
				v = (Var *) r;
			else if (!zero_or_null(r))
				return NULL;
		}
		if (v == NULL)
			return NULL;
		if (cx != NULL)
		{
			use_walker((Node *) ce->arg, cx);
			foreach(lc, ce->args)
				use_walker((Node *) lfirst_node(CaseWhen, lc)->expr, cx);
		}
	}
	if (v == NULL || v->vartype != NUMERICOID || v->varlevelsup != 0 || v->varattno <= 0)
		return NULL;
	return v;
}

static bool
use_walker(Node *node, UseContext *cx)
{
	if (node == NULL || cx->bad)
		return false;
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;

		if (v->varno == (int) cx->relid && v->varlevelsup == 0)
			note_use(cx, v->varattno, USE_OTHER);
		return false;
	}
	if (IsA(node, Aggref))
	{
		Aggref	   *a = (Aggref *) node;
		Var		   *v = NULL;

		if (plain_agg(a, "sum"))
		{
			/* a sum of F's numeric column: the groups' partial sums */
			v = summed_var((Node *) ((TargetEntry *) linitial(a->args))->expr, cx);
			if (v != NULL && v->varno == (int) cx->relid && a->aggtype == NUMERICOID)
			{
				note_use(cx, v->varattno, USE_SUM);
				return false;
			}
		}
		if (a->aggdistinct != NIL && a->aggkind == AGGKIND_NORMAL && a->agglevelsup == 0 &&
			a->aggsplit == AGGSPLIT_SIMPLE)
		{
			/* DISTINCT: the answer does not depend on how often a value comes */
			return expression_tree_walker((Node *) a->args, use_walker, cx) ||
				use_walker((Node *) a->aggorder, cx) || use_walker((Node *) a->aggfilter, cx);
		}
		if (weighable(a))
		{
			/* count and other sums: over the groups, each weighing its row count */
			cx->weighted = true;
			return expression_tree_walker((Node *) a->args, use_walker, cx) ||
				use_walker((Node *) a->aggfilter, cx);
		}
		if (plain_agg(a, "min") || plain_agg(a, "max"))
		{
			bool		is_min = strcmp(get_func_name(a->aggfnoid), "min") == 0;

			v = agg_var(a, cx->relid);
			if (v != NULL && a->aggtype == v->vartype)
			{
				note_use(cx, v->varattno, is_min ? USE_MIN : USE_MAX);
				return false;
			}
			/* min/max of anything else: its columns are used as they are */
			return expression_tree_walker((Node *) a->args, use_walker, cx);
		}
		cx->bad = true;			/* avg, ...: they depend on the number of rows */
		return false;
	}
	if (IsA(node, SubLink) || IsA(node, SubPlan) || IsA(node, PlaceHolderVar) ||
		IsA(node, GroupingFunc) || IsA(node, WindowFunc))
	{
		cx->bad = true;
		return false;
	}
	return expression_tree_walker(node, use_walker, cx);
}

/* The first sum's table (0 if none, or it is no plain column). */
static bool
first_sum_walker(Node *node, Index *relid)
{
	if (node == NULL || *relid != 0)
		return false;
	if (IsA(node, Aggref))
	{
		Aggref	   *a = (Aggref *) node;

		if (plain_agg(a, "sum"))
		{
			Var		   *v = summed_var((Node *) ((TargetEntry *) linitial(a->args))->expr, NULL);

			*relid = v != NULL ? (Index) v->varno : (Index) -1;
		}
		return false;
	}
	return expression_tree_walker(node, first_sum_walker, relid);
}

/* Walks a qual (implicit-AND list or expression): conjuncts that read F alone are F's filters. */
static void
walk_quals(PlannerInfo *root, Node *quals, UseContext *cx)
{
	List	   *conj;
	ListCell   *lc;

	if (quals == NULL)
		return;
	conj = IsA(quals, List) ? (List *) quals : make_ands_implicit((Expr *) quals);
	foreach(lc, conj)
	{
		Node	   *c = lfirst(lc);
		Relids		rels = pull_varnos(root, c);

		/* a volatile qual runs once per row it sees: grouping would change how often */
		if (contain_volatile_functions(c))
		{
			cx->bad = true;
			return;
		}
		if (bms_is_empty(rels) || bms_equal(rels, bms_make_singleton(cx->relid)))
			continue;			/* a filter of F (or a constant): applied to F's rows first */
		use_walker(c, cx);
	}
}

static void
walk_jointree(PlannerInfo *root, Node *jt, UseContext *cx)
{
	if (jt == NULL || cx->bad)
		return;
	if (IsA(jt, RangeTblRef))
		return;
	if (IsA(jt, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) jt)->fromlist)
			walk_jointree(root, lfirst(lc), cx);
		walk_quals(root, ((FromExpr *) jt)->quals, cx);
		return;
	}
	if (IsA(jt, JoinExpr) && ((JoinExpr *) jt)->jointype == JOIN_INNER)
	{
		walk_jointree(root, ((JoinExpr *) jt)->larg, cx);
		walk_jointree(root, ((JoinExpr *) jt)->rarg, cx);
		walk_quals(root, ((JoinExpr *) jt)->quals, cx);
		return;
	}
	cx->bad = true;
}

/* The query level's shape allows eager aggregation at all? */
static bool
query_allows(PlannerInfo *root)
{
	Query	   *parse = root->parse;
	ListCell   *lc;

	if (parse->commandType != CMD_SELECT || !parse->hasAggs || parse->groupingSets != NIL ||
		parse->hasWindowFuncs || parse->hasTargetSRFs || parse->hasSubLinks ||
		parse->rowMarks != NIL || parse->setOperations != NULL || parse->hasForUpdate ||
		root->join_info_list != NIL || root->hasLateralRTEs ||
		bms_membership(root->all_baserels) != BMS_MULTIPLE)
		return false;
	foreach(lc, parse->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->lateral)
			return false;
	}
	return true;
}

/* Notes every column of relid that `node` reads as used otherwise (a key). */
static void
note_other(Node *node, UseContext *cx)
{
	List	   *vars = pull_var_clause(node, PVC_RECURSE_AGGREGATES | PVC_RECURSE_WINDOWFUNCS |
									   PVC_INCLUDE_PLACEHOLDERS);
	ListCell   *lc;

	foreach(lc, vars)
	{
		Var		   *v = lfirst(lc);

		if (!IsA(v, Var))
			cx->bad = true;		/* a placeholder: computed elsewhere */
		else if (v->varno == (int) cx->relid)
			note_use(cx, v->varattno, USE_OTHER);
	}
}

/*
 * A join clause "col op expr" (or "expr op col") where col is a plain column of relid of a type
 * without collation, expr reads no column of relid, and op is <, <=, > or >= of col's type's
 * btree ordering: sets *att and *dir to the aggregate that decides it for a group (some row
 * with col > expr exists if and only if the group's max(col) > expr; < wants the min).
 */
static bool
monotone_clause(PlannerInfo *root, Node *c, Index relid, AttrNumber *att, char *dir)
{
	OpExpr	   *op = (OpExpr *) c;
	Node	   *l,
			   *r;
	Var		   *v;
	bool		var_left;
	Oid			opf;
	int			strategy;

	if (!IsA(c, OpExpr) || list_length(op->args) != 2)
		return false;
	l = linitial(op->args);
	r = lsecond(op->args);
	if (IsA(l, Var) && ((Var *) l)->varno == (int) relid &&
		!bms_is_member(relid, pull_varnos(root, r)))
		var_left = true;
	else if (IsA(r, Var) && ((Var *) r)->varno == (int) relid &&
			 !bms_is_member(relid, pull_varnos(root, l)))
		var_left = false;
	else
		return false;
	v = (Var *) (var_left ? l : r);
	if (v->varattno <= 0 || v->varlevelsup != 0 || OidIsValid(v->varcollid))
		return false;
	opf = scoot_btree_opfamily(v->vartype);
	if (!OidIsValid(opf))
		return false;
	strategy = get_op_opfamily_strategy(op->opno, opf);
	if (strategy == BTLessStrategyNumber || strategy == BTLessEqualStrategyNumber)
		*dir = var_left ? USE_MIN : USE_MAX;
	else if (strategy == BTGreaterStrategyNumber || strategy == BTGreaterEqualStrategyNumber)
		*dir = var_left ? USE_MAX : USE_MIN;
	else
		return false;
	*att = v->varattno;
	return true;
}

/*
 * Semi and anti joins (EXISTS, NOT EXISTS, IN with extra conditions; CH Q4 and Q21): when
 * `rel` is the whole inner side of one, its rows matter only through whether some row of it
 * satisfies the join's clauses. If all but one of its columns the clauses read are compared by
 * equality (or used in any other way) and that one only by <, <=, > or >= against the outer
 * side, all in one direction, then such a row exists in a group of rows with equal other
 * columns if and only if the group's max (for > and >=) or min (for < and <=) of that column
 * satisfies the clauses; NULLs satisfy no comparison and are skipped by max and min alike. So
 * the group's one row, with that max or min in the column, gives the join the same answer as
 * the group's rows. Two such columns would need one row satisfying both: refused. Fills cx's
 * uses (the compared column USE_MIN or USE_MAX, every other column read USE_OTHER); false if
 * rel is no such inner side.
 */
static bool
semi_join_uses(PlannerInfo *root, RelOptInfo *rel, UseContext *cx)
{
	Query	   *parse = root->parse;
	SpecialJoinInfo *sj = NULL;
	ListCell   *lc;
	int			compared = 0;

	if (parse->commandType != CMD_SELECT || parse->rowMarks != NIL || parse->hasForUpdate ||
		root->hasLateralRTEs)
		return false;
	foreach(lc, root->join_info_list)
	{
		SpecialJoinInfo *s = lfirst(lc);

		if ((s->jointype == JOIN_SEMI || s->jointype == JOIN_ANTI) &&
			bms_equal(s->syn_righthand, rel->relids) && bms_equal(s->min_righthand, rel->relids))
			sj = s;
	}
	if (sj == NULL)
		return false;
	/* equalities with the outer side live in equivalence classes: keys */
	foreach(lc, root->eq_classes)
	{
		EquivalenceClass *ec = lfirst(lc);
		ListCell   *m;

		if (!bms_is_member(cx->relid, ec->ec_relids))
			continue;
		foreach(m, ec->ec_members)
		{
			EquivalenceMember *em = lfirst(m);

			if (bms_is_member(cx->relid, em->em_relids))
				note_other((Node *) em->em_expr, cx);
		}
	}
	foreach(lc, rel->joininfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		AttrNumber	att;
		char		dir;

		/* a volatile clause runs once per row it sees: grouping would change how often */
		if (contain_volatile_functions((Node *) ri->clause))
			return false;
		if (monotone_clause(root, (Node *) ri->clause, cx->relid, &att, &dir))
			note_use(cx, att, dir);
		else
			note_other((Node *) ri->clause, cx);
	}
	if (cx->bad)
		return false;
	for (int att = 1; att <= cx->natts; att++)
		if (cx->use[att] == USE_MIN || cx->use[att] == USE_MAX)
			compared++;
	return compared == 1;
}

/*
 * Count mode. A count, or a sum over another table's columns, counts every row of F that joins:
 * over F's groups it is the same count or sum with each joined group weighing its number of
 * rows. The engine counts them (count(*) per group, one more partial aggregate) into a column
 * of F the query cannot otherwise read there (tableoid: a query reading it is refused), typed
 * bigint, which the joins carry up to the aggregation; its aggregates are rewritten in place:
 *   count(*)        -> scoot.eager_count(w)               (the sum of w, 0 over no rows)
 *   count(x)        -> scoot.eager_count(w) FILTER (WHERE x IS NOT NULL [AND the filter])
 *   sum(int2/int4 x) -> scoot.eager_sum(x::bigint * w)    (bigint, as sum's)
 *   sum(int8 x)     -> sum(x::numeric * w::numeric)       (numeric, as sum's)
 *   sum(numeric x)  -> sum(x * w::numeric)                (the same digits: x times w exactly)
 * DISTINCT aggregates, min and max need no weight; F's own summed columns are partial sums.
 * The products cannot overflow (a bigint product of an int4 and a count below 2^32 rows per
 * group; numeric is exact). The expressions are rewritten where the planner keeps them: the
 * target list, HAVING, and the sort's copies in equivalence classes (ORDER BY sum(...)).
 */
#define WEIGHT_ATT	TableOidAttributeNumber

static Var *
weight_var(Index relid)
{
	return makeVar(relid, WEIGHT_ATT, INT8OID, -1, InvalidOid, 0);
}

static Expr *
int8_of(Expr *e)
{
	Oid			t = exprType((Node *) e);

	if (t == INT8OID)
		return e;
	return (Expr *) makeFuncExpr(t == INT2OID ? F_INT8_INT2 : F_INT8_INT4, INT8OID, list_make1(e),
								 InvalidOid, InvalidOid, COERCE_IMPLICIT_CAST);
}

static Expr *
numeric_of(Expr *e)
{
	if (exprType((Node *) e) == NUMERICOID)
		return e;
	return (Expr *) makeFuncExpr(F_NUMERIC_INT8, NUMERICOID, list_make1(int8_of(e)),
								 InvalidOid, InvalidOid, COERCE_IMPLICIT_CAST);
}

/* F's own numeric column summed: a partial sum, not weighed (use_walker's USE_SUM) */
static bool
partial_sum(Aggref *a, Index relid)
{
	Var		   *v;

	if (!plain_agg(a, "sum"))
		return false;
	v = summed_var((Node *) ((TargetEntry *) linitial(a->args))->expr, NULL);
	return v != NULL && v->varno == (int) relid && a->aggtype == NUMERICOID;
}

/* Rewrites weighable aggregate `a` in place into its form over F's weighed groups. */
static void
weigh_aggref(Aggref *a, WeighContext *wc)
{
	Expr	   *w = (Expr *) weight_var(wc->relid);
	Expr	   *x = a->args != NIL ? ((TargetEntry *) linitial(a->args))->expr : NULL;
	Expr	   *arg;

	switch (a->aggfnoid)
	{
		case F_COUNT_ANY:
			{
				NullTest   *nt = makeNode(NullTest);

				nt->arg = x;
				nt->nulltesttype = IS_NOT_NULL;
				nt->argisrow = false;
				nt->location = -1;
				a->aggfilter = a->aggfilter == NULL ? (Expr *) nt :
					make_andclause(list_make2(nt, a->aggfilter));
			}
			/* FALLTHROUGH */
		case F_COUNT_:
			a->aggfnoid = wc->count_fn;
			a->aggstar = false;
			a->aggtranstype = INT8OID;
			arg = w;
			break;
		case F_SUM_INT2:
		case F_SUM_INT4:
			a->aggfnoid = wc->sum_fn;
			a->aggtranstype = INT8OID;
			arg = (Expr *) makeFuncExpr(F_INT8MUL, INT8OID, list_make2(int8_of(x), w),
										InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
			break;
		case F_SUM_INT8:
		case F_SUM_NUMERIC:
			a->aggfnoid = F_SUM_NUMERIC;
			a->aggtranstype = INTERNALOID;
			arg = (Expr *) makeFuncExpr(F_NUMERIC_MUL, NUMERICOID,
										list_make2(numeric_of(x), numeric_of(w)),
										InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
			break;
		default:
			elog(ERROR, "scoot: ScootPreAgg cannot weigh aggregate %u", a->aggfnoid);
	}
	a->aggargtypes = list_make1_oid(exprType((Node *) arg));
	a->args = list_make1(makeTargetEntry(arg, 1, NULL, false));
	a->inputcollid = InvalidOid;
}

static bool
weigh_walker(Node *node, WeighContext *wc)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		Aggref	   *a = (Aggref *) node;

		if (!list_member_ptr(wc->done, a))
		{
			wc->done = lappend(wc->done, a);
			if (weighable(a) && !partial_sum(a, wc->relid))
				weigh_aggref(a, wc);
		}
		return false;
	}
	return expression_tree_walker(node, weigh_walker, wc);
}

/*
 * Offers the ScootPreAgg path for scoot table `rel` (relation `r`, open) when eager
 * aggregation is exact and pays (see the header); replaces its unparameterized paths then.
 */
void
scoot_preagg_paths(PlannerInfo *root, RelOptInfo *rel, RangeTblEntry *rte, Relation r)
{
	double		min_group = scoot_eager_agg_min_group();
	Index		relid = rel->relid;
	Index		first = 0;
	UseContext	cx;
	WeighContext wc;
	StringInfoData spec;
	List	   *keys = NIL,
			   *aggs = NIL,
			   *described = NIL,
			   *kept = NIL;
	List	   *key_exprs = NIL;
	List	   *kinds = NIL;
	ListCell   *lc;
	Path	   *child = NULL;
	CustomPath *cp;
	int			key_words = 0;
	double		groups;
	double		sampled;
	int			natts = RelationGetDescr(r)->natts;

	if (min_group <= 0 || rel->reloptkind != RELOPT_BASEREL || rel->lateral_relids != NULL ||
		rel->lateral_referencers != NULL)
		return;
	cx.relid = relid;
	cx.natts = natts;
	cx.use = palloc0(natts + 1);
	cx.bad = false;
	cx.weighted = false;
	if (query_allows(root))
	{
		/* F: the first sum's table */
		first_sum_walker((Node *) root->parse->targetList, &first);
		if (first == 0)
			first_sum_walker(root->parse->havingQual, &first);
		if (first != relid && first != 0 && first != (Index) -1)
			return;				/* another table's sums: that table is grouped, if any */

		/* how the query uses F's columns outside F's own filters */
		use_walker((Node *) root->parse->targetList, &cx);
		use_walker(root->parse->havingQual, &cx);
		walk_jointree(root, (Node *) root->parse->jointree, &cx);
		if (cx.bad)
			return;
		/* not the first sum's table: only counting its groups' rows makes it exact */
		if (first != relid && !cx.weighted)
			return;
		/*
		 * The query's other tables: one grouped table per query level (a second would drop the
		 * first's row counts), and count mode groups the table with the most rows (the fact
		 * table: it shrinks most)
		 */
		for (int i = 1; i < root->simple_rel_array_size; i++)
		{
			RelOptInfo *o = root->simple_rel_array[i];

			if (o == NULL || o == rel || o->reloptkind != RELOPT_BASEREL)
				continue;
			if (first != relid && o->rows > rel->rows)
				return;
			foreach(lc, o->pathlist)
				if (IsA(lfirst(lc), CustomPath) &&
					((CustomPath *) lfirst(lc))->methods == &preagg_path_methods)
					return;
		}
		if (cx.weighted)
		{
			Oid			argt = INT8OID;

			wc.relid = relid;
			wc.done = NIL;
			wc.count_fn = LookupFuncName(list_make2(makeString("scoot"), makeString("eager_count")),
										 1, &argt, true);
			wc.sum_fn = LookupFuncName(list_make2(makeString("scoot"), makeString("eager_sum")),
									   1, &argt, true);
			if (!OidIsValid(wc.count_fn) || !OidIsValid(wc.sum_fn))
				return;			/* an extension script from before count mode */
		}
	}
	else if (!semi_join_uses(root, rel, &cx))
		return;
	/* a summed column must be summed only: as a key its sum would count each group once */
	for (int att = 1; att <= natts; att++)
		if ((cx.use[att] & USE_SUM) && cx.use[att] != USE_SUM)
			return;

	initStringInfo(&spec);
	/* F's filters run in the engine, on the rows, before grouping */
	foreach(lc, rel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		char	   *d = NULL;
		char	   *f;

		if (ri->pseudoconstant)
			continue;			/* a gating Result above the scan */
		f = scoot_block_filter(rel, ri->clause, &d, r);
		if (f == NULL)
			return;
		appendStringInfo(&spec, "F %s\n", f);
		described = lappend(described, makeString(d));
	}

	/* what the plan reads of F: group keys, or the partial aggregates */
	foreach(lc, rel->reltarget->exprs)
	{
		Var		   *v = (Var *) lfirst(lc);
		char	   *code;

		if (!IsA(v, Var) || v->varno != (int) relid || v->varattno <= 0 || v->varattno > natts)
			return;
		if (cx.use[v->varattno] == USE_SUM || cx.use[v->varattno] == USE_MIN ||
			cx.use[v->varattno] == USE_MAX)
		{
			code = scoot_agg_type_code(v->vartype, v->vartypmod, false);
			if (code == NULL)
				return;
			aggs = lappend(aggs, v);
			continue;
		}
		code = scoot_agg_type_code(v->vartype, v->vartypmod, true);
		if (code == NULL)
			return;
		/* the engine groups by the stored bytes: equal bytes are the same value to any operator */
		if (OidIsValid(v->varcollid) && !get_collation_isdeterministic(v->varcollid))
			return;
		key_words += (code[0] == 'i' || (code[0] == 'c' && atoi(code + 1) <= 8)) ? 1 : 2;
		appendStringInfo(&spec, "K %d %s\n", v->varattno, code);
		keys = lappend(keys, v);
		key_exprs = lappend(key_exprs, v);
	}
	/* no keys: one group even over no rows, where the join would have had none */
	if ((aggs == NIL && !cx.weighted) || keys == NIL || key_words > 4)
		return;
	/* the fallback groups with PostgreSQL's hash aggregation: keys it can hash */
	foreach(lc, keys)
		if (!OidIsValid(hash_eq_op(((Var *) lfirst(lc))->vartype)))
			return;
	/*
	 * keys that include a unique index's columns: a row per group, nothing to gain (the group
	 * estimate multiplies the columns' distinct counts and misses it)
	 */
	foreach(lc, rel->indexlist)
	{
		IndexOptInfo *ix = lfirst(lc);
		bool		covered = ix->unique && ix->indpred == NIL;

		for (int k = 0; covered && k < ix->nkeycolumns; k++)
		{
			ListCell   *kc;

			covered = false;
			foreach(kc, keys)
				if (((Var *) lfirst(kc))->varattno == ix->indexkeys[k])
					covered = true;
		}
		if (covered)
			return;
	}
	foreach(lc, aggs)
	{
		Var		   *v = lfirst(lc);
		char		u = cx.use[v->varattno];
		char	   *kind = u == USE_SUM ? "sum" : u == USE_MIN ? "min" : "max";

		if (!OidIsValid(builtin_agg(kind, v->vartype, NULL)))
			return;

		appendStringInfo(&spec, "A %s v%d:%s\n", kind, v->varattno,
						 scoot_agg_type_code(v->vartype, v->vartypmod, false));
		kinds = lappend(kinds, makeString(kind));
	}
	/* count mode: each group's row count, in the column weight_var names */
	if (cx.weighted)
	{
		appendStringInfoString(&spec, "A countstar\n");
		aggs = lappend(aggs, weight_var(relid));
		kinds = lappend(kinds, makeString("count"));
	}

	/* does it pay? */
	groups = estimate_num_groups(root, key_exprs, rel->rows, NULL, NULL);
	if (groups * min_group > rel->rows)
		return;
	/*
	 * ... also on a sample of the rows: for several columns PostgreSQL assumes they are
	 * correlated (it clamps their groups to a tenth of the rows, or to the column with the most
	 * distinct values), which rates near-unique combinations as a few rows per group (CH Q5's
	 * order_line by order and item: 65k groups estimated, a row each in fact). Rows per group
	 * over the whole table are at least those after the filters: too few there, too few here.
	 */
	sampled = scoot_agg_sample_groups(spec.data, r, rel->tuples);
	if (sampled > 0 && sampled * min_group > rel->tuples)
		return;

	/* the fallback: F's cheapest plain scan (it stays alive: no add_path sees it again) */
	foreach(lc, rel->pathlist)
	{
		Path	   *p = lfirst(lc);

		if (p->param_info != NULL)
		{
			/* a fetch of F's rows one by one: exact for sums and min / max, not for counts */
			if (!cx.weighted)
				kept = lappend(kept, p);
			continue;
		}
		if (p->pathkeys == NIL && (IsA(p, CustomPath) || p->pathtype == T_SeqScan) &&
			(child == NULL || p->total_cost < child->total_cost))
			child = p;
	}
	if (child == NULL)
		return;

	cp = makeNode(CustomPath);
	cp->path.pathtype = T_CustomScan;
	cp->path.parent = rel;
	cp->path.pathtarget = rel->reltarget;
	cp->path.param_info = NULL;
	cp->path.parallel_aware = false;
	cp->path.parallel_safe = false;
	cp->path.parallel_workers = 0;
	cp->path.pathkeys = NIL;
	cp->path.rows = clamp_row_est(groups);
	/* the scan, plus a fraction of an operator per row and key and aggregate (column arrays) */
	cp->path.startup_cost = child->total_cost +
		rel->tuples * cpu_operator_cost * 0.25 * (list_length(keys) + list_length(aggs));
	cp->path.total_cost = cp->path.startup_cost + cp->path.rows * cpu_tuple_cost;
	cp->custom_paths = list_make1(child);
	/*
	 * custom_private: (description, keys then aggregated columns, number of keys, filter
	 * descriptions, aggregate kinds)
	 */
	cp->custom_private = list_make5(makeString(spec.data), list_concat(keys, aggs),
									makeInteger(list_length(keys)), described, kinds);
	cp->methods = &preagg_path_methods;

	/*
	 * Count mode: the joins carry the row count column up to the aggregation, whose counts and
	 * sums weigh each joined group by it.
	 */
	if (cx.weighted)
	{
		Var		   *w = weight_var(relid);
		int			ndx = WEIGHT_ATT - rel->min_attr;
		ListCell   *m;

		rel->reltarget->exprs = lappend(rel->reltarget->exprs, w);
		rel->reltarget->width += sizeof(int64);
		rel->attr_needed[ndx] = bms_add_member(rel->attr_needed[ndx], 0);
		rel->attr_widths[ndx] = sizeof(int64);
		weigh_walker((Node *) root->processed_tlist, &wc);
		weigh_walker((Node *) root->parse->targetList, &wc);
		weigh_walker(root->parse->havingQual, &wc);
		/* ORDER BY / DISTINCT over an aggregate: the sort's copies of the expressions */
		foreach(lc, root->eq_classes)
			foreach(m, ((EquivalenceClass *) lfirst(lc))->ec_members)
				weigh_walker((Node *) ((EquivalenceMember *) lfirst(m))->em_expr, &wc);
	}

	/* F now yields its groups: the joins above are planned for that many rows */
	rel->rows = cp->path.rows;
	rel->pathlist = kept;
	rel->partial_pathlist = NIL;
	add_path(rel, (Path *) cp);
}

static Plan *
preagg_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
				 List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cs = makeNode(CustomScan);
	List	   *cols = (List *) lsecond(best_path->custom_private);
	List	   *scan_tlist = NIL;
	List	   *child_tlist = NIL;
	Plan	   *child = linitial(custom_plans);
	ListCell   *lc;
	int			resno = 1;

	foreach(lc, cols)
	{
		scan_tlist = lappend(scan_tlist, makeTargetEntry(copyObject(lfirst(lc)), resno, NULL, false));
		/* the row count (count mode) is counted, not read */
		if (((Var *) lfirst(lc))->varattno > 0)
			child_tlist = lappend(child_tlist, makeTargetEntry(copyObject(lfirst(lc)),
															   list_length(child_tlist) + 1,
															   NULL, false));
		resno++;
	}
	/* the plain scan reads the key and aggregated columns */
	child->targetlist = child_tlist;
	/*
	 * the fallback groups the scan's rows itself, with PostgreSQL's hash aggregation, and
	 * produces the node's scan row: the node's rows are unique on the keys either way (what
	 * ScootUniqueGroups above relies on)
	 */
	custom_plans = list_make1(fallback_agg(child, cols,
										   intVal(lthird(best_path->custom_private)),
										   (List *) list_nth(best_path->custom_private, 4),
										   best_path->path.rows));

	cs->methods = &preagg_scan_methods;
	cs->scan.plan.targetlist = tlist;
	/* every filter of F's rows is the engine's (or the child's); ScootUniqueGroups above may
	 * add HAVING conjuncts on the groups (customunique.c, push_having) */
	cs->scan.plan.qual = NIL;
	cs->scan.scanrelid = rel->relid;
	cs->custom_scan_tlist = scan_tlist;
	cs->custom_plans = custom_plans;
	cs->flags = best_path->flags;
	cs->custom_private = list_make4(linitial(best_path->custom_private),
									lthird(best_path->custom_private),
									lfourth(best_path->custom_private),
									list_nth(best_path->custom_private, 4));
	return &cs->scan.plan;
}

/* The hashable equality operator grouping a key of type `typ` (InvalidOid: none) */
static Oid
hash_eq_op(Oid typ)
{
	TypeCacheEntry *tc = lookup_type_cache(typ, TYPECACHE_EQ_OPR);

	if (!OidIsValid(tc->eq_opr) || !op_hashjoinable(tc->eq_opr, typ))
		return InvalidOid;
	return tc->eq_opr;
}

/* pg_catalog's aggregate `kind` (sum, min, max) over `typ`, and its transition type */
static Oid
builtin_agg(const char *kind, Oid typ, Oid *transtype)
{
	List	   *name = list_make2(makeString("pg_catalog"), makeString(pstrdup(kind)));
	Oid			fn = LookupFuncName(name, 1, &typ, true);
	HeapTuple	tup;

	if (!OidIsValid(fn) && typ == VARCHAROID)
	{
		Oid			text = TEXTOID;

		fn = LookupFuncName(name, 1, &text, true);
	}
	if (!OidIsValid(fn))
		return InvalidOid;
	tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(fn));
	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	if (transtype != NULL)
		*transtype = ((Form_pg_aggregate) GETSTRUCT(tup))->aggtranstype;
	ReleaseSysCache(tup);
	return fn;
}

/*
 * The fallback plan: a hashed Agg over F's plain scan (whose targetlist is `cols`: the keys, then
 * the aggregated columns) grouping by the keys, with each aggregated column's sum, min or max in
 * its place.
 */
static Plan *
fallback_agg(Plan *scan, List *cols, int nkeys, List *kinds, double groups)
{
	Agg		   *agg = makeNode(Agg);
	List	   *tlist = NIL;
	ListCell   *lc;
	int			i = 0;

	agg->aggstrategy = AGG_HASHED;
	agg->aggsplit = AGGSPLIT_SIMPLE;
	agg->numCols = nkeys;
	agg->grpColIdx = palloc(sizeof(AttrNumber) * nkeys);
	agg->grpOperators = palloc(sizeof(Oid) * nkeys);
	agg->grpCollations = palloc(sizeof(Oid) * nkeys);
	agg->numGroups = (long) Max(groups, 1.0);
	foreach(lc, cols)
	{
		Var		   *v = lfirst(lc);
		Expr	   *e;

		if (i < nkeys)
		{
			agg->grpColIdx[i] = i + 1;
			agg->grpOperators[i] = hash_eq_op(v->vartype);
			agg->grpCollations[i] = v->varcollid;
			if (!OidIsValid(agg->grpOperators[i]))
				elog(ERROR, "scoot: no hashable equality for a ScootPreAgg key");
			e = (Expr *) copyObject(v);
		}
		else
		{
			Aggref	   *a = makeNode(Aggref);
			const char *kind = strVal(list_nth(kinds, i - nkeys));

			if (strcmp(kind, "count") == 0)
			{
				/* count mode's row count: count(*) */
				a->aggfnoid = F_COUNT_;
				a->aggtype = INT8OID;
				a->aggtranstype = INT8OID;
				a->aggstar = true;
			}
			else
			{
				Oid			transtype = InvalidOid;

				a->aggfnoid = builtin_agg(kind, v->vartype, &transtype);
				if (!OidIsValid(a->aggfnoid))
					elog(ERROR, "scoot: no aggregate for a ScootPreAgg column");
				a->aggtype = get_func_rettype(a->aggfnoid);
				a->aggcollid = type_is_collatable(a->aggtype) ? v->varcollid : InvalidOid;
				a->inputcollid = v->varcollid;
				a->aggtranstype = transtype;
				a->aggargtypes = list_make1_oid(v->vartype);
				a->args = list_make1(makeTargetEntry((Expr *) copyObject(v), 1, NULL, false));
			}
			a->aggkind = AGGKIND_NORMAL;
			a->aggsplit = AGGSPLIT_SIMPLE;
			a->aggno = a->aggtransno = i - nkeys;
			a->location = -1;
			e = (Expr *) a;
		}
		tlist = lappend(tlist, makeTargetEntry(e, i + 1, NULL, false));
		i++;
	}
	agg->plan.targetlist = tlist;
	agg->plan.lefttree = scan;
	agg->plan.startup_cost = scan->total_cost + scan->plan_rows * cpu_operator_cost * (nkeys + 1);
	agg->plan.total_cost = agg->plan.startup_cost + groups * cpu_tuple_cost;
	agg->plan.plan_rows = groups;
	agg->plan.plan_width = scan->plan_width;
	agg->plan.parallel_aware = false;
	agg->plan.parallel_safe = scan->parallel_safe;
	return &agg->plan;
}

static Node *
preagg_create_state(CustomScan *cscan)
{
	ScootAggState *s = (ScootAggState *) newNode(sizeof(ScootAggState), T_CustomScanState);

	s->css.methods = &preagg_exec_methods;
	return (Node *) s;
}

static void
preagg_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	ScootAggState *s = (ScootAggState *) node;
	CustomScan *cs = (CustomScan *) node->ss.ps.plan;
	int			nkeys = intVal(lsecond(cs->custom_private));
	List	   *described = (List *) lthird(cs->custom_private);
	List	   *kinds = (List *) lfourth(cs->custom_private);
	List	   *context;
	StringInfoData keys,
				aggs;
	ListCell   *lc;
	int			i = 0;

	context = set_deparse_context_plan(es->deparse_cxt, node->ss.ps.plan, ancestors);
	initStringInfo(&keys);
	initStringInfo(&aggs);
	foreach(lc, cs->custom_scan_tlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		char	   *col = deparse_expression((Node *) tle->expr, context, false, false);

		if (i++ < nkeys)
		{
			if (keys.len > 0)
				appendStringInfoString(&keys, ", ");
			appendStringInfoString(&keys, col);
		}
		else
		{
			if (aggs.len > 0)
				appendStringInfoString(&aggs, ", ");
			if (strcmp(strVal(list_nth(kinds, i - 1 - nkeys)), "count") == 0)
				appendStringInfoString(&aggs, "count(*)");
			else
				appendStringInfo(&aggs, "%s(%s)", strVal(list_nth(kinds, i - 1 - nkeys)), col);
		}
	}
	ExplainPropertyText("Scoot Group Keys", keys.data, es);
	ExplainPropertyText("Scoot Partial Aggregates", aggs.data, es);
	if (described != NIL)
		ExplainPropertyText("Scoot Block Filter", scoot_describe_filters(described), es);
	if (s->probe_hj != NULL)
	{
		StringInfoData jf;
		int			k;

		initStringInfo(&jf);
		for (k = 0; k < s->probe_nkeys; k++)
		{
			TargetEntry *tle = list_nth_node(TargetEntry, cs->custom_scan_tlist, s->probe_keys[k]);

			if (k > 0)
				appendStringInfoString(&jf, ", ");
			appendStringInfoString(&jf, deparse_expression((Node *) tle->expr, context, false, false));
		}
		appendStringInfoString(&jf, " in the hash join's table");
		ExplainPropertyText("Scoot Join Filter", jf.data, es);
		if (es->analyze && s->started)
		{
			ExplainPropertyInteger("Rows Removed by Scoot Join Filter", NULL, s->probe_removed, es);
			if (es->format != EXPLAIN_FORMAT_TEXT || s->probe_removed_rows > 0)
				ExplainPropertyInteger("Input Rows Removed by Scoot Join Filter", NULL,
									   s->probe_removed_rows, es);
		}
	}
	scoot_aggnode_explain_run(s, es);
}

/* Is `p` a ScootPreAgg plan node (customunique.c's HAVING pushdown)? */
bool
scoot_is_preagg_plan(Plan *p)
{
	return p != NULL && IsA(p, CustomScan) && ((CustomScan *) p)->methods == &preagg_scan_methods;
}

/* Is `ps` a ScootPreAgg node's state (customscan.c's join filter)? */
bool
scoot_is_preagg_state(PlanState *ps)
{
	return ps != NULL && IsA(ps, CustomScanState) &&
		((CustomScanState *) ps)->methods == &preagg_exec_methods;
}

void
scoot_install_custom_preagg(void)
{
	RegisterCustomScanMethods(&preagg_scan_methods);
}

/*
 * The key columns (Vars) a ScootPreAgg path's rows are unique on, or NIL when `p` is not one
 * (customunique.c): the engine's groups, or the same groups from its fallback aggregation.
 */
List *
scoot_preagg_path_keys(Path *p)
{
	CustomPath *cp = (CustomPath *) p;

	if (p == NULL || !IsA(p, CustomPath) || cp->methods != &preagg_path_methods)
		return NIL;
	return list_copy_head((List *) lsecond(cp->custom_private), intVal(lthird(cp->custom_private)));
}

/*
 * Hash joins onto a ScootPreAgg relation: how full the buckets are.
 *
 * PostgreSQL costs a hash join by the share of the inner rows a probe finds in its bucket
 * (estimate_hash_bucket_stats, cached in each hash clause's RestrictInfo), from the inner key
 * column's distinct values, scaled by the relation's rows over the table's (a filter keeps as
 * many of each value as it keeps rows), and takes the smallest share over the hash clauses. A
 * ScootPreAgg relation returns its groups, far fewer than the table's rows, yet every key value
 * the filters kept is still among them, and the groups are unique on the keys together. So both
 * steps overstate the bucket: CH-benCHmark Q4 on a grown database (857k order lines grouped into
 * 86k orders, hashed on all three keys) was costed as if every probe compared ~300 rows, and
 * the merge semi join picked instead ran 206 ms against the hash semi join's 100 ms.
 *
 * When the inner side of a semi or anti join (EXISTS, NOT EXISTS: the subquery's side is the
 * one hashed) has a ScootPreAgg path as its cheapest, this adds the hash join of the
 * outer side's cheapest path and it, with each hash clause's inner bucket share as PostgreSQL
 * computes it for the filtered rows before grouping (the distinct values the groups keep), or,
 * when the hash clauses compare every group key, one group's share (1/groups, at least one
 * bucket's). The shares stay in the clauses until scoot_preagg_restore_buckets puts
 * PostgreSQL's back (the join filter's paths, built next, are costed with them too); other
 * joins keep PostgreSQL's. Inner joins are left as they are: there the groups are the probing
 * side whenever that pays (the join filter drops groups that find no partner; see customscan.c),
 * and a truer cost for the other way round only swapped sides of joins of similar sizes, with no
 * measured gain. Returns what to restore.
 */
typedef struct SavedBucket
{
	RestrictInfo *ri;
	bool		right;			/* the clause's right side is the inner one */
	Selectivity bucketsize;
	Selectivity mcvfreq;
} SavedBucket;

List *
scoot_preagg_hash_join(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *outerrel,
					   RelOptInfo *innerrel, JoinType jointype, JoinPathExtraData *extra)
{
	Path	   *inner = innerrel->cheapest_total_path;
	Path	   *outer = outerrel->cheapest_total_path;
	List	   *keys;
	List	   *hashclauses = NIL;
	List	   *saved = NIL;
	Bitmapset  *keyatts = NULL;
	Bitmapset  *compared = NULL;
	JoinCostWorkspace ws;
	double		buckets;
	double		rows;
	bool		unique;
	ListCell   *lc;

	if (!enable_hashjoin || !(jointype == JOIN_SEMI || jointype == JOIN_ANTI))
		return NIL;
	if (innerrel->reloptkind != RELOPT_BASEREL || inner == NULL || outer == NULL ||
		inner->param_info != NULL || outer->param_info != NULL ||
		!bms_is_empty(joinrel->lateral_relids))
		return NIL;
	keys = scoot_preagg_path_keys(inner);
	if (keys == NIL)
		return NIL;
	foreach(lc, keys)
		keyatts = bms_add_member(keyatts, ((Var *) lfirst(lc))->varattno);

	/* the hash clauses (customscan.c) */
	foreach(lc, extra->restrictlist)
	{
		RestrictInfo *ri = (RestrictInfo *) lfirst(lc);
		Expr	   *side;

		if (!scoot_hash_clause_sides(ri, joinrel, outerrel, innerrel, jointype, NULL, &side))
			continue;
		hashclauses = lappend(hashclauses, ri);
		while (IsA(side, RelabelType))
			side = ((RelabelType *) side)->arg;
		if (IsA(side, Var) && ((Var *) side)->varno == (int) innerrel->relid &&
			((Var *) side)->varlevelsup == 0 &&
			bms_is_member(((Var *) side)->varattno, keyatts))
			compared = bms_add_member(compared, ((Var *) side)->varattno);
	}
	if (hashclauses == NIL)
		return NIL;
	unique = bms_equal(compared, keyatts);

	initial_cost_hashjoin(root, &ws, jointype, hashclauses, outer, inner, extra, false);
	buckets = (double) ws.numbuckets * (double) Max(ws.numbatches, 1);

	/* the filtered rows the groups come from (the plain scan under the node) */
	rows = innerrel->rows;
	innerrel->rows = ((Path *) linitial(((CustomPath *) inner)->custom_paths))->rows;
	foreach(lc, hashclauses)
	{
		RestrictInfo *ri = (RestrictInfo *) lfirst(lc);
		SavedBucket *s = palloc(sizeof(SavedBucket));
		Selectivity bucketsize;
		Selectivity mcvfreq;

		s->ri = ri;
		s->right = ri->outer_is_left;
		s->bucketsize = s->right ? ri->right_bucketsize : ri->left_bucketsize;
		s->mcvfreq = s->right ? ri->right_mcvfreq : ri->left_mcvfreq;
		saved = lappend(saved, s);
		if (unique)
			bucketsize = mcvfreq = Max(1.0 / clamp_row_est(inner->rows), 1.0 / Max(buckets, 1.0));
		else
			estimate_hash_bucket_stats(root,
									   s->right ? get_rightop(ri->clause) : get_leftop(ri->clause),
									   buckets, &mcvfreq, &bucketsize);
		if (s->right)
		{
			ri->right_bucketsize = bucketsize;
			ri->right_mcvfreq = mcvfreq;
		}
		else
		{
			ri->left_bucketsize = bucketsize;
			ri->left_mcvfreq = mcvfreq;
		}
	}
	innerrel->rows = rows;

	if (add_path_precheck(joinrel, ws.startup_cost, ws.total_cost, NIL, NULL))
		add_path(joinrel, (Path *) create_hashjoin_path(root, joinrel, jointype, &ws, extra, outer,
														inner, false, extra->restrictlist,
														NULL, hashclauses));
	return saved;
}

/* Puts back the bucket shares scoot_preagg_hash_join replaced. */
void
scoot_preagg_restore_buckets(List *saved)
{
	ListCell   *lc;

	foreach(lc, saved)
	{
		SavedBucket *s = (SavedBucket *) lfirst(lc);

		if (s->right)
		{
			s->ri->right_bucketsize = s->bucketsize;
			s->ri->right_mcvfreq = s->mcvfreq;
		}
		else
		{
			s->ri->left_bucketsize = s->bucketsize;
			s->ri->left_mcvfreq = s->mcvfreq;
		}
	}
	list_free_deep(saved);
}
