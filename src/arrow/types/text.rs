//! text, varchar, char(n), name, json -> utf8 (the stored bytes: char(n) keeps its padding as
//! PostgreSQL prints it), and any other type through its output function -> utf8 ([`Output`]:
//! unconstrained numeric, jsonb, and every column with `text_fallback`).
use super::{varlena_bytes, Column};
use crate::storage::block::{
    BlockRef, ColDesc, KIND_CHARN, KIND_CSTRING, KIND_FIXED, KIND_VAR, VAR_RAW,
};
use crate::storage::encoding;
use arrow_array::builder::StringBuilder;
use arrow_array::{Array, ArrayRef};
use pgrx::pg_sys;
use std::sync::Arc;

fn not_utf8(name: &str) -> ! {
    crate::ffi::error_hint(
        pgrx::PgSqlErrorCode::ERRCODE_CHARACTER_NOT_IN_REPERTOIRE,
        format!("a value of column \"{name}\" is not valid UTF-8, which Arrow utf8 requires"),
        "Arrow export needs a UTF8 (or pure-ASCII SQL_ASCII) database for text columns.",
    )
}

pub struct Text {
    b: StringBuilder,
    name: String,
    /// the type is `name`: datums point at a NUL-terminated array
    cstring: bool,
    /// the database encoding is UTF8: PostgreSQL validated every text value on input
    valid: bool,
}

/// Is the database encoding UTF8 (so stored text is valid UTF-8 already)?
fn utf8_database() -> bool {
    unsafe { pg_sys::GetDatabaseEncoding() == pg_sys::pg_enc::PG_UTF8 as i32 }
}

impl Text {
    pub fn new(name: &str, cstring: bool) -> Self {
        Text {
            b: StringBuilder::new(),
            name: name.into(),
            cstring,
            valid: utf8_database(),
        }
    }

    #[inline]
    fn push_bytes(&mut self, v: &[u8]) {
        if self.valid {
            // SAFETY: a UTF8 database holds only valid UTF-8 text (checked on input)
            self.b
                .append_value(unsafe { std::str::from_utf8_unchecked(v) });
            return;
        }
        match std::str::from_utf8(v) {
            Ok(s) => self.b.append_value(s),
            Err(_) => not_utf8(&self.name),
        }
    }
}

impl Column for Text {
    fn push_block(&mut self, b: BlockRef, c: &ColDesc, rows: &[u32]) -> bool {
        match c.kind {
            KIND_CHARN | KIND_VAR | KIND_CSTRING => {}
            KIND_FIXED if c.byval == 0 => {} // name: NUL-padded 64 bytes
            _ => return false,
        }
        for &s in rows {
            if !b.is_valid(c, s) {
                self.b.append_null();
                continue;
            }
            match c.kind {
                KIND_VAR => {
                    let (_, len) = b.var_entry(c, s);
                    let payload = b.var_payload(c, s);
                    if len & VAR_RAW != 0 {
                        // compressed inline or in the TOAST table: a complete varlena
                        let v = unsafe {
                            varlena_bytes(pg_sys::Datum::from(payload.as_ptr() as *mut u8))
                        };
                        self.push_bytes(v);
                    } else {
                        self.push_bytes(payload);
                    }
                }
                KIND_CSTRING => {
                    let p = b.var_payload(c, s);
                    self.push_bytes(p.strip_suffix(&[0]).unwrap_or(p));
                }
                _ => {
                    let w = if c.kind == KIND_CHARN {
                        c.width
                    } else {
                        c.attlen as u16
                    } as usize;
                    let cell = unsafe { std::slice::from_raw_parts(b.value_ptr(c, s), w) };
                    self.push_bytes(&cell[..encoding::charn_len(cell)]);
                }
            }
        }
        true
    }

    unsafe fn push_datum(&mut self, d: pg_sys::Datum, isnull: bool) {
        if isnull {
            self.b.append_null();
        } else if self.cstring {
            let v = unsafe { std::ffi::CStr::from_ptr(d.cast_mut_ptr()) };
            self.push_bytes(v.to_bytes());
        } else {
            let v = unsafe { varlena_bytes(d) };
            self.push_bytes(v);
        }
    }

    fn finish(&mut self) -> ArrayRef {
        let a = self.b.finish();
        self.b = StringBuilder::with_capacity(a.len(), a.value_data().len());
        Arc::new(a)
    }
}

/// Any type as the text its output function prints.
pub struct Output {
    b: StringBuilder,
    name: String,
    flinfo: Box<pg_sys::FmgrInfo>,
}

impl Output {
    pub fn new(typoutput: pg_sys::Oid, name: &str) -> Self {
        let mut flinfo: Box<pg_sys::FmgrInfo> = Box::new(unsafe { std::mem::zeroed() });
        // lives in the export's memory context (the function's multi-call context)
        unsafe { pg_sys::fmgr_info_cxt(typoutput, &mut *flinfo, pg_sys::CurrentMemoryContext) };
        Output {
            b: StringBuilder::new(),
            name: name.into(),
            flinfo,
        }
    }
}

impl Column for Output {
    fn push_block(&mut self, _b: BlockRef, _c: &ColDesc, _rows: &[u32]) -> bool {
        false
    }

    unsafe fn push_datum(&mut self, d: pg_sys::Datum, isnull: bool) {
        if isnull {
            self.b.append_null();
            return;
        }
        unsafe {
            let cs = pg_sys::OutputFunctionCall(&mut *self.flinfo, d);
            match std::ffi::CStr::from_ptr(cs).to_str() {
                Ok(s) => self.b.append_value(s),
                Err(_) => not_utf8(&self.name),
            }
            pg_sys::pfree(cs as *mut std::ffi::c_void);
        }
    }

    fn finish(&mut self) -> ArrayRef {
        let a = self.b.finish();
        self.b = StringBuilder::with_capacity(a.len(), a.value_data().len());
        Arc::new(a)
    }
}
