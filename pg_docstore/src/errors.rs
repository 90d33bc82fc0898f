//! The one mapping from domain errors to SQLSTATEs. Every user-facing failure leaves the
//! extension as an `ErrorReport` with a specific code, a message naming the path or field,
//! and where useful a hint; never XX000 for user input.
//!
//! Each error reports its [`ErrorKind`] ([`DocstoreError::kind`]: core errors report their
//! own); the SQLSTATE is the kind's, read from core's one table ([`ErrorKind::sqlstate`]).
//!
//! | error | SQLSTATE |
//! |---|---|
//! | bad typed JSON | 22P02 |
//! | invalid argument (path, field path, transform, definition, batch) | 22023 |
//! | not found | P0002 |
//! | already exists | 23505 |
//! | failed precondition | 55000 |
//! | read at a time older than the version history | 55000 |
//! | contention (REPEATABLE READ conflict) | 40001 |
//! | too large (document, nesting, index entries, a client query over max_query_results) | 54000 |
//! | query syntax | 42601 (message has line and column) |
//! | missing index | 55000 (message has the `create_index` call) |
//! | missing index that `auto_composite_indexes` could not create there (read-only or snapshot transaction) | 55000 (same message; the hint says why) |
//! | a query no index layout can serve | 0A000 |
//! | internal (SPI, corrupt data) | XX000 |

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::spi::SpiError;
use pgrx::PgSqlErrorCode;

use docstore_core::commit::CommitError;
use docstore_core::document::LimitError;
use docstore_core::error::ErrorKind;
use docstore_core::index::IndexError;
use docstore_core::mutation::MutationError;
use docstore_core::path_pattern::PatternError;
use docstore_core::plan::PlanError;
use docstore_core::query::QueryError;
use docstore_core::{PathError, TypedJsonError};

/// Why a query could not create the composite index it needs although its database has
/// `auto_composite_indexes` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoIndexBlock {
    /// A read-only transaction or a hot standby: nothing can be written.
    ReadOnly,
    /// A REPEATABLE READ or SERIALIZABLE transaction: its snapshot may miss documents committed
    /// since it began, which the build would then leave out of the index.
    Snapshot,
}

/// Every error the SQL functions raise.
#[derive(Debug, thiserror::Error)]
pub enum DocstoreError {
    #[error(transparent)]
    TypedJson(#[from] TypedJsonError),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Mutation(MutationError),
    #[error("{error} (document {path})")]
    Limit { path: String, error: LimitError },
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("document not found: {path}")]
    NotFound { path: String },
    #[error("document already exists: {path}")]
    AlreadyExists { path: String },
    #[error("index already exists: {id} on collection group {collection_group}")]
    IndexExists { id: i32, collection_group: String },
    #[error(transparent)]
    Pattern(#[from] PatternError),
    #[error("trigger already exists: {name}")]
    TriggerExists { name: String },
    #[error("trigger not found: {name}")]
    TriggerNotFound { name: String },
    #[error("database already exists: {id}")]
    DatabaseExists { id: String },
    #[error("index not found: {id}")]
    IndexNotFound { id: i32 },
    #[error("precondition failed for {path}: {reason}")]
    PreconditionFailed { path: String, reason: String },
    /// A read at a time the database's version history does not cover (docs/storage.md,
    /// "Version history").
    #[error("{0}")]
    HistoryUnavailable(String),
    #[error("document {path} was created by a concurrent transaction")]
    Contention { path: String },
    #[error("write {index}: {error}")]
    InWrite {
        index: usize,
        error: Box<DocstoreError>,
    },
    #[error(transparent)]
    Commit(#[from] CommitError),
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A missing index that the database's `auto_composite_indexes` could not create where the
    /// query ran: the message is the missing index's, the hint says why.
    #[error("{error}")]
    AutoIndexBlocked {
        error: PlanError,
        reason: AutoIndexBlock,
    },
    #[error("{}", .0.headline())]
    Rules(docstore_rules::CompileError),
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    #[error(
        "the query returns more than {0} documents, this database's max_query_results \
         (docstore.set_database_options): narrow it or add a limit"
    )]
    ResultTooLarge(u64),
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    #[error("internal error: {0}")]
    Internal(String),
    #[error("SPI: {0}")]
    Spi(#[from] SpiError),
}

impl DocstoreError {
    /// The kind of failure: core errors report their own
    /// ([`docstore_core::error::ErrorKind`]); the extension's own variants are mapped here,
    /// the one place that does.
    pub fn kind(&self) -> ErrorKind {
        match self {
            DocstoreError::TypedJson(e) => e.kind(),
            DocstoreError::Path(e) => e.kind(),
            DocstoreError::Pattern(e) => e.kind(),
            DocstoreError::Mutation(e) => e.kind(),
            DocstoreError::Limit { error, .. } => error.kind(),
            DocstoreError::Index(e) => e.kind(),
            DocstoreError::Commit(e) => e.kind(),
            DocstoreError::Query(e) => e.kind(),
            DocstoreError::Plan(e) | DocstoreError::AutoIndexBlocked { error: e, .. } => e.kind(),
            DocstoreError::InWrite { error, .. } => error.kind(),
            DocstoreError::InvalidArgument(_) => ErrorKind::InvalidArgument,
            DocstoreError::NotFound { .. }
            | DocstoreError::IndexNotFound { .. }
            | DocstoreError::TriggerNotFound { .. } => ErrorKind::NotFound,
            DocstoreError::AlreadyExists { .. }
            | DocstoreError::IndexExists { .. }
            | DocstoreError::DatabaseExists { .. }
            | DocstoreError::TriggerExists { .. } => ErrorKind::AlreadyExists,
            DocstoreError::PreconditionFailed { .. } | DocstoreError::HistoryUnavailable(_) => {
                ErrorKind::FailedPrecondition
            }
            DocstoreError::Rules(e) => e.error_kind(),
            DocstoreError::PermissionDenied(_) => ErrorKind::PermissionDenied,
            DocstoreError::ResultTooLarge(_) => ErrorKind::TooLarge,
            DocstoreError::Unauthenticated(_) => ErrorKind::Unauthenticated,
            DocstoreError::Contention { .. } => ErrorKind::Aborted,
            DocstoreError::Internal(_) | DocstoreError::Spi(_) => ErrorKind::Internal,
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            DocstoreError::TypedJson(_) => Some("typed JSON is described in docs/typed-json.md"),
            DocstoreError::NotFound { .. } => {
                Some("use docstore.set() to write a document that may not exist")
            }
            DocstoreError::AlreadyExists { .. } => {
                Some("use docstore.set() to overwrite, or docstore.update() to change fields")
            }
            DocstoreError::Contention { .. } => Some("retry the transaction"),
            DocstoreError::Rules(_) => Some("the supported rules language is described in docs/rules.md"),
            DocstoreError::InWrite { error, .. } => error.hint(),
            DocstoreError::Plan(PlanError::MissingIndex { .. }) => {
                Some("run the create_index call above; the index is built in the background (see docs/query.md)")
            }
            DocstoreError::AutoIndexBlocked { reason: AutoIndexBlock::ReadOnly, .. } => {
                Some("this database creates missing composite indexes automatically, but not in a read-only transaction or on a standby: run the query once in a read-write transaction, or the create_index call above (see docs/query.md)")
            }
            DocstoreError::AutoIndexBlocked { reason: AutoIndexBlock::Snapshot, .. } => {
                Some("this database creates missing composite indexes automatically, but only in READ COMMITTED transactions: run the query once outside this transaction, or the create_index call above (see docs/query.md)")
            }
            DocstoreError::Query(QueryError::Syntax { .. }) => Some("the query dialect is described in docs/query.md"),
            _ => None,
        }
    }
}

impl From<DocstoreError> for ErrorReport {
    fn from(e: DocstoreError) -> Self {
        let code = sql_error_code(e.kind().sqlstate());
        let mut report = ErrorReport::new(code, e.to_string(), "pg_docstore");
        if let DocstoreError::Rules(compile) = &e {
            report = report.set_detail(compile.excerpt.clone());
        }
        match e.hint() {
            Some(hint) => report.set_hint(hint),
            None => report,
        }
    }
}

/// Keep Rust backtraces out of the errors clients read. pgrx re-raises a Postgres error that
/// interrupted our code (an SPI statement refused, cancelled or timed out) with a Rust
/// backtrace of the call in its DETAIL whenever `std::backtrace::Backtrace::capture` is on,
/// which `RUST_BACKTRACE=1` in the postmaster's environment turns on (developers' shells often
/// set it): the client would read the extension's internals instead of the error's own detail.
/// Capturing is turned off for the process (`RUST_LIB_BACKTRACE=0` takes precedence over
/// `RUST_BACKTRACE` for captured backtraces) unless `RUST_LIB_BACKTRACE` is set explicitly, the
/// documented way to debug the extension with backtraces (docs/storage.md, "Access: whose
/// rights a query uses"). Called from `_PG_init`, before anything could capture one.
pub fn keep_backtraces_out_of_errors() {
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // Postgres processes are single-threaded, and _PG_init runs before any code of ours
        // could read the environment from another thread.
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
    }
}

/// The [`PgSqlErrorCode`] of a five-character SQLSTATE (Postgres' `MAKE_SQLSTATE`); anything
/// that is not one is `ERRCODE_INTERNAL_ERROR`.
pub fn sql_error_code(sqlstate: &str) -> PgSqlErrorCode {
    let bytes = sqlstate.as_bytes();
    if bytes.len() != 5 || !bytes.iter().all(u8::is_ascii_alphanumeric) {
        return PgSqlErrorCode::ERRCODE_INTERNAL_ERROR;
    }
    let six_bit = |b: u8| (i32::from(b) - i32::from(b'0')) & 0x3F;
    let packed = bytes
        .iter()
        .enumerate()
        .fold(0i32, |acc, (i, b)| acc + (six_bit(*b) << (6 * i)));
    PgSqlErrorCode::from(packed)
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
    use pgrx::prelude::*;

    #[pg_test]
    fn every_kind_raises_its_sqlstate() {
        use PgSqlErrorCode::*;
        let expected = [
            (ErrorKind::InvalidArgument, ERRCODE_INVALID_PARAMETER_VALUE),
            (
                ErrorKind::InvalidTypedJson,
                ERRCODE_INVALID_TEXT_REPRESENTATION,
            ),
            (ErrorKind::Syntax, ERRCODE_SYNTAX_ERROR),
            (ErrorKind::NotFound, ERRCODE_NO_DATA_FOUND),
            (ErrorKind::AlreadyExists, ERRCODE_UNIQUE_VIOLATION),
            (
                ErrorKind::FailedPrecondition,
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            ),
            (ErrorKind::Aborted, ERRCODE_T_R_SERIALIZATION_FAILURE),
            (ErrorKind::PermissionDenied, ERRCODE_INSUFFICIENT_PRIVILEGE),
            (
                ErrorKind::Unauthenticated,
                ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
            ),
            (ErrorKind::TooLarge, ERRCODE_PROGRAM_LIMIT_EXCEEDED),
            (ErrorKind::Unavailable, ERRCODE_CANNOT_CONNECT_NOW),
            (ErrorKind::Unimplemented, ERRCODE_FEATURE_NOT_SUPPORTED),
            (ErrorKind::Internal, ERRCODE_INTERNAL_ERROR),
            (ErrorKind::DeadlineExceeded, ERRCODE_QUERY_CANCELED),
        ];
        for (kind, code) in expected {
            assert_eq!(sql_error_code(kind.sqlstate()), code, "{kind:?}");
        }
        assert_eq!(sql_error_code("2202"), ERRCODE_INTERNAL_ERROR);
    }

    #[pg_test]
    fn extension_variants_keep_their_sqlstates() {
        let cases = [
            (DocstoreError::InvalidArgument("x".into()), "22023"),
            (DocstoreError::NotFound { path: "c/d".into() }, "P0002"),
            (DocstoreError::IndexNotFound { id: 1 }, "P0002"),
            (DocstoreError::AlreadyExists { path: "c/d".into() }, "23505"),
            (
                DocstoreError::IndexExists {
                    id: 1,
                    collection_group: "c".into(),
                },
                "23505",
            ),
            (
                DocstoreError::PreconditionFailed {
                    path: "c/d".into(),
                    reason: "x".into(),
                },
                "55000",
            ),
            (DocstoreError::Contention { path: "c/d".into() }, "40001"),
            (DocstoreError::HistoryUnavailable("x".into()), "55000"),
            (
                DocstoreError::AutoIndexBlocked {
                    error: PlanError::MissingIndex {
                        collection_group: "c".into(),
                        scope: docstore_core::index::Scope::Collection,
                        fields: Vec::new(),
                        call: "select 1;".into(),
                    },
                    reason: AutoIndexBlock::ReadOnly,
                },
                "55000",
            ),
            (DocstoreError::PermissionDenied("x".into()), "42501"),
            (DocstoreError::Unauthenticated("x".into()), "28000"),
            (DocstoreError::ResultTooLarge(10), "54000"),
            (DocstoreError::Internal("x".into()), "XX000"),
            (
                DocstoreError::InWrite {
                    index: 0,
                    error: Box::new(DocstoreError::Mutation(MutationError::AlreadyExists)),
                },
                "23505",
            ),
        ];
        for (error, state) in cases {
            assert_eq!(error.kind().sqlstate(), state, "{error}");
        }
    }
}
