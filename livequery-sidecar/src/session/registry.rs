//! The stream registry (`--nats-url`; docs/listen.md, "Resuming on another process"): one
//! JetStream key-value entry per listen stream, so that another sidecar process of the same
//! Postgres can adopt a stream a client resumes there.
//!
//! An entry holds what adopting needs and nothing the client did not send: the stream's
//! database, its owner key and quota, whether it obeys the security rules, the process that
//! holds it, and each target as the client named it (its id, and its query as structured JSON
//! or its document path). It is written before the reply that makes a stream or a change of
//! its targets visible to the client, claimed (a compare-and-set on the key's revision) by the
//! process that adopts the stream, and deleted when the stream ends for good on its holder,
//! whose [`End`] (the reset it ended with) another bucket keeps for [`ENDED_KEPT`], so that a
//! resume on any process answers the reset the holder would.
//!
//! Read back, an entry is outside input: [`decode`] refuses anything malformed with a
//! [`RegistryError::Malformed`], never a panic.

use async_nats::jetstream::kv::{self, Operation, Store};
use async_nats::jetstream::stream;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::events::ResetReason;
use super::TargetRequest;
use crate::matcher::TargetSpec;

/// The key-value bucket of the registry.
pub const BUCKET: &str = "docstore_streams";

/// The key-value bucket of ended streams' [`End`]s.
pub const ENDED_BUCKET: &str = "docstore_ended";

/// How long the end of a stream is kept: as long as a client may come back with a token of
/// it and expect the reset the stream ended with rather than `restart`.
pub const ENDED_KEPT: std::time::Duration = std::time::Duration::from_secs(3600);

/// The largest entry [`decode`] reads (a stream of 1,000 targets of large queries fits).
const MAX_ENTRY: usize = 8 << 20;

/// Why the registry could not answer.
#[derive(Debug, Error)]
pub enum RegistryError {
    /// NATS or JetStream refused or failed.
    #[error("stream registry: {0}")]
    Nats(String),
    /// An entry that is not a registry entry of this version.
    #[error("stream registry entry is malformed: {0}")]
    Malformed(String),
    /// Another process claimed the stream first.
    #[error("stream registry: another process claimed the stream")]
    Claimed,
}

/// How a stream ended for good: written before its registry entry is deleted, read by a
/// process asked to resume a stream that has no entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct End {
    /// The owner key of the stream: another caller's resume is told `permission`.
    pub owner: String,
    /// The reason of the stream's closing reset ([`ResetReason::as_str`]).
    pub reason: String,
}

impl End {
    /// The reset a resume of the ended stream by `caller` (an owner key) gets.
    pub fn reset_for(&self, caller: &str) -> ResetReason {
        if self.owner != caller {
            return ResetReason::Permission;
        }
        ResetReason::parse(&self.reason).unwrap_or(ResetReason::Restart)
    }
}

/// A value of the registry's buckets from its JSON bytes, at most [`MAX_ENTRY`] of them.
///
/// # Errors
/// [`RegistryError::Malformed`] for more bytes or JSON the type refuses.
fn json_of<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, RegistryError> {
    if bytes.len() > MAX_ENTRY {
        return Err(RegistryError::Malformed(format!(
            "{} bytes, more than {MAX_ENTRY}",
            bytes.len()
        )));
    }
    serde_json::from_slice(bytes).map_err(|e| RegistryError::Malformed(e.to_string()))
}

/// An [`End`] from its bytes.
///
/// # Errors
/// [`RegistryError::Malformed`] for anything but an end whose reason is a reset's.
pub fn decode_end(bytes: &[u8]) -> Result<End, RegistryError> {
    let end: End = json_of(bytes)?;
    if ResetReason::parse(&end.reason).is_none() {
        return Err(RegistryError::Malformed(format!(
            "\"{}\" is no reset's reason",
            end.reason
        )));
    }
    Ok(end)
}

/// A target as the registry keeps it: exactly one of `query` (Firestore's structured query)
/// and `document` (a document path).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetEntry {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<String>,
    /// From which position the client holds the target's results: absent (`None`), from
    /// the stream's first event (a target the stream opened with; every target of an entry
    /// written before the field existed); `null` (`Some(None)`), not known to be held (a
    /// target added to the running stream, one an adoption sends a snapshot of, or any
    /// target of a stream reset in place, whose next snapshot is not recorded yet); a
    /// position, that of that snapshot.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub shown: Option<Option<u64>>,
}

/// A field that is present, `null` included (absent is the field's default, `None`).
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<u64>>, D::Error> {
    Option::<u64>::deserialize(deserializer).map(Some)
}

/// One stream's entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The format's version (1).
    pub version: u32,
    /// The docstore database id of the stream.
    pub database: String,
    /// The owner key (`admin`, `anonymous`, `user:<sub>`): only it may resume the stream.
    pub owner: String,
    /// The key of the per-caller stream cap.
    pub quota: Option<String>,
    /// Whether the stream's events go through the security rules (every non-admin stream).
    pub rules: bool,
    /// The instance id of the process that holds the stream.
    pub holder: String,
    pub targets: Vec<TargetEntry>,
}

impl TargetEntry {
    /// A target as the registry keeps it.
    pub fn of(target: &TargetRequest) -> TargetEntry {
        match &target.spec {
            TargetSpec::Query(query) => TargetEntry {
                id: target.id.clone(),
                query: Some(docstore_core::query::to_structured(query)),
                document: None,
                shown: None,
            },
            TargetSpec::Document(path) => TargetEntry {
                id: target.id.clone(),
                query: None,
                document: Some(path.to_string()),
                shown: None,
            },
        }
    }

    /// A target added to a running stream: the client holds none of its results until its
    /// first snapshot is recorded.
    pub fn added(target: &TargetRequest) -> TargetEntry {
        TargetEntry {
            shown: Some(None),
            ..TargetEntry::of(target)
        }
    }

    /// Whether a client whose last event is at `position` holds the target's results there:
    /// a target shown from the stream's start, or whose first snapshot is at or before it.
    pub fn held_at(&self, position: u64) -> bool {
        match self.shown {
            None => true,
            Some(shown) => shown.is_some_and(|first| first <= position),
        }
    }

    /// The target again, validated as a request's.
    ///
    /// # Errors
    /// [`RegistryError::Malformed`] for a query or path core refuses, or neither or both.
    pub fn request(&self) -> Result<TargetRequest, RegistryError> {
        let spec = match (&self.query, &self.document) {
            (Some(query), None) => TargetSpec::parse_structured(query),
            (None, Some(path)) => TargetSpec::document(path),
            _ => {
                return Err(RegistryError::Malformed(format!(
                    "target \"{}\" needs exactly one of query and document",
                    self.id
                )))
            }
        }
        .map_err(|e| RegistryError::Malformed(format!("target \"{}\": {e}", self.id)))?;
        Ok(TargetRequest {
            id: self.id.clone(),
            spec,
        })
    }
}

/// The bytes of an entry.
pub fn encode(entry: &Entry) -> Vec<u8> {
    // A derived Serialize of strings, numbers and JSON values cannot fail.
    serde_json::to_vec(entry).unwrap_or_default()
}

/// An entry from its bytes.
///
/// # Errors
/// [`RegistryError::Malformed`] for anything but an entry of version 1 whose targets core
/// accepts.
pub fn decode(bytes: &[u8]) -> Result<(Entry, Vec<TargetRequest>), RegistryError> {
    let entry: Entry = json_of(bytes)?;
    if entry.version != 1 {
        return Err(RegistryError::Malformed(format!(
            "version {} (this sidecar reads 1)",
            entry.version
        )));
    }
    let targets = entry
        .targets
        .iter()
        .map(TargetEntry::request)
        .collect::<Result<Vec<_>, _>>()?;
    let mut ids: Vec<&str> = targets.iter().map(|t| t.id.as_str()).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        return Err(RegistryError::Malformed("a target id repeats".into()));
    }
    Ok((entry, targets))
}

/// The key-value bucket `name` (history 1; entries expire after `max_age`, zero: never),
/// created when missing. Its stream is made as async-nats' `create_key_value` makes it, but
/// directly: that call first reads the account's info, whose reply from nats-server 2.9 lacks
/// fields async-nats 0.51 requires. The stream registry's bucket and the presence buckets
/// (`session::presence`) are made here.
///
/// # Errors
/// NATS or JetStream refused (the error's text).
pub async fn key_value(
    jetstream: &async_nats::jetstream::Context,
    name: &str,
    description: &str,
    max_age: std::time::Duration,
) -> Result<Store, String> {
    jetstream
        .get_or_create_stream(stream::Config {
            name: format!("KV_{name}"),
            description: Some(description.to_owned()),
            subjects: vec![format!("$KV.{name}.>")],
            max_messages_per_subject: 1,
            max_age,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: stream::DiscardPolicy::New,
            num_replicas: 1,
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    jetstream
        .get_key_value(name)
        .await
        .map_err(|e| e.to_string())
}

/// Whether two entries are one stream on one holder with the same targets, whatever each
/// says of its targets' first snapshots.
fn same_stream(a: &Entry, b: &Entry) -> bool {
    a.version == b.version
        && a.database == b.database
        && a.owner == b.owner
        && a.quota == b.quota
        && a.rules == b.rules
        && a.holder == b.holder
        && a.targets.len() == b.targets.len()
        && a.targets
            .iter()
            .zip(&b.targets)
            .all(|(x, y)| x.id == y.id && x.query == y.query && x.document == y.document)
}

fn nats(e: impl std::fmt::Display) -> RegistryError {
    RegistryError::Nats(e.to_string())
}

/// What [`Registry::forget`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forgotten {
    /// The holder's entry was deleted.
    Deleted,
    /// There was no entry (already deleted, or never written).
    Absent,
    /// Another process holds the stream (it adopted it): its entry stays.
    HeldBy(String),
}

/// The registry of this process: the bucket and the holder name it writes.
#[derive(Clone)]
pub struct Registry {
    store: Store,
    /// The ends of streams ([`ENDED_BUCKET`]), each kept [`ENDED_KEPT`].
    ended: Store,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Registry")
    }
}

impl Registry {
    /// Connect to NATS at `url` and open the registry's bucket (created when missing).
    ///
    /// # Errors
    /// [`RegistryError::Nats`] when NATS cannot be reached or JetStream is not enabled.
    pub async fn connect(url: &str) -> Result<Registry, RegistryError> {
        let client = crate::source::jetstream::options(url)
            .map_err(RegistryError::Nats)?
            .connect(url)
            .await
            .map_err(nats)?;
        let jetstream = async_nats::jetstream::new(client);
        let store = key_value(
            &jetstream,
            BUCKET,
            "pg_docstore listen streams (docs/listen.md)",
            std::time::Duration::ZERO,
        )
        .await
        .map_err(nats)?;
        let ended = key_value(
            &jetstream,
            ENDED_BUCKET,
            "pg_docstore ended listen streams (docs/listen.md)",
            ENDED_KEPT,
        )
        .await
        .map_err(nats)?;
        Ok(Registry { store, ended })
    }

    /// The entry of `stream` and its revision (`None`: no entry).
    ///
    /// # Errors
    /// [`RegistryError::Nats`]; [`RegistryError::Malformed`] for an entry it cannot read.
    pub async fn get(
        &self,
        stream: &str,
    ) -> Result<Option<(Entry, Vec<TargetRequest>, u64)>, RegistryError> {
        let Some(found) = self.store.entry(stream).await.map_err(nats)? else {
            return Ok(None);
        };
        if found.operation != Operation::Put {
            return Ok(None);
        }
        let (entry, targets) = decode(&found.value)?;
        Ok(Some((entry, targets, found.revision)))
    }

    /// How `stream` ended, if it ended for good within [`ENDED_KEPT`] (`None`: it did not, or
    /// its end is older; an end that cannot be read counts as none).
    ///
    /// # Errors
    /// [`RegistryError::Nats`].
    pub async fn ended(&self, stream: &str) -> Result<Option<End>, RegistryError> {
        let Some(found) = self.ended.entry(stream).await.map_err(nats)? else {
            return Ok(None);
        };
        if found.operation != Operation::Put {
            return Ok(None);
        }
        match decode_end(&found.value) {
            Ok(end) => Ok(Some(end)),
            Err(e) => {
                tracing::warn!(stream, error = %e, "a stream's end cannot be read: it counts as unknown");
                Ok(None)
            }
        }
    }

    /// Write the entry of `stream`.
    ///
    /// # Errors
    /// [`RegistryError::Nats`].
    pub async fn put(&self, stream: &str, entry: &Entry) -> Result<(), RegistryError> {
        self.store
            .put(stream, encode(entry).into())
            .await
            .map(|_| ())
            .map_err(nats)
    }

    /// Write the entry of `stream` if it is still at `revision`.
    ///
    /// # Errors
    /// [`RegistryError::Claimed`] when it changed meanwhile, [`RegistryError::Nats`].
    pub async fn claim(
        &self,
        stream: &str,
        entry: &Entry,
        revision: u64,
    ) -> Result<(), RegistryError> {
        match self
            .store
            .update(stream, encode(entry).into(), revision)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                Err(RegistryError::Claimed)
            }
            Err(e) => Err(nats(e)),
        }
    }

    /// Take over the entry of `stream`, read at `revision` as `read`, with `claimed` (the
    /// adopter's copy of it). A write between the read and the claim is read again: when it
    /// left the same holder and the same targets (the holder's own record of a target's
    /// first snapshot or of a reset in place), the claim is tried again over it; an entry
    /// another process took, one whose targets changed, or one deleted (the stream ended
    /// for good) is [`RegistryError::Claimed`]. Taking every such write for another
    /// process's claim reset a stream the gateway had moved off a live but silent matcher
    /// while that matcher recorded a snapshot.
    ///
    /// # Errors
    /// [`RegistryError::Claimed`]; [`RegistryError::Nats`]; [`RegistryError::Malformed`].
    pub async fn take_over(
        &self,
        stream: &str,
        claimed: &Entry,
        read: &Entry,
        mut revision: u64,
    ) -> Result<(), RegistryError> {
        for _ in 0..8 {
            match self.claim(stream, claimed, revision).await {
                Err(RegistryError::Claimed) => {}
                other => return other,
            }
            match self.get(stream).await? {
                Some((now, _, written)) if same_stream(read, &now) => revision = written,
                _ => return Err(RegistryError::Claimed),
            }
        }
        Err(RegistryError::Claimed)
    }

    /// Change the entry of `stream` held by `holder` with `change` (a compare-and-set,
    /// retried when another write came between); nothing when it has none or another holder.
    ///
    /// # Errors
    /// [`RegistryError::Nats`]; [`RegistryError::Malformed`].
    pub async fn modify(
        &self,
        stream: &str,
        holder: &str,
        change: impl Fn(&mut Entry),
    ) -> Result<(), RegistryError> {
        for _ in 0..8 {
            let Some((mut entry, _, revision)) = self.get(stream).await? else {
                return Ok(());
            };
            if entry.holder != holder {
                return Ok(());
            }
            change(&mut entry);
            match self.claim(stream, &entry, revision).await {
                Err(RegistryError::Claimed) => continue,
                other => return other,
            }
        }
        Err(RegistryError::Claimed)
    }

    /// Delete the entry of `stream` if `holder` holds it (a stream that ended for good here
    /// with `reason`, unless another process adopted it meanwhile), its [`End`] written first:
    /// a client that resumes on another process gets the reset the stream ended with (a slow
    /// reader's `lagged`), as on the holder, not `restart` for a stream it never heard of.
    ///
    /// A write between the read and the delete is read again: it may be an adoption (another
    /// holder: not ours to delete) or the holder's own record of the stream (its reset in
    /// place, a target's first snapshot: still ours). Taking every such write for an
    /// adoption left the entry of an ended stream in place, and a resume on its holder then
    /// continued the stream instead of resetting it.
    ///
    /// Answers what became of the entry: [`Forgotten`].
    ///
    /// # Errors
    /// [`RegistryError::Nats`]; [`RegistryError::Claimed`] when writes kept coming between
    /// the read and the delete eight times in a row.
    pub async fn forget(
        &self,
        stream: &str,
        holder: &str,
        reason: ResetReason,
    ) -> Result<Forgotten, RegistryError> {
        let mut ended = false;
        for _ in 0..8 {
            let Some(found) = self.store.entry(stream).await.map_err(nats)? else {
                return Ok(Forgotten::Absent);
            };
            if found.operation != Operation::Put {
                return Ok(Forgotten::Absent);
            }
            match decode(&found.value) {
                Ok((entry, _)) if entry.holder != holder => {
                    return Ok(Forgotten::HeldBy(entry.holder));
                }
                Ok((entry, _)) if !ended => {
                    let end = End {
                        owner: entry.owner,
                        reason: reason.as_str().to_owned(),
                    };
                    // A derived Serialize of two strings cannot fail.
                    let bytes = serde_json::to_vec(&end).unwrap_or_default();
                    self.ended.put(stream, bytes.into()).await.map_err(nats)?;
                    ended = true;
                }
                // Written already, or an entry no process can read (no one adopts it, and
                // its owner is unknown: a resume gets `restart`).
                _ => {}
            }
            match self
                .store
                .delete_expect_revision(stream, Some(found.revision))
                .await
            {
                Ok(()) => return Ok(Forgotten::Deleted),
                Err(e) if e.kind() == kv::DeleteErrorKind::WrongLastRevision => continue,
                Err(e) => return Err(nats(e)),
            }
        }
        Err(RegistryError::Claimed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A `nats-server -js` of its own on a free port, killed and its store removed on drop.
    struct Nats {
        child: std::process::Child,
        dir: std::path::PathBuf,
        url: String,
    }

    impl Nats {
        async fn start() -> Nats {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let dir = std::env::temp_dir().join(format!("docstore-registry-test-{port}"));
            let child = std::process::Command::new("nats-server")
                .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
                .arg(&dir)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("nats-server on PATH (make up installs it)");
            let nats = Nats {
                child,
                dir,
                url: format!("nats://127.0.0.1:{port}"),
            };
            for _ in 0..100 {
                if tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
                {
                    return nats;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            panic!("nats-server did not listen on {port}");
        }
    }

    impl Drop for Nats {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// The holder `abc` writing `stream`'s entry about every millisecond (as often as a busy
    /// holder records, far more than one does), each write `change`d with its number (1, 2,
    /// ...), until stopped.
    struct HolderWrites {
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
        task: tokio::task::JoinHandle<()>,
    }

    impl HolderWrites {
        fn start(registry: &Registry, stream: &str, change: fn(&mut Entry, u64)) -> HolderWrites {
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (registry, stream, stopped) = (registry.clone(), stream.to_owned(), stop.clone());
            let task = tokio::spawn(async move {
                let mut n = 0u64;
                while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    registry
                        .modify(&stream, "abc", |e| change(e, n))
                        .await
                        .expect("modify");
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            });
            HolderWrites { stop, task }
        }

        async fn stop(self) {
            self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            self.task.await.expect("the holder's writes");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_ended_streams_entry_is_forgotten_while_its_holder_writes_it() {
        // The holder's own records (a reset in place, a target's first snapshot) may write
        // the entry between forget's read and its delete; the entry must still go, or a
        // resume on the holder continues a stream that ended for good. Red before forget
        // read such a write again: it took every one for an adoption and kept the entry.
        let nats = Nats::start().await;
        let registry = Registry::connect(&nats.url).await.expect("registry");
        let entry = sample();
        for i in 0..40 {
            let stream = format!("s{i}");
            registry.put(&stream, &entry).await.expect("put");
            let writer = HolderWrites::start(&registry, &stream, |e, n| {
                e.quota = Some(format!("sub:{n}"));
            });
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            let forgotten = registry
                .forget(&stream, "abc", ResetReason::Lagged)
                .await
                .expect("forget");
            assert_eq!(forgotten, Forgotten::Deleted, "round {i}");
            let left = registry.get(&stream).await.expect("get");
            writer.stop().await;
            assert!(left.is_none(), "round {i}: the ended stream's entry stayed");
            // Its end stays: another process's resume answers the stream's own reset.
            let end = registry
                .ended(&stream)
                .await
                .expect("ended")
                .expect("an end");
            assert_eq!(end.reset_for("user:u1"), ResetReason::Lagged, "round {i}");
            assert_eq!(end.reset_for("user:u2"), ResetReason::Permission);
        }
        // An entry another process adopted is not the old holder's to delete.
        let mut adopted = sample();
        adopted.holder = "other".into();
        registry.put("s-adopted", &adopted).await.expect("put");
        let forgotten = registry
            .forget("s-adopted", "abc", ResetReason::Lagged)
            .await
            .expect("forget");
        assert_eq!(forgotten, Forgotten::HeldBy("other".into()));
        assert_eq!(
            registry
                .forget("s-none", "abc", ResetReason::Lagged)
                .await
                .expect("forget"),
            Forgotten::Absent
        );
        let kept = registry.get("s-adopted").await.expect("get");
        assert_eq!(kept.map(|(e, _, _)| e.holder).as_deref(), Some("other"));
        // Neither the adopted stream nor one never registered ended.
        for stream in ["s-adopted", "s-none"] {
            assert_eq!(
                registry.ended(stream).await.expect("ended"),
                None,
                "{stream}"
            );
        }
    }

    fn sample() -> Entry {
        Entry {
            version: 1,
            database: "(default)".into(),
            owner: "user:u1".into(),
            quota: Some("sub:u1".into()),
            rules: true,
            holder: "abc".into(),
            targets: vec![
                TargetEntry {
                    id: "q".into(),
                    query: Some(serde_json::json!({
                        "from": [{"collectionId": "c"}],
                        "orderBy": [{"field": {"fieldPath": "n"}, "direction": "DESCENDING"}],
                        "limit": 3
                    })),
                    document: None,
                    shown: None,
                },
                TargetEntry {
                    id: "d".into(),
                    query: None,
                    document: Some("c/a".into()),
                    shown: None,
                },
            ],
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_adopter_takes_over_an_entry_its_holder_writes_but_not_another_claim() {
        // Between an adopter's read of the entry and its claim (a read of the targets from
        // Postgres in between) the holder may record a target's first snapshot: the
        // adoption still takes the stream over. Red before the claim was tried again: the
        // adoption gave up ("another process took it") and the stream was reset.
        let nats = Nats::start().await;
        let registry = Registry::connect(&nats.url).await.expect("registry");
        let read = sample();
        let mut claimed = read.clone();
        claimed.holder = "new".into();
        for i in 0..40 {
            let stream = format!("s{i}");
            registry.put(&stream, &read).await.expect("put");
            let (_, _, revision) = registry.get(&stream).await.expect("get").expect("entry");
            let writer = HolderWrites::start(&registry, &stream, |e, n| {
                e.targets[0].shown = Some(Some(n));
            });
            tokio::time::sleep(std::time::Duration::from_millis(3)).await;
            let taken = registry.take_over(&stream, &claimed, &read, revision).await;
            writer.stop().await;
            assert!(taken.is_ok(), "round {i}: {taken:?}");
            let now = registry.get(&stream).await.expect("get").expect("entry");
            assert_eq!(now.0, claimed, "round {i}");
        }
        // Another process's claim, a target added, the entry deleted: not taken over.
        let mut other = read.clone();
        other.holder = "other".into();
        let mut added = read.clone();
        added.targets.push(TargetEntry {
            id: "more".into(),
            query: None,
            document: Some("c/d".into()),
            shown: Some(None),
        });
        for (name, written) in [
            ("other", Some(other)),
            ("added", Some(added)),
            ("deleted", None),
        ] {
            registry.put(name, &read).await.expect("put");
            let (_, _, revision) = registry.get(name).await.expect("get").expect("entry");
            match &written {
                Some(entry) => registry.put(name, entry).await.expect("write"),
                None => {
                    registry
                        .forget(name, "abc", ResetReason::Restart)
                        .await
                        .expect("forget");
                }
            }
            let taken = registry.take_over(name, &claimed, &read, revision).await;
            assert!(
                matches!(taken, Err(RegistryError::Claimed)),
                "{name}: {taken:?}"
            );
            let now = registry.get(name).await.expect("get").map(|(e, _, _)| e);
            assert_eq!(now, written, "{name}");
        }
    }

    #[test]
    fn an_entry_round_trips_and_its_targets_are_validated() {
        let entry = sample();
        let (back, targets) = decode(&encode(&entry)).expect("a valid entry");
        assert_eq!(back, entry);
        assert_eq!(targets.len(), 2);
        // Encoded again from the parsed targets, the same specs come back.
        let again: Vec<TargetEntry> = targets.iter().map(TargetEntry::of).collect();
        let (_, reparsed) = decode(&encode(&Entry {
            targets: again,
            ..entry
        }))
        .expect("valid again");
        assert_eq!(reparsed, targets);
    }

    #[test]
    fn a_targets_first_snapshot_is_kept_compatibly() {
        // An entry without the field (written before it existed): every target is held.
        let old = br#"{"version":1,"database":"d","owner":"admin","quota":null,"rules":false,
            "holder":"h","targets":[{"id":"d","document":"c/a"}]}"#;
        let (entry, _) = decode(old).expect("an entry of before the field");
        assert_eq!(entry.targets[0].shown, None);
        assert!(entry.targets[0].held_at(0));
        // A target the stream opened with is written as before: no field.
        assert!(!String::from_utf8_lossy(&encode(&sample())).contains("shown"));
        // Added: `null` until its first snapshot, then held from that position on.
        let mut entry = sample();
        let (_, targets) = decode(&encode(&entry)).expect("valid");
        entry.targets[1] = TargetEntry::added(&targets[1]);
        let bytes = encode(&entry);
        assert!(String::from_utf8_lossy(&bytes).contains(r#""shown":null"#));
        let (back, _) = decode(&bytes).expect("valid");
        assert_eq!(back.targets[1].shown, Some(None));
        assert!(!back.targets[1].held_at(u64::MAX));
        entry.targets[1].shown = Some(Some(40));
        let (back, _) = decode(&encode(&entry)).expect("valid");
        assert_eq!(back.targets[1].shown, Some(Some(40)));
        assert!(!back.targets[1].held_at(39));
        assert!(back.targets[1].held_at(40));
        // Anything but a position or null is malformed; unknown fields still are.
        for bad in [
            r#""shown":-1"#,
            r#""shown":"0/28""#,
            r#""shown":1.5"#,
            r#""later":1"#,
        ] {
            let text = String::from_utf8_lossy(&encode(&sample()))
                .replace(r#""id":"d","#, &format!(r#""id":"d",{bad},"#));
            assert!(
                matches!(decode(text.as_bytes()), Err(RegistryError::Malformed(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn bad_entries_are_malformed() {
        let mut both = sample();
        both.targets[1].query = Some(serde_json::json!({"from": [{"collectionId": "c"}]}));
        let mut neither = sample();
        neither.targets[1].document = None;
        let mut repeated = sample();
        repeated.targets[1].id = "q".into();
        let mut bad_path = sample();
        bad_path.targets[1].document = Some("c".into());
        let mut bad_query = sample();
        bad_query.targets[0].query = Some(serde_json::json!({"limit": -1}));
        let mut version = sample();
        version.version = 2;
        for entry in [both, neither, repeated, bad_path, bad_query, version] {
            assert!(matches!(
                decode(&encode(&entry)),
                Err(RegistryError::Malformed(_))
            ));
        }
        for bytes in [&b""[..], b"null", b"{}", b"[1]", b"{\"version\":1}"] {
            assert!(matches!(decode(bytes), Err(RegistryError::Malformed(_))));
        }
    }

    #[test]
    fn an_end_names_a_reset() {
        let end = decode_end(br#"{"owner":"admin","reason":"retention_passed"}"#).expect("an end");
        assert_eq!(end.reset_for("admin"), ResetReason::RetentionPassed);
        for bad in [
            &br#"{"owner":"admin","reason":"tired"}"#[..],
            br#"{"owner":"admin"}"#,
            br#"{"owner":"admin","reason":"lagged","at":1}"#,
            b"",
            b"[]",
        ] {
            assert!(
                matches!(decode_end(bad), Err(RegistryError::Malformed(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&bytes);
            let _ = decode_end(&bytes);
        }

        #[test]
        fn mutated_entries_never_panic(cut in 0usize..600, byte in any::<u8>()) {
            let mut bytes = encode(&sample());
            if cut < bytes.len() {
                bytes[cut] = byte;
            }
            let _ = decode(&bytes);
        }
    }
}
