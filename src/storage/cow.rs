//! The write side of OLAP snapshots: *how a snapshot stays frozen while OLTP writes go on*.
//!
//! * **Write sections and the gate.** Every modification of arena memory happens inside a write
//!   section (entered before a block is locked exclusively, left after it is released). The OLAP
//!   worker closes the gate, waits until no write section is open, arms page preservation for a new
//!   snapshot epoch and reopens it: a snapshot is taken at an instant when no row change is half
//!   done. One flag per process, each on its own cache line, keeps entering cheap.
//! * **Page preservation.** After a snapshot with epoch `e` exists, the first write to an arena page
//!   saves the page's pre-image into a frame of the pre-image pool, tagged with the newest live epoch.
//!   Each page keeps a chain of saved versions, newest first; a snapshot `e` reads the oldest saved
//!   version tagged `>= e`, or the live page if there is none (the page has not changed since).
//!   Who saves depends on the method: the writer itself before writing (`software`, and any process
//!   not registered for userfaultfd), the OLAP worker's fault handler after the kernel trapped the
//!   write (`uffd`), or the worker for every page at snapshot time (`copy`).
//! * **Memory bound.** The pool has `scoot.snapshot_memory` worth of 4 kB frames. When it is
//!   exhausted the oldest live snapshot is abandoned (its readers fail with "snapshot too old") and
//!   the frames only it needed are reused, so a writer never waits for a reader.
//!
//! Everything here lives in PostgreSQL shared memory or in the pool memfd mapped by the postmaster,
//! uses only atomics (no PostgreSQL lock, no palloc) and may run on the OLAP worker's fault-handler
//! thread.
use crate::storage::arena;
use std::cell::Cell;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

pub const PAGE: usize = 4096;
/// Snapshots alive at once (each has its epoch registered here).
pub const MAX_SNAPSHOTS: usize = 8;
pub const NONE: u32 = u32::MAX;
const LOCKED: u32 = 0x8000_0000;

// epoch slot states
pub const EP_FREE: u32 = 0;
pub const EP_LIVE: u32 = 1;
/// given up (memory bound): readers get "snapshot too old", its frames are reusable
pub const EP_ABANDONED: u32 = 2;

#[repr(C)]
pub struct CowCtl {
    pub gate: AtomicU32,
    /// newest epoch of a live snapshot (0: none): writers preserve pages tagged below it
    pub live_epoch: AtomicU32,
    /// epoch of the newest snapshot ever taken
    pub last_epoch: AtomicU32,
    pool_lock: AtomicU32,
    free_top: AtomicU32,
    pub free_frames: AtomicU32,
    pub nframes: u32,
    pub npages: u32,
    pub nsections: u32,
    _pad: u32,
    /// epochs of the snapshot slots and their states
    pub slot_epoch: [AtomicU32; MAX_SNAPSHOTS],
    pub slot_state: [AtomicU32; MAX_SNAPSHOTS],
    /// xmin of each snapshot's MVCC snapshot (see `image_horizon`)
    pub slot_xmin: [AtomicU32; MAX_SNAPSHOTS],
    /// bumped by every write section: the worker sees whether anything changed since a snapshot
    pub changes: AtomicU64,
    /// epoch of the snapshot being created (its copied pages must survive a reclaim)
    pub pending: AtomicU32,
    // statistics
    pub saves: AtomicU64,
    pub save_ns: AtomicU64,
    pub abandoned_for_memory: AtomicU64,
    /// cost of a first write to a page after a snapshot, as the writer sees it, in quarter-octave
    /// buckets of nanoseconds: copying the pre-image itself (software) / waiting for the worker to resolve the
    /// write fault (uffd)
    pub hist_copy: [AtomicU64; HIST_BUCKETS],
    pub hist_fault: [AtomicU64; HIST_BUCKETS],
    /// first writes under kernel write-protection that the writer saved and then wrote through
    /// the arena's alias mapping (`before_write_block_via`), leaving the protection in place
    pub alias_writes: AtomicU64,
}

/// 4 buckets per power of two, up to 2^40 ns
pub const HIST_BUCKETS: usize = 160;

fn record(h: &[AtomicU64; HIST_BUCKETS], ns: u64) {
    let b = ((ns.max(1) as f64).log2() * 4.0) as usize;
    h[b.min(HIST_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
}

/// Zeroes the statistics counters and first-write histograms (`scoot.snapshot_stats_reset()`).
pub fn reset_stats() {
    let c = ctl();
    c.saves.store(0, Ordering::Relaxed);
    c.save_ns.store(0, Ordering::Relaxed);
    c.abandoned_for_memory.store(0, Ordering::Relaxed);
    c.alias_writes.store(0, Ordering::Relaxed);
    for a in c.hist_copy.iter().chain(c.hist_fault.iter()) {
        a.store(0, Ordering::Relaxed);
    }
}

/// (count, median, 99th percentile) in microseconds of a first-write histogram; a percentile is
/// the geometric middle of its bucket (within ~9%).
pub fn hist_summary(h: &[AtomicU64; HIST_BUCKETS]) -> (u64, f64, f64) {
    let v: Vec<u64> = h.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    let n: u64 = v.iter().sum();
    if n == 0 {
        return (0, 0.0, 0.0);
    }
    let q = |frac: f64| {
        let target = (n as f64 * frac).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, &c) in v.iter().enumerate() {
            acc += c;
            if acc >= target {
                return 2f64.powf((i as f64 + 0.5) / 4.0) / 1000.0;
            }
        }
        0.0
    };
    (n, q(0.5), q(0.99))
}

#[repr(C)]
pub struct Section {
    flag: AtomicU32,
    _pad0: u32,
    /// `(pid << 32) | epoch`: the OLAP worker write-protected this process's mapping of the hot
    /// blocks for snapshot `epoch` (`uffd` method). Tied to the pid so that a process reusing
    /// the PGPROC slot never inherits it.
    pub armed: AtomicU64,
    /// Set while the process reads scoot tables only from OLAP snapshots (and for the OLAP
    /// worker): its MVCC snapshots never read the live arena, so scoot's pruning horizon ignores
    /// its xmin (see `txn::horizon`).
    pub horizon_exempt: AtomicU32,
    _pad1: u32,
    _pad: [u64; 5],
}

#[repr(C)]
struct Frame {
    tag: AtomicU32,
    page: AtomicU32,
    next: AtomicU32,
    _pad: u32,
}

static mut CTL: *mut CowCtl = std::ptr::null_mut();
static mut SECTIONS: *const Section = std::ptr::null();
static mut PAGE_TAG: *const AtomicU32 = std::ptr::null();
static mut PAGE_HEAD: *const AtomicU32 = std::ptr::null();
static mut FRAMES: *const Frame = std::ptr::null();
static mut POOL: *mut u8 = std::ptr::null_mut();

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Called when this process first touches the arena's snapshot state (and by the `uffd`
/// registration): hook for the registration of this process's mapping with the OLAP worker.
pub static mut ON_FIRST_SECTION: Option<fn()> = None;

/// Set by the `uffd` method: how a writer resolves the kernel's trap of its own announced write
/// (see [`before_write`]) without a round trip to the OLAP worker's fault handler.
pub struct OwnTrap {
    /// Has this process already lifted its own write-protection of page `p` for epoch `live`?
    pub is_open: fn(p: u32, live: u32) -> bool,
    /// Lifts this process's write-protection of page `p` for epoch `live` (its pre-image is
    /// saved); false: not possible now (the write then traps into the worker's handler).
    pub lift: fn(p: u32, live: u32) -> bool,
}

/// The `uffd` method's [`OwnTrap`], when enabled (`scoot.uffd_writer_resolves`).
pub static mut OWN_TRAP: Option<fn() -> Option<&'static OwnTrap>> = None;
static mut FIRST_DONE: bool = false;

/// Bytes of shared memory for an arena of `npages` pages, `nframes` pool frames and `nsections`
/// processes.
pub fn shmem_bytes(npages: usize, nframes: usize, nsections: usize) -> usize {
    std::mem::size_of::<CowCtl>().next_multiple_of(64)
        + nsections * std::mem::size_of::<Section>()
        + 2 * npages * 4
        + nframes * std::mem::size_of::<Frame>()
        + 64
}

/// Attaches to (and with `init`, initialises) the shared state at `base`; `pool` is the frame
/// pool (mapped by the postmaster).
pub unsafe fn attach(
    base: *mut u8,
    init: bool,
    npages: usize,
    nframes: usize,
    nsections: usize,
    pool: *mut u8,
) {
    unsafe {
        let mut off = std::mem::size_of::<CowCtl>().next_multiple_of(64);
        CTL = base as *mut CowCtl;
        SECTIONS = base.add(off) as *const Section;
        off += nsections * std::mem::size_of::<Section>();
        PAGE_TAG = base.add(off) as *const AtomicU32;
        off += npages * 4;
        PAGE_HEAD = base.add(off) as *const AtomicU32;
        off += npages * 4;
        FRAMES = base.add(off) as *const Frame;
        POOL = pool;
        if init {
            std::ptr::write_bytes(base, 0, shmem_bytes(npages, nframes, nsections));
            let c = &mut *CTL;
            c.nframes = nframes as u32;
            c.npages = npages as u32;
            c.nsections = nsections as u32;
            for p in 0..npages {
                (*PAGE_HEAD.add(p)).store(NONE, Ordering::Relaxed);
            }
            c.free_top.store(NONE, Ordering::Relaxed);
            for f in (0..nframes as u32).rev() {
                let fr = &*FRAMES.add(f as usize);
                fr.next
                    .store(c.free_top.load(Ordering::Relaxed), Ordering::Relaxed);
                c.free_top.store(f, Ordering::Relaxed);
            }
            c.free_frames.store(nframes as u32, Ordering::Relaxed);
        }
    }
}

#[inline]
pub fn is_ready() -> bool {
    unsafe { !CTL.is_null() }
}

#[inline]
pub fn ctl() -> &'static CowCtl {
    unsafe { &*CTL }
}

#[inline]
fn page_tag(p: u32) -> &'static AtomicU32 {
    unsafe { &*PAGE_TAG.add(p as usize) }
}
#[inline]
fn page_head(p: u32) -> &'static AtomicU32 {
    unsafe { &*PAGE_HEAD.add(p as usize) }
}
#[inline]
fn frame(f: u32) -> &'static Frame {
    unsafe { &*FRAMES.add(f as usize) }
}
#[inline]
pub fn frame_ptr(f: u32) -> *mut u8 {
    unsafe { POOL.add(f as usize * PAGE) }
}

/// Does the kernel trap this process's writes to arena block `b` for the newest live snapshot
/// (the worker armed write-protection for both)? Then the worker's fault handler preserves the
/// pages and the writer need not.
#[inline]
fn kernel_traps(b: u32, live: u32) -> bool {
    let Some(s) = my_section() else { return false };
    let last = ctl().last_epoch.load(Ordering::Acquire);
    if last != live {
        return false;
    }
    let me = unsafe { pgrx::pg_sys::MyProcPid } as u32 as u64;
    s.armed.load(Ordering::Acquire) == (me << 32 | live as u64)
        && arena::block_desc(b).armed.load(Ordering::Acquire) == live
}

/// This process's section (for the worker: any process's, by PGPROC number).
pub fn section(procno: usize) -> Option<&'static Section> {
    unsafe {
        if CTL.is_null() || procno >= (*CTL).nsections as usize {
            return None;
        }
        Some(&*SECTIONS.add(procno))
    }
}

/// Marks this process exempt from scoot's pruning horizon (or not).
pub fn set_horizon_exempt(on: bool) {
    if let Some(s) = my_section() {
        s.horizon_exempt.store(on as u32, Ordering::SeqCst);
    }
}

/// Is the process with PGPROC number `procno` exempt from scoot's pruning horizon?
pub fn horizon_exempt(procno: usize) -> bool {
    section(procno).is_some_and(|s| s.horizon_exempt.load(Ordering::Acquire) != 0)
}

/// Oldest xmin of a live snapshot (0: none). Index scans of a snapshot image use the live
/// indexes, so an index entry may only go away (and its row's slot be reused) when the row is
/// dead to every live image too.
pub fn image_horizon() -> u32 {
    if !is_ready() {
        return 0;
    }
    let c = ctl();
    let mut h = 0u32;
    for i in 0..MAX_SNAPSHOTS {
        if c.slot_state[i].load(Ordering::Acquire) == EP_LIVE {
            let x = c.slot_xmin[i].load(Ordering::Relaxed);
            if h == 0 || (x.wrapping_sub(h) as i32) < 0 {
                h = x;
            }
        }
    }
    h
}

/// Oldest live epoch (0: no live snapshot).
pub fn oldest_live_epoch() -> u32 {
    live_epochs().into_iter().min().unwrap_or(0)
}

// ---------------------------------------------------------------- write sections and the gate

fn my_section() -> Option<&'static Section> {
    unsafe {
        if CTL.is_null() || pgrx::pg_sys::MyProc.is_null() {
            return None;
        }
        let n = (*pgrx::pg_sys::MyProc).pgprocno as usize;
        if n >= (*CTL).nsections as usize {
            return None;
        }
        let s = &*SECTIONS.add(n);
        if !FIRST_DONE {
            FIRST_DONE = true;
            // a previous owner of this PGPROC slot may have been armed: never inherit that
            s.armed.store(0, Ordering::Release);
            s.horizon_exempt.store(0, Ordering::Release);
            if let Some(f) = ON_FIRST_SECTION {
                f();
            }
        }
        Some(s)
    }
}

/// Enters a write section (waits while the gate is closed). Sections nest. Must not be called
/// while holding an LWLock another writer might wait for (enter first, then lock).
pub fn enter() {
    let d = DEPTH.with(|d| {
        let v = d.get();
        d.set(v + 1);
        v
    });
    if d > 0 {
        return;
    }
    let Some(s) = my_section() else { return };
    let c = ctl();
    loop {
        s.flag.store(1, Ordering::SeqCst);
        if c.gate.load(Ordering::SeqCst) == 0 {
            break;
        }
        s.flag.store(0, Ordering::SeqCst);
        while c.gate.load(Ordering::Acquire) != 0 {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
    c.changes.fetch_add(1, Ordering::Relaxed);
}

/// Leaves a write section.
pub fn leave() {
    let d = DEPTH.with(|d| {
        let v = d.get().saturating_sub(1);
        d.set(v);
        v
    });
    if d > 0 {
        return;
    }
    if let Some(s) = my_section() {
        s.flag.store(0, Ordering::Release);
    }
}

/// RAII write section.
pub struct Section_;
impl Section_ {
    #[inline]
    pub fn enter() -> Section_ {
        enter();
        Section_
    }
}
impl Drop for Section_ {
    #[inline]
    fn drop(&mut self) {
        leave();
    }
}

/// Closes the gate and waits (up to `timeout`) until no process is inside a write section.
/// Returns false (gate reopened) on timeout.
pub fn close_gate(timeout: std::time::Duration) -> bool {
    let c = ctl();
    c.gate.store(1, Ordering::SeqCst);
    let start = std::time::Instant::now();
    for i in 0..c.nsections as usize {
        let s = unsafe { &*SECTIONS.add(i) };
        while s.flag.load(Ordering::SeqCst) != 0 {
            if start.elapsed() > timeout {
                open_gate();
                return false;
            }
            std::hint::spin_loop();
            std::thread::yield_now();
        }
    }
    true
}

pub fn open_gate() {
    ctl().gate.store(0, Ordering::SeqCst);
}

// ---------------------------------------------------------------- epochs

/// Registers a new snapshot epoch in slot `i` (gate closed). Writers preserve pages for it from
/// the moment the gate reopens.
pub fn begin_epoch(i: usize, epoch: u32, xmin: u32) {
    let c = ctl();
    c.slot_epoch[i].store(epoch, Ordering::Relaxed);
    c.slot_xmin[i].store(xmin, Ordering::Relaxed);
    c.slot_state[i].store(EP_LIVE, Ordering::Release);
    c.last_epoch.store(epoch, Ordering::Release);
    recompute_live();
}

/// Ends slot `i`'s epoch (snapshot released or abandoned) and gives back the frames no live
/// snapshot needs any more.
pub fn end_epoch(i: usize, abandoned: bool) {
    let c = ctl();
    c.slot_state[i].store(
        if abandoned { EP_ABANDONED } else { EP_FREE },
        Ordering::Release,
    );
    recompute_live();
    reclaim();
}

fn recompute_live() {
    let c = ctl();
    let mut live = 0;
    for i in 0..MAX_SNAPSHOTS {
        if c.slot_state[i].load(Ordering::Acquire) == EP_LIVE {
            live = live.max(c.slot_epoch[i].load(Ordering::Relaxed));
        }
    }
    c.live_epoch.store(live, Ordering::Release);
}

fn live_epochs() -> Vec<u32> {
    let c = ctl();
    (0..MAX_SNAPSHOTS)
        .filter(|&i| c.slot_state[i].load(Ordering::Acquire) == EP_LIVE)
        .map(|i| c.slot_epoch[i].load(Ordering::Relaxed))
        .collect()
}

/// Marks `epoch` as being created (reclaim keeps the versions it copied).
pub fn set_pending(epoch: u32) {
    ctl().pending.store(epoch, Ordering::Release);
}

pub fn end_pending() {
    ctl().pending.store(0, Ordering::Release);
}

/// Is slot `i` still live (not abandoned)?
pub fn slot_live(i: usize, epoch: u32) -> bool {
    let c = ctl();
    c.slot_state[i].load(Ordering::Acquire) == EP_LIVE
        && c.slot_epoch[i].load(Ordering::Relaxed) == epoch
}

// ---------------------------------------------------------------- page locks and the pool

fn lock_page(p: u32) -> u32 {
    let t = page_tag(p);
    loop {
        let v = t.load(Ordering::Relaxed);
        if v & LOCKED == 0
            && t.compare_exchange_weak(v, v | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return v;
        }
        std::hint::spin_loop();
    }
}

fn unlock_page(p: u32, tag: u32) {
    page_tag(p).store(tag & !LOCKED, Ordering::Release);
}

fn lock_pool() {
    let l = &ctl().pool_lock;
    while l
        .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
}

fn unlock_pool() {
    ctl().pool_lock.store(0, Ordering::Release);
}

fn alloc_frame() -> Option<u32> {
    lock_pool();
    let c = ctl();
    let f = c.free_top.load(Ordering::Relaxed);
    if f != NONE {
        c.free_top
            .store(frame(f).next.load(Ordering::Relaxed), Ordering::Relaxed);
        c.free_frames.fetch_sub(1, Ordering::Relaxed);
    }
    unlock_pool();
    (f != NONE).then_some(f)
}

fn free_frame(f: u32) {
    lock_pool();
    let c = ctl();
    frame(f)
        .next
        .store(c.free_top.load(Ordering::Relaxed), Ordering::Relaxed);
    c.free_top.store(f, Ordering::Relaxed);
    c.free_frames.fetch_add(1, Ordering::Relaxed);
    unlock_pool();
}

/// Abandons the oldest live snapshot to free pool memory. False if there is none.
fn abandon_oldest() -> bool {
    let c = ctl();
    let mut oldest: Option<(usize, u32)> = None;
    for i in 0..MAX_SNAPSHOTS {
        if c.slot_state[i].load(Ordering::Acquire) == EP_LIVE {
            let e = c.slot_epoch[i].load(Ordering::Relaxed);
            if oldest.is_none_or(|(_, oe)| e < oe) {
                oldest = Some((i, e));
            }
        }
    }
    let Some((i, _)) = oldest else { return false };
    if c.slot_state[i]
        .compare_exchange(EP_LIVE, EP_ABANDONED, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
    {
        c.abandoned_for_memory.fetch_add(1, Ordering::Relaxed);
    }
    recompute_live();
    reclaim();
    // readers check abandonment after copying: the abandonment must be visible before any
    // write it allowed to skip preservation
    fence(Ordering::SeqCst);
    true
}

/// Gives back every saved page version no live snapshot reads any more.
pub fn reclaim() {
    let mut live = live_epochs();
    let pending = ctl().pending.load(Ordering::Acquire);
    if pending != 0 {
        live.push(pending);
    }
    let c = ctl();
    for p in 0..c.npages {
        if page_head(p).load(Ordering::Acquire) == NONE {
            continue;
        }
        let tag = lock_page(p);
        // chain is newest first: version i serves epochs in (tag of version i+1, tag of i]
        let mut kept: Vec<u32> = Vec::new();
        let mut cur = page_head(p).load(Ordering::Relaxed);
        let mut chain: Vec<u32> = Vec::new();
        while cur != NONE {
            chain.push(cur);
            cur = frame(cur).next.load(Ordering::Relaxed);
        }
        for (k, &f) in chain.iter().enumerate() {
            let hi = frame(f).tag.load(Ordering::Relaxed);
            let lo = chain
                .get(k + 1)
                .map(|&g| frame(g).tag.load(Ordering::Relaxed))
                .unwrap_or(0);
            if live.iter().any(|&e| e > lo && e <= hi) {
                kept.push(f);
            } else {
                free_frame(f);
            }
        }
        // relink the kept versions (still newest first)
        let mut next = NONE;
        for &f in kept.iter().rev() {
            frame(f).next.store(next, Ordering::Relaxed);
            next = f;
        }
        page_head(p).store(next, Ordering::Release);
        unlock_page(p, tag);
    }
}

/// Records in page `p`'s block that a version tagged `tag` was saved; the write that follows is
/// ordered after it (a reader that saw the write sees the tag).
fn mark_saved(p: u32, tag: u32) {
    let b = (p as usize * PAGE / arena::block_size()) as u32;
    arena::block_desc(b)
        .saved_tag
        .fetch_max(tag, Ordering::AcqRel);
    fence(Ordering::Release);
}

/// Saves page `p`'s pre-image for the live snapshots that need it (called before the first write
/// after a snapshot: by the writer, or by the worker's fault handler). Never blocks on a reader:
/// when the pool is full the oldest snapshot is abandoned.
pub fn preserve_page(p: u32) {
    preserve_page_by(p, false)
}

/// [`preserve_page`]; `writer`: called by the writing process itself (its cost is recorded).
fn preserve_page_by(p: u32, writer: bool) {
    let c = ctl();
    let live = c.live_epoch.load(Ordering::Acquire);
    if live == 0 || p >= c.npages {
        return;
    }
    if page_tag(p).load(Ordering::Acquire) & !LOCKED >= live {
        return;
    }
    let t0 = std::time::Instant::now();
    let tag = lock_page(p);
    let live = c.live_epoch.load(Ordering::Acquire);
    if tag >= live || live == 0 {
        unlock_page(p, tag);
        return;
    }
    let f = loop {
        if let Some(f) = alloc_frame() {
            break Some(f);
        }
        // the pool is full: give up the oldest snapshot (its readers get "snapshot too old")
        unlock_page(p, tag);
        let any = abandon_oldest();
        let tag2 = lock_page(p);
        let live2 = c.live_epoch.load(Ordering::Acquire);
        if tag2 >= live2 || live2 == 0 || !any {
            unlock_page(p, tag2);
            return;
        }
        if tag2 != tag {
            unlock_page(p, tag2);
            return preserve_page_by(p, writer);
        }
    };
    let live = c.live_epoch.load(Ordering::Acquire);
    if let Some(f) = f {
        push_version(p, f, live);
        c.saves.fetch_add(1, Ordering::Relaxed);
        let ns = t0.elapsed().as_nanos() as u64;
        c.save_ns.fetch_add(ns, Ordering::Relaxed);
        if writer {
            record(&c.hist_copy, ns);
        }
    }
    unlock_page(p, live);
}

/// The epoch of the newest live snapshot, if any (the writers' fast-path check: None, and a
/// write needs no pre-image).
#[inline]
pub fn live_epoch() -> Option<u32> {
    if !is_ready() {
        return None;
    }
    let live = ctl().live_epoch.load(Ordering::Acquire);
    (live != 0).then_some(live)
}

/// Before writing `len` bytes at `ptr` (inside the arena): saves the pre-images of the pages
/// touched for live snapshots, unless the block was allocated after all of them or the kernel
/// traps this process's writes to it.
#[inline]
pub fn before_write(ptr: *const u8, len: usize) {
    crate::storage::changes::note(ptr, len);
    let Some(live) = live_epoch() else {
        return;
    };
    before_write_slow(ptr, len, live);
}

/// [`before_write`] for a caller that then writes those `len` bytes, and only those, through the
/// returned address: `ptr`, or the same bytes in the arena's alias mapping (as
/// [`before_write_block_via`]).
#[inline]
pub fn before_write_via(ptr: *mut u8, len: usize) -> *mut u8 {
    crate::storage::changes::note(ptr, len);
    let Some(live) = live_epoch() else {
        return ptr;
    };
    before_write_via_slow(ptr, len, live)
}

#[cold]
fn before_write_via_slow(ptr: *mut u8, len: usize, live: u32) -> *mut u8 {
    match arena_range(ptr, len) {
        Some((blk, off)) if before_write_block_slow_via(blk, &[(off, len as u32)], live, true) => {
            arena::alias_of(blk.wrapping_add(off as usize)).unwrap_or(ptr)
        }
        _ => ptr,
    }
}

#[cold]
fn before_write_slow(ptr: *const u8, len: usize, live: u32) {
    if let Some((blk, off)) = arena_range(ptr, len) {
        before_write_block_slow(blk, &[(off, len as u32)], live);
    }
}

/// The arena block (primary mapping) holding the `len` bytes at `ptr` (either mapping) and their
/// offset in it; None for an empty range or memory outside the arena (a reader's private copy
/// of a snapshot block).
fn arena_range(ptr: *const u8, len: usize) -> Option<(*const u8, u32)> {
    let a = arena::unalias(ptr) as usize;
    let base = arena::base() as usize;
    if a < base || a >= base + arena::bytes() || len == 0 {
        return None;
    }
    let off = (a - base) % arena::block_size();
    Some(((a - off) as *const u8, off as u32))
}

/// Before writing the ranges `ranges` (offset, length) of the arena block at `blk`:
/// [`before_write`] of each, with the block's checks made once (a row write announces a cell
/// and a validity byte per column), for a caller that then writes those ranges, and only those,
/// through the returned block address: `blk` itself, or — where the kernel traps this process's
/// writes to the block and writers resolve their own traps — the block in the arena's alias
/// mapping ([`arena::alias_of`]): the pre-images are saved here and the protected mapping is left
/// protected, so the write takes no trap, no ioctl lifts it and no dirty-tracking fault follows
/// (each cost about a microsecond per page and snapshot: a TPC-C transaction writes some thirty
/// pages). A write the caller did not announce still traps.
#[inline]
pub fn before_write_block_via(blk: *mut u8, ranges: &[(u32, u32)]) -> *mut u8 {
    let blk = arena::unalias(blk) as *mut u8;
    crate::storage::changes::note_block(blk, ranges);
    let Some(live) = live_epoch() else {
        return blk;
    };
    if before_write_block_slow_via(blk, ranges, live, true) {
        arena::alias_of(blk).unwrap_or(blk)
    } else {
        blk
    }
}

#[cold]
fn before_write_block_slow(blk: *const u8, ranges: &[(u32, u32)], live: u32) {
    before_write_block_slow_via(blk, ranges, live, false);
}

/// The pre-images of `ranges` of block `blk` saved for snapshot `live`; true if (`via`) the
/// caller is to write through the alias mapping, which this then did not lift for.
#[cold]
fn before_write_block_slow_via(
    blk: *const u8,
    ranges: &[(u32, u32)],
    live: u32,
    via: bool,
) -> bool {
    let blk = arena::unalias(blk);
    let base = arena::base() as usize;
    let a = blk as usize;
    if a < base || a >= base + arena::bytes() {
        return false; // not arena memory (a reader's private copy of a snapshot block)
    }
    let b = ((a - base) / arena::block_size()) as u32;
    if arena::block_desc(b).born.load(Ordering::Acquire) >= live {
        return false;
    }
    let traps = kernel_traps(b, live);
    let alias = via
        && traps
        && arena::alias_of(blk).is_some()
        && unsafe { OWN_TRAP }.and_then(|f| f()).is_some();
    for &(off, len) in ranges {
        if len == 0 {
            continue;
        }
        let first = ((a - base + off as usize) / PAGE) as u32;
        let last = ((a - base + off as usize + len as usize - 1) / PAGE) as u32;
        if alias {
            save_pages_for_alias(first, last, live);
        } else {
            save_pages(first, last, live, traps);
        }
    }
    alias
}

/// Pages `first..=last` are about to be written through the alias mapping: their pre-images are
/// saved (as the fault handler would), the protection of the arena mapping stays.
fn save_pages_for_alias(first: u32, last: u32, live: u32) {
    for p in first..=last {
        if page_tag(p).load(Ordering::Acquire) & !LOCKED < live {
            let t0 = std::time::Instant::now();
            preserve_page_by(p, false);
            record(&ctl().hist_fault, t0.elapsed().as_nanos() as u64);
            ctl().alias_writes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Pages `first..=last` (of a block that live snapshots contain) are about to be written: their
/// pre-images are saved for snapshot `live` — by this process, or (`traps`: the kernel traps
/// this process's writes to the block) by the fault handler of the OLAP worker.
fn save_pages(first: u32, last: u32, live: u32, traps: bool) {
    if traps {
        if let Some(own) = unsafe { OWN_TRAP }.and_then(|f| f()) {
            // resolve the trap here: save the pre-image (as the fault handler would), then lift
            // this process's own protection of the page. Other processes' protection stays: their
            // first write to the page does the same. A write this path did not announce still
            // traps into the worker's handler.
            for p in first..=last {
                let saved = page_tag(p).load(Ordering::Acquire) & !LOCKED >= live;
                if saved && (own.is_open)(p, live) {
                    continue;
                }
                let t0 = std::time::Instant::now();
                if !saved {
                    preserve_page_by(p, false);
                }
                if !(own.lift)(p, live) {
                    touch_page(p);
                }
                record(&ctl().hist_fault, t0.elapsed().as_nanos() as u64);
            }
            return;
        }
        // the OLAP worker's fault handler saves the pages. Touch each one not saved yet, so that
        // the fault happens here, once, and its cost is measured.
        for p in first..=last {
            if page_tag(p).load(Ordering::Acquire) & !LOCKED < live {
                let t0 = std::time::Instant::now();
                touch_page(p);
                record(&ctl().hist_fault, t0.elapsed().as_nanos() as u64);
            }
        }
        return;
    }
    for p in first..=last {
        if page_tag(p).load(Ordering::Acquire) & !LOCKED < live {
            preserve_page_by(p, true);
        }
    }
}

/// An atomic no-op write to arena page `p`: traps if the page is write-protected for this
/// process. A compare-exchange of a value with itself always needs write access (x86 `lock
/// cmpxchg` writes back even when it fails); an idempotent `fetch_or(0)` would be lowered to a
/// fenced load and never fault.
fn touch_page(p: u32) {
    unsafe {
        let w = &*(arena::base().add(p as usize * PAGE) as *const AtomicU64);
        let v = w.load(Ordering::Relaxed);
        let _ = w.compare_exchange(v, v, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// The oldest saved version of page `p` tagged `>= epoch` (what snapshot `epoch` reads), or
/// `NONE`. The caller holds the page lock.
fn version_for(p: u32, epoch: u32) -> u32 {
    let mut cur = page_head(p).load(Ordering::Relaxed);
    let mut best = NONE;
    while cur != NONE {
        let fr = frame(cur);
        if fr.tag.load(Ordering::Relaxed) < epoch {
            break;
        }
        best = cur;
        cur = fr.next.load(Ordering::Relaxed);
    }
    best
}

/// Copies live page `p` into frame `f` and pushes it on the page's version chain as version
/// `tag`; records the save in the page's block. The caller holds the page lock.
fn push_version(p: u32, f: u32, tag: u32) {
    unsafe {
        std::ptr::copy_nonoverlapping(arena::base().add(p as usize * PAGE), frame_ptr(f), PAGE)
    };
    let fr = frame(f);
    fr.tag.store(tag, Ordering::Relaxed);
    fr.page.store(p, Ordering::Relaxed);
    fr.next
        .store(page_head(p).load(Ordering::Relaxed), Ordering::Relaxed);
    page_head(p).store(f, Ordering::Release);
    mark_saved(p, tag);
}

/// Copies page `p` as snapshot `epoch` sees it into `dst`: the oldest saved version tagged
/// `>= epoch`, or the live page. The live copy is taken first and replaced if a version was saved
/// meanwhile (a writer saves before it writes).
pub fn read_page(p: u32, epoch: u32, dst: *mut u8) {
    unsafe {
        std::ptr::copy_nonoverlapping(arena::base().add(p as usize * PAGE), dst, PAGE);
    }
    fence(Ordering::Acquire);
    if page_head(p).load(Ordering::Acquire) == NONE {
        return;
    }
    let tag = lock_page(p);
    let best = version_for(p, epoch);
    if best != NONE {
        unsafe { std::ptr::copy_nonoverlapping(frame_ptr(best), dst, PAGE) };
    }
    unlock_page(p, tag);
}

/// Saves every page in `[first, last]` as version `epoch` (the `copy` method, gate closed).
/// Returns false if the pool ran out.
pub fn copy_pages(first: u32, last: u32, epoch: u32) -> bool {
    for p in first..=last {
        let tag = lock_page(p);
        let Some(f) = alloc_frame() else {
            unlock_page(p, tag);
            return false;
        };
        push_version(p, f, epoch);
        unlock_page(p, epoch.max(tag));
    }
    true
}

/// Frames in use (pre-image pages kept for snapshots).
pub fn frames_in_use() -> u32 {
    let c = ctl();
    c.nframes - c.free_frames.load(Ordering::Relaxed)
}

/// Pages that snapshot `epoch` reads from a saved version (its share of the pool).
pub fn pages_for_epoch(epoch: u32) -> u64 {
    if !is_ready() || epoch == 0 {
        return 0;
    }
    let c = ctl();
    let mut n = 0u64;
    for p in 0..c.npages {
        if page_head(p).load(Ordering::Acquire) == NONE {
            continue;
        }
        let tag = lock_page(p);
        let found = version_for(p, epoch) != NONE;
        unlock_page(p, tag);
        n += found as u64;
    }
    n
}
