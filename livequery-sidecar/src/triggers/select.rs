//! Which changes of a committed transaction each trigger records: its database, its pattern
//! (core's `path_pattern`), its events, and only changes after its position and its creation.
//! Pure: the recorder (`record.rs`) loads the triggers and writes what this returns.

use docstore_core::path_pattern::PathPattern;
use docstore_core::typed_json;
use docstore_core::value::{Map, Timestamp};
use docstore_core::ResourcePath;
use serde_json::Value as Json;

use crate::source::{Change, Lsn, Previous, Transaction};

/// The prefix of the transactional message that carries the chain depth of the writes an
/// exactly-once endpoint answered (`pg_logical_emit_message(true, DEPTH_PREFIX, depth)`).
pub const DEPTH_PREFIX: &str = "docstore-trigger-depth";

/// A change event, as triggers name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Create,
    Update,
    Delete,
}

impl Event {
    /// Its name in `docstore.triggers.events` and in a delivery.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Create => "create",
            Event::Update => "update",
            Event::Delete => "delete",
        }
    }
}

/// A trigger as the recorder needs it.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub name: String,
    pub database_id: String,
    pub pattern: PathPattern,
    pub events: Vec<Event>,
    /// Changes at or before this position are recorded already (a replay after a restart).
    pub position: Lsn,
    /// Changes committed before the trigger was created are not its.
    pub created_at: Timestamp,
}

impl Trigger {
    /// A trigger from its catalog row; `None` for a pattern or event the catalog should never
    /// hold (`create_trigger` checks them).
    pub fn new(
        name: String,
        database_id: String,
        pattern: &str,
        events: &[String],
        position: Lsn,
        created_at: Timestamp,
    ) -> Option<Trigger> {
        let pattern = PathPattern::parse_document(pattern).ok()?;
        let events = events
            .iter()
            .map(|e| match e.as_str() {
                "create" => Some(Event::Create),
                "update" => Some(Event::Update),
                "delete" => Some(Event::Delete),
                _ => None,
            })
            .collect::<Option<Vec<Event>>>()?;
        Some(Trigger {
            name,
            database_id,
            pattern,
            events,
            position,
            created_at,
        })
    }
}

/// One row of `docstore.trigger_deliveries`.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub trigger: String,
    pub change_id: String,
    pub position: Lsn,
    pub commit_time: Timestamp,
    pub path: String,
    pub event: Event,
    /// The document before and after, as the HTTP API renders a document (JSON text).
    pub before: Option<String>,
    pub after: Option<String>,
    /// The wildcards' values (a JSON object's text).
    pub params: String,
    pub depth: i32,
    /// Recorded parked, with this reason (a chain past the depth limit).
    pub parked: Option<String>,
}

/// The change id of the `index`th change of the transaction committed at `commit`: unique in
/// the stream, the same when the transaction is decoded again.
pub fn change_id(commit: Lsn, index: usize) -> String {
    format!("{:016X}-{index}", commit.0)
}

/// The chain depth of a transaction's changes: the depth its message carries, 0 without one.
pub fn depth_of(txn: &Transaction) -> i32 {
    txn.messages
        .iter()
        .filter(|m| m.prefix == DEPTH_PREFIX)
        .filter_map(|m| std::str::from_utf8(&m.content).ok()?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// A document as the HTTP API renders it: `{"path", "data", "createTime", "updateTime"}`.
pub fn document_json(
    path: &ResourcePath,
    fields: &Map,
    create_time: Timestamp,
    update_time: Timestamp,
) -> String {
    let path = Json::String(path.to_string()).to_string();
    format!(
        "{{\"path\":{path},\"data\":{},\"createTime\":\"{}\",\"updateTime\":\"{}\"}}",
        typed_json::map_to_string(fields),
        create_time.to_rfc3339(),
        update_time.to_rfc3339()
    )
}

fn previous_json(path: &ResourcePath, previous: Option<&Previous>) -> Option<String> {
    previous.map(|p| document_json(path, &p.fields, p.create_time, p.update_time))
}

/// The records of `txn` for `triggers`; a change of a chain deeper than `max_depth` is
/// recorded parked.
pub fn records(triggers: &[Trigger], txn: &Transaction, max_depth: i32) -> Vec<Record> {
    let mut out = Vec::new();
    if triggers.is_empty() {
        return out;
    }
    let depth = depth_of(txn);
    for (index, change) in txn.changes.iter().enumerate() {
        let (database, path, event, before, after) = match change {
            Change::Insert(d) | Change::Update(d) => {
                let event = if matches!(change, Change::Insert(_)) {
                    Event::Create
                } else {
                    Event::Update
                };
                let crate::source::DocumentData::Fields(fields) = &d.data else {
                    // Only without REPLICA IDENTITY FULL (the old row carries the data).
                    tracing::error!(path = %d.path, "a trigger's change has no data (is REPLICA IDENTITY FULL off on docstore.entities?): not recorded");
                    continue;
                };
                let after = document_json(&d.path, fields, d.create_time, d.update_time);
                let before = previous_json(&d.path, d.before.as_deref());
                (&d.database_id, &d.path, event, before, Some(after))
            }
            Change::Delete(k) => (
                &k.database_id,
                &k.path,
                Event::Delete,
                previous_json(&k.path, k.before.as_deref()),
                None,
            ),
            Change::Truncate => {
                tracing::warn!(
                    "TRUNCATE of docstore.entities: write triggers receive no deletes for it"
                );
                continue;
            }
        };
        let segments: Vec<&str> = path.segments().iter().map(String::as_str).collect();
        for trigger in triggers {
            if &trigger.database_id != database
                || !trigger.events.contains(&event)
                || txn.commit_lsn <= trigger.position
                || txn.commit_time < trigger.created_at
            {
                continue;
            }
            let Some(params) = trigger.pattern.params(&segments) else {
                continue;
            };
            let params = Json::Object(
                params
                    .into_iter()
                    .map(|(k, v)| (k, Json::String(v)))
                    .collect(),
            )
            .to_string();
            let parked = (depth > max_depth)
                .then(|| format!("trigger chain depth {depth} is over the limit {max_depth}"));
            out.push(Record {
                trigger: trigger.name.clone(),
                change_id: change_id(txn.commit_lsn, index),
                position: txn.commit_lsn,
                commit_time: txn.commit_time,
                path: path.to_string(),
                event,
                before: before.clone(),
                after: after.clone(),
                params,
                depth,
                parked,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use docstore_core::value::Value;

    use super::*;
    use crate::source::{DocumentChange, DocumentData, DocumentKey, EmittedMessage};

    fn ts(micros: i64) -> Timestamp {
        Timestamp::from_micros(micros).unwrap()
    }

    fn fields(n: i64) -> Map {
        Map::from([("n".to_owned(), Value::Integer(n))])
    }

    fn path(p: &str) -> ResourcePath {
        ResourcePath::parse(p).unwrap()
    }

    fn trigger(name: &str, pattern: &str, events: &[&str]) -> Trigger {
        let events: Vec<String> = events.iter().map(|e| (*e).to_owned()).collect();
        Trigger::new(
            name.into(),
            "(default)".into(),
            pattern,
            &events,
            Lsn(0),
            ts(0),
        )
        .unwrap()
    }

    fn txn(changes: Vec<Change>) -> Transaction {
        Transaction {
            xid: 1,
            commit_lsn: Lsn(0x100),
            end_lsn: Lsn(0x110),
            commit_time: ts(1_000),
            changes,
            messages: Vec::new(),
        }
    }

    fn written(p: &str, n: i64, before: Option<i64>) -> DocumentChange {
        DocumentChange {
            database_id: "(default)".into(),
            name: Vec::new(),
            path: path(p),
            data: DocumentData::Fields(fields(n)),
            create_time: ts(10),
            update_time: ts(20),
            before: before.map(|b| {
                Box::new(Previous {
                    fields: fields(b),
                    create_time: ts(10),
                    update_time: ts(15),
                })
            }),
        }
    }

    #[test]
    fn changes_are_matched_by_pattern_event_and_database() {
        let t = txn(vec![
            Change::Insert(written("rooms/a/messages/m", 1, None)),
            Change::Update(written("rooms/a/messages/m", 2, Some(1))),
            Change::Delete(DocumentKey {
                database_id: "(default)".into(),
                name: Vec::new(),
                path: path("rooms/a/messages/m"),
                before: Some(Box::new(Previous {
                    fields: fields(2),
                    create_time: ts(10),
                    update_time: ts(20),
                })),
            }),
            Change::Insert(written("rooms/a", 1, None)),
        ]);
        let mut other_db = trigger("other", "{doc=**}", &["create"]);
        other_db.database_id = "other".into();
        let triggers = [
            trigger(
                "all",
                "rooms/{room}/messages/{m}",
                &["create", "update", "delete"],
            ),
            trigger("deletes", "{doc=**}", &["delete"]),
            other_db,
        ];
        let got = records(&triggers, &t, 8);
        let summary: Vec<(&str, &str, &str)> = got
            .iter()
            .map(|r| (r.trigger.as_str(), r.event.as_str(), r.change_id.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("all", "create", "0000000000000100-0"),
                ("all", "update", "0000000000000100-1"),
                ("all", "delete", "0000000000000100-2"),
                ("deletes", "delete", "0000000000000100-2"),
            ]
        );
        assert_eq!(got[0].params, r#"{"m":"m","room":"a"}"#);
        assert_eq!(got[0].before, None);
        assert_eq!(
            got[1].before.as_deref(),
            Some(
                r#"{"path":"rooms/a/messages/m","data":{"n":1},"createTime":"1970-01-01T00:00:00.000010Z","updateTime":"1970-01-01T00:00:00.000015Z"}"#
            )
        );
        assert_eq!(got[2].after, None);
        assert_eq!(got[2].before, got[1].after);
        assert_eq!(got[3].params, r#"{"doc":"rooms/a/messages/m"}"#);
    }

    #[test]
    fn positions_creation_and_depth_limit() {
        let mut t = txn(vec![Change::Insert(written("a/b", 1, None))]);
        let mut recorded = trigger("t", "a/{id}", &["create"]);
        recorded.position = Lsn(0x100);
        assert!(records(&[recorded], &t, 8).is_empty());
        let mut later = trigger("t", "a/{id}", &["create"]);
        later.created_at = ts(1_001);
        assert!(records(&[later], &t, 8).is_empty());
        t.messages.push(EmittedMessage {
            lsn: Lsn(0xF0),
            prefix: DEPTH_PREFIX.into(),
            content: b"3".to_vec(),
        });
        let at_limit = records(&[trigger("t", "a/{id}", &["create"])], &t, 3);
        assert_eq!(
            (at_limit[0].depth, at_limit[0].parked.as_deref()),
            (3, None)
        );
        let over = records(&[trigger("t", "a/{id}", &["create"])], &t, 2);
        assert_eq!(
            over[0].parked.as_deref(),
            Some("trigger chain depth 3 is over the limit 2")
        );
    }
}
