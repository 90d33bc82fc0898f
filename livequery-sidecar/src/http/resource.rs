//! What a request's URL names: the database, and a document, a collection or an operation
//! (`:runQuery`, `:commit`); and its query-string parameters. Parsed from the raw path, so a
//! percent-encoded slash (`%2F`) is told apart from a separator. Pure functions over text,
//! fuzzed by the robustness tests.

use docstore_core::path::is_valid_database_id;
use docstore_core::{ResourcePath, Timestamp};

use super::error::ApiError;
use crate::service::documents::Precondition;

/// The prefix of every API route.
pub const API_PREFIX: &str = "/v1/databases/";

/// A resource of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `/v1/databases/{db}/documents/{path}`: a document or collection path.
    Path {
        database: String,
        path: ResourcePath,
    },
    /// `/v1/databases/{db}:runQuery`.
    RunQuery { database: String },
    /// `/v1/databases/{db}:commit`.
    Commit { database: String },
    /// `/v1/databases/{db}:batchGet`.
    BatchGet { database: String },
    /// `/v1/databases/{db}:listCollectionIds`.
    ListCollectionIds { database: String },
    /// `/v1/databases/{db}:explain`.
    Explain { database: String },
    /// `/v1/databases/{db}:beginTransaction`.
    BeginTransaction { database: String },
    /// `/v1/databases/{db}:rollback`.
    Rollback { database: String },
    /// `/v1/databases/{db}:listen`, and below it (`rest`, undecoded) a stream's targets:
    /// `{stream}/targets` and `{stream}/targets/{id}`.
    Listen {
        database: String,
        rest: Option<String>,
    },
}

impl Target {
    /// The database id the request addresses.
    pub fn database(&self) -> &str {
        match self {
            Target::Path { database, .. }
            | Target::RunQuery { database }
            | Target::Commit { database }
            | Target::BatchGet { database }
            | Target::ListCollectionIds { database }
            | Target::Explain { database }
            | Target::BeginTransaction { database }
            | Target::Rollback { database }
            | Target::Listen { database, .. } => database,
        }
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decode `text` (`plus_is_space`: a `+` is a space, as in query strings).
///
/// # Errors
/// A `%` not followed by two hex digits, or bytes that are not UTF-8.
pub fn percent_decode(text: &str, plus_is_space: bool) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let value = bytes
                    .get(i + 1)
                    .and_then(|h| hex(*h))
                    .zip(bytes.get(i + 2).and_then(|l| hex(*l)))
                    .map(|(h, l)| h * 16 + l)
                    .ok_or_else(|| format!("\"{text}\" has a % not followed by two hex digits"))?;
                out.push(value);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("\"{text}\" does not decode to UTF-8"))
}

/// Parse the path of a request (without its query string).
///
/// # Errors
/// 404 NOT_FOUND for a path that is no route of the API; 400 INVALID_ARGUMENT for an invalid
/// database id or resource path: empty segments, `.` or `..`, a percent-encoded `/`, or any
/// path docstore-core refuses.
pub fn parse_target(raw_path: &str) -> Result<Target, ApiError> {
    let no_route = || ApiError::not_found(format!("no API route {raw_path}"));
    let rest = raw_path.strip_prefix(API_PREFIX).ok_or_else(no_route)?;
    let (head, tail) = match rest.split_once('/') {
        Some((head, tail)) => (head, Some(tail)),
        None => (rest, None),
    };
    let (raw_db, operation) = match head.split_once(':') {
        Some((db, op)) => (db, Some(op)),
        None => (head, None),
    };
    let database = percent_decode(raw_db, false).map_err(ApiError::invalid_argument)?;
    if !is_valid_database_id(&database) {
        return Err(ApiError::invalid_argument(format!(
            "\"{database}\" is not a valid database id: use (default) or 4-63 lowercase letters, digits and hyphens, starting with a letter"
        )));
    }
    match (operation, tail) {
        (Some("runQuery"), None) => Ok(Target::RunQuery { database }),
        (Some("commit"), None) => Ok(Target::Commit { database }),
        (Some("batchGet"), None) => Ok(Target::BatchGet { database }),
        (Some("listCollectionIds"), None) => Ok(Target::ListCollectionIds { database }),
        (Some("explain"), None) => Ok(Target::Explain { database }),
        (Some("beginTransaction"), None) => Ok(Target::BeginTransaction { database }),
        (Some("rollback"), None) => Ok(Target::Rollback { database }),
        (Some("listen"), rest) => Ok(Target::Listen {
            database,
            rest: rest.map(str::to_owned),
        }),
        (None, Some(tail)) => {
            let Some(path) = tail.strip_prefix("documents") else {
                return Err(no_route());
            };
            let path = match path.strip_prefix('/') {
                Some(path) if !path.is_empty() => path,
                _ if path.is_empty() || path == "/" => {
                    return Err(ApiError::invalid_argument(
                        "the URL names no document or collection after /documents/",
                    ))
                }
                _ => return Err(no_route()),
            };
            Ok(Target::Path {
                database,
                path: parse_resource_path(path)?,
            })
        }
        _ => Err(no_route()),
    }
}

/// A document or collection path from the URL: segments split on `/`, each percent-decoded
/// and validated by docstore-core.
///
/// # Errors
/// 400 INVALID_ARGUMENT naming the problem.
pub fn parse_resource_path(raw: &str) -> Result<ResourcePath, ApiError> {
    let mut segments = Vec::new();
    for raw_segment in raw.split('/') {
        if raw_segment.is_empty() {
            return Err(ApiError::invalid_argument(format!(
                "path \"{raw}\" has an empty segment"
            )));
        }
        let segment = percent_decode(raw_segment, false).map_err(ApiError::invalid_argument)?;
        if segment.contains('/') {
            return Err(ApiError::invalid_argument(format!(
                "segment \"{raw_segment}\" of path \"{raw}\" holds a percent-encoded '/': IDs cannot contain '/'"
            )));
        }
        segments.push(segment);
    }
    ResourcePath::from_segments(segments).map_err(|e| ApiError::invalid_argument(e.to_string()))
}

/// The query-string parameters the document routes take.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    /// `merge=true|false` (PUT).
    pub merge: bool,
    /// `updateMask=<field path>`, repeatable (PUT).
    pub update_mask: Vec<String>,
    /// `exists=true|false` or `updateTime=<RFC 3339>` (PUT, PATCH, DELETE).
    pub precondition: Option<Precondition>,
    /// `pageSize=<n>` (GET of a collection).
    pub page_size: Option<u32>,
    /// `transaction=<id>` (GET of a document): read in that held transaction.
    pub transaction: Option<String>,
    /// `readTime=<RFC 3339>` (GET of a document): the document as it was then.
    pub read_time: Option<Timestamp>,
}

fn parse_bool(name: &str, value: &str) -> Result<bool, ApiError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ApiError::invalid_argument(format!(
            "{name} must be true or false, not \"{value}\""
        ))),
    }
}

/// Parse a query string (without `?`). Unknown parameters are refused, so a misspelled
/// precondition never goes unnoticed.
///
/// # Errors
/// 400 INVALID_ARGUMENT naming the parameter.
pub fn parse_params(query: Option<&str>) -> Result<Params, ApiError> {
    let mut params = Params::default();
    let Some(query) = query else {
        return Ok(params);
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (raw_name, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = percent_decode(raw_name, true).map_err(ApiError::invalid_argument)?;
        let value = percent_decode(raw_value, true).map_err(ApiError::invalid_argument)?;
        let precondition =
            match name.as_str() {
                "merge" => {
                    params.merge = parse_bool("merge", &value)?;
                    None
                }
                "updateMask" | "updateMask.fieldPaths" => {
                    if value.is_empty() {
                        return Err(ApiError::invalid_argument("updateMask needs a field path"));
                    }
                    params.update_mask.push(value);
                    None
                }
                "exists" | "currentDocument.exists" => {
                    Some(Precondition::Exists(parse_bool("exists", &value)?))
                }
                "updateTime" | "currentDocument.updateTime" => {
                    if value.is_empty() {
                        return Err(ApiError::invalid_argument(
                            "updateTime needs an RFC 3339 time",
                        ));
                    }
                    // Checked here (core's parser, as docstore.commit's) so the message names
                    // the parameter, not a write of the batch the request becomes.
                    if Timestamp::parse_rfc3339(&value).is_none() {
                        return Err(ApiError::invalid_argument(format!(
                            "updateTime must be an RFC 3339 time with at most microseconds \
                             (e.g. 2026-01-02T03:04:05.123456Z), not \"{value}\""
                        )));
                    }
                    Some(Precondition::UpdateTime(value))
                }
                "transaction" => {
                    if value.is_empty() {
                        return Err(ApiError::invalid_argument(
                            "transaction needs a transaction id",
                        ));
                    }
                    params.transaction = Some(value);
                    None
                }
                "readTime" => {
                    params.read_time = Some(super::body::read_time("readTime", &value)?);
                    None
                }
                "pageSize" => {
                    params.page_size = Some(value.parse().map_err(|_| {
                        ApiError::invalid_argument(format!(
                            "pageSize must be a non-negative integer, not \"{value}\""
                        ))
                    })?);
                    None
                }
                _ => return Err(ApiError::invalid_argument(format!(
                    "unknown query parameter \"{name}\""
                ))
                .with_hint(
                    "the document routes take merge, updateMask, exists, updateTime, pageSize, transaction and readTime",
                )),
            };
        if let Some(p) = precondition {
            if params.precondition.replace(p).is_some() {
                return Err(ApiError::invalid_argument(
                    "give at most one precondition: exists or updateTime",
                ));
            }
        }
    }
    if params.merge && !params.update_mask.is_empty() {
        return Err(ApiError::invalid_argument(
            "give merge=true or an updateMask, not both",
        ));
    }
    Ok(params)
}

/// The metrics label of a request path: a fixed set, whatever the URL holds.
pub fn route_label(raw_path: &str) -> &'static str {
    match raw_path {
        "/healthz" => "healthz",
        "/metrics" => "metrics",
        _ => match raw_path.strip_prefix(API_PREFIX) {
            Some(rest) if rest.contains("/documents/") => "documents",
            Some(rest) if rest.ends_with(":runQuery") => "runQuery",
            Some(rest) if rest.ends_with(":commit") => "commit",
            Some(rest) if rest.ends_with(":batchGet") => "batchGet",
            Some(rest) if rest.ends_with(":listCollectionIds") => "listCollectionIds",
            Some(rest) if rest.ends_with(":explain") => "explain",
            Some(rest) if rest.ends_with(":beginTransaction") => "beginTransaction",
            Some(rest) if rest.ends_with(":rollback") => "rollback",
            Some(rest) if rest.contains(":listen") => "listen",
            _ => "other",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use docstore_core::Code;

    fn code(path: &str) -> Code {
        parse_target(path).unwrap_err().code()
    }

    #[test]
    fn targets() {
        assert_eq!(
            parse_target("/v1/databases/(default)/documents/rooms/a").unwrap(),
            Target::Path {
                database: "(default)".into(),
                path: ResourcePath::parse("rooms/a").unwrap()
            }
        );
        assert_eq!(
            parse_target("/v1/databases/my-db1:runQuery").unwrap(),
            Target::RunQuery {
                database: "my-db1".into()
            }
        );
        assert_eq!(
            parse_target("/v1/databases/%28default%29:commit").unwrap(),
            Target::Commit {
                database: "(default)".into()
            }
        );
        assert_eq!(
            parse_target("/v1/databases/abcd:batchGet").unwrap(),
            Target::BatchGet {
                database: "abcd".into()
            }
        );
        assert_eq!(
            parse_target("/v1/databases/abcd:listCollectionIds").unwrap(),
            Target::ListCollectionIds {
                database: "abcd".into()
            }
        );
        assert_eq!(
            parse_target("/v1/databases/abcd:explain").unwrap(),
            Target::Explain {
                database: "abcd".into()
            }
        );
        assert!(parse_target("/v1/databases/abcd:batchGet/x").is_err());
        let Target::Path { path, .. } =
            parse_target("/v1/databases/(default)/documents/r%C3%A9/a%20b").unwrap()
        else {
            panic!()
        };
        assert_eq!(path.segments(), ["ré", "a b"]);
    }

    #[test]
    fn bad_paths() {
        for bad in [
            "/v1/databases/(default)/documents/rooms//a",
            "/v1/databases/(default)/documents/rooms/../a",
            "/v1/databases/(default)/documents/rooms/./a",
            "/v1/databases/(default)/documents/rooms/a%2Fb",
            "/v1/databases/(default)/documents/rooms/a%2fb",
            "/v1/databases/(default)/documents/rooms/%2E%2E",
            "/v1/databases/(default)/documents/rooms/a%zz",
            "/v1/databases/(default)/documents/rooms/a%",
            "/v1/databases/(default)/documents/rooms/a%FF",
            "/v1/databases/(default)/documents/",
            "/v1/databases/(default)/documents",
            "/v1/databases/(default)/documents/rooms/",
            "/v1/databases/(default)/documents/__x__/a",
            "/v1/databases/Bad/documents/rooms/a",
            "/v1/databases/abc/documents/rooms/a",
            "/v1/databases/abcd-/documents/rooms/a",
            "/v1/databases/:runQuery",
        ] {
            assert_eq!(code(bad), Code::InvalidArgument, "{bad}");
        }
        for missing in [
            "/v1/databases/(default)",
            "/v1/databases/(default)/docs/a/b",
            "/v1/databases/(default):listen2",
            "/v1/databases/(default):runQuery/x",
            "/v1/databases/(default)/documentsx/a/b",
            "/v2/x",
        ] {
            assert_eq!(code(missing), Code::NotFound, "{missing}");
        }
    }

    #[test]
    fn params() {
        let p = parse_params(Some("updateMask=a&updateMask=b.c&exists=true")).unwrap();
        assert_eq!(p.update_mask, ["a", "b.c"]);
        assert_eq!(p.precondition, Some(Precondition::Exists(true)));
        let p = parse_params(Some("updateTime=2026-01-01T00%3A00%3A00.000001Z")).unwrap();
        assert_eq!(
            p.precondition,
            Some(Precondition::UpdateTime(
                "2026-01-01T00:00:00.000001Z".into()
            ))
        );
        assert!(parse_params(Some("merge=yes")).is_err());
        assert!(parse_params(Some("exists=true&updateTime=x")).is_err());
        assert!(parse_params(Some("merge=true&updateMask=a")).is_err());
        assert!(parse_params(Some("mrege=true")).is_err());
        assert!(parse_params(Some("pageSize=-1")).is_err());
        assert_eq!(parse_params(None).unwrap(), Params::default());
        assert_eq!(
            parse_params(Some("updateMask=%60a+b%60"))
                .unwrap()
                .update_mask,
            ["`a b`"]
        );
    }

    #[test]
    fn route_labels() {
        assert_eq!(
            route_label("/v1/databases/(default)/documents/a/b"),
            "documents"
        );
        assert_eq!(route_label("/v1/databases/(default):runQuery"), "runQuery");
        assert_eq!(route_label("/v1/databases/(default):commit"), "commit");
        assert_eq!(route_label("/v1/databases/(default):batchGet"), "batchGet");
        assert_eq!(route_label("/v1/databases/(default):explain"), "explain");
        assert_eq!(
            route_label("/v1/databases/(default):listCollectionIds"),
            "listCollectionIds"
        );
        assert_eq!(route_label("/healthz"), "healthz");
        assert_eq!(route_label("/anything"), "other");
    }
}
