//! `GET|PUT|PATCH|DELETE /v1/databases/{db}/documents/{document}` and
//! `POST /v1/databases/{db}/documents/{collection}`: parse, call `service::documents`,
//! answer the document as JSON.

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value as Json;

use super::bearer;
use super::body;
use super::error::ApiError;
use super::resource::{parse_params, Params, Target};
use super::SharedState;
use crate::pg::documents::Document;
use crate::pg::PgError;
use crate::service::batch_get;
use crate::service::documents::{self, DocumentWrite, WriteRequest};
use crate::service::transactions;

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
    resource: docstore_core::ResourcePath,
    params: Params,
}

fn call(target: Target, request: &Request) -> Result<Call, ApiError> {
    let Target::Path { database, path } = target else {
        return Err(ApiError::invalid_argument("not a document route"));
    };
    Ok(Call {
        database,
        resource: path,
        params: parse_params(request.uri().query())?,
    })
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
    let (transaction, read_time) = (call.params.transaction.clone(), call.params.read_time);
    if call.params
        != (Params {
            transaction: transaction.clone(),
            read_time,
            ..Params::default()
        })
    {
        return Err(ApiError::invalid_argument(
            "GET of a document takes only transaction or readTime",
        ));
    }
    let reads = body::Reads::either(transaction, read_time)?;
    let caller =
        bearer::caller(&state.service.verifier, request.headers(), request.method()).await?;
    let (service, database, path) = (&state.service, &call.database, &call.resource);
    let doc = match &reads {
        body::Reads::Now => documents::get(service, &caller, database, path).await?,
        body::Reads::In(id) => transactions::get(service, &caller, database, id, path).await?,
        body::Reads::At(t) => batch_get::get_at(service, &caller, database, path, *t).await?,
    };
    Ok(json_response(StatusCode::OK, document_json(&doc)?))
}

/// Write the document of `call` and answer 200 with it as written.
async fn write(
    state: SharedState,
    call: Call,
    parts: &axum::http::request::Parts,
    write: DocumentWrite,
) -> Result<Response, ApiError> {
    let caller = bearer::caller(&state.service.verifier, &parts.headers, &parts.method).await?;
    let doc = documents::write(
        &state.service,
        &caller,
        WriteRequest {
            database: &call.database,
            path: &call.resource,
            write,
            precondition: call.params.precondition.clone(),
        },
    )
    .await?;
    Ok(json_response(StatusCode::OK, document_json(&doc)?))
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
    if call.params.transaction.is_some() || call.params.read_time.is_some() {
        return Err(ApiError::invalid_argument(
            "transaction and readTime are for GET of a document",
        ));
    }
    body::require_json(request.headers())?;
    let (parts, raw) = request.into_parts();
    let bytes = body::read(&parts.headers, raw, state.max_body_bytes).await?;
    let set = if call.params.update_mask.is_empty() {
        DocumentWrite::Set {
            data: body::json_object_text(&bytes, "the document data")?,
            merge: call.params.merge,
        }
    } else {
        let data = body::parse_json(&bytes)?;
        // The mask is checked before the caller, as the data is.
        documents::masked_set(
            &call.resource.to_string(),
            &data,
            &call.params.update_mask,
            None,
        )?;
        let mask = call.params.update_mask.clone();
        DocumentWrite::MaskedSet { data, mask }
    };
    write(state, call, &parts, set).await
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
    if call.params.merge
        || !call.params.update_mask.is_empty()
        || call.params.page_size.is_some()
        || call.params.transaction.is_some()
        || call.params.read_time.is_some()
    {
        return Err(ApiError::invalid_argument(
            "PATCH takes only the exists and updateTime preconditions: its body names the field paths",
        ));
    }
    body::require_json(request.headers())?;
    let (parts, raw) = request.into_parts();
    let bytes = body::read(&parts.headers, raw, state.max_body_bytes).await?;
    let fields = body::json_object_text(&bytes, "the fields of an update")?;
    write(state, call, &parts, DocumentWrite::Update { fields }).await
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
    if call.params.merge
        || !call.params.update_mask.is_empty()
        || call.params.page_size.is_some()
        || call.params.transaction.is_some()
        || call.params.read_time.is_some()
    {
        return Err(ApiError::invalid_argument(
            "DELETE takes only the exists and updateTime preconditions",
        ));
    }
    let caller =
        bearer::caller(&state.service.verifier, request.headers(), request.method()).await?;
    let existed = documents::delete(
        &state.service,
        &caller,
        &call.database,
        &call.resource,
        call.params.precondition.as_ref(),
    )
    .await?;
    Ok(json_response(
        StatusCode::OK,
        serde_json::json!({ "existed": existed }).to_string(),
    ))
}

/// `POST` to a collection: a new document with a random id (`docstore.add`); 201 with the
/// document.
///
/// # Cancel safety
/// As [`get`].
pub async fn add(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let call = call(target, &request)?;
    if call.params != Params::default() {
        return Err(ApiError::invalid_argument(
            "POST to a collection takes no query parameters",
        ));
    }
    body::require_json(request.headers())?;
    let (parts, raw) = request.into_parts();
    let bytes = body::read(&parts.headers, raw, state.max_body_bytes).await?;
    let data = body::json_object_text(&bytes, "the document data")?;
    let caller = bearer::caller(&state.service.verifier, &parts.headers, &parts.method).await?;
    let doc = documents::add(
        &state.service,
        &caller,
        &call.database,
        &call.resource,
        &data,
    )
    .await?;
    Ok(json_response(StatusCode::CREATED, document_json(&doc)?))
}
