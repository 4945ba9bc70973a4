//! The snapshot registry: the OLAP snapshots that exist, in PostgreSQL shared memory.
//!
//! Up to [`MAX_SNAPSHOTS`] slots. A slot is written only by the OLAP worker while it is
//! `CREATING`; once `LIVE` its contents are immutable until the worker frees it, which it does
//! only when no reader has it pinned (`pins`) and it is not the newest. Each slot holds:
//! - the MVCC snapshot captured at the instant the gate was closed (xmin, xmax, xip, subxip);
//! - the block catalog of that instant: for every arena block its owner, table-local number,
//!   high-water mark and all-visible mark (the block descriptors live outside the arena, so they
//!   are not preserved by page copy-on-write and must be captured);
//! - the table catalog: the generation of every table-directory entry, i.e. which relfilenodes
//!   existed.
//!
//! Readers pin a slot under the registry's spinlock (never held across anything that can fail);
//! the per-process `Backend` entry records the pin so that a parallel worker can find its
//! leader's snapshot and an exiting process can drop its pin.
use crate::storage::cow::MAX_SNAPSHOTS;
use pgrx::pg_sys;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

pub const NONE: u32 = u32::MAX;

// slot states
pub const S_FREE: u32 = 0;
pub const S_CREATING: u32 = 1;
pub const S_LIVE: u32 = 2;

// snapshot methods
pub const M_NONE: u32 = 0;
pub const M_UFFD: u32 = 1;
pub const M_SOFTWARE: u32 = 2;
pub const M_COPY: u32 = 3;

pub fn method_name(m: u32) -> &'static str {
    match m {
        M_UFFD => "uffd",
        M_SOFTWARE => "software",
        M_COPY => "copy",
        _ => "none",
    }
}

pub fn method_from_name(s: &str) -> Option<u32> {
    match s {
        "uffd" => Some(M_UFFD),
        "software" => Some(M_SOFTWARE),
        "copy" => Some(M_COPY),
        _ => None,
    }
}

#[repr(C)]
pub struct Slot {
    pub state: AtomicU32,
    pub pins: AtomicU32,
    pub id: AtomicU64,
    pub epoch: AtomicU32,
    pub method: AtomicU32,
    /// when the gate closed (TimestampTz)
    pub taken_at: AtomicI64,
    /// last time the worker confirmed nothing changed since (the snapshot is as good as new)
    pub confirmed_at: AtomicI64,
    pub xmin: AtomicU32,
    pub xmax: AtomicU32,
    pub xcnt: AtomicU32,
    pub subxcnt: AtomicU32,
    /// gate closed / whole creation, microseconds
    pub gate_us: AtomicU64,
    pub create_us: AtomicU64,
    /// blocks in the image and bytes write-protected (uffd) or copied (copy) at creation
    pub blocks: AtomicU32,
    pub writers_armed: AtomicU32,
    pub armed_bytes: AtomicU64,
    pub copied_bytes: AtomicU64,
}

/// One arena block as the snapshot saw it.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CatEntry {
    /// owner word (`(table id << 32) | generation`), 0: free
    pub owner: u64,
    pub local: u32,
    pub hwm: u32,
    pub vis_xid: u32,
    /// 1: every slot below `hwm` was a NORMAL row (`BlockDesc::dense`)
    pub dense: u32,
}

#[repr(C)]
pub struct Backend {
    /// slots pinned by this process (bit i: slot i)
    pub slots: AtomicU32,
    pub pid: AtomicI32,
    /// the image the process's running statement reads (NONE: none): its parallel workers
    /// read the same one
    pub cur_slot: AtomicU32,
    pub cur_id: AtomicU64,
}

#[repr(C)]
pub struct RegCtl {
    lock: AtomicU32,
    pub nblocks: u32,
    pub max_tables: u32,
    pub nprocs: u32,
    pub maxxip: u32,
    pub maxsubxip: u32,
    /// id the next snapshot will get (ids start at 1)
    pub next_id: AtomicU64,
    /// slot of the newest live snapshot (NONE: none)
    pub newest: AtomicU32,
    /// readers want a snapshot with id >= this
    pub requested: AtomicU64,
    pub worker_pid: AtomicI32,
    pub worker_procno: AtomicI32,
    /// method in use (M_*), set by the worker at start
    pub method: AtomicU32,
    /// why (NUL-terminated), written by the worker before `method`
    pub reason: [u8; 256],
    /// last time a reader wanted a snapshot (TimestampTz): the worker keeps taking them only
    /// while there are readers
    pub last_reader_at: AtomicI64,
    pub cv: pg_sys::ConditionVariable,
    // statistics
    pub created: AtomicU64,
    pub released: AtomicU64,
    pub abandoned: AtomicU64,
    pub gate_timeouts: AtomicU64,
    /// snapshots that could not be taken (pool too small for `copy`, every slot pinned)
    pub create_failures: AtomicU64,
    pub skipped_overflow: AtomicU64,
    pub create_us_total: AtomicU64,
    pub create_us_max: AtomicU64,
    pub gate_us_total: AtomicU64,
    pub gate_us_max: AtomicU64,
    pub started_at: AtomicI64,
    /// write faults resolved by the uffd handler, and their total handling time
    pub uffd_faults: AtomicU64,
    pub uffd_fault_ns: AtomicU64,
    pub slots: [Slot; MAX_SNAPSHOTS],
}

static mut REG: *mut RegCtl = std::ptr::null_mut();
static mut XIP: *mut u32 = std::ptr::null_mut();
static mut SUBXIP: *mut u32 = std::ptr::null_mut();
static mut CAT: *mut CatEntry = std::ptr::null_mut();
static mut TABLES: *mut u32 = std::ptr::null_mut();
static mut BACKENDS: *mut Backend = std::ptr::null_mut();

pub struct Sizes {
    pub nblocks: usize,
    pub max_tables: usize,
    pub nprocs: usize,
    pub maxxip: usize,
    pub maxsubxip: usize,
}

fn a64(x: usize) -> usize {
    x.next_multiple_of(64)
}

pub fn shmem_bytes(z: &Sizes) -> usize {
    a64(std::mem::size_of::<RegCtl>())
        + a64(MAX_SNAPSHOTS * z.maxxip * 4)
        + a64(MAX_SNAPSHOTS * z.maxsubxip * 4)
        + a64(MAX_SNAPSHOTS * z.nblocks * std::mem::size_of::<CatEntry>())
        + a64(MAX_SNAPSHOTS * z.max_tables * 4)
        + a64(z.nprocs * std::mem::size_of::<Backend>())
}

pub unsafe fn attach(base: *mut u8, init: bool, z: &Sizes) {
    unsafe {
        let mut off = a64(std::mem::size_of::<RegCtl>());
        REG = base as *mut RegCtl;
        XIP = base.add(off) as *mut u32;
        off += a64(MAX_SNAPSHOTS * z.maxxip * 4);
        SUBXIP = base.add(off) as *mut u32;
        off += a64(MAX_SNAPSHOTS * z.maxsubxip * 4);
        CAT = base.add(off) as *mut CatEntry;
        off += a64(MAX_SNAPSHOTS * z.nblocks * std::mem::size_of::<CatEntry>());
        TABLES = base.add(off) as *mut u32;
        off += a64(MAX_SNAPSHOTS * z.max_tables * 4);
        BACKENDS = base.add(off) as *mut Backend;
        if init {
            std::ptr::write_bytes(base, 0, shmem_bytes(z));
            let r = &mut *REG;
            r.nblocks = z.nblocks as u32;
            r.max_tables = z.max_tables as u32;
            r.nprocs = z.nprocs as u32;
            r.maxxip = z.maxxip as u32;
            r.maxsubxip = z.maxsubxip as u32;
            r.next_id.store(1, Ordering::Relaxed);
            r.newest.store(NONE, Ordering::Relaxed);
            r.worker_pid.store(0, Ordering::Relaxed);
            r.worker_procno.store(-1, Ordering::Relaxed);
            pg_sys::ConditionVariableInit(&mut r.cv);
            for i in 0..z.nprocs {
                (*BACKENDS.add(i)).cur_slot.store(NONE, Ordering::Relaxed);
            }
        }
    }
}

#[inline]
pub fn is_ready() -> bool {
    unsafe { !REG.is_null() }
}

#[inline]
pub fn reg() -> &'static RegCtl {
    unsafe { &*REG }
}

pub fn cv() -> *mut pg_sys::ConditionVariable {
    unsafe { &raw mut (*REG).cv }
}

#[inline]
pub fn slot(i: usize) -> &'static Slot {
    &reg().slots[i]
}

/// xip of slot `i` (the worker writes it while the slot is CREATING).
#[allow(clippy::mut_from_ref)]
pub fn xip(i: usize) -> &'static mut [u32] {
    let n = reg().maxxip as usize;
    unsafe { std::slice::from_raw_parts_mut(XIP.add(i * n), n) }
}

#[allow(clippy::mut_from_ref)]
pub fn subxip(i: usize) -> &'static mut [u32] {
    let n = reg().maxsubxip as usize;
    unsafe { std::slice::from_raw_parts_mut(SUBXIP.add(i * n), n) }
}

#[allow(clippy::mut_from_ref)]
pub fn catalog(i: usize) -> &'static mut [CatEntry] {
    let n = reg().nblocks as usize;
    unsafe { std::slice::from_raw_parts_mut(CAT.add(i * n), n) }
}

/// Table-directory generations of slot `i` (index: table id - 1; 0: no table).
#[allow(clippy::mut_from_ref)]
pub fn tables(i: usize) -> &'static mut [u32] {
    let n = reg().max_tables as usize;
    unsafe { std::slice::from_raw_parts_mut(TABLES.add(i * n), n) }
}

pub fn backend(procno: usize) -> Option<&'static Backend> {
    unsafe {
        if REG.is_null() || procno >= (*REG).nprocs as usize {
            return None;
        }
        Some(&*BACKENDS.add(procno))
    }
}

pub fn my_backend() -> Option<&'static Backend> {
    unsafe {
        if pg_sys::MyProc.is_null() {
            return None;
        }
        backend((*pg_sys::MyProc).pgprocno as usize)
    }
}

/// Spinlock over slot states and pins (held for a few instructions, never across a call that
/// can raise an error).
pub struct Guard;
impl Guard {
    pub fn lock() -> Guard {
        let l = &reg().lock;
        while l
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        Guard
    }
}
impl Drop for Guard {
    fn drop(&mut self) {
        reg().lock.store(0, Ordering::Release);
    }
}

/// Pins slot `i` for this process if it is still live with snapshot `id`.
pub fn pin(i: usize, id: u64) -> bool {
    let Some(me) = my_backend() else { return false };
    let _g = Guard::lock();
    let s = slot(i);
    if s.state.load(Ordering::Acquire) != S_LIVE || s.id.load(Ordering::Acquire) != id {
        return false;
    }
    let bit = 1u32 << i;
    if me.slots.load(Ordering::Relaxed) & bit == 0 {
        s.pins.fetch_add(1, Ordering::AcqRel);
        me.slots.fetch_or(bit, Ordering::AcqRel);
    }
    me.pid
        .store(unsafe { pg_sys::MyProcPid }, Ordering::Release);
    true
}

/// Drops this process's pin of slot `i`.
pub fn unpin(i: usize) {
    let Some(me) = my_backend() else { return };
    let bit = 1u32 << i;
    if me.slots.load(Ordering::Acquire) & bit == 0 {
        return;
    }
    let _g = Guard::lock();
    if me.slots.load(Ordering::Relaxed) & bit != 0 {
        slot(i).pins.fetch_sub(1, Ordering::AcqRel);
        me.slots.fetch_and(!bit, Ordering::AcqRel);
    }
}

/// Drops every pin of this process (process exit).
pub fn unpin_all() {
    for i in 0..MAX_SNAPSHOTS {
        unpin(i);
    }
    if let Some(me) = my_backend() {
        me.cur_slot.store(NONE, Ordering::Release);
    }
}

/// Frees slot `i` if nobody pins it (worker only). Returns whether it did.
pub fn free_if_unpinned(i: usize) -> bool {
    let _g = Guard::lock();
    let s = slot(i);
    if s.state.load(Ordering::Acquire) == S_LIVE && s.pins.load(Ordering::Acquire) == 0 {
        s.state.store(S_FREE, Ordering::Release);
        if reg().newest.load(Ordering::Relaxed) == i as u32 {
            reg().newest.store(NONE, Ordering::Release);
        }
        true
    } else {
        false
    }
}

/// The reason string the worker recorded with the method.
pub fn reason() -> String {
    let r = &reg().reason;
    let n = r.iter().position(|&b| b == 0).unwrap_or(r.len());
    String::from_utf8_lossy(&r[..n]).into_owned()
}

pub fn set_reason(s: &str) {
    unsafe {
        let r = &mut (*REG).reason;
        let b = s.as_bytes();
        let n = b.len().min(r.len() - 1);
        r[..n].copy_from_slice(&b[..n]);
        r[n] = 0;
    }
}

pub fn wake_worker() {
    unsafe {
        let p = reg().worker_procno.load(Ordering::Acquire);
        if p >= 0 && (p as u32) < (*pg_sys::ProcGlobal).allProcCount {
            pg_sys::SetLatch(&raw mut (*(*pg_sys::ProcGlobal).allProcs.add(p as usize)).procLatch);
        }
    }
}

pub fn update_max(a: &AtomicU64, v: u64) {
    a.fetch_max(v, Ordering::Relaxed);
}
