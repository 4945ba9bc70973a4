//! Converting rows between executor slots and PAX blocks.
//!
//! Writing is two-phase: [`prepare`] deforms the slot and detoasts variable-length values in
//! backend memory *before* any block lock is taken (detoasting may read TOAST tables and fail);
//! [`write_row`] then copies the prepared values into a slot of a locked block.
//! Reading ([`read_row`]) copies one row into a virtual slot; by-reference values are copied into
//! one buffer owned by the slot, so nothing points into the arena after the block lock is gone.
use crate::ffi;
use crate::storage::block::{
    AttrSpec, BlockRef, ColDesc, KIND_ABSENT, KIND_CSTRING, KIND_FIXED, KIND_VAR,
};
use pgrx::pg_sys;

fn typalign_bytes(c: std::ffi::c_char) -> u8 {
    match c as u8 {
        b'c' => 1,
        b's' => 2,
        b'i' => 4,
        _ => 8,
    }
}

/// Attribute specs of a tuple descriptor, for `block::Layout::compute`.
pub unsafe fn attr_specs(td: pg_sys::TupleDesc) -> Vec<AttrSpec> {
    unsafe {
        let n = (*td).natts as usize;
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            let a = &*ffi::tupdesc_attr(td, i);
            let est = if a.attlen < 0 {
                let typmod = a.atttypmod;
                if typmod > 4
                    && (a.atttypid == pg_sys::BPCHAROID || a.atttypid == pg_sys::VARCHAROID)
                {
                    (typmod - 4) as u32
                } else {
                    32
                }
            } else {
                0
            };
            v.push(AttrSpec {
                attlen: a.attlen,
                byval: a.attbyval,
                align: typalign_bytes(a.attalign),
                dropped: a.attisdropped,
                est_var: est,
            });
        }
        v
    }
}

pub enum Val {
    Null,
    ByVal(pg_sys::Datum),
    /// fixed-length by-reference value (attlen bytes) or a variable-length payload
    Bytes(*const u8, u32),
}

/// A row ready to be copied into a block.
pub struct Prepared {
    pub vals: Vec<Val>,
    pub var_bytes: u32,
}

/// Deforms `slot` and detoasts its variable-length values (in CurrentMemoryContext).
pub unsafe fn prepare(slot: *mut pg_sys::TupleTableSlot) -> Prepared {
    unsafe {
        ffi::slot_getallattrs(slot);
        let td = (*slot).tts_tupleDescriptor;
        let n = (*td).natts as usize;
        let mut vals = Vec::with_capacity(n);
        let mut var_bytes = 0u32;
        for i in 0..n {
            let a = &*ffi::tupdesc_attr(td, i);
            let isnull = *(*slot).tts_isnull.add(i);
            let d = *(*slot).tts_values.add(i);
            if isnull || a.attisdropped {
                vals.push(Val::Null);
                continue;
            }
            if a.attbyval {
                vals.push(Val::ByVal(d));
            } else if a.attlen > 0 {
                vals.push(Val::Bytes(d.cast_mut_ptr::<u8>(), a.attlen as u32));
            } else if a.attlen == -1 {
                let v = pg_sys::pg_detoast_datum_packed(d.cast_mut_ptr::<pg_sys::varlena>());
                let len = pgrx::varlena::varsize_any_exhdr(v) as u32;
                let p = pgrx::varlena::vardata_any(v) as *const u8;
                var_bytes += len;
                vals.push(Val::Bytes(p, len));
            } else {
                let p = d.cast_mut_ptr::<std::ffi::c_char>();
                let len = std::ffi::CStr::from_ptr(p).to_bytes_with_nul().len() as u32;
                var_bytes += len;
                vals.push(Val::Bytes(p as *const u8, len));
            }
        }
        Prepared { vals, var_bytes }
    }
}

/// Copies a prepared row into `slot` of block `b` (formatted for the same natts). Variable-length
/// payloads are placed just below `var_low`; returns the new `var_low`. Caller checked the space.
pub unsafe fn write_row(b: BlockRef, slot: u32, row: &Prepared, mut var_low: u32) -> u32 {
    unsafe {
        for (i, v) in row.vals.iter().enumerate() {
            let c: ColDesc = *b.col(i);
            if c.kind == KIND_ABSENT {
                continue;
            }
            match v {
                Val::Null => {
                    b.set_valid(&c, slot, false);
                    // keep the value bytes deterministic (frozen blocks export them as-is)
                    std::ptr::write_bytes(b.value_ptr(&c, slot), 0, c.width as usize);
                }
                Val::ByVal(d) => {
                    b.set_valid(&c, slot, true);
                    let p = b.value_ptr(&c, slot);
                    let raw = d.value() as u64;
                    match c.attlen {
                        1 => *p = raw as u8,
                        2 => (p as *mut u16).write_unaligned(raw as u16),
                        4 => (p as *mut u32).write_unaligned(raw as u32),
                        8 => (p as *mut u64).write_unaligned(raw),
                        _ => std::ptr::copy_nonoverlapping(
                            &raw as *const u64 as *const u8,
                            p,
                            c.attlen as usize,
                        ),
                    }
                }
                Val::Bytes(src, len) => {
                    b.set_valid(&c, slot, true);
                    if c.kind == KIND_FIXED {
                        std::ptr::copy_nonoverlapping(*src, b.value_ptr(&c, slot), *len as usize);
                    } else {
                        var_low -= *len;
                        std::ptr::copy_nonoverlapping(
                            *src,
                            b.base.add(var_low as usize),
                            *len as usize,
                        );
                        b.set_var_entry(&c, slot, var_low, *len);
                    }
                }
            }
        }
        var_low
    }
}

#[inline]
fn align_to(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}

/// Copies row `slot` of block `b` into the virtual slot `out` (tts_tid is set by the caller).
/// Columns the block has no storage for (added later by ALTER TABLE) get their missing value.
pub unsafe fn read_row(b: BlockRef, slot: u32, out: *mut pg_sys::TupleTableSlot) {
    unsafe {
        ffi::exec_clear_tuple(out);
        let td = (*out).tts_tupleDescriptor;
        let natts = (*td).natts as usize;
        let nb = b.natts().min(natts);
        // pass 1: size of by-reference data
        let mut size = 0usize;
        for i in 0..nb {
            let c = b.col(i);
            if c.kind == KIND_ABSENT || c.byval != 0 || !b.is_valid(c, slot) {
                continue;
            }
            let a = &*ffi::tupdesc_attr(td, i);
            match c.kind {
                KIND_FIXED => {
                    size = align_to(size, typalign_bytes(a.attalign) as usize) + c.attlen as usize
                }
                KIND_VAR => size = align_to(size, 4) + b.var_entry(c, slot).1 as usize + 4,
                _ => size += b.var_entry(c, slot).1 as usize,
            }
        }
        // by-reference values go to the scoot slot's reusable buffer, or (other slot types) to a
        // buffer the virtual slot frees on clear
        let (buf, owned) = if size == 0 {
            (std::ptr::null_mut(), false)
        } else if let Some(b) = crate::am::slot::reusable_buffer(out, size) {
            (b, false)
        } else {
            (
                pg_sys::MemoryContextAlloc((*out).tts_mcxt, size) as *mut u8,
                true,
            )
        };
        let values = (*out).tts_values;
        let isnull = (*out).tts_isnull;
        let mut pos = 0usize;
        for i in 0..nb {
            let c = b.col(i);
            if !b.is_valid(c, slot) {
                *isnull.add(i) = true;
                *values.add(i) = pg_sys::Datum::from(0usize);
                continue;
            }
            *isnull.add(i) = false;
            let p = b.value_ptr(c, slot);
            let d = match c.kind {
                KIND_FIXED if c.byval != 0 => match c.attlen {
                    1 => pg_sys::Datum::from(*(p as *const i8) as isize),
                    2 => pg_sys::Datum::from((p as *const i16).read_unaligned() as isize),
                    4 => pg_sys::Datum::from((p as *const i32).read_unaligned() as isize),
                    _ => pg_sys::Datum::from((p as *const i64).read_unaligned() as isize),
                },
                KIND_FIXED => {
                    let a = &*ffi::tupdesc_attr(td, i);
                    pos = align_to(pos, typalign_bytes(a.attalign) as usize);
                    let dst = buf.add(pos);
                    std::ptr::copy_nonoverlapping(p, dst, c.attlen as usize);
                    pos += c.attlen as usize;
                    pg_sys::Datum::from(dst)
                }
                KIND_VAR => {
                    let (off, len) = b.var_entry(c, slot);
                    pos = align_to(pos, 4);
                    let dst = buf.add(pos);
                    // 4-byte varlena header: (len + 4) << 2 on little-endian
                    (dst as *mut u32).write(((len + 4) as u32) << 2);
                    std::ptr::copy_nonoverlapping(
                        b.base.add(off as usize),
                        dst.add(4),
                        len as usize,
                    );
                    pos += len as usize + 4;
                    pg_sys::Datum::from(dst)
                }
                KIND_CSTRING => {
                    let (off, len) = b.var_entry(c, slot);
                    let dst = buf.add(pos);
                    std::ptr::copy_nonoverlapping(b.base.add(off as usize), dst, len as usize);
                    pos += len as usize;
                    pg_sys::Datum::from(dst)
                }
                _ => unreachable!(),
            };
            *values.add(i) = d;
        }
        // dropped columns beyond the block's storage are NULL; added columns get their default
        if nb < natts {
            pg_sys::slot_getmissingattrs(out, nb as i32, natts as i32);
        }
        pg_sys::ExecStoreVirtualTuple(out);
        crate::am::slot::set_sysattrs(out, b.row(slot));
        if owned {
            let v = out as *mut pg_sys::VirtualTupleTableSlot;
            (*v).data = buf as *mut std::ffi::c_char;
            (*out).tts_flags |= ffi::TTS_FLAG_SHOULDFREE;
        }
    }
}

/// Does a row's value at attribute `i` equal the prepared value? (for HOT decisions)
pub unsafe fn value_equals(b: BlockRef, slot: u32, i: usize, v: &Val) -> bool {
    unsafe {
        if i >= b.natts() {
            return false;
        }
        let c = b.col(i);
        let valid = b.is_valid(c, slot);
        match v {
            Val::Null => !valid,
            _ if !valid => false,
            Val::ByVal(d) => {
                let p = b.value_ptr(c, slot);
                let raw = d.value() as u64;
                match c.attlen {
                    1 => *p == raw as u8,
                    2 => (p as *const u16).read_unaligned() == raw as u16,
                    4 => (p as *const u32).read_unaligned() == raw as u32,
                    _ => (p as *const u64).read_unaligned() == raw,
                }
            }
            Val::Bytes(src, len) => {
                let (p, l) = if c.kind == KIND_FIXED {
                    (b.value_ptr(c, slot) as *const u8, c.attlen as u32)
                } else {
                    let (off, l) = b.var_entry(c, slot);
                    (b.base.add(off as usize) as *const u8, l)
                };
                l == *len
                    && std::slice::from_raw_parts(p, l as usize)
                        == std::slice::from_raw_parts(*src, *len as usize)
            }
        }
    }
}
