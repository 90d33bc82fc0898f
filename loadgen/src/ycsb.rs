//! YCSB's core workloads over the sidecar's HTTP API: A (50% reads, 50% updates) and B (95% /
//! 5%), uniform keys over `--records` documents `{collection}/user{k}` that the script loaded
//! (nine 100-byte fields, 900 bytes: scripts/bench_ycsb.sh). A read is
//! `GET .../documents/{collection}/user{k}`; an update is a `PATCH` of one field with 100 new
//! bytes (YCSB's update writes one field), both as the admin key.
//!
//! Open loop at `--rate` operations per second: operation `g` is due at `start + g / rate`
//! and goes to connection `g % connections`; a connection that falls behind sends at once, and
//! every latency is measured from the operation's due time, so time spent queued behind a slow
//! answer counts (no coordinated omission). `--rate 0` is a closed loop: each connection sends
//! back to back, and latency is the time of the request alone.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{header, Method, Request};
use tokio::net::TcpStream;

use crate::listen::{self, Endpoint};
use crate::LoadError;

/// Which YCSB core workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// 50% reads, 50% updates ("update heavy").
    A,
    /// 95% reads, 5% updates ("read mostly").
    B,
}

impl Workload {
    /// Share of reads, in percent.
    pub fn read_percent(self) -> u64 {
        match self {
            Workload::A => 50,
            Workload::B => 95,
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub workload: Workload,
    pub collection: String,
    pub records: u64,
    /// Fields an update may choose (`field0` ..).
    pub fields: u64,
    /// Operations per second over all connections; 0: closed loop.
    pub rate: f64,
    pub duration: Duration,
    pub connections: usize,
}

/// What one run measured: latencies in microseconds from each operation's due time.
#[derive(Debug, Default)]
pub struct Outcome {
    pub reads: Vec<i64>,
    pub updates: Vec<i64>,
    /// Answers other than 200, and failed requests, with the first one's text.
    pub errors: usize,
    pub first_error: Option<String>,
    /// From the first due time to the last answer.
    pub elapsed: Duration,
    /// The most an operation started behind its due time.
    pub behind: Duration,
}

/// xorshift64*: the keys, the mix and the new field values (no dependency for a uniform draw).
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// 100 printable bytes.
    fn field_value(&mut self) -> String {
        (0..100)
            .map(|_| char::from(b'a' + (self.below(26) as u8)))
            .collect()
    }
}

/// Run `plan` against the sidecar at `endpoint`.
///
/// # Errors
/// A connection could not be opened (answers other than 200 are counted, not returned).
pub async fn run(endpoint: &Endpoint, plan: &Plan) -> Result<Outcome, LoadError> {
    let connections = plan.connections.max(1);
    let start = Instant::now() + Duration::from_millis(200);
    let mut tasks = Vec::with_capacity(connections);
    for c in 0..connections {
        let tcp = TcpStream::connect(endpoint.addr).await?;
        tcp.set_nodelay(true)?;
        let sender = listen::http1(tcp).await?;
        tasks.push(tokio::spawn(connection_loop(
            endpoint.clone(),
            plan.clone(),
            sender,
            c,
            start,
        )));
    }
    let mut outcome = Outcome::default();
    for t in tasks {
        let part = t.await.map_err(|e| LoadError::Task(e.to_string()))??;
        outcome.reads.extend(part.reads);
        outcome.updates.extend(part.updates);
        outcome.errors += part.errors;
        if outcome.first_error.is_none() {
            outcome.first_error = part.first_error;
        }
        outcome.behind = outcome.behind.max(part.behind);
    }
    outcome.elapsed = start.elapsed();
    Ok(outcome)
}

async fn connection_loop(
    endpoint: Endpoint,
    plan: Plan,
    mut sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    index: usize,
    start: Instant,
) -> Result<Outcome, LoadError> {
    let connections = plan.connections.max(1) as u64;
    let mut draw = Draw(0x9e37_79b9_7f4a_7c15 ^ ((index as u64 + 1) << 17));
    let mut outcome = Outcome::default();
    let end = start + plan.duration;
    let base = format!(
        "/v1/databases/{}/documents/{}/user",
        endpoint.database, plan.collection
    );
    let mut op: u64 = index as u64;
    loop {
        let due = if plan.rate > 0.0 {
            start + Duration::from_secs_f64(op as f64 / plan.rate)
        } else {
            Instant::now().max(start)
        };
        if due >= end {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        let sent = Instant::now();
        outcome.behind = outcome.behind.max(sent.saturating_duration_since(due));
        let key = draw.below(plan.records);
        let read = draw.below(100) < plan.workload.read_percent();
        let request = if read {
            Request::get(format!("{base}{key}")).body(Full::new(Bytes::new()))
        } else {
            let field = draw.below(plan.fields);
            let body = format!(r#"{{"field{field}": "{}"}}"#, draw.field_value());
            Request::builder()
                .method(Method::PATCH)
                .uri(format!("{base}{key}"))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body)))
        };
        let request = request.map_err(LoadError::http).map(|mut r| {
            if let Ok(host) = endpoint.addr.to_string().parse() {
                r.headers_mut().insert(header::HOST, host);
            }
            if let Ok(auth) = format!("Bearer {}", endpoint.token).parse() {
                r.headers_mut().insert(header::AUTHORIZATION, auth);
            }
            r
        })?;
        let answer = match sender.send_request(request).await {
            Ok(response) => {
                let status = response.status();
                match response.into_body().collect().await {
                    Ok(_) if status.is_success() => Ok(()),
                    Ok(body) => Err(format!(
                        "{status}: {}",
                        String::from_utf8_lossy(&body.to_bytes())
                    )),
                    Err(e) => Err(e.to_string()),
                }
            }
            Err(e) => Err(e.to_string()),
        };
        let done = Instant::now();
        let from = if plan.rate > 0.0 { due } else { sent };
        let latency = i64::try_from(done.duration_since(from).as_micros()).unwrap_or(i64::MAX);
        match answer {
            Ok(()) if read => outcome.reads.push(latency),
            Ok(()) => outcome.updates.push(latency),
            Err(e) => {
                outcome.errors += 1;
                if outcome.first_error.is_none() {
                    outcome.first_error = Some(e);
                }
                // A broken connection stays broken: stop this one rather than count a flood.
                if sender.ready().await.is_err() {
                    break;
                }
            }
        }
        op += connections;
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_uniform_enough_and_values_are_100_letters() {
        let mut d = Draw(7);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[d.below(10) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        let v = d.field_value();
        assert_eq!(v.len(), 100);
        assert!(v.bytes().all(|b| b.is_ascii_lowercase()));
    }

    #[test]
    fn the_mix_follows_the_workload() {
        assert_eq!(Workload::A.read_percent(), 50);
        assert_eq!(Workload::B.read_percent(), 95);
    }
}
