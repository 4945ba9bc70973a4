//! Arrow export: `scoot.arrow_stream(rel, columns, batch_rows, text_fallback, filter)` returns a
//! table as one Arrow IPC stream (schema message, record batches, end-of-stream marker), cut into
//! `bytea` chunks that concatenate to the stream. What is where:
//! - `schema`: which columns, the PostgreSQL -> Arrow type mapping, privilege and RLS checks;
//! - `types/`: one converter per PostgreSQL type family, filling Arrow arrays from block column
//!   regions (or datums);
//! - `stream`: visiting the table's blocks under the statement's snapshot, a batch at a time,
//!   and the IPC encoding (arrow-rs `StreamWriter`; no framing written by hand).
pub mod schema;
pub mod stream;
pub mod types;

use pgrx::prelude::*;

/// The SQL function (its SQL declaration, with `rel regclass`, is below).
#[pg_extern(sql = false)]
fn arrow_stream(
    rel: pg_sys::Oid,
    columns: Option<Vec<String>>,
    batch_rows: Option<i32>,
    text_fallback: Option<bool>,
    filter: Option<String>,
) -> SetOfIterator<'static, stream::Chunk> {
    crate::ensure_preloaded();
    let export = new_export(rel, columns, batch_rows, text_fallback, filter);
    SetOfIterator::new(stream::IpcStream::new(export))
}

/// `scoot.arrow_export(rel, path, ...)`: the same rows as an Arrow IPC *file* on the server,
/// like `COPY ... TO 'file'` (needs pg_write_server_files).
#[pg_extern(sql = false)]
fn arrow_export(
    rel: pg_sys::Oid,
    path: String,
    columns: Option<Vec<String>>,
    batch_rows: Option<i32>,
    text_fallback: Option<bool>,
    filter: Option<String>,
) -> i64 {
    crate::ensure_preloaded();
    // ROLE_PG_WRITE_SERVER_FILES
    if !unsafe { pg_sys::has_privs_of_role(pg_sys::GetUserId(), pg_sys::Oid::from(4570u32)) } {
        crate::ffi::error_hint(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "permission denied to export to a file",
            "Only roles with privileges of the \"pg_write_server_files\" role may write server files, as with COPY ... TO 'file'; scoot.arrow_stream sends the same data to the client.",
        );
    }
    if !std::path::Path::new(&path).is_absolute() {
        pgrx::ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_NAME,
            "relative path not allowed for scoot.arrow_export"
        );
    }
    let export = new_export(rel, columns, batch_rows, text_fallback, filter);
    stream::write_file(export, &path) as i64
}

/// The export both SQL functions run, after checking their common arguments.
fn new_export(
    rel: pg_sys::Oid,
    columns: Option<Vec<String>>,
    batch_rows: Option<i32>,
    text_fallback: Option<bool>,
    filter: Option<String>,
) -> stream::Export {
    let batch_rows = checked_batch_rows(batch_rows);
    unsafe {
        stream::Export::new(
            rel,
            columns,
            batch_rows,
            text_fallback.unwrap_or(false),
            filter,
        )
    }
}

fn checked_batch_rows(batch_rows: Option<i32>) -> usize {
    let batch_rows = batch_rows.unwrap_or(stream::DEFAULT_BATCH_ROWS as i32);
    if batch_rows < 1 {
        pgrx::ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("batch_rows must be at least 1, not {batch_rows}")
        );
    }
    batch_rows as usize
}

extension_sql!(
    r#"
CREATE FUNCTION arrow_stream(rel regclass, columns text[] DEFAULT NULL, batch_rows int DEFAULT 65536,
                             text_fallback boolean DEFAULT false, filter text DEFAULT NULL)
    RETURNS SETOF bytea
    LANGUAGE c VOLATILE PARALLEL UNSAFE
    AS 'MODULE_PATHNAME', 'arrow_stream_wrapper';
COMMENT ON FUNCTION arrow_stream(regclass, text[], int, boolean, text) IS
    'the rows of a scoot table visible to the statement''s snapshot as an Apache Arrow IPC stream, in bytea chunks that concatenate to the stream (pyarrow.ipc.open_stream reads it); columns: which, in that order (default all); batch_rows: rows per record batch; text_fallback: export types with no Arrow mapping, and numeric, as utf8 text; filter: a WHERE condition (the export then runs a query)';
"#,
    name = "arrow_stream_sql",
);

extension_sql!(
    r#"
CREATE FUNCTION arrow_export(rel regclass, path text, columns text[] DEFAULT NULL, batch_rows int DEFAULT 65536,
                             text_fallback boolean DEFAULT false, filter text DEFAULT NULL)
    RETURNS bigint
    LANGUAGE c VOLATILE PARALLEL UNSAFE
    AS 'MODULE_PATHNAME', 'arrow_export_wrapper';
REVOKE EXECUTE ON FUNCTION arrow_export(regclass, text, text[], int, boolean, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION arrow_export(regclass, text, text[], int, boolean, text) TO pg_write_server_files;
COMMENT ON FUNCTION arrow_export(regclass, text, text[], int, boolean, text) IS
    'writes the rows scoot.arrow_stream would stream as an Apache Arrow IPC file on the server (pyarrow.ipc.open_file, DuckDB); returns the rows written; needs pg_write_server_files; an error midway leaves no file';
"#,
    name = "arrow_export_sql",
);
