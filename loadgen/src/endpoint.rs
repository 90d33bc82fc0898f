//! A write triggers' endpoint (docs/triggers.md, "Delivery"): a local HTTP server that answers
//! every POST 200 with an empty body and records when each delivery arrived, with its `path`,
//! `trigger` and `commitTime`. Matched to the writes (by path), that is commit -> endpoint
//! latency: from the writer's COMMIT returning, and from the change's `commitTime`.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::clock::{now_micros, parse_commit_time};
use crate::report::{quantile_summary, windows};
use crate::write::Written;
use crate::LoadError;

/// One delivery as it arrived.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub trigger: String,
    pub path: String,
    /// The delivery's `commitTime` (Unix microseconds).
    pub commit_us: Option<i64>,
    /// When its body had been read (Unix microseconds).
    pub at_us: i64,
}

/// The running endpoint.
#[derive(Clone, Default)]
pub struct Recorder {
    arrivals: Arc<Mutex<Vec<Arrival>>>,
}

impl Recorder {
    pub fn count(&self) -> usize {
        self.arrivals.lock().map_or(0, |a| a.len())
    }

    pub fn take(&self) -> Vec<Arrival> {
        self.arrivals
            .lock()
            .map(|mut a| std::mem::take(&mut *a))
            .unwrap_or_default()
    }
}

/// Listen on `addr` and serve until the process ends.
///
/// # Errors
/// The address cannot be bound.
pub async fn serve(addr: SocketAddr) -> Result<Recorder, LoadError> {
    let listener = TcpListener::bind(addr).await?;
    let recorder = Recorder::default();
    let arrivals = Arc::clone(&recorder.arrivals);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let arrivals = Arc::clone(&arrivals);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let arrivals = Arc::clone(&arrivals);
                    async move {
                        let body = request.into_body().collect().await?.to_bytes();
                        let at_us = now_micros();
                        if let Ok(json) = serde_json::from_slice::<serde_json::Value>(&body) {
                            let text = |k: &str| json.get(k).and_then(|v| v.as_str());
                            let arrival = Arrival {
                                trigger: text("trigger").unwrap_or_default().to_owned(),
                                path: text("path").unwrap_or_default().to_owned(),
                                commit_us: text("commitTime").and_then(parse_commit_time),
                                at_us,
                            };
                            if let Ok(mut a) = arrivals.lock() {
                                a.push(arrival);
                            }
                        }
                        Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::new())))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(recorder)
}

/// What the endpoint received against the writes, `triggers` deliveries expected per write:
/// the summary lines and a `TRIGGERS` row for BENCHMARKS.md (the loadgen's CPU columns are
/// the caller's).
pub fn report(
    label: &str,
    rate: &str,
    writes: &[Written],
    triggers: usize,
    arrivals: &[Arrival],
    started_us: i64,
) -> (Vec<String>, String) {
    let committed: HashMap<&str, i64> = writes
        .iter()
        .map(|w| (w.path.as_str(), w.committed_us))
        .collect();
    let mut seen = HashSet::new();
    let mut duplicates = 0usize;
    let mut from_return = Vec::new();
    let mut from_commit = Vec::new();
    let mut last_us = started_us;
    for a in arrivals {
        let Some(&returned) = committed.get(a.path.as_str()) else {
            continue;
        };
        if !seen.insert((a.trigger.as_str(), a.path.as_str())) {
            duplicates += 1;
            continue;
        }
        last_us = last_us.max(a.at_us);
        from_return.push(a.at_us - returned);
        if let Some(c) = a.commit_us {
            from_commit.push((c, a.at_us - c));
        }
    }
    let expected = writes.len() * triggers;
    let delivered = seen.len();
    let per_second = delivered as f64 / ((last_us - started_us) as f64 / 1e6).max(1e-3);
    let window = windows(&from_commit, started_us);
    let return_summary = quantile_summary(from_return);
    let commit_summary = quantile_summary(from_commit.iter().map(|p| p.1).collect());
    let lines = vec![
        format!(
            "deliveries           {delivered} of {expected} ({} writes x {triggers} triggers), {duplicates} repeated, {per_second:.0}/s from the first write to the last arrival",
            writes.len()
        ),
        format!("commit returned -> endpoint  p50 / p99 / max  {return_summary} ms"),
        format!("commitTime -> endpoint       p50 / p99 / max  {commit_summary} ms"),
        format!("p99 first -> last 5 s        {window} ms"),
    ];
    let row = format!(
        "TRIGGERS | {label} | {rate} | {triggers} | {delivered} / {} | {duplicates} | {per_second:.0} | {return_summary} | {commit_summary} | {window} |",
        expected.saturating_sub(delivered)
    );
    (lines, row)
}
