//! The one mapping from domain errors to SQLSTATEs. Every user-facing failure leaves the
//! extension as an `ErrorReport` with a specific code, a message naming the path or field,
//! and where useful a hint; never XX000 for user input.
//!
//! | error | SQLSTATE |
//! |---|---|
//! | bad typed JSON | 22P02 |
//! | invalid argument (path, field path, transform, definition, batch) | 22023 |
//! | not found | P0002 |
//! | already exists | 23505 |
//! | failed precondition | 55000 |
//! | contention (REPEATABLE READ conflict) | 40001 |
//! | too large (document, nesting, index entry count or size) | 54000 |
//! | query syntax | 42601 (message has line and column) |
//! | missing index | 55000 (message has the `create_index` call) |

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::spi::SpiError;
use pgrx::PgSqlErrorCode;

use docstore_core::index::IndexError;
use docstore_core::limits::LimitError;
use docstore_core::mutation::{ErrorClass, MutationError};
use docstore_core::plan::PlanError;
use docstore_core::query::QueryError;
use docstore_core::{PathError, TypedJsonError};

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
    #[error("database already exists: {id}")]
    DatabaseExists { id: String },
    #[error("index not found: {id}")]
    IndexNotFound { id: i32 },
    #[error("precondition failed for {path}: {reason}")]
    PreconditionFailed { path: String, reason: String },
    #[error("document {path} was created by a concurrent transaction")]
    Contention { path: String },
    #[error("write {index}: {error}")]
    InWrite {
        index: usize,
        error: Box<DocstoreError>,
    },
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("internal error: {0}")]
    Internal(String),
    #[error("SPI: {0}")]
    Spi(#[from] SpiError),
}

impl DocstoreError {
    fn sqlstate(&self) -> PgSqlErrorCode {
        use PgSqlErrorCode::*;
        match self {
            DocstoreError::TypedJson(_) => ERRCODE_INVALID_TEXT_REPRESENTATION,
            DocstoreError::Path(_) | DocstoreError::InvalidArgument(_) => {
                ERRCODE_INVALID_PARAMETER_VALUE
            }
            DocstoreError::Mutation(e) => match e.sqlstate_class() {
                ErrorClass::InvalidArgument => ERRCODE_INVALID_PARAMETER_VALUE,
                ErrorClass::InvalidTypedJson => ERRCODE_INVALID_TEXT_REPRESENTATION,
                ErrorClass::NotFound => ERRCODE_NO_DATA_FOUND,
                ErrorClass::AlreadyExists => ERRCODE_UNIQUE_VIOLATION,
            },
            DocstoreError::Limit { error, .. } => match error {
                LimitError::DocumentTooLarge { .. } | LimitError::TooDeep { .. } => {
                    ERRCODE_PROGRAM_LIMIT_EXCEEDED
                }
                _ => ERRCODE_INVALID_PARAMETER_VALUE,
            },
            DocstoreError::Index(
                IndexError::TooManyEntries { .. } | IndexError::EntryTooLarge { .. },
            ) => ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            DocstoreError::Index(IndexError::InvalidDefinition(_)) => {
                ERRCODE_INVALID_PARAMETER_VALUE
            }
            DocstoreError::NotFound { .. } | DocstoreError::IndexNotFound { .. } => {
                ERRCODE_NO_DATA_FOUND
            }
            DocstoreError::AlreadyExists { .. }
            | DocstoreError::IndexExists { .. }
            | DocstoreError::DatabaseExists { .. } => ERRCODE_UNIQUE_VIOLATION,
            DocstoreError::PreconditionFailed { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            DocstoreError::Contention { .. } => ERRCODE_T_R_SERIALIZATION_FAILURE,
            DocstoreError::InWrite { error, .. } => error.sqlstate(),
            DocstoreError::Query(e) => match e.sqlstate() {
                "42601" => ERRCODE_SYNTAX_ERROR,
                "22P02" => ERRCODE_INVALID_TEXT_REPRESENTATION,
                _ => ERRCODE_INVALID_PARAMETER_VALUE,
            },
            DocstoreError::Plan(PlanError::MissingIndex { .. }) => {
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            }
            DocstoreError::Plan(PlanError::Unsupported(_)) => ERRCODE_FEATURE_NOT_SUPPORTED,
            DocstoreError::Internal(_) | DocstoreError::Spi(_) => ERRCODE_INTERNAL_ERROR,
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
            DocstoreError::InWrite { error, .. } => error.hint(),
            DocstoreError::Plan(PlanError::MissingIndex { .. }) => {
                Some("run the create_index call above; the index is built in the background (see docs/query.md)")
            }
            DocstoreError::Query(QueryError::Syntax { .. }) => Some("the query dialect is described in docs/query.md"),
            _ => None,
        }
    }
}

impl From<DocstoreError> for ErrorReport {
    fn from(e: DocstoreError) -> Self {
        let report = ErrorReport::new(e.sqlstate(), e.to_string(), "pg_docstore");
        match e.hint() {
            Some(hint) => report.set_hint(hint),
            None => report,
        }
    }
}
