/*
 * The executor side ScootAgg (customagg.c) and ScootPreAgg (custompreagg.c) share: on the first
 * call the node runs the aggregation engine (agg.rs) over its table under the statement's
 * snapshot, with the description its plan carries first in custom_private, then returns the
 * engine's groups; when the engine cannot answer exactly it runs its child plan instead, from
 * the start (PostgreSQL's Agg for ScootAgg, the plain scan for ScootPreAgg). Defined in
 * customagg.c.
 */
#ifndef SCOOT_AGGNODE_H
#define SCOOT_AGGNODE_H

#include "postgres.h"

#include "commands/explain.h"
#include "nodes/execnodes.h"
#include "nodes/extensible.h"

#include "hashbuild.h"

typedef struct ScootAggState
{
	CustomScanState css;
	PlanState  *child;			/* the fallback: PostgreSQL's Agg plan, or the plain scan */
	MemoryContext cxt;			/* the Rust state and the result datums */
	void	   *agg;
	bool		started;
	const char *fallback;		/* why the child runs, or NULL */
	int64		next;
	int64		ngroups;
	int64		blocks;
	int64		emptied;
	int64		skipped;
	int64		grid_cells;		/* the group grid's size at the end (0: none) */
	int64		grid_rows;		/* rows whose group the grid found */

	/*
	 * ScootPreAgg under a hash join (customscan.c, join_filter_candidate): the join this node is
	 * the outer (probe) side of, when every outer hash key is an integer group key; probe_keys
	 * are the keys' positions in the node's scan row (= group key indexes). Once the join has
	 * built its table (probe_ht, with probe_filter its ScootJoinBloom), the groups it cannot
	 * match are not returned, and the join's buckets for the next groups are prefetched.
	 */
	HashJoinState *probe_hj;
	int			probe_nkeys;
	int			probe_keys[4];
	int			probe_widths[4];
	void	   *probe_ht;
	void	   *probe_filter;
	bool		probe_filtering;
	int64		probe_checked;
	int64		probe_removed;
	/* rows the engine dropped before grouping: the join's table was built when it started */
	int64		probe_removed_rows;
	/* key hashes of the groups from the one returned next up to PROBE_FAR ahead (customagg.c) */
	int64		probe_hashed;	/* groups [0, probe_hashed) hashed */
	uint32		probe_hash[8];	/* group g's hash at g % 8 */
	int8		probe_hash_ok[8];	/* scoot_agg_key_hash's result for it (0: hashed) */

	/*
	 * The result shared with identical nodes of the same query (customagg.c, SharedAgg): agg
	 * then belongs to it, not to cxt. reused: this node found it computed by another one.
	 */
	struct SharedAgg *shared;
	bool		reused;
	int64		starts;			/* agg_start calls: only the first may share its result */

	/* the Hash node above, when the node writes its groups into the join's table (hashbuild.c) */
	ScootHashBuild *build;
} ScootAggState;

extern void scoot_aggnode_begin(CustomScanState *node, EState *estate, int eflags);
extern TupleTableSlot *scoot_aggnode_exec(CustomScanState *node);
extern void scoot_aggnode_end(CustomScanState *node);
extern void scoot_aggnode_rescan(CustomScanState *node);
extern void scoot_aggnode_explain_run(ScootAggState *s, ExplainState *es);

/* customscan.c: hands the join's hash table to a probing ScootPreAgg once it is built */
extern void scoot_agg_probe_update(ScootAggState *s);
/* custompreagg.c */
extern bool scoot_is_preagg_state(PlanState *ps);
/* customagg.c: a ScootAgg or ScootPreAgg node's state? */
extern bool scoot_is_agg_state(PlanState *ps);

#endif
