//! The change source of a gateway (`--role gateway`, docs/architecture.md "Processes"): the
//! committed transactions an ingest published to a JetStream stream, read with an ordered
//! consumer instead of a replication slot.
//!
//! A task of its own reads the stream and hands the events on through a channel, so that
//! [`ChangeSource::next_event`] is cancel-safe and the reading survives NATS restarts:
//! - It starts at the stream's end (a new gateway has no streams to feed) and reports that
//!   start as [`SourceEvent::SlotCreated`]: the hub becomes ready, and would reset every stream
//!   if it had any (never a silent gap). A matcher (`--role matcher`) starts the changelog's
//!   keep before its start instead (by time), so that it can adopt a stream whose client saw a
//!   position from before it started; a position older than that resets as one no longer
//!   retained does.
//! - After NATS went away it reconnects with backoff and continues after the last stream
//!   sequence it read (before any, after the stream's last sequence when it started); a
//!   sequence that does not follow that one (messages aged out of the stream meanwhile) is
//!   reported as [`SourceEvent::SlotCreated`] too.
//! - Parts of a split payload are put back together ([`wire::Reassembler`]); a transaction
//!   at or before the last one delivered is skipped (JetStream's message-id deduplication
//!   covers only its duplicate window; an ingest that took over republishes what its
//!   predecessor had not confirmed).
//! - A payload that does not decode is logged and skipped (`docstore_gateway_rejected_total`):
//!   it cannot be a transaction of the slot, since the ingest writes only what it decoded.
//! - Its position, once a message is handed to the hub: `docstore_gateway_stream_sequence`
//!   (the stream sequence), `docstore_gateway_commit_lsn` (the commit LSN of the last
//!   transaction) and `docstore_gateway_pending_messages` (the messages the stream holds
//!   after it: the lag to the ingest's last published, whose `docstore_ingest_stream_sequence`
//!   and `docstore_ingest_commit_lsn` are the same figures).
//!
//! Also the stream's shared definition ([`stream_config`], [`subject`]) and the waiting state
//! of a role for `/healthz` ([`RoleHealth`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::wire::{self, Part, Reassembler, WireEvent};
use super::{Backoff, ChangeSource, Lsn, SourceError, SourceEvent};

/// How long a message stays in the stream: a gateway away for longer resets its streams.
pub const RETENTION: Duration = Duration::from_secs(24 * 3600);

/// What a role waits for, shared with `/healthz` (503 with the reasons while it waits): one
/// reason per part that waits (`"nats"`: the connection, `"lock"`: a standby ingest,
/// `"ingest"`: an ingest starting again after a failure, `"publish"`: JetStream's
/// acknowledgement, `"stream"`: a gateway's consumer), so that one part
/// recovering does not hide another still waiting.
#[derive(Debug, Clone, Default)]
pub struct RoleHealth(Arc<Mutex<BTreeMap<&'static str, String>>>);

impl RoleHealth {
    /// Not waiting.
    pub fn new() -> RoleHealth {
        RoleHealth::default()
    }

    /// What the role waits for now (`None`: nothing).
    pub fn waiting(&self) -> Option<String> {
        let reasons = match self.0.lock() {
            Ok(r) => r.values().cloned().collect::<Vec<_>>(),
            Err(poisoned) => poisoned.into_inner().values().cloned().collect(),
        };
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }

    /// Record what `part` waits for (`None`: it works). A change is logged.
    pub fn set(&self, part: &'static str, waiting: Option<String>) {
        let mut reasons = match self.0.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        if reasons.get(part) == waiting.as_ref() {
            return;
        }
        match waiting {
            Some(why) => {
                tracing::warn!("waiting: {why}");
                reasons.insert(part, why);
            }
            None => {
                tracing::info!("{part}: working again");
                reasons.remove(part);
            }
        }
    }
}

/// The subject of stream `name`'s messages.
pub fn subject(name: &str) -> String {
    format!("docstore.{name}")
}

/// The definition of the stream of committed transactions (file storage, kept
/// [`RETENTION`]; JetStream's default duplicate window of two minutes).
pub fn stream_config(name: &str) -> stream::Config {
    stream::Config {
        name: name.to_owned(),
        subjects: vec![subject(name)],
        storage: stream::StorageType::File,
        max_age: RETENTION,
        ..Default::default()
    }
}

/// Why NATS failed. `permanent`: a retry cannot fix it (the server refused the credentials,
/// it has no JetStream, the URL is not a NATS address) and `message` names the fix; start-up
/// ends with it. Otherwise the server is away: the role retries and `/healthz` says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsFailure {
    pub message: String,
    pub permanent: bool,
}

impl NatsFailure {
    fn permanent(message: String) -> NatsFailure {
        NatsFailure {
            message,
            permanent: true,
        }
    }

    fn transient(message: String) -> NatsFailure {
        NatsFailure {
            message,
            permanent: false,
        }
    }

    /// A failure to connect to `url`, by its kind.
    fn of_connect(url: &str, error: &async_nats::ConnectError) -> NatsFailure {
        use async_nats::ConnectErrorKind as Kind;
        let url = redact_url(url);
        match error.kind() {
            Kind::AuthorizationViolation | Kind::Authentication => NatsFailure::permanent(format!(
                "NATS at {url} refused the credentials ({error}); fix: give --nats-url the user \
                 and password (nats://user:password@host:port) or token the server expects"
            )),
            Kind::ServerParse => NatsFailure::permanent(format!(
                "--nats-url {url} is not a NATS server address ({error}); fix: --nats-url \
                 nats://host:port"
            )),
            _ => NatsFailure::transient(format!("NATS at {url} is unreachable: {error}")),
        }
    }

    /// A failure to open stream `name` on the server at `url`.
    fn of_stream(
        url: &str,
        name: &str,
        error: &jetstream::context::CreateStreamError,
    ) -> NatsFailure {
        let url = redact_url(url);
        match error.kind() {
            // No server answers the JetStream API.
            jetstream::context::CreateStreamErrorKind::JetStreamUnavailable => {
                NatsFailure::permanent(format!(
                    "NATS at {url} does not run JetStream (stream {name}: {error}); fix: start \
                     nats-server with -js (or a jetstream block in its configuration)"
                ))
            }
            _ => NatsFailure::transient(format!("JetStream stream {name}: {error}")),
        }
    }
}

impl std::fmt::Display for NatsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<NatsFailure> for String {
    fn from(failure: NatsFailure) -> String {
        failure.message
    }
}

/// The credentials of a NATS URL, percent-decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Credentials {
    /// `user:password@`.
    UserPassword(String, String),
    /// `token@`.
    Token(String),
}

/// The credentials `url` carries (the first server's that has any), percent-decoded as a
/// URL's userinfo is: `nats://us%40er:p%3Ass@host` is user `us@er` with password `p:ss`.
///
/// # Errors
/// A message naming the server (redacted) when its address does not parse as a URL, or its
/// credentials are not UTF-8 once decoded.
fn credentials(url: &str) -> Result<Option<Credentials>, String> {
    for server in url.split(',') {
        let server = server.trim();
        // As async-nats reads a server address: `host:port` is `nats://host:port`.
        let full = if server.contains("://") {
            server.to_owned()
        } else {
            format!("nats://{server}")
        };
        let parsed = url::Url::parse(&full).map_err(|e| {
            format!(
                "--nats-url {} is not a URL: {e}; fix: --nats-url nats://host:port",
                redact_url(server)
            )
        })?;
        let decode = |part: &str, what: &str| {
            percent_encoding::percent_decode_str(part)
                .decode_utf8()
                .map(|text| text.into_owned())
                .map_err(|_| {
                    format!(
                        "the {what} of --nats-url {} is not UTF-8 once percent-decoded; fix: \
                         percent-encode the UTF-8 bytes of its characters (@ is %40, : is %3A)",
                        redact_url(server)
                    )
                })
        };
        match (parsed.username(), parsed.password()) {
            ("", None) => continue,
            (user, Some(password)) => {
                return Ok(Some(Credentials::UserPassword(
                    decode(user, "user")?,
                    decode(password, "password")?,
                )))
            }
            (token, None) => return Ok(Some(Credentials::Token(decode(token, "token")?))),
        }
    }
    Ok(None)
}

/// The options of a connection to `url`, with the credentials it carries: async-nats does not
/// read them from the URL itself (`nats://user:password@host:port` sets the user and
/// password, `nats://token@host:port` the token; both percent-decoded).
///
/// # Errors
/// [`credentials`]' message for a URL whose credentials cannot be read.
pub fn options(url: &str) -> Result<async_nats::ConnectOptions, String> {
    let options = async_nats::ConnectOptions::new();
    Ok(match credentials(url)? {
        Some(Credentials::UserPassword(user, password)) => {
            options.user_and_password(user, password)
        }
        Some(Credentials::Token(token)) => options.token(token),
        None => options,
    })
}

/// `url` (one NATS URL or several, comma-separated) without the credentials it may carry:
/// `nats://user:password@host:4222` and `nats://token@host:4222` become
/// `nats://<redacted>@host:4222`. For logs, `/healthz` and `Config`'s Debug.
pub fn redact_url(url: &str) -> String {
    url.split(',')
        .map(|server| {
            let (scheme, rest) = match server.find("://") {
                Some(i) => server.split_at(i + 3),
                None => ("", server),
            };
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => format!("{scheme}<redacted>{}", &rest[at..]),
                None => server.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A NATS connection that reports losing and regaining the server in `health` and counts
/// reconnects (`counter`: a connection regained after it was lost, not the first one).
///
/// # Errors
/// The server could not be reached, or refused the connection ([`NatsFailure`]).
///
/// # Cancel safety
/// Cancel-safe.
pub async fn connect(
    url: &str,
    health: RoleHealth,
    counter: &'static str,
) -> Result<async_nats::Client, NatsFailure> {
    let url_text = redact_url(url);
    let lost = Arc::new(AtomicBool::new(false));
    options(url)
        .map_err(NatsFailure::permanent)?
        .connection_timeout(Duration::from_secs(5))
        .event_callback(move |event| {
            let health = health.clone();
            let url = url_text.clone();
            let lost = Arc::clone(&lost);
            async move {
                match event {
                    async_nats::Event::Disconnected => {
                        lost.store(true, Ordering::Relaxed);
                        health.set(
                            "nats",
                            Some(format!("NATS at {url} is unreachable; reconnecting")),
                        );
                    }
                    async_nats::Event::Connected => {
                        if lost.swap(false, Ordering::Relaxed) {
                            metrics::counter!(counter).increment(1);
                            tracing::info!(%url, "reconnected to NATS");
                        }
                        health.set("nats", None);
                    }
                    other => tracing::debug!(%other, "NATS event"),
                }
            }
        })
        .connect(url)
        .await
        .map_err(|e| NatsFailure::of_connect(url, &e))
}

/// Stream `name` of the server at `url` ([`stream_config`]; created when missing).
///
/// # Errors
/// [`NatsFailure`]: permanent when the server has no JetStream.
///
/// # Cancel safety
/// Cancel-safe.
pub async fn open_stream(
    js: &jetstream::Context,
    url: &str,
    name: &str,
) -> Result<stream::Stream, NatsFailure> {
    js.get_or_create_stream(stream_config(name))
        .await
        .map_err(|e| NatsFailure::of_stream(url, name, &e))
}

/// The start-up check of a role's NATS side (`--role ingest|gateway`): connect to `url` and
/// open stream `name` once.
///
/// # Errors
/// The [`NatsFailure`]: a permanent one ends start-up, a transient one is retried by the role.
///
/// # Cancel safety
/// Cancel-safe.
pub async fn preflight(url: &str, name: &str) -> Result<(), NatsFailure> {
    let client = connect(
        url,
        RoleHealth::new(),
        "docstore_nats_preflight_reconnects_total",
    )
    .await?;
    open_stream(&jetstream::new(client), url, name).await?;
    Ok(())
}

/// Where a gateway reads from.
#[derive(Debug, Clone)]
pub struct StreamSettings {
    /// `nats://host:port`.
    pub url: String,
    /// The stream's name (`--nats-stream`).
    pub stream: String,
    /// What the gateway waits for (`/healthz`).
    pub health: RoleHealth,
    /// How far back before its start the first read begins (`--role matcher`: the
    /// changelog's keep, so that it can adopt a stream whose client saw a position from
    /// before it started); `None` (a gateway): at the stream's end.
    pub history: Option<Duration>,
}

/// A [`ChangeSource`] over the JetStream stream of an ingest.
pub struct JetStreamSource {
    events: mpsc::Receiver<SourceEvent>,
    task: tokio::task::JoinHandle<()>,
}

impl JetStreamSource {
    /// Start reading at the stream's end.
    pub fn start(settings: StreamSettings) -> JetStreamSource {
        let (tx, events) = mpsc::channel(1024);
        let task = tokio::spawn(run(settings, tx));
        JetStreamSource { events, task }
    }
}

impl Drop for JetStreamSource {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ChangeSource for JetStreamSource {
    /// # Cancel safety
    /// Cancel-safe: a channel receive.
    async fn next_event(&mut self) -> Result<SourceEvent, SourceError> {
        self.events.recv().await.ok_or(SourceError::Closed)
    }

    /// Nothing to confirm: the ingest owns the slot; the stream keeps messages by age.
    fn confirm(&mut self, _lsn: Lsn) {}
}

/// What the reading task keeps across reconnects.
#[derive(Debug, Default)]
struct Reader {
    /// The stream sequence of the last message read.
    last_sequence: Option<u64>,
    /// The commit LSN of the last transaction handed on.
    last_commit: Lsn,
    parts: Reassembler,
    /// Whether the start was reported.
    started: bool,
    /// The start time of the first read with a history (kept across reconnects before any
    /// message arrived).
    since: Option<async_nats::jetstream::consumer::DeliverPolicy>,
}

/// Read until the source is dropped, reconnecting with backoff.
async fn run(settings: StreamSettings, tx: mpsc::Sender<SourceEvent>) {
    let mut reader = Reader::default();
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        match read(&settings, &mut reader, &tx, &mut backoff).await {
            Ok(()) => return,
            Err(e) => {
                settings.health.set("stream", Some(e));
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    }
}

/// One connection's reading. `Ok`: the source was dropped.
async fn read(
    settings: &StreamSettings,
    reader: &mut Reader,
    tx: &mpsc::Sender<SourceEvent>,
    backoff: &mut Backoff,
) -> Result<(), String> {
    let client = connect(
        &settings.url,
        settings.health.clone(),
        "docstore_gateway_nats_reconnects_total",
    )
    .await?;
    let js = jetstream::new(client);
    let stream = open_stream(&js, &settings.url, &settings.stream).await?;
    // The first start reads from the stream's end as it is then, by its sequence: a
    // reconnect before any message arrived continues from there too. (A consumer created
    // `New` again would skip what was published while NATS was away: a silent gap.)
    // With a history (a matcher), the first read starts that long before the start instead,
    // by time; what it reads from there counts as read once its first message arrived.
    let history = match (reader.last_sequence, settings.history) {
        (None, Some(history)) => match &reader.since {
            Some(since) => Some(*since),
            None => history_start(history).map(|start_time| {
                let since = consumer::DeliverPolicy::ByStartTime { start_time };
                reader.since = Some(since);
                since
            }),
        },
        _ => None,
    };
    let deliver_policy = match history {
        Some(since) => since,
        None => {
            let last = *reader
                .last_sequence
                .get_or_insert(stream.cached_info().state.last_sequence);
            consumer::DeliverPolicy::ByStartSequence {
                start_sequence: last + 1,
            }
        }
    };
    let consumer = stream
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: subject(&settings.stream),
            deliver_policy,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("JetStream consumer on {}: {e}", settings.stream))?;
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| format!("JetStream messages of {}: {e}", settings.stream))?;
    settings.health.set("stream", None);
    backoff.reset();
    if reader.started {
        tracing::info!(stream = %settings.stream, after = ?reader.last_sequence, "reading JetStream again");
        metrics::counter!("docstore_gateway_jetstream_restarts_total").increment(1);
    } else {
        reader.started = true;
        tracing::info!(stream = %settings.stream, url = %redact_url(&settings.url), "reading committed transactions from JetStream");
        if tx
            .send(SourceEvent::SlotCreated {
                consistent_point: Lsn(0),
            })
            .await
            .is_err()
        {
            return Ok(());
        }
    }
    loop {
        let message = match messages.next().await {
            None => return Err(format!("JetStream stream {} ended", settings.stream)),
            Some(Err(e)) => return Err(format!("JetStream stream {}: {e}", settings.stream)),
            Some(Ok(message)) => message,
        };
        let (sequence, pending) = message
            .info()
            .map(|info| (info.stream_sequence, info.pending))
            .map_err(|e| format!("JetStream message without its stream sequence: {e}"))?;
        let mut events = Vec::new();
        if let Some(last) = reader.last_sequence {
            if sequence <= last {
                continue;
            }
            if sequence != last + 1 {
                tracing::error!(
                    last,
                    sequence,
                    "JetStream messages were lost (aged out?): every stream resets"
                );
                events.push(SourceEvent::SlotCreated {
                    consistent_point: Lsn(0),
                });
                reader.parts = Reassembler::new();
            }
        }
        reader.last_sequence = Some(sequence);
        let part = message
            .headers
            .as_ref()
            .and_then(|h| h.get(wire::PART_HEADER))
            .map(|v| wire::part_of(v.as_str()));
        let part = match part.transpose() {
            Ok(part) => part,
            Err(e) => {
                reject(sequence, &e.to_string());
                continue;
            }
        };
        match reader.parts.push(part, &message.payload) {
            Part::Pending => {}
            Part::OutOfOrder { got, expected } => reject(
                sequence,
                &format!("part {got} does not follow part {expected:?}: the payload is dropped"),
            ),
            Part::Whole(payload) => match wire::decode(&payload) {
                Err(e) => reject(sequence, &e.to_string()),
                Ok(WireEvent::SlotCreated(lsn)) => {
                    events.push(SourceEvent::SlotCreated {
                        consistent_point: lsn,
                    });
                }
                Ok(WireEvent::Transaction(txn)) => {
                    if txn.commit_lsn <= reader.last_commit {
                        metrics::counter!("docstore_gateway_duplicates_total").increment(1);
                    } else {
                        reader.last_commit = txn.commit_lsn;
                        metrics::counter!("docstore_gateway_received_transactions_total")
                            .increment(1);
                        metrics::histogram!("docstore_gateway_lag_seconds")
                            .record(seconds_since(txn.commit_time.postgres_micros()));
                        events.push(SourceEvent::Transaction(txn));
                    }
                }
            },
        }
        for event in events {
            if tx.send(event).await.is_err() {
                return Ok(());
            }
        }
        // Handed to the hub: this process's position in the stream, and how far behind the
        // ingest's last published message it is.
        metrics::gauge!("docstore_gateway_commit_lsn").set(reader.last_commit.0 as f64);
        metrics::gauge!("docstore_gateway_pending_messages").set(pending as f64);
        metrics::gauge!("docstore_gateway_stream_sequence").set(sequence as f64);
    }
}

/// The time `history` before now, as JetStream takes it (`None`: out of range).
fn history_start(history: Duration) -> Option<async_nats::datetime::DateTime> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    let start = now.checked_sub(history).unwrap_or_default();
    async_nats::datetime::from_nanos(i128::try_from(start.as_nanos()).ok()?).ok()
}

fn reject(sequence: u64, why: &str) {
    metrics::counter!("docstore_gateway_rejected_total").increment(1);
    tracing::error!(sequence, "JetStream message skipped: {why}");
}

/// Seconds from a commit time (microseconds since 2000-01-01) to now (0 if in the future).
pub fn seconds_since(pg_micros: i64) -> f64 {
    const POSTGRES_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    let micros = now
        .saturating_sub(pg_micros.saturating_add(POSTGRES_EPOCH_UNIX_MICROS))
        .max(0);
    micros as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::{credentials, redact_url, Credentials};

    fn user(user: &str, password: &str) -> Option<Credentials> {
        Some(Credentials::UserPassword(user.into(), password.into()))
    }

    #[test]
    fn credentials_are_read_from_nats_urls() {
        assert_eq!(credentials("nats://user:pw@h:4222"), Ok(user("user", "pw")));
        assert_eq!(
            credentials("nats://tok@h:4222"),
            Ok(Some(Credentials::Token("tok".into())))
        );
        assert_eq!(credentials("nats://h:1,nats://u:p@g:2"), Ok(user("u", "p")));
        assert_eq!(credentials("h:1,u:p@g:2"), Ok(user("u", "p")));
        assert_eq!(credentials("nats://h:4222"), Ok(None));
        assert_eq!(credentials("nats://h:1/a@b"), Ok(None));
        assert_eq!(credentials("nats://:pw@h:1"), Ok(user("", "pw")));
    }

    #[test]
    fn credentials_in_nats_urls_are_percent_decoded() {
        assert_eq!(
            credentials("nats://us%40er:p%3Ass@host:4222"),
            Ok(user("us@er", "p:ss"))
        );
        assert_eq!(
            credentials("nats://u%3Ax:p%40%2F%25w%C3%A9@host"),
            Ok(user("u:x", "p@/%w\u{e9}"))
        );
        assert_eq!(
            credentials("tls://t%2Fo%40k%3Aen@host:4222"),
            Ok(Some(Credentials::Token("t/o@k:en".into())))
        );
        // A `%` that starts no escape stays as it is.
        assert_eq!(credentials("nats://u:100%@h"), Ok(user("u", "100%")));
    }

    #[test]
    fn malformed_credentials_are_a_clear_error_without_the_secret() {
        for (url, says) in [
            ("nats://us%FFer:secret@host:4222", "the user of --nats-url"),
            (
                "nats://user:s%C3ecret@host:4222",
                "the password of --nats-url",
            ),
            ("nats://s%FEcret@host:4222", "the token of --nats-url"),
            ("nats://user:secret@[::1:4222", "is not a URL"),
            ("nats://user:secret@host:99999", "is not a URL"),
        ] {
            let error = credentials(url).expect_err(url);
            assert!(error.contains(says), "{url}: {error}");
            assert!(error.contains("<redacted>@"), "{url}: {error}");
            assert!(!error.contains("ecret"), "{url}: {error}");
        }
        assert!(super::options("nats://us%FFer:pw@host").is_err());
    }

    #[test]
    fn credentials_in_nats_urls_are_redacted() {
        assert_eq!(
            redact_url("nats://user:secret@nats.example:4222"),
            "nats://<redacted>@nats.example:4222"
        );
        assert_eq!(
            redact_url("nats://s3cr3t-token@127.0.0.1:4222/x?y=1"),
            "nats://<redacted>@127.0.0.1:4222/x?y=1"
        );
        assert_eq!(
            redact_url("nats://a:b@one:4222,tls://two:4222,c:d@three:4222"),
            "nats://<redacted>@one:4222,tls://two:4222,<redacted>@three:4222"
        );
        assert_eq!(redact_url("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
        // An @ after the authority is no credential.
        assert_eq!(redact_url("nats://h:1/a@b"), "nats://h:1/a@b");
    }
}
