//! `docstore-sidecar`: see the crate documentation of `docstore_sidecar`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use docstore_sidecar::changelog::Limits;
use docstore_sidecar::config::{Config, Matching, Role};
use docstore_sidecar::grpc;
use docstore_sidecar::http::origin::{CorsPolicy, HostPolicy};
use docstore_sidecar::http::server::ServerLimits;
use docstore_sidecar::http::{self, AppState};
use docstore_sidecar::matcher::MatcherConfig;
use docstore_sidecar::pg::{preflight, Db};
use docstore_sidecar::service::caller::Verifier;
use docstore_sidecar::service::transactions::{Limits as TransactionLimits, Transactions};
use docstore_sidecar::service::Service;
use docstore_sidecar::session::{Feed, Session, Settings, StreamCaps};
use docstore_sidecar::source::jetstream::{RoleHealth, StreamSettings};
use docstore_sidecar::source::SourceHealth;
use tikv_jemallocator::Jemalloc;
use tracing_subscriber::EnvFilter;

/// The allocator of the sidecar: jemalloc. With glibc's malloc a write fanned out to 10,000
/// listeners spent about a quarter of the sidecar's CPU in malloc and free, and each listener
/// held 26 KiB against jemalloc's 20; mimalloc was as fast but held more (BENCHMARKS.md, "The
/// allocator").
#[global_allocator]
static GLOBAL: Jemalloc = Jemalloc;

fn main() -> ExitCode {
    let config = Config::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the tokio runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config) -> Result<(), String> {
    config.check()?;
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => {
            Some(http::tls::ServerTls::load(cert, key).map_err(|e| format!("cannot start: {e}"))?)
        }
        _ => None,
    };
    let verifier = Verifier::start(&config).await?;
    let db = Db::connect_with_timeout(
        &config.database_url,
        config.pool_size,
        config.shared_connections,
        Duration::from_millis(config.statement_timeout_ms),
    )?;
    let metrics = http::metrics::install().map_err(|e| format!("metrics recorder: {e}"))?;
    let upkeep = metrics.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    // A gateway reads no slot: the start-up facts of the live path are the ingest's.
    let reads_slot = matches!(config.role, Role::All | Role::Ingest);
    let slot_checks = config.live && reads_slot;
    match preflight::check(&db, &config.slot, slot_checks).await {
        Ok(()) => {}
        Err(preflight::Failure::Permanent(cause)) => return Err(format!("cannot start: {cause}")),
        Err(preflight::Failure::Transient(e)) => {
            tracing::warn!(error = %e, "the database does not answer yet; /healthz says 503 until it does");
        }
    }
    // The NATS side of a role: a cause a retry cannot fix ends start-up here too.
    if let (true, Some(url)) = (config.role != Role::All, &config.nats_url) {
        match docstore_sidecar::source::jetstream::preflight(url, &config.nats_stream).await {
            Ok(()) => {}
            Err(failure) if failure.permanent => return Err(format!("cannot start: {failure}")),
            Err(failure) => {
                tracing::warn!("{failure}; /healthz says 503 until it answers");
            }
        }
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    tracing::info!(listen = %config.listen, tls = tls.is_some(), "docstore-sidecar is serving");
    let role = (config.role != Role::All).then(RoleHealth::new);
    let nats_url = config.nats_url.clone().unwrap_or_default();
    let session = if config.live {
        let mut consumers = Vec::new();
        // Write triggers run where the slot is read: never in a gateway.
        if config.triggers && reads_slot {
            consumers.push(docstore_sidecar::triggers::start(
                &db,
                docstore_sidecar::triggers::Settings {
                    parallel: config.trigger_parallel.max(1),
                    attempts: config.trigger_attempts.max(1),
                    timeout: Duration::from_millis(config.trigger_timeout_ms.max(1)),
                    backoff_first: Duration::from_millis(config.trigger_backoff_ms),
                    backoff_max: Duration::from_millis(config.trigger_backoff_max_ms),
                    max_depth: config.trigger_max_depth,
                },
            )?);
        }
        let postgres = docstore_sidecar::pg::tls::Postgres::parse(&config.database_url)?;
        if reads_slot {
            postgres.check_replication()?;
        }
        if config.role == Role::Ingest {
            let source_health = SourceHealth::new();
            tokio::spawn(docstore_sidecar::ingest::run(
                docstore_sidecar::ingest::Settings {
                    postgres,
                    slot: config.slot.clone(),
                    nats_url: nats_url.clone(),
                    stream: config.nats_stream.clone(),
                    health: role.clone().unwrap_or_default(),
                    source_health: source_health.clone(),
                },
                consumers,
            ));
            return serve(
                config,
                db,
                verifier,
                Live::Ingest(source_health),
                role,
                metrics,
                Listening { listener, tls },
            )
            .await;
        }
        let remote = config.role == Role::Gateway && config.matching == Matching::Remote;
        // The changelog keeps what a resume within the grace may need.
        let limits = Limits::for_grace(Duration::from_secs(config.listen_grace_seconds));
        let feed = match &role {
            Some(health) => Feed::JetStream(StreamSettings {
                url: nats_url.clone(),
                stream: config.nats_stream.clone(),
                health: health.clone(),
                // A matcher keeps what a resume from before its start needs.
                history: (config.role == Role::Matcher).then_some(limits.keep),
            }),
            None => Feed::Slot,
        };
        // With NATS, the listen streams are registered there: a client resuming on another
        // process (another gateway) is adopted (docs/listen.md, "Resuming on another process").
        let registry = match &config.nats_url {
            Some(url) => Some(
                docstore_sidecar::session::registry::Registry::connect(url)
                    .await
                    .map_err(|e| {
                        format!(
                            "cannot start: --nats-url {}: {e}",
                            docstore_sidecar::source::jetstream::redact_url(url)
                        )
                    })?,
            ),
            None => None,
        };
        if let (true, Some(registry)) = (remote, &registry) {
            // No hub here: the matchers run the streams (docs/architecture.md, "Processes").
            let relay = docstore_sidecar::session::relay::Relay::start(
                &nats_url,
                role.clone().unwrap_or_default(),
                registry.clone(),
                config.listen_queue,
                Duration::from_millis(config.heartbeat_ms.max(10)),
            )
            .await
            .map_err(|e| format!("cannot start: --matching remote: {e}"))?;
            let session = Session::remote(db.clone(), relay);
            return serve(
                config,
                db,
                verifier,
                Live::Session(Box::new(session)),
                role,
                metrics,
                Listening { listener, tls },
            )
            .await;
        }
        let session = Session::start_with(
            db.clone(),
            Settings {
                postgres,
                slot: config.slot.clone(),
                heartbeat: Duration::from_millis(config.heartbeat_ms.max(10)),
                grace: Duration::from_secs(config.listen_grace_seconds),
                queue: config.listen_queue,
                replay: config.listen_replay,
                replay_bytes: config.listen_replay_bytes,
                limits,
                matcher: MatcherConfig {
                    write_partitions: config.match_write_partitions,
                    query_partitions: config.match_query_partitions,
                    ..MatcherConfig::default()
                },
                caps: StreamCaps {
                    streams: config.max_streams,
                    per_caller: config.max_streams_per_caller,
                    targets: config.max_targets_per_stream,
                },
            },
            consumers,
            feed,
            registry,
        );
        if config.role == Role::Matcher {
            let client = docstore_sidecar::source::jetstream::connect(
                &nats_url,
                role.clone().unwrap_or_default(),
                "docstore_matcher_nats_reconnects_total",
            )
            .await
            .map_err(|e| format!("cannot start: --nats-url: {e}"))?;
            let js = async_nats::jetstream::new(client.clone());
            let presence = docstore_sidecar::session::presence::bucket;
            let matchers = presence(&js, docstore_sidecar::session::presence::MATCHERS)
                .await
                .map_err(|e| format!("cannot start: {e}"))?;
            let gateways = presence(&js, docstore_sidecar::session::presence::GATEWAYS)
                .await
                .map_err(|e| format!("cannot start: {e}"))?;
            let serving = session.clone();
            tokio::spawn(async move {
                if let Err(e) =
                    docstore_sidecar::session::serve::serve(serving, client, matchers, gateways)
                        .await
                {
                    tracing::error!("{e}");
                }
            });
        }
        Some(session)
    } else {
        None
    };
    serve(
        config,
        db,
        verifier,
        session.map_or(Live::Off, |s| Live::Session(Box::new(s))),
        role,
        metrics,
        Listening { listener, tls },
    )
    .await
}

/// What reads the change stream in this process.
enum Live {
    /// `--live false`.
    Off,
    /// The hub (`--role all|gateway`).
    Session(Box<Session>),
    /// `--role ingest`: its slot's permanent failure cause, for `/healthz`.
    Ingest(SourceHealth),
}

/// The HTTP listener and the TLS of the listeners.
struct Listening {
    listener: tokio::net::TcpListener,
    tls: Option<http::tls::ServerTls>,
}

/// Serve the HTTP API (and the gRPC front end) until the process ends.
async fn serve(
    config: Config,
    db: Db,
    verifier: Verifier,
    live: Live,
    role: Option<RoleHealth>,
    metrics: metrics_exporter_prometheus::PrometheusHandle,
    Listening { listener, tls }: Listening,
) -> Result<(), String> {
    let acceptor = |alpn: &[&[u8]]| -> Result<_, String> {
        tls.as_ref().map(|tls| tls.acceptor(alpn)).transpose()
    };
    let transactions = Arc::new(Transactions::new(TransactionLimits {
        idle: Duration::from_secs(config.transaction_idle_seconds),
        lifetime: Duration::from_secs(config.transaction_lifetime_seconds),
        lock_timeout: Duration::from_millis(config.transaction_lock_timeout_ms),
        per_caller: config.max_transactions_per_caller,
        total: config
            .max_transactions
            .unwrap_or(TransactionLimits::for_pool(config.pool_size).total),
    }));
    transactions.spawn_reaper();
    let (session, source) = match live {
        Live::Off => (None, None),
        Live::Session(session) => (Some(*session), None),
        Live::Ingest(health) => (None, Some(health)),
    };
    let state = Arc::new(AppState {
        service: Arc::new(Service {
            db,
            verifier,
            session,
            transactions,
        }),
        max_body_bytes: config.max_body_bytes,
        query_write_timeout: (config.query_write_timeout_ms > 0)
            .then(|| std::time::Duration::from_millis(config.query_write_timeout_ms)),
        metrics: Some(metrics),
        role,
        source,
    });
    let exposure = http::Exposure {
        limits: ServerLimits {
            header_timeout: Duration::from_millis(config.header_timeout_ms.max(1)),
            body_timeout: Duration::from_millis(config.body_timeout_ms.max(1)),
            idle_timeout: Duration::from_millis(config.idle_timeout_ms.max(1)),
            max_connections: config.max_connections,
            max_connections_per_client: config.max_connections_per_client,
        },
        hosts: HostPolicy::new(config.listen, &config.allowed_hosts),
        cors: CorsPolicy::new(&config.cors_origins),
        tls: acceptor(&[b"http/1.1"])?,
        // A matcher serves no client: `/healthz` and `/metrics` only.
        api: config.role != Role::Matcher,
    };
    let grpc_listen = config.grpc_listen.filter(|_| config.role != Role::Matcher);
    if let Some(addr) = grpc_listen {
        let grpc_listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr} (--grpc-listen): {e}"))?;
        tracing::info!(grpc_listen = %addr, dev_mode = config.dev_mode, "the gRPC front end is serving");
        let grpc_tls = acceptor(&[b"h2"])?;
        let service = grpc::FirestoreService::new(
            Arc::clone(&state.service),
            state.max_body_bytes,
            config.dev_mode,
        );
        tokio::spawn(async move {
            if let Err(e) =
                grpc::serve(service, grpc_listener, grpc_tls, std::future::pending()).await
            {
                tracing::error!("{e}");
            }
        });
    }
    http::serve(state, listener, exposure)
        .await
        .map_err(|e| format!("server: {e}"))
}
