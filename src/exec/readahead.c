/*
 * Outer read-ahead for hash joins: the probe side of a hash join, read a few rows ahead so that
 * the join's bucket lookups do not stall on memory (executor only; no plan change).
 *
 * PostgreSQL's hash join probes with one outer row at a time: it hashes the row, loads the
 * bucket head, then the first tuple of the chain, and only then knows whether anything
 * matches. For a table of 30k-130k rows (megabytes of buckets and tuples) both loads miss the
 * cache: in CH-benCHmark Q5 a fifth of the time went to those two loads
 * (ExecScanHashBucket). A ScootScan or ScootPreAgg that probes a join already asks the CPU for
 * them a few rows ahead (customscan.c, scoot_hj_prefetch); a join whose outer side is another
 * join (a chain of joins over the same rows), a sort or an aggregate gets nothing. For those,
 * this file puts a small buffer on the outer child's ExecProcNode: it keeps up to
 * READAHEAD_MAX rows read ahead (1 at first, the window doubling with each row the join takes)
 * as copies, computes each row's hash value as the join will (the join's own key expressions
 * and hash functions), prefetches its bucket when it reads the row, the first tuple of its
 * chain 8 rows later and the second one (when the first has another hash value) 16 rows later,
 * and hands the rows to the join one by one, in order. The join itself runs unchanged.
 *
 * Reading ahead runs the outer side earlier than the join asks: rows are produced before the
 * join has finished with the ones before them, as a parallel worker produces rows before the
 * leader asks. So it is used only where that cannot be told apart:
 *  - SELECT statements without row marks over at least one scoot table, not run as a scrollable
 *    or rewindable cursor (no EXEC_FLAG_REWIND, _BACKWARD or _MARK), and run to their end: an
 *    ExecutorRun with a row count (FETCH n, a protocol row limit, PL/pgSQL loops) stops it;
 *  - joins the statement runs once, to the end of their outer side: reached from the top of the
 *    plan only through nodes that never rescan their children on their own (aggregates, sorts,
 *    hash joins, appends, ...), not inside a subplan, a nested loop's or merge join's inner
 *    side, a memoize or a recursive union, and not below a LIMIT or a merge join's outer side
 *    unless a node in between reads all its input first (a sort, a hash, a hashed or plain
 *    aggregate): an outer row read ahead must be one the statement would have read anyway, or
 *    an error in it could surface where it never would have;
 *  - no volatile function in the outer subtree, nor in the join's quals and target list (the
 *    order of their calls would change; a function wrongly marked stable or immutable can tell);
 *  - not Parallel Hash (shared buckets), not hash tables under READAHEAD_MIN_TABLE (they stay in
 *    the CPU's cache), and not where the outer child already prefetches for this join (a
 *    ScootScan or ScootPreAgg with a join filter).
 * `scoot.hash_join_readahead = off` turns it off.
 */
#include "postgres.h"

#include "access/relation.h"
#include "executor/executor.h"
#include "executor/hashjoin.h"
#include "executor/nodeHash.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/execnodes.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/memutils.h"

/* Rust side (src/exec/mod.rs) */
extern bool scoot_hash_join_readahead_enabled(void);

/* olapparallel.c */
extern bool scoot_rte_is_scoot_table(RangeTblEntry *rte);

/* customscan.c */
extern bool scoot_node_prefetches_for(PlanState *outer, HashJoinState *hj);

void		scoot_hj_readahead_setup(QueryDesc *qd, int eflags);
void		scoot_hj_readahead_bounded(QueryDesc *qd);

/* the most outer rows buffered at once; the ring has one more slot (the row last handed out) */
#define READAHEAD_MAX 32
#define READAHEAD_RING (READAHEAD_MAX + 1)
/* rows read after a row before its chain's first (second) tuple is prefetched */
#define STAGE1_LAG 8
#define STAGE2_LAG 16
/* hash tables smaller than this (bytes of tuples and buckets) are probed without read-ahead */
#define READAHEAD_MIN_TABLE (1024 * 1024)

typedef struct ReadAhead
{
	PlanState  *node;			/* the join's outer child */
	ExecProcNodeMtd orig;		/* its ExecProcNodeReal */
	HashJoinState *hj;
	EState	   *estate;			/* the executor it belongs to */
	ExprContext *econtext;		/* hashes the buffered rows */
	TupleTableSlot *ring[READAHEAD_RING];
	uint32		hash[READAHEAD_RING];
	bool		hashed[READAHEAD_RING];
	int			bucket[READAHEAD_RING];	/* the row's bucket in this batch, or -1 */
	uint64		nread;			/* rows read from the child (row q is in ring[q % RING]) */
	uint64		nret;			/* rows handed to the join */
	uint64		stage1;			/* next row whose chain's first tuple to prefetch */
	uint64		stage2;			/* next row whose chain's second tuple to prefetch */
	int			window;			/* rows to keep buffered (doubling up to READAHEAD_MAX) */
	bool		done;			/* the child returned its last row (never asked again) */
	bool		off;			/* no (more) reading ahead: calls pass through */
	bool		sized;			/* the table's size was looked at */
	struct ReadAhead *next;
} ReadAhead;

/* every read-ahead of the executors running in this backend (removed with their query memory) */
static ReadAhead *active = NULL;

static void
readahead_forget(void *arg)
{
	ReadAhead **p;

	for (p = &active; *p != NULL; p = &(*p)->next)
		if (*p == (ReadAhead *) arg)
		{
			*p = (*p)->next;
			return;
		}
}

static ReadAhead *
readahead_of(PlanState *ps)
{
	ReadAhead  *r;

	for (r = active; r != NULL; r = r->next)
		if (r->node == ps)
			return r;
	elog(ERROR, "scoot: hash join read-ahead state not found");
	return NULL;				/* keep the compiler quiet */
}

/*
 * Prefetches for buffered row i (ring index): its bucket (stage 0, which also records the
 * bucket, or -1 when the row has no hash or belongs to another batch), the first tuple of its
 * chain (stage 1, the bucket should be in cache by then), the second one when the first has
 * another hash value (stage 2).
 */
static inline void
prefetch_row(HashJoinTable ht, ReadAhead *r, int i, int stage)
{
	HashJoinTuple first;

	if (stage == 0)
	{
		int			bucketno,
					batchno;

		r->bucket[i] = -1;
		if (!r->hashed[i])
			return;
		ExecHashGetBucketAndBatch(ht, r->hash[i], &bucketno, &batchno);
		if (batchno != ht->curbatch)
			return;
		r->bucket[i] = bucketno;
		__builtin_prefetch(&ht->buckets.unshared[bucketno]);
		return;
	}
	if (r->bucket[i] < 0 || (first = ht->buckets.unshared[r->bucket[i]]) == NULL)
		return;
	if (stage == 1)
		__builtin_prefetch(first);
	else if (first->hashvalue != r->hash[i] && first->next.unshared != NULL)
		__builtin_prefetch(first->next.unshared);
}

static TupleTableSlot *
readahead_exec(PlanState *ps)
{
	ReadAhead  *r = readahead_of(ps);
	HashJoinTable ht = r->hj->hj_HashTable;
	uint64		q;

	if (r->nread == r->nret)
	{
		/* the child said it has no more rows: asked again, a scan would start over */
		if (r->done)
			return NULL;
		/* nothing buffered: before the build (the join's look at a first outer row), a shared
		 * table, a later batch, or no read-ahead for this join: pass through */
		if (r->off || ht == NULL || ht->parallel_state != NULL || ht->curbatch != 0)
			return r->orig(ps);
		if (!r->sized)
		{
			/* a table that stays in the CPU's cache: the copies would cost more than they save */
			r->sized = true;
			if (ht->spaceUsed + (Size) ht->nbuckets * sizeof(HashJoinTuple) < READAHEAD_MIN_TABLE)
			{
				r->off = true;
				return r->orig(ps);
			}
		}
	}
	else if (r->off)
	{
		/* stopped with rows buffered: hand those out first */
		return r->ring[r->nret++ % READAHEAD_RING];
	}
	/* top the buffer up to the window, prefetching in three stages a few rows apart */
	while (!r->done && r->nread - r->nret < (uint64) r->window)
	{
		TupleTableSlot *s = r->orig(ps);
		int			i = r->nread % READAHEAD_RING;

		if (TupIsNull(s))
		{
			r->done = true;
			break;
		}
		ExecCopySlot(r->ring[i], s);
		r->econtext->ecxt_outertuple = r->ring[i];
		r->hashed[i] = ExecHashGetHashValue(ht, r->econtext, r->hj->hj_OuterHashKeys, true,
											r->hj->hj_NullInnerTupleSlot != NULL,
											&r->hash[i]);
		ResetExprContext(r->econtext);
		prefetch_row(ht, r, i, 0);
		r->nread++;
		for (; r->stage1 + STAGE1_LAG < r->nread; r->stage1++)
			prefetch_row(ht, r, r->stage1 % READAHEAD_RING, 1);
		for (; r->stage2 + STAGE2_LAG < r->nread; r->stage2++)
			prefetch_row(ht, r, r->stage2 % READAHEAD_RING, 2);
	}
	if (r->window < READAHEAD_MAX)
		r->window = Min(r->window * 2, READAHEAD_MAX);
	if (r->done && ht != NULL)
	{
		/* the last rows: no more rows come to space the stages out */
		for (; r->stage1 < r->nread; r->stage1++)
			prefetch_row(ht, r, r->stage1 % READAHEAD_RING, 1);
		for (; r->stage2 < r->nread; r->stage2++)
			prefetch_row(ht, r, r->stage2 % READAHEAD_RING, 2);
	}
	if (r->nread == r->nret)
		return NULL;
	q = r->nret++;
	/* rows handed out before their stages came (the first ones) skip them */
	r->stage1 = Max(r->stage1, r->nret);
	r->stage2 = Max(r->stage2, r->nret);
	return r->ring[q % READAHEAD_RING];
}

/* Is `ps` one of this extension's custom nodes (each runs its children once per own run)? */
static bool
is_scoot_custom(PlanState *ps)
{
	const char *name = ((CustomScanState *) ps)->methods->CustomName;

	return strncmp(name, "Scoot", 5) == 0;
}

#define VOL(x) contain_volatile_functions((Node *) (x))

/*
 * Might running the plan below `ps` (its subplans included) call a volatile function? Node
 * types not known here count as yes.
 */
static bool
subtree_volatile(PlanState *ps, void *context)
{
	Plan	   *p;

	if (ps == NULL)
		return false;
	check_stack_depth();
	p = ps->plan;
	if (VOL(p->targetlist) || VOL(p->qual))
		return true;
	switch (nodeTag(p))
	{
		case T_SeqScan:
		case T_Sort:
		case T_IncrementalSort:
		case T_Material:
		case T_Unique:
		case T_Gather:
		case T_GatherMerge:
		case T_Agg:
		case T_Group:
		case T_SetOp:
		case T_Append:
		case T_MergeAppend:
		case T_SubqueryScan:
		case T_BitmapAnd:
		case T_BitmapOr:
		case T_ProjectSet:
			break;
		case T_NestLoop:
			if (VOL(((Join *) p)->joinqual))
				return true;
			break;
		case T_MergeJoin:
			if (VOL(((Join *) p)->joinqual) || VOL(((MergeJoin *) p)->mergeclauses))
				return true;
			break;
		case T_HashJoin:
			if (VOL(((Join *) p)->joinqual) || VOL(((HashJoin *) p)->hashclauses) ||
				VOL(((HashJoin *) p)->hashkeys))
				return true;
			break;
		case T_Hash:
			if (VOL(((Hash *) p)->hashkeys))
				return true;
			break;
		case T_IndexScan:
			if (VOL(((IndexScan *) p)->indexqual) || VOL(((IndexScan *) p)->indexorderby))
				return true;
			break;
		case T_IndexOnlyScan:
			if (VOL(((IndexOnlyScan *) p)->indexqual) ||
				VOL(((IndexOnlyScan *) p)->indexorderby))
				return true;
			break;
		case T_BitmapIndexScan:
			if (VOL(((BitmapIndexScan *) p)->indexqual))
				return true;
			break;
		case T_BitmapHeapScan:
			if (VOL(((BitmapHeapScan *) p)->bitmapqualorig))
				return true;
			break;
		case T_Result:
			if (VOL(((Result *) p)->resconstantqual))
				return true;
			break;
		case T_Limit:
			if (VOL(((Limit *) p)->limitOffset) || VOL(((Limit *) p)->limitCount))
				return true;
			break;
		case T_ValuesScan:
			if (VOL(((ValuesScan *) p)->values_lists))
				return true;
			break;
		case T_FunctionScan:
			if (VOL(((FunctionScan *) p)->functions))
				return true;
			break;
		case T_Memoize:
			if (VOL(((Memoize *) p)->param_exprs))
				return true;
			break;
		case T_WindowAgg:
			if (VOL(((WindowAgg *) p)->startOffset) || VOL(((WindowAgg *) p)->endOffset))
				return true;
			break;
		case T_CustomScan:
			if (!is_scoot_custom(ps) || VOL(((CustomScan *) p)->custom_exprs))
				return true;
			break;
		default:
			/* CTE and foreign scans, table functions, ...: not looked into */
			return true;
	}
	return planstate_tree_walker(ps, subtree_volatile, context);
}

static void
readahead_add(HashJoinState *hj, EState *estate)
{
	PlanState  *outer = outerPlanState(hj);
	ReadAhead  *r;
	MemoryContextCallback *cb;
	TupleDesc	desc;
	int			i;

	if (outer == NULL || hj->js.ps.plan->parallel_aware ||
		innerPlanState(hj) == NULL || innerPlanState(hj)->plan->parallel_aware ||
		scoot_node_prefetches_for(outer, hj))
		return;
	if (subtree_volatile(outer, NULL) ||
		contain_volatile_functions((Node *) hj->js.ps.plan->targetlist) ||
		contain_volatile_functions((Node *) hj->js.ps.plan->qual) ||
		contain_volatile_functions((Node *) ((Join *) hj->js.ps.plan)->joinqual))
		return;
	desc = ExecGetResultType(outer);
	r = MemoryContextAllocZero(estate->es_query_cxt, sizeof(ReadAhead));
	r->node = outer;
	r->orig = outer->ExecProcNodeReal;
	r->hj = hj;
	r->estate = estate;
	r->econtext = CreateExprContext(estate);
	for (i = 0; i < READAHEAD_RING; i++)
		r->ring[i] = ExecAllocTableSlot(&estate->es_tupleTable, desc, &TTSOpsVirtual);
	r->window = 1;
	r->next = active;
	active = r;
	cb = MemoryContextAlloc(estate->es_query_cxt, sizeof(MemoryContextCallback));
	cb->func = readahead_forget;
	cb->arg = r;
	MemoryContextRegisterResetCallback(estate->es_query_cxt, cb);
	outer->ExecProcNodeReal = readahead_exec;
}

/*
 * Collects the hash joins under `ps` that run once per run of `ps` and read their outer side to
 * its end: descends only through nodes that read each child once per own run, never into
 * subplans (PostgreSQL reruns them). `bounded`: a node above may stop reading before the end (a
 * LIMIT, a merge join's outer side), and no node in between reads all its input first; a join
 * there is left alone (an outer row read ahead could raise an error the statement would never
 * have met).
 */
static void
collect_once(PlanState *ps, List **joins, bool bounded)
{
	ListCell   *lc;
	int			i;

	if (ps == NULL)
		return;
	check_stack_depth();
	switch (nodeTag(ps))
	{
		case T_HashJoinState:
			if (!bounded)
				*joins = lappend(*joins, ps);
			collect_once(outerPlanState(ps), joins, bounded);
			collect_once(innerPlanState(ps), joins, false);		/* Hash reads it all */
			break;
		case T_NestLoopState:
			/* the inner side is rescanned */
			collect_once(outerPlanState(ps), joins, bounded);
			break;
		case T_MergeJoinState:
			/* stops at the end of either side; the inner side is marked and restored */
			collect_once(outerPlanState(ps), joins, true);
			break;
		case T_LimitState:
			collect_once(outerPlanState(ps), joins, true);
			break;
		case T_SortState:
		case T_HashState:
			collect_once(outerPlanState(ps), joins, false);
			break;
		case T_AggState:
			{
				AggStrategy st = ((Agg *) ps->plan)->aggstrategy;

				collect_once(outerPlanState(ps), joins,
							 bounded && st != AGG_HASHED && st != AGG_PLAIN);
			}
			break;
		case T_AppendState:
			for (i = 0; i < ((AppendState *) ps)->as_nplans; i++)
				collect_once(((AppendState *) ps)->appendplans[i], joins, bounded);
			break;
		case T_MergeAppendState:
			for (i = 0; i < ((MergeAppendState *) ps)->ms_nplans; i++)
				collect_once(((MergeAppendState *) ps)->mergeplans[i], joins, bounded);
			break;
		case T_SubqueryScanState:
			collect_once(((SubqueryScanState *) ps)->subplan, joins, bounded);
			break;
		case T_CustomScanState:
			if (is_scoot_custom(ps))
			{
				collect_once(outerPlanState(ps), joins, bounded);
				foreach(lc, ((CustomScanState *) ps)->custom_ps)
					collect_once((PlanState *) lfirst(lc), joins, bounded);
			}
			break;
		case T_IncrementalSortState:
		case T_ResultState:
		case T_ProjectSetState:
		case T_UniqueState:
		case T_SetOpState:
		case T_WindowAggState:
		case T_GroupState:
		case T_GatherState:
		case T_GatherMergeState:
		case T_MaterialState:
			collect_once(outerPlanState(ps), joins, bounded);
			break;
		default:
			/* anything else may rerun its children (Memoize, RecursiveUnion, ...): stop */
			break;
	}
}

/*
 * Executor start (customscan.c's hook, after the plan's own adjustments): gives the hash joins
 * of a SELECT over scoot tables that run once their outer read-ahead (see the header comment).
 */
void
scoot_hj_readahead_setup(QueryDesc *qd, int eflags)
{
	PlannedStmt *stmt = qd->plannedstmt;
	List	   *joins = NIL;
	ListCell   *lc;
	bool		scoot = false;

	if (qd->planstate == NULL || stmt == NULL || !scoot_hash_join_readahead_enabled())
		return;
	if ((eflags & (EXEC_FLAG_EXPLAIN_ONLY | EXEC_FLAG_REWIND | EXEC_FLAG_BACKWARD |
				   EXEC_FLAG_MARK)) != 0)
		return;
	if (stmt->commandType != CMD_SELECT || stmt->rowMarks != NIL || stmt->hasModifyingCTE)
		return;
	collect_once(qd->planstate, &joins, false);
	if (joins == NIL)
		return;
	foreach(lc, stmt->rtable)
		if (scoot_rte_is_scoot_table((RangeTblEntry *) lfirst(lc)))
		{
			scoot = true;
			break;
		}
	if (scoot)
		foreach(lc, joins)
			readahead_add((HashJoinState *) lfirst(lc), qd->estate);
	list_free(joins);
}

/*
 * Executor run with a row count (a cursor's FETCH n, a protocol-level row limit, PL/pgSQL's
 * loops): the statement may never be run to its end, so its joins stop reading ahead (rows
 * already read are still handed out first).
 */
void
scoot_hj_readahead_bounded(QueryDesc *qd)
{
	ReadAhead  *r;

	for (r = active; r != NULL; r = r->next)
		if (r->estate == qd->estate)
			r->off = true;
}
