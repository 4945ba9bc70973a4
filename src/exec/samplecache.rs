//! Planner samples shared by all backends (`scoot.planner_samples`).
//!
//! Two planner decisions read rows of a scoot table while a query is planned: expression
//! statistics (`exprstats.c`: the distinct values of `ascii(substr(c_state, 1, 1)) - 65` and the
//! like, up to 120,000 rows evaluated) and eager aggregation's group count (`agg.rs`, 3,000
//! random rows). Each backend keeps its results until the table's row count moves by a fifth,
//! but a new connection started from nothing: its first plan of CH-benCHmark Q10 took 45 ms
//! (heap's 4 ms), Q5 70-90 ms (heap's 15-27), paid again by every short-lived connection (a web
//! request, a BI tool's query, `psql -c`). The results are estimates of a table, not of a
//! session, so they live here too, in shared memory: a backend that has no result of its own
//! takes the one another backend sampled for about the same row count (within a fifth, the same
//! rule as its own cache) and samples only when there is none.
//!
//! An entry is keyed by database, relation file (a TRUNCATE or rewrite gives the table a new
//! one, and new samples), kind and a 128-bit hash of the sampled expression or key columns; it
//! holds the row count it was made for and up to four numbers. The table has [`ENTRIES`] slots
//! under one LWLock (taken only when a backend's own cache misses); when it is full the least
//! recently used entry goes. Without `shared_preload_libraries` (no shared memory) nothing is
//! shared and every backend samples for itself, as before.
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::{c_char, CStr};
use std::hash::{Hash, Hasher};

/// Slots of the shared table.
pub const ENTRIES: usize = 1024;

/// Entry kinds.
pub const KIND_EXPR: u32 = 1;
pub const KIND_GROUPS: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
struct Entry {
    /// 0: free
    kind: u32,
    db: u32,
    relid: u32,
    relfile: u32,
    key: [u64; 2],
    tuples: f64,
    vals: [f64; 4],
    /// last use (the table's clock), for replacement
    used: u64,
    /// times another lookup was answered from it
    hits: u64,
}

#[repr(C)]
struct Cache {
    lock: pg_sys::LWLock,
    clock: u64,
    entries: [Entry; ENTRIES],
}

static mut CACHE: *mut Cache = std::ptr::null_mut();
static mut PREV_SHMEM_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP: pg_sys::shmem_startup_hook_type = None;

#[pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST {
            prev();
        }
        pg_sys::RequestAddinShmemSpace(std::mem::size_of::<Cache>());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP {
            prev();
        }
        let size = std::mem::size_of::<Cache>();
        crate::ffi::shmem_init_struct(c"pg_scoot planner samples", size, |p, fresh| {
            let p = p as *mut Cache;
            if fresh {
                std::ptr::write_bytes(p as *mut u8, 0, size);
                pg_sys::LWLockInitialize(&mut (*p).lock, crate::storage::arena::ctl().tranche);
            }
            CACHE = p;
        });
    }
}

/// Asks for the shared table (from `_PG_init`, after the arena's hooks).
pub fn install() {
    unsafe {
        PREV_SHMEM_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(shmem_request);
        PREV_SHMEM_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
    }
}

/// 128-bit hash of a key text.
fn key_hash(key: &[u8]) -> [u64; 2] {
    let h = |seed: u8| {
        let mut s = std::collections::hash_map::DefaultHasher::new();
        seed.hash(&mut s);
        key.hash(&mut s);
        s.finish()
    };
    [h(0), h(1)]
}

/// Was a sample made for `made_for` rows good for a table of `tuples` rows (within a fifth)?
pub fn fresh(made_for: f64, tuples: f64) -> bool {
    (tuples - made_for).abs() <= 0.2 * made_for.max(1.0)
}

/// Identifies a relation in the table: (database, relation OID, relation file).
#[derive(Clone, Copy)]
pub struct RelId {
    pub db: u32,
    pub relid: u32,
    pub relfile: u32,
}

impl RelId {
    /// # Safety
    /// `rel` is an open relation.
    pub unsafe fn of(rel: pg_sys::Relation) -> RelId {
        unsafe {
            RelId {
                db: u32::from(pg_sys::MyDatabaseId),
                relid: u32::from((*rel).rd_id),
                relfile: u32::from((*rel).rd_node.relNode),
            }
        }
    }
}

fn with_cache<R>(f: impl FnOnce(&mut Cache) -> R) -> Option<R> {
    unsafe {
        if CACHE.is_null() {
            return None;
        }
        let c = &mut *CACHE;
        pg_sys::LWLockAcquire(&mut c.lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let r = f(c);
        pg_sys::LWLockRelease(&mut c.lock);
        Some(r)
    }
}

impl Cache {
    /// The slot holding `key` (hashed) of kind `kind` on `rel`.
    fn slot_of(&self, kind: u32, rel: RelId, key: [u64; 2]) -> Option<usize> {
        self.entries.iter().position(|e| {
            e.kind == kind && e.db == rel.db && e.relfile == rel.relfile && e.key == key
        })
    }
}

/// The numbers another backend sampled for `key` of kind `kind` on `rel` and the row count they
/// were made for, if that was about `tuples` rows.
pub fn get(kind: u32, rel: RelId, key: &[u8], tuples: f64) -> Option<(f64, [f64; 4])> {
    let k = key_hash(key);
    with_cache(|c| {
        c.clock += 1;
        let now = c.clock;
        let e = &mut c.entries[c.slot_of(kind, rel, k)?];
        if !fresh(e.tuples, tuples) {
            return None;
        }
        e.used = now;
        e.hits += 1;
        Some((e.tuples, e.vals))
    })
    .flatten()
}

/// Publishes what this backend sampled (replacing an older sample of the same key, else a free
/// or the least recently used slot).
pub fn put(kind: u32, rel: RelId, key: &[u8], tuples: f64, vals: [f64; 4]) {
    let k = key_hash(key);
    with_cache(|c| {
        c.clock += 1;
        let now = c.clock;
        let i = c
            .slot_of(kind, rel, k)
            .or_else(|| c.entries.iter().position(|e| e.kind == 0))
            .unwrap_or_else(|| (0..ENTRIES).min_by_key(|&i| c.entries[i].used).unwrap_or(0));
        c.entries[i] = Entry {
            kind,
            db: rel.db,
            relid: rel.relid,
            relfile: rel.relfile,
            key: k,
            tuples,
            vals,
            used: now,
            hits: 0,
        };
    });
}

/// For `exprstats.c`: the shared statistics of the expression `key` (its `expr_key`) over
/// `rel`: `made_for` gets the row count they were sampled at, `vals` (sampled ok 1/0, null
/// fraction, width, distinct).
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn scoot_sample_cache_get(
    kind: i32,
    rel: pg_sys::Relation,
    key: *const c_char,
    tuples: f64,
    made_for: *mut f64,
    vals: *mut f64,
) -> bool {
    crate::ffi::guard::boundary(|| unsafe {
        let key = CStr::from_ptr(key).to_bytes();
        match get(kind as u32, RelId::of(rel), key, tuples) {
            Some((t, v)) => {
                *made_for = t;
                std::ptr::copy_nonoverlapping(v.as_ptr(), vals, 4);
                true
            }
            None => false,
        }
    })
}

/// For `exprstats.c`: [`fresh`], the one rule for the backend's own samples and the shared ones.
#[unsafe(no_mangle)]
pub extern "C" fn scoot_sample_fresh(made_for: f64, tuples: f64) -> bool {
    fresh(made_for, tuples)
}

/// For `exprstats.c`: publishes the statistics this backend sampled.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn scoot_sample_cache_put(
    kind: i32,
    rel: pg_sys::Relation,
    key: *const c_char,
    tuples: f64,
    vals: *const f64,
) {
    crate::ffi::guard::boundary(|| unsafe {
        let key = CStr::from_ptr(key).to_bytes();
        let mut v = [0f64; 4];
        std::ptr::copy_nonoverlapping(vals, v.as_mut_ptr(), 4);
        put(kind as u32, RelId::of(rel), key, tuples, v);
    })
}

/// The entries of the current database, for `scoot.planner_samples`: (relation OID, kind,
/// rows sampled for, estimate (None: the sample gave none), hits).
pub fn entries() -> Vec<(u32, u32, f64, Option<f64>, u64)> {
    let db = unsafe { u32::from(pg_sys::MyDatabaseId) };
    with_cache(|c| {
        c.entries
            .iter()
            .filter(|e| e.kind != 0 && e.db == db)
            .map(|e| {
                // expression statistics: the distinct count (negative: a fraction of the rows;
                // none when its evaluation failed); a group count: negative when none
                let est = if e.kind == KIND_EXPR {
                    (e.vals[0] != 0.0 && e.vals[3] != 0.0).then_some(e.vals[3])
                } else {
                    (e.vals[0] >= 0.0).then_some(e.vals[0])
                };
                (e.relid, e.kind, e.tuples, est, e.hits)
            })
            .collect()
    })
    .unwrap_or_default()
}

/// Forgets the current database's entries (`scoot.planner_samples_reset()`).
pub fn reset() {
    let db = unsafe { u32::from(pg_sys::MyDatabaseId) };
    with_cache(|c| {
        for e in c.entries.iter_mut().filter(|e| e.db == db) {
            e.kind = 0;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_and_keys() {
        assert!(fresh(1000.0, 1200.0) && fresh(1000.0, 800.0));
        assert!(!fresh(1000.0, 1201.0) && !fresh(1000.0, 799.0));
        assert!(fresh(0.0, 0.2) && !fresh(0.0, 2.0));
        assert_eq!(key_hash(b"abc"), key_hash(b"abc"));
        assert_ne!(key_hash(b"abc"), key_hash(b"abd"));
        assert_ne!(key_hash(b"abc")[0], key_hash(b"abc")[1]);
    }
}
