//! The hub's requests: tickets, opening, resuming and closing streams, and changing their
//! targets (the hand-off of new targets through the changelog is `register`).

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::{Hub, Phase, Record, SnapshotHorizon, Stream, TargetState, TxnWrites};
use crate::matcher::{Document, Horizon, Matcher, TargetId};
use crate::pg::snapshot::ReadPoint;
use crate::pg::RunAs;
use crate::session::events::{self, At, ResetReason};
use crate::session::registry::TargetEntry;
use crate::session::{
    Caller, Command, Connection, Grant, Resumed, SessionError, Sizes, TargetRequest,
};
use crate::source::Lsn;

/// The message of the `reset` of a resume from a position no longer held.
const NOT_RETAINED: &str = "the position to resume from is no longer retained; a snapshot follows";

impl Hub {
    pub(super) fn on_command(&mut self, command: Command) {
        match command {
            Command::Ticket(reply) => {
                if self.ready {
                    let grant = self.grant();
                    if let Err(grant) = reply.send(grant) {
                        self.forget(grant);
                    }
                } else {
                    self.waiting.push(reply);
                }
            }
            Command::Forget(grant) => self.forget(grant),
            Command::Open {
                database,
                caller,
                targets,
                grant,
                point,
                lead,
                reply,
            } => {
                let result = self.open(database, caller, targets, grant, &point, lead);
                if let Err(Ok(connection)) = reply.send(result) {
                    // The client went away meanwhile: the stream waits for a resume.
                    drop(connection);
                }
            }
            Command::Resume {
                stream,
                position,
                caller,
                reply,
            } => {
                let _ = reply.send(self.resume(&stream, position, &caller));
            }
            Command::Check {
                stream,
                database,
                caller,
                targets,
                reply,
            } => {
                let _ = reply.send(self.check(&stream, &database, &caller, &targets));
            }
            Command::Add {
                stream,
                caller,
                targets,
                grant,
                point,
                reply,
            } => {
                let entries: Option<Vec<TargetEntry>> = self
                    .records
                    .as_ref()
                    .map(|_| targets.iter().map(|(t, _)| TargetEntry::added(t)).collect());
                let result = match self.streams.get(&stream) {
                    None => Err(SessionError::NotFound(format!("no stream {stream}"))),
                    Some(s) if s.caller.key != caller => Err(SessionError::PermissionDenied(
                        "the stream belongs to another caller".into(),
                    )),
                    Some(_) => self.register(&stream, targets, grant, &point),
                };
                if result.is_err() {
                    self.forget(grant);
                }
                let _ = reply.send(result.map(|()| self.record_added(&stream, entries)));
            }
            Command::Remove {
                stream,
                caller,
                target,
                reply,
            } => {
                let _ = reply.send(self.remove(&stream, &caller, &target));
            }
            Command::Touched { position, reply } => {
                let _ = reply.send(self.touched(position));
            }
            Command::Adopt {
                stream,
                position,
                database,
                caller,
                targets,
                grant,
                point,
                slack,
                unshown,
                reply,
            } => {
                let adopting = super::adopt::Adopting {
                    id: stream,
                    from: position,
                    database,
                    caller,
                    slack,
                    unshown,
                };
                let result = self.adopt(adopting, targets, grant, &point);
                if let Err(Ok(connection)) = reply.send(result) {
                    drop(connection);
                }
            }
            Command::Claimed { stream, reply } => {
                self.claimed(&stream);
                let _ = reply.send(());
            }
            Command::Release { stream, reply } => {
                if let Some(s) = self.streams.remove(&stream) {
                    self.drop_targets(&s);
                    self.pending.remove(&stream);
                    self.guard.forget(&stream);
                }
                let _ = reply.send(());
            }
            Command::End {
                stream,
                reason,
                message,
                reply,
            } => {
                self.guard.forget(&stream);
                self.close(&stream, reason, &message);
                let _ = reply.send(());
            }
        }
    }

    /// Have the registry write targets added to `stream` (`entries`, `None`: no registry)
    /// as not shown, before anything records their first snapshot; the receiver hears when
    /// the write is done.
    fn record_added(
        &mut self,
        stream: &str,
        entries: Option<Vec<TargetEntry>>,
    ) -> Option<oneshot::Receiver<()>> {
        let (records, entries) = (self.records.as_ref()?, entries?);
        if let Some(s) = self.streams.get_mut(stream) {
            s.unrecorded.extend(entries.iter().map(|t| t.id.clone()));
        }
        let (written, done) = oneshot::channel();
        records
            .send(Record::Added {
                stream: stream.to_owned(),
                targets: entries,
                written,
            })
            .ok()?;
        Some(done)
    }

    fn check(
        &self,
        stream: &str,
        database: &str,
        caller: &str,
        targets: &[String],
    ) -> Result<(), SessionError> {
        let Some(s) = self.streams.get(stream) else {
            return Err(SessionError::NotFound(format!("no stream {stream}")));
        };
        if s.caller.key != caller {
            return Err(SessionError::PermissionDenied(
                "the stream belongs to another caller".into(),
            ));
        }
        if s.database != database {
            return Err(SessionError::NotFound(format!(
                "no stream {stream} in database {database}"
            )));
        }
        if let Some(dup) = targets.iter().find(|t| s.targets.contains_key(*t)) {
            return Err(SessionError::InvalidArgument(format!(
                "the stream has a target \"{dup}\" already"
            )));
        }
        self.fits_targets(s.targets.len(), targets.len())
    }

    /// Whether `adding` targets fit on a stream with `has` targets.
    fn fits_targets(&self, has: usize, adding: usize) -> Result<(), SessionError> {
        let cap = self.settings.caps.targets;
        if has.saturating_add(adding) > cap {
            return Err(SessionError::ResourceExhausted {
                limit: "targets_per_stream",
                message: format!(
                    "a stream holds at most {cap} targets (--max-targets-per-stream); it has {has}, the request adds {adding}"
                ),
            });
        }
        Ok(())
    }

    /// Whether `caller` may open one more stream of `targets` targets.
    pub(super) fn admit(&self, caller: &Caller, targets: usize) -> Result<(), SessionError> {
        let caps = self.settings.caps;
        if self.streams.len() >= caps.streams {
            return Err(SessionError::ResourceExhausted {
                limit: "streams",
                message: format!(
                    "the sidecar holds {} listen streams, its most (--max-streams)",
                    caps.streams
                ),
            });
        }
        if let Some(quota) = &caller.quota {
            let mine = self
                .streams
                .values()
                .filter(|s| s.caller.quota.as_ref() == Some(quota))
                .count();
            if mine >= caps.per_caller {
                return Err(SessionError::ResourceExhausted {
                    limit: "streams_per_caller",
                    message: format!(
                        "this caller holds {mine} listen streams, its most (--max-streams-per-caller); a closed stream is kept for its resume during the grace period"
                    ),
                });
            }
        }
        self.fits_targets(0, targets)
    }

    fn remove(&mut self, stream: &str, caller: &str, target: &str) -> Result<(), SessionError> {
        let Some(s) = self.streams.get_mut(stream) else {
            return Err(SessionError::NotFound(format!("no stream {stream}")));
        };
        if s.caller.key != caller {
            return Err(SessionError::PermissionDenied(
                "the stream belongs to another caller".into(),
            ));
        }
        let Some(t) = s.targets.remove(target) else {
            return Err(SessionError::NotFound(format!(
                "the stream has no target \"{target}\""
            )));
        };
        s.unrecorded.remove(target);
        if let Some(m) = self.matchers.get_mut(&s.database) {
            m.remove_target(t.id);
        }
        self.owners.remove(&t.id);
        Ok(())
    }

    fn open(
        &mut self,
        database: String,
        caller: Caller,
        targets: Vec<(TargetRequest, Vec<Document>)>,
        grant: Grant,
        point: &ReadPoint,
        lead: Option<ResetReason>,
    ) -> Result<Connection, SessionError> {
        if let Err(e) = self.admit(&caller, targets.len()) {
            self.forget(grant);
            return Err(e);
        }
        let id = match stream_id(&self.instance) {
            Ok(id) => id,
            Err(e) => {
                self.forget(grant);
                return Err(e);
            }
        };
        let (stream, frames, closed) = Stream::connected(
            database,
            caller,
            Lsn(0),
            None,
            self.settings.queue,
            self.replays.clone(),
        );
        self.streams.insert(id.clone(), stream);
        if let Err(e) = self.register(&id, targets, grant, point) {
            self.forget(grant);
            if let Some(stream) = self.streams.remove(&id) {
                self.drop_targets(&stream);
            }
            return Err(e);
        }
        let mut first = Vec::new();
        if let Some(reason) = lead {
            metrics::counter!("docstore_session_resets_total", "reason" => reason.as_str())
                .increment(1);
            first.push(events::reset(
                &id,
                Lsn(0),
                reason,
                "the stream to resume is gone; a new stream starts with a snapshot",
            ));
        }
        Ok(Connection {
            stream: id,
            first,
            frames,
            closed,
            sizes: None,
        })
    }

    /// Hand off targets read in `point` to a stream: they show in a `snapshot` at a later
    /// position.
    fn register(
        &mut self,
        id: &str,
        targets: Vec<(TargetRequest, Vec<Document>)>,
        grant: Grant,
        point: &ReadPoint,
    ) -> Result<(), SessionError> {
        self.register_with(id, targets, grant, point, None, Lsn(0))
    }

    /// [`Hub::register`], the query targets keeping `slack` rows beyond their window (their
    /// rows were read with it), shown at a position after `not_before` too.
    pub(super) fn register_with(
        &mut self,
        id: &str,
        targets: Vec<(TargetRequest, Vec<Document>)>,
        grant: Grant,
        point: &ReadPoint,
        slack: Option<u32>,
        not_before: Lsn,
    ) -> Result<(), SessionError> {
        if grant.generation != self.generation {
            return Err(SessionError::Unavailable(
                "the change stream restarted during the subscription; retry".into(),
            ));
        }
        let handed = self
            .changelog
            .hand_off(grant.ticket, &point.snapshot, Instant::now())
            .map_err(|e| SessionError::Unavailable(format!("{e}; retry")))?;
        let horizon: Arc<dyn Horizon> = Arc::new(SnapshotHorizon(point.snapshot.clone()));
        let after = self.position.max(not_before);
        let Some(stream) = self.streams.get_mut(id) else {
            return Err(SessionError::NotFound(format!("no stream {id}")));
        };
        let cap = self.settings.caps.targets;
        if stream.targets.len().saturating_add(targets.len()) > cap {
            return Err(SessionError::ResourceExhausted {
                limit: "targets_per_stream",
                message: format!("a stream holds at most {cap} targets (--max-targets-per-stream)"),
            });
        }
        let config = self.settings.matcher;
        let matcher = self
            .matchers
            .entry(stream.database.clone())
            .or_insert_with(|| Matcher::new(config));
        let mut added = Vec::new();
        let mut failure = None;
        for (request, rows) in targets {
            let tid = TargetId(self.next_target);
            self.next_target += 1;
            let slack = slack.unwrap_or(config.initial_slack);
            let horizon = Some(Arc::clone(&horizon));
            if let Err(e) =
                matcher.add_target_with_slack(tid, request.spec.clone(), rows, horizon, slack)
            {
                failure = Some(SessionError::InvalidArgument(format!(
                    "target \"{}\": {e}",
                    request.id
                )));
                break;
            }
            added.push(tid);
            for txn in &handed {
                let writes = TxnWrites::of(txn).of_database(&stream.database);
                if !writes.is_empty() {
                    let _ = matcher.apply_to(tid, txn.xid, &writes);
                }
            }
            self.owners.insert(tid, (id.to_owned(), request.id.clone()));
            stream.targets.insert(
                request.id,
                TargetState {
                    id: tid,
                    spec: request.spec,
                    phase: Phase::Pending {
                        lsn: point.lsn,
                        after,
                    },
                },
            );
        }
        self.pending.insert(id.to_owned());
        if let Some(e) = failure {
            for tid in added {
                matcher.remove_target(tid);
                self.owners.remove(&tid);
            }
            stream.targets.retain(|_, t| t.phase == Phase::Live);
            return Err(e);
        }
        self.kick.notify_one();
        Ok(())
    }

    /// Resume stream `id`. A stream that is not here (ended, or an id this sidecar never
    /// made) resets with `retention_passed` when the id carries this instance, `restart`
    /// otherwise; another caller's stream with `permission`.
    fn resume(&mut self, id: &str, position: Lsn, caller: &str) -> Resumed {
        let Some(stream) = self.streams.get_mut(id) else {
            let reason = self.ended.get(id).copied().unwrap_or_else(|| {
                if id.starts_with(&format!("{}-", self.instance)) {
                    ResetReason::RetentionPassed
                } else {
                    ResetReason::Restart
                }
            });
            return Resumed::Unknown(reason);
        };
        if stream.caller.key != caller {
            return Resumed::Unknown(ResetReason::Permission);
        }
        let (sender, frames) = mpsc::channel(self.settings.queue.max(1));
        let (closer, closed) = oneshot::channel();
        stream.sender = Some(sender);
        stream.closer = Some(closer);
        stream.disconnected_at = None;
        // The admin's events leave as they are made, so while every target is live its
        // matcher results are what it was sent, up to the stream's position.
        let immediate = stream.caller.run_as == RunAs::Admin
            && !stream.held
            && stream.targets.values().all(|t| t.phase == Phase::Live);
        if position >= stream.replay.floor() && position <= stream.position {
            let first = stream.replay.after(position);
            let matcher = self.matchers.get(&stream.database);
            let sizes = immediate.then(|| Sizes {
                position: stream.position,
                documents: stream
                    .targets
                    .iter()
                    .filter_map(|(name, t)| Some((name.clone(), matcher?.result_size(t.id)?)))
                    .collect(),
            });
            return Resumed::Connection(Connection {
                stream: id.to_owned(),
                first,
                frames,
                closed,
                sizes,
            });
        }
        // The position is no longer held: `reset {retention_passed}`, then a snapshot of
        // every target. The admin's events leave as they are made, so while every target is
        // live its matcher results are what it was sent: they are the snapshot, at no cost.
        // Otherwise (a client's stream, whose events may still wait for their rules
        // decisions; a target still being read) the stream resets in place, like a lost
        // slot: its waiting events are dropped, every target is read again, and the snapshot
        // goes through the rules decisions as a subscribe's does.
        // With a registry, too: the reset waits for the registry to say the targets are not
        // held (a client that read only the reset and resumes on another process at once
        // must be sent every target whole there).
        if !immediate || self.records.is_some() {
            self.reset_in_place(id, ResetReason::RetentionPassed, NOT_RETAINED);
            return Resumed::Connection(Connection {
                stream: id.to_owned(),
                first: Vec::new(),
                frames,
                closed,
                sizes: None,
            });
        }
        metrics::counter!("docstore_session_resets_total", "reason" => "retention_passed")
            .increment(1);
        let matcher = self.matchers.get(&stream.database);
        let results: Vec<_> = stream
            .targets
            .iter()
            .filter_map(|(name, t)| Some((name.clone(), matcher?.result(t.id)?)))
            .collect();
        let first = vec![
            events::reset(
                id,
                stream.position,
                ResetReason::RetentionPassed,
                NOT_RETAINED,
            ),
            events::snapshot(
                id,
                stream.position,
                At {
                    read_time: stream.read_time,
                    ..At::default()
                },
                results,
                Arc::new([]),
            ),
        ];
        // The reset and the snapshot carry the same position, so a resume at it cannot tell a
        // client that read both from one that read only the reset: it is no longer held (as
        // after a reset in place), and such a resume is sent the two again. Events after it
        // are held as before.
        stream
            .replay
            .clear(Lsn(stream.position.0.saturating_add(1)));
        Resumed::Connection(Connection {
            stream: id.to_owned(),
            first,
            frames,
            closed,
            sizes: None,
        })
    }
}

/// A new stream id: `<instance>-<32 hex digits>`, 128 bits from the OS generator. Knowing the
/// id is what lets a caller resume the stream and change its targets, so it cannot be
/// guessed from other ids; the instance tells a restart from an expired stream.
///
/// # Errors
/// UNAVAILABLE when the OS generator fails.
pub(super) fn stream_id(instance: &str) -> Result<String, SessionError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| {
        SessionError::Unavailable(format!("no random stream id: the OS generator failed: {e}"))
    })?;
    let random: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{instance}-{random}"))
}
