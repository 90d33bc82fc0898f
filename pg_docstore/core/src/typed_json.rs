//! Typed JSON: the one text form of a value (SQL, HTTP, SSE, SDK wire). See `docs/typed-json.md`.
//!
//! Plain JSON for null, booleans, strings, arrays and objects. A number without `.`/`e`/`E`
//! that fits int64 is an integer; any other number is a double. Other types are one-key
//! objects (`{"$timestamp": ..}`, `{"$bytes": ..}`, `{"$ref": ..}`, `{"$geo": ..}`,
//! `{"$double": ..}`, `{"$vector": ..}`); a map whose only key is a tag is `{"$map": {..}}`.
//!
//! The printer writes every double so that it is still a double after a trip through
//! PostgreSQL `jsonb` (which stores numbers as `numeric` and drops exponents): a double that
//! could be mistaken for an int64 is printed with `.0`, and `-0.0`, NaN and the infinities are
//! `{"$double": "-0.0" | "NaN" | "Infinity" | "-Infinity"}`.

use std::fmt::Write as _;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::Value as Json;
use thiserror::Error;

use crate::error::ErrorKind;
use crate::path::{FieldPath, ResourcePath};
use crate::value::{GeoPoint, Map, Timestamp, Value};

pub use crate::limits::MAX_VECTOR_DIMENSIONS;

/// Tags of value types.
pub const VALUE_TAGS: [&str; 7] = [
    "$timestamp",
    "$bytes",
    "$ref",
    "$geo",
    "$double",
    "$vector",
    "$map",
];
/// Tags of field transforms (only meaningful in writes).
pub const TRANSFORM_TAGS: [&str; 7] = [
    "$increment",
    "$max",
    "$min",
    "$serverTimestamp",
    "$arrayUnion",
    "$arrayRemove",
    "$delete",
];

/// Whether `key` is a tag (of a value type or a transform). Every tag starts with `$`: that
/// byte is looked at first, so a plain key costs one comparison, not a scan of the lists.
pub fn is_tag(key: &str) -> bool {
    key.starts_with('$') && (VALUE_TAGS.contains(&key) || TRANSFORM_TAGS.contains(&key))
}

/// Why typed JSON was refused. `at` is the field path of the offending value (`<root>` for
/// the value itself), so the message points at the problem.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TypedJsonError {
    #[error("invalid JSON: {0}")]
    Syntax(String),
    #[error(
        "\"$serde_json::private::Number\" is reserved: typed JSON cannot hold it as a key, and refuses text containing it"
    )]
    ReservedKey,
    #[error(
        "number {text} at {at} is out of range for a double (use {{\"$double\": \"Infinity\"}})"
    )]
    NumberOutOfRange { at: String, text: String },
    #[error("invalid {tag} at {at}: {reason}")]
    BadTag {
        at: String,
        tag: &'static str,
        reason: String,
    },
    #[error("field transform {tag} at {at} is only allowed in writes")]
    TransformNotAllowed { at: String, tag: String },
    #[error("value at {at} is nested more than 64 levels deep")]
    TooDeep { at: String },
    #[error("string at {at} contains U+0000, which cannot be stored")]
    NulCharacter { at: String },
}

impl TypedJsonError {
    /// The kind of failure: every typed JSON error is [`ErrorKind::InvalidTypedJson`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidTypedJson
    }
}

/// Parse typed JSON text.
///
/// # Errors
/// [`TypedJsonError::Syntax`] for malformed JSON, otherwise as [`from_json`].
pub fn parse(text: &str) -> Result<Value, TypedJsonError> {
    parse_with(text, &ValueBuild)
}

/// What [`parse_with`] builds from typed JSON text, as it reads it: values already
/// interpreted (scalars and tagged values: timestamps, bytes, references, ...) and containers
/// of what it built for their elements. [`ValueBuild`] builds our [`Value`]; the protobuf
/// front end builds Firestore's values (`proto::ProtoBuild`) without a [`Value`] tree between.
pub trait Build {
    /// A built value.
    type Out;
    /// A map's fields being built.
    type Fields: Default;
    /// A value that is not an array or a plain map (or one read the slow way, see
    /// [`parse_with`]: any value).
    fn value(&self, value: Value) -> Self::Out;
    /// An array of built elements, in order.
    fn array(&self, items: Vec<Self::Out>) -> Self::Out;
    /// Add a field (a later equal key replaces an earlier one, as JSON parsers do).
    fn insert(&self, fields: &mut Self::Fields, key: String, value: Self::Out);
    /// A map of built fields.
    fn map(&self, fields: Self::Fields) -> Self::Out;
}

/// [`Build`] of our [`Value`]: what [`parse`] returns.
#[derive(Debug, Clone, Copy, Default)]
pub struct ValueBuild;

impl Build for ValueBuild {
    type Out = Value;
    type Fields = Map;
    fn value(&self, value: Value) -> Value {
        value
    }
    fn array(&self, items: Vec<Value>) -> Value {
        Value::Array(items)
    }
    fn insert(&self, fields: &mut Map, key: String, value: Value) {
        fields.insert(key, value);
    }
    fn map(&self, fields: Map) -> Value {
        Value::Map(fields)
    }
}

/// Parse typed JSON text into what `build` builds, in one pass over the text (no
/// `serde_json::Value` between). The meaning is [`from_json`]'s, by construction: the pass
/// reads plain JSON and numbers itself and hands every tagged object to the functions
/// [`from_json`] uses; whatever it does not take on (an object whose first key is a tag and
/// that has more keys, any error) is read again the two-pass way ([`json_from_str`], then
/// [`from_json`]), whose answer (the value, or the error and its message) is returned.
///
/// # Errors
/// As [`parse`].
pub fn parse_with<B: Build>(text: &str, build: &B) -> Result<B::Out, TypedJsonError> {
    refuse_reserved(text)?;
    let mut reader = serde_json::Deserializer::from_str(text);
    let seed = OnePass { build, depth: 0 };
    let fast = serde::de::DeserializeSeed::deserialize(seed, &mut reader)
        .and_then(|out| reader.end().map(|()| out));
    match fast {
        Ok(out) => Ok(out),
        Err(_) => from_json(&json_from_str(text)?).map(|v| build.value(v)),
    }
}

/// The one-pass reader of [`parse_with`] for a value `depth` levels below the root. Its
/// errors carry no message: [`parse_with`] reads the text again for the real one.
struct OnePass<'b, B> {
    build: &'b B,
    depth: usize,
}

impl<B> OnePass<'_, B> {
    fn child(&self) -> OnePass<'_, B> {
        OnePass {
            build: self.build,
            depth: self.depth + 1,
        }
    }
}

/// Leave the one-pass reader (see [`parse_with`]).
fn read_again<E: serde::de::Error>() -> E {
    E::custom("read again in two passes")
}

impl<'de, B: Build> serde::de::DeserializeSeed<'de> for OnePass<'_, B> {
    type Value = B::Out;

    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<B::Out, D::Error> {
        // As `convert`'s depth check.
        if self.depth > crate::limits::MAX_DECODE_DEPTH {
            return Err(read_again());
        }
        reader.deserialize_any(self)
    }
}

impl<'de, B: Build> serde::de::Visitor<'de> for OnePass<'_, B> {
    type Value = B::Out;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("typed JSON")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<B::Out, E> {
        Ok(self.build.value(Value::Null))
    }

    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<B::Out, E> {
        Ok(self.build.value(Value::Boolean(b)))
    }

    // serde_json (`arbitrary_precision`) gives integers that fit these types as such, every
    // other number as its text (`visit_map`, `RESERVED_KEY`).
    fn visit_i64<E: serde::de::Error>(self, i: i64) -> Result<B::Out, E> {
        Ok(self.build.value(Value::Integer(i)))
    }

    fn visit_u64<E: serde::de::Error>(self, u: u64) -> Result<B::Out, E> {
        match i64::try_from(u) {
            Ok(i) => Ok(self.build.value(Value::Integer(i))),
            Err(_) => number(&u.to_string(), &[])
                .map(|v| self.build.value(v))
                .map_err(|_| read_again()),
        }
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<B::Out, E> {
        self.visit_string(s.to_owned())
    }

    fn visit_string<E: serde::de::Error>(self, s: String) -> Result<B::Out, E> {
        if s.contains('\0') {
            return Err(read_again());
        }
        Ok(self.build.value(Value::String(s)))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<B::Out, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(self.child())? {
            items.push(item);
        }
        Ok(self.build.array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<B::Out, A::Error> {
        let mut fields = B::Fields::default();
        let Some(first) = map.next_key::<String>()? else {
            return Ok(self.build.map(fields));
        };
        // The reserved key and every tag start with `$`: a plain key skips their checks.
        let special = first.starts_with('$');
        if special && first == RESERVED_KEY {
            // A number (serde_json's `arbitrary_precision` form): its text.
            let text = map.next_value::<String>()?;
            return number(&text, &[])
                .map(|v| self.build.value(v))
                .map_err(|_| read_again());
        }
        if special && first == "$map" {
            // `{"$map": {..}}`: the fields of the inner object, at this depth (`plain_map`).
            map.next_value_seed(Fields(OnePass {
                build: self.build,
                depth: self.depth,
            }))
            .map(|inner| fields = inner)?;
            return match map.next_key::<serde::de::IgnoredAny>()? {
                None => Ok(self.build.map(fields)),
                Some(_) => Err(read_again()),
            };
        }
        if special && is_tag(&first) {
            let arg = map.next_value::<Json>()?;
            if map.next_key::<serde::de::IgnoredAny>()?.is_some() {
                return Err(read_again());
            }
            return tagged(&first, &arg, &mut Vec::new())
                .map(|v| self.build.value(v))
                .map_err(|_| read_again());
        }
        let mut key = first;
        loop {
            if key.contains('\0') {
                return Err(read_again());
            }
            let value = map.next_value_seed(self.child())?;
            self.build.insert(&mut fields, key, value);
            match map.next_key::<String>()? {
                Some(next) => key = next,
                None => return Ok(self.build.map(fields)),
            }
        }
    }
}

/// The one-pass reader of a plain object's fields (the argument of `$map`).
struct Fields<'b, B>(OnePass<'b, B>);

impl<'de, B: Build> serde::de::DeserializeSeed<'de> for Fields<'_, B> {
    type Value = B::Fields;

    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<B::Fields, D::Error> {
        reader.deserialize_map(self)
    }
}

impl<'de, B: Build> serde::de::Visitor<'de> for Fields<'_, B> {
    type Value = B::Fields;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<B::Fields, A::Error> {
        let mut fields = B::Fields::default();
        while let Some(key) = map.next_key::<String>()? {
            if key == RESERVED_KEY || key.contains('\0') {
                return Err(read_again());
            }
            let value = map.next_value_seed(self.0.child())?;
            self.0.build.insert(&mut fields, key, value);
        }
        Ok(fields)
    }
}

pub use crate::reserved::{mentions_reserved, RESERVED_KEY};

/// Parse JSON text, refusing text that mentions [`RESERVED_KEY`].
///
/// # Errors
/// [`TypedJsonError::ReservedKey`], or [`TypedJsonError::Syntax`].
pub fn json_from_str(text: &str) -> Result<Json, TypedJsonError> {
    refuse_reserved(text)?;
    serde_json::from_str(text).map_err(|e| TypedJsonError::Syntax(e.to_string()))
}

/// [`TypedJsonError::ReservedKey`] when JSON text mentions [`RESERVED_KEY`], for parsers
/// that report JSON syntax errors their own way.
///
/// # Errors
/// As said.
pub fn refuse_reserved(text: &str) -> Result<(), TypedJsonError> {
    if mentions_reserved(text) {
        Err(TypedJsonError::ReservedKey)
    } else {
        Ok(())
    }
}

/// Convert parsed JSON into a value.
///
/// # Errors
/// Numbers out of range, malformed tags, transforms outside writes, U+0000 in strings.
pub fn from_json(json: &Json) -> Result<Value, TypedJsonError> {
    convert(json, &mut Vec::new())
}

/// Convert a JSON object into a map (a document's fields).
///
/// # Errors
/// As [`from_json`], and [`TypedJsonError::BadTag`] when `json` is not a map.
pub fn map_from_json(json: &Json) -> Result<Map, TypedJsonError> {
    match from_json(json)? {
        Value::Map(map) => Ok(map),
        other => Err(TypedJsonError::BadTag {
            at: "<root>".into(),
            tag: "$map",
            reason: format!(
                "a document must be a JSON object, not {} {}",
                if other.type_name().starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                },
                other.type_name()
            ),
        }),
    }
}

/// One step from the root to a value: a map key or an array index.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// Where a value sits, for messages: `a.b[2].`c d``, or `<root>`.
fn at(trail: &[Step]) -> String {
    if trail.is_empty() {
        return "<root>".into();
    }
    let mut out = String::new();
    for step in trail {
        match step {
            Step::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                match FieldPath::new(vec![key.clone()]) {
                    Ok(p) => out.push_str(&p.to_string()),
                    // Never put a raw U+0000 into a message (it would cut a Postgres error short).
                    Err(_) => out.push_str(&key.replace('\0', "\\u0000")),
                }
            }
            Step::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    out
}

fn check_string(s: &str, trail: &[Step]) -> Result<(), TypedJsonError> {
    if s.contains('\0') {
        Err(TypedJsonError::NulCharacter { at: at(trail) })
    } else {
        Ok(())
    }
}

fn convert(json: &Json, trail: &mut Vec<Step>) -> Result<Value, TypedJsonError> {
    // Values deeper than the decoder accepts could be stored but never read back from an index
    // key; documents are limited to 20 levels anyway (limits.rs).
    if trail.len() > crate::limits::MAX_DECODE_DEPTH {
        return Err(TypedJsonError::TooDeep { at: at(trail) });
    }
    Ok(match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => number(&n.to_string(), trail)?,
        Json::String(s) => {
            check_string(s, trail)?;
            Value::String(s.clone())
        }
        Json::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                trail.push(Step::Index(i));
                out.push(convert(item, trail)?);
                trail.pop();
            }
            Value::Array(out)
        }
        Json::Object(fields) => {
            if fields.len() == 1 {
                if let Some((key, arg)) = fields.iter().next() {
                    if is_tag(key) {
                        return tagged(key, arg, trail);
                    }
                }
            }
            plain_map(fields, trail)?
        }
    })
}

fn plain_map(
    fields: &serde_json::Map<String, Json>,
    trail: &mut Vec<Step>,
) -> Result<Value, TypedJsonError> {
    let mut map = Map::new();
    for (key, value) in fields {
        trail.push(Step::Key(key.clone()));
        check_string(key, trail)?;
        let v = convert(value, trail)?;
        trail.pop();
        map.insert(key.clone(), v);
    }
    Ok(Value::Map(map))
}

/// Interpret the text of a JSON number.
fn number(text: &str, trail: &[Step]) -> Result<Value, TypedJsonError> {
    let is_integer_syntax = !text.contains(['.', 'e', 'E']);
    if is_integer_syntax {
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::Integer(i));
        }
    }
    match text.parse::<f64>() {
        Ok(d) if d.is_finite() => Ok(Value::Double(d)),
        _ => {
            // Keep messages short: jsonb spells 1e400 with 401 digits.
            let shown = if text.len() > 24 {
                format!("{}...({} digits)", &text[..12], text.len())
            } else {
                text.to_owned()
            };
            Err(TypedJsonError::NumberOutOfRange {
                at: at(trail),
                text: shown,
            })
        }
    }
}

fn tagged(key: &str, arg: &Json, trail: &mut Vec<Step>) -> Result<Value, TypedJsonError> {
    let bad = |tag: &'static str, reason: &str| TypedJsonError::BadTag {
        at: at(trail),
        tag,
        reason: reason.to_owned(),
    };
    match key {
        "$timestamp" => {
            let text = arg
                .as_str()
                .ok_or_else(|| bad("$timestamp", "expected an RFC 3339 string"))?;
            Timestamp::parse_rfc3339(text).map(Value::Timestamp).ok_or_else(|| {
                bad(
                    "$timestamp",
                    &format!("\"{text}\" is not an RFC 3339 time between years 1 and 9999 with at most microsecond precision"),
                )
            })
        }
        "$bytes" => {
            let text = arg
                .as_str()
                .ok_or_else(|| bad("$bytes", "expected a base64 string"))?;
            BASE64
                .decode(text)
                .map(Value::Bytes)
                .map_err(|e| bad("$bytes", &format!("not standard padded base64: {e}")))
        }
        "$ref" => {
            let text = arg
                .as_str()
                .ok_or_else(|| bad("$ref", "expected a document path string"))?;
            ResourcePath::parse_document(text)
                .map(Value::Reference)
                .map_err(|e| bad("$ref", &e.to_string()))
        }
        "$geo" => {
            let pair = arg.as_array().filter(|a| a.len() == 2);
            let pair = pair.ok_or_else(|| bad("$geo", "expected [latitude, longitude]"))?;
            let lat =
                element_f64(&pair[0]).map_err(|_| bad("$geo", "latitude must be a number"))?;
            let lng =
                element_f64(&pair[1]).map_err(|_| bad("$geo", "longitude must be a number"))?;
            if !(-90.0..=90.0).contains(&lat) {
                return Err(bad("$geo", "latitude must be between -90 and 90"));
            }
            if !(-180.0..=180.0).contains(&lng) {
                return Err(bad("$geo", "longitude must be between -180 and 180"));
            }
            Ok(Value::GeoPoint(GeoPoint {
                latitude: lat,
                longitude: lng,
            }))
        }
        "$double" => double_arg(arg)
            .map(Value::Double)
            .map_err(|reason| bad("$double", reason)),
        "$vector" => {
            let items = arg
                .as_array()
                .ok_or_else(|| bad("$vector", "expected an array of numbers"))?;
            if items.len() > MAX_VECTOR_DIMENSIONS {
                return Err(bad("$vector", "a vector has at most 2048 dimensions"));
            }
            items
                .iter()
                .map(|item| element_f64(item).map_err(|reason| bad("$vector", reason)))
                .collect::<Result<Vec<f64>, _>>()
                .map(Value::Vector)
        }
        "$map" => match arg {
            Json::Object(fields) => plain_map(fields, trail),
            _ => Err(bad("$map", "expected an object")),
        },
        transform => Err(TypedJsonError::TransformNotAllowed {
            at: at(trail),
            tag: transform.to_owned(),
        }),
    }
}

/// The argument of `{"$double": ..}`: a number or one of the special spellings.
fn double_arg(arg: &Json) -> Result<f64, &'static str> {
    const EXPECTED: &str = "expected a number, \"NaN\", \"Infinity\", \"-Infinity\" or \"-0.0\"";
    match arg {
        Json::String(s) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            "-0.0" => Ok(-0.0),
            _ => Err(EXPECTED),
        },
        Json::Number(n) => match n.to_string().parse::<f64>() {
            Ok(d) if d.is_finite() => Ok(d),
            _ => Err("number out of range"),
        },
        _ => Err(EXPECTED),
    }
}

/// An element of `$geo` or `$vector`: a JSON number or a `{"$double": ..}`.
fn element_f64(item: &Json) -> Result<f64, &'static str> {
    match item {
        Json::Object(o) if o.len() == 1 && o.contains_key("$double") => double_arg(&o["$double"]),
        _ => json_f64(item).ok_or("elements must be numbers"),
    }
}

/// A JSON number as a double, refusing integers that a double cannot hold exactly.
fn json_f64(json: &Json) -> Option<f64> {
    let Json::Number(n) = json else { return None };
    let text = n.to_string();
    match number(&text, &[]).ok()? {
        Value::Integer(i) => {
            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            let d = i as f64;
            (crate::compare::compare_int_double(i, d).is_eq()).then_some(d)
        }
        Value::Double(d) => Some(d),
        _ => None,
    }
}

/// Print a value as typed JSON text (compact).
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// [`to_string`] of `Value::Map(map)`, without building that value (a document's fields).
pub fn map_to_string(map: &Map) -> String {
    let mut out = String::new();
    write_map_value(&mut out, map);
    out
}

/// Convert a value to a `serde_json::Value` holding exactly the text [`to_string`] prints.
pub fn to_json(value: &Value) -> Json {
    // Numbers keep their printed text (arbitrary_precision), so this cannot fail for text we
    // printed ourselves; fall back to null rather than panic.
    serde_json::from_str(&to_string(value)).unwrap_or(Json::Null)
}

/// Whether `value` prints exactly as `json`, up to the order of map keys (which `jsonb`
/// normalises): every scalar's text is the text [`to_string`] prints for it. Then a `jsonb`
/// holding `json` is, byte for byte, the `jsonb` of `to_string(value)`, and a writer may store
/// the `jsonb` it was given instead of printing `value` and parsing the text again.
///
/// `false` is always safe (the caller prints); `true` only when the texts match, so a number
/// written `1.50` or `1e2`, a timestamp without all six fraction digits, or a transform is
/// never taken for the value it becomes.
pub fn prints_as(json: &Json, value: &Value) -> bool {
    match (json, value) {
        (Json::Null, Value::Null) => true,
        (Json::Bool(a), Value::Boolean(b)) => a == b,
        (Json::String(a), Value::String(b)) => a == b,
        // With arbitrary_precision a number keeps its text.
        (Json::Number(n), Value::Integer(_) | Value::Double(_)) => n.as_str() == to_string(value),
        (Json::Array(items), Value::Array(values)) => {
            items.len() == values.len() && items.iter().zip(values).all(|(j, v)| prints_as(j, v))
        }
        (Json::Object(_), Value::Map(map)) => map_prints_as(json, map),
        // A tagged value: compare the whole printed text.
        (Json::Object(_), _) => {
            serde_json::to_string(json).is_ok_and(|text| text == to_string(value))
        }
        _ => false,
    }
}

/// [`prints_as`] of `Value::Map(map)`, without building that value (a document's fields).
pub fn map_prints_as(json: &Json, map: &Map) -> bool {
    let Json::Object(fields) = json else {
        return false;
    };
    let tag_only =
        |len: usize, first: Option<&String>| len == 1 && first.is_some_and(|k| is_tag(k));
    if tag_only(fields.len(), fields.keys().next()) || tag_only(map.len(), map.keys().next()) {
        // `{"$map": ..}` around a map whose only key is a tag: compare the whole text.
        return serde_json::to_string(json).is_ok_and(|text| text == map_to_string(map));
    }
    fields.len() == map.len()
        && fields
            .iter()
            .all(|(k, j)| map.get(k).is_some_and(|v| prints_as(j, v)))
}

/// A JSON string literal: quotes, backslashes and every control character (C0, DEL and C1)
/// escaped, everything else as is. The one string escaper of typed JSON and of the query
/// printer.
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Control characters are all in the Basic Multilingual Plane: one \u escape each.
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_tagged(out: &mut String, tag: &str, body: impl FnOnce(&mut String)) {
    out.push_str("{\"");
    out.push_str(tag);
    out.push_str("\":");
    body(out);
    out.push('}');
}

/// Print a finite double so that it reads back as the same double and as a double, even
/// after `jsonb` has normalised it to `numeric`.
pub fn write_double(out: &mut String, d: f64) {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d.is_nan() {
        out.push_str("{\"$double\":\"NaN\"}");
    } else if d.is_infinite() {
        out.push_str(if d > 0.0 {
            "{\"$double\":\"Infinity\"}"
        } else {
            "{\"$double\":\"-Infinity\"}"
        });
    } else if d == 0.0 && d.is_sign_negative() {
        out.push_str("{\"$double\":\"-0.0\"}");
    } else if d.fract() == 0.0 && (-TWO_63..TWO_63).contains(&d) {
        // Integral and in int64 range: `numeric` would print it without a `.` unless we give
        // it a scale, and it would read back as an integer.
        let _ = write!(out, "{d:.1}");
    } else {
        // Shortest round-trip form. Anything integral printed here is >= 2^63 in magnitude,
        // so it cannot be read back as an int64 even after jsonb drops the exponent.
        let _ = write!(out, "{d:?}");
    }
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Integer(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Double(d) => write_double(out, *d),
        Value::Timestamp(t) => write_tagged(out, "$timestamp", |o| write_str(o, &t.to_rfc3339())),
        Value::String(s) => write_str(out, s),
        Value::Bytes(b) => write_tagged(out, "$bytes", |o| write_str(o, &BASE64.encode(b))),
        Value::Reference(p) => write_tagged(out, "$ref", |o| write_str(o, &p.to_string())),
        Value::GeoPoint(g) => write_tagged(out, "$geo", |o| {
            o.push('[');
            write_double(o, g.latitude);
            o.push(',');
            write_double(o, g.longitude);
            o.push(']');
        }),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Vector(items) => write_tagged(out, "$vector", |o| {
            o.push('[');
            for (i, d) in items.iter().enumerate() {
                if i > 0 {
                    o.push(',');
                }
                write_double(o, *d);
            }
            o.push(']');
        }),
        Value::Map(map) => write_map_value(out, map),
    }
}

/// A map as a value: wrapped in `{"$map": ..}` when its only key is a type tag.
fn write_map_value(out: &mut String, map: &Map) {
    let needs_wrap = map.len() == 1 && map.keys().next().is_some_and(|k| is_tag(k));
    if needs_wrap {
        write_tagged(out, "$map", |o| write_map(o, map));
    } else {
        write_map(out, map);
    }
}

fn write_map(out: &mut String, map: &Map) {
    out.push('{');
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(out, key);
        out.push(':');
        write_value(out, value);
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`is_tag`] and the one-pass reader look at a key's first byte before the tag lists and
    /// [`RESERVED_KEY`]: each of those must start with `$`.
    #[test]
    fn tags_and_the_reserved_key_start_with_a_dollar() {
        for tag in VALUE_TAGS.iter().chain(TRANSFORM_TAGS.iter()) {
            assert!(tag.starts_with('$'), "{tag}");
            assert!(is_tag(tag), "{tag}");
        }
        assert!(RESERVED_KEY.starts_with('$'));
        for key in ["", "$", "timestamp", "map", "$maps", "$Map", "x$map"] {
            assert!(!is_tag(key), "{key}");
        }
    }

    fn round(text: &str) -> String {
        to_string(&parse(text).unwrap())
    }

    #[test]
    fn prints_as_matches_text_not_meaning() {
        let check = |json: &str, value: &str| {
            prints_as(&json_from_str(json).unwrap(), &parse(value).unwrap())
        };
        // The same text, up to key order and spacing.
        assert!(check(
            r#"{"b": [1, 2.5, "x"], "a": {"$timestamp": "2022-09-01T13:23:22.000000Z"}}"#,
            r#"{"a":{"$timestamp":"2022-09-01T13:23:22.000000Z"},"b":[1,2.5,"x"]}"#
        ));
        assert!(check(
            r#"{"n": {"$double": "NaN"}, "m": {"$map": {"$ref": 1}}}"#,
            r#"{"m":{"$map":{"$ref":1}},"n":{"$double":"NaN"}}"#
        ));
        // Equal values written otherwise: printing would store other text.
        for (json, value) in [
            (r#"{"x": 1.50}"#, r#"{"x": 1.5}"#),
            (r#"{"x": 1e2}"#, r#"{"x": 100.0}"#),
            (r#"{"x": {"$double": "1.5"}}"#, r#"{"x": 1.5}"#),
            (
                r#"{"t": {"$timestamp": "2022-09-01T13:23:22Z"}}"#,
                r#"{"t": {"$timestamp": "2022-09-01T13:23:22.000000Z"}}"#,
            ),
        ] {
            assert!(!check(json, value), "{json}");
        }
        // Other values: a transform and what it became, a missing or extra field, another type.
        for (json, value) in [
            (r#"{"n": {"$increment": 1}}"#, r#"{"n": 1}"#),
            (r#"{"a": 1}"#, r#"{"a": 1, "b": 2}"#),
            (r#"{"a": 1, "b": 2}"#, r#"{"a": 1}"#),
            (r#"{"a": 1}"#, r#"{"a": 1.0}"#),
            (r#"{"a": "1"}"#, r#"{"a": 1}"#),
            (r#"{"a": [1]}"#, r#"{"a": [1, 1]}"#),
            (r#"{"a": true}"#, r#"{"a": false}"#),
        ] {
            assert!(!check(json, value), "{json}");
        }
    }

    #[test]
    fn the_serde_number_key_is_refused_not_misread() {
        // serde_json would read the first as the number 5 and fail on the second.
        for text in [
            r#"{"a": {"$serde_json::private::Number": "5"}}"#,
            r#"{"$serde_json::private::Number": true}"#,
            r#"{"a": {"\u0024serde_json::private::Number": "5"}}"#,
        ] {
            assert_eq!(
                json_from_str(text),
                Err(TypedJsonError::ReservedKey),
                "{text}"
            );
            assert_eq!(parse(text), Err(TypedJsonError::ReservedKey), "{text}");
        }
        assert!(json_from_str(r#"{"a": {"$other": "5"}}"#).is_ok());
    }

    #[test]
    fn map_to_string_prints_what_to_string_prints() {
        for text in [
            r#"{"a":1,"b":{"c":"d"}}"#,
            r#"{"$map":{"$timestamp":1}}"#,
            "{}",
        ] {
            let Value::Map(map) = parse(text).unwrap() else {
                panic!("{text} is a map");
            };
            assert_eq!(map_to_string(&map), to_string(&Value::Map(map.clone())));
            assert_eq!(map_to_string(&map), text);
        }
    }

    #[test]
    fn control_characters_are_escaped_and_read_back() {
        // C0, DEL and C1 are escaped (the query printer shares this escaper); others are not.
        let s = "a\u{1}b\u{7f}c\u{85}d\u{9f}e\u{a0}f\"\\";
        let printed = to_string(&Value::String(s.into()));
        assert_eq!(
            printed,
            "\"a\\u0001b\\u007fc\\u0085d\\u009fe\u{a0}f\\\"\\\\\""
        );
        assert_eq!(parse(&printed).unwrap(), Value::String(s.into()));
    }

    #[test]
    fn numbers_keep_their_type() {
        assert_eq!(parse("1").unwrap(), Value::Integer(1));
        assert_eq!(parse("-0").unwrap(), Value::Integer(0));
        assert_eq!(parse("1.0").unwrap(), Value::Double(1.0));
        assert_eq!(parse("1e2").unwrap(), Value::Double(100.0));
        assert_eq!(
            parse("9223372036854775807").unwrap(),
            Value::Integer(i64::MAX)
        );
        assert_eq!(
            parse("9223372036854775808").unwrap(),
            Value::Double(9_223_372_036_854_775_808.0)
        );
        assert_eq!(
            parse("9007199254740993").unwrap(),
            Value::Integer(9_007_199_254_740_993)
        );
        assert!(matches!(
            parse("1e400"),
            Err(TypedJsonError::NumberOutOfRange { .. })
        ));
        assert_eq!(round("1e18"), "1000000000000000000.0");
        assert_eq!(round("1e300"), "1e300");
        assert_eq!(round("0.1"), "0.1");
        assert_eq!(round("{\"$double\":\"-0.0\"}"), "{\"$double\":\"-0.0\"}");
        assert_eq!(round("{\"$double\":5}"), "5.0");
    }

    #[test]
    fn tags() {
        for text in [
            r#"{"$timestamp":"2022-09-01T13:23:22.123456Z"}"#,
            r#"{"$bytes":"AAEC/w=="}"#,
            r#"{"$ref":"restaurants/one"}"#,
            r#"{"$geo":[37.5,-122.25]}"#,
            r#"{"$double":"NaN"}"#,
            r#"{"$vector":[1.0,2.5]}"#,
            r#"{"$map":{"$ref":"x"}}"#,
            r#"{"$map":{"$increment":1}}"#,
            r#"{"$other":1}"#,
        ] {
            assert_eq!(round(text), text);
        }
        assert_eq!(
            round(r#"{"$timestamp":"2022-09-01T15:23:22.1+02:00"}"#),
            r#"{"$timestamp":"2022-09-01T13:23:22.100000Z"}"#
        );
        assert!(matches!(
            parse(r#"{"$timestamp":"2022-09-01T13:23:22.1234567Z"}"#),
            Err(TypedJsonError::BadTag { .. })
        ));
        assert!(matches!(
            parse(r#"{"$ref":"restaurants"}"#),
            Err(TypedJsonError::BadTag { .. })
        ));
        assert!(matches!(
            parse(r#"{"$geo":[91,0]}"#),
            Err(TypedJsonError::BadTag { .. })
        ));
        assert!(matches!(
            parse(r#"{"$bytes":"***"}"#),
            Err(TypedJsonError::BadTag { .. })
        ));
        assert!(
            matches!(parse(r#"{"a":{"$increment":1}}"#), Err(TypedJsonError::TransformNotAllowed { at, .. }) if at == "a")
        );
        assert!(
            matches!(parse(r#"{"a":["x\u0000"]}"#), Err(TypedJsonError::NulCharacter { at }) if at == "a[0]")
        );
        assert!(matches!(parse("{"), Err(TypedJsonError::Syntax(_))));
    }
}
