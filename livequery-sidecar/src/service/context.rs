//! What Postgres learns about a request: `docstore.auth` (the caller's claims) and
//! `docstore.request` (JSON `{"method", "httpMethod", "path", "time", "query"}`), read by the
//! security rules (docs/rules.md).

use docstore_core::Timestamp;
use serde_json::{json, Value as Json};

use super::caller::{Caller, Principal};
use crate::pg::RunAs;

/// The rules method of a request: `get`, `list`, `create`, `update`, `delete`, or `write`
/// where only the extension can tell a create from an update (PUT, `:commit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RulesMethod {
    Get,
    List,
    Create,
    Update,
    Delete,
    Write,
}

impl RulesMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            RulesMethod::Get => "get",
            RulesMethod::List => "list",
            RulesMethod::Create => "create",
            RulesMethod::Update => "update",
            RulesMethod::Delete => "delete",
            RulesMethod::Write => "write",
        }
    }
}

/// The current time (`None`: the system clock is outside Firestore's range).
pub fn now_timestamp() -> Option<Timestamp> {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Timestamp::from_micros(micros)
}

/// The current time in core's RFC 3339 form.
pub fn now_rfc3339() -> String {
    now_timestamp()
        .map(Timestamp::to_rfc3339)
        .unwrap_or_default()
}

impl Caller {
    /// How this caller's operation runs in Postgres: [`run_as`] with the caller's principal
    /// and method.
    pub fn run_as(
        &self,
        method: RulesMethod,
        database: &str,
        resource: &str,
        query: Option<Json>,
    ) -> RunAs {
        run_as(
            &self.principal,
            method,
            &self.method,
            database,
            resource,
            query,
        )
    }
}

/// How a request runs in Postgres.
///
/// `resource` is the path below `/documents/` (empty for `:commit`), `query` the query's
/// `{"limit", "offset", "orderBy"}` where known.
pub fn run_as(
    principal: &Principal,
    method: RulesMethod,
    http_method: &str,
    database: &str,
    resource: &str,
    query: Option<Json>,
) -> RunAs {
    match principal {
        Principal::Admin => RunAs::Admin,
        Principal::Anonymous | Principal::User(_) => {
            let mut path = format!("/databases/{database}/documents");
            if !resource.is_empty() {
                path.push('/');
                path.push_str(resource);
            }
            let request = json!({
                "method": method.as_str(),
                "httpMethod": http_method,
                "path": path,
                "time": now_rfc3339(),
                "query": query.unwrap_or(Json::Null),
            });
            RunAs::Client {
                auth: principal.auth_json(),
                request: request.to_string(),
            }
        }
    }
}

/// `{"limit", "offset", "orderBy"}` of a structured query's JSON, as given.
pub fn structured_query_info(query: &Json) -> Json {
    let get = |key: &str| query.get(key).cloned().unwrap_or(Json::Null);
    json!({"limit": get("limit"), "offset": get("offset"), "orderBy": get("orderBy")})
}

/// `{"limit", "offset", "orderBy"}` of a query in the text dialect, read with core's parser;
/// `null` when it does not parse (the extension then reports the syntax error).
pub fn text_query_info(text: &str) -> Json {
    let Ok(query) = docstore_core::query::parse_query(text) else {
        return Json::Null;
    };
    let limit = match query.limit {
        Some(docstore_core::query::Limit::First(n) | docstore_core::query::Limit::Last(n)) => {
            json!(n)
        }
        None => Json::Null,
    };
    let order: Vec<Json> = query
        .order_by
        .iter()
        .map(|o| {
            json!({
                "field": o.field.to_string(),
                "direction": match o.direction {
                    docstore_core::query::Direction::Ascending => "ASCENDING",
                    docstore_core::query::Direction::Descending => "DESCENDING",
                },
            })
        })
        .collect();
    json!({"limit": limit, "offset": query.offset, "orderBy": order})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_settings() {
        let claims = json!({"sub": "u1"});
        let RunAs::Client { auth, request } = run_as(
            &Principal::User(claims.clone()),
            RulesMethod::Get,
            "GET",
            "(default)",
            "rooms/a",
            None,
        ) else {
            panic!()
        };
        assert_eq!(serde_json::from_str::<Json>(&auth).unwrap(), claims);
        let request: Json = serde_json::from_str(&request).unwrap();
        assert_eq!(request["path"], "/databases/(default)/documents/rooms/a");
        assert_eq!(request["method"], "get");
        assert!(request["time"].as_str().unwrap().ends_with('Z'));
        let RunAs::Client { auth, .. } = run_as(
            &Principal::Anonymous,
            RulesMethod::List,
            "POST",
            "(default)",
            "",
            None,
        ) else {
            panic!()
        };
        assert_eq!(auth, "null");
        assert_eq!(
            run_as(
                &Principal::Admin,
                RulesMethod::Get,
                "GET",
                "(default)",
                "a/b",
                None
            ),
            RunAs::Admin
        );
    }

    #[test]
    fn query_infos() {
        let info = text_query_info("select * from /r order by a desc limit 3 offset 1");
        assert_eq!(
            info,
            json!({"limit": 3, "offset": 1, "orderBy": [{"field": "a", "direction": "DESCENDING"}]})
        );
        assert_eq!(text_query_info("not a query"), Json::Null);
    }
}
