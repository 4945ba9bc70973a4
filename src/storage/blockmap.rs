//! The block map: (table, table-local block number) -> arena block.
//!
//! Each table numbers its blocks 0, 1, 2, ... (TIDs are built from these local numbers, so every
//! table has its own TID address space starting at (0,1), independent of where its blocks sit in
//! the arena). The map is an open-addressing hash table in the control region (PostgreSQL shared
//! memory) with twice as many entries as the arena has blocks. Writers (block allocation and
//! release) hold the arena's allocation lock and bracket their change with a sequence counter;
//! readers take no lock: they probe and retry if the counter moved (a seqlock), so a TID lookup
//! costs a hash and one or two cache lines.
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

#[repr(C)]
pub struct MapEntry {
    /// `(table_id << 32) | local`, 0 when empty (table ids start at 1)
    key: AtomicU64,
    block: AtomicU32,
    _pad: u32,
}

pub struct BlockMap {
    entries: *const MapEntry,
    mask: usize,
    seq: &'static AtomicU64,
}

unsafe impl Sync for BlockMap {}

/// Entries needed for an arena of `nblocks` blocks (a power of two, at most half full).
pub fn capacity_for(nblocks: u32) -> usize {
    (nblocks as usize * 2).next_power_of_two().max(64)
}

pub fn bytes_for(nblocks: u32) -> usize {
    capacity_for(nblocks) * std::mem::size_of::<MapEntry>()
}

#[inline]
fn key(table_id: u32, local: u32) -> u64 {
    ((table_id as u64) << 32) | local as u64
}

impl BlockMap {
    /// # Safety
    /// `base` points at `bytes_for(nblocks)` bytes of shared memory that live as long as the
    /// server; `seq` is the counter that brackets writes.
    pub unsafe fn new(base: *mut u8, nblocks: u32, seq: &'static AtomicU64) -> BlockMap {
        BlockMap {
            entries: base as *const MapEntry,
            mask: capacity_for(nblocks) - 1,
            seq,
        }
    }

    /// Zeroes the table (postmaster start / crash restart).
    pub fn clear(&self) {
        for i in 0..=self.mask {
            let e = self.entry(i);
            e.key.store(0, Ordering::Relaxed);
            e.block.store(0, Ordering::Relaxed);
        }
    }

    #[inline]
    fn entry(&self, i: usize) -> &MapEntry {
        unsafe { &*self.entries.add(i & self.mask) }
    }

    #[inline]
    fn home(&self, k: u64) -> usize {
        (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & self.mask
    }

    /// The arena block holding local block `local` of table `table_id`, if any.
    #[inline]
    pub fn lookup(&self, table_id: u32, local: u32) -> Option<u32> {
        let k = key(table_id, local);
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut i = self.home(k);
            let mut found = None;
            loop {
                let e = self.entry(i);
                let ek = e.key.load(Ordering::Relaxed);
                if ek == 0 {
                    break;
                }
                if ek == k {
                    found = Some(e.block.load(Ordering::Relaxed));
                    break;
                }
                i += 1;
            }
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return found;
            }
        }
    }

    fn begin_write(&self) {
        self.seq.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::Release);
    }

    fn end_write(&self) {
        self.seq.fetch_add(1, Ordering::Release);
    }

    /// Adds a mapping. Caller holds the allocation lock; the key must not be present.
    pub fn insert(&self, table_id: u32, local: u32, block: u32) {
        let k = key(table_id, local);
        self.begin_write();
        let mut i = self.home(k);
        loop {
            let e = self.entry(i);
            if e.key.load(Ordering::Relaxed) == 0 {
                e.block.store(block, Ordering::Relaxed);
                e.key.store(k, Ordering::Relaxed);
                break;
            }
            i += 1;
        }
        self.end_write();
    }

    /// Removes a mapping (backward-shift deletion, no tombstones). Caller holds the allocation
    /// lock.
    pub fn remove(&self, table_id: u32, local: u32) {
        let k = key(table_id, local);
        let mut i = self.home(k);
        loop {
            let ek = self.entry(i).key.load(Ordering::Relaxed);
            if ek == 0 {
                return;
            }
            if ek == k {
                break;
            }
            i += 1;
        }
        self.begin_write();
        // shift later members of the cluster back into the hole where their probe allows it
        let mut hole = i;
        let mut j = i + 1;
        loop {
            let e = self.entry(j);
            let ek = e.key.load(Ordering::Relaxed);
            if ek == 0 {
                break;
            }
            let h = self.home(ek);
            // can the entry at j move to `hole`? yes if its home is not in (hole, j] cyclically
            let dist_home = j.wrapping_sub(h) & self.mask;
            let dist_hole = j.wrapping_sub(hole) & self.mask;
            if dist_home >= dist_hole {
                let dst = self.entry(hole);
                dst.block
                    .store(e.block.load(Ordering::Relaxed), Ordering::Relaxed);
                dst.key.store(ek, Ordering::Relaxed);
                hole = j;
            }
            j += 1;
        }
        let e = self.entry(hole);
        e.key.store(0, Ordering::Relaxed);
        e.block.store(0, Ordering::Relaxed);
        self.end_write();
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
    use pgrx::prelude::*;

    #[pg_test]
    fn map_insert_lookup_remove() {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = 64u32;
        let mut mem = vec![0u8; bytes_for(n)];
        let m = unsafe { BlockMap::new(mem.as_mut_ptr(), n, &SEQ) };
        m.clear();
        // many keys with colliding homes: several tables, dense locals
        let mut model = std::collections::HashMap::new();
        let mut next = 0u32;
        for round in 0..2000u32 {
            let t = 1 + round % 5;
            let l = (round * 7919) % 23;
            if let std::collections::hash_map::Entry::Vacant(e) = model.entry((t, l)) {
                if model_len_ok(next) {
                    m.insert(t, l, next);
                    e.insert(next);
                    next += 1;
                }
            } else {
                m.remove(t, l);
                model.remove(&(t, l));
            }
            for (&(t, l), &b) in &model {
                assert_eq!(m.lookup(t, l), Some(b), "round {round} table {t} local {l}");
            }
            assert_eq!(m.lookup(9, 9), None);
        }
        fn model_len_ok(_n: u32) -> bool {
            true
        }
        assert_eq!(SEQ.load(Ordering::Relaxed) % 2, 0);
    }
}
