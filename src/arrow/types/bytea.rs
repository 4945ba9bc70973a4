//! bytea -> binary (the stored bytes; TOASTed values detoasted).
use super::{varlena_bytes, Column};
use crate::storage::block::{BlockRef, ColDesc, KIND_VAR, VAR_RAW};
use arrow_array::builder::BinaryBuilder;
use arrow_array::{Array, ArrayRef};
use pgrx::pg_sys;
use std::sync::Arc;

#[derive(Default)]
pub struct Binary {
    b: BinaryBuilder,
}

impl Column for Binary {
    fn push_block(&mut self, b: BlockRef, c: &ColDesc, rows: &[u32]) -> bool {
        if c.kind != KIND_VAR {
            return false;
        }
        for &s in rows {
            if !b.is_valid(c, s) {
                self.b.append_null();
                continue;
            }
            let (_, len) = b.var_entry(c, s);
            let payload = b.var_payload(c, s);
            if len & VAR_RAW != 0 {
                let v = unsafe { varlena_bytes(pg_sys::Datum::from(payload.as_ptr() as *mut u8)) };
                self.b.append_value(v);
            } else {
                self.b.append_value(payload);
            }
        }
        true
    }

    unsafe fn push_datum(&mut self, d: pg_sys::Datum, isnull: bool) {
        if isnull {
            self.b.append_null();
        } else {
            self.b.append_value(unsafe { varlena_bytes(d) });
        }
    }

    fn finish(&mut self) -> ArrayRef {
        let a = self.b.finish();
        self.b = BinaryBuilder::with_capacity(a.len(), a.value_data().len());
        Arc::new(a)
    }
}
