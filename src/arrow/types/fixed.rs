//! int2/int4/int8 -> int16/int32/int64, float4/float8 -> float32/float64 (NaN and infinities
//! as they are), bool -> boolean. Also the generic fixed-width by-value converter
//! [`Fixed`] that `datetime` reuses with its own value mapping.
use super::{datum_raw, read_raw, Column};
use crate::storage::block::{BlockRef, ColDesc, KIND_FIXED};
use arrow_array::builder::{BooleanBuilder, PrimitiveBuilder};
use arrow_array::types::{Float32Type, Float64Type, Int16Type, Int32Type, Int64Type};
use arrow_array::{ArrayRef, ArrowPrimitiveType};
use pgrx::pg_sys;
use std::sync::Arc;

/// A fixed-width by-value PostgreSQL type of `attlen` bytes whose raw value (sign-extended
/// i64) maps to an Arrow primitive by `map` (None: the value has no Arrow form). `map` is a type
/// parameter, not a function pointer, so that range loops inline it.
pub struct Fixed<T: ArrowPrimitiveType, M: Fn(i64) -> Option<T::Native>> {
    pub b: PrimitiveBuilder<T>,
    pub attlen: i16,
    pub map: M,
    /// the column's name, for the out-of-range error
    pub name: String,
    /// the Arrow type when it carries parameters (a timestamp's time zone)
    pub dt: Option<arrow_schema::DataType>,
    /// the stored bytes are the Arrow values (integers, floats): ranges are copied
    pub copy: bool,
}

impl<T: ArrowPrimitiveType, M: Fn(i64) -> Option<T::Native>> Fixed<T, M> {
    pub fn new(attlen: i16, map: M) -> Self {
        Fixed {
            b: PrimitiveBuilder::new(),
            attlen,
            map,
            name: String::new(),
            dt: None,
            copy: false,
        }
    }

    #[inline]
    fn push(&mut self, raw: i64) {
        match (self.map)(raw) {
            Some(v) => self.b.append_value(v),
            None => crate::ffi::error_hint(
                pgrx::PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
                format!(
                    "a value of column \"{}\" is out of range for Arrow {}",
                    self.name,
                    T::DATA_TYPE
                ),
                "Arrow counts microseconds from 1970 in 64 bits: timestamps after year 294246 do not fit.",
            ),
        }
    }
}

impl<T: ArrowPrimitiveType, M: Fn(i64) -> Option<T::Native>> Column for Fixed<T, M> {
    fn push_block(&mut self, b: BlockRef, c: &ColDesc, rows: &[u32]) -> bool {
        if c.kind != KIND_FIXED || c.byval == 0 || c.attlen != self.attlen {
            return false;
        }
        for &s in rows {
            if b.is_valid(c, s) {
                self.push(read_raw(b, c, s));
            } else {
                self.b.append_null();
            }
        }
        true
    }

    fn push_range(&mut self, b: BlockRef, c: &ColDesc, first: u32, n: u32) -> bool {
        if c.kind != KIND_FIXED
            || c.byval == 0
            || c.attlen != self.attlen
            || c.attlen as usize != std::mem::size_of::<T::Native>()
        {
            return false;
        }
        let validity = super::range_validity(b, c, first, n);
        // SAFETY: the column region holds `capacity` cells of attlen bytes, 64-byte aligned
        let cells = unsafe {
            std::slice::from_raw_parts(b.value_ptr(c, first) as *const T::Native, n as usize)
        };
        if self.copy {
            match validity {
                None => self.b.append_slice(cells),
                Some((bits, _)) => {
                    let valid: Vec<bool> = bits.iter().collect();
                    self.b.append_values(cells, &valid);
                }
            }
            return true;
        }
        // dates and timestamps: shifted to 1970 in one tight loop (a NULL cell's bytes are not
        // a value: they may fail the mapping)
        let mut bad = None;
        {
            let map = &self.map;
            let value = |s: u32| match map(read_raw(b, c, s)) {
                Some(v) => v,
                None => {
                    if bad.is_none() && b.is_valid(c, s) {
                        bad = Some(s);
                    }
                    T::Native::default()
                }
            };
            match validity {
                // SAFETY: a range's map has an exact length
                None => unsafe {
                    self.b
                        .append_trusted_len_iter((first..first + n).map(value))
                },
                Some((bits, _)) => {
                    let vals: Vec<T::Native> = (first..first + n).map(value).collect();
                    let valid: Vec<bool> = bits.iter().collect();
                    self.b.append_values(&vals, &valid);
                }
            }
        }
        if let Some(s) = bad {
            self.push(read_raw(b, c, s)); // raises the out-of-range error
        }
        true
    }

    unsafe fn push_datum(&mut self, d: pg_sys::Datum, isnull: bool) {
        if isnull {
            self.b.append_null();
        } else {
            self.push(datum_raw(d, self.attlen));
        }
    }

    fn finish(&mut self) -> ArrayRef {
        let a = self.b.finish();
        // the next batch is likely as long: no regrowing (finish leaves an empty builder)
        self.b = PrimitiveBuilder::with_capacity(a.len());
        match &self.dt {
            Some(dt) => Arc::new(a.with_data_type(dt.clone())),
            None => Arc::new(a),
        }
    }
}

pub fn int16() -> Fixed<Int16Type, impl Fn(i64) -> Option<<Int16Type as ArrowPrimitiveType>::Native>>
{
    Fixed {
        copy: true,
        ..Fixed::new(2, |x| Some(x as i16))
    }
}
pub fn int32() -> Fixed<Int32Type, impl Fn(i64) -> Option<<Int32Type as ArrowPrimitiveType>::Native>>
{
    Fixed {
        copy: true,
        ..Fixed::new(4, |x| Some(x as i32))
    }
}
pub fn int64() -> Fixed<Int64Type, impl Fn(i64) -> Option<<Int64Type as ArrowPrimitiveType>::Native>>
{
    Fixed {
        copy: true,
        ..Fixed::new(8, Some)
    }
}
pub fn float32(
) -> Fixed<Float32Type, impl Fn(i64) -> Option<<Float32Type as ArrowPrimitiveType>::Native>> {
    Fixed {
        copy: true,
        ..Fixed::new(4, |x| Some(f32::from_bits(x as u32)))
    }
}
pub fn float64(
) -> Fixed<Float64Type, impl Fn(i64) -> Option<<Float64Type as ArrowPrimitiveType>::Native>> {
    Fixed {
        copy: true,
        ..Fixed::new(8, |x| Some(f64::from_bits(x as u64)))
    }
}

/// bool -> boolean (bit-packed in Arrow, one byte per value in the block).
#[derive(Default)]
pub struct Bool {
    b: BooleanBuilder,
}

impl Column for Bool {
    fn push_block(&mut self, b: BlockRef, c: &ColDesc, rows: &[u32]) -> bool {
        if c.kind != KIND_FIXED || c.attlen != 1 {
            return false;
        }
        for &s in rows {
            if b.is_valid(c, s) {
                self.b.append_value(read_raw(b, c, s) != 0);
            } else {
                self.b.append_null();
            }
        }
        true
    }

    unsafe fn push_datum(&mut self, d: pg_sys::Datum, isnull: bool) {
        if isnull {
            self.b.append_null();
        } else {
            self.b.append_value(d.value() as u8 != 0);
        }
    }

    fn finish(&mut self) -> ArrayRef {
        let a = self.b.finish();
        self.b = BooleanBuilder::with_capacity(a.len());
        Arc::new(a)
    }
}
