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

/*
 * Executor and EXPLAIN hooks of the OLAP snapshot layer (src/snapshot/session.rs). The hooks
 * themselves are C so that no Rust frame sits between PostgreSQL and the executor it calls: an
 * error raised anywhere in a query unwinds through C frames only and reaches the client intact.
 * The Rust parts run before and after the standard functions and never wrap them.
 */
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "optimizer/optimizer.h"
#include "tcop/tcopprot.h"

extern void scoot_exec_start_before(QueryDesc *qd, int eflags);
extern void scoot_exec_start_after(QueryDesc *qd, int eflags);
extern void scoot_exec_run_before(QueryDesc *qd);
extern void scoot_hj_readahead_bounded(QueryDesc *qd);
extern void scoot_exec_end_before(QueryDesc *qd);
extern void scoot_explain_before(void);
extern void scoot_explain_after(ExplainState *es, int start_len);

static ExecutorStart_hook_type prev_start = NULL;
static ExecutorRun_hook_type prev_run = NULL;
static ExecutorEnd_hook_type prev_end = NULL;
static ExplainOneQuery_hook_type prev_explain = NULL;

static void
scoot_executor_start(QueryDesc *qd, int eflags)
{
	scoot_exec_start_before(qd, eflags);
	if (prev_start)
		prev_start(qd, eflags);
	else
		standard_ExecutorStart(qd, eflags);
	scoot_exec_start_after(qd, eflags);
}

static void
scoot_executor_run(QueryDesc *qd, ScanDirection direction, uint64 count, bool execute_once)
{
	scoot_exec_run_before(qd);
	if (count != 0)
		scoot_hj_readahead_bounded(qd);	/* src/exec/readahead.c */
	if (prev_run)
		prev_run(qd, direction, count, execute_once);
	else
		standard_ExecutorRun(qd, direction, count, execute_once);
}

static void
scoot_executor_end(QueryDesc *qd)
{
	scoot_exec_end_before(qd);
	if (prev_end)
		prev_end(qd);
	else
		standard_ExecutorEnd(qd);
}

/* ExplainOneQuery() without a hook, plus the snapshot annotations */
static void
scoot_explain_one_query(Query *query, int cursorOptions, IntoClause *into, ExplainState *es,
						const char *queryString, ParamListInfo params, QueryEnvironment *queryEnv)
{
	PlannedStmt *plan;
	instr_time	planstart,
				planduration;
	BufferUsage bufusage_start,
				bufusage;
	int			start_len = es->str->len;

	if (prev_explain)
	{
		prev_explain(query, cursorOptions, into, es, queryString, params, queryEnv);
		return;
	}
	scoot_explain_before();
	if (es->buffers)
		bufusage_start = pgBufferUsage;
	INSTR_TIME_SET_CURRENT(planstart);
	plan = pg_plan_query(query, queryString, cursorOptions, params);
	INSTR_TIME_SET_CURRENT(planduration);
	INSTR_TIME_SUBTRACT(planduration, planstart);
	if (es->buffers)
	{
		memset(&bufusage, 0, sizeof(BufferUsage));
		BufferUsageAccumDiff(&bufusage, &pgBufferUsage, &bufusage_start);
	}
	ExplainOnePlan(plan, into, es, queryString, params, queryEnv,
				   &planduration, (es->buffers ? &bufusage : NULL));
	scoot_explain_after(es, start_len);
}

void		scoot_install_executor_hooks(void);

void
scoot_install_executor_hooks(void)
{
	prev_start = ExecutorStart_hook;
	ExecutorStart_hook = scoot_executor_start;
	prev_run = ExecutorRun_hook;
	ExecutorRun_hook = scoot_executor_run;
	prev_end = ExecutorEnd_hook;
	ExecutorEnd_hook = scoot_executor_end;
	prev_explain = ExplainOneQuery_hook;
	ExplainOneQuery_hook = scoot_explain_one_query;
}

/*
 * The client connection's socket, for the Arrow export's send-buffer size (src/arrow/stream.rs);
 * -1 without a client connection (background workers, single-user mode).
 */
#include "miscadmin.h"

/*
 * libpq/libpq-be.h (struct Port) needs the GSSAPI headers of the server's build; `sock` is the
 * first member of struct Port in every PostgreSQL release.
 */
typedef struct ScootPortHead
{
	pgsocket	sock;
} ScootPortHead;

int			scoot_client_socket(void);

int
scoot_client_socket(void)
{
	if (MyProcPort == NULL || ((ScootPortHead *) MyProcPort)->sock == PGINVALID_SOCKET)
		return -1;
	return (int) ((ScootPortHead *) MyProcPort)->sock;
}

/*
 * Sending the Arrow export's chunks without PostgreSQL's 8 kB send buffer.
 *
 * PostgreSQL 15 sends every message through PqSendBuffer, 8 kB at a time: a 10 MB DataRow is
 * copied once more and written with ~1,300 send() calls. While a stream is going out
 * (scoot_direct_send_begin .. _end), DataRow-sized messages (>= 256 kB) are written with
 * secure_write() straight from the message buffer (after what PostgreSQL had buffered), which
 * is what PostgreSQL 17 does for large messages; every other message takes PostgreSQL's own
 * path. Errors are handled as internal_flush() handles them (logged once, ClientConnectionLost).
 * libpq/libpq.h needs the GSSAPI headers of the server's build, so the method table is declared
 * here with PostgreSQL 15's layout.
 */
#include "port/pg_bswap.h"
#include "tcop/dest.h"
#include "access/parallel.h"
#include "access/xact.h"

typedef struct ScootPQcommMethods
{
	void		(*comm_reset) (void);
	int			(*flush) (void);
	int			(*flush_if_writable) (void);
	bool		(*is_send_pending) (void);
	int			(*putmessage) (char msgtype, const char *s, size_t len);
	void		(*putmessage_noblock) (char msgtype, const char *s, size_t len);
} ScootPQcommMethods;

extern PGDLLIMPORT const ScootPQcommMethods *PqCommMethods;
extern ssize_t secure_write(struct Port *port, void *ptr, size_t len);

#define SCOOT_DIRECT_SEND_MIN (256 * 1024)

static const ScootPQcommMethods *scoot_saved_comm = NULL;
static ScootPQcommMethods scoot_direct_comm;

static int
scoot_write_all(const char *p, size_t len)
{
	static int	last_reported_send_errno = 0;

	while (len > 0)
	{
		ssize_t		r = secure_write(MyProcPort, (void *) p, len);

		if (r <= 0)
		{
			if (errno == EINTR)
				continue;
			/* only to the server log: a message to the client would recurse here */
			if (errno != last_reported_send_errno)
			{
				last_reported_send_errno = errno;
				ereport(COMMERROR,
						(errcode_for_socket_access(),
						 errmsg("could not send data to client: %m")));
			}
			ClientConnectionLost = 1;
			InterruptPending = 1;
			return EOF;
		}
		last_reported_send_errno = 0;
		p += r;
		len -= r;
	}
	return 0;
}

static int
scoot_direct_putmessage(char msgtype, const char *s, size_t len)
{
	char		hdr[5];
	uint32		n32;

	if (len < SCOOT_DIRECT_SEND_MIN)
		return scoot_saved_comm->putmessage(msgtype, s, len);
	/* what PostgreSQL has buffered goes first (this also makes the socket blocking) */
	if (scoot_saved_comm->flush())
		return EOF;
	hdr[0] = msgtype;
	n32 = pg_hton32((uint32) (len + 4));
	memcpy(hdr + 1, &n32, 4);
	if (scoot_write_all(hdr, 5) || scoot_write_all(s, len))
		return EOF;
	return 0;
}

void		scoot_direct_send_begin(void);
void		scoot_direct_send_end(void);

/* the stream's end normally restores PostgreSQL's methods; a transaction's end always does */
static void
scoot_direct_send_xact(XactEvent event, void *arg)
{
	scoot_direct_send_end();
}

void
scoot_direct_send_begin(void)
{
	static bool registered = false;

	if (scoot_saved_comm != NULL || MyProcPort == NULL || whereToSendOutput != DestRemote ||
		IsParallelWorker())
		return;
	if (!registered)
	{
		RegisterXactCallback(scoot_direct_send_xact, NULL);
		registered = true;
	}
	scoot_saved_comm = PqCommMethods;
	scoot_direct_comm = *PqCommMethods;
	scoot_direct_comm.putmessage = scoot_direct_putmessage;
	PqCommMethods = &scoot_direct_comm;
}

void
scoot_direct_send_end(void)
{
	if (scoot_saved_comm == NULL)
		return;
	if (PqCommMethods == &scoot_direct_comm)
		PqCommMethods = scoot_saved_comm;
	scoot_saved_comm = NULL;
}
