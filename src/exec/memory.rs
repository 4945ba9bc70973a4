//! The malloc policy of backends that run analytic statements (`scoot.retain_query_memory`).
//!
//! An analytic statement allocates megabytes per node (PostgreSQL's hash tables and sort
//! memory, ScootAgg's group tables and grids) and frees them at its end; glibc returns the
//! freed top of its heap, and every block it had mapped for a large request, to the kernel, and
//! the next statement takes page faults to get fresh zeroed pages back: CH's Q5, Q10, Q14, Q15,
//! Q16 and Q18 took about 1,900 page faults each on 300k order lines (perf stat). Backends that
//! run such statements (one reading an OLAP snapshot image, a ScootAgg or a ScootPreAgg) switch
//! glibc to keeping what they free: requests below 32 MB come from the heap, and up to 1 GB of
//! free heap top stays mapped; the same statements then took about 25 faults each. The memory
//! stays with the backend (up to its largest statement's) until it exits; OLTP backends never
//! switch.
use crate::guc;
use std::cell::Cell;

thread_local! {
    static APPLIED: Cell<bool> = const { Cell::new(false) };
}

const MMAP_THRESHOLD: i32 = 32 << 20;
const TRIM_THRESHOLD: i32 = 1 << 30;
const TOP_PAD: i32 = 16 << 20;
/// glibc's default values of the three (`man mallopt`; once set, its dynamic mmap threshold
/// stays off)
const DEFAULT: i32 = 128 << 10;

/// Called as an analytic statement starts: applies the policy once per backend, or returns to
/// glibc's default thresholds when `scoot.retain_query_memory` was turned off since.
pub fn analytic_statement() {
    let want = guc::RETAIN_QUERY_MEMORY.get();
    APPLIED.with(|a| {
        if a.get() == want {
            return;
        }
        let (mmap, trim, pad) = if want {
            (MMAP_THRESHOLD, TRIM_THRESHOLD, TOP_PAD)
        } else {
            (DEFAULT, DEFAULT, DEFAULT)
        };
        // SAFETY: mallopt only changes the allocator's parameters (backends are single-threaded)
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, mmap);
            libc::mallopt(libc::M_TRIM_THRESHOLD, trim);
            libc::mallopt(libc::M_TOP_PAD, pad);
        }
        a.set(want);
    });
}

/// [`analytic_statement`] for the C executor nodes (ScootAgg, ScootPreAgg).
#[unsafe(no_mangle)]
pub extern "C" fn scoot_analytic_statement() {
    analytic_statement();
}

/// After ExecutorStart (`customscan.c`'s hook, which runs after the snapshot layer's): a statement
/// that reads an OLAP snapshot image is an analytic one.
///
/// # Safety
/// `qd` is the QueryDesc ExecutorStart just set up.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scoot_statement_started(qd: *mut pgrx::pg_sys::QueryDesc) {
    crate::ffi::guard::boundary(|| unsafe {
        let es = (*qd).estate;
        if !es.is_null() && crate::snapshot::session::image_for((*es).es_snapshot).is_some() {
            analytic_statement();
        }
    })
}
