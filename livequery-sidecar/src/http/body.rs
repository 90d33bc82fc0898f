//! Request bodies: the content type, the size limit, JSON syntax and the shapes of the
//! `:runQuery`, `:commit`, `:batchGet`, `:listCollectionIds` and `:beginTransaction` bodies,
//! and how a read reads ([`Reads`]: now, in a held transaction or at a `readTime`). Pure functions over bytes
//! and JSON (but [`read`]), fuzzed by the robustness tests.

use axum::body::Body;
use axum::http::{header, HeaderMap};
use docstore_core::{Code, ResourcePath, Timestamp};
use futures_util::StreamExt;
use serde_json::{Map, Value as Json};

use super::error::ApiError;
use crate::service::documents;

/// Refuse a body that is not `application/json` (parameters such as `charset=utf-8` are
/// allowed).
///
/// # Errors
/// 400 INVALID_ARGUMENT.
pub fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let value = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = value.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(ApiError::invalid_argument(format!(
            "the request body must be JSON: send Content-Type: application/json (got \"{value}\")"
        )))
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        Code::ResourceExhausted,
        format!("the request body is larger than {limit} bytes"),
    )
    .with_hint("the limit is the sidecar's --max-body-bytes; split large batches")
}

/// Read the whole body, at most `limit` bytes.
///
/// A body over the limit is read on (and thrown away) up to twice the limit before the
/// answer, so a client still sending it reads the 413 instead of a reset connection; a
/// client that sent `Expect: 100-continue` with a `Content-Length` over the limit gets the
/// 413 before sending anything.
///
/// # Errors
/// 413 RESOURCE_EXHAUSTED over the limit; 408 DEADLINE_EXCEEDED when the body does not
/// arrive within the server's body timeout; 400 INVALID_ARGUMENT when the client's body
/// stream fails otherwise.
///
/// # Cancel safety
/// Reading only; dropping the future drops the partial body.
pub async fn read(headers: &HeaderMap, body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let expects_continue = headers
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if expects_continue && declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit));
    }
    let capacity = declared.map_or(0, |n| usize::try_from(n).unwrap_or(limit).min(limit));
    let mut out = Vec::with_capacity(capacity);
    let mut seen: usize = 0;
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            let e = e.into_inner();
            match e.downcast_ref::<super::server::BodyTimeout>() {
                Some(late) => late.to_api_error(),
                None => {
                    ApiError::invalid_argument(format!("the request body could not be read: {e}"))
                }
            }
        })?;
        seen = seen.saturating_add(chunk.len());
        if seen > limit.saturating_mul(2) {
            break;
        }
        if seen <= limit {
            out.extend_from_slice(&chunk);
        }
    }
    if seen > limit {
        return Err(too_large(limit));
    }
    Ok(out)
}

/// Parse JSON text.
///
/// # Errors
/// 400 INVALID_ARGUMENT with the line and column of the syntax error.
pub fn parse_json(bytes: &[u8]) -> Result<Json, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::invalid_argument(format!("the request body is not valid JSON: {e}")))
}

/// Parse a body that must be a JSON object (document data, update fields) and return its
/// text, validated.
///
/// # Errors
/// 400 INVALID_ARGUMENT.
pub fn json_object_text(bytes: &[u8], what: &str) -> Result<String, ApiError> {
    let json = parse_json(bytes)?;
    if !json.is_object() {
        return Err(ApiError::invalid_argument(format!(
            "{what} must be a JSON object"
        )));
    }
    String::from_utf8(bytes.to_vec())
        .map_err(|_| ApiError::invalid_argument("the request body is not UTF-8"))
}

fn object<'a>(
    json: &'a Json,
    what: &str,
    allowed: &[&str],
) -> Result<&'a Map<String, Json>, ApiError> {
    let obj = json
        .as_object()
        .ok_or_else(|| ApiError::invalid_argument(format!("{what} must be a JSON object")))?;
    if let Some(key) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::invalid_argument(format!(
            "unexpected key \"{key}\" in {what} (allowed: {})",
            allowed.join(", ")
        )));
    }
    Ok(obj)
}

/// The body of `:runQuery`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunQuery {
    /// `{"sql": "<query text>"}`.
    Sql(String),
    /// `{"structuredQuery": {...}}`, as JSON text.
    Structured(String),
}

impl RunQuery {
    /// Parse the body.
    ///
    /// # Errors
    /// 400 INVALID_ARGUMENT unless it holds exactly one of `sql` (a string) and
    /// `structuredQuery` (an object).
    pub fn parse(bytes: &[u8]) -> Result<RunQuery, ApiError> {
        let json = parse_json(bytes)?;
        let obj = object(&json, "a runQuery body", &["sql", "structuredQuery"])?;
        RunQuery::of(obj)
    }

    /// Parse a body that may name a held transaction (`"transaction": id`) or a read time
    /// (`"readTime"`, for a `structuredQuery` only).
    ///
    /// # Errors
    /// As [`RunQuery::parse`] and [`Reads::of`]; a `readTime` with `sql` (the text dialect
    /// reads the current documents only).
    pub fn parse_with_reads(bytes: &[u8]) -> Result<(RunQuery, Reads), ApiError> {
        let json = parse_json(bytes)?;
        let obj = object(
            &json,
            "a runQuery body",
            &["sql", "structuredQuery", "transaction", "readTime"],
        )?;
        let query = RunQuery::of(obj)?;
        let reads = Reads::of(obj)?;
        if matches!((&query, &reads), (RunQuery::Sql(_), Reads::At(_))) {
            return Err(ApiError::invalid_argument(
                "\"readTime\" needs a \"structuredQuery\": a \"sql\" query reads the current documents",
            ));
        }
        Ok((query, reads))
    }

    fn of(obj: &Map<String, Json>) -> Result<RunQuery, ApiError> {
        match (obj.get("sql"), obj.get("structuredQuery")) {
            (Some(Json::String(text)), None) => Ok(RunQuery::Sql(text.clone())),
            (None, Some(q @ Json::Object(_))) => Ok(RunQuery::Structured(q.to_string())),
            (Some(_), None) => Err(ApiError::invalid_argument("\"sql\" must be a string")),
            (None, Some(_)) => Err(ApiError::invalid_argument(
                "\"structuredQuery\" must be a JSON object",
            )),
            _ => Err(ApiError::invalid_argument(
                "a runQuery body holds exactly one of \"sql\" and \"structuredQuery\"",
            )),
        }
    }
}

/// How a read reads, as Firestore's `consistency_selector`: now, in a held transaction
/// (`"transaction": id`, or `?transaction=` on a GET), or the documents as they were at a read
/// time (`"readTime"`, or `?readTime=`: RFC 3339, served from the version history as gRPC's
/// `read_time`, docs/storage.md "Version history").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reads {
    Now,
    In(String),
    At(Timestamp),
}

impl Reads {
    /// The `"transaction"` and `"readTime"` members of a body (at most one of them).
    ///
    /// # Errors
    /// 400 INVALID_ARGUMENT for both, a `transaction` that is not a non-empty string or a
    /// `readTime` that is not an RFC 3339 string.
    pub fn of(obj: &Map<String, Json>) -> Result<Reads, ApiError> {
        let read_time = match obj.get("readTime") {
            None => None,
            Some(Json::String(text)) => Some(read_time("readTime", text)?),
            Some(_) => {
                return Err(ApiError::invalid_argument(
                    "\"readTime\" must be an RFC 3339 time (a string)",
                ))
            }
        };
        Reads::either(held_transaction(obj)?, read_time)
    }

    /// A held transaction or a read time, or neither.
    ///
    /// # Errors
    /// 400 INVALID_ARGUMENT for both.
    pub fn either(
        transaction: Option<String>,
        read_time: Option<Timestamp>,
    ) -> Result<Reads, ApiError> {
        match (transaction, read_time) {
            (None, None) => Ok(Reads::Now),
            (Some(id), None) => Ok(Reads::In(id)),
            (None, Some(t)) => Ok(Reads::At(t)),
            (Some(_), Some(_)) => Err(ApiError::invalid_argument(
                "give a transaction or a readTime, not both (a transaction reads at its own time)",
            )),
        }
    }
}

/// A read time's text (`name`, for the message): RFC 3339 with at most microseconds.
///
/// # Errors
/// 400 INVALID_ARGUMENT otherwise.
pub fn read_time(name: &str, text: &str) -> Result<Timestamp, ApiError> {
    Timestamp::parse_rfc3339(text).ok_or_else(|| {
        ApiError::invalid_argument(format!(
            "{name} must be an RFC 3339 time with at most microseconds \
             (e.g. 2026-01-02T03:04:05.123456Z), not \"{text}\""
        ))
    })
}

/// The `"transaction"` member of a body naming a held transaction: its id, or nothing.
///
/// # Errors
/// 400 INVALID_ARGUMENT for a value that is not a non-empty string.
fn held_transaction(obj: &Map<String, Json>) -> Result<Option<String>, ApiError> {
    match obj.get("transaction") {
        None => Ok(None),
        Some(Json::String(id)) if !id.is_empty() => Ok(Some(id.clone())),
        Some(_) => Err(ApiError::invalid_argument(
            "\"transaction\" must be a transaction id (from :beginTransaction)",
        )),
    }
}

/// The body of `:commit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The `writes` array as JSON text (`docstore.commit`'s argument).
    pub writes: String,
    /// An optimistic transaction: a failed precondition is 409 ABORTED (retry).
    pub transaction: bool,
    /// The held transaction the writes end (`"transaction": id`).
    pub held: Option<String>,
}

impl Commit {
    /// Parse the body.
    ///
    /// # Errors
    /// 400 INVALID_ARGUMENT unless it is `{"writes": [...], "transaction": bool}`
    /// (`transaction` optional). The writes themselves are checked by the extension.
    pub fn parse(bytes: &[u8]) -> Result<Commit, ApiError> {
        let json = parse_json(bytes)?;
        let obj = object(&json, "a commit body", &["writes", "transaction"])?;
        let writes = match obj.get("writes") {
            Some(w @ Json::Array(_)) => w.to_string(),
            Some(_) => return Err(ApiError::invalid_argument("\"writes\" must be an array")),
            None => return Err(ApiError::invalid_argument("a commit body needs \"writes\"")),
        };
        let (transaction, held) = match obj.get("transaction") {
            None => (false, None),
            Some(Json::Bool(b)) => (*b, None),
            Some(Json::String(_)) => (false, held_transaction(obj)?),
            Some(_) => return Err(ApiError::invalid_argument(
                "\"transaction\" must be true, false or a transaction id (from :beginTransaction)",
            )),
        };
        Ok(Commit {
            writes,
            transaction,
            held,
        })
    }
}

/// The body of `:beginTransaction`: `{}` or `{"options": {"readWrite": {}}}` (read-write),
/// `{"options": {"readOnly": {}}}` (read-only), `{"options": {"readOnly": {"readTime": t}}}`
/// (read-only at a read time), as Firestore's REST API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeginTransaction {
    pub read_only: bool,
    /// `readOnly.readTime`.
    pub read_time: Option<Timestamp>,
}

impl BeginTransaction {
    /// Parse the body.
    ///
    /// # Errors
    /// 400 INVALID_ARGUMENT for any other shape, or a `readTime` that is not RFC 3339.
    pub fn parse(bytes: &[u8]) -> Result<BeginTransaction, ApiError> {
        const READ_WRITE: BeginTransaction = BeginTransaction {
            read_only: false,
            read_time: None,
        };
        let json = parse_json(bytes)?;
        let obj = object(&json, "a beginTransaction body", &["options"])?;
        let Some(options) = obj.get("options") else {
            return Ok(READ_WRITE);
        };
        let options = object(options, "\"options\"", &["readOnly", "readWrite"])?;
        match (options.get("readOnly"), options.get("readWrite")) {
            (Some(read_only), None) => {
                let read_only = object(read_only, "\"readOnly\"", &["readTime"])?;
                let read_time = match read_only.get("readTime") {
                    None => None,
                    Some(Json::String(text)) => Some(read_time("readOnly.readTime", text)?),
                    Some(_) => {
                        return Err(ApiError::invalid_argument(
                            "\"readOnly.readTime\" must be an RFC 3339 time (a string)",
                        ))
                    }
                };
                Ok(BeginTransaction {
                    read_only: true,
                    read_time,
                })
            }
            (None, Some(read_write)) => {
                // `retryTransaction` names the transaction retried: nothing to do with it here.
                object(read_write, "\"readWrite\"", &["retryTransaction"])?;
                Ok(READ_WRITE)
            }
            (None, None) => Ok(READ_WRITE),
            (Some(_), Some(_)) => Err(ApiError::invalid_argument(
                "\"options\" holds one of \"readOnly\" and \"readWrite\"",
            )),
        }
    }
}

/// The body of `:rollback`: `{"transaction": id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollback {
    pub transaction: String,
}

impl Rollback {
    /// Parse the body.
    ///
    /// # Errors
    /// 400 INVALID_ARGUMENT without a transaction id.
    pub fn parse(bytes: &[u8]) -> Result<Rollback, ApiError> {
        let json = parse_json(bytes)?;
        let obj = object(&json, "a rollback body", &["transaction"])?;
        let transaction = held_transaction(obj)?
            .ok_or_else(|| ApiError::invalid_argument("a rollback body needs \"transaction\""))?;
        Ok(Rollback { transaction })
    }
}

/// At most this many documents in one `:batchGet` (Firestore's limit).
pub const MAX_BATCH_GET: usize = 1000;

/// The body of `:batchGet`: `{"documents": ["c/a", ...]}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchGet {
    /// The document paths, in request order (duplicates kept).
    pub documents: Vec<ResourcePath>,
    /// Now, in a held transaction, or at a read time.
    pub reads: Reads,
}

impl BatchGet {
    /// Parse the body.
    ///
    /// # Errors
    /// 400 INVALID_ARGUMENT unless `documents` is an array of 1 to [`MAX_BATCH_GET`] document
    /// paths (strings docstore-core's path rules accept, with an even number of segments).
    pub fn parse(bytes: &[u8]) -> Result<BatchGet, ApiError> {
        let json = parse_json(bytes)?;
        let obj = object(
            &json,
            "a batchGet body",
            &["documents", "transaction", "readTime"],
        )?;
        let reads = Reads::of(obj)?;
        let items = match obj.get("documents") {
            Some(Json::Array(items)) => items,
            Some(_) => {
                return Err(ApiError::invalid_argument(
                    "\"documents\" must be an array of document paths",
                ))
            }
            None => {
                return Err(ApiError::invalid_argument(
                    "a batchGet body needs \"documents\"",
                ))
            }
        };
        if items.is_empty() || items.len() > MAX_BATCH_GET {
            return Err(ApiError::invalid_argument(format!(
                "\"documents\" holds 1 to {MAX_BATCH_GET} document paths, not {}",
                items.len()
            )));
        }
        let documents = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let text = item.as_str().ok_or_else(|| {
                    ApiError::invalid_argument(format!("documents[{i}] must be a string"))
                })?;
                ResourcePath::parse_document(text)
                    .map_err(|e| ApiError::invalid_argument(format!("documents[{i}]: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BatchGet { documents, reads })
    }
}

/// The body of `:listCollectionIds`: `{"parent": "c/a"}`, or `{}` / `{"parent": ""}` for the
/// root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCollectionIds {
    /// The parent document's segments (none: the root).
    pub parent: Vec<String>,
    /// `readTime`: the collections as they were then.
    pub read_time: Option<Timestamp>,
}

impl ListCollectionIds {
    /// Parse the body.
    ///
    /// # Errors
    /// 400 INVALID_ARGUMENT unless `parent` is absent, empty or a document path, or for a
    /// `readTime` that is not RFC 3339.
    pub fn parse(bytes: &[u8]) -> Result<ListCollectionIds, ApiError> {
        let json = parse_json(bytes)?;
        let obj = object(&json, "a listCollectionIds body", &["parent", "readTime"])?;
        let read_time = match Reads::of(obj)? {
            Reads::At(t) => Some(t),
            _ => None,
        };
        let parent = match obj.get("parent") {
            None => Vec::new(),
            Some(Json::String(text)) if text.is_empty() => Vec::new(),
            Some(Json::String(text)) => ResourcePath::parse_document(text)
                .map_err(|e| ApiError::invalid_argument(format!("parent: {e}")))?
                .segments()
                .to_vec(),
            Some(_) => {
                return Err(ApiError::invalid_argument(
                    "\"parent\" must be a document path (\"\" for the root)",
                ))
            }
        };
        Ok(ListCollectionIds { parent, read_time })
    }
}

/// The `docstore.commit` writes of a set with an update mask whose body is `data`
/// ([`documents::masked_set`]).
///
/// # Errors
/// 400 INVALID_ARGUMENT for a body that is not a JSON object or a field path core refuses.
pub fn masked_set(
    path: &str,
    data: &[u8],
    mask: &[String],
    precondition: Option<Json>,
) -> Result<Json, ApiError> {
    let data = parse_json(data)?;
    Ok(documents::masked_set(path, &data, mask, precondition)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_get_bodies() {
        let ok = BatchGet::parse(br#"{"documents": ["c/a", "c/b", "c/a"]}"#).unwrap();
        let paths: Vec<String> = ok.documents.iter().map(ToString::to_string).collect();
        assert_eq!(paths, ["c/a", "c/b", "c/a"]);
        let many = format!(
            "{{\"documents\": [{}]}}",
            vec!["\"c/a\""; MAX_BATCH_GET + 1].join(",")
        );
        for bad in [
            "{}",
            "[]",
            r#"{"documents": []}"#,
            r#"{"documents": "c/a"}"#,
            r#"{"documents": ["c"]}"#,
            r#"{"documents": ["c/a", 1]}"#,
            r#"{"documents": ["c/.."]}"#,
            r#"{"documents": ["c/a"], "mask": []}"#,
            many.as_str(),
        ] {
            let e = BatchGet::parse(bad.as_bytes()).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn list_collection_ids_bodies() {
        for (body, parent) in [
            ("{}", vec![]),
            (r#"{"parent": ""}"#, vec![]),
            (r#"{"parent": "a/b"}"#, vec!["a".to_owned(), "b".to_owned()]),
        ] {
            assert_eq!(
                ListCollectionIds::parse(body.as_bytes()).unwrap().parent,
                parent
            );
        }
        for bad in [
            "[]",
            r#"{"parent": "a"}"#,
            r#"{"parent": null}"#,
            r#"{"parent": "a/b", "x": 1}"#,
        ] {
            let e = ListCollectionIds::parse(bad.as_bytes()).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn content_types() {
        let mut h = HeaderMap::new();
        assert!(require_json(&h).is_err());
        h.insert(
            header::CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(require_json(&h).is_ok());
        h.insert(header::CONTENT_TYPE, "Application/JSON".parse().unwrap());
        assert!(require_json(&h).is_ok());
        h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(require_json(&h).is_err());
    }

    #[test]
    fn run_query_bodies() {
        assert_eq!(
            RunQuery::parse(br#"{"sql": "select * from /a"}"#).unwrap(),
            RunQuery::Sql("select * from /a".into())
        );
        assert!(matches!(
            RunQuery::parse(br#"{"structuredQuery": {"from": []}}"#).unwrap(),
            RunQuery::Structured(_)
        ));
        for bad in [
            &b"{}"[..],
            br#"{"sql": 1}"#,
            br#"{"sql": "x", "structuredQuery": {}}"#,
            br#"{"structuredQuery": []}"#,
            br#"{"other": 1}"#,
            b"[]",
            b"{",
        ] {
            assert_eq!(
                RunQuery::parse(bad).unwrap_err().code(),
                Code::InvalidArgument
            );
        }
    }

    #[test]
    fn transaction_bodies() {
        assert!(!BeginTransaction::parse(b"{}").unwrap().read_only);
        assert!(
            BeginTransaction::parse(br#"{"options": {"readOnly": {}}}"#)
                .unwrap()
                .read_only
        );
        assert!(
            !BeginTransaction::parse(br#"{"options": {"readWrite": {"retryTransaction": "x"}}}"#)
                .unwrap()
                .read_only
        );
        for bad in [
            r#"{"options": {"readOnly": {}, "readWrite": {}}}"#,
            r#"{"options": {"readOnly": {"readTime": "yesterday"}}}"#,
            r#"{"options": {"readOnly": {"readTime": 5}}}"#,
            r#"{"options": {"readWrite": {"readTime": "2020-01-01T00:00:00Z"}}}"#,
            r#"{"options": []}"#,
            r#"{"readOnly": {}}"#,
        ] {
            let e = BeginTransaction::parse(bad.as_bytes()).unwrap_err();
            assert_eq!(e.error.code, Code::InvalidArgument, "{bad}");
        }
        assert_eq!(
            Rollback::parse(br#"{"transaction": "abc"}"#)
                .unwrap()
                .transaction,
            "abc"
        );
        for bad in [r#"{}"#, r#"{"transaction": ""}"#, r#"{"transaction": 1}"#] {
            assert!(Rollback::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        let c = Commit::parse(br#"{"writes": [], "transaction": "abc"}"#).unwrap();
        assert_eq!(c.held.as_deref(), Some("abc"));
        assert!(!c.transaction);
        let (_, t) = RunQuery::parse_with_reads(br#"{"sql": "x", "transaction": "t"}"#).unwrap();
        assert_eq!(t, Reads::In("t".into()));
        assert!(RunQuery::parse(br#"{"sql": "x", "transaction": "t"}"#).is_err());
        let b = BatchGet::parse(br#"{"documents": ["c/a"], "transaction": "t"}"#).unwrap();
        assert_eq!(b.reads, Reads::In("t".into()));
        assert!(BatchGet::parse(br#"{"documents": ["c/a"], "transaction": 5}"#).is_err());
    }

    #[test]
    fn read_times() {
        let at = Timestamp::parse_rfc3339("2020-01-01T00:00:00Z").unwrap();
        let b = BatchGet::parse(br#"{"documents": ["c/a"], "readTime": "2020-01-01T00:00:00Z"}"#)
            .unwrap();
        assert_eq!(b.reads, Reads::At(at));
        let begin = BeginTransaction::parse(
            br#"{"options": {"readOnly": {"readTime": "2020-01-01T00:00:00Z"}}}"#,
        )
        .unwrap();
        assert_eq!((begin.read_only, begin.read_time), (true, Some(at)));
        let (_, reads) = RunQuery::parse_with_reads(
            br#"{"structuredQuery": {}, "readTime": "2020-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(reads, Reads::At(at));
        let list = ListCollectionIds::parse(br#"{"readTime": "2020-01-01T00:00:00Z"}"#).unwrap();
        assert_eq!(list.read_time, Some(at));
        for bad in [
            r#"{"structuredQuery": {}, "readTime": "2020-01-01"}"#,
            r#"{"structuredQuery": {}, "readTime": 1577836800}"#,
            r#"{"structuredQuery": {}, "readTime": "2020-01-01T00:00:00.0000001Z"}"#,
            r#"{"structuredQuery": {}, "readTime": "2020-01-01T00:00:00Z", "transaction": "t"}"#,
            r#"{"sql": "select * from /c", "readTime": "2020-01-01T00:00:00Z"}"#,
        ] {
            let e = RunQuery::parse_with_reads(bad.as_bytes()).unwrap_err();
            assert_eq!(e.error.code, Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn commit_bodies() {
        let c = Commit::parse(br#"{"writes": [{"delete": "a/b"}], "transaction": true}"#).unwrap();
        assert!(c.transaction);
        assert_eq!(c.writes, r#"[{"delete":"a/b"}]"#);
        for bad in [
            &b"{}"[..],
            br#"{"writes": {}}"#,
            br#"{"writes": [], "transaction": 1}"#,
            br#"{"writes": [], "x": 1}"#,
        ] {
            assert!(Commit::parse(bad).is_err());
        }
    }
}
