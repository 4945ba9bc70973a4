//! The scoot WAL records: encoding (plain Rust), insertion (`XLogInsert`) and redo.
//!
//! One record per exclusive block lock that changed something (`storage::changes`): the table
//! key, the table-local block number, the block descriptor's persistent fields *after* the
//! change, and the after-images of the changed byte ranges (runs of zeros are stored as their
//! length only, so formatting a block logs its header, not its empty regions). Redo copies the
//! bytes and sets the descriptor: it is idempotent, and the result does not depend on the state
//! the block had, only on the records before it being applied in order.
//!
//! | info | record | redo |
//! |---|---|---|
//! | `BLOCK` | key, lb, var_mask, BlockMeta, runs | allocate the block if the table has no block `lb`, copy the runs, set the descriptor |
//! | `BLOCK_V` | the same, every integer a LEB128 varint (what is written now: ~40% smaller for a row's change) | as `BLOCK` |
//! | `FREE` | key, lb | return the block to the arena |
//! | `FREE_ALL` | key | free every block of the table (TRUNCATE, DROP) |
//! | `REKEY` | old key, new key | the table's rows belong to the new relfilenode (SET TABLESPACE) |
//! | `CONFLICT` | key, xid | on a hot standby: cancel the queries whose snapshots may still see versions `xid` wrote or deleted (they are pruned or frozen by the next BLOCK record) |
//! | `BLOCK_VC` | xid, then a `BLOCK_V` | `CONFLICT` for the block's table, then `BLOCK_V` (what is written now for a change that removes or freezes versions) |
//! | `BLOCK_VX` | a `BLOCK_V`, then copy runs (destination, length, source; varints) | as `BLOCK_V`, then each copy run copies `length` bytes of the block from `source` to `destination` |
//! | `BLOCK_VXC` | xid, then a `BLOCK_VX` | `CONFLICT`, then `BLOCK_VX` |
//!
//! Copy runs: an UPDATE whose new version lands in its old version's block writes the whole new
//! row, most of it the same bytes as the old version's (TPC-C's customer update changes three
//! numbers of a row with a 500-byte `c_data`). The storage layer names such (new, old) row
//! pairs ([`changes::note_copy`]); where a cell or a variable-length payload of the new row is
//! byte for byte the old one's, the record says "copy these bytes from there" instead of
//! carrying them. A copy's source lies outside everything the record changes, so at redo it
//! holds what it held when the record was written: redo applies the records of a block in
//! order from an image stamped exactly at its WAL position (as `COMPACT`'s redo already
//! relies on), so a block's bytes before a record are the bytes it had when the record was
//! written — except for what changes without WAL (hint bits of row headers under a shared lock),
//! which is why sources are only value cells and payloads.
//!
//! On a hot standby redo runs while queries read the arena: it then takes the block's lock
//! exclusively and the allocation lock, as a writing backend does ([`apply`] with `hot`).
use crate::storage::arena;
use crate::storage::block::{BlockRef, KIND_ABSENT, KIND_CSTRING, KIND_VAR, VAR_LEN_MASK};
use crate::storage::changes;
use crate::storage::tabledir::{self, RelKey, TableRef};
use crate::wal::checkpoint_image::{BlockMeta, Dec, Enc};
use pgrx::pg_sys;
use std::sync::atomic::Ordering;

/// The custom resource manager id (PostgreSQL reserves 128..=255 for extensions; 128 is the
/// "experimental" id, this one is pg_scoot's).
pub const RM_SCOOT_ID: u8 = 143;
pub const RM_NAME: &std::ffi::CStr = c"pg_scoot";

pub const XLOG_SCOOT_BLOCK: u8 = 0x00;
pub const XLOG_SCOOT_FREE: u8 = 0x10;
pub const XLOG_SCOOT_FREE_ALL: u8 = 0x20;
pub const XLOG_SCOOT_REKEY: u8 = 0x30;
/// BLOCK in the compact encoding (variable-length integers; what the server writes now).
pub const XLOG_SCOOT_BLOCK_V: u8 = 0x40;
/// Before a BLOCK record that removes or freezes row versions: the newest xid involved (a hot
/// standby cancels the queries that may still need them, like heap's latestRemovedXid).
pub const XLOG_SCOOT_CONFLICT: u8 = 0x50;
/// The variable-length area of a block was compacted below a high-water mark (redo repeats it).
pub const XLOG_SCOOT_COMPACT: u8 = 0x60;
/// CONFLICT and BLOCK_V in one record: the conflict xid (4 bytes, little-endian), then the
/// BLOCK_V payload (what a pruning, freeing or freezing lock session writes now: one record
/// instead of two; TPC-C wrote ten CONFLICT records per transaction).
pub const XLOG_SCOOT_BLOCK_VC: u8 = 0x70;
/// BLOCK_V followed by copy runs (see the module header).
pub const XLOG_SCOOT_BLOCK_VX: u8 = 0x80;
/// The conflict xid, then a BLOCK_VX payload.
pub const XLOG_SCOOT_BLOCK_VXC: u8 = 0x90;
pub const INFO_MASK: u8 = 0xF0;

/// A run's length with this bit set: `len` zero bytes (no data follows).
const ZERO_RUN: u32 = 0x8000_0000;
/// Zero stretches at least this long inside a range become zero runs.
const MIN_ZERO_RUN: usize = 64;

fn enc_key(e: &mut Enc, k: &RelKey) {
    e.u32(k.spc).u32(k.db).u32(k.rel).u32(k.backend as u32);
}

fn dec_key(d: &mut Dec) -> RelKey {
    RelKey {
        spc: d.u32(),
        db: d.u32(),
        rel: d.u32(),
        backend: d.u32() as i32,
    }
}

/// Fills `runs` with the runs of `ranges` in `block` (offset, length, zero run?); returns the
/// data bytes they carry.
fn runs_of(block: &[u8], ranges: &[(u32, u32)], runs: &mut Vec<(u32, u32, bool)>) -> usize {
    runs.clear();
    for &(off, len) in ranges {
        split_zero_runs(&block[off as usize..(off + len) as usize], off, runs);
    }
    runs.iter().filter(|r| !r.2).map(|r| r.1 as usize).sum()
}

/// Encodes a BLOCK record: `block` is the whole block, `ranges` sorted and disjoint.
pub fn encode_block(
    key: &RelKey,
    lb: u32,
    var_mask: u64,
    meta: &BlockMeta,
    block: &[u8],
    ranges: &[(u32, u32)],
) -> Vec<u8> {
    let mut e = Enc::new();
    enc_key(&mut e, key);
    e.u32(lb).u64(var_mask);
    meta.encode_fields(&mut e);
    // runs: (offset, length | ZERO_RUN) [+ data]
    let mut runs = Vec::with_capacity(ranges.len());
    let data = runs_of(block, ranges, &mut runs);
    e.u32(runs.len() as u32);
    let mut out = e.0;
    out.reserve(runs.len() * 8 + data);
    for &(off, len, zero) in &runs {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&(if zero { len | ZERO_RUN } else { len }).to_le_bytes());
        if !zero {
            out.extend_from_slice(&block[off as usize..(off + len) as usize]);
        }
    }
    out
}

fn put_var(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_var(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = *b.get(*at)?;
        *at += 1;
        if shift >= 64 {
            return None;
        }
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
}

fn get_var32(b: &[u8], at: &mut usize) -> Option<u32> {
    get_var(b, at).and_then(|v| u32::try_from(v).ok())
}

/// Encodes a BLOCK_V record (the fields of `encode_block`, as varints; a run is its offset, then
/// its length shifted left by one with the low bit set for a zero run, then the data).
pub fn encode_block_v(
    key: &RelKey,
    lb: u32,
    var_mask: u64,
    meta: &BlockMeta,
    block: &[u8],
    ranges: &[(u32, u32)],
) -> Vec<u8> {
    let mut out = Vec::new();
    encode_block_v_into(
        &mut out,
        &mut Vec::new(),
        key,
        lb,
        var_mask,
        meta,
        block,
        ranges,
        &[],
    );
    out
}

/// [`encode_block_v`], appended to `out`; `runs` is scratch space (both reused by the caller:
/// a row insert writes one record, and allocating its buffers showed in INSERT profiles).
/// With `copies` (destination, length, source; none inside `ranges`) the payload is a
/// BLOCK_VX's: the copy runs follow the data runs.
#[allow(clippy::too_many_arguments)]
pub fn encode_block_v_into(
    out: &mut Vec<u8>,
    runs: &mut Vec<(u32, u32, bool)>,
    key: &RelKey,
    lb: u32,
    var_mask: u64,
    meta: &BlockMeta,
    block: &[u8],
    ranges: &[(u32, u32)],
    copies: &[(u32, u32, u32)],
) {
    let data = runs_of(block, ranges, runs);
    out.reserve(64 + runs.len() * 6 + data);
    for v in [
        key.spc as u64,
        key.db as u64,
        key.rel as u64,
        (key.backend as i64 + 1) as u64,
    ] {
        put_var(out, v);
    }
    put_var(out, lb as u64);
    put_var(out, var_mask);
    for v in [
        meta.local,
        meta.hwm,
        meta.nfree,
        meta.capacity,
        meta.free_hint,
        meta.var_low,
        meta.var_dead,
        meta.fixed_end,
        meta.ndead,
        meta.obsolete,
        meta.vis_xid,
        meta.temp,
    ] {
        put_var(out, v as u64);
    }
    out.extend_from_slice(&meta.layout_sig.to_le_bytes());
    put_var(out, runs.len() as u64);
    for &(off, len, zero) in runs.iter() {
        put_var(out, off as u64);
        put_var(out, ((len as u64) << 1) | zero as u64);
        if !zero {
            out.extend_from_slice(&block[off as usize..(off + len) as usize]);
        }
    }
    if !copies.is_empty() {
        put_var(out, copies.len() as u64);
        for &(dst, len, src) in copies {
            put_var(out, dst as u64);
            put_var(out, len as u64);
            put_var(out, src as u64);
        }
    }
}

pub fn decode_block_v(b: &[u8]) -> Option<BlockRec<'_>> {
    decode_block_vx(b, false)
}

/// Decodes a BLOCK_V payload, or with `copies` a BLOCK_VX one.
pub fn decode_block_vx(b: &[u8], copies: bool) -> Option<BlockRec<'_>> {
    let mut at = 0usize;
    let key = RelKey {
        spc: get_var32(b, &mut at)?,
        db: get_var32(b, &mut at)?,
        rel: get_var32(b, &mut at)?,
        backend: (get_var(b, &mut at)? as i64 - 1) as i32,
    };
    let lb = get_var32(b, &mut at)?;
    let var_mask = get_var(b, &mut at)?;
    let mut f = [0u32; 12];
    for x in f.iter_mut() {
        *x = get_var32(b, &mut at)?;
    }
    let sig = u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?);
    at += 8;
    let meta = BlockMeta {
        local: f[0],
        hwm: f[1],
        nfree: f[2],
        capacity: f[3],
        free_hint: f[4],
        var_low: f[5],
        var_dead: f[6],
        fixed_end: f[7],
        ndead: f[8],
        obsolete: f[9],
        vis_xid: f[10],
        temp: f[11],
        layout_sig: sig,
    };
    let n = get_var(b, &mut at)? as usize;
    let mut runs = Vec::with_capacity(n.min(4096));
    for _ in 0..n {
        let off = get_var32(b, &mut at)?;
        let l = get_var(b, &mut at)?;
        let len = u32::try_from(l >> 1).ok()?;
        if l & 1 == 1 {
            runs.push((off, len, None));
        } else {
            let d = b.get(at..at + len as usize)?;
            at += len as usize;
            runs.push((off, len, Some(d)));
        }
    }
    let mut cps = Vec::new();
    if copies {
        let n = get_var(b, &mut at)? as usize;
        cps.reserve(n.min(4096));
        for _ in 0..n {
            cps.push((
                get_var32(b, &mut at)?,
                get_var32(b, &mut at)?,
                get_var32(b, &mut at)?,
            ));
        }
    }
    if at != b.len() {
        return None;
    }
    Some(BlockRec {
        key,
        lb,
        var_mask,
        meta,
        runs,
        copies: cps,
    })
}

/// Splits `bytes` (at block offset `off`) into data runs and zero runs of >= MIN_ZERO_RUN.
pub fn split_zero_runs(bytes: &[u8], off: u32, runs: &mut Vec<(u32, u32, bool)>) {
    if bytes.len() < 2 * MIN_ZERO_RUN {
        runs.push((off, bytes.len() as u32, false));
        return;
    }
    let mut i = 0;
    let mut data_start = 0;
    let n = bytes.len();
    while i < n {
        if bytes[i] != 0 {
            i += 1;
            continue;
        }
        let z = i;
        while i < n && bytes[i] == 0 {
            if i + 8 <= n && bytes[i..i + 8] == [0u8; 8] {
                i += 8;
            } else {
                i += 1;
            }
        }
        if i - z >= MIN_ZERO_RUN {
            if z > data_start {
                runs.push((off + data_start as u32, (z - data_start) as u32, false));
            }
            runs.push((off + z as u32, (i - z) as u32, true));
            data_start = i;
        }
    }
    if n > data_start {
        runs.push((off + data_start as u32, (n - data_start) as u32, false));
    }
}

/// A decoded BLOCK record.
pub struct BlockRec<'a> {
    pub key: RelKey,
    pub lb: u32,
    pub var_mask: u64,
    pub meta: BlockMeta,
    /// (offset, length, data: None for a zero run)
    pub runs: Vec<(u32, u32, Option<&'a [u8]>)>,
    /// (destination, length, source): bytes copied within the block after the runs (BLOCK_VX)
    pub copies: Vec<(u32, u32, u32)>,
}

pub fn decode_block(b: &[u8]) -> Option<BlockRec<'_>> {
    let head = 16 + 4 + 8 + BlockMeta::FIELDS_LEN + 4;
    if b.len() < head {
        return None;
    }
    let mut d = Dec::new(b);
    let key = dec_key(&mut d);
    let lb = d.u32();
    let var_mask = d.u64();
    let meta = BlockMeta::decode_fields(&mut d);
    let n = d.u32() as usize;
    let mut at = head;
    let mut runs = Vec::with_capacity(n);
    for _ in 0..n {
        if at + 8 > b.len() {
            return None;
        }
        let off = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let l = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap());
        at += 8;
        if l & ZERO_RUN != 0 {
            runs.push((off, l & !ZERO_RUN, None));
        } else {
            let l = l as usize;
            if at + l > b.len() {
                return None;
            }
            runs.push((off, l as u32, Some(&b[at..at + l])));
            at += l;
        }
    }
    Some(BlockRec {
        key,
        lb,
        var_mask,
        meta,
        runs,
        copies: Vec::new(),
    })
}

pub fn encode_key_lb(key: &RelKey, lb: u32) -> Vec<u8> {
    let mut e = Enc::new();
    enc_key(&mut e, key);
    e.u32(lb);
    e.0
}

pub fn encode_two_keys(a: &RelKey, b: &RelKey) -> Vec<u8> {
    let mut e = Enc::new();
    enc_key(&mut e, a);
    enc_key(&mut e, b);
    e.0
}

// ------------------------------------------------------------------ insertion

/// xloginsert.c, unguarded (only called inside a critical section, see [`insert`]).
mod xlog {
    use pgrx::pg_sys;
    extern "C-unwind" {
        pub fn XLogBeginInsert();
        pub fn XLogRegisterData(data: *mut std::ffi::c_char, len: i32);
        pub fn XLogInsert(rmid: pg_sys::RmgrId, info: u8) -> pg_sys::XLogRecPtr;
    }
}

fn insert(info: u8, payload: &[u8]) {
    unsafe {
        if pg_sys::RecoveryInProgress() {
            return; // a hot standby never writes scoot WAL (its arena follows the primary's)
        }
        // like heap: a failure to log a change already made is a PANIC, never a divergence.
        // Inside the critical section an ERROR is promoted to PANIC, so these calls never
        // unwind through Rust: they go without pgrx's FFI guard (a sigsetjmp each).
        pg_sys::CritSectionCount += 1;
        xlog::XLogBeginInsert();
        xlog::XLogRegisterData(
            payload.as_ptr() as *mut std::ffi::c_char,
            payload.len() as i32,
        );
        xlog::XLogInsert(RM_SCOOT_ID, info);
        pg_sys::CritSectionCount -= 1;
    }
}

/// `changes::LOG_BLOCK`.
pub fn log_block(t: TableRef, lb: u32, b: u32, ranges: &[(u32, u32)], conflict: u32) {
    let e = t.entry();
    let meta = BlockMeta::of(arena::block_desc(b));
    let block = unsafe { std::slice::from_raw_parts(arena::block_ptr(b), arena::block_size()) };
    // the record's buffers, kept between records (a backend logs one record at a time)
    let (out, runs, cps, rest) = unsafe {
        (
            &mut *(&raw mut REC_BUF),
            &mut *(&raw mut REC_RUNS),
            &mut *(&raw mut REC_COPIES),
            &mut *(&raw mut REC_REST),
        )
    };
    out.clear();
    cps.clear();
    let pairs = changes::take_copies(b);
    let ranges = if pairs.is_empty() {
        ranges
    } else {
        let cand = unsafe { &mut *(&raw mut REC_CAND) };
        copy_candidates(block, &pairs, ranges, cand);
        split_copies(block, ranges, cand, cps, rest);
        if cps.is_empty() {
            ranges
        } else {
            &rest[..]
        }
    };
    if conflict != 0 {
        out.extend_from_slice(&conflict.to_le_bytes());
    }
    encode_block_v_into(
        out,
        runs,
        &e.key,
        lb,
        e.var_mask.load(Ordering::Relaxed),
        &meta,
        block,
        ranges,
        cps,
    );
    let info = match (conflict != 0, !cps.is_empty()) {
        (false, false) => XLOG_SCOOT_BLOCK_V,
        (true, false) => XLOG_SCOOT_BLOCK_VC,
        (false, true) => XLOG_SCOOT_BLOCK_VX,
        (true, true) => XLOG_SCOOT_BLOCK_VXC,
    };
    insert(info, out);
    if out.capacity() > 1 << 20 {
        *out = Vec::new();
        *runs = Vec::new();
    }
}

/// Copy runs shorter than this stay data (a copy run costs three varints, and splitting a data
/// run around it another run header).
const MIN_COPY: u32 = 16;

/// Does `[a, a + len)` meet one of `ranges` (sorted, disjoint)?
fn meets(ranges: &[(u32, u32)], a: u32, len: u32) -> bool {
    // the first range ending after `a`
    let i = ranges.partition_point(|r| r.0 as u64 + r.1 as u64 <= a as u64);
    i < ranges.len() && (ranges[i].0 as u64) < a as u64 + len as u64
}

/// The cells and payloads of each new row of `pairs` (new slot, old slot) that may repeat its
/// old version's, into `out`: (destination, length, source) block offsets, unverified. Fixed
/// cells of at least [`MIN_COPY`] bytes (`char(n)` columns, 128-bit decimals) and
/// variable-length payloads of equal length (the entries themselves differ: they point at
/// different offsets). Only destinations that meet the changed `ranges` (sorted, disjoint): a
/// cell the row write left as it was (a reused slot that already held those bytes) is not in
/// the record at all, and looking at its source would only load the old version's cache lines.
fn copy_candidates(
    block: &[u8],
    pairs: &[(u32, u32)],
    ranges: &[(u32, u32)],
    out: &mut Vec<(u32, u32, u32)>,
) {
    out.clear();
    let bs = block.len();
    let blk = BlockRef {
        base: block.as_ptr() as *mut u8,
    };
    let h = blk.header();
    let natts = h.natts as usize;
    if h.magic != crate::storage::block::BLOCK_MAGIC
        || crate::storage::block::header_size(natts) > bs
    {
        return;
    }
    for &(new, old) in pairs {
        if new >= h.capacity || old >= h.capacity {
            continue;
        }
        for i in 0..natts {
            let c = blk.col(i);
            if c.kind == KIND_ABSENT {
                continue;
            }
            let cell = |slot: u32| c.values_off as usize + slot as usize * c.width as usize;
            let w = c.width as usize;
            if cell(new).max(cell(old)) + w > bs {
                continue;
            }
            if c.kind == KIND_VAR || c.kind == KIND_CSTRING {
                let (o1, l1) = blk.var_entry(c, new);
                let (o0, l0) = blk.var_entry(c, old);
                let len = l1 & VAR_LEN_MASK;
                if l1 == l0 && len >= MIN_COPY && o1 != o0 && meets(ranges, o1, len) {
                    out.push((o1, len, o0));
                }
            } else if c.width as u32 >= MIN_COPY && meets(ranges, cell(new) as u32, c.width as u32)
            {
                out.push((cell(new) as u32, c.width as u32, cell(old) as u32));
            }
        }
    }
}

/// Splits the changed `ranges` (sorted, disjoint) of `block` into copy runs and what stays
/// data: a candidate (destination, length, source) becomes copy runs for the parts of its
/// destination the ranges cover, if its source is inside the block, touches none of the ranges
/// (so redo finds it as it is now) and holds the same bytes. `copies` gets the copy runs
/// (sorted by destination, neighbours merged), `rest` the ranges without them.
fn split_copies(
    block: &[u8],
    ranges: &[(u32, u32)],
    cand: &mut [(u32, u32, u32)],
    copies: &mut Vec<(u32, u32, u32)>,
    rest: &mut Vec<(u32, u32)>,
) {
    copies.clear();
    rest.clear();
    let bs = block.len() as u64;
    cand.sort_unstable();
    for &(dst, len, src) in cand.iter() {
        let (d, sr) = (dst as usize, src as usize);
        // cheapest first: a destination outside the ranges has nothing to copy, and then the
        // source's bytes are not read at all
        if dst as u64 + len as u64 > bs
            || src as u64 + len as u64 > bs
            || !meets(ranges, dst, len)
            || meets(ranges, src, len)
            || block[d..d + len as usize] != block[sr..sr + len as usize]
        {
            continue;
        }
        // the parts of [dst, dst + len) inside the ranges
        let mut i = ranges.partition_point(|r| r.0 as u64 + r.1 as u64 <= dst as u64);
        while i < ranges.len() && ranges[i].0 < dst + len {
            let a = ranges[i].0.max(dst);
            let b = (ranges[i].0 + ranges[i].1).min(dst + len);
            if b - a >= MIN_COPY {
                let s = src + (a - dst);
                match copies.last_mut() {
                    Some(l) if l.0 + l.1 == a && l.2 + l.1 == s => l.1 += b - a,
                    Some(l) if l.0 + l.1 > a => {} // overlapping candidates: keep the first
                    _ => copies.push((a, b - a, s)),
                }
            }
            i += 1;
        }
    }
    if copies.is_empty() {
        return;
    }
    // the ranges minus the copies' destinations
    let mut k = 0;
    for &(o, l) in ranges {
        let mut at = o;
        let end = o + l;
        while k < copies.len() && copies[k].0 + copies[k].1 <= at {
            k += 1;
        }
        let mut j = k;
        while j < copies.len() && copies[j].0 < end {
            if copies[j].0 > at {
                rest.push((at, copies[j].0 - at));
            }
            at = at.max(copies[j].0 + copies[j].1);
            j += 1;
        }
        if at < end {
            rest.push((at, end - at));
        }
    }
}

static mut REC_BUF: Vec<u8> = Vec::new();
static mut REC_RUNS: Vec<(u32, u32, bool)> = Vec::new();
static mut REC_COPIES: Vec<(u32, u32, u32)> = Vec::new();
static mut REC_REST: Vec<(u32, u32)> = Vec::new();
static mut REC_CAND: Vec<(u32, u32, u32)> = Vec::new();

/// `changes::LOG_COMPACT`.
pub fn log_compact(t: TableRef, lb: u32, hwm: u32) {
    let mut e = Enc::new();
    enc_key(&mut e, &t.entry().key);
    e.u32(lb);
    e.u32(hwm);
    insert(XLOG_SCOOT_COMPACT, &e.0);
}

/// `changes::LOG_FREE`.
pub fn log_free(t: TableRef, lb: u32) {
    insert(XLOG_SCOOT_FREE, &encode_key_lb(&t.entry().key, lb));
}

/// `changes::LOG_FREE_ALL`.
pub fn log_free_all(t: TableRef) {
    let mut e = Enc::new();
    enc_key(&mut e, &t.entry().key);
    insert(XLOG_SCOOT_FREE_ALL, &e.0);
}

/// `changes::LOG_REKEY`.
pub fn log_rekey(old: &RelKey, new: &RelKey) {
    insert(XLOG_SCOOT_REKEY, &encode_two_keys(old, new));
}

// ------------------------------------------------------------------ redo

fn table_for(key: &RelKey) -> TableRef {
    tabledir::lookup(key).unwrap_or_else(|| tabledir::create(key, 0, b'p'))
}

/// Writes a BLOCK record's runs into `block` (its bytes before the record), then its copies
/// (a copy's source is outside everything the record changes). Bounds were checked.
pub fn write_runs(block: &mut [u8], r: &BlockRec) {
    for &(off, len, data) in &r.runs {
        let dst = &mut block[off as usize..off as usize + len as usize];
        match data {
            Some(d) => dst.copy_from_slice(d),
            None => dst.fill(0),
        }
    }
    for &(dst, len, src) in &r.copies {
        block.copy_within(src as usize..src as usize + len as usize, dst as usize);
    }
}

/// Applies one scoot record (`info` & INFO_MASK, its main data). `hot`: queries may read the
/// arena meanwhile (a hot standby): blocks are changed under their exclusive lock and the
/// table's size is kept current; otherwise (start-up, crash recovery) nothing else runs.
pub fn apply(info: u8, data: &[u8], hot: bool) -> Result<(), String> {
    if matches!(info & INFO_MASK, XLOG_SCOOT_BLOCK_VC | XLOG_SCOOT_BLOCK_VXC) {
        if data.len() < 4 {
            return Err("malformed scoot BLOCK_VC record".into());
        }
        let xid = u32::from_le_bytes(data[..4].try_into().unwrap());
        let vx = info & INFO_MASK == XLOG_SCOOT_BLOCK_VXC;
        let r = decode_block_vx(&data[4..], vx).ok_or("malformed scoot BLOCK_VC record")?;
        if hot {
            resolve_conflict(&r.key, xid);
        }
        let inner = if vx {
            XLOG_SCOOT_BLOCK_VX
        } else {
            XLOG_SCOOT_BLOCK_V
        };
        return apply(inner, &data[4..], hot);
    }
    match info & INFO_MASK {
        XLOG_SCOOT_BLOCK | XLOG_SCOOT_BLOCK_V | XLOG_SCOOT_BLOCK_VX => {
            let r = match info & INFO_MASK {
                XLOG_SCOOT_BLOCK => decode_block(data),
                XLOG_SCOOT_BLOCK_V => decode_block_v(data),
                _ => decode_block_vx(data, true),
            }
            .ok_or("malformed scoot BLOCK record")?;
            let bs = arena::block_size() as u32;
            if !r.meta.sane(bs) {
                return Err(format!(
                    "scoot BLOCK record with an inconsistent descriptor {:?}",
                    r.meta
                ));
            }
            if r.runs
                .iter()
                .any(|&(off, len, _)| off as u64 + len as u64 > bs as u64)
                || r.copies.iter().any(|&(d, l, s)| {
                    d as u64 + l as u64 > bs as u64 || s as u64 + l as u64 > bs as u64
                })
            {
                return Err("scoot BLOCK record writes past the block end".into());
            }
            let t = table_for(&r.key);
            let e = t.entry();
            e.var_mask.store(r.var_mask, Ordering::Relaxed);
            let get = || -> Result<(u32, bool), String> {
                match tabledir::arena_block(t, r.lb) {
                    Some(b) => Ok((b, false)),
                    None => {
                        if arena::ctl().nfree_blocks.load(Ordering::Relaxed) == 0 {
                            return Err(format!(
                                "scoot.arena_size ({} MB) is too small to replay the scoot WAL",
                                arena::ctl().arena_bytes >> 20
                            ));
                        }
                        let b = arena::restore_block(t, r.lb);
                        if r.lb >= e.nlocal.load(Ordering::Relaxed) {
                            e.nlocal.store(r.lb + 1, Ordering::Release);
                        }
                        e.nblocks.fetch_add(1, Ordering::Relaxed);
                        Ok((b, true))
                    }
                }
            };
            let (b, new) = if hot {
                arena::with_alloc_lock(get)?
            } else {
                get()?
            };
            let desc = arena::block_desc(b);
            let p = arena::block_ptr(b);
            {
                let _g = hot.then(|| desc.exclusive());
                // SAFETY: the block is ours (exclusively locked on a hot standby); the runs and
                // copies were checked to lie inside it
                write_runs(
                    unsafe { std::slice::from_raw_parts_mut(p, bs as usize) },
                    &r,
                );
                r.meta.apply(desc);
                desc.mod_count.fetch_add(1, Ordering::Relaxed);
            }
            if hot && (new || r.lb + 1 >= e.nlocal.load(Ordering::Relaxed)) {
                // the relation file's size tells the planner and TID scans how far rows go
                arena::with_alloc_lock(|| tabledir::publish_size(t));
            }
        }
        XLOG_SCOOT_FREE => {
            let mut d = Dec::new(data);
            let key = dec_key(&mut d);
            let lb = d.u32();
            if let Some(t) = tabledir::lookup(&key) {
                if let Some(b) = tabledir::arena_block(t, lb) {
                    let _g = hot.then(|| arena::block_desc(b).exclusive());
                    arena::free_block(t, b, hot);
                    t.entry().nblocks.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        XLOG_SCOOT_FREE_ALL => {
            // (on a hot standby, queries on the table were cancelled when the primary's
            // AccessExclusiveLock was replayed)
            let mut d = Dec::new(data);
            let key = dec_key(&mut d);
            if let Some(t) = tabledir::lookup(&key) {
                for (_lb, b) in tabledir::blocks_of(t) {
                    let _g = hot.then(|| arena::block_desc(b).exclusive());
                    arena::free_block(t, b, false);
                }
                t.entry().nblocks.store(0, Ordering::Relaxed);
            }
        }
        XLOG_SCOOT_REKEY => {
            let mut d = Dec::new(data);
            let old = dec_key(&mut d);
            let new = dec_key(&mut d);
            if let Some(t) = tabledir::lookup(&old) {
                tabledir::rekey(t, &new);
            }
        }
        XLOG_SCOOT_COMPACT => {
            if data.len() < 24 {
                return Err("malformed scoot COMPACT record".into());
            }
            let mut d = Dec::new(data);
            let key = dec_key(&mut d);
            let lb = d.u32();
            let hwm = d.u32();
            let b = tabledir::lookup(&key)
                .and_then(|t| tabledir::arena_block(t, lb))
                .ok_or_else(|| format!("scoot COMPACT record for a block that is not there (block {lb} of relfilenode {})", key.rel))?;
            let desc = arena::block_desc(b);
            let _g = hot.then(|| desc.exclusive());
            let low = crate::storage::modify::compact_redo(arena::block_ptr(b), hwm);
            desc.var_low.store(low, Ordering::Relaxed);
            desc.var_dead.store(0, Ordering::Relaxed);
            desc.mod_count.fetch_add(1, Ordering::Relaxed);
        }
        XLOG_SCOOT_CONFLICT => {
            if data.len() < 20 {
                return Err("malformed scoot CONFLICT record".into());
            }
            let mut d = Dec::new(data);
            let key = dec_key(&mut d);
            let xid = d.u32();
            if hot {
                resolve_conflict(&key, xid);
            }
        }
        other => return Err(format!("unknown scoot WAL record type {other:#x}")),
    }
    Ok(())
}

/// Cancels the standby queries whose snapshots may still see row versions of `xid` (they are
/// about to be pruned or frozen), after `max_standby_streaming_delay`, as heap does.
fn resolve_conflict(key: &RelKey, xid: u32) {
    unsafe {
        if pg_sys::standbyState >= pg_sys::HotStandbyState::STANDBY_SNAPSHOT_PENDING {
            pg_sys::ResolveRecoveryConflictWithSnapshot(
                pg_sys::TransactionId::from(xid),
                pg_sys::RelFileNode {
                    spcNode: key.spc.into(),
                    dbNode: key.db.into(),
                    relNode: key.rel.into(),
                },
            );
        }
    }
}

/// `rm_identify`.
pub fn identify(info: u8) -> &'static std::ffi::CStr {
    match info & INFO_MASK {
        XLOG_SCOOT_BLOCK | XLOG_SCOOT_BLOCK_V => c"BLOCK",
        XLOG_SCOOT_BLOCK_VC => c"BLOCK+CONFLICT",
        XLOG_SCOOT_BLOCK_VX => c"BLOCK+COPY",
        XLOG_SCOOT_BLOCK_VXC => c"BLOCK+COPY+CONFLICT",
        XLOG_SCOOT_FREE => c"FREE",
        XLOG_SCOOT_FREE_ALL => c"FREE_ALL",
        XLOG_SCOOT_REKEY => c"REKEY",
        XLOG_SCOOT_CONFLICT => c"CONFLICT",
        XLOG_SCOOT_COMPACT => c"COMPACT",
        _ => c"UNKNOWN",
    }
}

/// `rm_desc`: a one-line description for pg_waldump-style output.
pub fn describe(info: u8, data: &[u8]) -> String {
    let k = |k: &RelKey| format!("rel {}/{}/{}", k.spc, k.db, k.rel);
    if matches!(info & INFO_MASK, XLOG_SCOOT_BLOCK_VC | XLOG_SCOOT_BLOCK_VXC) {
        if data.len() < 4 {
            return String::new();
        }
        let xid = u32::from_le_bytes(data[..4].try_into().unwrap());
        let inner = if info & INFO_MASK == XLOG_SCOOT_BLOCK_VXC {
            XLOG_SCOOT_BLOCK_VX
        } else {
            XLOG_SCOOT_BLOCK_V
        };
        return format!(
            "latest removed xid {}, {}",
            xid,
            describe(inner, &data[4..])
        );
    }
    match info & INFO_MASK {
        XLOG_SCOOT_BLOCK | XLOG_SCOOT_BLOCK_V | XLOG_SCOOT_BLOCK_VX => match match info & INFO_MASK
        {
            XLOG_SCOOT_BLOCK => decode_block(data),
            XLOG_SCOOT_BLOCK_V => decode_block_v(data),
            _ => decode_block_vx(data, true),
        } {
            Some(r) => {
                let bytes: u64 = r
                    .runs
                    .iter()
                    .filter(|x| x.2.is_some())
                    .map(|x| x.1 as u64)
                    .sum();
                let copied = if r.copies.is_empty() {
                    String::new()
                } else {
                    format!(
                        " copies {} copied {}",
                        r.copies.len(),
                        r.copies.iter().map(|c| c.1 as u64).sum::<u64>()
                    )
                };
                format!(
                    "{} block {} hwm {} runs {} bytes {}{}",
                    k(&r.key),
                    r.lb,
                    r.meta.hwm,
                    r.runs.len(),
                    bytes,
                    copied
                )
            }
            None => "malformed".into(),
        },
        XLOG_SCOOT_FREE => {
            let mut d = Dec::new(data);
            let key = dec_key(&mut d);
            format!("{} block {}", k(&key), d.u32())
        }
        XLOG_SCOOT_FREE_ALL => {
            let mut d = Dec::new(data);
            k(&dec_key(&mut d))
        }
        XLOG_SCOOT_CONFLICT if data.len() >= 20 => {
            let mut d = Dec::new(data);
            let key = dec_key(&mut d);
            format!("{} latest removed xid {}", k(&key), d.u32())
        }
        XLOG_SCOOT_COMPACT if data.len() >= 24 => {
            let mut d = Dec::new(data);
            let key = dec_key(&mut d);
            let lb = d.u32();
            format!("{} block {} hwm {}", k(&key), lb, d.u32())
        }
        XLOG_SCOOT_REKEY => {
            let mut d = Dec::new(data);
            let a = dec_key(&mut d);
            let b = dec_key(&mut d);
            format!("{} -> {}", k(&a), k(&b))
        }
        _ => String::new(),
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
    use pgrx::prelude::*;

    fn sample_block() -> Vec<u8> {
        let mut b = vec![0u8; 65536];
        for (i, x) in b.iter_mut().enumerate().take(300) {
            *x = (i * 7 + 1) as u8;
        }
        b[40000..40010].copy_from_slice(b"0123456789");
        b
    }

    /// A table key and block descriptor for encoding tests.
    fn sample_key_meta() -> (RelKey, BlockMeta) {
        let key = RelKey {
            spc: 1663,
            db: 16384,
            rel: 4_000_000_123,
            backend: -1,
        };
        let meta = BlockMeta {
            local: 7,
            hwm: 291,
            nfree: 3,
            capacity: 2000,
            free_hint: 5,
            var_low: 40000,
            var_dead: 12,
            fixed_end: 300,
            ndead: 1,
            obsolete: 2,
            vis_xid: 3_000_000_000,
            temp: 1,
            layout_sig: 0xdead_beef_0123_4567,
        };
        (key, meta)
    }

    /// Copy runs: only the parts of a candidate inside the changed ranges, only with a source
    /// untouched by the record and equal bytes; what stays data is the ranges minus the copies;
    /// redo (runs, then copies) on the block as it was before the change rebuilds it exactly.
    #[pg_test]
    fn copy_runs_split_encode_and_redo() {
        let mut before = vec![0u8; 4096];
        for (i, x) in before.iter_mut().enumerate() {
            *x = (i * 31 % 251) as u8;
        }
        let mut after = before.clone();
        // an "update": the new row's cells at 2000.. repeat the old row's at 1000.. (40 bytes,
        // a 24-byte cell, a 10-byte one); its header at 3000 changes; one cell differs
        after.copy_within(1000..1040, 2000);
        after.copy_within(1100..1124, 2100);
        after.copy_within(1200..1210, 2200);
        after[2300..2332].copy_from_slice(&[7u8; 32]);
        after[3000..3020].fill(9);
        let ranges = vec![
            (2000u32, 40u32),
            (2100, 24),
            (2200, 10),
            (2300, 32),
            (3000, 20),
        ];
        let mut cand = vec![
            (2000u32, 40u32, 1000u32), // whole candidate covered: one copy
            (2100, 24, 1100),          // equal: copied
            (2200, 10, 1200),          // shorter than MIN_COPY: data
            (2300, 32, 1300),          // bytes differ: data
            (3000, 20, 2990),          // source overlaps a changed range: data
            (4090, 20, 100),           // past the block end: dropped
        ];
        let (mut copies, mut rest) = (Vec::new(), Vec::new());
        split_copies(&after, &ranges, &mut cand, &mut copies, &mut rest);
        assert_eq!(copies, vec![(2000, 40, 1000), (2100, 24, 1100)]);
        assert_eq!(rest, vec![(2200, 10), (2300, 32), (3000, 20)]);
        // a candidate only partly inside a range: the covered part; neighbours merge
        let (mut c2, mut r2) = (Vec::new(), Vec::new());
        split_copies(
            &after,
            &[(2010, 30), (2100, 24)],
            &mut [(2000, 40, 1000), (2100, 24, 1100)],
            &mut c2,
            &mut r2,
        );
        assert_eq!(c2, vec![(2010, 30, 1010), (2100, 24, 1100)]);
        assert!(r2.is_empty(), "{r2:?}");
        let mut adj = after.clone();
        adj.copy_within(1040..1060, 2040);
        let (mut c3, mut r3) = (Vec::new(), Vec::new());
        split_copies(
            &adj,
            &[(2000, 60)],
            &mut [(2040, 20, 1040), (2000, 40, 1000)],
            &mut c3,
            &mut r3,
        );
        assert_eq!(c3, vec![(2000, 60, 1000)]);
        assert!(r3.is_empty());
        // encode as BLOCK_VX, decode, replay on the old bytes
        let (key, meta) = sample_key_meta();
        let vx = |ranges: &[(u32, u32)], copies: &[(u32, u32, u32)]| {
            let mut out = Vec::new();
            encode_block_v_into(
                &mut out,
                &mut Vec::new(),
                &key,
                3,
                0,
                &meta,
                &after,
                ranges,
                copies,
            );
            out
        };
        let out = vx(&rest, &copies);
        let plain = encode_block_v(&key, 3, 0, &meta, &after, &ranges);
        assert!(
            out.len() + 40 < plain.len(),
            "{} vs {}",
            out.len(),
            plain.len()
        );
        assert!(
            decode_block_v(&out).is_none(),
            "a BLOCK_VX payload is no BLOCK_V"
        );
        let r = decode_block_vx(&out, true).expect("decodes");
        assert_eq!(r.copies, copies);
        let mut redo = before.clone();
        write_runs(&mut redo, &r);
        assert!(redo == after, "redo did not rebuild the block");
        for cut in [1usize, 3, 7] {
            assert!(decode_block_vx(&out[..out.len() - cut], true).is_none());
        }
        assert!(describe(XLOG_SCOOT_BLOCK_VX, &out).ends_with("copies 2 copied 64"));
        assert_eq!(identify(XLOG_SCOOT_BLOCK_VXC), c"BLOCK+COPY+CONFLICT");
        // a copy past the block's end is refused before anything is written
        let bad = vx(&[], &[(u32::MAX - 8, 64, 0)]);
        assert!(apply(XLOG_SCOOT_BLOCK_VX, &bad, false).is_err());
    }

    #[pg_test]
    fn block_records_round_trip() {
        let (key, meta) = sample_key_meta();
        let block = sample_block();
        let ranges = [(0u32, 300u32), (300, 1000), (40000, 10)];
        for compact in [false, true] {
            let enc = if compact {
                encode_block_v(&key, 7, u64::MAX >> 3, &meta, &block, &ranges)
            } else {
                encode_block(&key, 7, u64::MAX >> 3, &meta, &block, &ranges)
            };
            let r = if compact {
                decode_block_v(&enc)
            } else {
                decode_block(&enc)
            }
            .expect("decodes");
            assert_eq!(r.key, key);
            assert_eq!(r.lb, 7);
            assert_eq!(r.var_mask, u64::MAX >> 3);
            assert_eq!(r.meta, meta);
            // the runs rebuild exactly the ranges' bytes (the 1000 zero bytes as a zero run)
            let mut rebuilt = vec![0xffu8; block.len()];
            for &(off, len) in &ranges {
                rebuilt[off as usize..(off + len) as usize].fill(0xff);
            }
            write_runs(&mut rebuilt, &r);
            for &(off, len) in &ranges {
                assert_eq!(
                    &rebuilt[off as usize..(off + len) as usize],
                    &block[off as usize..(off + len) as usize]
                );
            }
            assert!(r.runs.iter().any(|x| x.2.is_none()), "zero run expected");
            // truncated records never decode
            for cut in [1usize, 5, enc.len() / 2, enc.len() - 1] {
                let bad = &enc[..enc.len() - cut];
                let d = if compact {
                    decode_block_v(bad)
                } else {
                    decode_block(bad)
                };
                assert!(
                    d.is_none() || !compact,
                    "a truncated compact record decoded"
                );
            }
        }
        let small = encode_block_v(&key, 7, 1, &meta, &block, &[(20, 8)]);
        let large = encode_block(&key, 7, 1, &meta, &block, &[(20, 8)]);
        assert!(
            small.len() * 10 < large.len() * 7,
            "compact {} vs {}",
            small.len(),
            large.len()
        );
        // BLOCK_VC: the conflict xid, then a BLOCK_V
        let mut vc = 3_000_000_007u32.to_le_bytes().to_vec();
        vc.extend_from_slice(&small);
        let d = describe(XLOG_SCOOT_BLOCK_VC, &vc);
        assert!(
            d.starts_with("latest removed xid 3000000007, rel 1663/16384/4000000123 block 7"),
            "{d}"
        );
        assert_eq!(identify(XLOG_SCOOT_BLOCK_VC), c"BLOCK+CONFLICT");
        assert!(apply(XLOG_SCOOT_BLOCK_VC, &vc[..3], false).is_err());
        assert!(apply(XLOG_SCOOT_BLOCK_VC, &vc[..vc.len() - 1], false).is_err());
    }
}
