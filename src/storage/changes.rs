//! Which bytes of a block a modification changed: the input of the scoot WAL.
//!
//! Every write to the arena is announced by the modification layer (`cow::before_write`, which
//! calls [`note`]) before it happens. While a backend holds a block exclusively for a WAL-logged
//! table (`modify::Locked`), the announced ranges of that block are collected here; when the lock
//! is released, the registered logger (`wal` installs it: a layer above storage) writes one WAL
//! record with the ranges' *after* images and the block descriptor. Nothing is collected for
//! unlogged and temporary tables, nor for writes under a shared lock (hint bits, which heap does
//! not log either).
//!
//! `scoot.wal_check` (a developer setting) also copies the block when the capture starts and, at
//! the end, reports every changed byte that was not announced: the self check that the WAL
//! carries everything redo needs.
use crate::storage::arena;
use crate::storage::tabledir::TableRef;

/// One block being modified under an exclusive lock.
struct Capture {
    block: u32,
    ranges: Vec<(u32, u32)>,
    /// the range the latest write went to (see [`note_slow`])
    last: usize,
    /// `ranges` is sorted and merged in place when it grows to this many (see [`Capture::add`])
    compact_at: usize,
    /// `ranges[..sorted]` is in ascending order of offsets (the result of the latest merge)
    sorted: usize,
    before: Option<Vec<u8>>,
    /// rows written in this session as a new version of a row of the same block: (new slot,
    /// old slot), see [`note_copy`]
    copies: Vec<(u32, u32)>,
}

/// Ranges a capture collects before it first sorts and merges them.
const COMPACT_MIN: usize = 256;

impl Capture {
    /// Adds the changed range (off, len): extends the range the latest write went to, or the
    /// one after it (cyclically), when it continues or repeats it (a row's header, then a cell
    /// in each column region and its validity byte; the next row of a multi-insert continues
    /// each region in the same order); else appends it. Overlaps and neighbours that are not
    /// caught here are merged by [`merge`] when the capture ends, or in place whenever the list
    /// grows to `compact_at` (a bulk load of a block keeps a list of about two ranges per
    /// column instead of two per cell). Searching more of the list for each write cost more
    /// than sorting it (TPC-C writes whole rows into reused slots: nothing to extend). Once the
    /// list has been compacted, a write that misses both is looked up in the sorted part by
    /// binary search: after a compaction the list is in offset order, not in the order a row
    /// writes its ranges (its header and the zone map entries sit before the column regions),
    /// so without the search every later cell of a bulk load was appended again and the list
    /// sorted over and over (7% of a 9-column COPY).
    #[inline]
    fn add(&mut self, off: u32, len: u32) {
        let n = self.ranges.len();
        if n > 0 {
            let last = self.last.min(n - 1);
            let next = if last + 1 >= n { 0 } else { last + 1 };
            for i in [next, last] {
                if self.extend(i, off, len) {
                    return;
                }
            }
            if self.sorted > 0 {
                // the last sorted range that starts at or before `off` (extending a range keeps
                // the starts in order)
                let i = self.ranges[..self.sorted.min(n)].partition_point(|r| r.0 <= off);
                if i > 0 && self.extend(i - 1, off, len) {
                    return;
                }
            }
        }
        self.last = n;
        self.ranges.push((off, len));
        if self.ranges.len() >= self.compact_at {
            let r = merge(std::mem::take(&mut self.ranges));
            self.compact_at = (r.len() * 2).max(COMPACT_MIN);
            self.last = r.len().saturating_sub(1);
            self.sorted = r.len();
            self.ranges = r;
        }
    }

    /// Extends range `i` to cover `[off, off + len)` if `off` lies in it or just after it.
    #[inline]
    fn extend(&mut self, i: usize, off: u32, len: u32) -> bool {
        let r = &mut self.ranges[i];
        if off < r.0 || off > r.0 + r.1 {
            return false;
        }
        r.1 = (off + len).max(r.0 + r.1) - r.0;
        self.last = i;
        true
    }
}

static mut ACTIVE: Vec<Capture> = Vec::new();
static mut NACTIVE: usize = 0;

/// Set by `wal`: writes the record for a block whose exclusive lock is being released.
/// Arguments: table, local block, arena block, the changed ranges (offset, length; sorted,
/// disjoint) and the conflict xid (see [`note_conflict`]; 0: none).
pub static mut LOG_BLOCK: Option<fn(TableRef, u32, u32, &[(u32, u32)], u32)> = None;
/// Set by `wal`: a block of a table is freed (VACUUM released an empty block).
pub static mut LOG_FREE: Option<fn(TableRef, u32)> = None;
/// Set by `wal`: every block of a table is freed (TRUNCATE, DROP at commit, abort of a new
/// relfilenode).
pub static mut LOG_FREE_ALL: Option<fn(TableRef)> = None;
/// Set by `wal`: a table's rows moved to another relfilenode (ALTER TABLE SET TABLESPACE).
pub static mut LOG_REKEY: Option<
    fn(&crate::storage::tabledir::RelKey, &crate::storage::tabledir::RelKey),
> = None;
/// Set by `wal`: the variable-length area of a block was compacted (`modify::take_slot`): redo
/// repeats the compaction instead of reading every moved byte from the WAL. Arguments: table,
/// local block, the high-water mark the compaction used.
pub static mut LOG_COMPACT: Option<fn(TableRef, u32, u32)> = None;
/// Set by `wal`: is the developer self check on?
pub static mut CHECK: Option<fn() -> bool> = None;

/// Is anything logged at all (the logger is installed and we are not replaying)?
#[inline]
pub fn logging() -> bool {
    unsafe { (*(&raw const LOG_BLOCK)).is_some() && !REPLAYING }
}

/// Set while the startup process replays scoot WAL (redo writes the arena without logging).
pub static mut REPLAYING: bool = false;

/// The newest xid whose row versions the block being modified removes or freezes (0: none):
/// a hot standby cancels the queries whose snapshots still need those versions before it
/// replays the change (heap's `latestRemovedXid`). A backend holds at most one block
/// exclusively, so one value per process is enough.
static mut CONFLICT_XID: u32 = 0;

/// A change under the current exclusive lock removes (or freezes) a row version that `xid`
/// (a normal xid) wrote or deleted.
#[inline]
pub fn note_conflict(xid: u32) {
    if xid < 3 || unsafe { NACTIVE } == 0 {
        return;
    }
    unsafe {
        // xid comparison modulo 2^32, as TransactionIdFollows
        if CONFLICT_XID == 0 || (xid.wrapping_sub(CONFLICT_XID) as i32) > 0 {
            CONFLICT_XID = xid;
        }
    }
}

/// Takes the conflict xid noted since the last call (0: none).
pub fn take_conflict() -> u32 {
    unsafe { std::mem::replace(&mut *(&raw mut CONFLICT_XID), 0) }
}

/// The arena block whose captures are stashed instead of logged when its lock is released (see
/// [`defer`]; `u32::MAX`: none).
static mut DEFER_BLOCK: u32 = u32::MAX;
/// Stashed changes: (table, local block, arena block, ranges).
static mut STASH: Vec<(TableRef, u32, u32, Vec<(u32, u32)>)> = Vec::new();

/// From now until [`undefer`], the changes made under exclusive locks of arena block `b` are
/// not logged when the lock is released but kept, and go into the WAL record of the next
/// exclusive lock of `b` by this backend. An UPDATE marks its old version, places the new one
/// (often in the same block) and then links the old version to it: three lock sessions on the
/// old version's block, one WAL record. Only for changes that nobody else depends on before
/// that record is written: the old version's xmax, set by a transaction that has not
/// committed (a crash before the record loses only that uncommitted mark; a checkpoint image
/// that holds it is followed by the record that repeats it).
pub fn defer(b: u32) {
    unsafe { DEFER_BLOCK = b }
}

/// Ends [`defer`]: the next exclusive lock of the block logs what was kept.
pub fn undefer() {
    unsafe { DEFER_BLOCK = u32::MAX }
}

/// Are the changes of arena block `b` being deferred?
#[inline]
pub fn deferring(b: u32) -> bool {
    unsafe { DEFER_BLOCK == b }
}

/// Keeps the changed `ranges` of a deferred block (its lock is being released).
pub fn stash(t: TableRef, lb: u32, b: u32, ranges: Vec<(u32, u32)>) {
    unsafe {
        let st = &mut *(&raw mut STASH);
        if let Some(e) = st.iter_mut().find(|e| e.2 == b) {
            e.3.extend_from_slice(&ranges);
        } else {
            st.push((t, lb, b, ranges));
        }
    }
}

/// The blocks with kept changes: (table, local block, arena block).
pub fn stashed() -> Vec<(TableRef, u32, u32)> {
    unsafe {
        (*(&raw const STASH))
            .iter()
            .map(|e| (e.0, e.1, e.2))
            .collect()
    }
}

/// Forgets the kept changes of arena block `b` (the block is gone).
pub fn drop_stash(b: u32) {
    unsafe { (*(&raw mut STASH)).retain(|e| e.2 != b) }
}

/// Starts collecting the changes of arena block `b` (with those kept for it, see [`defer`]).
pub fn begin(b: u32) {
    unsafe {
        let st = &mut *(&raw mut STASH);
        let kept = match st.iter().position(|e| e.2 == b) {
            Some(i) => st.swap_remove(i).3,
            None => (*(&raw mut POOL)).pop().unwrap_or_default(),
        };
        let active = &mut *(&raw mut ACTIVE);
        let before = if CHECK.map(|f| f()).unwrap_or(false) {
            let p = arena::block_ptr(b);
            Some(std::slice::from_raw_parts(p, arena::block_size()).to_vec())
        } else {
            None
        };
        active.push(Capture {
            block: b,
            last: kept.len(),
            compact_at: (kept.len() * 2).max(COMPACT_MIN),
            sorted: if kept.is_sorted() { kept.len() } else { 0 },
            ranges: kept,
            before,
            copies: Vec::new(),
        });
        NACTIVE = active.len();
    }
}

/// An announced write of `len` bytes at `ptr`.
#[inline]
pub fn note(ptr: *const u8, len: usize) {
    if unsafe { NACTIVE } == 0 || len == 0 {
        return;
    }
    note_slow(ptr, len);
}

#[cold]
fn note_slow(ptr: *const u8, len: usize) {
    let ptr = arena::unalias(ptr);
    let base = arena::base() as usize;
    let a = ptr as usize;
    if a < base || a >= base + arena::bytes() {
        return;
    }
    let bs = arena::block_size();
    let b = ((a - base) / bs) as u32;
    let off = ((a - base) % bs) as u32;
    let len = len.min(bs - off as usize) as u32;
    unsafe {
        let active = &mut *(&raw mut ACTIVE);
        if let Some(c) = active.iter_mut().rev().find(|c| c.block == b) {
            c.add(off, len);
        }
    }
}

/// Announced writes of the ranges `ranges` (offset, length) of the arena block at `blk` (one
/// row's cells, validity bytes and payloads: [`note`] once per block, not once per range).
#[inline]
pub fn note_block(blk: *const u8, ranges: &[(u32, u32)]) {
    if unsafe { NACTIVE } == 0 {
        return;
    }
    note_block_slow(blk, ranges);
}

#[cold]
fn note_block_slow(blk: *const u8, ranges: &[(u32, u32)]) {
    let blk = arena::unalias(blk);
    let base = arena::base() as usize;
    let a = blk as usize;
    let bs = arena::block_size();
    if a < base || a >= base + arena::bytes() {
        return;
    }
    let b = ((a - base) / bs) as u32;
    unsafe {
        let active = &mut *(&raw mut ACTIVE);
        if let Some(c) = active.iter_mut().rev().find(|c| c.block == b) {
            for &(off, len) in ranges {
                if len > 0 && (off as usize) < bs {
                    c.add(off, len.min(bs as u32 - off));
                }
            }
        }
    }
}

/// Ends the capture of arena block `b`: the changed ranges, sorted and merged, and (with the
/// self check) the unannounced changed byte ranges.
pub fn end(b: u32) -> (Vec<(u32, u32)>, Vec<(u32, u32)>) {
    unsafe {
        let active = &mut *(&raw mut ACTIVE);
        let Some(i) = active.iter().rposition(|c| c.block == b) else {
            return (Vec::new(), Vec::new());
        };
        let c = active.remove(i);
        NACTIVE = active.len();
        ENDED_COPIES = (b, c.copies);
        let ranges = merge(c.ranges);
        let mut missed = Vec::new();
        if let Some(before) = c.before {
            let now = std::slice::from_raw_parts(arena::block_ptr(b), arena::block_size());
            missed = unannounced(&before, now, &ranges);
        }
        (ranges, missed)
    }
}

/// The copy hints of the capture [`end`] or [`cut`] ended last: (arena block, (new slot, old
/// slot) pairs). Every record of changed ranges is written right after one of them.
static mut ENDED_COPIES: (u32, Vec<(u32, u32)>) = (u32::MAX, Vec::new());

/// Row `new_slot` of arena block `b`, written under the current exclusive lock of `b`, is the
/// new version of row `old_slot` of the same block (an UPDATE). The logger may then describe
/// the new row's bytes that equal the old version's as copies of them instead of carrying them
/// (a customer row's 500-byte `c_data` that an UPDATE of its balance repeats): redo copies
/// them within the block. Only a hint: without it the bytes are logged as they are.
pub fn note_copy(b: u32, new_slot: u32, old_slot: u32) {
    if unsafe { NACTIVE } == 0 || new_slot == old_slot {
        return;
    }
    unsafe {
        let active = &mut *(&raw mut ACTIVE);
        if let Some(c) = active.iter_mut().rev().find(|c| c.block == b) {
            c.copies.push((new_slot, old_slot));
        }
    }
}

/// Takes the copy hints of the capture of arena block `b` that ended last (see [`note_copy`]);
/// empty if the last ended capture was another block's.
pub fn take_copies(b: u32) -> Vec<(u32, u32)> {
    unsafe {
        let e = &mut *(&raw mut ENDED_COPIES);
        if e.0 != b {
            return Vec::new();
        }
        e.0 = u32::MAX;
        std::mem::take(&mut e.1)
    }
}

/// Takes the ranges collected so far for arena block `b` (sorted and merged) and goes on
/// collecting from nothing: the caller logs them now, before a change that is logged as an
/// operation rather than as bytes (see [`LOG_COMPACT`]).
pub fn cut(b: u32) -> Vec<(u32, u32)> {
    unsafe {
        let active = &mut *(&raw mut ACTIVE);
        match active.iter_mut().rposition(|c| c.block == b) {
            Some(i) => {
                let c = &mut active[i];
                (c.last, c.sorted, c.compact_at) = (0, 0, COMPACT_MIN);
                ENDED_COPIES = (b, std::mem::take(&mut c.copies));
                merge(std::mem::take(&mut c.ranges))
            }
            None => Vec::new(),
        }
    }
}

/// Runs `f` with every announced write left out of the captures (the writes of a change that
/// is logged as an operation); `cow` still preserves the pre-images for snapshots. With the
/// self check, the block's reference copy is taken again afterwards: what `f` changed is
/// accounted for by the operation's record.
pub fn unnoted<R>(b: u32, f: impl FnOnce() -> R) -> R {
    let n = unsafe { std::mem::replace(&mut *(&raw mut NACTIVE), 0) };
    let r = f();
    unsafe {
        NACTIVE = n;
        let active = &mut *(&raw mut ACTIVE);
        if let Some(c) = active.iter_mut().rev().find(|c| c.block == b) {
            if let Some(before) = c.before.as_mut() {
                let now = std::slice::from_raw_parts(arena::block_ptr(b), arena::block_size());
                before.copy_from_slice(now);
            }
        }
    }
    r
}

/// Is the developer self check on?
pub fn checking() -> bool {
    unsafe { CHECK.map(|f| f()).unwrap_or(false) }
}

/// Forgets every capture (error recovery: the locks are being released by the abort).
pub fn reset() {
    unsafe {
        (*(&raw mut ACTIVE)).clear();
        NACTIVE = 0;
        CONFLICT_XID = 0;
        DEFER_BLOCK = u32::MAX;
        ENDED_COPIES = (u32::MAX, Vec::new());
    }
}

/// Range vectors handed back by [`recycle`], reused by [`begin`]: a row write announces a range
/// per column, and growing a fresh vector for every lock session showed in TPC-C's profile.
static mut POOL: Vec<Vec<(u32, u32)>> = Vec::new();

/// Runs `f` on the active capture of arena block `b` (tests).
#[cfg(any(test, feature = "pg_test"))]
fn active_capture_for_test<R>(b: u32, f: impl FnOnce(&mut Capture) -> R) -> R {
    unsafe {
        let active = &mut *(&raw mut ACTIVE);
        let i = active.iter().rposition(|c| c.block == b).expect("no capture");
        f(&mut active[i])
    }
}

/// Gives a range vector (from [`end`]) back for reuse once its record is written.
pub fn recycle(mut v: Vec<(u32, u32)>) {
    v.clear();
    unsafe {
        let pool = &mut *(&raw mut POOL);
        if pool.len() < 8 && v.capacity() <= 4096 {
            pool.push(v);
        }
    }
}

/// Sorts and merges overlapping or adjacent ranges, in place (a row's columns are usually
/// announced in order: no sort then).
pub fn merge(mut r: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    if !r.is_sorted() {
        // stable sort: it merges the runs it finds (a capture is a few ascending runs: a row
        // header, a row's cells, its payloads, a zone map entry), where sort_unstable does not
        r.sort();
    }
    let mut w = 0usize;
    for i in 0..r.len() {
        let (o, l) = r[i];
        if w > 0 {
            let last = &mut r[w - 1];
            if o <= last.0 + last.1 {
                let end = (o + l).max(last.0 + last.1);
                last.1 = end - last.0;
                continue;
            }
        }
        r[w] = (o, l);
        w += 1;
    }
    r.truncate(w);
    r
}

/// Byte ranges that differ between `a` and `b` outside `covered`.
pub fn unannounced(a: &[u8], b: &[u8], covered: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut i = 0usize;
    let mut ci = 0usize;
    let n = a.len().min(b.len());
    while i < n {
        while ci < covered.len() && (covered[ci].0 + covered[ci].1) as usize <= i {
            ci += 1;
        }
        if ci < covered.len() && covered[ci].0 as usize <= i {
            i = (covered[ci].0 + covered[ci].1) as usize;
            continue;
        }
        let stop = if ci < covered.len() {
            covered[ci].0 as usize
        } else {
            n
        };
        // compare [i, stop) in 8-byte steps
        let mut j = i;
        while j < stop {
            if a[j] != b[j] {
                let s = j;
                while j < stop && a[j] != b[j] {
                    j += 1;
                }
                out.push((s as u32, (j - s) as u32));
            } else {
                j += 1;
            }
        }
        i = stop;
    }
    out
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// A capture of no range yet (of arena block 0), outside the active list.
    fn empty_capture() -> super::Capture {
        super::Capture {
            block: 0,
            ranges: Vec::new(),
            last: 0,
            compact_at: super::COMPACT_MIN,
            sorted: 0,
            before: None,
            copies: Vec::new(),
        }
    }

    #[pg_test]
    fn merge_sorts_and_coalesces_in_place() {
        use super::merge;
        assert_eq!(merge(vec![]), vec![]);
        // in order, adjacent and overlapping
        assert_eq!(
            merge(vec![(0, 4), (4, 4), (6, 4), (20, 2)]),
            vec![(0, 10), (20, 2)]
        );
        // out of order, contained, duplicated
        assert_eq!(
            merge(vec![(100, 8), (0, 16), (4, 2), (100, 8), (16, 1), (50, 0)]),
            vec![(0, 17), (50, 0), (100, 8)]
        );
        assert_eq!(merge(vec![(8, 8), (0, 8)]), vec![(0, 16)]);
    }

    /// A capture's ranges, however they were added (extending the latest ones, appended, or
    /// compacted in place on the way), merge to exactly the bytes written: a pseudo-random mix
    /// of row-like writes (cells of increasing slots in a few regions, repeated bytes, scattered
    /// writes) checked against a byte map, with the compaction threshold crossed many times.
    #[pg_test]
    fn capture_add_covers_exactly_the_written_bytes() {
        use super::merge;
        let size = 1 << 16;
        let mut c = empty_capture();
        let mut written = vec![false; size];
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut compactions = 0;
        for row in 0..3000u32 {
            for region in 0..6u32 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (off, len) = match x % 4 {
                    // the next cell of the region (a multi-insert)
                    0 | 1 => (region * 8192 + row * 2 % 8000, 2),
                    // the region's validity byte
                    2 => (region * 8192 + 8000 + row / 8 % 150, 1),
                    // anywhere (a reused slot)
                    _ => (
                        (x >> 8) as u32 % (size as u32 - 64),
                        1 + (x >> 40) as u32 % 40,
                    ),
                };
                let before = c.ranges.len();
                c.add(off, len);
                if c.ranges.len() < before {
                    compactions += 1;
                }
                for b in off..off + len {
                    written[b as usize] = true;
                }
            }
        }
        assert!(
            compactions > 3,
            "the list was compacted {compactions} times"
        );
        let got = merge(std::mem::take(&mut c.ranges));
        let mut want = Vec::new();
        let mut i = 0;
        while i < size {
            if written[i] {
                let s = i;
                while i < size && written[i] {
                    i += 1;
                }
                want.push((s as u32, (i - s) as u32));
            } else {
                i += 1;
            }
        }
        assert_eq!(got, want);
    }

    /// A bulk load's pattern (each row: a validity byte and a cell in each of 9 column regions,
    /// then its header near the block's start; now and then a zone map entry, also near the
    /// start) stays a short list: after the first compaction puts the list in offset order, the
    /// cells still extend their column's range (found by binary search) instead of being appended
    /// one by one and sorted again and again. And the ranges are exactly the bytes written.
    #[pg_test]
    fn capture_of_a_bulk_load_stays_short() {
        use super::{merge, Capture, COMPACT_MIN};
        let mut c = empty_capture();
        let (rows, cols) = (12_000u32, 9u32);
        let region = |col: u32| 200_000 + col * 100_000;
        let (mut compactions, mut longest) = (0, 0);
        let mut add = |c: &mut Capture, off: u32, len: u32| {
            let before = c.ranges.len();
            c.add(off, len);
            if c.ranges.len() < before {
                compactions += 1;
            }
            longest = longest.max(c.ranges.len());
        };
        for row in 0..rows {
            for col in 0..cols {
                add(&mut c, region(col) + row / 8, 1);
                add(&mut c, region(col) + 2_000 + row * 8, 8);
                if row % 97 == col {
                    add(&mut c, 1_000 + col * 16, 16);
                }
            }
            add(&mut c, 10_000 + row * 16, 16);
        }
        assert!(
            compactions <= 1 && longest <= COMPACT_MIN,
            "{compactions} compactions, up to {longest} ranges"
        );
        let mut want: Vec<(u32, u32)> = (0..cols)
            .flat_map(|col| {
                [
                    (region(col), rows.div_ceil(8)),
                    (region(col) + 2_000, rows * 8),
                    (1_000 + col * 16, 16),
                ]
            })
            .collect();
        want.push((10_000, rows * 16));
        assert_eq!(merge(std::mem::take(&mut c.ranges)), merge(want));
    }

    /// `cut` (a change logged as an operation) empties a capture that had been compacted: the
    /// writes after it start a new list (the sorted part of the old one is gone, not searched).
    #[pg_test]
    fn capture_cut_after_a_compaction() {
        use super::{active_capture_for_test, begin, cut, end, COMPACT_MIN};
        begin(7);
        for k in 0..(COMPACT_MIN as u32 + 10) {
            active_capture_for_test(7, |c| c.add(k * 4, 1));
        }
        assert!(active_capture_for_test(7, |c| c.sorted) > 0);
        assert_eq!(cut(7).len(), COMPACT_MIN + 10);
        for k in 0..3u32 {
            active_capture_for_test(7, |c| c.add(1_000_000 + k * 4, 1));
        }
        let (ranges, _) = end(7);
        assert_eq!(ranges, vec![(1_000_000, 1), (1_000_004, 1), (1_000_008, 1)]);
    }
}
