//! The order-preserving byte encoding of values and document names. Specified byte by byte
//! in `docs/encoding.md`.
//!
//! Properties (property-tested in `tests/encoding_props.rs`):
//! - `enc(a).cmp(&enc(b)) == compare(a, b)`; the descending form reverses it.
//! - The set of encodings is prefix-free, so concatenations (index keys) compare component by
//!   component.
//! - `decode(enc(v))` compares equal to `v`; it is identical except that numbers come back in
//!   canonical form (an integral number that fits int64 as an integer, else a double) and
//!   `-0.0`/NaN payloads are canonical. Integers and doubles that compare equal share one
//!   encoding, which is what lets `where x == 1` find `1.0`.
//! - [`truncate`] keeps the encodings prefix-free and weakly order-preserving.

use std::collections::BTreeMap;

use thiserror::Error;

use crate::error::ErrorKind;
use crate::path::ResourcePath;
use crate::value::{GeoPoint, Timestamp, Value};

pub use crate::limits::{MAX_DECODE_DEPTH, MAX_INDEXED_VALUE_BYTES};

/// Type and sub-type tags: the first byte of every value encoding.
pub mod tag {
    pub const NULL: u8 = 0x10;
    pub const FALSE: u8 = 0x20;
    pub const TRUE: u8 = 0x21;
    pub const NAN: u8 = 0x30;
    pub const NEG_INFINITY: u8 = 0x31;
    pub const NEGATIVE: u8 = 0x32;
    pub const ZERO: u8 = 0x33;
    pub const POSITIVE: u8 = 0x34;
    pub const POS_INFINITY: u8 = 0x35;
    pub const TIMESTAMP: u8 = 0x40;
    pub const STRING: u8 = 0x50;
    pub const BYTES: u8 = 0x60;
    pub const REFERENCE: u8 = 0x70;
    pub const GEOPOINT: u8 = 0x80;
    pub const ARRAY: u8 = 0x90;
    pub const VECTOR: u8 = 0xA0;
    pub const MAP: u8 = 0xB0;
}

/// Ends an array, a map, or a list of name segments.
const END: u8 = 0x00;
/// Starts another map entry or name segment.
const MORE: u8 = 0x01;
/// Byte strings: 0x00 is escaped as 0x00 0xFF and the string ends with 0x00 0x01.
const ESCAPE: u8 = 0xFF;
const TERMINATOR: u8 = 0x01;
/// Bias that makes the binary exponent of a number a positive u16 (exponents are in
/// [-1074, 1023]).
const EXPONENT_BIAS: i32 = 1_075;

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("encoded value ends early at byte {0}")]
    UnexpectedEnd(usize),
    #[error("invalid byte 0x{byte:02x} at offset {offset}")]
    InvalidByte { offset: usize, byte: u8 },
    #[error("encoded value nests deeper than 64 levels")]
    TooDeep,
    #[error("encoded value is invalid: {0}")]
    Invalid(&'static str),
    #[error("{0} trailing bytes after the encoded value")]
    TrailingBytes(usize),
}

impl DecodeError {
    /// The kind of failure: stored bytes that do not decode are corrupt, never the caller's
    /// fault, so every decode error is [`ErrorKind::Internal`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Internal
    }
}

/// Ascending or descending order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Ascending,
    Descending,
}

/// Append the ascending encoding of `value` to `out`.
pub fn encode_into(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.push(tag::NULL),
        Value::Boolean(b) => out.push(if *b { tag::TRUE } else { tag::FALSE }),
        Value::Integer(i) => encode_int(out, *i),
        Value::Double(d) => encode_double_number(out, *d),
        Value::Timestamp(t) => {
            out.push(tag::TIMESTAMP);
            out.extend_from_slice(&flip_sign(t.micros()).to_be_bytes());
        }
        Value::String(s) => {
            out.push(tag::STRING);
            encode_bytes(out, s.as_bytes());
        }
        Value::Bytes(b) => {
            out.push(tag::BYTES);
            encode_bytes(out, b);
        }
        Value::Reference(path) => {
            out.push(tag::REFERENCE);
            encode_segments(out, path.segments());
        }
        Value::GeoPoint(g) => {
            out.push(tag::GEOPOINT);
            out.extend_from_slice(&ordered_f64(g.latitude).to_be_bytes());
            out.extend_from_slice(&ordered_f64(g.longitude).to_be_bytes());
        }
        Value::Array(items) => {
            out.push(tag::ARRAY);
            for item in items {
                encode_into(out, item);
            }
            out.push(END);
        }
        Value::Vector(items) => {
            out.push(tag::VECTOR);
            // At most 2048 dimensions, so the cast is lossless.
            #[allow(clippy::cast_possible_truncation)]
            out.extend_from_slice(&(items.len() as u32).to_be_bytes());
            for d in items {
                out.extend_from_slice(&ordered_f64(*d).to_be_bytes());
            }
        }
        Value::Map(map) => {
            out.push(tag::MAP);
            for (key, v) in map {
                out.push(MORE);
                encode_bytes(out, key.as_bytes());
                encode_into(out, v);
            }
            out.push(END);
        }
    }
}

/// The encoding of `value` in `direction`, truncated to [`MAX_INDEXED_VALUE_BYTES`].
pub fn encode_index_value(value: &Value, direction: Direction) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(&mut out, value);
    truncate(&mut out);
    if direction == Direction::Descending {
        invert(&mut out);
    }
    out
}

/// The full ascending encoding of `value` (no truncation).
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(&mut out, value);
    out
}

/// Cut an encoding to [`MAX_INDEXED_VALUE_BYTES`]. Encodings of at most that length are
/// untouched; longer ones keep their first 1,500 bytes. The result is still prefix-free (a
/// full encoding cannot be a prefix of another's first 1,500 bytes) and order is kept weakly:
/// `a < b` implies `truncate(a) <= truncate(b)`.
pub fn truncate(encoded: &mut Vec<u8>) {
    encoded.truncate(MAX_INDEXED_VALUE_BYTES);
}

/// Invert every byte: the descending form of an encoding.
pub fn invert(bytes: &mut [u8]) {
    for b in bytes {
        *b = !*b;
    }
}

/// The encoding of a document name: its segments in order, so that names sort segment by
/// segment (Firestore's name order).
pub fn encode_name(path: &ResourcePath) -> Vec<u8> {
    let mut out = Vec::new();
    encode_segments(&mut out, path.segments());
    out
}

/// Append name segments; a prefix of segments sorts first.
pub fn encode_segments(out: &mut Vec<u8>, segments: &[String]) {
    for segment in segments {
        out.push(MORE);
        encode_bytes(out, segment.as_bytes());
    }
    out.push(END);
}

/// Escape 0x00 as 0x00 0xFF and terminate with 0x00 0x01.
fn encode_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() + 2);
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(ESCAPE);
        }
    }
    out.push(0);
    out.push(TERMINATOR);
}

fn flip_sign(i: i64) -> u64 {
    (i as u64) ^ (1 << 63)
}

/// A double as a u64 whose unsigned order is Firestore's double order (NaN lowest,
/// -0.0 == 0.0).
pub fn ordered_f64(d: f64) -> u64 {
    let d = if d.is_nan() {
        // The negative quiet NaN encodes below -Infinity.
        f64::from_bits(0xFFF8_0000_0000_0000)
    } else if d == 0.0 {
        0.0
    } else {
        d
    };
    let bits = d.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// The inverse of [`ordered_f64`], refusing the bit patterns it never produces (the
/// negative zero and NaNs other than the canonical one), so every decoded value re-encodes to
/// the same bytes.
fn unordered_f64(bits: u64) -> Result<f64, DecodeError> {
    const NEGATIVE_ZERO: u64 = 0x7FFF_FFFF_FFFF_FFFF;
    const CANONICAL_NAN: u64 = 0x0007_FFFF_FFFF_FFFF;
    if bits == NEGATIVE_ZERO {
        return Err(DecodeError::Invalid("negative zero is encoded as zero"));
    }
    let d = if bits >> 63 == 1 {
        f64::from_bits(bits & !(1 << 63))
    } else {
        f64::from_bits(!bits)
    };
    if d.is_nan() {
        if bits != CANONICAL_NAN {
            return Err(DecodeError::Invalid("NaN is not in canonical form"));
        }
        return Ok(f64::NAN);
    }
    Ok(d)
}

/// A nonzero finite number as `M * 2^(E - 63)` with `M` normalised (top bit set).
fn encode_magnitude(out: &mut Vec<u8>, negative: bool, exponent: i32, mantissa: u64) {
    // exponent is in [-1074, 1023], so the biased form is in [1, 2098].
    #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation)]
    let biased = (exponent + EXPONENT_BIAS) as u16;
    if negative {
        out.push(tag::NEGATIVE);
        out.extend_from_slice(&(!biased).to_be_bytes());
        out.extend_from_slice(&(!mantissa).to_be_bytes());
    } else {
        out.push(tag::POSITIVE);
        out.extend_from_slice(&biased.to_be_bytes());
        out.extend_from_slice(&mantissa.to_be_bytes());
    }
}

fn encode_int(out: &mut Vec<u8>, i: i64) {
    if i == 0 {
        out.push(tag::ZERO);
        return;
    }
    let magnitude = i.unsigned_abs();
    let lz = magnitude.leading_zeros();
    #[allow(clippy::cast_possible_wrap)]
    encode_magnitude(out, i < 0, 63 - lz as i32, magnitude << lz);
}

fn encode_double_number(out: &mut Vec<u8>, d: f64) {
    if d.is_nan() {
        out.push(tag::NAN);
    } else if d.is_infinite() {
        out.push(if d > 0.0 {
            tag::POS_INFINITY
        } else {
            tag::NEG_INFINITY
        });
    } else if d == 0.0 {
        out.push(tag::ZERO);
    } else {
        let bits = d.to_bits();
        let raw_exponent = ((bits >> 52) & 0x7FF) as i32;
        let fraction = bits & ((1 << 52) - 1);
        // value = integer_mantissa * 2^exp2
        let (integer_mantissa, exp2) = if raw_exponent == 0 {
            (fraction, -1074)
        } else {
            (fraction | (1 << 52), raw_exponent - 1075)
        };
        let lz = integer_mantissa.leading_zeros();
        #[allow(clippy::cast_possible_wrap)]
        encode_magnitude(out, d < 0.0, exp2 - lz as i32 + 63, integer_mantissa << lz);
    }
}

/// Decode one value that must span all of `bytes`.
///
/// # Errors
/// Malformed or truncated input, nesting deeper than 64, trailing bytes.
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    let mut reader = Reader { bytes, pos: 0 };
    let value = reader.value(0)?;
    match bytes.len() - reader.pos {
        0 => Ok(value),
        n => Err(DecodeError::TrailingBytes(n)),
    }
}

/// Decode one value from the front of `bytes`; returns it and the bytes it used.
///
/// # Errors
/// As [`decode`], except that trailing bytes are allowed.
pub fn decode_prefix(bytes: &[u8]) -> Result<(Value, usize), DecodeError> {
    let mut reader = Reader { bytes, pos: 0 };
    let value = reader.value(0)?;
    Ok((value, reader.pos))
}

/// Decode a document name encoded by [`encode_name`].
///
/// # Errors
/// Malformed input, or segments that are not a valid path.
pub fn decode_name(bytes: &[u8]) -> Result<ResourcePath, DecodeError> {
    let mut reader = Reader { bytes, pos: 0 };
    let path = reader.segments()?;
    match bytes.len() - reader.pos {
        0 => Ok(path),
        n => Err(DecodeError::TrailingBytes(n)),
    }
}

/// A skip scan over `entities.parent` listing the ids of the collections directly under one
/// document (or the root): Firestore's `listCollectionIds`.
///
/// Every document below the parent document `P`, at any depth, has a `parent` starting with
/// `P`'s segments and one more segment (`MORE · collection id · 0x00 0x01`): they are the range
/// [`ChildCollections::start`]..[`ChildCollections::end`] of the `(database_id, parent, name)`
/// btree. Within it the parents of one child collection `c` all start with `X` = `P · MORE · c
/// · 0x00 0x01`; `X · END` (the collection itself, documents directly in it) sorts before every
/// deeper parent (`X · MORE …`). So the scan asks the btree for the first `parent` at or after
/// a bound, learns the child collection from it ([`ChildCollections::step`]), and jumps past
/// all of `X` (`X · 0x02`): one index probe per child collection, however many documents and
/// subcollections each holds, instead of a scan of the whole subtree.
///
/// Under a collection's segments instead of a document's, the same scan finds the ids of the
/// collection's documents that have descendants (each with a subcollection holding a document,
/// whether or not the document itself exists: ListDocuments' `show_missing`), `direct` always
/// false.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildCollections {
    prefix: Vec<u8>,
}

/// What one probe of [`ChildCollections`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildCollection {
    /// The child collection's id.
    pub id: String,
    /// Whether it holds a document directly (the probe found `X · END`), not only documents of
    /// its subcollections.
    pub direct: bool,
    /// The bound of the next probe: past every parent of this child collection.
    pub next: Vec<u8>,
}

impl ChildCollections {
    /// The scan of the collections directly under the document with `segments` (none: the
    /// root).
    pub fn under(segments: &[String]) -> ChildCollections {
        let mut prefix = Vec::new();
        encode_segments(&mut prefix, segments);
        prefix.pop(); // END: the child collection's segment follows
        ChildCollections { prefix }
    }

    /// The bound of the first probe (inclusive).
    pub fn start(&self) -> Vec<u8> {
        let mut out = self.prefix.clone();
        out.push(MORE);
        out
    }

    /// The end of the range (exclusive): no parent at or past it is below the document.
    pub fn end(&self) -> Vec<u8> {
        let mut out = self.prefix.clone();
        out.push(MORE + 1);
        out
    }

    /// Read `found`, a `parent` in `start()..end()`.
    ///
    /// # Errors
    /// `found` is not in the range or does not decode (a corrupt row).
    pub fn step(&self, found: &[u8]) -> Result<ChildCollection, DecodeError> {
        let rest = found
            .strip_prefix(self.prefix.as_slice())
            .ok_or(DecodeError::Invalid("parent outside the scanned range"))?;
        let mut reader = Reader {
            bytes: rest,
            pos: 0,
        };
        match reader.byte()? {
            MORE => {}
            other => return Err(reader.invalid(other)),
        }
        let id = reader.string()?;
        let segment_end = self.prefix.len() + reader.pos;
        let direct = reader.byte()? == END && reader.pos == rest.len();
        let mut next = found
            .get(..segment_end)
            .ok_or(DecodeError::UnexpectedEnd(segment_end))?
            .to_vec();
        next.push(MORE + 1);
        Ok(ChildCollection { id, direct, next })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or(DecodeError::UnexpectedEnd(self.pos))?;
        self.pos += 1;
        Ok(b)
    }

    fn peek(&self) -> Result<u8, DecodeError> {
        self.bytes
            .get(self.pos)
            .copied()
            .ok_or(DecodeError::UnexpectedEnd(self.pos))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let end = self.pos + N;
        let slice = self
            .bytes
            .get(self.pos..end)
            .ok_or(DecodeError::UnexpectedEnd(self.bytes.len()))?;
        self.pos = end;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn invalid(&self, byte: u8) -> DecodeError {
        DecodeError::InvalidByte {
            offset: self.pos.saturating_sub(1),
            byte,
        }
    }

    fn escaped(&mut self) -> Result<Vec<u8>, DecodeError> {
        let mut out = Vec::new();
        loop {
            let b = self.byte()?;
            if b != 0 {
                out.push(b);
                continue;
            }
            match self.byte()? {
                ESCAPE => out.push(0),
                TERMINATOR => return Ok(out),
                other => return Err(self.invalid(other)),
            }
        }
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let bytes = self.escaped()?;
        let s =
            String::from_utf8(bytes).map_err(|_| DecodeError::Invalid("string is not UTF-8"))?;
        if s.contains('\0') {
            return Err(DecodeError::Invalid("string contains U+0000"));
        }
        Ok(s)
    }

    /// A string value or map key. Typed JSON text that mentions the name serde_json reserves
    /// never parses, so no document holds such a string, and a value that held one could not
    /// be printed and read back. (Path segments are refused by [`ResourcePath::from_segments`].)
    fn value_string(&mut self) -> Result<String, DecodeError> {
        let s = self.string()?;
        if crate::reserved::mentions_reserved(&s) {
            return Err(DecodeError::Invalid(
                "string mentions a name reserved by typed JSON",
            ));
        }
        Ok(s)
    }

    fn segments(&mut self) -> Result<ResourcePath, DecodeError> {
        let mut segments = Vec::new();
        loop {
            match self.byte()? {
                END => break,
                MORE => segments.push(self.string()?),
                other => return Err(self.invalid(other)),
            }
        }
        ResourcePath::from_segments(segments).map_err(|_| DecodeError::Invalid("not a valid path"))
    }

    fn magnitude(&mut self, negative: bool) -> Result<Value, DecodeError> {
        let mut biased = u16::from_be_bytes(self.array()?);
        let mut mantissa = self.u64()?;
        if negative {
            biased = !biased;
            mantissa = !mantissa;
        }
        let exponent = i32::from(biased) - EXPONENT_BIAS;
        if mantissa >> 63 != 1 || !(-1074..=1023).contains(&exponent) {
            return Err(DecodeError::Invalid("number is not normalised"));
        }
        // value = mantissa * 2^(exponent - 63)
        if (0..=63).contains(&exponent) {
            let shift = 63 - exponent;
            let fits_exactly = shift == 0 || mantissa.trailing_zeros() >= shift.unsigned_abs();
            if fits_exactly {
                let magnitude = mantissa >> shift;
                if negative && magnitude == 1 << 63 {
                    return Ok(Value::Integer(i64::MIN));
                }
                if let Ok(m) = i64::try_from(magnitude) {
                    return Ok(Value::Integer(if negative { -m } else { m }));
                }
            }
        }
        // A double: the mantissa must fit in 53 bits (or fewer for subnormals).
        let bits = if exponent >= -1022 {
            if mantissa & 0x7FF != 0 {
                return Err(DecodeError::Invalid("number is not a double"));
            }
            #[allow(clippy::cast_sign_loss)]
            let raw_exponent = (exponent + 1023) as u64;
            (raw_exponent << 52) | ((mantissa >> 11) & ((1 << 52) - 1))
        } else {
            let shift = (11 + (-1022 - exponent)).unsigned_abs();
            if mantissa.trailing_zeros() < shift {
                return Err(DecodeError::Invalid("number is not a double"));
            }
            mantissa >> shift
        };
        let d = f64::from_bits(bits);
        Ok(Value::Double(if negative { -d } else { d }))
    }

    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        if depth > MAX_DECODE_DEPTH {
            return Err(DecodeError::TooDeep);
        }
        let t = self.byte()?;
        Ok(match t {
            tag::NULL => Value::Null,
            tag::FALSE => Value::Boolean(false),
            tag::TRUE => Value::Boolean(true),
            tag::NAN => Value::Double(f64::NAN),
            tag::NEG_INFINITY => Value::Double(f64::NEG_INFINITY),
            tag::POS_INFINITY => Value::Double(f64::INFINITY),
            tag::ZERO => Value::Integer(0),
            tag::NEGATIVE => self.magnitude(true)?,
            tag::POSITIVE => self.magnitude(false)?,
            tag::TIMESTAMP => {
                let micros = (self.u64()? ^ (1 << 63)) as i64;
                Value::Timestamp(
                    Timestamp::from_micros(micros)
                        .ok_or(DecodeError::Invalid("timestamp out of range"))?,
                )
            }
            tag::STRING => Value::String(self.value_string()?),
            tag::BYTES => Value::Bytes(self.escaped()?),
            tag::REFERENCE => {
                let path = self.segments()?;
                if !path.is_document() {
                    return Err(DecodeError::Invalid("reference is not a document path"));
                }
                Value::Reference(path)
            }
            tag::GEOPOINT => {
                let latitude = unordered_f64(self.u64()?)?;
                let longitude = unordered_f64(self.u64()?)?;
                if !(-90.0..=90.0).contains(&latitude) || !(-180.0..=180.0).contains(&longitude) {
                    return Err(DecodeError::Invalid("geopoint out of range"));
                }
                Value::GeoPoint(GeoPoint {
                    latitude,
                    longitude,
                })
            }
            tag::ARRAY => {
                let mut items = Vec::new();
                while self.peek()? != END {
                    items.push(self.value(depth + 1)?);
                }
                self.pos += 1;
                Value::Array(items)
            }
            tag::VECTOR => {
                let len = u32::from_be_bytes(self.array()?) as usize;
                if len > crate::limits::MAX_VECTOR_DIMENSIONS {
                    return Err(DecodeError::Invalid("vector too long"));
                }
                let mut items = Vec::with_capacity(len);
                for _ in 0..len {
                    items.push(unordered_f64(self.u64()?)?);
                }
                Value::Vector(items)
            }
            tag::MAP => {
                let mut map = BTreeMap::new();
                let mut previous: Option<String> = None;
                loop {
                    match self.byte()? {
                        END => break,
                        MORE => {}
                        other => return Err(self.invalid(other)),
                    }
                    let key = self.value_string()?;
                    if previous
                        .as_deref()
                        .is_some_and(|p| p.as_bytes() >= key.as_bytes())
                    {
                        return Err(DecodeError::Invalid("map keys out of order"));
                    }
                    let v = self.value(depth + 1)?;
                    previous = Some(key.clone());
                    map.insert(key, v);
                }
                Value::Map(map)
            }
            other => return Err(self.invalid(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::compare;
    use std::cmp::Ordering;

    fn check_order(a: &Value, b: &Value) {
        assert_eq!(encode(a).cmp(&encode(b)), compare(a, b), "{a:?} vs {b:?}");
    }

    #[test]
    fn worked_examples_from_the_spec() {
        assert_eq!(encode(&Value::Null), [0x10]);
        assert_eq!(
            encode(&Value::Integer(1)),
            [0x34, 0x04, 0x33, 0x80, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(encode(&Value::Double(1.0)), encode(&Value::Integer(1)));
        assert_eq!(
            encode(&Value::Integer(-1)),
            [0x32, 0xFB, 0xCC, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        );
        assert_eq!(
            encode(&Value::String("a\0b".into())),
            [0x50, b'a', 0, 0xFF, b'b', 0, 1]
        );
        assert_eq!(encode(&Value::Array(vec![Value::Null])), [0x90, 0x10, 0x00]);
    }

    #[test]
    fn numbers_interleave_exactly() {
        let two53 = 9_007_199_254_740_992_i64;
        let values = [
            Value::Double(f64::NAN),
            Value::Double(f64::NEG_INFINITY),
            Value::Double(-1e308),
            Value::Integer(i64::MIN),
            Value::Integer(-1),
            Value::Double(-5e-324),
            Value::Integer(0),
            Value::Double(5e-324),
            Value::Double(0.5),
            Value::Integer(1),
            Value::Double(two53 as f64),
            Value::Integer(two53 + 1),
            Value::Integer(i64::MAX),
            Value::Double(9_223_372_036_854_775_808.0),
            Value::Double(f64::MAX),
            Value::Double(f64::INFINITY),
        ];
        for w in values.windows(2) {
            assert_eq!(
                compare(&w[0], &w[1]),
                Ordering::Less,
                "{:?} < {:?}",
                w[0],
                w[1]
            );
            check_order(&w[0], &w[1]);
        }
        assert_eq!(encode(&Value::Double(-0.0)), encode(&Value::Integer(0)));
        assert_eq!(
            decode(&encode(&Value::Double(two53 as f64))).unwrap(),
            Value::Integer(two53)
        );
        assert_eq!(
            decode(&encode(&Value::Double(0.5))).unwrap(),
            Value::Double(0.5)
        );
        assert_eq!(
            decode(&encode(&Value::Double(-5e-324))).unwrap(),
            Value::Double(-5e-324)
        );
        assert_eq!(
            decode(&encode(&Value::Integer(i64::MIN))).unwrap(),
            Value::Integer(i64::MIN)
        );
        assert_eq!(
            decode(&encode(&Value::Double(1e300))).unwrap(),
            Value::Double(1e300)
        );
    }

    #[test]
    fn strings_mentioning_the_reserved_name_do_not_decode() {
        // Typed JSON text that mentions it never parses, so a decoded value holding it could
        // not be printed and read back (found by the decode fuzzer).
        let mentions = "nest serde_json::private::Numbered";
        let key = Value::Map(BTreeMap::from([(mentions.to_owned(), Value::Null)]));
        assert!(decode(&encode(&key)).is_err());
        assert!(decode(&encode(&Value::String(mentions.to_owned()))).is_err());
        let plain = Value::Map(BTreeMap::from([("serde_json".to_owned(), Value::Null)]));
        assert_eq!(decode(&encode(&plain)), Ok(plain));
        // Nor does a name or a reference: paths cannot mention it (ResourcePath::parse).
        let mut name = Vec::new();
        encode_segments(&mut name, &["c".to_owned(), mentions.to_owned()]);
        assert!(decode_name(&name).is_err());
        let mut reference = vec![tag::REFERENCE];
        encode_segments(&mut reference, &["c".to_owned(), mentions.to_owned()]);
        assert!(decode(&reference).is_err());
    }

    #[test]
    fn strings_with_zero_and_ff_bytes() {
        let values = [
            "",
            "\u{1}",
            "a",
            "a\u{1}",
            "a\u{7f}",
            "ab",
            "ÿ",
            "\u{10FFFF}",
        ];
        for w in values.windows(2) {
            check_order(&Value::String(w[0].into()), &Value::String(w[1].into()));
        }
        let bytes = [
            vec![],
            vec![0],
            vec![0, 0],
            vec![0, 0xFF],
            vec![0, 1],
            vec![1],
            vec![0xFF],
            vec![0xFF, 0],
        ];
        let mut sorted = bytes.clone();
        sorted.sort();
        for w in sorted.windows(2) {
            check_order(&Value::Bytes(w[0].clone()), &Value::Bytes(w[1].clone()));
        }
    }

    #[test]
    fn names_sort_segment_by_segment() {
        let a = ResourcePath::parse("a/b").unwrap();
        let a_sub = ResourcePath::parse("a/b/c/d").unwrap();
        let a_dash = ResourcePath::parse("a-/b").unwrap();
        assert!(encode_name(&a) < encode_name(&a_sub));
        assert!(
            encode_name(&a_sub) < encode_name(&a_dash),
            "segment order, not string order"
        );
        assert_eq!(decode_name(&encode_name(&a_sub)).unwrap(), a_sub);
    }

    #[test]
    fn truncation_is_monotone_and_descending_reverses() {
        let long_a = Value::String("a".repeat(2000));
        let long_b = Value::String(format!("{}b", "a".repeat(1999)));
        let short = Value::String("b".into());
        let ea = encode_index_value(&long_a, Direction::Ascending);
        let eb = encode_index_value(&long_b, Direction::Ascending);
        assert_eq!(ea.len(), MAX_INDEXED_VALUE_BYTES);
        assert_eq!(ea, eb);
        assert!(ea < encode_index_value(&short, Direction::Ascending));
        assert!(
            encode_index_value(&long_a, Direction::Descending)
                > encode_index_value(&short, Direction::Descending)
        );
    }

    #[test]
    fn decoder_rejects_garbage() {
        assert!(decode(&[]).is_err());
        assert!(decode(&[0x99]).is_err());
        assert!(decode(&[0x10, 0x10]).is_err());
        assert!(decode(&[0x34, 0, 0]).is_err());
        assert!(decode(&[0x50, b'a']).is_err());
        assert!(decode(&[0x90; 1000]).is_err());
        assert!(
            decode(&[0x34, 0x04, 0x33, 0x00, 0, 0, 0, 0, 0, 0, 0]).is_err(),
            "not normalised"
        );
    }
}
