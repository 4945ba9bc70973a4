/*
 * DISTINCT aggregates by grouping (planner hook, before PostgreSQL plans a statement).
 *
 * PostgreSQL 15 computes `count(DISTINCT x)` inside its Agg node: every group gets a tuplesort of
 * its x values, sorted and deduplicated when the group ends. With many small groups that is one
 * sort set up and torn down per group (CH-benCHmark Q16 groups 100k stock-item rows into 100k
 * groups: its GroupAggregate spent ~100 ms on them, a quarter of the query), and the aggregation
 * can neither hash nor run in parallel. A columnar engine deduplicates first: the statement
 *
 *     SELECT g1, g2, count(DISTINCT x) FROM ... WHERE ... GROUP BY g1, g2 HAVING ... ORDER BY ...
 *
 * returns the same rows as
 *
 *     SELECT g1, g2, count(x)
 *     FROM (SELECT g1, g2, x FROM ... WHERE ... GROUP BY g1, g2, x) scoot_distinct
 *     GROUP BY g1, g2 HAVING ... ORDER BY ...
 *
 * (one row per distinct (group, x), so counting the non-null x of a group counts its distinct
 * values), and both GROUP BYs are PostgreSQL's own: hashed or sorted as it costs them, and when
 * sorted the outer one reads the inner one's order with no second sort. This hook makes that
 * rewrite of every query level of the statement (the top level, FROM subqueries and views, WITH
 * queries, sub-selects; innermost first) that
 *
 *  - has a GROUP BY (without one PostgreSQL sorts all x once already) and reads a scoot table in
 *    its own FROM list, with `scoot.custom_scan` and `scoot.distinct_aggs` on;
 *  - every aggregate of its target list and HAVING is DISTINCT over one and the same argument x,
 *    with no ORDER BY or FILTER, and is count(x) (any type) or min / max / sum / avg of an integer
 *    or date x (aggregates over the set of distinct values: the same result whichever of two equal
 *    values stands for them, and independent of their order);
 *  - the target list and HAVING reference no column of this level except through GROUP BY
 *    expressions and that
 *    argument (no functional dependency on a primary key), hold no sub-select, window function,
 *    set-returning or volatile function; no grouping sets, set operation, FOR UPDATE or
 *    data-modifying WITH.
 *
 * The inner query keeps the FROM list, WHERE, WITH list and range table, one level deeper (its
 * references to enclosing queries skip the new level); the outer one keeps the output, GROUP BY,
 * HAVING, DISTINCT, ORDER BY and LIMIT, and takes the original's place, so a parent query reads
 * the same columns. Both group by the same SortGroupClause
 * operators (the inner one takes x's from the aggregate's DISTINCT), so "distinct" means the same
 * equality as before. EXPLAIN shows the inner query as the subquery `scoot_distinct`.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_relation.h"
#include "rewrite/rewriteManip.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"

extern bool scoot_custom_scan_enabled(void);
extern bool scoot_distinct_aggs_enabled(void);
extern bool scoot_rte_is_scoot_table(RangeTblEntry *rte);

typedef struct DistinctCx
{
	Expr	   *arg;			/* the DISTINCT argument all aggregates share (NULL: none yet) */
	List	   *aggdistinct;	/* its SortGroupClause list, from the first aggregate */
	bool		ok;
} DistinctCx;

/* May agg(DISTINCT x) be computed as agg(x) over the distinct values of x? */
static bool
distinct_agg_allowed(Aggref *a)
{
	char	   *name;
	Oid			t;
	bool		allowed;

	if (get_func_namespace(a->aggfnoid) != PG_CATALOG_NAMESPACE)
		return false;
	name = get_func_name(a->aggfnoid);
	if (name == NULL)
		return false;
	t = list_length(a->aggargtypes) == 1 ? linitial_oid(a->aggargtypes) : InvalidOid;
	if (strcmp(name, "count") == 0)
		allowed = true;
	else if (strcmp(name, "min") == 0 || strcmp(name, "max") == 0 ||
			 strcmp(name, "sum") == 0 || strcmp(name, "avg") == 0)
		allowed = (t == INT2OID || t == INT4OID || t == INT8OID ||
				   (t == DATEOID && (strcmp(name, "min") == 0 || strcmp(name, "max") == 0)));
	else
		allowed = false;
	pfree(name);
	return allowed;
}

/* Are all aggregates below `node` (of this query level) DISTINCT over one argument? */
static bool
check_walker(Node *node, DistinctCx *cx)
{
	if (node == NULL)
		return false;
	if (IsA(node, SubLink) || IsA(node, WindowFunc) || IsA(node, GroupingFunc))
	{
		cx->ok = false;
		return true;
	}
	if (IsA(node, Aggref))
	{
		Aggref	   *a = (Aggref *) node;
		TargetEntry *te;

		if (a->agglevelsup != 0 || a->aggdistinct == NIL || a->aggorder != NIL ||
			a->aggfilter != NULL || a->aggkind != AGGKIND_NORMAL || a->aggstar ||
			a->aggvariadic || a->aggdirectargs != NIL || list_length(a->args) != 1 ||
			list_length(a->aggdistinct) != 1 || !distinct_agg_allowed(a))
		{
			cx->ok = false;
			return true;
		}
		te = linitial_node(TargetEntry, a->args);
		if (cx->arg == NULL)
		{
			cx->arg = te->expr;
			cx->aggdistinct = a->aggdistinct;
		}
		else if (!equal(cx->arg, te->expr) || !equal(cx->aggdistinct, a->aggdistinct))
		{
			cx->ok = false;
			return true;
		}
		return false;			/* the argument itself may reference any column */
	}
	return expression_tree_walker(node, check_walker, (void *) cx);
}

typedef struct MapCx
{
	List	   *keys;			/* GROUP BY expressions, in the inner target list's order */
	Var		   *argvar;			/* the inner output column of the DISTINCT argument */
	bool		ok;
} MapCx;

static Var *
inner_var(Expr *e, AttrNumber attno)
{
	return makeVar(1, attno, exprType((Node *) e), exprTypmod((Node *) e),
				   exprCollation((Node *) e), 0);
}

/* The outer query's expression: GROUP BY expressions and the argument as inner columns */
static Node *
map_mutator(Node *node, MapCx *cx)
{
	ListCell   *lc;
	AttrNumber	attno = 1;

	if (node == NULL)
		return NULL;
	foreach(lc, cx->keys)
	{
		if (equal(node, lfirst(lc)))
			return (Node *) inner_var(lfirst(lc), attno);
		attno++;
	}
	if (IsA(node, Aggref))
	{
		Aggref	   *a = (Aggref *) copyObject(node);
		TargetEntry *te = linitial_node(TargetEntry, a->args);

		te->expr = (Expr *) copyObject(cx->argvar);
		te->ressortgroupref = 0;
		a->aggdistinct = NIL;
		return (Node *) a;
	}
	if ((IsA(node, Var) && ((Var *) node)->varlevelsup == 0) || IsA(node, PlaceHolderVar))
	{
		/* a column that is neither grouped nor aggregated: not this rewrite's shape */
		cx->ok = false;
		return node;
	}
	return expression_tree_mutator(node, map_mutator, (void *) cx);
}

static bool
reads_scoot_table(Query *q)
{
	ListCell   *lc;

	foreach(lc, q->rtable)
		if (scoot_rte_is_scoot_table(lfirst(lc)))
			return true;
	return false;
}

/* `parse`, or the rewritten query computing its DISTINCT aggregates by grouping */
static Query *
rewrite_one(Query *parse)
{
	DistinctCx	cx = {NULL, NIL, true};
	MapCx		mcx;
	Query	   *inner;
	Query	   *outer;
	List	   *inner_tl = NIL;
	List	   *inner_gc = NIL;
	List	   *outer_tl = NIL;
	ListCell   *lc;
	AttrNumber	resno = 1;
	Index		maxref = 0;
	SortGroupClause *xgc;
	ParseState *pstate;

	/*
	 * Without GROUP BY PostgreSQL's plan is one sort of all x already, and the statements that
	 * have it are often OLTP ones (TPC-C's stock level) whose plans should stay heap's.
	 */
	if (parse->groupClause == NIL)
		return parse;
	if (parse->commandType != CMD_SELECT || parse->utilityStmt != NULL || !parse->hasAggs ||
		parse->hasWindowFuncs || parse->hasTargetSRFs || parse->groupingSets != NIL ||
		parse->setOperations != NULL || parse->rowMarks != NIL || parse->hasModifyingCTE ||
		parse->hasForUpdate || parse->constraintDeps != NIL || parse->groupDistinct)
		return parse;
	if (check_walker((Node *) parse->targetList, &cx) ||
		check_walker(parse->havingQual, &cx) || !cx.ok || cx.arg == NULL)
		return parse;
	if (contain_volatile_functions((Node *) parse->targetList) ||
		contain_volatile_functions(parse->havingQual))
		return parse;
	if (!reads_scoot_table(parse))
		return parse;

	/* the inner target list: every GROUP BY expression, then the argument */
	mcx.keys = NIL;
	foreach(lc, parse->targetList)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);

		maxref = Max(maxref, te->ressortgroupref);
	}
	foreach(lc, parse->groupClause)
	{
		SortGroupClause *gc = lfirst_node(SortGroupClause, lc);
		TargetEntry *te = get_sortgroupclause_tle(gc, parse->targetList);
		TargetEntry *ite;

		ite = makeTargetEntry((Expr *) copyObject(te->expr), resno,
							  te->resname ? pstrdup(te->resname) : psprintf("k%d", resno), false);
		resno++;
		ite->ressortgroupref = gc->tleSortGroupRef;
		inner_tl = lappend(inner_tl, ite);
		inner_gc = lappend(inner_gc, copyObject(gc));
		mcx.keys = lappend(mcx.keys, te->expr);
	}
	{
		TargetEntry *ite = makeTargetEntry((Expr *) copyObject(cx.arg), resno, pstrdup("x"), false);

		ite->ressortgroupref = maxref + 1;
		inner_tl = lappend(inner_tl, ite);
		xgc = copyObject(linitial_node(SortGroupClause, cx.aggdistinct));
		xgc->tleSortGroupRef = maxref + 1;
		inner_gc = lappend(inner_gc, xgc);
		mcx.argvar = inner_var(cx.arg, resno);
	}

	/* the outer target list and HAVING over the inner columns */
	mcx.ok = true;
	foreach(lc, parse->targetList)
	{
		TargetEntry *te = flatCopyTargetEntry(lfirst_node(TargetEntry, lc));

		te->expr = (Expr *) map_mutator((Node *) te->expr, &mcx);
		outer_tl = lappend(outer_tl, te);
	}
	outer = makeNode(Query);
	outer->havingQual = map_mutator(parse->havingQual, &mcx);
	if (!mcx.ok)
		return parse;

	inner = (Query *) palloc(sizeof(Query));
	memcpy(inner, parse, sizeof(Query));
	inner->queryId = UINT64CONST(0);
	inner->canSetTag = false;
	inner->hasAggs = false;
	inner->hasDistinctOn = false;
	inner->targetList = inner_tl;
	inner->groupClause = inner_gc;
	inner->havingQual = NULL;
	inner->distinctClause = NIL;
	/*
	 * Ordered by the groups and x when every key has a sort operator: a sort of all rows by
	 * (groups, x) then a Group node is what PostgreSQL's own plan (a sort by the groups plus a
	 * sort of x per group) does without the per-group sorts, and the outer GROUP BY reads that
	 * order with no sort of its own. Hashing 100k groups of text keys twice was no faster than
	 * PostgreSQL's plan in CH Q16, so the rewrite does not leave that choice to the costs.
	 */
	inner->sortClause = NIL;
	foreach(lc, inner_gc)
	{
		SortGroupClause *gc = lfirst_node(SortGroupClause, lc);

		if (!OidIsValid(gc->sortop))
		{
			inner->sortClause = NIL;
			break;
		}
		inner->sortClause = lappend(inner->sortClause, copyObject(gc));
	}
	inner->limitOffset = NULL;
	inner->limitCount = NULL;
	inner->limitOption = LIMIT_OPTION_DEFAULT;
	inner->stmt_location = -1;
	inner->stmt_len = 0;
	/* one level deeper now: references to the levels above the query (a correlated
	 * subquery's, a LATERAL subquery's, a CTE of an outer query) must skip the outer query */
	IncrementVarSublevelsUp((Node *) inner, 1, 1);

	outer->commandType = CMD_SELECT;
	outer->querySource = parse->querySource;
	outer->queryId = parse->queryId;
	outer->canSetTag = parse->canSetTag;
	outer->hasAggs = true;
	outer->hasDistinctOn = parse->hasDistinctOn;
	outer->hasRowSecurity = parse->hasRowSecurity;
	outer->targetList = outer_tl;
	outer->groupClause = parse->groupClause;
	outer->distinctClause = parse->distinctClause;
	outer->sortClause = parse->sortClause;
	outer->limitOffset = parse->limitOffset;
	outer->limitCount = parse->limitCount;
	outer->limitOption = parse->limitOption;
	outer->override = OVERRIDING_NOT_SET;
	outer->stmt_location = parse->stmt_location;
	outer->stmt_len = parse->stmt_len;

	pstate = make_parsestate(NULL);
	addRangeTableEntryForSubquery(pstate, inner, makeAlias("scoot_distinct", NIL), false, true);
	outer->rtable = pstate->p_rtable;
	outer->jointree = makeFromExpr(list_make1(makeNode(RangeTblRef)), NULL);
	((RangeTblRef *) linitial(outer->jointree->fromlist))->rtindex = 1;
	free_parsestate(pstate);
	return outer;
}

static void rewrite_tree(Query *q);

static bool
rewrite_walker(Node *node, void *cx)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		rewrite_tree((Query *) node);
		return false;
	}
	return expression_tree_walker(node, rewrite_walker, cx);
}

/* Rewrites q's subqueries (FROM, views, WITH, sub-selects), then q itself in place */
static void
rewrite_tree(Query *q)
{
	Query	   *r;

	check_stack_depth();
	query_tree_walker(q, rewrite_walker, NULL, 0);
	r = rewrite_one(q);
	if (r != q)
		*q = *r;				/* whoever points to q now reads the rewritten query */
}

/* The planner hook's entry: every query level of the statement that has the shape */
Query *
scoot_distinct_agg_rewrite(Query *parse)
{
	if (!scoot_custom_scan_enabled() || !scoot_distinct_aggs_enabled())
		return parse;
	rewrite_tree(parse);
	return parse;
}
