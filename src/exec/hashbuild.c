/*
 * hashbuild.c: a ScootScan under a hash join's Hash node writes its rows straight into the
 * join's hash table (scoot.hash_build).
 *
 * PostgreSQL's Hash node (nodeHash.c MultiExecPrivateHash) pulls each row of its child, computes
 * the row's hash value by evaluating each key expression and calling the key type's hash
 * function through fmgr, forms a MinimalTuple of the row in palloc'd memory, copies it into the
 * table's dense chunks and frees it. For a join over a scan of 100k rows that is about a third
 * of the join's build time. Here the scan, once the join has created the (private) table and
 * the Hash node asks for its first row, does all that itself: the hash value of keys that are
 * plain integer columns of its output hashed by hashint2/hashint4/hashint8 is computed inline
 * (as those functions and ExecHashGetHashValue compute it; other keys go through
 * ExecHashGetHashValue), the MinimalTuple is formed in place in the chunk (as
 * heap_form_minimal_tuple forms it), linked into its bucket, and counted exactly as
 * ExecHashTableInsert and MultiExecPrivateHash count it (nbuckets_optimal, spaceUsed,
 * spacePeak, totalTuples). A row that belongs to a later batch, or that would make the table
 * outgrow its memory (PostgreSQL then doubles the batches), goes through ExecHashTableInsert
 * itself. Then the scan returns "no more rows" and the Hash node finishes as always (bucket
 * resize, accounting). Not for Parallel Hash (a shared table), nor with skew buckets (the
 * optimizer found frequent outer values; their inserts are nodeHash.c's own).
 *
 * The table ends up byte for byte what PostgreSQL would have built from the same rows in the
 * same order, so the join's probes, rescans and batch files see nothing different. The scan
 * nodes that do it: ScootScan (customscan.c) and ScootPreAgg / ScootAgg (customagg.c), each
 * through scoot_hash_build_run with its own ExecScan access method.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "executor/hashjoin.h"
#include "executor/nodeHash.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "port/pg_bitutils.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"

#include "hashbuild.h"

#define NTUP_PER_BUCKET 1		/* nodeHash.c's */

/*
 * Decides at executor start whether the keys of Hash node `h` can be hashed inline: each is a
 * plain column of the child's output (OUTER_VAR). The hash functions are known once the table
 * exists (scoot_hash_build_table).
 */
void
scoot_hash_build_init(ScootHashBuild *hb, HashState *h)
{
	Hash	   *plan = (Hash *) h->ps.plan;
	ListCell   *lc;
	int			n = 0;

	memset(hb, 0, sizeof(*hb));
	hb->hash = h;
	hb->inline_keys = list_length(plan->hashkeys) > 0 &&
		list_length(plan->hashkeys) <= SCOOT_HASH_BUILD_MAX_KEYS;
	foreach(lc, plan->hashkeys)
	{
		Expr	   *e = (Expr *) lfirst(lc);

		while (e != NULL && IsA(e, RelabelType))
			e = ((RelabelType *) e)->arg;
		if (!hb->inline_keys || e == NULL || !IsA(e, Var) || ((Var *) e)->varno != OUTER_VAR ||
			((Var *) e)->varattno <= 0)
		{
			hb->inline_keys = false;
			break;
		}
		hb->key_att[n] = ((Var *) e)->varattno;
		hb->max_att = Max(hb->max_att, hb->key_att[n]);
		n++;
	}
	hb->nkeys = n;
}

/*
 * The table to write into now, or NULL when this build must go through the Hash node as
 * always (no table yet, a shared one, skew buckets).
 */
HashJoinTable
scoot_hash_build_table(ScootHashBuild *hb)
{
	HashJoinTable ht = hb->hash->hashtable;

	if (ht == NULL || ht->parallel_state != NULL || ht->skewEnabled || ht->curbatch != 0)
		return NULL;
	hb->npend = 0;
	hb->pend_first = 0;
	hb->inline_now = hb->inline_keys &&
		scoot_integer_hash_widths(ht->inner_hashfunctions, hb->nkeys, hb->key_width);
	return ht;
}

/*
 * The widths of the first `n` hash functions `fns` (a hash table's inner or outer ones) when each
 * is hashint2, hashint4 or hashint8 (the hashes scoot computes itself); false for any other.
 */
bool
scoot_integer_hash_widths(const FmgrInfo *fns, int n, int *widths)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		switch (fns[i].fn_oid)
		{
			case F_HASHINT2:
				widths[i] = 2;
				break;
			case F_HASHINT4:
				widths[i] = 4;
				break;
			case F_HASHINT8:
				widths[i] = 8;
				break;
			default:
				return false;
		}
	}
	return true;
}

/* hashint2 / hashint4 / hashint8 of an integer Datum of that width */
static inline uint32
int_hash(Datum d, int width)
{
	switch (width)
	{
		case 2:
			return hash_bytes_uint32((uint32) (int32) DatumGetInt16(d));
		case 4:
			return hash_bytes_uint32((uint32) DatumGetInt32(d));
		default:
			{
				int64		val = DatumGetInt64(d);
				uint32		lohalf = (uint32) val;
				uint32		hihalf = (uint32) (val >> 32);

				lohalf ^= (val >= 0) ? hihalf : ~hihalf;
				return hash_bytes_uint32(lohalf);
			}
	}
}

/* nodeHash.c's dense_alloc: `size` bytes in the table's current chunk (or a new one) */
static void *
dense_alloc(HashJoinTable hashtable, Size size)
{
	HashMemoryChunk newChunk;
	char	   *ptr;

	size = MAXALIGN(size);
	if (size > HASH_CHUNK_THRESHOLD)
	{
		newChunk = (HashMemoryChunk) MemoryContextAlloc(hashtable->batchCxt,
														HASH_CHUNK_HEADER_SIZE + size);
		newChunk->maxlen = size;
		newChunk->used = size;
		newChunk->ntuples = 1;
		if (hashtable->chunks != NULL)
		{
			newChunk->next = hashtable->chunks->next;
			hashtable->chunks->next.unshared = newChunk;
		}
		else
		{
			newChunk->next.unshared = hashtable->chunks;
			hashtable->chunks = newChunk;
		}
		return HASH_CHUNK_DATA(newChunk);
	}
	if (hashtable->chunks == NULL || (hashtable->chunks->maxlen - hashtable->chunks->used) < size)
	{
		newChunk = (HashMemoryChunk) MemoryContextAlloc(hashtable->batchCxt,
														HASH_CHUNK_HEADER_SIZE + HASH_CHUNK_SIZE);
		newChunk->maxlen = HASH_CHUNK_SIZE;
		newChunk->used = size;
		newChunk->ntuples = 1;
		newChunk->next.unshared = hashtable->chunks;
		hashtable->chunks = newChunk;
		return HASH_CHUNK_DATA(newChunk);
	}
	ptr = HASH_CHUNK_DATA(hashtable->chunks) + hashtable->chunks->used;
	hashtable->chunks->used += size;
	hashtable->chunks->ntuples += 1;
	return ptr;
}

/* Pushes the oldest pending row onto the front of its bucket's list. */
static inline void
link_oldest(ScootHashBuild *hb, HashJoinTable ht)
{
	HashJoinTuple t = hb->pend_tuple[hb->pend_first];
	int			b = hb->pend_bucket[hb->pend_first];

	t->next.unshared = ht->buckets.unshared[b];
	ht->buckets.unshared[b] = t;
	hb->pend_first = (hb->pend_first + 1) & (SCOOT_HASH_BUILD_AHEAD - 1);
	hb->npend--;
}

/*
 * Links every pending row, in the order they were formed (the order ExecHashTableInsert would
 * have pushed them): before any row goes through ExecHashTableInsert, and when the scan ends.
 */
void
scoot_hash_build_flush(ScootHashBuild *hb, HashJoinTable ht)
{
	while (hb->npend > 0)
		link_oldest(hb, ht);
}

/*
 * ExecHashTableInsert for a row of the current batch that fits in memory, the MinimalTuple
 * formed in the chunk (heap_form_minimal_tuple's layout). False: the caller must use
 * ExecHashTableInsert (another batch, the table would outgrow its memory, too many columns).
 */
static bool
insert_in_place(ScootHashBuild *hb, HashJoinTable ht, TupleTableSlot *slot, uint32 hashvalue)
{
	TupleDesc	desc = slot->tts_tupleDescriptor;
	int			natts = desc->natts;
	int			bucketno,
				batchno,
				i,
				nbo;
	bool		hasnull = false;
	Size		len,
				data_len,
				hoff;
	int			hashTupleSize;
	double		ntuples = ht->totalTuples - ht->skewTuples;
	HashJoinTuple hashTuple;
	MinimalTuple tuple;

	ExecHashGetBucketAndBatch(ht, hashvalue, &bucketno, &batchno);
	if (batchno != ht->curbatch || natts > MaxTupleAttributeNumber)
		return false;
	slot_getallattrs(slot);
	for (i = 0; i < natts; i++)
		if (slot->tts_isnull[i])
		{
			hasnull = true;
			break;
		}
	len = SizeofMinimalTupleHeader;
	if (hasnull)
		len += BITMAPLEN(natts);
	hoff = len = MAXALIGN(len);
	data_len = heap_compute_data_size(desc, slot->tts_values, slot->tts_isnull);
	len += data_len;
	if (len > MaxAllocSize)
		return false;
	hashTupleSize = HJTUPLE_OVERHEAD + len;

	/* would ExecHashTableInsert double the batches after this row? then let it */
	nbo = ht->nbuckets_optimal;
	if (ht->nbatch == 1 && ntuples > (nbo * NTUP_PER_BUCKET) &&
		nbo <= INT_MAX / 2 && (Size) nbo * 2 <= MaxAllocSize / sizeof(HashJoinTuple))
		nbo *= 2;
	if (ht->spaceUsed + hashTupleSize + nbo * sizeof(HashJoinTuple) > ht->spaceAllowed)
		return false;

	hashTuple = (HashJoinTuple) dense_alloc(ht, hashTupleSize);
	hashTuple->hashvalue = hashvalue;
	tuple = HJTUPLE_MINTUPLE(hashTuple);
	memset(tuple, 0, len);
	tuple->t_len = len;
	HeapTupleHeaderSetNatts(tuple, natts);
	tuple->t_hoff = hoff + MINIMAL_TUPLE_OFFSET;
	heap_fill_tuple(desc, slot->tts_values, slot->tts_isnull, (char *) tuple + hoff, data_len,
					&tuple->t_infomask, (hasnull ? tuple->t_bits : NULL));
	HeapTupleHeaderClearMatch(tuple);

	/* pushed onto its bucket's list SCOOT_HASH_BUILD_AHEAD rows later (link_oldest) */
	if (hb->npend == SCOOT_HASH_BUILD_AHEAD)
		link_oldest(hb, ht);
	__builtin_prefetch(&ht->buckets.unshared[bucketno], 1);
	i = (hb->pend_first + hb->npend) & (SCOOT_HASH_BUILD_AHEAD - 1);
	hb->pend_tuple[i] = hashTuple;
	hb->pend_bucket[i] = bucketno;
	hb->npend++;

	if (nbo != ht->nbuckets_optimal)
	{
		ht->nbuckets_optimal = nbo;
		ht->log2_nbuckets_optimal += 1;
	}
	ht->spaceUsed += hashTupleSize;
	if (ht->spaceUsed > ht->spacePeak)
		ht->spacePeak = ht->spaceUsed;
	return true;
}

/*
 * MultiExecPrivateHash's loop body for one row of the child: hash it, insert it, count it.
 */
void
scoot_hash_build_put(ScootHashBuild *hb, HashJoinTable ht, TupleTableSlot *slot)
{
	uint32		hashvalue = 0;

	if (hb->inline_now)
	{
		int			i;

		slot_getsomeattrs(slot, hb->max_att);
		for (i = 0; i < hb->nkeys; i++)
		{
			int			a = hb->key_att[i] - 1;

			hashvalue = pg_rotate_left32(hashvalue, 1);
			if (slot->tts_isnull[a])
			{
				if (ht->hashStrict[i] && !ht->keepNulls)
					return;		/* cannot match: not in the table */
			}
			else
				hashvalue ^= int_hash(slot->tts_values[a], hb->key_width[i]);
		}
	}
	else
	{
		ExprContext *econtext = hb->hash->ps.ps_ExprContext;

		econtext->ecxt_outertuple = slot;
		if (!ExecHashGetHashValue(ht, econtext, hb->hash->hashkeys, false, ht->keepNulls,
								  &hashvalue))
			return;
	}
	if (insert_in_place(hb, ht, slot, hashvalue))
		hb->rows_in_place++;
	else
	{
		scoot_hash_build_flush(hb, ht);
		ExecHashTableInsert(ht, slot, hashvalue);
		hb->rows_inserted++;
	}
	ht->totalTuples += 1;
}

/*
 * The scan node `ss` under a Hash node whose join created the private table `ht`: all of the
 * node's rows (ExecScan with its access method: its own filters and projection as always) go
 * into the table, and the Hash node gets "no more rows". EXPLAIN ANALYZE still counts the rows
 * the node produced.
 */
TupleTableSlot *
scoot_hash_build_run(ScanState *ss, ScootHashBuild *hb, HashJoinTable ht,
					 ExecScanAccessMtd next, ExecScanRecheckMtd recheck)
{
	double		rows = 0;

	for (;;)
	{
		TupleTableSlot *slot = ExecScan(ss, next, recheck);

		if (TupIsNull(slot))
			break;
		scoot_hash_build_put(hb, ht, slot);
		if (((int64) ++rows & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	scoot_hash_build_flush(hb, ht);
	if (ss->ps.instrument != NULL)
		ss->ps.instrument->tuplecount += rows;
	return NULL;
}
