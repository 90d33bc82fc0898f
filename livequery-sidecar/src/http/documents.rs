//! `GET|PUT|PATCH|DELETE /v1/databases/{db}/documents/{document}` and
//! `POST /v1/databases/{db}/documents/{collection}`. Every write is one call of the
//! extension's functions; a write's answer reads the document back in the same transaction.

use axum::extract::Request;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value as Json;

use super::body;
use super::context::{run_as, RulesMethod};
use super::error::ApiError;
use super::resource::{parse_params, Params, Target};
use super::SharedState;
use crate::pg::documents::{self as pg_documents, Document};
use crate::pg::RunAs;
use crate::pg::{PgError, RequestTx};

/// A document in the API's JSON form:
/// `{"path", "data" (typed JSON), "createTime", "updateTime"}`.
///
/// # Errors
/// INTERNAL for a stored time outside years 1-9999 (never written by the extension).
pub fn document_json(doc: &Document) -> Result<String, ApiError> {
    let time = |t: crate::pg::types::PgTime| {
        t.to_rfc3339().ok_or_else(|| {
            ApiError::from(PgError::Decode(format!(
                "time {} of {} is out of range",
                t.0, doc.path
            )))
        })
    };
    let path = Json::String(doc.path.clone()).to_string();
    Ok(format!(
        "{{\"path\":{path},\"data\":{},\"createTime\":\"{}\",\"updateTime\":\"{}\"}}",
        doc.data.0,
        time(doc.create_time)?,
        time(doc.update_time)?
    ))
}

pub(super) fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The parts every document handler starts from.
struct Call {
    database: String,
    path: String,
    resource: docstore_core::ResourcePath,
    params: Params,
}

fn call(target: Target, request: &Request) -> Result<Call, ApiError> {
    let Target::Path { database, path } = target else {
        return Err(ApiError::invalid_argument("not a document route"));
    };
    Ok(Call {
        database,
        path: path.to_string(),
        resource: path,
        params: parse_params(request.uri().query())?,
    })
}

/// Begin the request's transaction and run `first` in it, in one round trip with `begin` and
/// the settings ([`crate::pg::Db::begin_with`]).
async fn begin_with<T>(
    state: &SharedState,
    call: &Call,
    headers: &HeaderMap,
    http_method: &Method,
    method: RulesMethod,
    first: impl AsyncFnOnce(&RequestTx) -> Result<T, ApiError>,
) -> Result<(RequestTx, T), ApiError> {
    let run_as = caller(state, call, headers, http_method, method).await?;
    state.db.begin_with(&call.database, &run_as, first).await
}

/// Who `call` runs as: the caller authenticated from `headers`, with the request the rules
/// see (`method` on the call's path).
async fn caller(
    state: &SharedState,
    call: &Call,
    headers: &HeaderMap,
    http_method: &Method,
    method: RulesMethod,
) -> Result<RunAs, ApiError> {
    let principal = state.verifier.authenticate(headers).await?;
    Ok(run_as(
        &principal,
        method,
        http_method.as_str(),
        &call.database,
        &call.path,
        None,
    ))
}

/// Commit on success, roll back on failure (a connection that cannot roll back is discarded
/// by [`RequestTx`]'s drop).
///
/// # Cancel safety
/// Dropped mid-way, the transaction is cancelled and its connection discarded.
pub(super) async fn end<T>(tx: RequestTx, result: Result<T, ApiError>) -> Result<T, ApiError> {
    match result {
        Ok(value) => {
            tx.commit().await?;
            Ok(value)
        }
        Err(error) => {
            if let Err(e) = tx.rollback().await {
                tracing::debug!(error = %e, "rollback after a failed request");
            }
            Err(error)
        }
    }
}

async fn read_back(tx: &RequestTx, call: &Call) -> Result<String, ApiError> {
    found(
        call,
        pg_documents::read(tx, &call.database, &call.resource).await?,
    )
}

fn found(call: &Call, doc: Option<Document>) -> Result<String, ApiError> {
    match doc {
        Some(doc) => document_json(&doc),
        None => Err(ApiError::not_found(format!(
            "document \"{}\" does not exist",
            call.path
        ))),
    }
}

/// `GET` a document: 200 with the document, 404 NOT_FOUND when it does not exist.
///
/// # Cancel safety
/// Dropped mid-way, the request's transaction is cancelled and its connection discarded.
pub async fn get(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let call = call(target, &request)?;
    if call.params != Params::default() {
        return Err(ApiError::invalid_argument(
            "GET of a document takes no query parameters",
        ));
    }
    let run_as = caller(
        &state,
        &call,
        request.headers(),
        request.method(),
        RulesMethod::Get,
    )
    .await?;
    match pg_documents::get(&state.db, &call.database, &run_as, &call.resource).await? {
        Some(doc) => Ok(json_response(StatusCode::OK, document_json(&doc)?)),
        None => Err(ApiError::not_found(format!(
            "document \"{}\" does not exist",
            call.path
        ))),
    }
}

/// The `"precondition"` member of a commit write, or nothing.
fn precondition_member(params: &Params) -> String {
    params
        .precondition
        .as_ref()
        .map(|p| format!(",\"precondition\":{}", p.to_json()))
        .unwrap_or_default()
}

/// `begin`, the settings, the write and the read-back go out together (one round trip; a
/// failed write aborts the transaction, so the read then fails too and the write's error is
/// reported); the commit, or the rollback when the document cannot be read back, follows.
async fn write_and_read(
    state: SharedState,
    call: Call,
    parts: &axum::http::request::Parts,
    method: RulesMethod,
    writes: String,
) -> Result<Response, ApiError> {
    let (tx, read) = begin_with(
        &state,
        &call,
        &parts.headers,
        &parts.method,
        method,
        async |tx: &RequestTx| {
            Ok(pg_documents::commit_and_read(tx, &writes, &call.database, &call.resource).await?)
        },
    )
    .await?;
    let body = end(tx, found(&call, read)).await?;
    Ok(json_response(StatusCode::OK, body))
}

/// `PUT` (set): the body is the document data; `?merge=true` merges it into the document,
/// `?updateMask=<field path>` (repeated) writes only those fields (a masked field missing
/// from the data is deleted). Preconditions: `?exists=` or `?updateTime=`. 200 with the
/// document as written.
///
/// # Cancel safety
/// As [`get`].
pub async fn put(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let call = call(target, &request)?;
    if call.params.page_size.is_some() {
        return Err(ApiError::invalid_argument(
            "pageSize is for GET of a collection",
        ));
    }
    body::require_json(request.headers())?;
    let (parts, raw) = request.into_parts();
    let bytes = body::read(&parts.headers, raw, state.max_body_bytes).await?;
    let path_json = Json::String(call.path.clone()).to_string();
    let writes = if call.params.update_mask.is_empty() {
        let data = body::json_object_text(&bytes, "the document data")?;
        format!(
            "[{{\"set\":{path_json},\"data\":{data},\"merge\":{}{}}}]",
            call.params.merge,
            precondition_member(&call.params)
        )
    } else {
        body::masked_set(
            &call.path,
            &bytes,
            &call.params.update_mask,
            call.params.precondition.as_ref().map(|p| p.to_json()),
        )?
        .to_string()
    };
    write_and_read(state, call, &parts, RulesMethod::Write, writes).await
}

/// `PATCH` (update): the body is `docstore.update`'s fields object (field paths -> values
/// or transforms); the document must exist (404 otherwise). Preconditions as for PUT.
///
/// # Cancel safety
/// As [`get`].
pub async fn patch(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let call = call(target, &request)?;
    if call.params.merge || !call.params.update_mask.is_empty() || call.params.page_size.is_some() {
        return Err(ApiError::invalid_argument(
            "PATCH takes only the exists and updateTime preconditions: its body names the field paths",
        ));
    }
    body::require_json(request.headers())?;
    let (parts, raw) = request.into_parts();
    let bytes = body::read(&parts.headers, raw, state.max_body_bytes).await?;
    let fields = body::json_object_text(&bytes, "the fields of an update")?;
    let writes = format!(
        "[{{\"update\":{},\"fields\":{fields}{}}}]",
        Json::String(call.path.clone()),
        precondition_member(&call.params)
    );
    write_and_read(state, call, &parts, RulesMethod::Update, writes).await
}

/// `DELETE`: 200 with `{"existed": bool}` (deleting a missing document is no error, as in
/// Firestore, unless `?exists=true` demands it).
///
/// # Cancel safety
/// As [`get`].
pub async fn delete(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let call = call(target, &request)?;
    if call.params.merge || !call.params.update_mask.is_empty() || call.params.page_size.is_some() {
        return Err(ApiError::invalid_argument(
            "DELETE takes only the exists and updateTime preconditions",
        ));
    }
    let (tx, existed) = begin_with(
        &state,
        &call,
        request.headers(),
        request.method(),
        RulesMethod::Delete,
        async |tx: &RequestTx| match &call.params.precondition {
            None => Ok(pg_documents::delete(tx, &call.path).await?),
            Some(precondition) => {
                let writes = format!(
                    "[{{\"delete\":{}{}}}]",
                    Json::String(call.path.clone()),
                    precondition_member(&call.params)
                );
                pg_documents::commit(tx, &writes).await?;
                // The precondition held: exists=false means there was nothing to delete.
                Ok(!matches!(
                    precondition,
                    super::resource::Precondition::Exists(false)
                ))
            }
        },
    )
    .await?;
    tx.commit().await?;
    Ok(json_response(
        StatusCode::OK,
        serde_json::json!({ "existed": existed }).to_string(),
    ))
}

/// `POST` to a collection: a new document with a random id (`docstore.add`); 201 with the
/// document. One autocommit statement (`docstore.add_document`, or `add_document_as_client`
/// for a client) when this role may call it; otherwise `docstore.add` and the read-back in
/// the request's transaction.
///
/// # Cancel safety
/// As [`get`].
pub async fn add(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let mut call = call(target, &request)?;
    if call.params != Params::default() {
        return Err(ApiError::invalid_argument(
            "POST to a collection takes no query parameters",
        ));
    }
    body::require_json(request.headers())?;
    let (parts, raw) = request.into_parts();
    let bytes = body::read(&parts.headers, raw, state.max_body_bytes).await?;
    let data = body::json_object_text(&bytes, "the document data")?;
    let run_as = caller(
        &state,
        &call,
        &parts.headers,
        &parts.method,
        RulesMethod::Create,
    )
    .await?;
    if pg_documents::adds_in_one_statement(&state.db, &run_as).await? {
        let doc =
            pg_documents::add_one(&state.db, &call.database, &run_as, &call.path, &data).await?;
        return Ok(json_response(StatusCode::CREATED, document_json(&doc)?));
    }
    let (tx, path) = state
        .db
        .begin_with(&call.database, &run_as, async |tx: &RequestTx| {
            Ok::<_, ApiError>(pg_documents::add(tx, &call.path, &data).await?)
        })
        .await?;
    let result = async {
        call.resource = docstore_core::ResourcePath::parse_document(&path).map_err(|e| {
            ApiError::from(PgError::Decode(format!(
                "docstore.add returned {path:?}: {e}"
            )))
        })?;
        call.path = path;
        read_back(&tx, &call).await
    }
    .await;
    let body = end(tx, result).await?;
    Ok(json_response(StatusCode::CREATED, body))
}
