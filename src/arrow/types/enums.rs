//! Enums -> dictionary<int32, utf8>: the labels, each stored once per batch (the dictionary) and
//! referenced by index. A label is looked up once per enum value (its pg_enum oid) and export.
use super::Column;
use crate::storage::block::{BlockRef, ColDesc, KIND_FIXED};
use arrow_array::builder::StringDictionaryBuilder;
use arrow_array::types::Int32Type;
use arrow_array::ArrayRef;
use pgrx::pg_sys;
use std::collections::HashMap;
use std::sync::Arc;

pub struct Enum {
    b: StringDictionaryBuilder<Int32Type>,
    labels: HashMap<u32, String>,
    flinfo: Box<pg_sys::FmgrInfo>,
}

impl Enum {
    pub fn new(typoutput: pg_sys::Oid) -> Self {
        let mut flinfo: Box<pg_sys::FmgrInfo> = Box::new(unsafe { std::mem::zeroed() });
        unsafe { pg_sys::fmgr_info_cxt(typoutput, &mut *flinfo, pg_sys::CurrentMemoryContext) };
        Enum {
            b: StringDictionaryBuilder::new(),
            labels: HashMap::new(),
            flinfo,
        }
    }

    fn push_oid(&mut self, oid: u32) {
        if !self.labels.contains_key(&oid) {
            let label = unsafe {
                let cs = pg_sys::OutputFunctionCall(&mut *self.flinfo, pg_sys::Datum::from(oid));
                let s = std::ffi::CStr::from_ptr(cs).to_string_lossy().into_owned();
                pg_sys::pfree(cs as *mut std::ffi::c_void);
                s
            };
            self.labels.insert(oid, label);
        }
        self.b
            .append(&self.labels[&oid])
            .unwrap_or_else(|e| pgrx::error!("scoot: enum dictionary: {e}"));
    }
}

impl Column for Enum {
    fn push_block(&mut self, b: BlockRef, c: &ColDesc, rows: &[u32]) -> bool {
        if c.kind != KIND_FIXED || c.attlen != 4 {
            return false;
        }
        for &s in rows {
            if b.is_valid(c, s) {
                let oid = unsafe { (b.value_ptr(c, s) as *const u32).read_unaligned() };
                self.push_oid(oid);
            } else {
                self.b.append_null();
            }
        }
        true
    }

    unsafe fn push_datum(&mut self, d: pg_sys::Datum, isnull: bool) {
        if isnull {
            self.b.append_null();
        } else {
            self.push_oid(d.value() as u32);
        }
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(self.b.finish())
    }
}
