//! Storage layer: *where do tuples live*. The shared arena and its block descriptors (`arena`), the
//! PAX block format (`block`), the table directory (`tabledir`), converting executor rows to and
//! from block rows (`row`), and the one modification layer every block change goes through
//! (`modify`). Nothing here knows about transactions beyond the version header fields.
pub mod arena;
pub mod block;
pub mod modify;
pub mod row;
pub mod tabledir;
