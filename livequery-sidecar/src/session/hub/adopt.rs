//! Adopting a stream another sidecar process held (`--nats-url`; docs/listen.md, "Resuming
//! on another process"). The stream's targets are read as new ones and handed off through
//! the changelog; when they come live at the hub's position H, the client, which saw the
//! stream up to P on the other process, gets one `change` event that takes it from its
//! results at P to those at H. Its results at P are the current ones with every document
//! written in (P, H] put back as it was before its first write there (the before-images
//! that REPLICA IDENTITY FULL puts in the stream), kept if the target matches them
//! (`Matcher::rewound`). A target the client held no results of at P (added to the stream
//! after P, or before P but not yet shown: its registry entry says so) gets its full
//! results at H instead, in the same event (`snapshot` with the others' changes); a client
//! that holds no target (its position is 0: it saw no event of the stream) gets one
//! `snapshot` of them all, and nothing of the changelog is needed. When that is not known
//! exactly the stream resets in place (`reset {retention_passed}` once the registry says its
//! targets are not held, then a snapshot once they are read again), never a guess. When its
//! targets do not come live within [`ADOPT_WAIT`] (this process's change stream lags behind
//! P, or behind the read), it resets in place: `reset {restart}`, then a snapshot once they
//! are read again.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use super::{Hub, Stream};
use crate::matcher::{Document, TargetDelta, Write};
use crate::pg::snapshot::ReadPoint;
use crate::session::events::{self, At, ResetReason};
use crate::session::{Caller, Connection, Grant, SessionError, TargetRequest};
use crate::source::{Change, Lsn, Transaction};
use docstore_core::path::ResourcePath;

/// The message of the `reset` of an adoption that cannot be exact.
const NOT_EXACT: &str =
    "the stream was adopted from another process, which cannot be done exactly here; a snapshot follows";

/// How long an adopted stream waits for its targets to come live (its change stream to reach
/// both the client's position and the read of its targets) before it resets.
pub(super) const ADOPT_WAIT: Duration = Duration::from_secs(30);

/// The message of the `reset` of an adoption that waited longer than [`ADOPT_WAIT`].
pub(super) const LATE: &str =
    "the stream was adopted from another process whose position this process did not reach in time; a snapshot follows";

/// A stream to adopt: its id, the position its client saw, and how it was read.
#[derive(Debug)]
pub(in crate::session) struct Adopting {
    pub id: String,
    pub from: Lsn,
    pub database: String,
    pub caller: Caller,
    /// The slack the query targets' rows were read with.
    pub slack: u32,
    /// The targets the client holds no results of at `from`: its first event shows them
    /// whole.
    pub unshown: Vec<String>,
}

/// The version before `txns` of every document of `database` they write (`None`: it did
/// not exist), from the first write of each. `None` when that is not known: a truncate, or
/// an update or delete without its old row.
pub(super) fn before_images(
    txns: &[Arc<Transaction>],
    database: &str,
) -> Option<HashMap<ResourcePath, Option<Document>>> {
    let mut before = HashMap::new();
    for change in txns.iter().flat_map(|t| t.changes.iter()) {
        let (path, old) = match change {
            Change::Truncate => return None,
            Change::Insert(d) if d.database_id == database => (&d.path, None),
            Change::Update(d) if d.database_id == database => (&d.path, Some(&d.before)),
            Change::Delete(k) if k.database_id == database => (&k.path, Some(&k.before)),
            Change::Insert(_) | Change::Update(_) | Change::Delete(_) => continue,
        };
        if before.contains_key(path) {
            continue;
        }
        let version = match old {
            None => None,
            Some(None) => return None,
            Some(Some(previous)) => Some(Document::new(
                path.clone(),
                previous.fields.clone(),
                previous.create_time,
                previous.update_time,
            )),
        };
        before.insert(path.clone(), version);
    }
    Some(before)
}

impl Hub {
    /// How many documents the transactions after `position` wrote, in every database
    /// (`None`: the changelog does not hold them all).
    pub(super) fn touched(&self, position: Lsn) -> Option<usize> {
        let txns = self.changelog.since(position).ok()?;
        let mut written: HashSet<(&str, &ResourcePath)> = HashSet::new();
        for change in txns.iter().flat_map(|t| t.changes.iter()) {
            match change {
                Change::Insert(d) | Change::Update(d) => {
                    written.insert((&d.database_id, &d.path));
                }
                Change::Delete(k) => {
                    written.insert((&k.database_id, &k.path));
                }
                Change::Truncate => {}
            }
        }
        Some(written.len())
    }

    /// Create the adopted stream on targets read in `point`: they come live after both the
    /// hub's position and the client's, and then `send_adopted` speaks first.
    pub(super) fn adopt(
        &mut self,
        adopting: Adopting,
        targets: Vec<(TargetRequest, Vec<Document>)>,
        grant: Grant,
        point: &ReadPoint,
    ) -> Result<Connection, SessionError> {
        let Adopting {
            id,
            from,
            database,
            caller,
            slack,
            unshown,
        } = adopting;
        if self.streams.contains_key(&id) {
            self.forget(grant);
            return Err(SessionError::Unavailable(
                "the stream is being resumed on this process already; retry".into(),
            ));
        }
        if let Err(e) = self.admit(&caller, targets.len()) {
            self.forget(grant);
            return Err(e);
        }
        // The client's token is the stream's only position so far: a resume at it replays
        // nothing; an older one resets. A client that holds none of the targets (it saw no
        // event of the stream, or none of its targets is held at its position) is sent them
        // as a new stream's: one snapshot when they come live, however long that takes, and
        // no reset (there is nothing of its to bring forward).
        let holds = targets
            .iter()
            .any(|(request, _)| !unshown.contains(&request.id));
        let adopt = holds.then_some(from);
        let (mut stream, frames, closed) = Stream::connected(
            database,
            caller,
            from,
            adopt,
            self.settings.queue,
            self.replays.clone(),
        );
        stream.claimed = false;
        self.streams.insert(id.clone(), stream);
        if let Err(e) = self.register_with(&id, targets, grant, point, Some(slack), from) {
            self.forget(grant);
            if let Some(stream) = self.streams.remove(&id) {
                self.drop_targets(&stream);
            }
            return Err(e);
        }
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.unrecorded = unshown
                .into_iter()
                .filter(|name| stream.targets.contains_key(name))
                .collect();
        }
        metrics::counter!("docstore_session_adopted_total").increment(1);
        Ok(Connection {
            stream: id,
            first: Vec::new(),
            frames,
            closed,
            sizes: None,
        })
    }

    /// The first event of an adopted stream, at `position`, whose targets all came live
    /// there: the changes from the client's results at `from` (and the full results of the
    /// targets it held none of then, `Stream::unrecorded`, in a `snapshot` with them), or,
    /// when those are not known exactly, `reset {retention_passed}` and a snapshot.
    pub(super) fn send_adopted(
        &mut self,
        id: &str,
        from: Lsn,
        position: Lsn,
        at: At,
        writes: Option<&Vec<Write>>,
    ) {
        let Some(stream) = self.streams.get(id) else {
            return;
        };
        let names: Vec<String> = stream.targets.keys().cloned().collect();
        let matcher = self.matchers.get(&stream.database);
        // A client that holds none of the targets (a stream it saw no event of) needs no
        // before-images: every target goes whole.
        let holds = stream
            .targets
            .keys()
            .any(|name| !stream.unrecorded.contains(name));
        let before = if holds {
            self.changelog
                .since(from)
                .ok()
                .and_then(|txns| before_images(&txns, &stream.database))
        } else {
            Some(HashMap::new())
        };
        let exact = before.and_then(|before| {
            let matcher = matcher?;
            stream
                .targets
                .iter()
                .filter(|(name, _)| !stream.unrecorded.contains(*name))
                .map(|(name, t)| {
                    matcher
                        .rewound(t.id, &before)
                        .ok()
                        .map(|delta| delta.map(|d| (name.clone(), d)))
                })
                .collect::<Option<Vec<Option<(String, TargetDelta)>>>>()
        });
        match exact {
            Some(changes) => {
                let changes: Arc<[(String, TargetDelta)]> =
                    changes.into_iter().flatten().collect::<Vec<_>>().into();
                // Shown whole: nothing of them is the client's at `from` (a snapshot replaces
                // whatever it has of them, so one it did hold meanwhile is no harm).
                let whole: Vec<_> = stream
                    .unrecorded
                    .iter()
                    .filter_map(|name| {
                        let t = stream.targets.get(name)?;
                        Some((name.clone(), matcher?.result(t.id)?))
                    })
                    .collect();
                let (frame, logged) = if !whole.is_empty() {
                    let changes = Arc::clone(&changes);
                    (events::snapshot(id, position, at, whole, changes), true)
                } else if changes.is_empty() {
                    (events::heartbeat(id, position, at), false)
                } else {
                    (events::change(id, position, at, Arc::clone(&changes)), true)
                };
                self.send_checked(id, frame, logged, &changes, &names, writes);
            }
            None => {
                tracing::info!(stream = %id, %from, %position, "an adopted stream cannot be brought from its client's position exactly: it resets");
                // In place, as any reset: the registry says its targets are not held before
                // the client can read the reset.
                self.reset_in_place(id, ResetReason::RetentionPassed, NOT_EXACT);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::source::{DocumentChange, DocumentData, DocumentKey, Previous};
    use docstore_core::value::{Map, Timestamp, Value};

    fn fields(n: i64) -> Map {
        let mut map = Map::new();
        map.insert("n".into(), Value::Integer(n));
        map
    }

    fn at(micros: i64) -> Timestamp {
        Timestamp::from_micros(micros).unwrap()
    }

    fn previous(n: i64, micros: i64) -> Option<Box<Previous>> {
        Some(Box::new(Previous {
            fields: fields(n),
            create_time: at(1),
            update_time: at(micros),
        }))
    }

    fn write(database: &str, path: &str, n: i64, before: Option<Box<Previous>>) -> DocumentChange {
        DocumentChange {
            database_id: database.into(),
            name: path.as_bytes().to_vec(),
            path: ResourcePath::parse_document(path).unwrap(),
            data: DocumentData::Fields(fields(n)),
            create_time: at(1),
            update_time: at(9),
            before,
        }
    }

    fn txn(changes: Vec<Change>) -> Arc<Transaction> {
        Arc::new(Transaction {
            xid: 1,
            commit_lsn: Lsn(10),
            end_lsn: Lsn(18),
            commit_time: at(9),
            changes,
            messages: Vec::new(),
        })
    }

    fn path(p: &str) -> ResourcePath {
        ResourcePath::parse_document(p).unwrap()
    }

    #[test]
    fn before_images_are_the_versions_before_the_first_write() {
        let delete = Change::Delete(DocumentKey {
            database_id: "db".into(),
            name: b"c/b".to_vec(),
            path: path("c/b"),
            before: previous(2, 5),
        });
        let txns = vec![
            txn(vec![
                Change::Update(write("db", "c/a", 10, previous(1, 4))),
                Change::Insert(write("db", "c/new", 3, None)),
                Change::Update(write("other", "c/x", 3, previous(0, 2))),
            ]),
            txn(vec![
                delete,
                Change::Update(write("db", "c/a", 11, previous(10, 9))),
                Change::Update(write("db", "c/new", 4, previous(3, 9))),
            ]),
        ];
        let before = before_images(&txns, "db").unwrap();
        assert_eq!(before.len(), 3);
        let a = before[&path("c/a")].as_ref().unwrap();
        assert_eq!((&*a.fields, a.update_time), (&fields(1), at(4)));
        assert_eq!(
            before[&path("c/b")].as_ref().unwrap().fields.as_ref(),
            &fields(2)
        );
        assert!(before[&path("c/new")].is_none());
    }

    #[test]
    fn before_images_are_unknown_after_a_truncate_or_without_the_old_row() {
        let truncated = vec![txn(vec![Change::Truncate])];
        assert!(before_images(&truncated, "db").is_none());
        let no_old_row = vec![txn(vec![Change::Update(write("db", "c/a", 1, None))])];
        assert!(before_images(&no_old_row, "db").is_none());
        // Another database's writes do not matter.
        let elsewhere = vec![txn(vec![Change::Update(write("x", "c/a", 1, None))])];
        assert!(before_images(&elsewhere, "db").unwrap().is_empty());
    }
}
