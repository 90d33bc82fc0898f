//! Commit, BatchWrite and the single-document writes (CreateDocument, UpdateDocument,
//! DeleteDocument): each
//! `Write` becomes items of our commit format (docstore-core's `proto_write`), the batch is
//! one call of the service's commit, and its `{"commitTime", "updateTimes"}` answer becomes
//! Firestore's `write_results` (a write's update time: its last item's; none for a delete).
//!
//! A Commit naming a transaction applies its writes in that held transaction and commits it.
//!
//! `transform_results`: one value per field transform of a write, in order, the field's value
//! after the commit, read back in the commit's own transaction (`pg::documents::read_written`)
//! before it commits. A document written again later in the same batch reports its value after
//! the whole batch.

use docstore_core::commit::MAX_WRITES;
use docstore_core::proto::{timestamp_to_proto, DatabaseName, ProtoTimestamp};
use docstore_core::proto_write::{transform_results, write_from_proto, CommitWrite};
use docstore_core::{typed_json, Code, ResourcePath, Timestamp, Value};
use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use googleapis_tonic_google_firestore_v1::google::rpc::Status as RpcStatus;
use serde::Deserialize;
use serde_json::Value as Json;
use tonic::Status;

use super::error::{from_proto, from_service, status};
use crate::service::caller::Caller;
use crate::service::commit::{
    commit as service_commit, CommitRequest, Committed as ServiceCommitted,
};
use crate::service::transactions as service_transactions;
use crate::service::Service;

/// What a commit wrote.
pub struct Committed {
    pub commit_time: ProtoTimestamp,
    pub write_results: Vec<wire::WriteResult>,
}

/// Commit `writes` on `db` atomically.
///
/// # Errors
/// INVALID_ARGUMENT for a bad write; NOT_FOUND "No document to update: <name>" for an update of
/// a missing document; the commit's errors.
///
/// # Cancel safety
/// As `service::commit::commit`: dropped mid-way, nothing is written.
pub async fn commit(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    writes: &[wire::Write],
) -> Result<Committed, Status> {
    commit_in(service, caller, db, writes, None).await
}

/// Commit `writes` on `db` atomically, in held transaction `transaction` (its id's text) when
/// there is one: its writes are applied and it commits (`service::transactions::commit`).
///
/// # Errors
/// As [`commit`]; the transaction's errors (ABORTED on contention: begin again and retry).
///
/// # Cancel safety
/// As [`commit`]; a held transaction dropped mid-way is rolled back.
pub async fn commit_in(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    writes: &[wire::Write],
    transaction: Option<&str>,
) -> Result<Committed, Status> {
    let now = now()?;
    let converted = writes
        .iter()
        .map(|w| write_from_proto(w, db, now).map_err(|e| from_proto(&e)))
        .collect::<Result<Vec<CommitWrite>, Status>>()?;
    let items: Vec<&Json> = converted.iter().flat_map(|w| &w.items).collect();
    let read_back: Vec<ResourcePath> = converted
        .iter()
        .filter(|w| !w.transforms.is_empty())
        .map(|w| w.path.clone())
        .collect();
    let text = serde_json::to_string(&items)
        .map_err(|e| status(Code::Internal, format!("commit writes: {e}")))?;
    let committed = match transaction {
        Some(id) => {
            service_transactions::commit(service, caller, &db.database, id, &text, &read_back).await
        }
        None => {
            let request = CommitRequest {
                database: &db.database,
                writes: &text,
                transaction: false,
                read_back: &read_back,
            };
            service_commit(service, caller, request).await
        }
    };
    let answer = match committed {
        Ok(answer) => answer,
        Err(e) if e.code == Code::NotFound => {
            // The writes needing an existing document: the first one is named (the
            // extension's message does not say which).
            let missing = converted.iter().find(|w| needs_existing(w));
            return Err(match missing {
                Some(w) => status(
                    Code::NotFound,
                    format!("No document to update: {}", db.document_name(&w.path)),
                ),
                None => from_service(e),
            });
        }
        Err(e) => return Err(from_service(e)),
    };
    results(db, &converted, &answer)
}

/// Whether the first item of `write` is an update (the document must exist).
fn needs_existing(write: &CommitWrite) -> bool {
    write
        .items
        .first()
        .and_then(Json::as_object)
        .is_some_and(|item| item.contains_key("update"))
}

/// The extension's answer to a commit, `{"commitTime": "...", "updateTimes": ["..." or null,
/// ...]}`, read in place: its times are borrowed from the text (RFC 3339, never escaped), not
/// built into a JSON tree.
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(rename = "commitTime", borrow, default)]
    commit_time: Option<&'a str>,
    #[serde(rename = "updateTimes", borrow, default)]
    update_times: Option<Vec<Time<'a>>>,
}

/// One of `updateTimes` (null for a `verify` of a missing document).
#[derive(Deserialize)]
#[serde(transparent)]
struct Time<'a>(#[serde(borrow)] Option<&'a str>);

/// The write results of the extension's answer, with the transform results of the documents
/// read back (one per write with transforms, in order).
fn results(
    db: &DatabaseName,
    converted: &[CommitWrite],
    committed: &ServiceCommitted,
) -> Result<Committed, Status> {
    let bad = |what: &str| status(Code::Internal, format!("the commit's answer {what}"));
    let answer: Answer<'_> =
        serde_json::from_str(&committed.answer.0).map_err(|_| bad("is not JSON"))?;
    let mut read_back = committed.read_back.iter();
    let time = |t: Option<&str>| t.and_then(Timestamp::parse_rfc3339).map(timestamp_to_proto);
    let commit_time = time(answer.commit_time).ok_or_else(|| bad("has no commitTime"))?;
    let update_times = answer
        .update_times
        .as_ref()
        .ok_or_else(|| bad("has no updateTimes"))?;
    let mut next = 0;
    let mut write_results = Vec::with_capacity(converted.len());
    for w in converted {
        next += w.items.len();
        let update_time = if w.delete {
            None
        } else {
            let t = next.checked_sub(1).and_then(|i| update_times.get(i));
            Some(
                t.and_then(|t| time(t.0))
                    .ok_or_else(|| bad("lacks an update time"))?,
            )
        };
        let transform_results = if w.transforms.is_empty() {
            Vec::new()
        } else {
            let doc = read_back
                .next()
                .ok_or_else(|| bad("lacks a read back document"))?;
            let fields = doc
                .as_ref()
                .map(|doc| match typed_json::parse(&doc.data.0) {
                    Ok(Value::Map(fields)) => Ok(fields),
                    _ => Err(bad("reads back a document that is not a map")),
                })
                .transpose()?;
            transform_results(w, fields.as_ref(), db)
        };
        write_results.push(wire::WriteResult {
            update_time,
            transform_results,
        });
    }
    Ok(Committed {
        commit_time,
        write_results,
    })
}

/// The time now (for refusing a precondition in the future).
///
/// # Errors
/// INTERNAL when the system clock is outside years 1970-9999.
pub(super) fn now() -> Result<Timestamp, Status> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_micros()).ok())
        .and_then(Timestamp::from_micros)
        .ok_or_else(|| status(Code::Internal, "the system clock is out of range"))
}

/// BatchWrite: each write committed on its own, in order (not atomic: a failed write leaves
/// the others written); one result and one status per write, an empty result for a failed
/// one.
///
/// # Errors
/// INVALID_ARGUMENT for more than `MAX_WRITES` writes; the failure of a single write is its
/// status, not the call's error.
///
/// # Cancel safety
/// Dropped mid-way, the writes committed so far stay written, the one in flight is not.
pub async fn batch_write(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    writes: &[wire::Write],
) -> Result<wire::BatchWriteResponse, Status> {
    if writes.len() > MAX_WRITES {
        return Err(status(
            Code::InvalidArgument,
            format!(
                "a BatchWrite has at most {MAX_WRITES} writes, this one has {}",
                writes.len()
            ),
        ));
    }
    let mut answer = wire::BatchWriteResponse::default();
    for write in writes {
        let (result, outcome) = match commit(service, caller, db, std::slice::from_ref(write)).await
        {
            Ok(committed) => (
                committed
                    .write_results
                    .into_iter()
                    .next()
                    .unwrap_or_default(),
                RpcStatus::default(),
            ),
            Err(e) => (
                wire::WriteResult::default(),
                RpcStatus {
                    code: e.code() as i32,
                    message: e.message().to_owned(),
                    details: Vec::new(),
                },
            ),
        };
        answer.write_results.push(result);
        answer.status.push(outcome);
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_in_place() {
        let text = r#"{"commitTime": "2026-01-02T03:04:05.000006Z", "updateTimes": ["2026-01-02T03:04:05.000006Z", null]}"#;
        let answer: Answer<'_> = serde_json::from_str(text).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(answer.commit_time, Some("2026-01-02T03:04:05.000006Z"));
        let times: Vec<Option<&str>> = answer
            .update_times
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.0)
            .collect();
        assert_eq!(times, [Some("2026-01-02T03:04:05.000006Z"), None]);
        let missing: Answer<'_> =
            serde_json::from_str("{}").unwrap_or_else(|e| unreachable!("{e}"));
        assert!(missing.commit_time.is_none() && missing.update_times.is_none());
        for bad in ["", r#"{"commitTime": 1}"#, r#"{"updateTimes": [1]}"#] {
            assert!(serde_json::from_str::<Answer<'_>>(bad).is_err(), "{bad}");
        }
    }
}
