/*
 * The C side of pg_scoot's FFI layer: a PG_TRY/PG_CATCH boundary.
 *
 * pgrx turns every PostgreSQL error raised inside a pg_sys call into a Rust panic carrying only
 * the message, detail and hint: CONTEXT lines, the schema/table/constraint names and the error
 * position are lost. Calls that can run user code or wait (index expressions, TOAST, lock waits)
 * go through scoot_try() instead: the callback (a Rust function whose frames own nothing that
 * needs dropping) calls PostgreSQL directly; an error is caught here as a complete ErrorData,
 * Rust unwinds normally, and the callback boundary re-raises it with ReThrowError(), so the
 * client sees exactly what heap would have shown.
 */
#include "postgres.h"

#include "utils/elog.h"
#include "utils/memutils.h"

typedef void (*scoot_fn) (void *arg);

ErrorData  *scoot_try(scoot_fn fn, void *arg);

ErrorData *
scoot_try(scoot_fn fn, void *arg)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ErrorData  *volatile err = NULL;

	PG_TRY();
	{
		fn(arg);
	}
	PG_CATCH();
	{
		/* keep the copy until the transaction aborts: the re-throw copies it again */
		MemoryContextSwitchTo(TopTransactionContext ? TopTransactionContext : TopMemoryContext);
		err = CopyErrorData();
		FlushErrorState();
		MemoryContextSwitchTo(oldcxt);
	}
	PG_END_TRY();
	return err;
}
