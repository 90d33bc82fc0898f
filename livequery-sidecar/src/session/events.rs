//! The events of a listen stream as `text/event-stream` frames (docs/listen.md): `snapshot`,
//! `change`, `heartbeat` and `reset`, each with the resume token `<stream>.<position>` as
//! its `id:` and one line of JSON as its `data:`. Documents are typed JSON
//! (`docstore_core::typed_json`) with their update time.

use std::fmt::Write as _;
use std::sync::Arc;

use docstore_core::typed_json::map_to_string;
use docstore_core::value::{Map, Timestamp};
use serde_json::Value as Json;

use crate::matcher::{DocChange, Document, TargetDelta, TargetResult};
use crate::source::Lsn;

/// Why a stream's state was discarded (the `reason` of a `reset` event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResetReason {
    /// The client read too slowly: its queue overflowed; the stream is closed.
    Lagged,
    /// The replication slot was lost (dropped or invalidated): changes may be missing.
    SlotLost,
    /// The position to resume from is no longer retained.
    RetentionPassed,
    /// The stream is unknown to this sidecar (it restarted, or the stream expired).
    Restart,
    /// The caller may no longer read a target.
    Permission,
}

impl ResetReason {
    /// The name in events and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetReason::Lagged => "lagged",
            ResetReason::SlotLost => "slot_lost",
            ResetReason::RetentionPassed => "retention_passed",
            ResetReason::Restart => "restart",
            ResetReason::Permission => "permission",
        }
    }
}

/// One event, rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The commit position the event is at.
    pub position: Lsn,
    /// The whole SSE frame (`event:`, `id:`, `data:`, blank line).
    pub text: Arc<str>,
    /// The commit time of the position's transaction (Unix microseconds), for the
    /// commit-to-send lag.
    pub commit_micros: Option<i64>,
}

/// The resume token of a position of a stream.
pub fn token(stream: &str, position: Lsn) -> String {
    format!("{stream}.{:016x}", position.0)
}

/// Parse a resume token `<stream>.<16 hex digits>`.
pub fn parse_token(text: &str) -> Option<(String, Lsn)> {
    let (stream, position) = text.trim().rsplit_once('.')?;
    if stream.is_empty()
        || stream.len() > 64
        || !stream
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        || position.len() != 16
    {
        return None;
    }
    let position = u64::from_str_radix(position, 16).ok()?;
    Some((stream.to_owned(), Lsn(position)))
}

fn frame(
    kind: &str,
    stream: &str,
    position: Lsn,
    commit_time: Option<Timestamp>,
    data: &str,
) -> Frame {
    Frame {
        position,
        text: Arc::from(format!(
            "event: {kind}\nid: {}\ndata: {data}\n\n",
            token(stream, position)
        )),
        commit_micros: commit_time.map(Timestamp::micros),
    }
}

fn head(out: &mut String, stream: &str, position: Lsn, commit_time: Option<Timestamp>) {
    let _ = write!(
        out,
        "{{\"stream\":{},\"position\":\"{position}\"",
        Json::String(stream.to_owned())
    );
    if let Some(t) = commit_time {
        let _ = write!(out, ",\"commitTime\":\"{}\"", t.to_rfc3339());
    }
}

/// A document as `{"path", "data", "updateTime"}`.
pub fn document_json(out: &mut String, doc: &Document) {
    let _ = write!(
        out,
        "{{\"path\":{},\"data\":{},\"updateTime\":\"{}\"}}",
        Json::String(doc.path.to_string()),
        map_to_string(&doc.fields),
        doc.update_time.to_rfc3339()
    );
}

fn target_key(out: &mut String, target: &str) {
    let _ = write!(out, "{{\"target\":{}", Json::String(target.to_owned()));
}

fn aggregation(out: &mut String, row: &Map) {
    out.push_str(",\"aggregation\":");
    out.push_str(&map_to_string(row));
}

fn result_json(out: &mut String, target: &str, result: &TargetResult) {
    target_key(out, target);
    match result {
        TargetResult::Documents(docs) => {
            out.push_str(",\"documents\":[");
            for (i, doc) in docs.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                document_json(out, doc);
            }
            out.push(']');
        }
        TargetResult::Aggregate(row) => aggregation(out, row),
    }
    out.push('}');
}

fn delta_json(out: &mut String, target: &str, delta: &TargetDelta) {
    target_key(out, target);
    match delta {
        TargetDelta::Changes(changes) => {
            out.push_str(",\"changes\":[");
            for (i, change) in changes.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match change {
                    DocChange::Added { doc, new_index } => {
                        let _ = write!(
                            out,
                            "{{\"type\":\"added\",\"newIndex\":{new_index},\"document\":"
                        );
                        document_json(out, doc);
                    }
                    DocChange::Modified {
                        doc,
                        old_index,
                        new_index,
                    } => {
                        let _ = write!(
                            out,
                            "{{\"type\":\"modified\",\"oldIndex\":{old_index},\"newIndex\":{new_index},\"document\":"
                        );
                        document_json(out, doc);
                    }
                    DocChange::Removed { path, old_index } => {
                        let _ = write!(
                            out,
                            "{{\"type\":\"removed\",\"oldIndex\":{old_index},\"path\":{}",
                            Json::String(path.to_string())
                        );
                    }
                }
                out.push('}');
            }
            out.push(']');
        }
        TargetDelta::Aggregate(row) => aggregation(out, row),
        // Never rendered: a target waiting for its requery reports nothing.
        TargetDelta::NeedsRequery => {}
    }
    out.push('}');
}

fn list<T>(out: &mut String, key: &str, items: &[(String, T)], each: fn(&mut String, &str, &T)) {
    let _ = write!(out, ",\"{key}\":[");
    for (i, (target, item)) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        each(out, target, item);
    }
    out.push(']');
}

/// A `snapshot` event: the full results of `results`' targets, and in the same event the
/// `changes` of the stream's other targets at this position.
pub fn snapshot(
    stream: &str,
    position: Lsn,
    commit_time: Option<Timestamp>,
    results: &[(String, TargetResult)],
    changes: &[(String, TargetDelta)],
) -> Frame {
    let mut data = String::new();
    head(&mut data, stream, position, commit_time);
    list(&mut data, "targets", results, result_json);
    list(&mut data, "changes", changes, delta_json);
    data.push('}');
    frame("snapshot", stream, position, commit_time, &data)
}

/// A `change` event: what one transaction did to the targets it changed.
pub fn change(
    stream: &str,
    position: Lsn,
    commit_time: Option<Timestamp>,
    changes: &[(String, TargetDelta)],
) -> Frame {
    let mut data = String::new();
    head(&mut data, stream, position, commit_time);
    list(&mut data, "targets", changes, delta_json);
    data.push('}');
    frame("change", stream, position, commit_time, &data)
}

/// A `heartbeat` event: the position moved, no target changed.
pub fn heartbeat(stream: &str, position: Lsn, commit_time: Option<Timestamp>) -> Frame {
    let mut data = String::new();
    head(&mut data, stream, position, commit_time);
    data.push('}');
    frame("heartbeat", stream, position, commit_time, &data)
}

/// A `reset` event: discard every target's state; a `snapshot` follows unless the reason is
/// [`ResetReason::Lagged`] (the stream then closes).
pub fn reset(stream: &str, position: Lsn, reason: ResetReason, message: &str) -> Frame {
    let mut data = String::new();
    head(&mut data, stream, position, None);
    let _ = write!(
        data,
        ",\"reason\":\"{}\",\"message\":{}}}",
        reason.as_str(),
        Json::String(message.to_owned())
    );
    frame("reset", stream, position, None, &data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use docstore_core::path::ResourcePath;
    use docstore_core::value::Value;

    #[test]
    fn tokens_round_trip_and_refuse_garbage() {
        let t = token("ab12-3", Lsn(0x16_B374_D848));
        assert_eq!(t, "ab12-3.00000016b374d848");
        assert_eq!(
            parse_token(&t),
            Some(("ab12-3".to_owned(), Lsn(0x16_B374_D848)))
        );
        for bad in [
            "",
            ".",
            "x.",
            ".0000000000000001",
            "a b.0000000000000001",
            "a.12",
            "a.zzzzzzzzzzzzzzzz",
        ] {
            assert_eq!(parse_token(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn change_events_are_one_line_of_json() {
        let mut fields = Map::new();
        fields.insert("n".into(), Value::Integer(3));
        let doc = Document::new(
            ResourcePath::parse("r/a").unwrap(),
            fields,
            Timestamp::from_micros(0).unwrap(),
        );
        let f = change(
            "s-1",
            Lsn(5),
            Timestamp::from_micros(1),
            &[(
                "q".into(),
                TargetDelta::Changes(vec![
                    DocChange::Added { doc, new_index: 0 },
                    DocChange::Removed {
                        path: ResourcePath::parse("r/b").unwrap(),
                        old_index: 1,
                    },
                ]),
            )],
        );
        let text = f.text.to_string();
        assert!(text.starts_with("event: change\nid: s-1.0000000000000005\ndata: {"));
        let data = text.lines().nth(2).unwrap().strip_prefix("data: ").unwrap();
        let json: Json = serde_json::from_str(data).unwrap();
        assert_eq!(json["position"], "0/5");
        assert_eq!(json["targets"][0]["changes"][0]["document"]["data"]["n"], 3);
        assert_eq!(json["targets"][0]["changes"][1]["oldIndex"], 1);
        let r = reset("s-1", Lsn(5), ResetReason::Lagged, "slow \"client\"");
        assert!(r.text.contains("\"reason\":\"lagged\""));
    }
}
