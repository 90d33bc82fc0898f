//! The checks behind the sidecar's fuzz targets: the pgoutput decoder and the row decoder of
//! `docstore.entities`, over inputs of the kind a replication connection delivers.
//!
//! The library of the fuzz crate (each target in `fuzz_targets/` is one call into it), also
//! compiled into `tests/fuzz_seeds.rs` with `#[path]`. It includes the decoders by
//! path, so it depends on nothing but docstore-core, thiserror and std. A check never fails
//! because input is refused; it fails when a decoder panics (libFuzzer catches that) or
//! breaks a property below.

#[path = "../src/source/pgoutput.rs"]
pub mod pgoutput;

#[path = "../src/source/entities.rs"]
pub mod entities;

#[path = "../src/source/transaction.rs"]
pub mod transaction;

#[path = "../src/source/wire.rs"]
pub mod wire;

use entities::{Change, DocumentData, EntitiesDecoder};

/// What a check reports when a property does not hold.
pub type Failure = String;

/// A check: `Ok` when `data` is refused or decodes consistently.
pub type Check = fn(&[u8]) -> Result<(), Failure>;

/// Every fuzz target, by the name of its binary and of its directory under `fuzz/corpus/`.
pub const TARGETS: [(&str, Check); 2] = [("pgoutput", check_pgoutput), ("wire", check_wire)];

/// Split an input into messages: each is a big-endian u16 length and that many bytes (a
/// short last one takes what is left). One stream, so Relation messages reach the rows.
pub fn messages(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while let [high, low, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*high, *low])).min(tail.len());
        let (message, next) = tail.split_at(len);
        out.push(message);
        rest = next;
    }
    out
}

/// Frame messages as [`messages`] splits them (for seeds).
pub fn frame(messages: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        let len = u16::try_from(m.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&m[..usize::from(len)]);
    }
    out
}

/// Decode every message of a stream and feed the decoded ones to the entities decoder.
/// Properties: decoding is deterministic; a decoded change of docstore.entities has a path
/// whose encoding is its name, and an Update is the only change that may carry unchanged
/// TOAST data.
pub fn check_pgoutput(data: &[u8]) -> Result<(), Failure> {
    let mut decoder = EntitiesDecoder::new();
    for message in messages(data) {
        let first = pgoutput::decode(message);
        if first != pgoutput::decode(message) {
            return Err(format!("decoding {message:?} is not deterministic"));
        }
        let Ok(decoded) = first else { continue };
        let mut changes = Vec::new();
        if decoder.apply(&decoded, &mut changes).is_err() && !changes.is_empty() {
            return Err(format!("an error still pushed changes: {changes:?}"));
        }
        for change in &changes {
            let (path, name, unchanged) = match change {
                Change::Insert(d) => (&d.path, &d.name, d.data == DocumentData::UnchangedToast),
                Change::Update(d) => (&d.path, &d.name, false),
                Change::Delete(k) => (&k.path, &k.name, false),
                Change::Truncate => continue,
            };
            if &docstore_core::encoding::encode_name(path) != name {
                return Err(format!("path {path} does not encode to its name {name:?}"));
            }
            if unchanged {
                return Err("an Insert carried unchanged TOAST data".into());
            }
        }
    }
    Ok(())
}

/// A JetStream payload of the gateway (`wire`): refused with an error, or decoded into an
/// event that encodes to a payload decoding to the same event (nothing is lost or changed on
/// the way between an ingest and a gateway).
pub fn check_wire(data: &[u8]) -> Result<(), Failure> {
    let Ok(event) = wire::decode(data) else {
        return Ok(());
    };
    let again = wire::decode(&wire::encode(&event));
    if again.as_ref() != Ok(&event) {
        return Err(format!("{event:?} re-encoded decodes to {again:?}"));
    }
    Ok(())
}
