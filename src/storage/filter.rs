//! Block filters of the ScootScan (`src/exec`): comparisons the planner found in a query's
//! restriction (see `block_filter` in `customscan.c`) — `column op constant`, `column IS [NOT]
//! NULL`, `column IN (constants)`, `column op column`, `column [NOT] LIKE pattern` — evaluated on
//! a block's column values before any row is copied. Plain Rust over the PAX block format; the scan calls [`BlockFilter::keep`] per row on
//! blocks where [`BlockFilter::prepare`] says it applies.
//!
//! Before that, [`excluded`] compares the filters with the block's zone maps (per-column min and
//! max, see `storage::block`): a block no row of which can pass is skipped without looking at
//! its rows at all.
//!
//! A filter is exactly the clause it came from: a row passes it if and only if the clause is
//! true for the row (NULLs fail every comparison), so the ScootScan does not evaluate the clause
//! again on a block whose filters all applied and judged every row ([`BlockFilter::exact`]).
//! A block whose column is stored in a form the filter does not read (a numeric that did not fit
//! a scaled integer, a column added after the block was written), or whose scale cannot
//! represent the constant exactly, is not filtered; a compressed or toasted value passes
//! unjudged. On such blocks PostgreSQL evaluates the clause.
use crate::storage::block::{
    bytes_key, float_key, zoned, BlockRef, ColDesc, Zone, KIND_ABSENT, KIND_CHARN, KIND_DEC128,
    KIND_DEC64, KIND_FIXED, KIND_VAR, VAR_RAW, ZORDER_BPCHAR, ZORDER_BYTES, ZORDER_FLOAT,
};
use crate::storage::encoding::{NAN128, NAN64};

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// int2/int4/int8, date (days), timestamp[tz] (microseconds)
    Int(i64),
    /// numeric: sign, integer digits, fraction digits
    Numeric {
        neg: bool,
        int: String,
        frac: String,
    },
    /// char(n)/varchar(n)/text: the bytes (`bpchar`: trailing spaces trimmed, compared trimmed)
    Bytes { bytes: Vec<u8>, bpchar: bool },
    /// float4/float8 (compared as float8, PostgreSQL's order: NaN above every number)
    Float(f64),
    /// IS NULL / IS NOT NULL: no value
    Null,
    /// IN lists: the constants (no NULLs)
    Set(Vec<Value>),
    /// `column op column` (0-based other column; int2/int4/int8/date/timestamp[tz] columns of
    /// one type)
    Column(usize),
    /// `[NOT] LIKE` with `%` as the only wildcard
    Pattern(std::sync::Arc<LikePattern>),
    /// an OR ([`STRATEGY_OR`]): its arms, each the filters all of which a row must pass
    Or(Vec<Vec<BlockFilter>>),
}

/// A LIKE pattern whose only wildcard is `%`: its literal pieces between the `%`s, and searchers
/// for the inner ones (built once per scan, not per value).
#[derive(Clone, Debug)]
pub struct LikePattern {
    pub pieces: Vec<Vec<u8>>,
    finders: Vec<memchr::memmem::Finder<'static>>,
}

impl PartialEq for LikePattern {
    fn eq(&self, o: &Self) -> bool {
        self.pieces == o.pieces
    }
}

impl LikePattern {
    pub fn new(pattern: &[u8]) -> LikePattern {
        let pieces: Vec<Vec<u8>> = pattern.split(|&b| b == b'%').map(<[u8]>::to_vec).collect();
        let inner = if pieces.len() > 2 {
            &pieces[1..pieces.len() - 1]
        } else {
            &[]
        };
        let finders = inner
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| memchr::memmem::Finder::new(p).into_owned())
            .collect();
        LikePattern { pieces, finders }
    }

    /// Does `v` match? The first piece must start the value, the last end it (one piece: no
    /// `%`, the value itself), the others follow in order in between; the leftmost match of
    /// each leaves the most room for the rest.
    pub fn matches(&self, v: &[u8]) -> bool {
        let [first, .., last] = self.pieces.as_slice() else {
            return self.pieces.first().is_some_and(|p| v == p.as_slice());
        };
        if v.len() < first.len() + last.len()
            || (!first.is_empty() && !v.starts_with(first))
            || (!last.is_empty() && !v.ends_with(last))
        {
            return false;
        }
        let mut rest = &v[first.len()..v.len() - last.len()];
        for f in &self.finders {
            match f.find(rest) {
                Some(i) => rest = &rest[i + f.needle().len()..],
                None => return false,
            }
        }
        true
    }
}

/// The strategy number of `column <> constant` (the negator of the type's btree equality).
pub const STRATEGY_NE: u8 = 12;

/// The strategy number of an OR of filters ([`Value::Or`]; `col` is its first filter's).
pub const STRATEGY_OR: u8 = 13;

#[derive(Clone, Debug, PartialEq)]
pub struct BlockFilter {
    /// 0-based column
    pub col: usize,
    /// btree strategy: 1 <, 2 <=, 3 =, 4 >=, 5 >; 6 IS NULL, 7 IS NOT NULL, 8 IN (set),
    /// 9 LIKE 'prefix%' (character columns), 10 LIKE pattern, 11 NOT LIKE pattern, 12 <>
    /// ([`STRATEGY_NE`]), 13 OR ([`STRATEGY_OR`])
    pub strategy: u8,
    pub value: Value,
}

/// How a filter reads one block's column.
pub enum Prepared {
    /// fixed-width integer column of `attlen` bytes against `v`
    Int {
        attlen: i16,
        v: i128,
    },
    /// scaled decimal column (DEC64 or DEC128) against the constant scaled alike
    Dec {
        wide: bool,
        v: i128,
    },
    /// IS [NOT] NULL: the validity bitmap only
    Null,
    /// IN: the set's values read like `Int` / `Dec`, sorted
    IntSet {
        attlen: i16,
        vs: Vec<i128>,
    },
    DecSet {
        wide: bool,
        vs: Vec<i128>,
    },
    /// a character column stored in `width`-byte NUL-padded cells: =, IN (sorted), a prefix, or
    /// <, <=, >, >= in byte order (C collation)
    Chars {
        bpchar: bool,
        vs: Vec<Vec<u8>>,
    },
    /// the same on a variable-length column; a compressed or toasted value (`VAR_RAW`) is not
    /// judged: it passes (see [`BlockFilter::exact`])
    VarChars {
        bpchar: bool,
        vs: Vec<Vec<u8>>,
    },
    /// a float4 (`attlen` 4) or float8 column
    Float {
        attlen: i16,
        v: f64,
    },
    /// two integer columns of `attlen` bytes (`other`: the second one's desc)
    Cols {
        attlen: i16,
        other: ColDesc,
    },
    /// a LIKE pattern on a character column, `var`: stored as variable-length values (a
    /// compressed or toasted one passes unjudged, as for `VarChars`)
    Like {
        var: bool,
        pat: std::sync::Arc<LikePattern>,
    },
    /// an OR: each arm's filters prepared for this block, with their columns' descs
    Or(Vec<Vec<(Prepared, ColDesc)>>),
}

impl BlockFilter {
    /// Parses "attno strategy type value" (the planner's encoding; an IN list's values are
    /// comma-separated, "-" for none; an OR is "attno 13 or arms", the arms separated by `|`,
    /// the filters of an arm by `&`).
    pub fn parse(s: &str) -> Option<BlockFilter> {
        if let Some((head, arms)) = s.split_once(" or ") {
            let attno: usize = head.strip_suffix(" 13")?.parse().ok()?;
            let arms = arms
                .split('|')
                .map(|arm| {
                    arm.split('&')
                        .map(|f| Self::parse(f).filter(|f| f.strategy != STRATEGY_OR))
                        .collect::<Option<Vec<_>>>()
                })
                .collect::<Option<Vec<_>>>()?;
            if attno == 0 || arms.iter().flatten().next()?.col != attno - 1 {
                return None;
            }
            return Some(BlockFilter {
                col: attno - 1,
                strategy: STRATEGY_OR,
                value: Value::Or(arms),
            });
        }
        let mut it = s.split(' ');
        let attno: usize = it.next()?.parse().ok()?;
        let strategy: u8 = it.next()?.parse().ok()?;
        let typ = it.next()?;
        let val = it.next()?;
        if attno == 0 || it.next().is_some() {
            return None;
        }
        let value = match (strategy, typ) {
            (1..=5, "col") => Value::Column(val.parse::<usize>().ok().filter(|&a| a > 0)? - 1),
            (10 | 11, "like") => {
                let Value::Bytes { bytes, .. } = Self::scalar("bytes", val)? else {
                    return None;
                };
                Value::Pattern(std::sync::Arc::new(LikePattern::new(&bytes)))
            }
            (6 | 7, "null") => Value::Null,
            (8, _) if val == "-" => Value::Set(Vec::new()),
            (8, _) => Value::Set(
                val.split(',')
                    .map(|v| Self::scalar(typ, v))
                    .collect::<Option<Vec<_>>>()?,
            ),
            (1..=5 | STRATEGY_NE, _) | (9, "bytes") if typ == "bytes" || typ == "bpchar" => {
                Self::scalar(typ, val)?
            }
            (1..=5 | STRATEGY_NE, _) if typ != "bytes" && typ != "bpchar" => {
                Self::scalar(typ, val)?
            }
            _ => return None,
        };
        Some(BlockFilter {
            col: attno - 1,
            strategy,
            value,
        })
    }

    fn scalar(typ: &str, val: &str) -> Option<Value> {
        Some(match typ {
            "bytes" | "bpchar" => {
                let bytes = if val == "~" {
                    Vec::new()
                } else {
                    if val.len() % 2 != 0 {
                        return None;
                    }
                    (0..val.len() / 2)
                        .map(|i| u8::from_str_radix(val.get(2 * i..2 * i + 2)?, 16).ok())
                        .collect::<Option<Vec<u8>>>()?
                };
                Value::Bytes {
                    bytes,
                    bpchar: typ == "bpchar",
                }
            }
            "int" => Value::Int(val.parse().ok()?),
            "float" if val.len() == 16 => {
                Value::Float(f64::from_bits(u64::from_str_radix(val, 16).ok()?))
            }
            "numeric" => {
                let (neg, digits) = match val.strip_prefix('-') {
                    Some(d) => (true, d),
                    None => (false, val),
                };
                let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
                if int.is_empty() && frac.is_empty()
                    || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                Value::Numeric {
                    neg,
                    int: int.into(),
                    frac: frac.into(),
                }
            }
            _ => return None,
        })
    }

    /// A numeric scaled by 10^scale exactly, or None (more significant decimals than `scale`).
    fn scaled(neg: bool, int: &str, frac: &str, scale: usize) -> Option<i128> {
        if frac.len() > scale && frac[scale..].bytes().any(|b| b != b'0') {
            return None;
        }
        let mut digits = String::with_capacity(int.len() + scale);
        digits.push_str(int);
        for k in 0..scale {
            digits.push(frac.as_bytes().get(k).map(|&b| b as char).unwrap_or('0'));
        }
        let digits = digits.trim_start_matches('0');
        let mag: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        Some(if neg { -mag } else { mag })
    }

    /// Does the filter read only columns among the first `natts`?
    pub fn uses_columns_below(&self, natts: usize) -> bool {
        self.col < natts
            && match &self.value {
                Value::Column(o) => *o < natts,
                Value::Or(arms) => arms.iter().flatten().all(|f| f.uses_columns_below(natts)),
                _ => true,
            }
    }

    /// Calls `f` with each column the filter reads.
    pub fn for_each_column(&self, f: &mut impl FnMut(usize)) {
        match &self.value {
            Value::Or(arms) => arms.iter().flatten().for_each(|l| l.for_each_column(f)),
            Value::Column(o) => {
                f(self.col);
                f(*o);
            }
            _ => f(self.col),
        }
    }

    /// The filters of an OR's arms (None: not an OR).
    fn arms(&self) -> Option<&[Vec<BlockFilter>]> {
        match &self.value {
            Value::Or(arms) => Some(arms),
            _ => None,
        }
    }

    /// How to evaluate the filter on block `blk`; None: not on this block.
    pub fn prepare_in(&self, blk: BlockRef) -> Option<Prepared> {
        if !self.uses_columns_below(blk.natts()) {
            return None;
        }
        let c = blk.col(self.col);
        match &self.value {
            Value::Or(arms) => {
                let mut out = Vec::with_capacity(arms.len());
                for arm in arms {
                    let mut a = Vec::with_capacity(arm.len());
                    for f in arm {
                        a.push((f.prepare_in(blk)?, *blk.col(f.col)));
                    }
                    out.push(a);
                }
                Some(Prepared::Or(out))
            }
            Value::Column(o) => {
                let d = *blk.col(*o);
                let int = |x: &ColDesc| {
                    x.kind == KIND_FIXED
                        && x.byval != 0
                        && matches!(x.attlen, 2 | 4 | 8)
                        && x.scale != ZORDER_FLOAT
                };
                (int(c) && int(&d) && c.attlen == d.attlen).then_some(Prepared::Cols {
                    attlen: c.attlen,
                    other: d,
                })
            }
            Value::Pattern(pat) if c.kind == KIND_CHARN || c.kind == KIND_VAR => {
                Some(Prepared::Like {
                    var: c.kind == KIND_VAR,
                    pat: pat.clone(),
                })
            }
            Value::Pattern(_) => None,
            _ => self.prepare(c),
        }
    }

    /// How to evaluate a `column op constant`-like filter on column desc `c` of a block; None:
    /// not on this block (see [`prepare_in`](Self::prepare_in) for every filter).
    pub fn prepare(&self, c: &ColDesc) -> Option<Prepared> {
        if c.kind == KIND_ABSENT {
            return None;
        }
        let int_col = c.kind == KIND_FIXED && c.byval != 0 && matches!(c.attlen, 2 | 4 | 8);
        let dec_col = matches!(c.kind, KIND_DEC64 | KIND_DEC128);
        match &self.value {
            Value::Null => Some(Prepared::Null),
            Value::Bytes { bytes, bpchar } if c.kind == KIND_CHARN => Some(Prepared::Chars {
                bpchar: *bpchar,
                vs: vec![bytes.clone()],
            }),
            Value::Bytes { bytes, bpchar } if c.kind == KIND_VAR => Some(Prepared::VarChars {
                bpchar: *bpchar,
                vs: vec![bytes.clone()],
            }),
            Value::Float(v)
                if c.kind == KIND_FIXED && c.byval != 0 && matches!(c.attlen, 4 | 8) =>
            {
                Some(Prepared::Float {
                    attlen: c.attlen,
                    v: *v,
                })
            }
            Value::Set(vs) if c.kind == KIND_CHARN || c.kind == KIND_VAR => {
                let mut out = Vec::with_capacity(vs.len());
                let mut bp = false;
                for v in vs {
                    let Value::Bytes { bytes, bpchar } = v else {
                        return None;
                    };
                    bp = *bpchar;
                    out.push(bytes.clone());
                }
                out.sort_unstable();
                Some(if c.kind == KIND_CHARN {
                    Prepared::Chars {
                        bpchar: bp,
                        vs: out,
                    }
                } else {
                    Prepared::VarChars {
                        bpchar: bp,
                        vs: out,
                    }
                })
            }
            Value::Int(v) if int_col => Some(Prepared::Int {
                attlen: c.attlen,
                v: *v as i128,
            }),
            Value::Numeric { neg, int, frac } if dec_col => {
                // exact only: extra fraction digits must be zeros
                let v = Self::scaled(*neg, int, frac, c.scale as usize)?;
                Some(Prepared::Dec {
                    wide: c.kind == KIND_DEC128,
                    v,
                })
            }
            Value::Set(vs) if int_col => {
                let mut out = Vec::with_capacity(vs.len());
                for v in vs {
                    let Value::Int(x) = v else { return None };
                    out.push(*x as i128);
                }
                out.sort_unstable();
                Some(Prepared::IntSet {
                    attlen: c.attlen,
                    vs: out,
                })
            }
            Value::Set(vs) if dec_col => {
                let mut out = Vec::with_capacity(vs.len());
                for v in vs {
                    let Value::Numeric { neg, int, frac } = v else {
                        return None;
                    };
                    // an element the scale cannot hold cannot equal a stored value
                    if let Some(x) = Self::scaled(*neg, int, frac, c.scale as usize) {
                        out.push(x);
                    }
                }
                out.sort_unstable();
                Some(Prepared::DecSet {
                    wide: c.kind == KIND_DEC128,
                    vs: out,
                })
            }
            _ => None,
        }
    }

    /// Can no value in `z` (a zoned column's zone map) pass? NULLs fail every comparison, so an
    /// empty zone (only NULLs written) passes nothing but IS NULL.
    /// `p` must be prepared for a column whose zone keys are in the filter's order (see
    /// [`excluded`]).
    pub fn zone_excludes(&self, p: &Prepared, z: Zone) -> bool {
        if self.strategy == STRATEGY_NE {
            return false; // a zone of equal values only is not worth a case
        }
        let (lo, hi) = (z.min, z.max);
        let range = |v: i128| {
            if z.is_empty() {
                return true;
            }
            match self.strategy {
                1 => lo >= v,
                2 => lo > v,
                3 => v < lo || v > hi,
                4 => hi < v,
                _ => hi <= v,
            }
        };
        match p {
            // the zone maps say nothing of pairs of columns or of pieces inside values (an OR:
            // see `excluded`)
            Prepared::Cols { .. } | Prepared::Like { .. } | Prepared::Or(_) => false,
            Prepared::Null => self.strategy == 7 && z.is_empty(),
            // keys order floats as PostgreSQL does (and NaN has one key): exact as for integers
            Prepared::Float { v, .. } => range(float_key(*v)),
            Prepared::Chars { vs, .. } | Prepared::VarChars { vs, .. } => {
                if z.is_empty() {
                    return true;
                }
                // keys are weakly monotone in byte order (s < v implies key(s) <= key(v)), so
                // only a strict key difference proves that no value passes
                match self.strategy {
                    1 | 2 => return lo > bytes_key(&vs[0]),
                    4 | 5 => return hi < bytes_key(&vs[0]),
                    _ => {}
                }
                if self.strategy == 9 {
                    // every value starting with the prefix has a key between the prefix's and
                    // the prefix's padded with 0xff bytes (or exactly the prefix's, from 16 bytes)
                    let p = &vs[0];
                    let mut top = p.clone();
                    top.resize(16.max(p.len()), 0xff);
                    return hi < bytes_key(p) || lo > bytes_key(&top);
                }
                // equal values have equal keys: excluded when no constant's key is in the zone
                vs.iter().all(|v| {
                    let k = bytes_key(v);
                    k < lo || k > hi
                })
            }
            Prepared::Int { v, .. } | Prepared::Dec { v, .. } => {
                if z.is_empty() {
                    return true;
                }
                let v = *v;
                match self.strategy {
                    1 => lo >= v,
                    2 => lo > v,
                    3 => v < lo || v > hi,
                    4 => hi < v,
                    _ => hi <= v,
                }
            }
            Prepared::IntSet { vs, .. } | Prepared::DecSet { vs, .. } => {
                // sorted: the first element >= lo must be > hi
                let i = vs.partition_point(|&x| x < lo);
                vs.get(i).is_none_or(|&x| x > hi)
            }
        }
    }

    /// Does the filter decide every row of `sel` exactly? Not when a row's value in a
    /// variable-length column is compressed or toasted (the filter lets it pass, PostgreSQL's
    /// qual decides): callers that rely on the filter alone (ScootAgg) must not use it then.
    pub fn exact(&self, p: &Prepared, b: BlockRef, c: &ColDesc, sel: &[u32]) -> bool {
        match p {
            Prepared::Or(arms) => {
                let fs = self.arms().unwrap_or_default().iter().flatten();
                fs.zip(arms.iter().flatten())
                    .all(|(f, (p, c))| f.exact(p, b, c, sel))
            }
            Prepared::VarChars { .. } | Prepared::Like { var: true, .. } => sel
                .iter()
                .all(|&s| !b.is_valid(c, s) || b.var_entry(c, s).1 & VAR_RAW == 0),
            _ => true,
        }
    }

    /// Keeps the rows of `sel` (slots of block `b`) that pass: [`keep`](Self::keep) over a
    /// row list, with tight loops for the common comparisons of integer and decimal columns.
    pub fn retain(&self, p: &Prepared, b: BlockRef, c: &ColDesc, sel: &mut Vec<u32>) {
        self.retain_with::<()>(p, b, c, sel, &mut Vec::new());
    }

    /// [`retain`](Self::retain) that also keeps `side` in step with `sel` (a value per row, e.g.
    /// the rows' system columns; left alone when its length differs from `sel`'s).
    ///
    /// The loops are branch-free: every row is written to the next output position and the
    /// position advances by the row's pass bit, so a filter that keeps rows at random costs no
    /// branch mispredictions; the common integer/decimal comparisons read the validity bitmap
    /// and the value region directly.
    pub fn retain_with<S: Copy>(
        &self,
        p: &Prepared,
        b: BlockRef,
        c: &ColDesc,
        sel: &mut Vec<u32>,
        side: &mut Vec<S>,
    ) {
        if self.strategy == STRATEGY_NE || self.strategy == STRATEGY_OR || c.kind == KIND_ABSENT {
            compact(sel, side, |s| self.keep(p, b, c, s));
            return;
        }
        fn cmp<T: PartialOrd + Copy>(strategy: u8, x: T, v: T) -> bool {
            match strategy {
                1 => x < v,
                2 => x <= v,
                3 => x == v,
                4 => x >= v,
                _ => x > v,
            }
        }
        let bitmap = b.bitmap_ptr(c);
        let values = b.value_ptr(c, 0) as *const u8;
        let width = c.width as usize;
        // values read as T, compared with v; NULLs fail
        macro_rules! scan {
            ($t:ty, $v:expr, $skip_nan:expr) => {{
                let v: $t = $v;
                let st = self.strategy;
                let nan_passes = matches!(st, 4 | 5);
                macro_rules! run {
                    ($st:literal) => {
                        compact(sel, side, |s| unsafe {
                            let valid = (*bitmap.add(s as usize >> 3) >> (s & 7)) & 1 != 0;
                            let x = (values.add(s as usize * width) as *const $t).read_unaligned();
                            let nan: bool = $skip_nan(x);
                            valid & ((nan & nan_passes) | (!nan & cmp($st, x, v)))
                        })
                    };
                }
                match st {
                    1 => run!(1),
                    2 => run!(2),
                    3 => run!(3),
                    4 => run!(4),
                    _ => run!(5),
                }
            }};
        }
        match p {
            Prepared::Int { attlen: 2, v } if i16::try_from(*v).is_ok() => {
                scan!(i16, *v as i16, |_| false)
            }
            Prepared::Int { attlen: 4, v } if i32::try_from(*v).is_ok() => {
                scan!(i32, *v as i32, |_| false)
            }
            Prepared::Int { attlen: 8, v } if i64::try_from(*v).is_ok() => {
                scan!(i64, *v as i64, |_| false)
            }
            Prepared::Dec { wide: false, v }
                if i64::try_from(*v).is_ok() && *v != NAN64 as i128 =>
            {
                scan!(i64, *v as i64, |x: i64| x == NAN64)
            }
            _ => compact(sel, side, |s| self.keep(p, b, c, s)),
        }
    }

    /// Relative cost per row, for [`FilterOrder`]: a word compared is 1.
    pub fn cost(&self) -> f64 {
        match &self.value {
            Value::Or(arms) => arms.iter().flatten().map(BlockFilter::cost).sum(),
            Value::Pattern(_) => 16.0,
            Value::Bytes { .. } => 4.0,
            Value::Set(vs) if matches!(vs.first(), Some(Value::Bytes { .. })) => 6.0,
            Value::Set(_) | Value::Numeric { .. } => 2.0,
            Value::Column(_) => 1.5,
            _ => 1.0,
        }
    }

    /// Does row `slot` of block `b` pass (`c` = the filter's column desc in `b`)?
    #[inline]
    pub fn keep(&self, p: &Prepared, b: BlockRef, c: &ColDesc, slot: u32) -> bool {
        if let (Prepared::Or(parms), Some(farms)) = (p, self.arms()) {
            // a filter that cannot judge a value passes it (and `exact` says so)
            return farms
                .iter()
                .zip(parms)
                .any(|(fs, ps)| fs.iter().zip(ps).all(|(f, (p, c))| f.keep(p, b, c, slot)));
        }
        if self.strategy == STRATEGY_NE {
            // <>: NULL fails, a value the filter cannot judge passes, any other is not equal
            if !b.is_valid(c, slot) {
                return false;
            }
            if let Prepared::VarChars { .. } = p {
                if b.var_entry(c, slot).1 & VAR_RAW != 0 {
                    return true;
                }
            }
            return !self.keep_as(3, p, b, c, slot);
        }
        self.keep_as(self.strategy, p, b, c, slot)
    }

    /// [`keep`](Self::keep) with strategy `strategy` (1..=11) in place of the filter's own.
    #[inline]
    fn keep_as(&self, strategy: u8, p: &Prepared, b: BlockRef, c: &ColDesc, slot: u32) -> bool {
        let valid = b.is_valid(c, slot);
        if let Prepared::Null = p {
            return valid == (strategy == 7);
        }
        if !valid {
            return false;
        }
        let ptr = b.value_ptr(c, slot);
        // (value, is NaN)
        let read_dec = |wide: bool| unsafe {
            if wide {
                let x = (ptr as *const i128).read_unaligned();
                (x, x == NAN128)
            } else {
                let x = (ptr as *const i64).read_unaligned();
                (x as i128, x == NAN64)
            }
        };
        let chars = |mut v: &[u8], bpchar: bool, vs: &[Vec<u8>]| {
            if strategy == 9 {
                return v.starts_with(&vs[0]);
            }
            if bpchar {
                while let [rest @ .., b' '] = v {
                    v = rest;
                }
            }
            // <, <=, >, >= (C collation only, see customscan.c): byte order
            match strategy {
                1 => v < vs[0].as_slice(),
                2 => v <= vs[0].as_slice(),
                4 => v >= vs[0].as_slice(),
                5 => v > vs[0].as_slice(),
                _ => vs.binary_search_by(|x| x.as_slice().cmp(v)).is_ok(),
            }
        };
        match p {
            Prepared::Cols { other, .. } => {
                if !b.is_valid(other, slot) {
                    return false;
                }
                let (x, y) = (b.read_int(c, slot), b.read_int(other, slot));
                return match strategy {
                    1 => x < y,
                    2 => x <= y,
                    3 => x == y,
                    4 => x >= y,
                    _ => x > y,
                };
            }
            Prepared::Like { var, pat } => {
                let v = if *var {
                    if b.var_entry(c, slot).1 & VAR_RAW != 0 {
                        return true; // compressed or toasted: not judged (see `exact`)
                    }
                    b.var_payload(c, slot)
                } else {
                    let cell = unsafe { std::slice::from_raw_parts(ptr, c.width as usize) };
                    &cell[..crate::storage::encoding::charn_len(cell)]
                };
                return pat.matches(v) != (strategy == 11);
            }
            Prepared::Chars { bpchar, vs } => {
                let cell = unsafe { std::slice::from_raw_parts(ptr, c.width as usize) };
                return chars(
                    &cell[..crate::storage::encoding::charn_len(cell)],
                    *bpchar,
                    vs,
                );
            }
            Prepared::VarChars { bpchar, vs } => {
                if b.var_entry(c, slot).1 & VAR_RAW != 0 {
                    return true; // compressed or toasted: not judged (see `exact`)
                }
                return chars(b.var_payload(c, slot), *bpchar, vs);
            }
            Prepared::Float { attlen, v } => {
                let x = unsafe {
                    if *attlen == 4 {
                        (ptr as *const f32).read_unaligned() as f64
                    } else {
                        (ptr as *const f64).read_unaligned()
                    }
                };
                let o = float_cmp(x, *v);
                return match strategy {
                    1 => o.is_lt(),
                    2 => o.is_le(),
                    3 => o.is_eq(),
                    4 => o.is_ge(),
                    _ => o.is_gt(),
                };
            }
            _ => {}
        }
        let (x, v) = match p {
            Prepared::Null
            | Prepared::Chars { .. }
            | Prepared::VarChars { .. }
            | Prepared::Float { .. }
            | Prepared::Cols { .. }
            | Prepared::Like { .. }
            | Prepared::Or(_) => unreachable!(),
            Prepared::IntSet { vs, .. } => {
                return vs.binary_search(&(b.read_int(c, slot) as i128)).is_ok()
            }
            // a stored NaN equals no element (NaN elements are never pushed down)
            Prepared::DecSet { wide, vs } => {
                let (x, nan) = read_dec(*wide);
                return !nan && vs.binary_search(&x).is_ok();
            }
            Prepared::Int { v, .. } => (b.read_int(c, slot) as i128, *v),
            Prepared::Dec { wide, v } => {
                let (x, nan) = read_dec(*wide);
                // NaN sorts above every number
                if nan {
                    return matches!(strategy, 4 | 5);
                }
                (x, *v)
            }
        };
        match strategy {
            1 => x < v,
            2 => x <= v,
            3 => x == v,
            4 => x >= v,
            _ => x > v,
        }
    }
}

/// PostgreSQL's `hash_bytes_uint32` (common/hashfn.c: Bob Jenkins' lookup3, the `final` mix of
/// one 32-bit word), which `hashint2`/`hashint4`/`hashint8` end in.
#[inline]
pub fn hash_uint32(k: u32) -> u32 {
    /// one step of lookup3's `final`: x ^= y; x -= rot(y, r)
    #[inline(always)]
    fn mix(x: &mut u32, y: u32, r: u32) {
        *x ^= y;
        *x = x.wrapping_sub(y.rotate_left(r));
    }
    let init = 0x9e37_79b9u32.wrapping_add(4).wrapping_add(3_923_095);
    let (mut a, mut b, mut c) = (init.wrapping_add(k), init, init);
    mix(&mut c, b, 14);
    mix(&mut a, c, 11);
    mix(&mut b, a, 25);
    mix(&mut c, b, 16);
    mix(&mut a, c, 4);
    mix(&mut b, a, 14);
    mix(&mut c, b, 24);
    c
}

/// What `hashint2` / `hashint4` / `hashint8` (the hash functions of PostgreSQL's integer and
/// date hash opclasses) return for the integer `v` stored in `width` bytes: the 2- and 4-byte
/// ones hash the value as int32, the 8-byte one folds the high half in so that equal values of
/// different widths hash alike.
#[inline]
pub fn hash_int(v: i64, width: u8) -> u32 {
    if width == 8 {
        let hi = (v >> 32) as u32;
        hash_uint32(v as u32 ^ if v >= 0 { hi } else { !hi })
    } else {
        hash_uint32(v as i32 as u32)
    }
}

/// The descriptors in block `blk` of a hash join's key columns `keys` ((column, the integer width
/// the join hashes it as), at most 4), or None when one is not stored there as a fixed-width
/// integer of that width (the block's rows then cannot be hashed as the join hashes them).
pub fn join_key_columns(
    blk: BlockRef,
    keys: &[(usize, u8)],
) -> Option<([(ColDesc, u8); 4], usize)> {
    let mut cols = [(ColDesc::default(), 0u8); 4];
    if keys.len() > cols.len() {
        return None;
    }
    for (i, &(col, width)) in keys.iter().enumerate() {
        if col >= blk.natts() {
            return None;
        }
        let c = *blk.col(col);
        if c.kind != KIND_FIXED || c.byval == 0 || c.attlen != width as i16 {
            return None;
        }
        cols[i] = (c, width);
    }
    Some((cols, keys.len()))
}

/// The hash PostgreSQL's hash join computes for row `s` of `blk` over the key columns `cols`
/// ([`join_key_columns`]), and whether a key is NULL (then the join decides about the row).
#[inline]
pub fn join_key_hash(blk: BlockRef, cols: &[(ColDesc, u8)], s: u32) -> (u32, bool) {
    let mut h = 0u32;
    for (c, width) in cols {
        if !blk.is_valid(c, s) {
            return (h, true);
        }
        h = h.rotate_left(1) ^ hash_int(blk.read_int(c, s), *width);
    }
    (h, false)
}

/// One step of a hash join key computed from a row's integer columns (a join filter's key that
/// is an expression, as CH-benCHmark's `mod((s_w_id * s_i_id), 10000) = s_suppkey`), in
/// reverse Polish notation. Each operation follows PostgreSQL's function of the same name:
/// `+`, `-`, `*` raise an error when the result leaves the result type's range, `%` (int2mod /
/// int4mod / int8mod, also `mod()`) when the divisor is 0 and returns 0 for a divisor of -1, a
/// narrowing cast when the value does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyTok {
    /// a column (index) stored as a fixed-width integer of this many bytes
    Var(usize, u8),
    Const(i64),
    /// `b'+'`, `b'-'`, `b'*'` or `b'%'`, and the result's width in bytes
    Arith(u8, u8),
    /// a cast to an integer of this many bytes
    Cast(u8),
}

/// A key's value for one row: `Null` when a column it reads is NULL (the join matches nothing,
/// but decides that itself), `Error` when PostgreSQL would raise an error computing it (the row
/// is kept, so the join computes the key and raises it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyVal {
    Val(i64),
    Null,
    Error,
}

fn fits(v: i128, width: u8) -> bool {
    match width {
        2 => (i16::MIN as i128..=i16::MAX as i128).contains(&v),
        4 => (i32::MIN as i128..=i32::MAX as i128).contains(&v),
        _ => (i64::MIN as i128..=i64::MAX as i128).contains(&v),
    }
}

/// Evaluates `prog` with `value(i)` giving the i-th `Var` of the program (in order of
/// appearance) for the row. At most 8 values on the stack (a longer program is an error).
#[inline]
pub fn eval_key(prog: &[KeyTok], mut value: impl FnMut(usize) -> Option<i64>) -> KeyVal {
    let mut stack = [0i128; 8];
    let mut sp = 0usize;
    let mut var = 0usize;
    for t in prog {
        match *t {
            KeyTok::Var(..) | KeyTok::Const(_) => {
                if sp == stack.len() {
                    return KeyVal::Error;
                }
                stack[sp] = match *t {
                    KeyTok::Const(c) => c as i128,
                    _ => {
                        let Some(v) = value(var) else {
                            return KeyVal::Null;
                        };
                        var += 1;
                        v as i128
                    }
                };
                sp += 1;
            }
            KeyTok::Arith(op, width) => {
                if sp < 2 {
                    return KeyVal::Error;
                }
                let (a, b) = (stack[sp - 2], stack[sp - 1]);
                let r = match op {
                    b'+' => a + b,
                    b'-' => a - b,
                    b'*' => match a.checked_mul(b) {
                        Some(r) => r,
                        None => return KeyVal::Error,
                    },
                    b'%' => match b {
                        0 => return KeyVal::Error,
                        -1 => 0,
                        _ => a % b,
                    },
                    _ => return KeyVal::Error,
                };
                if !fits(r, width) {
                    return KeyVal::Error;
                }
                sp -= 1;
                stack[sp - 1] = r;
            }
            KeyTok::Cast(width) => {
                if sp < 1 || !fits(stack[sp - 1], width) {
                    return KeyVal::Error;
                }
            }
        }
    }
    if sp != 1 {
        return KeyVal::Error;
    }
    KeyVal::Val(stack[0] as i64)
}

/// The descriptors in block `blk` of the columns a key program reads (each `Var` in order), or
/// None when one is not stored there as a fixed-width integer of the program's width (the
/// block's rows then cannot be hashed as the join hashes them; nor more than 8 columns).
pub fn key_prog_columns(blk: BlockRef, prog: &[KeyTok]) -> Option<([ColDesc; 8], usize)> {
    let mut cols = [ColDesc::default(); 8];
    let mut n = 0;
    for t in prog {
        if let KeyTok::Var(col, width) = *t {
            if col >= blk.natts() || n == cols.len() {
                return None;
            }
            let c = *blk.col(col);
            if c.kind != KIND_FIXED || c.byval == 0 || c.attlen != width as i16 {
                return None;
            }
            cols[n] = c;
            n += 1;
        }
    }
    Some((cols, n))
}

/// PostgreSQL's float order (`float8_cmp_internal`): NaN equals NaN and sorts above every
/// number; -0 equals 0.
pub fn float_cmp(x: f64, v: f64) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (x.is_nan(), v.is_nan()) {
        (true, true) => Equal,
        (true, false) => Greater,
        (false, true) => Less,
        _ => x.partial_cmp(&v).unwrap_or(Equal),
    }
}

/// Can no row of block `b` pass all of `filters` (judged by the zone maps alone)? An OR: when
/// no row can pass any of its arms.
pub fn excluded(filters: &[BlockFilter], b: BlockRef) -> bool {
    filters.iter().any(|f| match f.arms() {
        Some(arms) => arms.iter().all(|arm| excluded(arm, b)),
        None => leaf_excluded(f, b),
    })
}

fn leaf_excluded(f: &BlockFilter, b: BlockRef) -> bool {
    let natts = b.natts();
    {
        if f.col >= natts {
            // a column added after the block was written: its value is the column's default
            return false;
        }
        let c = b.col(f.col);
        zoned(c)
            && f.prepare(c).is_some_and(|p| {
                // the column's zone keys must be in the filter's order: a float filter needs
                // float keys, a character filter byte keys (char(n)'s trimmed keys say nothing
                // of LIKE, which sees the padding)
                let ordered = match &p {
                    Prepared::Float { .. } => c.scale == ZORDER_FLOAT,
                    Prepared::Chars { bpchar, .. } | Prepared::VarChars { bpchar, .. } => {
                        if *bpchar {
                            c.scale == ZORDER_BPCHAR && f.strategy != 9
                        } else {
                            c.scale == ZORDER_BYTES
                        }
                    }
                    Prepared::Int { .. } | Prepared::IntSet { .. } => c.scale != ZORDER_FLOAT,
                    Prepared::Cols { .. } | Prepared::Like { .. } | Prepared::Or(_) => false,
                    _ => true,
                };
                ordered && f.zone_excludes(&p, b.zone(f.col))
            })
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
    use pgrx::prelude::*;

    /// The join filter's hash equals PostgreSQL's hashint2 / hashint4 (also date's) / hashint8
    /// for edge values and a spread of others; a wrong hash would drop rows a join matches.
    #[pg_test]
    fn join_hash_matches_postgres() {
        let mut vals: Vec<i64> = vec![
            0,
            1,
            -1,
            2,
            42,
            -42,
            255,
            256,
            32767,
            -32768,
            65535,
            i32::MAX as i64,
            i32::MIN as i64,
            u32::MAX as i64,
            1 << 32,
            -(1 << 32),
            i64::MAX,
            i64::MIN,
            i64::MAX - 1,
            i64::MIN + 1,
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..300 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            vals.push(x as i64);
        }
        for &v in &vals {
            let h8 = Spi::get_one::<i32>(&format!("SELECT hashint8('{v}'::int8)"))
                .unwrap()
                .unwrap();
            assert_eq!(hash_int(v, 8), h8 as u32, "hashint8({v})");
            let v4 = v as i32;
            let h4 = Spi::get_one::<i32>(&format!("SELECT hashint4('{v4}'::int4)"))
                .unwrap()
                .unwrap();
            assert_eq!(hash_int(v4 as i64, 4), h4 as u32, "hashint4({v4})");
            // equal values hash alike across widths (cross-type joins)
            assert_eq!(hash_int(v4 as i64, 8), h4 as u32, "hashint8 of int4 {v4}");
            let v2 = v as i16;
            let h2 = Spi::get_one::<i32>(&format!("SELECT hashint2('{v2}'::int2)"))
                .unwrap()
                .unwrap();
            assert_eq!(hash_int(v2 as i64, 2), h2 as u32, "hashint2({v2})");
        }
    }

    /// Join key programs: PostgreSQL's int2/int4/int8 +, -, *, % and casts, with each of their
    /// errors (overflow, division by zero, a narrowing cast that does not fit) reported as an
    /// error (the row is kept and the join raises it), NULL when a column is NULL.
    #[test]
    fn key_programs_follow_postgres_integer_rules() {
        use KeyTok::*;
        let run = |prog: &[KeyTok], vals: &[Option<i64>]| eval_key(prog, |i| vals[i]);
        // mod((w * i), 10000), int4
        let ch = [
            Var(0, 4),
            Var(1, 4),
            Arith(b'*', 4),
            Const(10000),
            Arith(b'%', 4),
        ];
        assert_eq!(run(&ch, &[Some(1), Some(12345)]), KeyVal::Val(2345));
        assert_eq!(run(&ch, &[Some(-3), Some(12345)]), KeyVal::Val(-7035)); // C's sign rule
        assert_eq!(run(&ch, &[None, Some(1)]), KeyVal::Null);
        assert_eq!(run(&ch, &[Some(1), None]), KeyVal::Null);
        // int4mul overflow
        assert_eq!(run(&ch, &[Some(65536), Some(32768)]), KeyVal::Error);
        assert_eq!(
            run(&ch, &[Some(65535), Some(32768)]),
            KeyVal::Val(2147450880 % 10000)
        );
        // % by 0 is an error, by -1 is 0 (also for the minimum value)
        let m = [Var(0, 4), Var(1, 4), Arith(b'%', 4)];
        assert_eq!(run(&m, &[Some(5), Some(0)]), KeyVal::Error);
        assert_eq!(run(&m, &[Some(i32::MIN as i64), Some(-1)]), KeyVal::Val(0));
        assert_eq!(run(&m, &[Some(-7), Some(3)]), KeyVal::Val(-1));
        // +, - at the type's edges
        let p2 = [Var(0, 2), Const(1), Arith(b'+', 2)];
        assert_eq!(run(&p2, &[Some(32766)]), KeyVal::Val(32767));
        assert_eq!(run(&p2, &[Some(32767)]), KeyVal::Error);
        let m8 = [Var(0, 8), Var(1, 8), Arith(b'-', 8)];
        assert_eq!(run(&m8, &[Some(i64::MIN), Some(1)]), KeyVal::Error);
        assert_eq!(
            run(&m8, &[Some(i64::MIN + 1), Some(1)]),
            KeyVal::Val(i64::MIN)
        );
        let mul8 = [Var(0, 8), Var(1, 8), Arith(b'*', 8)];
        assert_eq!(run(&mul8, &[Some(i64::MAX), Some(2)]), KeyVal::Error);
        assert_eq!(run(&mul8, &[Some(i64::MIN), Some(-1)]), KeyVal::Error);
        assert_eq!(
            run(&mul8, &[Some(3037000499), Some(3037000499)]),
            KeyVal::Val(9223372030926249001)
        );
        // casts: widening always fits, narrowing errs out of range
        assert_eq!(
            run(&[Var(0, 8), Cast(4)], &[Some(i32::MAX as i64)]),
            KeyVal::Val(i32::MAX as i64)
        );
        assert_eq!(
            run(&[Var(0, 8), Cast(4)], &[Some(i32::MAX as i64 + 1)]),
            KeyVal::Error
        );
        assert_eq!(run(&[Var(0, 4), Cast(2)], &[Some(-32769)]), KeyVal::Error);
        assert_eq!(run(&[Var(0, 2), Cast(8)], &[Some(-5)]), KeyVal::Val(-5));
        // malformed programs
        assert_eq!(run(&[Arith(b'+', 4)], &[]), KeyVal::Error);
        assert_eq!(run(&[Const(1), Const(2)], &[]), KeyVal::Error);
    }

    #[test]
    fn float_filters() {
        let f = BlockFilter::parse(&format!("11 3 float {:016x}", (-0.0f64).to_bits())).unwrap();
        assert_eq!(f.value, Value::Float(-0.0));
        assert!(BlockFilter::parse("11 3 float 12").is_none());
        use std::cmp::Ordering::*;
        // PostgreSQL's order: -0 = 0, NaN = NaN, NaN above infinity
        assert_eq!(float_cmp(0.0, -0.0), Equal);
        assert_eq!(float_cmp(f64::NAN, f64::NAN), Equal);
        assert_eq!(float_cmp(f64::NAN, f64::INFINITY), Greater);
        assert_eq!(float_cmp(f64::INFINITY, f64::NAN), Less);
        assert_eq!(float_cmp(f64::NEG_INFINITY, -1e308), Less);
        assert_eq!(float_cmp(2.5, 1.0), Greater);
    }

    /// Float zones: a zone [lo, hi] of float keys is excluded exactly when no float whose key is
    /// in it passes the comparison in PostgreSQL's order (-0 = 0, NaN above everything).
    #[test]
    fn float_zone_exclusion_is_exact() {
        let vals = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -0.0,
            0.0,
            1e-300,
            1.0,
            2.5,
            1e300,
            f64::INFINITY,
            f64::NAN,
            -f64::NAN,
        ];
        // keys are monotone and equal exactly for equal floats
        for &x in &vals {
            for &y in &vals {
                assert_eq!(
                    float_key(x).cmp(&float_key(y)),
                    float_cmp(x, y),
                    "{x} vs {y}"
                );
            }
        }
        assert_eq!(float_key(1.5f32 as f64), float_key(1.5));
        for i in 0..vals.len() {
            for j in i..vals.len() {
                let inside = &vals[i..=j];
                let z = Zone {
                    min: inside.iter().map(|&x| float_key(x)).min().unwrap(),
                    max: inside.iter().map(|&x| float_key(x)).max().unwrap(),
                };
                for st in 1..=5u8 {
                    for &v in &vals {
                        let f = BlockFilter {
                            col: 0,
                            strategy: st,
                            value: Value::Float(v),
                        };
                        let p = Prepared::Float { attlen: 8, v };
                        // every float whose key lies in the zone, among the test values
                        let any = vals
                            .iter()
                            .filter(|&&x| (z.min..=z.max).contains(&float_key(x)))
                            .any(|&x| {
                                let o = float_cmp(x, v);
                                match st {
                                    1 => o.is_lt(),
                                    2 => o.is_le(),
                                    3 => o.is_eq(),
                                    4 => o.is_ge(),
                                    _ => o.is_gt(),
                                }
                            });
                        // sound (never excludes a passing value) and exact on these values
                        assert_eq!(f.zone_excludes(&p, z), !any, "{inside:?} {st} {v}");
                        assert!(f.zone_excludes(&p, Zone::EMPTY));
                    }
                }
            }
        }
    }

    /// Character zones: a block is never excluded when one of its values passes (=, IN, LIKE
    /// prefix), over short, long, shared-prefix and high-byte strings; and a full zone (a
    /// compressed value) excludes nothing.
    #[test]
    fn char_zone_exclusion_is_sound() {
        let words: Vec<Vec<u8>> = [
            "",
            "a",
            "ab",
            "abc",
            "abd",
            "b",
            "zz",
            "abcdefghijklmnop",
            "abcdefghijklmnopq",
            "abcdefghijklmnopr",
            "abcdefghijklmno\u{ff}",
            "\u{e9}t\u{e9}",
            "\u{7f}",
            "A",
            "a b",
        ]
        .iter()
        .map(|w| w.as_bytes().to_vec())
        .collect();
        let mut tried = 0;
        let mut excluded_some = 0;
        for i in 0..words.len() {
            for j in 0..words.len() {
                let block = [&words[i], &words[j]];
                let z = Zone {
                    min: block.iter().map(|w| bytes_key(w)).min().unwrap(),
                    max: block.iter().map(|w| bytes_key(w)).max().unwrap(),
                };
                for v in &words {
                    for st in [3u8, 9] {
                        if st == 9 && v.is_empty() {
                            continue;
                        }
                        let f = BlockFilter {
                            col: 0,
                            strategy: st,
                            value: Value::Bytes {
                                bytes: v.clone(),
                                bpchar: false,
                            },
                        };
                        let p = Prepared::VarChars {
                            bpchar: false,
                            vs: vec![v.clone()],
                        };
                        let any =
                            block
                                .iter()
                                .any(|w| if st == 9 { w.starts_with(v) } else { *w == v });
                        let ex = f.zone_excludes(&p, z);
                        assert!(!(ex && any), "{block:?} {st} {v:?}");
                        assert!(!f.zone_excludes(
                            &p,
                            Zone {
                                min: i128::MIN,
                                max: i128::MAX
                            }
                        ));
                        tried += 1;
                        excluded_some += ex as usize;
                    }
                }
                // IN: excluded only when no element is in the block
                let f = BlockFilter {
                    col: 0,
                    strategy: 8,
                    value: Value::Set(vec![]),
                };
                let vs = vec![
                    words[(i + 3) % words.len()].clone(),
                    words[(j + 5) % words.len()].clone(),
                ];
                let any = block.iter().any(|w| vs.contains(w));
                let p = Prepared::Chars { bpchar: false, vs };
                assert!(!(f.zone_excludes(&p, z) && any));
                // ordering comparisons (C collation): never excluded when a value passes, and
                // exactly decided by keep
                for v in &words {
                    for st in [1u8, 2, 4, 5] {
                        let f = BlockFilter {
                            col: 0,
                            strategy: st,
                            value: Value::Bytes {
                                bytes: v.clone(),
                                bpchar: false,
                            },
                        };
                        let p = Prepared::VarChars {
                            bpchar: false,
                            vs: vec![v.clone()],
                        };
                        let any = block.iter().any(|w| match st {
                            1 => w.as_slice() < v.as_slice(),
                            2 => w.as_slice() <= v.as_slice(),
                            4 => w.as_slice() >= v.as_slice(),
                            _ => w.as_slice() > v.as_slice(),
                        });
                        let ex = f.zone_excludes(&p, z);
                        assert!(!(ex && any), "{block:?} {st} {v:?}");
                        tried += 1;
                        excluded_some += ex as usize;
                    }
                }
            }
        }
        // and the zones do exclude: most non-matching pairs of distinct short words
        assert!(excluded_some * 3 > tried, "{excluded_some} of {tried}");
    }

    #[test]
    fn compact_keeps_side_in_step() {
        let mut sel: Vec<u32> = (0..20).collect();
        let mut side: Vec<[u32; 3]> = (0..20).map(|i| [i, i * 2, i * 3]).collect();
        compact(&mut sel, &mut side, |s| s % 3 == 1);
        assert_eq!(sel, vec![1, 4, 7, 10, 13, 16, 19]);
        assert_eq!(side.iter().map(|x| x[0]).collect::<Vec<_>>(), sel);
        assert!(side.iter().all(|x| x[1] == x[0] * 2 && x[2] == x[0] * 3));
        // a side of another length is left alone
        let mut other: Vec<u8> = vec![9];
        compact(&mut sel, &mut other, |s| s > 10);
        assert_eq!((sel, other), (vec![13, 16, 19], vec![9]));
    }

    #[test]
    fn filter_order_ranks_by_cost_over_removed_share() {
        let f = |strategy, value| BlockFilter {
            col: 0,
            strategy,
            value,
        };
        let filters = vec![
            f(4, Value::Int(0)), // keeps 90%
            f(1, Value::Int(0)), // keeps 10%
            f(
                3,
                Value::Bytes {
                    bytes: b"x".to_vec(),
                    bpchar: false,
                },
            ), // keeps 10%, 4x cost
        ];
        let mut o = FilterOrder::default();
        assert_eq!(o.order(3), &[0, 1, 2]);
        o.record(0, 1000, 900);
        o.record(1, 900, 90);
        o.record(2, 90, 9);
        o.block_done(&filters);
        assert_eq!(o.order(3), &[1, 2, 0]);
        // the ranking is redone at blocks 2, 4, 8, then every 16, not in between
        o.record(1, 100_000, 99_000);
        o.block_done(&filters);
        assert_eq!(o.order(3), &[2, 0, 1]);
        o.record(0, 1_000_000, 0);
        o.block_done(&filters);
        assert_eq!(o.order(3), &[2, 0, 1]);
        o.block_done(&filters);
        assert_eq!(o.order(3), &[0, 2, 1]);
        // another filter count starts over in the given order
        assert_eq!(o.order(2), &[0, 1]);
    }

    #[test]
    fn parse_filters() {
        assert_eq!(
            BlockFilter::parse("2 5 bytes 6162"),
            Some(BlockFilter {
                col: 1,
                strategy: 5,
                value: Value::Bytes {
                    bytes: b"ab".to_vec(),
                    bpchar: false
                }
            })
        );
        assert!(BlockFilter::parse("2 9 bpchar 6162").is_none());
        assert_eq!(
            BlockFilter::parse("9 4 int -731"),
            Some(BlockFilter {
                col: 8,
                strategy: 4,
                value: Value::Int(-731)
            })
        );
        assert_eq!(
            BlockFilter::parse("3 1 numeric 24"),
            Some(BlockFilter {
                col: 2,
                strategy: 1,
                value: Value::Numeric {
                    neg: false,
                    int: "24".into(),
                    frac: "".into()
                }
            })
        );
        assert_eq!(
            BlockFilter::parse("3 2 numeric -0.070"),
            Some(BlockFilter {
                col: 2,
                strategy: 2,
                value: Value::Numeric {
                    neg: true,
                    int: "0".into(),
                    frac: "070".into()
                }
            })
        );
        assert_eq!(
            BlockFilter::parse("2 6 null -"),
            Some(BlockFilter {
                col: 1,
                strategy: 6,
                value: Value::Null
            })
        );
        assert_eq!(
            BlockFilter::parse("2 8 int 3,-1,7"),
            Some(BlockFilter {
                col: 1,
                strategy: 8,
                value: Value::Set(vec![Value::Int(3), Value::Int(-1), Value::Int(7)])
            })
        );
        assert_eq!(
            BlockFilter::parse("2 8 int -"),
            Some(BlockFilter {
                col: 1,
                strategy: 8,
                value: Value::Set(vec![])
            })
        );
        assert_eq!(BlockFilter::parse("2 8 int 3,x"), None);
        assert_eq!(BlockFilter::parse("2 6 int 3"), None);
        assert_eq!(BlockFilter::parse("0 1 int 5"), None);
        assert_eq!(BlockFilter::parse("1 9 int 5"), None);
        assert_eq!(BlockFilter::parse("1 1 text x"), None);
        assert_eq!(BlockFilter::parse("1 1 numeric 1e5"), None);
        assert_eq!(
            BlockFilter::parse("4 3 bpchar 5241"),
            Some(BlockFilter {
                col: 3,
                strategy: 3,
                value: Value::Bytes {
                    bytes: b"RA".to_vec(),
                    bpchar: true
                }
            })
        );
        assert_eq!(
            BlockFilter::parse("4 9 bytes 50524f4d4f").unwrap().value,
            Value::Bytes {
                bytes: b"PROMO".to_vec(),
                bpchar: false
            }
        );
        assert!(BlockFilter::parse("4 8 bytes 41,~").is_some());
        assert!(BlockFilter::parse("4 1 bytes 41").is_some());
        assert_eq!(BlockFilter::parse("4 9 bpchar 41"), None);
        assert_eq!(BlockFilter::parse("4 3 bytes 4"), None);
        assert_eq!(BlockFilter::scaled(false, "12", "5", 2), Some(1250));
        assert_eq!(BlockFilter::scaled(true, "0", "050", 2), Some(-5));
        assert_eq!(BlockFilter::scaled(false, "1", "125", 2), None);
        // ORs: arms of filters; the first filter's column names the OR; no nesting
        let or = BlockFilter::parse("3 13 or 3 1 int 5&9 6 null -|2 10 like 2561").unwrap();
        assert_eq!(or.col, 2);
        assert_eq!(or.strategy, STRATEGY_OR);
        let Value::Or(arms) = &or.value else {
            panic!("not an OR: {or:?}")
        };
        assert_eq!(arms.len(), 2);
        assert_eq!(arms[0].len(), 2);
        assert_eq!((arms[0][1].col, arms[0][1].strategy), (8, 6));
        assert_eq!((arms[1][0].col, arms[1][0].strategy), (1, 10));
        assert!(or.uses_columns_below(9) && !or.uses_columns_below(8));
        assert_eq!(BlockFilter::parse("2 13 or 3 1 int 5|2 1 int 4"), None);
        assert_eq!(
            BlockFilter::parse("3 13 or 3 1 int 5|2 13 or 2 1 int 4"),
            None
        );
        assert_eq!(BlockFilter::parse("3 13 or 3 1 int 5|2 1 int x"), None);
        assert_eq!(BlockFilter::parse("3 13 or "), None);
    }

    /// A zone [lo, hi] is excluded exactly when no integer in it passes the comparison (and an
    /// empty zone passes nothing but IS NULL).
    #[test]
    fn zone_exclusion_is_exact() {
        let pass = |st: u8, x: i128, v: i128| match st {
            1 => x < v,
            2 => x <= v,
            3 => x == v,
            4 => x >= v,
            _ => x > v,
        };
        for lo in -3i128..=3 {
            for hi in lo..=3 {
                let z = Zone { min: lo, max: hi };
                for st in 1u8..=5 {
                    for v in -5i128..=5 {
                        let f = BlockFilter {
                            col: 0,
                            strategy: st,
                            value: Value::Int(v as i64),
                        };
                        let p = Prepared::Int { attlen: 4, v };
                        let any = (lo..=hi).any(|x| pass(st, x, v));
                        assert_eq!(f.zone_excludes(&p, z), !any, "[{lo},{hi}] {st} {v}");
                        assert!(f.zone_excludes(&p, Zone::EMPTY));
                    }
                }
                for set in [vec![], vec![-4], vec![-4, 0], vec![2, 5], vec![-5, 4]] {
                    let f = BlockFilter {
                        col: 0,
                        strategy: 8,
                        value: Value::Null,
                    };
                    let p = Prepared::IntSet {
                        attlen: 4,
                        vs: set.clone(),
                    };
                    let any = set.iter().any(|x| (lo..=hi).contains(x));
                    assert_eq!(f.zone_excludes(&p, z), !any, "[{lo},{hi}] in {set:?}");
                }
                let null = |st| BlockFilter {
                    col: 0,
                    strategy: st,
                    value: Value::Null,
                };
                assert!(!null(6).zone_excludes(&Prepared::Null, z));
                assert!(!null(7).zone_excludes(&Prepared::Null, z));
            }
        }
        let nn = BlockFilter {
            col: 0,
            strategy: 7,
            value: Value::Null,
        };
        assert!(nn.zone_excludes(&Prepared::Null, Zone::EMPTY));
    }
}

/// The order in which a scan applies a conjunction of block filters: the rows each filter saw
/// and kept are counted, and the filters are re-ranked (after 1, 2, 4, 8 blocks, then every 16)
/// by cost per row over the share of rows removed, ascending: cheap filters that remove most
/// rows run first, so the later ones see fewer rows. Filters are ANDed, so the order never
/// changes which rows pass.
#[derive(Default)]
pub struct FilterOrder {
    order: Vec<usize>,
    seen: Vec<u64>,
    kept: Vec<u64>,
    blocks: u32,
}

impl FilterOrder {
    /// The filter indexes in the order to apply them (for `n` filters; a changed count starts
    /// over in the given order).
    pub fn order(&mut self, n: usize) -> &[usize] {
        if self.order.len() != n {
            self.order = (0..n).collect();
            self.seen = vec![0; n];
            self.kept = vec![0; n];
            self.blocks = 0;
        }
        &self.order
    }

    /// Filter `i` saw `before` rows and kept `after`.
    pub fn record(&mut self, i: usize, before: usize, after: usize) {
        if let (Some(s), Some(k)) = (self.seen.get_mut(i), self.kept.get_mut(i)) {
            *s += before as u64;
            *k += after as u64;
        }
    }

    /// A block is done: re-rank now and then.
    pub fn block_done(&mut self, filters: &[BlockFilter]) {
        self.blocks += 1;
        let b = self.blocks;
        if self.order.len() < 2 || filters.len() != self.order.len() {
            return;
        }
        if !(b.is_power_of_two() && b <= 8 || b % 16 == 0) {
            return;
        }
        let rank = |i: usize| {
            let removed = if self.seen[i] == 0 {
                0.5 // not seen yet (an earlier filter emptied the blocks): neutral
            } else {
                1.0 - self.kept[i] as f64 / self.seen[i] as f64
            };
            filters[i].cost() / removed.max(1e-3)
        };
        // stable: equal ranks keep the planner's order
        self.order.sort_by(|&a, &b| {
            rank(a)
                .partial_cmp(&rank(b))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
    }
}

/// Keeps the entries of `sel` for which `pass` is true (and those of `side` alike when it has
/// `sel`'s length), without a branch on the outcome: each entry is written to the next output
/// position, which advances by the pass bit.
#[inline(always)]
fn compact<S: Copy>(sel: &mut Vec<u32>, side: &mut Vec<S>, pass: impl Fn(u32) -> bool) {
    let n = sel.len();
    let mut k = 0;
    if side.len() == n && std::mem::size_of::<S>() > 0 {
        for i in 0..n {
            // SAFETY: k <= i < n = sel.len() = side.len()
            unsafe {
                let s = *sel.get_unchecked(i);
                let ok = pass(s);
                *sel.get_unchecked_mut(k) = s;
                *side.get_unchecked_mut(k) = *side.get_unchecked(i);
                k += ok as usize;
            }
        }
        side.truncate(k);
    } else {
        for i in 0..n {
            // SAFETY: k <= i < n = sel.len()
            unsafe {
                let s = *sel.get_unchecked(i);
                let ok = pass(s);
                *sel.get_unchecked_mut(k) = s;
                k += ok as usize;
            }
        }
    }
    sel.truncate(k);
}
