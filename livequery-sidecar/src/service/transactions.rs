//! Held transactions (Firestore's `BeginTransaction`): a Postgres transaction kept open for a
//! client between its calls, each on its own pooled connection, running as the client.
//!
//! - `begin` opens one, READ WRITE at READ COMMITTED or, read-only, REPEATABLE READ READ ONLY
//!   (every read sees the snapshot of the begin), and answers an id: 128 bits from the OS
//!   generator, base64. Only its owner (the caller that began it: the admin key, a JWT's
//!   subject, or an anonymous caller) may use it; another caller gets PERMISSION_DENIED. An
//!   unknown, ended or expired id is INVALID_ARGUMENT "transaction ... is invalid or expired:
//!   the transaction has expired, ...", as Firestore answers (Node's SDK retries on those words).
//! - Reads in it (get, batch get, query) run on its connection. In a read-write transaction
//!   the documents read are locked until it ends: a get or a batch get first locks its paths
//!   with `docstore.commit`'s `verify` entries (a row lock like a write's, taken by the
//!   extension, so the client role needs no UPDATE right; a missing document's name is
//!   claimed as a create would), then reads them, so a second transaction reading the same
//!   document waits for the first to end and then reads its outcome. A query reads first,
//!   then locks its result documents with `verify` entries whose precondition is the update
//!   time it read: a document changed in between makes the read ABORTED (retry).
//! - `commit` applies the writes on its connection and commits; `rollback` rolls back. Either
//!   ends it (a failed statement in it ends it too). Serialization failures, deadlocks and
//!   lock timeouts are ABORTED (the SDKs retry).
//! - Bounds: held transactions per caller and in total (RESOURCE_EXHAUSTED, `limit`
//!   `transactions_per_caller` / `transactions`); an idle timeout and a maximum lifetime
//!   (Firestore's 60 s and 270 s): a use past either finds it expired, and [`reap`] rolls back
//!   the expired ones. A client that goes away does not end its transaction: the reaper does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use docstore_core::{Code, ErrorKind, ResourcePath, Timestamp};
use serde_json::Value as Json;
use tokio::sync::OwnedMutexGuard;

use super::batch_get::BatchRead;
use super::caller::{Caller, Principal};
use super::collections::{self as service_collections, Listed, Listing};
use super::commit::Committed;
use super::context::{structured_query_info, text_query_info, RulesMethod};
use super::error::ServiceError;
use super::query::{Query, QueryRows};
use super::Service;
use crate::pg::documents::{self as pg_documents, Document, ReadMany};
use crate::pg::query::{self as pg_query, QueryInput, ResultRow};
use crate::pg::types::{PgTime, RawJson};
use crate::pg::{PgError, RequestTx, RunAs};

/// Default idle timeout (`--transaction-idle-seconds`): Firestore's 60 s.
pub const DEFAULT_IDLE_SECONDS: u64 = 60;
/// Default maximum lifetime (`--transaction-lifetime-seconds`): Firestore's 270 s.
pub const DEFAULT_LIFETIME_SECONDS: u64 = 270;
/// Default longest wait for a lock in a read-write held transaction
/// (`--transaction-lock-timeout-ms`): past it the call is ABORTED.
pub const DEFAULT_LOCK_TIMEOUT_MS: u64 = 10_000;
/// Default bound of one caller's held transactions (`--max-transactions-per-caller`).
pub const DEFAULT_PER_CALLER: usize = 5;

/// Most entries of one `docstore.commit` (core's limit), so locks go in chunks of this size.
const LOCKS_PER_STATEMENT: usize = docstore_core::limits::MAX_WRITES;

/// The bounds of held transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub idle: Duration,
    pub lifetime: Duration,
    /// Postgres' `lock_timeout` in a read-write transaction (zero: none, the statement
    /// timeout bounds the wait).
    pub lock_timeout: Duration,
    pub per_caller: usize,
    pub total: usize,
}

impl Limits {
    /// The defaults for a pool of `pool_size` connections: at most half of it held.
    pub fn for_pool(pool_size: usize) -> Limits {
        Limits {
            idle: Duration::from_secs(DEFAULT_IDLE_SECONDS),
            lifetime: Duration::from_secs(DEFAULT_LIFETIME_SECONDS),
            lock_timeout: Duration::from_millis(DEFAULT_LOCK_TIMEOUT_MS),
            per_caller: DEFAULT_PER_CALLER,
            total: pool_size / 2,
        }
    }
}

/// A transaction id: 128 random bits.
type Id = [u8; 16];

/// Who owns a transaction: the admin, a JWT's subject (or its whole claims without one), or
/// an anonymous caller.
fn owner_of(principal: &Principal) -> String {
    match principal {
        Principal::Admin => "admin".to_owned(),
        Principal::Anonymous => "anonymous".to_owned(),
        Principal::User(claims) => match claims.get("sub") {
            Some(Json::String(sub)) => format!("sub:{sub}"),
            _ => format!("claims:{claims}"),
        },
    }
}

/// The key of the per-caller bound: the owner, but none for the admin key (bounded by the
/// total only, as its listen streams).
fn quota_of(principal: &Principal) -> Option<String> {
    match principal {
        Principal::Admin => None,
        other => Some(owner_of(other)),
    }
}

/// One held transaction.
struct Held {
    owner: String,
    quota: Option<String>,
    database: String,
    read_only: bool,
    /// A read-only transaction's read time (RFC 3339): its reads read the documents as they
    /// were then (the extension's `*_at` functions).
    read_time: std::sync::OnceLock<String>,
    started: Instant,
    last_used: Mutex<Instant>,
    /// The transaction (`None` while it is being opened, or once ended). Its lock serializes
    /// the calls of one transaction.
    tx: Arc<tokio::sync::Mutex<Option<RequestTx>>>,
}

impl Held {
    fn last_used(&self) -> Instant {
        *self
            .last_used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    fn expired(&self, limits: &Limits, now: Instant) -> bool {
        now.saturating_duration_since(self.started) > limits.lifetime
            || now.saturating_duration_since(self.last_used()) > limits.idle
    }
}

/// The registry of held transactions.
pub struct Transactions {
    limits: Limits,
    held: Mutex<HashMap<Id, Arc<Held>>>,
}

/// A transaction taken for one call: its lock is held until the call ends.
struct Taken {
    id: Id,
    held: Arc<Held>,
    guard: OwnedMutexGuard<Option<RequestTx>>,
}

/// INVALID_ARGUMENT for an unknown, ended or expired id. Its message says "the transaction
/// has expired", the words Node's SDK looks for to retry a transaction (as Firestore's
/// "The referenced transaction has expired or is no longer valid").
fn invalid(text: &str) -> ServiceError {
    ServiceError::invalid_argument(format!(
        "transaction \"{text}\" is invalid or expired: the transaction has expired, ended or \
         was never begun"
    ))
    .with_hint("begin a new transaction (beginTransaction) and run it again")
}

fn exhausted(limit: &'static str, message: String) -> ServiceError {
    ServiceError {
        limit: Some(limit),
        ..ServiceError::new(Code::ResourceExhausted, message)
    }
}

/// The text of an id (standard base64, as Firestore's bytes in JSON).
pub fn encode_id(id: &Id) -> String {
    base64::engine::general_purpose::STANDARD.encode(id)
}

/// The text of an id given as bytes (gRPC's `transaction`), whatever their length: a
/// length other than 16 is then refused as any invalid id is.
pub fn text_of_bytes(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The bytes of an id's text (gRPC answers them).
///
/// # Errors
/// As [`decode_id`].
pub fn bytes_of_text(text: &str) -> Result<Vec<u8>, ServiceError> {
    decode_id(text).map(|id| id.to_vec())
}

/// The id of `text`.
///
/// # Errors
/// INVALID_ARGUMENT for text that is not the base64 of 16 bytes.
pub fn decode_id(text: &str) -> Result<Id, ServiceError> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()
        .and_then(|bytes| Id::try_from(bytes.as_slice()).ok())
        .ok_or_else(|| invalid(text))
}

impl Transactions {
    pub fn new(limits: Limits) -> Transactions {
        Transactions {
            limits,
            held: Mutex::default(),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Id, Arc<Held>>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How many transactions are held (opening ones included).
    pub fn held(&self) -> usize {
        self.map().len()
    }

    /// Reserve a slot for a new transaction of `caller` in `database` under the bounds: the
    /// entry is registered, locked, with no transaction yet.
    ///
    /// # Errors
    /// RESOURCE_EXHAUSTED over a bound; UNAVAILABLE when the OS generator fails.
    fn reserve(
        &self,
        principal: &Principal,
        database: &str,
        read_only: bool,
    ) -> Result<Taken, ServiceError> {
        let mut id: Id = [0; 16];
        getrandom::fill(&mut id).map_err(|e| {
            ServiceError::internal(Code::Unavailable, "no random transaction id", &e)
        })?;
        let quota = quota_of(principal);
        let mut map = self.map();
        if map.len() >= self.limits.total {
            return Err(exhausted(
                "transactions",
                format!(
                    "the sidecar holds its most transactions ({}, --max-transactions); retry later",
                    self.limits.total
                ),
            ));
        }
        if let Some(quota) = &quota {
            let mine = map
                .values()
                .filter(|h| h.quota.as_ref() == Some(quota))
                .count();
            if mine >= self.limits.per_caller {
                return Err(exhausted(
                    "transactions_per_caller",
                    format!(
                        "this caller holds its most transactions ({}, \
                         --max-transactions-per-caller): commit or roll one back",
                        self.limits.per_caller
                    ),
                ));
            }
        }
        let now = Instant::now();
        let tx = Arc::new(tokio::sync::Mutex::new(None));
        let guard = tx.clone().try_lock_owned().map_err(|e| {
            ServiceError::internal(Code::Internal, "a new transaction was locked", &e)
        })?;
        let held = Arc::new(Held {
            owner: owner_of(principal),
            quota,
            database: database.to_owned(),
            read_only,
            read_time: std::sync::OnceLock::new(),
            started: now,
            last_used: Mutex::new(now),
            tx,
        });
        map.insert(id, held.clone());
        Ok(Taken { id, held, guard })
    }

    /// Take transaction `text` of `database` for one call of `caller`.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for an unknown, ended or expired id or another database's;
    /// PERMISSION_DENIED for another caller's.
    async fn take(
        &self,
        caller: &Caller,
        database: &str,
        text: &str,
    ) -> Result<Taken, ServiceError> {
        let id = decode_id(text)?;
        let held = self.map().get(&id).cloned().ok_or_else(|| invalid(text))?;
        if held.owner != owner_of(&caller.principal) {
            return Err(ServiceError::new(
                Code::PermissionDenied,
                "the transaction belongs to another caller",
            ));
        }
        if held.database != database {
            return Err(ServiceError::invalid_argument(format!(
                "transaction \"{text}\" belongs to database \"{}\", not \"{database}\"",
                held.database
            )));
        }
        if held.expired(&self.limits, Instant::now()) {
            self.end(&id, &held);
            return Err(invalid(text));
        }
        let guard = held.tx.clone().lock_owned().await;
        if guard.is_none() {
            // Ended (rolled back by the reaper or a failed call) while this call waited.
            return Err(invalid(text));
        }
        held.touch();
        Ok(Taken { id, held, guard })
    }

    /// Forget `held` and roll its transaction back in the background.
    fn end(&self, id: &Id, held: &Arc<Held>) {
        {
            let mut map = self.map();
            if map.get(id).is_some_and(|h| Arc::ptr_eq(h, held)) {
                map.remove(id);
            }
        }
        let tx = held.tx.clone();
        let rollback = async move {
            let tx = tx.lock().await.take();
            if let Some(tx) = tx {
                if let Err(e) = tx.rollback().await {
                    tracing::debug!(error = %e, "rollback of an expired transaction");
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(rollback);
            }
            Err(_) => tracing::debug!("no runtime to roll back an expired transaction"),
        }
    }

    /// End the call of `taken`: forget the transaction (its connection is already given
    /// back or rolled back by the caller).
    fn release(&self, taken: Taken) {
        let Taken {
            id,
            held,
            mut guard,
        } = taken;
        guard.take();
        drop(guard);
        let mut map = self.map();
        if map.get(&id).is_some_and(|h| Arc::ptr_eq(h, &held)) {
            map.remove(&id);
        }
    }

    /// Roll back every expired transaction; how many there were.
    pub fn reap(&self) -> usize {
        let now = Instant::now();
        let expired: Vec<(Id, Arc<Held>)> = self
            .map()
            .iter()
            // One in the middle of a call is not idle (a call is bounded by the statement
            // timeout); past its lifetime it is ended after the call.
            .filter(|(_, h)| h.expired(&self.limits, now))
            .filter(|(_, h)| {
                h.tx.try_lock().is_ok()
                    || now.saturating_duration_since(h.started) > self.limits.lifetime
            })
            .map(|(id, h)| (*id, h.clone()))
            .collect();
        for (id, held) in &expired {
            self.end(id, held);
        }
        expired.len()
    }

    /// Run [`reap`](Transactions::reap) every second until the process ends.
    pub fn spawn_reaper(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(transactions) = weak.upgrade() else {
                    return;
                };
                let reaped = transactions.reap();
                if reaped > 0 {
                    tracing::debug!(reaped, "expired transactions rolled back");
                }
            }
        });
    }
}

/// The settings of one call in a held transaction: `docstore.auth` and `docstore.request` of
/// this call (the role is the begin's).
async fn set_call(tx: &RequestTx, run_as: &RunAs) -> Result<(), PgError> {
    if let RunAs::Client { auth, request } = run_as {
        tx.set_call(auth, request).await?;
    }
    Ok(())
}

/// A statement of a held transaction failed: the transaction is ended (Postgres aborted it)
/// and the error answered. Lock and serialization failures are ABORTED.
fn failed(service: &Service, taken: Taken, error: ServiceError) -> ServiceError {
    let Taken {
        id,
        held,
        mut guard,
    } = taken;
    let tx = guard.take();
    drop(guard);
    service.transactions.end(&id, &held);
    if let Some(tx) = tx {
        tokio::spawn(async move {
            if let Err(e) = tx.rollback().await {
                tracing::debug!(error = %e, "rollback of a failed transaction");
            }
        });
    }
    error
}

/// A Postgres error of a held transaction: a lock not available (55P03) is ABORTED too.
fn held_error(error: PgError) -> ServiceError {
    let lock_timeout = matches!(&error, PgError::Db(e)
        if e.as_db_error().is_some_and(|db| db.code().code() == "55P03"));
    let mut e = ServiceError::from(error);
    if lock_timeout {
        e.code = Code::Aborted;
    }
    if e.code == Code::Aborted && e.hint.is_none() {
        e.hint = Some("the transaction is ended: begin it again and retry".into());
    }
    e
}

/// Begin a held transaction of `caller` in `database`; its id. A read-only one may read at
/// `read_time`: a time at or after the newest commit is its snapshot's, taken at the begin
/// ([`super::read_time::judge`]); an earlier one is read from the version history by each of
/// its reads (the extension's `*_at` functions), which refuse a time older than it.
///
/// # Errors
/// RESOURCE_EXHAUSTED over a bound; NOT_FOUND for an unknown database; INVALID_ARGUMENT for a
/// `read_time` in the future; database errors.
///
/// # Cancel safety
/// Dropped mid-way, the half-open transaction is rolled back and its slot freed.
pub async fn begin(
    service: &Service,
    caller: &Caller,
    database: &str,
    read_only: bool,
    read_time: Option<Timestamp>,
) -> Result<String, ServiceError> {
    let transactions = &service.transactions;
    let mut taken = transactions.reserve(&caller.principal, database, read_only)?;
    // Frees the slot unless the transaction opened (a drop of this future included).
    struct Slot<'a> {
        transactions: &'a Transactions,
        id: Id,
        opened: bool,
    }
    impl Drop for Slot<'_> {
        fn drop(&mut self) {
            if !self.opened {
                self.transactions.map().remove(&self.id);
            }
        }
    }
    let mut slot = Slot {
        transactions,
        id: taken.id,
        opened: false,
    };
    let run_as = caller.run_as(RulesMethod::Get, database, "", None);
    let tx = service.db.begin_held(database, &run_as, read_only).await?;
    let lock_timeout = transactions.limits.lock_timeout;
    if !read_only && !lock_timeout.is_zero() {
        tx.set_lock_timeout(lock_timeout).await?;
    }
    if let Some(read_time) = read_time {
        // Read in the transaction: its snapshot is taken first, so a commit after it has
        // advanced the newest commit time read. A time before it is read from the version
        // history by each read (which refuses a time older than the history).
        let checked = match tx.last_commit_time().await {
            Ok(latest) => super::read_time::judge(read_time, latest),
            Err(e) => Err(ServiceError::from(e)),
        };
        let checked = match checked {
            Err(e) if e.code == Code::FailedPrecondition => {
                let _ = taken.held.read_time.set(read_time.to_rfc3339());
                Ok(())
            }
            other => other,
        };
        if let Err(e) = checked {
            if let Err(r) = tx.rollback().await {
                tracing::debug!(error = %r, "rollback of a refused read-only transaction");
            }
            return Err(e);
        }
    }
    *taken.guard = Some(tx);
    slot.opened = true;
    taken.held.touch();
    Ok(encode_id(&taken.id))
}

/// Roll back transaction `text`.
///
/// # Errors
/// As for any use of the id (invalid or expired, another caller's).
pub async fn rollback(
    service: &Service,
    caller: &Caller,
    database: &str,
    text: &str,
) -> Result<(), ServiceError> {
    let mut taken = service.transactions.take(caller, database, text).await?;
    let tx = taken.guard.take();
    service.transactions.release(taken);
    if let Some(tx) = tx {
        tx.rollback().await?;
    }
    Ok(())
}

/// How often a query of a read-write transaction is tried again when a document it read
/// changed before it was locked; then it is ABORTED. Every waiter of a contended document
/// fails its lock when the holder commits and only one wins the next round, so a reader can
/// lose several rounds in a row. Point reads (GetDocument, BatchGetDocuments) lock first and
/// read after, in Postgres' fair lock queue, and need no bound ([`read_locked`]).
const LOCK_ATTEMPTS: usize = 64;

/// A document read, to lock: its path and the precondition that it is as read
/// (`{"updateTime": t}`, or `{"exists": false}` when it was missing).
type Lock = (String, Json);

/// The `docstore.commit` entries that lock `paths` and check nothing: a `verify` without a
/// precondition each.
fn lock_entries(paths: &[String]) -> String {
    let items: Vec<Json> = paths
        .iter()
        .map(|path| serde_json::json!({ "verify": path }))
        .collect();
    Json::Array(items).to_string()
}

/// The `docstore.commit` entries that lock `locks`: a `verify` each.
fn verify_entries(locks: &[Lock]) -> String {
    let items: Vec<Json> = locks
        .iter()
        .map(|(path, precondition)| {
            serde_json::json!({ "verify": path, "precondition": precondition })
        })
        .collect();
    Json::Array(items).to_string()
}

/// The precondition that a document is as read at `update_time`.
fn as_read(update_time: &PgTime) -> Result<Json, ServiceError> {
    let time = update_time.to_rfc3339().ok_or_else(|| {
        ServiceError::from(PgError::Decode(format!(
            "update time {} is out of range",
            update_time.0
        )))
    })?;
    Ok(serde_json::json!({ "updateTime": time }))
}

/// Whether `error` is pg_docstore's failed precondition (55000 raised by the extension): a
/// document changed since it was read.
fn changed_since_read(error: &PgError) -> bool {
    let PgError::Db(e) = error else {
        return false;
    };
    e.as_db_error().is_some_and(|db| {
        super::error::raised_by_extension(db)
            && db.code().code() == ErrorKind::FailedPrecondition.sqlstate()
    })
}

/// A read in a held transaction.
enum Read<'a> {
    One {
        run_as: &'a RunAs,
        path: &'a ResourcePath,
    },
    Many {
        run_as: &'a RunAs,
        paths: &'a [ResourcePath],
    },
    Query(QueryInput<'a>),
    /// ListDocuments: the documents of `listing` (with `show_missing`, also the ids without a
    /// document that have descendants).
    Listing {
        listing: Listing<'a>,
        show_missing: bool,
    },
}

/// What a [`Read`] read.
enum Found {
    One(Option<Document>),
    Many(ReadMany),
    Rows(Vec<ResultRow>),
    Listing(Vec<Listed>),
}

impl Read<'_> {
    /// Run the read; with `at` (RFC 3339), over the documents as they were then.
    async fn run(
        &self,
        tx: &RequestTx,
        database: &str,
        at: Option<&str>,
    ) -> Result<Found, ServiceError> {
        if let Some(at) = at {
            return self.run_at(tx, database, at).await;
        }
        Ok(match self {
            Read::One { run_as, path } => Found::One(
                pg_documents::read_as(tx, database, run_as, path)
                    .await
                    .map_err(held_error)?,
            ),
            Read::Many { run_as, paths } => Found::Many(
                pg_documents::read_many(tx, database, run_as, paths)
                    .await
                    .map_err(held_error)?,
            ),
            Read::Query(input) => query_rows(tx, *input).await?,
            Read::Listing {
                listing,
                show_missing,
            } => Found::Listing(
                service_collections::list_in(tx, database, *listing, *show_missing, None)
                    .await
                    .map_err(held_error)?,
            ),
        })
    }

    /// [`Read::run`] at a time: the extension's `get_document_at`, `run_query_at` and
    /// `list_documents_at`.
    async fn run_at(
        &self,
        tx: &RequestTx,
        database: &str,
        at: &str,
    ) -> Result<Found, ServiceError> {
        Ok(match self {
            Read::One { path, .. } => {
                let read = pg_documents::read_many_at(tx, std::slice::from_ref(*path), at)
                    .await
                    .map_err(held_error)?;
                Found::One(read.documents.into_iter().flatten().next())
            }
            Read::Many { paths, .. } => Found::Many(
                pg_documents::read_many_at(tx, paths, at)
                    .await
                    .map_err(held_error)?,
            ),
            Read::Query(QueryInput::Structured(text) | QueryInput::StructuredAt(text, _)) => {
                query_rows(tx, QueryInput::StructuredAt(text, at)).await?
            }
            Read::Query(QueryInput::Sql(_)) => {
                return Err(ServiceError::invalid_argument(
                    "a query in the text dialect takes no read time",
                ))
            }
            Read::Listing {
                listing,
                show_missing,
            } => Found::Listing(
                service_collections::list_in(tx, database, *listing, *show_missing, Some(at))
                    .await
                    .map_err(held_error)?,
            ),
        })
    }

    /// The paths of a point read (`None`: a query, whose documents are known once it ran).
    fn paths(&self) -> Option<Vec<String>> {
        match self {
            Read::One { path, .. } => Some(vec![path.to_string()]),
            Read::Many { paths, .. } => Some(paths.iter().map(ToString::to_string).collect()),
            Read::Query(_) | Read::Listing { .. } => None,
        }
    }

    /// The locks of what a query found (a point read locks before it reads).
    fn locks(found: &Found) -> Result<Vec<Lock>, ServiceError> {
        match found {
            Found::Rows(rows) => rows
                .iter()
                .filter_map(|row| match row {
                    ResultRow::Document {
                        path, update_time, ..
                    } => Some(as_read(update_time).map(|p| (path.clone(), p))),
                    ResultRow::Aggregation { .. } => None,
                })
                .collect(),
            // The documents listed; a missing one (descendants only) is not read, not locked.
            Found::Listing(listed) => listed
                .iter()
                .filter_map(|l| l.document.as_ref())
                .map(|doc| as_read(&doc.update_time).map(|p| (doc.path.clone(), p)))
                .collect(),
            Found::One(_) | Found::Many(_) => Ok(Vec::new()),
        }
    }
}

/// All the rows of query `input`, read in `tx`.
async fn query_rows(tx: &RequestTx, input: QueryInput<'_>) -> Result<Found, ServiceError> {
    let stream = pg_query::start(tx, input).await.map_err(held_error)?;
    let mut stream = Box::pin(stream);
    let mut rows = Vec::new();
    while let Some(row) = futures_util::StreamExt::next(&mut stream).await {
        let row = row.map_err(|e| held_error(PgError::from(e)))?;
        rows.push(pg_query::decode(&row).map_err(held_error)?);
    }
    Ok(Found::Rows(rows))
}

/// Run `read` in transaction `tx`, locking what it reads in a read-write one.
///
/// A point read (one document or several by name) locks its documents first, as a write
/// would (the extension's `verify` without a precondition, in name order), then reads them:
/// a reader of a document another transaction holds queues behind it in Postgres' lock queue,
/// which is fair, and then reads its outcome; no retry is needed.
///
/// A query cannot know its documents before it runs: it reads, then locks what it read with
/// the precondition that each document is still as read. A document changed in between (a
/// concurrent transaction held it and committed) fails the lock: the read and the lock are
/// rolled back to a savepoint and tried again, now after that commit, at most
/// [`LOCK_ATTEMPTS`] times.
///
/// # Errors
/// The read's errors; ABORTED when a query's documents kept changing.
async fn read_locked(
    tx: &RequestTx,
    read_only: bool,
    database: &str,
    read: &Read<'_>,
    at: Option<&str>,
) -> Result<Found, ServiceError> {
    if read_only {
        return read.run(tx, database, at).await;
    }
    if let Some(mut paths) = read.paths() {
        paths.sort_unstable();
        paths.dedup();
        for chunk in paths.chunks(LOCKS_PER_STATEMENT) {
            pg_documents::commit(tx, &lock_entries(chunk))
                .await
                .map_err(held_error)?;
        }
        return read.run(tx, database, None).await;
    }
    let client = tx.client().map_err(held_error)?;
    for _ in 0..LOCK_ATTEMPTS {
        client
            .batch_execute("savepoint docstore_read")
            .await
            .map_err(|e| held_error(PgError::from(e)))?;
        let found = read.run(tx, database, None).await?;
        let locks = Read::locks(&found)?;
        let mut locked = Ok(());
        for chunk in locks.chunks(LOCKS_PER_STATEMENT) {
            locked = pg_documents::commit(tx, &verify_entries(chunk))
                .await
                .map(|_| ());
            if locked.is_err() {
                break;
            }
        }
        match locked {
            Ok(()) => {
                client
                    .batch_execute("release savepoint docstore_read")
                    .await
                    .map_err(|e| held_error(PgError::from(e)))?;
                return Ok(found);
            }
            Err(e) if changed_since_read(&e) => {
                client
                    .batch_execute("rollback to savepoint docstore_read")
                    .await
                    .map_err(|e| held_error(PgError::from(e)))?;
            }
            Err(e) => return Err(held_error(e)),
        }
    }
    Err(ServiceError::new(
        Code::Aborted,
        "the documents read kept changing while the transaction locked them",
    )
    .with_hint("begin the transaction again and retry"))
}

/// Run `read` in transaction `text` of `caller`: its settings, the read, its locks.
async fn read_in(
    service: &Service,
    caller: &Caller,
    database: &str,
    text: &str,
    run_as: &RunAs,
    read: Read<'_>,
) -> Result<Found, ServiceError> {
    let taken = service.transactions.take(caller, database, text).await?;
    let at = taken.held.read_time.get().cloned();
    in_taken(service, taken, async |tx: &RequestTx, read_only: bool| {
        set_call(tx, run_as).await.map_err(held_error)?;
        read_locked(tx, read_only, database, &read, at.as_deref()).await
    })
    .await
}

fn unexpected() -> ServiceError {
    ServiceError::from(PgError::Decode(
        "a read found another kind of answer".into(),
    ))
}

/// Run `call` on taken transaction `taken`; a failure ends the transaction.
async fn in_taken<T>(
    service: &Service,
    taken: Taken,
    call: impl AsyncFnOnce(&RequestTx, bool) -> Result<T, ServiceError>,
) -> Result<T, ServiceError> {
    let read_only = taken.held.read_only;
    let result = match taken.guard.as_ref() {
        Some(tx) => call(tx, read_only).await,
        None => Err(ServiceError::invalid_argument("the transaction has ended")),
    };
    match result {
        Ok(value) => {
            // The transaction stays held; the lock is given back with `taken`.
            taken.held.touch();
            drop(taken);
            Ok(value)
        }
        Err(e) => Err(failed(service, taken, e)),
    }
}

/// The document at `path`, read in transaction `text` (locked in a read-write one).
///
/// # Errors
/// NOT_FOUND when it does not exist; the id's errors; the rules' denial, database errors
/// (which end the transaction).
pub async fn get(
    service: &Service,
    caller: &Caller,
    database: &str,
    text: &str,
    path: &ResourcePath,
) -> Result<Document, ServiceError> {
    let run_as = caller.run_as(RulesMethod::Get, database, &path.to_string(), None);
    let read = Read::One {
        run_as: &run_as,
        path,
    };
    match read_in(service, caller, database, text, &run_as, read).await? {
        Found::One(Some(doc)) => Ok(doc),
        Found::One(None) => Err(ServiceError::not_found(format!(
            "document \"{path}\" does not exist"
        ))),
        _ => Err(unexpected()),
    }
}

/// Read `paths` in transaction `text` (locked in a read-write one).
///
/// # Errors
/// As [`get`].
pub async fn batch_get(
    service: &Service,
    caller: &Caller,
    database: &str,
    text: &str,
    paths: &[ResourcePath],
) -> Result<BatchRead, ServiceError> {
    let run_as = caller.run_as(RulesMethod::Get, database, "", None);
    let read = Read::Many {
        run_as: &run_as,
        paths,
    };
    let Found::Many(read) = read_in(service, caller, database, text, &run_as, read).await? else {
        return Err(unexpected());
    };
    BatchRead::of(read)
}

/// Run `query` in transaction `text`. Its rows are read whole, and in a read-write
/// transaction its documents are then locked, with the update time read as their
/// precondition (read again when one changed in between).
///
/// # Errors
/// ABORTED when its documents kept changing; as [`get`].
pub async fn query(
    service: &Service,
    caller: &Caller,
    database: &str,
    text: &str,
    query: &Query,
) -> Result<QueryRows, ServiceError> {
    let (input, info) = match query {
        Query::Text(q) => (QueryInput::Sql(q), text_query_info(q)),
        Query::Structured(q) => (
            QueryInput::Structured(q),
            serde_json::from_str::<Json>(q)
                .map(|j| structured_query_info(&j))
                .unwrap_or(Json::Null),
        ),
        Query::Collection { .. } => {
            return Err(ServiceError::invalid_argument(
                "a collection listing takes no transaction",
            ))
        }
        Query::StructuredAt { .. } => {
            return Err(ServiceError::invalid_argument(
                "a query reads in a transaction or at a read_time, not both",
            ))
        }
    };
    let run_as = caller.run_as(RulesMethod::List, database, "", Some(info));
    let read = Read::Query(input);
    let Found::Rows(rows) = read_in(service, caller, database, text, &run_as, read).await? else {
        return Err(unexpected());
    };
    Ok(QueryRows::buffered(rows))
}

/// ListDocuments of `listing` in transaction `text` (the admin's only, as outside one:
/// [`service_collections::may_list`]). In a read-write transaction the documents listed are
/// then locked as a query's are (read again when one changed in between); a read-only one
/// lists its snapshot.
///
/// # Errors
/// PERMISSION_DENIED for a caller other than the admin; as [`query`].
pub async fn list_documents(
    service: &Service,
    caller: &Caller,
    database: &str,
    text: &str,
    listing: Listing<'_>,
    show_missing: bool,
) -> Result<Vec<Listed>, ServiceError> {
    service_collections::may_list(caller)?;
    let read = Read::Listing {
        listing,
        show_missing,
    };
    match read_in(service, caller, database, text, &RunAs::Admin, read).await? {
        Found::Listing(listed) => Ok(listed),
        _ => Err(unexpected()),
    }
}

/// Apply `writes` (`docstore.commit`'s JSON array text) in transaction `text`, read back
/// `read_back` (as [`super::commit::CommitRequest`]'s) and commit it.
///
/// # Errors
/// INVALID_ARGUMENT for writes in a read-only transaction; ABORTED for a serialization
/// failure, a deadlock or a lock timeout; the extension's errors; the id's errors. The
/// transaction is ended either way.
pub async fn commit(
    service: &Service,
    caller: &Caller,
    database: &str,
    text: &str,
    writes: &str,
    read_back: &[ResourcePath],
) -> Result<Committed, ServiceError> {
    let mut taken = service.transactions.take(caller, database, text).await?;
    let empty = serde_json::from_str::<Json>(writes)
        .ok()
        .and_then(|w| w.as_array().map(Vec::is_empty))
        .unwrap_or(false);
    if taken.held.read_only && !empty {
        return Err(failed(
            service,
            taken,
            ServiceError::invalid_argument("a read-only transaction cannot write"),
        ));
    }
    let run_as = caller.run_as(RulesMethod::Write, database, "", None);
    let Some(tx) = taken.guard.take() else {
        return Err(invalid(text));
    };
    service.transactions.release(taken);
    let applied = async {
        set_call(&tx, &run_as).await.map_err(held_error)?;
        let answer = if empty {
            RawJson(format!(
                "{{\"commitTime\":\"{}\",\"updateTimes\":[]}}",
                super::context::now_rfc3339()
            ))
        } else {
            pg_documents::commit(&tx, writes)
                .await
                .map_err(held_error)?
        };
        let read_back = pg_documents::read_written(&tx, database, read_back)
            .await
            .map_err(held_error)?;
        Ok(Committed { answer, read_back })
    }
    .await;
    match applied {
        Ok(answer) => {
            tx.commit().await.map_err(held_error)?;
            Ok(answer)
        }
        Err(e) => {
            if let Err(r) = tx.rollback().await {
                tracing::debug!(error = %r, "rollback after a failed commit");
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_caller: usize, total: usize) -> Limits {
        Limits {
            idle: Duration::from_secs(60),
            lifetime: Duration::from_secs(270),
            lock_timeout: Duration::from_secs(10),
            per_caller,
            total,
        }
    }

    fn user(sub: &str) -> Principal {
        Principal::User(serde_json::json!({ "sub": sub }))
    }

    #[test]
    fn bounds_per_caller_and_in_total() {
        let t = Transactions::new(limits(2, 3));
        let a1 = t.reserve(&user("a"), "(default)", false).unwrap();
        let _a2 = t.reserve(&user("a"), "(default)", false).unwrap();
        let e = t.reserve(&user("a"), "(default)", true).err().unwrap();
        assert_eq!(e.code, Code::ResourceExhausted);
        assert_eq!(e.limit, Some("transactions_per_caller"));
        let _b1 = t.reserve(&user("b"), "(default)", false).unwrap();
        let e = t.reserve(&user("c"), "(default)", false).err().unwrap();
        assert_eq!(e.limit, Some("transactions"));
        // The admin key has no per-caller bound, but the total holds it too.
        assert_eq!(
            t.reserve(&Principal::Admin, "(default)", false)
                .err()
                .unwrap()
                .limit,
            Some("transactions")
        );
        // Released, the slot is free again.
        t.release(a1);
        assert_eq!(t.held(), 2);
        assert!(t.reserve(&user("a"), "(default)", false).is_ok());
    }

    #[test]
    fn no_transactions_when_the_total_is_zero() {
        let t = Transactions::new(limits(5, 0));
        let e = t
            .reserve(&Principal::Admin, "(default)", false)
            .err()
            .unwrap();
        assert_eq!(e.code, Code::ResourceExhausted);
    }

    #[tokio::test]
    async fn ids_are_owned_and_expire() {
        let mut l = limits(5, 5);
        l.idle = Duration::from_millis(0);
        let t = Transactions::new(l);
        let taken = t.reserve(&user("a"), "(default)", false).unwrap();
        let id = encode_id(&taken.id);
        assert_eq!(decode_id(&id).unwrap(), taken.id);
        drop(taken);
        let caller = |p: Principal| Caller {
            principal: p,
            method: "POST".into(),
            peer: None,
        };
        let e = t
            .take(&caller(user("b")), "(default)", &id)
            .await
            .err()
            .unwrap();
        assert_eq!(e.code, Code::PermissionDenied);
        std::thread::sleep(Duration::from_millis(2));
        let e = t
            .take(&caller(user("a")), "(default)", &id)
            .await
            .err()
            .unwrap();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.contains("invalid or expired"), "{e:?}");
        assert_eq!(t.held(), 0);
        for bad in ["", "x", "AAAA", "!!!!"] {
            let e = decode_id(bad).err().unwrap();
            assert_eq!(e.code, Code::InvalidArgument);
        }
    }

    #[tokio::test]
    async fn the_reaper_forgets_expired_transactions() {
        let mut l = limits(5, 5);
        l.idle = Duration::from_millis(0);
        let t = Transactions::new(l);
        drop(t.reserve(&user("a"), "(default)", false).unwrap());
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(t.reap(), 1);
        assert_eq!(t.held(), 0);
        // Without a timeout passed, nothing is reaped.
        let t = Transactions::new(limits(5, 5));
        drop(t.reserve(&user("a"), "(default)", false).unwrap());
        assert_eq!(t.reap(), 0);
        assert_eq!(t.held(), 1);
    }
}
