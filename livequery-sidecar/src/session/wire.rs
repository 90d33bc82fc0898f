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
//! Every message is outside input to its reader: [`decode_request`], [`decode_answer`] and
//! [`decode_forwarded`] refuse anything malformed with a [`WireError`] and never panic (the
//! fuzz target `matcher_wire` checks that, and that what decodes encodes to what decodes to
//! the same value).

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

/// The largest message a reader decodes.
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
