//! Durability: what makes committed scoot rows outlive the server process.
//!
//! * **The scoot WAL** (`record`): every change of a permanent scoot table's block is one WAL
//!   record of PostgreSQL's log, through the custom resource manager `pg_scoot` (id 143). The
//!   storage layer collects the changed bytes while a block is locked (`storage::changes`) and
//!   this layer turns them into records, so `synchronous_commit`, group commit and `fsync` work
//!   for scoot rows exactly as for heap rows (a commit record follows the row's records in the
//!   log).
//! * **Checkpoint images** (`checkpoint_image`): `$PGDATA/pg_scoot/arena.img`, the blocks of all
//!   scoot tables stamped with a WAL position. The postmaster writes one at every clean shutdown
//!   (after PostgreSQL's shutdown checkpoint); a start after a clean shutdown just loads it.
//! * **Crash recovery**: the postmaster loads the last image (the *base*) into the fresh arena
//!   and replays the scoot records from the base's LSN up to the point PostgreSQL's own redo
//!   starts (reading the WAL itself: PostgreSQL skips redo when nothing follows the last
//!   checkpoint), and PostgreSQL's redo replays the rest through `rm_redo`. Rows keep their TIDs, so indexes stay valid. The WAL
//!   since the base is kept by the physical replication slot `pg_scoot_wal` (`slot`).
//!
//! * **Periodic images** from OLAP snapshots (`snapshot::worker`), every
//!   `scoot.checkpoint_interval`; the newest and the previous image are kept, and the slot keeps
//!   the WAL since the previous one, so a damaged newest image falls back to the previous one and
//!   a longer replay.
//!
//! * **Standbys and base backups**: the image pg_basebackup copied (or the one a standby wrote at
//!   its last clean shutdown) is the base; the WAL between it and the backup's start is taken from
//!   pg_wal or fetched from the primary by the startup process (`fetch_gap`), and `rm_redo`
//!   applies the scoot records from there on while hot standby queries read the arena (blocks
//!   are changed under their locks; `CONFLICT` records cancel queries that still need pruned
//!   versions). Promotion writes a new image, the new server's first base.
pub mod checkpoint_image;
pub mod record;
pub mod slot;

use crate::storage::{arena, changes, tabledir};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::atomic::Ordering;

/// `_PG_init` (postmaster, preload): registers the resource manager and the storage hooks.
pub fn install() {
    unsafe {
        let rm = Box::leak(Box::new(pg_sys::RmgrData {
            rm_name: record::RM_NAME.as_ptr(),
            rm_redo: Some(rm_redo),
            rm_desc: Some(rm_desc),
            rm_identify: Some(rm_identify),
            rm_startup: Some(rm_startup),
            rm_cleanup: Some(rm_cleanup),
            rm_mask: None,
            rm_decode: None,
        }));
        pg_sys::RegisterCustomRmgr(record::RM_SCOOT_ID, rm);
        changes::LOG_BLOCK = Some(record::log_block);
        changes::LOG_FREE = Some(record::log_free);
        changes::LOG_FREE_ALL = Some(record::log_free_all);
        changes::LOG_REKEY = Some(record::log_rekey);
        changes::LOG_COMPACT = Some(record::log_compact);
        changes::CHECK = Some(|| crate::guc::WAL_CHECK.get());
    }
}

/// Called from the shared-memory startup hook in the postmaster (or a single-user backend) after
/// the arena's control region was initialised: loads the image if it is valid for this start,
/// and arranges for the next clean shutdown to write one.
pub fn on_arena_initialised() {
    unsafe {
        if pg_sys::IsUnderPostmaster {
            return;
        }
        // only the postmaster: a single-user backend shuts its checkpoint down after our exit
        // callbacks would run, so it neither loads nor writes (documented)
        if pg_sys::PostmasterPid != libc::getpid() {
            return;
        }
        checkpoint_image::load_at_startup();
        // shmem_exit() forgets its callbacks, and a crash restart re-runs this hook: register
        // again each time
        pg_sys::before_shmem_exit(Some(at_postmaster_exit), pg_sys::Datum::from(0));
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn at_postmaster_exit(code: i32, _arg: pg_sys::Datum) {
    // code != 0: a crash restart or an abnormal exit; the arena may be mid-change
    if code == 0 && unsafe { pg_sys::PostmasterPid == libc::getpid() } {
        checkpoint_image::write_at_shutdown();
    }
}

// ------------------------------------------------------------------ the resource manager

/// No usable base: this recovery skips scoot records (the tables lose their rows, as reported).
static mut SKIP_ALL: bool = false;
static mut BASE_LSN: u64 = 0;
static mut RECOVERY_START: Option<std::time::Instant> = None;

unsafe fn record_data<'a>(r: *mut pg_sys::XLogReaderState) -> (u8, &'a [u8]) {
    unsafe {
        let d = (*r).record;
        let info = (*d).header.xl_info;
        let data = if (*d).main_data_len == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts((*d).main_data as *const u8, (*d).main_data_len as usize)
        };
        (info, data)
    }
}

fn redo_failed(lsn: u64, e: &str) -> ! {
    crate::ffi::error_hint(
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        format!("scoot: cannot replay the scoot WAL record at {:X}/{:X}: {e}", lsn >> 32, lsn as u32),
        format!(
            "Move {} and {} out of the data directory to start with empty scoot tables (their rows are then lost).",
            checkpoint_image::FILE,
            checkpoint_image::PREV
        ),
    )
}

#[pg_guard]
unsafe extern "C-unwind" fn rm_redo(r: *mut pg_sys::XLogReaderState) {
    unsafe {
        changes::REPLAYING = true;
        if SKIP_ALL || (*r).ReadRecPtr < BASE_LSN {
            return; // no base, or already contained in the base image
        }
        debug_delay();
        let (info, data) = record_data(r);
        // hot standby queries may read the arena while this runs
        let hot = pg_sys::standbyState != pg_sys::HotStandbyState::STANDBY_DISABLED;
        if let Err(e) = record::apply(info, data, hot) {
            redo_failed((*r).ReadRecPtr, &e);
        }
        arena::ctl().redo_records.fetch_add(1, Ordering::Relaxed);
        maybe_standby_image((*r).EndRecPtr);
    }
}

/// When the standby's last image was written (or its replay started).
static mut STANDBY_LAST_IMAGE: Option<std::time::Instant> = None;

/// A standby writes its own checkpoint images (every `scoot.checkpoint_interval` while scoot
/// records arrive), stamped with the end of the record just applied, and keeps the WAL since
/// the older one with the slot `pg_scoot_wal` on the standby: a standby crash then recovers
/// from its own image and WAL, without the primary. Written by the startup process itself
/// (there is no OLAP worker in recovery): replay pauses meanwhile.
fn maybe_standby_image(end: u64) {
    unsafe {
        let c = arena::ctl();
        if !pg_sys::StandbyMode || c.from_backup.load(Ordering::Relaxed) == 0 {
            return;
        }
        let interval = crate::guc::CHECKPOINT_INTERVAL_S.get();
        if interval <= 0 {
            return;
        }
        let last = match STANDBY_LAST_IMAGE {
            Some(t) => t,
            None => {
                STANDBY_LAST_IMAGE = Some(std::time::Instant::now());
                return;
            }
        };
        if last.elapsed() < std::time::Duration::from_secs(interval as u64) {
            return;
        }
        STANDBY_LAST_IMAGE = Some(std::time::Instant::now());
        let t0 = std::time::Instant::now();
        let sysid = pg_sys::GetSystemIdentifier();
        match checkpoint_image::write_image_at(sysid, end) {
            Ok((tables, blocks, bytes)) => {
                slot::advance_base(end);
                pgrx::log!(
                    "scoot: standby wrote checkpoint image {}: {tables} tables, {blocks} blocks, {} MB at {:X}/{:X} in {} ms",
                    checkpoint_image::FILE,
                    bytes >> 20,
                    end >> 32,
                    end as u32,
                    t0.elapsed().as_millis()
                );
            }
            Err(e) => {
                checkpoint_image::discard_tmp();
                pgrx::warning!("scoot: the standby could not write a checkpoint image: {e}");
            }
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn rm_desc(buf: pg_sys::StringInfo, r: *mut pg_sys::XLogReaderState) {
    unsafe {
        let (info, data) = record_data(r);
        let s = record::describe(info, data);
        let c = std::ffi::CString::new(s).unwrap_or_default();
        pg_sys::appendStringInfoString(buf, c.as_ptr());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn rm_identify(info: u8) -> *const std::ffi::c_char {
    record::identify(info).as_ptr()
}

/// Start of recovery (startup process): PostgreSQL's redo applies the scoot records from its
/// redo point on (the postmaster replayed those between the base image and that point, or they
/// are fetched from the primary here first).
#[pg_guard]
unsafe extern "C-unwind" fn rm_startup() {
    unsafe {
        changes::REPLAYING = true;
        RECOVERY_START = Some(std::time::Instant::now());
        let c = arena::ctl();
        c.crash_recovered.store(1, Ordering::Release);
        if c.base_valid.load(Ordering::Acquire) == 0 {
            SKIP_ALL = true;
            if c.rows_not_replayed.load(Ordering::Relaxed) != 0 {
                pgrx::log!("scoot: recovery from a base backup or as a standby without a usable checkpoint image: scoot WAL records are skipped");
            } else {
                pgrx::log!("scoot: crash recovery without a checkpoint image: scoot WAL records are skipped and scoot tables lose their rows");
            }
            return;
        }
        let gap_to = c.gap_to.load(Ordering::Relaxed);
        if gap_to != 0 {
            let from = c.base_lsn.load(Ordering::Relaxed);
            let tli = c.gap_tli.load(Ordering::Relaxed);
            match fetch_gap(from, gap_to, tli) {
                Ok((n, source)) => {
                    pgrx::log!(
                        "scoot: replayed {n} scoot WAL records from {:X}/{:X} to the redo start {:X}/{:X} (WAL {source})",
                        from >> 32,
                        from as u32,
                        gap_to >> 32,
                        gap_to as u32
                    );
                    c.replayed_to.store(gap_to, Ordering::Relaxed);
                }
                Err(e) => {
                    // the standby still serves everything else; the scoot tables refuse reads
                    crate::ffi::warning_hint(
                        format!("scoot: cannot replay the scoot WAL on this server: {e}; scoot tables from before have no rows here and report an error until TRUNCATE"),
                        format!("To try again (once the WAL can be had), remove {} and restart this server: the checkpoint image is kept until then.", checkpoint_image::NOT_REPLAYED),
                    );
                    arena::reinit();
                    checkpoint_image::mark_not_replayed(&e);
                    c.crash_recovered.store(1, Ordering::Release);
                    SKIP_ALL = true;
                    return;
                }
            }
            c.gap_to.store(0, Ordering::Relaxed);
        }
        // the postmaster replayed the records up to the redo start (see
        // `checkpoint_image::load_at_startup`); those before it are in the arena already
        BASE_LSN = c
            .replayed_to
            .load(Ordering::Relaxed)
            .max(c.base_lsn.load(Ordering::Relaxed));
    }
}

unsafe extern "C" {
    fn HandleStartupProcInterrupts();
    fn RestoreArchivedFile(
        path: *mut std::ffi::c_char,
        xlogfname: *const std::ffi::c_char,
        recovername: *const std::ffi::c_char,
        expected_size: libc::off_t,
        cleanup_enabled: bool,
    ) -> bool;
}

/// The WAL segment file names of [from, to) on timeline `tli`.
pub fn segment_names(from: u64, to: u64, tli: u32) -> Vec<String> {
    let seg = unsafe { pg_sys::wal_segment_size } as u64;
    let per_id = 0x1_0000_0000u64 / seg;
    (from / seg..=to.saturating_sub(1) / seg)
        .map(|s| format!("{:08X}{:08X}{:08X}", tli, s / per_id, s % per_id))
        .collect()
}

/// Is WAL segment `name` in pg_wal, whole?
pub fn segment_is_local(name: &str) -> bool {
    let seg = unsafe { pg_sys::wal_segment_size } as u64;
    seg != 0 && std::fs::metadata(format!("pg_wal/{name}")).is_ok_and(|m| m.len() == seg)
}

/// [`replay_range`] for [`fetch_gap`]: the error as text, with the LSN it happened at.
unsafe fn replay_gap(
    from: u64,
    to: u64,
    tli: u32,
    source: &'static str,
) -> Result<(u64, &'static str), String> {
    unsafe { replay_range(from, to, tli) }
        .map(|n| (n, source))
        .map_err(|(lsn, e)| format!("at {:X}/{:X}: {e}", lsn >> 32, lsn as u32))
}

/// Archive recovery (`restore_command`): restores the segments of [from, to) that pg_wal lacks
/// into pg_wal, as PostgreSQL restores the ones after the redo start.
unsafe fn restore_gap(from: u64, to: u64, tli: u32) -> Result<(), String> {
    unsafe {
        let seg = pg_sys::wal_segment_size as u64;
        for name in segment_names(from, to, tli) {
            if segment_is_local(&name) {
                continue;
            }
            let local = format!("pg_wal/{name}");
            let mut path = [0 as std::ffi::c_char; pg_sys::MAXPGPATH as usize];
            let cname = std::ffi::CString::new(name.clone()).unwrap();
            if !RestoreArchivedFile(
                path.as_mut_ptr(),
                cname.as_ptr(),
                c"SCOOTXLOG".as_ptr(),
                seg as libc::off_t,
                false,
            ) {
                return Err(format!(
                    "restore_command did not restore WAL segment {name}"
                ));
            }
            let got = std::ffi::CStr::from_ptr(path.as_ptr())
                .to_string_lossy()
                .into_owned();
            if got != local {
                std::fs::rename(&got, &local).map_err(|e| format!("{got} -> {local}: {e}"))?;
            }
        }
        Ok(())
    }
}

/// One attempt of [`fetch_gap`]'s streaming: PostgreSQL's WAL receiver from `from` until it has
/// flushed `to` (then stopped again).
unsafe fn stream_from_primary(from: u64, to: u64, tli: u32) -> Result<(), String> {
    unsafe {
        // as the startup process does before streaming (the WAL receiver installs new segments)
        pg_sys::SetInstallXLogFileSegmentActive();
        pg_sys::RequestXLogStreaming(
            tli,
            from,
            pg_sys::PrimaryConnInfo,
            pg_sys::PrimarySlotName,
            false,
        );
        let t0 = std::time::Instant::now();
        let mut progress_at = std::time::Instant::now();
        let mut last = 0u64;
        let result = loop {
            HandleStartupProcInterrupts();
            let flushed = pg_sys::GetWalRcvFlushRecPtr(std::ptr::null_mut(), std::ptr::null_mut());
            if flushed >= to {
                break Ok(());
            }
            if flushed != last {
                last = flushed;
                progress_at = std::time::Instant::now();
            }
            if !pg_sys::WalRcvRunning() && t0.elapsed() > std::time::Duration::from_secs(1) {
                break Err("the WAL receiver stopped (see the server log: was the WAL removed on the primary?)".to_string());
            }
            if progress_at.elapsed() > std::time::Duration::from_secs(60) {
                break Err("no WAL arrived from the primary for 60 s".to_string());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        pg_sys::XLogShutdownWalRcv();
        result
    }
}

/// Startup process, before PostgreSQL's redo: the base image is older than the redo start and
/// pg_wal lacks the WAL between them (a base backup holds the WAL from its start only). Takes
/// it from the WAL archive (`restore_command`: archive recovery, standbys) or else streams it
/// from the primary (`primary_conninfo`; the primary's slot `pg_scoot_wal` keeps the WAL since
/// its images) with PostgreSQL's own WAL receiver into pg_wal, and replays the scoot records of
/// [from, to).
unsafe fn fetch_gap(from: u64, to: u64, tli: u32) -> Result<(u64, &'static str), String> {
    unsafe {
        let gucstr = |p: *const std::ffi::c_char| {
            if p.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        let restore = gucstr(pg_sys::recoveryRestoreCommand);
        let mut archive_err = None;
        if pg_sys::ArchiveRecoveryRequested && !restore.is_empty() {
            match restore_gap(from, to, tli) {
                Ok(()) => {
                    pgrx::log!(
                        "scoot: restored the WAL from {:X}/{:X} to {:X}/{:X} from the archive",
                        from >> 32,
                        from as u32,
                        to >> 32,
                        to as u32
                    );
                    return replay_gap(from, to, tli, "restored from the archive");
                }
                Err(e) => archive_err = Some(e),
            }
        }
        let conninfo = gucstr(pg_sys::PrimaryConnInfo);
        if conninfo.is_empty() {
            return Err(format!(
                "the WAL from the checkpoint image at {:X}/{:X} to the backup's start {:X}/{:X} is not in pg_wal{}, and primary_conninfo is not set to fetch it",
                from >> 32,
                from as u32,
                to >> 32,
                to as u32,
                match &archive_err {
                    Some(e) => format!(" nor in the archive ({e})"),
                    None => " (no restore_command is set)".to_string(),
                }
            ));
        }
        pgrx::log!(
            "scoot: fetching the WAL from {:X}/{:X} to {:X}/{:X} from the primary",
            from >> 32,
            from as u32,
            to >> 32,
            to as u32
        );
        // a few attempts: the primary may be restarting, the network may blip
        let mut result = Err(String::new());
        for attempt in 1..=5 {
            if attempt > 1 {
                pgrx::log!("scoot: fetching the WAL from the primary failed ({}), attempt {attempt} of 5 in 2 s", result.as_ref().err().map(String::as_str).unwrap_or(""));
                for _ in 0..100 {
                    HandleStartupProcInterrupts();
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
            result = stream_from_primary(from, to, tli);
            if result.is_ok() {
                break;
            }
        }
        result.map_err(|e| {
            format!(
                "could not fetch the WAL from {:X}/{:X} to {:X}/{:X} from the primary: {e}",
                from >> 32,
                from as u32,
                to >> 32,
                to as u32
            )
        })?;
        replay_gap(from, to, tli, "fetched from the primary")
    }
}

/// End of recovery: recompute what redo does not maintain (table sizes, counters), forget
/// tables whose relation files are gone, and start a new base if there was none, or if the
/// base came from another server (promotion of a standby, end of recovery from a base backup:
/// the WAL since that image is not kept here).
#[pg_guard]
unsafe extern "C-unwind" fn rm_cleanup() {
    unsafe {
        let c = arena::ctl();
        finish_replay();
        let from_backup = c.from_backup.load(Ordering::Relaxed) != 0;
        if SKIP_ALL || from_backup {
            // the arena is as of the end of recovery: the base from now on
            let lsn = pg_sys::GetXLogReplayRecPtr(std::ptr::null_mut());
            let t0 = std::time::Instant::now();
            match checkpoint_image::read_control() {
                Ok(ctl) => match checkpoint_image::write_image_at(ctl.system_identifier, lsn) {
                    Ok((tables, blocks, _)) => {
                        checkpoint_image::set_base(ctl.system_identifier, lsn);
                        pgrx::log!(
                            "scoot: end of recovery: wrote checkpoint image {}: {tables} tables, {blocks} blocks at {:X}/{:X} in {} ms",
                            checkpoint_image::FILE,
                            lsn >> 32,
                            lsn as u32,
                            t0.elapsed().as_millis()
                        );
                    }
                    Err(e) => {
                        checkpoint_image::discard_tmp();
                        pgrx::warning!("scoot: could not write a new checkpoint image: {e}")
                    }
                },
                Err(e) => pgrx::warning!("scoot: {e}"),
            }
            c.from_backup.store(0, Ordering::Relaxed);
        }
        if let Some(t0) = RECOVERY_START {
            c.redo_us
                .fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        pgrx::log!(
            "scoot: {} applied {} scoot WAL records",
            if from_backup {
                "recovery of a standby or base backup"
            } else {
                "crash recovery"
            },
            c.redo_records.load(Ordering::Relaxed)
        );
        changes::REPLAYING = false;
    }
}

/// `scoot.debug_redo_delay`: tests stretch recovery to crash in the middle of it.
fn debug_delay() {
    let us = crate::guc::DEBUG_REDO_DELAY_US.get();
    if us > 0 {
        std::thread::sleep(std::time::Duration::from_micros(us as u64));
    }
}

/// After redo: recompute what redo does not maintain (table sizes, insert hints) and forget
/// tables whose relation files are gone (dropped after the record that created them).
fn finish_replay() {
    for (t, key, _) in tabledir::all() {
        if !checkpoint_image::relation_file_exists(&key) {
            for (_lb, b) in tabledir::blocks_of(t) {
                arena::free_block(t, b, false);
            }
            tabledir::remove(t);
            continue;
        }
        let blocks = tabledir::blocks_of(t);
        for &(_lb, b) in &blocks {
            crate::storage::modify::recount_redirects(b);
        }
        let e = t.entry();
        e.nblocks.store(blocks.len() as u32, Ordering::Relaxed);
        e.nlocal.store(
            blocks.last().map(|x| x.0 + 1).unwrap_or(0),
            Ordering::Release,
        );
        e.local_hint.store(0, Ordering::Relaxed);
        e.insert_hint.store(arena::NO_BLOCK, Ordering::Relaxed);
        arena::with_alloc_lock(|| tabledir::publish_size(t));
    }
}

/// Postmaster start after a clean shutdown whose own image could not be used: replays the scoot
/// WAL from the loaded (older) image at `from` up to the shutdown checkpoint `to`. Any error is
/// FATAL (no recovery can be run later: PostgreSQL thinks the shutdown was clean).
pub fn replay_at_start(from: u64, to: u64, tli: u32) -> u64 {
    let t0 = std::time::Instant::now();
    unsafe { changes::REPLAYING = true };
    let n = unsafe { replay_range(from, to, tli) }.unwrap_or_else(|(lsn, e)| redo_failed(lsn, &e));
    finish_replay();
    unsafe { changes::REPLAYING = false };
    let c = arena::ctl();
    c.replayed_at_start.store(1, Ordering::Relaxed);
    c.redo_us
        .store(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    n
}

static mut READ_TLI: u32 = 0;

#[pg_guard]
unsafe extern "C-unwind" fn read_page(
    state: *mut pg_sys::XLogReaderState,
    target: pg_sys::XLogRecPtr,
    _req_len: i32,
    _target_rec: pg_sys::XLogRecPtr,
    buf: *mut std::ffi::c_char,
) -> i32 {
    unsafe {
        let mut err = pg_sys::WALReadError::default();
        if pg_sys::WALRead(
            state,
            buf,
            target,
            pg_sys::XLOG_BLCKSZ as usize,
            READ_TLI,
            &mut err,
        ) {
            pg_sys::XLOG_BLCKSZ as i32
        } else {
            -1
        }
    }
}

/// Reads the WAL from `from` (a record start) and applies every scoot record before `to`.
/// Errors: where and why.
unsafe fn replay_range(from: u64, to: u64, tli: u32) -> Result<u64, (u64, String)> {
    unsafe {
        READ_TLI = tli;
        let routine = Box::leak(Box::new(pg_sys::XLogReaderRoutine {
            page_read: Some(read_page),
            segment_open: Some(crate::ffi::wal_segment_open),
            segment_close: Some(crate::ffi::wal_segment_close),
        }));
        let reader = pg_sys::XLogReaderAllocate(
            pg_sys::wal_segment_size,
            std::ptr::null(),
            routine,
            std::ptr::null_mut(),
        );
        if reader.is_null() {
            return Err((from, "out of memory allocating a WAL reader".into()));
        }
        pg_sys::XLogBeginRead(reader, from);
        let mut n = 0u64;
        loop {
            let mut err: *mut std::ffi::c_char = std::ptr::null_mut();
            let rec = pg_sys::XLogReadRecord(reader, &mut err);
            if rec.is_null() {
                let msg = if err.is_null() {
                    "no record".to_string()
                } else {
                    std::ffi::CStr::from_ptr(err).to_string_lossy().into_owned()
                };
                let at = (*reader).EndRecPtr.max(from);
                pg_sys::XLogReaderFree(reader);
                return Err((
                    at,
                    format!("the WAL since the checkpoint image is not readable ({msg}); was the replication slot pg_scoot_wal dropped?"),
                ));
            }
            if (*reader).ReadRecPtr >= to {
                break;
            }
            if (*rec).xl_rmid == record::RM_SCOOT_ID {
                debug_delay();
                let (info, data) = record_data(reader);
                if let Err(e) = record::apply(info, data, false) {
                    let at = (*reader).ReadRecPtr;
                    pg_sys::XLogReaderFree(reader);
                    return Err((at, e));
                }
                n += 1;
                arena::ctl().redo_records.fetch_add(1, Ordering::Relaxed);
            }
        }
        pg_sys::XLogReaderFree(reader);
        Ok(n)
    }
}
