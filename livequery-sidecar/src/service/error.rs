//! The one error of the sidecar's operations: a canonical code (docstore-core's [`Code`])
//! with a message, a detail and a hint, whatever the transport. `http/error.rs` answers it as
//! JSON with the HTTP status of its code; another transport maps the same code to its own.
//!
//! Errors pg_docstore raised itself (its routine is `pg_docstore` and its SQLSTATE one of core's
//! table: [`ErrorKind::from_sqlstate`] reads it back to the same SQLSTATE) keep their message,
//! detail and hint: they are written for the user. Anything else (Postgres' own errors, even
//! with a SQLSTATE of the table, a lost connection, a bug) is logged with `tracing` under an
//! error id, and the error carries the code with a generic message and that id: never a
//! database internal, a SQL text or a stack trace. Postgres' own class 42 and 28 errors are
//! INTERNAL here: the sidecar runs only its own fixed SQL, so they mean a broken deployment.

use std::sync::atomic::{AtomicU64, Ordering};

use docstore_core::{Code, ErrorKind};
use serde::Serialize;

use crate::pg::PgError;

/// An operation's error, as every transport reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceError {
    #[serde(serialize_with = "code_name")]
    pub code: Code,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
    /// The cap that refused the call (`streams`, `streams_per_caller`, `targets_per_stream`;
    /// RESOURCE_EXHAUSTED): a transport answers it as a rate limit (HTTP 429), not as a
    /// request too large.
    #[serde(skip)]
    pub limit: Option<&'static str>,
}

fn code_name<S: serde::Serializer>(code: &Code, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(code.as_str())
}

/// Ids of logged errors: a process-unique counter after the process' start second, so the id
/// in a response finds the log line.
fn next_error_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    });
    format!(
        "{start:x}-{:x}",
        COUNTER.fetch_add(1, Ordering::Relaxed) + 1
    )
}

impl ServiceError {
    /// An error with a message written for the user.
    pub fn new(code: Code, message: impl Into<String>) -> ServiceError {
        ServiceError {
            code,
            message: message.into(),
            detail: None,
            hint: None,
            limit: None,
        }
    }

    /// The same error with a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> ServiceError {
        self.hint = Some(hint.into());
        self
    }

    pub fn invalid_argument(message: impl Into<String>) -> ServiceError {
        ServiceError::new(Code::InvalidArgument, message)
    }

    pub fn not_found(message: impl Into<String>) -> ServiceError {
        ServiceError::new(Code::NotFound, message)
    }

    pub fn unauthenticated(message: impl Into<String>) -> ServiceError {
        ServiceError::new(Code::Unauthenticated, message)
    }

    /// A failure that is not the caller's: logged in full under a new error id; the error
    /// says only `what` failed (a fixed phrase, never the error's text) and the id.
    pub fn internal(code: Code, what: &str, error: &dyn std::fmt::Display) -> ServiceError {
        let id = next_error_id();
        tracing::error!(error_id = %id, code = %code, %error, "{what}");
        ServiceError::new(
            code,
            format!("{what} (error id {id}; the sidecar's log has the cause)"),
        )
    }
}

impl From<PgError> for ServiceError {
    fn from(error: PgError) -> ServiceError {
        match error {
            PgError::Db(e) => from_postgres(&e),
            PgError::Pool(e) => {
                ServiceError::internal(Code::Unavailable, "no database connection is available", &e)
            }
            PgError::Connect(e) => {
                ServiceError::internal(Code::Unavailable, "no database connection is available", &e)
            }
            PgError::NoSuchDatabase(id) => ServiceError::not_found(format!(
                "database \"{id}\" does not exist"
            ))
            .with_hint("create it with select docstore.create_database('<id>'), or use (default)"),
            PgError::Decode(e) => {
                ServiceError::internal(Code::Internal, "a database answer could not be read", &e)
            }
        }
    }
}

/// The routine pg_docstore's errors name (pgrx reports the `ErrorReport`'s function name there):
/// only these carry a message written for the user. Postgres' own errors can share a SQLSTATE
/// with ours (a duplicate key is 23505 too) and their text names tables and constraints.
const EXTENSION_ROUTINE: &str = "pg_docstore";

/// Whether pg_docstore raised `db` (its message, detail and hint are for the user).
pub fn raised_by_extension(db: &tokio_postgres::error::DbError) -> bool {
    db.routine() == Some(EXTENSION_ROUTINE)
}

/// A Postgres error as the operations report it (see the module documentation).
pub fn from_postgres(error: &tokio_postgres::Error) -> ServiceError {
    let Some(db) = error.as_db_error() else {
        let code = if error.is_closed() {
            Code::Unavailable
        } else {
            Code::Internal
        };
        return ServiceError::internal(code, "the database connection failed", error);
    };
    let state = db.code().code();
    let ours = raised_by_extension(db);
    let kind = match ErrorKind::from_sqlstate(state) {
        // The sidecar runs only its own fixed SQL: an undefined object or a refused login
        // raised by Postgres itself is a fault of the deployment, not of the request.
        ErrorKind::InvalidArgument | ErrorKind::Syntax if !ours && state.starts_with("42") => {
            ErrorKind::Internal
        }
        ErrorKind::Unauthenticated if !ours => ErrorKind::Internal,
        kind => kind,
    };
    if ours && kind.sqlstate() == state && kind != ErrorKind::Internal {
        // pg_docstore wrote it for the user.
        return ServiceError {
            code: kind.code(),
            message: db.message().to_owned(),
            detail: db.detail().map(str::to_owned),
            hint: db.hint().map(str::to_owned),
            limit: None,
        };
    }
    let code = kind.code();
    let what = match code {
        Code::Aborted => "the transaction was aborted by a concurrent one; retry it",
        Code::InvalidArgument => "the database refused a value of the request",
        Code::Unavailable => "the database is unavailable",
        Code::Unauthenticated => "the database refused the sidecar's credentials",
        Code::FailedPrecondition => "the database is not in a state to run the request",
        Code::DeadlineExceeded => {
            "a statement of the request ran longer than the sidecar's statement timeout (--statement-timeout-ms)"
        }
        _ => "the request failed in the database",
    };
    let mut out = ServiceError::internal(code, what, &format!("SQLSTATE {state}: {error}"));
    out.detail = Some(format!("SQLSTATE {state}"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_do_not_echo_the_cause() {
        let e = ServiceError::internal(Code::Internal, "it failed", &"select secret from t");
        assert!(!e.message.contains("secret"));
        assert!(e.message.contains("error id"));
        assert_eq!(e.code, Code::Internal);
    }
}
