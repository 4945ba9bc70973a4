//! Converting rows between executor slots and PAX blocks.
//!
//! Writing is two-phase: [`prepare`] deforms the slot, runs PostgreSQL's TOAST logic where heap
//! would (values of wide rows compressed with the column's compression method or moved to the
//! table's TOAST relation) and encodes every value for the table's current block layout, all in
//! backend memory *before* any block lock is taken; [`write_row`] then copies the prepared cells
//! into a slot of a locked block formatted with that layout.
//!
//! Reading ([`read_row`]) copies one row into a virtual slot; by-reference values are rebuilt in
//! one buffer owned by the slot, each aligned to its type's alignment (as heap's tuple deforming
//! hands them out), so nothing points into the arena after the block lock is gone.
use crate::ffi;
use crate::ffi::guard::{self, raw};
use crate::storage::block::*;
use crate::storage::cow;
use crate::storage::encoding;
use crate::storage::tabledir::TableRef;
use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;

// ---------------------------------------------------------------- varlena headers (little endian)

pub mod varlena {
    /// 1-byte header, external (TOAST pointer / indirect / expanded)
    #[inline]
    pub unsafe fn is_external(p: *const u8) -> bool {
        unsafe { *p == 0x01 }
    }
    #[inline]
    pub unsafe fn is_1b(p: *const u8) -> bool {
        unsafe { *p & 0x01 == 0x01 }
    }
    /// 4-byte header, compressed inline
    #[inline]
    pub unsafe fn is_compressed(p: *const u8) -> bool {
        unsafe { *p & 0x03 == 0x02 }
    }
    pub const VARTAG_ONDISK: u8 = 18;
    #[inline]
    pub unsafe fn is_external_ondisk(p: *const u8) -> bool {
        unsafe { is_external(p) && *p.add(1) == VARTAG_ONDISK }
    }
    #[inline]
    pub unsafe fn is_external_expanded(p: *const u8) -> bool {
        unsafe { is_external(p) && (*p.add(1) == 2 || *p.add(1) == 3) }
    }
    /// Total size including the header.
    #[inline]
    pub unsafe fn size_any(p: *const u8) -> usize {
        unsafe {
            if is_external(p) {
                2 + match *p.add(1) {
                    VARTAG_ONDISK => 16,
                    _ => std::mem::size_of::<usize>(),
                }
            } else if is_1b(p) {
                ((*p >> 1) & 0x7F) as usize
            } else {
                ((p as *const u32).read_unaligned() >> 2) as usize
            }
        }
    }
    #[inline]
    pub unsafe fn header_size(p: *const u8) -> usize {
        unsafe {
            if is_1b(p) {
                1
            } else {
                4
            }
        }
    }
}

fn typalign_bytes(c: std::ffi::c_char) -> u8 {
    match c as u8 {
        b'c' => 1,
        b's' => 2,
        b'i' => 4,
        _ => 8,
    }
}

#[inline]
fn align_to(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}

/// Inline `char(n)` up to this many characters (bytes in the block: n; longer or multibyte
/// values switch the table's column to VAR for new blocks).
const CHARN_MAX_BPCHAR: i32 = 128;
/// Inline `varchar(n)` up to this n (short strings: NUL padding costs less than an 8-byte entry).
const CHARN_MAX_VARCHAR: i32 = 16;

/// The compact encoding a column's type allows (before the table's VAR fallbacks).
unsafe fn preferred_enc(a: &pg_sys::FormData_pg_attribute) -> Enc {
    if a.attisdropped {
        return Enc::Absent;
    }
    match a.attlen {
        -2 => Enc::CString,
        -1 => {
            let typmod = a.atttypmod;
            if a.atttypid == pg_sys::NUMERICOID && typmod >= 4 {
                // typmod = ((precision << 16) | (scale & 0x7ff)) + VARHDRSZ
                let tm = typmod - 4;
                let precision = (tm >> 16) & 0xffff;
                let scale = ((tm & 0x7ff) ^ 1024) - 1024;
                if (0..=precision).contains(&scale) {
                    if precision <= 18 {
                        return Enc::Dec64 { scale: scale as u8 };
                    }
                    if precision <= 38 {
                        return Enc::Dec128 { scale: scale as u8 };
                    }
                }
                return Enc::Var;
            }
            if a.attstorage != pg_sys::TYPSTORAGE_PLAIN as std::ffi::c_char && typmod > 4 {
                let n = typmod - 4;
                if (a.atttypid == pg_sys::BPCHAROID && n <= CHARN_MAX_BPCHAR)
                    || (a.atttypid == pg_sys::VARCHAROID && n <= CHARN_MAX_VARCHAR)
                {
                    return Enc::CharN { width: n as u16 };
                }
            }
            Enc::Var
        }
        _ => Enc::Fixed,
    }
}

/// Attribute specs of a tuple descriptor for `Layout::compute`; columns in `var_mask` (and columns
/// past bit 63 that would need the mask) fall back to VAR.
pub unsafe fn attr_specs(td: pg_sys::TupleDesc, var_mask: u64) -> Vec<AttrSpec> {
    unsafe {
        let n = (*td).natts as usize;
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            let a = &*ffi::tupdesc_attr(td, i);
            let mut enc = preferred_enc(a);
            // compact encodings need a fallback bit in the table's var_mask: columns 0..=62 only
            if matches!(
                enc,
                Enc::CharN { .. } | Enc::Dec64 { .. } | Enc::Dec128 { .. }
            ) && (i >= 63 || var_mask & (1 << i) != 0)
            {
                enc = Enc::Var;
            }
            let est = if a.attlen < 0 {
                let typmod = a.atttypmod;
                if typmod > 4
                    && (a.atttypid == pg_sys::BPCHAROID || a.atttypid == pg_sys::VARCHAROID)
                {
                    ((typmod - 4) as u32).min(256)
                } else {
                    32
                }
            } else {
                0
            };
            let zorder = match (enc, a.atttypid) {
                (Enc::Fixed, pg_sys::FLOAT4OID | pg_sys::FLOAT8OID) => ZORDER_FLOAT,
                (Enc::Var | Enc::CharN { .. }, pg_sys::TEXTOID | pg_sys::VARCHAROID) => {
                    ZORDER_BYTES
                }
                (Enc::Var | Enc::CharN { .. }, pg_sys::BPCHAROID) => ZORDER_BPCHAR,
                _ => 0,
            };
            v.push(AttrSpec {
                attlen: a.attlen,
                byval: a.attbyval,
                align: typalign_bytes(a.attalign),
                enc,
                est_var: est,
                zorder,
            });
        }
        v
    }
}

thread_local! {
    /// Layouts this backend computed, by (table id, generation, spec hash).
    static LAYOUTS: RefCell<HashMap<(u32, u32, u64), Rc<Layout>>> = RefCell::new(HashMap::new());
    /// The entry of `LAYOUTS` found last.
    static LAST_LAYOUT: RefCell<Option<((u32, u32, u64), Rc<Layout>)>> = const { RefCell::new(None) };
}

fn spec_hash(specs: &[AttrSpec]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for s in specs {
        let (k, w, sc) = match s.enc {
            Enc::Absent => (0u64, 0u64, 0u64),
            Enc::Fixed => (1, 0, 0),
            Enc::Var => (2, 0, 0),
            Enc::CString => (3, 0, 0),
            Enc::Dec64 { scale } => (4, 0, scale as u64),
            Enc::Dec128 { scale } => (5, 0, scale as u64),
            Enc::CharN { width } => (6, width as u64, 0),
        };
        for v in [
            k,
            w,
            sc,
            s.attlen as u16 as u64,
            s.est_var as u64,
            s.align as u64,
            s.zorder as u64,
        ] {
            h = (h ^ v).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The layout new blocks of `t` get: the relation's tuple descriptor with the table's VAR
/// fallbacks. None if not even one row fits a block.
pub unsafe fn current_layout(rel: pg_sys::Relation, t: TableRef) -> Option<Rc<Layout>> {
    unsafe {
        let var_mask = t.entry().var_mask.load(Ordering::Acquire);
        if let Some(h) = crate::storage::tabledir::cached_spec_hash(rel, t, var_mask) {
            let key = (t.id, t.gen, h);
            // the layout of the last lookup: a COPY or INSERT asks for the same one every row
            if let Some(l) = LAST_LAYOUT.with(|c| {
                let c = c.borrow();
                c.as_ref()
                    .filter(|(k, _)| *k == key)
                    .map(|(_, l)| l.clone())
            }) {
                return Some(l);
            }
            if let Some(l) = LAYOUTS.with(|m| m.borrow().get(&key).cloned()) {
                LAST_LAYOUT.with(|c| *c.borrow_mut() = Some((key, l.clone())));
                return Some(l);
            }
        }
        let specs = attr_specs((*rel).rd_att, var_mask);
        let key = (t.id, t.gen, spec_hash(&specs));
        crate::storage::tabledir::cache_spec_hash(rel, t, var_mask, key.2);
        if let Some(l) = LAYOUTS.with(|m| m.borrow().get(&key).cloned()) {
            return Some(l);
        }
        let l = Rc::new(Layout::compute(
            &specs,
            crate::storage::arena::block_size(),
            crate::storage::arena::max_rows(),
        )?);
        LAYOUTS.with(|m| {
            let mut m = m.borrow_mut();
            if m.len() > 1024 {
                m.clear();
            }
            m.insert(key, l.clone());
        });
        Some(l)
    }
}

/// One value, encoded for a column of a layout.
#[derive(Clone, Copy)]
pub enum Cell {
    Null,
    /// by-value fixed-width datum
    ByVal(pg_sys::Datum),
    /// by-reference fixed-width value (attlen bytes)
    Fixed(*const u8),
    Dec64(i64),
    Dec128(i128),
    /// char(n) bytes (stored NUL-padded)
    CharN(*const u8, u32),
    /// var-area payload: the value without its header, or (raw) a complete varlena
    Var(*const u8, u32, bool),
    /// cstring bytes including the terminating NUL
    CStr(*const u8, u32),
}

/// A row ready to be copied into a block of `layout`.
pub struct Prepared {
    pub cells: Vec<Cell>,
    /// var-area bytes the row needs
    pub var_bytes: u32,
    /// some value is a TOAST pointer into the table's TOAST relation
    pub has_external: bool,
    /// the values still need PostgreSQL's TOAST processing (only with `Toast::Defer`)
    pub needs_toast: bool,
    pub layout: Rc<Layout>,
}

/// How `prepare` treats values that heap would TOAST.
pub enum Toast {
    /// run the toaster now (INSERT, COPY, rewrites); heap_insert's options
    Now(i32),
    /// UPDATE: run it with the old version, after the old version is locked (the toaster deletes
    /// the old version's out-of-line values that the new version does not reuse)
    WithOld(pg_sys::HeapTuple),
    /// UPDATE, first look: only report whether the toaster must run
    Defer,
}

/// heap's TOAST_TUPLE_THRESHOLD for 8 kB pages
const TOAST_TUPLE_THRESHOLD: usize = 2032;

/// Deforms `slot`, applies TOAST like heap and encodes the values for `t`'s current layout (in
/// CurrentMemoryContext). A value that does not fit its compact encoding switches that column of
/// the table to VAR for new blocks.
pub unsafe fn prepare(
    rel: pg_sys::Relation,
    t: TableRef,
    slot: *mut pg_sys::TupleTableSlot,
    toast: Toast,
    old_has_external: bool,
) -> Prepared {
    unsafe {
        ffi::slot_getallattrs(slot);
        let td = (*slot).tts_tupleDescriptor;
        let n = (*td).natts as usize;
        let mut values = (*slot).tts_values;
        let mut isnull = (*slot).tts_isnull;
        // would heap toast this row?
        let mut has_ext = false;
        for i in 0..n {
            let a = &*ffi::tupdesc_attr(td, i);
            if a.attlen == -1 && !*isnull.add(i) && !a.attisdropped {
                let p = (*values.add(i)).cast_mut_ptr::<u8>() as *const u8;
                if varlena::is_external(p) {
                    has_ext = true;
                }
            }
        }
        let wide = || {
            let hdr = align_to(23 + n.div_ceil(8), 8);
            // an upper bound of heap's data size first (no value is external here: has_ext
            // decides before this runs): each value whole plus the most alignment padding
            // before it. Most rows are far below the threshold and need no exact size.
            let mut bound = 0usize;
            for i in 0..n {
                if *isnull.add(i) {
                    continue;
                }
                let a = &*ffi::tupdesc_attr(td, i);
                let p = (*values.add(i)).cast_mut_ptr::<u8>() as *const u8;
                bound += 7 + match a.attlen {
                    l if l > 0 => l as usize,
                    -1 => varlena::size_any(p),
                    _ => std::ffi::CStr::from_ptr(p as *const std::ffi::c_char).count_bytes() + 1,
                };
            }
            if hdr + bound <= TOAST_TUPLE_THRESHOLD {
                return false;
            }
            let data = pg_sys::heap_compute_data_size(td, values, isnull);
            hdr + data > TOAST_TUPLE_THRESHOLD
        };
        let relkind = (*(*rel).rd_rel).relkind as u8;
        let toastable = relkind == pg_sys::RELKIND_RELATION || relkind == pg_sys::RELKIND_MATVIEW;
        let needs_toast = toastable && (has_ext || old_has_external || wide());
        let mut deferred = false;
        if needs_toast {
            let oldtup = match toast {
                Toast::Now(_) => std::ptr::null_mut(),
                Toast::WithOld(o) => o,
                Toast::Defer => {
                    deferred = true;
                    std::ptr::null_mut()
                }
            };
            if !deferred {
                let options = match toast {
                    Toast::Now(o) => o,
                    _ => 0,
                };
                let tup = pg_sys::heap_form_tuple(td, values, isnull);
                let newtup =
                    guard::catch(|| raw::heap_toast_insert_or_update(rel, tup, oldtup, options));
                values =
                    pg_sys::palloc(n * std::mem::size_of::<pg_sys::Datum>()) as *mut pg_sys::Datum;
                isnull = pg_sys::palloc(n) as *mut bool;
                pg_sys::heap_deform_tuple(newtup, td, values, isnull);
            }
        }
        let mut p = encode(rel, t, td, values, isnull);
        p.needs_toast = deferred;
        p
    }
}

/// Encodes deformed values for the table's current layout, switching columns to VAR as needed.
unsafe fn encode(
    rel: pg_sys::Relation,
    t: TableRef,
    td: pg_sys::TupleDesc,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
) -> Prepared {
    unsafe {
        let n = (*td).natts as usize;
        loop {
            let Some(layout) = current_layout(rel, t) else {
                crate::ffi::error_hint(
                    pgrx::PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                    format!(
                        "table \"{}\" has too many columns for a scoot block",
                        ffi::rel_name(rel)
                    ),
                    "Increase scoot.block_size.",
                );
            };
            let mut cells = Vec::with_capacity(n);
            let mut var_bytes = 0u32;
            let mut has_external = false;
            let mut misfit: u64 = 0;
            for i in 0..n {
                let c = &layout.cols[i];
                let a = &*ffi::tupdesc_attr(td, i);
                if *isnull.add(i) || c.kind == KIND_ABSENT || a.attisdropped {
                    cells.push(Cell::Null);
                    continue;
                }
                let d = *values.add(i);
                let cell = match c.kind {
                    KIND_FIXED if a.attbyval => Cell::ByVal(d),
                    KIND_FIXED => Cell::Fixed(d.cast_mut_ptr::<u8>()),
                    KIND_CSTRING => {
                        let p = d.cast_mut_ptr::<std::ffi::c_char>();
                        let len = std::ffi::CStr::from_ptr(p).to_bytes_with_nul().len() as u32;
                        var_bytes += len;
                        Cell::CStr(p as *const u8, len)
                    }
                    _ => {
                        // a varlena
                        let p = d.cast_mut_ptr::<u8>() as *const u8;
                        let raw = varlena::is_external(p) || varlena::is_compressed(p);
                        let (payload, plen) = if raw {
                            (p, varlena::size_any(p) as u32)
                        } else {
                            let h = varlena::header_size(p);
                            (p.add(h), (varlena::size_any(p) - h) as u32)
                        };
                        if raw && varlena::is_external(p) {
                            has_external = true;
                        }
                        let bytes = std::slice::from_raw_parts(payload, plen as usize);
                        let fit = match c.kind {
                            KIND_DEC64 if !raw => {
                                encoding::numeric_to_i64(bytes, c.scale as u32).map(Cell::Dec64)
                            }
                            KIND_DEC128 if !raw => {
                                encoding::numeric_to_i128(bytes, c.scale as u32).map(Cell::Dec128)
                            }
                            KIND_CHARN if !raw && encoding::charn_fits(bytes, c.width as usize) => {
                                Some(Cell::CharN(payload, plen))
                            }
                            KIND_VAR => Some(Cell::Var(payload, plen, raw)),
                            _ => None,
                        };
                        match fit {
                            Some(cell) => {
                                if let Cell::Var(_, l, _) = cell {
                                    var_bytes += l;
                                }
                                cell
                            }
                            None => {
                                misfit |= 1u64 << i;
                                Cell::Null
                            }
                        }
                    }
                };
                cells.push(cell);
            }
            if misfit != 0 {
                // the value does not fit this column's compact encoding: store the column as VAR
                // in new blocks of this table (old blocks keep their encoding)
                t.entry().var_mask.fetch_or(misfit, Ordering::AcqRel);
                continue;
            }
            return Prepared {
                cells,
                var_bytes,
                has_external,
                needs_toast: false,
                layout,
            };
        }
    }
}

/// One column of a row being written by [`write_row`].
#[derive(Clone, Copy)]
struct CellWrite {
    col: u32,
    /// the cell's offset in the block and its new bytes: `ROW_NEW[at..at + len]`
    off: u32,
    at: u32,
    len: u32,
    valid: bool,
    /// the cell's bytes differ from what the slot holds
    cell_changes: bool,
    /// the validity bit differs
    bit_changes: bool,
}

/// Scratch of [`write_row`] (one backend writes one row at a time): the new cell bytes, the
/// columns, the byte ranges to announce and the variable-length payloads (offset, length,
/// source).
static mut ROW_NEW: Vec<u8> = Vec::new();
static mut ROW_CELLS: Vec<CellWrite> = Vec::new();
static mut ROW_CHANGED: Vec<(u32, u32)> = Vec::new();
static mut ROW_VAR: Vec<(u32, u32, *const u8)> = Vec::new();

/// Copies a prepared row into `slot` of block `b` (formatted with `row.layout`). Variable-length
/// payloads are placed just below `var_low`; returns the new `var_low`. Caller checked the space.
/// `fresh`: the slot was never used since the block was formatted ([`write_row_all`]).
pub unsafe fn write_row(b: BlockRef, slot: u32, row: &Prepared, var_low: u32, fresh: bool) -> u32 {
    unsafe {
        if fresh {
            write_row_all(b, slot, row, var_low)
        } else {
            write_row_changed(b, slot, row, var_low)
        }
    }
}

/// [`write_row`] into a reused slot: only the bytes that change are written and announced (WAL
/// capture, snapshot pre-images): a slot is reused by the next version written to the block, and
/// its validity bits (almost always set already) and often some cells (a warehouse id, a zero
/// counter) hold the new values. The
/// WAL reproduces the block byte for byte, so a byte that does not change on the primary does not
/// change on a standby or in redo either. Announced together, in ascending order (each column's
/// validity bitmap precedes its values; the payloads, placed downwards, lowest first), before
/// anything is written.
unsafe fn write_row_changed(b: BlockRef, slot: u32, row: &Prepared, mut var_low: u32) -> u32 {
    unsafe {
        b.prefetch_row(slot, row.cells.len());
        let new = &mut *(&raw mut ROW_NEW);
        let cells = &mut *(&raw mut ROW_CELLS);
        let ranges = &mut *(&raw mut ROW_CHANGED);
        let var = &mut *(&raw mut ROW_VAR);
        new.clear();
        cells.clear();
        ranges.clear();
        var.clear();
        for (i, v) in row.cells.iter().enumerate() {
            let c: &ColDesc = b.col(i);
            if c.kind == KIND_ABSENT {
                continue;
            }
            let at = new.len();
            let valid = !matches!(v, Cell::Null);
            match *v {
                // zeroed: the value bytes stay deterministic (frozen blocks export them as-is)
                Cell::Null => new.resize(at + c.width as usize, 0),
                Cell::ByVal(d) => {
                    let raw = (d.value() as u64).to_ne_bytes();
                    new.extend_from_slice(&raw[..(c.attlen as usize).min(8)]);
                }
                Cell::Fixed(src) => {
                    new.extend_from_slice(std::slice::from_raw_parts(src, c.attlen as usize))
                }
                Cell::Dec64(x) => new.extend_from_slice(&x.to_ne_bytes()),
                Cell::Dec128(x) => new.extend_from_slice(&x.to_ne_bytes()),
                Cell::CharN(src, len) => {
                    new.extend_from_slice(std::slice::from_raw_parts(src, len as usize));
                    new.resize(at + c.width as usize, 0);
                }
                Cell::Var(src, len, raw) => {
                    var_low -= len;
                    var.push((var_low, len, src));
                    new.extend_from_slice(&var_low.to_ne_bytes());
                    new.extend_from_slice(&(len | if raw { VAR_RAW } else { 0 }).to_ne_bytes());
                }
                Cell::CStr(src, len) => {
                    var_low -= len;
                    var.push((var_low, len, src));
                    new.extend_from_slice(&var_low.to_ne_bytes());
                    new.extend_from_slice(&len.to_ne_bytes());
                }
            }
            let len = new.len() - at;
            let p = b.value_ptr(c, slot);
            let cell_changes = std::slice::from_raw_parts(p, len) != &new[at..];
            let bit_changes = b.is_valid(c, slot) != valid;
            if bit_changes {
                ranges.push((c.bitmap_off + (slot >> 3), 1));
            }
            let off = p as usize - b.base as usize;
            if cell_changes {
                ranges.push((off as u32, len as u32));
            }
            cells.push(CellWrite {
                col: i as u32,
                off: off as u32,
                at: at as u32,
                len: len as u32,
                valid,
                cell_changes,
                bit_changes,
            });
        }
        ranges.extend(var.iter().rev().map(|&(o, l, _)| (o, l)));
        // the announced bytes are written through `wb` (the block itself or its alias mapping,
        // see `cow::before_write_block_via`); everything else through `b`
        let wb = BlockRef {
            base: cow::before_write_block_via(b.base, ranges),
        };
        for &(o, l, src) in var.iter() {
            std::ptr::copy_nonoverlapping(src, wb.base.add(o as usize), l as usize);
        }
        for w in cells.iter() {
            if w.cell_changes {
                std::ptr::copy_nonoverlapping(
                    new.as_ptr().add(w.at as usize),
                    wb.base.add(w.off as usize),
                    w.len as usize,
                );
            }
            let i = w.col as usize;
            let c: &ColDesc = b.col(i);
            if w.bit_changes {
                wb.set_valid(c, slot, w.valid);
            }
        }
        // the zone maps read the values just written (through `b`: order the alias writes first)
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        for w in cells.iter() {
            if w.valid {
                let i = w.col as usize;
                widen_zone(b, b.col(i), i, slot);
            }
        }
        var_low
    }
}

/// The byte ranges [`write_row_all`] writes (zone maps aside), for the WAL capture and the
/// snapshots' pre-images: announced together before any is written.
static mut ROW_RANGES: Vec<(u32, u32)> = Vec::new();
/// ... and the variable-length payloads' ranges among them (see [`announce_row`]).
static mut ROW_VAR_RANGES: Vec<(u32, u32)> = Vec::new();

/// Announces the writes of [`write_row_all`] (same arguments) but the zone maps' (a zone is
/// widened rarely; that write announces itself): each column's cell and validity byte, and
/// the variable-length payloads placed below `var_low`. Returns the block to write them through
/// (`cow::before_write_block_via`).
unsafe fn announce_row(b: BlockRef, slot: u32, row: &Prepared, mut var_low: u32) -> BlockRef {
    unsafe {
        let rs = &mut *(&raw mut ROW_RANGES);
        let var = &mut *(&raw mut ROW_VAR_RANGES);
        rs.clear();
        var.clear();
        // ascending (each column's validity bitmap precedes its values; the payloads, placed
        // downwards from `var_low`, are added last, lowest first): the capture's final sort then
        // finds the row's ranges in one run
        for (i, v) in row.cells.iter().enumerate() {
            let c: &ColDesc = b.col(i);
            if c.kind == KIND_ABSENT {
                continue;
            }
            let off = b.value_ptr(c, slot) as usize - b.base as usize;
            rs.push((c.bitmap_off + (slot >> 3), 1));
            rs.push((off as u32, c.width as u32));
            if let Cell::Var(_, len, _) | Cell::CStr(_, len) = *v {
                var_low -= len;
                var.push((var_low, len));
            }
        }
        rs.extend(var.iter().rev());
        BlockRef {
            base: cow::before_write_block_via(b.base, rs),
        }
    }
}

/// [`write_row`] into a slot never used since the block was formatted: every cell and validity
/// bit is written and announced (nothing to compare: a bulk load's rows go here, and comparing
/// first cost COPY a quarter of its time).
unsafe fn write_row_all(b: BlockRef, slot: u32, row: &Prepared, mut var_low: u32) -> u32 {
    unsafe {
        b.prefetch_row(slot, row.cells.len());
        // the announced bytes are written through `wb` (the block or its alias mapping)
        let wb = announce_row(b, slot, row, var_low);
        for (i, v) in row.cells.iter().enumerate() {
            let c: ColDesc = *b.col(i);
            if c.kind == KIND_ABSENT {
                continue;
            }
            let p = wb.value_ptr(&c, slot);
            match *v {
                Cell::Null => {
                    wb.set_valid(&c, slot, false);
                    // keep the value bytes deterministic (frozen blocks export them as-is)
                    std::ptr::write_bytes(p, 0, c.width as usize);
                    continue;
                }
                Cell::ByVal(d) => {
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
                Cell::Fixed(src) => std::ptr::copy_nonoverlapping(src, p, c.attlen as usize),
                Cell::Dec64(x) => (p as *mut i64).write_unaligned(x),
                Cell::Dec128(x) => (p as *mut i128).write_unaligned(x),
                Cell::CharN(src, len) => {
                    std::ptr::copy_nonoverlapping(src, p, len as usize);
                    std::ptr::write_bytes(p.add(len as usize), 0, c.width as usize - len as usize);
                }
                Cell::Var(src, len, raw) => {
                    var_low -= len;
                    std::ptr::copy_nonoverlapping(src, wb.base.add(var_low as usize), len as usize);
                    wb.set_var_entry(&c, slot, var_low, len | if raw { VAR_RAW } else { 0 });
                }
                Cell::CStr(src, len) => {
                    var_low -= len;
                    std::ptr::copy_nonoverlapping(src, wb.base.add(var_low as usize), len as usize);
                    wb.set_var_entry(&c, slot, var_low, len);
                }
            }
            wb.set_valid(&c, slot, true);
            // the zone map reads the value just written through `b`
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
            widen_zone(b, &c, i, slot);
        }
        var_low
    }
}

/// Widens column `i`'s zone map to the value just written to `slot` (zoned columns only); the
/// zone's write announces itself (rare: only when the value falls outside it).
unsafe fn widen_zone(b: BlockRef, c: &ColDesc, i: usize, slot: u32) {
    if !zoned(c) {
        return;
    }
    unsafe {
        let (lo, hi) = b.zone_span(c, slot).unwrap_or_default();
        let z = b.zone(i);
        if lo < z.min || hi > z.max {
            cow::before_write(b.zone_ptr(i) as *const u8, std::mem::size_of::<Zone>());
            b.zone_ptr(i).write(Zone {
                min: z.min.min(lo),
                max: z.max.max(hi),
            });
        }
    }
}

/// A stored value as comparable bytes: (is raw varlena, bytes), the numeric/char encodings turned
/// back into their PostgreSQL payload.
fn stored_bytes<'a>(b: BlockRef, c: &ColDesc, slot: u32, buf: &'a mut Vec<u8>) -> (bool, &'a [u8]) {
    unsafe {
        let p = b.value_ptr(c, slot);
        match c.kind {
            KIND_FIXED => {
                buf.clear();
                buf.extend_from_slice(std::slice::from_raw_parts(p, c.attlen as usize));
                (false, &buf[..])
            }
            KIND_DEC64 => {
                encoding::i64_to_numeric((p as *const i64).read_unaligned(), c.scale as u32, buf);
                (false, &buf[..])
            }
            KIND_DEC128 => {
                encoding::i128_to_numeric((p as *const i128).read_unaligned(), c.scale as u32, buf);
                (false, &buf[..])
            }
            KIND_CHARN => {
                let cell = std::slice::from_raw_parts(p, c.width as usize);
                buf.clear();
                buf.extend_from_slice(&cell[..encoding::charn_len(cell)]);
                (false, &buf[..])
            }
            _ => {
                let (_, len) = b.var_entry(c, slot);
                buf.clear();
                buf.extend_from_slice(b.var_payload(c, slot));
                (len & VAR_RAW != 0, &buf[..])
            }
        }
    }
}

fn cell_bytes<'a>(
    cell: &Cell,
    attlen: i16,
    scale: u32,
    buf: &'a mut Vec<u8>,
) -> Option<(bool, &'a [u8])> {
    unsafe {
        buf.clear();
        match *cell {
            Cell::Null => return None,
            Cell::ByVal(d) => {
                let raw = (d.value() as u64).to_le_bytes();
                buf.extend_from_slice(&raw[..attlen as usize]);
            }
            Cell::Fixed(p) => buf.extend_from_slice(std::slice::from_raw_parts(p, attlen as usize)),
            Cell::Dec64(x) => encoding::i64_to_numeric(x, scale, buf),
            Cell::Dec128(x) => encoding::i128_to_numeric(x, scale, buf),
            Cell::CharN(p, l) | Cell::CStr(p, l) => {
                buf.extend_from_slice(std::slice::from_raw_parts(p, l as usize))
            }
            Cell::Var(p, l, raw) => {
                buf.extend_from_slice(std::slice::from_raw_parts(p, l as usize));
                return Some((raw, &buf[..]));
            }
        }
        Some((false, &buf[..]))
    }
}

/// Does a row's value at attribute `i` equal the prepared value? (for HOT decisions; compares the
/// stored representation like heap's datumIsEqual on the raw tuple values)
pub unsafe fn value_equals(b: BlockRef, slot: u32, i: usize, row: &Prepared) -> bool {
    if i >= b.natts() {
        return false;
    }
    let c = *b.col(i);
    let valid = b.is_valid(&c, slot);
    let cell = &row.cells[i];
    if !valid || matches!(cell, Cell::Null) {
        return !valid && matches!(cell, Cell::Null);
    }
    let mut b1 = Vec::new();
    let mut b2 = Vec::new();
    let stored = stored_bytes(b, &c, slot, &mut b1);
    let new = cell_bytes(cell, c.attlen, row.layout.cols[i].scale as u32, &mut b2);
    Some(stored) == new
}

/// An upper bound of the by-reference bytes value `slot` of column `c` takes when read (0 for
/// by-value columns and NULLs); each value is placed at its alignment on top of this.
#[inline]
pub fn value_size(b: BlockRef, c: &ColDesc, slot: u32) -> usize {
    if c.kind == KIND_ABSENT || c.byval != 0 || !b.is_valid(c, slot) {
        return 0;
    }
    match c.kind {
        KIND_FIXED => c.attlen as usize,
        KIND_DEC64 => 4 + encoding::max_numeric_payload(false),
        KIND_DEC128 => 4 + encoding::max_numeric_payload(true),
        KIND_CHARN => 4 + c.width as usize,
        KIND_VAR => 4 + (b.var_entry(c, slot).1 & VAR_LEN_MASK) as usize,
        _ => (b.var_entry(c, slot).1 & VAR_LEN_MASK) as usize,
    }
}

/// Puts a varlena as heap's tuples hold it at `buf + *pos`: a 1-byte header for short values of
/// non-PLAIN types (heap_fill_tuple's short form), else a 4-byte header at the type's alignment.
#[inline]
pub(crate) unsafe fn put_varlena(
    buf: *mut u8,
    pos: &mut usize,
    align: u8,
    short_ok: bool,
    payload: &[u8],
) -> pg_sys::Datum {
    unsafe {
        if short_ok && payload.len() < 127 {
            let dst = buf.add(*pos);
            *dst = (((payload.len() + 1) as u8) << 1) | 1;
            std::ptr::copy_nonoverlapping(payload.as_ptr(), dst.add(1), payload.len());
            *pos += payload.len() + 1;
            return pg_sys::Datum::from(dst);
        }
        *pos = align_to(*pos, align.max(1) as usize);
        let dst = buf.add(*pos);
        // 4-byte varlena header: (len + 4) << 2 on little-endian
        (dst as *mut u32).write_unaligned(((payload.len() + 4) as u32) << 2);
        std::ptr::copy_nonoverlapping(payload.as_ptr(), dst.add(4), payload.len());
        *pos += payload.len() + 4;
        pg_sys::Datum::from(dst)
    }
}

/// The datum of the valid (non-NULL) value `slot` of column `c`. By-reference values are copied
/// to `buf + *pos` (which must have room for [`value_size`] bytes plus alignment) and `*pos`
/// advances; `short_ok`: the type's storage is not PLAIN (1-byte varlena headers allowed);
/// `num`: scratch space for numeric conversions, reused across calls.
#[inline]
pub unsafe fn read_value(
    b: BlockRef,
    c: &ColDesc,
    slot: u32,
    short_ok: bool,
    buf: *mut u8,
    pos: &mut usize,
    num: &mut Vec<u8>,
) -> Option<pg_sys::Datum> {
    unsafe {
        let p = b.value_ptr(c, slot);
        Some(match c.kind {
            KIND_FIXED if c.byval != 0 => match c.attlen {
                1 => pg_sys::Datum::from(*(p as *const i8) as isize),
                2 => pg_sys::Datum::from((p as *const i16).read_unaligned() as isize),
                4 => pg_sys::Datum::from((p as *const i32).read_unaligned() as isize),
                _ => pg_sys::Datum::from((p as *const i64).read_unaligned() as isize),
            },
            KIND_FIXED => {
                *pos = align_to(*pos, c.align.max(1) as usize);
                let dst = buf.add(*pos);
                std::ptr::copy_nonoverlapping(p, dst, c.attlen as usize);
                *pos += c.attlen as usize;
                pg_sys::Datum::from(dst)
            }
            KIND_DEC64 => {
                encoding::i64_to_numeric((p as *const i64).read_unaligned(), c.scale as u32, num);
                put_varlena(buf, pos, c.align, short_ok, num)
            }
            KIND_DEC128 => {
                encoding::i128_to_numeric((p as *const i128).read_unaligned(), c.scale as u32, num);
                put_varlena(buf, pos, c.align, short_ok, num)
            }
            KIND_CHARN => {
                let cell = std::slice::from_raw_parts(p, c.width as usize);
                put_varlena(
                    buf,
                    pos,
                    c.align,
                    short_ok,
                    &cell[..encoding::charn_len(cell)],
                )
            }
            KIND_VAR => {
                let (_, len) = b.var_entry(c, slot);
                let payload = b.var_payload(c, slot);
                if len & VAR_RAW != 0 {
                    // a complete varlena (compressed or a TOAST pointer): as stored
                    if !varlena::is_1b(payload.as_ptr()) {
                        *pos = align_to(*pos, c.align.max(1) as usize);
                    }
                    let dst = buf.add(*pos);
                    std::ptr::copy_nonoverlapping(payload.as_ptr(), dst, payload.len());
                    *pos += payload.len();
                    pg_sys::Datum::from(dst)
                } else {
                    put_varlena(buf, pos, c.align, short_ok, payload)
                }
            }
            KIND_CSTRING => {
                let payload = b.var_payload(c, slot);
                let dst = buf.add(*pos);
                std::ptr::copy_nonoverlapping(payload.as_ptr(), dst, payload.len());
                *pos += payload.len();
                pg_sys::Datum::from(dst)
            }
            _ => return None,
        })
    }
}

/// May column `i` of `td` use 1-byte varlena headers (its storage is not PLAIN)?
#[inline]
pub unsafe fn short_ok(td: pg_sys::TupleDesc, i: usize) -> bool {
    unsafe {
        (*ffi::tupdesc_attr(td, i)).attstorage != pg_sys::TYPSTORAGE_PLAIN as std::ffi::c_char
    }
}

/// Should the values a scan hands out for column `i` (stored as `c`) have 1-byte varlena
/// headers? As heap's tuples hold them ([`short_ok`]), except numerics rebuilt from scaled
/// integers: numeric's functions take their arguments unpacked (PG_GETARG_NUMERIC), so every
/// short-header value a query computes on is copied into a palloc'd 4-byte-header one first
/// (detoast_attr: 12% of TPC-H Q1 over plain scans, heap's stored numerics included). A 4-byte
/// header is read in place.
#[inline]
pub unsafe fn scan_short_ok(td: pg_sys::TupleDesc, i: usize, c: &ColDesc) -> bool {
    c.kind != KIND_DEC64 && c.kind != KIND_DEC128 && unsafe { short_ok(td, i) }
}

/// Copies row `slot` of block `b` into the virtual slot `out` (tts_tid is set by the caller).
/// Columns the block has no storage for (added later by ALTER TABLE) get their missing value.
pub unsafe fn read_row(b: BlockRef, slot: u32, out: *mut pg_sys::TupleTableSlot) {
    unsafe {
        ffi::exec_clear_tuple(out);
        let td = (*out).tts_tupleDescriptor;
        let natts = (*td).natts as usize;
        let nb = b.natts().min(natts);
        b.prefetch_row(slot, nb);
        // pass 1: an upper bound of the by-reference bytes (each value at its alignment)
        let mut size = 0usize;
        for i in 0..nb {
            let c = b.col(i);
            let n = value_size(b, c, slot);
            if n > 0 {
                size = align_to(size, c.align.max(1) as usize) + n;
            }
        }
        // by-reference values go to the scoot slot's reusable buffer, or (other slot types) to a
        // buffer the virtual slot frees on clear
        let (buf, owned) = if size == 0 {
            (std::ptr::null_mut(), false)
        } else if let Some(b) = crate::storage::slot::reusable_buffer(out, size) {
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
        let mut num = Vec::new();
        for i in 0..nb {
            let c = b.col(i);
            let d = if b.is_valid(c, slot) {
                read_value(b, c, slot, scan_short_ok(td, i, c), buf, &mut pos, &mut num)
            } else {
                None
            };
            *isnull.add(i) = d.is_none();
            *values.add(i) = d.unwrap_or(pg_sys::Datum::from(0usize));
        }
        debug_assert!(pos <= size);
        // dropped columns beyond the block's storage are NULL; added columns get their default
        if nb < natts {
            pg_sys::slot_getmissingattrs(out, nb as i32, natts as i32);
        }
        pg_sys::ExecStoreVirtualTuple(out);
        crate::storage::slot::set_sysattrs(out, b.row(slot));
        if owned {
            let v = out as *mut pg_sys::VirtualTupleTableSlot;
            (*v).data = buf as *mut std::ffi::c_char;
            (*out).tts_flags |= ffi::TTS_FLAG_SHOULDFREE;
        }
    }
}

/// The out-of-line (TOAST pointer) values of a row, copied out of the block.
pub fn external_values(b: BlockRef, slot: u32) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for i in 0..b.natts() {
        let c = b.col(i);
        if c.kind == KIND_VAR && b.is_valid(c, slot) {
            let (_, len) = b.var_entry(c, slot);
            let payload = b.var_payload(c, slot);
            if len & VAR_RAW != 0 && unsafe { varlena::is_external_ondisk(payload.as_ptr()) } {
                v.push(payload.to_vec());
            }
        }
    }
    v
}

/// Deletes out-of-line values from the table's TOAST relation (heap_toast_delete's job: DELETE,
/// an UPDATE's replaced values are handled by the toaster itself, aborted speculative inserts).
pub fn delete_external(rel: pg_sys::Relation, values: &[Vec<u8>], speculative: bool) {
    for v in values {
        let d = pg_sys::Datum::from(v.as_ptr());
        guard::catch(|| unsafe { raw::toast_delete_datum(rel, d, speculative) });
    }
}

/// heap's rule for whether a table gets a TOAST relation (heapam_relation_needs_toast_table).
pub unsafe fn needs_toast_table(rel: pg_sys::Relation) -> bool {
    unsafe {
        let td = (*rel).rd_att;
        let mut data_length: i32 = 0;
        let mut maxlength_unknown = false;
        let mut has_toastable = false;
        for i in 0..(*td).natts as usize {
            let a = &*ffi::tupdesc_attr(td, i);
            if a.attisdropped {
                continue;
            }
            let al = typalign_bytes(a.attalign) as i32;
            data_length = (data_length + al - 1) & !(al - 1);
            if a.attlen > 0 {
                data_length += a.attlen as i32;
            } else {
                let maxlen = pg_sys::type_maximum_size(a.atttypid, a.atttypmod);
                if maxlen < 0 {
                    maxlength_unknown = true;
                } else {
                    data_length += maxlen;
                }
                if a.attstorage != pg_sys::TYPSTORAGE_PLAIN as std::ffi::c_char {
                    has_toastable = true;
                }
            }
        }
        if !has_toastable {
            return false;
        }
        if maxlength_unknown {
            return true;
        }
        let natts = (*td).natts as usize;
        let tuple_length = align_to(23 + natts.div_ceil(8), 8) + align_to(data_length as usize, 8);
        tuple_length > TOAST_TUPLE_THRESHOLD
    }
}
