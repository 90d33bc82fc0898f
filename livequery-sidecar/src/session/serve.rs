//! A matcher's calls (`--role matcher`; docs/architecture.md, "Processes"): the open,
//! resume, add-targets, holds and remove-target of its [`Session`], asked by gateways over
//! NATS request/reply on `docstore.matcher.<id>`, and the forwarding of each connection's
//! frames to the gateway that asked, on `docstore.gateway.<gateway>`, numbered per
//! connection so that the gateway sees a gap. A frame larger than the server's `max_payload`
//! goes as parts (`wire::split_forwarded`) under its one number, so a lost part loses the
//! frame and the gateway sees the gap at the next one.
//!
//! The calls carry the gateway's caller (owner key, quota, run-as) as the gateway
//! authenticated it: NATS credentials are the trust boundary, and whoever may publish on
//! `docstore.matcher.>` may read as any caller.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::watch;

use super::events::{self, ResetReason};
use super::presence;
use super::wire::{self, Answer, Call, Forwarded, Item};
use super::{Connection, Resumed, Session, SessionError};

/// The forwarding tasks, by `<gateway>.<route>`.
type Forwarders = Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Serve the calls of gateways to this matcher for the life of the process: announce it in
/// `matchers` under its session's instance id, watch `gateways`.
///
/// # Errors
/// The subscription failed.
pub async fn serve(
    session: Session,
    client: async_nats::Client,
    matchers: kv::Store,
    gateways: kv::Store,
) -> Result<(), String> {
    let id = session.instance().to_owned();
    let mut calls = client
        .subscribe(presence::matcher_subject(&id))
        .await
        .map_err(|e| format!("subscribe to the matcher's calls: {e}"))?;
    tokio::spawn(presence::announce(matchers, id.clone()));
    let live = presence::watch_live(gateways);
    let forwarders: Forwarders = Arc::default();
    tracing::info!(matcher = %id, "serving gateways' calls");
    while let Some(message) = calls.next().await {
        let session = session.clone();
        let client = client.clone();
        let live = live.clone();
        let forwarders = Arc::clone(&forwarders);
        tokio::spawn(async move {
            let Some(reply) = message.reply else {
                return;
            };
            let (answer, connection) = match wire::decode_request(&message.payload) {
                Err(e) => {
                    metrics::counter!("docstore_matcher_rejected_total").increment(1);
                    tracing::warn!(error = %e, "a call that does not decode is refused");
                    let refused = Answer::Error {
                        code: docstore_core::Code::InvalidArgument,
                        message: e.to_string(),
                        limit: None,
                    };
                    (refused, None)
                }
                Ok(request) => {
                    let key = format!("{}.{}", request.gateway, request.route);
                    let (answer, connection) =
                        answer(&session, request.call, &forwarders, &request.gateway, &key).await;
                    (
                        answer,
                        connection.map(|c| (c, request.gateway, request.route, key)),
                    )
                }
            };
            if let Some((connection, gateway, route, key)) = connection {
                let task = tokio::spawn(forward(client.clone(), gateway, route, connection, live));
                track(&forwarders, key, task);
            }
            if let Err(e) = client
                .publish(reply, Bytes::from(wire::encode_answer(&answer)))
                .await
            {
                tracing::warn!(error = %e, "a call's answer was not sent");
            }
        });
    }
    Err("the matcher's call subscription ended".into())
}

/// Keep `task`, the forwarding of route `key`, in `forwarders` while it runs: the answer to
/// a gateway's [`Call::Forwarding`] and what a [`Call::Detach`] aborts. It is there before
/// the call that opened it is answered, so a gateway never asks about a route before.
fn track(
    forwarders: &Forwarders,
    key: String,
    task: tokio::task::JoinHandle<()>,
) -> tokio::task::JoinHandle<()> {
    lock(forwarders).insert(key.clone(), task.abort_handle());
    metrics::gauge!("docstore_matcher_connections").increment(1.0);
    let forwarders = Arc::clone(forwarders);
    tokio::spawn(async move {
        let _ = task.await;
        lock(&forwarders).remove(&key);
        metrics::gauge!("docstore_matcher_connections").decrement(1.0);
    })
}

/// Which of `routes` of `gateway` this matcher still forwards (their forwarding task runs).
fn forwarding(forwarders: &Forwarders, gateway: &str, routes: Vec<String>) -> Vec<String> {
    let forwarders = lock(forwarders);
    routes
        .into_iter()
        .filter(|route| forwarders.contains_key(&format!("{gateway}.{route}")))
        .collect()
}

fn refused(e: SessionError) -> Answer {
    let e = crate::service::error::ServiceError::from(e);
    Answer::Error {
        code: e.code,
        message: e.message,
        limit: e.limit,
    }
}

/// What a call answers, and the connection it opened.
async fn answer(
    session: &Session,
    call: Call,
    forwarders: &Forwarders,
    gateway: &str,
    key: &str,
) -> (Answer, Option<Connection>) {
    let op = match &call {
        Call::Open { .. } => "open",
        Call::Resume { .. } => "resume",
        Call::Add { .. } => "add",
        Call::Holds { .. } => "holds",
        Call::Remove { .. } => "remove",
        Call::Detach => "detach",
        Call::Forwarding { .. } => "forwarding",
    };
    metrics::counter!("docstore_matcher_calls_total", "op" => op).increment(1);
    let connected = |c: Connection| {
        let answer = Answer::Connected {
            stream: c.stream.clone(),
            sizes: c.sizes.clone(),
        };
        (answer, Some(c))
    };
    match call {
        Call::Open {
            database,
            caller,
            targets,
            lead,
        } => match session.open(&database, caller, targets, lead).await {
            Ok(c) => connected(c),
            Err(e) => (refused(e), None),
        },
        Call::Resume {
            database,
            stream,
            position,
            caller,
        } => match session.resume(&database, &stream, position, &caller).await {
            Ok(Resumed::Connection(c)) => connected(c),
            Ok(Resumed::Unknown(reason)) => (Answer::Unknown(reason), None),
            Err(e) => (refused(e), None),
        },
        Call::Add {
            database,
            stream,
            caller,
            targets,
        } => match session
            .add_targets(&database, &stream, caller, targets)
            .await
        {
            Ok(()) => (Answer::Done, None),
            Err(e) => (refused(e), None),
        },
        Call::Holds {
            database,
            stream,
            caller,
            target,
        } => match session.holds(&database, &stream, &caller, &target).await {
            Ok(held) => (Answer::Holds(held), None),
            Err(e) => (refused(e), None),
        },
        Call::Remove {
            stream,
            caller,
            target,
        } => match session.remove_target(&stream, &caller, &target).await {
            Ok(()) => (Answer::Done, None),
            Err(e) => (refused(e), None),
        },
        Call::Detach => {
            let task = lock(forwarders).remove(key);
            tracing::info!(
                route = key,
                forwarded = task.is_some(),
                "a gateway detached a connection"
            );
            if let Some(task) = task {
                task.abort();
            }
            (Answer::Done, None)
        }
        Call::Forwarding { routes } => (
            Answer::Forwarding(forwarding(forwarders, gateway, routes)),
            None,
        ),
    }
}

/// Where a connection's forwarded messages go: NATS (a test records them instead).
trait Publish: Send + Sync + 'static {
    /// The most bytes one message may take (the server's `max_payload`).
    fn max_payload(&self) -> usize;

    /// Publish one message (`headers`: a part's).
    fn publish(
        &self,
        subject: String,
        headers: Option<async_nats::HeaderMap>,
        payload: Bytes,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send;
}

impl Publish for async_nats::Client {
    fn max_payload(&self) -> usize {
        self.server_info().max_payload
    }

    async fn publish(
        &self,
        subject: String,
        headers: Option<async_nats::HeaderMap>,
        payload: Bytes,
    ) -> Result<(), String> {
        let sent = match headers {
            None => async_nats::Client::publish(self, subject, payload).await,
            Some(headers) => self.publish_with_headers(subject, headers, payload).await,
        };
        sent.map_err(|e| e.to_string())
    }
}

/// Forward `connection`'s frames to `gateway` under `route` until it ends, the gateway
/// detaches it, or the gateway is gone from `live` (then the connection is dropped, its end
/// sent in case the gateway still lives: the stream waits for a resume for its grace
/// period). A frame NATS refused ends the forwarding too ([`Out::pass`]).
async fn forward<P: Publish>(
    client: P,
    gateway: String,
    route: String,
    connection: Connection,
    mut live: watch::Receiver<BTreeSet<String>>,
) {
    let Connection {
        stream,
        first,
        mut frames,
        mut closed,
        ..
    } = connection;
    let mut out = Out {
        subject: presence::gateway_subject(&gateway),
        client,
        route,
        stream,
        seq: 0,
        position: crate::source::Lsn(0),
    };
    for frame in first {
        if !out.pass(Item::Frame(frame)).await {
            return;
        }
    }
    let mut seen = live.borrow().contains(&gateway);
    let mut closing = true;
    loop {
        tokio::select! {
            biased;
            last = &mut closed, if closing => match last {
                Ok(frame) => {
                    out.pass(Item::Closed(frame)).await;
                    return;
                }
                Err(_) => closing = false,
            },
            frame = frames.recv() => match frame {
                Some(frame) => {
                    if !out.pass(Item::Frame(frame)).await {
                        return;
                    }
                }
                None => {
                    out.pass(Item::End).await;
                    return;
                }
            },
            changed = live.changed() => {
                if changed.is_err() {
                    return;
                }
                let present = live.borrow().contains(&gateway);
                if present {
                    seen = true;
                } else if seen {
                    // Its end goes out all the same: a gateway that lives on (its presence
                    // entry expired while NATS restarted, say) ends its client's connection,
                    // whose resume continues the stream, instead of waiting for frames that
                    // no longer come.
                    tracing::info!(stream = out.stream, gateway, "the gateway is gone: its connection is dropped");
                    out.pass(Item::End).await;
                    return;
                }
            }
        }
    }
}

/// What became of an item [`Out::send`] was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// Published whole (in parts or not).
    Whole,
    /// Larger than a gateway takes: the connection's closing reset went instead.
    Closed,
    /// NATS refused it (or one of its parts): the gateway holds none of it, or some parts.
    Refused,
}

/// One connection's forwarding: its subject, route and next sequence number.
struct Out<P> {
    client: P,
    subject: String,
    route: String,
    stream: String,
    seq: u64,
    /// The position of the last frame sent (a frame too large to send does not move it:
    /// the closing reset carries this one, so a resume with it does not skip that frame).
    position: crate::source::Lsn,
}

impl<P: Publish> Out<P> {
    /// Send `item`; `false`: the connection ends. An item NATS refused ends the route: its
    /// number is spent, and the connection's end goes next, under the following number,
    /// so the gateway sees a gap at once and resumes the stream at the last whole frame
    /// it passed on (on the matcher the hash picks; this one keeps the stream, detached,
    /// for its grace). Without it, the gateway waited for a next frame that this dropped
    /// forwarding never sends: its client's connection stayed open and silent for good.
    async fn pass(&mut self, item: Item) -> bool {
        match self.send(item).await {
            Sent::Whole => true,
            Sent::Closed => false,
            Sent::Refused => {
                self.abandon().await;
                false
            }
        }
    }

    /// The connection's end after a refused item, under the next number (a gap). Whole: an
    /// end is a few hundred bytes at most, far below any server's `max_payload`.
    async fn abandon(&mut self) {
        let payload = wire::encode_forwarded(&Forwarded {
            route: self.route.clone(),
            stream: self.stream.clone(),
            seq: self.seq,
            item: Item::End,
        });
        self.seq += 1;
        if let Err(e) = self
            .client
            .publish(self.subject.clone(), None, Bytes::from(payload))
            .await
        {
            // The gateway fails the connection over when this matcher's presence expires.
            tracing::warn!(stream = self.stream, error = %e, "a connection's end after a refused frame was not sent either");
        }
    }

    /// Send `item`, split into parts when it is larger than the server's `max_payload`;
    /// [`Sent::Closed`] when it was larger than a gateway takes and its closing reset went
    /// instead.
    async fn send(&mut self, item: Item) -> Sent {
        let position = match &item {
            Item::Frame(f) | Item::Closed(f) => Some(f.position),
            Item::End => None,
        };
        let mut payload = wire::encode_forwarded(&Forwarded {
            route: self.route.clone(),
            stream: self.stream.clone(),
            seq: self.seq,
            item,
        });
        let too_large = payload.len() > wire::MAX_MESSAGE;
        if too_large {
            metrics::counter!("docstore_matcher_frames_refused_total", "reason" => "too_large")
                .increment(1);
            // Too large even in parts: the connection closes as a lagged one does.
            tracing::warn!(
                stream = self.stream,
                bytes = payload.len(),
                "an event is larger than a gateway takes: its connection closes"
            );
            let reset = events::reset(
                &self.stream,
                self.position,
                ResetReason::Lagged,
                &format!(
                    "an event is larger than {} MiB, the most a matcher forwards",
                    wire::MAX_MESSAGE >> 20
                ),
            );
            payload = wire::encode_forwarded(&Forwarded {
                route: self.route.clone(),
                stream: self.stream.clone(),
                seq: self.seq,
                item: Item::Closed(reset),
            });
        }
        let seq = self.seq;
        self.seq += 1;
        let payload = Bytes::from(payload);
        let max_payload = self.client.max_payload();
        let messages = match wire::split_forwarded(&self.route, seq, &payload, max_payload) {
            Ok(messages) => messages,
            Err(e) => {
                metrics::counter!("docstore_matcher_frames_refused_total", "reason" => "too_large")
                    .increment(1);
                tracing::warn!(stream = self.stream, error = %e, "a frame was not forwarded: the connection ends");
                return Sent::Refused;
            }
        };
        let parts = messages.len();
        for (header, part) in messages {
            let part = payload.slice_ref(part);
            let headers = header.map(|header| {
                let mut headers = async_nats::HeaderMap::new();
                headers.insert(wire::ROUTE_HEADER, header.route.as_str());
                headers.insert(wire::FRAME_HEADER, header.frame().as_str());
                headers.insert(wire::PART_HEADER, header.part().as_str());
                headers
            });
            if let Err(e) = self
                .client
                .publish(self.subject.clone(), headers, part)
                .await
            {
                metrics::counter!("docstore_matcher_frames_refused_total", "reason" => "publish")
                    .increment(1);
                tracing::warn!(stream = self.stream, error = %e, "a frame was not forwarded: the connection ends, its gateway resumes it");
                return Sent::Refused;
            }
        }
        // Only a frame that went out moves the position a closing reset carries.
        if let (false, Some(position)) = (too_large, position) {
            self.position = position;
        }
        metrics::counter!("docstore_matcher_frames_forwarded_total").increment(1);
        if parts > 1 {
            metrics::counter!("docstore_matcher_frame_parts_total")
                .increment(u64::try_from(parts).unwrap_or(u64::MAX));
        }
        // A frame too large was replaced by the connection's closing reset.
        if too_large {
            Sent::Closed
        } else {
            Sent::Whole
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Lsn;
    use events::At;
    use tokio::sync::{mpsc, oneshot};

    /// One message published: its part header, if any, and payload.
    type Published = (Option<wire::PartHeader>, Bytes);

    /// What a gateway's subscription would get, in order: each message's part header, if
    /// any, and payload. The message numbered `refuse` (from 0) is refused, as NATS refuses
    /// a publish; nothing is recorded for it.
    #[derive(Clone)]
    struct Recorder {
        max_payload: usize,
        refuse: Option<usize>,
        tried: Arc<Mutex<usize>>,
        got: Arc<Mutex<Vec<Published>>>,
    }

    impl Recorder {
        fn new(max_payload: usize, refuse: Option<usize>) -> Recorder {
            Recorder {
                max_payload,
                refuse,
                tried: Arc::default(),
                got: Arc::default(),
            }
        }

        /// What the gateway makes of the messages: each whole forwarded message's number and
        /// item kind, parts gathered as `relay::dispatch` does.
        fn forwarded(&self) -> Vec<(u64, &'static str)> {
            let mut gatherer = wire::Gatherer::default();
            let mut out = Vec::new();
            for (header, payload) in lock(&self.got).iter() {
                let decoded = match header.clone() {
                    None => wire::decode_forwarded(payload).map(|f| {
                        gatherer.whole(&f.route);
                        Some(f)
                    }),
                    Some(header) => gatherer.push(header, payload),
                };
                if let Some(f) = decoded.unwrap_or_else(|e| panic!("{e}")) {
                    let kind = match f.item {
                        Item::Frame(_) => "frame",
                        Item::Closed(_) => "closed",
                        Item::End => "end",
                    };
                    out.push((f.seq, kind));
                }
            }
            out
        }
    }

    impl Publish for Recorder {
        fn max_payload(&self) -> usize {
            self.max_payload
        }

        async fn publish(
            &self,
            _subject: String,
            headers: Option<async_nats::HeaderMap>,
            payload: Bytes,
        ) -> Result<(), String> {
            let n = {
                let mut tried = lock(&self.tried);
                *tried += 1;
                *tried - 1
            };
            if Some(n) == self.refuse {
                return Err("refused".into());
            }
            let header = headers.map(|h| {
                let get = |name: &str| {
                    h.get(name)
                        .map(|v| v.as_str().to_owned())
                        .unwrap_or_default()
                };
                wire::PartHeader::parse(
                    &get(wire::ROUTE_HEADER),
                    &get(wire::FRAME_HEADER),
                    &get(wire::PART_HEADER),
                )
                .unwrap_or_else(|e| panic!("{e}"))
            });
            lock(&self.got).push((header, payload));
            Ok(())
        }
    }

    /// A connection of stream `s1` fed `frames` (then ended by its hub when `end`),
    /// forwarded to gateway `g1`, which stays live, until the forwarding ends by itself.
    async fn forward_frames(publish: Recorder, frames: Vec<events::Frame>, end: bool) {
        let (tx, rx) = mpsc::channel(frames.len() + 1);
        let (_closing, closed) = oneshot::channel();
        for frame in frames {
            tx.try_send(frame).unwrap_or_else(|_| unreachable!());
        }
        let hub = (!end).then_some(tx);
        let connection = Connection {
            stream: "s1".into(),
            first: Vec::new(),
            frames: rx,
            closed,
            sizes: None,
        };
        let (_live_tx, live) = watch::channel(BTreeSet::from(["g1".to_owned()]));
        // A guard against a hang, not a measure: the forwarding ends at once or never.
        let guard = std::time::Duration::from_secs(60);
        let forwarding = forward(publish, "g1".into(), "r1".into(), connection, live);
        let ended = tokio::time::timeout(guard, forwarding).await;
        assert!(ended.is_ok(), "the forwarding did not end");
        // The hub sees its connection dropped (the stream then waits for a resume).
        assert!(hub.is_none_or(|tx| tx.is_closed()));
    }

    fn heartbeats(n: u64) -> Vec<events::Frame> {
        (1..=n)
            .map(|p| events::heartbeat("s1", Lsn(p), At::default()))
            .collect()
    }

    #[tokio::test]
    async fn a_refused_frame_ends_the_route_with_a_gap_the_gateway_fails_over_at() {
        let publish = Recorder::new(1 << 20, Some(2));
        forward_frames(publish.clone(), heartbeats(5), false).await;
        // Frames 0 and 1 went; 2 was refused; the end goes as 3: the gateway, expecting 2,
        // sees the gap and resumes at frame 1's position. Frames 3 and 4 are not sent.
        assert_eq!(
            publish.forwarded(),
            [(0, "frame"), (1, "frame"), (3, "end")]
        );
    }

    #[tokio::test]
    async fn a_refused_part_ends_the_route_and_the_gateway_drops_the_partial_frame() {
        let big = events::reset("s1", Lsn(9), ResetReason::Lagged, &"x".repeat(10_000));
        let mut frames = heartbeats(1);
        frames.push(big);
        frames.extend(heartbeats(1));
        // Message 0: the heartbeat; 1, 2, ...: the parts of the big frame (a max_payload
        // of 4 KiB, 3 KiB of it left after the header room); the second part is refused.
        let publish = Recorder::new(4096, Some(2));
        forward_frames(publish.clone(), frames, false).await;
        assert_eq!(publish.forwarded(), [(0, "frame"), (2, "end")]);
        assert_eq!(
            lock(&publish.got).len(),
            3,
            "the heartbeat, the first part, the end"
        );
    }

    /// A connection of stream `s1` that stays open while `hub` lives.
    fn open_connection() -> (
        mpsc::Sender<events::Frame>,
        oneshot::Sender<events::Frame>,
        Connection,
    ) {
        let (tx, rx) = mpsc::channel(4);
        let (closing, closed) = oneshot::channel();
        let connection = Connection {
            stream: "s1".into(),
            first: Vec::new(),
            frames: rx,
            closed,
            sizes: None,
        };
        (tx, closing, connection)
    }

    #[tokio::test]
    async fn a_matcher_answers_which_silent_routes_it_still_forwards() {
        let forwarders: Forwarders = Arc::default();
        let (_live_tx, live) = watch::channel(BTreeSet::from(["g1".to_owned()]));
        // r1 forwards (its hub still feeds it, silently); r2's forwarding ended (its end
        // went, or was lost on the way); r3 was never forwarded here.
        let (_hub1, _closing1, c1) = open_connection();
        let r1 = tokio::spawn(forward(
            Recorder::new(1 << 20, None),
            "g1".into(),
            "r1".into(),
            c1,
            live.clone(),
        ));
        let _watcher = track(&forwarders, "g1.r1".into(), r1);
        let (hub2, _closing2, c2) = open_connection();
        let r2 = tokio::spawn(forward(
            Recorder::new(1 << 20, None),
            "g1".into(),
            "r2".into(),
            c2,
            live,
        ));
        let watcher = track(&forwarders, "g1.r2".into(), r2);
        let asked = || vec!["r1".to_owned(), "r2".to_owned(), "r3".to_owned()];
        assert_eq!(forwarding(&forwarders, "g1", asked()), ["r1", "r2"]);
        drop(hub2);
        // A guard against a hang, not a measure.
        let ended = tokio::time::timeout(std::time::Duration::from_secs(60), watcher).await;
        assert!(ended.is_ok(), "the forwarding of r2 did not end");
        assert_eq!(forwarding(&forwarders, "g1", asked()), ["r1"]);
        // Another gateway's routes of the same name are not this one's.
        assert!(forwarding(&forwarders, "g2", asked()).is_empty());
        // A route aborted (as a detach does: nothing more goes to the gateway) is not
        // forwarded once its task is gone.
        if let Some(task) = lock(&forwarders).get("g1.r1") {
            task.abort();
        }
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        while !forwarding(&forwarders, "g1", asked()).is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "r1 still forwards after its abort"
            );
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_connection_whose_frames_went_out_ends_without_a_gap() {
        let publish = Recorder::new(1 << 20, None);
        forward_frames(publish.clone(), heartbeats(3), true).await;
        let sent = [(0, "frame"), (1, "frame"), (2, "frame"), (3, "end")];
        assert_eq!(publish.forwarded(), sent);
    }
}
