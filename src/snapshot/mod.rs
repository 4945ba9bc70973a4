//! OLAP snapshots — *how does a snapshot happen*.
//!
//! Analytic statements on scoot tables read a frozen, transaction-consistent image of the arena
//! while OLTP sessions keep writing the live arena. The pieces, bottom up:
//!
//! - `storage/cow.rs` (the write side): every arena modification happens inside a *write
//!   section*; a *gate* lets the OLAP worker find an instant with no change half done. After a
//!   snapshot with epoch `e` exists, the first write to an arena page saves the page's
//!   pre-image into a bounded pool (`scoot.snapshot_memory`), so the image can always be
//!   rebuilt: live page unless a version was saved for an epoch `>= e`.
//! - [`registry`]: the snapshots that exist (shared memory): per snapshot the MVCC snapshot of
//!   its instant, the block and table catalogs of that instant, pins, statistics.
//! - [`worker`]: the `pg_scoot olap worker` background worker. It closes the gate, captures the
//!   MVCC snapshot and the catalogs, arms page preservation per method, reopens the gate and
//!   publishes the snapshot; it releases snapshots when their last reader is gone.
//! - the three methods behind one interface (`scoot.snapshot_method`):
//!   [`uffd`] — the kernel traps the first write to a page (userfaultfd write-protect on each
//!   writer's mapping) and the worker saves the pre-image; `software` — writers save pre-images
//!   themselves (`cow::before_write`); `copy` — the worker copies the used arena at snapshot
//!   time.
//! - [`image`]: the reader's view of a pinned snapshot: blocks are materialized into private
//!   buffers as they were at the snapshot's instant; no block lock is taken.
//! - [`session`]: which statements read a snapshot (`scoot.olap`), read-your-writes, the
//!   statement snapshot replaced by the image's, EXPLAIN annotations.
//!
//! The access method (`am/scan.rs`, `am/index.rs`) asks `session::image_for(snapshot)` and, when
//! a scan has an image, reads blocks through `image` instead of locking live blocks.
pub mod image;
pub mod registry;
pub mod session;
pub mod uffd;
pub mod worker;

use crate::guc;
use crate::storage::{arena, cow};
use pgrx::pg_sys;

static mut PREV_SHMEM_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP: pg_sys::shmem_startup_hook_type = None;

fn sizes() -> registry::Sizes {
    unsafe {
        let procs = pg_sys::MaxBackends as usize + crate::ffi::max_prepared_xacts as usize;
        registry::Sizes {
            nblocks: arena::bytes() / (guc::BLOCK_SIZE_KB.get() as usize * 1024),
            max_tables: guc::MAX_TABLES.get() as usize,
            nprocs: pg_sys::MaxBackends as usize + 1024,
            maxxip: procs,
            maxsubxip: (pg_sys::PGPROC_MAX_CACHED_SUBXIDS as usize + 1) * procs,
        }
    }
}

/// Called from `_PG_init` (postmaster, preload): shared memory, executor hooks, the worker.
pub unsafe fn install(is_scoot: fn(pg_sys::Relation) -> bool) {
    unsafe {
        PREV_SHMEM_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(shmem_request);
        PREV_SHMEM_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
        session::install_hooks(is_scoot);
        cow::ON_FIRST_SECTION = Some(uffd::register_self);
        cow::OWN_TRAP = Some(uffd::own_trap);
        worker::register();
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST {
            prev();
        }
        pg_sys::RequestAddinShmemSpace(registry::shmem_bytes(&sizes()));
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP {
            prev();
        }
        let z = sizes();
        crate::ffi::shmem_init_struct(
            c"pg_scoot snapshot registry",
            registry::shmem_bytes(&z),
            |p, fresh| registry::attach(p, fresh, &z),
        );
    }
}
