/*
 * Parallel workers of statements that read OLAP snapshots yield to busy sessions
 * (`scoot.olap_parallel_yield`): the planner side.
 *
 * PostgreSQL plans parallel workers as if the CPUs were idle. On an HTAP server they are not:
 * the sessions running transactions hold them, and every worker an analytic statement adds is
 * one more process time-slicing with them. Under CH-benCHmark's load (2 TPC-C sessions, one
 * analytic session, 2 CPUs) the parallel plans of the analytic queries ran about 1.4x slower
 * than serial ones and took CPU from the transactions. So a statement that will read an OLAP
 * snapshot (the rules of snapshot/session.rs: a plain SELECT of a scoot table with
 * `scoot.olap = on`, in an implicit or read-only transaction, not SERIALIZABLE) is planned with at
 * most as many workers per Gather as there are CPUs not taken by other busy sessions:
 * max(0, CPUs - busy) (CPUs: scoot.olap_parallel_cpus, else the online ones), where a session is busy when it is a client backend other than
 * this one that holds a transaction id or a snapshot (it is running a statement, or inside a
 * writing transaction between statements). Idle sessions, background workers and parallel
 * workers do not count. On a quiet server nothing changes.
 */
#include "postgres.h"

#include <unistd.h>

#include "access/table.h"
#include "access/transam.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "storage/proc.h"
#include "utils/rel.h"

/* Rust side (src/exec/mod.rs): scoot.olap_parallel_yield on and this session reads snapshots */
extern bool scoot_olap_parallel_yield_applies(void);
extern bool scoot_relation_is_scoot(Relation rel);
extern int	scoot_olap_parallel_cpus_setting(void);

int			scoot_busy_sessions(void);
int			scoot_online_cpus(void);
int			scoot_olap_parallel_cap(Query *parse);
bool		scoot_rte_is_scoot_table(RangeTblEntry *rte);

/* Client backends other than this one that hold a transaction id or a snapshot. */
int
scoot_busy_sessions(void)
{
	int			busy = 0;

	/* a heuristic: the fields are read without the ProcArray lock */
	for (uint32 i = 0; i < ProcGlobal->allProcCount; i++)
	{
		PGPROC	   *proc = &ProcGlobal->allProcs[i];
		volatile TransactionId *xid = &proc->xid;
		volatile TransactionId *xmin = &proc->xmin;

		if (proc == MyProc || proc->pid == 0 || proc->isBackgroundWorker ||
			proc->backendId == InvalidBackendId ||
			(proc->statusFlags & (PROC_IS_AUTOVACUUM | PROC_AFFECTS_ALL_HORIZONS)) != 0)
			continue;
		if (TransactionIdIsValid(*xid) || TransactionIdIsValid(*xmin))
			busy++;
	}
	return busy;
}

/* scoot.olap_parallel_cpus, else the online CPUs */
int
scoot_online_cpus(void)
{
	long		n = scoot_olap_parallel_cpus_setting();

	if (n > 0)
		return (int) n;
	n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int) n : 1;
}

/* Is the range table entry a scoot table (already locked by the statement)? */
bool
scoot_rte_is_scoot_table(RangeTblEntry *rte)
{
	Relation	rel;
	bool		scoot;

	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION)
		return false;
	rel = table_open(rte->relid, NoLock);
	scoot = scoot_relation_is_scoot(rel);
	table_close(rel, NoLock);
	return scoot;
}

static bool
scoot_rte_walker(Node *node, void *cx)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
		return scoot_rte_is_scoot_table((RangeTblEntry *) node);
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, scoot_rte_walker, cx, QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, scoot_rte_walker, cx);
}

/*
 * The most parallel workers per Gather the statement `parse` may plan, or -1 for PostgreSQL's
 * own limit (not a statement that reads a snapshot, or a limit no lower than PostgreSQL's).
 */
int
scoot_olap_parallel_cap(Query *parse)
{
	int			cap,
				cpus,
				busy;

	if (max_parallel_workers_per_gather <= 0 || parse->commandType != CMD_SELECT ||
		parse->rowMarks != NIL || parse->hasModifyingCTE || parse->utilityStmt != NULL ||
		!scoot_olap_parallel_yield_applies())
		return -1;
	cpus = scoot_online_cpus();
	busy = scoot_busy_sessions();
	cap = Max(0, cpus - busy);
	if (cap >= max_parallel_workers_per_gather)
		return -1;
	if (!query_tree_walker(parse, scoot_rte_walker, NULL, QTW_EXAMINE_RTES_BEFORE))
		return -1;
	elog(DEBUG1, "scoot: statement reading an OLAP snapshot planned with at most %d parallel workers (%d CPUs, %d busy sessions)",
		 cap, cpus, busy);
	return cap;
}
