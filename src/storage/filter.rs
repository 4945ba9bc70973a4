//! Block filters of the ScootScan (`src/exec`): "column op constant" comparisons the planner found in a
//! query's restriction (see `block_filter` in `customscan.c`), evaluated on a block's column
//! values before any row is copied. Plain Rust over the PAX block format; the scan calls
//! [`BlockFilter::keep`] per row on blocks where [`BlockFilter::prepare`] says it applies.
//!
//! A filter only ever removes rows PostgreSQL's own qual (which still runs on the rows that
//! pass) would reject: NULLs fail every comparison; a block whose column is stored in a form the
//! filter does not read (a numeric that did not fit a scaled integer, a column added after the
//! block was written), or whose scale cannot represent the constant exactly, is not filtered.
use crate::storage::block::{BlockRef, ColDesc, KIND_DEC128, KIND_DEC64, KIND_FIXED};
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
}

#[derive(Clone, Debug, PartialEq)]
pub struct BlockFilter {
    /// 0-based column
    pub col: usize,
    /// btree strategy: 1 <, 2 <=, 3 =, 4 >=, 5 >
    pub strategy: u8,
    pub value: Value,
}

/// How a filter reads one block's column.
pub enum Prepared {
    /// fixed-width integer column of `attlen` bytes against `v`
    Int { attlen: i16, v: i128 },
    /// scaled decimal column (DEC64 or DEC128) against the constant scaled alike
    Dec { wide: bool, v: i128 },
}

impl BlockFilter {
    /// Parses "attno strategy type value" (the planner's encoding).
    pub fn parse(s: &str) -> Option<BlockFilter> {
        let mut it = s.split(' ');
        let attno: usize = it.next()?.parse().ok()?;
        let strategy: u8 = it.next()?.parse().ok()?;
        let typ = it.next()?;
        let val = it.next()?;
        if attno == 0 || !(1..=5).contains(&strategy) || it.next().is_some() {
            return None;
        }
        let value = match typ {
            "int" => Value::Int(val.parse().ok()?),
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
        };
        Some(BlockFilter {
            col: attno - 1,
            strategy,
            value,
        })
    }

    /// How to evaluate the filter on column desc `c` of a block; None: not on this block.
    pub fn prepare(&self, c: &ColDesc) -> Option<Prepared> {
        match (&self.value, c.kind) {
            (Value::Int(v), KIND_FIXED) if c.byval != 0 && matches!(c.attlen, 2 | 4 | 8) => {
                Some(Prepared::Int {
                    attlen: c.attlen,
                    v: *v as i128,
                })
            }
            (Value::Numeric { neg, int, frac }, KIND_DEC64 | KIND_DEC128) => {
                let scale = c.scale as usize;
                // exact only: extra fraction digits must be zeros
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
                Some(Prepared::Dec {
                    wide: c.kind == KIND_DEC128,
                    v: if *neg { -mag } else { mag },
                })
            }
            _ => None,
        }
    }

    /// Does row `slot` of block `b` pass (`c` = the filter's column desc in `b`)?
    #[inline]
    pub fn keep(&self, p: &Prepared, b: BlockRef, c: &ColDesc, slot: u32) -> bool {
        if !b.is_valid(c, slot) {
            return false;
        }
        let ptr = b.value_ptr(c, slot);
        let (x, v) = unsafe {
            match *p {
                Prepared::Int { attlen, v } => (
                    match attlen {
                        2 => (ptr as *const i16).read_unaligned() as i128,
                        4 => (ptr as *const i32).read_unaligned() as i128,
                        _ => (ptr as *const i64).read_unaligned() as i128,
                    },
                    v,
                ),
                Prepared::Dec { wide, v } => {
                    let x = if wide {
                        (ptr as *const i128).read_unaligned()
                    } else {
                        (ptr as *const i64).read_unaligned() as i128
                    };
                    // NaN sorts above every number
                    if (wide && x == NAN128) || (!wide && x == NAN64 as i128) {
                        return matches!(self.strategy, 4 | 5);
                    }
                    (x, v)
                }
            }
        };
        match self.strategy {
            1 => x < v,
            2 => x <= v,
            3 => x == v,
            4 => x >= v,
            _ => x > v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_filters() {
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
        assert_eq!(BlockFilter::parse("0 1 int 5"), None);
        assert_eq!(BlockFilter::parse("1 6 int 5"), None);
        assert_eq!(BlockFilter::parse("1 1 text x"), None);
        assert_eq!(BlockFilter::parse("1 1 numeric 1e5"), None);
    }
}
