//! Load generator of the gRPC front end against the HTTP API (issue 26): N concurrent clients
//! for S seconds each send one kind of call, one at a time, and the run prints its rate and
//! latency percentiles. The same program drives both transports so that the client's own cost
//! is alike on both sides (tonic's client over HTTP/2 for gRPC, hyper's HTTP/1 client for HTTP,
//! one connection per client either way by default, as wrk opens them). `--grpc-connections
//! N` spreads the gRPC clients over N HTTP/2 connections instead (1: every call multiplexed on
//! one connection, as one SDK client object does).
//!
//! Kinds: `grpc-get` (GetDocument of a random one of `bench/d1..d{docs}`), `grpc-batch`
//! (BatchGetDocuments of 10 consecutive ones), `grpc-commit` (Commit of one set of the ~1 KB
//! document `--doc` to a random id of `bench_grpc_commit`), and `http-get`, `http-batch`
//! (`:batchGet`), `http-commit` (`:commit`) doing the same over HTTP.
//!
//! Output, one line: `<calls/s> <p50 ms> <p99 ms> <errors> <calls>`. Every client first makes
//! one call that must succeed (a benchmark of errors is worthless): a failure there ends the run
//! with its message.
//!
//! Run (scripts/bench_grpc.sh does): `cargo bench -p docstore-sidecar --bench grpc_load --
//! --kind grpc-get --grpc 127.0.0.1:9787 --http 127.0.0.1:8787 --token KEY --doc JSON`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use googleapis_tonic_google_firestore_v1::google::firestore::v1::firestore_client::FirestoreClient;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

const DATABASE: &str = "projects/bench/databases/(default)";
/// Documents in one BatchGetDocuments / `:batchGet`.
const BATCH: u64 = 10;
/// Distinct commit bodies prepared per client (sent in turn), so that building a body is not
/// measured.
const BODIES: usize = 200;

#[derive(Parser, Debug)]
struct Args {
    /// grpc-get, grpc-batch, grpc-commit, http-get, http-batch or http-commit.
    #[arg(long)]
    kind: String,
    /// The gRPC front end's address.
    #[arg(long)]
    grpc: SocketAddr,
    /// The HTTP API's address.
    #[arg(long)]
    http: SocketAddr,
    /// Bearer token (the admin key or a JWT).
    #[arg(long)]
    token: String,
    /// The document written by commits: JSON with the placeholders `:r :c :t :a :p` of
    /// scripts/bench_lib.sh's `BENCH_DOC`, replaced by random numbers per body.
    #[arg(long)]
    doc: String,
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// HTTP/2 connections the gRPC clients share, round robin (0: one per client).
    #[arg(long, default_value_t = 0)]
    grpc_connections: usize,
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Documents `bench/d1..` that exist.
    #[arg(long, default_value_t = 1000)]
    docs: u64,
    /// Worker threads of the client's runtime.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// One client's measurements: latencies in microseconds of successful calls, failed calls.
#[derive(Default)]
struct Tally {
    micros: Vec<u32>,
    errors: u64,
}

/// Tiny xorshift: a random document per call without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("grpc_load: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("grpc_load: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<String, String> {
    let args = std::sync::Arc::new(args);
    let connections = match args.grpc_connections {
        0 => args.clients,
        n => n.min(args.clients),
    };
    let mut channels = Vec::new();
    if args.kind.starts_with("grpc-") {
        for _ in 0..connections {
            channels.push(connect(&args).await?);
        }
    }
    let mut clients = Vec::new();
    for i in 0..args.clients {
        let channel = channels.get(i % connections.max(1)).cloned();
        let client = Client::open(&args, i as u64, channel).await?;
        clients.push(client);
    }
    // Every client's first call must succeed.
    for client in &mut clients {
        client.call().await?;
    }
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|mut client| {
            tokio::spawn(async move {
                let mut tally = Tally::default();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    match client.call().await {
                        Ok(()) => tally
                            .micros
                            .push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX)),
                        Err(_) => tally.errors += 1,
                    }
                }
                tally
            })
        })
        .collect();
    let mut micros = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let tally = task
            .await
            .map_err(|e| format!("a client task failed: {e}"))?;
        micros.extend(tally.micros);
        errors += tally.errors;
    }
    let elapsed = started.elapsed().as_secs_f64();
    micros.sort_unstable();
    let pct = |p: f64| {
        let at = ((micros.len() as f64 * p).ceil() as usize).clamp(1, micros.len().max(1)) - 1;
        micros.get(at).map_or(0.0, |m| f64::from(*m) / 1000.0)
    };
    Ok(format!(
        "{:.0} {:.2} {:.2} {} {}",
        micros.len() as f64 / elapsed,
        pct(0.50),
        pct(0.99),
        errors,
        micros.len()
    ))
}

/// One client: its connection and the calls it sends.
struct Client {
    kind: Kind,
    rng: Rng,
    docs: u64,
    token: MetadataValue<tonic::metadata::Ascii>,
    authorization: String,
    host: String,
    grpc: Option<FirestoreClient<Channel>>,
    http: Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
    commits: Vec<wire::CommitRequest>,
    bodies: Vec<Bytes>,
    next: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    GrpcGet,
    GrpcBatch,
    GrpcCommit,
    HttpGet,
    HttpBatch,
    HttpCommit,
}

impl Client {
    async fn open(args: &Args, seed: u64, channel: Option<Channel>) -> Result<Client, String> {
        let kind = match args.kind.as_str() {
            "grpc-get" => Kind::GrpcGet,
            "grpc-batch" => Kind::GrpcBatch,
            "grpc-commit" => Kind::GrpcCommit,
            "http-get" => Kind::HttpGet,
            "http-batch" => Kind::HttpBatch,
            "http-commit" => Kind::HttpCommit,
            other => return Err(format!("unknown kind {other}")),
        };
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (seed.wrapping_add(1) << 20) ^ now_nanos());
        let grpc_side = matches!(kind, Kind::GrpcGet | Kind::GrpcBatch | Kind::GrpcCommit);
        let mut commits = Vec::new();
        let mut bodies = Vec::new();
        if matches!(kind, Kind::GrpcCommit | Kind::HttpCommit) {
            for _ in 0..BODIES {
                let r = rng.below(1_000_000) + 1;
                let data = fill(&args.doc, r, &mut rng)?;
                if kind == Kind::GrpcCommit {
                    commits.push(commit_request(r, &data));
                } else {
                    let body = serde_json::json!({
                        "writes": [{"set": format!("bench_http_commit/d{r}"), "data": data}]
                    });
                    bodies.push(Bytes::from(body.to_string()));
                }
            }
        }
        let token = MetadataValue::try_from(format!("Bearer {}", args.token))
            .map_err(|e| format!("--token is not ASCII: {e}"))?;
        let (grpc, http) = if grpc_side {
            let channel = channel.ok_or("no gRPC connection")?;
            (Some(FirestoreClient::new(channel)), None)
        } else {
            let stream = tokio::net::TcpStream::connect(args.http)
                .await
                .map_err(|e| format!("HTTP connect to {}: {e}", args.http))?;
            stream.set_nodelay(true).map_err(|e| e.to_string())?;
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| format!("HTTP handshake: {e}"))?;
            tokio::spawn(connection);
            (None, Some(sender))
        };
        Ok(Client {
            kind,
            rng,
            docs: args.docs,
            token,
            authorization: format!("Bearer {}", args.token),
            host: args.http.to_string(),
            grpc,
            http,
            commits,
            bodies,
            next: 0,
        })
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        let m = request.metadata_mut();
        m.insert("authorization", self.token.clone());
        m.insert(
            "google-cloud-resource-prefix",
            MetadataValue::from_static(DATABASE),
        );
        request
    }

    async fn call(&mut self) -> Result<(), String> {
        let first = self.rng.below(self.docs.saturating_sub(BATCH - 1)) + 1;
        self.next = (self.next + 1) % BODIES;
        match self.kind {
            Kind::GrpcGet => {
                let request = self.request(wire::GetDocumentRequest {
                    name: format!("{DATABASE}/documents/bench/d{first}"),
                    ..Default::default()
                });
                let client = self.grpc.as_mut().ok_or("no channel")?;
                client
                    .get_document(request)
                    .await
                    .map(drop)
                    .map_err(|e| format!("GetDocument: {e}"))
            }
            Kind::GrpcBatch => {
                let request = self.request(wire::BatchGetDocumentsRequest {
                    database: DATABASE.to_owned(),
                    documents: (first..first + BATCH)
                        .map(|i| format!("{DATABASE}/documents/bench/d{i}"))
                        .collect(),
                    ..Default::default()
                });
                let client = self.grpc.as_mut().ok_or("no channel")?;
                let mut stream = client
                    .batch_get_documents(request)
                    .await
                    .map_err(|e| format!("BatchGetDocuments: {e}"))?
                    .into_inner();
                let mut found = 0;
                while let Some(item) = stream
                    .message()
                    .await
                    .map_err(|e| format!("BatchGetDocuments: {e}"))?
                {
                    if matches!(
                        item.result,
                        Some(wire::batch_get_documents_response::Result::Found(_))
                    ) {
                        found += 1;
                    }
                }
                if found == BATCH {
                    Ok(())
                } else {
                    Err(format!("BatchGetDocuments found {found} of {BATCH}"))
                }
            }
            Kind::GrpcCommit => {
                let message = self.commits.get(self.next).cloned().ok_or("no bodies")?;
                let request = self.request(message);
                let client = self.grpc.as_mut().ok_or("no channel")?;
                client
                    .commit(request)
                    .await
                    .map(drop)
                    .map_err(|e| format!("Commit: {e}"))
            }
            Kind::HttpGet => {
                let uri = format!("/v1/databases/(default)/documents/bench/d{first}");
                self.http_call("GET", &uri, Bytes::new()).await
            }
            Kind::HttpBatch => {
                let paths: Vec<String> = (first..first + BATCH)
                    .map(|i| format!("bench/d{i}"))
                    .collect();
                let body = serde_json::json!({ "documents": paths }).to_string();
                self.http_call(
                    "POST",
                    "/v1/databases/(default):batchGet",
                    Bytes::from(body),
                )
                .await
            }
            Kind::HttpCommit => {
                let body = self.bodies.get(self.next).cloned().ok_or("no bodies")?;
                self.http_call("POST", "/v1/databases/(default):commit", body)
                    .await
            }
        }
    }

    async fn http_call(&mut self, method: &str, uri: &str, body: Bytes) -> Result<(), String> {
        let request = hyper::Request::builder()
            .method(method)
            .uri(uri)
            .header("host", &self.host)
            .header("authorization", &self.authorization)
            .header("content-type", "application/json")
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        let sender = self.http.as_mut().ok_or("no connection")?;
        sender.ready().await.map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        if status.is_success() {
            Ok(())
        } else {
            Err(format!(
                "{method} {uri}: {status} {}",
                String::from_utf8_lossy(&body)
            ))
        }
    }
}

/// One HTTP/2 connection to the gRPC front end.
async fn connect(args: &Args) -> Result<Channel, String> {
    Channel::from_shared(format!("http://{}", args.grpc))
        .map_err(|e| e.to_string())?
        .tcp_nodelay(true)
        .connect()
        .await
        .map_err(|e| format!("gRPC connect to {}: {e}", args.grpc))
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// The document of the template `doc` (scripts/bench_lib.sh's `BENCH_DOC`): `:r` replaced by
/// `r`, `:c`, `:t`, `:a`, `:p` by random numbers in the ranges of that script's create workload.
fn fill(doc: &str, r: u64, rng: &mut Rng) -> Result<serde_json::Value, String> {
    let text = doc
        .replace(":r", &r.to_string())
        .replace(":c", &(rng.below(100) + 1).to_string())
        .replace(":t", &(rng.below(20) + 1).to_string())
        .replace(":a", &(rng.below(4) + 1).to_string())
        .replace(":p", &(rng.below(4) + 1).to_string());
    serde_json::from_str(&text).map_err(|e| format!("--doc once filled is not JSON: {e}"))
}

/// A Commit of one set (an update without mask) of `data` to `bench_grpc_commit/d{r}`.
fn commit_request(r: u64, data: &serde_json::Value) -> wire::CommitRequest {
    let fields = match to_wire(data).value_type {
        Some(wire::value::ValueType::MapValue(map)) => map.fields,
        _ => HashMap::new(),
    };
    wire::CommitRequest {
        database: DATABASE.to_owned(),
        writes: vec![wire::Write {
            operation: Some(wire::write::Operation::Update(wire::Document {
                name: format!("{DATABASE}/documents/bench_grpc_commit/d{r}"),
                fields,
                ..Default::default()
            })),
            ..Default::default()
        }],
        transaction: Vec::new(),
    }
}

/// Plain JSON as Firestore's `Value` (integers as integerValue, other numbers as doubleValue).
fn to_wire(json: &serde_json::Value) -> wire::Value {
    use wire::value::ValueType;
    let value_type = match json {
        serde_json::Value::Null => ValueType::NullValue(0),
        serde_json::Value::Bool(b) => ValueType::BooleanValue(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => ValueType::IntegerValue(i),
            None => ValueType::DoubleValue(n.as_f64().unwrap_or(0.0)),
        },
        serde_json::Value::String(s) => ValueType::StringValue(s.clone()),
        serde_json::Value::Array(items) => ValueType::ArrayValue(wire::ArrayValue {
            values: items.iter().map(to_wire).collect(),
        }),
        serde_json::Value::Object(map) => ValueType::MapValue(wire::MapValue {
            fields: map.iter().map(|(k, v)| (k.clone(), to_wire(v))).collect(),
        }),
    };
    wire::Value {
        value_type: Some(value_type),
    }
}
