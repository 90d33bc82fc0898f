//! The wire format between gateways and matchers (`--role matcher`, `--matching remote`;
//! docs/architecture.md, "Processes"): the calls a gateway sends to a matcher over NATS
//! request/reply, the matcher's answers, and the frames the matcher forwards for each
//! connection it serves for a gateway.
//!
//! Every message is a version byte ([`VERSION`]) followed by a JSON object. A frame carries
//! its event whole: position, commit and read time (microseconds), the deleted documents'
//! names, and the event's kind with the targets' results or changes; a document is its name,
//! its fields as typed JSON text, and its create and update times.
//!
//! A forwarded message larger than the NATS server's `max_payload` goes as parts, as the
//! ingest's large transactions do (`source/wire.rs`): consecutive slices of its bytes, each
//! with headers naming its route ([`ROUTE_HEADER`]), its message's number and size
//! ([`FRAME_HEADER`], `<seq>/<bytes>`) and its place ([`PART_HEADER`], `i/n`).
//! [`Gatherer`] puts them back together on the gateway and hands a message on only whole; a
//! message is at most [`MAX_MESSAGE`] bytes, which bounds what a gathering holds.
//!
//! Every message is outside input to its reader: [`decode_request`], [`decode_answer`],
//! [`decode_forwarded`], [`PartHeader::parse`] and [`Gatherer::push`] refuse anything
//! malformed with a [`WireError`] and never panic (the fuzz target `matcher_wire` checks
//! that, that what decodes encodes to what decodes to the same value, and that a frame split
//! into parts is put back together as it was).

use std::collections::BTreeMap;
use std::sync::Arc;

use docstore_core::path::ResourcePath;
use docstore_core::typed_json;
use docstore_core::value::{Map, Timestamp, Value};
use docstore_core::Code;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use thiserror::Error;

use super::events::{self, At, Event, EventKind, Frame, ResetReason};
use super::registry::TargetEntry;
use super::{Caller, Sizes, TargetRequest};
use crate::matcher::{DocChange, Document, TargetDelta, TargetResult};
use crate::pg::RunAs;
use crate::source::Lsn;

/// The version byte of this format.
pub const VERSION: u8 = 1;

/// The largest message a reader decodes, and a matcher forwards (64 MiB; a frame larger
/// closes its connection with `reset {lagged}`).
pub const MAX_MESSAGE: usize = 64 << 20;

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum WireError {
    #[error("empty message")]
    Empty,
    #[error("matcher wire format version {0}, this process reads version 1")]
    Version(u8),
    #[error("message of {0} bytes is over the limit")]
    TooLarge(usize),
    #[error("message is not valid: {0}")]
    Json(String),
    #[error("message field {0} is not valid: {1}")]
    Field(&'static str, String),
}

fn field(name: &'static str) -> impl Fn(String) -> WireError {
    move |why| WireError::Field(name, why)
}

/// A call of a gateway to a matcher.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// Open a stream; its frames go to the gateway under `route`.
    Open {
        database: String,
        caller: Caller,
        targets: Vec<TargetRequest>,
        lead: Option<ResetReason>,
    },
    /// Resume (or adopt) a stream after `position`; its frames go under `route`.
    Resume {
        database: String,
        stream: String,
        position: Lsn,
        caller: Caller,
    },
    Add {
        database: String,
        stream: String,
        caller: Caller,
        targets: Vec<TargetRequest>,
    },
    Holds {
        database: String,
        stream: String,
        caller: String,
        target: String,
    },
    Remove {
        stream: String,
        caller: String,
        target: String,
    },
    /// Stop forwarding the connection of `route` (its client left, or it lagged): the
    /// stream waits for a resume, as a disconnected stream does.
    Detach,
    /// Which of these routes of the calling gateway the matcher still forwards (routes that
    /// have been silent on the gateway; the request's own route is unused).
    Forwarding { routes: Vec<String> },
}

/// A call with whom it is for.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The calling gateway's id (its frames' subject).
    pub gateway: String,
    /// The gateway's id of the connection the frames belong to.
    pub route: String,
    pub call: Call,
}

/// A matcher's answer to a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A connection: its frames follow under the call's route, numbered from 0.
    Connected {
        stream: String,
        sizes: Option<Sizes>,
    },
    /// A resume found nothing: start a new stream after a reset with this reason.
    Unknown(ResetReason),
    Done,
    Holds(bool),
    /// The routes of a [`Call::Forwarding`] the matcher still forwards.
    Forwarding(Vec<String>),
    Error {
        code: Code,
        message: String,
        /// The cap of a RESOURCE_EXHAUSTED.
        limit: Option<&'static str>,
    },
}

/// What a forwarded message carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// One event of the stream.
    Frame(Frame),
    /// The connection's last frame (`reset {lagged}`); the stream is closed.
    Closed(Frame),
    /// The connection ended (another connection took the stream over).
    End,
}

/// A message a matcher forwards to a gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Forwarded {
    pub route: String,
    pub stream: String,
    /// The message's number in its connection, from 0.
    pub seq: u64,
    pub item: Item,
}

// ---- The JSON shapes. ----

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallerJson {
    key: String,
    #[serde(default)]
    quota: Option<String>,
    /// `null`: the admin; else the client's auth and request texts.
    #[serde(default)]
    client: Option<(String, String)>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestJson {
    gateway: String,
    route: String,
    op: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    database: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stream: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    position: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    caller: Option<CallerJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    targets: Option<Vec<TargetEntry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lead: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    routes: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SizesJson {
    position: u64,
    documents: BTreeMap<String, usize>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum AnswerJson {
    Connected {
        stream: String,
        #[serde(default)]
        sizes: Option<SizesJson>,
    },
    Unknown(String),
    Done,
    Holds(bool),
    Forwarding(Vec<String>),
    Error {
        code: String,
        message: String,
        #[serde(default)]
        limit: Option<String>,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DocJson {
    path: String,
    /// Typed JSON text of the fields.
    fields: String,
    ct: i64,
    ut: i64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum ResultJson {
    Documents(Vec<DocJson>),
    Aggregate(String),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum ChangeJson {
    Added {
        doc: DocJson,
        new: usize,
    },
    Modified {
        doc: DocJson,
        old: usize,
        new: usize,
    },
    Removed {
        path: String,
        old: usize,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum DeltaJson {
    Changes(Vec<ChangeJson>),
    Aggregate(String),
    NeedsRequery,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum KindJson {
    Snapshot {
        results: Vec<(String, ResultJson)>,
        changes: Vec<(String, DeltaJson)>,
    },
    Change(Vec<(String, DeltaJson)>),
    Heartbeat,
    Reset {
        reason: String,
        message: String,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventJson {
    stream: String,
    position: u64,
    #[serde(default)]
    commit_time: Option<i64>,
    #[serde(default)]
    read_time: Option<i64>,
    #[serde(default)]
    deleted: Vec<String>,
    kind: KindJson,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForwardedJson {
    route: String,
    stream: String,
    seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    frame: Option<EventJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    closed: Option<EventJson>,
}

// ---- Encoding. ----

fn with_version<T: Serialize>(body: &T) -> Vec<u8> {
    let mut out = vec![VERSION];
    // Serializing these shapes cannot fail (string keys, no non-finite floats).
    if let Err(e) = serde_json::to_writer(&mut out, body) {
        tracing::error!(error = %e, "a matcher wire message did not serialize");
    }
    out
}

fn caller_json(caller: &Caller) -> CallerJson {
    CallerJson {
        key: caller.key.clone(),
        quota: caller.quota.clone(),
        client: match &caller.run_as {
            RunAs::Admin => None,
            RunAs::Client { auth, request } => Some((auth.clone(), request.clone())),
        },
    }
}

/// The message of a call.
pub fn encode_request(request: &Request) -> Vec<u8> {
    let mut out = RequestJson {
        gateway: request.gateway.clone(),
        route: request.route.clone(),
        op: String::new(),
        database: None,
        stream: None,
        position: None,
        caller: None,
        key: None,
        targets: None,
        target: None,
        lead: None,
        routes: None,
    };
    let targets = |t: &[TargetRequest]| Some(t.iter().map(TargetEntry::of).collect());
    match &request.call {
        Call::Open {
            database,
            caller,
            targets: t,
            lead,
        } => {
            out.op = "open".into();
            out.database = Some(database.clone());
            out.caller = Some(caller_json(caller));
            out.targets = targets(t);
            out.lead = lead.map(|r| r.as_str().to_owned());
        }
        Call::Resume {
            database,
            stream,
            position,
            caller,
        } => {
            out.op = "resume".into();
            out.database = Some(database.clone());
            out.stream = Some(stream.clone());
            out.position = Some(position.0);
            out.caller = Some(caller_json(caller));
        }
        Call::Add {
            database,
            stream,
            caller,
            targets: t,
        } => {
            out.op = "add".into();
            out.database = Some(database.clone());
            out.stream = Some(stream.clone());
            out.caller = Some(caller_json(caller));
            out.targets = targets(t);
        }
        Call::Holds {
            database,
            stream,
            caller,
            target,
        } => {
            out.op = "holds".into();
            out.database = Some(database.clone());
            out.stream = Some(stream.clone());
            out.key = Some(caller.clone());
            out.target = Some(target.clone());
        }
        Call::Remove {
            stream,
            caller,
            target,
        } => {
            out.op = "remove".into();
            out.stream = Some(stream.clone());
            out.key = Some(caller.clone());
            out.target = Some(target.clone());
        }
        Call::Detach => out.op = "detach".into(),
        Call::Forwarding { routes } => {
            out.op = "forwarding".into();
            out.routes = Some(routes.clone());
        }
    }
    with_version(&out)
}

/// The message of an answer.
pub fn encode_answer(answer: &Answer) -> Vec<u8> {
    let body = match answer {
        Answer::Connected { stream, sizes } => AnswerJson::Connected {
            stream: stream.clone(),
            sizes: sizes.as_ref().map(|s| SizesJson {
                position: s.position.0,
                documents: s.documents.clone(),
            }),
        },
        Answer::Unknown(reason) => AnswerJson::Unknown(reason.as_str().to_owned()),
        Answer::Done => AnswerJson::Done,
        Answer::Holds(held) => AnswerJson::Holds(*held),
        Answer::Forwarding(routes) => AnswerJson::Forwarding(routes.clone()),
        Answer::Error {
            code,
            message,
            limit,
        } => AnswerJson::Error {
            code: code.to_string(),
            message: message.clone(),
            limit: limit.map(str::to_owned),
        },
    };
    with_version(&body)
}

fn doc_json(doc: &Document) -> DocJson {
    DocJson {
        path: doc.path.to_string(),
        fields: typed_json::map_to_string(&doc.fields),
        ct: doc.create_time.micros(),
        ut: doc.update_time.micros(),
    }
}

fn delta_json(delta: &TargetDelta) -> DeltaJson {
    match delta {
        TargetDelta::Changes(changes) => DeltaJson::Changes(
            changes
                .iter()
                .map(|c| match c {
                    DocChange::Added { doc, new_index } => ChangeJson::Added {
                        doc: doc_json(doc),
                        new: *new_index,
                    },
                    DocChange::Modified {
                        doc,
                        old_index,
                        new_index,
                    } => ChangeJson::Modified {
                        doc: doc_json(doc),
                        old: *old_index,
                        new: *new_index,
                    },
                    DocChange::Removed { path, old_index } => ChangeJson::Removed {
                        path: path.to_string(),
                        old: *old_index,
                    },
                })
                .collect(),
        ),
        TargetDelta::Aggregate(map) => DeltaJson::Aggregate(typed_json::map_to_string(map)),
        TargetDelta::NeedsRequery => DeltaJson::NeedsRequery,
    }
}

fn deltas_json(changes: &[(String, TargetDelta)]) -> Vec<(String, DeltaJson)> {
    changes
        .iter()
        .map(|(name, d)| (name.clone(), delta_json(d)))
        .collect()
}

fn event_json(event: &Event) -> EventJson {
    EventJson {
        stream: event.stream.clone(),
        position: event.position.0,
        commit_time: event.commit_time.map(Timestamp::micros),
        read_time: event.read_time.map(Timestamp::micros),
        deleted: event.deleted.iter().map(ToString::to_string).collect(),
        kind: match &event.kind {
            EventKind::Snapshot { results, changes } => KindJson::Snapshot {
                results: results
                    .iter()
                    .map(|(name, r)| {
                        let r = match r {
                            TargetResult::Documents(docs) => {
                                ResultJson::Documents(docs.iter().map(doc_json).collect())
                            }
                            TargetResult::Aggregate(map) => {
                                ResultJson::Aggregate(typed_json::map_to_string(map))
                            }
                        };
                        (name.clone(), r)
                    })
                    .collect(),
                changes: deltas_json(changes),
            },
            EventKind::Change { changes } => KindJson::Change(deltas_json(changes)),
            EventKind::Heartbeat => KindJson::Heartbeat,
            EventKind::Reset { reason, message } => KindJson::Reset {
                reason: reason.as_str().to_owned(),
                message: message.clone(),
            },
        },
    }
}

/// The message of a forwarded frame.
pub fn encode_forwarded(forwarded: &Forwarded) -> Vec<u8> {
    let (frame, closed) = match &forwarded.item {
        Item::Frame(f) => (Some(event_json(&f.event)), None),
        Item::Closed(f) => (None, Some(event_json(&f.event))),
        Item::End => (None, None),
    };
    with_version(&ForwardedJson {
        route: forwarded.route.clone(),
        stream: forwarded.stream.clone(),
        seq: forwarded.seq,
        frame,
        closed,
    })
}

// ---- Decoding. ----

fn body<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, WireError> {
    let (&version, rest) = bytes.split_first().ok_or(WireError::Empty)?;
    if version != VERSION {
        return Err(WireError::Version(version));
    }
    if bytes.len() > MAX_MESSAGE {
        return Err(WireError::TooLarge(bytes.len()));
    }
    serde_json::from_slice(rest).map_err(|e| WireError::Json(e.to_string()))
}

fn caller_of(c: CallerJson) -> Caller {
    Caller {
        key: c.key,
        quota: c.quota,
        run_as: match c.client {
            None => RunAs::Admin,
            Some((auth, request)) => RunAs::Client { auth, request },
        },
    }
}

fn some<T>(value: Option<T>, name: &'static str) -> Result<T, WireError> {
    value.ok_or_else(|| WireError::Field(name, "missing".into()))
}

fn targets_of(entries: Option<Vec<TargetEntry>>) -> Result<Vec<TargetRequest>, WireError> {
    some(entries, "targets")?
        .iter()
        .map(|t| {
            t.request()
                .map_err(|e| WireError::Field("targets", e.to_string()))
        })
        .collect()
}

fn reason_of(text: &str) -> Result<ResetReason, WireError> {
    ResetReason::parse(text).ok_or_else(|| WireError::Field("reason", text.to_owned()))
}

/// Decode a call.
///
/// # Errors
/// [`WireError`] for anything that is not a call of this version.
pub fn decode_request(bytes: &[u8]) -> Result<Request, WireError> {
    let r: RequestJson = body(bytes)?;
    let call = match r.op.as_str() {
        "open" => Call::Open {
            database: some(r.database, "database")?,
            caller: caller_of(some(r.caller, "caller")?),
            targets: targets_of(r.targets)?,
            lead: r.lead.as_deref().map(reason_of).transpose()?,
        },
        "resume" => Call::Resume {
            database: some(r.database, "database")?,
            stream: some(r.stream, "stream")?,
            position: Lsn(some(r.position, "position")?),
            caller: caller_of(some(r.caller, "caller")?),
        },
        "add" => Call::Add {
            database: some(r.database, "database")?,
            stream: some(r.stream, "stream")?,
            caller: caller_of(some(r.caller, "caller")?),
            targets: targets_of(r.targets)?,
        },
        "holds" => Call::Holds {
            database: some(r.database, "database")?,
            stream: some(r.stream, "stream")?,
            caller: some(r.key, "key")?,
            target: some(r.target, "target")?,
        },
        "remove" => Call::Remove {
            stream: some(r.stream, "stream")?,
            caller: some(r.key, "key")?,
            target: some(r.target, "target")?,
        },
        "detach" => Call::Detach,
        "forwarding" => Call::Forwarding {
            routes: some(r.routes, "routes")?,
        },
        other => return Err(WireError::Field("op", other.to_owned())),
    };
    Ok(Request {
        gateway: r.gateway,
        route: r.route,
        call,
    })
}

/// The caps a RESOURCE_EXHAUSTED names (`session::StreamCaps`).
fn limit_of(text: &str) -> Result<&'static str, WireError> {
    ["streams", "streams_per_caller", "targets_per_stream"]
        .into_iter()
        .find(|l| *l == text)
        .ok_or_else(|| WireError::Field("limit", text.to_owned()))
}

/// Decode an answer.
///
/// # Errors
/// [`WireError`] for anything that is not an answer of this version.
pub fn decode_answer(bytes: &[u8]) -> Result<Answer, WireError> {
    Ok(match body::<AnswerJson>(bytes)? {
        AnswerJson::Connected { stream, sizes } => Answer::Connected {
            stream,
            sizes: sizes.map(|s| Sizes {
                position: Lsn(s.position),
                documents: s.documents,
            }),
        },
        AnswerJson::Unknown(reason) => Answer::Unknown(reason_of(&reason)?),
        AnswerJson::Done => Answer::Done,
        AnswerJson::Holds(held) => Answer::Holds(held),
        AnswerJson::Forwarding(routes) => Answer::Forwarding(routes),
        AnswerJson::Error {
            code,
            message,
            limit,
        } => Answer::Error {
            code: Code::parse(&code).ok_or_else(|| WireError::Field("code", code.clone()))?,
            message,
            limit: limit.as_deref().map(limit_of).transpose()?,
        },
    })
}

fn time_of(micros: i64, name: &'static str) -> Result<Timestamp, WireError> {
    Timestamp::from_micros(micros).ok_or_else(|| WireError::Field(name, micros.to_string()))
}

fn map_of(text: &str, name: &'static str) -> Result<Map, WireError> {
    match typed_json::parse(text).map_err(|e| WireError::Field(name, e.to_string()))? {
        Value::Map(map) => Ok(map),
        _ => Err(WireError::Field(name, "not a map".into())),
    }
}

fn path_of(text: &str) -> Result<ResourcePath, WireError> {
    ResourcePath::parse(text).map_err(|e| WireError::Field("path", e.to_string()))
}

fn doc_of(d: DocJson) -> Result<Document, WireError> {
    Ok(Document::new(
        path_of(&d.path)?,
        map_of(&d.fields, "fields")?,
        time_of(d.ct, "ct")?,
        time_of(d.ut, "ut")?,
    ))
}

fn delta_of(d: DeltaJson) -> Result<TargetDelta, WireError> {
    Ok(match d {
        DeltaJson::Changes(changes) => TargetDelta::Changes(
            changes
                .into_iter()
                .map(|c| {
                    Ok(match c {
                        ChangeJson::Added { doc, new } => DocChange::Added {
                            doc: doc_of(doc)?,
                            new_index: new,
                        },
                        ChangeJson::Modified { doc, old, new } => DocChange::Modified {
                            doc: doc_of(doc)?,
                            old_index: old,
                            new_index: new,
                        },
                        ChangeJson::Removed { path, old } => DocChange::Removed {
                            path: path_of(&path)?,
                            old_index: old,
                        },
                    })
                })
                .collect::<Result<_, WireError>>()?,
        ),
        DeltaJson::Aggregate(text) => TargetDelta::Aggregate(map_of(&text, "aggregate")?),
        DeltaJson::NeedsRequery => TargetDelta::NeedsRequery,
    })
}

fn deltas_of(changes: Vec<(String, DeltaJson)>) -> Result<Arc<[(String, TargetDelta)]>, WireError> {
    changes
        .into_iter()
        .map(|(name, d)| Ok((name, delta_of(d)?)))
        .collect()
}

fn frame_of(e: EventJson) -> Result<Frame, WireError> {
    let at = At {
        commit_time: e
            .commit_time
            .map(|t| time_of(t, "commit_time"))
            .transpose()?,
        read_time: e.read_time.map(|t| time_of(t, "read_time")).transpose()?,
        deleted: e
            .deleted
            .iter()
            .map(|p| path_of(p))
            .collect::<Result<_, WireError>>()?,
    };
    let position = Lsn(e.position);
    let stream = &e.stream;
    Ok(match e.kind {
        KindJson::Snapshot { results, changes } => {
            let results = results
                .into_iter()
                .map(|(name, r)| {
                    let r = match r {
                        ResultJson::Documents(docs) => TargetResult::Documents(
                            docs.into_iter().map(doc_of).collect::<Result<_, _>>()?,
                        ),
                        ResultJson::Aggregate(text) => {
                            TargetResult::Aggregate(map_of(&text, "aggregate")?)
                        }
                    };
                    Ok((name, r))
                })
                .collect::<Result<_, WireError>>()?;
            events::snapshot(stream, position, at, results, deltas_of(changes)?)
        }
        KindJson::Change(changes) => events::change(stream, position, at, deltas_of(changes)?),
        KindJson::Heartbeat => events::heartbeat(stream, position, at),
        KindJson::Reset { reason, message } => {
            // A reset carries no times (`events::reset`).
            events::reset(stream, position, reason_of(&reason)?, &message)
        }
    })
}

/// Decode a forwarded frame.
///
/// # Errors
/// [`WireError`] for anything that is not a forwarded message of this version, or one with
/// both a frame and a closing frame.
pub fn decode_forwarded(bytes: &[u8]) -> Result<Forwarded, WireError> {
    let f: ForwardedJson = body(bytes)?;
    let item = match (f.frame, f.closed) {
        (Some(e), None) => Item::Frame(frame_of(e)?),
        (None, Some(e)) => Item::Closed(frame_of(e)?),
        (None, None) => Item::End,
        (Some(_), Some(_)) => {
            return Err(field("closed")("both a frame and a closing frame".into()));
        }
    };
    Ok(Forwarded {
        route: f.route,
        stream: f.stream,
        seq: f.seq,
        item,
    })
}

// ---- Parts: a forwarded message larger than a NATS message. ----

/// The header of a part naming its connection's route.
pub const ROUTE_HEADER: &str = "Docstore-Route";

/// The header of a part naming its message: `<seq>/<bytes>`, the message's sequence number in
/// its connection and its whole size.
pub const FRAME_HEADER: &str = "Docstore-Frame";

/// The header of a part naming its place: `i/n`, 1-based (as the ingest's parts,
/// `source/wire.rs`).
pub use crate::source::wire::PART_HEADER;

/// Room left in a part for its headers, besides the route's length.
const HEADER_ROOM: usize = 1024;

/// What the headers of one part of a split forwarded message say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartHeader {
    pub route: String,
    /// The forwarded message's number in its connection: all its parts carry it.
    pub seq: u64,
    /// The whole message's size in bytes (at most [`MAX_MESSAGE`]).
    pub size: usize,
    /// This part's place, 1-based, and the count of parts (at least 2).
    pub index: u32,
    pub count: u32,
}

impl PartHeader {
    /// The header read from its three values (route, [`FRAME_HEADER`], [`PART_HEADER`]).
    ///
    /// # Errors
    /// [`WireError::Field`] unless `frame` is `<seq>/<bytes>` with at most [`MAX_MESSAGE`]
    /// bytes and `part` is `i/n` with `1 <= i <= n`, `2 <= n <= bytes`.
    pub fn parse(route: &str, frame: &str, part: &str) -> Result<PartHeader, WireError> {
        let bad_frame = || field("frame")(frame.to_owned());
        let (seq, size) = frame.split_once('/').ok_or_else(bad_frame)?;
        let seq: u64 = seq.parse().map_err(|_| bad_frame())?;
        let size: usize = size.parse().map_err(|_| bad_frame())?;
        if size > MAX_MESSAGE {
            return Err(WireError::TooLarge(size));
        }
        let (index, count) =
            crate::source::wire::part_of(part).map_err(|_| field("part")(part.to_owned()))?;
        let whole = usize::try_from(count).map_err(|_| field("part")(part.to_owned()))?;
        if count < 2 || whole > size {
            return Err(field("part")(format!(
                "{part} of a message of {size} bytes"
            )));
        }
        Ok(PartHeader {
            route: route.to_owned(),
            seq,
            size,
            index,
            count,
        })
    }

    /// The value of [`FRAME_HEADER`].
    pub fn frame(&self) -> String {
        format!("{}/{}", self.seq, self.size)
    }

    /// The value of [`PART_HEADER`].
    pub fn part(&self) -> String {
        format!("{}/{}", self.index, self.count)
    }
}

/// One NATS message of a forwarded message: its part header (`None`: the message is whole)
/// and its payload.
pub type Message<'a> = (Option<PartHeader>, &'a [u8]);

/// The NATS messages of the forwarded message `payload`, number `seq` of `route`, under a
/// server's `max_payload`: the payload alone when it fits, else parts that fit with their
/// headers, in order.
///
/// # Errors
/// [`WireError::TooLarge`] for a payload over [`MAX_MESSAGE`], which a gateway would refuse.
pub fn split_forwarded<'a>(
    route: &str,
    seq: u64,
    payload: &'a [u8],
    max_payload: usize,
) -> Result<Vec<Message<'a>>, WireError> {
    if payload.len() > MAX_MESSAGE {
        return Err(WireError::TooLarge(payload.len()));
    }
    if payload.len() <= max_payload {
        return Ok(vec![(None, payload)]);
    }
    let room = HEADER_ROOM.saturating_add(route.len());
    let parts = crate::source::wire::split(payload, max_payload.saturating_sub(room).max(1));
    let count = u32::try_from(parts.len()).map_err(|_| WireError::TooLarge(payload.len()))?;
    Ok(parts
        .into_iter()
        .zip(1..)
        .map(|(part, index)| {
            let header = PartHeader {
                route: route.to_owned(),
                seq,
                size: payload.len(),
                index,
                count,
            };
            (Some(header), part)
        })
        .collect())
}

/// One message being put back together.
#[derive(Debug)]
struct Gathering {
    seq: u64,
    size: usize,
    count: u32,
    /// Bytes gathered so far (never more than `size`).
    held: usize,
    parts: crate::source::wire::Reassembler,
}

/// Puts the parts of split forwarded messages back together, one message at a time per
/// route. A message is handed on only whole: a part 1 starts it (dropping whatever was
/// gathered on its route), every further part must be the next one of the same message, and
/// the last must complete its size exactly; anything else drops the route's gathering and is
/// refused. A message under gathering takes at most its declared size, at most
/// [`MAX_MESSAGE`]. Parts carry no numbers of their own: a lost part loses its message, which
/// the gateway sees as a gap in the connection's numbers at the next message.
#[derive(Debug, Default)]
pub struct Gatherer {
    routes: BTreeMap<String, Gathering>,
}

impl Gatherer {
    /// Take in one part; `Some`: the message it completed, decoded.
    ///
    /// # Errors
    /// [`WireError`] for a part that does not continue its route's message, sizes that do not
    /// add up, a message of another version, or a whole that does not decode or names
    /// another route or number than its parts.
    pub fn push(
        &mut self,
        header: PartHeader,
        bytes: &[u8],
    ) -> Result<Option<Forwarded>, WireError> {
        let taken = self.take(&header, bytes);
        if !matches!(taken, Ok(None)) {
            // Whole or refused: nothing more is gathered on the route.
            self.routes.remove(&header.route);
        }
        let Some(whole) = taken? else {
            return Ok(None);
        };
        let forwarded = decode_forwarded(&whole)?;
        if forwarded.route != header.route || forwarded.seq != header.seq {
            return Err(field("route")(format!(
                "parts of {} #{} carry {} #{}",
                header.route, header.seq, forwarded.route, forwarded.seq
            )));
        }
        Ok(Some(forwarded))
    }

    fn take(&mut self, header: &PartHeader, bytes: &[u8]) -> Result<Option<Vec<u8>>, WireError> {
        let bad = |why: String| field("part")(format!("{}: {why}", header.part()));
        if bytes.is_empty() {
            return Err(bad("empty".into()));
        }
        if header.index == 1 {
            match bytes.first() {
                Some(&VERSION) => {}
                Some(&other) => return Err(WireError::Version(other)),
                None => return Err(WireError::Empty),
            }
            self.routes.insert(
                header.route.clone(),
                Gathering {
                    seq: header.seq,
                    size: header.size,
                    count: header.count,
                    held: 0,
                    parts: crate::source::wire::Reassembler::new(),
                },
            );
        }
        let Some(g) = self.routes.get_mut(&header.route) else {
            return Err(bad("its message's first part is missing".into()));
        };
        if (g.seq, g.size, g.count) != (header.seq, header.size, header.count) {
            return Err(bad(format!(
                "of message #{} ({} bytes, {} parts) while #{} ({} bytes, {} parts) is gathered",
                header.seq, header.size, header.count, g.seq, g.size, g.count
            )));
        }
        let held = g.held.saturating_add(bytes.len());
        if held > g.size || (header.index == header.count && held != g.size) {
            return Err(bad(format!(
                "{held} bytes of a message of {} bytes",
                g.size
            )));
        }
        g.held = held;
        match g.parts.push(Some((header.index, header.count)), bytes) {
            crate::source::wire::Part::Pending => Ok(None),
            crate::source::wire::Part::Whole(whole) => Ok(Some(whole)),
            crate::source::wire::Part::OutOfOrder { expected, .. } => {
                Err(bad(format!("does not follow (expected part {expected:?})")))
            }
        }
    }

    /// A whole message of `route` arrived: what was gathered there is dropped.
    pub fn whole(&mut self, route: &str) {
        self.routes.remove(route);
    }

    /// Drop what was gathered for the routes `keep` refuses (connections that ended or moved).
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.routes.retain(|route, _| keep(route));
    }

    /// The bytes held by messages under gathering.
    pub fn held(&self) -> usize {
        self.routes.values().map(|g| g.held).sum()
    }

    /// Whether no message is under gathering.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

/// The JSON of `bytes` after the version byte, for logs (`None`: not JSON).
pub fn peek(bytes: &[u8]) -> Option<Json> {
    serde_json::from_slice(bytes.get(1..)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::TargetSpec;

    fn t(micros: i64) -> Timestamp {
        Timestamp::from_micros(micros).unwrap_or_else(|| unreachable!())
    }

    fn doc(path: &str, n: i64) -> Document {
        let mut fields = Map::new();
        fields.insert("n".into(), Value::Integer(n));
        fields.insert("s".into(), Value::String("é\"x".into()));
        Document::new(
            ResourcePath::parse(path).unwrap_or_else(|_| unreachable!()),
            fields,
            t(1_000),
            t(2_000 + n),
        )
    }

    fn frames() -> Vec<Frame> {
        let at = At {
            commit_time: Some(t(5)),
            read_time: Some(t(6)),
            deleted: Arc::from(vec![
                ResourcePath::parse("c/gone").unwrap_or_else(|_| unreachable!())
            ]),
        };
        let mut agg = Map::new();
        agg.insert("count".into(), Value::Integer(3));
        vec![
            events::snapshot(
                "s1",
                Lsn(10),
                at.clone(),
                vec![
                    (
                        "a".into(),
                        TargetResult::Documents(vec![doc("c/1", 1), doc("c/2", 2)]),
                    ),
                    ("b".into(), TargetResult::Aggregate(agg.clone())),
                ],
                Arc::from(vec![("z".to_owned(), TargetDelta::NeedsRequery)]),
            ),
            events::change(
                "s1",
                Lsn(11),
                at,
                Arc::from(vec![
                    (
                        "a".to_owned(),
                        TargetDelta::Changes(vec![
                            DocChange::Removed {
                                path: ResourcePath::parse("c/2").unwrap_or_else(|_| unreachable!()),
                                old_index: 1,
                            },
                            DocChange::Added {
                                doc: doc("c/3", 3),
                                new_index: 0,
                            },
                            DocChange::Modified {
                                doc: doc("c/1", 4),
                                old_index: 1,
                                new_index: 1,
                            },
                        ]),
                    ),
                    ("b".to_owned(), TargetDelta::Aggregate(agg)),
                ]),
            ),
            events::heartbeat("s1", Lsn(12), At::default()),
            events::reset("s1", Lsn(13), ResetReason::Lagged, "slow"),
        ]
    }

    #[test]
    fn frames_round_trip() {
        for (seq, frame) in frames().into_iter().enumerate() {
            for item in [
                Item::Frame(frame.clone()),
                Item::Closed(frame.clone()),
                Item::End,
            ] {
                let f = Forwarded {
                    route: "r".into(),
                    stream: "s1".into(),
                    seq: seq as u64,
                    item,
                };
                assert_eq!(decode_forwarded(&encode_forwarded(&f)), Ok(f));
            }
        }
    }

    #[test]
    fn calls_and_answers_round_trip() {
        let caller = Caller {
            key: "user:\"u\"".into(),
            quota: Some("sub:u".into()),
            run_as: RunAs::Client {
                auth: "{\"sub\":\"u\"}".into(),
                request: "{}".into(),
            },
        };
        let targets = vec![TargetRequest {
            id: "t".into(),
            spec: TargetSpec::document("c/1").unwrap_or_else(|_| unreachable!()),
        }];
        let calls = [
            Call::Open {
                database: "d".into(),
                caller: caller.clone(),
                targets: targets.clone(),
                lead: Some(ResetReason::Restart),
            },
            Call::Resume {
                database: "d".into(),
                stream: "s".into(),
                position: Lsn(7),
                caller: Caller {
                    run_as: RunAs::Admin,
                    quota: None,
                    ..caller.clone()
                },
            },
            Call::Add {
                database: "d".into(),
                stream: "s".into(),
                caller,
                targets,
            },
            Call::Holds {
                database: "d".into(),
                stream: "s".into(),
                caller: "k".into(),
                target: "t".into(),
            },
            Call::Remove {
                stream: "s".into(),
                caller: "k".into(),
                target: "t".into(),
            },
            Call::Detach,
            Call::Forwarding {
                routes: vec!["r1".into(), "r2".into()],
            },
            Call::Forwarding { routes: Vec::new() },
        ];
        for call in calls {
            let r = Request {
                gateway: "g".into(),
                route: "r".into(),
                call,
            };
            assert_eq!(decode_request(&encode_request(&r)), Ok(r));
        }
        let answers = [
            Answer::Connected {
                stream: "s".into(),
                sizes: Some(Sizes {
                    position: Lsn(3),
                    documents: BTreeMap::from([("t".into(), 2)]),
                }),
            },
            Answer::Connected {
                stream: "s".into(),
                sizes: None,
            },
            Answer::Unknown(ResetReason::RetentionPassed),
            Answer::Done,
            Answer::Holds(true),
            Answer::Forwarding(vec!["r1".into()]),
            Answer::Forwarding(Vec::new()),
            Answer::Error {
                code: Code::ResourceExhausted,
                message: "m".into(),
                limit: Some("streams_per_caller"),
            },
        ];
        for a in answers {
            assert_eq!(decode_answer(&encode_answer(&a)), Ok(a));
        }
    }

    /// A snapshot frame of `n` documents, forwarded as number `seq` of `route`.
    fn big(route: &str, seq: u64, n: i64) -> (Forwarded, Vec<u8>) {
        let docs = (0..n).map(|i| doc(&format!("c/{i}"), i)).collect();
        let frame = events::snapshot(
            "s1",
            Lsn(10),
            At::default(),
            vec![("a".into(), TargetResult::Documents(docs))],
            Arc::from(Vec::new()),
        );
        let f = Forwarded {
            route: route.into(),
            stream: "s1".into(),
            seq,
            item: Item::Frame(frame),
        };
        let bytes = encode_forwarded(&f);
        (f, bytes)
    }

    /// The parts of `bytes` under a `max_payload` that cuts them into at least three.
    fn parts_of(route: &str, seq: u64, bytes: &[u8]) -> Vec<(PartHeader, Vec<u8>)> {
        let max = HEADER_ROOM + route.len() + 1 + bytes.len() / 3;
        let parts = split_forwarded(route, seq, bytes, max).unwrap_or_else(|_| unreachable!());
        assert!(parts.len() >= 3, "{}", parts.len());
        parts
            .into_iter()
            .map(|(h, b)| (h.unwrap_or_else(|| unreachable!()), b.to_vec()))
            .collect()
    }

    #[test]
    fn a_message_split_into_parts_is_put_back_together() {
        let (f, bytes) = big("r", 4, 40);
        assert_eq!(
            split_forwarded("r", 4, &bytes, bytes.len()),
            Ok(vec![(None, &bytes[..])])
        );
        let parts = parts_of("r", 4, &bytes);
        let mut g = Gatherer::default();
        for (i, (header, part)) in parts.iter().enumerate() {
            // Every header reads back as it was written.
            assert_eq!(
                PartHeader::parse("r", &header.frame(), &header.part()).as_ref(),
                Ok(header)
            );
            let got = g.push(header.clone(), part);
            if i + 1 == parts.len() {
                assert_eq!(got, Ok(Some(f.clone())));
            } else {
                assert_eq!(got, Ok(None));
                assert!(g.held() <= bytes.len());
            }
        }
        assert!(g.is_empty());
        // Two routes at once, interleaved.
        let (f2, bytes2) = big("q", 9, 25);
        let other = parts_of("q", 9, &bytes2);
        let mut wholes = Vec::new();
        for i in 0..parts.len().max(other.len()) {
            for list in [&parts, &other] {
                if let Some((h, b)) = list.get(i) {
                    if let Some(f) = g.push(h.clone(), b).unwrap_or_else(|e| panic!("{e}")) {
                        wholes.push(f);
                    }
                }
            }
        }
        assert_eq!(wholes.len(), 2);
        assert!(wholes.contains(&f) && wholes.contains(&f2));
    }

    #[test]
    fn parts_missing_repeated_or_out_of_order_never_give_half_a_message() {
        let (f, bytes) = big("r", 4, 40);
        let parts = parts_of("r", 4, &bytes);
        let n = parts.len();
        let push_all = |order: &[usize]| {
            let mut g = Gatherer::default();
            let mut out = Vec::new();
            for &i in order {
                let (h, b) = &parts[i];
                out.push(g.push(h.clone(), b));
            }
            (out, g)
        };
        // A part missing: the message never comes, whatever follows.
        let order: Vec<usize> = (0..n).filter(|&i| i != 1).collect();
        let (out, g) = push_all(&order);
        assert!(out.iter().all(|r| !matches!(r, Ok(Some(_)))), "{out:?}");
        assert!(out.iter().any(Result::is_err));
        assert!(g.is_empty(), "a refused part drops the gathering");
        // The last part missing: nothing is handed on (the matcher died mid-message).
        let (out, g) = push_all(&(0..n - 1).collect::<Vec<_>>());
        assert!(out.iter().all(|r| r == &Ok(None)), "{out:?}");
        assert!(g.held() < bytes.len());
        // A part repeated, or two swapped: refused, never a message.
        let mut repeated: Vec<usize> = (0..n).collect();
        repeated.insert(2, 1);
        let (out, _) = push_all(&repeated);
        assert!(out.iter().all(|r| !matches!(r, Ok(Some(_)))), "{out:?}");
        let mut swapped: Vec<usize> = (0..n).collect();
        swapped.swap(1, 2);
        let (out, _) = push_all(&swapped);
        assert!(out.iter().all(|r| !matches!(r, Ok(Some(_)))), "{out:?}");
        // Parts without their first: refused.
        let (out, _) = push_all(&(1..n).collect::<Vec<_>>());
        assert!(out.iter().all(Result::is_err), "{out:?}");
        // A message cut short, then sent again whole: the second arrives.
        let mut again: Vec<usize> = vec![0, 1];
        again.extend(0..n);
        let (out, g) = push_all(&again);
        assert_eq!(out.last(), Some(&Ok(Some(f.clone()))));
        assert!(g.is_empty());
        // A whole message on the route drops what was gathered there.
        let mut g = Gatherer::default();
        assert_eq!(g.push(parts[0].0.clone(), &parts[0].1), Ok(None));
        g.whole("r");
        assert!(g.is_empty());
        assert!(g.push(parts[1].0.clone(), &parts[1].1).is_err());
        // A route that ended is dropped.
        assert_eq!(g.push(parts[0].0.clone(), &parts[0].1), Ok(None));
        g.retain(|r| r != "r");
        assert!(g.is_empty());
    }

    #[test]
    fn malformed_parts_are_refused() {
        let (_, bytes) = big("r", 4, 40);
        let parts = parts_of("r", 4, &bytes);
        let (h, b) = &parts[0];
        for (frame, part) in [
            ("4", "1/3"),
            ("x/100", "1/3"),
            ("4/-1", "1/3"),
            ("4/100", "0/3"),
            ("4/100", "4/3"),
            ("4/100", "1/1"),
            ("4/2", "1/3"),
            ("4/100", "1/x"),
            ("4/67108865", "1/3"),
            ("18446744073709551616/100", "1/3"),
        ] {
            assert!(
                PartHeader::parse("r", frame, part).is_err(),
                "{frame} {part}"
            );
        }
        let refused = |header: PartHeader, bytes: &[u8]| {
            let mut g = Gatherer::default();
            let got = g.push(header, bytes);
            assert!(got.is_err(), "{got:?}");
            assert!(g.is_empty());
        };
        // Another version, an empty part, a part larger than the message.
        refused(h.clone(), &[&[2u8][..], &b[1..]].concat());
        refused(h.clone(), b"");
        refused(
            PartHeader {
                size: b.len() - 1,
                ..h.clone()
            },
            b,
        );
        // Parts that add up to less than the message.
        let mut g = Gatherer::default();
        let short = PartHeader {
            count: 2,
            ..h.clone()
        };
        assert_eq!(g.push(short.clone(), b), Ok(None));
        let last = PartHeader { index: 2, ..short };
        assert!(g.push(last, &parts[1].1).is_err());
        // A later part of another message number, size or count.
        for other in [
            PartHeader {
                seq: 5,
                ..parts[1].0.clone()
            },
            PartHeader {
                size: bytes.len() + 1,
                ..parts[1].0.clone()
            },
            PartHeader {
                count: parts[1].0.count + 1,
                ..parts[1].0.clone()
            },
        ] {
            let mut g = Gatherer::default();
            assert_eq!(g.push(h.clone(), b), Ok(None));
            assert!(g.push(other, &parts[1].1).is_err());
            assert!(g.is_empty());
        }
        // A whole whose route or number is not its parts'.
        let mut g = Gatherer::default();
        for (h, b) in &parts {
            let got = g.push(
                PartHeader {
                    seq: 5,
                    ..h.clone()
                },
                b,
            );
            assert!(!matches!(got, Ok(Some(_))));
        }
        assert!(g.is_empty());
        // Too large to forward at all.
        let huge = vec![VERSION; MAX_MESSAGE + 1];
        assert_eq!(
            split_forwarded("r", 0, &huge, 1 << 20),
            Err(WireError::TooLarge(MAX_MESSAGE + 1))
        );
    }

    #[test]
    fn garbage_is_refused_without_panic() {
        let good = encode_forwarded(&Forwarded {
            route: "r".into(),
            stream: "s".into(),
            seq: 0,
            item: Item::Frame(frames().remove(0)),
        });
        for bad in [
            &b""[..],
            b"\x02{}",
            b"\x01",
            b"\x01{",
            b"\x01{}",
            b"\x01{\"route\":\"r\",\"stream\":\"s\",\"seq\":-1}",
            b"\x01{\"gateway\":\"g\",\"route\":\"r\",\"op\":\"explode\"}",
            b"\x01{\"gateway\":\"g\",\"route\":\"r\",\"op\":\"open\"}",
            b"\x01{\"error\":{\"code\":\"NOPE\",\"message\":\"m\"}}",
        ] {
            assert!(decode_forwarded(bad).is_err(), "{bad:?}");
            assert!(decode_request(bad).is_err(), "{bad:?}");
            assert!(decode_answer(bad).is_err(), "{bad:?}");
        }
        // Every truncation of a good frame is refused or decodes; none panics.
        for end in 0..good.len() {
            let _ = decode_forwarded(&good[..end]);
        }
        let text = String::from_utf8_lossy(&good[1..])
            .replace("\"ct\":1000", "\"ct\":9223372036854775807");
        assert!(decode_forwarded(&[&[VERSION][..], text.as_bytes()].concat()).is_err());
        let text = String::from_utf8_lossy(&good[1..]).replace("c/1", "c//1");
        assert!(decode_forwarded(&[&[VERSION][..], text.as_bytes()].concat()).is_err());
    }
}
