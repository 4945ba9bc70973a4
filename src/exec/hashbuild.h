/*
 * hashbuild.h: a scan that writes its rows straight into the hash table of the Hash node above
 * it (see hashbuild.c).
 */
#ifndef SCOOT_HASHBUILD_H
#define SCOOT_HASHBUILD_H

#include "postgres.h"
#include "executor/executor.h"
#include "executor/hashjoin.h"
#include "nodes/execnodes.h"

#define SCOOT_HASH_BUILD_MAX_KEYS 8
#define SCOOT_HASH_BUILD_AHEAD 16	/* rows formed before their bucket is linked (a power of 2) */

typedef struct ScootHashBuild
{
	HashState  *hash;			/* the Hash node the scan feeds */
	int			nkeys;
	bool		inline_keys;	/* every key a plain column of the scan's output */
	bool		inline_now;		/* ... and the table hashes each with hashint2/4/8 */
	AttrNumber	key_att[SCOOT_HASH_BUILD_MAX_KEYS];	/* its output column */
	int			key_width[SCOOT_HASH_BUILD_MAX_KEYS];	/* 2, 4, 8 */
	AttrNumber	max_att;
	int64		rows_in_place;	/* rows formed in the table's chunks (EXPLAIN ANALYZE) */
	int64		rows_inserted;	/* rows handed to ExecHashTableInsert */

	/*
	 * Rows formed in the table but not yet pushed onto their bucket's list, oldest first: their
	 * bucket heads were prefetched when they were formed (the bucket array is a megabyte for a
	 * table of 100k rows, and the load of a head otherwise stalls on a cache miss per row).
	 */
	HashJoinTuple pend_tuple[SCOOT_HASH_BUILD_AHEAD];
	int			pend_bucket[SCOOT_HASH_BUILD_AHEAD];
	int			pend_first;
	int			npend;
} ScootHashBuild;

extern void scoot_hash_build_init(ScootHashBuild *hb, HashState *h);
extern HashJoinTable scoot_hash_build_table(ScootHashBuild *hb);
extern bool scoot_integer_hash_widths(const FmgrInfo *fns, int n, int *widths);
extern void scoot_hash_build_put(ScootHashBuild *hb, HashJoinTable ht, TupleTableSlot *slot);
extern void scoot_hash_build_flush(ScootHashBuild *hb, HashJoinTable ht);
extern TupleTableSlot *scoot_hash_build_run(ScanState *ss, ScootHashBuild *hb, HashJoinTable ht,
											ExecScanAccessMtd next, ExecScanRecheckMtd recheck);

#endif
