//! The errors of the HTTP API: an operation's [`ServiceError`] (canonical code, message,
//! detail, hint; see `service/error.rs`) answered as JSON `{"code", "message", "detail",
//! "hint"}` with the HTTP status of its code: the one table code -> HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use docstore_core::Code;

use crate::pg::PgError;
use crate::service::error::ServiceError;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub error: ServiceError,
    /// A status other than the table's for this code: 429 for a cap on connections, streams
    /// or targets and 408 for a late request body (both still RESOURCE_EXHAUSTED /
    /// DEADLINE_EXCEEDED), see docs/http.md.
    pub status: Option<StatusCode>,
}

impl ApiError {
    /// An error with a message written for the user.
    pub fn new(code: Code, message: impl Into<String>) -> ApiError {
        ServiceError::new(code, message).into()
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
        self.error.hint = Some(hint.into());
        self
    }

    pub fn invalid_argument(message: impl Into<String>) -> ApiError {
        ServiceError::invalid_argument(message).into()
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ServiceError::not_found(message).into()
    }

    pub fn unauthenticated(message: impl Into<String>) -> ApiError {
        ServiceError::unauthenticated(message).into()
    }

    /// As [`ServiceError::internal`].
    pub fn internal(code: Code, what: &str, error: &dyn std::fmt::Display) -> ApiError {
        ServiceError::internal(code, what, error).into()
    }

    /// The canonical code.
    pub fn code(&self) -> Code {
        self.error.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.error.message
    }

    /// The status of the error's code (or the one the error names).
    pub fn status(&self) -> StatusCode {
        self.status.unwrap_or_else(|| status_of(self.error.code))
    }

    /// This error as the JSON body of a response (also an item of a streamed array).
    pub fn to_json(&self) -> String {
        json_of(&self.error)
    }
}

/// `error` as the JSON body of a response: `{"code", "message", "detail", "hint"}`.
pub fn json_of(error: &ServiceError) -> String {
    serde_json::to_string(error).unwrap_or_else(|_| {
        format!(
            "{{\"code\":\"{}\",\"message\":\"error\"}}",
            error.code.as_str()
        )
    })
}

impl From<ServiceError> for ApiError {
    /// The error with the status of its code, or 429 for a refusal by a cap (counted in
    /// `docstore_http_limited_total`).
    fn from(error: ServiceError) -> ApiError {
        let status = error.limit.map(|limit| {
            super::server::count_limited(limit);
            StatusCode::TOO_MANY_REQUESTS
        });
        ApiError { error, status }
    }
}

impl From<PgError> for ApiError {
    fn from(error: PgError) -> ApiError {
        ServiceError::from(error).into()
    }
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
        assert!(!e.message().contains("secret"));
        assert!(e.message().contains("error id"));
        assert_eq!(e.status().as_u16(), 500);
    }
}
