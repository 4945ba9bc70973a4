//! Which columns an export has and how each PostgreSQL type maps to Arrow (the table in the
//! README), plus what an export that reads blocks directly must check itself: the caller's
//! SELECT privilege on the table or on every exported column, and whether row-level security
//! applies (then the export runs a query instead, through the policies).
use super::types::Mapping;
use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;

/// One exported column.
pub struct ExportCol {
    /// 0-based attribute index
    pub att: usize,
    pub name: String,
    pub mapping: Mapping,
    pub nullable: bool,
    /// the value of rows stored before the column was added (ALTER TABLE ... ADD COLUMN)
    pub missing: (pg_sys::Datum, bool),
    /// 1-byte varlena headers allowed (storage not PLAIN), see `row::read_value`
    pub short_ok: bool,
}

/// PostgreSQL type oids the mapping knows (pg_type.dat).
mod oid {
    pub const BOOL: u32 = 16;
    pub const BYTEA: u32 = 17;
    pub const NAME: u32 = 19;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const JSON: u32 = 114;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const BPCHAR: u32 = 1042;
    pub const VARCHAR: u32 = 1043;
    pub const DATE: u32 = 1082;
    pub const TIME: u32 = 1083;
    pub const TIMESTAMP: u32 = 1114;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const INTERVAL: u32 = 1186;
    pub const NUMERIC: u32 = 1700;
    pub const UUID: u32 = 2950;
    pub const JSONB: u32 = 3802;
}

/// numeric typmod -> (precision, scale) (PostgreSQL 15 allows negative scales)
fn numeric_typmod(typmod: i32) -> Option<(i32, i32)> {
    if typmod < 4 {
        return None;
    }
    let t = typmod - 4;
    Some(((t >> 16) & 0xffff, ((t & 0x7ff) ^ 1024) - 1024))
}

/// A type as the text its output function prints.
fn output_text(typid: u32) -> Mapping {
    let mut out = pg_sys::InvalidOid;
    let mut varlena = false;
    unsafe { pg_sys::getTypeOutputInfo(pg_sys::Oid::from(typid), &mut out, &mut varlena) };
    Mapping::OutputText { typoutput: out }
}

/// The mapping of a (base) type, None if it has none. `text_fallback`: numeric and arrays go
/// out as utf8 too (NaN has no decimal128 form, a multidimensional array no list form).
pub fn mapping(typid: u32, typmod: i32, text_fallback: bool) -> Option<Mapping> {
    Some(match typid {
        oid::INT2 => Mapping::Int16,
        oid::INT4 => Mapping::Int32,
        oid::INT8 => Mapping::Int64,
        oid::FLOAT4 => Mapping::Float32,
        oid::FLOAT8 => Mapping::Float64,
        oid::BOOL => Mapping::Bool,
        oid::DATE => Mapping::Date,
        oid::TIMESTAMP => Mapping::Timestamp { tz: false },
        oid::TIMESTAMPTZ => Mapping::Timestamp { tz: true },
        oid::TIME => Mapping::Time,
        oid::INTERVAL => Mapping::Interval,
        oid::NUMERIC => match numeric_typmod(typmod) {
            Some((p, s)) if !text_fallback && (1..=38).contains(&p) && (0..=p).contains(&s) => {
                Mapping::Decimal {
                    precision: p as u8,
                    scale: s as i8,
                }
            }
            _ => output_text(typid),
        },
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::JSON => Mapping::Text,
        oid::NAME => Mapping::Name,
        oid::BYTEA => Mapping::Binary,
        oid::UUID => Mapping::Uuid,
        oid::JSONB => output_text(typid),
        _ => return composite_mapping(typid, typmod, text_fallback),
    })
}

/// Enums and one-dimensional arrays of mapped element types.
fn composite_mapping(typid: u32, typmod: i32, text_fallback: bool) -> Option<Mapping> {
    unsafe {
        let t = pg_sys::Oid::from(typid);
        if pg_sys::get_typtype(t) as u8 == pg_sys::TYPTYPE_ENUM {
            let mut out = pg_sys::InvalidOid;
            let mut varlena = false;
            pg_sys::getTypeOutputInfo(t, &mut out, &mut varlena);
            return Some(Mapping::Enum { typoutput: out });
        }
        let et = pg_sys::get_element_type(t);
        if et == pg_sys::InvalidOid || text_fallback {
            // with text_fallback arrays go out as text (a multidimensional value has no list form)
            return None;
        }
        // the element's own mapping (the array's typmod is its elements'); arrays of arrays
        // do not exist in PostgreSQL, multidimensional values fail at export time
        let mut etypmod = typmod;
        let base = pg_sys::getBaseTypeAndTypmod(et, &mut etypmod);
        let elem = mapping(base.to_u32(), etypmod, false)?;
        let mut len = 0i16;
        let mut byval = false;
        let mut align: std::ffi::c_char = 0;
        pg_sys::get_typlenbyvalalign(et, &mut len, &mut byval, &mut align);
        Some(Mapping::List {
            elem: Box::new(elem),
            info: super::types::list::Elem {
                typid: et,
                len,
                byval,
                align: align as i8,
            },
        })
    }
}

/// The columns to export (`names`: in that order; None: every column).
///
/// # Safety
/// `rel` is an open relation.
pub unsafe fn columns(
    rel: pg_sys::Relation,
    names: Option<Vec<String>>,
    text_fallback: bool,
) -> Vec<ExportCol> {
    unsafe {
        let relname = crate::ffi::rel_name(rel);
        let td = (*rel).rd_att;
        let natts = (*td).natts as usize;
        let live: Vec<usize> = (0..natts)
            .filter(|&i| !(*crate::ffi::tupdesc_attr(td, i)).attisdropped)
            .collect();
        let attname = |i: usize| {
            std::ffi::CStr::from_ptr((*crate::ffi::tupdesc_attr(td, i)).attname.data.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        let atts: Vec<usize> = match names {
            None => live,
            Some(ns) => ns
                .iter()
                .map(|n| {
                    live.iter()
                        .copied()
                        .find(|&i| attname(i) == *n)
                        .unwrap_or_else(|| {
                            crate::ffi::error_hint(
                            PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                            format!("column \"{n}\" of relation \"{relname}\" does not exist"),
                            "columns => ARRAY[...] names columns of the table, case-sensitively.",
                        )
                        })
                })
                .collect(),
        };
        atts.into_iter()
            .map(|i| {
                let a = crate::ffi::tupdesc_attr(td, i);
                let mut typmod = (*a).atttypmod;
                let base = pg_sys::getBaseTypeAndTypmod((*a).atttypid, &mut typmod);
                let name = attname(i);
                let mapping = match mapping(base.to_u32(), typmod, text_fallback) {
                    Some(m) => m,
                    None if text_fallback => output_text((*a).atttypid.to_u32()),
                    None => {
                        let tname = std::ffi::CStr::from_ptr(pg_sys::format_type_be((*a).atttypid))
                            .to_string_lossy()
                            .into_owned();
                        crate::ffi::error_hint(
                            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                            format!("column \"{name}\" has type {tname}, which scoot.arrow_stream cannot map to an Arrow type"),
                            "Pass text_fallback => true to export it as utf8 text (what its output function prints).",
                        )
                    }
                };
                let mut isnull = false;
                let missing = if (*a).atthasmissing {
                    pg_sys::getmissingattr(td, (i + 1) as i32, &mut isnull)
                } else {
                    isnull = true;
                    pg_sys::Datum::from(0usize)
                };
                ExportCol {
                    att: i,
                    name,
                    mapping,
                    nullable: !(*a).attnotnull,
                    missing: (missing, isnull),
                    short_ok: crate::storage::row::short_ok(td, i),
                }
            })
            .collect()
    }
}

/// Raises PostgreSQL's "permission denied" unless the caller may SELECT every column of `cols`
/// (SELECT on the table, or on each column), as a SELECT of them would.
///
/// # Safety
/// `rel` is an open relation.
pub unsafe fn check_privileges(rel: pg_sys::Relation, cols: &[ExportCol]) {
    unsafe {
        let relid = (*rel).rd_id;
        let user = pg_sys::GetUserId();
        if pg_sys::pg_class_aclcheck(relid, user, pg_sys::ACL_SELECT)
            == pg_sys::AclResult::ACLCHECK_OK
        {
            return;
        }
        let td = (*rel).rd_att;
        for c in cols {
            let attnum = (*crate::ffi::tupdesc_attr(td, c.att)).attnum;
            if pg_sys::pg_attribute_aclcheck(relid, attnum, user, pg_sys::ACL_SELECT)
                != pg_sys::AclResult::ACLCHECK_OK
            {
                pgrx::ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!("permission denied for table {}", crate::ffi::rel_name(rel)),
                    format!(
                        "Exporting column \"{}\" needs the SELECT privilege on it.",
                        c.name
                    )
                );
            }
        }
    }
}

/// Do row-level security policies apply to the caller on `relid`?
pub fn rls_applies(relid: pg_sys::Oid) -> bool {
    // RLS_ENABLED = 2
    unsafe { pg_sys::check_enable_rls(relid, pg_sys::InvalidOid, false) == 2 }
}
