//! date -> date32, timestamp -> timestamp[us], timestamptz -> timestamp[us, UTC],
//! time -> time64[us], interval -> interval[month_day_nano].
//!
//! PostgreSQL counts days and microseconds from 2000-01-01, Arrow from 1970-01-01: values are
//! shifted by 10957 days / 946684800 s. `-infinity` / `infinity` (the minimum and maximum of
//! the stored integer) stay the minimum and maximum of the Arrow integer. Timestamps of the
//! years 294247 to 294276, which PostgreSQL accepts, do not fit 64-bit microseconds from 1970:
//! the export fails naming the column.
use super::fixed::Fixed;
use super::Column;
use crate::storage::block::{BlockRef, ColDesc, KIND_FIXED};
use arrow_array::builder::IntervalMonthDayNanoBuilder;
use arrow_array::types::{
    Date32Type, IntervalMonthDayNano, Time64MicrosecondType, TimestampMicrosecondType,
};
use arrow_array::ArrayRef;
use arrow_schema::{DataType, TimeUnit};
use pgrx::pg_sys;
use std::sync::Arc;

/// Days from 1970-01-01 to 2000-01-01.
pub const EPOCH_DAYS: i32 = 10_957;
/// Microseconds from 1970-01-01 to 2000-01-01.
pub const EPOCH_US: i64 = 946_684_800_000_000;

#[inline]
pub fn shift_date(d: i32) -> Option<i32> {
    match d {
        i32::MIN | i32::MAX => Some(d),
        // PostgreSQL's dates end in 5874897 AD, far inside i32 days from 1970
        _ => d.checked_add(EPOCH_DAYS),
    }
}

#[inline]
pub fn shift_timestamp(t: i64) -> Option<i64> {
    match t {
        i64::MIN | i64::MAX => Some(t),
        _ => t.checked_add(EPOCH_US),
    }
}

pub fn date(name: &str) -> Fixed<Date32Type, impl Fn(i64) -> Option<i32>> {
    let mut f = Fixed::new(4, |x| shift_date(x as i32));
    f.name = name.into();
    f
}

pub fn timestamp(
    tz: bool,
    name: &str,
) -> Fixed<TimestampMicrosecondType, impl Fn(i64) -> Option<i64>> {
    let mut f = Fixed::new(8, shift_timestamp);
    f.name = name.into();
    if tz {
        f.dt = Some(DataType::Timestamp(
            TimeUnit::Microsecond,
            Some("UTC".into()),
        ));
    }
    f
}

pub fn time() -> Fixed<Time64MicrosecondType, impl Fn(i64) -> Option<i64>> {
    Fixed::new(8, Some)
}

/// interval: PostgreSQL's 16 bytes (microseconds i64, days i32, months i32).
pub struct Interval {
    b: IntervalMonthDayNanoBuilder,
    name: String,
}

impl Interval {
    pub fn new(name: &str) -> Self {
        Interval {
            b: IntervalMonthDayNanoBuilder::new(),
            name: name.into(),
        }
    }

    /// # Safety
    /// `p` points at a 16-byte PostgreSQL interval.
    unsafe fn push_ptr(&mut self, p: *const u8) {
        let (us, days, months) = unsafe {
            (
                (p as *const i64).read_unaligned(),
                (p.add(8) as *const i32).read_unaligned(),
                (p.add(12) as *const i32).read_unaligned(),
            )
        };
        // more than about 2.5 million hours does not fit nanoseconds in an i64
        let Some(nanos) = us.checked_mul(1000) else {
            crate::ffi::error_hint(
                pgrx::PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("interval value of column \"{}\" is out of range for Arrow interval[month_day_nano]", self.name),
                "Arrow keeps an interval's time part in nanoseconds (i64): at most about 2.5 million hours.",
            );
        };
        self.b
            .append_value(IntervalMonthDayNano::new(months, days, nanos));
    }
}

impl Column for Interval {
    fn push_block(&mut self, b: BlockRef, c: &ColDesc, rows: &[u32]) -> bool {
        if c.kind != KIND_FIXED || c.attlen != 16 {
            return false;
        }
        for &s in rows {
            if b.is_valid(c, s) {
                unsafe { self.push_ptr(b.value_ptr(c, s)) };
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
            unsafe { self.push_ptr(d.cast_mut_ptr::<u8>()) };
        }
    }

    fn finish(&mut self) -> ArrayRef {
        let a = self.b.finish();
        self.b = IntervalMonthDayNanoBuilder::with_capacity(a.len());
        Arc::new(a)
    }
}
