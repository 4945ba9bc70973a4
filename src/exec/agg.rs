//! Aggregate pushdown: the Rust side of the ScootAgg node (`customagg.c`). `count`, `sum`,
//! `avg`, `min` and `max`, with or without `GROUP BY`, computed a block at a time on the PAX
//! column regions: the scan hands each block's visible rows ([`crate::am::scan::visit_blocks`]),
//! the block filters select rows, the group keys are read as fixed-width words and looked up in
//! a hash table, and each aggregate's argument is evaluated column-wise as exact integers
//! (numeric(p, s) values are the block's scaled integers; `+ - *` follow PostgreSQL's numeric
//! display-scale rules). No tuple is formed until the result rows.
//!
//! Exactness first: anything the integer path cannot answer exactly as PostgreSQL would (a block
//! that stores a column in another form, a NaN, an overflow, a filter the block cannot apply)
//! makes [`AggExec::run`] return `Fallback`, and the node runs the ordinary Agg plan it carries
//! instead, from the start, under the same snapshot: PostgreSQL itself computes the answer (and
//! raises its own errors).
//!
//! The plan's description of the work (built by the planner side) is a small text, one item per
//! line: `K attno type` (a group key), `F filter` (a block filter, `storage::filter`), `A kind
//! output expression` (an aggregate; the expression in reverse Polish notation). Types: `i2`,
//! `i4`, `i8` (integers, dates, timestamps by width), `dS` (numeric with scale S), `cW` (char(W)
//! / varchar(W) stored in W bytes).
use crate::exec::samplecache;
use crate::storage::block::{
    BlockRef, ColDesc, KIND_ABSENT, KIND_CHARN, KIND_DEC128, KIND_DEC64, KIND_FIXED,
};
use crate::storage::encoding::{self, NAN128, NAN64};
use crate::storage::filter::{BlockFilter, FilterOrder};
use pgrx::pg_sys;
use std::ffi::c_void;

/// A value type of the integer path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// a by-value integer of this many bytes (int2/int4/int8, date, timestamp[tz])
    Int(u8),
    /// numeric scaled by 10^scale
    Dec(u32),
    /// char(n)/varchar(n) in n NUL-padded bytes (group keys only)
    Char(u16),
}

impl Ty {
    fn parse(s: &str) -> Option<Ty> {
        let (k, n) = s.split_at(1.min(s.len()));
        Some(match k {
            "i" => match n.parse().ok()? {
                b @ (2 | 4 | 8) => Ty::Int(b),
                _ => return None,
            },
            "d" => Ty::Dec(n.parse().ok().filter(|&s: &u32| s <= 38)?),
            "c" => Ty::Char(n.parse().ok().filter(|&w: &u16| (1..=16).contains(&w))?),
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Var(usize, Ty),
    Const(i128, Ty),
    /// `+`, `-` or `*`, and the result type
    Op(u8, Ty),
    /// int -> numeric (scale 0)
    ToNum,
    /// int -> a wider int (bytes)
    ToInt(u8),
    /// a column's NULL flags only (count(column) of any type): the value is a placeholder
    Present(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    CountStar,
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

/// How an aggregate's argument relates to earlier ones' (evaluated once per block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reuse {
    None,
    /// the same expression as aggregate i
    Same(usize),
    /// aggregate i's expression is its first `len` tokens
    Prefix(usize, usize),
}

#[derive(Clone, Debug, PartialEq)]
pub struct AggSpec {
    kind: Kind,
    reuse: Reuse,
    /// result type (Sum of int2/int4: Int(8); of int8: Dec(0); Avg: numeric)
    out: Ty,
    expr: Vec<Tok>,
    /// the expression's type
    ty: Option<Ty>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    keys: Vec<(usize, Ty)>,
    filters: Vec<BlockFilter>,
    aggs: Vec<AggSpec>,
}

/// Why the integer path gave up (the node then runs PostgreSQL's own plan).
#[derive(Debug, PartialEq)]
pub struct Fallback(pub &'static std::ffi::CStr);

fn parse_expr(toks: &[&str]) -> Option<(Vec<Tok>, Ty)> {
    let mut out = Vec::new();
    let mut stack: Vec<Ty> = Vec::new();
    for t in toks {
        let (head, ty) = t.split_once(':').unwrap_or((t, ""));
        let tok = match head.as_bytes().first()? {
            b'v' => {
                let att: usize = head[1..].parse().ok()?;
                let ty = Ty::parse(ty)?;
                if att == 0 || matches!(ty, Ty::Char(_)) {
                    return None;
                }
                stack.push(ty);
                Tok::Var(att - 1, ty)
            }
            b'k' => {
                let v: i128 = head[1..].parse().ok()?;
                let ty = Ty::parse(ty)?;
                if matches!(ty, Ty::Char(_)) {
                    return None;
                }
                stack.push(ty);
                Tok::Const(v, ty)
            }
            op @ (b'+' | b'-' | b'*') if head.len() == 1 => {
                let b = stack.pop()?;
                let a = stack.pop()?;
                let r = match (a, b, ty) {
                    (Ty::Int(x), Ty::Int(y), t) if x == y && Ty::parse(t) == Some(a) => a,
                    (Ty::Dec(x), Ty::Dec(y), "d") => {
                        let s = if *op == b'*' { x + y } else { x.max(y) };
                        if s > 38 {
                            return None;
                        }
                        Ty::Dec(s)
                    }
                    _ => return None,
                };
                stack.push(r);
                Tok::Op(*op, r)
            }
            _ if head == "tonum" => {
                let Ty::Int(_) = stack.pop()? else {
                    return None;
                };
                stack.push(Ty::Dec(0));
                Tok::ToNum
            }
            _ if head == "toi4" || head == "toi8" => {
                let to: u8 = head[3..].parse().ok()?;
                let Ty::Int(from) = stack.pop()? else {
                    return None;
                };
                if from > to {
                    return None;
                }
                stack.push(Ty::Int(to));
                Tok::ToInt(to)
            }
            b'p' if toks.len() == 1 => {
                let att: usize = head[1..].parse().ok()?;
                if att == 0 {
                    return None;
                }
                stack.push(Ty::Int(8));
                Tok::Present(att - 1)
            }
            _ => return None,
        };
        out.push(tok);
    }
    (stack.len() == 1).then(|| (out, stack[0]))
}

impl Spec {
    /// The columns the node reads of a table with `natts` columns (by index, true: read): its
    /// group keys, its filters' columns and its aggregates' arguments. A changed block of an
    /// OLAP image is copied only as far as they need (see `ImgScan::with_block_cols`).
    pub fn columns(&self, natts: usize) -> Vec<bool> {
        let mut m = vec![false; natts];
        let mut add = |c: usize| {
            if let Some(x) = m.get_mut(c) {
                *x = true;
            }
        };
        for &(c, _) in &self.keys {
            add(c);
        }
        for f in &self.filters {
            f.for_each_column(&mut add);
        }
        for a in &self.aggs {
            for t in &a.expr {
                match *t {
                    Tok::Var(c, _) | Tok::Present(c) => add(c),
                    _ => {}
                }
            }
        }
        m
    }

    pub fn parse(s: &str) -> Option<Spec> {
        let mut spec = Spec {
            keys: Vec::new(),
            filters: Vec::new(),
            aggs: Vec::new(),
        };
        for line in s.lines().filter(|l| !l.is_empty()) {
            let (tag, rest) = line.split_once(' ')?;
            match tag {
                "K" => {
                    let (att, ty) = rest.split_once(' ')?;
                    let att: usize = att.parse().ok()?;
                    if att == 0 {
                        return None;
                    }
                    spec.keys.push((att - 1, Ty::parse(ty)?));
                }
                "F" => spec.filters.push(BlockFilter::parse(rest)?),
                "A" => {
                    let toks: Vec<&str> = rest.split(' ').collect();
                    let kind = match *toks.first()? {
                        "countstar" => Kind::CountStar,
                        "count" => Kind::Count,
                        "sum" => Kind::Sum,
                        "avg" => Kind::Avg,
                        "min" => Kind::Min,
                        "max" => Kind::Max,
                        _ => return None,
                    };
                    let (expr, ty) = if kind == Kind::CountStar {
                        if toks.len() != 1 {
                            return None;
                        }
                        (Vec::new(), None)
                    } else {
                        let (e, t) = parse_expr(&toks[1..])?;
                        // a column's presence only answers count
                        if matches!(e[0], Tok::Present(_)) && kind != Kind::Count {
                            return None;
                        }
                        (e, Some(t))
                    };
                    let out = match (kind, ty) {
                        (Kind::CountStar | Kind::Count, _) => Ty::Int(8),
                        (Kind::Sum, Some(Ty::Int(2 | 4))) => Ty::Int(8),
                        (Kind::Sum, Some(Ty::Int(_))) => Ty::Dec(0),
                        (Kind::Avg, Some(Ty::Int(_))) => Ty::Dec(0),
                        (Kind::Sum | Kind::Avg | Kind::Min | Kind::Max, Some(t)) => t,
                        _ => return None,
                    };
                    spec.aggs.push(AggSpec {
                        kind,
                        reuse: Reuse::None,
                        out,
                        expr,
                        ty,
                    });
                }
                _ => return None,
            }
        }
        if spec.keys.iter().map(|k| key_words(k.1)).sum::<usize>() > KEY_WORDS {
            return None;
        }
        // shared arguments: the first aggregate with the same expression, else the longest
        // earlier one that is a prefix (in reverse Polish notation a prefix whose value is one
        // stack entry is a subexpression: each earlier one is a whole expression)
        for j in 0..spec.aggs.len() {
            let e = &spec.aggs[j].expr;
            if e.is_empty() {
                continue;
            }
            let mut reuse = Reuse::None;
            let mut best = 0;
            for i in 0..j {
                let (ei, ri) = (&spec.aggs[i].expr, spec.aggs[i].reuse);
                if ei.is_empty() || matches!(ri, Reuse::Same(_)) {
                    continue;
                }
                if ei == e {
                    reuse = Reuse::Same(i);
                    break;
                }
                if ei.len() < e.len() && e.starts_with(ei) && ei.len() > best {
                    best = ei.len();
                    reuse = Reuse::Prefix(i, ei.len());
                }
            }
            spec.aggs[j].reuse = reuse;
        }
        Some(spec)
    }
}

/// Group keys are packed into this many 64-bit words (and a NULL mask).
const KEY_WORDS: usize = 4;
type Key = ([u64; KEY_WORDS], u32);

fn key_words(t: Ty) -> usize {
    match t {
        Ty::Int(_) => 1,
        Ty::Char(w) if w <= 8 => 1,
        _ => 2,
    }
}

/// Does column `c` of a block store a group key of type `ty` as the engine reads it?
fn key_stored_as(c: &ColDesc, ty: Ty) -> bool {
    match ty {
        Ty::Int(b) => c.kind == KIND_FIXED && c.byval != 0 && c.attlen == b as i16,
        Ty::Dec(s) => matches!(c.kind, KIND_DEC64 | KIND_DEC128) && c.scale as u32 == s,
        Ty::Char(wd) => c.kind == KIND_CHARN && c.width == wd,
    }
}

/// Reads key number `ki` (type `ty`, column `c`, checked by [`key_stored_as`]) of slot `s` into
/// `k`'s words from `w` on, or its bit in `k.1` when NULL.
#[inline(always)]
fn read_key_word(blk: BlockRef, c: &ColDesc, ty: Ty, s: u32, ki: usize, w: usize, k: &mut Key) {
    if !blk.is_valid(c, s) {
        k.1 |= 1 << ki;
        return;
    }
    let p = blk.value_ptr(c, s);
    unsafe {
        match ty {
            Ty::Int(b) => {
                k.0[w] = match b {
                    2 => (p as *const i16).read_unaligned() as i64 as u64,
                    4 => (p as *const i32).read_unaligned() as i64 as u64,
                    _ => (p as *const i64).read_unaligned() as u64,
                }
            }
            Ty::Dec(_) => {
                let v = if c.kind == KIND_DEC128 {
                    (p as *const i128).read_unaligned()
                } else {
                    let x = (p as *const i64).read_unaligned();
                    if x == NAN64 {
                        NAN128
                    } else {
                        x as i128
                    }
                };
                // NaN groups with NaN, as in PostgreSQL; the marker is one value
                k.0[w] = v as u64;
                k.0[w + 1] = (v >> 64) as u64;
            }
            Ty::Char(wd) => {
                let wd = wd as usize;
                k.0[w] = read_le(p, wd.min(8));
                if wd > 8 {
                    k.0[w + 1] = read_le(p.add(8), wd - 8);
                }
            }
        }
    }
}

/// One aggregate's running state over all groups (indexed by group).
#[derive(Default)]
struct Acc {
    /// rows counted (count), or values seen (sum/avg/min/max)
    n: Vec<i64>,
    /// sum, or the min/max so far
    v: Vec<i128>,
}

/// Values of one block's selected rows: one per row, or one constant for all.
#[derive(Clone)]
enum Val {
    K(i128),
    V(Vec<i128>),
}

/// An expression's (or a column's) values over the selected rows of a block.
#[derive(Clone)]
struct Col {
    val: Val,
    /// None: no NULLs
    nulls: Option<Vec<bool>>,
}

impl Col {
    #[inline]
    fn is_null(&self, i: usize) -> bool {
        self.nulls.as_ref().is_some_and(|n| n[i])
    }
}

/// Reused buffers: a block's columns are a few hundred KB each, which malloc would map and
/// unmap (page faults, zeroing) block after block.
#[derive(Default)]
pub struct Pool {
    ints: Vec<Vec<i128>>,
    bools: Vec<Vec<bool>>,
}

impl Pool {
    fn ints(&mut self, n: usize) -> Vec<i128> {
        let mut v = self.ints.pop().unwrap_or_default();
        v.clear();
        v.reserve(n);
        v
    }
    fn bools(&mut self, n: usize) -> Vec<bool> {
        let mut v = self.bools.pop().unwrap_or_default();
        v.clear();
        v.resize(n, false);
        v
    }
    fn put(&mut self, c: Col) {
        if let Val::V(v) = c.val {
            self.ints.push(v);
        }
        if let Some(b) = c.nulls {
            self.bools.push(b);
        }
    }
    fn copy(&mut self, c: &Col) -> Col {
        Col {
            val: match &c.val {
                Val::K(x) => Val::K(*x),
                Val::V(xs) => {
                    let mut v = self.ints(xs.len());
                    v.extend_from_slice(xs);
                    Val::V(v)
                }
            },
            nulls: c.nulls.as_ref().map(|b| {
                let mut v = self.bools(0);
                v.extend_from_slice(b);
                v
            }),
        }
    }
}

/// The group table: open addressing over group numbers (keys are a few words; a general
/// hash map would cost more than the aggregation). A slot holds the group number + 1 in its low
/// half (0 = empty) and the high half of the key's hash in its high half, so a probe compares
/// keys only when the tags agree. With many groups (CH Q15's 88k order-line groups: the slots
/// and keys are megabytes) every lookup misses the cache twice, slot then key: the block's
/// lookups ask for both some rows ahead ([`Groups::prefetch_slot`], [`Groups::prefetch_key`]).
struct Groups {
    slots: Vec<u64>,
    keys: Vec<Key>,
    /// each group's key hash (for growing without rehashing)
    hashes: Vec<u64>,
    /// groups at the end of `keys` not yet in `slots` (added through the grid, [`Dense`]): they
    /// are hashed and entered when a lookup by hash first needs them ([`Groups::index_all`])
    unindexed: usize,
}

#[inline]
fn key_hash(k: &Key) -> u64 {
    let mut h = (k.1 as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for w in k.0 {
        h = (h.rotate_left(23) ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    h ^ (h >> 29)
}

const TAG: u64 = 0xFFFF_FFFF_0000_0000;

/// Above this many groups, lookups prefetch (smaller tables stay in the cache).
const PREFETCH_GROUPS: usize = 4096;
/// Grids of more cells than this (256 kB of group ids) prefetch the cells of rows ahead.
const PREFETCH_CELLS: usize = 1 << 16;
/// How many rows ahead a grid lookup asks for its cell, and an aggregate for a group's state:
/// far enough for a miss to the last-level cache to be served by then (a row costs a few ns).
const CELL_AHEAD: usize = 24;
const STATE_AHEAD: usize = 16;

impl Groups {
    fn new() -> Groups {
        Groups {
            slots: vec![0; 64],
            keys: Vec::new(),
            hashes: Vec::new(),
            unindexed: 0,
        }
    }

    /// (group, is new) of key `k`, whose hash is `h`
    #[inline]
    fn find_or_add_h(&mut self, k: &Key, h: u64) -> (u32, bool) {
        let mask = self.slots.len() - 1;
        let tag = h & TAG;
        let mut i = h as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                let n = self.keys.len() as u32;
                self.keys.push(*k);
                self.hashes.push(h);
                self.slots[i] = tag | (n as u64 + 1);
                if self.keys.len() * 2 > self.slots.len() {
                    self.grow();
                }
                return (n, true);
            }
            if s & TAG == tag {
                let g = (s as u32) - 1;
                if self.keys[g as usize] == *k {
                    return (g, false);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Asks for the home slot of a key hashing to `h`.
    #[inline]
    fn prefetch_slot(&self, h: u64) {
        let i = h as usize & (self.slots.len() - 1);
        crate::storage::block::prefetch_line(self.slots.as_ptr().wrapping_add(i) as *const u8);
    }

    /// Asks for the key of the group in `h`'s home slot, if its tag agrees (the slot itself
    /// should be in the cache by now).
    #[inline]
    fn prefetch_key(&self, h: u64) {
        let s = self.slots[h as usize & (self.slots.len() - 1)];
        if s != 0 && s & TAG == h & TAG {
            let g = (s as u32 - 1) as usize;
            crate::storage::block::prefetch_line(self.keys.as_ptr().wrapping_add(g) as *const u8);
        }
    }

    /// Adds group `k` without entering it in the slots (see `unindexed`).
    fn push_unindexed(&mut self, k: &Key) -> u32 {
        let n = self.keys.len() as u32;
        self.keys.push(*k);
        self.hashes.push(0);
        self.unindexed += 1;
        n
    }

    /// Enters the groups added without it in the slots: before any lookup by hash.
    #[inline]
    fn index_all(&mut self) {
        if self.unindexed == 0 {
            return;
        }
        let from = self.keys.len() - self.unindexed;
        for g in from..self.keys.len() {
            self.hashes[g] = key_hash(&self.keys[g]);
        }
        self.unindexed = 0;
        let mut n = self.slots.len();
        while self.keys.len() * 2 > n {
            n *= 2;
        }
        self.rebuild(n);
    }

    fn grow(&mut self) {
        self.rebuild(self.slots.len() * 2);
    }

    fn rebuild(&mut self, n: usize) {
        self.slots = vec![0; n];
        for (g, &h) in self.hashes.iter().enumerate() {
            let mut i = h as usize & (n - 1);
            while self.slots[i] != 0 {
                i = (i + 1) & (n - 1);
            }
            self.slots[i] = (h & TAG) | (g as u64 + 1);
        }
    }
}

pub struct AggExec {
    spec: Spec,
    groups: Groups,
    accs: Vec<Acc>,
    pool: Pool,
    sel: Vec<u32>,
    /// the order the filters run in, by their selectivity so far
    filter_order: FilterOrder,
    keys: Vec<Key>,
    /// the block's key hashes (big group tables only)
    hashes: Vec<u64>,
    gids: Vec<u32>,
    /// blocks read, and blocks whose rows the filters removed entirely
    pub blocks: u64,
    pub blocks_empty: u64,
    /// blocks the scan skipped by their zone maps
    pub blocks_skipped: u64,
    /// ScootPreAgg probing a hash join whose table is built before the node starts: rows whose
    /// join keys the table cannot hold are dropped before they are grouped
    row_join: Option<RowJoinFilter>,
    /// rows that filter dropped
    pub join_removed: u64,
    /// integer group keys: group ids by position in a grid over the keys' ranges
    dense: Option<Dense>,
    /// the keys are not all integers, or their ranges are too wide for a grid
    dense_off: bool,
    /// rows whose group was found through the grid
    pub grid_rows: u64,
    /// every group so far came through the grid, whose cells then hold all of them: a key with
    /// an empty cell is a new group (no lookup by hash needed)
    grid_only: bool,
}

/// Group ids of integer group keys by their position in a grid spanning the keys' value ranges
/// (from the blocks' zone maps): one load instead of hashing the key and comparing it with the
/// group's. A cache over [`Groups`], which still owns every group: a cell holds the group id + 1
/// (0: not looked up yet), and a key outside the grid or with a NULL is looked up by hash.
struct Dense {
    /// each key's lowest value and number of values (the grid's extent along it)
    lo: [i64; KEY_WORDS],
    len: [u64; KEY_WORDS],
    nkeys: usize,
    cells: Vec<u32>,
}

/// The most cells a grid may have (16 MB of group ids).
const DENSE_MAX_CELLS: u64 = 1 << 22;

impl Dense {
    /// The cell of key `k` (no NULL), if inside the grid.
    #[inline(always)]
    fn cell(&self, k: &Key) -> Option<usize> {
        let mut idx = 0u64;
        for w in 0..self.nkeys {
            let off = (k.0[w] as i64).wrapping_sub(self.lo[w]) as u64;
            if off >= self.len[w] {
                return None;
            }
            idx = idx * self.len[w] + off;
        }
        Some(idx as usize)
    }

    /// The grid over the ranges `lo..=hi` (None: too many cells), holding the groups of
    /// `groups` that fall inside it.
    fn build(lo: &[i64], hi: &[i64], groups: &Groups) -> Option<Dense> {
        let nkeys = lo.len();
        let mut d = Dense {
            lo: [0; KEY_WORDS],
            len: [0; KEY_WORDS],
            nkeys,
            cells: Vec::new(),
        };
        let mut cells = 1u64;
        for w in 0..nkeys {
            let len = (hi[w] as i128 - lo[w] as i128 + 1) as u128;
            if len > DENSE_MAX_CELLS as u128 {
                return None;
            }
            d.lo[w] = lo[w];
            d.len[w] = len as u64;
            cells = cells
                .checked_mul(len as u64)
                .filter(|&c| c <= DENSE_MAX_CELLS)?;
        }
        d.cells = vec![0; cells as usize];
        for (g, k) in groups.keys.iter().enumerate() {
            if k.1 == 0 {
                if let Some(i) = d.cell(k) {
                    d.cells[i] = g as u32 + 1;
                }
            }
        }
        Some(d)
    }
}

/// The join filter of a ScootPreAgg applied to rows ([`scoot_agg_set_row_join_filter`]).
struct RowJoinFilter {
    table: *mut c_void,
    may_match: unsafe extern "C" fn(*mut c_void, u32) -> bool,
    /// the join's keys: (group key index, the width the join hashes it as)
    keys: Vec<(usize, u8)>,
    checked: u64,
    filtering: bool,
}

fn column<'a>(blk: BlockRef, att: usize) -> Result<&'a ColDesc, Fallback> {
    if att >= blk.natts() {
        return Err(Fallback(c"a column added after the block was written"));
    }
    // the descriptor lives in the block, which outlives this call's use
    Ok(unsafe { &*(blk.col(att) as *const ColDesc) })
}

/// Reads column `att` of the selected rows as type `ty`.
fn read_col(
    blk: BlockRef,
    att: usize,
    ty: Ty,
    sel: &[u32],
    pool: &mut Pool,
) -> Result<Col, Fallback> {
    let c = column(blk, att)?;
    let mut vals = pool.ints(sel.len());
    let mut nulls: Option<Vec<bool>> = None;
    let mut spare = Some(pool.bools(sel.len()));
    let mut mark_null = |i: usize| {
        nulls.get_or_insert_with(|| spare.take().unwrap())[i] = true;
    };
    match ty {
        Ty::Int(bytes) => {
            if c.kind != KIND_FIXED || c.byval == 0 || c.attlen != bytes as i16 {
                return Err(Fallback(c"a column stored in another form"));
            }
            macro_rules! ints {
                ($t:ty) => {
                    for (i, &s) in sel.iter().enumerate() {
                        if blk.is_valid(c, s) {
                            vals.push(
                                unsafe { (blk.value_ptr(c, s) as *const $t).read_unaligned() }
                                    as i128,
                            );
                        } else {
                            mark_null(i);
                            vals.push(0);
                        }
                    }
                };
            }
            match bytes {
                2 => ints!(i16),
                4 => ints!(i32),
                _ => ints!(i64),
            }
        }
        Ty::Dec(scale) => {
            if !matches!(c.kind, KIND_DEC64 | KIND_DEC128) || c.scale as u32 != scale {
                return Err(Fallback(c"a numeric column stored in another form"));
            }
            let wide = c.kind == KIND_DEC128;
            for (i, &s) in sel.iter().enumerate() {
                if !blk.is_valid(c, s) {
                    mark_null(i);
                    vals.push(0);
                    continue;
                }
                let p = blk.value_ptr(c, s);
                let v = unsafe {
                    if wide {
                        let x = (p as *const i128).read_unaligned();
                        if x == NAN128 {
                            return Err(Fallback(c"NaN"));
                        }
                        x
                    } else {
                        let x = (p as *const i64).read_unaligned();
                        if x == NAN64 {
                            return Err(Fallback(c"NaN"));
                        }
                        x as i128
                    }
                };
                vals.push(v);
            }
        }
        Ty::Char(_) => return Err(Fallback(c"a character column in an expression")),
    }
    if let Some(b) = spare {
        pool.bools.push(b);
    }
    Ok(Col {
        val: Val::V(vals),
        nulls,
    })
}

/// The `n` (1..=8) bytes at `p` as a little-endian integer (no memcpy: a byte copy followed by a
/// wide load stalls on store forwarding).
#[inline(always)]
unsafe fn read_le(p: *const u8, n: usize) -> u64 {
    unsafe {
        match n {
            1 => *p as u64,
            2 => (p as *const u16).read_unaligned() as u64,
            4 => (p as *const u32).read_unaligned() as u64,
            8 => (p as *const u64).read_unaligned(),
            _ => {
                let mut v = 0u64;
                for i in 0..n {
                    v |= (*p.add(i) as u64) << (8 * i);
                }
                v
            }
        }
    }
}

fn pow10(k: u32) -> Option<i128> {
    10i128.checked_pow(k)
}

fn int_fits(v: i128, bytes: u8) -> bool {
    match bytes {
        2 => i16::try_from(v).is_ok(),
        4 => i32::try_from(v).is_ok(),
        _ => i64::try_from(v).is_ok(),
    }
}

#[inline]
fn fits64(x: i128) -> bool {
    x == x as i64 as i128
}

/// x * y, exact or None; a product of two 64-bit values cannot overflow (and is one multiply).
#[inline]
fn mul(x: i128, y: i128) -> Option<i128> {
    if fits64(x) && fits64(y) {
        Some(x * y)
    } else {
        x.checked_mul(y)
    }
}

const OVERFLOW: Fallback = Fallback(c"an overflow (PostgreSQL raises its error)");

/// a op b over a block's rows (numeric operands already at the result's scale for + and -).
fn apply(op: u8, a: Val, b: &Val, pool: &mut Pool) -> Result<Val, Fallback> {
    let f = |x: i128, y: i128| -> Option<i128> {
        match op {
            b'+' => x.checked_add(y),
            b'-' => x.checked_sub(y),
            _ => mul(x, y),
        }
    };
    Ok(match (a, b) {
        (Val::K(x), Val::K(y)) => Val::K(f(x, *y).ok_or(OVERFLOW)?),
        (Val::V(mut xs), Val::K(y)) => {
            for x in xs.iter_mut() {
                *x = f(*x, *y).ok_or(OVERFLOW)?;
            }
            Val::V(xs)
        }
        (Val::K(x), Val::V(ys)) => {
            let mut out = pool.ints(ys.len());
            for &y in ys {
                out.push(f(x, y).ok_or(OVERFLOW)?);
            }
            Val::V(out)
        }
        (Val::V(mut xs), Val::V(ys)) => {
            for (x, y) in xs.iter_mut().zip(ys) {
                *x = f(*x, *y).ok_or(OVERFLOW)?;
            }
            Val::V(xs)
        }
    })
}

/// Multiplies the values by 10^k (numeric rescaling).
fn rescale(v: Val, k: u32, pool: &mut Pool) -> Result<Val, Fallback> {
    if k == 0 {
        return Ok(v);
    }
    apply(b'*', v, &Val::K(pow10(k).ok_or(OVERFLOW)?), pool)
}

/// The columns one block's expressions read, each read once.
struct Cols<'a> {
    blk: BlockRef,
    sel: &'a [u32],
    read: Vec<((usize, Ty), Col)>,
    pool: &'a mut Pool,
}

impl Cols<'_> {
    fn get(&mut self, att: usize, ty: Ty) -> Result<Col, Fallback> {
        if let Some((_, c)) = self.read.iter().find(|(k, _)| *k == (att, ty)) {
            return Ok(self.pool.copy(c));
        }
        let c = read_col(self.blk, att, ty, self.sel, self.pool)?;
        let copy = self.pool.copy(&c);
        self.read.push(((att, ty), c));
        Ok(copy)
    }
}

/// Evaluates the tokens `expr` over the selected rows, on top of `stack` (a shared prefix's
/// value, or empty).
fn eval(cols: &mut Cols, expr: &[Tok], mut stack: Vec<(Col, Ty)>) -> Result<Col, Fallback> {
    let n = cols.sel.len();
    for t in expr {
        match t {
            Tok::Var(att, ty) => stack.push((cols.get(*att, *ty)?, *ty)),
            Tok::Const(v, ty) => stack.push((
                Col {
                    val: Val::K(*v),
                    nulls: None,
                },
                *ty,
            )),
            Tok::ToNum => stack.last_mut().unwrap().1 = Ty::Dec(0),
            Tok::ToInt(b) => stack.last_mut().unwrap().1 = Ty::Int(*b),
            Tok::Present(att) => {
                let c = column(cols.blk, *att)?;
                if c.kind == KIND_ABSENT {
                    return Err(Fallback(c"a column the block does not store"));
                }
                let mut nulls: Option<Vec<bool>> = None;
                for (i, &s) in cols.sel.iter().enumerate() {
                    if !cols.blk.is_valid(c, s) {
                        nulls.get_or_insert_with(|| cols.pool.bools(n))[i] = true;
                    }
                }
                stack.push((
                    Col {
                        val: Val::K(0),
                        nulls,
                    },
                    Ty::Int(8),
                ));
            }
            Tok::Op(op, rty) => {
                let (b, bt) = stack.pop().unwrap();
                let (a, at) = stack.pop().unwrap();
                // numeric + and -: both operands at the larger scale
                let (ka, kb) = match (at, bt, *op) {
                    (Ty::Dec(x), Ty::Dec(y), b'+' | b'-') => {
                        (y.saturating_sub(x), x.saturating_sub(y))
                    }
                    _ => (0, 0),
                };
                let bv = rescale(b.val, kb, cols.pool)?;
                let val = apply(*op, rescale(a.val, ka, cols.pool)?, &bv, cols.pool)?;
                cols.pool.put(Col {
                    val: bv,
                    nulls: None,
                });
                let nulls = match (a.nulls, b.nulls) {
                    (None, n) | (n, None) => n,
                    (Some(mut x), Some(y)) => {
                        for (p, q) in x.iter_mut().zip(&y) {
                            *p |= q;
                        }
                        cols.pool.bools.push(y);
                        Some(x)
                    }
                };
                let r = Col { val, nulls };
                // integer operators raise an error on overflow (a NULL operand's placeholder
                // never counts)
                if let Ty::Int(bytes) = rty {
                    match &r.val {
                        Val::K(x) => {
                            if !int_fits(*x, *bytes) && n > 0 {
                                return Err(OVERFLOW);
                            }
                        }
                        Val::V(xs) => {
                            for (i, x) in xs.iter().enumerate() {
                                if !int_fits(*x, *bytes) && !r.is_null(i) {
                                    return Err(OVERFLOW);
                                }
                            }
                        }
                    }
                }
                stack.push((r, *rty));
            }
        }
    }
    Ok(stack.pop().unwrap().0)
}

/// Adds one block's argument values to an aggregate's groups (`gids` None: all in group 0).
fn accumulate(
    kind: Kind,
    acc: &mut Acc,
    gids: Option<&[u32]>,
    col: &Col,
    n: usize,
) -> Result<(), Fallback> {
    let valid = |i: usize| !col.is_null(i);
    match (&col.val, gids) {
        (Val::K(x), _) => {
            // a constant argument: per group, the number of non-NULL rows
            for i in 0..n {
                if !valid(i) {
                    continue;
                }
                let g = gids.map(|ids| ids[i] as usize).unwrap_or(0);
                acc.n[g] += 1;
                match kind {
                    Kind::Sum | Kind::Avg => acc.v[g] = acc.v[g].checked_add(*x).ok_or(OVERFLOW)?,
                    Kind::Min => acc.v[g] = acc.v[g].min(*x),
                    Kind::Max => acc.v[g] = acc.v[g].max(*x),
                    _ => {}
                }
            }
        }
        (Val::V(xs), None) => {
            // one group: a block sum of 64-bit values cannot overflow 128 bits
            let mut cnt = 0i64;
            let (mut sum, mut lo, mut hi, mut small) = (0i128, i128::MAX, i128::MIN, true);
            match &col.nulls {
                None => {
                    cnt = n as i64;
                    for &x in xs {
                        small &= fits64(x);
                        sum = sum.wrapping_add(x);
                        lo = lo.min(x);
                        hi = hi.max(x);
                    }
                }
                Some(nulls) => {
                    for (&x, &null) in xs.iter().zip(nulls) {
                        if !null {
                            cnt += 1;
                            small &= fits64(x);
                            sum = sum.wrapping_add(x);
                            lo = lo.min(x);
                            hi = hi.max(x);
                        }
                    }
                }
            }
            if matches!(kind, Kind::Sum | Kind::Avg) && !small {
                // exact sum with overflow checks
                sum = 0;
                for (i, &x) in xs.iter().enumerate() {
                    if valid(i) {
                        sum = sum.checked_add(x).ok_or(OVERFLOW)?;
                    }
                }
            }
            acc.n[0] += cnt;
            match kind {
                Kind::Sum | Kind::Avg => acc.v[0] = acc.v[0].checked_add(sum).ok_or(OVERFLOW)?,
                Kind::Min => acc.v[0] = acc.v[0].min(lo),
                Kind::Max => acc.v[0] = acc.v[0].max(hi),
                _ => {}
            }
        }
        (Val::V(xs), Some(ids)) => {
            // many groups: their states are megabytes, each row's a cache miss; ask ahead
            let ask = acc.n.len() > PREFETCH_GROUPS;
            for (i, (&x, &g)) in xs.iter().zip(ids).enumerate() {
                if let Some(&a) = ids.get(i + STATE_AHEAD).filter(|_| ask) {
                    crate::storage::block::prefetch_line(
                        acc.n.as_ptr().wrapping_add(a as usize) as *const u8
                    );
                    crate::storage::block::prefetch_line(
                        acc.v.as_ptr().wrapping_add(a as usize) as *const u8
                    );
                }
                if !valid(i) {
                    continue;
                }
                let g = g as usize;
                acc.n[g] += 1;
                match kind {
                    Kind::Sum | Kind::Avg => acc.v[g] = acc.v[g].checked_add(x).ok_or(OVERFLOW)?,
                    Kind::Min => acc.v[g] = acc.v[g].min(x),
                    Kind::Max => acc.v[g] = acc.v[g].max(x),
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

impl AggExec {
    pub fn new(spec: Spec) -> AggExec {
        let n = spec.aggs.len();
        let mut e = AggExec {
            spec,
            groups: Groups::new(),
            accs: (0..n).map(|_| Acc::default()).collect(),
            pool: Pool::default(),
            sel: Vec::new(),
            filter_order: FilterOrder::default(),
            keys: Vec::new(),
            hashes: Vec::new(),
            gids: Vec::new(),
            blocks: 0,
            blocks_empty: 0,
            blocks_skipped: 0,
            row_join: None,
            join_removed: 0,
            dense: None,
            dense_off: false,
            grid_rows: 0,
            grid_only: true,
        };
        e.dense_off = e.spec.keys.is_empty()
            || e.spec.keys.len() > KEY_WORDS
            || e.spec.keys.iter().any(|&(_, ty)| !matches!(ty, Ty::Int(_)));
        if e.spec.keys.is_empty() {
            // no GROUP BY: one group, even over no rows
            e.group(&([0; KEY_WORDS], 0));
        }
        e
    }

    /// The group of key `k`, created if new.
    #[inline]
    fn group(&mut self, k: &Key) -> u32 {
        let h = key_hash(k);
        self.group_h(k, h)
    }

    /// [`AggExec::group`] with the key's hash already computed.
    #[inline]
    fn group_h(&mut self, k: &Key, h: u64) -> u32 {
        // a group found or added by hash may not be in the grid's cells
        self.grid_only = false;
        self.groups.index_all();
        let (g, new) = self.groups.find_or_add_h(k, h);
        if new {
            self.new_group_states();
        }
        g
    }

    /// The aggregate states of a group just added.
    #[inline]
    fn new_group_states(&mut self) {
        for (a, spec) in self.accs.iter_mut().zip(&self.spec.aggs) {
            a.n.push(0);
            a.v.push(match spec.kind {
                Kind::Min => i128::MAX,
                Kind::Max => i128::MIN,
                _ => 0,
            });
        }
    }

    /// The group of key `k` (no NULL) whose grid cell is empty: a new group while every group
    /// so far came through the grid (nothing hashed yet), else looked up by hash (a group the
    /// grid did not hold, from before it grew over the key, may exist).
    #[inline]
    fn group_for_cell(&mut self, k: &Key) -> u32 {
        if self.grid_only {
            // nothing was looked up by hash, so no group was entered in the table
            debug_assert_eq!(self.groups.unindexed, self.groups.keys.len());
            let g = self.groups.push_unindexed(k);
            self.new_group_states();
            g
        } else {
            self.group(k)
        }
    }

    /// Makes the grid (see [`Dense`]) cover the key ranges of block `blk`'s zone maps, growing
    /// it (each side at least doubling) when they reach outside; false: look this block's keys
    /// up by hash (a key column all NULL here, or a grid that would be too big, which stops the
    /// grid for good).
    fn dense_covers(&mut self, blk: BlockRef) -> bool {
        if self.dense_off {
            return false;
        }
        let nk = self.spec.keys.len();
        let (mut lo, mut hi) = ([0i64; KEY_WORDS], [0i64; KEY_WORDS]);
        for (ki, &(att, _)) in self.spec.keys.iter().enumerate() {
            if att >= blk.natts() {
                return false;
            }
            let z = blk.zone(att);
            if z.is_empty() || z.min < i64::MIN as i128 || z.max > i64::MAX as i128 {
                return false;
            }
            (lo[ki], hi[ki]) = (z.min as i64, z.max as i64);
        }
        if let Some(d) = &self.dense {
            let inside = (0..nk)
                .all(|w| lo[w] >= d.lo[w] && (hi[w] as i128) < d.lo[w] as i128 + d.len[w] as i128);
            if inside {
                return true;
            }
            for w in 0..nk {
                let (dlo, dhi) = (d.lo[w] as i128, d.lo[w] as i128 + d.len[w] as i128 - 1);
                let span = dhi - dlo + 1;
                let mut l = dlo;
                let mut h = dhi;
                if (lo[w] as i128) < dlo {
                    l = (lo[w] as i128).min(dlo - span).max(i64::MIN as i128);
                }
                if (hi[w] as i128) > dhi {
                    h = (hi[w] as i128).max(dhi + span).min(i64::MAX as i128);
                }
                (lo[w], hi[w]) = (l as i64, h as i64);
            }
        }
        match Dense::build(&lo[..nk], &hi[..nk], &self.groups) {
            Some(d) => {
                self.dense = Some(d);
                true
            }
            None => {
                self.dense = None;
                self.dense_off = true;
                false
            }
        }
    }

    /// The group of each selected row (None: no GROUP BY, every row in group 0).
    /// The group of each selected row into `self.gids` (false: no GROUP BY, every row in
    /// group 0).
    fn group_ids(&mut self, blk: BlockRef, sel: &[u32]) -> Result<bool, Fallback> {
        if self.spec.keys.is_empty() {
            return Ok(false);
        }
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        keys.resize(sel.len(), ([0; KEY_WORDS], 0));
        let mut w = 0usize;
        for (ki, &(att, ty)) in self.spec.keys.iter().enumerate() {
            let c = column(blk, att)?;
            if !key_stored_as(c, ty) {
                return Err(Fallback(c"a group key stored in another form"));
            }
            for (i, &s) in sel.iter().enumerate() {
                read_key_word(blk, c, ty, s, ki, w, &mut keys[i]);
            }
            w += key_words(ty);
        }
        let mut ids = std::mem::take(&mut self.gids);
        ids.clear();
        let mut last: Option<(Key, u32)> = None;
        if self.dense_covers(blk) {
            let mut d = self.dense.take().expect("a grid");
            self.grid_rows += keys.len() as u64;
            // a grid beyond the caches: each row's cell a miss; ask for the cell of the key
            // CELL_AHEAD rows ahead
            let ask = d.cells.len() > PREFETCH_CELLS;
            for (i, k) in keys.iter().enumerate() {
                if let Some(ka) = keys.get(i + CELL_AHEAD).filter(|ka| ask && ka.1 == 0) {
                    if let Some(c) = d.cell(ka) {
                        crate::storage::block::prefetch_line(
                            d.cells.as_ptr().wrapping_add(c) as *const u8
                        );
                    }
                }
                let g = match last {
                    Some((lk, lg)) if lk == *k => lg,
                    _ => match (k.1 == 0).then(|| d.cell(k)).flatten() {
                        Some(i) if d.cells[i] != 0 => d.cells[i] - 1,
                        Some(i) => {
                            let g = self.group_for_cell(k);
                            d.cells[i] = g + 1;
                            g
                        }
                        None => {
                            self.grid_only = false;
                            self.group(k)
                        }
                    },
                };
                last = Some((*k, g));
                ids.push(g);
            }
            self.dense = Some(d);
        } else if self.groups.keys.len() > PREFETCH_GROUPS {
            // a big table: hash the block's keys first, then look each up while asking for the
            // slot of the key 16 rows ahead and the group key of the one 8 ahead
            let mut hs = std::mem::take(&mut self.hashes);
            hs.clear();
            hs.extend(keys.iter().map(key_hash));
            for (i, k) in keys.iter().enumerate() {
                if let Some(&h) = hs.get(i + 16) {
                    self.groups.prefetch_slot(h);
                }
                if let Some(&h) = hs.get(i + 8) {
                    self.groups.prefetch_key(h);
                }
                let g = match last {
                    Some((lk, lg)) if lk == *k => lg,
                    _ => self.group_h(k, hs[i]),
                };
                last = Some((*k, g));
                ids.push(g);
            }
            self.hashes = hs;
        } else {
            for k in &keys {
                let g = match last {
                    Some((lk, lg)) if lk == *k => lg,
                    _ => self.group(k),
                };
                last = Some((*k, g));
                ids.push(g);
            }
        }
        self.gids = ids;
        self.keys = keys;
        Ok(true)
    }

    /// Adds the rows `rows` (visible to the scan) of block `blk`.
    pub fn add_block(&mut self, blk: BlockRef, rows: &[u32]) -> Result<(), Fallback> {
        self.blocks += 1;
        let mut sel = std::mem::take(&mut self.sel);
        sel.clear();
        sel.extend_from_slice(rows);
        let r = self.add_rows(blk, &mut sel);
        self.sel = sel;
        r
    }

    /// Applies the block filters to `sel`, in the order [`FilterOrder`] keeps.
    fn apply_filters(&mut self, blk: BlockRef, sel: &mut Vec<u32>) -> Result<(), Fallback> {
        let n = self.spec.filters.len();
        for k in 0..n {
            let i = self.filter_order.order(n)[k];
            let f = &self.spec.filters[i];
            let c = column(blk, f.col)?;
            let p = f
                .prepare_in(blk)
                .ok_or(Fallback(c"a filter this block cannot apply"))?;
            if !f.exact(&p, blk, c, sel) {
                return Err(Fallback(
                    c"a compressed or toasted value in a filtered column",
                ));
            }
            let before = sel.len();
            f.retain(&p, blk, c, sel);
            self.filter_order.record(i, before, sel.len());
            if sel.is_empty() {
                break;
            }
        }
        Ok(())
    }

    /// Drops the rows of `sel` whose join keys the probed hash join's table cannot hold (see
    /// [`RowJoinFilter`]): their groups could not match any of its rows, so the join would drop
    /// them. A NULL key, a block storing a key in another form, or a filter that drops fewer than
    /// one row in 16 over its first 64k rows keeps them.
    fn apply_row_join(&mut self, blk: BlockRef, sel: &mut Vec<u32>) {
        let Some(j) = self.row_join.as_mut().filter(|j| j.filtering) else {
            return;
        };
        // the join's keys as (column, width)
        let mut keys = [(0usize, 0u8); 4];
        for (i, &(k, width)) in j.keys.iter().enumerate() {
            let Some(&(att, _)) = self.spec.keys.get(k) else {
                return;
            };
            keys[i] = (att, width);
        }
        let Some((cols, n)) = crate::storage::filter::join_key_columns(blk, &keys[..j.keys.len()])
        else {
            return;
        };
        let cols = &cols[..n];
        let before = sel.len();
        let (table, may_match) = (j.table, j.may_match);
        sel.retain(|&s| {
            let (h, null) = crate::storage::filter::join_key_hash(blk, cols, s);
            // a NULL key: the join decides
            null || unsafe { may_match(table, h) }
        });
        let removed = (before - sel.len()) as u64;
        j.checked += before as u64;
        self.join_removed += removed;
        if j.checked >= 65_536 && self.join_removed * 16 < j.checked {
            j.filtering = false;
        }
    }

    fn add_rows(&mut self, blk: BlockRef, sel: &mut Vec<u32>) -> Result<(), Fallback> {
        let r = self.apply_filters(blk, sel);
        self.filter_order.block_done(&self.spec.filters);
        r?;
        if !sel.is_empty() {
            self.apply_row_join(blk, sel);
        }
        if sel.is_empty() {
            self.blocks_empty += 1;
            return Ok(());
        }
        let n = sel.len();
        let grouped = self.group_ids(blk, sel)?;
        let mut pool = std::mem::take(&mut self.pool);
        let mut cols = Cols {
            blk,
            sel,
            read: Vec::new(),
            pool: &mut pool,
        };
        // each aggregate's argument over the block (shared subexpressions evaluated once)
        let mut results: Vec<Option<Col>> = Vec::with_capacity(self.spec.aggs.len());
        let mut failed = None;
        for ai in 0..self.spec.aggs.len() {
            let spec = &self.spec.aggs[ai];
            let r = match (spec.kind, spec.reuse) {
                (Kind::CountStar, _) | (_, Reuse::Same(_)) => Ok(None),
                (_, Reuse::Prefix(i, len)) => {
                    let base = cols.pool.copy(results[i].as_ref().unwrap());
                    let ty = self.spec.aggs[i].ty.unwrap();
                    eval(&mut cols, &spec.expr[len..], vec![(base, ty)]).map(Some)
                }
                (_, Reuse::None) => eval(&mut cols, &spec.expr, Vec::new()).map(Some),
            };
            match r {
                Ok(r) => results.push(r),
                Err(f) => {
                    failed = Some(f);
                    break;
                }
            }
        }
        for (_, c) in cols.read.drain(..) {
            pool.put(c);
        }
        if failed.is_none() {
            let gids = grouped.then_some(&self.gids[..]);
            for ai in 0..self.spec.aggs.len() {
                let kind = self.spec.aggs[ai].kind;
                let acc = &mut self.accs[ai];
                if kind == Kind::CountStar {
                    match gids {
                        None => acc.n[0] += n as i64,
                        Some(ids) => {
                            for &g in ids {
                                acc.n[g as usize] += 1;
                            }
                        }
                    }
                    continue;
                }
                let src = match self.spec.aggs[ai].reuse {
                    Reuse::Same(i) => i,
                    _ => ai,
                };
                let col = results[src].as_ref().unwrap();
                if let Err(f) = accumulate(kind, acc, gids, col, n) {
                    failed = Some(f);
                    break;
                }
            }
        }
        for c in results.into_iter().flatten() {
            pool.put(c);
        }
        self.pool = pool;
        match failed {
            None => Ok(()),
            Some(f) => Err(f),
        }
    }

    pub fn ngroups(&self) -> usize {
        self.groups.keys.len()
    }

    /// Result row `g`: group keys first, then the aggregates, as datums allocated in the current
    /// memory context. `div` is PostgreSQL's numeric division (for `avg`).
    ///
    /// # Safety
    /// `values`/`nulls` have room for keys + aggregates.
    pub unsafe fn row(
        &self,
        g: usize,
        values: *mut pg_sys::Datum,
        nulls: *mut bool,
        div: unsafe extern "C" fn(pg_sys::Datum, pg_sys::Datum) -> pg_sys::Datum,
    ) -> Result<(), Fallback> {
        unsafe {
            let (words, nullmask) = self.groups.keys[g];
            let mut w = 0usize;
            let mut col = 0usize;
            for (ki, &(_, ty)) in self.spec.keys.iter().enumerate() {
                let null = nullmask & (1 << ki) != 0;
                *nulls.add(col) = null;
                *values.add(col) = if null {
                    pg_sys::Datum::from(0usize)
                } else {
                    match ty {
                        Ty::Int(_) => pg_sys::Datum::from(words[w] as i64 as isize),
                        Ty::Dec(s) => {
                            let v = (words[w] as u128 | ((words[w + 1] as u128) << 64)) as i128;
                            numeric_datum(v, s)
                        }
                        Ty::Char(wd) => {
                            let hi = if wd > 8 { words[w + 1] } else { 0 };
                            let b = (words[w] as u128 | ((hi as u128) << 64)).to_le_bytes();
                            let b = &b[..wd as usize];
                            varlena_datum(&b[..encoding::charn_len(b)])
                        }
                    }
                };
                w += key_words(ty);
                col += 1;
            }
            for (a, spec) in self.accs.iter().zip(&self.spec.aggs) {
                let (n, v) = (a.n[g], a.v[g]);
                let (d, null) = match spec.kind {
                    Kind::CountStar | Kind::Count => (pg_sys::Datum::from(n as isize), false),
                    _ if n == 0 => (pg_sys::Datum::from(0usize), true),
                    Kind::Avg => {
                        let s = match spec.out {
                            Ty::Dec(s) => s,
                            _ => 0,
                        };
                        (div(numeric_datum(v, s), numeric_datum(n as i128, 0)), false)
                    }
                    _ => match spec.out {
                        Ty::Int(b) => {
                            if !int_fits(v, b) {
                                return Err(OVERFLOW);
                            }
                            (pg_sys::Datum::from(v as i64 as isize), false)
                        }
                        Ty::Dec(s) => (numeric_datum(v, s), false),
                        Ty::Char(_) => unreachable!(),
                    },
                };
                *values.add(col) = d;
                *nulls.add(col) = null;
                col += 1;
            }
            Ok(())
        }
    }

    /// Checks that every result can be formed (an int8 sum of int2/int4 in range), so that
    /// [`row`](Self::row) cannot fail once rows are returned.
    pub fn check_final(&self) -> Result<(), Fallback> {
        for (a, spec) in self.accs.iter().zip(&self.spec.aggs) {
            if let (Kind::Sum | Kind::Min | Kind::Max, Ty::Int(b)) = (spec.kind, spec.out) {
                for g in 0..self.groups.keys.len() {
                    if a.n[g] > 0 && !int_fits(a.v[g], b) {
                        return Err(OVERFLOW);
                    }
                }
            }
        }
        Ok(())
    }
}

// ---- the node's interface (customagg.c) ----

use crate::am::scan::{drop_holder, new_holder, Holder};
use std::ffi::{c_char, CStr};

/// A ScootAgg's state from the plan's description (in the current memory context, freed with
/// it or by [`scoot_agg_free`]); errors if the description does not parse (a planner bug).
#[unsafe(no_mangle)]
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn scoot_agg_create(spec: *const c_char) -> *mut Holder<AggExec> {
    crate::ffi::guard::boundary(|| {
        let s = unsafe { CStr::from_ptr(spec) }.to_string_lossy();
        match Spec::parse(&s) {
            Some(spec) => new_holder(AggExec::new(spec)),
            None => pgrx::error!("scoot: cannot read the aggregate description {s:?}"),
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_agg_free(h: *mut Holder<AggExec>) {
    drop_holder(h)
}

/// Aggregates every row `scan` returns. NULL when done; else why the integer path cannot
/// answer (the node then runs PostgreSQL's plan).
#[unsafe(no_mangle)]
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn scoot_agg_run(
    h: *mut Holder<AggExec>,
    scan: pg_sys::TableScanDesc,
) -> *const c_char {
    crate::ffi::guard::boundary(|| unsafe {
        let e = &mut *(*h).st;
        let mut why: Option<Fallback> = None;
        // the scan skips blocks whose zone maps no row of can pass
        for f in &e.spec.filters {
            crate::am::scan::add_filter(scan, f.clone());
        }
        let natts = (*(*(*scan).rs_rd).rd_att).natts as usize;
        let cols = e.spec.columns(natts);
        let visited = crate::am::scan::visit_blocks(scan, &cols, &mut |blk, rows| match e
            .add_block(blk, rows)
        {
            Ok(()) => true,
            Err(f) => {
                why = Some(f);
                false
            }
        });
        e.blocks_skipped = crate::am::scan::zone_skipped(scan);
        if !visited {
            why = Some(Fallback(c"not a block-at-a-time scan"));
        }
        if why.is_none() {
            why = e.check_final().err();
        }
        match why {
            None => std::ptr::null(),
            Some(f) => f.0.as_ptr(),
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_agg_ngroups(h: *mut Holder<AggExec>) -> i64 {
    unsafe { (*(*h).st).ngroups() as i64 }
}

impl AggExec {
    /// The hash value PostgreSQL's hash join computes for group `g` whose join keys are the
    /// group keys `cols` (indexes into the key list), integers hashed as `widths` say
    /// (`hashint2`/`4`/`8`): `Some((hash, has a NULL key))`, or None when a key is not an
    /// integer of that width (the caller then keeps every group).
    pub fn join_key_hash(&self, g: usize, cols: &[usize], widths: &[u8]) -> Option<(u32, bool)> {
        let (words, nullmask) = self.groups.keys.get(g)?;
        let mut h = 0u32;
        for (&c, &wd) in cols.iter().zip(widths) {
            let &(_, ty) = self.spec.keys.get(c)?;
            if ty != Ty::Int(wd) {
                return None;
            }
            if nullmask & (1 << c) != 0 {
                return Some((h, true));
            }
            let w: usize = self.spec.keys[..c].iter().map(|k| key_words(k.1)).sum();
            h = h.rotate_left(1) ^ crate::storage::filter::hash_int(words[w] as i64, wd);
        }
        Some((h, false))
    }
}

/// [`AggExec::join_key_hash`] for a ScootPreAgg probing a hash join (`exec/customscan.c`):
/// 0 and `*hash` set, 1 for a NULL key, -1 when the keys cannot be hashed so.
///
/// # Safety
/// `h` is a live engine holder, `cols` and `widths` hold `n` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_agg_key_hash(
    h: *mut Holder<AggExec>,
    g: i64,
    n: i32,
    cols: *const i32,
    widths: *const i32,
    hash: *mut u32,
) -> i32 {
    unsafe {
        let e = &*(*h).st;
        let n = n.clamp(0, 4) as usize;
        let mut c = [0usize; 4];
        let mut w = [0u8; 4];
        for i in 0..n {
            let (ci, wi) = (*cols.add(i), *widths.add(i));
            if ci < 0 || !matches!(wi, 2 | 4 | 8) {
                return -1;
            }
            c[i] = ci as usize;
            w[i] = wi as u8;
        }
        match e.join_key_hash(g as usize, &c[..n], &w[..n]) {
            None => -1,
            Some((_, true)) => 1,
            Some((v, false)) => {
                *hash = v;
                0
            }
        }
    }
}

/// Before [`scoot_agg_run`]: a ScootPreAgg probing a hash join whose table is built already
/// hands the engine the join's filter (`may_match(table, hash)`, customscan.c), to drop the rows
/// whose join keys — the group keys `cols`, hashed as integers of `widths` bytes as the join
/// hashes them — the table cannot hold, before they are grouped.
///
/// # Safety
/// `h` is a live engine holder, `cols` and `widths` hold `n` entries, `table` outlives the run.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_agg_set_row_join_filter(
    h: *mut Holder<AggExec>,
    table: *mut c_void,
    may_match: unsafe extern "C" fn(*mut c_void, u32) -> bool,
    n: i32,
    cols: *const i32,
    widths: *const i32,
) {
    unsafe {
        let e = &mut *(*h).st;
        let n = n.clamp(0, 4) as usize;
        let mut keys = Vec::with_capacity(n);
        for i in 0..n {
            let (ci, wi) = (*cols.add(i), *widths.add(i));
            match e.spec.keys.get(ci.max(0) as usize) {
                Some(&(_, Ty::Int(wd))) if ci >= 0 && wi == wd as i32 => {
                    keys.push((ci as usize, wd))
                }
                _ => return, // a key of another type or width: no filter
            }
        }
        if keys.is_empty() {
            return;
        }
        e.row_join = Some(RowJoinFilter {
            table,
            may_match,
            keys,
            checked: 0,
            filtering: true,
        });
    }
}

/// Rows the engine's join filter dropped before grouping (EXPLAIN ANALYZE).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_agg_join_removed(h: *mut Holder<AggExec>) -> i64 {
    unsafe { (*(*h).st).join_removed as i64 }
}

/// (blocks read, blocks the filters emptied, blocks skipped by zone maps), for EXPLAIN ANALYZE.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_agg_stats(
    h: *mut Holder<AggExec>,
    blocks: *mut i64,
    empty: *mut i64,
    skipped: *mut i64,
    grid_cells: *mut i64,
    grid_rows: *mut i64,
) {
    unsafe {
        let e = &*(*h).st;
        *blocks = e.blocks as i64;
        *empty = e.blocks_empty as i64;
        *skipped = e.blocks_skipped as i64;
        *grid_cells = e.dense.as_ref().map_or(0, |d| d.cells.len() as i64);
        *grid_rows = e.grid_rows as i64;
    }
}

unsafe extern "C" {
    fn scoot_numeric_div(a: pg_sys::Datum, b: pg_sys::Datum) -> pg_sys::Datum;
}

/// Result row `g` into `values`/`nulls` (group keys, then aggregates).
#[unsafe(no_mangle)]
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn scoot_agg_row(
    h: *mut Holder<AggExec>,
    g: i64,
    values: *mut pg_sys::Datum,
    nulls: *mut bool,
) {
    crate::ffi::guard::boundary(|| unsafe {
        let e = &*(*h).st;
        if let Err(f) = e.row(g as usize, values, nulls, scoot_numeric_div) {
            pgrx::error!("scoot: aggregate result: {}", f.0.to_string_lossy());
        }
    })
}

/// A palloc'd varlena (4-byte header) holding `payload`.
unsafe fn varlena_datum(payload: &[u8]) -> pg_sys::Datum {
    unsafe {
        let p = pg_sys::palloc(payload.len() + 4) as *mut u8;
        (p as *mut u32).write_unaligned(((payload.len() + 4) as u32) << 2);
        std::ptr::copy_nonoverlapping(payload.as_ptr(), p.add(4), payload.len());
        pg_sys::Datum::from(p)
    }
}

/// A numeric datum for `v` scaled by 10^scale (PostgreSQL's canonical bytes).
unsafe fn numeric_datum(v: i128, scale: u32) -> pg_sys::Datum {
    // one buffer per backend: a ScootPreAgg returns a numeric or two for each of its (up to
    // hundreds of thousands of) groups
    NUM_BUF.with(|b| {
        let mut out = b.borrow_mut();
        out.clear();
        encoding::i128_to_numeric(v, scale, &mut out);
        unsafe { varlena_datum(&out) }
    })
}

thread_local! {
    static NUM_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key1(v: i64, w2: i64) -> Key {
        let mut w = [0u64; KEY_WORDS];
        w[0] = v as u64;
        w[1] = w2 as u64;
        (w, 0)
    }

    #[test]
    fn groups_added_unindexed_are_found_by_hash() {
        let mut g = Groups::new();
        for v in 0..1000 {
            assert_eq!(g.push_unindexed(&key1(v, 0)), v as u32);
        }
        g.index_all();
        assert_eq!(g.unindexed, 0);
        for v in 0..1000 {
            let k = key1(v, 0);
            assert_eq!(g.find_or_add_h(&k, key_hash(&k)), (v as u32, false));
        }
        let k = key1(5000, 0);
        assert_eq!(g.find_or_add_h(&k, key_hash(&k)), (1000, true));
    }

    #[test]
    fn dense_grid_cells_and_limits() {
        let mut g = Groups::new();
        let k = key1(0, 11);
        g.find_or_add_h(&k, key_hash(&k));
        let d = Dense::build(&[-5, 10], &[5, 12], &g).unwrap();
        assert_eq!(d.cells.len(), 11 * 3);
        assert_eq!(d.cell(&key1(-5, 10)), Some(0));
        assert_eq!(d.cell(&key1(5, 12)), Some(32));
        assert_eq!(d.cell(&key1(6, 10)), None);
        assert_eq!(d.cell(&key1(-6, 10)), None);
        assert_eq!(d.cell(&key1(0, 13)), None);
        // the existing group is in its cell
        assert_eq!(d.cells[d.cell(&key1(0, 11)).unwrap()], 1);
        assert!(Dense::build(&[0], &[1 << 22], &g).is_none());
        assert!(Dense::build(&[i64::MIN], &[i64::MAX], &g).is_none());
        assert!(Dense::build(&[0, 0], &[4095, 4095], &g).is_none());
        assert!(Dense::build(&[0, 0], &[2047, 2047], &g).is_some());
    }

    #[test]
    fn parse_spec() {
        let s = Spec::parse(
            "K 9 c1\nK 10 c1\nF 11 2 int 10471\nA countstar\nA sum v5:d2\n\
             A sum v6:d2 k100:d2 v7:d2 -:d *:d\nA avg v5:d2\nA sum v1:i4\nA max v1:i4\n",
        )
        .unwrap();
        assert_eq!(s.keys, vec![(8, Ty::Char(1)), (9, Ty::Char(1))]);
        assert_eq!(s.filters.len(), 1);
        assert_eq!(s.aggs.len(), 6);
        assert_eq!(s.aggs[2].ty, Some(Ty::Dec(4)));
        assert_eq!(s.aggs[2].out, Ty::Dec(4));
        assert_eq!(s.aggs[4].out, Ty::Int(8));
        assert_eq!(s.aggs[5].out, Ty::Int(4));
        // int ops need equal widths, numeric scales add up under *, bad tokens are refused
        assert!(Spec::parse("A sum v1:i4 v2:i8 +:i4").is_none());
        assert_eq!(
            Spec::parse("A sum v1:i8 tonum k3:d1 *:d").unwrap().aggs[0].ty,
            Some(Ty::Dec(1))
        );
        assert!(Spec::parse("A sum v1:i4 v2:i4").is_none());
        assert!(Spec::parse("A sum v1:c4").is_none());
        assert!(Spec::parse("A median v1:i4").is_none());
        assert!(Spec::parse("K 1 c16\nK 2 c16\nK 3 i8").is_none());
        assert!(Spec::parse("A sum v1:d30 v2:d30 *:d").is_none());
        // widening, presence (count only)
        assert_eq!(
            Spec::parse("A sum v1:i4 toi8 v2:i8 +:i8").unwrap().aggs[0].ty,
            Some(Ty::Int(8))
        );
        assert!(Spec::parse("A sum v1:i8 toi4").is_none());
        assert!(Spec::parse("A count p3").is_some());
        assert!(Spec::parse("A sum p3").is_none());
        assert!(Spec::parse("A count p3 p4 +:i8").is_none());
        // shared arguments
        let s =
            Spec::parse("A sum v1:d2\nA avg v1:d2\nA sum v1:d2 v2:d2 *:d\nA count v1:d2").unwrap();
        assert_eq!(s.aggs[1].reuse, Reuse::Same(0));
        assert_eq!(s.aggs[2].reuse, Reuse::Prefix(0, 1));
        assert_eq!(s.aggs[3].reuse, Reuse::Same(0));
    }

    #[test]
    fn group_table() {
        // many groups (growth, tags), then every key again: the same groups, none new
        let mut t = Groups::new();
        let key = |i: u64| -> Key { ([i * 7919, i % 3, 0, 0], (i % 5 == 0) as u32) };
        for i in 0..20_000u64 {
            let k = key(i);
            assert_eq!(t.find_or_add_h(&k, key_hash(&k)), (i as u32, true));
        }
        for i in (0..20_000u64).rev() {
            let k = key(i);
            t.prefetch_slot(key_hash(&k));
            t.prefetch_key(key_hash(&k));
            assert_eq!(t.find_or_add_h(&k, key_hash(&k)), (i as u32, false));
        }
        assert_eq!(t.keys.len(), 20_000);
        // equal tags, different keys: told apart by the key compare
        let (a, b) = (key(1), key(2));
        let h = key_hash(&a);
        let mut u = Groups::new();
        assert_eq!(u.find_or_add_h(&a, h), (0, true));
        assert_eq!(u.find_or_add_h(&b, h), (1, true));
        assert_eq!(u.find_or_add_h(&a, h), (0, false));
        assert_eq!(u.find_or_add_h(&b, h), (1, false));
    }

    #[test]
    fn int_ranges() {
        assert!(int_fits(32767, 2) && !int_fits(32768, 2));
        assert!(int_fits(-2147483648, 4) && !int_fits(2147483648, 4));
        assert!(!int_fits(i64::MAX as i128 + 1, 8));
    }
}

/// Row slots [`sample_groups`] reads.
const SAMPLE_ROWS: usize = 3000;

/// Estimates how many groups the key columns `keys` form among the rows of `t`, which holds
/// about `ntuples` rows, from [`SAMPLE_ROWS`] distinct row slots drawn at random (the same draw
/// for the same table: plans do not change from one planning to the next): Haas and Stokes' Duj1
/// estimator, n·d / (n − f1 + f1·n/N), as PostgreSQL's ANALYZE uses for one column (d distinct
/// keys in the sample, f1 of them seen once). None: no rows, or no block stores the keys as the
/// engine reads them. Only row versions the planning statement's snapshot sees count (without
/// an active snapshot, every version): a table whose keys were rewritten and not yet vacuumed
/// holds the old keys too, in versions that form no group.
fn sample_groups(
    t: crate::storage::tabledir::TableRef,
    keys: &[(usize, Ty)],
    ntuples: f64,
) -> Option<f64> {
    use crate::storage::block::ST_NORMAL;
    let snap = unsafe {
        if pg_sys::ActiveSnapshotSet() {
            pg_sys::GetActiveSnapshot()
        } else {
            std::ptr::null_mut()
        }
    };
    let blocks = crate::storage::tabledir::blocks_of(t);
    if blocks.is_empty() || keys.is_empty() {
        return None;
    }
    // splitmix64, seeded by the table's block count (deterministic per table state)
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ blocks.len() as u64;
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    // how many slots to draw from each block (blocks are about equally full)
    let mut picks = vec![0u32; blocks.len()];
    for _ in 0..SAMPLE_ROWS {
        picks[(next() % blocks.len() as u64) as usize] += 1;
    }
    let mut counts: std::collections::HashMap<Key, u32> = std::collections::HashMap::new();
    let mut n = 0usize;
    for (i, &(lb, _)) in blocks.iter().enumerate() {
        if picks[i] == 0 {
            continue;
        }
        let Some(l) = crate::storage::modify::lock(t, lb, false) else {
            continue;
        };
        let hwm = l.hwm();
        if hwm == 0 {
            continue;
        }
        let mut cols = Vec::with_capacity(keys.len());
        for &(att, ty) in keys {
            match column(l.blk, att) {
                Ok(c) if key_stored_as(c, ty) => cols.push((c, ty)),
                _ => break,
            }
        }
        if cols.len() != keys.len() {
            continue;
        }
        // distinct slots: a slot drawn twice would count its key twice, and Duj1 reads a few
        // repeats among near-unique keys as every key occurring about twice (CH Q5's order
        // lines by order and item: 0.5M groups estimated of 1M rows, one row each in fact)
        for s in distinct_draws(picks[i], hwm, &mut next) {
            let h = l.row(s);
            if h.state() != ST_NORMAL || (!snap.is_null() && !crate::txn::mvcc::visible(h, snap)) {
                continue;
            }
            let mut k: Key = ([0; KEY_WORDS], 0);
            let mut w = 0usize;
            for (ki, &(c, ty)) in cols.iter().enumerate() {
                read_key_word(l.blk, c, ty, s, ki, w, &mut k);
                w += key_words(ty);
            }
            *counts.entry(k).or_insert(0) += 1;
            n += 1;
        }
    }
    if n == 0 {
        return None;
    }
    Some(duj1(
        n as f64,
        counts.len() as f64,
        counts.values().filter(|&&c| c == 1).count() as f64,
        ntuples,
    ))
}

/// `count` distinct numbers of `0..n` (all of them if `count >= n`) drawn at random by `next`: the
/// first steps of a Fisher-Yates shuffle of `0..n`, the moved entries kept in a map.
fn distinct_draws(count: u32, n: u32, next: &mut impl FnMut() -> u64) -> Vec<u32> {
    let mut moved: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(count.min(n) as usize);
    for j in 0..count.min(n) {
        let r = j + (next() % (n - j) as u64) as u32;
        out.push(moved.get(&r).copied().unwrap_or(r));
        moved.insert(r, moved.get(&j).copied().unwrap_or(j));
    }
    out
}

/// Haas and Stokes' Duj1 estimate of the distinct values among `big_n` rows from a sample of `n`
/// rows holding `d` distinct values, `f1` of them once; between d and N.
fn duj1(n: f64, d: f64, f1: f64, big_n: f64) -> f64 {
    let big_n = big_n.max(n);
    let denom = n - f1 + f1 * n / big_n;
    if denom <= 0.0 {
        return big_n;
    }
    (n * d / denom).clamp(d, big_n)
}

thread_local! {
    /// Sampled group counts per (table, key columns): (estimate, the row count it was made for).
    static SAMPLED: std::cell::RefCell<std::collections::HashMap<(u32, u32, String), (f64, f64)>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// The groups the keys of the ScootPreAgg description `spec` form among the rows of `rel`
/// (about `ntuples`), from a random sample of its rows (see [`sample_groups`]); -1: no estimate.
/// Kept per backend, and for the other backends ([`samplecache`]), until the table's row count
/// moves by a fifth.
#[unsafe(no_mangle)]
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn scoot_agg_sample_groups(
    spec: *const c_char,
    rel: pg_sys::Relation,
    ntuples: f64,
) -> f64 {
    crate::ffi::guard::boundary(|| unsafe {
        let Some(text) = CStr::from_ptr(spec).to_str().ok() else {
            return -1.0;
        };
        let Some(sp) = Spec::parse(text) else {
            return -1.0;
        };
        if sp.keys.is_empty() || ntuples < 1.0 {
            return -1.0;
        }
        let keys: String = text
            .lines()
            .filter(|l| l.starts_with("K "))
            .collect::<Vec<_>>()
            .join(";");
        let node = (*rel).rd_node;
        let ck = (u32::from(node.dbNode), u32::from(node.relNode), keys);
        if let Some((est, at)) = SAMPLED.with(|m| m.borrow().get(&ck).copied()) {
            if samplecache::fresh(at, ntuples) {
                return est;
            }
        }
        // another backend's sample of about this many rows, else a sample of our own for all
        let id = samplecache::RelId::of(rel);
        let (est, at) =
            match samplecache::get(samplecache::KIND_GROUPS, id, ck.2.as_bytes(), ntuples) {
                Some((at, v)) => (v[0], at),
                None => {
                    let t = crate::storage::tabledir::resolve(rel);
                    let est = sample_groups(t, &sp.keys, ntuples).unwrap_or(-1.0);
                    samplecache::put(
                        samplecache::KIND_GROUPS,
                        id,
                        ck.2.as_bytes(),
                        ntuples,
                        [est, 0.0, 0.0, 0.0],
                    );
                    (est, ntuples)
                }
            };
        SAMPLED.with(|m| m.borrow_mut().insert(ck, (est, at)));
        est
    })
}

#[cfg(test)]
mod sample_tests {
    use super::{distinct_draws, duj1};

    #[test]
    fn distinct_draws_never_repeat() {
        let mut x = 7u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 17
        };
        for (count, n) in [
            (22, 7200),
            (3000, 3000),
            (500, 600),
            (10, 3),
            (0, 5),
            (4, 0),
        ] {
            let d = distinct_draws(count, n, &mut next);
            assert_eq!(d.len(), count.min(n) as usize);
            let set: std::collections::HashSet<u32> = d.iter().copied().collect();
            assert_eq!(set.len(), d.len(), "repeats among {count} of {n}");
            assert!(d.iter().all(|&v| v < n));
        }
        // drawing everything is a permutation
        let mut all = distinct_draws(1000, 1000, &mut next);
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<u32>>());
    }

    #[test]
    fn duj1_bounds() {
        // every sampled key once: the keys are unique, as many groups as rows
        assert_eq!(duj1(3000.0, 3000.0, 3000.0, 400_000.0), 400_000.0);
        // no key once: the sample saw every group
        assert_eq!(duj1(3000.0, 100.0, 0.0, 400_000.0), 100.0);
        // groups of ten rows: 40k groups; a sample of 3000 sees ~142 keys twice
        let e = duj1(3000.0, 2929.0, 2858.0, 400_000.0);
        assert!(e > 30_000.0 && e < 80_000.0, "{e}");
    }
}
