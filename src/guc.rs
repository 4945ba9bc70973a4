//! The `scoot.*` settings (GUCs). Postmaster-level ones size the arena and are fixed at start.
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};

/// `scoot.arena_size`: size of the shared arena in MB (postmaster).
pub static ARENA_SIZE_MB: GucSetting<i32> = GucSetting::<i32>::new(1024);
/// `scoot.block_size`: PAX block size in kB (postmaster; a power of two, 64 kB .. 64 MB).
pub static BLOCK_SIZE_KB: GucSetting<i32> = GucSetting::<i32>::new(1024);
/// `scoot.max_tables`: number of scoot relations (relfilenodes) the arena can track (postmaster).
pub static MAX_TABLES: GucSetting<i32> = GucSetting::<i32>::new(4096);

/// `scoot.opportunistic_prune`: prune version chains during scans and index fetches (debugging aid).
pub static OPPORTUNISTIC_PRUNE: GucSetting<bool> = GucSetting::<bool>::new(true);

pub fn define() {
    GucRegistry::define_bool_guc(
        c"scoot.opportunistic_prune",
        c"Prune dead row versions while reading (like heap's page pruning).",
        c"",
        &OPPORTUNISTIC_PRUNE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"scoot.arena_size",
        c"Size of the scoot shared-memory arena that holds all scoot tables.",
        c"Set at server start. Tables that do not fit fail with 'out of scoot arena memory'.",
        &ARENA_SIZE_MB,
        16,
        1 << 22,
        GucContext::Postmaster,
        GucFlags::UNIT_MB,
    );
    GucRegistry::define_int_guc(
        c"scoot.block_size",
        c"Size of one scoot PAX block.",
        c"A power of two between 64kB and 64MB. A row's variable-length data must fit in about half a block.",
        &BLOCK_SIZE_KB,
        64,
        65536,
        GucContext::Postmaster,
        GucFlags::UNIT_KB,
    );
    GucRegistry::define_int_guc(
        c"scoot.max_tables",
        c"Maximum number of scoot relations (including TRUNCATE/rewrite generations) at once.",
        c"",
        &MAX_TABLES,
        16,
        1 << 20,
        GucContext::Postmaster,
        GucFlags::default(),
    );
}
