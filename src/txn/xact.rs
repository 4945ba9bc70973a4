//! Storage lifetimes tied to transactions: a relfilenode created in a transaction is dropped if it
//! aborts; one replaced (TRUNCATE, rewrite) or dropped (DROP TABLE/SCHEMA/DATABASE) is freed when
//! it commits — the arena counterpart of PostgreSQL's pending file deletions. Subtransactions
//! are tracked by nesting level. DROP is observed through `object_access_hook`.
use crate::am;
use crate::storage::modify as storage;
use crate::storage::tabledir::{self, RelKey, TableRef};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::ffi::c_void;

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
            let list = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
            for p in list.iter().rev() {
                apply(&p.action, false);
            }
        }
        XACT_EVENT_PRE_PREPARE => {
            if PENDING.with(|p| !p.borrow().is_empty()) {
                ereport!(
                    PgLogLevel::ERROR,
                    PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                    "cannot PREPARE a transaction that created, truncated, rewrote or dropped a scoot table"
                );
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
            if am::is_scoot(rel) {
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

pub unsafe fn install_hooks() {
    unsafe {
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
        PREV_OBJECT_ACCESS = pg_sys::object_access_hook;
        pg_sys::object_access_hook = Some(object_access);
    }
}
