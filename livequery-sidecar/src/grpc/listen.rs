//! Listen: the live queries of the session hub (`session/`, the SSE stream's matcher,
//! hand-off and changelog) rendered as Firestore's `ListenResponse`s (docs/grpc.md, "Listen").
//!
//! One gRPC stream is one session stream. Its first `add_target` opens the session stream (or
//! resumes the one its resume token names), later ones add targets to it; a gRPC target is
//! the session target named by its id (a documents target of several documents: one session
//! target per document, `<id>.<k>`). [`Renderer`] turns the session's typed events into
//! protobuf: a new target's first results as `ADD` (sent when the request is taken), one
//! `DocumentChange` per document, `CURRENT`; each later transaction's changes as
//! `DocumentChange`, `DocumentDelete` or `DocumentRemove` (a document leaving a query); and
//! after every event at which every target is current, the global `NO_CHANGE` (no target ids)
//! with the position's read time and resume token, which is when the SDKs deliver a snapshot.
//! A `reset` is `RESET`, followed by the full results and an `ExistenceFilter` with their
//! count; a stream the rules no longer allow ends with `REMOVE` carrying PERMISSION_DENIED.
//! A target resumed with an `expected_count` gets an `ExistenceFilter` with its true count
//! (the session's [`Sizes`], counted on through later changes) before its CURRENT.

use std::collections::BTreeMap;
use std::sync::Arc;

use docstore_core::proto::{document_to_proto, timestamp_to_proto, DatabaseName, ProtoTimestamp};
use docstore_core::proto_query::query_from_proto;
use docstore_core::Code;
use futures_util::StreamExt;
use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use googleapis_tonic_google_firestore_v1::google::rpc;
use tokio::sync::mpsc;
use tonic::metadata::MetadataMap;
use tonic::{Status, Streaming};
use wire::listen_response::ResponseType;
use wire::target_change::TargetChangeType;

use super::error::{from_proto, from_service, invalid_argument, status};
use super::names;
use crate::matcher::{DocChange, Document, TargetDelta, TargetResult, TargetSpec};
use crate::service::caller::Caller;
use crate::service::listen as live;
use crate::service::Service;
use crate::session::events::{parse_token, Event, EventKind, ResetReason};
use crate::session::{Connection, Session, Sizes, TargetRequest};
use crate::source::Lsn;

/// Responses queued to the client before the stream stops reading the hub (the hub's queue
/// then fills, and a client that does not read is closed as lagged).
const OUT_QUEUE: usize = 256;

/// The answer stream of Listen.
pub type Answers = mpsc::Receiver<Result<wire::ListenResponse, Status>>;

/// Serve one Listen stream: read the client's target changes from `requests`, answer on the
/// returned receiver. Runs until the client goes away or ends its requests.
///
/// # Errors
/// UNAVAILABLE when this sidecar runs without live queries (before the stream opens).
pub fn listen(
    service: &Arc<Service>,
    caller: Caller,
    metadata: MetadataMap,
    requests: Streaming<wire::ListenRequest>,
) -> Result<Answers, Status> {
    let session = live::session(service).map_err(from_service)?;
    let (out, answers) = mpsc::channel(OUT_QUEUE);
    let stream = Listener {
        session,
        caller,
        metadata,
        db: None,
        connection: None,
        renderer: Renderer::default(),
        out,
    };
    tokio::spawn(stream.run(requests));
    Ok(answers)
}

/// One Listen stream.
struct Listener {
    session: Session,
    caller: Caller,
    metadata: MetadataMap,
    /// The database of the stream (its first request's).
    db: Option<DatabaseName>,
    connection: Option<Connection>,
    renderer: Renderer,
    out: mpsc::Sender<Result<wire::ListenResponse, Status>>,
}

/// Why the loop stopped.
enum Stop {
    /// The client went away or ended its requests.
    Done,
    /// End the stream with this status.
    Fail(Status),
}

impl Listener {
    /// # Cancel safety
    /// Runs as its own task; dropping it leaves the session stream waiting for a resume.
    async fn run(mut self, mut requests: Streaming<wire::ListenRequest>) {
        let mut shutdown = crate::http::listen::shutdown_signal();
        let stop = loop {
            let step = tokio::select! {
                request = requests.next() => match request {
                    Some(Ok(request)) => self.on_request(request).await,
                    Some(Err(_)) | None => Err(Stop::Done),
                },
                frame = next_frame(self.connection.as_mut()) => self.on_frame(frame).await,
                () = shut_down(&mut shutdown) => Err(Stop::Fail(Status::unavailable(
                    "the server is shutting down; resume on another one",
                ))),
            };
            if let Err(stop) = step {
                break stop;
            }
        };
        if let Stop::Fail(status) = stop {
            let _ = self.out.send(Err(status)).await;
        }
    }

    async fn send(&self, responses: Vec<wire::ListenResponse>) -> Result<(), Stop> {
        for response in responses {
            self.out.send(Ok(response)).await.map_err(|_| Stop::Done)?;
        }
        Ok(())
    }

    async fn on_request(&mut self, request: wire::ListenRequest) -> Result<(), Stop> {
        let db = names::database(&request.database).map_err(Stop::Fail)?;
        names::check_prefix(&self.metadata, &db).map_err(Stop::Fail)?;
        match &self.db {
            Some(held) if held.database != db.database => {
                return Err(Stop::Fail(invalid_argument(format!(
                    "a Listen stream is on one database: it is on \"{}\"",
                    held.database
                ))))
            }
            Some(_) => {}
            None => self.db = Some(db.clone()),
        }
        match request.target_change {
            Some(wire::listen_request::TargetChange::AddTarget(target)) => {
                self.add(&db, target).await
            }
            Some(wire::listen_request::TargetChange::RemoveTarget(id)) => {
                self.remove(id, None).await
            }
            None => Ok(()),
        }
    }

    /// ADD, then the target's reads; a target refused is REMOVE with the cause.
    async fn add(&mut self, db: &DatabaseName, target: wire::Target) -> Result<(), Stop> {
        let id = if target.target_id == 0 {
            self.renderer.free_id()
        } else {
            target.target_id
        };
        if self.renderer.targets.contains_key(&id) {
            return Err(Stop::Fail(invalid_argument(format!(
                "the stream has a target {id} already"
            ))));
        }
        self.send(vec![target_change(TargetChangeType::Add, vec![id])])
            .await?;
        let requests = match target_requests(id, db, &target) {
            Ok(requests) => requests,
            Err(cause) => return self.send(vec![removed(id, &cause)]).await,
        };
        let names: Vec<String> = requests.iter().map(|r| r.id.clone()).collect();
        let resume = match &target.resume_type {
            Some(wire::target::ResumeType::ResumeToken(token)) => Some(
                std::str::from_utf8(token)
                    .ok()
                    .and_then(parse_token)
                    .ok_or(()),
            ),
            Some(wire::target::ResumeType::ReadTime(_)) => Some(Err(())),
            None => None,
        };
        let mut watched = Watched {
            names,
            once: target.once,
            current: false,
            // The client holds results: the first full result comes after a RESET, with an
            // ExistenceFilter.
            reset: resume.is_some(),
            resumed: false,
            filter: None,
        };
        let added = match (&self.connection, resume) {
            (None, Some(Ok(token))) => {
                let stream = token.0.clone();
                match live::open(
                    &self.session,
                    &self.caller,
                    &db.database,
                    requests,
                    Some(token),
                )
                .await
                {
                    Ok(connection) => {
                        // What the client says it holds is checked at its CURRENT.
                        let filter = target
                            .expected_count
                            .and(connection.sizes.as_ref())
                            .and_then(|sizes| Filter::of(sizes, &watched.names));
                        if connection.stream == stream {
                            // The stream is resumed: the target is current from its token on
                            // when the stream had it; otherwise it is added afresh.
                            let owner = live::owner(&self.caller, &db.database).key;
                            let first = watched.names[0].clone();
                            let held = self
                                .session
                                .holds(&db.database, &stream, &owner, &first)
                                .await;
                            self.connection = Some(connection);
                            match held {
                                Ok(true) => {
                                    watched.resumed = true;
                                    watched.reset = false;
                                    watched.filter = filter;
                                    Ok(())
                                }
                                Ok(false) => self.add_to_stream(db, &target, id).await,
                                Err(e) => Err(from_service(e.into())),
                            }
                        } else {
                            self.connection = Some(connection);
                            Ok(())
                        }
                    }
                    Err(e) => Err(from_service(e)),
                }
            }
            (None, _) => live::open(&self.session, &self.caller, &db.database, requests, None)
                .await
                .map(|connection| self.connection = Some(connection))
                .map_err(from_service),
            (Some(connection), _) => {
                let stream = connection.stream.clone();
                live::add_targets(&self.session, &self.caller, &db.database, &stream, requests)
                    .await
                    .map_err(from_service)
            }
        };
        match added {
            Ok(()) => {
                self.renderer.targets.insert(id, watched);
                Ok(())
            }
            Err(cause) => self.send(vec![removed(id, &cause)]).await,
        }
    }

    /// Add the session targets of `target` to the running stream.
    async fn add_to_stream(
        &self,
        db: &DatabaseName,
        target: &wire::Target,
        id: i32,
    ) -> Result<(), Status> {
        let Some(connection) = &self.connection else {
            return Err(status(Code::Internal, "no stream to add a target to"));
        };
        let requests = target_requests(id, db, target)?;
        live::add_targets(
            &self.session,
            &self.caller,
            &db.database,
            &connection.stream,
            requests,
        )
        .await
        .map_err(from_service)
    }

    /// Remove a target: its session targets, then REMOVE (with `cause` when refused).
    async fn remove(&mut self, id: i32, cause: Option<&Status>) -> Result<(), Stop> {
        let Some(watched) = self.renderer.targets.remove(&id) else {
            return Err(Stop::Fail(invalid_argument(format!(
                "the stream has no target {id}"
            ))));
        };
        if let Some(connection) = &self.connection {
            for name in &watched.names {
                // Gone already (the stream ended): nothing to remove.
                let _ = live::remove_target(&self.session, &self.caller, &connection.stream, name)
                    .await;
            }
        }
        let response = match cause {
            Some(cause) => removed(id, cause),
            None => target_change(TargetChangeType::Remove, vec![id]),
        };
        self.send(vec![response]).await
    }

    async fn on_frame(&mut self, frame: Option<Arc<Event>>) -> Result<(), Stop> {
        let Some(event) = frame else {
            return Err(Stop::Fail(Status::aborted(
                "another connection resumed this stream",
            )));
        };
        let Some(db) = self.db.clone() else {
            return Ok(());
        };
        let rendered = self.renderer.render(&db, &event);
        self.send(rendered.responses).await?;
        match rendered.end {
            Some(End::Lagged) => Err(Stop::Fail(Status::unavailable(
                "the client did not read its events in time; resume with the last resume token",
            ))),
            Some(End::Denied(cause)) => {
                let ids: Vec<i32> = self.renderer.targets.keys().copied().collect();
                self.renderer.targets.clear();
                let removals = ids.into_iter().map(|id| removed(id, &cause)).collect();
                self.send(removals).await?;
                Err(Stop::Done)
            }
            None => {
                for id in rendered.once_done {
                    self.remove(id, None).await?;
                }
                Ok(())
            }
        }
    }
}

/// Completes once the process is shutting down.
async fn shut_down(signal: &mut tokio::sync::watch::Receiver<bool>) {
    if signal.wait_for(|down| *down).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The next event of the session stream: the replayed ones first, then the queue; the last
/// frame (a lagged stream's reset) when the hub closed it. `None`: another connection took
/// the stream over. Pending forever without a stream.
async fn next_frame(connection: Option<&mut Connection>) -> Option<Arc<Event>> {
    let Some(connection) = connection else {
        return std::future::pending().await;
    };
    if !connection.first.is_empty() {
        return Some(Arc::clone(&connection.first.remove(0).event));
    }
    match connection.frames.recv().await {
        Some(frame) => Some(frame.event),
        None => match connection.closed.try_recv() {
            Ok(frame) => Some(frame.event),
            Err(_) => None,
        },
    }
}

/// The session targets of a gRPC target.
fn target_requests(
    id: i32,
    db: &DatabaseName,
    target: &wire::Target,
) -> Result<Vec<TargetRequest>, Status> {
    let refused = |e: crate::matcher::MatcherError| status(e.kind().code(), e.to_string());
    match &target.target_type {
        Some(wire::target::TargetType::Query(query)) => {
            let (other, parent) = names::parent(&query.parent)?;
            same_database(db, &other)?;
            let Some(wire::target::query_target::QueryType::StructuredQuery(structured)) =
                &query.query_type
            else {
                return Err(invalid_argument("a query target needs a structured_query"));
            };
            let json =
                query_from_proto(parent.as_ref(), structured, db).map_err(|e| from_proto(&e))?;
            let spec = TargetSpec::parse_structured(&json).map_err(refused)?;
            Ok(vec![TargetRequest {
                id: id.to_string(),
                spec,
            }])
        }
        Some(wire::target::TargetType::Documents(documents)) => {
            if documents.documents.is_empty() {
                return Err(invalid_argument("a documents target needs a document"));
            }
            let single = documents.documents.len() == 1;
            documents
                .documents
                .iter()
                .enumerate()
                .map(|(k, name)| {
                    let (other, path) = names::document(name)?;
                    same_database(db, &other)?;
                    Ok(TargetRequest {
                        id: if single {
                            id.to_string()
                        } else {
                            format!("{id}.{k}")
                        },
                        spec: TargetSpec::Document(path),
                    })
                })
                .collect()
        }
        None => Err(invalid_argument("a target needs a query or documents")),
    }
}

fn same_database(db: &DatabaseName, other: &DatabaseName) -> Result<(), Status> {
    if other.database == db.database {
        Ok(())
    } else {
        Err(invalid_argument(format!(
            "a Listen stream is on one database: it is on \"{}\"",
            db.database
        )))
    }
}

/// The gRPC target id of a session target's name (`<id>` or `<id>.<k>`).
fn grpc_id(name: &str) -> Option<i32> {
    name.split('.').next()?.parse().ok()
}

fn target_change(kind: TargetChangeType, target_ids: Vec<i32>) -> wire::ListenResponse {
    wire::ListenResponse {
        response_type: Some(ResponseType::TargetChange(wire::TargetChange {
            target_change_type: kind as i32,
            target_ids,
            ..Default::default()
        })),
    }
}

/// REMOVE of `id` with `cause`.
fn removed(id: i32, cause: &Status) -> wire::ListenResponse {
    wire::ListenResponse {
        response_type: Some(ResponseType::TargetChange(wire::TargetChange {
            target_change_type: TargetChangeType::Remove as i32,
            target_ids: vec![id],
            cause: Some(rpc::Status {
                code: cause.code() as i32,
                message: cause.message().to_owned(),
                details: Vec::new(),
            }),
            ..Default::default()
        })),
    }
}

/// A gRPC target of the stream.
#[derive(Debug)]
struct Watched {
    /// Its session targets.
    names: Vec<String>,
    /// Removed once current.
    once: bool,
    /// CURRENT was sent (and no RESET since).
    current: bool,
    /// The client holds results the next full result replaces: RESET before it and an
    /// ExistenceFilter after it.
    reset: bool,
    /// Resumed from its token: CURRENT after the stream's next event that is not a reset.
    resumed: bool,
    /// Resumed with an `expected_count`: the ExistenceFilter to send before that CURRENT.
    filter: Option<Filter>,
}

/// The true size of a resumed target's result, for the ExistenceFilter of its CURRENT: known
/// at the stream's position when it resumed (the session's [`Sizes`]), counted on through the
/// changes after it. Its CURRENT waits for an event at or after that position, the end of
/// the replay, so that the count is the one at CURRENT's position.
#[derive(Debug)]
struct Filter {
    at: Lsn,
    count: i64,
}

impl Filter {
    /// The filter of the session targets `names` (`None` when a size is not known).
    fn of(sizes: &Sizes, names: &[String]) -> Option<Filter> {
        let mut count = 0i64;
        for name in names {
            count += i64::try_from(*sizes.documents.get(name)?).ok()?;
        }
        Some(Filter {
            at: sizes.position,
            count,
        })
    }
}

/// How a stream ends after an event.
#[derive(Debug)]
enum End {
    /// The client read too slowly (the session closed the stream).
    Lagged,
    /// The rules no longer allow the stream: every target is removed with this cause.
    Denied(Status),
}

/// What one event renders to.
#[derive(Debug, Default)]
struct Rendered {
    responses: Vec<wire::ListenResponse>,
    /// `once` targets that became current: removed now.
    once_done: Vec<i32>,
    end: Option<End>,
}

/// The session's events as `ListenResponse`s, with the state of the client's targets.
#[derive(Debug, Default)]
struct Renderer {
    targets: BTreeMap<i32, Watched>,
}

impl Renderer {
    /// A target id the stream does not use (for a target that asks the server to pick one).
    fn free_id(&self) -> i32 {
        self.targets
            .keys()
            .next_back()
            .map_or(1, |last| last.saturating_add(1))
    }

    fn render(&mut self, db: &DatabaseName, event: &Event) -> Rendered {
        let mut out = Rendered::default();
        let token = event.token().into_bytes();
        let read_time = event.read_time.map(timestamp_to_proto);
        match &event.kind {
            EventKind::Reset { reason, message } => {
                match reason {
                    ResetReason::Lagged => out.end = Some(End::Lagged),
                    ResetReason::Permission => {
                        out.end = Some(End::Denied(status(Code::PermissionDenied, message)));
                    }
                    ResetReason::SlotLost | ResetReason::RetentionPassed | ResetReason::Restart => {
                        let ids: Vec<i32> = self.targets.keys().copied().collect();
                        for watched in self.targets.values_mut() {
                            watched.current = false;
                            watched.reset = true;
                            watched.resumed = false;
                            watched.filter = None;
                        }
                        if !ids.is_empty() {
                            out.responses
                                .push(target_change(TargetChangeType::Reset, ids));
                        }
                    }
                }
                return out;
            }
            EventKind::Heartbeat => {}
            EventKind::Change { changes } => {
                self.count(event.position, changes);
                self.changes(db, event, changes, &mut out);
            }
            EventKind::Snapshot { results, changes } => {
                self.count(event.position, changes);
                self.changes(db, event, changes, &mut out);
                self.results(db, results, &token, read_time, &mut out);
            }
        }
        for (id, watched) in &mut self.targets {
            if watched.resumed {
                if let Some(filter) = &watched.filter {
                    if event.position < filter.at {
                        // Still replaying: CURRENT comes at the end of the replay.
                        continue;
                    }
                    out.responses.push(existence_filter(*id, filter.count));
                    watched.filter = None;
                }
                watched.resumed = false;
                watched.current = true;
                out.responses.push(current(*id, &token, read_time));
            }
        }
        if !self.targets.is_empty() && self.targets.values().all(|w| w.current) {
            if let Some(read_time) = read_time {
                out.responses.push(wire::ListenResponse {
                    response_type: Some(ResponseType::TargetChange(wire::TargetChange {
                        target_change_type: TargetChangeType::NoChange as i32,
                        target_ids: Vec::new(),
                        cause: None,
                        resume_token: token,
                        read_time: Some(read_time),
                    })),
                });
            }
        }
        out
    }

    /// The full results of targets: RESET when the client holds results, the documents, the
    /// ExistenceFilter after a RESET, CURRENT.
    fn results(
        &mut self,
        db: &DatabaseName,
        results: &[(String, TargetResult)],
        token: &[u8],
        read_time: Option<ProtoTimestamp>,
        out: &mut Rendered,
    ) {
        let mut by_id: BTreeMap<i32, Vec<&Document>> = BTreeMap::new();
        for (name, result) in results {
            let Some(id) = grpc_id(name).filter(|id| self.targets.contains_key(id)) else {
                continue;
            };
            let docs = by_id.entry(id).or_default();
            if let TargetResult::Documents(found) = result {
                docs.extend(found.iter());
            }
        }
        for (id, docs) in by_id {
            let Some(watched) = self.targets.get_mut(&id) else {
                continue;
            };
            let reset = watched.reset || watched.current;
            if reset {
                out.responses
                    .push(target_change(TargetChangeType::Reset, vec![id]));
            }
            for doc in &docs {
                out.responses.push(document_change(db, doc, id));
            }
            if reset {
                out.responses.push(existence_filter(
                    id,
                    i64::try_from(docs.len()).unwrap_or(i64::MAX),
                ));
            }
            out.responses.push(current(id, token, read_time));
            watched.current = true;
            watched.reset = false;
            // The client has the full result now: nothing left to check.
            watched.filter = None;
            if watched.once {
                out.once_done.push(id);
            }
        }
    }

    /// Count the documents entering and leaving resumed targets after their filter's
    /// position (a change the count cannot follow drops the filter).
    fn count(&mut self, position: Lsn, changes: &[(String, TargetDelta)]) {
        for (name, delta) in changes {
            let Some(watched) = grpc_id(name).and_then(|id| self.targets.get_mut(&id)) else {
                continue;
            };
            let Some(filter) = watched.filter.as_mut().filter(|f| position > f.at) else {
                continue;
            };
            match delta {
                TargetDelta::Changes(changes) => {
                    for change in changes {
                        match change {
                            DocChange::Added { .. } => filter.count += 1,
                            DocChange::Removed { .. } => filter.count -= 1,
                            DocChange::Modified { .. } => {}
                        }
                    }
                }
                TargetDelta::Aggregate(_) | TargetDelta::NeedsRequery => watched.filter = None,
            }
        }
    }

    /// What one transaction did to current targets.
    fn changes(
        &self,
        db: &DatabaseName,
        event: &Event,
        changes: &[(String, TargetDelta)],
        out: &mut Rendered,
    ) {
        let read_time = event.read_time.map(timestamp_to_proto);
        for (name, delta) in changes {
            let Some(id) = grpc_id(name).filter(|id| self.targets.contains_key(id)) else {
                continue;
            };
            let TargetDelta::Changes(changes) = delta else {
                continue;
            };
            for change in changes {
                let response = match change {
                    DocChange::Added { doc, .. } | DocChange::Modified { doc, .. } => {
                        document_change(db, doc, id)
                    }
                    DocChange::Removed { path, .. } if event.deleted.contains(path) => {
                        wire::ListenResponse {
                            response_type: Some(ResponseType::DocumentDelete(
                                wire::DocumentDelete {
                                    document: db.document_name(path),
                                    removed_target_ids: vec![id],
                                    read_time,
                                },
                            )),
                        }
                    }
                    DocChange::Removed { path, .. } => wire::ListenResponse {
                        response_type: Some(ResponseType::DocumentRemove(wire::DocumentRemove {
                            document: db.document_name(path),
                            removed_target_ids: vec![id],
                            read_time,
                        })),
                    },
                };
                out.responses.push(response);
            }
        }
    }
}

/// The ExistenceFilter of `id`: its result holds `count` documents.
fn existence_filter(id: i32, count: i64) -> wire::ListenResponse {
    wire::ListenResponse {
        response_type: Some(ResponseType::Filter(wire::ExistenceFilter {
            target_id: id,
            count: i32::try_from(count.max(0)).unwrap_or(i32::MAX),
            unchanged_names: None,
        })),
    }
}

/// CURRENT of `id` at a position.
fn current(id: i32, token: &[u8], read_time: Option<ProtoTimestamp>) -> wire::ListenResponse {
    wire::ListenResponse {
        response_type: Some(ResponseType::TargetChange(wire::TargetChange {
            target_change_type: TargetChangeType::Current as i32,
            target_ids: vec![id],
            cause: None,
            resume_token: token.to_vec(),
            read_time,
        })),
    }
}

fn document_change(db: &DatabaseName, doc: &Document, id: i32) -> wire::ListenResponse {
    wire::ListenResponse {
        response_type: Some(ResponseType::DocumentChange(wire::DocumentChange {
            document: Some(document_to_proto(
                db,
                &doc.path,
                &doc.fields,
                doc.create_time,
                doc.update_time,
            )),
            target_ids: vec![id],
            removed_target_ids: Vec::new(),
        })),
    }
}
