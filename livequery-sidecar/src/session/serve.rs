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
                        answer(&session, request.call, &forwarders, &key).await;
                    (
                        answer,
                        connection.map(|c| (c, request.gateway, request.route, key)),
                    )
                }
            };
            if let Some((connection, gateway, route, key)) = connection {
                let task = tokio::spawn(forward(client.clone(), gateway, route, connection, live));
                lock(&forwarders).insert(key.clone(), task.abort_handle());
                let forwarders = Arc::clone(&forwarders);
                tokio::spawn(async move {
                    let _ = task.await;
                    lock(&forwarders).remove(&key);
                    metrics::gauge!("docstore_matcher_connections").decrement(1.0);
                });
                metrics::gauge!("docstore_matcher_connections").increment(1.0);
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
    key: &str,
) -> (Answer, Option<Connection>) {
    let op = match &call {
        Call::Open { .. } => "open",
        Call::Resume { .. } => "resume",
        Call::Add { .. } => "add",
        Call::Holds { .. } => "holds",
        Call::Remove { .. } => "remove",
        Call::Detach => "detach",
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
            if let Some(task) = lock(forwarders).remove(key) {
                task.abort();
            }
            (Answer::Done, None)
        }
    }
}

/// Forward `connection`'s frames to `gateway` under `route` until it ends, the gateway
/// detaches it, or the gateway is gone from `live` (then the connection is dropped, its end
/// sent in case the gateway still lives: the stream waits for a resume for its grace
/// period).
async fn forward(
    client: async_nats::Client,
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
        if !out.send(Item::Frame(frame)).await {
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
                    out.send(Item::Closed(frame)).await;
                    return;
                }
                Err(_) => closing = false,
            },
            frame = frames.recv() => match frame {
                Some(frame) => {
                    if !out.send(Item::Frame(frame)).await {
                        return;
                    }
                }
                None => {
                    out.send(Item::End).await;
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
                    out.send(Item::End).await;
                    return;
                }
            }
        }
    }
}

/// One connection's forwarding: its subject, route and next sequence number.
struct Out {
    client: async_nats::Client,
    subject: String,
    route: String,
    stream: String,
    seq: u64,
    /// The position of the last frame sent (a frame too large to send does not move it:
    /// the closing reset carries this one, so a resume with it does not skip that frame).
    position: crate::source::Lsn,
}

impl Out {
    /// Send `item`, split into parts when it is larger than the server's `max_payload`;
    /// `false`: the connection ends (NATS refused it, or it was larger than a gateway takes
    /// and its closing reset went instead).
    async fn send(&mut self, item: Item) -> bool {
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
        if let (false, Some(position)) = (too_large, position) {
            self.position = position;
        }
        let seq = self.seq;
        self.seq += 1;
        let payload = Bytes::from(payload);
        let max_payload = self.client.server_info().max_payload;
        let messages = match wire::split_forwarded(&self.route, seq, &payload, max_payload) {
            Ok(messages) => messages,
            Err(e) => {
                metrics::counter!("docstore_matcher_frames_refused_total", "reason" => "too_large")
                    .increment(1);
                tracing::warn!(stream = self.stream, error = %e, "a frame was not forwarded: the connection ends");
                return false;
            }
        };
        let parts = messages.len();
        for (header, part) in messages {
            let part = payload.slice_ref(part);
            let sent = match header {
                None => self.client.publish(self.subject.clone(), part).await,
                Some(header) => {
                    let mut headers = async_nats::HeaderMap::new();
                    headers.insert(wire::ROUTE_HEADER, header.route.as_str());
                    headers.insert(wire::FRAME_HEADER, header.frame().as_str());
                    headers.insert(wire::PART_HEADER, header.part().as_str());
                    self.client
                        .publish_with_headers(self.subject.clone(), headers, part)
                        .await
                }
            };
            if let Err(e) = sent {
                metrics::counter!("docstore_matcher_frames_refused_total", "reason" => "publish")
                    .increment(1);
                tracing::warn!(stream = self.stream, error = %e, "a frame was not forwarded: the connection ends");
                return false;
            }
        }
        metrics::counter!("docstore_matcher_frames_forwarded_total").increment(1);
        if parts > 1 {
            metrics::counter!("docstore_matcher_frame_parts_total")
                .increment(u64::try_from(parts).unwrap_or(u64::MAX));
        }
        // A frame too large was replaced by the connection's closing reset.
        !too_large
    }
}
