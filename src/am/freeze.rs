//! `scoot.freeze(rel)`: freezes a scoot table's blocks now (the background freezer does the same
//! to blocks unchanged for `scoot.freeze_after`; see `txn::freeze` for what freezing means).
use crate::storage::tabledir;
use crate::txn::freeze::{self, Outcome};
use pgrx::prelude::*;

/// Freezes every block of `rel` whose row versions are all visible to every snapshot; returns
/// the number of blocks frozen by this call. Blocks that cannot be frozen yet are counted in a
/// NOTICE with the reason. Needs ownership of the table, like VACUUM.
#[pg_extern(sql = false)]
fn freeze_table(rel: pg_sys::Oid) -> i64 {
    crate::ensure_preloaded();
    unsafe {
        let r = crate::am::open_for_maintenance(
            rel,
            "scoot.freeze freezes the blocks of tables created USING scoot.",
        );
        let t = tabledir::resolve(r);
        let horizon = freeze::horizon();
        let (mut frozen, mut not_yet) = (0i64, 0i64);
        let mut pruned = 0u64;
        for (lb, _) in tabledir::blocks_of(t) {
            pg_sys::check_for_interrupts!();
            let mut out = freeze::freeze_block(t, lb, horizon, true);
            if out == Outcome::Prunable {
                pruned += crate::am::index::prune_block_horizon(t, lb, horizon) as u64;
                out = freeze::freeze_block(t, lb, horizon, true);
            }
            match out {
                Outcome::Frozen => frozen += 1,
                Outcome::NotYet | Outcome::Prunable => not_yet += 1,
                Outcome::AlreadyFrozen | Outcome::Busy => {}
            }
        }
        // the versions pruned first count as reclaimed, as opportunistic pruning reports them
        crate::am::index::report_reclaimed(r, pruned);
        if not_yet > 0 {
            ereport!(
                PgLogLevel::NOTICE,
                PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
                format!(
                    "{not_yet} block(s) of \"{}\" cannot be frozen yet",
                    crate::ffi::rel_name(r)
                ),
                "A block freezes once all its row versions are visible to every transaction: wait for older transactions to end, and VACUUM the table to remove dead row versions."
            );
        }
        pg_sys::table_close(r, pg_sys::NoLock as i32);
        frozen
    }
}

extension_sql!(
    r#"
CREATE FUNCTION freeze(rel regclass) RETURNS bigint
    LANGUAGE c VOLATILE PARALLEL UNSAFE STRICT
    AS 'MODULE_PATHNAME', 'freeze_table_wrapper';
COMMENT ON FUNCTION freeze(regclass) IS
    'freezes now every block of a scoot table whose row versions are all visible to every transaction (as the background freezer does after scoot.freeze_after): rows frozen, variable-length values gathered per column, so scans skip visibility checks and Arrow export copies buffers; returns the number of blocks frozen';
"#,
    name = "freeze_sql",
);
