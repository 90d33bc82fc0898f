//! The checks behind the fuzz targets, one per parser of outside input in `docstore-core`.
//!
//! This file is the library of the fuzz crate (each target in `fuzz_targets/` is one call
//! into it) and is also compiled into `tests/fuzz_seeds.rs` with `#[path]`, which runs every
//! file under `fuzz/corpus/<target>/` through the same check on stable Rust. So it depends on
//! nothing but `docstore_core` and std, and it reports a broken property as `Err` instead of
//! panicking (the targets turn an `Err` into a panic for libFuzzer; the test collects them).
//!
//! A check never fails because input is refused: refusing is the parser's job. It fails when
//! a parser panics, or when something it accepted does not survive a round trip.

use std::cmp::Ordering;

use docstore_core::commit::{self, CommitError, Operation, MAX_WRITES};
use docstore_core::encoding::{self, DecodeError};
use docstore_core::index::{IndexDefinition, Scope};
use docstore_core::mutation::{Mutation, MutationError, WriteKind};
use docstore_core::query::{self, Query};
use docstore_core::value::{Map, Timestamp};
use docstore_core::{compare, typed_json, ErrorKind, FieldPath, ResourcePath, Value};

/// What a check reports when a property does not hold.
pub type Failure = String;

/// A check: `Ok` when `data` is refused or round-trips, `Err` describing what broke.
pub type Check = fn(&[u8]) -> Result<(), Failure>;

/// Every fuzz target, by the name of its binary and of its directory under `fuzz/corpus/`.
pub const TARGETS: [(&str, Check); 7] = [
    ("typed_json", check_typed_json),
    ("decode", check_decode),
    ("paths", check_paths),
    ("mutation", check_mutation),
    ("index_fields", check_index_fields),
    ("query", check_query),
    ("commit", check_commit),
];

/// Target `typed_json`: [`typed_json::parse`] on UTF-8 text. A value it accepts must print
/// (with [`typed_json::to_string`] and [`typed_json::to_json`]) to typed JSON that parses
/// back to the identical value, and its encoding must decode to a value that compares equal.
pub fn check_typed_json(data: &[u8]) -> Result<(), Failure> {
    typed_json_round_trips(data).map_err(elide)
}

fn typed_json_round_trips(data: &[u8]) -> Result<(), Failure> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let Ok(value) = typed_json::parse(text) else {
        return Ok(());
    };

    let printed = typed_json::to_string(&value);
    match typed_json::parse(&printed) {
        Ok(again) if again == value => {}
        again => {
            return Err(format!(
            "typed JSON does not round-trip: {text:?} parses to {value:?}, prints as {printed:?}, \
                 which parses to {again:?}"
        ))
        }
    }
    match typed_json::from_json(&typed_json::to_json(&value)) {
        Ok(again) if again == value => {}
        again => {
            return Err(format!(
                "to_json/from_json does not round-trip {value:?}: got {again:?}"
            ))
        }
    }

    let encoded = encoding::encode(&value);
    match encoding::decode(&encoded) {
        Ok(decoded) if compare(&decoded, &value) == Ordering::Equal => Ok(()),
        decoded => Err(format!(
            "the encoding of a parsed value does not decode: {text:?} parses to {value:?}, encodes as \
             {encoded:02x?}, which decodes to {decoded:?}"
        )),
    }
}

/// Target `decode`: [`encoding::decode`], [`encoding::decode_prefix`] and
/// [`encoding::decode_name`] on arbitrary bytes. They must agree with each other; a decoded
/// value must re-encode to bytes that decode to the identical value and print as typed JSON
/// that parses back to it; a decoded name must re-encode to the same bytes and print as a path
/// that parses back to it.
pub fn check_decode(data: &[u8]) -> Result<(), Failure> {
    decoders_agree_and_round_trip(data).map_err(elide)
}

fn decoders_agree_and_round_trip(data: &[u8]) -> Result<(), Failure> {
    let whole = encoding::decode(data);

    // decode is decode_prefix plus "no trailing bytes".
    match encoding::decode_prefix(data) {
        Ok((value, used)) => {
            let Some(front) = data.get(..used) else {
                return Err(format!("decode_prefix of {data:02x?} claims {used} bytes"));
            };
            match encoding::decode(front) {
                Ok(again) if again == value => {}
                again => {
                    return Err(format!(
                        "decode_prefix of {data:02x?} gives {value:?} from {used} bytes, but decode of \
                         those bytes gives {again:?}"
                    ))
                }
            }
            let expected = if used == data.len() {
                Ok(value)
            } else {
                Err(DecodeError::TrailingBytes(data.len() - used))
            };
            if whole != expected {
                return Err(format!(
                    "decode of {data:02x?} gives {whole:?}, decode_prefix implies {expected:?}"
                ));
            }
        }
        Err(e) => {
            if whole != Err(e.clone()) {
                return Err(format!(
                    "decode of {data:02x?} gives {whole:?}, but decode_prefix fails with {e:?}"
                ));
            }
        }
    }

    if let Ok(value) = whole {
        let encoded = encoding::encode(&value);
        match encoding::decode(&encoded) {
            Ok(again) if again == value => {}
            again => {
                return Err(format!(
                    "a decoded value does not survive re-encoding: {data:02x?} decodes to {value:?}, which \
                     encodes as {encoded:02x?}, which decodes to {again:?}"
                ))
            }
        }
        let printed = typed_json::to_string(&value);
        match typed_json::parse(&printed) {
            Ok(again) if again == value => {}
            again => {
                return Err(format!(
                    "a decoded value is not valid typed JSON: {data:02x?} decodes to {value:?}, which prints as \
                     {printed:?}, which parses to {again:?}"
                ))
            }
        }
    }

    if let Ok(path) = encoding::decode_name(data) {
        let encoded = encoding::encode_name(&path);
        if encoded != data {
            return Err(format!(
                "name {data:02x?} decodes to {path:?}, which encodes as {encoded:02x?}"
            ));
        }
        let shown = path.to_string();
        match ResourcePath::parse(&shown) {
            Ok(again) if again == path => {}
            again => {
                return Err(format!(
                    "name {data:02x?} decodes to {path:?}, which prints as {shown:?}, which parses to {again:?}"
                ))
            }
        }
    }
    Ok(())
}

/// Target `paths`: [`ResourcePath::parse`] (and its document and collection forms) and
/// [`FieldPath::parse`] on UTF-8 text, and [`FieldPath::new`] on the text split at U+0000
/// (which no segment may contain). An accepted path must print as text that parses back to an
/// equal path; an accepted resource path must also survive the name encoding.
pub fn check_paths(data: &[u8]) -> Result<(), Failure> {
    paths_round_trip(data).map_err(elide)
}

fn paths_round_trip(data: &[u8]) -> Result<(), Failure> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };

    let parsed = ResourcePath::parse(text);
    let is_document = parsed.as_ref().map(ResourcePath::is_document);
    if ResourcePath::parse_document(text).is_ok() != (is_document == Ok(true))
        || ResourcePath::parse_collection(text).is_ok() != (is_document == Ok(false))
    {
        return Err(format!(
            "parse_document/parse_collection of {text:?} disagree with parse: {parsed:?}"
        ));
    }
    if let Ok(path) = parsed {
        resource_path_round_trips(&path)?;
    }

    if let Ok(path) = FieldPath::parse(text) {
        field_path_round_trips(&path)?;
        if FieldPath::new(path.segments().to_vec()).as_ref() != Ok(&path) {
            return Err(format!(
                "FieldPath::new refuses the segments of parsed {path:?}"
            ));
        }
    }

    // Segments straight from the text, so any content reaches the printer.
    if let Ok(path) = FieldPath::new(text.split('\0').map(str::to_owned).collect()) {
        field_path_round_trips(&path)?;
    }
    Ok(())
}

/// Target `mutation`: [`Mutation::parse`] of UTF-8 JSON as every kind of write. A write it
/// accepts must apply to a missing document, an empty one, a fixed one and (when the input is
/// itself a valid document) the input, failing only as documented: create of an existing
/// document, update of a missing one.
pub fn check_mutation(data: &[u8]) -> Result<(), Failure> {
    mutation_applies(data).map_err(elide)
}

/// A document with a field of every kind a transform can meet, including the extremes.
const EXISTING_DOCUMENT: &str = r#"{"a":{"b":1,"c":[1,2.5,"x",{"$double":"NaN"}]},"n":9223372036854775807,
    "m":-9223372036854775808,"d":1.7976931348623157e308,"nan":{"$double":"NaN"},"s":"x","t":null,
    "arr":[1,1.0,{"$double":"-0.0"},[],{}],"e":{}}"#;

fn mutation_applies(data: &[u8]) -> Result<(), Failure> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(text) else {
        return Ok(());
    };
    let Some(now) = Timestamp::from_micros(1_700_000_000_123_456) else {
        return Err("the commit time of the check is out of range".into());
    };
    let fixed = match typed_json::parse(EXISTING_DOCUMENT) {
        Ok(Value::Map(map)) => map,
        other => return Err(format!("EXISTING_DOCUMENT is not a document: {other:?}")),
    };
    let mut documents: Vec<Option<Map>> = vec![None, Some(Map::new()), Some(fixed)];
    if let Ok(own) = typed_json::map_from_json(&json) {
        documents.push(Some(own));
    }

    let kinds = [
        WriteKind::Create,
        WriteKind::Set { merge: false },
        WriteKind::Set { merge: true },
        WriteKind::Update,
    ];
    for kind in kinds {
        let Ok(mutation) = Mutation::parse(kind, &json) else {
            continue;
        };
        for existing in &documents {
            let expected = match (kind, existing) {
                (WriteKind::Create, Some(_)) => Err(MutationError::AlreadyExists),
                (WriteKind::Update, None) => Err(MutationError::NotFound),
                _ => Ok(()),
            };
            let result = mutation.apply(existing.as_ref(), now);
            if result.as_ref().map(|_| ()).map_err(Clone::clone) != expected {
                return Err(format!(
                    "{kind:?} {text:?} applied to {existing:?} gives {result:?}, expected {expected:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Target `index_fields`: [`IndexDefinition::parse_fields`] of UTF-8 JSON and [`Scope::parse`].
/// Fields it accepts must print ([`IndexDefinition::fields_json`]) as JSON that parses back to
/// the same fields; a scope must print as the text it was parsed from.
pub fn check_index_fields(data: &[u8]) -> Result<(), Failure> {
    index_fields_round_trip(data).map_err(elide)
}

fn index_fields_round_trip(data: &[u8]) -> Result<(), Failure> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    if let Some(scope) = Scope::parse(text) {
        if scope.as_str() != text {
            return Err(format!(
                "scope {text:?} parses to {scope:?}, which prints as {:?}",
                scope.as_str()
            ));
        }
    }
    let Ok(json) = serde_json::from_str::<serde_json::Value>(text) else {
        return Ok(());
    };
    let Ok(fields) = IndexDefinition::parse_fields(&json) else {
        return Ok(());
    };
    let printed = IndexDefinition::fields_json(&fields);
    match IndexDefinition::parse_fields(&printed) {
        Ok(again) if again == fields => Ok(()),
        again => Err(format!("index fields {text:?} parse to {fields:?}, print as {printed}, which parse to {again:?}")),
    }
}

/// Target `query`: both front ends of the query model on UTF-8 text, the text dialect
/// ([`query::parse_query`]) and the structured JSON form ([`query::parse_structured_str`]). A
/// query either accepts must print in both forms ([`Query`]'s `Display`,
/// [`query::to_structured`]) to something that parses back to the same query.
pub fn check_query(data: &[u8]) -> Result<(), Failure> {
    queries_round_trip(data).map_err(elide)
}

fn queries_round_trip(data: &[u8]) -> Result<(), Failure> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    if let Ok(parsed) = query::parse_query(text) {
        query_round_trips(text, &parsed)?;
    }
    if let Ok(parsed) = query::parse_structured_str(text) {
        query_round_trips(text, &parsed)?;
    }
    Ok(())
}

fn query_round_trips(text: &str, parsed: &Query) -> Result<(), Failure> {
    let _ = parsed.normalized_order();
    let printed = parsed.to_string();
    match query::parse_query(&printed) {
        Ok(again) if &again == parsed => {}
        again => {
            return Err(format!(
            "query {text:?} parses to {parsed:?}, prints as {printed:?}, which parses to {again:?}"
        ))
        }
    }
    let structured = query::to_structured(parsed);
    match query::parse_structured(&structured) {
        Ok(again) if &again == parsed => Ok(()),
        again => Err(format!(
            "query {text:?} parses to {parsed:?}, whose structured form {structured} parses to {again:?}"
        )),
    }
}

/// Target `commit`: [`commit::parse`] of UTF-8 JSON (the `docstore.commit` argument and the
/// HTTP `:commit` body). Accepted: one write per array item (at most [`MAX_WRITES`]), each
/// with the verb its item names, a document path that prints and parses back to itself, and
/// the same result from [`commit::parse_write`] alone. Refused: an argument error (never an
/// internal one) naming a write that [`commit::parse_write`] refuses the same way, after
/// writes it accepts.
pub fn check_commit(data: &[u8]) -> Result<(), Failure> {
    commit_is_consistent(data).map_err(elide)
}

fn commit_is_consistent(data: &[u8]) -> Result<(), Failure> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(text) else {
        return Ok(());
    };
    let items = json.as_array().map_or(&[][..], Vec::as_slice);
    match commit::parse(&json) {
        Ok(writes) => {
            if writes.len() != items.len() || writes.len() > MAX_WRITES {
                return Err(format!(
                    "{} writes from {} items: {text:?}",
                    writes.len(),
                    items.len()
                ));
            }
            for (write, item) in writes.iter().zip(items) {
                let verb = ["create", "set", "update", "delete", "verify"]
                    .into_iter()
                    .find(|v| item.get(v).is_some());
                let kind = match &write.operation {
                    Operation::Mutate(m) => Some(*m.kind()),
                    Operation::Delete | Operation::Verify => None,
                };
                let verified = matches!(write.operation, Operation::Verify);
                let agrees = matches!(
                    (verb, kind, verified),
                    (Some("create"), Some(WriteKind::Create), false)
                        | (Some("set"), Some(WriteKind::Set { .. }), false)
                        | (Some("update"), Some(WriteKind::Update), false)
                        | (Some("delete"), None, false)
                        | (Some("verify"), None, true)
                );
                if !agrees {
                    return Err(format!("{item} parsed as {kind:?}"));
                }
                let printed = write.path.to_string();
                match ResourcePath::parse_document(&printed) {
                    Ok(again) if again == write.path => {}
                    again => {
                        return Err(format!(
                            "the path of {item} prints as {printed:?}, which parses to {again:?}"
                        ))
                    }
                }
                match commit::parse_write(item) {
                    Ok(alone)
                        if alone.path == write.path && alone.precondition == write.precondition => {
                    }
                    alone => {
                        return Err(format!(
                            "{item} alone parses to {alone:?}, in the commit to {write:?}"
                        ))
                    }
                }
            }
            Ok(())
        }
        Err(error) => {
            if !matches!(
                error.kind(),
                ErrorKind::InvalidArgument | ErrorKind::InvalidTypedJson
            ) {
                return Err(format!(
                    "{text:?} is refused with kind {:?}: {error}",
                    error.kind()
                ));
            }
            match &error {
                CommitError::NotAnArray if json.is_array() => {
                    Err(format!("an array is refused as not an array: {text:?}"))
                }
                CommitError::TooManyWrites { count }
                    if *count != items.len() || *count <= MAX_WRITES =>
                {
                    Err(format!("{error} for {} items", items.len()))
                }
                CommitError::InWrite {
                    index,
                    error: cause,
                } => {
                    let Some(item) = items.get(*index) else {
                        return Err(format!("{error} names no item of {text:?}"));
                    };
                    if let Some(i) = items[..*index]
                        .iter()
                        .position(|item| commit::parse_write(item).is_err())
                    {
                        return Err(format!(
                            "{error} reported, but write {i} before it is refused too"
                        ));
                    }
                    match commit::parse_write(item) {
                        Err(alone) if alone == *cause => Ok(()),
                        alone => Err(format!("{error}, but the item alone gives {alone:?}")),
                    }
                }
                _ => Ok(()),
            }
        }
    }
}

/// Cut the middle out of a long message (a deep value prints long), keeping both ends.
fn elide(message: Failure) -> Failure {
    const KEEP: usize = 1_000;
    let chars: Vec<char> = message.chars().collect();
    if chars.len() <= 3 * KEEP {
        return message;
    }
    let head: String = chars[..KEEP].iter().collect();
    let tail: String = chars[chars.len() - KEEP..].iter().collect();
    format!(
        "{head} [.. {} characters ..] {tail}",
        chars.len() - 2 * KEEP
    )
}

fn resource_path_round_trips(path: &ResourcePath) -> Result<(), Failure> {
    let shown = path.to_string();
    match ResourcePath::parse(&shown) {
        Ok(again) if &again == path => {}
        again => {
            return Err(format!(
                "{path:?} prints as {shown:?}, which parses to {again:?}"
            ))
        }
    }
    let encoded = encoding::encode_name(path);
    match encoding::decode_name(&encoded) {
        Ok(again) if &again == path => Ok(()),
        again => Err(format!(
            "{path:?} encodes as {encoded:02x?}, which decodes to {again:?}"
        )),
    }
}

fn field_path_round_trips(path: &FieldPath) -> Result<(), Failure> {
    let shown = path.to_string();
    match FieldPath::parse(&shown) {
        Ok(again) if &again == path => Ok(()),
        again => Err(format!(
            "{path:?} prints as {shown:?}, which parses to {again:?}"
        )),
    }
}
