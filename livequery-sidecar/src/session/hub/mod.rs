//! The hub: one task that owns the changelog, the matchers (one per database) and every
//! stream, fed by the change source. See the module documentation of `session`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot, watch, Notify};

use super::events::{self, At, EventKind, Frame, ResetReason};
use super::guard::{self, Guard};
use super::registry::TargetEntry;
use super::upkeep;
use super::{fetch_of, read_targets_retrying, Caller, Command, Grant, Settings};
use crate::changelog::{Changelog, Snapshot};
use crate::matcher::{Document, Horizon, Matcher, TargetDelta, TargetId, TargetSpec, Write};
use crate::pg::snapshot::{Fetch, ReadPoint};
use crate::pg::Db;
use crate::source::heartbeat::is_heartbeat;
use crate::source::jetstream::{JetStreamSource, StreamSettings};
use crate::source::{
    Backoff, Change, ChangeSource, Consumer, DocumentData, Lsn, ReplicationSettings, SourceError,
    SourceEvent, SourceHealth, SupervisedSource, Transaction,
};
use docstore_core::path::ResourcePath;
use docstore_core::value::Timestamp;

mod adopt;
mod commands;
mod guarded;
mod replay;

use replay::{Account, Keep, LetGo, Replay};

/// The message of a `reset` that discards a stream's state in place.
const DISCARDED: &str = "the stream's state was discarded; a snapshot follows";

/// The message of the `reset {permission}` that ends a stream the rules no longer allow.
const DENIED: &str = "the security rules no longer allow this stream";

/// Streams whose end is remembered (for the reason of a later resume's reset).
const ENDED_KEPT: usize = 4096;

/// A snapshot as the matcher's horizon: it sees what the snapshot sees.
#[derive(Debug)]
struct SnapshotHorizon(Snapshot);

impl Horizon for SnapshotHorizon {
    fn sees(&self, xid: u32) -> bool {
        !self.0.applies_to(xid)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its rows are being read (a requery, or the fresh read after a reset).
    Fetching,
    /// Handed off; shown in a `snapshot` at the first position `>= lsn` and `> after`.
    Pending {
        lsn: Lsn,
        after: Lsn,
    },
    Live,
}

#[derive(Debug)]
struct TargetState {
    id: TargetId,
    spec: TargetSpec,
    phase: Phase,
}

#[derive(Debug)]
struct Stream {
    database: String,
    caller: Caller,
    targets: BTreeMap<String, TargetState>,
    sender: Option<mpsc::Sender<Frame>>,
    closer: Option<oneshot::Sender<Frame>>,
    /// Logged events for resumes; a token at its floor or later is replayable.
    replay: Replay,
    position: Lsn,
    last_event: Instant,
    disconnected_at: Option<Instant>,
    /// Bumped at each reset: reads started before it are stale.
    epoch: u64,
    /// A target ran out of slack and is being read again: the stream sends nothing until
    /// every target is back, then one `snapshot` of all of them, so that its targets never
    /// show states of different positions (the others go on changing meanwhile).
    held: bool,
    /// The read time of its last event: the next one is at least this.
    read_time: Option<Timestamp>,
    /// Adopted from another process for a client that saw it up to this position: its
    /// first event takes the client from there to now (`adopt`).
    adopt: Option<Lsn>,
    /// When it was made: an adopted stream whose targets are not live [`adopt::ADOPT_WAIT`]
    /// later resets.
    created: Instant,
    /// Its client holds results: a snapshot went out since the stream opened or last reset
    /// (or it was adopted). Before that it is sent no heartbeat: a heartbeat's position would
    /// be a token at which the client holds nothing, and a resume with it on another process
    /// would be adopted as if it did (docs/listen.md, "Resuming on another process").
    shown: bool,
    /// Targets whose results the registry does not know the client to hold (added to the
    /// running stream, or sent a snapshot by its adoption): the position of the first
    /// snapshot that shows each is recorded there ([`Record::FirstShown`]).
    unrecorded: BTreeSet<String>,
    /// The registry entry is this process's (always, but for an adopted stream until the
    /// session's claim is written, [`Hub::claimed`]). Until then its targets do not come
    /// live, and a reset in place waits in `unclaimed_reset`: the registry's "not held"
    /// write for it would find the old holder's entry and be skipped, and the claim,
    /// written next, would say the client holds what the reset discarded.
    claimed: bool,
    /// Its targets were kept from coming live while it was not claimed (logged once).
    held_for_claim: bool,
    /// A reset in place of a stream not yet claimed: recorded (then sent) once claimed.
    unclaimed_reset: Option<Frame>,
}

impl Stream {
    /// A new connected stream of `caller` in `database`, with no targets yet, at `position`
    /// (`Lsn(0)`: none yet; a resume at it replays nothing, an older one resets), and the
    /// receiving ends of its event queue (`queue` frames) and of its last frame. `adopt`: the
    /// client's position, for a stream adopted from another process. Its kept events count in
    /// `replays`.
    fn connected(
        database: String,
        caller: Caller,
        position: Lsn,
        adopt: Option<Lsn>,
        queue: usize,
        replays: Account,
    ) -> (Stream, mpsc::Receiver<Frame>, oneshot::Receiver<Frame>) {
        let (sender, frames) = mpsc::channel(queue.max(1));
        let (closer, closed) = oneshot::channel();
        let stream = Stream {
            database,
            caller,
            targets: BTreeMap::new(),
            sender: Some(sender),
            closer: Some(closer),
            replay: Replay::new(position, replays),
            position,
            last_event: Instant::now(),
            disconnected_at: None,
            epoch: 0,
            held: false,
            read_time: None,
            shown: adopt.is_some(),
            adopt,
            created: Instant::now(),
            unrecorded: BTreeSet::new(),
            claimed: adopt.is_none(),
            held_for_claim: false,
            unclaimed_reset: None,
        };
        (stream, frames, closed)
    }
}

/// Each target's rows, by the client's target id.
type Rows = Vec<(String, Vec<Document>)>;

/// The rows of a read the hub started (a requery or a re-read after a reset).
#[derive(Debug)]
pub struct Fetched {
    stream: String,
    epoch: u64,
    grant: Grant,
    requery: bool,
    result: Result<(Rows, ReadPoint), ReadFailure>,
}

#[derive(Debug)]
struct ReadFailure {
    permission: bool,
    message: String,
}

/// What tasks the hub started report back.
#[derive(Debug)]
pub enum Internal {
    Fetched(Fetched),
    /// A snapshot for unpinning (`None`: it could not be taken).
    Observed(Grant, Option<Snapshot>),
    /// The rulesets of `docstore.rules` (sent when one changed, or asked for) and the number
    /// of the last request the read answers.
    Rules(HashMap<String, guard::Loaded>, u64),
    /// Documents the rules of a stream look up.
    LookedUp(guarded::LookedUp),
    /// The registry has a stream's reset in place (`reset`, at the stream's `epoch`): its
    /// client may now read it, and its targets are read again.
    ResetRecorded {
        reset: Frame,
        epoch: u64,
    },
}

/// Where the hub's committed transactions come from.
#[derive(Debug, Clone)]
pub enum Feed {
    /// Its own replication slot (`--role all`).
    Slot,
    /// The JetStream stream an ingest publishes (`--role gateway`): no slot, no slot lag.
    JetStream(StreamSettings),
}

/// The hub's change source, as [`Feed`] says.
enum Source {
    Slot(Box<SupervisedSource>),
    JetStream(JetStreamSource),
}

impl ChangeSource for Source {
    async fn next_event(&mut self) -> Result<SourceEvent, SourceError> {
        match self {
            Source::Slot(s) => s.next_event().await,
            Source::JetStream(s) => s.next_event().await,
        }
    }

    fn confirm(&mut self, lsn: Lsn) {
        match self {
            Source::Slot(s) => s.confirm(lsn),
            Source::JetStream(s) => s.confirm(lsn),
        }
    }
}

struct Hub {
    db: Db,
    feed: Feed,
    settings: Settings,
    /// The permanent cause the change source fails on (`/healthz`).
    health: SourceHealth,
    instance: String,
    changelog: Changelog,
    generation: u64,
    matchers: HashMap<String, Matcher>,
    streams: HashMap<String, Stream>,
    /// Streams that may hold a target waiting for its first position: the only streams a
    /// transaction must look through target by target (others are visited only when they
    /// have changes or are due a heartbeat), so the cost of a write does not grow with the
    /// number of subscriptions.
    pending: HashSet<String>,
    owners: HashMap<TargetId, (String, String)>,
    ended: HashMap<String, ResetReason>,
    ended_order: VecDeque<String>,
    next_target: u64,
    position: Lsn,
    /// The read time of `position` (docs/storage.md, "Commit times").
    read_time: Option<Timestamp>,
    ready: bool,
    waiting: Vec<oneshot::Sender<Grant>>,
    kick: Arc<Notify>,
    activity: watch::Sender<Lsn>,
    observe: mpsc::Sender<Grant>,
    observing: bool,
    internal: mpsc::Sender<Internal>,
    /// Security rules on the events of non-admin streams.
    guard: Guard,
    /// The other consumers of the stream (write triggers' recorder).
    consumers: Vec<Box<dyn Consumer>>,
    /// Streams that ended for good, for the registry (`--nats-url`) to forget.
    retired: Option<mpsc::UnboundedSender<Retired>>,
    /// Added targets and their first snapshots, for the registry to record.
    records: Option<mpsc::UnboundedSender<Record>>,
    /// The bytes every stream's replay keeps (`--listen-replay-bytes` bounds them).
    replays: Account,
}

/// A stream that ended for good here, for the registry (`--nats-url`) to forget before its
/// client can learn of the end: a client that read its closing reset and resumes on another
/// process at once must find no entry there to adopt (docs/listen.md, "Resuming on another
/// process").
#[derive(Debug)]
pub struct Retired {
    pub stream: String,
    /// The reason of its closing reset: what a resume anywhere answers.
    pub reason: ResetReason,
    /// The closing reset of a connected stream, sent once the entry is gone.
    pub last: Option<Closing>,
}

/// What the registry (`--nats-url`) records of a stream's targets, in the order the hub
/// saw it: a target's first snapshot is recorded after its add (docs/listen.md, "Resuming
/// on another process").
#[derive(Debug)]
pub enum Record {
    /// Targets added to the running stream: written to its entry as not shown, then
    /// `written` hears it (the add's reply waits for it).
    Added {
        stream: String,
        targets: Vec<TargetEntry>,
        written: oneshot::Sender<()>,
    },
    /// A reset in place: every target of the stream is written to its entry as not shown
    /// until its next snapshot, then `written` hears it (the reset waits for it).
    Reset {
        stream: String,
        written: oneshot::Sender<()>,
    },
    /// The first snapshot of targets the entry has as not shown (`Stream::unrecorded`):
    /// from `position` on, the client holds their results.
    FirstShown {
        stream: String,
        targets: Vec<String>,
        position: Lsn,
    },
}

/// The last frame of a stream and where it goes; the stream's queue stays open until it
/// went (a transport ends its response when the queue closes).
#[derive(Debug)]
pub struct Closing {
    closer: oneshot::Sender<Frame>,
    frame: Frame,
    queue: Option<mpsc::Sender<Frame>>,
}

impl Closing {
    /// Hand the last frame to the client's connection, then let its queue close.
    pub fn send(self) {
        let _ = self.closer.send(self.frame);
        drop(self.queue);
    }
}

/// Start the hub and the upkeep task; returns the command channel and the instance id (the
/// first part of this process's stream ids). `retired` hears of every stream that ends for
/// good, and sends a connected stream's closing reset ([`Closing::send`]) once it forgot it;
/// `records` hears of added targets and of their first snapshots, for the registry.
pub fn spawn(
    db: Db,
    settings: Settings,
    consumers: Vec<Box<dyn Consumer>>,
    health: SourceHealth,
    feed: Feed,
    registry: Option<(
        mpsc::UnboundedSender<Retired>,
        mpsc::UnboundedSender<Record>,
    )>,
) -> (mpsc::Sender<Command>, String) {
    let (retired, records) = registry.unzip();
    let (commands, rx) = mpsc::channel(1024);
    let (internal, internal_rx) = mpsc::channel(1024);
    let (observe, observe_rx) = mpsc::channel(4);
    let (activity, activity_rx) = watch::channel(Lsn(0));
    let kick = Arc::new(Notify::new());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let instance = format!("{:x}", (nanos as u64) ^ u64::from(std::process::id()) << 40);
    tokio::spawn(upkeep::run(
        settings.postgres.clone(),
        // A gateway has no slot: its heartbeats name no slot, and it measures no slot lag.
        matches!(feed, Feed::Slot).then(|| settings.slot.clone()),
        settings.heartbeat,
        activity_rx,
        Arc::clone(&kick),
        observe_rx,
        internal.clone(),
    ));
    let (reload, wanted) = watch::channel(0);
    tokio::spawn(guard::load::poll(db.clone(), internal.clone(), wanted));
    let hub = Hub {
        db,
        feed,
        health,
        changelog: Changelog::new(settings.limits),
        settings,
        instance: instance.clone(),
        generation: 0,
        matchers: HashMap::new(),
        streams: HashMap::new(),
        pending: HashSet::new(),
        owners: HashMap::new(),
        ended: HashMap::new(),
        ended_order: VecDeque::new(),
        next_target: 1,
        position: Lsn(0),
        read_time: None,
        ready: false,
        waiting: Vec::new(),
        kick,
        activity,
        observe,
        observing: false,
        internal,
        guard: Guard::new(reload),
        consumers,
        retired,
        records,
        replays: Account::default(),
    };
    tokio::spawn(hub.run(rx, internal_rx));
    (commands, instance)
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The writes of a transaction, by database.
pub(super) struct TxnWrites {
    pub(super) by_db: HashMap<String, Vec<Write>>,
    /// Databases with a document whose data could not be resolved (an unchanged TOASTed
    /// value the changelog does not hold).
    pub(super) unresolved: Vec<String>,
    /// A truncate of the documents table (it empties every database).
    pub(super) truncated: bool,
}

impl TxnWrites {
    pub(super) fn of(txn: &Transaction) -> TxnWrites {
        let mut by_db: HashMap<String, Vec<Write>> = HashMap::new();
        let mut unresolved = Vec::new();
        let mut truncated = false;
        for change in &txn.changes {
            match change {
                Change::Insert(d) | Change::Update(d) => match &d.data {
                    DocumentData::Fields(fields) => by_db
                        .entry(d.database_id.clone())
                        .or_default()
                        .push(Write::Set(Document::new(
                            d.path.clone(),
                            fields.clone(),
                            d.create_time,
                            d.update_time,
                        ))),
                    DocumentData::UnchangedToast => unresolved.push(d.database_id.clone()),
                },
                Change::Delete(k) => by_db
                    .entry(k.database_id.clone())
                    .or_default()
                    .push(Write::Delete(k.path.clone())),
                Change::Truncate => truncated = true,
            }
        }
        TxnWrites {
            by_db,
            unresolved,
            truncated,
        }
    }

    /// What `database`'s matcher applies of this transaction: the truncate first, then the
    /// database's own writes (empty: nothing to apply).
    /// The documents of `database` the transaction deleted.
    pub(super) fn deleted(&self, database: &str) -> Arc<[ResourcePath]> {
        self.by_db
            .get(database)
            .map(|writes| -> Arc<[ResourcePath]> {
                writes
                    .iter()
                    .filter_map(|w| match w {
                        Write::Delete(path) => Some(path.clone()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(super) fn of_database(&self, database: &str) -> Vec<Write> {
        let mut writes = Vec::new();
        if self.truncated {
            writes.push(Write::Truncate);
        }
        if let Some(w) = self.by_db.get(database) {
            writes.extend(w.iter().cloned());
        }
        writes
    }
}

impl Hub {
    /// # Cancel safety
    /// Runs for the life of the process.
    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        mut internal: mpsc::Receiver<Internal>,
    ) {
        let mut source = self.new_source();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = source.next_event() => match event {
                    Ok(event) => {
                        if let SourceEvent::KeepAlive { wal_end, reply_requested: true } = event {
                            // Everything before this keepalive is in the changelog already.
                            // The walsender of a shutting-down server waits until the
                            // confirmed position reaches what it sent: holding it back for
                            // retention would hold up the shutdown for as long as this
                            // process runs. The retained transactions stay in memory; only
                            // a crash of this process right now could want them replayed,
                            // and a restarted sidecar resets its streams anyway.
                            tracing::info!(%wal_end, "the server asks for our position (shutting down?): confirming all received");
                            let confirmable = self.confirmable(wal_end);
                            source.confirm(confirmable);
                            if confirmable < wal_end {
                                // Another consumer (write triggers) has not recorded all of it:
                                // the walsender would wait for us, and a shutdown with it.
                                // Disconnect instead; the stream resumes at what is confirmed
                                // and the changelog skips what it has.
                                tracing::warn!(%wal_end, %confirmable, "the server asks for our position before the write triggers recorded it: reconnecting");
                                source = self.new_source();
                                continue;
                            }
                        }
                        self.on_source(event);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "change source failed; starting it again");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        source = self.new_source();
                    }
                },
                command = commands.recv() => match command {
                    Some(command) => self.on_command(command),
                    None => return,
                },
                Some(message) = internal.recv() => self.on_internal(message),
                _ = tick.tick() => {
                    self.on_tick();
                    if let Some(lsn) = self.changelog.confirmable() {
                        source.confirm(self.confirmable(lsn));
                    }
                }
            }
        }
    }

    /// How far the slot may be confirmed when the changelog allows `lsn`: no further than
    /// every other consumer of the stream allows (write triggers record first).
    fn confirmable(&mut self, lsn: Lsn) -> Lsn {
        self.consumers
            .iter_mut()
            .fold(lsn, |lsn, consumer| consumer.confirmable(lsn))
    }

    /// A new source. One of JetStream starts at the stream's end and reports that as a slot
    /// creation: streams reset rather than miss what came meanwhile.
    fn new_source(&self) -> Source {
        match &self.feed {
            Feed::Slot => Source::Slot(Box::new(SupervisedSource::new(
                ReplicationSettings::new(
                    self.settings.postgres.clone(),
                    self.settings.slot.clone(),
                ),
                Backoff::new(Duration::from_millis(100), Duration::from_secs(5)),
                self.health.clone(),
            ))),
            Feed::JetStream(settings) => {
                Source::JetStream(JetStreamSource::start(settings.clone()))
            }
        }
    }

    fn on_source(&mut self, event: SourceEvent) {
        match event {
            SourceEvent::SlotCreated { consistent_point } => {
                if self.ready || !self.streams.is_empty() {
                    tracing::error!(%consistent_point, "the replication slot was recreated: every stream resets");
                    self.generation += 1;
                    self.changelog = Changelog::new(self.settings.limits);
                    self.observing = false;
                    let ids: Vec<String> = self.streams.keys().cloned().collect();
                    for id in ids {
                        self.reset_in_place(&id, ResetReason::SlotLost, DISCARDED);
                    }
                }
                self.become_ready();
            }
            SourceEvent::Transaction(txn) => {
                self.become_ready();
                if let Some(txn) = self.changelog.push(txn, Instant::now()) {
                    for consumer in &mut self.consumers {
                        consumer.on_transaction(&txn);
                    }
                    self.on_transaction(&txn);
                }
            }
            SourceEvent::Message(_) | SourceEvent::KeepAlive { .. } => {}
        }
    }

    fn become_ready(&mut self) {
        self.ready = true;
        for reply in std::mem::take(&mut self.waiting) {
            let grant = self.grant();
            if let Err(grant) = reply.send(grant) {
                self.changelog.forget(grant.ticket);
            }
        }
    }

    fn grant(&mut self) -> Grant {
        Grant {
            ticket: self.changelog.ticket(),
            generation: self.generation,
        }
    }

    fn forget(&mut self, grant: Grant) {
        if grant.generation == self.generation {
            self.changelog.forget(grant.ticket);
        }
    }

    fn on_transaction(&mut self, txn: &Transaction) {
        let position = txn.commit_lsn;
        self.position = position;
        self.activity.send_replace(position);
        let heartbeat = is_heartbeat(txn);
        let txn_writes = TxnWrites::of(txn);
        let mut deltas: HashMap<String, Vec<(String, TargetDelta)>> = HashMap::new();
        let mut requery: Vec<(String, String)> = Vec::new();
        for (database, matcher) in &mut self.matchers {
            let writes = txn_writes.of_database(database);
            if writes.is_empty() {
                continue;
            }
            for (id, delta) in matcher.apply(txn.xid, &writes) {
                let Some((stream, target)) = self.owners.get(&id) else {
                    continue;
                };
                if delta == TargetDelta::NeedsRequery {
                    requery.push((stream.clone(), target.clone()));
                } else {
                    deltas
                        .entry(stream.clone())
                        .or_default()
                        .push((target.clone(), delta));
                }
            }
        }
        let reset: Vec<String> = self
            .streams
            .iter()
            .filter(|(_, s)| txn_writes.unresolved.contains(&s.database))
            .map(|(id, _)| id.clone())
            .collect();
        // Before anything is sent: streams whose rules looked up a document this transaction
        // wrote are decided again.
        self.observe_lookups(&txn_writes.by_db, txn_writes.truncated);
        // Before anything is sent: a stream whose window target must be read again is held
        // from this transaction on (its other targets' changes wait for the re-read).
        for (stream, target) in requery {
            self.start_requery(&stream, &target);
        }
        let read_time = events::next_read_time(
            self.read_time,
            txn.commit_time,
            txn.changes.iter().filter_map(|c| match c {
                Change::Insert(d) | Change::Update(d) => Some(d.update_time),
                Change::Delete(_) | Change::Truncate => None,
            }),
        );
        self.read_time = Some(read_time);
        let mut deleted: HashMap<String, Arc<[ResourcePath]>> = HashMap::new();
        // A stream is due a heartbeat when its last event is a heartbeat interval old; a
        // heartbeat transaction (emitted when idle, and at once whenever a new target waits for
        // a position) also serves streams half an interval old, so that the idle rhythm stays
        // about one per second. Never one per heartbeat transaction to every stream: while
        // thousands of listeners subscribe, each new target's heartbeat would reach them all.
        let interval = if heartbeat {
            self.settings.heartbeat / 2
        } else {
            self.settings.heartbeat
        };
        // The streams this transaction may send to: those with changes, those with targets
        // waiting for their first position, and those due a heartbeat.
        let mut ids: Vec<String> = deltas.keys().cloned().collect();
        ids.extend(
            self.pending
                .iter()
                .filter(|id| !deltas.contains_key(*id))
                .cloned(),
        );
        ids.extend(
            self.streams
                .iter()
                .filter(|(id, s)| {
                    s.last_event.elapsed() >= interval
                        && !deltas.contains_key(*id)
                        && !self.pending.contains(*id)
                })
                .map(|(id, _)| id.clone()),
        );
        for id in ids {
            if reset.contains(&id) {
                continue;
            }
            let Some(stream) = self.streams.get_mut(&id) else {
                self.pending.remove(&id);
                continue;
            };
            let at = At {
                commit_time: Some(txn.commit_time),
                read_time: Some(read_time),
                deleted: Arc::clone(
                    deleted
                        .entry(stream.database.clone())
                        .or_insert_with(|| txn_writes.deleted(&stream.database)),
                ),
            };
            let mut newly = Vec::new();
            if self.pending.contains(&id) && !stream.claimed {
                // Adopted, its claim not yet written: its targets wait (`Stream::claimed`).
                if stream.adopt.is_some() && !std::mem::replace(&mut stream.held_for_claim, true) {
                    tracing::info!(stream = %id, %position, "an adopted stream's targets wait for its claim in the registry");
                }
                continue;
            }
            if self.pending.contains(&id) {
                let mut waiting = false;
                for (name, t) in &mut stream.targets {
                    if let Phase::Pending { lsn, after } = t.phase {
                        if position >= lsn && position > after {
                            t.phase = Phase::Live;
                            newly.push(name.clone());
                        } else {
                            waiting = true;
                        }
                    }
                }
                if !waiting {
                    self.pending.remove(&id);
                }
            }
            if stream.held {
                if stream.targets.values().any(|t| t.phase != Phase::Live) {
                    continue;
                }
                // Back together: every target's full results at this position.
                stream.held = false;
                let holds = stream
                    .targets
                    .keys()
                    .any(|name| !stream.unrecorded.contains(name));
                if stream.adopt.take().is_some() && holds {
                    // Adopted, but a target ran out of slack before its first event: the
                    // client starts over, from a reset in place (the registry says its
                    // targets are not held before the client can read the reset).
                    self.reset_in_place(&id, ResetReason::RetentionPassed, DISCARDED);
                    continue;
                }
                let Some(stream) = self.streams.get(&id) else {
                    continue;
                };
                let matcher = self.matchers.get(&stream.database);
                let results: Vec<_> = stream
                    .targets
                    .iter()
                    .filter_map(|(name, t)| Some((name.clone(), matcher?.result(t.id)?)))
                    .collect();
                let frame = events::snapshot(&id, position, at, results, Arc::new([]));
                let all: Vec<String> = stream.targets.keys().cloned().collect();
                let writes = txn_writes.by_db.get(&stream.database);
                self.send_checked(&id, frame, true, &[], &all, writes);
                continue;
            }
            if let Some(from) = stream.adopt {
                // An adopted stream sends nothing until its targets come live (together),
                // then one event that takes its client from `from` to here.
                if newly.is_empty() {
                    continue;
                }
                stream.adopt = None;
                let writes = txn_writes.by_db.get(&stream.database);
                self.send_adopted(&id, from, position, at, writes);
                continue;
            }
            let mut changes: Vec<(String, TargetDelta)> = deltas
                .remove(&id)
                .unwrap_or_default()
                .into_iter()
                .filter(|(name, _)| {
                    !newly.contains(name)
                        && stream
                            .targets
                            .get(name)
                            .is_some_and(|t| t.phase == Phase::Live)
                })
                .collect();
            changes.sort_by(|a, b| a.0.cmp(&b.0));
            let changes: Arc<[(String, TargetDelta)]> = changes.into();
            let frame = if !newly.is_empty() {
                let matcher = self.matchers.get(&stream.database);
                let results: Vec<_> = newly
                    .iter()
                    .filter_map(|name| {
                        let t = stream.targets.get(name)?;
                        Some((name.clone(), matcher?.result(t.id)?))
                    })
                    .collect();
                Some((
                    events::snapshot(&id, position, at, results, Arc::clone(&changes)),
                    true,
                ))
            } else if !changes.is_empty() {
                Some((
                    events::change(&id, position, at, Arc::clone(&changes)),
                    true,
                ))
            } else if stream.shown && stream.last_event.elapsed() >= interval {
                Some((events::heartbeat(&id, position, at), false))
            } else {
                None
            };
            if let Some((frame, logged)) = frame {
                let writes = txn_writes.by_db.get(&stream.database);
                self.send_checked(&id, frame, logged, &changes, &newly, writes);
            }
        }
        for id in reset {
            tracing::warn!(stream = %id, "an unchanged TOASTed document is not retained: the stream reads its targets again");
            self.reset_in_place(&id, ResetReason::RetentionPassed, DISCARDED);
        }
    }

    /// What a stream keeps for resumes: its events younger than the grace, at most
    /// `--listen-replay` of them.
    fn keep(&self) -> Keep {
        Keep {
            age: self.settings.grace,
            events: self.settings.replay,
        }
    }

    /// Queue `frame` to the stream (and log it for resumes when `logged`).
    ///
    /// The frame's read time is raised to the stream's previous one and to the update times
    /// of the documents it shows (a first snapshot's rows may predate the change stream).
    fn deliver(&mut self, id: &str, frame: Frame, logged: bool) {
        self.queue_and_log(id, frame, logged);
        if logged && self.replays.bytes() > self.settings.replay_bytes {
            self.shed_replays();
        }
    }

    /// The streams kept more than `--listen-replay-bytes` for resumes: the oldest events of
    /// all of them go, down to 15/16 of it (so that this pass over the streams is made once
    /// per sixteenth of the budget logged, not at every event). Each stream that loses events
    /// has its floor raised: a resume from before them resets, as past the cap.
    fn shed_replays(&mut self) {
        let budget = self.settings.replay_bytes;
        let to = budget - budget / 16;
        let shed = replay::shed(
            self.streams.values_mut().map(|s| &mut s.replay),
            &self.replays,
            to,
        );
        tracing::debug!(
            shed,
            budget,
            "listen streams kept more than --listen-replay-bytes: the oldest events went"
        );
        LetGo {
            shed,
            ..LetGo::default()
        }
        .count();
    }

    /// [`Hub::deliver`] but for the byte budget.
    fn queue_and_log(&mut self, id: &str, mut frame: Frame, logged: bool) {
        let keep = self.keep();
        let Some(stream) = self.streams.get_mut(id) else {
            return;
        };
        let shown = match &frame.event.kind {
            EventKind::Snapshot { results, .. } => results
                .iter()
                .filter_map(|(_, r)| match r {
                    crate::matcher::TargetResult::Documents(docs) => {
                        docs.iter().map(|d| d.update_time).max()
                    }
                    crate::matcher::TargetResult::Aggregate(_) => None,
                })
                .max(),
            _ => None,
        };
        let read_time = [stream.read_time, frame.event.read_time, shown]
            .into_iter()
            .flatten()
            .max();
        match &frame.event.kind {
            EventKind::Snapshot { results, .. } => {
                stream.shown = true;
                let first: Vec<String> = results
                    .iter()
                    .filter_map(|(name, _)| stream.unrecorded.take(name))
                    .collect();
                if let (false, Some(to_record)) = (first.is_empty(), &self.records) {
                    let _ = to_record.send(Record::FirstShown {
                        stream: id.to_owned(),
                        targets: first,
                        position: frame.position,
                    });
                }
            }
            EventKind::Reset { .. } => stream.shown = false,
            EventKind::Change { .. } | EventKind::Heartbeat => {}
        }
        if !matches!(frame.event.kind, EventKind::Reset { .. }) {
            stream.read_time = read_time;
            if frame.event.read_time != read_time {
                Arc::make_mut(&mut frame.event).read_time = read_time;
            }
        }
        stream.position = stream.position.max(frame.position);
        let now = Instant::now();
        stream.last_event = now;
        if logged {
            stream.replay.push(frame.clone(), now, keep).count();
        }
        let Some(sender) = &stream.sender else {
            return;
        };
        match sender.try_send(frame) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.close(
                    id,
                    ResetReason::Lagged,
                    "the client did not read its events in time; reconnect for a fresh snapshot",
                );
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                stream.sender = None;
                stream.closer = None;
                stream.disconnected_at = Some(Instant::now());
            }
        }
    }

    /// End a stream: its last frame is a reset with `reason`; a later resume resets with it.
    fn close(&mut self, id: &str, reason: ResetReason, message: &str) {
        let Some(mut stream) = self.streams.remove(id) else {
            return;
        };
        metrics::counter!("docstore_session_resets_total", "reason" => reason.as_str())
            .increment(1);
        tracing::info!(stream = id, position = %stream.position, reason = reason.as_str(), message, "a stream ends for good");
        let last = stream.closer.take().map(|closer| Closing {
            closer,
            frame: events::reset(id, stream.position, reason, message),
            queue: stream.sender.take(),
        });
        self.drop_targets(&stream);
        self.remember_end(id, reason, last);
    }

    /// Remember why a stream ended, for a later resume's reset (the last [`ENDED_KEPT`]), and
    /// send its closing reset (`last`): with a registry, once the registry forgot the stream.
    fn remember_end(&mut self, id: &str, reason: ResetReason, last: Option<Closing>) {
        let retired = Retired {
            stream: id.to_owned(),
            reason,
            last,
        };
        // Without a registry (or with its task gone) the reset goes out at once.
        let unsent = match &self.retired {
            Some(to_forget) => to_forget.send(retired).err().map(|e| e.0),
            None => Some(retired),
        };
        if let Some(last) = unsent.and_then(|r| r.last) {
            last.send();
        }
        self.ended.insert(id.to_owned(), reason);
        self.ended_order.push_back(id.to_owned());
        while self.ended_order.len() > ENDED_KEPT {
            if let Some(old) = self.ended_order.pop_front() {
                self.ended.remove(&old);
            }
        }
    }

    fn drop_targets(&mut self, stream: &Stream) {
        if let Some(matcher) = self.matchers.get_mut(&stream.database) {
            for t in stream.targets.values() {
                matcher.remove_target(t.id);
                self.owners.remove(&t.id);
            }
        }
    }

    /// Discard a stream's state: a `reset` event, then its targets are read again and come
    /// back in a `snapshot`. Older resume tokens reset too.
    fn reset_in_place(&mut self, id: &str, reason: ResetReason, message: &str) {
        let Some(stream) = self.streams.get_mut(id) else {
            return;
        };
        metrics::counter!("docstore_session_resets_total", "reason" => reason.as_str())
            .increment(1);
        stream.epoch += 1;
        // Every target is read again and shown in one snapshot: nothing left to hold, and
        // an adopted stream's client starts over from it.
        stream.held = false;
        stream.adopt = None;
        let ids: Vec<TargetId> = stream.targets.values().map(|t| t.id).collect();
        for t in stream.targets.values_mut() {
            t.phase = Phase::Fetching;
        }
        stream
            .replay
            .clear(Lsn(stream.position.0.saturating_add(1)));
        let position = stream.position;
        if let Some(matcher) = self.matchers.get_mut(&stream.database) {
            for tid in &ids {
                matcher.remove_target(*tid);
            }
        }
        for tid in &ids {
            self.owners.remove(tid);
        }
        self.guard.discard(id);
        let reset = events::reset(id, position, reason, message);
        // With a registry, the entry says the targets are not held before the client can
        // read the reset: a client that read it and resumes elsewhere before the snapshot
        // holds nothing, and must be sent every target whole. Until then the stream sends
        // nothing: no heartbeat (its targets changed unseen), and its read waits, so that
        // the snapshot cannot overtake the reset.
        // An adopted stream whose claim is not written yet records the reset once it is
        // (`Stream::claimed`): written now, the registry would skip it.
        if let (Some(_), Some(stream)) = (&self.records, self.streams.get_mut(id)) {
            stream.shown = false;
            stream.unrecorded = stream.targets.keys().cloned().collect();
            if !stream.claimed {
                stream.unclaimed_reset = Some(reset);
                return;
            }
        }
        self.record_reset(id, reset);
    }

    /// Send a reset in place once the registry recorded it (with a registry), then read the
    /// stream's targets again.
    fn record_reset(&mut self, id: &str, reset: Frame) {
        if let (Some(records), Some(stream)) = (&self.records, self.streams.get(id)) {
            let (written, done) = oneshot::channel();
            let record = Record::Reset {
                stream: id.to_owned(),
                written,
            };
            if records.send(record).is_ok() {
                let internal = self.internal.clone();
                let epoch = stream.epoch;
                tokio::spawn(async move {
                    let _ = done.await;
                    let _ = internal
                        .send(Internal::ResetRecorded { reset, epoch })
                        .await;
                });
                return;
            }
        }
        self.deliver(id, reset, false);
        self.start_read(id, None);
    }

    /// The session wrote the claim of the adopted stream `id` to the registry: its targets
    /// may come live (the next transaction, which `kick` brings at once), and a reset in
    /// place that waited for the claim is recorded and sent.
    fn claimed(&mut self, id: &str) {
        let Some(stream) = self.streams.get_mut(id) else {
            return;
        };
        stream.claimed = true;
        if let Some(reset) = stream.unclaimed_reset.take() {
            self.record_reset(id, reset);
        }
        self.kick.notify_one();
    }

    /// A reset in place the registry recorded: sent, and the stream's targets read again,
    /// unless the stream is gone or reset again meanwhile (that reset goes out instead).
    fn on_reset_recorded(&mut self, reset: Frame, epoch: u64) {
        let id = reset.event.stream.clone();
        if self.streams.get(&id).is_some_and(|s| s.epoch == epoch) {
            self.deliver(&id, reset, false);
            self.start_read(&id, None);
        }
    }

    /// Read a stream's targets again (`only`: one query target's requery).
    fn start_read(&mut self, id: &str, only: Option<&str>) {
        let grant = self.grant();
        let Some(stream) = self.streams.get(id) else {
            self.forget(grant);
            return;
        };
        let config = self.settings.matcher;
        let mut names = Vec::new();
        let mut fetches = Vec::new();
        for (name, t) in &stream.targets {
            if only.is_some_and(|o| o != name) {
                continue;
            }
            let fetch = match (only, self.matchers.get(&stream.database)) {
                (Some(_), Some(m)) => match m.fetch_query(t.id) {
                    Ok(q) => Fetch::Query(docstore_core::query::to_structured(&q).to_string()),
                    Err(_) => fetch_of(&t.spec, &config),
                },
                _ => fetch_of(&t.spec, &config),
            };
            names.push(name.clone());
            fetches.push(fetch);
        }
        let db = self.db.clone();
        let database = stream.database.clone();
        let run_as = stream.caller.run_as.clone();
        let internal = self.internal.clone();
        let fetched = Fetched {
            stream: id.to_owned(),
            epoch: stream.epoch,
            grant,
            requery: only.is_some(),
            result: Err(ReadFailure {
                permission: false,
                message: String::new(),
            }),
        };
        tokio::spawn(async move {
            // The stream's grant keeps the changelog from its ticket on, so a read tried again
            // (the database restarting) hands off as well as the first would have.
            let result = match read_targets_retrying(&db, &database, &run_as, &fetches).await {
                Ok((rows, point)) => Ok((names.into_iter().zip(rows).collect(), point)),
                Err(e) => {
                    let api = crate::service::error::ServiceError::from(e);
                    Err(ReadFailure {
                        permission: api.code == docstore_core::Code::PermissionDenied,
                        message: api.message,
                    })
                }
            };
            let _ = internal
                .send(Internal::Fetched(Fetched { result, ..fetched }))
                .await;
        });
    }

    fn start_requery(&mut self, id: &str, target: &str) {
        let Some(t) = self
            .streams
            .get_mut(id)
            .and_then(|s| s.targets.get_mut(target))
        else {
            return;
        };
        t.phase = Phase::Fetching;
        if let Some(stream) = self.streams.get_mut(id) {
            stream.held = true;
        }
        self.start_read(id, Some(target));
    }

    fn on_internal(&mut self, message: Internal) {
        match message {
            Internal::Observed(grant, snapshot) => {
                self.observing = false;
                match snapshot {
                    Some(snapshot) if grant.generation == self.generation => {
                        self.changelog
                            .observe_snapshot(grant.ticket, &snapshot, Instant::now());
                    }
                    _ => self.forget(grant),
                }
            }
            Internal::Fetched(fetched) => self.on_fetched(fetched),
            Internal::Rules(rules, read) => self.on_rules(rules, read),
            Internal::LookedUp(looked) => self.on_looked_up(looked),
            Internal::ResetRecorded { reset, epoch } => self.on_reset_recorded(reset, epoch),
        }
    }

    fn on_fetched(&mut self, fetched: Fetched) {
        let id = fetched.stream.clone();
        let current = self
            .streams
            .get(&id)
            .is_some_and(|s| s.epoch == fetched.epoch);
        if !current || fetched.grant.generation != self.generation {
            self.forget(fetched.grant);
            return;
        }
        let (rows, point) = match fetched.result {
            Ok(ok) => ok,
            Err(failure) if failure.permission => {
                // As a denial of an event: the client reads the same text whatever the rules
                // read (docs/rules.md, "What a denial tells"); the log keeps the reason.
                self.forget(fetched.grant);
                tracing::info!(stream = %id, reason = %failure.message, "the security rules refused a stream's re-read");
                self.guard.forget(&id);
                self.close(&id, ResetReason::Permission, DENIED);
                return;
            }
            Err(failure) => {
                self.forget(fetched.grant);
                self.close(&id, ResetReason::RetentionPassed, &failure.message);
                return;
            }
        };
        let handed = match self.changelog.hand_off(
            fetched.grant.ticket,
            &point.snapshot,
            Instant::now(),
        ) {
            Ok(handed) => handed,
            Err(e) => {
                tracing::warn!(stream = %id, error = %e, "hand-off past retention: reading again");
                self.start_read(&id, None);
                return;
            }
        };
        let horizon: Arc<dyn Horizon> = Arc::new(SnapshotHorizon(point.snapshot.clone()));
        let after = self.position;
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let config = self.settings.matcher;
        let matcher = self
            .matchers
            .entry(stream.database.clone())
            .or_insert_with(|| Matcher::new(config));
        for (name, rows) in rows {
            let Some(t) = stream.targets.get_mut(&name) else {
                continue;
            };
            let added = if fetched.requery {
                matcher
                    .requeried(t.id, rows, Some(Arc::clone(&horizon)))
                    .map(|_| ())
            } else {
                let tid = TargetId(self.next_target);
                self.next_target += 1;
                t.id = tid;
                self.owners.insert(tid, (id.clone(), name.clone()));
                matcher
                    .add_target(tid, t.spec.clone(), rows, Some(Arc::clone(&horizon)))
                    .map(|_| ())
            };
            if let Err(e) = added {
                tracing::error!(stream = %id, target = %name, error = %e, "a target's rows were refused");
                continue;
            }
            for txn in &handed {
                let writes = TxnWrites::of(txn).of_database(&stream.database);
                if !writes.is_empty() {
                    let _ = matcher.apply_to(t.id, txn.xid, &writes);
                }
            }
            t.phase = Phase::Pending {
                lsn: point.lsn,
                after,
            };
            self.pending.insert(id.clone());
        }
        self.kick.notify_one();
    }

    fn on_tick(&mut self) {
        let now = Instant::now();
        self.changelog.trim(now);
        let grace = self.settings.grace;
        let keep = self.keep();
        let mut expired = Vec::new();
        let mut replayable = 0;
        let mut let_go = LetGo::default();
        for (id, s) in &mut self.streams {
            let trimmed = s.replay.trim(now, keep);
            let_go.aged += trimmed.aged;
            let_go.capped += trimmed.capped;
            replayable += s.replay.len();
            if s.sender.as_ref().is_some_and(mpsc::Sender::is_closed) {
                s.sender = None;
                s.closer = None;
                s.disconnected_at = Some(now);
            }
            if s.disconnected_at
                .is_some_and(|at| now.saturating_duration_since(at) > grace)
            {
                expired.push(id.clone());
            }
        }
        // An adopted stream whose targets did not come live in time (this process's change
        // stream lags behind the client's position, or behind the read of the targets): the
        // client starts over from a fresh snapshot, never from a silent gap.
        let late: Vec<String> = self
            .streams
            .iter()
            .filter(|(_, s)| {
                s.adopt.is_some() && now.saturating_duration_since(s.created) > adopt::ADOPT_WAIT
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in late {
            tracing::warn!(stream = %id, position = %self.position, wait = ?adopt::ADOPT_WAIT, "an adopted stream's targets did not come live in time: it resets");
            self.reset_in_place(&id, ResetReason::Restart, adopt::LATE);
        }
        let streams = &self.streams;
        self.guard.retain(|id| streams.contains_key(id));
        for id in expired {
            if let Some(stream) = self.streams.remove(&id) {
                self.drop_targets(&stream);
                self.remember_end(&id, ResetReason::RetentionPassed, None);
            }
        }
        if self.ready && !self.observing {
            let grant = self.grant();
            match self.observe.try_send(grant) {
                Ok(()) => self.observing = true,
                Err(_) => self.forget(grant),
            }
        }
        metrics::gauge!("docstore_session_streams").set(self.streams.len() as f64);
        metrics::gauge!("docstore_session_targets").set(self.owners.len() as f64);
        let_go.count();
        metrics::gauge!("docstore_session_replay_events").set(replayable as f64);
        metrics::gauge!("docstore_session_replay_bytes").set(self.replays.bytes() as f64);
        metrics::gauge!("docstore_changelog_retained_bytes").set(self.changelog.bytes() as f64);
        metrics::gauge!("docstore_changelog_retained_transactions")
            .set(self.changelog.len() as f64);
    }
}

/// The commit-to-send lag of a frame written now, in seconds.
pub fn lag_seconds(frame: &Frame) -> Option<f64> {
    let commit = frame.commit_micros?;
    let lag = now_micros().saturating_sub(commit);
    #[allow(clippy::cast_precision_loss)]
    Some(lag.max(0) as f64 / 1e6)
}
