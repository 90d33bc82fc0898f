//! Stage 4: listen streams (docs/architecture.md, "Streams, targets and positions").
//!
//! One hub task ([`hub`]) owns the [`Changelog`](crate::changelog::Changelog), one
//! [`Matcher`](crate::matcher::Matcher) per database and every stream; it is fed by the
//! [`SupervisedSource`](crate::source::SupervisedSource) of the slot the sidecar owns. The
//! [`upkeep`] task emits heartbeats when idle (and at once when a new target waits for a
//! position), takes the snapshots that unpin the changelog, and measures the slot's lag.
//! [`Session`] is the handle the HTTP layer holds: it runs a target's initial read (one
//! `REPEATABLE READ` transaction under the caller's auth, `pg::snapshot`) outside the hub and
//! hands the rows to the hub, which hands the target off exactly through the changelog.
//!
//! A stream's targets advance together: each committed transaction yields at most one event
//! per stream, at its commit position, carrying every target's changes. A new target shows
//! its first results in a `snapshot` event at a position at or past its snapshot's WAL
//! position. The hub never awaits a client: each stream has a bounded queue, and a full queue
//! closes the stream with `reset {reason: lagged}`.

pub mod events;
pub mod guard;
pub mod hub;
pub mod presence;
pub mod registry;
pub mod relay;
pub mod serve;
pub mod upkeep;
pub mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use thiserror::Error;
use tokio::sync::{mpsc, oneshot};

use crate::changelog::{Limits, Ticket};
use crate::matcher::{Document, MatcherConfig, TargetSpec};
use crate::pg::snapshot::{read_targets, Fetch, ReadPoint};
use crate::pg::{Db, PgError, RunAs};
use crate::source::{Backoff, Consumer, Lsn, SourceHealth};
pub use events::{Frame, ResetReason};
pub use hub::Feed;
use registry::{Registry, RegistryError, TargetEntry};

/// Tuning of the live-query session.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Postgres the replication connection and the heartbeats use (a REPLICATION role).
    pub postgres: crate::pg::tls::Postgres,
    /// The logical slot the sidecar owns (created when missing).
    pub slot: String,
    /// About how often a heartbeat is emitted when nothing is written.
    pub heartbeat: Duration,
    /// How long a disconnected stream is kept for a resume.
    pub grace: Duration,
    /// Events queued per connected stream before it is closed as lagged. On a matcher
    /// (`--role matcher`) the queue is its forwarder's to a gateway, which watches its
    /// client's pace itself: there it must hold what a stream gets while NATS restarts.
    pub queue: usize,
    /// Most events a stream keeps for resumes; it keeps those younger than `grace` (older
    /// positions reset).
    pub replay: usize,
    /// Most bytes (estimated) the streams' kept events hold together; past it the oldest of
    /// all go, down to 15/16 of it.
    pub replay_bytes: usize,
    /// Bounds of the changelog.
    pub limits: Limits,
    /// Slack of sorted queries with a limit.
    pub matcher: MatcherConfig,
    /// Bounds on streams and targets.
    pub caps: StreamCaps,
}

/// Bounds on listen streams (docs/listen.md, "Limits on streams and targets"): a stream over one is refused with
/// [`SessionError::ResourceExhausted`].
#[derive(Debug, Clone, Copy)]
pub struct StreamCaps {
    /// Most streams, connected or waiting for a resume.
    pub streams: usize,
    /// Most streams of one [`Caller::quota`].
    pub per_caller: usize,
    /// Most targets on one stream.
    pub targets: usize,
}

impl Default for StreamCaps {
    fn default() -> StreamCaps {
        StreamCaps {
            streams: 10_000,
            per_caller: 100,
            targets: 1_000,
        }
    }
}

/// Who opened a stream: its owner key (only the same caller, knowing the stream's
/// unguessable id, may resume it and change its targets), whom its streams count against,
/// and how its reads run in Postgres.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    /// `admin`, `anonymous`, or `user:<sub>`.
    pub key: String,
    /// The key of the per-caller stream cap (a JWT's subject, or the client address of an
    /// anonymous caller); `None` (the admin key): no per-caller cap.
    pub quota: Option<String>,
    pub run_as: RunAs,
}

/// A target as the client names it.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetRequest {
    /// The client's id of the target, unique in its stream.
    pub id: String,
    pub spec: TargetSpec,
}

/// Why the session refused a call.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The initial read failed (the query's own error, an unknown database, ...).
    #[error(transparent)]
    Pg(#[from] PgError),
    /// The change stream is not ready, or restarted meanwhile: retry.
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    InvalidArgument(String),
    /// A cap of [`StreamCaps`] (`limit` names it: `streams`, `streams_per_caller`,
    /// `targets_per_stream`).
    #[error("{message}")]
    ResourceExhausted {
        limit: &'static str,
        message: String,
    },
    /// Another refusal a matcher answered (`--matching remote`): its code and message.
    #[error("{message}")]
    Remote {
        code: docstore_core::Code,
        message: String,
    },
}

/// A connected stream, as the HTTP layer writes it out.
#[derive(Debug)]
pub struct Connection {
    /// The stream's id (the first part of every resume token).
    pub stream: String,
    /// Frames to write before the queue (a resume's replay, or a reset).
    pub first: Vec<Frame>,
    /// The stream's events. Ends when another connection takes the stream over.
    pub frames: mpsc::Receiver<Frame>,
    /// The last frame (`reset {reason: lagged}`), written instead of whatever is queued;
    /// the stream is then closed.
    pub closed: oneshot::Receiver<Frame>,
    /// A resume within the retention: how many documents each target's result held at the
    /// stream's position, when the hub knows it (see [`Sizes`]).
    pub sizes: Option<Sizes>,
}

/// The sizes of a resumed stream's target results at one position: what its client was sent
/// up to there (the replay included), so that a client can check what it holds (gRPC's
/// `expected_count` and `ExistenceFilter`, docs/grpc.md "Listen"). Known when every target is
/// live and the stream's events leave as they are made (the admin's, not held): its matcher
/// results are then what it was sent; a caller under rules may have events waiting for their
/// decisions, whose results the matcher already holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Sizes {
    /// The position the sizes are at: the stream's last.
    pub position: Lsn,
    /// Session target name -> documents in its result (none for an aggregation).
    pub documents: std::collections::BTreeMap<String, usize>,
}

/// What a resume found.
#[derive(Debug)]
pub enum Resumed {
    /// The stream, with the events after the position (or, when the position is no longer
    /// retained, a reset and then a snapshot of every target, decided by the rules as a
    /// subscribe's).
    Connection(Connection),
    /// The stream is gone: start a new one after a `reset` with this reason.
    Unknown(ResetReason),
}

/// A ticket of the hub's changelog with the generation it belongs to (a lost slot starts a
/// new changelog).
#[derive(Debug, Clone, Copy)]
pub struct Grant {
    pub ticket: Ticket,
    pub generation: u64,
}

type Reply<T> = oneshot::Sender<T>;

/// Requests to the hub.
#[derive(Debug)]
pub enum Command {
    Ticket(Reply<Grant>),
    Forget(Grant),
    Open {
        database: String,
        caller: Caller,
        targets: Vec<(TargetRequest, Vec<Document>)>,
        grant: Grant,
        point: ReadPoint,
        lead: Option<ResetReason>,
        reply: Reply<Result<Connection, SessionError>>,
    },
    Resume {
        stream: String,
        position: Lsn,
        caller: String,
        reply: Reply<Resumed>,
    },
    /// How many documents the transactions after a position wrote (`None`: the changelog
    /// does not hold them all).
    Touched {
        position: Lsn,
        reply: Reply<Option<usize>>,
    },
    /// Take over a stream another process held (`session::registry`), whose client saw it
    /// up to `position`.
    Adopt {
        stream: String,
        position: Lsn,
        database: String,
        caller: Caller,
        targets: Vec<(TargetRequest, Vec<Document>)>,
        grant: Grant,
        point: ReadPoint,
        slack: u32,
        /// The targets the client holds no results of at `position` (`registry::TargetEntry::held_at`):
        /// sent a snapshot, as new targets are.
        unshown: Vec<String>,
        reply: Reply<Result<Connection, SessionError>>,
    },
    /// The registry holds the claim of an adopted stream: it may speak (`Stream::claimed`).
    Claimed {
        stream: String,
        reply: Reply<()>,
    },
    /// Drop this process's copy of a stream another process took over (no reset, no end
    /// remembered).
    Release {
        stream: String,
        reply: Reply<()>,
    },
    /// End a stream for good as a lagged one ends: its connection's last frame is a reset
    /// with `reason`, sent once the registry forgot the stream; a later resume resets with
    /// it.
    End {
        stream: String,
        reason: ResetReason,
        message: String,
        reply: Reply<()>,
    },
    Check {
        stream: String,
        database: String,
        caller: String,
        targets: Vec<String>,
        reply: Reply<Result<(), SessionError>>,
    },
    /// Answered, with a registry, with what hears when the registry wrote the added
    /// targets.
    Add {
        stream: String,
        caller: String,
        targets: Vec<(TargetRequest, Vec<Document>)>,
        grant: Grant,
        point: ReadPoint,
        reply: Reply<Result<Option<oneshot::Receiver<()>>, SessionError>>,
    },
    Remove {
        stream: String,
        caller: String,
        target: String,
        reply: Reply<Result<(), SessionError>>,
    },
}

/// The handle of the hub.
#[derive(Clone)]
pub struct Session {
    commands: mpsc::Sender<Command>,
    db: Db,
    matcher: MatcherConfig,
    health: SourceHealth,
    /// This process's instance id (the first part of its stream ids, the registry's holder).
    instance: String,
    registry: Option<Registry>,
    /// `--matching remote`: the calls go to matchers (`relay`), there is no hub here.
    remote: Option<relay::Relay>,
}

/// How long a subscription waits for the change stream to be ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

fn gone() -> SessionError {
    SessionError::Unavailable("the live-query hub has stopped".into())
}

/// How long a read of targets is tried again while the database is unavailable (Postgres
/// restarting, the pool reconnecting) before its failure is the answer.
const READ_RETRY: Duration = Duration::from_secs(30);

/// The first wait between two tries of a read of targets; it doubles up to [`READ_BACKOFF_MAX`].
const READ_BACKOFF: Duration = Duration::from_millis(100);
const READ_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Whether a read failed for want of the database, as while Postgres restarts: no connection
/// to be had, one lost, or the server shutting down or still starting (57P01-57P03).
fn transient(e: &PgError) -> bool {
    match e {
        PgError::Pool(_) | PgError::Connect(_) => true,
        PgError::Db(e) => {
            e.is_closed()
                || e.as_db_error().is_some_and(|db| {
                    let state = db.code().code();
                    state.starts_with("08") || matches!(state, "57P01" | "57P02" | "57P03")
                })
        }
        PgError::NoSuchDatabase(_) | PgError::Decode(_) => false,
    }
}

/// [`read_targets`], tried again while it fails for want of the database ([`transient`]), for up to [`READ_RETRY`]
/// (docs/listen.md, "Opening a stream"): a new stream's first read, a re-read, an adoption's.
/// Any other failure, or one that outlasts the bound, is the answer.
pub(crate) async fn read_targets_retrying(
    db: &Db,
    database: &str,
    run_as: &RunAs,
    fetches: &[Fetch],
) -> Result<(Vec<Vec<Document>>, ReadPoint), PgError> {
    let deadline = tokio::time::Instant::now() + READ_RETRY;
    let mut backoff = READ_BACKOFF;
    loop {
        match read_targets(db, database, run_as, fetches).await {
            Err(e) if transient(&e) && tokio::time::Instant::now() + backoff < deadline => {
                tracing::info!(error = %e, "a read of a stream's targets failed for now: trying again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(READ_BACKOFF_MAX);
            }
            result => return result,
        }
    }
}

/// What a target reads initially: its fetch query as structured JSON, or its document.
pub fn fetch_of(spec: &TargetSpec, config: &MatcherConfig) -> Fetch {
    match (spec, spec.fetch_query(config)) {
        (TargetSpec::Document(path), _) => Fetch::Document(path.clone()),
        (TargetSpec::Query(_), Some(query)) => {
            Fetch::Query(docstore_core::query::to_structured(&query).to_string())
        }
        (TargetSpec::Query(query), None) => {
            Fetch::Query(docstore_core::query::to_structured(query).to_string())
        }
    }
}

impl Session {
    /// Start the hub and its upkeep task; `consumers` are the change stream's other consumers
    /// (write triggers), fed and waited for by the hub. With a `registry` (`--nats-url`) the
    /// streams are registered there, and resumes of streams other processes hold adopt them.
    pub fn start(
        db: Db,
        settings: Settings,
        consumers: Vec<Box<dyn Consumer>>,
        registry: Option<Registry>,
    ) -> Session {
        Session::start_with(db, settings, consumers, Feed::Slot, registry)
    }

    /// [`Session::start`] fed by `feed`: its own slot, or the JetStream stream of an ingest
    /// (`--role gateway`).
    pub fn start_with(
        db: Db,
        settings: Settings,
        consumers: Vec<Box<dyn Consumer>>,
        feed: Feed,
        registry: Option<Registry>,
    ) -> Session {
        let matcher = settings.matcher;
        let health = SourceHealth::new();
        let (retired, retired_rx) = mpsc::unbounded_channel();
        let (records, records_rx) = mpsc::unbounded_channel();
        let (commands, instance) = hub::spawn(
            db.clone(),
            settings,
            consumers,
            health.clone(),
            feed,
            registry.is_some().then_some((retired, records)),
        );
        if let Some(registry) = registry.clone() {
            tokio::spawn(record(registry.clone(), instance.clone(), records_rx));
            tokio::spawn(forget_retired(registry, instance.clone(), retired_rx));
        }
        Session {
            commands,
            db,
            matcher,
            health,
            instance,
            registry,
            remote: None,
        }
    }

    /// A gateway's session that matches on remote matchers (`--matching remote`): every call
    /// goes through `relay`; this process runs no hub.
    pub fn remote(db: Db, relay: relay::Relay) -> Session {
        // No hub: the command channel has no receiver, and no local call is ever made.
        let (commands, _) = mpsc::channel(1);
        Session {
            commands,
            db,
            matcher: MatcherConfig::default(),
            health: SourceHealth::new(),
            instance: relay.id().to_owned(),
            registry: None,
            remote: Some(relay),
        }
    }

    /// This process's instance id (a matcher's id in `docstore_matchers`).
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The permanent cause the change stream fails on after start-up (REPLICATION revoked,
    /// ...; `pg::preflight`), while it does: `/healthz` answers 503 with it.
    pub fn failure(&self) -> Option<crate::pg::preflight::Cause> {
        self.health.cause()
    }

    async fn call<T>(&self, command: impl FnOnce(Reply<T>) -> Command) -> Result<T, SessionError> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(command(reply))
            .await
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())
    }

    async fn read(
        &self,
        database: &str,
        caller: &Caller,
        targets: Vec<TargetRequest>,
    ) -> Result<(Vec<(TargetRequest, Vec<Document>)>, Grant, ReadPoint), SessionError> {
        self.read_with(database, caller, targets, &self.matcher)
            .await
    }

    /// [`Session::read`] with the query targets' fetches of `config`'s initial slack.
    async fn read_with(
        &self,
        database: &str,
        caller: &Caller,
        targets: Vec<TargetRequest>,
        config: &MatcherConfig,
    ) -> Result<(Vec<(TargetRequest, Vec<Document>)>, Grant, ReadPoint), SessionError> {
        let grant = tokio::time::timeout(READY_TIMEOUT, self.call(Command::Ticket))
            .await
            .map_err(|_| {
                SessionError::Unavailable(
                    "the change stream is not ready (is wal_level logical?)".into(),
                )
            })??;
        let fetches: Vec<Fetch> = targets.iter().map(|t| fetch_of(&t.spec, config)).collect();
        match read_targets_retrying(&self.db, database, &caller.run_as, &fetches).await {
            Ok((rows, point)) => Ok((targets.into_iter().zip(rows).collect(), grant, point)),
            Err(e) => {
                let _ = self.commands.send(Command::Forget(grant)).await;
                Err(e.into())
            }
        }
    }

    /// Open a new stream on `targets` (their initial reads run now, as `caller`); `lead` is a
    /// reset to send first (a resume that found nothing).
    ///
    /// # Errors
    /// The initial reads' errors, [`SessionError::Unavailable`] when the change stream is not
    /// ready.
    ///
    /// # Cancel safety
    /// Dropped midway, nothing is registered (a read's ticket may stay outstanding until the
    /// next eviction pass forgets nothing: it only delays the pruning of evicted records).
    pub async fn open(
        &self,
        database: &str,
        caller: Caller,
        targets: Vec<TargetRequest>,
        lead: Option<ResetReason>,
    ) -> Result<Connection, SessionError> {
        if let Some(relay) = &self.remote {
            return relay.open(database, caller, targets, lead).await;
        }
        let entry = self.registry.as_ref().map(|_| registry::Entry {
            version: 1,
            database: database.to_owned(),
            owner: caller.key.clone(),
            quota: caller.quota.clone(),
            rules: caller.run_as != RunAs::Admin,
            holder: self.instance.clone(),
            targets: targets.iter().map(TargetEntry::of).collect(),
        });
        let (targets, grant, point) = self.read(database, &caller, targets).await?;
        let connection = self
            .call(|reply| Command::Open {
                database: database.to_owned(),
                caller,
                targets,
                grant,
                point,
                lead,
                reply,
            })
            .await??;
        if let (Some(registry), Some(entry)) = (&self.registry, entry) {
            // Registered before the client learns the stream's id.
            if let Err(e) = registry.put(&connection.stream, &entry).await {
                write_failed("register");
                tracing::warn!(stream = %connection.stream, error = %e, "the stream is not registered: a resume on another process will reset");
            }
        }
        Ok(connection)
    }

    /// Resume `stream` of `database` after `position` as `caller`. With a registry, a
    /// stream another process holds (or held) is adopted (`adopt`), and this process's own
    /// copy of it, if any, dropped.
    ///
    /// # Errors
    /// The adopting reads' errors; [`SessionError::Unavailable`] when the hub stopped.
    ///
    /// # Cancel safety
    /// Dropped after the hub answered, the new connection is dropped: the stream counts as
    /// disconnected again.
    pub async fn resume(
        &self,
        database: &str,
        stream: &str,
        position: Lsn,
        caller: &Caller,
    ) -> Result<Resumed, SessionError> {
        if let Some(relay) = &self.remote {
            return relay.resume(database, stream, position, caller).await;
        }
        if let Some(registry) = &self.registry {
            match registry.get(stream).await {
                Ok(Some((entry, targets, revision))) if entry.holder != self.instance => {
                    self.call(|reply| Command::Release {
                        stream: stream.to_owned(),
                        reply,
                    })
                    .await?;
                    let adopting = Adopting {
                        database,
                        stream,
                        position,
                        caller,
                    };
                    return self
                        .adopt(registry, adopting, entry, targets, revision)
                        .await;
                }
                Ok(Some(_)) => {}
                // No entry: the stream ended for good on the process that held it last
                // (or was never registered). A copy of this process's own, disconnected
                // within its grace, stops at what this process sent before the stream
                // moved elsewhere: dropped, so that the resume resets instead of sending
                // events from a past the client left. The reset is the one the stream
                // ended with, wherever it ended, while its end is kept.
                Ok(None) => {
                    tracing::info!(stream, %position, "a resumed stream has no registry entry: it ended for good, a copy held here is dropped");
                    self.call(|reply| Command::Release {
                        stream: stream.to_owned(),
                        reply,
                    })
                    .await?;
                    match registry.ended(stream).await {
                        Ok(Some(end)) => {
                            let reason = end.reset_for(&caller.key);
                            tracing::info!(
                                stream,
                                reason = reason.as_str(),
                                "a resumed stream ended for good: it resets with its end's reason"
                            );
                            return Ok(Resumed::Unknown(reason));
                        }
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(stream, error = %e, "the stream registry did not answer how the stream ended");
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(stream, error = %e, "the stream registry did not answer: resuming as a single process");
                }
            }
        }
        self.call(|reply| Command::Resume {
            stream: stream.to_owned(),
            position,
            caller: caller.key.clone(),
            reply,
        })
        .await
    }

    /// Take over `stream`, registered by another process, for a client that saw it up to
    /// `position` (docs/listen.md, "Resuming on another process"): its targets are read as
    /// new ones, and the first event takes the client from `position` to the hub's
    /// position exactly; or, when this process cannot know what happened after `position`,
    /// the stream is unknown (`reset {retention_passed}`).
    async fn adopt(
        &self,
        registry: &Registry,
        adopting: Adopting<'_>,
        entry: registry::Entry,
        targets: Vec<TargetRequest>,
        revision: u64,
    ) -> Result<Resumed, SessionError> {
        let Adopting {
            database,
            stream,
            position,
            caller,
        } = adopting;
        if entry.owner != caller.key || entry.rules != (caller.run_as != RunAs::Admin) {
            return Ok(Resumed::Unknown(ResetReason::Permission));
        }
        if entry.database != database {
            return Ok(Resumed::Unknown(ResetReason::RetentionPassed));
        }
        // Position 0 is no event's: the client saw nothing of the stream (a new stream whose
        // process went away before its first event reached the client, or a client that
        // read only the lead reset of an open). It holds no results, so every target is sent
        // whole, in one snapshot, and nothing of what happened before is needed.
        let nothing_held = position == Lsn(0);
        let touched = if nothing_held {
            0
        } else {
            let Some(touched) = self
                .call(|reply| Command::Touched { position, reply })
                .await?
            else {
                return Ok(Resumed::Unknown(ResetReason::RetentionPassed));
            };
            touched
        };
        // A sorted query with a limit keeps enough rows beyond its window to tell its
        // window at `position` once the written documents are put back.
        let slack = self
            .matcher
            .initial_slack
            .max(1)
            .saturating_add(u32::try_from(touched).unwrap_or(u32::MAX));
        let config = MatcherConfig {
            initial_slack: slack,
            max_slack: self.matcher.max_slack.max(slack),
            ..self.matcher
        };
        // A target the client holds no results of at `position` (added after it, or whose
        // first snapshot is not recorded) is sent whole, as a new target.
        let unshown: Vec<String> = entry
            .targets
            .iter()
            .filter(|t| nothing_held || !t.held_at(position.0))
            .map(|t| t.id.clone())
            .collect();
        let read = self.read_with(database, caller, targets, &config).await;
        let (targets, grant, point) = match read {
            Ok(read) => read,
            Err(SessionError::Pg(e)) => {
                let api = crate::service::error::ServiceError::from(e);
                if api.code == docstore_core::Code::PermissionDenied {
                    return Ok(Resumed::Unknown(ResetReason::Permission));
                }
                return Err(SessionError::Unavailable(api.message));
            }
            Err(e) => return Err(e),
        };
        let connection = self
            .call(|reply| Command::Adopt {
                stream: stream.to_owned(),
                position,
                database: database.to_owned(),
                caller: caller.clone(),
                targets,
                grant,
                point,
                slack,
                unshown: unshown.clone(),
                reply,
            })
            .await??;
        // Those sent whole count as not shown until this process records their snapshot.
        let mut claimed = registry::Entry {
            holder: self.instance.clone(),
            ..entry.clone()
        };
        for t in &mut claimed.targets {
            if unshown.contains(&t.id) {
                t.shown = Some(None);
            }
        }
        if let Err(e) = registry.take_over(stream, &claimed, &entry, revision).await {
            if !matches!(e, RegistryError::Claimed) {
                write_failed("claim");
            }
            tracing::warn!(stream, error = %e, "the stream was not claimed: another process took it");
            self.call(|reply| Command::Release {
                stream: stream.to_owned(),
                reply,
            })
            .await?;
            return Ok(Resumed::Unknown(ResetReason::RetentionPassed));
        }
        // Only now may the stream speak: a reset in place before the claim would be
        // skipped by the registry (the entry was still the old holder's).
        self.call(|reply| Command::Claimed {
            stream: stream.to_owned(),
            reply,
        })
        .await?;
        Ok(Resumed::Connection(connection))
    }

    /// Add targets to a running stream of `caller`.
    ///
    /// # Errors
    /// NOT_FOUND for an unknown stream, PERMISSION_DENIED for another caller's, INVALID_ARGUMENT
    /// for a target id the stream has, and the initial reads' errors.
    ///
    /// # Cancel safety
    /// As [`Session::open`].
    pub async fn add_targets(
        &self,
        database: &str,
        stream: &str,
        caller: Caller,
        targets: Vec<TargetRequest>,
    ) -> Result<(), SessionError> {
        if let Some(relay) = &self.remote {
            return relay.add_targets(database, stream, caller, targets).await;
        }
        let ids = targets.iter().map(|t| t.id.clone()).collect();
        self.call(|reply| Command::Check {
            stream: stream.to_owned(),
            database: database.to_owned(),
            caller: caller.key.clone(),
            targets: ids,
            reply,
        })
        .await??;
        let (targets, grant, point) = self.read(database, &caller, targets).await?;
        let written = self
            .call(|reply| Command::Add {
                stream: stream.to_owned(),
                caller: caller.key,
                targets,
                grant,
                point,
                reply,
            })
            .await??;
        // The registry's entry has them before the reply (`record`).
        if let Some(written) = written {
            let _ = written.await;
        }
        Ok(())
    }

    /// Whether the running stream `stream` of `caller` in `database` has the target `target`
    /// (a transport that resumes a stream for one of its targets asks).
    ///
    /// # Errors
    /// NOT_FOUND for an unknown stream (or one of another database), PERMISSION_DENIED for
    /// another caller's.
    ///
    /// # Cancel safety
    /// Cancel-safe: it changes nothing.
    pub async fn holds(
        &self,
        database: &str,
        stream: &str,
        caller: &str,
        target: &str,
    ) -> Result<bool, SessionError> {
        if let Some(relay) = &self.remote {
            return relay.holds(database, stream, caller, target).await;
        }
        let checked = self
            .call(|reply| Command::Check {
                stream: stream.to_owned(),
                database: database.to_owned(),
                caller: caller.to_owned(),
                targets: vec![target.to_owned()],
                reply,
            })
            .await?;
        match checked {
            Ok(()) => Ok(false),
            Err(SessionError::InvalidArgument(_)) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// End `stream` for good with `reason`, as the hub ends a stream whose client lagged: its
    /// connection's closing reset (with a registry, sent once the registry forgot the stream)
    /// is the last frame, and a later resume gets a reset with `reason` and a new stream. A
    /// matcher ends so a stream with an event larger than a gateway takes
    /// (`session::serve`): resumed, it would only meet that event again. Nothing happens to a
    /// stream that is not running.
    ///
    /// # Errors
    /// [`SessionError::Unavailable`] when the hub stopped.
    pub async fn end(
        &self,
        stream: &str,
        reason: ResetReason,
        message: &str,
    ) -> Result<(), SessionError> {
        self.call(|reply| Command::End {
            stream: stream.to_owned(),
            reason,
            message: message.to_owned(),
            reply,
        })
        .await
    }

    /// Remove a target from a running stream of `caller`.
    ///
    /// # Errors
    /// NOT_FOUND for an unknown stream or target, PERMISSION_DENIED for another caller's.
    ///
    /// # Cancel safety
    /// Cancel-safe: the removal happened or not.
    pub async fn remove_target(
        &self,
        stream: &str,
        caller: &str,
        target: &str,
    ) -> Result<(), SessionError> {
        if let Some(relay) = &self.remote {
            return relay.remove_target(stream, caller, target).await;
        }
        self.call(|reply| Command::Remove {
            stream: stream.to_owned(),
            caller: caller.to_owned(),
            target: target.to_owned(),
            reply,
        })
        .await??;
        if let Some(registry) = &self.registry {
            let removed = registry
                .modify(stream, &self.instance, |e| {
                    e.targets.retain(|t| t.id != target)
                })
                .await;
            if let Err(e) = removed {
                write_failed("remove");
                tracing::warn!(stream, error = %e, "the stream's registry entry keeps a removed target");
            }
        }
        Ok(())
    }
}

/// Count a write to the stream registry that failed (`op`: what it wrote), in
/// `docstore_registry_write_errors_total`.
fn write_failed(op: &'static str) {
    metrics::counter!("docstore_registry_write_errors_total", "op" => op).increment(1);
}

/// A resume that adopts a stream.
struct Adopting<'a> {
    database: &'a str,
    stream: &'a str,
    position: Lsn,
    caller: &'a Caller,
}

/// Write to the registry what the hub reports of streams' targets (`records`), in its order:
/// targets added to a running stream, as not shown; every target of a stream reset in place,
/// as not shown ([`reset`]); then the position of the first snapshot of targets the entries
/// have as not shown, so that a client that resumes on another process with a later token
/// gets their changes rather than their whole results. Not
/// recorded (NATS did not answer), a target stays not shown: an adoption sends it whole,
/// which replaces whatever the client holds of it.
///
/// # Cancel safety
/// Runs for the life of the process.
async fn record(
    registry: Registry,
    instance: String,
    mut records: mpsc::UnboundedReceiver<hub::Record>,
) {
    while let Some(record) = records.recv().await {
        match record {
            hub::Record::Added {
                stream,
                targets,
                written,
            } => {
                let added = registry
                    .modify(&stream, &instance, |e| {
                        e.targets.retain(|t| !targets.iter().any(|n| n.id == t.id));
                        e.targets.extend(targets.iter().cloned());
                    })
                    .await;
                if let Err(e) = added {
                    write_failed("add");
                    tracing::warn!(stream, error = %e, "the stream's registry entry lacks the added targets");
                }
                let _ = written.send(());
            }
            hub::Record::Reset { stream, written } => {
                reset(&registry, &instance, &stream).await;
                let _ = written.send(());
            }
            hub::Record::FirstShown {
                stream,
                targets,
                position,
            } => {
                let changed = AtomicBool::new(false);
                let recorded = registry
                    .modify(&stream, &instance, |e| {
                        changed.store(false, Ordering::Relaxed);
                        for t in &mut e.targets {
                            if t.shown == Some(None) && targets.contains(&t.id) {
                                t.shown = Some(Some(position.0));
                                changed.store(true, Ordering::Relaxed);
                            }
                        }
                    })
                    .await;
                match recorded {
                    Ok(()) if changed.load(Ordering::Relaxed) => {
                        tracing::debug!(stream, ?targets, %position, "the registry records the targets' first snapshot");
                    }
                    // Another process holds the stream now, or the targets were removed.
                    Ok(()) => {}
                    Err(e) => {
                        write_failed("first_shown");
                        tracing::warn!(stream, error = %e, "the targets' first snapshot is not recorded: an adoption sends them whole");
                    }
                }
            }
        }
    }
}

/// Write to the entry of `stream`, reset in place, that its client holds none of its
/// targets until their next snapshot (whose position [`record`] writes then), before the
/// client can read the reset: a client that read it and resumes on another process before
/// the snapshot gets every target whole there, never a `change` of results it discarded.
/// While NATS does not answer, the write is retried and the reset waits (the other
/// processes cannot read the registry either meanwhile).
async fn reset(registry: &Registry, instance: &str, stream: &str) {
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    let mut warned = false;
    loop {
        let written = registry
            .modify(stream, instance, |e| {
                for t in &mut e.targets {
                    t.shown = Some(None);
                }
            })
            .await;
        match written {
            Ok(()) => {
                tracing::debug!(stream, "the registry records the stream's reset in place");
                return;
            }
            // An entry no process can read counts as none: no process adopts the stream.
            Err(e @ RegistryError::Malformed(_)) => {
                write_failed("reset");
                tracing::warn!(stream, error = %e, "the stream's registry entry cannot be read: its reset in place is not recorded");
                return;
            }
            Err(e) => {
                write_failed("reset");
                if !warned {
                    tracing::warn!(stream, error = %e, "the stream's reset in place is not in the registry: retrying before its client is told of the reset");
                    warned = true;
                }
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    }
}

/// Delete `stream`'s registry entry while `holder` holds it, retried (and each failed attempt
/// counted) while NATS does not answer: the caller sends the stream's closing reset after it.
pub(super) async fn forget_until_gone(
    registry: &Registry,
    stream: &str,
    holder: &str,
    reason: ResetReason,
) {
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    let mut warned = false;
    let forgotten = loop {
        match registry.forget(stream, holder, reason).await {
            Ok(forgotten) => break forgotten,
            Err(e) => {
                write_failed("forget");
                if !warned {
                    tracing::warn!(stream, error = %e, "an ended stream's registry entry stays: retrying before its client is told of the end");
                    warned = true;
                }
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    };
    match forgotten {
        registry::Forgotten::Deleted => {
            tracing::info!(
                stream,
                holder,
                "an ended stream's registry entry is deleted"
            );
        }
        registry::Forgotten::Absent => {
            tracing::info!(stream, holder, "an ended stream has no registry entry");
        }
        registry::Forgotten::HeldBy(other) => {
            tracing::info!(
                stream,
                holder,
                other,
                "an ended stream's registry entry is another process's: it stays"
            );
        }
    }
}

/// Delete the registry entries of streams that ended for good here (`retired`), each before
/// its client is sent the stream's closing reset: a client that resumes on another process
/// once it read the end finds no entry there to adopt. While NATS does not answer, the
/// delete is retried and the reset waits (the other processes cannot read the registry
/// either meanwhile).
///
/// # Cancel safety
/// Runs for the life of the process.
async fn forget_retired(
    registry: Registry,
    instance: String,
    mut retired: mpsc::UnboundedReceiver<hub::Retired>,
) {
    while let Some(hub::Retired {
        stream,
        reason,
        last,
    }) = retired.recv().await
    {
        forget_until_gone(&registry, &stream, &instance, reason).await;
        if let Some(last) = last {
            last.send();
        }
    }
}
