//! Delivery: POST each recorded change to its trigger's URL, from `docstore.trigger_deliveries`.
//!
//! Only the head of each document's queue (its first undelivered change) is claimed, so a
//! document's changes go out in commit order, one at a time, while different documents go out
//! in parallel (at most [`Settings::parallel`] requests). A claim is a lease: a crashed or
//! killed sidecar's claims run out and the changes are delivered again (at least once). A
//! failed attempt is due again after an exponential backoff with jitter; after
//! [`Settings::attempts`] it is parked, and its document's later changes wait behind it until
//! `docstore.retry_trigger`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{header, Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinSet;

use super::sign;
use crate::pg::triggers::{self as sql, Claimed};
use crate::pg::Db;

/// Largest answer read from an endpoint (an exactly-once endpoint's writes).
pub const MAX_ANSWER_BYTES: usize = 10 * 1024 * 1024;

/// How often the table is looked at when nothing was recorded (retries that came due, other
/// sidecars' records, `retry_trigger`).
const POLL: Duration = Duration::from_millis(250);

/// Tuning of delivery (the sidecar's `--trigger-*` flags).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Requests in flight at most (each for a different document).
    pub parallel: usize,
    /// Attempts before a change is parked.
    pub attempts: i32,
    /// How long one request may take.
    pub timeout: Duration,
    /// The delay after the first failed attempt; doubled after each, up to `backoff_max`.
    pub backoff_first: Duration,
    pub backoff_max: Duration,
    /// Chains of trigger writes deeper than this are parked.
    pub max_depth: i32,
}

type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Start the delivery task; `recorded` wakes it when new changes were recorded.
///
/// # Errors
/// No TLS configuration.
pub fn start(db: Db, settings: Settings, recorded: Arc<Notify>) -> Result<(), String> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
        .map_err(|e| format!("write triggers' TLS: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    let client: HttpClient = Client::builder(TokioExecutor::new()).build(connector);
    let (marks, marked) = mpsc::unbounded_channel();
    tokio::spawn(mark_done(db.clone(), marked, Arc::clone(&recorded)));
    tokio::spawn(run(db, settings, client, recorded, marks));
    Ok(())
}

/// The claimed changes waiting for a free request slot, and those in flight, are at most
/// twice `parallel`; a claim asks for the room left once at least `parallel` is free. So the
/// deliverer claims a batch per round instead of one change per finished request, and a
/// claimed change waits for a slot at most as long as one request may take: it is posted
/// within its lease (twice the timeout plus 5 s).
///
/// # Cancel safety
/// Runs for the life of the process.
async fn run(db: Db, settings: Settings, client: HttpClient, recorded: Arc<Notify>, marks: Marks) {
    let mut running = JoinSet::new();
    let mut ready: VecDeque<Claimed> = VecDeque::new();
    let parallel = settings.parallel.max(1);
    let lease = settings.timeout.as_secs_f64() * 2.0 + 5.0;
    let mut upkeep = tokio::time::interval(Duration::from_secs(5));
    upkeep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let room = (2 * parallel).saturating_sub(running.len() + ready.len());
        // Whether the last claim filled the room: more may be due right away.
        let mut full = false;
        if room >= parallel {
            match sql::claim(&db, i64::try_from(room).unwrap_or(i64::MAX), lease).await {
                Ok(claimed) => {
                    full = claimed.len() == room;
                    ready.extend(claimed);
                }
                // Debug: the server's message and SQLSTATE, which Display leaves out.
                Err(e) => tracing::warn!(error = ?e, "write triggers: claiming deliveries failed"),
            }
        }
        while running.len() < parallel {
            let Some(c) = ready.pop_front() else { break };
            let db = db.clone();
            let client = client.clone();
            let marks = marks.clone();
            running.spawn(async move { deliver(&db, &client, &settings, &marks, c).await });
        }
        tokio::select! {
            Some(_) = running.join_next(), if !running.is_empty() => {}
            () = recorded.notified(), if !full => {}
            () = tokio::time::sleep(POLL), if !full => {}
            _ = upkeep.tick() => refresh_metrics(&db).await,
        }
    }
}

/// The done marks of at-least-once deliveries, on their way to [`mark_done`].
type Marks = mpsc::UnboundedSender<(String, String)>;

/// Most done marks written in one statement.
const MARK_BATCH: usize = 1024;

/// Write the done marks of at-least-once deliveries: every mark that arrived while the last
/// statement ran goes into the next one (one transaction, committed asynchronously:
/// `pg::triggers::done`), then the deliverer is woken, since a document's next change is
/// claimable only once its predecessor is marked. A mark that cannot be written is dropped:
/// its claim runs out and the change is delivered again.
///
/// # Cancel safety
/// Runs for the life of the process.
async fn mark_done(
    db: Db,
    mut marked: mpsc::UnboundedReceiver<(String, String)>,
    wake: Arc<Notify>,
) {
    let mut batch = Vec::with_capacity(MARK_BATCH);
    while marked.recv_many(&mut batch, MARK_BATCH).await > 0 {
        if let Err(e) = sql::done(&db, &batch).await {
            tracing::warn!(error = ?e, marks = batch.len(), "write triggers: marking deliveries done failed; they are delivered again after their claims run out");
        }
        batch.clear();
        wake.notify_one();
    }
}

async fn refresh_metrics(db: &Db) {
    match sql::counts(db).await {
        Ok(counts) => {
            for (trigger, pending, parked) in counts {
                #[allow(clippy::cast_precision_loss)]
                {
                    metrics::gauge!("docstore_trigger_pending", "trigger" => trigger.clone())
                        .set(pending as f64);
                    metrics::gauge!("docstore_trigger_parked", "trigger" => trigger)
                        .set(parked as f64);
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "write triggers: counting deliveries failed"),
    }
    if let Err(e) = sql::purge(db).await {
        tracing::warn!(error = %e, "write triggers: purging delivered changes failed");
    }
}

/// What one attempt came to.
enum Outcome {
    /// Answered 2xx (and, exactly once, its writes committed with the acknowledgement).
    Delivered,
    Failed(String),
}

async fn deliver(db: &Db, client: &HttpClient, settings: &Settings, marks: &Marks, c: Claimed) {
    let started = Instant::now();
    let outcome = match attempt(client, settings, &c).await {
        Ok(answer) => finish(db, &c, answer).await,
        Err(why) => Outcome::Failed(why),
    };
    let trigger = c.trigger.clone();
    let result = match outcome {
        Outcome::Delivered => {
            let latency = c.waited_ms / 1000.0 + started.elapsed().as_secs_f64();
            metrics::histogram!("docstore_trigger_delivery_latency_seconds", "trigger" => trigger.clone())
                .record(latency);
            metrics::histogram!("docstore_trigger_delivery_attempts", "trigger" => trigger.clone())
                .record(f64::from(c.attempts));
            metrics::counter!("docstore_trigger_deliveries_total", "trigger" => trigger, "outcome" => "delivered")
                .increment(1);
            // Exactly once, the mark was committed with the acknowledgement.
            if !c.exactly_once
                && marks
                    .send((c.trigger.clone(), c.change_id.clone()))
                    .is_err()
            {
                tracing::error!("write triggers: the done marks' task has stopped");
            }
            Ok(())
        }
        Outcome::Failed(why) => {
            let park = c.attempts >= settings.attempts;
            let outcome = if park { "parked" } else { "failed" };
            metrics::counter!("docstore_trigger_deliveries_total", "trigger" => trigger, "outcome" => outcome)
                .increment(1);
            tracing::info!(trigger = %c.trigger, change = %c.change_id, attempts = c.attempts, park, error = %why, "write trigger: delivery failed");
            let delay = backoff(settings, c.attempts);
            sql::failed(
                db,
                &c.trigger,
                &c.change_id,
                &why,
                park,
                delay.as_secs_f64(),
            )
            .await
        }
    };
    if let Err(e) = result {
        // The claim runs out and the change is delivered again.
        tracing::warn!(trigger = %c.trigger, change = %c.change_id, error = %e, "write triggers: recording an outcome failed");
    }
}

/// The delay after the `attempts`th failed attempt: doubling from `backoff_first`, at most
/// `backoff_max`, plus up to a quarter of random jitter.
pub fn backoff(settings: &Settings, attempts: i32) -> Duration {
    let exponent = u32::try_from(attempts.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
    let base = settings
        .backoff_first
        .saturating_mul(1u32 << exponent)
        .min(settings.backoff_max);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    base + base / 4 * (nanos % 1_000) / 1_000
}

/// POST the change; `Ok` with the answer's body for a 2xx.
async fn attempt(client: &HttpClient, settings: &Settings, c: &Claimed) -> Result<Bytes, String> {
    let uri: Uri = c
        .url
        .parse()
        .map_err(|e| format!("the trigger's URL does not parse: {e}"))?;
    let body = sign::body(c);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let request = Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .header("idempotency-key", c.change_id.as_str())
        .header(
            sign::SIGNATURE_HEADER,
            sign::signature(&c.secret, now, &body),
        )
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("the request cannot be built: {e}"))?;
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| format!("the answer could not be read: {e}"))?
            .to_bytes();
        if status.is_success() {
            Ok(body)
        } else {
            Err(format!("the endpoint answered {status}"))
        }
    };
    tokio::time::timeout(settings.timeout, exchange)
        .await
        .map_err(|_| format!("no answer within {:?}", settings.timeout))?
}

/// After a 2xx: exactly once, commit the answer's writes with the acknowledgement.
async fn finish(db: &Db, c: &Claimed, answer: Bytes) -> Outcome {
    if !c.exactly_once {
        return Outcome::Delivered;
    }
    let writes = match writes_of(&answer) {
        Ok(writes) => writes,
        Err(why) => return Outcome::Failed(why),
    };
    match sql::commit_effects(db, c, writes.as_deref()).await {
        Ok(applied) => {
            if !applied {
                tracing::info!(trigger = %c.trigger, change = %c.change_id, "write trigger: a repeated delivery's writes were not applied (acknowledged before)");
            }
            Outcome::Delivered
        }
        Err(e) => Outcome::Failed(format!("the answer's writes were not committed: {e}")),
    }
}

/// The `writes` array of an exactly-once endpoint's answer (its JSON text), `None` for an
/// empty answer or one without writes.
///
/// # Errors
/// An answer that is not a JSON object, or whose `writes` is not an array.
pub fn writes_of(answer: &[u8]) -> Result<Option<String>, String> {
    if answer.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let json: serde_json::Value =
        serde_json::from_slice(answer).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let serde_json::Value::Object(object) = json else {
        return Err("the answer is not a JSON object".into());
    };
    match object.get("writes") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Array(w)) if w.is_empty() => Ok(None),
        Some(w @ serde_json::Value::Array(_)) => Ok(Some(w.to_string())),
        Some(_) => Err("the answer's writes is not an array".into()),
    }
}
