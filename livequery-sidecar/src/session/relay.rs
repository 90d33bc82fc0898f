//! A gateway's remote matching (`--role gateway --matching remote`; docs/architecture.md,
//! "Processes"): the session calls go to matchers (`session::serve`) over NATS, and each
//! client connection is fed from the frames its matcher forwards.
//!
//! A stream lives on one matcher. A new stream goes to the matcher a rendezvous hash of a
//! fresh random key picks among the live ones; a resume goes to the matcher holding the stream
//! (this gateway's, or the registry's holder) while it is live, else to the one the hash of
//! the stream id picks, which adopts it. For each connection the gateway keeps which matcher
//! holds the stream, the position of the last frame it passed on and the next sequence
//! number; when that matcher is gone (its presence entry expired, or it has no responders)
//! or a frame's number does not follow, it resumes the stream at that position on the
//! matcher the hash now picks, whose first frames continue the same client connection. A
//! connection's failovers are paced ([`Pace`]): the first at once, one that follows too soon
//! after a wait that grows, so that repeated gaps do not make it fail over in a tight loop.
//!
//! A route's last message (its end, its closing reset) can be lost in core NATS while its
//! matcher lives on: nothing more would come on it. So a connected route silent for longer
//! than [`silence`] (heartbeats reach every stream shown once per `--heartbeat-ms`) is
//! checked with its matcher, one [`Call::Forwarding`] per matcher per check listing its
//! silent routes; a route the matcher no longer forwards is failed over as at a gap, one it
//! still forwards (a stalled change stream, a requery) is left alone and checked again
//! after another such silence.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};

use super::events::{self, Frame, ResetReason};
use super::presence;
use super::registry::Registry;
use super::wire::{self, Answer, Call, Forwarded, Item, Request};
use super::{Caller, Connection, Resumed, SessionError, TargetRequest};
use crate::source::jetstream::RoleHealth;
use crate::source::{Backoff, Lsn};

/// How long a call may take (an open waits up to 30 s for the change stream, then reads).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a connection whose matcher is gone looks for another before it closes.
const FAILOVER_WINDOW: Duration = Duration::from_secs(30);

/// The wait before a connection's second failover in a row; each next one waits twice as
/// long, up to [`FAILOVER_MAX_DELAY`] (see [`Pace`]).
const FAILOVER_FIRST_DELAY: Duration = Duration::from_millis(100);

/// The longest wait between two failovers of a connection (before its jitter).
const FAILOVER_MAX_DELAY: Duration = Duration::from_secs(5);

/// How long a connection's route must have passed frames on for its next failover to go at
/// once again.
const FAILOVER_SETTLED: Duration = Duration::from_secs(30);

/// How long a check of silent routes waits for a matcher's answer (one that does not answer
/// is left to its presence: the failover when it expires).
const CHECK_TIMEOUT: Duration = presence::EXPIRY;

/// The most routes one check asks a matcher about (a few tens of KiB).
const CHECK_BATCH: usize = 1000;

/// The number of the gap a check puts on a route its matcher no longer forwards (no
/// connection reaches it: numbers count frames from 0).
const CHECKED_GAP: u64 = u64::MAX;

/// How long a connected route may go without a message before its matcher is asked whether
/// it still forwards it: three heartbeat intervals (so a heartbeat that is merely late, or
/// one lost, does not make a route silent), and at least 3 s, a few presence beats (a matcher
/// busy for a moment is not asked about every route).
fn silence(heartbeat: Duration) -> Duration {
    (heartbeat.saturating_mul(3)).max(Duration::from_secs(3))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The remote matching of a gateway.
#[derive(Clone)]
pub struct Relay(Arc<Inner>);

struct Inner {
    client: async_nats::Client,
    id: String,
    routes: Mutex<HashMap<String, Route>>,
    matchers: watch::Receiver<BTreeSet<String>>,
    registry: Registry,
    /// The matcher of each stream this gateway connects.
    held: Mutex<HashMap<String, String>>,
    /// Events queued per client connection.
    queue: usize,
    /// The newest position passed on to a client (`docstore_gateway_relayed_commit_lsn`).
    relayed: AtomicU64,
    /// The matchers holding this gateway's connections, by id
    /// (`docstore_gateway_matcher_frame_age_seconds`).
    sources: Mutex<HashMap<String, Arc<Source>>>,
    /// What [`Source::last`] counts from.
    started: Instant,
}

impl Inner {
    /// Ask `matcher` `call` for `route` ("" for none), waiting at most `timeout`.
    async fn request(
        &self,
        matcher: &str,
        route: &str,
        call: Call,
        timeout: Duration,
    ) -> Result<Answer, Failure> {
        let payload = wire::encode_request(&Request {
            gateway: self.id.clone(),
            route: route.to_owned(),
            call,
        });
        let request = async_nats::Request::new()
            .payload(Bytes::from(payload))
            .timeout(Some(timeout));
        match self
            .client
            .send_request(presence::matcher_subject(matcher), request)
            .await
        {
            Ok(message) => wire::decode_answer(&message.payload)
                .map_err(|e| Failure::Other(format!("a matcher's answer does not decode: {e}"))),
            Err(e) if e.kind() == async_nats::client::RequestErrorKind::NoResponders => {
                Err(Failure::Gone)
            }
            Err(e) => Err(Failure::Other(format!("matcher {matcher}: {e}"))),
        }
    }
}

/// A route: where its messages go, and, once a matcher forwards it, which one and when its
/// last message came (for the check of silent routes).
struct Route {
    tx: mpsc::Sender<Forwarded>,
    /// The matcher forwarding it (`None` while its call is pending).
    matcher: Option<String>,
    /// Milliseconds from [`Inner::started`] to its last message (or to its connection).
    last: u64,
}

/// The connected routes silent since before `since` (milliseconds from [`Inner::started`]),
/// by matcher.
fn silent_routes(routes: &HashMap<String, Route>, since: u64) -> HashMap<String, Vec<String>> {
    let mut silent: HashMap<String, Vec<String>> = HashMap::new();
    for (route, r) in routes {
        if let (Some(matcher), true) = (&r.matcher, r.last < since) {
            silent
                .entry(matcher.clone())
                .or_default()
                .push(route.clone());
        }
    }
    silent
}

/// Of the routes `asked`, those a matcher's `answer` does not list as still forwarded.
fn gone_routes(asked: Vec<String>, answer: &[String]) -> Vec<String> {
    let forwarded: HashSet<&String> = answer.iter().collect();
    asked
        .into_iter()
        .filter(|r| !forwarded.contains(r))
        .collect()
}

/// Check the silent routes of `relay` once per presence beat while it lives (see the module
/// documentation): per matcher, ask which it still forwards; put a gap on each it does not,
/// so its pump fails over as at any gap; let those it does wait another `silence`.
async fn check_silent(relay: std::sync::Weak<Inner>, silence: Duration) {
    let silence = u64::try_from(silence.as_millis()).unwrap_or(u64::MAX);
    loop {
        tokio::time::sleep(presence::BEAT).await;
        let Some(inner) = relay.upgrade() else {
            return;
        };
        let since = inner.millis().saturating_sub(silence);
        let silent = silent_routes(&lock(&inner.routes), since);
        let checks = silent.into_iter().flat_map(|(matcher, routes)| {
            let batches: Vec<Vec<String>> =
                routes.chunks(CHECK_BATCH).map(<[String]>::to_vec).collect();
            batches.into_iter().map(move |b| (matcher.clone(), b))
        });
        let inner = &inner;
        futures_util::future::join_all(checks.map(|(matcher, routes)| async move {
            check_routes(inner, &matcher, routes).await;
        }))
        .await;
    }
}

/// Ask `matcher` which of `routes` it still forwards, and act on its answer.
async fn check_routes(inner: &Inner, matcher: &str, routes: Vec<String>) {
    metrics::counter!("docstore_gateway_route_checks_total").increment(1);
    let call = Call::Forwarding {
        routes: routes.clone(),
    };
    let answer = match inner.request(matcher, "", call, CHECK_TIMEOUT).await {
        // Nobody listens on the matcher's subject: it is gone, whatever this gateway's view
        // of the presence bucket says (a view that did not refresh after a NATS restart kept
        // a killed matcher live, and its connections waited for good): it forwards nothing.
        Err(Failure::Gone) => Ok(Answer::Forwarding(Vec::new())),
        other => other,
    };
    let forwarded = match answer {
        Ok(Answer::Forwarding(forwarded)) => forwarded,
        other => {
            // Left to the matcher's presence (gone, its connections fail over), and asked
            // again after another silence (a matcher of an older version refuses the call).
            let n = u64::try_from(routes.len()).unwrap_or(u64::MAX);
            metrics::counter!("docstore_gateway_silent_routes_total", "outcome" => "unanswered")
                .increment(n);
            tracing::warn!(matcher, answer = ?other, "a matcher did not answer which silent routes it forwards");
            rearm(inner, &routes);
            return;
        }
    };
    let gone = gone_routes(routes.clone(), &forwarded);
    let held = u64::try_from(routes.len() - gone.len()).unwrap_or(u64::MAX);
    metrics::counter!("docstore_gateway_silent_routes_total", "outcome" => "held").increment(held);
    // Those still forwarded are checked again after another silence.
    rearm(inner, &forwarded);
    // The matcher serves them: it is not stuck, it has nothing to send (its streams not
    // shown yet, or the change stream stalled), and its frame age starts over.
    if !forwarded.is_empty() {
        if let Some(source) = lock(&inner.sources).get(matcher) {
            inner.heard(source);
        }
    }
    let table = lock(&inner.routes);
    for route in gone {
        let Some(r) = table.get(&route) else {
            continue;
        };
        if r.matcher.as_deref() != Some(matcher) {
            continue;
        }
        metrics::counter!("docstore_gateway_silent_routes_total", "outcome" => "gone").increment(1);
        tracing::warn!(
            route,
            matcher,
            "a silent route is no longer forwarded by its matcher: its connection resumes"
        );
        // A full queue is not silent; a closed one has no connection left.
        let _ = r.tx.try_send(Forwarded {
            route: route.clone(),
            stream: String::new(),
            seq: CHECKED_GAP,
            item: Item::End,
        });
    }
}

/// Count `routes` as heard from now: they are checked again after another silence.
fn rearm(inner: &Inner, routes: &[String]) {
    let now = inner.millis();
    let mut table = lock(&inner.routes);
    for route in routes {
        if let Some(r) = table.get_mut(route) {
            r.last = r.last.max(now);
        }
    }
}

/// A matcher as one gateway sees it: how many of its connections it holds, and when it last
/// showed that it serves them.
struct Source {
    connections: AtomicUsize,
    /// Milliseconds from [`Inner::started`] to its last frame for them or its last answer
    /// to a check of silent routes that it still forwards some (or to its first connection
    /// here, before either).
    last: AtomicU64,
}

impl Inner {
    fn millis(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A connection of this gateway is now held by `matcher`.
    fn attach(&self, matcher: &str) -> Arc<Source> {
        let mut sources = lock(&self.sources);
        let source = sources.entry(matcher.to_owned()).or_insert_with(|| {
            Arc::new(Source {
                connections: AtomicUsize::new(0),
                last: AtomicU64::new(self.millis()),
            })
        });
        source.connections.fetch_add(1, Ordering::Relaxed);
        Arc::clone(source)
    }

    /// A connection `matcher` held ended or moved.
    fn release(&self, source: &Source) {
        source.connections.fetch_sub(1, Ordering::Relaxed);
    }

    /// The matcher of `source` passed a frame on, or answered that it still forwards some
    /// silent routes.
    fn heard(&self, source: &Source) {
        source.last.store(self.millis(), Ordering::Relaxed);
    }
}

/// Report a remote-matching gateway's position gauges once per presence beat while `relay`
/// lives: the newest position passed on to a client, and per matcher holding some of its
/// connections the age of the last sign that it serves them: a frame, or its answer to a
/// check of silent routes that it still forwards them (0 once it holds none). A matcher with
/// nothing to send (its streams not shown yet, a stalled change stream) is asked about its
/// routes once they are [`silence`] old, so its age stays below about that plus a beat and
/// the check's answer; an age that keeps growing is a matcher that neither forwards nor
/// answers. Whether the change stream moves is the position gauges' to say.
async fn report(relay: std::sync::Weak<Inner>) {
    loop {
        let Some(inner) = relay.upgrade() else {
            return;
        };
        #[allow(clippy::cast_precision_loss)]
        let relayed = inner.relayed.load(Ordering::Relaxed) as f64;
        metrics::gauge!("docstore_gateway_relayed_commit_lsn").set(relayed);
        let now = inner.millis();
        lock(&inner.sources).retain(|matcher, source| {
            let held = source.connections.load(Ordering::Relaxed) > 0;
            let age = if held {
                Duration::from_millis(now.saturating_sub(source.last.load(Ordering::Relaxed)))
                    .as_secs_f64()
            } else {
                0.0
            };
            metrics::gauge!("docstore_gateway_matcher_frame_age_seconds", "matcher" => matcher.clone())
                .set(age);
            held
        });
        drop(inner);
        tokio::time::sleep(presence::BEAT).await;
    }
}

/// The pace of one connection's failovers: the first goes at once; one that follows before
/// the route it moved to has passed frames on for [`FAILOVER_SETTLED`] waits first, from
/// [`FAILOVER_FIRST_DELAY`] doubling to [`FAILOVER_MAX_DELAY`], each wait with up to a
/// quarter more of random jitter (`Backoff`), so that a matcher that keeps refusing frames,
/// or NATS flapping, does not make its connections fail over in a tight loop, nor all in
/// step.
#[derive(Debug)]
struct Pace {
    backoff: Backoff,
    /// A failover happened and its route has not settled since.
    unsettled: bool,
    /// When the current route first passed a frame on (`None`: none yet).
    delivering: Option<Instant>,
}

impl Pace {
    fn new() -> Pace {
        Pace {
            backoff: Backoff::new(FAILOVER_FIRST_DELAY, FAILOVER_MAX_DELAY),
            unsettled: false,
            delivering: None,
        }
    }

    /// The current route passed a frame on at `now`.
    fn delivered(&mut self, now: Instant) {
        self.delivering.get_or_insert(now);
    }

    /// The wait before a failover that starts at `now`.
    fn next(&mut self, now: Instant) -> Duration {
        let settled = self
            .delivering
            .take()
            .is_some_and(|first| now.saturating_duration_since(first) >= FAILOVER_SETTLED);
        if settled || !self.unsettled {
            self.unsettled = true;
            self.backoff.reset();
            return Duration::ZERO;
        }
        self.backoff.next_delay()
    }
}

/// Why a connection fails over (`docstore_gateway_failovers_total{cause}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// Its matcher's presence entry expired.
    Gone,
    /// A frame's number did not follow (a lost frame, or the end after a refused one).
    Gap,
    /// The check of silent routes found the route no longer forwarded.
    Silent,
}

impl Cause {
    fn as_str(self) -> &'static str {
        match self {
            Cause::Gone => "gone",
            Cause::Gap => "gap",
            Cause::Silent => "silent",
        }
    }
}

/// Why a call did not get an answer.
#[derive(Debug)]
enum Failure {
    /// Nobody serves the matcher's subject: it is gone.
    Gone,
    Other(String),
}

/// The error of a refusal a matcher answered.
fn session_error(
    code: docstore_core::Code,
    message: String,
    limit: Option<&'static str>,
) -> SessionError {
    use docstore_core::Code;
    match (code, limit) {
        (Code::Unavailable, _) => SessionError::Unavailable(message),
        (Code::NotFound, _) => SessionError::NotFound(message),
        (Code::PermissionDenied, _) => SessionError::PermissionDenied(message),
        (Code::InvalidArgument, _) => SessionError::InvalidArgument(message),
        (Code::ResourceExhausted, Some(limit)) => {
            SessionError::ResourceExhausted { limit, message }
        }
        (code, _) => SessionError::Remote { code, message },
    }
}

fn no_matcher() -> SessionError {
    SessionError::Unavailable("no matcher is running (--role matcher): retry".into())
}

impl Relay {
    /// Connect to NATS at `url`, announce this gateway and start receiving frames.
    ///
    /// # Errors
    /// NATS could not be reached or refused the buckets or the subscription.
    pub async fn start(
        url: &str,
        health: RoleHealth,
        registry: Registry,
        queue: usize,
        heartbeat: Duration,
    ) -> Result<Relay, String> {
        let client = crate::source::jetstream::connect(
            url,
            health,
            "docstore_gateway_nats_reconnects_total",
        )
        .await
        .map_err(|e| e.to_string())?;
        let js = jetstream::new(client.clone());
        let matchers = presence::bucket(&js, presence::MATCHERS).await?;
        let gateways = presence::bucket(&js, presence::GATEWAYS).await?;
        let id = presence::new_id();
        let frames = client
            .subscribe(presence::gateway_subject(&id))
            .await
            .map_err(|e| format!("subscribe to the gateway's frames: {e}"))?;
        tokio::spawn(presence::announce(gateways, id.clone()));
        let relay = Relay(Arc::new(Inner {
            client,
            id,
            routes: Mutex::default(),
            matchers: presence::watch_live(matchers),
            registry,
            held: Mutex::default(),
            queue: queue.max(1),
            relayed: AtomicU64::new(0),
            sources: Mutex::default(),
            started: Instant::now(),
        }));
        tokio::spawn(dispatch(Arc::downgrade(&relay.0), frames));
        tokio::spawn(report(Arc::downgrade(&relay.0)));
        tokio::spawn(check_silent(Arc::downgrade(&relay.0), silence(heartbeat)));
        tracing::info!(gateway = %relay.0.id, "matching on remote matchers");
        Ok(relay)
    }

    /// This gateway's id.
    pub fn id(&self) -> &str {
        &self.0.id
    }

    /// The live matchers, waiting up to one presence expiry for the first when none is.
    async fn live(&self) -> BTreeSet<String> {
        let mut matchers = self.0.matchers.clone();
        let now = matchers.borrow().clone();
        if !now.is_empty() {
            return now;
        }
        let waited =
            tokio::time::timeout(presence::EXPIRY, matchers.wait_for(|m| !m.is_empty())).await;
        match waited {
            Ok(Ok(live)) => live.clone(),
            _ => BTreeSet::new(),
        }
    }

    fn route(&self) -> (String, mpsc::Receiver<Forwarded>) {
        let route = presence::new_id();
        let (tx, rx) = mpsc::channel(self.0.queue.saturating_mul(2).max(64));
        let last = self.0.millis();
        let entry = Route {
            tx,
            matcher: None,
            last,
        };
        lock(&self.0.routes).insert(route.clone(), entry);
        (route, rx)
    }

    /// `matcher` now forwards `route`: it is checked once silent.
    fn forwarded_by(&self, route: &str, matcher: &str) {
        let now = self.0.millis();
        if let Some(r) = lock(&self.0.routes).get_mut(route) {
            r.matcher = Some(matcher.to_owned());
            r.last = now;
        }
    }

    fn unroute(&self, route: &str) {
        lock(&self.0.routes).remove(route);
    }

    async fn call(&self, matcher: &str, route: &str, call: Call) -> Result<Answer, Failure> {
        self.0.request(matcher, route, call, CALL_TIMEOUT).await
    }

    /// Detach a connection from its matcher (no answer awaited).
    fn detach(&self, matcher: String, route: String) {
        self.unroute(&route);
        let relay = self.clone();
        tokio::spawn(async move {
            let _ = relay.call(&matcher, &route, Call::Detach).await;
        });
    }

    /// The matcher holding `stream` as far as this gateway knows: its own connection's, or the
    /// registry's holder, while live.
    async fn holder(&self, stream: &str) -> Option<String> {
        let live = self.0.matchers.borrow().clone();
        if let Some(m) = lock(&self.0.held).get(stream).filter(|m| live.contains(*m)) {
            return Some(m.clone());
        }
        match self.0.registry.get(stream).await {
            Ok(Some((entry, _, _))) if live.contains(&entry.holder) => Some(entry.holder),
            _ => None,
        }
    }

    /// Open a stream on a matcher.
    ///
    /// # Errors
    /// The matcher's refusal; UNAVAILABLE when no matcher answers.
    pub async fn open(
        &self,
        database: &str,
        caller: Caller,
        targets: Vec<TargetRequest>,
        lead: Option<ResetReason>,
    ) -> Result<Connection, SessionError> {
        let key = presence::new_id();
        let call = || Call::Open {
            database: database.to_owned(),
            caller: caller.clone(),
            targets: targets.clone(),
            lead,
        };
        self.establish(&key, None, database, &caller, Lsn(0), call)
            .await?
            .map_err(refusal)
    }

    /// Resume `stream` after `position` on its matcher (or adopt it on another).
    ///
    /// # Errors
    /// The matcher's refusal; UNAVAILABLE when no matcher answers.
    pub async fn resume(
        &self,
        database: &str,
        stream: &str,
        position: Lsn,
        caller: &Caller,
    ) -> Result<Resumed, SessionError> {
        let holder = self.holder(stream).await;
        let call = || Call::Resume {
            database: database.to_owned(),
            stream: stream.to_owned(),
            position,
            caller: caller.clone(),
        };
        match self
            .establish(stream, holder, database, caller, position, call)
            .await?
        {
            Ok(connection) => Ok(Resumed::Connection(connection)),
            Err(Answer::Unknown(reason)) => Ok(Resumed::Unknown(reason)),
            Err(answer) => Err(refusal(answer)),
        }
    }

    /// Send `call` to a matcher: `first` when given, else (and after each one found gone) the
    /// one the rendezvous hash of `key` picks among the live ones. A connected answer becomes
    /// the client's connection, fed from `position`; any other answer is handed back.
    ///
    /// # Errors
    /// UNAVAILABLE when no matcher is live or a call fails other than by its matcher's absence.
    async fn establish(
        &self,
        key: &str,
        mut first: Option<String>,
        database: &str,
        caller: &Caller,
        position: Lsn,
        call: impl Fn() -> Call,
    ) -> Result<Result<Connection, Answer>, SessionError> {
        let mut excluded = HashSet::new();
        loop {
            let matcher = match first.take() {
                Some(m) => m,
                None => {
                    let live = self.live().await;
                    presence::rendezvous(key, &live, &excluded).ok_or_else(no_matcher)?
                }
            };
            let (route, rx) = self.route();
            match self.call(&matcher, &route, call()).await {
                Ok(Answer::Connected { stream, sizes }) => {
                    return Ok(Ok(self.connect(Link {
                        database: database.to_owned(),
                        caller: caller.clone(),
                        stream,
                        matcher,
                        route,
                        rx,
                        position,
                        sizes,
                    })));
                }
                Ok(answer) => {
                    self.unroute(&route);
                    return Ok(Err(answer));
                }
                Err(Failure::Gone) => {
                    self.unroute(&route);
                    excluded.insert(matcher);
                }
                Err(Failure::Other(e)) => {
                    self.unroute(&route);
                    return Err(SessionError::Unavailable(e));
                }
            }
        }
    }

    /// A call about a running stream, to its matcher.
    async fn on_stream(&self, stream: &str, call: Call) -> Result<Answer, SessionError> {
        let Some(matcher) = self.holder(stream).await else {
            return Err(SessionError::NotFound(format!(
                "stream {stream} is not running"
            )));
        };
        match self.call(&matcher, "", call).await {
            Ok(Answer::Error {
                code,
                message,
                limit,
            }) => Err(session_error(code, message, limit)),
            Ok(answer) => Ok(answer),
            Err(Failure::Gone) => Err(SessionError::Unavailable(
                "the stream's matcher is gone: retry".into(),
            )),
            Err(Failure::Other(e)) => Err(SessionError::Unavailable(e)),
        }
    }

    /// Add targets to a running stream.
    ///
    /// # Errors
    /// As `Session::add_targets`.
    pub async fn add_targets(
        &self,
        database: &str,
        stream: &str,
        caller: Caller,
        targets: Vec<TargetRequest>,
    ) -> Result<(), SessionError> {
        let call = Call::Add {
            database: database.to_owned(),
            stream: stream.to_owned(),
            caller,
            targets,
        };
        self.on_stream(stream, call).await.map(|_| ())
    }

    /// Whether a running stream has a target.
    ///
    /// # Errors
    /// As `Session::holds`.
    pub async fn holds(
        &self,
        database: &str,
        stream: &str,
        caller: &str,
        target: &str,
    ) -> Result<bool, SessionError> {
        let call = Call::Holds {
            database: database.to_owned(),
            stream: stream.to_owned(),
            caller: caller.to_owned(),
            target: target.to_owned(),
        };
        match self.on_stream(stream, call).await? {
            Answer::Holds(held) => Ok(held),
            other => Err(SessionError::Unavailable(format!(
                "a matcher answered {other:?} to holds"
            ))),
        }
    }

    /// Remove a target from a running stream.
    ///
    /// # Errors
    /// As `Session::remove_target`.
    pub async fn remove_target(
        &self,
        stream: &str,
        caller: &str,
        target: &str,
    ) -> Result<(), SessionError> {
        let call = Call::Remove {
            stream: stream.to_owned(),
            caller: caller.to_owned(),
            target: target.to_owned(),
        };
        self.on_stream(stream, call).await.map(|_| ())
    }

    /// The client's connection of `link`, fed by a pump task.
    fn connect(&self, link: Link) -> Connection {
        let (tx, frames) = mpsc::channel(self.0.queue);
        let (closing, closed) = oneshot::channel();
        lock(&self.0.held).insert(link.stream.clone(), link.matcher.clone());
        self.forwarded_by(&link.route, &link.matcher);
        let connection = Connection {
            stream: link.stream.clone(),
            first: Vec::new(),
            frames,
            closed,
            sizes: link.sizes.clone(),
        };
        let pump = Pump {
            relay: self.clone(),
            source: self.0.attach(&link.matcher),
            link,
            next: 0,
            tx,
            closing: Some(closing),
            pace: Pace::new(),
        };
        tokio::spawn(pump.run());
        connection
    }
}

fn refusal(answer: Answer) -> SessionError {
    match answer {
        Answer::Error {
            code,
            message,
            limit,
        } => session_error(code, message, limit),
        other => SessionError::Unavailable(format!("a matcher answered {other:?}")),
    }
}

/// Route the frames the matchers forward to this gateway to their connections, putting the
/// parts of a frame larger than a NATS message back together first (only for a route still
/// open; a route's partial frame is dropped when the route goes). A connection whose queue is
/// full is dropped from the routes: its pump closes it as lagged.
async fn dispatch(relay: std::sync::Weak<Inner>, mut frames: async_nats::Subscriber) {
    let mut gatherer = wire::Gatherer::default();
    while let Some(message) = frames.next().await {
        let Some(relay) = relay.upgrade() else {
            return;
        };
        let decoded = match part_header(&message) {
            None => wire::decode_forwarded(&message.payload).map(|forwarded| {
                gatherer.whole(&forwarded.route);
                Some(forwarded)
            }),
            Some(Err(e)) => Err(e),
            // A connection that ended or moved: nothing to gather.
            Some(Ok(header)) => {
                let now = relay.millis();
                match lock(&relay.routes).get_mut(&header.route) {
                    Some(r) => {
                        r.last = now;
                        gatherer.push(header, &message.payload)
                    }
                    None => Ok(None),
                }
            }
        };
        if !gatherer.is_empty() {
            let routes = lock(&relay.routes);
            gatherer.retain(|route| routes.contains_key(route));
        }
        match decoded {
            Err(e) => {
                metrics::counter!("docstore_gateway_rejected_frames_total").increment(1);
                tracing::warn!(error = %e, "a forwarded frame that does not decode is skipped");
            }
            Ok(None) => {}
            Ok(Some(forwarded)) => {
                let now = relay.millis();
                let mut routes = lock(&relay.routes);
                let full = match routes.get_mut(&forwarded.route) {
                    Some(r) => {
                        r.last = now;
                        matches!(
                            r.tx.try_send(forwarded),
                            Err(mpsc::error::TrySendError::Full(_))
                        )
                    }
                    // A connection that ended or moved: nothing to do.
                    None => false,
                };
                if full {
                    routes.retain(|_, r| r.tx.capacity() > 0);
                }
            }
        }
    }
}

/// The part header of a forwarded message (`None`: the message is whole).
fn part_header(message: &async_nats::Message) -> Option<Result<wire::PartHeader, wire::WireError>> {
    let headers = message.headers.as_ref()?;
    let part = headers.get(wire::PART_HEADER)?;
    let value = |name: &'static str| {
        headers
            .get(name)
            .map(|v| v.as_str())
            .ok_or_else(|| wire::WireError::Field(name, "missing".into()))
    };
    Some(value(wire::ROUTE_HEADER).and_then(|route| {
        wire::PartHeader::parse(route, value(wire::FRAME_HEADER)?, part.as_str())
    }))
}

/// Where a connection's frames come from.
struct Link {
    database: String,
    caller: Caller,
    stream: String,
    matcher: String,
    route: String,
    rx: mpsc::Receiver<Forwarded>,
    /// The position of the last frame passed on (or resumed from).
    position: Lsn,
    sizes: Option<super::Sizes>,
}

/// Feeds one client connection.
struct Pump {
    relay: Relay,
    /// The link's matcher, as this gateway's metrics count it.
    source: Arc<Source>,
    link: Link,
    next: u64,
    tx: mpsc::Sender<Frame>,
    closing: Option<oneshot::Sender<Frame>>,
    pace: Pace,
}

impl Pump {
    async fn run(mut self) {
        self.pump().await;
        self.relay.0.release(&self.source);
    }

    async fn pump(&mut self) {
        let mut matchers = self.relay.0.matchers.clone();
        loop {
            tokio::select! {
                forwarded = self.link.rx.recv() => match forwarded {
                    None => {
                        self.close(ResetReason::Lagged, "the client read too slowly").await;
                        return;
                    }
                    Some(forwarded) if forwarded.seq != self.next => {
                        let cause = if forwarded.seq == CHECKED_GAP {
                            Cause::Silent
                        } else {
                            metrics::counter!("docstore_gateway_frame_gaps_total").increment(1);
                            tracing::warn!(stream = self.link.stream, expected = self.next, got = forwarded.seq, "a gap in a connection's frames: resuming it");
                            Cause::Gap
                        };
                        if !self.failover(cause).await {
                            return;
                        }
                    }
                    Some(forwarded) => {
                        self.next += 1;
                        self.relay.0.heard(&self.source);
                        self.pace.delivered(Instant::now());
                        match forwarded.item {
                            Item::Frame(frame) => {
                                self.link.position = frame.position;
                                match self.tx.try_send(frame) {
                                    Ok(()) => {
                                        self.relay.0.relayed.fetch_max(self.link.position.0, Ordering::Relaxed);
                                    }
                                    Err(mpsc::error::TrySendError::Full(_)) => {
                                        self.close(ResetReason::Lagged, "the client read too slowly").await;
                                        return;
                                    }
                                    Err(mpsc::error::TrySendError::Closed(_)) => {
                                        tracing::info!(stream = self.link.stream, matcher = self.link.matcher, position = %self.link.position, "a connection's client left: its stream waits for a resume");
                                        self.leave();
                                        return;
                                    }
                                }
                            }
                            Item::Closed(frame) => {
                                // The stream ended on its matcher.
                                lock(&self.relay.0.held).remove(&self.link.stream);
                                if let Some(closing) = self.closing.take() {
                                    let _ = closing.send(frame);
                                }
                                self.relay.unroute(&self.link.route);
                                return;
                            }
                            Item::End => {
                                tracing::info!(stream = self.link.stream, matcher = self.link.matcher, position = %self.link.position, "a connection's matcher ended it: its client resumes");
                                self.relay.unroute(&self.link.route);
                                return;
                            }
                        }
                    }
                },
                () = self.tx.closed() => {
                    tracing::info!(stream = self.link.stream, matcher = self.link.matcher, position = %self.link.position, "a connection's client left: its stream waits for a resume");
                    self.leave();
                    return;
                }
                changed = matchers.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let gone = !matchers.borrow().contains(&self.link.matcher);
                    if gone {
                        tracing::warn!(stream = self.link.stream, matcher = self.link.matcher, "a connection's matcher is gone: resuming it on another");
                        if !self.failover(Cause::Gone).await {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The client left: the matcher stops forwarding; the stream waits for a resume.
    fn leave(&self) {
        lock(&self.relay.0.held).remove(&self.link.stream);
        self.relay
            .detach(self.link.matcher.clone(), self.link.route.clone());
    }

    /// Close the client's connection with a reset: the stream ends for good, as on one
    /// process (docs/listen.md, "Resuming on another process"). Its registry entry, while
    /// this connection's matcher holds it, is deleted before the client is sent the reset
    /// (retried while NATS does not answer), so that a client that read the reset and
    /// resumes on another gateway gets a reset there too, never the ended stream adopted
    /// or continued. The matcher's copy, detached, ends after its grace.
    async fn close(&mut self, reason: ResetReason, message: &str) {
        // Counted here as a hub counts its own (a matcher's closing reset, passed on, is the
        // matcher's).
        metrics::counter!("docstore_session_resets_total", "reason" => reason.as_str())
            .increment(1);
        tracing::info!(stream = self.link.stream, matcher = self.link.matcher, position = %self.link.position, reason = reason.as_str(), message, "a connection closes with a reset");
        self.leave();
        super::forget_until_gone(
            &self.relay.0.registry,
            &self.link.stream,
            &self.link.matcher,
            reason,
        )
        .await;
        if let Some(closing) = self.closing.take() {
            let _ = closing.send(events::reset(
                &self.link.stream,
                self.link.position,
                reason,
                message,
            ));
        }
    }

    /// Resume the stream at the last position passed on, on the matcher the hash picks now
    /// (when its matcher is gone, not that one), after the wait its [`Pace`] sets. `false`:
    /// the connection closed. Counted in `docstore_gateway_failovers_total` by outcome
    /// (`continued`; `left`: the client went away meanwhile; `closed`: no matcher took it,
    /// or the stream cannot continue) and cause; a failover that waited first also in
    /// `docstore_gateway_failover_waits_total`.
    async fn failover(&mut self, cause: Cause) -> bool {
        let outcome = self.move_over(cause).await;
        metrics::counter!("docstore_gateway_failovers_total", "outcome" => outcome, "cause" => cause.as_str())
            .increment(1);
        outcome == "continued"
    }

    /// [`Pump::failover`]'s work. A client that was passed no frame yet (position 0: a new
    /// stream whose matcher went away before its first event) holds nothing: the matcher
    /// that takes the stream over sends every target whole, no reset. Answers the outcome
    /// [`Pump::failover`] counts.
    async fn move_over(&mut self, cause: Cause) -> &'static str {
        let gone = cause == Cause::Gone;
        let old = self.link.matcher.clone();
        self.relay.unroute(&self.link.route);
        if !gone {
            // Detached from the matcher that skipped a frame, which may still hold it.
            self.relay.detach(old.clone(), self.link.route.clone());
        }
        let wait = self.pace.next(Instant::now());
        if !wait.is_zero() {
            metrics::counter!("docstore_gateway_failover_waits_total").increment(1);
            tracing::info!(
                stream = self.link.stream,
                cause = cause.as_str(),
                wait_ms = wait.as_millis(),
                "a connection fails over again soon after its last failover: it waits first"
            );
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.tx.closed() => {
                    tracing::info!(
                        stream = self.link.stream,
                        "a connection's client left while it waited to fail over"
                    );
                    return "left";
                }
            }
        }
        let mut excluded = HashSet::new();
        if gone {
            excluded.insert(old);
        }
        let deadline = tokio::time::Instant::now() + FAILOVER_WINDOW;
        loop {
            if self.tx.is_closed() {
                tracing::info!(
                    stream = self.link.stream,
                    "a connection's client left while it was being moved to another matcher"
                );
                return "left";
            }
            let live = self.relay.0.matchers.borrow().clone();
            let Some(matcher) = presence::rendezvous(&self.link.stream, &live, &excluded) else {
                if tokio::time::Instant::now() >= deadline {
                    self.close(ResetReason::Restart, "no matcher is running")
                        .await;
                    return "closed";
                }
                tokio::time::sleep(presence::BEAT).await;
                excluded.clear();
                continue;
            };
            let (route, rx) = self.relay.route();
            let call = Call::Resume {
                database: self.link.database.clone(),
                stream: self.link.stream.clone(),
                position: self.link.position,
                caller: self.link.caller.clone(),
            };
            match self.relay.call(&matcher, &route, call).await {
                Ok(Answer::Connected { stream, .. }) if stream == self.link.stream => {
                    tracing::info!(stream, matcher, position = %self.link.position, "a connection continues on another matcher");
                    lock(&self.relay.0.held).insert(stream, matcher.clone());
                    self.relay.forwarded_by(&route, &matcher);
                    self.relay.0.release(&self.source);
                    self.source = self.relay.0.attach(&matcher);
                    self.link.matcher = matcher;
                    self.link.route = route;
                    self.link.rx = rx;
                    self.next = 0;
                    return "continued";
                }
                Ok(Answer::Unknown(reason)) => {
                    self.relay.unroute(&route);
                    self.close(reason, "the stream cannot continue on another matcher")
                        .await;
                    return "closed";
                }
                Ok(Answer::Error {
                    code: docstore_core::Code::Unavailable,
                    ..
                })
                | Err(_) => {
                    self.relay.unroute(&route);
                    excluded.insert(matcher);
                    if tokio::time::Instant::now() >= deadline {
                        self.close(ResetReason::Restart, "no matcher took the stream over")
                            .await;
                        return "closed";
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(other) => {
                    self.relay.unroute(&route);
                    tracing::warn!(stream = self.link.stream, answer = ?other, "a matcher refused to continue a stream");
                    self.close(
                        ResetReason::Restart,
                        "the stream cannot continue on another matcher",
                    )
                    .await;
                    return "closed";
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(matcher: Option<&str>, last: u64) -> Route {
        let (tx, _rx) = mpsc::channel(1);
        Route {
            tx,
            matcher: matcher.map(str::to_owned),
            last,
        }
    }

    #[test]
    fn silent_connected_routes_are_checked_per_matcher() {
        let routes = HashMap::from([
            ("a".to_owned(), route(Some("m1"), 100)),
            ("b".to_owned(), route(Some("m1"), 200)),
            ("c".to_owned(), route(Some("m2"), 150)),
            // Heard from since: not silent.
            ("d".to_owned(), route(Some("m2"), 5000)),
            // Its call is pending: no matcher forwards it yet, nothing to ask.
            ("e".to_owned(), route(None, 0)),
        ]);
        let mut silent = silent_routes(&routes, 1000);
        for r in silent.values_mut() {
            r.sort();
        }
        let expected = HashMap::from([
            ("m1".to_owned(), vec!["a".to_owned(), "b".to_owned()]),
            ("m2".to_owned(), vec!["c".to_owned()]),
        ]);
        assert_eq!(silent, expected);
    }

    #[test]
    fn a_route_its_matcher_does_not_forward_is_gone_one_it_does_is_held() {
        let asked = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        assert_eq!(gone_routes(asked.clone(), &["b".to_owned()]), ["a", "c"]);
        assert!(gone_routes(asked.clone(), &asked).is_empty());
        // A route the matcher names that was not asked about changes nothing.
        assert_eq!(gone_routes(asked, &["x".to_owned()]), ["a", "b", "c"]);
    }

    #[test]
    fn failovers_in_a_row_wait_longer_each_time_until_a_route_settles() {
        let start = Instant::now();
        let mut pace = Pace::new();
        assert_eq!(pace.next(start), Duration::ZERO, "the first goes at once");
        // Each route passes a frame on, then fails again a second later: the waits double
        // from 100 ms to 5 s, each with up to a quarter more of jitter.
        let mut now = start;
        for base in [100, 200, 400, 800, 1600, 3200, 5000, 5000] {
            now += Duration::from_secs(1);
            pace.delivered(now);
            let wait = pace.next(now + Duration::from_secs(1));
            let base = Duration::from_millis(base);
            assert!(
                wait >= base && wait <= base + base / 4,
                "{wait:?} for {base:?}"
            );
        }
        // A route that passed frames on for 30 s settled: the next failover goes at once,
        // the one after it waits the first wait again.
        pace.delivered(now);
        now += FAILOVER_SETTLED;
        assert_eq!(pace.next(now), Duration::ZERO);
        let wait = pace.next(now);
        assert!(wait >= FAILOVER_FIRST_DELAY && wait <= FAILOVER_FIRST_DELAY * 5 / 4);
        // A route that passed no frame on did not settle, however long it lasted.
        let wait = pace.next(now + Duration::from_secs(3600));
        assert!(wait >= FAILOVER_FIRST_DELAY * 2, "{wait:?}");
        // Nor one whose first frame came less than 30 s before the failover.
        pace.delivered(now);
        let wait = pace.next(now + FAILOVER_SETTLED - Duration::from_millis(1));
        assert!(wait >= FAILOVER_FIRST_DELAY * 4, "{wait:?}");
    }

    #[test]
    fn silence_is_three_heartbeats_and_at_least_three_seconds() {
        assert_eq!(silence(Duration::from_millis(100)), Duration::from_secs(3));
        assert_eq!(silence(Duration::from_secs(5)), Duration::from_secs(15));
    }
}
