//! Flags and environment of `docstore-sidecar` (`--help` documents each).
//!
//! Every flag can also be given by an environment variable (`DOCSTORE_...`); a flag on the
//! command line wins. The stack script exports the values of `.docstore/dev.env`, so the
//! sidecar reads them only through the environment.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

/// Default `--max-body-bytes`: 10 MiB (a commit of 500 writes of documents near the 1 MiB
/// limit does not fit; send such batches in several commits).
pub const DEFAULT_MAX_BODY_BYTES: usize = 10 * 1024 * 1024;

/// pg_docstore's HTTP API (documents, queries, commits) with JWT auth, next to Postgres.
#[derive(Clone, Parser)]
#[command(name = "docstore-sidecar", version, about, long_about = None)]
pub struct Config {
    /// Postgres to connect to: a libpq URL (`postgresql://user@host:port/db`) or keyword
    /// string (`host=... port=... user=... dbname=...`). The role must be allowed to
    /// `SET ROLE docstore_client` (a member of it, or a superuser). TLS: libpq's `sslmode`
    /// (disable, prefer: the default, require, verify-ca, verify-full) and `sslrootcert` (the
    /// CA file, PEM; needed by verify-*), for every connection (docs/http.md).
    #[arg(
        long,
        env = "DOCSTORE_DATABASE_URL",
        default_value = "postgresql://postgres@127.0.0.1:5433/docstore"
    )]
    pub database_url: String,

    /// Address and port the HTTP API listens on.
    #[arg(long, env = "DOCSTORE_LISTEN", default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,

    /// Address and port of the gRPC front end (`google.firestore.v1.Firestore`, HTTP/2 without
    /// TLS): what Google's SDKs reach with `FIRESTORE_EMULATOR_HOST=host:port` (docs/grpc.md).
    /// Without it there is no gRPC front end.
    #[arg(long, env = "DOCSTORE_GRPC_LISTEN")]
    pub grpc_listen: Option<SocketAddr>,

    /// Development mode, as Firebase's emulator: over gRPC, `Authorization: Bearer owner`
    /// (what the SDKs send to an emulator) is the admin. Never in production: anyone who can
    /// reach the port is the admin; so the sidecar refuses to start with it on a
    /// --grpc-listen address that is not loopback.
    #[arg(long, env = "DOCSTORE_DEV_MODE")]
    pub dev_mode: bool,

    /// PEM file of the certificate chain (the server's certificate first) with which the HTTP
    /// listener and the gRPC front end speak TLS (rustls; ALPN `http/1.1` for HTTP, `h2` for
    /// gRPC), for deployments without a TLS proxy in front. Needs --tls-key; without both the
    /// listeners speak plain HTTP.
    #[arg(long, env = "DOCSTORE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// PEM file of the private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "DOCSTORE_TLS_KEY")]
    pub tls_key: Option<PathBuf>,

    /// Shared secret of HS256-signed JWTs (`Authorization: Bearer <JWT>`). Without it,
    /// --jwks-file and --jwks-url every bearer token but the admin key is refused (401).
    /// JWTs must carry `exp` (docs/security.md lists every check).
    #[arg(long, env = "DOCSTORE_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,

    /// JSON Web Key Set file (`{"keys": [...]}`) with the RS256/ES256 public keys of JWTs; a
    /// token's `kid` picks the key (a token without `kid` is tried against every key of its
    /// algorithm). Read once at start.
    #[arg(long, env = "DOCSTORE_JWKS_FILE")]
    pub jwks_file: Option<PathBuf>,

    /// URL of the issuer's JSON Web Key Set (`https://...`; e.g. Firebase Auth's
    /// `https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com`),
    /// fetched at start (the sidecar does not start without it) and refetched when a token
    /// names a `kid` it does not have: how issuers rotate keys. Instead of --jwks-file.
    #[arg(long, env = "DOCSTORE_JWKS_URL", conflicts_with = "jwks_file")]
    pub jwks_url: Option<String>,

    /// Fewest seconds between two refetches of --jwks-url (a token with an unknown `kid`
    /// within this time is refused without a fetch).
    #[arg(long, env = "DOCSTORE_JWKS_REFETCH_SECONDS", default_value_t = 30)]
    pub jwks_refetch_seconds: u64,

    /// When set, a JWT must carry this `iss` claim.
    #[arg(long, env = "DOCSTORE_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,

    /// When set, a JWT must carry this audience in its `aud` claim.
    #[arg(long, env = "DOCSTORE_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,

    /// Admin key: a request with `Authorization: Bearer <admin key>` runs as the sidecar's
    /// own database role and bypasses security rules. Without it no request is admin.
    #[arg(long, env = "DOCSTORE_ADMIN_KEY", hide_env_values = true)]
    pub admin_key: Option<String>,

    /// Largest request body in bytes; a larger one is refused with 413 RESOURCE_EXHAUSTED.
    #[arg(long, env = "DOCSTORE_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,

    /// Most Postgres connections the sidecar opens for requests (one per request in flight;
    /// more requests wait for a free connection).
    #[arg(long, env = "DOCSTORE_POOL_SIZE", default_value_t = 16)]
    pub pool_size: usize,

    /// Postgres connections shared by the reads that are one statement (GET of a document):
    /// their statements are pipelined, so a few busy backends serve many requests at once.
    /// 0: those requests take pooled connections.
    #[arg(
        long,
        env = "DOCSTORE_SHARED_CONNECTIONS",
        default_value_t = crate::pg::shared::DEFAULT_SHARED_CONNECTIONS
    )]
    pub shared_connections: usize,

    /// The logical replication slot the sidecar owns for live queries (created when
    /// missing, on the extension's publication `docstore_changes`). Two sidecars on one
    /// database need two slots.
    #[arg(long, env = "DOCSTORE_SLOT", default_value = "docstore_sidecar")]
    pub slot: String,

    /// What this process does (docs/architecture.md, "Processes"). `all`: everything, from its
    /// own slot, without NATS. `ingest`: owns the slot of --database-url's Postgres database
    /// (one active per database, chosen by an advisory lock; a second one waits as a standby),
    /// publishes each committed transaction to the JetStream stream --nats-stream and
    /// confirms the slot once JetStream has it; it runs the write triggers (--triggers) and
    /// serves the HTTP API without `:listen`. `gateway`: the HTTP/SSE/gRPC API with live
    /// queries fed by that stream instead of a slot (it creates none). `matcher`: the live
    /// queries' hub fed by that stream, serving the streams of gateways that run
    /// `--matching remote` over NATS; its HTTP listener answers only `/healthz` and
    /// `/metrics`. ingest, gateway and matcher need --nats-url.
    #[arg(long, env = "DOCSTORE_ROLE", value_enum, default_value_t = Role::All)]
    pub role: Role,

    /// Where a gateway matches its live queries: `local`, in its own hub; `remote`, on the
    /// matchers (`--role matcher`), each stream on one of them, moved to another when its
    /// matcher goes away (docs/architecture.md, "Processes").
    #[arg(long, env = "DOCSTORE_MATCHING", value_enum, default_value_t = Matching::Local)]
    pub matching: Matching,

    /// The NATS server (`nats://host:port`, JetStream enabled: `nats-server -js`). Needed by
    /// --role ingest and gateway. With it, every role that serves `:listen` also registers its
    /// listen streams in the key-value bucket `docstore_streams`, so that a client resuming a
    /// stream on another process of the same Postgres (another gateway) continues exactly
    /// (docs/listen.md, "Resuming on another process"). Unset (`--role all` only): streams are
    /// known to their process only. Credentials go in the URL (`nats://user:password@host:port`
    /// or `nats://token@host:port`, percent-encoded: `us%40er` is `us@er`); logs, `/healthz`
    /// and errors show it redacted.
    #[arg(long, env = "DOCSTORE_NATS_URL")]
    pub nats_url: Option<String>,

    /// The JetStream stream of committed transactions (created by the first process that
    /// needs it; its subject is `docstore.<NAME>`). One stream per Postgres database.
    #[arg(long, env = "DOCSTORE_NATS_STREAM", default_value = "DOCSTORE_TX")]
    pub nats_stream: String,

    /// Serve `:listen` (live queries). Off, no slot is created and `:listen` answers 503.
    #[arg(long, env = "DOCSTORE_LIVE", default_value_t = true, action = clap::ArgAction::Set)]
    pub live: bool,

    /// Deliver write triggers (docs/triggers.md): record the matching changes of the change
    /// stream and POST them to the triggers' URLs. Needs `--live` (the stream's consumer).
    #[arg(long, env = "DOCSTORE_TRIGGERS", default_value_t = true, action = clap::ArgAction::Set)]
    pub triggers: bool,

    /// Write triggers: requests in flight at most (each for a different document).
    #[arg(long, env = "DOCSTORE_TRIGGER_PARALLEL", default_value_t = 16)]
    pub trigger_parallel: usize,

    /// Write triggers: attempts of a change before it is parked (until `retry_trigger`).
    #[arg(long, env = "DOCSTORE_TRIGGER_ATTEMPTS", default_value_t = 10)]
    pub trigger_attempts: i32,

    /// Write triggers: milliseconds one delivery request may take.
    #[arg(long, env = "DOCSTORE_TRIGGER_TIMEOUT_MS", default_value_t = 10_000)]
    pub trigger_timeout_ms: u64,

    /// Write triggers: milliseconds before the second attempt; doubled after each failed one
    /// (plus up to a quarter of jitter), up to `--trigger-backoff-max-ms`.
    #[arg(long, env = "DOCSTORE_TRIGGER_BACKOFF_MS", default_value_t = 1_000)]
    pub trigger_backoff_ms: u64,

    /// Write triggers: the longest delay between two attempts, in milliseconds.
    #[arg(
        long,
        env = "DOCSTORE_TRIGGER_BACKOFF_MAX_MS",
        default_value_t = 300_000
    )]
    pub trigger_backoff_max_ms: u64,

    /// Write triggers: the deepest chain of changes written by exactly-once endpoints' answers
    /// that is delivered (a user's write is depth 0); a deeper change is parked.
    #[arg(long, env = "DOCSTORE_TRIGGER_MAX_DEPTH", default_value_t = 8)]
    pub trigger_max_depth: i32,

    /// Milliseconds without a decoded transaction after which a heartbeat is emitted.
    #[arg(long, env = "DOCSTORE_HEARTBEAT_MS", default_value_t = 1000)]
    pub heartbeat_ms: u64,

    /// Seconds a disconnected listen stream is kept for a resume; also how long every stream
    /// keeps its events for resumes with Last-Event-ID (within `--listen-replay` and
    /// `--listen-replay-bytes`), and, when longer than 60 s, how long the changelog keeps
    /// committed transactions (a resume on another process rebuilds from them).
    #[arg(long, env = "DOCSTORE_LISTEN_GRACE_SECONDS", default_value_t = 60)]
    pub listen_grace_seconds: u64,

    /// Events queued per connected listen stream; a client that lets more pile up gets
    /// `reset {reason: lagged}` and its stream closes.
    #[arg(long, env = "DOCSTORE_LISTEN_QUEUE", default_value_t = 1024)]
    pub listen_queue: usize,

    /// Most events a listen stream keeps for resumes with Last-Event-ID (a memory guard): it
    /// keeps those younger than `--listen-grace-seconds`, the oldest going first past this.
    #[arg(long, env = "DOCSTORE_LISTEN_REPLAY", default_value_t = 16_384)]
    pub listen_replay: usize,

    /// Most bytes the events every listen stream of the process keeps for resumes may hold
    /// together (estimated: a fixed cost per event plus its names and documents' fields).
    /// Past it the oldest events of all streams go first, however young, down to 15/16 of
    /// it; a resume from before them gets `reset {retention_passed}` and a snapshot.
    #[arg(long, env = "DOCSTORE_LISTEN_REPLAY_BYTES", default_value_t = 256 << 20)]
    pub listen_replay_bytes: usize,

    /// Longest a statement of a request may run, in milliseconds (Postgres'
    /// `statement_timeout` on every connection of the pool; 0: no limit). A request whose
    /// statement runs longer is answered 504 DEADLINE_EXCEEDED and its transaction rolled back.
    #[arg(
        long,
        env = "DOCSTORE_STATEMENT_TIMEOUT_MS",
        default_value_t = crate::pg::DEFAULT_STATEMENT_TIMEOUT_MS
    )]
    pub statement_timeout_ms: u64,

    /// Longest the sidecar waits, in milliseconds, for a client to take the next chunk of a
    /// streamed query answer (`:runQuery`, GET of a collection). A client that stops reading
    /// for longer has its response aborted (the body ends without its final chunk), and the
    /// transaction is rolled back and its Postgres connection released. 0: no limit.
    #[arg(
        long,
        env = "DOCSTORE_QUERY_WRITE_TIMEOUT_MS",
        default_value_t = DEFAULT_QUERY_WRITE_TIMEOUT_MS
    )]
    pub query_write_timeout_ms: u64,

    /// Host names the API answers besides localhost, 127.0.0.1 and [::1] (any port), comma
    /// separated; `*`: any. A request naming another Host is refused (400), so a web page
    /// whose DNS name was rebound to this address cannot reach the API. Checked when the
    /// sidecar listens on a loopback address or this list is set.
    #[arg(long, env = "DOCSTORE_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// Browser origins allowed to call the API cross-origin (`https://app.example.com`, comma
    /// separated; `*`: any). None by default: no CORS headers are sent.
    #[arg(long, env = "DOCSTORE_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<String>,

    /// Milliseconds a connection may take to send a request's headers, counted from when it
    /// waits for a request (after connecting, or after the previous response); a connection
    /// over it is closed without an answer.
    #[arg(long, env = "DOCSTORE_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,

    /// Milliseconds a request's body may take to arrive, counted from the end of its headers;
    /// a late body is answered 408 DEADLINE_EXCEEDED and the connection closed.
    #[arg(long, env = "DOCSTORE_BODY_TIMEOUT_MS", default_value_t = 60_000)]
    pub body_timeout_ms: u64,

    /// Milliseconds a connection may stay idle (nothing read or written while the server waits
    /// on it: a silent socket, a client that stopped sending or reading) before it is closed.
    #[arg(long, env = "DOCSTORE_IDLE_TIMEOUT_MS", default_value_t = 60_000)]
    pub idle_timeout_ms: u64,

    /// Most open connections; a connection over it is answered 429 RESOURCE_EXHAUSTED and
    /// closed.
    #[arg(long, env = "DOCSTORE_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,

    /// Most open connections from one client address (429 RESOURCE_EXHAUSTED over it).
    #[arg(
        long,
        env = "DOCSTORE_MAX_CONNECTIONS_PER_CLIENT",
        default_value_t = 256
    )]
    pub max_connections_per_client: usize,

    /// Most listen streams, connected or waiting for a resume (429 RESOURCE_EXHAUSTED over
    /// it).
    #[arg(long, env = "DOCSTORE_MAX_STREAMS", default_value_t = 10_000)]
    pub max_streams: usize,

    /// Most listen streams of one caller: a JWT's subject, or for anonymous callers and tokens
    /// without `sub` the client address (429 RESOURCE_EXHAUSTED over it). The admin key has
    /// no per-caller cap.
    #[arg(long, env = "DOCSTORE_MAX_STREAMS_PER_CALLER", default_value_t = 100)]
    pub max_streams_per_caller: usize,

    /// Most targets on one listen stream, over all its requests (429 RESOURCE_EXHAUSTED over
    /// it).
    #[arg(long, env = "DOCSTORE_MAX_TARGETS_PER_STREAM", default_value_t = 1_000)]
    pub max_targets_per_stream: usize,

    /// Live queries: write partitions of the matcher. Each committed transaction's writes are
    /// split by a hash of the document name and looked up in that many index cells, each by a
    /// task of its own (docs/architecture.md, "Matching and scale"). 1 to 64.
    #[arg(long, env = "DOCSTORE_MATCH_WRITE_PARTITIONS", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub match_write_partitions: u16,

    /// Live queries: query partitions of the matcher. Targets are split by a hash of their id
    /// into that many sets with their own index; each set applies a transaction in a task of
    /// its own. 1 to 64.
    #[arg(long, env = "DOCSTORE_MATCH_QUERY_PARTITIONS", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub match_query_partitions: u16,

    /// Seconds a held transaction (`:beginTransaction`) may stay unused before it expires
    /// and is rolled back (Firestore's 60).
    #[arg(
        long,
        env = "DOCSTORE_TRANSACTION_IDLE_SECONDS",
        default_value_t = crate::service::transactions::DEFAULT_IDLE_SECONDS
    )]
    pub transaction_idle_seconds: u64,

    /// Seconds a held transaction may live at most before it expires and is rolled back
    /// (Firestore's 270).
    #[arg(
        long,
        env = "DOCSTORE_TRANSACTION_LIFETIME_SECONDS",
        default_value_t = crate::service::transactions::DEFAULT_LIFETIME_SECONDS
    )]
    pub transaction_lifetime_seconds: u64,

    /// Longest wait in milliseconds for a document another transaction holds, in a
    /// read-write held transaction: past it the read or commit is 409 ABORTED (retry), as a
    /// deadlock is; 0: only --statement-timeout-ms bounds it.
    #[arg(
        long,
        env = "DOCSTORE_TRANSACTION_LOCK_TIMEOUT_MS",
        default_value_t = crate::service::transactions::DEFAULT_LOCK_TIMEOUT_MS
    )]
    pub transaction_lock_timeout_ms: u64,

    /// Most held transactions of one caller (a JWT's subject; anonymous callers share one
    /// bound; the admin key has none): 429 RESOURCE_EXHAUSTED over it.
    #[arg(
        long,
        env = "DOCSTORE_MAX_TRANSACTIONS_PER_CALLER",
        default_value_t = crate::service::transactions::DEFAULT_PER_CALLER
    )]
    pub max_transactions_per_caller: usize,

    /// Most held transactions in total, each holding a pooled connection (429
    /// RESOURCE_EXHAUSTED over it); default half of --pool-size, so they never take every
    /// connection from other requests.
    #[arg(long, env = "DOCSTORE_MAX_TRANSACTIONS")]
    pub max_transactions: Option<usize>,
}

/// `--role`: what a process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Everything in one process, fed by its own slot (no NATS).
    All,
    /// The slot's reader and the publisher of its transactions to JetStream.
    Ingest,
    /// The API and live queries, fed by JetStream (or matched on matchers).
    Gateway,
    /// The live queries' hub, fed by JetStream, for gateways that match remotely.
    Matcher,
}

/// `--matching`: where a gateway's live queries are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Matching {
    /// In the gateway's own hub.
    Local,
    /// On the matchers (`--role matcher`).
    Remote,
}

/// Default `--query-write-timeout-ms`: 30 s, as the statement timeout.
pub const DEFAULT_QUERY_WRITE_TIMEOUT_MS: u64 = 30_000;

/// Debug output never shows the secrets: the JWT secret, the admin key and the database URL
/// (which may hold a password) are redacted.
impl Config {
    /// Flag combinations refused at start.
    ///
    /// # Errors
    /// `--dev-mode` with a `--grpc-listen` address that is not loopback: `Bearer owner` is the
    /// admin in development mode, so anyone who could reach that address would be the admin.
    pub fn check(&self) -> Result<(), String> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => {
                return Err("--tls-cert needs --tls-key (the certificate's private key)".into())
            }
            (None, Some(_)) => {
                return Err("--tls-key needs --tls-cert (the certificate chain of the key)".into())
            }
            _ => {}
        }
        if self.role != Role::All && self.nats_url.is_none() {
            return Err(format!(
                "--role {} needs --nats-url (the NATS server with JetStream)",
                match self.role {
                    Role::Ingest => "ingest",
                    Role::Matcher => "matcher",
                    _ => "gateway",
                }
            ));
        }
        if self.role != Role::All && !self.live {
            return Err(
                "--role ingest, gateway and matcher are the live path's (the slot, the stream): they need --live true"
                    .into(),
            );
        }
        if self.matching == Matching::Remote && self.role != Role::Gateway {
            return Err("--matching remote is a gateway's (--role gateway)".into());
        }
        match self.grpc_listen {
            Some(addr) if self.dev_mode && !addr.ip().is_loopback() => Err(format!(
                "--dev-mode makes `Bearer owner` the admin: refusing to serve it on {addr}, which is \
                 not a loopback address (listen on 127.0.0.1 or ::1, or drop --dev-mode)"
            )),
            _ => Ok(()),
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |set: bool| if set { "<redacted>" } else { "<unset>" };
        f.debug_struct("Config")
            .field("database_url", &"<redacted>")
            .field("listen", &self.listen)
            .field("grpc_listen", &self.grpc_listen)
            .field("dev_mode", &self.dev_mode)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("jwt_secret", &redacted(self.jwt_secret.is_some()))
            .field("jwks_file", &self.jwks_file)
            .field("jwks_url", &self.jwks_url)
            .field("jwks_refetch_seconds", &self.jwks_refetch_seconds)
            .field("jwt_issuer", &self.jwt_issuer)
            .field("jwt_audience", &self.jwt_audience)
            .field("admin_key", &redacted(self.admin_key.is_some()))
            .field("max_body_bytes", &self.max_body_bytes)
            .field("pool_size", &self.pool_size)
            .field("shared_connections", &self.shared_connections)
            .field("slot", &self.slot)
            .field("role", &self.role)
            .field("matching", &self.matching)
            .field(
                "nats_url",
                &self
                    .nats_url
                    .as_deref()
                    .map(crate::source::jetstream::redact_url),
            )
            .field("nats_stream", &self.nats_stream)
            .field("live", &self.live)
            .field("triggers", &self.triggers)
            .field("trigger_parallel", &self.trigger_parallel)
            .field("trigger_attempts", &self.trigger_attempts)
            .field("trigger_timeout_ms", &self.trigger_timeout_ms)
            .field("trigger_backoff_ms", &self.trigger_backoff_ms)
            .field("trigger_backoff_max_ms", &self.trigger_backoff_max_ms)
            .field("trigger_max_depth", &self.trigger_max_depth)
            .field("heartbeat_ms", &self.heartbeat_ms)
            .field("listen_grace_seconds", &self.listen_grace_seconds)
            .field("listen_queue", &self.listen_queue)
            .field("listen_replay", &self.listen_replay)
            .field("listen_replay_bytes", &self.listen_replay_bytes)
            .field("statement_timeout_ms", &self.statement_timeout_ms)
            .field("query_write_timeout_ms", &self.query_write_timeout_ms)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("cors_origins", &self.cors_origins)
            .field("header_timeout_ms", &self.header_timeout_ms)
            .field("body_timeout_ms", &self.body_timeout_ms)
            .field("idle_timeout_ms", &self.idle_timeout_ms)
            .field("max_connections", &self.max_connections)
            .field(
                "max_connections_per_client",
                &self.max_connections_per_client,
            )
            .field("max_streams", &self.max_streams)
            .field("max_streams_per_caller", &self.max_streams_per_caller)
            .field("max_targets_per_stream", &self.max_targets_per_stream)
            .field("match_write_partitions", &self.match_write_partitions)
            .field("match_query_partitions", &self.match_query_partitions)
            .field("transaction_idle_seconds", &self.transaction_idle_seconds)
            .field(
                "transaction_lifetime_seconds",
                &self.transaction_lifetime_seconds,
            )
            .field(
                "transaction_lock_timeout_ms",
                &self.transaction_lock_timeout_ms,
            )
            .field(
                "max_transactions_per_caller",
                &self.max_transactions_per_caller,
            )
            .field("max_transactions", &self.max_transactions)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn flags_parse_and_help_is_consistent() {
        Config::command().debug_assert();
        let config = Config::try_parse_from([
            "docstore-sidecar",
            "--database-url",
            "host=/tmp dbname=x",
            "--listen",
            "127.0.0.1:9000",
            "--max-body-bytes",
            "100",
        ])
        .unwrap();
        assert_eq!(config.listen.port(), 9000);
        assert_eq!(config.max_body_bytes, 100);
        assert_eq!(
            config.statement_timeout_ms,
            crate::pg::DEFAULT_STATEMENT_TIMEOUT_MS
        );
        let config =
            Config::try_parse_from(["docstore-sidecar", "--statement-timeout-ms", "0"]).unwrap();
        assert_eq!(config.statement_timeout_ms, 0);
        let config = Config::try_parse_from([
            "docstore-sidecar",
            "--allowed-hosts",
            "sidecar,api.example",
            "--cors-origins",
            "https://app.example",
        ])
        .unwrap();
        assert_eq!(config.allowed_hosts, ["sidecar", "api.example"]);
        assert_eq!(config.cors_origins, ["https://app.example"]);
        assert!(config.max_targets_per_stream >= 1_000);
    }

    #[test]
    fn dev_mode_serves_loopback_only() {
        let parse = |args: &[&str]| {
            let mut all = vec!["docstore-sidecar"];
            all.extend_from_slice(args);
            Config::try_parse_from(all).unwrap()
        };
        assert!(parse(&["--dev-mode", "--grpc-listen", "127.0.0.1:9787"])
            .check()
            .is_ok());
        assert!(parse(&["--dev-mode", "--grpc-listen", "[::1]:9787"])
            .check()
            .is_ok());
        assert!(parse(&["--grpc-listen", "0.0.0.0:9787"]).check().is_ok());
        let refused = parse(&["--dev-mode", "--grpc-listen", "0.0.0.0:9787"]).check();
        assert!(refused.is_err_and(|e| e.contains("not a loopback address")));
    }

    #[test]
    fn roles_other_than_all_need_nats_and_the_live_path() {
        let parse = |args: &[&str]| {
            let mut all = vec!["docstore-sidecar"];
            all.extend_from_slice(args);
            Config::try_parse_from(all).unwrap()
        };
        assert_eq!(parse(&[]).role, Role::All);
        assert!(parse(&[]).check().is_ok());
        for role in ["ingest", "gateway"] {
            let refused = parse(&["--role", role]).check();
            assert!(refused.is_err_and(|e| e.contains("needs --nats-url")));
            let nats = ["--role", role, "--nats-url", "nats://127.0.0.1:4222"];
            let config = parse(&nats);
            assert!(config.check().is_ok());
            assert_eq!(config.nats_stream, "DOCSTORE_TX");
            let refused = parse(&[&nats[..], &["--live", "false"]].concat()).check();
            assert!(refused.is_err_and(|e| e.contains("--live true")));
        }
        assert!(Config::try_parse_from(["docstore-sidecar", "--role", "router"]).is_err());
        let matcher = parse(&["--role", "matcher", "--nats-url", "nats://127.0.0.1:4222"]);
        assert!(matcher.check().is_ok());
        assert!(parse(&["--role", "matcher"])
            .check()
            .is_err_and(|e| e.contains("--role matcher needs --nats-url")));
        let remote = [
            "--role",
            "gateway",
            "--nats-url",
            "nats://127.0.0.1:4222",
            "--matching",
            "remote",
        ];
        assert_eq!(parse(&remote).matching, Matching::Remote);
        assert!(parse(&remote).check().is_ok());
        assert!(parse(&["--matching", "remote"])
            .check()
            .is_err_and(|e| e.contains("--matching remote")));
    }

    #[test]
    fn debug_output_redacts_secrets_and_nats_credentials() {
        let config = Config::try_parse_from([
            "docstore-sidecar",
            "--database-url",
            "postgresql://u:dbsecret@h/d",
            "--nats-url",
            "nats://user:natssecret@nats.example:4222,nats://tok3n@other:4222",
            "--admin-key",
            "adminsecret",
        ])
        .unwrap();
        let shown = format!("{config:?}");
        for secret in ["dbsecret", "natssecret", "tok3n", "adminsecret"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(
            shown.contains("nats://<redacted>@nats.example:4222"),
            "{shown}"
        );
    }
}
