/*
 * ScootUniqueGroups: the final aggregation of a query whose groups are one input row each
 * (planner decision, plan, executor node, EXPLAIN).
 *
 * Eager aggregation (custompreagg.c) leaves PostgreSQL's Agg above the joins to add up the
 * pre-aggregated groups. Often each final group is exactly one joined row: CH-benCHmark Q18
 * groups by the order (orders' primary key) and the customer, and joins order_line's groups
 * (unique on order) to orders and customer by their primary keys, so the hash aggregate above
 * builds a table of tens of thousands of one-row groups (and spills it to disk at work_mem) only
 * to hand back the rows it was given. When that is provable, this node replaces the Agg: it reads
 * the join's rows and computes each aggregate from its one row (sum(x) = x cast to the sum's type,
 * min(x) = max(x) = x, count(*) = 1, count(x) = x IS NOT NULL), then HAVING and the projection.
 *
 * The proof (one_row_groups), for a read-only SELECT with GROUP BY, no grouping sets and only
 * inner joins, over the input's cheapest path: its leaves are base-table scans joined by inner
 * joins (and sorts, materializations, memoizations, gathers); a leaf is "determined" within a
 * group when the values of one of its unique keys are — a ScootPreAgg's group keys, or the
 * columns of a unique, immediately enforced, non-partial btree index that are all NOT NULL and
 * compared by their type's default equality. Known values start as the plain GROUP BY columns
 * (PostgreSQL has already dropped those its primary keys make redundant) and spread through the
 * query's equivalence classes (an equality with a known member or a constant) and from each
 * determined leaf to all its columns, until nothing changes. If every leaf is determined, two
 * rows of one group would be the same combination of leaf rows, which an inner join emits once.
 * Aggregates with FILTER, ORDER BY, DISTINCT or of another kind than sum (of integers, numeric,
 * floats, money or intervals), min, max and count (and count mode's weighted scoot.eager_count(w)
 * = w and scoot.eager_sum(v) = v) keep PostgreSQL's plan.
 *
 * HAVING below the joins (push_having): a HAVING conjunct whose one-row form reads only the
 * columns of one ScootPreAgg (CH Q18's sum(ol_amount) > 200: order_line's partial sum) is that
 * group's final value compared already, and the inner joins above pass the group's columns
 * unchanged to its one final group: it runs as the ScootPreAgg's filter, so the groups it removes
 * (half of Q18's) are never joined. Volatile conjuncts, and parallel-unsafe ones under a Gather,
 * stay at the top.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_am.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "childplan.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "optimizer/planner.h"
#include "optimizer/tlist.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

/* Rust side (src/exec/mod.rs) */
extern bool scoot_unique_groups_enabled(void);
extern bool scoot_unique_having_enabled(void);
extern bool scoot_relation_is_scoot(Relation rel);

/* custompreagg.c */
extern List *scoot_preagg_path_keys(Path *p);
extern bool scoot_is_preagg_plan(Plan *p);

/* customscan.c */
extern Oid	scoot_btree_opfamily(Oid typ);
extern bool scoot_is_scan_path(Path *p);

void		scoot_install_custom_unique(void);

static create_upper_paths_hook_type prev_upper_paths = NULL;

static Plan *unique_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
							  List *tlist, List *clauses, List *custom_plans);
static Node *unique_create_state(CustomScan *cscan);
static void unique_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *unique_exec(CustomScanState *node);
static void unique_end(CustomScanState *node);
static void unique_rescan(CustomScanState *node);
static void unique_explain(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomPathMethods unique_path_methods = {
	.CustomName = "ScootUniqueGroups",
	.PlanCustomPath = unique_plan_path,
};

static const CustomScanMethods unique_scan_methods = {
	.CustomName = "ScootUniqueGroups",
	.CreateCustomScanState = unique_create_state,
};

static const CustomExecMethods unique_exec_methods = {
	.CustomName = "ScootUniqueGroups",
	.BeginCustomScan = unique_begin,
	.ExecCustomScan = unique_exec,
	.EndCustomScan = unique_end,
	.ReScanCustomScan = unique_rescan,
	.ExplainCustomScan = unique_explain,
};

typedef struct ScootUniqueState
{
	CustomScanState css;
	PlanState  *child;
	ExprState **values;			/* each scan column, computed from a child row */
	int			nvalues;
} ScootUniqueState;

/* A base table read by the input path, and the column sets its rows are unique on. */
typedef struct Leaf
{
	Index		relid;
	List	   *keysets;		/* of Bitmapset (attribute numbers - FirstLowInvalid...) */
	List	   *names;			/* what each key set is, for EXPLAIN (String) */
	bool		determined;
	char	   *why;			/* the key set that determined it */
} Leaf;

typedef struct Proof
{
	PlannerInfo *root;
	List	   *leaves;
	Bitmapset **known;			/* per range table index: known attribute numbers (offset) */
	bool		any_scoot;
} Proof;

static bool
deterministic(Oid coll)
{
	return !OidIsValid(coll) || get_collation_isdeterministic(coll);
}

static Var *
plain_var(Node *n)
{
	while (n != NULL && IsA(n, RelabelType))
		n = (Node *) ((RelabelType *) n)->arg;
	if (n != NULL && IsA(n, Var) && ((Var *) n)->varlevelsup == 0 && ((Var *) n)->varattno > 0)
		return (Var *) n;
	return NULL;
}

static Leaf *
leaf_of(Proof *pf, Index relid)
{
	ListCell   *lc;

	foreach(lc, pf->leaves)
		if (((Leaf *) lfirst(lc))->relid == relid)
			return lfirst(lc);
	return NULL;
}

static bool
var_known(Proof *pf, Var *v)
{
	Leaf	   *l = leaf_of(pf, v->varno);

	if (l == NULL)
		return false;
	return l->determined ||
		bms_is_member(v->varattno - FirstLowInvalidHeapAttributeNumber, pf->known[v->varno]);
}

/* Marks `v` known; true if it was not. */
static bool
mark_known(Proof *pf, Var *v)
{
	if (leaf_of(pf, v->varno) == NULL || var_known(pf, v))
		return false;
	pf->known[v->varno] = bms_add_member(pf->known[v->varno],
										 v->varattno - FirstLowInvalidHeapAttributeNumber);
	return true;
}

/* Is the value of `e` the same in every row of a group (all its columns known, no volatility)? */
static bool
expr_known(Proof *pf, Node *e)
{
	Var		   *v = plain_var(e);
	List	   *vars;
	ListCell   *lc;

	if (v != NULL)
		return var_known(pf, v);
	if (contain_volatile_functions(e) || contain_subplans(e) || contain_agg_clause(e) ||
		contain_vars_of_level(e, 1))
		return false;
	vars = pull_var_clause(e, 0);
	foreach(lc, vars)
	{
		Var		   *w = lfirst(lc);

		if (!IsA(w, Var) || w->varattno <= 0 || !var_known(pf, w))
			return false;
	}
	return true;
}

/* Base tables under `p`, joined by inner joins only; false for anything else. */
static bool
collect_leaves(Proof *pf, Path *p)
{
	RelOptInfo *rel;
	RangeTblEntry *rte;
	Relation	r;
	TupleDesc	desc;
	Leaf	   *leaf;
	List	   *pre;
	ListCell   *lc;

	check_stack_depth();
	switch (nodeTag(p))
	{
		case T_NestPath:
		case T_MergePath:
		case T_HashPath:
			{
				JoinPath   *jp = (JoinPath *) p;

				return jp->jointype == JOIN_INNER && collect_leaves(pf, jp->outerjoinpath) &&
					collect_leaves(pf, jp->innerjoinpath);
			}
		case T_ProjectionPath:
			return collect_leaves(pf, ((ProjectionPath *) p)->subpath);
		case T_MaterialPath:
			return collect_leaves(pf, ((MaterialPath *) p)->subpath);
		case T_MemoizePath:
			return collect_leaves(pf, ((MemoizePath *) p)->subpath);
		case T_SortPath:
		case T_IncrementalSortPath:
			return collect_leaves(pf, ((SortPath *) p)->subpath);
		case T_GatherPath:
			return collect_leaves(pf, ((GatherPath *) p)->subpath);
		case T_GatherMergePath:
			return collect_leaves(pf, ((GatherMergePath *) p)->subpath);
		case T_Path:
		case T_IndexPath:
		case T_BitmapHeapPath:
		case T_CustomPath:
			break;
		default:
			return false;
	}
	if (p->pathtype != T_SeqScan && p->pathtype != T_IndexScan &&
		p->pathtype != T_IndexOnlyScan && p->pathtype != T_BitmapHeapScan &&
		p->pathtype != T_CustomScan)
		return false;
	rel = p->parent;
	if (rel->reloptkind != RELOPT_BASEREL || rel->rtekind != RTE_RELATION || rel->relid == 0 ||
		leaf_of(pf, rel->relid) != NULL)
		return false;
	rte = planner_rt_fetch(rel->relid, pf->root);
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION || rte->inh ||
		rte->tablesample != NULL)
		return false;
	pre = scoot_preagg_path_keys(p);
	if (IsA(p, CustomPath) && pre == NIL && !scoot_is_scan_path(p))
		return false;			/* another extension's scan: its rows are its business */

	leaf = palloc0(sizeof(Leaf));
	leaf->relid = rel->relid;
	if (pre != NIL)
	{
		/* the node's rows are unique on its group keys (NULL is a group like any other) */
		Bitmapset  *ks = NULL;

		foreach(lc, pre)
		{
			Var		   *v = lfirst(lc);

			if (!deterministic(v->varcollid))
				return false;
			ks = bms_add_member(ks, v->varattno - FirstLowInvalidHeapAttributeNumber);
		}
		leaf->keysets = list_make1(ks);
		leaf->names = list_make1(makeString("ScootPreAgg keys"));
	}

	r = table_open(rte->relid, NoLock);
	pf->any_scoot = pf->any_scoot || scoot_relation_is_scoot(r);
	desc = RelationGetDescr(r);
	foreach(lc, rel->indexlist)
	{
		IndexOptInfo *ix = lfirst(lc);
		Bitmapset  *ks = NULL;
		bool		ok = ix->unique && ix->immediate && ix->indpred == NIL &&
			ix->relam == BTREE_AM_OID && ix->nkeycolumns > 0;

		if (pre != NIL)
			break;				/* the groups, not the table's rows */
		for (int i = 0; ok && i < ix->nkeycolumns; i++)
		{
			int			attno = ix->indexkeys[i];
			Form_pg_attribute att;

			if (attno <= 0 || attno > desc->natts)
			{
				ok = false;
				break;
			}
			att = TupleDescAttr(desc, attno - 1);
			ok = att->attnotnull && !att->attisdropped &&
				ix->opfamily[i] == scoot_btree_opfamily(att->atttypid) &&
				deterministic(ix->indexcollations[i]);
			ks = bms_add_member(ks, attno - FirstLowInvalidHeapAttributeNumber);
		}
		if (ok)
		{
			leaf->keysets = lappend(leaf->keysets, ks);
			leaf->names = lappend(leaf->names, makeString(get_rel_name(ix->indexoid)));
		}
	}
	table_close(r, NoLock);
	pf->leaves = lappend(pf->leaves, leaf);
	return true;
}

/* Does every group of `input`'s rows hold exactly one row? Fills `why` for EXPLAIN. */
static bool
one_row_groups(PlannerInfo *root, Path *input, StringInfo why)
{
	Query	   *parse = root->parse;
	Proof		pf;
	ListCell   *lc;
	bool		changed = true;

	pf.root = root;
	pf.leaves = NIL;
	pf.any_scoot = false;
	pf.known = palloc0(sizeof(Bitmapset *) * root->simple_rel_array_size);
	if (!collect_leaves(&pf, input) || !pf.any_scoot)
		return false;

	/* the plain GROUP BY columns, grouped by their type's default equality */
	foreach(lc, parse->groupClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, parse->targetList);
		Var		   *v = plain_var((Node *) tle->expr);
		Oid			opf;

		if (v == NULL || leaf_of(&pf, v->varno) == NULL)
			continue;
		opf = scoot_btree_opfamily(exprType((Node *) tle->expr));
		if (!OidIsValid(opf) || !op_in_opfamily(sgc->eqop, opf) || !deterministic(v->varcollid))
			continue;
		mark_known(&pf, v);
	}

	while (changed)
	{
		changed = false;
		/* equalities: a member known (or a constant) makes every member known */
		foreach(lc, root->eq_classes)
		{
			EquivalenceClass *ec = lfirst(lc);
			bool		any = ec->ec_has_const;
			ListCell   *lm;

			if (ec->ec_has_volatile || ec->ec_merged != NULL)
				continue;
			foreach(lm, ec->ec_members)
			{
				EquivalenceMember *em = lfirst(lm);

				if (any)
					break;
				if (em->em_is_child)
					continue;
				if (list_member_oid(ec->ec_opfamilies, scoot_btree_opfamily(exprType((Node *) em->em_expr))) &&
					expr_known(&pf, (Node *) em->em_expr))
					any = true;
			}
			if (!any)
				continue;
			foreach(lm, ec->ec_members)
			{
				EquivalenceMember *em = lfirst(lm);
				Var		   *v = plain_var((Node *) em->em_expr);

				if (em->em_is_child || v == NULL || !deterministic(v->varcollid) ||
					!list_member_oid(ec->ec_opfamilies, scoot_btree_opfamily(exprType((Node *) em->em_expr))))
					continue;
				if (mark_known(&pf, v))
					changed = true;
			}
		}
		/* unique keys: a leaf whose key set is known is one row per group, all of it known */
		foreach(lc, pf.leaves)
		{
			Leaf	   *l = lfirst(lc);
			ListCell   *lk,
					   *ln;

			if (l->determined)
				continue;
			forboth(lk, l->keysets, ln, l->names)
			{
				Bitmapset  *ks = lfirst(lk);

				if (bms_is_subset(ks, pf.known[l->relid]))
				{
					l->determined = true;
					l->why = strVal(lfirst(ln));
					changed = true;
					break;
				}
			}
		}
	}
	foreach(lc, pf.leaves)
	{
		Leaf	   *l = lfirst(lc);

		if (!l->determined)
			return false;
		if (why->len > 0)
			appendStringInfoString(why, ", ");
		appendStringInfo(why, "%s (%s)", get_rel_name(planner_rt_fetch(l->relid, root)->relid),
						 l->why);
	}
	return true;
}

/* The value of aggregate `a` over one row, as an expression of that row (NULL: not known how). */
/*
 * Eager aggregation's count mode (custompreagg.c) over one row: scoot.eager_sum(v) is v and
 * scoot.eager_count(w) is w (the row's group count; 0 if NULL, as a count over no rows), both
 * bigint. NULL for anything else.
 */
static Node *
eager_one_row_value(Aggref *a)
{
	Oid			nsp = get_namespace_oid("scoot", true);
	char	   *name;
	Node	   *arg;

	if (!OidIsValid(nsp) || get_func_namespace(a->aggfnoid) != nsp || a->aggstar ||
		list_length(a->args) != 1 || a->aggtype != INT8OID)
		return NULL;
	name = get_func_name(a->aggfnoid);
	arg = (Node *) copyObject(linitial_node(TargetEntry, a->args)->expr);
	if (name == NULL || exprType(arg) != INT8OID)
		return NULL;
	if (strcmp(name, "eager_sum") == 0)
		return arg;
	if (strcmp(name, "eager_count") == 0)
	{
		CoalesceExpr *c = makeNode(CoalesceExpr);

		c->coalescetype = INT8OID;
		c->coalescecollid = InvalidOid;
		c->args = list_make2(arg, makeConst(INT8OID, -1, InvalidOid, sizeof(int64),
											Int64GetDatum(0), false, FLOAT8PASSBYVAL));
		c->location = -1;
		return (Node *) c;
	}
	return NULL;
}

static Node *
one_row_value(Aggref *a)
{
	char	   *name;
	Node	   *arg;
	Oid			argtype;

	if (a->aggfilter != NULL || a->aggorder != NIL || a->aggdistinct != NIL ||
		a->aggkind != AGGKIND_NORMAL || a->agglevelsup != 0 || a->aggdirectargs != NIL ||
		a->aggvariadic || a->aggsplit != AGGSPLIT_SIMPLE)
		return NULL;
	if (get_func_namespace(a->aggfnoid) != PG_CATALOG_NAMESPACE)
		return eager_one_row_value(a);
	name = get_func_name(a->aggfnoid);
	if (name == NULL)
		return NULL;
	if (strcmp(name, "count") == 0 && a->aggstar)
		return (Node *) makeConst(INT8OID, -1, InvalidOid, sizeof(int64), Int64GetDatum(1), false,
								  FLOAT8PASSBYVAL);
	if (a->aggstar || list_length(a->args) != 1)
		return NULL;
	arg = (Node *) copyObject(linitial_node(TargetEntry, a->args)->expr);
	argtype = exprType(arg);
	if (strcmp(name, "count") == 0)
	{
		/* CASE WHEN arg IS NULL THEN 0 ELSE 1 END */
		CaseExpr   *c = makeNode(CaseExpr);
		CaseWhen   *w = makeNode(CaseWhen);
		NullTest   *nt = makeNode(NullTest);

		nt->arg = (Expr *) arg;
		nt->nulltesttype = IS_NULL;
		nt->argisrow = false;
		nt->location = -1;
		w->expr = (Expr *) nt;
		w->result = (Expr *) makeConst(INT8OID, -1, InvalidOid, sizeof(int64), Int64GetDatum(0),
									   false, FLOAT8PASSBYVAL);
		w->location = -1;
		c->casetype = INT8OID;
		c->casecollid = InvalidOid;
		c->arg = NULL;
		c->args = list_make1(w);
		c->defresult = (Expr *) makeConst(INT8OID, -1, InvalidOid, sizeof(int64), Int64GetDatum(1),
										  false, FLOAT8PASSBYVAL);
		c->location = -1;
		return (Node *) c;
	}
	if (strcmp(name, "min") == 0 || strcmp(name, "max") == 0)
	{
		if (argtype == a->aggtype)
			return arg;
		if (IsBinaryCoercible(argtype, a->aggtype))
			return (Node *) makeRelabelType((Expr *) arg, a->aggtype, -1, a->aggcollid,
											COERCE_IMPLICIT_CAST);
		return NULL;
	}
	if (strcmp(name, "sum") == 0)
	{
		switch (argtype)
		{
			case INT2OID:
			case INT4OID:
			case INT8OID:
			case NUMERICOID:
			case FLOAT4OID:
			case FLOAT8OID:
			case CASHOID:
			case INTERVALOID:
				break;
			default:
				return NULL;
		}
		if (argtype == a->aggtype)
			return arg;
		/* int2 / int4 to bigint, bigint to numeric: exact casts */
		return coerce_to_target_type(NULL, arg, argtype, a->aggtype, -1, COERCION_EXPLICIT,
									 COERCE_IMPLICIT_CAST, -1);
	}
	return NULL;
}

static Node *
one_row_mutator(Node *node, bool *ok)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Aggref))
	{
		Node	   *v = one_row_value((Aggref *) node);

		if (v == NULL)
			*ok = false;
		return v != NULL ? v : node;
	}
	if (IsA(node, GroupingFunc) || IsA(node, WindowFunc) || IsA(node, SubPlan) ||
		IsA(node, AlternativeSubPlan) || IsA(node, SubLink))
	{
		*ok = false;
		return node;
	}
	return expression_tree_mutator(node, one_row_mutator, (void *) ok);
}

typedef struct ChildContext
{
	List	   *exprs;			/* the child's output, in order */
	bool		ok;
} ChildContext;

/* `node` with each subexpression the child outputs read from the child's row (OUTER_VAR). */
static Node *
child_mutator(Node *node, ChildContext *cx)
{
	ListCell   *lc;
	int			i = 1;

	if (node == NULL)
		return NULL;
	foreach(lc, cx->exprs)
	{
		Node	   *e = lfirst(lc);

		if (equal(node, e))
			return (Node *) makeVar(OUTER_VAR, i, exprType(e), exprTypmod(e), exprCollation(e), 0);
		i++;
	}
	if (IsA(node, Var) || IsA(node, PlaceHolderVar) || IsA(node, Aggref))
	{
		cx->ok = false;
		return node;
	}
	return expression_tree_mutator(node, child_mutator, (void *) cx);
}

static List *
to_child(List *values, List *child_exprs, bool *ok)
{
	ChildContext cx;
	List	   *out;

	cx.exprs = child_exprs;
	cx.ok = true;
	out = (List *) child_mutator((Node *) values, &cx);
	*ok = cx.ok;
	return out;
}

static void
unique_upper_paths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel,
				   RelOptInfo *output_rel, void *extra)
{
	GroupPathExtraData *gx = (GroupPathExtraData *) extra;
	Query	   *parse = root->parse;
	Path	   *input;
	List	   *scan_exprs = NIL;
	List	   *values;
	List	   *having_items;
	ListCell   *lc;
	StringInfoData why;
	CustomPath *cp;
	bool		ok = true;
	QualCost	having_cost;
	int			naggs = 0;

	if (prev_upper_paths)
		prev_upper_paths(root, stage, input_rel, output_rel, extra);
	if (stage != UPPERREL_GROUP_AGG || !scoot_unique_groups_enabled())
		return;
	if (gx == NULL || gx->patype != PARTITIONWISE_AGGREGATE_NONE)
		return;
	if (parse->commandType != CMD_SELECT || parse->rowMarks != NIL || parse->groupingSets != NIL ||
		parse->groupClause == NIL || parse->hasTargetSRFs || root->join_info_list != NIL ||
		root->placeholder_list != NIL)
		return;
	input = input_rel->cheapest_total_path;
	if (input == NULL || input->param_info != NULL)
		return;

	/* the node's scan row: the grouping target, then what HAVING reads besides */
	foreach(lc, output_rel->reltarget->exprs)
		scan_exprs = lappend(scan_exprs, lfirst(lc));
	having_items = pull_var_clause(gx->havingQual, PVC_INCLUDE_AGGREGATES |
								   PVC_RECURSE_WINDOWFUNCS | PVC_INCLUDE_PLACEHOLDERS);
	foreach(lc, having_items)
		if (!list_member(scan_exprs, lfirst(lc)))
			scan_exprs = lappend(scan_exprs, lfirst(lc));
	values = (List *) one_row_mutator((Node *) copyObject(scan_exprs), &ok);
	if (!ok || contain_volatile_functions((Node *) scan_exprs))
		return;
	(void) to_child(values, input->pathtarget->exprs, &ok);
	if (!ok)
		return;

	initStringInfo(&why);
	if (!one_row_groups(root, input, &why))
		return;

	cp = makeNode(CustomPath);
	cp->path.pathtype = T_CustomScan;
	cp->path.parent = output_rel;
	cp->path.pathtarget = output_rel->reltarget;
	cp->path.param_info = NULL;
	cp->path.parallel_aware = false;
	cp->path.parallel_safe = false;
	cp->path.parallel_workers = 0;
	cp->path.pathkeys = NIL;
	/*
	 * The rows: PostgreSQL's estimate for its own grouping paths, so that the plan above is
	 * planned as it would be for them (a group per input row is what the proof says, but the
	 * estimate of the input's rows is no better than the estimate of its groups)
	 */
	if (output_rel->pathlist != NIL)
		cp->path.rows = ((Path *) linitial(output_rel->pathlist))->rows;
	else
		cp->path.rows = clamp_row_est(input->rows *
									  clauselist_selectivity(root, (List *) gx->havingQual, 0,
															 JOIN_INNER, NULL));
	/*
	 * per input row: an operator per aggregate's value and HAVING; per output row: the tuple and
	 * the projection (PostgreSQL's Agg adds hashing or sorting, and a transition per aggregate)
	 */
	cost_qual_eval(&having_cost, (List *) gx->havingQual, root);
	foreach(lc, pull_var_clause((Node *) scan_exprs, PVC_INCLUDE_AGGREGATES |
								PVC_RECURSE_WINDOWFUNCS | PVC_INCLUDE_PLACEHOLDERS))
		if (IsA(lfirst(lc), Aggref))
			naggs++;
	cp->path.startup_cost = input->startup_cost + having_cost.startup;
	cp->path.total_cost = input->total_cost + having_cost.startup +
		input->rows * (cpu_operator_cost * naggs + having_cost.per_tuple) +
		cp->path.rows * (cpu_tuple_cost + output_rel->reltarget->cost.per_tuple);
	cp->custom_paths = list_make1(input);
	/* custom_private: (scan row expressions, their one-row values, the proof) */
	cp->custom_private = list_make3(scan_exprs, values, makeString(why.data));
	cp->methods = &unique_path_methods;
	add_path(output_rel, (Path *) cp);
}

/* The ScootPreAgg scan of range table entry `relid` in the plan tree `p`, or NULL; *gather is
 * set when a Gather or Gather Merge lies above it. Stops at anything but the inner joins and row
 * passing nodes that the one-row proof allows (custom scans: their own child plans). */
static CustomScan *
find_preagg_plan(Plan *p, Index relid, bool *gather)
{
	CustomScan *found = NULL;
	ListCell   *lc;

	if (p == NULL)
		return NULL;
	if (scoot_is_preagg_plan(p))
		return ((CustomScan *) p)->scan.scanrelid == relid ? (CustomScan *) p : NULL;
	switch (nodeTag(p))
	{
		case T_HashJoin:
		case T_MergeJoin:
		case T_NestLoop:
		case T_Hash:
		case T_Sort:
		case T_IncrementalSort:
		case T_Material:
		case T_Memoize:
		case T_Result:
		case T_Gather:
		case T_GatherMerge:
			found = find_preagg_plan(p->lefttree, relid, gather);
			if (found == NULL)
				found = find_preagg_plan(p->righttree, relid, gather);
			if (found != NULL && (IsA(p, Gather) || IsA(p, GatherMerge)))
				*gather = true;
			return found;
		case T_CustomScan:
			foreach(lc, ((CustomScan *) p)->custom_plans)
				if ((found = find_preagg_plan(lfirst(lc), relid, gather)) != NULL)
					return found;
			return NULL;
		default:
			return NULL;
	}
}

/* Is every Var of `e` a column of the scan row `tlist` (by range table index and attribute)? */
static bool
vars_in_scan_row(Node *e, List *tlist)
{
	ListCell   *lc,
			   *lt;

	foreach(lc, pull_var_clause(e, 0))
	{
		Var		   *v = lfirst_node(Var, lc);
		bool		found = false;

		foreach(lt, tlist)
		{
			Var		   *t = (Var *) lfirst_node(TargetEntry, lt)->expr;

			if (IsA(t, Var) && t->varno == v->varno && t->varattno == v->varattno &&
				t->varlevelsup == 0 && v->varlevelsup == 0)
				found = true;
		}
		if (!found)
			return false;
	}
	return true;
}

/*
 * Moves the HAVING conjuncts (implicit-AND list `having`) that read one ScootPreAgg's columns
 * only into that node's filter (see the header); returns the others. `pushed`: where each went.
 */
static List *
push_having(PlannerInfo *root, Plan *child, List *having, StringInfo pushed)
{
	List	   *kept = NIL;
	ListCell   *lc;

	foreach(lc, having)
	{
		Node	   *conj = lfirst(lc);
		bool		ok = true;
		Node	   *one = one_row_mutator(copyObject(conj), &ok);
		int			relid;
		CustomScan *pa = NULL;
		bool		gather = false;

		if (ok && !contain_volatile_functions(one) && !contain_subplans(one) &&
			bms_get_singleton_member(pull_varnos(root, one), &relid) &&
			(pa = find_preagg_plan(child, (Index) relid, &gather)) != NULL &&
			(!gather || is_parallel_safe(root, one)) &&
			vars_in_scan_row(one, pa->custom_scan_tlist))
		{
			char	   *name = planner_rt_fetch(relid, root)->eref->aliasname;

			fix_opfuncids(one);
			if (pa->scan.plan.qual == NIL)
			{
				if (pushed->len > 0)
					appendStringInfoString(pushed, ", ");
				appendStringInfoString(pushed, quote_identifier(name));
			}
			pa->scan.plan.qual = lappend(pa->scan.plan.qual, one);
			continue;
		}
		kept = lappend(kept, conj);
	}
	return kept;
}

static Plan *
unique_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
				 List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cs = makeNode(CustomScan);
	List	   *scan_exprs = (List *) linitial(best_path->custom_private);
	List	   *values = (List *) lsecond(best_path->custom_private);
	Plan	   *child = linitial(custom_plans);
	List	   *child_exprs = NIL;
	List	   *scan_tlist = NIL;
	ListCell   *lc;
	bool		ok;
	int			resno = 1;
	StringInfoData pushed;

	foreach(lc, child->targetlist)
		child_exprs = lappend(child_exprs, lfirst_node(TargetEntry, lc)->expr);
	values = to_child(values, child_exprs, &ok);
	if (!ok)
		elog(ERROR, "scoot: ScootUniqueGroups cannot read a value from its input's row");
	fix_opfuncids((Node *) values);
	foreach(lc, scan_exprs)
		scan_tlist = lappend(scan_tlist, makeTargetEntry(copyObject(lfirst(lc)), resno++, NULL, false));

	cs->methods = &unique_scan_methods;
	cs->scan.plan.targetlist = tlist;
	initStringInfo(&pushed);
	cs->scan.plan.qual = root->hasHavingQual && scoot_unique_having_enabled() ?
		push_having(root, child, (List *) copyObject(root->parse->havingQual), &pushed) :
		(List *) copyObject(root->hasHavingQual ? root->parse->havingQual : NULL);
	cs->scan.scanrelid = 0;
	cs->custom_scan_tlist = scan_tlist;
	cs->custom_plans = custom_plans;
	cs->flags = best_path->flags;
	cs->custom_private = list_make3(values, lthird(best_path->custom_private),
									makeString(pushed.data));
	return &cs->scan.plan;
}

static Node *
unique_create_state(CustomScan *cscan)
{
	ScootUniqueState *s = (ScootUniqueState *) newNode(sizeof(ScootUniqueState), T_CustomScanState);

	s->css.methods = &unique_exec_methods;
	return (Node *) s;
}

static void
unique_begin(CustomScanState *node, EState *estate, int eflags)
{
	ScootUniqueState *s = (ScootUniqueState *) node;
	CustomScan *cs = (CustomScan *) node->ss.ps.plan;
	List	   *values = (List *) linitial(cs->custom_private);
	ListCell   *lc;
	int			i = 0;

	s->child = ExecInitNode(linitial(cs->custom_plans), estate, eflags);
	node->custom_ps = list_make1(s->child);
	s->nvalues = list_length(values);
	s->values = palloc(sizeof(ExprState *) * Max(s->nvalues, 1));
	foreach(lc, values)
		s->values[i++] = ExecInitExpr((Expr *) lfirst(lc), &node->ss.ps);
}

static TupleTableSlot *
unique_next(ScanState *ss)
{
	ScootUniqueState *s = (ScootUniqueState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;
	ExprContext *econtext = ss->ps.ps_ExprContext;
	TupleTableSlot *in = ExecProcNode(s->child);

	ExecClearTuple(slot);
	if (TupIsNull(in))
		return slot;
	econtext->ecxt_outertuple = in;
	for (int i = 0; i < s->nvalues; i++)
		slot->tts_values[i] = ExecEvalExprSwitchContext(s->values[i], econtext,
														&slot->tts_isnull[i]);
	return ExecStoreVirtualTuple(slot);
}

static bool
unique_recheck(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
unique_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, (ExecScanAccessMtd) unique_next, (ExecScanRecheckMtd) unique_recheck);
}

static void
unique_end(CustomScanState *node)
{
	ExecEndNode(((ScootUniqueState *) node)->child);
}

static void
unique_rescan(CustomScanState *node)
{
	ScootUniqueState *s = (ScootUniqueState *) node;

	scoot_rescan_child(&node->ss.ps, s->child);
}

static void
unique_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	CustomScan *cs = (CustomScan *) node->ss.ps.plan;

	ExplainPropertyText("Scoot One Row per Group", strVal(lsecond(cs->custom_private)), es);
	if (strVal(lthird(cs->custom_private))[0] != '\0')
		ExplainPropertyText("Scoot HAVING Pushed Down to", strVal(lthird(cs->custom_private)), es);
}

void
scoot_install_custom_unique(void)
{
	RegisterCustomScanMethods(&unique_scan_methods);
	prev_upper_paths = create_upper_paths_hook;
	create_upper_paths_hook = unique_upper_paths;
}
