//! Transaction layer: row-version visibility (`mvcc`), row locks and waiting (`locking`), storage
//! lifetimes tied to transaction commit/abort (`xact`), and the pruning horizon (`horizon`).
pub mod horizon;
pub mod locking;
pub mod mvcc;
pub mod xact;
