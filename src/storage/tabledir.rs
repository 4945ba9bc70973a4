//! The table directory: which scoot relation (by relfilenode) owns which blocks.
//!
//! A fixed array of entries in the control region (`scoot.max_tables`), protected by one LWLock.
//! A table's id is its index + 1; a block's owner word is `(id << 32) | generation`, so a reused
//! entry never claims the blocks of a dropped table. Backends cache the lookup in the relcache
//! entry (`rd_amcache`) and re-validate it with two atomic loads.
//!
//! An entry also remembers that this server incarnation knows the table: a relation whose
//! relfilenode has no entry was created before the last restart and lost its rows (durability is
//! a later issue), which `resolve` reports with a WARNING once.
use crate::ffi;
use crate::storage::arena::{self, LwGuard};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RelKey {
    pub spc: u32,
    pub db: u32,
    pub rel: u32,
    pub backend: i32,
}

pub const E_EMPTY: u32 = 0;
pub const E_USED: u32 = 1;

#[repr(C)]
pub struct TableEntry {
    pub key: RelKey,
    pub state: AtomicU32,
    pub gen: AtomicU32,
    /// A block with free slots (a hint; validated under the block lock).
    pub insert_hint: AtomicU32,
    pub nblocks: AtomicU32,
    /// pg_class oid at creation time (for views; informational).
    pub relid: AtomicU32,
    /// Lost its rows in a restart while its (persistent) indexes still reference them: refuse
    /// access until TRUNCATE gives it a new relfilenode with empty indexes.
    pub needs_truncate: AtomicU32,
    pub rows_inserted: AtomicU64,
}

pub fn entry_size() -> usize {
    std::mem::size_of::<TableEntry>()
}

pub fn init(max_tables: u32) {
    for i in 0..max_tables {
        let e = entry(i + 1);
        e.state.store(E_EMPTY, Ordering::Relaxed);
        e.gen.store(0, Ordering::Relaxed);
        e.insert_hint.store(arena::NO_BLOCK, Ordering::Relaxed);
    }
}

#[inline]
pub fn entry(id: u32) -> &'static mut TableEntry {
    unsafe { &mut *((arena::tabledir_ptr() as *mut TableEntry).add(id as usize - 1)) }
}

/// A resolved table: id + generation, i.e. the owner word of its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableRef {
    pub id: u32,
    pub gen: u32,
}

impl TableRef {
    #[inline]
    pub fn owner(&self) -> u64 {
        arena::owner_word(self.id, self.gen)
    }
    #[inline]
    pub fn entry(&self) -> &'static mut TableEntry {
        entry(self.id)
    }
    #[inline]
    pub fn is_current(&self) -> bool {
        let e = entry(self.id);
        e.state.load(Ordering::Acquire) == E_USED && e.gen.load(Ordering::Acquire) == self.gen
    }
}

pub fn key_of_rel(rel: pg_sys::Relation) -> RelKey {
    unsafe {
        let n = (*rel).rd_node;
        RelKey {
            spc: n.spcNode.into(),
            db: n.dbNode.into(),
            rel: n.relNode.into(),
            backend: (*rel).rd_backend,
        }
    }
}

pub fn key_of_node(node: &pg_sys::RelFileNode, backend: i32) -> RelKey {
    RelKey {
        spc: node.spcNode.into(),
        db: node.dbNode.into(),
        rel: node.relNode.into(),
        backend,
    }
}

fn find_locked(key: &RelKey) -> Option<TableRef> {
    let max = arena::ctl().max_tables;
    for id in 1..=max {
        let e = entry(id);
        if e.state.load(Ordering::Relaxed) == E_USED && e.key == *key {
            return Some(TableRef {
                id,
                gen: e.gen.load(Ordering::Relaxed),
            });
        }
    }
    None
}

pub fn lookup(key: &RelKey) -> Option<TableRef> {
    let _g = LwGuard::shared(&arena::ctl().dir_lock as *const _ as *mut _);
    find_locked(key)
}

/// Creates (or returns the existing) entry for `key`.
pub fn create(key: &RelKey, relid: u32) -> TableRef {
    let _g = LwGuard::exclusive(&arena::ctl().dir_lock as *const _ as *mut _);
    if let Some(t) = find_locked(key) {
        return t;
    }
    let max = arena::ctl().max_tables;
    for id in 1..=max {
        let e = entry(id);
        if e.state.load(Ordering::Relaxed) == E_EMPTY {
            e.key = *key;
            let gen = e.gen.load(Ordering::Relaxed).wrapping_add(1).max(1);
            e.gen.store(gen, Ordering::Relaxed);
            e.insert_hint.store(arena::NO_BLOCK, Ordering::Relaxed);
            e.nblocks.store(0, Ordering::Relaxed);
            e.relid.store(relid, Ordering::Relaxed);
            e.rows_inserted.store(0, Ordering::Relaxed);
            e.needs_truncate.store(0, Ordering::Relaxed);
            e.state.store(E_USED, Ordering::Release);
            return TableRef { id, gen };
        }
    }
    drop(_g);
    crate::ffi::error_hint(
        PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        "too many scoot tables",
        format!("Increase scoot.max_tables (now {max}) and restart the server."),
    );
}

/// Forgets an entry (its blocks must already be freed).
pub fn remove(t: TableRef) {
    let _g = LwGuard::exclusive(&arena::ctl().dir_lock as *const _ as *mut _);
    let e = entry(t.id);
    if e.state.load(Ordering::Relaxed) == E_USED && e.gen.load(Ordering::Relaxed) == t.gen {
        e.state.store(E_EMPTY, Ordering::Release);
    }
}

/// Points an entry at another relfilenode (ALTER TABLE SET TABLESPACE keeps the rows in place).
pub fn rekey(t: TableRef, key: &RelKey) {
    let _g = LwGuard::exclusive(&arena::ctl().dir_lock as *const _ as *mut _);
    entry(t.id).key = *key;
}

/// Every table currently in the directory.
pub fn all() -> Vec<(TableRef, RelKey, u32)> {
    let _g = LwGuard::shared(&arena::ctl().dir_lock as *const _ as *mut _);
    let mut v = Vec::new();
    for id in 1..=arena::ctl().max_tables {
        let e = entry(id);
        if e.state.load(Ordering::Relaxed) == E_USED {
            v.push((
                TableRef {
                    id,
                    gen: e.gen.load(Ordering::Relaxed),
                },
                e.key,
                e.relid.load(Ordering::Relaxed),
            ));
        }
    }
    v
}

/// Cached in `rel->rd_amcache` (palloc'd in CacheMemoryContext; the relcache frees it).
#[repr(C)]
struct AmCache {
    key: RelKey,
    t: TableRef,
}

/// Resolves a relation to its table entry. A relation unknown to this server incarnation lost
/// its rows in a restart: warn once and register it (empty).
pub fn resolve(rel: pg_sys::Relation) -> TableRef {
    crate::ensure_preloaded();
    arena::register_tranche();
    unsafe {
        let key = key_of_rel(rel);
        let c = (*rel).rd_amcache as *mut AmCache;
        if !c.is_null() && (*c).key == key && (*c).t.is_current() {
            check_not_stale(rel, (*c).t);
            return (*c).t;
        }
        let t = match lookup(&key) {
            Some(t) => t,
            None => {
                let t = create(&key, (*rel).rd_id.into());
                if (*(*rel).rd_rel).relhasindex {
                    t.entry().needs_truncate.store(1, Ordering::Release);
                }
                ereport!(
                    PgLogLevel::WARNING,
                    PgSqlErrorCode::ERRCODE_WARNING,
                    format!(
                        "scoot table \"{}\" lost its rows in a server restart",
                        ffi::rel_name(rel)
                    ),
                    "scoot keeps table contents in server memory only (durability is not implemented yet): a restart empties scoot tables, and CREATE DATABASE ... TEMPLATE does not copy their rows."
                );
                t
            }
        };
        let c = if c.is_null() {
            let p = pg_sys::MemoryContextAlloc(
                pg_sys::CacheMemoryContext,
                std::mem::size_of::<AmCache>(),
            ) as *mut AmCache;
            (*rel).rd_amcache = p as *mut std::ffi::c_void;
            p
        } else {
            c
        };
        (*c).key = key;
        (*c).t = t;
        check_not_stale(rel, t);
        t
    }
}

/// Refuses a table that lost its rows in a restart but still has index entries for them: those
/// entries point at row addresses new rows would reuse, so index scans could return wrong rows.
fn check_not_stale(rel: pg_sys::Relation, t: TableRef) {
    if t.entry().needs_truncate.load(Ordering::Acquire) != 0 {
        let name = unsafe { ffi::rel_name(rel) };
        crate::ffi::error_hint(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("scoot table \"{name}\" lost its rows in a server restart and its indexes still reference them"),
            format!("Run TRUNCATE {name}; to reset the table and its indexes (durability is not implemented yet)."),
        );
    }
}

/// Blocks owned by `t`, in arena order (= TID order).
pub fn blocks_of(t: TableRef) -> Vec<u32> {
    let owner = t.owner();
    let n = arena::nblocks();
    let mut v = Vec::new();
    for b in 0..n {
        if arena::block_desc(b).owner.load(Ordering::Relaxed) == owner {
            v.push(b);
        }
    }
    v
}
