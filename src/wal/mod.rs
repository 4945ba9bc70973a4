//! Durability: what makes committed scoot rows outlive the server process.
//!
//! Today this layer owns the **checkpoint image** (`checkpoint_image`): at a clean shutdown the
//! postmaster, the last process alive after PostgreSQL's shutdown checkpoint, writes every scoot
//! table's blocks to `$PGDATA/pg_scoot/arena.img`, stamped with that checkpoint's WAL position;
//! the next start loads the image into the fresh arena before any session exists, only when
//! `pg_control` says the server shut down cleanly at exactly that checkpoint (so nothing can have
//! changed since). Rows keep their TIDs, so PostgreSQL's (WAL-logged) indexes stay valid.
//!
//! Not yet: a scoot WAL resource manager and images taken from OLAP snapshots at every checkpoint
//! — until then a crash (or `pg_ctl stop -m immediate`) still loses the rows of scoot tables,
//! which `storage::tabledir::resolve` reports as before.
pub mod checkpoint_image;

use pgrx::pg_sys;

/// Called from the shared-memory startup hook in the postmaster (or a single-user backend) after
/// the arena's control region was initialised: loads the image if it is valid for this start,
/// and arranges for the next clean shutdown to write one.
pub fn on_arena_initialised() {
    unsafe {
        if pg_sys::IsUnderPostmaster {
            return;
        }
        // only the postmaster: a single-user backend shuts its checkpoint down after our exit
        // callbacks would run, so it neither loads nor writes (documented)
        if pg_sys::PostmasterPid != libc::getpid() {
            return;
        }
        checkpoint_image::load_at_startup();
        // shmem_exit() forgets its callbacks, and a crash restart re-runs this hook: register
        // again each time
        pg_sys::before_shmem_exit(Some(at_postmaster_exit), pg_sys::Datum::from(0));
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn at_postmaster_exit(code: i32, _arg: pg_sys::Datum) {
    // code != 0: a crash restart or an abnormal exit; the arena may be mid-change
    if code == 0 && unsafe { pg_sys::PostmasterPid == libc::getpid() } {
        checkpoint_image::write_at_shutdown();
    }
}
