//! pg_scoot: a PostgreSQL table access method (`scoot`) that keeps tuples in PAX blocks inside a
//! shared-memory arena.
//!
//! Layers (lower ones never import upper ones):
//! - `storage/` — *where do tuples live*: `arena` (the memfd mapping created in the postmaster and
//!                its control region of block descriptors in PostgreSQL shared memory), `block` (the
//!                PAX block format), `tabledir` (relfilenode -> table), `row` (executor slot <-> block
//!                row), `modify` (the one layer every block modification goes through; the WAL
//!                issue logs exactly these operations).
//! - `txn/`     — `mvcc` (visibility rules: PostgreSQL's heap semantics on scoot headers),
//!                `locking` (row locks, multixacts, waiting), `xact` (storage lifetimes at
//!                commit/abort), `horizon` (what pruning may remove).
//! - `snapshot/` — *how does a snapshot happen*: OLAP snapshots of the arena (registry, the OLAP
//!                background worker, the uffd/software/copy methods, the reader's image, which
//!                statements read one). `storage/cow.rs` is its write side.
//! - `am/`      — the TableAmRoutine callbacks (scans, index fetch, modify, DDL, vacuum), reading
//!                live blocks or a snapshot image.
//! - `wal/`     — durability: the scoot WAL (a custom resource manager logging what `modify`
//!                changed), checkpoint images of the arena, crash recovery, the WAL-keeping slot.
//! - `views`    — `scoot.arena` and other observability functions.
//! - `guc`      — the `scoot.*` settings; `ffi` — the thin unsafe layer (declarations pgrx lacks).
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]
#![allow(non_upper_case_globals)]

use pgrx::prelude::*;

pub mod am;
pub mod arrow;
pub mod exec;
pub mod ffi;
pub mod guc;
pub mod snapshot;
pub mod storage;
pub mod txn;
pub mod views;
pub mod wal;

::pgrx::pg_module_magic!(name, version);

/// True when the library was loaded through `shared_preload_libraries` (set in `_PG_init`).
pub static mut PRELOADED: bool = false;

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    unsafe {
        storage::slot::init();
        if !pg_sys::process_shared_preload_libraries_in_progress {
            // Loaded on demand by a backend: every scoot entry point refuses to work.
            PRELOADED = false;
            return;
        }
        PRELOADED = true;
        ffi::guard::disable_backtraces();
        guc::define();
        storage::arena::install_hooks();
        storage::arena::ON_INITIALISED = Some(wal::on_arena_initialised);
        wal::install();
        txn::xact::install_hooks(am::is_scoot);
        snapshot::install(am::is_scoot);
        exec::install();
    }
}

/// Fails with a clear error unless the library was preloaded. Every entry point calls this.
pub fn ensure_preloaded() {
    unsafe {
        if !PRELOADED || !storage::arena::is_ready() {
            crate::ffi::error_hint(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "pg_scoot is not loaded through shared_preload_libraries", "Add pg_scoot to shared_preload_libraries in postgresql.conf and restart the server.");
        }
    }
}

/// Called by the extension script so that `CREATE EXTENSION pg_scoot` fails clearly without preload.
#[pg_extern]
fn scoot_check_preload() {
    ensure_preloaded();
}

extension_sql!(
    "SELECT @extschema@.scoot_check_preload();\n",
    name = "preload_check",
    requires = [scoot_check_preload]
);

#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![
            "shared_preload_libraries = 'pg_scoot'",
            "scoot.arena_size = 256",
        ]
    }
}
