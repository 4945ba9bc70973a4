//! uuid -> fixed_size_binary(16) (the 16 bytes in network order, as PostgreSQL stores them).
use super::Column;
use crate::storage::block::{BlockRef, ColDesc, KIND_FIXED};
use arrow_array::builder::FixedSizeBinaryBuilder;
use arrow_array::{Array, ArrayRef};
use pgrx::pg_sys;
use std::sync::Arc;

pub struct Uuid {
    b: FixedSizeBinaryBuilder,
}

impl Default for Uuid {
    fn default() -> Self {
        Uuid {
            b: FixedSizeBinaryBuilder::new(16),
        }
    }
}

impl Column for Uuid {
    fn push_block(&mut self, b: BlockRef, c: &ColDesc, rows: &[u32]) -> bool {
        if c.kind != KIND_FIXED || c.attlen != 16 {
            return false;
        }
        for &s in rows {
            if b.is_valid(c, s) {
                let v = unsafe { std::slice::from_raw_parts(b.value_ptr(c, s), 16) };
                self.b.append_value(v).expect("16 bytes");
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
            let v = unsafe { std::slice::from_raw_parts(d.cast_mut_ptr::<u8>() as *const u8, 16) };
            self.b.append_value(v).expect("16 bytes");
        }
    }

    fn finish(&mut self) -> ArrayRef {
        let a = self.b.finish();
        self.b = FixedSizeBinaryBuilder::with_capacity(a.len(), 16);
        Arc::new(a)
    }
}
