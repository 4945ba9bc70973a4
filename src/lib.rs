//! pg_scoot: a PostgreSQL table access method (`scoot`) that keeps tuples in PAX blocks inside a
//! shared-memory arena.
//!
//! Where things live (one module per concept):
//! - `guc`      — the `scoot.*` settings.
//! - `arena`    — the shared arena (memfd mapping created in the postmaster) and its control region
//!                (block descriptors, block allocator, lock words) in PostgreSQL shared memory.
//!                *Where do tuples live?* In arena blocks, see `arena` + `block`.
//! - `block`    — the PAX block format: in-block header, row version headers, column regions.
//! - `tabledir` — the table directory: relfilenode -> table id, per-table insert hints.
//! - `row`      — converting between executor slots and rows in a block (deform/form).
//! - `mvcc`     — row-version visibility rules (PostgreSQL's heap semantics on scoot headers).
//! - `storage`  — the one narrow layer through which every modification of a block goes
//!                (insert, set xmax, link versions, prune, free); the future WAL describes these.
//! - `locking`  — row locks, multixacts and waiting (update/delete/lock concurrency).
//! - `am/*`     — the TableAmRoutine callbacks (scans, index fetch, modify, DDL, vacuum, ...).
//! - `xact`     — storage created/dropped in a transaction, applied at commit/abort.
//! - `views`    — `scoot.arena` and other observability functions.
//! - `ffi`      — the few PostgreSQL declarations pgrx does not bind, and small inline helpers.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]
#![allow(non_upper_case_globals)]

use pgrx::prelude::*;

pub mod am;
pub mod arena;
pub mod block;
pub mod ffi;
pub mod guc;
pub mod locking;
pub mod mvcc;
pub mod row;
pub mod slot;
pub mod storage;
pub mod tabledir;
pub mod views;
pub mod xact;

::pgrx::pg_module_magic!(name, version);

/// True when the library was loaded through `shared_preload_libraries` (set in `_PG_init`).
pub static mut PRELOADED: bool = false;

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    unsafe {
        slot::init();
        if !pg_sys::process_shared_preload_libraries_in_progress {
            // Loaded on demand by a backend: every scoot entry point refuses to work.
            PRELOADED = false;
            return;
        }
        PRELOADED = true;
        guc::define();
        arena::install_hooks();
        xact::install_hooks();
    }
}

/// Fails with a clear error unless the library was preloaded. Every entry point calls this.
pub fn ensure_preloaded() {
    unsafe {
        if !PRELOADED || !arena::is_ready() {
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
