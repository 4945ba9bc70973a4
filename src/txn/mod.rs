//! Transaction layer: row-version visibility (`mvcc`), row locks and waiting (`locking`), storage
//! lifetimes tied to transaction commit/abort (`xact`), the pruning horizon (`horizon`), and
//! block freezing (`freeze`).
pub mod freeze;
pub mod horizon;
pub mod locking;
pub mod mvcc;
pub mod xact;
