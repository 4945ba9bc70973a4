//! The OLAP background worker (`pg_scoot olap worker`): takes, publishes and releases snapshots.
//!
//! Taking snapshot `e` (see `snapshot/mod.rs` for the whole story):
//! 1. close the write-section gate and wait until no process is inside a write section
//!    (bounded; on timeout the gate reopens and the attempt is retried later);
//! 2. capture the MVCC snapshot of that instant (`GetLatestSnapshot`), the block catalog and the
//!    table catalog into a registry slot;
//! 3. `copy` only: copy every used arena page into the pre-image pool;
//! 4. register epoch `e` (writers preserve pages for it from now on) and reopen the gate;
//! 5. `uffd` only: write-protect the hot blocks (modified since the previous snapshot) in every
//!    registered writer, block by block, outside the gate; until a block is armed its writers
//!    preserve pages themselves, so the gate stays closed only for the capture;
//! 6. publish the slot as the newest snapshot and wake the readers waiting for it.
//!
//! The worker keeps one transaction open for its whole life and registers the MVCC snapshot of
//! every live image in it: its xmin (flagged PROC_AFFECTS_ALL_HORIZONS, it has no database)
//! keeps the TOAST values and heap rows the images still reference from being vacuumed, while
//! scoot's own pruning horizon ignores it (`txn::horizon`).
use crate::guc;
use crate::snapshot::registry::{self, S_CREATING, S_FREE, S_LIVE};
use crate::snapshot::uffd;
use crate::storage::{arena, cow, tabledir};
use pgrx::bgworkers::*;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub fn register() {
    BackgroundWorkerBuilder::new("pg_scoot olap worker")
        .set_type("pg_scoot olap worker")
        .set_function("scoot_olap_worker_main")
        .set_library("pg_scoot")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// Worker-local state.
struct Worker {
    method: u32,
    /// registered snapshot per slot (kept while the slot is live)
    regd: [pg_sys::Snapshot; cow::MAX_SNAPSHOTS],
    /// write sections and latest completed xid when the newest snapshot was taken
    changes_at_last: u64,
    completed_at_last: u64,
    last_taken: Option<Instant>,
    /// per block: modification count when the previous snapshot was taken (hot-block detection)
    mod_seen: Vec<u64>,
    uffd: Option<uffd::Server>,
    /// per block: (modification count, when the freezer first saw it at that count)
    cold_since: Vec<(u64, i64)>,
    last_freeze_pass: Option<Instant>,
    /// the background compactor (see `am::compact`) while it runs, the last look for tables
    /// to compact, and when each table (id, generation) was last handed to it
    compactor: Option<DynamicBackgroundWorker>,
    last_compact_look: Option<Instant>,
    compacted_at: std::collections::HashMap<(u32, u32), Instant>,
    /// checkpoint images (see `image_step`): the next `create` captures the tables and the WAL
    /// position at its gate instant
    want_image: bool,
    image_capture: Option<(usize, u64, u64, Vec<crate::wal::checkpoint_image::ImgTable>)>,
    /// The checkpoint image being written (see `image_continue`).
    image_job: Option<ImageJob>,
    last_image: Instant,
    changes_at_image: u64,
}

static mut IS_WORKER: bool = false;

/// Is this process the OLAP worker?
pub fn is_worker() -> bool {
    unsafe { IS_WORKER }
}

fn now() -> i64 {
    unsafe { pg_sys::GetCurrentTimestamp() }
}

fn latest_completed() -> u64 {
    unsafe { (*pg_sys::ShmemVariableCache).latestCompletedXid.value }
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn scoot_olap_worker_main(_arg: pg_sys::Datum) {
    unsafe { IS_WORKER = true };
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    BackgroundWorker::connect_worker_to_spi(None, None);
    if !registry::is_ready() || !cow::is_ready() || !arena::is_ready() {
        return;
    }
    let r = registry::reg();
    unsafe {
        r.worker_procno
            .store((*pg_sys::MyProc).pgprocno, Ordering::Release);
        r.worker_pid.store(pg_sys::MyProcPid, Ordering::Release);
        r.started_at.store(now(), Ordering::Relaxed);
        // our xmin protects what live images reference in every database
        let lock = &mut (*pg_sys::MainLWLockArray.add(4)).lock;
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        (*pg_sys::MyProc).statusFlags |= pg_sys::PROC_AFFECTS_ALL_HORIZONS as u8;
        *(*pg_sys::ProcGlobal)
            .statusFlags
            .add((*pg_sys::MyProc).pgxactoff as usize) = (*pg_sys::MyProc).statusFlags;
        pg_sys::LWLockRelease(lock);
        pg_sys::before_shmem_exit(Some(on_exit), pg_sys::Datum::from(0));
    }
    // keep the WAL crash recovery replays onto the last checkpoint image
    crate::wal::slot::retain_from_base();
    cow::set_horizon_exempt(true);
    abandon_all(true);

    // which method, and why
    let wanted = guc::SNAPSHOT_METHOD
        .get()
        .and_then(|s| s.to_str().ok().map(|s| s.to_string()))
        .unwrap_or_else(|| "uffd".into());
    let (method, reason, server) = match registry::method_from_name(&wanted) {
        Some(registry::M_UFFD) => match uffd::Server::start() {
            Ok(s) => (
                registry::M_UFFD,
                "scoot.snapshot_method = uffd: userfaultfd write-protect available".to_string(),
                Some(s),
            ),
            Err(e) => (
                registry::M_SOFTWARE,
                format!("userfaultfd unavailable ({e}): writers copy pre-images themselves"),
                None,
            ),
        },
        Some(registry::M_COPY) => (
            registry::M_COPY,
            "scoot.snapshot_method = copy: the used arena is copied at every snapshot".into(),
            None,
        ),
        Some(_) => (
            registry::M_SOFTWARE,
            "scoot.snapshot_method = software: writers copy pre-images themselves".into(),
            None,
        ),
        None => (
            registry::M_SOFTWARE,
            format!("unknown scoot.snapshot_method \"{wanted}\": using software"),
            None,
        ),
    };
    registry::set_reason(&reason);
    r.method.store(method, Ordering::Release);
    log!(
        "pg_scoot olap worker: snapshot method {} ({reason})",
        registry::method_name(method)
    );

    let nblocks = arena::ctl().nblocks as usize;
    let mut w = Worker {
        method,
        regd: [std::ptr::null_mut(); cow::MAX_SNAPSHOTS],
        changes_at_last: 0,
        completed_at_last: 0,
        last_taken: None,
        mod_seen: (0..nblocks)
            .map(|b| {
                arena::block_desc(b as u32)
                    .mod_count
                    .load(Ordering::Relaxed)
            })
            .collect(),
        uffd: server,
        cold_since: vec![(u64::MAX, 0); nblocks],
        last_freeze_pass: None,
        compactor: None,
        last_compact_look: None,
        compacted_at: std::collections::HashMap::new(),
        want_image: false,
        image_capture: None,
        image_job: None,
        last_image: Instant::now(),
        changes_at_image: cow::ctl().changes.load(Ordering::Acquire),
    };
    unsafe { pg_sys::StartTransactionCommand() };

    loop {
        let tick = Duration::from_millis((guc::SNAPSHOT_INTERVAL_MS.get() as u64).clamp(5, 50));
        if !BackgroundWorker::wait_latch(Some(tick)) {
            break;
        }
        if BackgroundWorker::sighup_received() {
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        w.step();
    }
    abandon_all(false);
    if let Some(s) = w.uffd.take() {
        s.stop();
    }
}

/// Process exit (also on ERROR/FATAL): no live snapshot may outlive the worker, whose fault
/// handler and registered xmin keep them correct. Pinned readers get "snapshot too old".
unsafe extern "C-unwind" fn on_exit(_code: i32, _arg: pg_sys::Datum) {
    abandon_all(false);
    uffd::stop_global();
    let r = registry::reg();
    r.worker_pid.store(0, Ordering::Release);
    r.worker_procno.store(-1, Ordering::Release);
}

/// Abandons every live snapshot (worker start or exit); at start also frees the unpinned slots a
/// previous worker left behind.
fn abandon_all(at_start: bool) {
    let r = registry::reg();
    r.newest.store(registry::NONE, Ordering::Release);
    for i in 0..cow::MAX_SNAPSHOTS {
        let st = cow::ctl().slot_state[i].load(Ordering::Acquire);
        if st == cow::EP_LIVE {
            cow::end_epoch(i, true);
            r.abandoned.fetch_add(1, Ordering::Relaxed);
        }
        if at_start {
            let s = registry::slot(i);
            if s.state.load(Ordering::Acquire) == S_CREATING {
                s.state.store(S_FREE, Ordering::Release);
            }
            if registry::free_if_unpinned(i) || s.state.load(Ordering::Acquire) == S_FREE {
                cow::end_epoch(i, false);
            }
        }
    }
    // nobody may believe the kernel still preserves its pages
    for p in 0..cow::ctl().nsections as usize {
        if let Some(s) = cow::section(p) {
            s.armed.store(0, Ordering::Release);
        }
    }
    unsafe { pg_sys::ConditionVariableBroadcast(registry::cv()) };
}

impl Worker {
    fn step(&mut self) {
        let r = registry::reg();
        let t = now();
        let newest = r.newest.load(Ordering::Acquire);
        let requested = r.requested.load(Ordering::Acquire);
        let changed = cow::ctl().changes.load(Ordering::Acquire) != self.changes_at_last
            || latest_completed() != self.completed_at_last;
        let interval = Duration::from_millis(guc::SNAPSHOT_INTERVAL_MS.get() as u64);
        // keep taking snapshots only while analytic readers are around (otherwise writers
        // would keep saving pre-images for nobody)
        let idle_us = (guc::SNAPSHOT_INTERVAL_MS.get() as i64 * 10).max(10_000) * 1000;
        let readers_recent = t - r.last_reader_at.load(Ordering::Acquire) < idle_us;
        let due = self.last_taken.is_none_or(|l| l.elapsed() >= interval);
        // a request not served yet: no snapshot with an id >= the requested one was taken (not
        // `requested > newest_id`: once the worker dropped an idle newest snapshot that would
        // hold for any old request, and it took and dropped snapshots on every tick while
        // writes went on, long after the last analytic reader)
        let unserved = requested >= r.next_id.load(Ordering::Acquire);
        if unserved || (readers_recent && due && changed && newest != registry::NONE) {
            self.create();
        } else if newest != registry::NONE && !changed {
            // nothing changed since it was taken: it is as good as a new one
            registry::slot(newest as usize)
                .confirmed_at
                .store(t, Ordering::Release);
        } else if newest != registry::NONE && !readers_recent {
            // idle: drop the newest snapshot once nobody uses it, so writers stop preserving
            if registry::free_if_unpinned(newest as usize) {
                self.release(newest as usize);
            }
        }
        self.release_old();
        self.freeze_pass();
        self.compact_look();
        self.image_step();
    }

    /// Every `scoot.checkpoint_interval` while scoot tables changed: take a snapshot whose gate
    /// instant also fixes the WAL position, write the permanent tables' blocks as that snapshot
    /// has them to the checkpoint image (OLTP goes on meanwhile: writers preserve pre-images as
    /// for any snapshot), flush the WAL up to that position, publish the image and move the
    /// replication slot there, so PostgreSQL may recycle the older WAL and crash recovery
    /// replays only what came after.
    ///
    /// Like PostgreSQL's checkpoints, an image is also due early when the WAL since the last one
    /// exceeds `max_wal_size` (at most every 10 s): that bounds both the WAL the slot keeps and
    /// the replay a crash costs.
    fn image_step(&mut self) {
        if self.image_job.is_some() {
            self.image_continue();
            return;
        }
        let interval = guc::CHECKPOINT_INTERVAL_S.get();
        if interval <= 0 {
            return;
        }
        let elapsed = self.last_image.elapsed();
        if elapsed < Duration::from_secs(interval as u64)
            && !(elapsed >= Duration::from_secs(10) && wal_since_base() > max_wal_bytes())
        {
            return;
        }
        let changes = cow::ctl().changes.load(Ordering::Acquire);
        if changes == self.changes_at_image {
            self.last_image = Instant::now();
            return;
        }
        self.want_image = true;
        self.create();
        self.want_image = false;
        let Some((i, id, lsn, tables)) = self.image_capture.take() else {
            return; // no snapshot this tick (gate timeout, no free slot): try again next tick
        };
        // the snapshot taken at that very instant (None: it did not come to life)
        let Some(img) = crate::snapshot::image::Image::pin(i, id) else {
            return;
        };
        self.last_image = Instant::now();
        self.changes_at_image = changes;
        let sysid = unsafe { pg_sys::GetSystemIdentifier() };
        let tables = std::panic::AssertUnwindSafe(tables);
        let res = guarded(move || {
            let tables = tables;
            crate::wal::checkpoint_image::ImageWriter::begin(sysid, lsn, tables.0)
                .map_err(|e| e.to_string())
        });
        match res {
            Ok(writer) => {
                self.image_job = Some(ImageJob {
                    writer: Some(writer),
                    epoch: img.epoch,
                    img,
                    slot: i,
                    lsn,
                    t0: Instant::now(),
                });
                self.image_continue();
            }
            Err(e) => image_failed(&e),
        }
    }

    /// Writes the next slice of the image in progress (at most `IMAGE_SLICE` per tick, so the
    /// worker goes on taking snapshots for readers and freezing meanwhile, and OLTP keeps most of
    /// the CPU; all at once when the snapshot's preserved pages fill half the pre-image pool),
    /// and publishes it once complete.
    fn image_continue(&mut self) {
        let Some(job) = self.image_job.as_mut() else {
            return;
        };
        if !cow::slot_live(job.slot, job.epoch) {
            self.image_job = None;
            image_failed("the snapshot was abandoned while the image was written");
            return;
        }
        let pressed =
            cow::is_ready() && cow::frames_in_use() as u64 * 2 > cow::ctl().nframes as u64;
        let until = (!pressed).then(|| Instant::now() + IMAGE_SLICE);
        let img = std::panic::AssertUnwindSafe(job.img.clone());
        let writer = std::panic::AssertUnwindSafe(job.writer.as_mut().expect("image writer"));
        let res = guarded(move || {
            let writer = writer;
            let img = img;
            writer
                .0
                .step(until, &mut |ab, dst| {
                    img.materialize(ab, dst);
                    Ok(())
                })
                .map_err(|e| e.to_string())
        });
        match res {
            Ok(false) => return, // more at the next tick
            Ok(true) => {}
            Err(e) => {
                self.image_job = None;
                image_failed(&e);
                return;
            }
        }
        let mut job = self.image_job.take().expect("image job");
        let (slot, epoch, lsn, t0) = (job.slot, job.epoch, job.lsn, job.t0);
        let writer = std::panic::AssertUnwindSafe(job.writer.take().expect("image writer"));
        let res = guarded(move || {
            let writer = writer;
            writer
                .0
                .finish(|| {
                    if !cow::slot_live(slot, epoch) {
                        return Err("the snapshot was abandoned while the image was written".into());
                    }
                    // everything the image contains is described by WAL before `lsn`
                    unsafe { pg_sys::XLogFlush(lsn) };
                    Ok(())
                })
                .map_err(|e| e.to_string())
        });
        drop(job);
        match res {
            Ok((tables, blocks, bytes)) => {
                crate::wal::slot::advance_base(lsn);
                log!(
                    "scoot: wrote checkpoint image {}: {tables} tables, {blocks} blocks, {} MB at {:X}/{:X} in {} ms",
                    crate::wal::checkpoint_image::FILE,
                    bytes >> 20,
                    lsn >> 32,
                    lsn as u32,
                    t0.elapsed().as_millis()
                );
            }
            Err(e) => image_failed(&e),
        }
    }

    /// The background freezer (see `txn::freeze`): a block whose modification count did not
    /// change for half of `scoot.freeze_after` turns cooling, and one still unchanged after
    /// `scoot.freeze_after` is frozen (if its lock is free and its rows allow it; otherwise it
    /// waits another `scoot.freeze_after`). At most one pass per 100 ms.
    fn freeze_pass(&mut self) {
        let after = guc::FREEZE_AFTER_MS.get();
        if after < 0 {
            return;
        }
        let pace = Duration::from_millis((after as u64 / 4).clamp(10, 100));
        if self.last_freeze_pass.is_some_and(|l| l.elapsed() < pace) {
            return;
        }
        self.last_freeze_pass = Some(Instant::now());
        let t = now();
        let after_us = after as i64 * 1000;
        let mut horizon = None;
        for b in 0..arena::ctl().nblocks {
            let d = arena::block_desc(b);
            let owner = d.owner.load(Ordering::Acquire);
            if owner == 0 || d.zombie.load(Ordering::Relaxed) != 0 {
                continue;
            }
            let mc = d.mod_count.load(Ordering::Acquire);
            let seen = &mut self.cold_since[b as usize];
            if seen.0 != mc {
                *seen = (mc, t);
                continue;
            }
            let age = t - seen.1;
            match d.temp.load(Ordering::Relaxed) {
                arena::TEMP_HOT if age * 2 >= after_us => {
                    let _ = d.temp.compare_exchange(
                        arena::TEMP_HOT,
                        arena::TEMP_COOLING,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
                arena::TEMP_COOLING if age >= after_us => {
                    let h = *horizon.get_or_insert_with(crate::txn::freeze::horizon);
                    let tref = tabledir::TableRef {
                        id: (owner >> 32) as u32,
                        gen: owner as u32,
                    };
                    let lb = d.local.load(Ordering::Acquire);
                    let mut out = crate::txn::freeze::freeze_block(tref, lb, h, false);
                    if out == crate::txn::freeze::Outcome::Prunable {
                        // dead versions first (as VACUUM would), then the block can freeze; the
                        // next backend to read the table reports them to the statistics
                        let n = crate::am::index::prune_block_horizon(tref, lb, h);
                        if n > 0 && tref.is_current() {
                            tref.entry()
                                .pruned_unreported
                                .fetch_add(n, Ordering::Relaxed);
                        }
                        out = crate::txn::freeze::freeze_block(tref, lb, h, false);
                    }
                    if out != crate::txn::freeze::Outcome::Frozen {
                        // not now: hot again, retried after another scoot.freeze_after
                        let _ = d.temp.compare_exchange(
                            arena::TEMP_COOLING,
                            arena::TEMP_HOT,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        );
                    }
                    self.cold_since[b as usize] = (d.mod_count.load(Ordering::Acquire), now());
                }
                _ => {}
            }
        }
    }

    /// Once a second: hands a table with frozen blocks less than `scoot.compact_below` full
    /// (frozen and untouched for another `scoot.freeze_after`) whose rows fit in fewer blocks
    /// to the background compactor (`am::compact`), one table at a time, each at most every
    /// 3 x `scoot.freeze_after` (10 s at least).
    fn compact_look(&mut self) {
        let below = guc::COMPACT_BELOW.get();
        let after = guc::FREEZE_AFTER_MS.get();
        if below <= 0.0 || after < 0 {
            return;
        }
        if let Some(c) = &self.compactor {
            match c.pid() {
                Err(BackgroundWorkerStatus::Stopped)
                | Err(BackgroundWorkerStatus::PostmasterDied) => self.compactor = None,
                _ => return,
            }
        }
        if self
            .last_compact_look
            .is_some_and(|l| l.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.last_compact_look = Some(Instant::now());
        let t = now();
        let after_us = after as i64 * 1000;
        let mut per: std::collections::HashMap<(u32, u32), Vec<(u32, u32, u32)>> =
            std::collections::HashMap::new();
        for b in 0..arena::ctl().nblocks {
            let d = arena::block_desc(b);
            let owner = d.owner.load(Ordering::Acquire);
            if owner == 0
                || d.zombie.load(Ordering::Relaxed) != 0
                || d.temp.load(Ordering::Relaxed) != arena::TEMP_FROZEN
            {
                continue;
            }
            let (mc, since) = self.cold_since[b as usize];
            if mc != d.mod_count.load(Ordering::Acquire) || t - since < after_us {
                continue;
            }
            per.entry(((owner >> 32) as u32, owner as u32))
                .or_default()
                .push((
                    d.local.load(Ordering::Relaxed),
                    crate::am::compact::block_fill(d),
                    crate::am::compact::FULL,
                ));
        }
        let every = Duration::from_millis((after as u64 * 3).max(10_000));
        for ((id, gen), mut blocks) in per {
            if blocks.len() < 2
                || self
                    .compacted_at
                    .get(&(id, gen))
                    .is_some_and(|at| at.elapsed() < every)
            {
                continue;
            }
            blocks.sort_unstable();
            if crate::am::compact::pick_sources(&blocks, below).len() < 2 {
                continue;
            }
            let e = tabledir::entry(id);
            let key = e.key;
            if e.gen.load(Ordering::Acquire) != gen || key.backend != -1 || key.db == 0 {
                continue;
            }
            self.compacted_at.insert((id, gen), Instant::now());
            self.compactor = crate::am::compact::launch(key.db, key.spc, key.rel, below);
            break;
        }
    }

    fn release(&mut self, i: usize) {
        cow::end_epoch(i, false);
        if !self.regd[i].is_null() {
            unsafe { pg_sys::UnregisterSnapshot(self.regd[i]) };
            self.regd[i] = std::ptr::null_mut();
        }
        registry::reg().released.fetch_add(1, Ordering::Relaxed);
    }

    /// Frees snapshots that are neither the newest nor pinned, and abandoned ones once unpinned.
    fn release_old(&mut self) {
        let r = registry::reg();
        let mut any = false;
        for i in 0..cow::MAX_SNAPSHOTS {
            let s = registry::slot(i);
            if s.state.load(Ordering::Acquire) != S_LIVE {
                continue;
            }
            let abandoned = !cow::slot_live(i, s.epoch.load(Ordering::Acquire));
            if abandoned && r.newest.load(Ordering::Acquire) == i as u32 {
                r.newest.store(registry::NONE, Ordering::Release);
            }
            if (abandoned || r.newest.load(Ordering::Acquire) != i as u32)
                && registry::free_if_unpinned(i)
            {
                self.release(i);
                any = true;
            }
        }
        if any || arena::zombie_blocks() > 0 {
            arena::reclaim_zombies(cow::oldest_live_epoch());
        }
    }

    fn free_slot(&mut self) -> Option<usize> {
        (0..cow::MAX_SNAPSHOTS).find(|&i| {
            registry::slot(i).state.load(Ordering::Acquire) == S_FREE
                && cow::ctl().slot_state[i].load(Ordering::Acquire) == cow::EP_FREE
        })
    }

    fn create(&mut self) {
        let r = registry::reg();
        self.release_old();
        if self.method == registry::M_COPY {
            // the copy needs room for the whole used arena: drop the previous copy first
            // unless a reader still uses it
            let need = (0..arena::ctl().nblocks)
                .filter(|&b| arena::block_desc(b).owner.load(Ordering::Relaxed) != 0)
                .count() as u64
                * (arena::block_size() / cow::PAGE) as u64;
            let newest = r.newest.load(Ordering::Acquire);
            if (cow::ctl().free_frames.load(Ordering::Relaxed) as u64) < need
                && newest != registry::NONE
                && registry::free_if_unpinned(newest as usize)
            {
                self.release(newest as usize);
            }
        }
        let Some(i) = self.free_slot() else {
            // every slot is pinned by a running reader: try again on the next tick
            r.create_failures.fetch_add(1, Ordering::Relaxed);
            unsafe { pg_sys::ConditionVariableBroadcast(registry::cv()) };
            return;
        };
        let s = registry::slot(i);
        s.state.store(S_CREATING, Ordering::Release);
        let t0 = Instant::now();
        if !cow::close_gate(Duration::from_millis(200)) {
            r.gate_timeouts.fetch_add(1, Ordering::Relaxed);
            s.state.store(S_FREE, Ordering::Release);
            return;
        }
        let tg = Instant::now();
        // no write section can start now: this count is exactly the one of the image
        let changes = cow::ctl().changes.load(Ordering::Acquire);
        let completed = latest_completed();
        let snap = unsafe { pg_sys::GetLatestSnapshot() };
        unsafe {
            if (*snap).suboverflowed {
                // readers could not check subtransactions without pg_subtrans lookups below
                // their own TransactionXmin: wait for a calmer instant
                cow::open_gate();
                r.skipped_overflow.fetch_add(1, Ordering::Relaxed);
                s.state.store(S_FREE, Ordering::Release);
                return;
            }
        }
        let id = r.next_id.fetch_add(1, Ordering::AcqRel);
        let epoch = id as u32;
        unsafe {
            s.xmin.store((*snap).xmin.into_inner(), Ordering::Relaxed);
            s.xmax.store((*snap).xmax.into_inner(), Ordering::Relaxed);
            let xcnt = ((*snap).xcnt as usize).min(r.maxxip as usize);
            let xip = registry::xip(i);
            for k in 0..xcnt {
                xip[k] = (*(*snap).xip.add(k)).into_inner();
            }
            s.xcnt.store(xcnt as u32, Ordering::Relaxed);
            let subxcnt = ((*snap).subxcnt.max(0) as usize).min(r.maxsubxip as usize);
            let sub = registry::subxip(i);
            for k in 0..subxcnt {
                sub[k] = (*(*snap).subxip.add(k)).into_inner();
            }
            s.subxcnt.store(subxcnt as u32, Ordering::Relaxed);
        }
        // block and table catalogs of this instant
        let cat = registry::catalog(i);
        let nblocks = arena::ctl().nblocks as usize;
        let mut nimg = 0u32;
        let mut hot: Vec<u32> = Vec::new();
        for (b, e) in cat.iter_mut().enumerate().take(nblocks) {
            let d = arena::block_desc(b as u32);
            let owner = d.owner.load(Ordering::Acquire);
            if owner == 0 {
                *e = registry::CatEntry::default();
                continue;
            }
            e.owner = owner;
            e.local = d.local.load(Ordering::Acquire);
            e.hwm = d.hwm.load(Ordering::Acquire);
            e.vis_xid = d.vis_xid.load(Ordering::Acquire);
            e.dense = d.dense(e.hwm) as u32;
            nimg += 1;
            let mc = d.mod_count.load(Ordering::Relaxed);
            if mc != self.mod_seen[b] {
                hot.push(b as u32);
                self.mod_seen[b] = mc;
            }
        }
        if self.want_image {
            // the WAL position of this instant: every scoot record before it describes a change
            // the snapshot contains, every later one a change it does not
            let lsn = unsafe { pg_sys::GetXLogInsertRecPtr() };
            self.image_capture = Some((
                i,
                id,
                lsn,
                crate::wal::checkpoint_image::capture_tables(true),
            ));
        }
        let tabs = registry::tables(i);
        for (k, g) in tabs.iter_mut().enumerate() {
            let e = tabledir::entry(k as u32 + 1);
            *g = if e.state.load(Ordering::Acquire) == tabledir::E_USED {
                e.gen.load(Ordering::Acquire)
            } else {
                0
            };
        }
        cow::set_pending(epoch);
        let mut copied = 0u64;
        let ppb = (arena::block_size() / cow::PAGE) as u32;
        match self.method {
            registry::M_COPY => {
                for (b, e) in cat.iter().enumerate().take(nblocks) {
                    if e.owner == 0 {
                        continue;
                    }
                    let first = b as u32 * ppb;
                    if !cow::copy_pages(first, first + ppb - 1, epoch) {
                        cow::end_pending();
                        cow::open_gate();
                        cow::reclaim();
                        s.state.store(S_FREE, Ordering::Release);
                        if r.create_failures.fetch_add(1, Ordering::Relaxed) % 100 == 0 {
                            warning!(
                                "pg_scoot: scoot.snapshot_memory ({} MB) is too small to copy the used arena (snapshot method copy)",
                                guc::SNAPSHOT_MEMORY_MB.get()
                            );
                        }
                        unsafe { pg_sys::ConditionVariableBroadcast(registry::cv()) };
                        return;
                    }
                    copied += arena::block_size() as u64;
                }
            }
            _ => {}
        }
        cow::begin_epoch(i, epoch, s.xmin.load(Ordering::Relaxed));
        cow::end_pending();
        cow::open_gate();
        let gate_us = tg.elapsed().as_micros() as u64 + (tg - t0).as_micros() as u64;
        let taken_at = now();
        self.regd[i] = unsafe { pg_sys::RegisterSnapshot(snap) };
        s.id.store(id, Ordering::Relaxed);
        s.epoch.store(epoch, Ordering::Relaxed);
        s.method.store(self.method, Ordering::Relaxed);
        s.taken_at.store(taken_at, Ordering::Relaxed);
        s.confirmed_at.store(taken_at, Ordering::Relaxed);
        s.blocks.store(nimg, Ordering::Relaxed);
        s.writers_armed.store(0, Ordering::Relaxed);
        s.armed_bytes.store(0, Ordering::Relaxed);
        s.copied_bytes.store(copied, Ordering::Relaxed);
        s.gate_us.store(gate_us, Ordering::Relaxed);
        s.create_us
            .store(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
        {
            let _g = registry::Guard::lock();
            s.pins.store(0, Ordering::Relaxed);
            s.state.store(S_LIVE, Ordering::Release);
            r.newest.store(i as u32, Ordering::Release);
        }
        unsafe { pg_sys::ConditionVariableBroadcast(registry::cv()) };
        if self.method == registry::M_UFFD {
            if let Some(u) = self.uffd.as_mut() {
                // outside the gate: until a block is armed its writers preserve pages themselves
                let (n, bytes) = u.arm(&hot, epoch);
                s.writers_armed.store(n, Ordering::Relaxed);
                s.armed_bytes.store(bytes, Ordering::Relaxed);
            }
        }
        let create_us = t0.elapsed().as_micros() as u64;
        s.create_us.store(create_us, Ordering::Relaxed);
        r.created.fetch_add(1, Ordering::Relaxed);
        r.create_us_total.fetch_add(create_us, Ordering::Relaxed);
        registry::update_max(&r.create_us_max, create_us);
        r.gate_us_total.fetch_add(gate_us, Ordering::Relaxed);
        registry::update_max(&r.gate_us_max, gate_us);
        self.changes_at_last = changes;
        self.completed_at_last = completed;
        self.last_taken = Some(Instant::now());
        self.release_old();
    }
}

/// WAL written since the recovery base (the last checkpoint image), in bytes.
fn wal_since_base() -> u64 {
    let c = crate::storage::arena::ctl();
    if c.base_valid.load(Ordering::Acquire) == 0 {
        return 0;
    }
    let now = unsafe { pg_sys::GetXLogInsertRecPtr() };
    now.saturating_sub(c.base_lsn.load(Ordering::Relaxed))
}

/// PostgreSQL's `max_wal_size` in bytes.
fn max_wal_bytes() -> u64 {
    (unsafe { pg_sys::max_wal_size_mb }.max(1) as u64) << 20
}

/// A checkpoint image being written from a pinned snapshot.
struct ImageJob {
    writer: Option<crate::wal::checkpoint_image::ImageWriter>,
    img: std::rc::Rc<crate::snapshot::image::Image>,
    slot: usize,
    epoch: u32,
    lsn: u64,
    t0: Instant,
}

/// Image writing per worker tick (between ticks the worker serves readers and OLTP runs).
const IMAGE_SLICE: Duration = Duration::from_millis(20);

/// Runs `f`, turning a PostgreSQL error or a panic into an `Err` (the worker goes on).
fn guarded<T>(f: impl FnOnce() -> Result<T, String> + std::panic::UnwindSafe) -> Result<T, String> {
    PgTryBuilder::new(f)
        .catch_others(|e| {
            Err(match e {
                pgrx::pg_sys::panic::CaughtError::PostgresError(r)
                | pgrx::pg_sys::panic::CaughtError::ErrorReport(r) => r.message().to_string(),
                _ => "unexpected error".to_string(),
            })
        })
        .execute()
}

fn image_failed(e: &str) {
    crate::wal::checkpoint_image::discard_tmp();
    warning!("scoot: could not write a checkpoint image: {e}; the previous image and the WAL since it stay in use");
}
