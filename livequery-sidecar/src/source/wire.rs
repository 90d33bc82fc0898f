//! The wire format of the change stream between an ingest and its gateways (the roles of
//! docs/architecture.md, "Processes"): one JetStream message payload per committed
//! transaction or slot creation, split into parts when it exceeds the server's
//! `max_payload`.
//!
//! A payload is a version byte ([`VERSION`]) followed by a JSON object:
//! `{"slot_created": LSN}` or `{"txn": {...}}` with the transaction's xid, LSNs (integers),
//! commit time (microseconds since 2000-01-01, as pgoutput sends it), its changes and its
//! transactional messages. A change carries `op` (`i`, `u`, `d`, `t`), `db`, `name` (the
//! encoded document name, hex; the path is decoded from it, as `entities` does), `data` (the
//! document's typed JSON text, `null` for an unchanged TOASTed value), `ct`/`ut` (the
//! times, microseconds since 2000-01-01) and `before` (the previous version, when the old
//! row came whole). Bytes are hex.
//!
//! The payload is outside input to a gateway: [`decode`] refuses anything malformed with a
//! [`WireError`] and never panics (the fuzz target `wire` checks that, and that a decoded
//! payload encodes to one that decodes to the same event).
//!
//! Pure, like `pgoutput.rs` and `entities.rs`, and included by path in the fuzz crate: it uses
//! nothing of the sidecar but its sibling modules `pgoutput`, `entities` and `transaction`.

use docstore_core::encoding;
use docstore_core::typed_json;
use docstore_core::value::{Map, Timestamp};
use serde_json::{json, Value as Json};
use thiserror::Error;

use super::entities::{Change, DocumentChange, DocumentData, DocumentKey, Previous};
use super::pgoutput::Lsn;
use super::transaction::{EmittedMessage, Transaction};

/// The version byte of this format.
pub const VERSION: u8 = 1;

/// The header naming a message's part of a split payload: `i/n`, 1-based.
pub const PART_HEADER: &str = "Docstore-Part";

/// What one payload carries.
#[derive(Debug, Clone, PartialEq)]
pub enum WireEvent {
    /// The ingest created the slot at this point: every stream resets.
    SlotCreated(Lsn),
    /// A committed transaction.
    Transaction(Transaction),
}

/// Why a payload was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum WireError {
    #[error("empty payload")]
    Empty,
    #[error("wire format version {0}, this gateway reads version 1")]
    Version(u8),
    #[error("payload is not JSON: {0}")]
    Json(String),
    #[error("payload field {0} is missing or has the wrong type")]
    Field(&'static str),
    #[error("payload change op {0:?} is unknown")]
    Op(String),
    #[error("payload hex field {0} is not hex")]
    Hex(&'static str),
    #[error("payload name is not an encoded document name: {0}")]
    Name(encoding::DecodeError),
    #[error("payload data is not a typed JSON map: {0}")]
    Data(typed_json::TypedJsonError),
    #[error("payload time {0} is out of range")]
    Time(i64),
    #[error("part header {0:?} is not i/n with 1 <= i <= n")]
    Part(String),
}

/// The payload of `event`.
pub fn encode(event: &WireEvent) -> Vec<u8> {
    let body = match event {
        WireEvent::SlotCreated(lsn) => json!({ "slot_created": lsn.0 }),
        WireEvent::Transaction(txn) => json!({ "txn": {
            "xid": txn.xid,
            "commit_lsn": txn.commit_lsn.0,
            "end_lsn": txn.end_lsn.0,
            "commit_time": txn.commit_time.postgres_micros(),
            "changes": txn.changes.iter().map(change_json).collect::<Vec<_>>(),
            "messages": txn.messages.iter().map(|m| json!({
                "lsn": m.lsn.0,
                "prefix": m.prefix,
                "content": hex(&m.content),
            })).collect::<Vec<_>>(),
        }}),
    };
    let mut out = vec![VERSION];
    out.extend_from_slice(body.to_string().as_bytes());
    out
}

fn change_json(change: &Change) -> Json {
    let before = |b: &Option<Box<Previous>>| match b {
        Some(p) => json!({
            "data": typed_json::map_to_string(&p.fields),
            "ct": p.create_time.postgres_micros(),
            "ut": p.update_time.postgres_micros(),
        }),
        None => Json::Null,
    };
    match change {
        Change::Insert(d) | Change::Update(d) => json!({
            "op": if matches!(change, Change::Insert(_)) { "i" } else { "u" },
            "db": d.database_id,
            "name": hex(&d.name),
            "data": match &d.data {
                DocumentData::Fields(fields) => Json::String(typed_json::map_to_string(fields)),
                DocumentData::UnchangedToast => Json::Null,
            },
            "ct": d.create_time.postgres_micros(),
            "ut": d.update_time.postgres_micros(),
            "before": before(&d.before),
        }),
        Change::Delete(k) => json!({
            "op": "d",
            "db": k.database_id,
            "name": hex(&k.name),
            "before": before(&k.before),
        }),
        Change::Truncate => json!({ "op": "t" }),
    }
}

/// The event of a payload.
///
/// # Errors
/// [`WireError`] for anything but a payload [`encode`] could have written.
pub fn decode(bytes: &[u8]) -> Result<WireEvent, WireError> {
    let (&version, body) = bytes.split_first().ok_or(WireError::Empty)?;
    if version != VERSION {
        return Err(WireError::Version(version));
    }
    let json: Json = serde_json::from_slice(body).map_err(|e| WireError::Json(e.to_string()))?;
    if let Some(lsn) = json.get("slot_created") {
        return Ok(WireEvent::SlotCreated(Lsn(lsn
            .as_u64()
            .ok_or(WireError::Field("slot_created"))?)));
    }
    let txn = json.get("txn").ok_or(WireError::Field("txn"))?;
    let xid = u32::try_from(u64_of(txn, "xid")?).map_err(|_| WireError::Field("xid"))?;
    let changes = array_of(txn, "changes")?
        .iter()
        .map(change_of)
        .collect::<Result<Vec<_>, _>>()?;
    let messages = array_of(txn, "messages")?
        .iter()
        .map(|m| {
            Ok(EmittedMessage {
                lsn: Lsn(u64_of(m, "lsn")?),
                prefix: str_of(m, "prefix")?.to_owned(),
                content: unhex(str_of(m, "content")?, "content")?,
            })
        })
        .collect::<Result<Vec<_>, WireError>>()?;
    Ok(WireEvent::Transaction(Transaction {
        xid,
        commit_lsn: Lsn(u64_of(txn, "commit_lsn")?),
        end_lsn: Lsn(u64_of(txn, "end_lsn")?),
        commit_time: time_of(txn, "commit_time")?,
        changes,
        messages,
    }))
}

fn change_of(json: &Json) -> Result<Change, WireError> {
    let op = str_of(json, "op")?;
    if op == "t" {
        return Ok(Change::Truncate);
    }
    let database_id = str_of(json, "db")?.to_owned();
    let name = unhex(str_of(json, "name")?, "name")?;
    let path = encoding::decode_name(&name).map_err(WireError::Name)?;
    let before = match json.get("before") {
        None | Some(Json::Null) => None,
        Some(b) => Some(Box::new(Previous {
            fields: fields_of(str_of(b, "data")?)?,
            create_time: time_of(b, "ct")?,
            update_time: time_of(b, "ut")?,
        })),
    };
    match op {
        "i" | "u" => {
            let data = match json.get("data") {
                Some(Json::Null) => DocumentData::UnchangedToast,
                Some(Json::String(text)) => DocumentData::Fields(fields_of(text)?),
                _ => return Err(WireError::Field("data")),
            };
            let document = DocumentChange {
                database_id,
                name,
                path,
                data,
                create_time: time_of(json, "ct")?,
                update_time: time_of(json, "ut")?,
                before,
            };
            Ok(if op == "i" {
                Change::Insert(document)
            } else {
                Change::Update(document)
            })
        }
        "d" => Ok(Change::Delete(DocumentKey {
            database_id,
            name,
            path,
            before,
        })),
        other => Err(WireError::Op(other.to_owned())),
    }
}

fn fields_of(text: &str) -> Result<Map, WireError> {
    let json = typed_json::json_from_str(text).map_err(WireError::Data)?;
    typed_json::map_from_json(&json).map_err(WireError::Data)
}

fn u64_of(json: &Json, field: &'static str) -> Result<u64, WireError> {
    json.get(field)
        .and_then(Json::as_u64)
        .ok_or(WireError::Field(field))
}

fn str_of<'a>(json: &'a Json, field: &'static str) -> Result<&'a str, WireError> {
    json.get(field)
        .and_then(Json::as_str)
        .ok_or(WireError::Field(field))
}

fn array_of<'a>(json: &'a Json, field: &'static str) -> Result<&'a Vec<Json>, WireError> {
    json.get(field)
        .and_then(Json::as_array)
        .ok_or(WireError::Field(field))
}

fn time_of(json: &Json, field: &'static str) -> Result<Timestamp, WireError> {
    let micros = json
        .get(field)
        .and_then(Json::as_i64)
        .ok_or(WireError::Field(field))?;
    Timestamp::from_postgres_micros(micros).ok_or(WireError::Time(micros))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

fn unhex(text: &str, field: &'static str) -> Result<Vec<u8>, WireError> {
    let digit = |c: u8| char::from(c).to_digit(16).ok_or(WireError::Hex(field));
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return Err(WireError::Hex(field));
    }
    bytes
        .chunks_exact(2)
        .map(|pair| match pair {
            [high, low] => Ok(u8::try_from(digit(*high)? << 4 | digit(*low)?)
                .map_err(|_| WireError::Hex(field))?),
            _ => Err(WireError::Hex(field)),
        })
        .collect()
}

/// `payload` in parts of at most `max` bytes (one part when it fits; `max` 0 is taken as 1).
pub fn split(payload: &[u8], max: usize) -> Vec<&[u8]> {
    if payload.len() <= max {
        return vec![payload];
    }
    payload.chunks(max.max(1)).collect()
}

/// The part header `i/n` read as `(i, n)`.
///
/// # Errors
/// [`WireError::Part`] unless `1 <= i <= n`.
pub fn part_of(header: &str) -> Result<(u32, u32), WireError> {
    let bad = || WireError::Part(header.to_owned());
    let (i, n) = header.split_once('/').ok_or_else(bad)?;
    let i: u32 = i.parse().map_err(|_| bad())?;
    let n: u32 = n.parse().map_err(|_| bad())?;
    if i == 0 || i > n {
        return Err(bad());
    }
    Ok((i, n))
}

/// Puts the parts of split payloads back together. Parts arrive in order: an ingest publishes
/// them one after the other, each once acknowledged. A part 1 starts a payload again (an
/// ingest that died mid-way and whose successor publishes the transaction anew); a part
/// that does not follow the one before drops what was gathered.
#[derive(Debug, Default)]
pub struct Reassembler {
    gathered: Vec<u8>,
    /// The part expected next and the count of parts, while a payload is being gathered.
    next: Option<(u32, u32)>,
}

/// What one part gives.
#[derive(Debug, PartialEq, Eq)]
pub enum Part {
    /// A whole payload.
    Whole(Vec<u8>),
    /// More parts are due.
    Pending,
    /// The part did not follow the one before: what was gathered is dropped.
    OutOfOrder { got: u32, expected: Option<u32> },
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take in a message: `part` is its header (`None`: a payload of one message).
    pub fn push(&mut self, part: Option<(u32, u32)>, bytes: &[u8]) -> Part {
        let Some((i, n)) = part else {
            self.next = None;
            self.gathered.clear();
            return Part::Whole(bytes.to_vec());
        };
        if i == 1 {
            self.gathered.clear();
        } else if self.next != Some((i, n)) {
            let expected = self.next.map(|(e, _)| e);
            self.next = None;
            self.gathered.clear();
            return Part::OutOfOrder { got: i, expected };
        }
        self.gathered.extend_from_slice(bytes);
        if i == n {
            self.next = None;
            return Part::Whole(std::mem::take(&mut self.gathered));
        }
        self.next = Some((i + 1, n));
        Part::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use docstore_core::path::ResourcePath;
    use docstore_core::value::Value;

    fn time(micros: i64) -> Timestamp {
        Timestamp::from_postgres_micros(micros).unwrap()
    }

    fn sample() -> Transaction {
        let path = ResourcePath::parse("rooms/a").unwrap();
        let name = encoding::encode_name(&path);
        let mut fields = Map::new();
        fields.insert("n".into(), Value::Integer(3));
        fields.insert("s".into(), Value::String("é\"x".into()));
        let previous = Previous {
            fields: fields.clone(),
            create_time: time(5),
            update_time: time(6),
        };
        Transaction {
            xid: 77,
            commit_lsn: Lsn(1000),
            end_lsn: Lsn(1040),
            commit_time: time(123_456),
            changes: vec![
                Change::Insert(DocumentChange {
                    database_id: "(default)".into(),
                    name: name.clone(),
                    path: path.clone(),
                    data: DocumentData::Fields(fields),
                    create_time: time(7),
                    update_time: time(7),
                    before: None,
                }),
                Change::Update(DocumentChange {
                    database_id: "(default)".into(),
                    name: name.clone(),
                    path: path.clone(),
                    data: DocumentData::UnchangedToast,
                    create_time: time(7),
                    update_time: time(8),
                    before: Some(Box::new(previous)),
                }),
                Change::Delete(DocumentKey {
                    database_id: "other".into(),
                    name,
                    path,
                    before: None,
                }),
                Change::Truncate,
            ],
            messages: vec![EmittedMessage {
                lsn: Lsn(990),
                prefix: "docstore-heartbeat".into(),
                content: vec![0, 255, 16],
            }],
        }
    }

    #[test]
    fn events_survive_the_trip() {
        let txn = WireEvent::Transaction(sample());
        assert_eq!(decode(&encode(&txn)), Ok(txn));
        let slot = WireEvent::SlotCreated(Lsn(42));
        assert_eq!(decode(&encode(&slot)), Ok(slot));
    }

    #[test]
    fn malformed_payloads_are_refused() {
        assert_eq!(decode(b""), Err(WireError::Empty));
        assert_eq!(decode(b"\x02{}"), Err(WireError::Version(2)));
        assert!(matches!(decode(b"\x01{"), Err(WireError::Json(_))));
        assert_eq!(decode(b"\x01{}"), Err(WireError::Field("txn")));
        let mut bytes = encode(&WireEvent::Transaction(sample()));
        let text = String::from_utf8(bytes.split_off(1)).unwrap();
        let broken = text.replacen("\"op\":\"i\"", "\"op\":\"x\"", 1);
        assert_eq!(
            decode(&[&[VERSION], broken.as_bytes()].concat()),
            Err(WireError::Op("x".into()))
        );
        let broken = text.replacen("\"xid\":77", "\"xid\":4294967296", 1);
        assert_eq!(
            decode(&[&[VERSION], broken.as_bytes()].concat()),
            Err(WireError::Field("xid"))
        );
    }

    #[test]
    fn parts_are_put_back_together() {
        let payload: Vec<u8> = (0..=255u8).collect();
        let parts = split(&payload, 100);
        assert_eq!(parts.len(), 3);
        let n = u32::try_from(parts.len()).unwrap();
        let mut r = Reassembler::new();
        // A first attempt cut short, then the whole payload again.
        assert_eq!(r.push(Some((1, n)), parts[0]), Part::Pending);
        for (i, part) in parts.iter().enumerate() {
            let i = u32::try_from(i).unwrap() + 1;
            let got = r.push(Some((i, n)), part);
            if i == n {
                assert_eq!(got, Part::Whole(payload.clone()));
            } else {
                assert_eq!(got, Part::Pending);
            }
        }
        assert_eq!(
            r.push(Some((2, n)), parts[1]),
            Part::OutOfOrder {
                got: 2,
                expected: None
            }
        );
        assert_eq!(split(&payload, 1000), vec![&payload[..]]);
        assert_eq!(part_of("2/3"), Ok((2, 3)));
        assert!(part_of("0/3").is_err() && part_of("4/3").is_err() && part_of("x").is_err());
    }
}
