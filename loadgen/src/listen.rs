//! The client side of `:listen`: one SSE stream per task, its frames cut out of the chunked
//! body, and what each event delivered (documents added or modified, with when they arrived
//! and the commit time the event carries).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header;
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value as Json};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;

use crate::clock::{now_micros, parse_commit_time};
use crate::LoadError;

/// One document a change or snapshot event delivered as added or modified.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The document's path as the event names it.
    pub path: String,
    /// When the bytes of the event arrived (Unix microseconds).
    pub received_us: i64,
    /// The event's `commitTime` (Unix microseconds).
    pub commit_us: Option<i64>,
}

/// One change or snapshot event: when it arrived, its commit time and position.
#[derive(Debug, Clone)]
pub struct EventMark {
    pub received_us: i64,
    pub commit_us: Option<i64>,
    pub position: String,
}

/// What one stream saw.
#[derive(Debug, Default)]
pub struct StreamLog {
    pub deliveries: Vec<Delivery>,
    pub marks: Vec<EventMark>,
    pub heartbeats: u64,
    pub resets: Vec<String>,
    pub bytes: u64,
}

/// Counters the streams share with the driver while they run.
#[derive(Debug, Default)]
pub struct Progress {
    /// Targets whose first snapshot arrived.
    pub live: AtomicUsize,
    /// Deliveries of documents whose path contains the run's tag (this run's writes).
    pub delivered: AtomicUsize,
}

/// A subscription: target id and its query text.
#[derive(Debug, Clone)]
pub struct TargetQuery {
    pub id: String,
    pub sql: String,
}

/// Where and as whom streams are opened.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    /// The gRPC front end (`--grpc`), for `--transport grpc`.
    pub grpc: Option<SocketAddr>,
    pub database: String,
    pub token: String,
}

/// SSE frames (`event:` and `data:` lines up to a blank line) cut out of a byte stream that
/// arrives in arbitrary chunks. Only `\n` line ends (what the sidecar writes).
#[derive(Debug, Default)]
pub struct FrameParser {
    buffer: Vec<u8>,
}

/// One frame: its event name (`message` when absent) and its data lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub event: String,
    pub data: String,
}

impl FrameParser {
    /// Append `chunk` and return the frames it completed. Comments and frames without data
    /// (the `retry:` preamble, keep-alives) are dropped.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Frame> {
        self.buffer.extend_from_slice(chunk);
        let mut frames = Vec::new();
        let mut start = 0;
        while let Some(end) = find_blank_line(&self.buffer[start..]) {
            let block = &self.buffer[start..start + end];
            start += end + 2;
            let text = String::from_utf8_lossy(block);
            let mut event = String::from("message");
            let mut data: Vec<&str> = Vec::new();
            for line in text.split('\n') {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim_start().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            if !data.is_empty() {
                frames.push(Frame {
                    event,
                    data: data.join("\n"),
                });
            }
        }
        self.buffer.drain(..start);
        frames
    }
}

fn find_blank_line(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\n\n")
}

/// The ids of targets of a `snapshot` event's `targets`, and the documents of every added or
/// modified change in `targets` (change) or `changes` (snapshot).
fn record(
    frame: &Frame,
    received_us: i64,
    log: &mut StreamLog,
    live: &mut HashSet<String>,
) -> usize {
    let mut newly_live = 0;
    match frame.event.as_str() {
        "heartbeat" => log.heartbeats += 1,
        "reset" => log.resets.push(frame.data.clone()),
        "change" | "snapshot" => {
            let Ok(json) = serde_json::from_str::<Json>(&frame.data) else {
                log.resets.push(format!("unparsable {} event", frame.event));
                return 0;
            };
            let commit_us = json
                .get("commitTime")
                .and_then(Json::as_str)
                .and_then(parse_commit_time);
            log.marks.push(EventMark {
                received_us,
                commit_us,
                position: json
                    .get("position")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_owned(),
            });
            let changes_key = if frame.event == "snapshot" {
                for t in json["targets"].as_array().into_iter().flatten() {
                    if let Some(id) = t["target"].as_str() {
                        if live.insert(id.to_owned()) {
                            newly_live += 1;
                        }
                    }
                }
                "changes"
            } else {
                "targets"
            };
            for t in json[changes_key].as_array().into_iter().flatten() {
                for c in t["changes"].as_array().into_iter().flatten() {
                    if matches!(c["type"].as_str(), Some("added" | "modified")) {
                        if let Some(path) = c["document"]["path"].as_str() {
                            log.deliveries.push(Delivery {
                                path: path.to_owned(),
                                received_us,
                                commit_us,
                            });
                        }
                    }
                }
            }
        }
        _ => {}
    }
    newly_live
}

/// Open one stream with `targets` and read it until `stop` turns true, counting in
/// `progress` (deliveries of paths that contain `tag`).
///
/// # Errors
/// The connection failed, or the sidecar refused the stream (its status and answer).
pub async fn run_stream(
    endpoint: Endpoint,
    source: std::net::IpAddr,
    targets: Vec<TargetQuery>,
    progress: Arc<Progress>,
    tag: Arc<str>,
    mut stop: watch::Receiver<bool>,
) -> Result<StreamLog, LoadError> {
    let socket = if endpoint.addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if endpoint.addr.is_ipv4() == source.is_ipv4() && endpoint.addr.ip().is_loopback() {
        socket.bind(SocketAddr::new(source, 0))?;
    }
    let tcp = socket.connect(endpoint.addr).await?;
    tcp.set_nodelay(true)?;
    let mut sender = http1(tcp).await?;
    let body = json!({
        "targets": targets
            .iter()
            .map(|t| json!({"id": t.id, "sql": t.sql}))
            .collect::<Vec<_>>()
    });
    let request = Request::post(format!("/v1/databases/{}:listen", endpoint.database))
        .header(header::HOST, endpoint.addr.to_string())
        .header(header::AUTHORIZATION, format!("Bearer {}", endpoint.token))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "text/event-stream")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(LoadError::http)?;
    let response = sender
        .send_request(request)
        .await
        .map_err(LoadError::http)?;
    let status = response.status();
    let mut body = response.into_body();
    if !status.is_success() {
        let text = body.collect().await.map_err(LoadError::http)?.to_bytes();
        return Err(LoadError::Refused(format!(
            "{status}: {}",
            String::from_utf8_lossy(&text)
        )));
    }
    let mut parser = FrameParser::default();
    let mut log = StreamLog::default();
    let mut seen = HashSet::new();
    loop {
        let frame = tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() { break; }
                continue;
            }
            frame = body.frame() => frame,
        };
        let received_us = now_micros();
        let Some(frame) = frame else {
            log.resets.push("the sidecar closed the stream".to_owned());
            break;
        };
        let Ok(data) = frame.map_err(LoadError::http)?.into_data() else {
            continue;
        };
        log.bytes += data.len() as u64;
        for f in parser.push(&data) {
            let before = log.deliveries.len();
            let n = record(&f, received_us, &mut log, &mut seen);
            progress.live.fetch_add(n, Ordering::Relaxed);
            let ours = log.deliveries[before..]
                .iter()
                .filter(|d| d.path.contains(&*tag))
                .count();
            progress.delivered.fetch_add(ours, Ordering::Relaxed);
        }
    }
    Ok(log)
}

/// An HTTP/1.1 client connection over `tcp`, its connection task spawned.
///
/// # Errors
/// The handshake failed.
pub async fn http1(tcp: TcpStream) -> Result<SendRequest<Full<Bytes>>, LoadError> {
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(LoadError::http)?;
    tokio::spawn(connection);
    Ok(sender)
}

/// `GET /metrics` of the sidecar: the value of each unlabelled sample named in `names`.
///
/// # Errors
/// The connection or the request failed.
pub async fn scrape(
    endpoint: &Endpoint,
    names: &[&str],
) -> Result<Vec<(String, Option<f64>)>, LoadError> {
    let mut sender = http1(TcpStream::connect(endpoint.addr).await?).await?;
    let request = Request::get("/metrics")
        .header(header::HOST, endpoint.addr.to_string())
        .body(Full::new(Bytes::new()))
        .map_err(LoadError::http)?;
    let response = sender
        .send_request(request)
        .await
        .map_err(LoadError::http)?;
    let text = response
        .into_body()
        .collect()
        .await
        .map_err(LoadError::http)?
        .to_bytes();
    let text = String::from_utf8_lossy(&text);
    Ok(names
        .iter()
        .map(|name| {
            let value = text.lines().find_map(|line| {
                let (n, v) = line.split_once(' ')?;
                (n == *name).then(|| v.trim().parse::<f64>().ok()).flatten()
            });
            ((*name).to_owned(), value)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_chunks_come_out_whole() {
        let text = "retry: 1500\n\nevent: change\nid: s.01\ndata: {\"a\":1}\n\n: keep-alive\n\nevent: heartbeat\ndata: {}\n\n";
        for cut in 0..text.len() {
            let mut p = FrameParser::default();
            let mut frames = p.push(&text.as_bytes()[..cut]);
            frames.extend(p.push(&text.as_bytes()[cut..]));
            assert_eq!(
                frames,
                vec![
                    Frame {
                        event: "change".into(),
                        data: "{\"a\":1}".into()
                    },
                    Frame {
                        event: "heartbeat".into(),
                        data: "{}".into()
                    }
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn snapshots_count_targets_once_and_changes_yield_deliveries() {
        let mut log = StreamLog::default();
        let mut live = HashSet::new();
        let snap = Frame {
            event: "snapshot".into(),
            data: r#"{"stream":"s","position":"0/10","commitTime":"2026-11-23T05:00:00.000001Z","targets":[{"target":"a","documents":[]},{"target":"b","documents":[]}],"changes":[]}"#.into(),
        };
        assert_eq!(record(&snap, 5, &mut log, &mut live), 2);
        assert_eq!(record(&snap, 6, &mut log, &mut live), 0);
        let change = Frame {
            event: "change".into(),
            data: r#"{"stream":"s","position":"0/20","commitTime":"2026-11-23T05:00:00.5Z","targets":[{"target":"a","changes":[{"type":"added","newIndex":0,"document":{"path":"r/w1","data":{},"updateTime":"x"}},{"type":"removed","oldIndex":9,"path":"r/old"}]}]}"#.into(),
        };
        assert_eq!(record(&change, 7, &mut log, &mut live), 0);
        assert_eq!(log.deliveries.len(), 1);
        assert_eq!(log.deliveries[0].path, "r/w1");
        assert_eq!(log.marks.len(), 3);
        assert_eq!(log.marks[2].position, "0/20");
        assert_eq!(log.marks[2].commit_us, Some(1_795_410_000_500_000));
    }

    #[test]
    fn garbage_never_panics() {
        let mut p = FrameParser::default();
        let mut log = StreamLog::default();
        let mut live = HashSet::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..2000 {
            let mut chunk = Vec::new();
            for _ in 0..(seed % 64) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let alphabet = b"event:change\ndata:{}[]\"targets\n\xff";
                chunk.push(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            for f in p.push(&chunk) {
                record(&f, 0, &mut log, &mut live);
            }
        }
    }
}
