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
use crate::storage::block::{BlockRef, ColDesc, KIND_CHARN, KIND_DEC128, KIND_DEC64, KIND_FIXED};
use crate::storage::encoding::{self, NAN128, NAN64};
use crate::storage::filter::BlockFilter;
use pgrx::pg_sys;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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
    /// int -> int8
    ToI8,
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

#[derive(Clone, Debug, PartialEq)]
pub struct AggSpec {
    kind: Kind,
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
pub struct Fallback(pub &'static str);

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
                let Ty::Int(_) = stack.pop()? else { return None };
                stack.push(Ty::Dec(0));
                Tok::ToNum
            }
            _ if head == "toi8" => {
                let Ty::Int(_) = stack.pop()? else { return None };
                stack.push(Ty::Int(8));
                Tok::ToI8
            }
            _ => return None,
        };
        out.push(tok);
    }
    (stack.len() == 1).then(|| (out, stack[0]))
}

impl Spec {
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
        Some(spec)
    }
}

/// Group keys are packed into this many 64-bit words (and a NULL mask).
const KEY_WORDS: usize = 4;
type Key = ([u64; KEY_WORDS], u32);

fn key_words(t: Ty) -> usize {
    match t {
        Ty::Int(_) => 1,
        _ => 2,
    }
}

/// FxHash: the group keys are a few words; SipHash would cost more than the aggregation.
#[derive(Default)]
struct Fx(u64);
impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64)
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64)
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

/// A column of one block, read as exact integers for the selected rows.
struct Col {
    vals: Vec<i128>,
    /// None: no NULLs
    nulls: Option<Vec<bool>>,
}

pub struct AggExec {
    spec: Spec,
    groups: HashMap<Key, u32, BuildHasherDefault<Fx>>,
    keys: Vec<Key>,
    accs: Vec<Acc>,
    /// blocks read, and blocks whose rows the filters removed entirely
    pub blocks: u64,
    pub blocks_empty: u64,
}

fn column<'a>(blk: BlockRef, att: usize) -> Result<&'a ColDesc, Fallback> {
    if att >= blk.natts() {
        return Err(Fallback("a column added after the block was written"));
    }
    // the descriptor lives in the block, which outlives this call's use
    Ok(unsafe { &*(blk.col(att) as *const ColDesc) })
}

/// Reads column `att` of the selected rows as type `ty`.
fn read_col(blk: BlockRef, att: usize, ty: Ty, sel: &[u32]) -> Result<Col, Fallback> {
    let c = column(blk, att)?;
    let mut vals = Vec::with_capacity(sel.len());
    let mut nulls: Option<Vec<bool>> = None;
    let check_nulls = |nulls: &mut Option<Vec<bool>>, i: usize, valid: bool| {
        if !valid {
            nulls.get_or_insert_with(|| vec![false; sel.len()])[i] = true;
        }
    };
    match ty {
        Ty::Int(bytes) => {
            if c.kind != KIND_FIXED || c.byval == 0 || c.attlen != bytes as i16 {
                return Err(Fallback("a column stored in another form"));
            }
            for (i, &s) in sel.iter().enumerate() {
                let valid = blk.is_valid(c, s);
                check_nulls(&mut nulls, i, valid);
                let p = blk.value_ptr(c, s);
                let v = unsafe {
                    match bytes {
                        2 => (p as *const i16).read_unaligned() as i128,
                        4 => (p as *const i32).read_unaligned() as i128,
                        _ => (p as *const i64).read_unaligned() as i128,
                    }
                };
                vals.push(if valid { v } else { 0 });
            }
        }
        Ty::Dec(scale) => {
            if !matches!(c.kind, KIND_DEC64 | KIND_DEC128) || c.scale as u32 != scale {
                return Err(Fallback("a numeric column stored in another form"));
            }
            let wide = c.kind == KIND_DEC128;
            for (i, &s) in sel.iter().enumerate() {
                let valid = blk.is_valid(c, s);
                check_nulls(&mut nulls, i, valid);
                if !valid {
                    vals.push(0);
                    continue;
                }
                let p = blk.value_ptr(c, s);
                let v = unsafe {
                    if wide {
                        let x = (p as *const i128).read_unaligned();
                        if x == NAN128 {
                            return Err(Fallback("NaN"));
                        }
                        x
                    } else {
                        let x = (p as *const i64).read_unaligned();
                        if x == NAN64 {
                            return Err(Fallback("NaN"));
                        }
                        x as i128
                    }
                };
                vals.push(v);
            }
        }
        Ty::Char(_) => return Err(Fallback("a character column in an expression")),
    }
    Ok(Col { vals, nulls })
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

const OVERFLOW: Fallback = Fallback("an overflow (PostgreSQL raises its error)");

/// Evaluates an expression over the selected rows of a block.
fn eval(blk: BlockRef, expr: &[Tok], sel: &[u32]) -> Result<Col, Fallback> {
    let mut stack: Vec<(Col, Ty)> = Vec::new();
    for t in expr {
        match t {
            Tok::Var(att, ty) => stack.push((read_col(blk, *att, *ty, sel)?, *ty)),
            Tok::Const(v, ty) => stack.push((
                Col {
                    vals: vec![*v; sel.len()],
                    nulls: None,
                },
                *ty,
            )),
            Tok::ToNum => {
                let top = stack.last_mut().unwrap();
                top.1 = Ty::Dec(0);
            }
            Tok::ToI8 => {
                let top = stack.last_mut().unwrap();
                top.1 = Ty::Int(8);
            }
            Tok::Op(op, rty) => {
                let (b, bt) = stack.pop().unwrap();
                let (mut a, at) = stack.pop().unwrap();
                // numeric + and -: both operands at the larger scale
                let (fa, fb) = match (at, bt, *op) {
                    (Ty::Dec(x), Ty::Dec(y), b'+' | b'-') => (
                        pow10(y.saturating_sub(x)).ok_or(OVERFLOW)?,
                        pow10(x.saturating_sub(y)).ok_or(OVERFLOW)?,
                    ),
                    _ => (1, 1),
                };
                for (x, y) in a.vals.iter_mut().zip(b.vals.iter()) {
                    let (x1, y1) = if fa == 1 && fb == 1 {
                        (*x, *y)
                    } else {
                        (
                            x.checked_mul(fa).ok_or(OVERFLOW)?,
                            y.checked_mul(fb).ok_or(OVERFLOW)?,
                        )
                    };
                    let r = match op {
                        b'+' => x1.checked_add(y1),
                        b'-' => x1.checked_sub(y1),
                        _ => x1.checked_mul(y1),
                    };
                    *x = r.ok_or(OVERFLOW)?;
                }
                a.nulls = match (a.nulls, b.nulls) {
                    (None, n) | (n, None) => n,
                    (Some(mut x), Some(y)) => {
                        for (p, q) in x.iter_mut().zip(y) {
                            *p |= q;
                        }
                        Some(x)
                    }
                };
                // a NULL operand's placeholder value never overflows the result
                if let Ty::Int(bytes) = rty {
                    for (i, v) in a.vals.iter().enumerate() {
                        if !int_fits(*v, *bytes) && !a.nulls.as_ref().is_some_and(|n| n[i]) {
                            return Err(OVERFLOW);
                        }
                    }
                }
                stack.push((a, *rty));
            }
        }
    }
    Ok(stack.pop().unwrap().0)
}

impl AggExec {
    pub fn new(spec: Spec) -> AggExec {
        let n = spec.aggs.len();
        let mut e = AggExec {
            spec,
            groups: HashMap::default(),
            keys: Vec::new(),
            accs: (0..n).map(|_| Acc::default()).collect(),
            blocks: 0,
            blocks_empty: 0,
        };
        if e.spec.keys.is_empty() {
            // no GROUP BY: one group, even over no rows
            e.new_group(([0; KEY_WORDS], 0));
        }
        e
    }

    fn new_group(&mut self, k: Key) -> u32 {
        let g = self.keys.len() as u32;
        self.keys.push(k);
        self.groups.insert(k, g);
        for (a, spec) in self.accs.iter_mut().zip(&self.spec.aggs) {
            a.n.push(0);
            a.v.push(match spec.kind {
                Kind::Min => i128::MAX,
                Kind::Max => i128::MIN,
                _ => 0,
            });
        }
        g
    }

    /// The group of each selected row.
    fn group_ids(&mut self, blk: BlockRef, sel: &[u32]) -> Result<Vec<u32>, Fallback> {
        if self.spec.keys.is_empty() {
            return Ok(vec![0; sel.len()]);
        }
        let mut keys: Vec<Key> = vec![([0; KEY_WORDS], 0); sel.len()];
        let mut w = 0usize;
        for (ki, &(att, ty)) in self.spec.keys.iter().enumerate() {
            let c = column(blk, att)?;
            let ok = match ty {
                Ty::Int(b) => c.kind == KIND_FIXED && c.byval != 0 && c.attlen == b as i16,
                Ty::Dec(s) => matches!(c.kind, KIND_DEC64 | KIND_DEC128) && c.scale as u32 == s,
                Ty::Char(wd) => c.kind == KIND_CHARN && c.width == wd,
            };
            if !ok {
                return Err(Fallback("a group key stored in another form"));
            }
            for (i, &s) in sel.iter().enumerate() {
                let k = &mut keys[i];
                if !blk.is_valid(c, s) {
                    k.1 |= 1 << ki;
                    continue;
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
                                if x == NAN64 { NAN128 } else { x as i128 }
                            };
                            // NaN groups with NaN, as in PostgreSQL; the marker is one value
                            k.0[w] = v as u64;
                            k.0[w + 1] = (v >> 64) as u64;
                        }
                        Ty::Char(wd) => {
                            let mut b = [0u8; 16];
                            std::ptr::copy_nonoverlapping(p, b.as_mut_ptr(), wd as usize);
                            let v = u128::from_le_bytes(b);
                            k.0[w] = v as u64;
                            k.0[w + 1] = (v >> 64) as u64;
                        }
                    }
                }
            }
            w += key_words(ty);
        }
        let mut ids = Vec::with_capacity(sel.len());
        let mut last: Option<(Key, u32)> = None;
        for k in keys {
            let g = match last {
                Some((lk, lg)) if lk == k => lg,
                _ => match self.groups.get(&k) {
                    Some(&g) => g,
                    None => self.new_group(k),
                },
            };
            last = Some((k, g));
            ids.push(g);
        }
        Ok(ids)
    }

    /// Adds the rows `rows` (visible to the scan) of block `blk`.
    pub fn add_block(&mut self, blk: BlockRef, rows: &[u32]) -> Result<(), Fallback> {
        self.blocks += 1;
        let mut sel: Vec<u32> = rows.to_vec();
        for f in &self.spec.filters {
            let c = column(blk, f.col)?;
            let p = f
                .prepare(c)
                .ok_or(Fallback("a filter this block cannot apply"))?;
            sel.retain(|&s| f.keep(&p, blk, c, s));
        }
        if sel.is_empty() {
            self.blocks_empty += 1;
            return Ok(());
        }
        let gids = self.group_ids(blk, &sel)?;
        for ai in 0..self.spec.aggs.len() {
            let kind = self.spec.aggs[ai].kind;
            if kind == Kind::CountStar {
                let acc = &mut self.accs[ai];
                for &g in &gids {
                    acc.n[g as usize] += 1;
                }
                continue;
            }
            let col = eval(blk, &self.spec.aggs[ai].expr, &sel)?;
            let acc = &mut self.accs[ai];
            for (i, &g) in gids.iter().enumerate() {
                if col.nulls.as_ref().is_some_and(|n| n[i]) {
                    continue;
                }
                let g = g as usize;
                let x = col.vals[i];
                acc.n[g] += 1;
                match kind {
                    Kind::Sum | Kind::Avg => {
                        acc.v[g] = acc.v[g].checked_add(x).ok_or(OVERFLOW)?;
                    }
                    Kind::Min => acc.v[g] = acc.v[g].min(x),
                    Kind::Max => acc.v[g] = acc.v[g].max(x),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    pub fn ngroups(&self) -> usize {
        self.keys.len()
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
            let (words, nullmask) = self.keys[g];
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
                        Ty::Char(_) => {
                            let v = words[w] as u128 | ((words[w + 1] as u128) << 64);
                            let b = v.to_le_bytes();
                            varlena_datum(&b[..encoding::charn_len(&b)])
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
                for g in 0..self.keys.len() {
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
        let visited = crate::am::scan::visit_blocks(scan, &mut |blk, rows| {
            match e.add_block(blk, rows) {
                Ok(()) => true,
                Err(f) => {
                    why = Some(f);
                    false
                }
            }
        });
        if !visited {
            why = Some(Fallback("not a block-at-a-time scan"));
        }
        if why.is_none() {
            why = e.check_final().err();
        }
        match why {
            None => std::ptr::null(),
            Some(f) => reason(f.0),
        }
    })
}

/// A NUL-terminated copy of a reason (static strings, leaked once each).
fn reason(s: &'static str) -> *const c_char {
    use std::sync::Mutex;
    static CACHE: Mutex<Vec<(&'static str, usize)>> = Mutex::new(Vec::new());
    let mut c = CACHE.lock().unwrap();
    if let Some(&(_, p)) = c.iter().find(|(k, _)| *k == s) {
        return p as *const c_char;
    }
    let p = std::ffi::CString::new(s).unwrap().into_raw() as usize;
    c.push((s, p));
    p as *const c_char
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_agg_ngroups(h: *mut Holder<AggExec>) -> i64 {
    unsafe { (*(*h).st).ngroups() as i64 }
}

/// (blocks read, blocks the filters emptied), for EXPLAIN ANALYZE.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scoot_agg_stats(h: *mut Holder<AggExec>, blocks: *mut i64, empty: *mut i64) {
    unsafe {
        let e = &*(*h).st;
        *blocks = e.blocks as i64;
        *empty = e.blocks_empty as i64;
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
            pgrx::error!("scoot: aggregate result: {}", f.0);
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
    let mut out = Vec::with_capacity(32);
    encoding::i128_to_numeric(v, scale, &mut out);
    unsafe { varlena_datum(&out) }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn int_ranges() {
        assert!(int_fits(32767, 2) && !int_fits(32768, 2));
        assert!(int_fits(-2147483648, 4) && !int_fits(2147483648, 4));
        assert!(!int_fits(i64::MAX as i128 + 1, 8));
    }
}
