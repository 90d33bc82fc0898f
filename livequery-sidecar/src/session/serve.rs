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
use tokio::sync::{oneshot, watch};

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
                let task = tokio::spawn(forward(
                    client.clone(),
                    session.clone(),
                    gateway,
                    route,
                    connection,
                    live,
                ));
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

    /// The most bytes one forwarded item may take, in parts: what a gateway gathers.
    fn max_message(&self) -> usize {
        wire::MAX_MESSAGE
    }

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

/// What becomes of a stream one of whose events is larger than a gateway takes: it ends for
/// good, as a stream whose client lagged ends (the session; a test records the call).
trait End: Send + Sync + 'static {
    /// End `stream` with `reset {lagged}` carrying `message`: its connection's closing reset
    /// comes on the connection's `closed` (with a registry, once the registry forgot the
    /// stream), and a later resume gets a reset and a new stream.
    fn end_lagged(
        &self,
        stream: &str,
        message: &str,
    ) -> impl std::future::Future<Output = ()> + Send;
}

impl End for Session {
    async fn end_lagged(&self, stream: &str, message: &str) {
        if let Err(e) = self.end(stream, ResetReason::Lagged, message).await {
            tracing::warn!(stream, error = %e, "a stream with an event too large to forward was not ended");
        }
    }
}

/// Forward `connection`'s frames to `gateway` under `route` until it ends, the gateway
/// detaches it, or the gateway is gone from `live` (then the connection is dropped, its end
/// sent in case the gateway still lives: the stream waits for a resume for its grace
/// period). A frame NATS refused ends the forwarding too ([`Out::pass`]). A frame larger
/// than a gateway takes ends the stream for good through `end` ([`too_large`]).
async fn forward<P: Publish, E: End>(
    client: P,
    end: E,
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
    let max_message = client.max_message();
    let mut out = Out {
        subject: presence::gateway_subject(&gateway),
        client,
        route,
        stream,
        seq: 0,
        position: crate::source::Lsn(0),
        max_message,
    };
    for frame in first {
        match out.pass(Item::Frame(frame)).await {
            Flow::Next => {}
            Flow::Ended => return,
            Flow::TooLarge => return too_large(&mut out, &end, Some(&mut closed)).await,
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
                Some(frame) => match out.pass(Item::Frame(frame)).await {
                    Flow::Next => {}
                    Flow::Ended => return,
                    Flow::TooLarge => break,
                },
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
    // `frames` is kept until the stream's end comes: dropped, the hub would count the
    // connection gone and its closing reset would not come on `closed`.
    too_large(&mut out, &end, closing.then_some(&mut closed)).await;
    drop(frames);
}

/// An event of the connection was larger than a gateway takes (it was not sent): the stream
/// ends for good, as one whose client lagged. Resumed, it would meet the same event again
/// and close again; held detached, it would wait for a resume for nothing. `end` ends it on
/// the hub, whose closing reset {lagged} (sent once the registry forgot the stream, so a
/// client that reads it and resumes anywhere gets a reset and a new stream) is the
/// connection's last frame. When the hub's reset does not come (`closed` is `None` or
/// closes: the stream is no longer this connection's), a reset of this connection's own
/// goes instead, at the position of the last frame sent.
async fn too_large<P: Publish, E: End>(
    out: &mut Out<P>,
    end: &E,
    closed: Option<&mut oneshot::Receiver<events::Frame>>,
) {
    let message = format!(
        "an event is larger than {} MiB, the most a matcher forwards; reconnect for a fresh snapshot",
        out.max_message >> 20
    );
    end.end_lagged(&out.stream, &message).await;
    let last = match closed {
        Some(closed) => closed.await.ok(),
        None => None,
    };
    let last = last
        .unwrap_or_else(|| events::reset(&out.stream, out.position, ResetReason::Lagged, &message));
    out.pass(Item::Closed(last)).await;
}

/// What the forwarding does after an item [`Out::pass`] was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// It went: forward the next.
    Next,
    /// The connection ends (its item was its last, or NATS refused it).
    Ended,
    /// Larger than a gateway takes: not sent, the stream ends ([`too_large`]).
    TooLarge,
}

/// What became of an item [`Out::send`] was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// Published whole (in parts or not).
    Whole,
    /// Larger than a gateway takes: nothing was sent, its number is not spent.
    TooLarge,
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
    /// The position of the last frame sent (what a closing reset of the forwarding's own
    /// carries).
    position: crate::source::Lsn,
    /// The most bytes one item may take ([`wire::MAX_MESSAGE`]; less in tests).
    max_message: usize,
}

impl<P: Publish> Out<P> {
    /// Send `item`; `false`: the connection ends. An item NATS refused ends the route: its
    /// number is spent, and the connection's end goes next, under the following number,
    /// so the gateway sees a gap at once and resumes the stream at the last whole frame
    /// it passed on (on the matcher the hash picks; this one keeps the stream, detached,
    /// for its grace). Without it, the gateway waited for a next frame that this dropped
    /// forwarding never sends: its client's connection stayed open and silent for good.
    async fn pass(&mut self, item: Item) -> Flow {
        match self.send(item).await {
            Sent::Whole => Flow::Next,
            Sent::TooLarge => Flow::TooLarge,
            Sent::Refused => {
                self.abandon().await;
                Flow::Ended
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
    /// [`Sent::TooLarge`], sending nothing, when it is larger than a gateway takes.
    async fn send(&mut self, item: Item) -> Sent {
        let position = match &item {
            Item::Frame(f) | Item::Closed(f) => Some(f.position),
            Item::End => None,
        };
        let payload = wire::encode_forwarded(&Forwarded {
            route: self.route.clone(),
            stream: self.stream.clone(),
            seq: self.seq,
            item,
        });
        if payload.len() > self.max_message {
            metrics::counter!("docstore_matcher_frames_refused_total", "reason" => "too_large")
                .increment(1);
            // Too large even in parts: the stream ends as a lagged one does.
            tracing::warn!(
                stream = self.stream,
                bytes = payload.len(),
                "an event is larger than a gateway takes: its stream ends"
            );
            return Sent::TooLarge;
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
        if let Some(position) = position {
            self.position = position;
        }
        metrics::counter!("docstore_matcher_frames_forwarded_total").increment(1);
        if parts > 1 {
            metrics::counter!("docstore_matcher_frame_parts_total")
                .increment(u64::try_from(parts).unwrap_or(u64::MAX));
        }
        Sent::Whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Lsn;
    use events::At;
    use tokio::sync::mpsc;

    /// One message published: its part header, if any, and payload.
    type Published = (Option<wire::PartHeader>, Bytes);

    /// What a gateway's subscription would get, in order: each message's part header, if
    /// any, and payload. The message numbered `refuse` (from 0) is refused, as NATS refuses
    /// a publish; nothing is recorded for it.
    #[derive(Clone)]
    struct Recorder {
        max_payload: usize,
        /// What a gateway takes ([`Publish::max_message`]; 64 MiB unless a test lowers it).
        max_message: usize,
        refuse: Option<usize>,
        tried: Arc<Mutex<usize>>,
        got: Arc<Mutex<Vec<Published>>>,
    }

    impl Recorder {
        fn new(max_payload: usize, refuse: Option<usize>) -> Recorder {
            Recorder {
                max_payload,
                max_message: wire::MAX_MESSAGE,
                refuse,
                tried: Arc::default(),
                got: Arc::default(),
            }
        }

        /// What the gateway makes of the messages: each whole forwarded message's number and
        /// item kind, parts gathered as `relay::dispatch` does.
        fn forwarded(&self) -> Vec<(u64, &'static str)> {
            self.items()
                .into_iter()
                .map(|(seq, kind, _)| (seq, kind))
                .collect()
        }

        /// [`Recorder::forwarded`] with each item's frame (`None`: an end).
        fn items(&self) -> Vec<(u64, &'static str, Option<events::Frame>)> {
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
                    let (kind, frame) = match f.item {
                        Item::Frame(frame) => ("frame", Some(frame)),
                        Item::Closed(frame) => ("closed", Some(frame)),
                        Item::End => ("end", None),
                    };
                    out.push((f.seq, kind, frame));
                }
            }
            out
        }
    }

    impl Publish for Recorder {
        fn max_payload(&self) -> usize {
            self.max_payload
        }

        fn max_message(&self) -> usize {
            self.max_message
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

    /// A hub as [`End`] sees it: each stream it was asked to end, and the closing reset it
    /// then sends on the connection's `closed` (its `closing`, while it has it), as the hub
    /// ends a lagged stream.
    #[derive(Clone, Default)]
    struct Hub {
        ended: Arc<Mutex<Vec<String>>>,
        closing: Arc<Mutex<Option<oneshot::Sender<events::Frame>>>>,
    }

    /// The position of the closing reset [`Hub`] sends.
    const HUB_POSITION: Lsn = Lsn(77);

    impl End for Hub {
        async fn end_lagged(&self, stream: &str, message: &str) {
            lock(&self.ended).push(stream.to_owned());
            if let Some(closing) = lock(&self.closing).take() {
                let reset = events::reset(stream, HUB_POSITION, ResetReason::Lagged, message);
                let _ = closing.send(reset);
            }
        }
    }

    /// A connection of stream `s1` fed `frames` (then ended by its hub when `end`),
    /// forwarded to gateway `g1`, which stays live, until the forwarding ends by itself.
    async fn forward_frames(publish: Recorder, frames: Vec<events::Frame>, end: bool) {
        forward_frames_of(publish, Hub::default(), frames, end).await;
    }

    /// [`forward_frames`] with `hub` (its closing sender is the connection's, when it has
    /// none).
    async fn forward_frames_of(
        publish: Recorder,
        hub_end: Hub,
        frames: Vec<events::Frame>,
        end: bool,
    ) {
        let (tx, rx) = mpsc::channel(frames.len() + 1);
        let (closing, closed) = oneshot::channel();
        let kept = lock(&hub_end.closing).is_none().then_some(closing);
        if let Some(closing) = kept {
            *lock(&hub_end.closing) = Some(closing);
        }
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
        let forwarding = forward(publish, hub_end, "g1".into(), "r1".into(), connection, live);
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
            Hub::default(),
            "g1".into(),
            "r1".into(),
            c1,
            live.clone(),
        ));
        let _watcher = track(&forwarders, "g1.r1".into(), r1);
        let (hub2, _closing2, c2) = open_connection();
        let r2 = tokio::spawn(forward(
            Recorder::new(1 << 20, None),
            Hub::default(),
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

    /// A stream `s1` whose second frame is larger than a gateway takes (here 4 KiB).
    fn with_a_too_large_frame() -> (Recorder, Vec<events::Frame>) {
        let mut publish = Recorder::new(1 << 20, None);
        publish.max_message = 4096;
        let big = events::reset("s1", Lsn(9), ResetReason::Lagged, &"x".repeat(10_000));
        let mut frames = heartbeats(1);
        frames.push(big);
        frames.extend(heartbeats(2));
        (publish, frames)
    }

    /// A connection's forwarded items, one frame and then its closing frame: the closing
    /// frame's position when it is a `reset {lagged}`, else what it is.
    fn closing_lagged_reset(publish: &Recorder) -> Result<Lsn, String> {
        let items = publish.items();
        let kinds: Vec<(u64, &str)> = items.iter().map(|(seq, kind, _)| (*seq, *kind)).collect();
        assert_eq!(kinds, [(0, "frame"), (1, "closed")]);
        match items[1].2.as_ref().map(|f| (f.position, &f.event.kind)) {
            Some((
                position,
                events::EventKind::Reset {
                    reason: ResetReason::Lagged,
                    ..
                },
            )) => Ok(position),
            other => Err(format!("{other:?}")),
        }
    }

    #[tokio::test]
    async fn an_event_too_large_for_a_gateway_ends_the_stream_on_the_hub_with_its_reset() {
        let (publish, frames) = with_a_too_large_frame();
        let hub = Hub::default();
        forward_frames_of(publish.clone(), hub.clone(), frames, false).await;
        // The stream is ended on the hub (before, it stayed there detached, and a resume met
        // the same event again), and the connection's last frame is the hub's closing reset,
        // under the number the too-large frame did not spend; nothing after it.
        assert_eq!(*lock(&hub.ended), ["s1"]);
        assert_eq!(closing_lagged_reset(&publish), Ok(HUB_POSITION));
    }

    #[tokio::test]
    async fn without_the_hubs_reset_a_too_large_event_closes_with_the_forwardings_own() {
        let (publish, frames) = with_a_too_large_frame();
        // The hub's reset never comes (the stream is no longer this connection's): the
        // connection still closes, with a reset at the last frame sent.
        let hub = Hub::default();
        let (other, _) = oneshot::channel();
        *lock(&hub.closing) = Some(other);
        forward_frames_of(publish.clone(), hub.clone(), frames, false).await;
        assert_eq!(*lock(&hub.ended), ["s1"]);
        assert_eq!(closing_lagged_reset(&publish), Ok(Lsn(1)));
    }
}
