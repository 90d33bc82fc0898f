//! The one error type of the HTTP API: JSON `{"code", "message", "detail", "hint"}` with a
//! canonical code (docstore-core's [`Code`]) and the one table code -> HTTP status.
//!
//! Errors pg_docstore raised itself (its routine is `pg_docstore` and its SQLSTATE one of core's
//! table: [`ErrorKind::from_sqlstate`] reads it back to the same SQLSTATE) keep their message,
//! detail and hint: they are written for the user. Anything else (Postgres' own errors, even
//! with a SQLSTATE of the table, a lost connection, a bug) is logged with `tracing` under an
//! error id, and the response carries the code with a generic message and that id: never a
//! database internal, a SQL text or a stack trace. Postgres' own class 42 and 28 errors are
//! INTERNAL here: the sidecar runs only its own fixed SQL, so they mean a broken deployment.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use docstore_core::{Code, ErrorKind};
use serde::Serialize;

use crate::pg::PgError;

/// The HTTP status of each canonical code: the one table.
pub fn status_of(code: Code) -> StatusCode {
    match code {
        Code::InvalidArgument | Code::FailedPrecondition => StatusCode::BAD_REQUEST,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::ResourceExhausted => StatusCode::PAYLOAD_TOO_LARGE,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
    }
}

/// An error answered to an HTTP client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    #[serde(serialize_with = "code_name")]
    pub code: Code,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
    /// A status other than the table's for this code: 429 for a cap on connections, streams
    /// or targets and 408 for a late request body (both still RESOURCE_EXHAUSTED /
    /// DEADLINE_EXCEEDED), see docs/http.md.
    #[serde(skip)]
    pub status: Option<StatusCode>,
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

impl ApiError {
    /// An error with a message written for the user.
    pub fn new(code: Code, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            detail: None,
            hint: None,
            status: None,
        }
    }

    /// A refusal by a cap (connections, streams, targets): 429 RESOURCE_EXHAUSTED.
    pub fn too_many(message: impl Into<String>) -> ApiError {
        ApiError::new(Code::ResourceExhausted, message).with_status(StatusCode::TOO_MANY_REQUESTS)
    }

    /// The same error answered with `status` instead of the table's.
    pub fn with_status(mut self, status: StatusCode) -> ApiError {
        self.status = Some(status);
        self
    }

    /// The same error with a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> ApiError {
        self.hint = Some(hint.into());
        self
    }

    pub fn invalid_argument(message: impl Into<String>) -> ApiError {
        ApiError::new(Code::InvalidArgument, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(Code::NotFound, message)
    }

    pub fn unauthenticated(message: impl Into<String>) -> ApiError {
        ApiError::new(Code::Unauthenticated, message)
    }

    /// A failure that is not the caller's: logged in full under a new error id; the response
    /// says only `what` failed (a fixed phrase, never the error's text) and the id.
    pub fn internal(code: Code, what: &str, error: &dyn std::fmt::Display) -> ApiError {
        let id = next_error_id();
        tracing::error!(error_id = %id, code = %code, %error, "{what}");
        ApiError::new(
            code,
            format!("{what} (error id {id}; the sidecar's log has the cause)"),
        )
    }

    /// The status of [`ApiError::code`] (or the one the error names).
    pub fn status(&self) -> StatusCode {
        self.status.unwrap_or_else(|| status_of(self.code))
    }

    /// This error as the JSON body of a response (also an item of a streamed array).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            format!(
                "{{\"code\":\"{}\",\"message\":\"error\"}}",
                self.code.as_str()
            )
        })
    }
}

impl From<PgError> for ApiError {
    fn from(error: PgError) -> ApiError {
        match error {
            PgError::Db(e) => from_postgres(&e),
            PgError::Pool(e) => {
                ApiError::internal(Code::Unavailable, "no database connection is available", &e)
            }
            PgError::Connect(e) => {
                ApiError::internal(Code::Unavailable, "no database connection is available", &e)
            }
            PgError::NoSuchDatabase(id) => ApiError::not_found(format!(
                "database \"{id}\" does not exist"
            ))
            .with_hint("create it with select docstore.create_database('<id>'), or use (default)"),
            PgError::Decode(e) => {
                ApiError::internal(Code::Internal, "a database answer could not be read", &e)
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

/// A Postgres error as the API reports it (see the module documentation).
pub fn from_postgres(error: &tokio_postgres::Error) -> ApiError {
    let Some(db) = error.as_db_error() else {
        let code = if error.is_closed() {
            Code::Unavailable
        } else {
            Code::Internal
        };
        return ApiError::internal(code, "the database connection failed", error);
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
        return ApiError {
            code: kind.code(),
            message: db.message().to_owned(),
            detail: db.detail().map(str::to_owned),
            hint: db.hint().map(str::to_owned),
            status: None,
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
    let mut out = ApiError::internal(code, what, &format!("SQLSTATE {state}: {error}"));
    out.detail = Some(format!("SQLSTATE {state}"));
    out
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = self.to_json();
        let mut response = (status, body).into_response();
        response.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_the_status_of_the_table() {
        let expected = [
            (Code::InvalidArgument, 400),
            (Code::FailedPrecondition, 400),
            (Code::NotFound, 404),
            (Code::AlreadyExists, 409),
            (Code::Aborted, 409),
            (Code::PermissionDenied, 403),
            (Code::Unauthenticated, 401),
            (Code::ResourceExhausted, 413),
            (Code::Unimplemented, 501),
            (Code::Unavailable, 503),
            (Code::Internal, 500),
            (Code::DeadlineExceeded, 504),
        ];
        assert_eq!(expected.len(), Code::ALL.len());
        for (code, status) in expected {
            assert_eq!(status_of(code).as_u16(), status, "{code}");
        }
    }

    #[test]
    fn json_form() {
        let e = ApiError::invalid_argument("bad \"x\"").with_hint("try y");
        let json: serde_json::Value = serde_json::from_str(&e.to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"code": "INVALID_ARGUMENT", "message": "bad \"x\"", "detail": null, "hint": "try y"})
        );
    }

    #[test]
    fn internal_errors_do_not_echo_the_cause() {
        let e = ApiError::internal(Code::Internal, "it failed", &"select secret from t");
        assert!(!e.message.contains("secret"));
        assert!(e.message.contains("error id"));
        assert_eq!(e.status().as_u16(), 500);
    }
}
