//! numeric(p, s) with p <= 38 -> decimal128(p, s). Blocks store such columns as scaled
//! integers (DEC64 / DEC128 with the column's scale), which are Arrow's decimal values as they
//! are. NaN has no decimal128 form: the export fails naming the column. Unconstrained numeric
//! and p > 38 go out as utf8 (`text::Output`, PostgreSQL's own numeric_out).
use super::{varlena_bytes, Column};
use crate::storage::block::{BlockRef, ColDesc, KIND_DEC128, KIND_DEC64};
use crate::storage::encoding::{self, NAN128, NAN64};
use arrow_array::builder::Decimal128Builder;
use arrow_array::ArrayRef;
use pgrx::pg_sys;
use std::sync::Arc;

pub struct Decimal {
    b: Decimal128Builder,
    precision: u8,
    scale: i8,
    name: String,
}

impl Decimal {
    pub fn new(precision: u8, scale: i8, name: &str) -> Self {
        Decimal {
            b: Decimal128Builder::new(),
            precision,
            scale,
            name: name.into(),
        }
    }

    fn nan(&self) -> ! {
        crate::ffi::error_hint(
            pgrx::PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!(
                "column \"{}\" holds NaN, which Arrow decimal128 cannot represent",
                self.name
            ),
            "Export the column as text: scoot.arrow_stream(..., text_fallback => true) exports every numeric column as utf8.",
        )
    }
}

impl Column for Decimal {
    fn push_block(&mut self, b: BlockRef, c: &ColDesc, rows: &[u32]) -> bool {
        if !matches!(c.kind, KIND_DEC64 | KIND_DEC128) || c.scale as i8 != self.scale {
            return false;
        }
        let wide = c.kind == KIND_DEC128;
        for &s in rows {
            if !b.is_valid(c, s) {
                self.b.append_null();
                continue;
            }
            let p = b.value_ptr(c, s);
            let v = unsafe {
                if wide {
                    (p as *const i128).read_unaligned()
                } else {
                    match (p as *const i64).read_unaligned() {
                        NAN64 => NAN128,
                        x => x as i128,
                    }
                }
            };
            if v == NAN128 {
                self.nan();
            }
            self.b.append_value(v);
        }
        true
    }

    /// Consecutive rows: the scaled integers widened to i128 in one loop.
    fn push_range(&mut self, b: BlockRef, c: &ColDesc, first: u32, n: u32) -> bool {
        if !matches!(c.kind, KIND_DEC64 | KIND_DEC128) || c.scale as i8 != self.scale {
            return false;
        }
        let validity = super::range_validity(b, c, first, n);
        let base = b.value_ptr(c, first);
        let nan_at = |k: usize| validity.as_ref().is_none_or(|(bits, _)| bits.value(k));
        // SAFETY: the column region holds `capacity` cells of 8 or 16 bytes from `first` on
        if c.kind == KIND_DEC128 {
            let vals = unsafe { std::slice::from_raw_parts(base as *const i128, n as usize) };
            if vals
                .iter()
                .enumerate()
                .any(|(k, &v)| v == NAN128 && nan_at(k))
            {
                self.nan();
            }
            match &validity {
                None => self.b.append_slice(vals),
                Some((bits, _)) => {
                    let valid: Vec<bool> = bits.iter().collect();
                    self.b.append_values(vals, &valid);
                }
            }
        } else {
            let vals = unsafe { std::slice::from_raw_parts(base as *const i64, n as usize) };
            match &validity {
                // SAFETY: a slice's map has an exact length
                None => {
                    let mut nan = false;
                    unsafe {
                        self.b.append_trusted_len_iter(vals.iter().map(|&x| {
                            nan |= x == NAN64;
                            x as i128
                        }))
                    };
                    if nan {
                        self.nan();
                    }
                }
                Some((bits, _)) => {
                    if vals
                        .iter()
                        .enumerate()
                        .any(|(k, &v)| v == NAN64 && nan_at(k))
                    {
                        self.nan();
                    }
                    let wide: Vec<i128> = vals.iter().map(|&x| x as i128).collect();
                    let valid: Vec<bool> = bits.iter().collect();
                    self.b.append_values(&wide, &valid);
                }
            }
        }
        true
    }

    unsafe fn push_datum(&mut self, d: pg_sys::Datum, isnull: bool) {
        if isnull {
            self.b.append_null();
            return;
        }
        let bytes = unsafe { varlena_bytes(d) };
        match encoding::numeric_to_i128(bytes, self.scale as u32) {
            Some(NAN128) => self.nan(),
            Some(v) => self.b.append_value(v),
            // the column's typmod guarantees the scale and precision
            None => pgrx::error!(
                "scoot: a value of column \"{}\" does not fit decimal128({}, {})",
                self.name,
                self.precision,
                self.scale
            ),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        let a = self.b.finish();
        self.b = Decimal128Builder::with_capacity(a.len());
        Arc::new(
            a.with_precision_and_scale(self.precision, self.scale)
                .expect("valid decimal128 precision and scale"),
        )
    }
}
