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

/// utf8 values built in place: offsets, data and validity (a frozen block's gathered values are
/// copied as one byte range).
pub struct Text {
    offsets: Vec<i32>,
    data: Vec<u8>,
    nulls: arrow_buffer::BooleanBufferBuilder,
    null_count: usize,
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

fn batch_too_large(name: &str) -> ! {
    crate::ffi::error_hint(
        pgrx::PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        format!("the values of column \"{name}\" in one record batch exceed 2 GB"),
        "Arrow utf8 arrays use 32-bit offsets: pass a smaller batch_rows.",
    )
}

impl Text {
    pub fn new(name: &str, cstring: bool) -> Self {
        Text {
            offsets: vec![0],
            data: Vec::new(),
            nulls: arrow_buffer::BooleanBufferBuilder::new(0),
            null_count: 0,
            name: name.into(),
            cstring,
            valid: utf8_database(),
        }
    }

    #[inline]
    fn end(&mut self) {
        if self.data.len() > i32::MAX as usize {
            batch_too_large(&self.name);
        }
        self.offsets.push(self.data.len() as i32);
    }

    #[inline]
    fn append_null(&mut self) {
        self.offsets.push(self.data.len() as i32);
        self.nulls.append(false);
        self.null_count += 1;
    }

    #[inline]
    fn push_bytes(&mut self, v: &[u8]) {
        // a UTF8 database holds only valid UTF-8 text (checked on input)
        if !self.valid && std::str::from_utf8(v).is_err() {
            not_utf8(&self.name);
        }
        self.data.extend_from_slice(v);
        self.end();
        self.nulls.append(true);
    }
}

impl Text {
    /// char(n) / short varchar(n) cells (NUL-padded, `width` bytes each) of consecutive rows:
    /// one pass, no per-value bookkeeping (a full cell, the usual char(n) value, is copied whole).
    fn push_charn_range(&mut self, b: BlockRef, c: &ColDesc, first: u32, n: u32) {
        let w = c.width as usize;
        // SAFETY: the column region holds `capacity` cells of `width` bytes
        let cells = unsafe { std::slice::from_raw_parts(b.value_ptr(c, first), n as usize * w) };
        let validity = super::range_validity(b, c, first, n);
        if self.data.len() + cells.len() > i32::MAX as usize {
            batch_too_large(&self.name);
        }
        self.data.reserve(cells.len());
        self.offsets.reserve(n as usize);
        if validity.is_none() && cells.chunks_exact(w).all(|cell| cell[w - 1] != 0) {
            // every value fills its cell (char(n) of single-byte characters): the cells are
            // the data, the offsets step by the width
            let base = self.data.len();
            self.data.extend_from_slice(cells);
            self.offsets
                .extend((1..=n as usize).map(|i| (base + i * w) as i32));
            self.nulls.append_n(n as usize, true);
            return;
        }
        for (i, cell) in cells.chunks_exact(w).enumerate() {
            let valid = match &validity {
                None => true,
                Some((bits, _)) => bits.value(i),
            };
            if valid {
                let len = if cell[w - 1] != 0 {
                    w
                } else {
                    encoding::charn_len(cell)
                };
                self.data.extend_from_slice(&cell[..len]);
            }
            self.offsets.push(self.data.len() as i32);
        }
        match validity {
            None => self.nulls.append_n(n as usize, true),
            Some((bits, nulls)) => {
                self.nulls.append_buffer(&bits);
                self.null_count += nulls;
            }
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
                self.append_null();
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

    /// Gathered values (a frozen block): the range's values lie back to back in the var area,
    /// so they are copied at once and the offsets follow from the entries.
    fn push_range(&mut self, b: BlockRef, c: &ColDesc, first: u32, n: u32) -> bool {
        if c.kind == KIND_CHARN && self.valid {
            self.push_charn_range(b, c, first, n);
            return true;
        }
        if c.kind != KIND_VAR || !self.valid || n == 0 {
            return false;
        }
        // one pass over the entries: contiguous, nothing stored raw?
        let (mut start, mut next) = (u32::MAX, u32::MAX);
        for s in first..first + n {
            if !b.is_valid(c, s) {
                continue;
            }
            let (off, len) = b.var_entry(c, s);
            if len & VAR_RAW != 0 || (next != u32::MAX && off != next) {
                return false;
            }
            if start == u32::MAX {
                start = off;
            }
            next = off + len;
        }
        let base = self.data.len();
        if start != u32::MAX {
            if base + (next - start) as usize > i32::MAX as usize {
                batch_too_large(&self.name);
            }
            // SAFETY: [start, next) lies inside the block's var area
            self.data.extend_from_slice(unsafe {
                std::slice::from_raw_parts(b.base.add(start as usize), (next - start) as usize)
            });
        }
        self.offsets.reserve(n as usize);
        let mut end = base as i32;
        for s in first..first + n {
            if b.is_valid(c, s) {
                let (off, len) = b.var_entry(c, s);
                end = (base + (off - start + len) as usize) as i32;
            }
            self.offsets.push(end);
        }
        match super::range_validity(b, c, first, n) {
            None => self.nulls.append_n(n as usize, true),
            Some((bits, nulls)) => {
                self.nulls.append_buffer(&bits);
                self.null_count += nulls;
            }
        }
        true
    }

    unsafe fn push_datum(&mut self, d: pg_sys::Datum, isnull: bool) {
        if isnull {
            self.append_null();
        } else if self.cstring {
            let v = unsafe { std::ffi::CStr::from_ptr(d.cast_mut_ptr()) };
            self.push_bytes(v.to_bytes());
        } else {
            let v = unsafe { varlena_bytes(d) };
            self.push_bytes(v);
        }
    }

    fn finish(&mut self) -> ArrayRef {
        let n = self.offsets.len() - 1;
        let offsets = std::mem::replace(&mut self.offsets, Vec::with_capacity(n + 1));
        self.offsets.push(0);
        let cap = self.data.len();
        let data = std::mem::replace(&mut self.data, Vec::with_capacity(cap));
        let nulls = self.nulls.finish();
        let nulls = (std::mem::take(&mut self.null_count) > 0)
            .then(|| arrow_buffer::NullBuffer::new(nulls));
        // SAFETY: offsets start at 0, never decrease and end at data.len(); the data is valid
        // UTF-8 (a UTF8 database's text, or checked value by value above)
        let offsets = unsafe {
            arrow_buffer::OffsetBuffer::new_unchecked(arrow_buffer::ScalarBuffer::from(offsets))
        };
        Arc::new(unsafe {
            arrow_array::StringArray::new_unchecked(
                offsets,
                arrow_buffer::Buffer::from_vec(data),
                nulls,
            )
        })
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
