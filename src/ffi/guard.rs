//! Error boundaries that keep PostgreSQL errors intact.
//!
//! pgrx converts an error raised inside any `pg_sys` call into a Rust panic that carries only the
//! message, detail and hint, and re-raises that at the callback boundary: CONTEXT lines, the
//! constraint/table names and the error position are lost, and with `RUST_BACKTRACE` set a Rust
//! backtrace becomes the DETAIL. Two pieces fix that for scoot:
//!
//! * [`catch`] runs a closure under a C `PG_TRY` (src/ffi/shim.c). The closure calls PostgreSQL
//!   through the unguarded declarations in [`raw`]; an error is caught as a complete `ErrorData`
//!   and travels up as a [`PgError`] panic, so Rust frames unwind normally (locks released).
//! * [`boundary`] wraps every callback PostgreSQL calls into scoot: a [`PgError`] is re-raised
//!   with `ReThrowError` (unchanged, as heap would have raised it); anything else goes on to
//!   pgrx's own handling.
//!
//! `_PG_init` also sets `RUST_LIB_BACKTRACE=0` so that no Rust backtrace is ever attached to an
//! error a client sees.
use pgrx::pg_sys;
use std::any::Any;
use std::ffi::c_void;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

extern "C-unwind" {
    fn scoot_try(
        f: unsafe extern "C-unwind" fn(*mut c_void),
        arg: *mut c_void,
    ) -> *mut pg_sys::ErrorData;
}

/// PostgreSQL functions called without pgrx's FFI boundary. Only call them inside [`catch`] (or,
/// for `ReThrowError`, as the very last thing a boundary does).
pub mod raw {
    use pgrx::pg_sys;
    extern "C-unwind" {
        pub fn ReThrowError(edata: *mut pg_sys::ErrorData) -> !;
        pub fn FormIndexDatum(
            index_info: *mut pg_sys::IndexInfo,
            slot: *mut pg_sys::TupleTableSlot,
            estate: *mut pg_sys::EState,
            values: *mut pg_sys::Datum,
            isnull: *mut bool,
        );
        pub fn index_insert(
            index_relation: pg_sys::Relation,
            values: *mut pg_sys::Datum,
            isnull: *mut bool,
            heap_t_ctid: pg_sys::ItemPointer,
            heap_relation: pg_sys::Relation,
            check_unique: pg_sys::IndexUniqueCheck::Type,
            index_unchanged: bool,
            index_info: *mut pg_sys::IndexInfo,
        ) -> bool;
        pub fn heap_toast_insert_or_update(
            rel: pg_sys::Relation,
            newtup: pg_sys::HeapTuple,
            oldtup: pg_sys::HeapTuple,
            options: i32,
        ) -> pg_sys::HeapTuple;
        pub fn toast_delete_datum(
            rel: pg_sys::Relation,
            value: pg_sys::Datum,
            is_speculative: bool,
        );
        pub fn XactLockTableWait(
            xid: pg_sys::TransactionId,
            rel: pg_sys::Relation,
            ctid: pg_sys::ItemPointer,
            oper: pg_sys::XLTW_Oper::Type,
        );
        pub fn ConditionalXactLockTableWait(xid: pg_sys::TransactionId) -> bool;
        #[allow(clippy::too_many_arguments)]
        pub fn standard_ProcessUtility(
            pstmt: *mut pg_sys::PlannedStmt,
            query_string: *const std::ffi::c_char,
            read_only_tree: bool,
            context: pg_sys::ProcessUtilityContext::Type,
            params: pg_sys::ParamListInfo,
            query_env: *mut pg_sys::QueryEnvironment,
            dest: *mut pg_sys::DestReceiver,
            qc: *mut pg_sys::QueryCompletion,
        );
        pub fn LockTuple(
            relation: pg_sys::Relation,
            tid: pg_sys::ItemPointer,
            lockmode: pg_sys::LOCKMODE,
        );
        pub fn ConditionalLockTuple(
            relation: pg_sys::Relation,
            tid: pg_sys::ItemPointer,
            lockmode: pg_sys::LOCKMODE,
        ) -> bool;
    }
}

/// A PostgreSQL error caught with its complete `ErrorData` (allocated in TopTransactionContext).
pub struct PgError(pub *mut pg_sys::ErrorData);
// SAFETY: backends are single-threaded; the panic payload never leaves this thread.
unsafe impl Send for PgError {}

struct TryState<F, R> {
    f: Option<F>,
    result: Option<R>,
    panic: Option<Box<dyn Any + Send>>,
}

unsafe extern "C-unwind" fn trampoline<F: FnOnce() -> R, R>(arg: *mut c_void) {
    unsafe {
        let st = &mut *(arg as *mut TryState<F, R>);
        let f = st.f.take().unwrap();
        // a Rust panic (a pgrx-guarded call failing, a bug) must not unwind through the C frame
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => st.result = Some(r),
            Err(p) => st.panic = Some(p),
        }
    }
}

/// Runs `f` under a C `PG_TRY`. A PostgreSQL error raised by a [`raw`] call inside `f` becomes a
/// [`PgError`] panic carrying the complete error. `f` should capture by reference: its own frame
/// is skipped by the longjmp of an error (nothing in it is dropped).
pub fn catch<F: FnOnce() -> R, R>(f: F) -> R {
    let mut st = TryState {
        f: Some(f),
        result: None,
        panic: None,
    };
    let err = unsafe {
        scoot_try(
            trampoline::<F, R>,
            &mut st as *mut TryState<F, R> as *mut c_void,
        )
    };
    if !err.is_null() {
        std::panic::panic_any(PgError(err));
    }
    if let Some(p) = st.panic.take() {
        resume_unwind(p);
    }
    st.result.take().unwrap()
}

/// The boundary of every callback PostgreSQL calls into scoot (inside pgrx's `#[pg_guard]`):
/// re-raises a caught PostgreSQL error unchanged, leaves every other panic to pgrx.
#[inline]
pub fn boundary<R>(f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => rethrow(p),
    }
}

#[cold]
fn rethrow(p: Box<dyn Any + Send>) -> ! {
    if let Some(e) = p.downcast_ref::<PgError>() {
        let edata = e.0;
        drop(p);
        unsafe { raw::ReThrowError(edata) }
    }
    resume_unwind(p)
}

/// Makes sure no Rust backtrace is ever captured into an error report (called from `_PG_init`
/// in the postmaster, before any backend exists).
pub fn disable_backtraces() {
    // SAFETY: the postmaster is single-threaded while loading preload libraries.
    unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
}
