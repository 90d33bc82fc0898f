//! GetDocument and BatchGetDocuments: the reads of `GET .../documents/{path}`
//! (http/documents.rs) and `:batchGet` (http/batch_get.rs), through the same `pg::documents`
//! functions, with the same rules methods; only the rendering is protobuf, written straight
//! from the stored typed JSON to wire bytes for the methods' own answers
//! (`proto_wire::document_wire`, [`super::encoded`]). In a transaction
//! they are the held transaction's reads, at a `read_time` the documents as they were then
//! (the extension's `get_document_at`, [`super::transactions`]).

use docstore_core::proto::{
    document_from_typed_json, document_to_proto, timestamp_to_proto, DatabaseName,
};
use docstore_core::proto_wire::document_wire;
use docstore_core::query::evaluate::project;
use docstore_core::value::Map;
use docstore_core::{typed_json, Code, FieldPath, ResourcePath, Timestamp, Value};
use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use tonic::Status;
use tonic_prost::prost::encoding::{encode_key, encode_varint, WireType};
use tonic_prost::prost::Message as _;

use super::encoded::Encoded;
use super::error::{from_service, invalid_argument, status};
use super::transactions::{Consistency, Reading};
use crate::http::body::MAX_BATCH_GET;
use crate::pg::documents::Document;
use crate::pg::PgError;
use crate::service::caller::Caller;
use crate::service::error::ServiceError;
use crate::service::{
    batch_get as service_batch_get, documents as service_documents,
    transactions as service_transactions, Service,
};

/// GetDocument of `path`: the document, NOT_FOUND when it does not exist.
///
/// # Errors
/// The read's errors (PERMISSION_DENIED when the `get` rule denies, NOT_FOUND for a missing
/// database), INVALID_ARGUMENT for a bad mask, the transaction's and the read time's errors
/// ([`super::transactions`]).
///
/// # Cancel safety
/// As `service::documents::get`.
pub async fn get_document(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    path: &ResourcePath,
    request: &wire::GetDocumentRequest,
) -> Result<wire::Document, Status> {
    let (doc, mask) = read_one(service, caller, db, path, request).await?;
    render(db, path, &doc, mask.as_deref())
}

/// [`get_document`] as the wire bytes of the `Document` (GetDocument's answer), written
/// straight from the stored typed JSON.
///
/// # Errors
/// As [`get_document`].
///
/// # Cancel safety
/// As [`get_document`].
pub async fn get_document_encoded(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    path: &ResourcePath,
    request: &wire::GetDocumentRequest,
) -> Result<Encoded, Status> {
    let (doc, mask) = read_one(service, caller, db, path, request).await?;
    let mut out = Vec::new();
    encode_document(
        db,
        path,
        &doc,
        mask.as_deref(),
        None,
        &mut Vec::new(),
        &mut out,
    )?;
    Ok(Encoded(out))
}

/// The read of [`get_document`]: the document and the request's mask.
async fn read_one(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    path: &ResourcePath,
    request: &wire::GetDocumentRequest,
) -> Result<(Document, Option<Vec<FieldPath>>), Status> {
    let consistency = Consistency::of_get(request.consistency_selector.as_ref())?;
    let mask = mask(request.mask.as_ref())?;
    let reading = Reading::start(service, caller, db, consistency).await?;
    let read = match (&reading.transaction, reading.read_time) {
        (Some(id), _) => service_transactions::get(service, caller, &db.database, id, path).await,
        // The document as it was then (docs/grpc.md, "Transactions and read times").
        (None, Some(t)) => service_batch_get::get_at(service, caller, &db.database, path, t).await,
        (None, None) => service_documents::get(service, caller, &db.database, path).await,
    };
    match read {
        Ok(doc) => Ok((doc, mask)),
        Err(e) if e.code == Code::NotFound => Err(status(
            Code::NotFound,
            format!("document \"{}\" does not exist", db.document_name(path)),
        )),
        Err(e) => Err(from_service(e)),
    }
}

/// BatchGetDocuments of `names` (documents of `db`): one answer per name, in request order,
/// all read in one snapshot at one read time; each answer the wire bytes of a
/// `BatchGetDocumentsResponse`, its document written straight from the stored typed JSON.
///
/// # Errors
/// As [`get_document`]; INVALID_ARGUMENT for more than `MAX_BATCH_GET` names.
///
/// # Cancel safety
/// As `service::batch_get::batch_get`.
pub async fn batch_get(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    paths: Vec<ResourcePath>,
    request: &wire::BatchGetDocumentsRequest,
) -> Result<Vec<Encoded>, Status> {
    let consistency = Consistency::of_batch_get(request.consistency_selector.as_ref())?;
    if paths.len() > MAX_BATCH_GET {
        return Err(invalid_argument(format!(
            "BatchGetDocuments reads at most {MAX_BATCH_GET} documents, not {}",
            paths.len()
        )));
    }
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let mask = mask(request.mask.as_ref())?;
    let reading = Reading::start(service, caller, db, consistency).await?;
    let read = match &reading.transaction {
        Some(id) => {
            service_transactions::batch_get(service, caller, &db.database, id, &paths).await
        }
        None => {
            service_batch_get::batch_get(service, caller, &db.database, &paths, reading.read_time)
                .await
        }
    }
    .map_err(from_service)?;
    let read_time = match reading.finish() {
        Some(asked) => asked,
        None => timestamp_to_proto(Timestamp::parse_rfc3339(&read.read_time).ok_or_else(|| {
            decode_error(&format!("read time {} is not RFC 3339", read.read_time))
        })?),
    };
    let mut began = Some(reading.began).filter(|id| !id.is_empty());
    let mut scratch = Vec::new();
    paths
        .iter()
        .zip(&read.documents)
        .map(|(path, found)| {
            let mut out = Vec::new();
            let result = match found {
                // `found` first (its field number is the lowest), then the rest.
                Some(doc) => {
                    let found = Some(BATCH_GET_FOUND);
                    encode_document(
                        db,
                        path,
                        doc,
                        mask.as_deref(),
                        found,
                        &mut scratch,
                        &mut out,
                    )?;
                    None
                }
                None => Some(wire::batch_get_documents_response::Result::Missing(
                    db.document_name(path),
                )),
            };
            let rest = wire::BatchGetDocumentsResponse {
                result,
                // The id of a transaction begun for this read, with the first answer.
                transaction: began.take().unwrap_or_default(),
                read_time: Some(read_time),
            };
            rest.encode_raw(&mut out);
            Ok(Encoded(out))
        })
        .collect()
}

/// The field number of `BatchGetDocumentsResponse.found` (google/firestore/v1/firestore.proto).
const BATCH_GET_FOUND: u32 = 1;

/// Write a read document (its fields cut to `mask`) as a `Document` message to `out`: as the
/// field `field` of an enclosing message (its key and length first), or alone. Without a mask
/// the stored typed JSON is written straight to bytes (`proto_wire::document_wire`, `scratch`
/// its buffer); with one, [`render`]'s tree is encoded.
fn encode_document(
    db: &DatabaseName,
    path: &ResourcePath,
    doc: &Document,
    mask: Option<&[FieldPath]>,
    field: Option<u32>,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<(), Status> {
    let frame = |len: usize, out: &mut Vec<u8>| {
        out.reserve(len + 16);
        if let Some(tag) = field {
            encode_key(tag, WireType::LengthDelimited, out);
            encode_varint(len as u64, out);
        }
    };
    if mask.is_some() {
        let tree = render(db, path, doc, mask)?;
        frame(tree.encoded_len(), out);
        tree.encode_raw(out);
        return Ok(());
    }
    let (create_time, update_time) = times(path, doc)?;
    let wire = document_wire(db, path, &doc.data.0, create_time, update_time, scratch)
        .map_err(|e| decode_error(&format!("document {path}: {e}")))?;
    frame(wire.encoded_len(), out);
    wire.encode_raw(out);
    Ok(())
}

/// A read document's create and update times.
fn times(path: &ResourcePath, doc: &Document) -> Result<(Timestamp, Timestamp), Status> {
    let time = |t: crate::pg::types::PgTime| {
        Timestamp::from_postgres_micros(t.0)
            .ok_or_else(|| decode_error(&format!("time {} of {path} is out of range", t.0)))
    };
    Ok((time(doc.create_time)?, time(doc.update_time)?))
}

/// The field paths of a `DocumentMask` (`None`: every field).
pub(super) fn mask(mask: Option<&wire::DocumentMask>) -> Result<Option<Vec<FieldPath>>, Status> {
    mask.map(|m| {
        m.field_paths
            .iter()
            .map(|p| {
                FieldPath::parse(p)
                    .map_err(|e| invalid_argument(format!("mask field path \"{p}\": {e}")))
            })
            .collect()
    })
    .transpose()
}

/// A read document as Firestore's `Document` (its fields cut to `mask`). Without a mask the
/// stored typed JSON goes to protobuf in one pass (`proto::document_from_typed_json`).
pub(super) fn render(
    db: &DatabaseName,
    path: &ResourcePath,
    doc: &Document,
    mask: Option<&[FieldPath]>,
) -> Result<wire::Document, Status> {
    let (create_time, update_time) = times(path, doc)?;
    let Some(mask) = mask else {
        return document_from_typed_json(db, path, &doc.data.0, create_time, update_time)
            .map_err(|e| decode_error(&format!("document {path}: {e}")));
    };
    let fields = match typed_json::parse(&doc.data.0) {
        Ok(Value::Map(fields)) => fields,
        Ok(other) => {
            return Err(decode_error(&format!(
                "document {path} holds a {}, not a map",
                other.type_name()
            )))
        }
        Err(e) => return Err(decode_error(&format!("document {path}: {e}"))),
    };
    let fields: Map = project(path, &fields, mask);
    Ok(document_to_proto(
        db,
        path,
        &fields,
        create_time,
        update_time,
    ))
}

/// INTERNAL: what Postgres returned cannot be read (a bug).
fn decode_error(what: &str) -> Status {
    from_service(ServiceError::from(PgError::Decode(what.to_owned())))
}
