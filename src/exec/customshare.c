/*
 * ScootShare: one computation of a grouped subquery that a statement reads more than once
 * (planner decision, plan, executor node, EXPLAIN).
 *
 * A view or subquery referenced twice is planned and run twice: CH-benCHmark's and TPC-H's Q15
 * join their revenue view to the supplier table and take the view's maximum in a subquery, so
 * the view's join and aggregation over order_line run twice under the same snapshot.
 * PostgreSQL shares a WITH query's result between its references, but not a view's. This node
 * does it for grouped subqueries over scoot tables: each reference's aggregation is wrapped in a
 * ScootShare, the first one to run computes the rows (PostgreSQL's own Agg below it) into a
 * tuplestore, and every identical one reads them there, as CTE scans read a shared CTE.
 *
 * When the rows are the same: the planner hook tags (Query.queryId, unused below the top level)
 * every uncorrelated, non-volatile grouped SELECT that occurs at least twice, word for word
 * (locations aside), in the statement's parse tree. For a tagged subquery, the upper-paths hook
 * (UPPERREL_GROUP_AGG) wraps PostgreSQL's aggregation paths and records a fingerprint of the
 * subquery as planned, HAVING aside: a reference can get quals pushed down from outside (Q15's
 * `total_revenue = (select max...)` becomes the main reference's HAVING) that the other lacks.
 * HAVING moves from the Agg to this node, which applies it to the rows it reads; quals pushed
 * into WHERE change the fingerprint. At run time nodes share only when they have the same
 * fingerprint, the same Agg output columns and the same Agg strategy (a sorted Agg's order is
 * what the plan above it relies on), in one executor state (one snapshot). A node with no such
 * partner passes its Agg's rows through unchanged.
 *
 * Not shared: subqueries with PARAM_EXEC parameters (correlated or lateral), volatile functions,
 * subplans, FOR UPDATE, grouping sets, set-returning functions in the output, no scoot table;
 * partial (parallel) aggregation paths keep PostgreSQL's plan. `scoot.shared_groups = off` turns
 * it off.
 */
#include "postgres.h"

#include "commands/explain.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "childplan.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planner.h"
#include "optimizer/tlist.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

/* Rust side (src/exec/mod.rs) */
extern bool scoot_shared_groups_enabled(void);

/* olapparallel.c */
extern bool scoot_rte_is_scoot_table(RangeTblEntry *rte);

void		scoot_install_custom_share(void);
List	   *scoot_share_tag_duplicates(Query *parse);
void		scoot_share_restore_tags(List *saved);

static create_upper_paths_hook_type prev_upper_paths = NULL;

/* the tags of the statement being planned now (planner memory; saved around nested planning) */
static List *share_tags = NIL;

static Plan *share_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
							 List *tlist, List *clauses, List *custom_plans);
static Node *share_create_state(CustomScan *cscan);
static void share_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *share_exec(CustomScanState *node);
static void share_end(CustomScanState *node);
static void share_rescan(CustomScanState *node);
static void share_explain(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomPathMethods share_path_methods = {
	.CustomName = "ScootShare",
	.PlanCustomPath = share_plan_path,
};

static const CustomScanMethods share_scan_methods = {
	.CustomName = "ScootShare",
	.CreateCustomScanState = share_create_state,
};

static const CustomExecMethods share_exec_methods = {
	.CustomName = "ScootShare",
	.BeginCustomScan = share_begin,
	.ExecCustomScan = share_exec,
	.EndCustomScan = share_end,
	.ReScanCustomScan = share_rescan,
	.ExplainCustomScan = share_explain,
};

/* ---------------------------------------------------------------------------------------------
 * Planner side
 * ------------------------------------------------------------------------------------------ */

/*
 * nodeToString without what cannot change the rows: parse locations, and the permission marks
 * of range table entries (which columns the enclosing query selects of a view differs between
 * its references; the executor checks every entry's permissions anyway)
 */
static const char *const ignored_fields[] = {
	":location ", ":requiredPerms ", ":checkAsUser ", ":selectedCols ", ":insertedCols ",
	":updatedCols ", ":extraUpdatedCols ", NULL
};

static char *
fingerprint(Node *n)
{
	char	   *s = nodeToString(n);
	char	   *out = palloc(strlen(s) + 1);
	char	   *o = out;
	const char *p = s;

	while (*p)
	{
		const char *const *f;
		size_t		len = 0;

		if (*p == ':')
			for (f = ignored_fields; *f != NULL; f++)
				if (strncmp(p, *f, strlen(*f)) == 0)
				{
					len = strlen(*f);
					break;
				}
		if (len == 0)
		{
			*o++ = *p++;
			continue;
		}
		p += len;
		if (*p == '(')
		{
			while (*p && *p != ')')
				p++;
			if (*p)
				p++;
		}
		else
			while (*p && *p != ' ' && *p != '}' && *p != ')')
				p++;
	}
	*o = '\0';
	pfree(s);
	return out;
}

/* Does the tree refer to a query level above the one it started in? */
static bool
outer_ref_walker(Node *node, int *depth)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
		return (int) ((Var *) node)->varlevelsup > *depth;
	if (IsA(node, Aggref) && (int) ((Aggref *) node)->agglevelsup > *depth)
		return true;
	if (IsA(node, GroupingFunc) && (int) ((GroupingFunc *) node)->agglevelsup > *depth)
		return true;
	if (IsA(node, PlaceHolderVar) && (int) ((PlaceHolderVar *) node)->phlevelsup > *depth)
		return true;
	if (IsA(node, Query))
	{
		bool		r;

		(*depth)++;
		r = query_tree_walker((Query *) node, outer_ref_walker, depth, 0);
		(*depth)--;
		return r;
	}
	return expression_tree_walker(node, outer_ref_walker, depth);
}

/* A grouped SELECT whose rows depend only on the snapshot (not on where it is read)? */
static bool
shareable_query(Query *q)
{
	int			depth = 0;

	if (q->commandType != CMD_SELECT || !(q->hasAggs || q->groupClause != NIL) ||
		q->groupingSets != NIL || q->rowMarks != NIL || q->hasModifyingCTE ||
		q->hasTargetSRFs || q->utilityStmt != NULL)
		return false;
	if (query_tree_walker(q, outer_ref_walker, &depth, 0))
		return false;
	return !contain_volatile_functions((Node *) q);
}

typedef struct Candidate
{
	Query	   *q;
	char	   *fp;
	uint64		hash;
} Candidate;

typedef struct Collect
{
	int			depth;
	List	   *cands;			/* Candidate * */
} Collect;

static bool
collect_walker(Node *node, Collect *c)
{
	bool		r;

	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *q = (Query *) node;

		if (c->depth > 0 && shareable_query(q))
		{
			Candidate  *cand = palloc(sizeof(Candidate));

			cand->q = q;
			cand->fp = fingerprint((Node *) q);
			cand->hash = hash_bytes_extended((const unsigned char *) cand->fp,
											 strlen(cand->fp), 0x5c005ba7e) | 1;
			c->cands = lappend(c->cands, cand);
		}
		c->depth++;
		r = query_tree_walker(q, collect_walker, c, 0);
		c->depth--;
		return r;
	}
	return expression_tree_walker(node, collect_walker, c);
}

/*
 * Planner hook, before planning: tags the grouped subqueries that occur twice or more. Returns
 * the tags of an enclosing planning, for scoot_share_restore_tags afterwards.
 */
List *
scoot_share_tag_duplicates(Query *parse)
{
	List	   *saved = share_tags;
	Collect		c = {0, NIL};
	ListCell   *a,
			   *b;

	share_tags = NIL;
	if (!scoot_shared_groups_enabled() || parse->commandType != CMD_SELECT)
		return saved;
	(void) collect_walker((Node *) parse, &c);
	if (list_length(c.cands) < 2)
		return saved;
	foreach(a, c.cands)
	{
		Candidate  *x = lfirst(a);
		bool		dup = false;

		foreach(b, c.cands)
		{
			Candidate  *y = lfirst(b);

			if (x != y && x->hash == y->hash && strcmp(x->fp, y->fp) == 0)
			{
				dup = true;
				break;
			}
		}
		if (dup)
		{
			x->q->queryId = x->hash;
			share_tags = lappend(share_tags, (void *) x);
		}
	}
	return saved;
}

void
scoot_share_restore_tags(List *saved)
{
	share_tags = saved;
}

static bool
tagged(Query *q)
{
	ListCell   *lc;

	if (q->queryId == 0)
		return false;
	foreach(lc, share_tags)
		if (((Candidate *) lfirst(lc))->hash == q->queryId)
			return true;
	return false;
}

/* Any PARAM_EXEC parameter or subplan (a value that may differ between the references)? */
static bool
exec_param_walker(Node *node, void *cx)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param))
		return ((Param *) node)->paramkind == PARAM_EXEC;
	if (IsA(node, SubPlan) || IsA(node, AlternativeSubPlan) || IsA(node, SubLink))
		return true;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, exec_param_walker, cx, 0);
	return expression_tree_walker(node, exec_param_walker, cx);
}

static bool
reads_scoot_table(Query *parse)
{
	ListCell   *lc;

	foreach(lc, parse->rtable)
		if (scoot_rte_is_scoot_table(lfirst(lc)))
			return true;
	return false;
}

static void
share_upper_paths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel,
				  RelOptInfo *output_rel, void *extra)
{
	GroupPathExtraData *gx = (GroupPathExtraData *) extra;
	Query	   *parse = root->parse;
	Query	   *copy;
	char	   *fp = NULL;
	ListCell   *lc;

	if (prev_upper_paths)
		prev_upper_paths(root, stage, input_rel, output_rel, extra);
	if (stage != UPPERREL_GROUP_AGG || share_tags == NIL || root->query_level <= 1 ||
		!tagged(parse) || !scoot_shared_groups_enabled())
		return;
	if (gx == NULL || gx->patype != PARTITIONWISE_AGGREGATE_NONE ||
		parse->commandType != CMD_SELECT || parse->groupingSets != NIL ||
		parse->rowMarks != NIL || parse->hasTargetSRFs)
		return;

	/* the subquery as planned, HAVING aside */
	copy = copyObject(parse);
	copy->havingQual = NULL;
	copy->queryId = 0;
	if (exec_param_walker((Node *) copy, NULL) || contain_volatile_functions((Node *) copy) ||
		!reads_scoot_table(parse))
		return;

	foreach(lc, output_rel->pathlist)
	{
		Path	   *sub = lfirst(lc);
		CustomPath *cp;

		if (!IsA(sub, AggPath) || sub->param_info != NULL ||
			DO_AGGSPLIT_SKIPFINAL(((AggPath *) sub)->aggsplit))
			continue;
		if (fp == NULL)
			fp = fingerprint((Node *) copy);
		cp = makeNode(CustomPath);
		cp->path.pathtype = T_CustomScan;
		cp->path.parent = output_rel;
		cp->path.pathtarget = sub->pathtarget;
		cp->path.param_info = NULL;
		cp->path.parallel_aware = false;
		cp->path.parallel_safe = false;
		cp->path.parallel_workers = 0;
		cp->path.rows = sub->rows;
		/* as PostgreSQL's path: which of them wins is PostgreSQL's choice */
		cp->path.startup_cost = sub->startup_cost;
		cp->path.total_cost = sub->total_cost;
		cp->path.pathkeys = sub->pathkeys;
		cp->custom_paths = list_make1(sub);
		cp->custom_private = list_make1(makeString(fp));
		cp->methods = &share_path_methods;
		lfirst(lc) = cp;
	}
}

static Plan *
share_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
				List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cs = makeNode(CustomScan);
	Plan	   *child = linitial(custom_plans);
	List	   *qual;
	List	   *scan_tlist = NIL;
	ListCell   *lc;
	int			resno;

	if (!IsA(child, Agg))
		elog(ERROR, "scoot: ScootShare expects an Agg below it, not node %d", (int) nodeTag(child));

	/* HAVING is this node's: the Agg returns every group, with what HAVING reads besides */
	qual = child->qual;
	child->qual = NIL;
	resno = list_length(child->targetlist) + 1;
	foreach(lc, pull_var_clause((Node *) qual, PVC_INCLUDE_AGGREGATES |
								PVC_RECURSE_WINDOWFUNCS | PVC_INCLUDE_PLACEHOLDERS))
	{
		if (tlist_member(lfirst(lc), child->targetlist) == NULL)
			child->targetlist = lappend(child->targetlist,
										makeTargetEntry(copyObject(lfirst(lc)), resno++, NULL, true));
	}
	foreach(lc, child->targetlist)
	{
		TargetEntry *te = lfirst(lc);

		scan_tlist = lappend(scan_tlist, makeTargetEntry(copyObject(te->expr), te->resno, NULL,
														 false));
	}

	cs->methods = &share_scan_methods;
	cs->scan.plan.targetlist = tlist;
	cs->scan.plan.qual = qual;
	cs->scan.scanrelid = 0;
	cs->custom_scan_tlist = scan_tlist;
	cs->custom_plans = custom_plans;
	cs->flags = best_path->flags;
	cs->custom_private = best_path->custom_private;
	return &cs->scan.plan;
}

/* ---------------------------------------------------------------------------------------------
 * Executor side
 * ------------------------------------------------------------------------------------------ */

/* The rows identical nodes of one executor state share. */
typedef struct ShareEntry
{
	const char *fp;				/* plan memory */
	List	   *agg_tlist;		/* the Agg's output columns (plan memory) */
	AggStrategy strategy;
	int			nodes;			/* nodes that began */
	int			ended;
	Tuplestorestate *store;		/* once a node ran with a partner */
	PlanState  *producer;		/* the Agg whose rows fill it */
	bool		eof;			/* the producer returned its last row */
	bool		busy;			/* inside the producer */
} ShareEntry;

typedef struct ShareRegistry
{
	EState	   *estate;
	List	   *entries;
	MemoryContextCallback cb;
} ShareRegistry;

static ShareRegistry *registry = NULL;

static void
registry_gone(void *arg)
{
	if (registry == arg)
		registry = NULL;
}

typedef struct ScootShareState
{
	CustomScanState css;
	PlanState  *child;
	ShareEntry *entry;
	int			ordinal;		/* this node's read pointer is ordinal + 1 */
	bool		shared;			/* decided on the first call: entry->nodes > 1 */
	bool		started;
	bool		produced;		/* this node's Agg filled the store */
	int64		pulled;			/* rows this node took from the producer */
	TupleTableSlot *readslot;	/* rows read from the store */
} ScootShareState;

static Node *
share_create_state(CustomScan *cscan)
{
	ScootShareState *s = (ScootShareState *) newNode(sizeof(ScootShareState), T_CustomScanState);

	s->css.methods = &share_exec_methods;
	return (Node *) s;
}

static void
share_begin(CustomScanState *node, EState *estate, int eflags)
{
	ScootShareState *s = (ScootShareState *) node;
	CustomScan *cs = (CustomScan *) node->ss.ps.plan;
	const char *fp = strVal(linitial(cs->custom_private));
	Agg		   *agg = (Agg *) linitial(cs->custom_plans);
	ShareEntry *e = NULL;
	ListCell   *lc;

	s->child = ExecInitNode(&agg->plan, estate, eflags);
	node->custom_ps = list_make1(s->child);
	s->readslot = ExecInitExtraTupleSlot(estate, node->ss.ss_ScanTupleSlot->tts_tupleDescriptor,
										 &TTSOpsMinimalTuple);

	if (registry == NULL || registry->estate != estate)
	{
		ShareRegistry *r = MemoryContextAllocZero(estate->es_query_cxt, sizeof(ShareRegistry));

		r->estate = estate;
		r->cb.func = registry_gone;
		r->cb.arg = r;
		MemoryContextRegisterResetCallback(estate->es_query_cxt, &r->cb);
		registry = r;
	}
	foreach(lc, registry->entries)
	{
		ShareEntry *x = lfirst(lc);

		if (strcmp(x->fp, fp) == 0 && x->strategy == agg->aggstrategy &&
			equal(x->agg_tlist, agg->plan.targetlist))
		{
			e = x;
			break;
		}
	}
	if (e == NULL)
	{
		e = MemoryContextAllocZero(estate->es_query_cxt, sizeof(ShareEntry));
		e->fp = fp;
		e->agg_tlist = agg->plan.targetlist;
		e->strategy = agg->aggstrategy;
		registry->entries = lappend(registry->entries, e);
	}
	s->entry = e;
	s->ordinal = e->nodes++;
}

/* Hands the row in `in` to ExecScan through the scan slot (by reference: `in` stays put). */
static TupleTableSlot *
pass(ScanState *ss, TupleTableSlot *in)
{
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;
	int			n = slot->tts_tupleDescriptor->natts;

	ExecClearTuple(slot);
	slot_getallattrs(in);
	memcpy(slot->tts_values, in->tts_values, sizeof(Datum) * n);
	memcpy(slot->tts_isnull, in->tts_isnull, sizeof(bool) * n);
	return ExecStoreVirtualTuple(slot);
}

static TupleTableSlot *
share_next(ScanState *ss)
{
	ScootShareState *s = (ScootShareState *) ss;
	ShareEntry *e = s->entry;
	TupleTableSlot *in;

	if (!s->started)
	{
		s->started = true;
		s->shared = e->nodes > 1;
	}
	if (!s->shared)
	{
		in = ExecProcNode(s->child);
		if (TupIsNull(in))
			return ExecClearTuple(ss->ss_ScanTupleSlot);
		return pass(ss, in);
	}

	if (e->store == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(ss->ps.state->es_query_cxt);

		e->store = tuplestore_begin_heap(false, false, work_mem);
		tuplestore_set_eflags(e->store, EXEC_FLAG_REWIND);
		/* read pointer 0 stays at the start; node i reads with pointer i + 1 */
		for (int i = 0; i < e->nodes; i++)
			(void) tuplestore_alloc_read_pointer(e->store, EXEC_FLAG_REWIND);
		e->producer = s->child;
		s->produced = true;
		MemoryContextSwitchTo(old);
	}
	tuplestore_select_read_pointer(e->store, s->ordinal + 1);
	if (!tuplestore_ateof(e->store) &&
		tuplestore_gettupleslot(e->store, true, true, s->readslot))
		return pass(ss, s->readslot);
	if (e->eof)
		return ExecClearTuple(ss->ss_ScanTupleSlot);
	if (e->busy)
		elog(ERROR, "scoot: ScootShare re-entered while computing its rows");
	e->busy = true;
	in = ExecProcNode(e->producer);
	e->busy = false;
	if (TupIsNull(in))
	{
		e->eof = true;
		return ExecClearTuple(ss->ss_ScanTupleSlot);
	}
	/* our pointer is at the end: it moves past the row; the others will read it */
	tuplestore_select_read_pointer(e->store, s->ordinal + 1);
	tuplestore_puttupleslot(e->store, in);
	s->pulled++;
	/* another node may run the producer before this row is used: a copy of our own */
	ExecCopySlot(s->readslot, in);
	return pass(ss, s->readslot);
}

static bool
share_recheck(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
share_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, (ExecScanAccessMtd) share_next, (ExecScanRecheckMtd) share_recheck);
}

static void
share_end(CustomScanState *node)
{
	ScootShareState *s = (ScootShareState *) node;
	ShareEntry *e = s->entry;

	ExecEndNode(s->child);
	if (e != NULL && ++e->ended == e->nodes && e->store != NULL)
	{
		tuplestore_end(e->store);
		e->store = NULL;
		e->producer = NULL;
	}
}

static void
share_rescan(CustomScanState *node)
{
	ScootShareState *s = (ScootShareState *) node;
	ShareEntry *e = s->entry;

	if (s->shared)
	{
		/* the Agg has no parameters: its rows stay what they were */
		if (e->store != NULL)
		{
			tuplestore_select_read_pointer(e->store, s->ordinal + 1);
			tuplestore_rescan(e->store);
		}
	}
	else
		scoot_rescan_child(&node->ss.ps, s->child);
}

static void
share_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	ScootShareState *s = (ScootShareState *) node;
	ShareEntry *e = s->entry;
	StringInfoData buf;

	initStringInfo(&buf);
	if (e == NULL || e->nodes < 2)
		appendStringInfoString(&buf, "not shared (no identical subquery in this plan)");
	else if (!es->analyze)
		appendStringInfo(&buf, "one computation for %d identical subqueries", e->nodes);
	else if (!s->started)
		appendStringInfoString(&buf, "never read");
	else if (s->produced)
		appendStringInfo(&buf, "computed here for %d identical subqueries", e->nodes);
	else if (s->pulled > 0)
		appendStringInfo(&buf, "computed by an identical subquery's node (%lld rows pulled through it)",
						 (long long) s->pulled);
	else
		appendStringInfoString(&buf, "read from an identical subquery's node");
	ExplainPropertyText("Scoot Shared Result", buf.data, es);
}

void
scoot_install_custom_share(void)
{
	RegisterCustomScanMethods(&share_scan_methods);
	prev_upper_paths = create_upper_paths_hook;
	create_upper_paths_hook = share_upper_paths;
}
