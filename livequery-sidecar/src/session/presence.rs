//! Who is there (`--role matcher`, `--matching remote`): matchers and remote-matching
//! gateways announce themselves in a JetStream key-value bucket each (`docstore_matchers`,
//! `docstore_gateways`) whose entries expire after [`EXPIRY`]; each process puts its entry
//! every [`BEAT`], and reads the other bucket's keys as often. A process whose entry expired
//! is gone: a gateway moves its streams to another matcher, a matcher stops forwarding to
//! that gateway.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use tokio::sync::watch;

/// The bucket matchers announce themselves in.
pub const MATCHERS: &str = "docstore_matchers";
/// The bucket remote-matching gateways announce themselves in.
pub const GATEWAYS: &str = "docstore_gateways";
/// How long an entry lives without being put again.
pub const EXPIRY: Duration = Duration::from_secs(4);
/// How often a process puts its entry and reads the other bucket.
pub const BEAT: Duration = Duration::from_secs(1);

/// The request/reply subject of a matcher's calls.
pub fn matcher_subject(id: &str) -> String {
    format!("docstore.matcher.{id}")
}

/// The subject a matcher forwards a gateway's frames on.
pub fn gateway_subject(id: &str) -> String {
    format!("docstore.gateway.{id}")
}

/// A fresh random id (16 hex digits): NATS-subject-safe. Falls back to the time and the
/// process id when the system has no randomness to give.
pub fn new_id() -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        #[allow(clippy::cast_possible_truncation)]
        let mixed = (nanos as u64) ^ (u64::from(std::process::id()) << 40);
        bytes = mixed.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bucket `name` (created when missing: history 1, entries expire after [`EXPIRY`]).
///
/// # Errors
/// NATS or JetStream refused.
pub async fn bucket(js: &jetstream::Context, name: &str) -> Result<kv::Store, String> {
    super::registry::key_value(
        js,
        name,
        "pg_docstore process presence (docs/architecture.md)",
        EXPIRY,
    )
    .await
    .map_err(|e| format!("bucket {name}: {e}"))
}

/// Put this process's entry in `bucket` every [`BEAT`], for the life of the process.
///
/// # Cancel safety
/// Runs for the life of the process.
pub async fn announce(store: kv::Store, id: String) {
    let value = serde_json::json!({ "id": id, "version": env!("CARGO_PKG_VERSION") }).to_string();
    let mut warned = false;
    loop {
        match store.put(&id, value.clone().into()).await {
            Ok(_) => warned = false,
            Err(e) if !warned => {
                tracing::warn!(id, error = %e, "this process's presence entry was not written");
                warned = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(BEAT).await;
    }
}

/// The ids live in `store`, read every [`BEAT`] into the returned channel (empty until the
/// first read; kept as it was while NATS does not answer). Each read is bounded by
/// [`EXPIRY`]: a listing that never ends (seen after a NATS restart: the key listing's
/// consumer delivered nothing and never said it was done) is abandoned and read again at the
/// next beat, instead of freezing the view for good (a gateway that still saw a killed
/// matcher as live never moved its streams, whose clients then waited for good).
pub fn watch_live(store: kv::Store) -> watch::Receiver<BTreeSet<String>> {
    let (tx, rx) = watch::channel(BTreeSet::new());
    tokio::spawn(async move {
        let mut failing = false;
        loop {
            match tokio::time::timeout(EXPIRY, read_keys(&store)).await {
                Ok(Some(live)) => {
                    if failing {
                        tracing::info!(bucket = store.name, "presence: read again");
                        failing = false;
                    }
                    tx.send_if_modified(|current| {
                        let changed = *current != live;
                        *current = live;
                        changed
                    });
                }
                outcome => {
                    if !failing {
                        let why = if outcome.is_err() {
                            "timed out"
                        } else {
                            "failed"
                        };
                        tracing::warn!(bucket = store.name, why, "presence: a read of the live ids did not complete; the last view stays until one does");
                        failing = true;
                    }
                }
            }
            if tx.is_closed() {
                return;
            }
            tokio::time::sleep(BEAT).await;
        }
    });
    rx
}

async fn read_keys(store: &kv::Store) -> Option<BTreeSet<String>> {
    let mut keys = store.keys().await.ok()?;
    let mut out = BTreeSet::new();
    while let Some(key) = keys.next().await {
        out.insert(key.ok()?);
    }
    Some(out)
}

/// The rendezvous choice of `key` over `live` (skipping `excluded`): the id with the
/// highest hash of (id, key), so that every gateway picks the same matcher for a key, and a
/// matcher that goes away moves only its own keys.
pub fn rendezvous<'a>(
    key: &str,
    live: impl IntoIterator<Item = &'a String>,
    excluded: &HashSet<String>,
) -> Option<String> {
    live.into_iter()
        .filter(|id| !excluded.contains(*id))
        .max_by_key(|id| weight(id, key))
        .cloned()
}

/// The weight of `id` for `key`: the first 8 bytes of SHA-256 over the id, a zero byte and the
/// key. A hash fixed by its definition, not `std`'s `DefaultHasher` (whose algorithm may change
/// between Rust releases), so that gateways built by different toolchains pick alike.
fn weight(id: &str, key: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(id.as_bytes())
        .chain_update([0u8])
        .chain_update(key.as_bytes())
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_moves_only_the_keys_of_a_gone_id() {
        let all: BTreeSet<String> = ["m1", "m2", "m3"].map(str::to_owned).into();
        let none = HashSet::new();
        let keys: Vec<String> = (0..200).map(|i| format!("stream{i}")).collect();
        let before: Vec<String> = keys
            .iter()
            .filter_map(|k| rendezvous(k, &all, &none))
            .collect();
        assert_eq!(before.len(), keys.len());
        for m in ["m1", "m2", "m3"] {
            assert!(before.iter().any(|b| b == m), "{m} gets some keys");
        }
        let gone = HashSet::from(["m2".to_owned()]);
        for (k, b) in keys.iter().zip(&before) {
            let after = rendezvous(k, &all, &gone);
            if b == "m2" {
                assert_ne!(after.as_deref(), Some("m2"));
            } else {
                assert_eq!(after.as_ref(), Some(b));
            }
        }
        assert_eq!(rendezvous("k", &BTreeSet::new(), &none), None);
    }

    #[test]
    fn weights_are_fixed_by_their_definition() {
        // The first 8 bytes, big-endian, of SHA-256 of "m1\0stream0" (computed apart, with
        // Python's hashlib): the same in every build.
        assert_eq!(weight("m1", "stream0"), 3_500_911_431_509_136_721);
        assert_ne!(weight("m1", "stream0"), weight("m2", "stream0"));
        // The separator: ("ab", "c") and ("a", "bc") weigh differently.
        assert_ne!(weight("ab", "c"), weight("a", "bc"));
    }
}
