//! The one mapping from domain errors to SQLSTATEs. Every user-facing failure leaves the
//! extension as an `ErrorReport` with a specific code, a message, and where useful a detail
//! and a hint; never XX000.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::PgSqlErrorCode;

use docstore_core::TypedJsonError;

/// Every error the SQL functions raise.
#[derive(Debug, thiserror::Error)]
pub enum DocstoreError {
    #[error(transparent)]
    TypedJson(#[from] TypedJsonError),
}

impl DocstoreError {
    fn sqlstate(&self) -> PgSqlErrorCode {
        match self {
            DocstoreError::TypedJson(_) => PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            DocstoreError::TypedJson(_) => Some("typed JSON is described in docs/typed-json.md"),
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
