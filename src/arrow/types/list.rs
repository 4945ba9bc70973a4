//! One-dimensional arrays -> list<element's mapping> (any mapped element type, NULL elements
//! kept; an empty array is an empty list). A multidimensional array has no list form that keeps
//! its shape: the export fails naming the column (`text_fallback` exports it as text).
use super::{Column, Mapping};
use arrow_array::{ArrayRef, ListArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef};
use pgrx::pg_sys;
use std::sync::Arc;

/// An array column's element type, as `deconstruct_array` needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Elem {
    pub typid: pg_sys::Oid,
    pub len: i16,
    pub byval: bool,
    pub align: i8,
}

pub fn data_type(elem: &Mapping) -> DataType {
    DataType::List(item_field(elem))
}

fn item_field(elem: &Mapping) -> FieldRef {
    Arc::new(Field::new("item", elem.data_type(), true))
}

pub struct List {
    child: Box<dyn Column>,
    field: FieldRef,
    elem: Elem,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
    name: String,
}

impl List {
    pub fn new(elem_mapping: &Mapping, elem: &Elem, name: &str) -> Self {
        List {
            child: elem_mapping.column(name),
            field: item_field(elem_mapping),
            elem: elem.clone(),
            offsets: vec![0],
            nulls: NullBufferBuilder::new(0),
            name: name.into(),
        }
    }
}

impl Column for List {
    fn push_block(
        &mut self,
        _b: crate::storage::block::BlockRef,
        _c: &crate::storage::block::ColDesc,
        _rows: &[u32],
    ) -> bool {
        false
    }

    unsafe fn push_datum(&mut self, d: pg_sys::Datum, isnull: bool) {
        let last = *self.offsets.last().expect("offsets start with 0");
        if isnull {
            self.offsets.push(last);
            self.nulls.append_null();
            return;
        }
        unsafe {
            let arr = pg_sys::pg_detoast_datum(d.cast_mut_ptr()) as *mut pg_sys::ArrayType;
            if (*arr).ndim > 1 {
                crate::ffi::error_hint(
                    pgrx::PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                    format!(
                        "column \"{}\" holds a {}-dimensional array, which has no Arrow list form",
                        self.name,
                        (*arr).ndim
                    ),
                    "Arrow lists are one-dimensional; export the column with text_fallback => true.",
                );
            }
            let mut elems: *mut pg_sys::Datum = std::ptr::null_mut();
            let mut enulls: *mut bool = std::ptr::null_mut();
            let mut n: i32 = 0;
            pg_sys::deconstruct_array(
                arr,
                self.elem.typid,
                self.elem.len as i32,
                self.elem.byval,
                self.elem.align as std::ffi::c_char,
                &mut elems,
                &mut enulls,
                &mut n,
            );
            for i in 0..n as usize {
                self.child.push_datum(*elems.add(i), *enulls.add(i));
            }
            if !elems.is_null() {
                pg_sys::pfree(elems as *mut std::ffi::c_void);
            }
            if !enulls.is_null() {
                pg_sys::pfree(enulls as *mut std::ffi::c_void);
            }
            self.offsets.push(last + n);
            self.nulls.append_non_null();
        }
    }

    fn finish(&mut self) -> ArrayRef {
        let offsets = std::mem::replace(&mut self.offsets, vec![0]);
        let values = self.child.finish();
        let nulls = self.nulls.finish();
        Arc::new(
            ListArray::try_new(
                self.field.clone(),
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                values,
                nulls,
            )
            .unwrap_or_else(|e| {
                pgrx::error!("scoot: building the list of column \"{}\": {e}", self.name)
            }),
        )
    }
}
