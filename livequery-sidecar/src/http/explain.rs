//! `POST /v1/databases/{db}:explain`: `{"sql": "..."}` or `{"structuredQuery": {...}}`
//! (exactly one, as `:runQuery` takes them) and `"run": true|false` (optional, false) ->
//! `docstore.explain`'s JSON: the plan, and with `run` what running the query read
//! (docs/query.md, section 7). Admin key only: a run's counters describe index contents that
//! a client's rules may hide.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value as Json;

use super::body::parse_json;
use super::documents::json_response;
use super::error::ApiError;
use super::resource::Target;
use super::{JsonPost, SharedState};
use crate::service::query::{self, Query};

/// The body of `:explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explain {
    /// `true`: the text dialect; `false`: the structured form (JSON text).
    pub sql: bool,
    pub query: String,
    pub run: bool,
}

impl Explain {
    /// Parse the body.
    ///
    /// # Errors
    /// 400 INVALID_ARGUMENT unless it is an object holding exactly one of `sql` (a string) and
    /// `structuredQuery` (an object), and `run` (a boolean) at most besides.
    pub fn parse(bytes: &[u8]) -> Result<Explain, ApiError> {
        const ALLOWED: [&str; 3] = ["sql", "structuredQuery", "run"];
        let json = parse_json(bytes)?;
        let obj = json
            .as_object()
            .ok_or_else(|| ApiError::invalid_argument("an explain body must be a JSON object"))?;
        if let Some(key) = obj.keys().find(|k| !ALLOWED.contains(&k.as_str())) {
            return Err(ApiError::invalid_argument(format!(
                "unexpected key \"{key}\" in an explain body (allowed: {})",
                ALLOWED.join(", ")
            )));
        }
        let run = match obj.get("run") {
            None => false,
            Some(Json::Bool(run)) => *run,
            Some(_) => return Err(ApiError::invalid_argument("\"run\" must be true or false")),
        };
        let (sql, query) = match (obj.get("sql"), obj.get("structuredQuery")) {
            (Some(Json::String(text)), None) => (true, text.clone()),
            (None, Some(q @ Json::Object(_))) => (false, q.to_string()),
            (Some(_), None) => return Err(ApiError::invalid_argument("\"sql\" must be a string")),
            (None, Some(_)) => {
                return Err(ApiError::invalid_argument(
                    "\"structuredQuery\" must be a JSON object",
                ))
            }
            _ => {
                return Err(ApiError::invalid_argument(
                    "an explain body holds exactly one of \"sql\" and \"structuredQuery\"",
                ))
            }
        };
        Ok(Explain { sql, query, run })
    }
}

/// Handle `:explain`.
///
/// # Cancel safety
/// Dropped mid-way, the request's transaction is cancelled and its connection discarded.
pub async fn explain(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let database = target.database().to_owned();
    let post = JsonPost::read(&state, "explain", request).await?;
    let caller = post.caller();
    // A caller other than the admin is refused whatever its body says.
    query::may_explain(&caller)?;
    let explain = Explain::parse(&post.body)?;
    let q = if explain.sql {
        Query::Text(explain.query)
    } else {
        Query::Structured(explain.query)
    };
    let out = query::explain(&state.service, &caller, &database, &q, explain.run).await?;
    Ok(json_response(StatusCode::OK, out.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies() {
        let e = Explain::parse(br#"{"sql": "select * from /a", "run": true}"#).unwrap();
        assert_eq!(
            (e.sql, e.query.as_str(), e.run),
            (true, "select * from /a", true)
        );
        let e = Explain::parse(br#"{"structuredQuery": {"limit": 1}}"#).unwrap();
        assert_eq!(
            (e.sql, e.query.as_str(), e.run),
            (false, r#"{"limit":1}"#, false)
        );
        for bad in [
            "[]",
            "{}",
            r#"{"sql": "x", "structuredQuery": {}}"#,
            r#"{"sql": 1}"#,
            r#"{"structuredQuery": "x"}"#,
            r#"{"sql": "x", "run": "yes"}"#,
            r#"{"sql": "x", "other": 1}"#,
        ] {
            let e = Explain::parse(bad.as_bytes()).unwrap_err();
            assert_eq!(e.code(), docstore_core::Code::InvalidArgument, "{bad}");
        }
    }
}
