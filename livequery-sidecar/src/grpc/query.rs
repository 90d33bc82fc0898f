//! RunQuery and RunAggregationQuery: the `StructuredQuery` in core's structured form (docstore-core's `proto_query`),
//! run by the service's query operation (the rules' `list`), each row a `RunQueryResponse`
//! with its document and the read time; a query without rows answers one response with the
//! read time only, as Firestore does.
//!
//! In a transaction a query is the held transaction's query, at a `read_time` the query over
//! the documents as they were then (the extension's `run_query_at`). Not yet: `explain_options`
//! (UNIMPLEMENTED).

use docstore_core::proto::{
    document_from_typed_json, fields_to_proto, timestamp_to_proto, DatabaseName,
};
use docstore_core::proto_query::{aggregation_query_from_proto, query_from_proto};
use docstore_core::{typed_json, Code, ResourcePath, Timestamp, Value};
use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use tonic::Status;

use super::error::{from_proto, from_service, invalid_argument, status};
use super::transactions::{Consistency, Reading};
use crate::pg::query::ResultRow;
use crate::service::caller::Caller;
use crate::service::query::{run, Query, QueryRows};
use crate::service::{transactions as service_transactions, Service};

/// The answers of RunQuery on `db` under `parent`, in order.
///
/// # Errors
/// INVALID_ARGUMENT for a bad query, the query's errors (FAILED_PRECONDITION for a missing
/// index, the rules' denial), UNIMPLEMENTED for explain; the transaction's and the read
/// time's errors ([`super::transactions`]).
///
/// # Cancel safety
/// As `service::query::run`: dropped mid-way, the transaction is cancelled.
pub async fn run_query(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    parent: Option<&ResourcePath>,
    request: &wire::RunQueryRequest,
) -> Result<Vec<wire::RunQueryResponse>, Status> {
    if request.explain_options.is_some() {
        return Err(status(
            Code::Unimplemented,
            "RunQuery with explain_options is not implemented by pg_docstore yet (docs/grpc.md)",
        ));
    }
    let consistency = Consistency::of_query(request.consistency_selector.as_ref())?;
    let Some(wire::run_query_request::QueryType::StructuredQuery(query)) = &request.query_type
    else {
        return Err(invalid_argument("RunQuery needs a structured_query"));
    };
    let structured = query_from_proto(parent, query, db).map_err(|e| from_proto(&e))?;
    let (mut rows, reading) = rows(service, caller, db, consistency, structured).await?;
    // After the query's snapshot was taken: every row's update time is before it.
    let mut read_time = timestamp_to_proto(now()?);
    let mut answers = Vec::new();
    // No row: the transaction is committed already and its stream is done.
    while let Some(row) = if rows.empty { None } else { rows.next().await } {
        let row = match row {
            Ok(row) => row,
            Err(e) => {
                rows.rollback().await;
                return Err(from_service(e));
            }
        };
        answers.push(wire::RunQueryResponse {
            document: Some(document(db, row)?),
            read_time: Some(read_time),
            ..Default::default()
        });
    }
    rows.commit().await.map_err(from_service)?;
    if let Some(asked) = reading.finish() {
        read_time = asked;
        for answer in &mut answers {
            answer.read_time = Some(asked);
        }
    }
    if answers.is_empty() {
        answers.push(wire::RunQueryResponse {
            read_time: Some(read_time),
            ..Default::default()
        });
    }
    if let Some(first) = answers.first_mut() {
        first.transaction = reading.began;
    }
    Ok(answers)
}

/// The rows of `structured` read with `consistency`: in a held transaction (begun here for a
/// new one) or on their own.
async fn rows(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    consistency: Consistency,
    structured: serde_json::Value,
) -> Result<(QueryRows, Reading), Status> {
    let reading = Reading::start(service, caller, db, consistency).await?;
    let query = match reading.read_time {
        // The documents as they were then: the extension's version history (docs/grpc.md,
        // "Transactions and read times").
        Some(t) => Query::StructuredAt {
            text: structured.to_string(),
            read_time: t.to_rfc3339(),
        },
        None => Query::Structured(structured.to_string()),
    };
    let rows = match &reading.transaction {
        Some(id) => service_transactions::query(service, caller, &db.database, id, &query).await,
        None => run(service, caller, &db.database, &query).await,
    }
    .map_err(from_service)?;
    Ok((rows, reading))
}

/// A row as Firestore's `Document`.
fn document(db: &DatabaseName, row: ResultRow) -> Result<wire::Document, Status> {
    let internal = |what: String| status(Code::Internal, what);
    let ResultRow::Document {
        path,
        data,
        create_time,
        update_time,
    } = row
    else {
        return Err(internal("a query answered an aggregation row".into()));
    };
    let path = ResourcePath::parse(&path).map_err(|e| internal(format!("row path {path}: {e}")))?;
    let time = Timestamp::from_postgres_micros(update_time.0)
        .ok_or_else(|| internal(format!("the update time of {path} is out of range")))?;
    let created = Timestamp::from_postgres_micros(create_time.0)
        .ok_or_else(|| internal(format!("the create time of {path} is out of range")))?;
    document_from_typed_json(db, &path, &data.0, created, time)
        .map_err(|e| internal(format!("the data of {path} is not a document: {e}")))
}

/// The time now: the read time of the answers.
fn now() -> Result<Timestamp, Status> {
    super::commit::now()
}

/// The answer of RunAggregationQuery on `db` under `parent`: one result (alias -> value) with
/// the read time.
///
/// # Errors
/// As [`run_query`]; INVALID_ARGUMENT for no aggregation or an alias twice.
///
/// # Cancel safety
/// As [`run_query`].
pub async fn run_aggregation_query(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    parent: Option<&ResourcePath>,
    request: &wire::RunAggregationQueryRequest,
) -> Result<wire::RunAggregationQueryResponse, Status> {
    if request.explain_options.is_some() {
        return Err(status(
            Code::Unimplemented,
            "RunAggregationQuery with explain_options is not implemented by pg_docstore yet (docs/grpc.md)",
        ));
    }
    let consistency = Consistency::of_aggregation(request.consistency_selector.as_ref())?;
    let Some(wire::run_aggregation_query_request::QueryType::StructuredAggregationQuery(query)) =
        &request.query_type
    else {
        return Err(invalid_argument(
            "RunAggregationQuery needs a structured_aggregation_query",
        ));
    };
    let structured = aggregation_query_from_proto(parent, query, db).map_err(|e| from_proto(&e))?;
    let (mut rows, reading) = rows(service, caller, db, consistency, structured).await?;
    let read_time = timestamp_to_proto(now()?);
    let row = if rows.empty { None } else { rows.next().await };
    let row = match row {
        Some(Ok(row)) => row,
        Some(Err(e)) => {
            rows.rollback().await;
            return Err(from_service(e));
        }
        None => return Err(status(Code::Internal, "an aggregation answered no row")),
    };
    rows.commit().await.map_err(from_service)?;
    let read_time = reading.finish().unwrap_or(read_time);
    let ResultRow::Aggregation { data } = row else {
        return Err(status(Code::Internal, "an aggregation answered a document"));
    };
    let fields = match typed_json::parse(&data.0) {
        Ok(Value::Map(fields)) => fields,
        _ => {
            return Err(status(
                Code::Internal,
                "an aggregation's result is not a map",
            ))
        }
    };
    Ok(wire::RunAggregationQueryResponse {
        result: Some(wire::AggregationResult {
            aggregate_fields: fields_to_proto(&fields, db).into_iter().collect(),
        }),
        read_time: Some(read_time),
        transaction: reading.began,
        ..Default::default()
    })
}
