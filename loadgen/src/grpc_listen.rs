//! The client side of gRPC `Listen` (the sidecar's `--grpc-listen`, docs/grpc.md "Listen"):
//! one HTTP/2 connection and one Listen stream per task, a query target per subscription (the
//! same query as the SSE streams', as a `StructuredQuery`), and what each response delivered,
//! in the same `StreamLog` as an SSE stream's so that one report covers both transports.
//!
//! A document counts as received when the global `NO_CHANGE` that follows its
//! `DocumentChange` arrives: that response is what makes the SDKs raise a snapshot, so it is
//! the moment an app sees the change (SSE carries the change and its position in one event).
//! The commit time of a delivery is the document's `update_time` (its transaction's commit
//! time, docs/storage.md "Commit times"), as SSE's `commitTime`.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use googleapis_tonic_google_firestore_v1::google::firestore::v1::firestore_client::FirestoreClient;
use tokio::sync::{mpsc, watch};
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use wire::listen_response::ResponseType;
use wire::target_change::TargetChangeType;

use crate::clock::now_micros;
use crate::listen::{Delivery, Endpoint, EventMark, Progress, StreamLog};
use crate::LoadError;

/// A city's query: `where city == "cK" order by rating desc limit N` over `collection`.
pub fn city_query(collection: &str, city: &str, limit: usize) -> wire::StructuredQuery {
    use wire::structured_query::{
        field_filter, filter, CollectionSelector, Direction, FieldFilter, FieldReference, Filter,
        Order,
    };
    let field = |path: &str| {
        Some(FieldReference {
            field_path: path.to_owned(),
        })
    };
    wire::StructuredQuery {
        from: vec![CollectionSelector {
            collection_id: collection.to_owned(),
            all_descendants: false,
        }],
        r#where: Some(Filter {
            filter_type: Some(filter::FilterType::FieldFilter(FieldFilter {
                field: field("city"),
                op: field_filter::Operator::Equal as i32,
                value: Some(wire::Value {
                    value_type: Some(wire::value::ValueType::StringValue(city.to_owned())),
                }),
            })),
        }),
        order_by: vec![Order {
            field: field("rating"),
            direction: Direction::Descending as i32,
        }],
        limit: Some(i32::try_from(limit).unwrap_or(i32::MAX)),
        ..Default::default()
    }
}

/// One subscription of a gRPC stream: its target id and query.
#[derive(Debug, Clone)]
pub struct GrpcTarget {
    pub id: i32,
    /// Its query (`city_query`).
    pub query: wire::StructuredQuery,
}

/// `projects/p/databases/{database}`.
fn database_name(database: &str) -> String {
    format!("projects/loadgen/databases/{database}")
}

/// The position of a resume token (`<stream>.<position>`, docs/grpc.md), as SSE's events
/// carry it: one per transaction, the same on every stream.
fn position(token: &[u8]) -> String {
    let text = String::from_utf8_lossy(token);
    text.rsplit_once('.')
        .map_or(text.as_ref(), |(_, p)| p)
        .to_owned()
}

/// What one response did to the log; deliveries wait in `pending` for the next global
/// NO_CHANGE, which stamps them. Returns the targets that became current.
fn record(
    response: &wire::ListenResponse,
    received_us: i64,
    root: &str,
    log: &mut StreamLog,
    pending: &mut Vec<Delivery>,
    live: &mut HashSet<i32>,
) -> usize {
    match &response.response_type {
        Some(ResponseType::DocumentChange(change)) => {
            if let Some(document) = &change.document {
                let path = document
                    .name
                    .strip_prefix(root)
                    .unwrap_or(&document.name)
                    .to_owned();
                let commit_us = document
                    .update_time
                    .as_ref()
                    .map(|t| t.seconds * 1_000_000 + i64::from(t.nanos) / 1_000);
                pending.push(Delivery {
                    path,
                    received_us,
                    commit_us,
                });
            }
            0
        }
        Some(ResponseType::TargetChange(change)) => {
            let kind = TargetChangeType::try_from(change.target_change_type).ok();
            match kind {
                Some(TargetChangeType::Current) => change
                    .target_ids
                    .iter()
                    .filter(|id| live.insert(**id))
                    .count(),
                Some(TargetChangeType::NoChange) if change.target_ids.is_empty() => {
                    if pending.is_empty() {
                        log.heartbeats += 1;
                    } else {
                        let commit_us = pending.iter().filter_map(|d| d.commit_us).max();
                        log.marks.push(EventMark {
                            received_us,
                            commit_us,
                            position: position(&change.resume_token),
                        });
                        for mut d in pending.drain(..) {
                            d.received_us = received_us;
                            log.deliveries.push(d);
                        }
                    }
                    0
                }
                Some(TargetChangeType::Remove | TargetChangeType::Reset) => {
                    log.resets.push(format!(
                        "{:?} of {:?}: {:?}",
                        kind, change.target_ids, change.cause
                    ));
                    0
                }
                _ => 0,
            }
        }
        _ => 0,
    }
}

/// One HTTP/2 connection to the sidecar's gRPC front end (`--grpc`).
///
/// # Errors
/// No `--grpc`, or the connection failed.
pub async fn connect(endpoint: &Endpoint) -> Result<Channel, LoadError> {
    let addr = endpoint
        .grpc
        .ok_or_else(|| LoadError::Setup("--transport grpc needs --grpc".to_owned()))?;
    Channel::from_shared(format!("http://{addr}"))
        .map_err(LoadError::http)?
        .tcp_nodelay(true)
        .connect()
        .await
        .map_err(LoadError::http)
}

/// Open one Listen stream with `targets` (on `shared`, or on a connection of its own) and read it until `stop` turns true, counting in
/// `progress` (deliveries of paths that contain `tag`).
///
/// # Errors
/// The connection failed, or the sidecar refused the stream (its status).
pub async fn run_stream(
    endpoint: Endpoint,
    targets: Vec<GrpcTarget>,
    progress: Arc<Progress>,
    tag: Arc<str>,
    mut stop: watch::Receiver<bool>,
    shared: Option<Channel>,
) -> Result<StreamLog, LoadError> {
    let channel = match shared {
        Some(c) => c,
        None => connect(&endpoint).await?,
    };
    let mut client = FirestoreClient::new(channel).max_decoding_message_size(64 << 20);
    let database = database_name(&endpoint.database);
    let root = format!("{database}/documents/");
    let (requests, rx) = mpsc::channel(targets.len().max(1));
    for t in &targets {
        let target = wire::Target {
            target_id: t.id,
            target_type: Some(wire::target::TargetType::Query(wire::target::QueryTarget {
                parent: format!("{database}/documents"),
                query_type: Some(wire::target::query_target::QueryType::StructuredQuery(
                    t.query.clone(),
                )),
            })),
            ..Default::default()
        };
        requests
            .send(wire::ListenRequest {
                database: database.clone(),
                labels: Default::default(),
                target_change: Some(wire::listen_request::TargetChange::AddTarget(target)),
            })
            .await
            .map_err(|e| LoadError::Task(e.to_string()))?;
    }
    // The request stream stays open (and the targets with it) while `requests` lives.
    let outgoing =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    let mut request = tonic::Request::new(outgoing);
    let bearer = MetadataValue::try_from(format!("Bearer {}", endpoint.token))
        .map_err(|e| LoadError::Setup(format!("the token is not a header value: {e}")))?;
    request.metadata_mut().insert("authorization", bearer);
    let prefix = MetadataValue::try_from(database.as_str())
        .map_err(|e| LoadError::Setup(format!("the database is not a header value: {e}")))?;
    request
        .metadata_mut()
        .insert("google-cloud-resource-prefix", prefix);
    let mut responses = client
        .listen(request)
        .await
        .map_err(|s| LoadError::Refused(format!("{:?}: {}", s.code(), s.message())))?
        .into_inner();
    let mut log = StreamLog::default();
    let mut pending = Vec::new();
    let mut live = HashSet::new();
    loop {
        let message = tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() { break; }
                continue;
            }
            message = responses.message() => message,
        };
        let received_us = now_micros();
        let response = match message {
            Ok(Some(response)) => response,
            Ok(None) => {
                log.resets.push("the sidecar ended the stream".to_owned());
                break;
            }
            Err(status) => {
                log.resets
                    .push(format!("{:?}: {}", status.code(), status.message()));
                break;
            }
        };
        log.bytes += prost::Message::encoded_len(&response) as u64;
        let before = log.deliveries.len();
        let n = record(
            &response,
            received_us,
            &root,
            &mut log,
            &mut pending,
            &mut live,
        );
        progress.live.fetch_add(n, Ordering::Relaxed);
        let ours = log.deliveries[before..]
            .iter()
            .filter(|d| d.path.contains(&*tag))
            .count();
        progress.delivered.fetch_add(ours, Ordering::Relaxed);
    }
    drop(requests);
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "projects/loadgen/databases/(default)/documents/";

    fn change(name: &str, seconds: i64, nanos: i32) -> wire::ListenResponse {
        wire::ListenResponse {
            response_type: Some(ResponseType::DocumentChange(wire::DocumentChange {
                document: Some(wire::Document {
                    name: format!("{ROOT}{name}"),
                    update_time: Some(prost_types::Timestamp { seconds, nanos }),
                    ..Default::default()
                }),
                target_ids: vec![1],
                removed_target_ids: vec![],
            })),
        }
    }

    fn target(kind: TargetChangeType, ids: Vec<i32>) -> wire::ListenResponse {
        wire::ListenResponse {
            response_type: Some(ResponseType::TargetChange(wire::TargetChange {
                target_change_type: kind as i32,
                target_ids: ids,
                resume_token: b"s.0/10".to_vec(),
                ..Default::default()
            })),
        }
    }

    #[test]
    fn changes_are_received_at_the_no_change_that_follows_them() {
        let mut log = StreamLog::default();
        let mut pending = Vec::new();
        let mut live = HashSet::new();
        let mut feed = |r: &wire::ListenResponse, at: i64, log: &mut StreamLog| {
            record(r, at, ROOT, log, &mut pending, &mut live)
        };
        assert_eq!(
            feed(&target(TargetChangeType::Add, vec![1]), 1, &mut log),
            0
        );
        assert_eq!(
            feed(&target(TargetChangeType::Current, vec![1, 2]), 2, &mut log),
            2
        );
        assert_eq!(
            feed(&target(TargetChangeType::Current, vec![1]), 2, &mut log),
            0
        );
        feed(&target(TargetChangeType::NoChange, vec![]), 3, &mut log);
        assert_eq!(log.heartbeats, 1);
        feed(&change("loadgen/w1", 7, 5_000), 4, &mut log);
        assert!(log.deliveries.is_empty());
        feed(&target(TargetChangeType::NoChange, vec![]), 9, &mut log);
        assert_eq!(log.deliveries.len(), 1);
        assert_eq!(log.deliveries[0].path, "loadgen/w1");
        assert_eq!(log.deliveries[0].received_us, 9);
        assert_eq!(log.deliveries[0].commit_us, Some(7_000_005));
        assert_eq!(log.marks.len(), 1);
        assert_eq!(log.marks[0].commit_us, Some(7_000_005));
        assert_eq!(log.marks[0].position, "0/10");
        feed(&target(TargetChangeType::Reset, vec![1]), 10, &mut log);
        assert_eq!(log.resets.len(), 1);
    }

    #[test]
    fn the_query_is_the_sse_streams_query() {
        let q = city_query("loadgen", "c7", 10);
        assert_eq!(q.from[0].collection_id, "loadgen");
        assert_eq!(q.limit, Some(10));
        assert_eq!(q.order_by.len(), 1);
        assert_eq!(
            q.order_by[0].direction,
            wire::structured_query::Direction::Descending as i32
        );
    }
}
