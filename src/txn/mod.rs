//! Transaction layer: row-version visibility (`mvcc`), row locks and waiting (`locking`), and storage
//! lifetimes tied to transaction commit/abort (`xact`).
pub mod locking;
pub mod mvcc;
pub mod xact;
