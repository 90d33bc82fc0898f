//! A listen stream's events as `text/event-stream` frames (docs/listen.md): `event:` the
//! kind, `id:` the resume token `<stream>.<position>`, `data:` one line of JSON. Documents are
//! typed JSON (`docstore_core::typed_json`) with their update time.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, Weak};

use docstore_core::typed_json::map_to_string;
use docstore_core::value::Map;
use serde_json::Value as Json;

use crate::matcher::{DocChange, Document, TargetDelta, TargetResult};
use crate::session::events::{Event, EventKind};
use crate::session::Frame;

/// The SSE frame of `frame`'s event (`event:`, `id:`, `data:`, blank line).
pub fn text(frame: &Frame) -> String {
    render(&frame.event)
}

/// The SSE frame of `event`.
pub fn render(event: &Event) -> String {
    let mut data = String::new();
    head(&mut data, event);
    let kind = match &event.kind {
        EventKind::Snapshot { results, changes } => {
            list(&mut data, "targets", results, result_json);
            list(&mut data, "changes", changes, delta_json);
            data.push('}');
            "snapshot"
        }
        EventKind::Change { changes } => {
            list(&mut data, "targets", changes, delta_json);
            data.push('}');
            "change"
        }
        EventKind::Heartbeat => {
            data.push('}');
            "heartbeat"
        }
        EventKind::Reset { reason, message } => {
            let _ = write!(
                data,
                ",\"reason\":\"{}\",\"message\":{}}}",
                reason.as_str(),
                Json::String(message.clone())
            );
            "reset"
        }
    };
    format!("event: {kind}\nid: {}\ndata: {data}\n\n", event.token())
}

fn head(out: &mut String, event: &Event) {
    let _ = write!(
        out,
        "{{\"stream\":{},\"position\":\"{}\"",
        Json::String(event.stream.clone()),
        event.position
    );
    if let Some(t) = event.commit_time {
        let _ = write!(out, ",\"commitTime\":\"{}\"", t.to_rfc3339());
    }
    if let Some(t) = event.read_time {
        let _ = write!(out, ",\"readTime\":\"{}\"", t.to_rfc3339());
    }
}

/// A document as `{"path", "data", "createTime", "updateTime"}`.
pub fn document_json(out: &mut String, doc: &Document) {
    let _ = write!(
        out,
        "{{\"path\":{},\"data\":{},\"createTime\":\"{}\",\"updateTime\":\"{}\"}}",
        Json::String(doc.path.to_string()),
        RENDERED.fields_json(&doc.fields),
        doc.create_time.to_rfc3339(),
        doc.update_time.to_rfc3339()
    );
}

/// The typed JSON of document versions being sent, by their shared fields: one decoded version
/// is one `Arc<Map>` that every target showing it holds (`matcher::Document::fields`), so a
/// change that reaches 10,000 streams (a fan-out) is rendered once instead of once per stream.
/// Keyed by the allocation's address and checked by a weak reference, so an address reused by
/// a later version is never mistaken for the earlier one; entries of dropped versions are
/// swept when the map grows.
static RENDERED: Rendered = Rendered {
    entries: Mutex::new(None),
};

struct Rendered {
    entries: Mutex<Option<RenderedEntries>>,
}

/// A rendering by the address of its fields, with a weak reference to check it by.
type RenderedEntries = HashMap<usize, (Weak<Map>, Arc<str>)>;

/// Entries kept before the sweep of dropped versions.
const RENDERED_SWEEP: usize = 4096;

impl Rendered {
    fn fields_json(&self, fields: &Arc<Map>) -> Arc<str> {
        let key = Arc::as_ptr(fields) as usize;
        if let Ok(guard) = self.entries.lock() {
            if let Some((weak, text)) = guard.as_ref().and_then(|m| m.get(&key)) {
                if weak.strong_count() > 0 {
                    return Arc::clone(text);
                }
            }
        }
        let text: Arc<str> = map_to_string(fields).into();
        if let Ok(mut guard) = self.entries.lock() {
            let map = guard.get_or_insert_with(HashMap::new);
            if map.len() >= RENDERED_SWEEP {
                map.retain(|_, (weak, _)| weak.strong_count() > 0);
                if map.len() >= RENDERED_SWEEP {
                    map.clear();
                }
            }
            map.insert(key, (Arc::downgrade(fields), Arc::clone(&text)));
        }
        text
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::events::{change, reset, ResetReason};
    use crate::source::Lsn;
    use docstore_core::path::ResourcePath;
    use docstore_core::value::{Timestamp, Value};

    #[test]
    fn rendered_fields_follow_the_version_not_the_address() {
        // Versions dropped and allocated again (addresses reused after each sweep): every
        // rendering is its own version's.
        for i in 0..10_000 {
            let mut m = Map::new();
            m.insert("n".into(), Value::Integer(i));
            let fields = Arc::new(m);
            assert_eq!(&*RENDERED.fields_json(&fields), map_to_string(&fields));
            assert_eq!(&*RENDERED.fields_json(&fields), map_to_string(&fields));
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
            Timestamp::from_micros(0).unwrap(),
        );
        let f = change(
            "s-1",
            Lsn(5),
            crate::session::events::At {
                commit_time: Timestamp::from_micros(1),
                ..Default::default()
            },
            vec![(
                "q".into(),
                TargetDelta::Changes(vec![
                    DocChange::Added { doc, new_index: 0 },
                    DocChange::Removed {
                        path: ResourcePath::parse("r/b").unwrap(),
                        old_index: 1,
                    },
                ]),
            )]
            .into(),
        );
        let text = text(&f);
        assert!(text.starts_with("event: change\nid: s-1.0000000000000005\ndata: {"));
        let data = text.lines().nth(2).unwrap().strip_prefix("data: ").unwrap();
        let json: Json = serde_json::from_str(data).unwrap();
        assert_eq!(json["position"], "0/5");
        assert_eq!(json["targets"][0]["changes"][0]["document"]["data"]["n"], 3);
        assert_eq!(json["targets"][0]["changes"][1]["oldIndex"], 1);
        let r = text_of_reset();
        assert!(r.contains("\"reason\":\"lagged\""));
    }

    fn text_of_reset() -> String {
        text(&reset(
            "s-1",
            Lsn(5),
            ResetReason::Lagged,
            "slow \"client\"",
        ))
    }
}
