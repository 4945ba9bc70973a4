/*
 * ScootAgg: aggregate pushdown for scoot tables (planner path on the GROUP BY upper relation,
 * plan, executor node, EXPLAIN). The Rust side (src/exec/agg.rs) computes the aggregates a
 * block at a time on the PAX column regions; this file decides which queries it may answer and
 * hands it a description of the work.
 *
 * Shapes pushed down: a read-only SELECT over one scoot table whose every restriction clause is
 * a block filter (customscan.c: column op constant, IS [NOT] NULL, IN lists), grouped by plain
 * columns of integer, date, timestamp, numeric(p <= 38, s) or char/varchar(n <= 16) type (or not
 * grouped), with aggregates count(*), count(x), sum, avg, min and max (no DISTINCT, ORDER BY or
 * FILTER) over expressions built from such columns and constants with + - * (numeric and
 * integer). HAVING and any expression over the results are PostgreSQL's own (the node's qual and
 * projection). Anything else keeps PostgreSQL's plan.
 *
 * The node carries PostgreSQL's own Agg plan for the same query as its child, and runs it
 * instead whenever the block path cannot answer exactly (a block storing a column in another
 * form, a NaN, an overflow: see agg.rs): EXPLAIN ANALYZE says so. Its output row is the group
 * keys then the aggregates (custom_scan_tlist); the child Agg's target list is set to the same
 * list, so either source fills the same scan slot.
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_am.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "childplan.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planner.h"
#include "optimizer/prep.h"
#include "optimizer/tlist.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/selfuncs.h"

#include "aggnode.h"

/* customscan.c */
extern char *scoot_block_filter(RelOptInfo *rel, Expr *clause, char **describe, Relation r);
extern double scoot_column_share(RelOptInfo *rel, int natts, bool *all);
extern char *scoot_describe_filters(List *described);
extern Oid scoot_btree_opfamily(Oid typ);

/* Rust side (src/exec/mod.rs, src/exec/agg.rs) */
extern bool scoot_custom_scan_enabled(void);
extern bool scoot_agg_pushdown_enabled(void);
extern bool scoot_relation_is_scoot(Relation rel);
extern void *scoot_agg_create(const char *spec);
extern void scoot_agg_free(void *agg);
extern const char *scoot_agg_run(void *agg, TableScanDesc scan);
extern int64 scoot_agg_ngroups(void *agg);
extern void scoot_agg_stats(void *agg, int64 *blocks, int64 *emptied, int64 *skipped,
							int64 *grid_cells, int64 *grid_rows);
extern void scoot_agg_row(void *agg, int64 g, Datum *values, bool *nulls);
extern void scoot_analytic_statement(void);

void		scoot_install_custom_agg(void);
Datum		scoot_numeric_div(Datum a, Datum b);

static create_upper_paths_hook_type prev_upper_paths = NULL;


static Plan *agg_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
						   List *tlist, List *clauses, List *custom_plans);
static Node *agg_create_state(CustomScan *cscan);
static void agg_explain(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomPathMethods agg_path_methods = {
	.CustomName = "ScootAgg",
	.PlanCustomPath = agg_plan_path,
};

static const CustomScanMethods agg_scan_methods = {
	.CustomName = "ScootAgg",
	.CreateCustomScanState = agg_create_state,
};

static const CustomExecMethods agg_exec_methods = {
	.CustomName = "ScootAgg",
	.BeginCustomScan = scoot_aggnode_begin,
	.ExecCustomScan = scoot_aggnode_exec,
	.EndCustomScan = scoot_aggnode_end,
	.ReScanCustomScan = scoot_aggnode_rescan,
	.ExplainCustomScan = agg_explain,
};

/* PostgreSQL's numeric division, for avg (agg.rs) */
Datum
scoot_numeric_div(Datum a, Datum b)
{
	return DirectFunctionCall2(numeric_div, a, b);
}

/* The integer-path type code of a column type ("i4", "d2", "c1"), or NULL. */
static char *
type_code(Oid typ, int32 typmod, bool key)
{
	switch (typ)
	{
		case INT2OID:
			return "i2";
		case INT4OID:
		case DATEOID:
			return "i4";
		case INT8OID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return "i8";
		case NUMERICOID:
			{
				int			precision,
							scale;

				if (typmod < (int32) VARHDRSZ)
					return NULL;	/* unconstrained: stored as varlena */
				precision = ((typmod - VARHDRSZ) >> 16) & 0xffff;
				scale = (((typmod - VARHDRSZ) & 0x7ff) ^ 1024) - 1024;
				if (precision > 38 || scale < 0 || scale > precision)
					return NULL;
				return psprintf("d%d", scale);
			}
		case BPCHAROID:
		case VARCHAROID:
			if (!key || typmod <= (int32) VARHDRSZ || typmod - VARHDRSZ > 16)
				return NULL;
			return psprintf("c%d", typmod - VARHDRSZ);
		default:
			return NULL;
	}
}

/* type_code for custompreagg.c */
char *
scoot_agg_type_code(Oid typ, int32 typmod, bool key)
{
	return type_code(typ, typmod, key);
}

static bool
is_rel_var(Node *n, Index relid)
{
	Var		   *v = (Var *) n;

	return n != NULL && IsA(n, Var) && v->varno == (int) relid && v->varattno > 0 &&
		v->varlevelsup == 0;
}

/* Bytes of an integer type (int2, int4, int8), else 0. */
static int
int_width(Oid typ)
{
	return typ == INT2OID ? 2 : typ == INT4OID ? 4 : typ == INT8OID ? 8 : 0;
}

/*
 * Appends an aggregate argument in reverse Polish notation (agg.rs) to `out`; false if the
 * integer path cannot evaluate it. *typ: its SQL type.
 */
static bool
encode_expr(Node *n, Index relid, StringInfo out, Oid *typ)
{
	if (n == NULL)
		return false;
	if (IsA(n, RelabelType))
		n = (Node *) ((RelabelType *) n)->arg;
	if (is_rel_var(n, relid))
	{
		Var		   *v = (Var *) n;
		char	   *code = type_code(v->vartype, v->vartypmod, false);

		if (code == NULL)
			return false;
		appendStringInfo(out, " v%d:%s", v->varattno, code);
		*typ = v->vartype;
		return true;
	}
	if (IsA(n, Const))
	{
		Const	   *c = (Const *) n;

		if (c->constisnull)
			return false;
		*typ = c->consttype;
		switch (c->consttype)
		{
			case INT2OID:
				appendStringInfo(out, " k%d:i2", (int) DatumGetInt16(c->constvalue));
				return true;
			case INT4OID:
				appendStringInfo(out, " k%d:i4", DatumGetInt32(c->constvalue));
				return true;
			case INT8OID:
				appendStringInfo(out, " k" INT64_FORMAT ":i8", DatumGetInt64(c->constvalue));
				return true;
			case NUMERICOID:
				{
					char	   *s,
							   *dot;
					StringInfoData digits;
					int			scale = 0;

					if (numeric_is_nan(DatumGetNumeric(c->constvalue)) ||
						numeric_is_inf(DatumGetNumeric(c->constvalue)))
						return false;
					/* numeric_out prints exactly the display scale's fraction digits */
					s = DatumGetCString(DirectFunctionCall1(numeric_out, c->constvalue));
					dot = strchr(s, '.');
					if (dot)
						scale = strlen(dot + 1);
					initStringInfo(&digits);
					for (; *s; s++)
						if (*s != '.')
							appendStringInfoChar(&digits, *s);
					if (digits.len > 38 || scale > 38)
						return false;
					appendStringInfo(out, " k%s:d%d", digits.data, scale);
					return true;
				}
			default:
				return false;
		}
	}
	if (IsA(n, OpExpr) && list_length(((OpExpr *) n)->args) == 2)
	{
		/*
		 * PostgreSQL's own + - * on numeric, or on integers of any widths (int2, int4, int8;
		 * the result has the wider operand's type and raises an error on overflow)
		 */
		OpExpr	   *op = (OpExpr *) n;
		Oid			a,
					b,
					res = op->opresulttype;
		char	   *name = get_opname(op->opno);
		StringInfoData l,
					r;

		set_opfuncid(op);
		if (name == NULL || strlen(name) != 1 || strchr("+-*", name[0]) == NULL ||
			get_func_namespace(op->opfuncid) != PG_CATALOG_NAMESPACE)
			return false;
		initStringInfo(&l);
		initStringInfo(&r);
		if (!encode_expr(linitial(op->args), relid, &l, &a) ||
			!encode_expr(lsecond(op->args), relid, &r, &b))
			return false;
		if (a == NUMERICOID && b == NUMERICOID && res == NUMERICOID)
		{
			appendStringInfo(out, "%s%s %s:d", l.data, r.data, name);
			*typ = res;
			return true;
		}
		if (int_width(a) == 0 || int_width(b) == 0 ||
			int_width(res) != Max(int_width(a), int_width(b)))
			return false;
		appendStringInfoString(out, l.data);
		if (int_width(a) < int_width(res))
			appendStringInfo(out, " toi%d", int_width(res));
		appendStringInfoString(out, r.data);
		if (int_width(b) < int_width(res))
			appendStringInfo(out, " toi%d", int_width(res));
		appendStringInfo(out, " %s:i%d", name, int_width(res));
		*typ = res;
		return true;
	}
	if (IsA(n, FuncExpr) && list_length(((FuncExpr *) n)->args) == 1)
	{
		FuncExpr   *f = (FuncExpr *) n;
		Oid			a;
		const char *tok;

		switch (f->funcid)
		{
			case F_NUMERIC_INT2:
			case F_NUMERIC_INT4:
			case F_NUMERIC_INT8: tok = "tonum"; break;
			case F_INT8_INT2:
			case F_INT8_INT4: tok = "toi8"; break;
			case F_INT4_INT2: tok = "toi4"; break;
			default: return false;
		}
		if (!encode_expr(linitial(f->args), relid, out, &a) || int_width(a) == 0 ||
			(strcmp(tok, "toi4") == 0 && a != INT2OID))
			return false;
		appendStringInfo(out, " %s", tok);
		*typ = f->funcresulttype;
		return true;
	}
	return false;
}

/* Appends "A kind expression" for a supported aggregate; false otherwise. */
static bool
encode_aggref(Aggref *a, Index relid, StringInfo out)
{
	char	   *name;
	Oid			argtyp = InvalidOid;
	StringInfoData e;

	if (a->aggsplit != AGGSPLIT_SIMPLE || a->aggdistinct != NIL || a->aggorder != NIL ||
		a->aggfilter != NULL || a->aggvariadic || a->aggkind != AGGKIND_NORMAL ||
		a->agglevelsup != 0 || a->aggdirectargs != NIL)
		return false;
	if (get_func_namespace(a->aggfnoid) != PG_CATALOG_NAMESPACE)
		return false;
	name = get_func_name(a->aggfnoid);
	if (strcmp(name, "count") == 0 && a->aggstar)
	{
		appendStringInfoString(out, "A countstar\n");
		return true;
	}
	if (list_length(a->args) != 1)
		return false;
	initStringInfo(&e);
	if (!encode_expr((Node *) ((TargetEntry *) linitial(a->args))->expr, relid, &e, &argtyp))
	{
		Node	   *arg = (Node *) ((TargetEntry *) linitial(a->args))->expr;

		/* count(column) of any type counts the non-NULL values: the validity bitmap */
		if (strcmp(name, "count") == 0 && a->aggtype == INT8OID && is_rel_var(arg, relid))
		{
			appendStringInfo(out, "A count p%d\n", ((Var *) arg)->varattno);
			return true;
		}
		return false;
	}
	if (strcmp(name, "count") == 0)
	{
		if (a->aggtype != INT8OID)
			return false;
	}
	else if (strcmp(name, "sum") == 0)
	{
		if (a->aggtype != ((argtyp == INT2OID || argtyp == INT4OID) ? INT8OID : NUMERICOID) ||
			!(argtyp == INT2OID || argtyp == INT4OID || argtyp == INT8OID || argtyp == NUMERICOID))
			return false;
	}
	else if (strcmp(name, "avg") == 0)
	{
		if (a->aggtype != NUMERICOID ||
			!(argtyp == INT2OID || argtyp == INT4OID || argtyp == INT8OID || argtyp == NUMERICOID))
			return false;
	}
	else if (strcmp(name, "min") == 0 || strcmp(name, "max") == 0)
	{
		if (a->aggtype != argtyp)
			return false;
	}
	else
		return false;
	appendStringInfo(out, "A %s%s\n", name, e.data);
	return true;
}

/* costsize.c's cpu cost of an expression list (per tuple) */
static Cost
per_tuple_cost(PlannerInfo *root, List *exprs)
{
	QualCost	c;

	cost_qual_eval(&c, exprs, root);
	return c.per_tuple;
}

/*
 * A one-step Agg path for the fallback when the grouping relation holds none: with parallel
 * workers allowed, add_path may already have dropped every one-step Agg for a cheaper-looking
 * partial aggregate under a Gather (a plan whose Finalize step cannot sit under ScootAgg), and
 * ScootAgg was then never offered (TPC-H Q15 with 2 workers: 244 ms instead of 49). Hashed
 * over the cheapest non-parallel input path (every key type ScootAgg groups by hashes), or
 * plain without GROUP BY. The block path answers the query; this plan runs only if it cannot.
 */
static Path *
simple_agg_path(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *output_rel,
				GroupPathExtraData *gx)
{
	Query	   *parse = root->parse;
	AggClauseCosts costs;
	Path	   *in = NULL;
	ListCell   *lc;
	double		groups = 1;

	if (parse->groupClause != NIL && !grouping_is_hashable(parse->groupClause))
		return NULL;
	foreach(lc, input_rel->pathlist)
	{
		Path	   *p = lfirst(lc);

		if (p->param_info == NULL && !IsA(p, GatherPath) && !IsA(p, GatherMergePath) &&
			(in == NULL || p->total_cost < in->total_cost))
			in = p;
	}
	if (in == NULL)
		return NULL;
	if (parse->groupClause != NIL)
		groups = estimate_num_groups(root,
									 get_sortgrouplist_exprs(parse->groupClause,
															 parse->targetList),
									 in->rows, NULL, NULL);
	MemSet(&costs, 0, sizeof(costs));
	get_agg_clause_costs(root, AGGSPLIT_SIMPLE, &costs);
	return (Path *) create_agg_path(root, output_rel, in, output_rel->reltarget,
									parse->groupClause != NIL ? AGG_HASHED : AGG_PLAIN,
									AGGSPLIT_SIMPLE, parse->groupClause,
									(List *) gx->havingQual, &costs, groups);
}

static void
scoot_upper_paths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel,
				  RelOptInfo *output_rel, void *extra)
{
	GroupPathExtraData *gx = (GroupPathExtraData *) extra;
	Query	   *parse = root->parse;
	RangeTblEntry *rte;
	Relation	r;
	bool		is_scoot;
	Index		relid;
	StringInfoData spec;
	List	   *flat = NIL;
	List	   *described = NIL;
	List	   *items;
	ListCell   *lc;
	Path	   *child = NULL;
	CustomPath *cp;
	int			natts,
				nkeys = 0,
				naggs = 0;
	bool		all;
	double		share;
	Cost		cpu;

	if (prev_upper_paths)
		prev_upper_paths(root, stage, input_rel, output_rel, extra);
	if (stage != UPPERREL_GROUP_AGG || !scoot_custom_scan_enabled() ||
		!scoot_agg_pushdown_enabled())
		return;
	if (gx == NULL || gx->patype != PARTITIONWISE_AGGREGATE_NONE)
		return;
	if (parse->commandType != CMD_SELECT || parse->rowMarks != NIL || parse->groupingSets != NIL ||
		parse->hasTargetSRFs)
		return;
	if (input_rel->reloptkind != RELOPT_BASEREL || input_rel->rtekind != RTE_RELATION ||
		input_rel->lateral_relids != NULL || input_rel->relid == 0)
		return;
	relid = input_rel->relid;
	rte = planner_rt_fetch(relid, root);
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION || rte->inh ||
		rte->tablesample != NULL)
		return;
	r = table_open(rte->relid, NoLock);
	is_scoot = scoot_relation_is_scoot(r);
	natts = RelationGetDescr(r)->natts;
	if (!is_scoot)
	{
		table_close(r, NoLock);
		return;
	}

	initStringInfo(&spec);
	/* every restriction clause must be a block filter (evaluated exactly, per row) */
	foreach(lc, input_rel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		char	   *d = NULL;
		char	   *f;

		f = ri->pseudoconstant ? NULL : scoot_block_filter(input_rel, ri->clause, &d, r);
		if (f == NULL)
		{
			table_close(r, NoLock);
			return;
		}
		appendStringInfo(&spec, "F %s\n", f);
		described = lappend(described, makeString(d));
	}
	table_close(r, NoLock);

	/* group keys: plain columns of key types, grouped by their type's own equality */
	foreach(lc, parse->groupClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, parse->targetList);
		Var		   *v = (Var *) tle->expr;
		char	   *code;
		Oid			btree_opf;

		if (!is_rel_var((Node *) v, relid))
			return;
		code = type_code(v->vartype, v->vartypmod, true);
		if (code == NULL)
			return;
		{
			/* varchar compares with text's operators */
			Oid			optype = v->vartype == VARCHAROID ? TEXTOID : v->vartype;

			btree_opf = scoot_btree_opfamily(optype);
			if (!OidIsValid(btree_opf) ||
				get_opfamily_member(btree_opf, optype, optype,
									BTEqualStrategyNumber) != sgc->eqop)
				return;
		}
		if (OidIsValid(v->varcollid) && !get_collation_isdeterministic(v->varcollid))
			return;
		appendStringInfo(&spec, "K %d %s\n", v->varattno, code);
		flat = lappend(flat, v);
		nkeys++;
	}

	/* what the target and HAVING read: group key columns and supported aggregates only */
	items = pull_var_clause((Node *) output_rel->reltarget->exprs,
							PVC_INCLUDE_AGGREGATES | PVC_RECURSE_WINDOWFUNCS |
							PVC_RECURSE_PLACEHOLDERS);
	items = list_concat(items, pull_var_clause(gx->havingQual,
											   PVC_INCLUDE_AGGREGATES | PVC_RECURSE_WINDOWFUNCS |
											   PVC_RECURSE_PLACEHOLDERS));
	foreach(lc, items)
	{
		Node	   *n = lfirst(lc);

		if (IsA(n, Var))
		{
			if (!list_member(flat, n))
				return;
			continue;
		}
		if (!IsA(n, Aggref))
			return;
		if (list_member(flat, n))
			continue;
		if (!encode_aggref((Aggref *) n, relid, &spec))
			return;
		flat = lappend(flat, n);
		naggs++;
	}
	if (flat == NIL)
		return;

	/* the fallback: PostgreSQL's own cheapest one-step Agg plan for the query */
	foreach(lc, output_rel->pathlist)
	{
		Path	   *p = lfirst(lc);

		if (IsA(p, AggPath) && ((AggPath *) p)->aggsplit == AGGSPLIT_SIMPLE &&
			(child == NULL || p->total_cost < child->total_cost))
			child = p;
	}
	if (child == NULL)
		child = simple_agg_path(root, input_rel, output_rel, gx);
	if (child == NULL)
		return;
	/* add_path frees the paths ours dominates: keep a copy (its subpaths belong to input_rel) */
	{
		AggPath    *copy = makeNode(AggPath);

		memcpy(copy, child, sizeof(AggPath));
		child = (Path *) copy;
	}

	cp = makeNode(CustomPath);
	cp->path.pathtype = T_CustomScan;
	cp->path.parent = output_rel;
	cp->path.pathtarget = output_rel->reltarget;
	cp->path.param_info = NULL;
	cp->path.parallel_aware = false;
	cp->path.parallel_safe = false;
	cp->path.parallel_workers = 0;
	cp->path.pathkeys = NIL;
	cp->path.rows = child->rows;
	/*
	 * Cost: the columns' share of the table's pages, plus a fraction of an operator per row and
	 * filter, key and aggregate (they run over column arrays, not tuples); HAVING and the
	 * projection per group.
	 */
	share = scoot_column_share(input_rel, natts, &all);
	cpu = input_rel->tuples * cpu_operator_cost * 0.25 * (1 + list_length(described) + nkeys + naggs);
	cp->path.startup_cost = seq_page_cost * input_rel->pages * share + cpu +
		child->rows * per_tuple_cost(root, (List *) gx->havingQual);
	cp->path.total_cost = cp->path.startup_cost +
		child->rows * (cpu_tuple_cost + output_rel->reltarget->cost.per_tuple);
	if (!enable_seqscan)
		cp->path.startup_cost += disable_cost, cp->path.total_cost += disable_cost;
	cp->custom_paths = list_make1(child);
	/* custom_private: (description, relation, group keys then aggregates, filter texts) */
	cp->custom_private = list_make4(makeString(spec.data), makeInteger(relid), flat, described);
	cp->methods = &agg_path_methods;
	add_path(output_rel, (Path *) cp);
}

static Plan *
agg_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
			  List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cs = makeNode(CustomScan);
	List	   *flat = (List *) lthird(best_path->custom_private);
	List	   *scan_tlist = NIL;
	List	   *child_tlist = NIL;
	Plan	   *child = linitial(custom_plans);
	ListCell   *lc;
	int			resno = 1;

	foreach(lc, flat)
	{
		scan_tlist = lappend(scan_tlist, makeTargetEntry(copyObject(lfirst(lc)), resno, NULL, false));
		child_tlist = lappend(child_tlist, makeTargetEntry(copyObject(lfirst(lc)), resno, NULL, false));
		resno++;
	}
	if (!IsA(child, Agg))
		elog(ERROR, "scoot: the aggregate fallback plan is a %d node, not an Agg", (int) nodeTag(child));
	/* the fallback produces the node's scan row */
	child->targetlist = child_tlist;

	cs->methods = &agg_scan_methods;
	cs->scan.plan.targetlist = tlist;
	cs->scan.plan.qual = (List *) copyObject(root->hasHavingQual ? root->parse->havingQual : NULL);
	cs->scan.scanrelid = intVal(lsecond(best_path->custom_private));
	cs->custom_scan_tlist = scan_tlist;
	cs->custom_plans = custom_plans;
	cs->flags = best_path->flags;
	cs->custom_private = list_make3(linitial(best_path->custom_private),
									makeInteger(list_length(flat)),
									lfourth(best_path->custom_private));
	return &cs->scan.plan;
}

static Node *
agg_create_state(CustomScan *cscan)
{
	ScootAggState *s = (ScootAggState *) newNode(sizeof(ScootAggState), T_CustomScanState);

	s->css.methods = &agg_exec_methods;
	return (Node *) s;
}

void
scoot_aggnode_begin(CustomScanState *node, EState *estate, int eflags)
{
	ScootAggState *s = (ScootAggState *) node;
	CustomScan *cs = (CustomScan *) node->ss.ps.plan;

	/* the backend keeps the memory analytic statements free (exec/memory.rs) */
	scoot_analytic_statement();
	s->child = ExecInitNode(linitial(cs->custom_plans), estate, eflags);
	node->custom_ps = list_make1(s->child);
	s->cxt = AllocSetContextCreate(CurrentMemoryContext, "ScootAgg", ALLOCSET_DEFAULT_SIZES);
}

extern int	scoot_agg_key_hash(void *agg, int64 g, int n, const int *cols, const int *widths,
							   uint32 *hash);
extern bool scoot_hj_may_match(void *filter, uint32 hashvalue);
extern void scoot_agg_set_row_join_filter(void *agg, void *table,
										  bool (*may_match) (void *, uint32),
										  int n, const int *cols, const int *widths);
extern int64 scoot_agg_join_removed(void *agg);

/*
 * A result one aggregation node computed that identical nodes of the same query reuse: a query
 * that reads a view or subquery twice (CH-benCHmark's Q15 joins its revenue view and takes the
 * view's max in a subquery: two ScootPreAggs with the same description) aggregated the same
 * table twice under the same snapshot. A node shares what it computed when the result is the
 * whole table's: the same kind of node, table, description and snapshot, not parallel-aware (a
 * parallel node sees its share of the blocks), no fallback, and no row dropped by a join filter
 * before grouping (that depends on the node's own join). The nodes read it without changing
 * it; each returns the groups in its own memory and applies its own join filter to them. It is
 * freed when its last node resets (rescan, end) or with the query's memory.
 */
typedef struct SharedAgg
{
	const CustomExecMethods *kind;
	Oid			relid;
	const char *spec;			/* the nodes' description (plan memory) */
	Snapshot	snapshot;
	void	   *agg;			/* NULL once freed */
	int			refs;
	int64		ngroups;
} SharedAgg;

/* The shared results of the query running now (one EState; a nested query starts its own). */
typedef struct SharedAggs
{
	EState	   *estate;
	List	   *entries;
	MemoryContextCallback cb;
} SharedAggs;

static SharedAggs *shared_aggs = NULL;

static void
shared_aggs_gone(void *arg)
{
	if (shared_aggs == arg)
		shared_aggs = NULL;
}

static SharedAggs *
shared_aggs_of(EState *estate, bool create)
{
	SharedAggs *r;

	if (shared_aggs != NULL && shared_aggs->estate == estate)
		return shared_aggs;
	if (!create)
		return NULL;
	r = MemoryContextAllocZero(estate->es_query_cxt, sizeof(SharedAggs));
	r->estate = estate;
	r->cb.func = shared_aggs_gone;
	r->cb.arg = r;
	MemoryContextRegisterResetCallback(estate->es_query_cxt, &r->cb);
	shared_aggs = r;
	return r;
}

/* May this node share its result (or use another's)? */
static bool
agg_shareable(ScootAggState *s)
{
	return !s->css.ss.ps.plan->parallel_aware;
}

/* An identical node's result this node may read, or NULL. */
static SharedAgg *
shared_agg_find(ScootAggState *s, const char *spec)
{
	EState	   *estate = s->css.ss.ps.state;
	SharedAggs *r = shared_aggs_of(estate, false);
	ListCell   *lc;

	if (r == NULL)
		return NULL;
	foreach(lc, r->entries)
	{
		SharedAgg  *e = lfirst(lc);

		if (e->agg != NULL && e->kind == s->css.methods &&
			e->relid == RelationGetRelid(s->css.ss.ss_currentRelation) &&
			e->snapshot == estate->es_snapshot && strcmp(e->spec, spec) == 0)
			return e;
	}
	return NULL;
}

/* Lets this node's result be read by identical nodes (the caller checked it is complete). */
static void
shared_agg_add(ScootAggState *s, const char *spec)
{
	EState	   *estate = s->css.ss.ps.state;
	SharedAggs *r = shared_aggs_of(estate, true);
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
	SharedAgg  *e = palloc0(sizeof(SharedAgg));

	e->kind = s->css.methods;
	e->relid = RelationGetRelid(s->css.ss.ss_currentRelation);
	e->spec = spec;
	e->snapshot = estate->es_snapshot;
	e->agg = s->agg;
	e->refs = 1;
	e->ngroups = s->ngroups;
	r->entries = lappend(r->entries, e);
	MemoryContextSwitchTo(old);
	s->shared = e;
}

/*
 * The executor side shared with ScootPreAgg (aggnode.h). Computes the aggregates over the
 * table (first call), or learns why the child must, or reads an identical node's result.
 */
static void
agg_start(ScootAggState *s)
{
	ScanState  *ss = &s->css.ss;
	CustomScan *cs = (CustomScan *) ss->ps.plan;
	const char *spec = strVal(linitial(cs->custom_private));
	bool		shareable = agg_shareable(s);
	MemoryContext old;
	TableScanDesc scan;

	if (shareable)
	{
		SharedAgg  *e = shared_agg_find(s, spec);

		if (e != NULL)
		{
			e->refs++;
			s->shared = e;
			s->agg = e->agg;
			s->reused = true;
			s->fallback = NULL;
			s->ngroups = e->ngroups;
			s->probe_removed_rows = 0;
			s->blocks = s->emptied = s->skipped = 0;
			s->next = 0;
			s->started = true;
			return;
		}
	}

	/*
	 * a result it may share outlives the node's context: the query's memory holds it (on the
	 * node's first start only, so that a node rescanned many times does not pile up there)
	 */
	shareable = shareable && s->starts++ == 0;
	old = MemoryContextSwitchTo(shareable ? ss->ps.state->es_query_cxt : s->cxt);
	s->agg = scoot_agg_create(spec);
	MemoryContextSwitchTo(s->cxt);
	s->probe_removed_rows = 0;

	/*
	 * A ScootPreAgg probing a hash join that built its table before asking for the first row
	 * (PostgreSQL does when this node's start-up costs more than the inner side): its join
	 * filter drops rows before they are grouped, not just the groups afterwards
	 */
	if (s->probe_hj != NULL)
	{
		scoot_agg_probe_update(s);
		if (s->probe_ht != NULL && s->probe_filtering)
			scoot_agg_set_row_join_filter(s->agg, s->probe_filter, scoot_hj_may_match,
										  s->probe_nkeys, s->probe_keys, s->probe_widths);
	}
	scan = table_beginscan(ss->ss_currentRelation, ss->ps.state->es_snapshot, 0, NULL);
	s->fallback = scoot_agg_run(s->agg, scan);
	table_endscan(scan);
	s->probe_removed_rows = scoot_agg_join_removed(s->agg);
	s->ngroups = s->fallback ? 0 : scoot_agg_ngroups(s->agg);
	scoot_agg_stats(s->agg, &s->blocks, &s->emptied, &s->skipped, &s->grid_cells, &s->grid_rows);
	s->next = 0;
	s->started = true;
	MemoryContextSwitchTo(old);
	if (shareable && s->fallback == NULL && s->probe_removed_rows == 0)
		shared_agg_add(s, spec);
}

extern void scoot_hj_prefetch(void *filter, uint32 far, uint32 near);

/* How many groups ahead the join's bucket (FAR) and its first tuple (NEAR) are prefetched */
#define PROBE_FAR 4
#define PROBE_NEAR 2
/* Groups looked up before the filter judges whether it pays (it drops at least 1 in 16) */
#define PROBE_TRIAL 4096

/*
 * Group g's key hash as the join computes it (0 and *h set; else NULL key or unhashable), each
 * group hashed once: groups are asked for in order, at most PROBE_FAR ahead of the one returned.
 */
static int
probe_hash(ScootAggState *s, int64 g, uint32 *h)
{
	while (s->probe_hashed <= g)
	{
		int64		k = s->probe_hashed++;

		s->probe_hash_ok[k % 8] = scoot_agg_key_hash(s->agg, k, s->probe_nkeys, s->probe_keys,
													 s->probe_widths, &s->probe_hash[k % 8]);
	}
	*h = s->probe_hash[g % 8];
	return s->probe_hash_ok[g % 8];
}

/*
 * A ScootPreAgg probing a hash join (aggnode.h), about to return group g: prefetches what the
 * join's probes of the groups PROBE_FAR and PROBE_NEAR ahead will read first, and says whether
 * the join's table cannot match g (then it is not returned). A group with a NULL key is
 * returned: the join decides about it.
 */
static bool
probe_drops(ScootAggState *s, int64 g)
{
	uint32		far,
				near,
				h;

	if (g + PROBE_FAR < s->ngroups && probe_hash(s, g + PROBE_FAR, &far) == 0 &&
		probe_hash(s, g + PROBE_NEAR, &near) == 0)
		scoot_hj_prefetch(s->probe_filter, far, near);
	if (!s->probe_filtering)
		return false;
	if (probe_hash(s, g, &h) != 0)
		return false;
	s->probe_checked++;
	if (scoot_hj_may_match(s->probe_filter, h))
	{
		/* a join that matches nearly every group: the lookups cost more than they save */
		if (s->probe_checked >= PROBE_TRIAL && s->probe_removed * 16 < s->probe_checked)
			s->probe_filtering = false;
		return false;
	}
	s->probe_removed++;
	return true;
}

static TupleTableSlot *
agg_next(ScanState *ss)
{
	ScootAggState *s = (ScootAggState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;
	MemoryContext old;

	if (!s->started)
		agg_start(s);
	if (s->fallback)
	{
		TupleTableSlot *r = ExecProcNode(s->child);

		if (TupIsNull(r))
			return ExecClearTuple(slot);
		return ExecCopySlot(slot, r);
	}
	ExecClearTuple(slot);
	if (s->probe_hj != NULL)
		scoot_agg_probe_update(s);
	while (s->next < s->ngroups && s->probe_ht != NULL && probe_drops(s, s->next))
		s->next++;
	if (s->next >= s->ngroups)
		return slot;
	old = MemoryContextSwitchTo(s->cxt);
	scoot_agg_row(s->agg, s->next++, slot->tts_values, slot->tts_isnull);
	MemoryContextSwitchTo(old);
	return ExecStoreVirtualTuple(slot);
}

static bool
agg_recheck(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

TupleTableSlot *
scoot_aggnode_exec(CustomScanState *node)
{
	ScootAggState *s = (ScootAggState *) node;
	HashJoinTable ht;

	if (s->build != NULL && (ht = scoot_hash_build_table(s->build)) != NULL)
		return scoot_hash_build_run(&node->ss, s->build, ht, (ExecScanAccessMtd) agg_next,
									(ExecScanRecheckMtd) agg_recheck);
	return ExecScan(&node->ss, (ExecScanAccessMtd) agg_next, (ExecScanRecheckMtd) agg_recheck);
}

/* Is `ps` a ScootAgg's or a ScootPreAgg's state (customscan.c's hash build)? */
bool
scoot_is_agg_state(PlanState *ps)
{
	return ps != NULL && IsA(ps, CustomScanState) &&
		(((CustomScanState *) ps)->methods == &agg_exec_methods || scoot_is_preagg_state(ps));
}

static void
agg_reset(ScootAggState *s)
{
	if (s->shared != NULL)
	{
		/* the last node reading a shared result frees it */
		if (--s->shared->refs == 0)
		{
			scoot_agg_free(s->shared->agg);
			s->shared->agg = NULL;
		}
		s->shared = NULL;
	}
	else if (s->agg)
		scoot_agg_free(s->agg);
	s->agg = NULL;
	s->reused = false;
	s->started = false;
	s->fallback = NULL;
	/* the join may destroy or rebuild its hash table: the next group asks again */
	s->probe_ht = NULL;
	s->probe_filtering = false;
	s->probe_hashed = 0;
	MemoryContextReset(s->cxt);
}

void
scoot_aggnode_end(CustomScanState *node)
{
	ScootAggState *s = (ScootAggState *) node;

	agg_reset(s);
	ExecEndNode(s->child);
	if (node->ss.ps.ps_ResultTupleSlot)
		ExecClearTuple(node->ss.ps.ps_ResultTupleSlot);
	ExecClearTuple(node->ss.ss_ScanTupleSlot);
}

void
scoot_aggnode_rescan(CustomScanState *node)
{
	ScootAggState *s = (ScootAggState *) node;

	ExecClearTuple(node->ss.ss_ScanTupleSlot);
	agg_reset(s);
	scoot_rescan_child(&node->ss.ps, s->child);
	ExecScanReScan(&node->ss);
}

/*
 * EXPLAIN ANALYZE of a ScootAgg's or ScootPreAgg's run (aggnode.h): the blocks it read, skipped
 * and emptied and whether it fell back, or that it read an identical node's result.
 */
void
scoot_aggnode_explain_run(ScootAggState *s, ExplainState *es)
{
	if (!es->analyze || !s->started)
		return;
	if (s->reused)
	{
		ExplainPropertyText("Scoot Result", "read from an identical node of this query", es);
		return;
	}
	ExplainPropertyInteger("Scoot Blocks Read", NULL, s->blocks, es);
	if (es->format != EXPLAIN_FORMAT_TEXT || s->skipped > 0)
		ExplainPropertyInteger("Scoot Blocks Skipped by Zone Maps", NULL, s->skipped, es);
	if (es->format != EXPLAIN_FORMAT_TEXT || s->emptied > 0)
		ExplainPropertyInteger("Scoot Blocks Emptied by Filters", NULL, s->emptied, es);
	ExplainPropertyText("Scoot Fallback", s->fallback ? s->fallback : "none", es);
	/* integer group keys looked up by position in a grid (agg.rs, Dense): VERBOSE only */
	if (es->verbose && (es->format != EXPLAIN_FORMAT_TEXT || s->grid_rows > 0))
	{
		ExplainPropertyInteger("Scoot Group Grid Cells", NULL, s->grid_cells, es);
		ExplainPropertyInteger("Scoot Group Grid Rows", NULL, s->grid_rows, es);
	}
	if (s->build != NULL && (es->format != EXPLAIN_FORMAT_TEXT || s->build->rows_in_place > 0))
		ExplainPropertyInteger("Rows Written into the Hash Table by Scoot", NULL,
							   s->build->rows_in_place, es);
}

static void
agg_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	ScootAggState *s = (ScootAggState *) node;
	CustomScan *cs = (CustomScan *) node->ss.ps.plan;
	int			nflat = intVal(lsecond(cs->custom_private));
	List	   *described = (List *) lthird(cs->custom_private);
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
		StringInfo	to = IsA(tle->expr, Aggref) ? &aggs : &keys;

		if (i++ >= nflat)
			break;
		if (to->len > 0)
			appendStringInfoString(to, ", ");
		appendStringInfoString(to, deparse_expression((Node *) tle->expr, context, false, false));
	}
	if (keys.len > 0)
		ExplainPropertyText("Scoot Group Keys", keys.data, es);
	if (aggs.len > 0)
		ExplainPropertyText("Scoot Aggregates", aggs.data, es);
	if (described != NIL)
		ExplainPropertyText("Scoot Block Filter", scoot_describe_filters(described), es);
	scoot_aggnode_explain_run(s, es);
}

void
scoot_install_custom_agg(void)
{
	RegisterCustomScanMethods(&agg_scan_methods);
	prev_upper_paths = create_upper_paths_hook;
	create_upper_paths_hook = scoot_upper_paths;
}
