//! Which statements read an OLAP snapshot, and the executor glue that makes them do so.
//!
//! With `scoot.olap = on`, a statement reads a snapshot image when it is a plain `SELECT`
//! (no `FOR UPDATE/SHARE`, no data-modifying CTE) over at least one scoot table, and
//! - it runs in a transaction declared `READ ONLY`, at `READ COMMITTED` (a fresh image per
//!   statement) or `REPEATABLE READ` (one image for the whole transaction); or
//! - it is a single-statement (implicit) transaction, which then runs as a read-only
//!   transaction: a function that tries to write fails with PostgreSQL's read-only error.
//!
//! Everything else (statements of read-write transaction blocks, writes, `SERIALIZABLE`
//! transactions, whose predicate locks must see live data) reads live MVCC data: a snapshot
//! read never feeds a write.
//!
//! The chosen image is at most `scoot.snapshot_max_age` old (or confirmed unchanged since by the
//! worker), newer than the session's last commit (read-your-writes), and contains every scoot
//! table the statement names; otherwise the session asks the worker for a fresh one and waits.
//! The image's MVCC snapshot *replaces the statement's snapshot*, so heap tables in the same
//! statement are read as of the same instant, nested queries of functions see it, and parallel
//! workers receive it (and pin the image their leader runs on). Scans find the image from the
//! snapshot they are given (`image_for`).
//!
//! A transaction that reads images exempts its backend from scoot's pruning horizon
//! (`txn::horizon`): its own xmin no longer holds back the pruning of the live arena.
use crate::guc;
use crate::snapshot::image::Image;
use crate::snapshot::registry;
use crate::storage::cow;
use crate::storage::tabledir::{self, TableRef};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// no scoot read yet in this transaction
    None,
    /// scoot tables are read from images only (the backend is exempt from scoot's horizon)
    Image,
    /// scoot tables were read live in this transaction: images may still be used per
    /// statement, but the backend stays under the horizon
    LiveSeen,
}

struct XactState {
    mode: Mode,
    /// REPEATABLE READ: the transaction's image
    xact_image: Option<Rc<Image>>,
    /// statement snapshot (pointer) -> image, with a use count
    by_snap: HashMap<usize, (Rc<Image>, u32)>,
    /// running executors that read an image: (QueryDesc, its snapshot key)
    active: Vec<(usize, usize)>,
}

thread_local! {
    static XACT: RefCell<XactState> = RefCell::new(XactState {
        mode: Mode::None,
        xact_image: None,
        by_snap: HashMap::new(),
        active: Vec::new(),
    });
    /// `next_id` of the registry when this session's last writing transaction committed:
    /// images with a smaller id may not contain its writes
    static COMMIT_MARK: Cell<u64> = const { Cell::new(0) };
    /// for EXPLAIN: the image the last top-level statement read (id, method, age ms, tables)
    static LAST_EXPLAINED: RefCell<Option<(u64, u32, f64, Vec<String>)>> = const { RefCell::new(None) };
    static WARNED_NO_WORKER: Cell<bool> = const { Cell::new(false) };
    /// decisions of ExecutorStart hooks between their `before` and `after` halves
    static PENDING: RefCell<Vec<Option<(Rc<Image>, Vec<String>)>>> = const { RefCell::new(Vec::new()) };
}

static mut IS_SCOOT: fn(pg_sys::Relation) -> bool = |_| false;

unsafe extern "C-unwind" {
    /// src/ffi/shim.c: the executor and EXPLAIN hooks are C and call the functions below
    fn scoot_install_executor_hooks();
}

pub unsafe fn install_hooks(is_scoot: fn(pg_sys::Relation) -> bool) {
    unsafe {
        IS_SCOOT = is_scoot;
        scoot_install_executor_hooks();
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::on_shmem_exit(Some(on_exit), pg_sys::Datum::from(0));
    }
}

unsafe extern "C-unwind" fn on_exit(_code: i32, _arg: pg_sys::Datum) {
    if registry::is_ready() {
        registry::unpin_all();
    }
}

/// The image a scan with snapshot `snap` reads, if any. In a transaction that reads images
/// only, every MVCC snapshot maps to one (the innermost running image statement's).
pub fn image_for(snap: pg_sys::Snapshot) -> Option<Rc<Image>> {
    if snap.is_null() || !crate::ffi::is_mvcc_snapshot(snap) {
        return None;
    }
    XACT.with(|x| {
        let x = x.borrow();
        if x.by_snap.is_empty() && x.mode != Mode::Image {
            return None;
        }
        if let Some((img, _)) = x.by_snap.get(&(snap as usize)) {
            return Some(img.clone());
        }
        if x.mode == Mode::Image {
            if let Some(&(_, key)) = x.active.last() {
                return x.by_snap.get(&key).map(|(i, _)| i.clone());
            }
            return x.xact_image.clone();
        }
        None
    })
}

/// A scan read scoot data live with an MVCC snapshot: this transaction stays under the
/// pruning horizon.
#[inline]
pub fn note_live_read() {
    XACT.with(|x| {
        let mut x = x.borrow_mut();
        if x.mode == Mode::None {
            x.mode = Mode::LiveSeen;
        }
    });
}

/// The image of the innermost running image statement (parallel scan setup).
pub fn current_image() -> Option<Rc<Image>> {
    XACT.with(|x| {
        let x = x.borrow();
        x.active
            .last()
            .and_then(|&(_, key)| x.by_snap.get(&key).map(|(i, _)| i.clone()))
    })
}

fn reset_xact() {
    XACT.with(|x| {
        let mut x = x.borrow_mut();
        x.mode = Mode::None;
        x.xact_image = None;
        x.by_snap.clear();
        x.active.clear();
    });
    PENDING.with(|p| p.borrow_mut().clear());
    if registry::is_ready() {
        cow::set_horizon_exempt(false);
        if let Some(me) = registry::my_backend() {
            me.cur_slot.store(registry::NONE, Ordering::Release);
        }
    }
}

unsafe extern "C-unwind" fn xact_callback(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT => {
            if registry::is_ready()
                && unsafe { pg_sys::GetTopTransactionIdIfAny() }.into_inner() != 0
            {
                // snapshots taken from now on contain this transaction's writes
                COMMIT_MARK.with(|c| c.set(registry::reg().next_id.load(Ordering::Acquire)));
            }
            reset_xact();
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT | XACT_EVENT_PREPARE => reset_xact(),
        _ => {}
    }
}

/// The scoot tables the statement's range table names (opened briefly to look at their AM).
unsafe fn scoot_tables(ps: *mut pg_sys::PlannedStmt) -> Vec<(TableRef, String)> {
    unsafe {
        let mut v = Vec::new();
        let rt = (*ps).rtable;
        if rt.is_null() {
            return v;
        }
        for k in 0..(*rt).length as usize {
            let rte = (*(*rt).elements.add(k)).ptr_value as *mut pg_sys::RangeTblEntry;
            if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
                continue;
            }
            let kind = (*rte).relkind as u8;
            if kind != pg_sys::RELKIND_RELATION && kind != pg_sys::RELKIND_MATVIEW {
                continue;
            }
            let rel = pg_sys::RelationIdGetRelation((*rte).relid);
            if rel.is_null() {
                continue;
            }
            if IS_SCOOT(rel) {
                let t = tabledir::resolve(rel);
                if !v.iter().any(|(x, _): &(TableRef, String)| *x == t) {
                    v.push((t, crate::ffi::rel_name(rel)));
                }
            }
            pg_sys::RelationClose(rel);
        }
        v
    }
}

fn slot_has_tables(i: usize, tables: &[(TableRef, String)]) -> bool {
    let g = registry::tables(i);
    tables.iter().all(|(t, _)| {
        (t.id as usize) >= 1 && (t.id as usize) <= g.len() && g[t.id as usize - 1] == t.gen
    })
}

/// Pins a snapshot that satisfies freshness, read-your-writes and contains `tables`, asking the
/// worker for one and waiting if needed. None: no worker answered (read live).
fn acquire(tables: &[(TableRef, String)]) -> Option<Rc<Image>> {
    let r = registry::reg();
    let need = COMMIT_MARK.with(|c| c.get());
    let max_age_us = guc::SNAPSHOT_MAX_AGE_MS.get() as i64 * 1000;
    let start = unsafe { pg_sys::GetCurrentTimestamp() };
    let failures = r.create_failures.load(Ordering::Acquire);
    let mut asked = false;
    // a snapshot with an id >= this was taken after this statement asked: fresh enough for any
    // scoot.snapshot_max_age
    let mut fresh_id = u64::MAX;
    let mut sleeping = false;
    let result = loop {
        let now = unsafe { pg_sys::GetCurrentTimestamp() };
        r.last_reader_at.store(now, Ordering::Release);
        let i = r.newest.load(Ordering::Acquire);
        if i != registry::NONE {
            let i = i as usize;
            let s = registry::slot(i);
            let id = s.id.load(Ordering::Acquire);
            if s.state.load(Ordering::Acquire) == registry::S_LIVE
                && cow::slot_live(i, s.epoch.load(Ordering::Acquire))
                && id >= need
                && (now - s.confirmed_at.load(Ordering::Acquire) <= max_age_us || id >= fresh_id)
                && slot_has_tables(i, tables)
            {
                if let Some(img) = Image::pin(i, id) {
                    // re-check after pinning (the slot may have been recycled in between)
                    if slot_has_tables(i, tables) {
                        break Some(img);
                    }
                }
            }
        }
        if !asked {
            // a snapshot taken from now on is fresh and contains every committed table
            fresh_id = r.next_id.load(Ordering::Acquire);
            r.requested.fetch_max(fresh_id, Ordering::AcqRel);
            asked = true;
        }
        registry::wake_worker();
        let waited_ms = (now - start) / 1000;
        let no_worker = r.worker_pid.load(Ordering::Acquire) == 0;
        // the worker tried and could not (memory, pinned slots): do not wait for it
        let failed = r.create_failures.load(Ordering::Acquire) != failures;
        if waited_ms > 10_000 || (no_worker && waited_ms > 2_000) || failed {
            break None;
        }
        unsafe {
            if !sleeping {
                pg_sys::ConditionVariablePrepareToSleep(registry::cv());
                sleeping = true;
            }
            pg_sys::ConditionVariableTimedSleep(registry::cv(), 10, pg_sys::PG_WAIT_EXTENSION);
        }
        pgrx::check_for_interrupts!();
    };
    if sleeping {
        unsafe { pg_sys::ConditionVariableCancelSleep() };
    }
    if result.is_none() && !WARNED_NO_WORKER.with(|w| w.replace(true)) {
        ereport!(
            PgLogLevel::WARNING,
            PgSqlErrorCode::ERRCODE_WARNING,
            "scoot.olap: no OLAP snapshot could be obtained, reading live data",
            "The pg_scoot olap worker is not running or could not take a snapshot (see the server log and scoot.snapshot_stats: create_failures)."
        );
    }
    result
}

thread_local! {
    /// the nice value this backend has taken for OLAP reads (`scoot.olap_nice`)
    static NICE: Cell<i32> = const { Cell::new(0) };
}

/// Applies `scoot.olap_nice` to this process when it is about to read a snapshot: the kernel then
/// prefers the OLTP backends on a loaded machine. Only ever lowers the priority (raising it again
/// needs privileges); a failure is ignored (the statement runs at the old priority).
fn lower_priority() {
    let want = guc::OLAP_NICE.get();
    if want > NICE.with(|n| n.get()) {
        unsafe {
            let cur = libc::getpriority(libc::PRIO_PROCESS, 0);
            if want > cur && libc::setpriority(libc::PRIO_PROCESS, 0, want) == 0 {
                NICE.with(|n| n.set(want));
            }
        }
    }
}

/// What the leader of a parallel worker reads.
enum Leader {
    /// the image whose MVCC snapshot the worker was given
    Image(Rc<Image>),
    /// live data: the leader holds no image with that snapshot
    Live,
    /// the leader holds an image with that snapshot, but it could not be pinned any more
    Lost,
}

/// Finds the image the leader of this parallel worker reads: among the images the leader has
/// pinned, the one whose MVCC snapshot the worker was given. A live statement of a leader
/// holding no image (or none with that snapshot) reads live data, even when its snapshot
/// happens to equal some image's (an idle server).
unsafe fn leader_image(snap: pg_sys::Snapshot) -> Leader {
    unsafe {
        let leader = (*pg_sys::MyProc).lockGroupLeader;
        if leader.is_null() || snap.is_null() {
            return Leader::Live;
        }
        let Some(lb) = registry::backend((*leader).pgprocno as usize) else {
            return Leader::Live;
        };
        let xmin = (*snap).xmin.into_inner();
        let xmax = (*snap).xmax.into_inner();
        let mut candidates: Vec<(usize, u64)> = Vec::new();
        let cur = lb.cur_slot.load(Ordering::Acquire);
        if cur != registry::NONE {
            candidates.push((cur as usize, lb.cur_id.load(Ordering::Acquire)));
        }
        let bits = lb.slots.load(Ordering::Acquire);
        for i in 0..cow::MAX_SNAPSHOTS {
            if bits & (1 << i) != 0 {
                candidates.push((i, registry::slot(i).id.load(Ordering::Acquire)));
            }
        }
        let mut matched = false;
        for (i, id) in candidates {
            let s = registry::slot(i);
            if s.xmin.load(Ordering::Acquire) == xmin && s.xmax.load(Ordering::Acquire) == xmax {
                matched = true;
                if let Some(img) = Image::pin(i, id) {
                    return Leader::Image(img);
                }
            }
        }
        if matched {
            Leader::Lost
        } else {
            Leader::Live
        }
    }
}

/// Lowers this backend's advertised xmin to the image's (parallel workers install the statement
/// snapshot as their transaction snapshot and require the leader's xmin not to be newer). Safe:
/// the OLAP worker's xmin protects the image's xmin for as long as the image is pinned, so no
/// horizon computed meanwhile can be newer (what ProcArrayInstallRestoredXmin relies on too).
unsafe fn adopt_xmin(xmin: u32) {
    unsafe {
        let wp = registry::reg().worker_procno.load(Ordering::Acquire);
        if wp < 0 {
            return;
        }
        let lock = &mut (*pg_sys::MainLWLockArray.add(4)).lock;
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_SHARED);
        let wx = std::ptr::read_volatile(&(*(*pg_sys::ProcGlobal).allProcs.add(wp as usize)).xmin)
            .into_inner();
        let mine = (*pg_sys::MyProc).xmin.into_inner();
        if wx >= 3
            && !crate::txn::mvcc::precedes(xmin, wx)
            && mine >= 3
            && crate::txn::mvcc::precedes(xmin, mine)
        {
            (*pg_sys::MyProc).xmin = crate::ffi::xid(xmin);
            pg_sys::TransactionXmin = crate::ffi::xid(xmin);
        }
        pg_sys::LWLockRelease(lock);
    }
}

/// Decides whether the statement reads an image (and which).
unsafe fn decide(qd: *mut pg_sys::QueryDesc) -> Option<(Rc<Image>, Vec<(TableRef, String)>, bool)> {
    unsafe {
        if !crate::PRELOADED || !registry::is_ready() {
            return None;
        }
        let ps = (*qd).plannedstmt;
        if pg_sys::ParallelWorkerNumber >= 0 {
            // a parallel worker reads what its leader reads
            let tables = scoot_tables(ps);
            if tables.is_empty() {
                return None;
            }
            return match leader_image((*qd).snapshot) {
                Leader::Image(img) => {
                    lower_priority();
                    Some((img, tables, false))
                }
                Leader::Live => None,
                Leader::Lost => crate::ffi::error_hint(
                    PgSqlErrorCode::ERRCODE_SNAPSHOT_TOO_OLD,
                    "parallel worker could not attach to its leader's OLAP snapshot",
                    "Retry the statement.",
                ),
            };
        }
        let mode = XACT.with(|x| x.borrow().mode);
        // nested statements of an image statement read the same image
        if mode == Mode::Image {
            if let Some(img) = current_image() {
                let tables = scoot_tables(ps);
                return Some((img, tables, false));
            }
        }
        if !guc::OLAP.get() {
            return None;
        }
        if pg_sys::RecoveryInProgress() {
            // a hot standby has no OLAP worker: queries read the live arena, which only the
            // replay of the primary's WAL changes
            return None;
        }
        if (*qd).operation != pg_sys::CmdType::CMD_SELECT
            || (*ps).hasModifyingCTE
            || !(*ps).rowMarks.is_null()
        {
            return None;
        }
        if pg_sys::XactIsoLevel >= pg_sys::XACT_SERIALIZABLE as i32 {
            return None;
        }
        let in_block = pg_sys::IsTransactionBlock();
        let read_only_block = in_block && pg_sys::XactReadOnly;
        if in_block && !read_only_block {
            return None;
        }
        let tables = scoot_tables(ps);
        if tables.is_empty() {
            return None;
        }
        let rr = read_only_block && pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32;
        if rr {
            if let Some(img) = XACT.with(|x| x.borrow().xact_image.clone()) {
                for (t, name) in &tables {
                    if !img.has_table(*t) {
                        crate::ffi::error_hint(
                            PgSqlErrorCode::ERRCODE_SNAPSHOT_TOO_OLD,
                            format!("table \"{name}\" was created, truncated or rewritten after OLAP snapshot {} was taken", img.id),
                            "A REPEATABLE READ READ ONLY transaction reads one snapshot for all its statements; start a new transaction to read the table.",
                        );
                    }
                }
                return Some((img, tables, false));
            }
        }
        let img = acquire(&tables)?;
        lower_priority();
        if rr {
            XACT.with(|x| x.borrow_mut().xact_image = Some(img.clone()));
        }
        Some((img, tables, !in_block))
    }
}

/// Would a plain `SELECT` of scoot tables planned now read an OLAP snapshot (the session-level
/// half of `decide`: `scoot.olap` or an image transaction, not a hot standby, an implicit or
/// read-only transaction, not SERIALIZABLE)? For the planner (`exec/olapparallel.c`).
pub fn select_would_read_image() -> bool {
    unsafe {
        if !crate::PRELOADED || !registry::is_ready() || pg_sys::ParallelWorkerNumber >= 0 {
            return false;
        }
        let image_xact = XACT.with(|x| x.borrow().mode) == Mode::Image && current_image().is_some();
        if !image_xact && !guc::OLAP.get() {
            return false;
        }
        if pg_sys::RecoveryInProgress() || pg_sys::XactIsoLevel >= pg_sys::XACT_SERIALIZABLE as i32
        {
            return false;
        }
        !pg_sys::IsTransactionBlock() || pg_sys::XactReadOnly
    }
}

/// The snapshot an Arrow export of scoot table `t` (`scoot.arrow_stream`, `scoot.arrow_export`,
/// reading blocks directly) reads with: with `scoot.olap = on`, under the rules a SELECT of the
/// table follows (a read-only transaction block, or an implicit transaction, not SERIALIZABLE),
/// and as long as this transaction has written nothing, the MVCC snapshot of an OLAP image
/// (the transaction's image in REPEATABLE READ), mapped to the image so that scans given it
/// read the image. None: read live data with the statement's snapshot.
pub fn export_snapshot(t: TableRef, name: &str) -> Option<pg_sys::Snapshot> {
    unsafe {
        if !guc::OLAP.get()
            || !crate::PRELOADED
            || !registry::is_ready()
            || pg_sys::ParallelWorkerNumber >= 0
            || pg_sys::XactIsoLevel >= pg_sys::XACT_SERIALIZABLE as i32
            || pg_sys::GetTopTransactionIdIfAny().into_inner() != 0
            || pg_sys::RecoveryInProgress()
        {
            // (a hot standby has no OLAP worker: the export reads the live arena)
            return None;
        }
        let in_block = pg_sys::IsTransactionBlock();
        if in_block && !pg_sys::XactReadOnly {
            return None;
        }
        let tables = vec![(t, name.to_string())];
        let rr = in_block && pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32;
        let img = match XACT.with(|x| x.borrow().xact_image.clone()) {
            Some(img) if rr => {
                if !img.has_table(t) {
                    crate::ffi::error_hint(
                        PgSqlErrorCode::ERRCODE_SNAPSHOT_TOO_OLD,
                        format!("table \"{name}\" was created, truncated or rewritten after OLAP snapshot {} was taken", img.id),
                        "A REPEATABLE READ READ ONLY transaction reads one snapshot for all its statements; start a new transaction to read the table.",
                    );
                }
                img
            }
            _ => {
                let img = acquire(&tables)?;
                if rr {
                    XACT.with(|x| x.borrow_mut().xact_image = Some(img.clone()));
                }
                img
            }
        };
        lower_priority();
        if !in_block {
            // like any statement that reads a snapshot in an implicit transaction
            pg_sys::XactReadOnly = true;
        }
        let snap = img.snapshot_copy(pg_sys::TopTransactionContext);
        (*snap).curcid = pg_sys::GetCurrentCommandId(false);
        adopt_xmin(img.xmin);
        XACT.with(|x| {
            x.borrow_mut().by_snap.insert(snap as usize, (img, 1));
        });
        Some(snap)
    }
}

/// The export that [`export_snapshot`] gave `snap` to has finished.
pub fn end_export(snap: pg_sys::Snapshot) {
    XACT.with(|x| {
        x.borrow_mut().by_snap.remove(&(snap as usize));
    });
}

/// First half of the ExecutorStart hook: decide, and substitute the image's snapshot.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scoot_exec_start_before(qd: *mut pg_sys::QueryDesc, _eflags: i32) {
    unsafe {
        let d = decide(qd);
        if let Some((img, _, implicit)) = &d {
            if *implicit {
                // a single-statement transaction that reads a snapshot is read-only
                pg_sys::XactReadOnly = true;
            }
            if pg_sys::ParallelWorkerNumber < 0 {
                // the statement runs on the image's MVCC snapshot (the copy replaces the one
                // CreateQueryDesc registered)
                let copy = img.snapshot_copy(pg_sys::TopTransactionContext);
                (*copy).curcid = (*(*qd).snapshot).curcid;
                let copy = pg_sys::RegisterSnapshot(copy);
                pg_sys::UnregisterSnapshot((*qd).snapshot);
                (*qd).snapshot = copy;
                adopt_xmin(img.xmin);
            }
        }
        PENDING.with(|p| {
            p.borrow_mut()
                .push(d.map(|(img, tables, _)| (img, tables.into_iter().map(|(_, n)| n).collect())))
        });
    }
}

/// Second half of the ExecutorStart hook: map the statement's snapshot to its image.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scoot_exec_start_after(qd: *mut pg_sys::QueryDesc, _eflags: i32) {
    unsafe {
        let Some(Some((img, tables))) = PENDING.with(|p| p.borrow_mut().pop()) else {
            return;
        };
        let key = (*(*qd).estate).es_snapshot as usize;
        let top = XACT.with(|x| {
            let mut x = x.borrow_mut();
            let e = x.by_snap.entry(key).or_insert((img.clone(), 0));
            e.1 += 1;
            let top = x.active.is_empty();
            x.active.push((qd as usize, key));
            if x.mode == Mode::None {
                x.mode = Mode::Image;
            }
            top
        });
        if XACT.with(|x| x.borrow().mode) == Mode::Image {
            cow::set_horizon_exempt(true);
        }
        if let Some(me) = registry::my_backend() {
            me.cur_slot.store(img.slot as u32, Ordering::Release);
            me.cur_id.store(img.id, Ordering::Release);
        }
        if top && pg_sys::ParallelWorkerNumber < 0 {
            let age = (pg_sys::GetCurrentTimestamp() - img.taken_at) as f64 / 1000.0;
            LAST_EXPLAINED.with(|l| *l.borrow_mut() = Some((img.id, img.method, age, tables)));
        }
    }
}

/// Before ExecutorRun: parallel workers launched while this statement runs read its image.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scoot_exec_run_before(qd: *mut pg_sys::QueryDesc) {
    let img = XACT.with(|x| {
        let x = x.borrow();
        x.active
            .iter()
            .find(|(q, _)| *q == qd as usize)
            .and_then(|&(_, key)| x.by_snap.get(&key).map(|(i, _)| (i.slot, i.id)))
    });
    if let (Some((slot, id)), Some(me)) = (img, registry::my_backend()) {
        me.cur_slot.store(slot as u32, Ordering::Release);
        me.cur_id.store(id, Ordering::Release);
    }
}

/// Before ExecutorEnd: forget the statement's snapshot (standard_ExecutorEnd frees it).
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scoot_exec_end_before(qd: *mut pg_sys::QueryDesc) {
    XACT.with(|x| {
        let mut x = x.borrow_mut();
        if let Some(pos) = x.active.iter().position(|(q, _)| *q == qd as usize) {
            let (_, key) = x.active.remove(pos);
            let drop_it = match x.by_snap.get_mut(&key) {
                Some(e) => {
                    e.1 -= 1;
                    e.1 == 0
                }
                None => false,
            };
            if drop_it {
                x.by_snap.remove(&key);
            }
        }
    });
    if let Some(me) = registry::my_backend() {
        match current_image() {
            Some(i) => {
                me.cur_slot.store(i.slot as u32, Ordering::Release);
                me.cur_id.store(i.id, Ordering::Release);
            }
            None => me.cur_slot.store(registry::NONE, Ordering::Release),
        }
    }
}

// ---------------------------------------------------------------- EXPLAIN

#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scoot_explain_before() {
    LAST_EXPLAINED.with(|l| *l.borrow_mut() = None);
}

/// After ExplainOnePlan: say which snapshot the statement reads — under each scan of a scoot
/// table in TEXT format, as properties of the query in JSON, XML and YAML.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scoot_explain_after(es: *mut pg_sys::ExplainState, start_len: i32) {
    unsafe {
        let Some((id, method, age, tables)) = LAST_EXPLAINED.with(|l| l.borrow_mut().take()) else {
            return;
        };
        let start_len = start_len as usize;
        let s = &mut *(*es).str_;
        let bytes = std::slice::from_raw_parts(s.data as *const u8, s.len as usize);
        let text = String::from_utf8_lossy(&bytes[start_len..]).into_owned();
        let method = registry::method_name(method);
        let out = match (*es).format {
            pg_sys::ExplainFormat::EXPLAIN_FORMAT_TEXT => {
                annotate_text(&text, &tables, id, method, age)
            }
            pg_sys::ExplainFormat::EXPLAIN_FORMAT_JSON => annotate_json(
                &annotate_nodes(&text, &tables, Fmt::Json, id, method, age),
                id,
                method,
                age,
            ),
            pg_sys::ExplainFormat::EXPLAIN_FORMAT_XML => annotate_xml(
                &annotate_nodes(&text, &tables, Fmt::Xml, id, method, age),
                id,
                method,
                age,
            ),
            _ => annotate_yaml(
                &annotate_nodes(&text, &tables, Fmt::Yaml, id, method, age),
                id,
                method,
                age,
            ),
        };
        let Some(out) = out else { return };
        s.len = start_len as i32;
        *s.data.add(start_len) = 0;
        let c = std::ffi::CString::new(out).unwrap_or_default();
        pg_sys::appendStringInfoString(s, c.as_ptr());
    }
}

/// TEXT: a `Scoot Snapshot: <id> (<method>, age <n> ms)` line under every scan of a scoot table.
fn annotate_text(text: &str, tables: &[String], id: u64, method: &str, age: f64) -> Option<String> {
    let note = format!("Scoot Snapshot: {id} ({method}, age {age:.1} ms)");
    let mut out = String::with_capacity(text.len() + 256);
    for line in text.split_inclusive('\n') {
        out.push_str(line);
        if is_scoot_scan_line(line, tables) {
            let body = line.trim_start();
            let col = line.len() - body.len() + if body.starts_with("->") { 4 } else { 0 };
            out.push_str(&" ".repeat(col + 2));
            out.push_str(&note);
            out.push('\n');
        }
    }
    Some(out)
}

#[derive(Clone, Copy, PartialEq)]
enum Fmt {
    Json,
    Xml,
    Yaml,
}

/// Structured formats, per scan node: after the `Relation Name` property of every node that scans
/// a scoot table, the snapshot's id, method and age (ms) as properties of that node (the same
/// names as at the query level).
fn annotate_nodes(
    text: &str,
    tables: &[String],
    fmt: Fmt,
    id: u64,
    method: &str,
    age: f64,
) -> String {
    let mut out = String::with_capacity(text.len() + 512);
    for line in text.split_inclusive('\n') {
        out.push_str(line);
        let body = line.trim_start();
        let ind = &line[..line.len() - body.len()];
        let body = body.trim_end_matches('\n');
        let name = match fmt {
            // "Relation Name": "t",   (always followed by "Alias")
            Fmt::Json => body
                .strip_prefix("\"Relation Name\": \"")
                .and_then(|r| r.strip_suffix("\","))
                .map(|n| n.replace("\\\"", "\"").replace("\\\\", "\\")),
            Fmt::Xml => body
                .strip_prefix("<Relation-Name>")
                .and_then(|r| r.strip_suffix("</Relation-Name>"))
                .map(|n| {
                    n.replace("&quot;", "\"")
                        .replace("&lt;", "<")
                        .replace("&gt;", ">")
                        .replace("&amp;", "&")
                }),
            Fmt::Yaml => body.strip_prefix("Relation Name: ").map(|n| {
                n.trim_matches('"')
                    .replace("\\\"", "\"")
                    .replace("\\\\", "\\")
            }),
        };
        if !name.is_some_and(|n| tables.iter().any(|t| *t == n)) {
            continue;
        }
        if !line.ends_with('\n') {
            out.push('\n');
        }
        match fmt {
            Fmt::Json => out.push_str(&format!(
                "{ind}\"Scoot Snapshot Id\": {id},\n{ind}\"Scoot Snapshot Method\": \"{method}\",\n{ind}\"Scoot Snapshot Age\": {age:.3},\n"
            )),
            Fmt::Xml => out.push_str(&format!(
                "{ind}<Scoot-Snapshot-Id>{id}</Scoot-Snapshot-Id>\n{ind}<Scoot-Snapshot-Method>{method}</Scoot-Snapshot-Method>\n{ind}<Scoot-Snapshot-Age>{age:.3}</Scoot-Snapshot-Age>\n"
            )),
            Fmt::Yaml => out.push_str(&format!(
                "{ind}Scoot Snapshot Id: {id}\n{ind}Scoot Snapshot Method: \"{method}\"\n{ind}Scoot Snapshot Age: {age:.3}\n"
            )),
        }
    }
    out
}

/// JSON: `"Scoot Snapshot Id"`, `"Scoot Snapshot Method"`, `"Scoot Snapshot Age"` (ms) also as the
/// last properties of the query object (a statement reads one snapshot).
fn annotate_json(text: &str, id: u64, method: &str, age: f64) -> Option<String> {
    let close = text.rfind('}')?;
    let nl = text[..close].rfind('\n')?;
    let ind = " ".repeat(close - nl - 1 + 2);
    let add = format!(
        ",\n{ind}\"Scoot Snapshot Id\": {id},\n{ind}\"Scoot Snapshot Method\": \"{method}\",\n{ind}\"Scoot Snapshot Age\": {age:.3}"
    );
    Some(format!("{}{}{}", &text[..nl], add, &text[nl..]))
}

/// XML: `<Scoot-Snapshot-Id>` etc. as the last elements of `<Query>`.
fn annotate_xml(text: &str, id: u64, method: &str, age: f64) -> Option<String> {
    let close = text.rfind("</Query>")?;
    let nl = text[..close].rfind('\n')?;
    let ind = " ".repeat(close - nl - 1 + 2);
    let add = format!(
        "\n{ind}<Scoot-Snapshot-Id>{id}</Scoot-Snapshot-Id>\n{ind}<Scoot-Snapshot-Method>{method}</Scoot-Snapshot-Method>\n{ind}<Scoot-Snapshot-Age>{age:.3}</Scoot-Snapshot-Age>"
    );
    Some(format!("{}{}{}", &text[..nl], add, &text[nl..]))
}

/// YAML: `Scoot Snapshot Id:` etc. as the last keys of the query's list item.
fn annotate_yaml(text: &str, id: u64, method: &str, age: f64) -> Option<String> {
    let item = text.lines().find(|l| l.trim_start().starts_with("- "))?;
    let ind = " ".repeat(item.len() - item.trim_start().len() + 2);
    let add = format!(
        "\n{ind}Scoot Snapshot Id: {id}\n{ind}Scoot Snapshot Method: \"{method}\"\n{ind}Scoot Snapshot Age: {age:.3}"
    );
    let body = text.trim_end_matches('\n');
    Some(format!("{}{}{}", body, add, &text[body.len()..]))
}

fn is_scoot_scan_line(line: &str, tables: &[String]) -> bool {
    let body = line.trim().trim_start_matches("->").trim_start();
    let first = body.split("  (").next().unwrap_or(body);
    if !first.contains("Scan") {
        return false;
    }
    let Some(pos) = first.find(" on ") else {
        return false;
    };
    let rest = &first[pos + 4..];
    let name = rest.split(' ').next().unwrap_or("");
    let unq = name.rsplit('.').next().unwrap_or(name).trim_matches('"');
    tables.iter().any(|t| t == unq || t == name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn scan_lines() {
        let t = vec!["t".to_string()];
        assert!(super::is_scoot_scan_line(
            "   ->  Seq Scan on t  (cost=0.00..1.00 rows=1 width=4)\n",
            &t
        ));
        assert!(super::is_scoot_scan_line(
            "Parallel Seq Scan on public.t t1\n",
            &t
        ));
        assert!(super::is_scoot_scan_line(
            "   ->  Index Scan using t_pkey on t  (cost=..)\n",
            &t
        ));
        assert!(!super::is_scoot_scan_line(
            "   ->  Seq Scan on u  (cost=..)\n",
            &t
        ));
        assert!(!super::is_scoot_scan_line("   Filter: (a on t)\n", &t));
        assert!(super::is_scoot_scan_line("   ->  Seq Scan on t\n", &t));
    }

    #[test]
    fn structured_formats() {
        let j = "[\n  {\n    \"Plan\": {\n      \"Node Type\": \"Seq Scan\"\n    },\n    \"Planning Time\": 0.1\n  }";
        let out = super::annotate_json(j, 7, "uffd", 1.5).unwrap();
        assert!(out.ends_with("\"Planning Time\": 0.1,\n    \"Scoot Snapshot Id\": 7,\n    \"Scoot Snapshot Method\": \"uffd\",\n    \"Scoot Snapshot Age\": 1.500\n  }"), "{out}");
        let x = "<explain xmlns=\"x\">\n  <Query>\n    <Plan>\n    </Plan>\n  </Query>";
        let out = super::annotate_xml(x, 7, "software", 2.0).unwrap();
        assert!(out.ends_with("    </Plan>\n    <Scoot-Snapshot-Id>7</Scoot-Snapshot-Id>\n    <Scoot-Snapshot-Method>software</Scoot-Snapshot-Method>\n    <Scoot-Snapshot-Age>2.000</Scoot-Snapshot-Age>\n  </Query>"), "{out}");
        let tables = vec!["t".to_string()];
        let jn = "    \"Plan\": {\n      \"Node Type\": \"Seq Scan\",\n      \"Relation Name\": \"t\",\n      \"Alias\": \"t\"\n    },\n      \"Relation Name\": \"u\",\n";
        let out = super::annotate_nodes(jn, &tables, super::Fmt::Json, 7, "uffd", 1.5);
        assert_eq!(out, "    \"Plan\": {\n      \"Node Type\": \"Seq Scan\",\n      \"Relation Name\": \"t\",\n      \"Scoot Snapshot Id\": 7,\n      \"Scoot Snapshot Method\": \"uffd\",\n      \"Scoot Snapshot Age\": 1.500,\n      \"Alias\": \"t\"\n    },\n      \"Relation Name\": \"u\",\n");
        let xn = "      <Relation-Name>t</Relation-Name>\n";
        assert!(super::annotate_nodes(xn, &tables, super::Fmt::Xml, 7, "copy", 1.0)
            .ends_with("</Relation-Name>\n      <Scoot-Snapshot-Id>7</Scoot-Snapshot-Id>\n      <Scoot-Snapshot-Method>copy</Scoot-Snapshot-Method>\n      <Scoot-Snapshot-Age>1.000</Scoot-Snapshot-Age>\n"));
        let yn = "    Relation Name: \"t\"\n    Alias: \"t\"\n";
        assert_eq!(super::annotate_nodes(yn, &tables, super::Fmt::Yaml, 7, "copy", 1.0),
            "    Relation Name: \"t\"\n    Scoot Snapshot Id: 7\n    Scoot Snapshot Method: \"copy\"\n    Scoot Snapshot Age: 1.000\n    Alias: \"t\"\n");
        let y = "- Plan: \n    Node Type: \"Seq Scan\"\n  Planning Time: 0.1";
        let out = super::annotate_yaml(y, 7, "copy", 3.0).unwrap();
        assert!(out.ends_with("  Planning Time: 0.1\n  Scoot Snapshot Id: 7\n  Scoot Snapshot Method: \"copy\"\n  Scoot Snapshot Age: 3.000"), "{out}");
    }
}
