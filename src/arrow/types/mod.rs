//! PostgreSQL value -> Arrow array, one small file per PostgreSQL type family (the model is
//! pg_parquet's `pg_to_arrow/`). Each column of an export has one [`Column`]: it appends a
//! block's visible rows straight from the PAX column region where the block's encoding allows
//! (`push_block`), or one datum at a time (`push_datum`: other encodings, TOAST, a column a block
//! does not store), and hands out the array of what it holds (`finish`).
//!
//! Nothing here touches locks or snapshots: the caller (`arrow::stream`) visits the blocks.
use crate::storage::block::{BlockRef, ColDesc};
use arrow_array::ArrayRef;
use arrow_schema::DataType;
use pgrx::pg_sys;

pub mod bytea;
pub mod datetime;
pub mod enums;
pub mod fixed;
pub mod list;
pub mod numeric;
pub mod text;
pub mod uuid;

/// How one PostgreSQL column is exported (decided by `arrow::schema` from its type).
#[derive(Clone, Debug, PartialEq)]
pub enum Mapping {
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Bool,
    /// date -> date32
    Date,
    /// timestamp -> timestamp[us]; timestamptz -> timestamp[us, UTC]
    Timestamp {
        tz: bool,
    },
    /// time -> time64[us]
    Time,
    /// interval -> interval[month_day_nano]
    Interval,
    /// numeric(p, s) with p <= 38 -> decimal128(p, s)
    Decimal {
        precision: u8,
        scale: i8,
    },
    /// text, varchar, char(n), json: the value's bytes as utf8
    Text,
    /// name (a NUL-terminated 64-byte array, not a varlena) -> utf8
    Name,
    /// bytea -> binary
    Binary,
    /// uuid -> fixed_size_binary(16)
    Uuid,
    /// enum -> dictionary<int32, utf8> of the labels
    Enum {
        typoutput: pg_sys::Oid,
    },
    /// one-dimensional array -> list<element's mapping>
    List {
        elem: Box<Mapping>,
        info: list::Elem,
    },
    /// any type through its output function -> utf8 (unconstrained numeric, jsonb, and every
    /// type when the caller asks for the text fallback)
    OutputText {
        typoutput: pg_sys::Oid,
    },
}

impl Mapping {
    pub fn data_type(&self) -> DataType {
        use arrow_schema::{IntervalUnit, TimeUnit};
        match self {
            Mapping::Int16 => DataType::Int16,
            Mapping::Int32 => DataType::Int32,
            Mapping::Int64 => DataType::Int64,
            Mapping::Float32 => DataType::Float32,
            Mapping::Float64 => DataType::Float64,
            Mapping::Bool => DataType::Boolean,
            Mapping::Date => DataType::Date32,
            Mapping::Timestamp { tz: false } => DataType::Timestamp(TimeUnit::Microsecond, None),
            Mapping::Timestamp { tz: true } => {
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
            }
            Mapping::Time => DataType::Time64(TimeUnit::Microsecond),
            Mapping::Interval => DataType::Interval(IntervalUnit::MonthDayNano),
            Mapping::Decimal { precision, scale } => DataType::Decimal128(*precision, *scale),
            Mapping::Text | Mapping::Name | Mapping::OutputText { .. } => DataType::Utf8,
            Mapping::Binary => DataType::Binary,
            Mapping::Uuid => DataType::FixedSizeBinary(16),
            Mapping::Enum { .. } => {
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
            }
            Mapping::List { elem, .. } => list::data_type(elem),
        }
    }

    /// A fresh column converter; `name` is the column's name (for error messages).
    pub fn column(&self, name: &str) -> Box<dyn Column> {
        match self {
            Mapping::Int16 => Box::new(fixed::int16()),
            Mapping::Int32 => Box::new(fixed::int32()),
            Mapping::Int64 => Box::new(fixed::int64()),
            Mapping::Float32 => Box::new(fixed::float32()),
            Mapping::Float64 => Box::new(fixed::float64()),
            Mapping::Bool => Box::new(fixed::Bool::default()),
            Mapping::Date => Box::new(datetime::date(name)),
            Mapping::Timestamp { tz } => Box::new(datetime::timestamp(*tz, name)),
            Mapping::Time => Box::new(datetime::time()),
            Mapping::Interval => Box::new(datetime::Interval::new(name)),
            Mapping::Decimal { precision, scale } => {
                Box::new(numeric::Decimal::new(*precision, *scale, name))
            }
            Mapping::Text => Box::new(text::Text::new(name, false)),
            Mapping::Name => Box::new(text::Text::new(name, true)),
            Mapping::OutputText { typoutput } => Box::new(text::Output::new(*typoutput, name)),
            Mapping::Binary => Box::new(bytea::Binary::default()),
            Mapping::Uuid => Box::new(uuid::Uuid::default()),
            Mapping::Enum { typoutput } => Box::new(enums::Enum::new(*typoutput)),
            Mapping::List { elem, info } => Box::new(list::List::new(elem, info, name)),
        }
    }
}

/// One export column being filled.
pub trait Column {
    /// Appends rows `rows` of block `b` (column desc `c`) read in place; false (nothing appended)
    /// when the block stores the column in a form this converter does not read directly.
    fn push_block(&mut self, b: BlockRef, c: &ColDesc, rows: &[u32]) -> bool;
    /// Appends the `n` consecutive rows from slot `first` of block `b` by copying column
    /// buffers (a frozen block, or any block where every slot in the range is a visible row);
    /// false (nothing appended) when this converter or the block's encoding cannot.
    fn push_range(&mut self, _b: BlockRef, _c: &ColDesc, _first: u32, _n: u32) -> bool {
        false
    }
    /// Appends one value given as a datum of the column's type.
    ///
    /// # Safety
    /// `d` is a valid datum of the column's type unless `isnull`.
    unsafe fn push_datum(&mut self, d: pg_sys::Datum, isnull: bool);
    /// The array of the values appended since the last call.
    fn finish(&mut self) -> ArrayRef;
}

/// The validity of `n` rows from slot `first` of column `c`, as Arrow's packed bits (1 = valid):
/// None when all are valid, else the bits and the number of NULLs.
pub fn range_validity(
    b: BlockRef,
    c: &ColDesc,
    first: u32,
    n: u32,
) -> Option<(arrow_buffer::BooleanBuffer, usize)> {
    let bits = unsafe {
        std::slice::from_raw_parts(
            b.base.add(c.bitmap_off as usize),
            (first + n).div_ceil(8) as usize,
        )
    };
    let buf = arrow_buffer::BooleanBuffer::new(
        arrow_buffer::Buffer::from_slice_ref(bits),
        first as usize,
        n as usize,
    );
    let valid = buf.count_set_bits();
    (valid != n as usize).then(|| (buf, n as usize - valid))
}

/// The low `attlen` bytes of a fixed-width by-value cell as a sign-extended i64 (the raw form
/// `fixed` and `datetime` map from).
#[inline]
pub fn read_raw(b: BlockRef, c: &ColDesc, s: u32) -> i64 {
    b.read_int(c, s)
}

/// A by-value datum's raw form, as [`read_raw`] gives it for a cell of `attlen` bytes.
#[inline]
pub fn datum_raw(d: pg_sys::Datum, attlen: i16) -> i64 {
    let v = d.value() as u64;
    match attlen {
        1 => v as u8 as i8 as i64,
        2 => v as u16 as i16 as i64,
        4 => v as u32 as i32 as i64,
        _ => v as i64,
    }
}

/// The bytes of a varlena datum, detoasted (decompressed / fetched from the TOAST table) when
/// needed. The slice lives until the current memory context is reset.
///
/// # Safety
/// `d` is a varlena datum.
pub unsafe fn varlena_bytes<'a>(d: pg_sys::Datum) -> &'a [u8] {
    unsafe {
        let p = pg_sys::pg_detoast_datum_packed(d.cast_mut_ptr()) as *const u8;
        let h = crate::storage::row::varlena::header_size(p);
        let n = crate::storage::row::varlena::size_any(p) - h;
        std::slice::from_raw_parts(p.add(h), n)
    }
}
