//! Storage lifetimes tied to transactions: a relfilenode created in a transaction is dropped if it
//! aborts; one replaced (TRUNCATE, rewrite) or dropped (DROP TABLE/SCHEMA/DATABASE) is freed when
//! it commits — the arena counterpart of PostgreSQL's pending file deletions. Subtransactions
//! are tracked by nesting level. DROP is observed through `object_access_hook`.
//!
//! Two-phase commit: at PREPARE TRANSACTION the pending actions move into shared memory under the
//! transaction's GID, and COMMIT PREPARED / ROLLBACK PREPARED (in any backend, observed through
//! `ProcessUtility_hook`) apply them once PostgreSQL has finished the prepared transaction.
use crate::storage::modify as storage;
use crate::storage::tabledir::{self, RelKey, TableRef};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::ffi::c_void;

#[derive(Clone, Copy)]
enum Action {
    DropOnCommit(RelKey),
    DropOnAbort(RelKey),
    RekeyOnAbort(TableRef, RelKey),
}

struct Pending {
    level: i32,
    action: Action,
}

thread_local! {
    static PENDING: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
}

static mut PREV_OBJECT_ACCESS: pg_sys::object_access_hook_type = None;
static mut PREV_PROCESS_UTILITY: pg_sys::ProcessUtility_hook_type = None;
static mut PREV_SHMEM_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP: pg_sys::shmem_startup_hook_type = None;

thread_local! {
    /// GID of the PREPARE TRANSACTION this backend is executing.
    static PREPARING_GID: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

// ---------------------------------------------------------------- prepared transactions

const GIDSIZE: usize = 200;
const TWOPHASE_SLOTS: usize = 1024;

#[repr(C)]
struct PreparedAction {
    used: u32,
    kind: u32,
    gid_len: u32,
    gid: [u8; GIDSIZE],
    key: RelKey,
    table: TableRef,
}

#[repr(C)]
struct TwoPhase {
    lock: pg_sys::LWLock,
    slots: [PreparedAction; TWOPHASE_SLOTS],
}

static mut TWOPHASE: *mut TwoPhase = std::ptr::null_mut();

#[pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST {
            prev();
        }
        pg_sys::RequestAddinShmemSpace(std::mem::size_of::<TwoPhase>());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP {
            prev();
        }
        let size = std::mem::size_of::<TwoPhase>();
        crate::ffi::shmem_init_struct(c"pg_scoot prepared actions", size, |p, fresh| {
            let p = p as *mut TwoPhase;
            if fresh {
                std::ptr::write_bytes(p as *mut u8, 0, size);
                pg_sys::LWLockInitialize(&mut (*p).lock, crate::storage::arena::ctl().tranche);
            }
            TWOPHASE = p;
        });
    }
}

fn with_twophase<R>(f: impl FnOnce(&mut TwoPhase) -> R) -> R {
    unsafe {
        let tp = &mut *TWOPHASE;
        let _g = crate::storage::arena::LwGuard::exclusive(&mut tp.lock);
        f(tp)
    }
}

fn encode(a: &Action) -> (u32, RelKey, TableRef) {
    let none = TableRef { id: 0, gen: 0 };
    match *a {
        Action::DropOnCommit(k) => (1, k, none),
        Action::DropOnAbort(k) => (2, k, none),
        Action::RekeyOnAbort(t, k) => (3, k, t),
    }
}

fn decode(kind: u32, key: RelKey, t: TableRef) -> Action {
    match kind {
        1 => Action::DropOnCommit(key),
        2 => Action::DropOnAbort(key),
        _ => Action::RekeyOnAbort(t, key),
    }
}

/// Moves this transaction's pending actions under `gid` (at PREPARE). Errors if there is no room
/// (checked before PostgreSQL writes the prepared state, at PRE_PREPARE).
fn store_prepared(gid: &[u8], actions: &[Action], check_only: bool) {
    let ok = with_twophase(|tp| {
        let free = tp.slots.iter().filter(|s| s.used == 0).count();
        if free < actions.len() {
            return false;
        }
        if check_only {
            return true;
        }
        let mut it = tp.slots.iter_mut().filter(|s| s.used == 0);
        for a in actions {
            let s = it.next().unwrap();
            let (kind, key, table) = encode(a);
            s.kind = kind;
            s.key = key;
            s.table = table;
            s.gid_len = gid.len() as u32;
            s.gid[..gid.len()].copy_from_slice(gid);
            s.used = 1;
        }
        true
    });
    if !ok {
        crate::ffi::error_hint(
            PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
            "too many prepared transactions with DDL on scoot tables",
            "Commit or roll back prepared transactions (pg_prepared_xacts).",
        );
    }
}

/// Takes the actions a prepared transaction left (at COMMIT/ROLLBACK PREPARED).
fn take_prepared(gid: &[u8]) -> Vec<Action> {
    with_twophase(|tp| {
        let mut v = Vec::new();
        for s in tp.slots.iter_mut() {
            if s.used != 0 && &s.gid[..s.gid_len as usize] == gid {
                v.push(decode(s.kind, s.key, s.table));
                s.used = 0;
            }
        }
        v
    })
}

#[pg_guard]
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    crate::ffi::guard::boundary(|| unsafe {
        let node = (*pstmt).utilityStmt;
        let mut finishing: Option<(Vec<u8>, bool)> = None;
        if !node.is_null() && (*node).type_ == pg_sys::NodeTag::T_TransactionStmt {
            let ts = node as *mut pg_sys::TransactionStmt;
            let gid = || std::ffi::CStr::from_ptr((*ts).gid).to_bytes().to_vec();
            match (*ts).kind {
                pg_sys::TransactionStmtKind::TRANS_STMT_PREPARE => {
                    PREPARING_GID.with(|g| *g.borrow_mut() = Some(gid()));
                }
                pg_sys::TransactionStmtKind::TRANS_STMT_COMMIT_PREPARED => {
                    finishing = Some((gid(), true))
                }
                pg_sys::TransactionStmtKind::TRANS_STMT_ROLLBACK_PREPARED => {
                    finishing = Some((gid(), false))
                }
                _ => {}
            }
        }
        if !node.is_null() && (*node).type_ == pg_sys::NodeTag::T_CreatedbStmt {
            refuse_template_with_scoot_rows(node as *mut pg_sys::CreatedbStmt);
        }
        if !node.is_null() {
            for db in databases_needing_no_connections(node) {
                stop_compactor_in(&db);
            }
        }
        // every utility statement passes here: its errors must reach the client unchanged
        crate::ffi::guard::catch(|| match PREV_PROCESS_UTILITY {
            Some(prev) => prev(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
            None => crate::ffi::guard::raw::standard_ProcessUtility(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
        });
        // the prepared transaction is finished: its scoot storage follows
        if let Some((gid, commit)) = finishing {
            if crate::storage::arena::is_ready() {
                let actions = take_prepared(&gid);
                if commit {
                    for a in &actions {
                        apply(a, true);
                    }
                } else {
                    for a in actions.iter().rev() {
                        apply(a, false);
                    }
                }
            }
        }
    })
}

/// CREATE DATABASE copies a template's relation files, not the scoot rows in the arena: refuse
/// when the template has scoot tables with rows (empty ones are fine: the copies start empty).
/// The databases a statement needs without other connections (PostgreSQL's
/// `CountOtherDBBackends` callers): DROP DATABASE, CREATE DATABASE's template, ALTER DATABASE
/// ... RENAME / SET TABLESPACE.
unsafe fn databases_needing_no_connections(node: *mut pg_sys::Node) -> Vec<String> {
    unsafe {
        let s = |p: *const std::ffi::c_char| {
            (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned())
        };
        // the value of option `name` in a DefElem list
        let opt = |opts: *mut pg_sys::List, name: &[u8]| -> Option<String> {
            if opts.is_null() {
                return None;
            }
            (0..(*opts).length as usize).find_map(|k| {
                let d = (*(*opts).elements.add(k)).ptr_value as *mut pg_sys::DefElem;
                (std::ffi::CStr::from_ptr((*d).defname).to_bytes() == name && !(*d).arg.is_null())
                    .then(|| s(pg_sys::defGetString(d)))
                    .flatten()
            })
        };
        match (*node).type_ {
            pg_sys::NodeTag::T_DropdbStmt => s((*(node as *mut pg_sys::DropdbStmt)).dbname)
                .into_iter()
                .collect(),
            pg_sys::NodeTag::T_CreatedbStmt => {
                vec![
                    opt((*(node as *mut pg_sys::CreatedbStmt)).options, b"template")
                        .unwrap_or_else(|| "template1".into()),
                ]
            }
            pg_sys::NodeTag::T_AlterDatabaseStmt => {
                let a = node as *mut pg_sys::AlterDatabaseStmt;
                if opt((*a).options, b"tablespace").is_some() {
                    s((*a).dbname).into_iter().collect()
                } else {
                    Vec::new()
                }
            }
            pg_sys::NodeTag::T_RenameStmt => {
                let r = node as *mut pg_sys::RenameStmt;
                if (*r).renameType == pg_sys::ObjectType::OBJECT_DATABASE {
                    s((*r).subname).into_iter().collect()
                } else {
                    Vec::new()
                }
            }
            _ => Vec::new(),
        }
    }
}

/// Stops the background compactor if it is connected to database `name` (it exits at its next
/// interrupt check; its transaction rolls back), and waits up to 5 s for it to go, as
/// PostgreSQL stops autovacuum workers for these statements.
unsafe fn stop_compactor_in(name: &str) {
    unsafe {
        if !crate::storage::arena::is_ready() {
            return;
        }
        let Ok(cname) = std::ffi::CString::new(name) else {
            return;
        };
        let oid = u32::from(pg_sys::get_database_oid(cname.as_ptr(), true));
        let c = crate::storage::arena::ctl();
        let pid = c.compactor_pid.load(std::sync::atomic::Ordering::Acquire);
        if oid == 0 || pid == 0 || c.compactor_db.load(std::sync::atomic::Ordering::Acquire) != oid
        {
            return;
        }
        libc::kill(pid, libc::SIGTERM);
        for _ in 0..500 {
            if c.compactor_pid.load(std::sync::atomic::Ordering::Acquire) != pid {
                break;
            }
            pg_sys::pg_usleep(10_000);
            pg_sys::check_for_interrupts!();
        }
    }
}

unsafe fn refuse_template_with_scoot_rows(stmt: *mut pg_sys::CreatedbStmt) {
    unsafe {
        if !crate::storage::arena::is_ready() {
            return;
        }
        let mut template = "template1".to_string();
        let opts = (*stmt).options;
        if !opts.is_null() {
            for k in 0..(*opts).length as usize {
                let d = (*(*opts).elements.add(k)).ptr_value as *mut pg_sys::DefElem;
                if std::ffi::CStr::from_ptr((*d).defname).to_bytes() == b"template"
                    && !(*d).arg.is_null()
                {
                    template = std::ffi::CStr::from_ptr(pg_sys::defGetString(d))
                        .to_string_lossy()
                        .into_owned();
                }
            }
        }
        let Ok(cname) = std::ffi::CString::new(template.clone()) else {
            return;
        };
        let oid = u32::from(pg_sys::get_database_oid(cname.as_ptr(), true));
        if oid == 0 {
            return; // PostgreSQL reports the missing template
        }
        let with_rows = crate::storage::tabledir::all()
            .into_iter()
            .filter(|(t, k, _)| {
                k.db == oid && k.backend < 0 && !crate::storage::tabledir::blocks_of(*t).is_empty()
            })
            .count();
        if with_rows > 0 {
            crate::ffi::error_hint(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("CREATE DATABASE cannot copy the rows of scoot tables: template database \"{template}\" has {with_rows} scoot table(s) with rows"),
                "Copy the data with pg_dump and pg_restore, or empty the scoot tables of the template (TRUNCATE) first.".to_string(),
            );
        }
    }
}

fn level() -> i32 {
    unsafe { pg_sys::GetCurrentTransactionNestLevel() }
}

fn push(action: Action) {
    PENDING.with(|p| {
        p.borrow_mut().push(Pending {
            level: level(),
            action,
        })
    });
}

pub fn drop_on_commit(key: RelKey) {
    push(Action::DropOnCommit(key));
}
pub fn drop_on_abort(key: RelKey) {
    push(Action::DropOnAbort(key));
}
pub fn rekey_on_abort(t: TableRef, back_to: RelKey) {
    push(Action::RekeyOnAbort(t, back_to));
}

fn drop_storage(key: &RelKey) {
    if let Some(t) = tabledir::lookup(key) {
        storage::free_all_blocks(t);
        tabledir::remove(t);
    }
}

fn apply(a: &Action, commit: bool) {
    match (a, commit) {
        (Action::DropOnCommit(k), true) => drop_storage(k),
        (Action::DropOnAbort(k), false) => drop_storage(k),
        (Action::RekeyOnAbort(t, k), false) => tabledir::rekey(*t, k),
        _ => {}
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut c_void) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT => {
            let list = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
            for p in &list {
                apply(&p.action, true);
            }
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => {
            PREPARING_GID.with(|g| g.borrow_mut().take());
            let list = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
            for p in list.iter().rev() {
                apply(&p.action, false);
            }
        }
        XACT_EVENT_PRE_PREPARE => {
            // make sure the actions will fit before PostgreSQL writes the prepared state
            let n = PENDING.with(|p| p.borrow().len());
            if n > 0 {
                let dummy = vec![Action::DropOnCommit(RelKey::default()); n];
                store_prepared(b"", &dummy, true);
            }
        }
        XACT_EVENT_PREPARE => {
            let list = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
            let gid = PREPARING_GID
                .with(|g| g.borrow_mut().take())
                .unwrap_or_default();
            if !list.is_empty() {
                let actions: Vec<Action> = list.iter().map(|p| p.action).collect();
                store_prepared(&gid, &actions, false);
            }
        }
        _ => {}
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    _my: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut c_void,
) {
    use pg_sys::SubXactEvent::*;
    let lvl = level();
    match event {
        SUBXACT_EVENT_ABORT_SUB => {
            let mine: Vec<Pending> = PENDING.with(|p| {
                let mut v = p.borrow_mut();
                let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut *v)
                    .into_iter()
                    .partition(|x| x.level >= lvl);
                *v = rest;
                mine
            });
            for p in mine.iter().rev() {
                apply(&p.action, false);
            }
        }
        SUBXACT_EVENT_COMMIT_SUB => PENDING.with(|p| {
            for x in p.borrow_mut().iter_mut() {
                if x.level >= lvl {
                    x.level = lvl - 1;
                }
            }
        }),
        _ => {}
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn object_access(
    access: pg_sys::ObjectAccessType::Type,
    class_id: pg_sys::Oid,
    object_id: pg_sys::Oid,
    sub_id: i32,
    arg: *mut c_void,
) {
    unsafe {
        if let Some(prev) = PREV_OBJECT_ACCESS {
            prev(access, class_id, object_id, sub_id, arg);
        }
        if access != pg_sys::ObjectAccessType::OAT_DROP || !crate::storage::arena::is_ready() {
            return;
        }
        if class_id == pg_sys::RelationRelationId && sub_id == 0 {
            let rel = pg_sys::RelationIdGetRelation(object_id);
            if rel.is_null() {
                return;
            }
            if is_scoot(rel) {
                let key = tabledir::key_of_rel(rel);
                if tabledir::lookup(&key).is_some() {
                    drop_on_commit(key);
                }
            }
            pg_sys::RelationClose(rel);
        } else if class_id == pg_sys::DatabaseRelationId {
            let db: u32 = object_id.into();
            for (_, key, _) in tabledir::all() {
                if key.db == db {
                    drop_on_commit(key);
                }
            }
        }
    }
}

/// How to recognise a scoot relation (set by `_PG_init`: the access method layer sits above this
/// one).
static mut IS_SCOOT: fn(pg_sys::Relation) -> bool = |_| false;

fn is_scoot(rel: pg_sys::Relation) -> bool {
    unsafe { IS_SCOOT(rel) }
}

pub unsafe fn install_hooks(is_scoot: fn(pg_sys::Relation) -> bool) {
    unsafe { IS_SCOOT = is_scoot };
    unsafe {
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
        PREV_OBJECT_ACCESS = pg_sys::object_access_hook;
        pg_sys::object_access_hook = Some(object_access);
        PREV_PROCESS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
        PREV_SHMEM_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(shmem_request);
        PREV_SHMEM_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
    }
}
