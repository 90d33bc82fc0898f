//! `docstore-loadgen`: opens `--streams` listen streams of `--targets` subscriptions each
//! against a running sidecar (one equality + order + limit query per city), over SSE or over
//! gRPC `Listen` (`--transport`, the same workload and report), writes at
//! `--rate` through Postgres (or only observes, for writes made by pgbench), matches each
//! write to the event that delivered it, and prints latencies, CPU and memory as a summary
//! and one Markdown row for BENCHMARKS.md. With `--trigger-listen` it also serves a write
//! triggers' endpoint and matches each write to its deliveries (`--streams 0`: deliveries
//! only). scripts/bench_live.sh runs the scenarios, scripts/bench_triggers.sh the triggers'.

mod clock;
mod endpoint;
mod grpc_listen;
mod listen;
mod procfs;
mod report;
mod write;
mod ycsb;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::sync::watch;

use listen::{Endpoint, Progress, TargetQuery};
use report::{Run, Sample};

/// Why a run failed.
#[derive(Debug)]
pub enum LoadError {
    Io(std::io::Error),
    Http(String),
    Pg(tokio_postgres::Error),
    Refused(String),
    Task(String),
    Setup(String),
}

impl LoadError {
    fn http(e: impl std::fmt::Display) -> LoadError {
        LoadError::Http(e.to_string())
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Io(e) => write!(f, "i/o: {e}"),
            LoadError::Http(e) => write!(f, "http: {e}"),
            LoadError::Pg(e) => write!(f, "postgres: {e}"),
            LoadError::Refused(e) => write!(f, "the sidecar refused a stream: {e}"),
            LoadError::Task(e) => write!(f, "a task failed: {e}"),
            LoadError::Setup(e) => write!(f, "{e}"),
        }
    }
}

impl From<std::io::Error> for LoadError {
    fn from(e: std::io::Error) -> LoadError {
        LoadError::Io(e)
    }
}

impl From<tokio_postgres::Error> for LoadError {
    fn from(e: tokio_postgres::Error) -> LoadError {
        LoadError::Pg(e)
    }
}

/// Load generator of pg_docstore's live queries.
#[derive(Debug, Clone, Parser)]
#[command(name = "docstore-loadgen", about, long_about = None)]
pub struct Args {
    /// The sidecar (`host:port`).
    #[arg(long, default_value = "127.0.0.1:8787")]
    sidecar: String,
    /// How the streams listen: `sse` (`:listen` on --sidecar) or `grpc` (Firestore's `Listen`
    /// on --grpc, one HTTP/2 connection per stream). Metrics are read over --sidecar either way.
    #[arg(long, value_enum, default_value_t = Transport::Sse)]
    transport: Transport,
    /// The sidecar's gRPC front end (`host:port`, its --grpc-listen), for `--transport grpc`.
    #[arg(long)]
    grpc: Option<String>,
    /// Bearer token of the streams (the sidecar's admin key, or a JWT).
    #[arg(long, env = "DOCSTORE_LOADGEN_TOKEN", hide_env_values = true)]
    token: String,
    /// Postgres the writes go to (the sidecar's database).
    #[arg(long, default_value = "postgresql://postgres@127.0.0.1:5433/docstore")]
    pg: String,
    /// Database id of the streams.
    #[arg(long, default_value = "(default)")]
    database: String,
    /// Collection of the queries and the writes.
    #[arg(long, default_value = "loadgen")]
    collection: String,
    /// SSE streams to open.
    #[arg(long, default_value_t = 10)]
    streams: usize,
    /// Subscriptions per stream (the sidecar takes at most 100 per request).
    #[arg(long, default_value_t = 100)]
    targets: usize,
    /// `limit` of each query (`where city = "cK" order by rating desc limit N`).
    #[arg(long, default_value_t = 10)]
    limit: usize,
    /// Writes per second; 0 only observes (writes made by someone else, e.g. pgbench).
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    /// Seconds of writing (or of observing, with --rate 0).
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Postgres connections the writes use.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Cities written to (default: one per subscription; more leaves writes no one sees).
    #[arg(long)]
    cities: Option<usize>,
    /// Filler bytes per written document.
    #[arg(long, default_value_t = 200)]
    pad: usize,
    /// Seconds to keep reading after the last write at most: reading stops earlier once every
    /// write was delivered (with --rate 0, reading goes on this long).
    #[arg(long, default_value_t = 30)]
    drain_seconds: u64,
    /// Seconds to wait for every subscription's first snapshot.
    #[arg(long, default_value_t = 180)]
    ready_timeout: u64,
    /// The sidecar's pid: its CPU and RSS are reported.
    #[arg(long)]
    sidecar_pid: Option<u32>,
    /// The postmaster's pid: CPU of it and its children (the backends) is reported.
    #[arg(long)]
    postmaster_pid: Option<u32>,
    /// Touch this file once every subscription is live (for scripts that then start pgbench).
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Serve a write triggers' endpoint here (`host:port`) and report its deliveries.
    #[arg(long)]
    trigger_listen: Option<String>,
    /// Triggers matching every write (deliveries expected per write at the endpoint).
    #[arg(long, default_value_t = 1)]
    triggers: usize,
    /// Fan-out (the Firestore paper's Fig. 9): every subscription follows city c0 and every
    /// write goes to it, so each write is delivered to every stream; the report adds latency
    /// to every listener and, per write, to the last one.
    #[arg(long)]
    fanout: bool,
    /// Open the SSE streams from this many loopback addresses (127.0.0.1, 127.0.0.2, ..., round
    /// robin), for more connections than one source address has ephemeral ports.
    #[arg(long, default_value_t = 1)]
    source_ips: u8,
    /// gRPC Listen streams per HTTP/2 connection (`--transport grpc`; 1: a connection each).
    #[arg(long, default_value_t = 1)]
    streams_per_connection: usize,
    /// Streams waiting for their first snapshot at most (0: open every stream at once): a ramp
    /// for tens of thousands of listeners, whose initial reads queue for the sidecar's pool.
    #[arg(long, default_value_t = 0)]
    open_concurrency: usize,
    /// Run a YCSB core workload over HTTP instead of listen streams (scripts/bench_ycsb.sh
    /// loads the records): `--rate` operations per second (0: closed loop) over
    /// `--connections` HTTP connections for `--seconds`.
    #[arg(long, value_enum)]
    ycsb: Option<ycsb::Workload>,
    /// Records of the YCSB run (`{collection}/user0` ..).
    #[arg(long, default_value_t = 10_000)]
    records: u64,
    /// Fields per YCSB record an update chooses from (`field0` ..).
    #[arg(long, default_value_t = 9)]
    fields: u64,
    /// Write this run's own writes (`W <path>`) and every delivery with a commit time
    /// (`D <path> <commitTime -> received, us>`) to this file: scripts/bench_live.sh merges
    /// the files of several loadgens (each under the per-process file limit) into the fan-out
    /// to the last listener of all (`fanout-cluster`).
    #[arg(long)]
    deliveries_out: Option<PathBuf>,
    /// With `--rate 0`: stop observing once this file exists (the writing loadgen is done),
    /// or after `--seconds`, whichever comes first.
    #[arg(long)]
    stop_file: Option<PathBuf>,
    /// Label of the Markdown row.
    #[arg(long, default_value = "run")]
    label: String,
}

/// The protocol of the listen streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    Sse,
    Grpc,
}

fn sidecar_addr(text: &str) -> Result<SocketAddr, LoadError> {
    text.to_socket_addrs()?
        .next()
        .ok_or_else(|| LoadError::Setup(format!("{text} resolves to no address")))
}

fn queries(args: &Args) -> Vec<Vec<TargetQuery>> {
    (0..args.streams)
        .map(|s| {
            (0..args.targets)
                .map(|t| {
                    let city = if args.fanout { 0 } else { s * args.targets + t };
                    TargetQuery {
                        id: format!("c{city}"),
                        sql: format!(
                            "select * from /{} where city = \"c{city}\" order by rating desc limit {}",
                            args.collection, args.limit
                        ),
                    }
                })
                .collect()
        })
        .collect()
}

/// A stream's subscriptions as gRPC targets: ids 1, 2, ... (per stream), the same cities'
/// queries.
fn grpc_targets(args: &Args, targets: &[TargetQuery]) -> Vec<grpc_listen::GrpcTarget> {
    (1..)
        .zip(targets)
        .map(|(id, t)| grpc_listen::GrpcTarget {
            id,
            query: grpc_listen::city_query(&args.collection, &t.id, args.limit),
        })
        .collect()
}

async fn run(args: Args) -> Result<(), LoadError> {
    let endpoint = Endpoint {
        addr: sidecar_addr(&args.sidecar)?,
        grpc: args.grpc.as_deref().map(sidecar_addr).transpose()?,
        database: args.database.clone(),
        token: args.token.clone(),
    };
    if args.fanout && args.targets != 1 {
        return Err(LoadError::Setup(
            "--fanout follows one city: use --targets 1 (and --streams for the listeners)".into(),
        ));
    }
    if let Some(workload) = args.ycsb {
        return run_ycsb(&args, &endpoint, workload).await;
    }
    let subscriptions = args.streams * args.targets;
    let triggers = match &args.trigger_listen {
        Some(addr) => Some(endpoint::serve(sidecar_addr(addr)?).await?),
        None => None,
    };
    let before = Sample::take(&args, &endpoint).await;
    let progress = Arc::new(Progress::default());
    let run_id = format!("r{}", clock::now_micros());
    let tag: Arc<str> = Arc::from(format!("/{run_id}-"));
    let (stop_tx, stop_rx) = watch::channel(false);
    let opened = Instant::now();
    let mut streams = Vec::new();
    let mut channel = None;
    for (s, targets) in queries(&args).into_iter().enumerate() {
        if args.open_concurrency > 0 {
            let window = args.open_concurrency * args.targets;
            while s * args.targets >= progress.live.load(Ordering::Relaxed) + window {
                if streams
                    .iter()
                    .any(|t: &tokio::task::JoinHandle<_>| t.is_finished())
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        let source = std::net::IpAddr::from([
            127,
            0,
            0,
            1 + (s % usize::from(args.source_ips.max(1))) as u8,
        ]);
        let shared = if args.transport == Transport::Grpc && args.streams_per_connection > 1 {
            if s % args.streams_per_connection == 0 {
                channel = Some(grpc_listen::connect(&endpoint).await?);
            }
            channel.clone()
        } else {
            None
        };
        streams.push(match args.transport {
            Transport::Sse => tokio::spawn(listen::run_stream(
                endpoint.clone(),
                source,
                targets,
                progress.clone(),
                tag.clone(),
                stop_rx.clone(),
            )),
            Transport::Grpc => tokio::spawn(grpc_listen::run_stream(
                endpoint.clone(),
                grpc_targets(&args, &targets),
                progress.clone(),
                tag.clone(),
                stop_rx.clone(),
                shared,
            )),
        });
    }
    let deadline = Instant::now() + Duration::from_secs(args.ready_timeout);
    while progress.live.load(Ordering::Relaxed) < subscriptions {
        if Instant::now() > deadline || streams.iter().any(|s| s.is_finished()) {
            let _ = stop_tx.send(true);
            for s in streams {
                if let Ok(Err(e)) = s.await {
                    return Err(e);
                }
            }
            return Err(LoadError::Setup(format!(
                "only {} of {subscriptions} subscriptions got their snapshot",
                progress.live.load(Ordering::Relaxed)
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let subscribe_time = opened.elapsed();
    // Let the snapshots' allocations settle before the memory sample.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let subscribed = Sample::take(&args, &endpoint).await;
    if let Some(path) = &args.ready_file {
        std::fs::write(path, b"ready\n")?;
    }
    let started_us = clock::now_micros();
    let (writes, clients) = if args.rate > 0.0 {
        write::run(write::WritePlan {
            pg_url: args.pg.clone(),
            collection: args.collection.clone(),
            run: run_id.clone(),
            rate: args.rate,
            duration: Duration::from_secs(args.seconds),
            connections: args.connections,
            cities: if args.fanout {
                1
            } else {
                args.cities.unwrap_or(subscriptions)
            },
            pad: args.pad,
        })
        .await?
    } else {
        let until = Instant::now() + Duration::from_secs(args.seconds);
        while Instant::now() < until && !args.stop_file.as_ref().is_some_and(|f| f.exists()) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (Vec::new(), Vec::new())
    };
    let ended_us = clock::now_micros();
    let loaded = Sample::take(&args, &endpoint).await;
    drop(clients);
    let drain_deadline = Instant::now() + Duration::from_secs(args.drain_seconds);
    // Every write once per subscription in a fan-out, else once.
    let per_write = if args.fanout { subscriptions } else { 1 };
    while Instant::now() < drain_deadline
        && (writes.is_empty()
            || (args.streams > 0
                && progress.delivered.load(Ordering::Relaxed) < writes.len() * per_write)
            || triggers
                .as_ref()
                .is_some_and(|t| t.count() < writes.len() * args.triggers))
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let drain_time = loaded.at.elapsed();
    let drained = Sample::take(&args, &endpoint).await;
    let _ = stop_tx.send(true);
    let mut logs = Vec::new();
    for s in streams {
        logs.push(s.await.map_err(|e| LoadError::Task(e.to_string()))??);
    }
    if let Some(recorder) = &triggers {
        let (lines, row) = endpoint::report(
            &args.label,
            &format!(
                "{:.0} -> {:.0}",
                args.rate,
                writes.len() as f64 / ((ended_us - started_us) as f64 / 1e6).max(1e-3)
            ),
            &writes,
            args.triggers,
            &recorder.take(),
            started_us,
        );
        println!("== write triggers' endpoint {}", args.label);
        for line in lines {
            println!("{line}");
        }
        println!(
            "{row} {} | {:.1} |",
            report::cpu_cells(&subscribed, &loaded),
            drain_time.as_secs_f64()
        );
        if args.streams == 0 {
            return Ok(());
        }
    }
    if let Some(path) = &args.deliveries_out {
        report::write_deliveries(path, &writes, &logs)?;
    }
    let run = Run {
        args: &args,
        subscriptions,
        subscribe_time,
        drain_time,
        started_us,
        ended_us,
        writes,
        logs,
        samples: [before, subscribed, loaded, drained],
    };
    run.print();
    Ok(())
}

/// `--ycsb`: one run of the workload, its summary and a `YCSB` row for BENCHMARKS.md.
async fn run_ycsb(
    args: &Args,
    endpoint: &Endpoint,
    workload: ycsb::Workload,
) -> Result<(), LoadError> {
    let plan = ycsb::Plan {
        workload,
        collection: args.collection.clone(),
        records: args.records,
        fields: args.fields,
        rate: args.rate,
        duration: Duration::from_secs(args.seconds),
        connections: args.connections,
    };
    let before = Sample::take(args, endpoint).await;
    let outcome = ycsb::run(endpoint, &plan).await?;
    let after = Sample::take(args, endpoint).await;
    let ops = outcome.reads.len() + outcome.updates.len();
    let done = ops as f64 / outcome.elapsed.as_secs_f64().max(1e-9);
    let asked = if args.rate > 0.0 {
        format!("{:.0}", args.rate)
    } else {
        "max".to_owned()
    };
    let reads = report::quantile_summary(outcome.reads.clone());
    let updates = report::quantile_summary(outcome.updates.clone());
    println!("== docstore-loadgen {} (YCSB {workload:?})", args.label);
    println!(
        "operations           {ops} in {:.1} s: {done:.0}/s of {asked} asked ({} reads, {} updates, {} errors; at most {:.1} ms behind schedule) over {} connections",
        outcome.elapsed.as_secs_f64(),
        outcome.reads.len(),
        outcome.updates.len(),
        outcome.errors,
        outcome.behind.as_secs_f64() * 1000.0,
        args.connections
    );
    if let Some(e) = &outcome.first_error {
        println!("first error          {e}");
    }
    println!("read   p50 / p99 / max  {reads} ms (from the due time)");
    println!("update p50 / p99 / max  {updates} ms (from the due time)");
    let quantiles = |v: &[i64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        let q = |x| {
            report::quantile(&v, x).map_or("-".to_owned(), |u| format!("{:.2}", u as f64 / 1000.0))
        };
        (q(0.5), q(0.99))
    };
    let (r50, r99) = quantiles(&outcome.reads);
    let (u50, u99) = quantiles(&outcome.updates);
    println!(
        "YCSB | {} | {workload:?} | {asked} | {done:.0} | {r50} | {r99} | {u50} | {u99} | {} | {} |",
        args.label,
        outcome.errors,
        report::cpu_cells(&before, &after)
    );
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("docstore-loadgen: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
