//! Typed JSON text (a stored document's data) straight to the protobuf wire bytes of
//! Firestore's `Document`, with no prost tree between (no map hashed, no key allocated twice),
//! for the reads of the gRPC front end. Feature `firestore-proto`.
//!
//! The meaning is [`crate::proto`]'s by construction. The walker is typed JSON's one-pass
//! reader ([`typed_json::parse_with`], the same as [`proto::document_from_typed_json`]'s);
//! every value that is not an array or a map goes to the wire through
//! [`proto::value_into_proto`] and prost's own encoder; a root that is not a plain map (or that
//! has a `__type__` field) is read again by [`proto::fields_from_typed_json`], whose answer
//! (its fields, or its refusal) stands. What this module writes itself is the framing of
//! containers: an array's `values`, a map's entries (`key` 1, left out when empty as prost
//! leaves out a default key, then `value` 2), the `Value` fields `array_value` and
//! `map_value`, and the document's own fields, in field number order as prost writes them.
//! Decoded by prost, the bytes are the tree [`proto::document_from_typed_json`] builds (a test
//! compares them on generated documents); only the order of map entries differs from what
//! prost would write for that tree (the order of its `HashMap`, which no reader relies on).
//!
//! Writing: every value goes to the end of one buffer. A container's elements are written
//! before their sizes are known, so the container's framing is put in front of them
//! afterwards: each byte is moved once per level of nesting.

use std::cell::RefCell;

use prost::bytes::BufMut;
use prost::encoding::{
    decode_varint, encode_key, encode_varint, encoded_len_varint, key_len, message, string,
    WireType,
};
use prost::Message;

use crate::path::ResourcePath;
use crate::proto::{
    self, timestamp_to_proto, value_into_proto, DatabaseName, ProtoDocument, ProtoTimestamp,
    VECTOR_TYPE_KEY,
};
use crate::typed_json::{self, Build, TypedJsonError};
use crate::value::{Timestamp, Value};

// Field numbers of google/firestore/v1/document.proto, and of the entry protobuf encodes a
// `map<string, Value>` field with.
const VALUE_MAP_VALUE: u32 = 6;
const VALUE_ARRAY_VALUE: u32 = 9;
const ARRAY_VALUE_VALUES: u32 = 1;
const MAP_VALUE_FIELDS: u32 = 1;
const ENTRY_KEY: u32 = 1;
const ENTRY_VALUE: u32 = 2;
const DOCUMENT_NAME: u32 = 1;
const DOCUMENT_FIELDS: u32 = 2;
const DOCUMENT_CREATE_TIME: u32 = 3;
const DOCUMENT_UPDATE_TIME: u32 = 4;
/// The one-byte keys of a map's entry in a `MapValue` and in a `Document`.
const MAP_ENTRY: u8 = key_byte(MAP_VALUE_FIELDS);
const DOCUMENT_ENTRY: u8 = key_byte(DOCUMENT_FIELDS);

/// The key of a length-delimited field whose number is below 16: one byte (checked when the
/// constants are built).
const fn key_byte(tag: u32) -> u8 {
    assert!(tag < 16);
    #[allow(clippy::cast_possible_truncation)] // below 16, shifted by 3, or 2: below 128
    let byte = ((tag << 3) | 2) as u8;
    byte
}

/// The key and length of length-delimited fields, written on the stack (two at most: a key
/// is at most 5 bytes, a length at most 10).
struct Head {
    bytes: [u8; 32],
    len: usize,
}

impl Head {
    fn new() -> Head {
        Head {
            bytes: [0; 32],
            len: 0,
        }
    }

    fn of(tag: u32, len: usize) -> Head {
        let mut head = Head::new();
        head.frame(tag, len);
        head
    }

    /// Add the key of field `tag` and the length `len` of its content.
    fn frame(&mut self, tag: u32, len: usize) {
        let mut slot = &mut self.bytes[self.len..];
        let room = slot.len();
        encode_key(tag, WireType::LengthDelimited, &mut slot);
        encode_varint(len as u64, &mut slot);
        self.len += room - slot.len();
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The size of the frame of a length-delimited field `tag` whose content is `len` bytes.
fn frame_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64)
}

/// A value written: its encoded `Value` message is the end of the buffer from `start`.
#[derive(Debug, Clone, Copy)]
struct Written {
    start: usize,
    /// For a map read from a plain JSON object without a `__type__` field: where its entries
    /// start (after the `map_value` frame). Such a map is a document's fields as they are.
    entries: Option<usize>,
}

/// A map's entries being written (each entry framed as a `MapValue.fields`).
#[derive(Debug, Default)]
struct Entries {
    /// Where the first entry starts; `None` until there is one.
    start: Option<usize>,
    /// Whether a key is `__type__` (the map may be a vector's wire form).
    type_key: bool,
}

/// [`Build`] of wire bytes: each value's encoded `Value` message written to the end of `buf`.
struct WireBuild<'a> {
    db: &'a DatabaseName,
    buf: RefCell<Vec<u8>>,
}

impl Build for WireBuild<'_> {
    type Out = Written;
    type Fields = Entries;

    fn value(&self, value: Value) -> Written {
        let mut buf = self.buf.borrow_mut();
        let start = buf.len();
        value_into_proto(value, self.db).encode_raw(&mut *buf);
        Written {
            start,
            entries: None,
        }
    }

    fn array(&self, items: Vec<Written>) -> Written {
        let mut buf = self.buf.borrow_mut();
        let end = buf.len();
        let start = items.first().map_or(end, |item| item.start);
        // The elements lie back to back from `start`; each gets a `values` frame, and the
        // whole an `array_value` frame. Moved back to front, each to where it ends up: its
        // destination is at or after where it is, and after every element before it.
        let mut inner = 0;
        let mut next = end;
        for item in items.iter().rev() {
            let len = next - item.start;
            inner += frame_len(ARRAY_VALUE_VALUES, len) + len;
            next = item.start;
        }
        let outer = Head::of(VALUE_ARRAY_VALUE, inner);
        buf.resize(start + outer.len + inner, 0);
        let (mut src_end, mut dst_end) = (end, buf.len());
        for item in items.iter().rev() {
            let len = src_end - item.start;
            let dst = dst_end - len;
            buf.copy_within(item.start..src_end, dst);
            let head = Head::of(ARRAY_VALUE_VALUES, len);
            buf[dst - head.len..dst].copy_from_slice(head.bytes());
            (src_end, dst_end) = (item.start, dst - head.len);
        }
        buf[start..start + outer.len].copy_from_slice(outer.bytes());
        Written {
            start,
            entries: None,
        }
    }

    fn insert(&self, fields: &mut Entries, key: String, value: Written) {
        let mut buf = self.buf.borrow_mut();
        let value_len = buf.len() - value.start;
        // A repeated key is written again: a reader keeps the last, as `Build::insert` says.
        let key_len = if key.is_empty() {
            0
        } else {
            frame_len(ENTRY_KEY, key.len()) + key.len()
        };
        let entry_len = key_len + frame_len(ENTRY_VALUE, value_len) + value_len;
        let mut head = Head::of(MAP_VALUE_FIELDS, entry_len);
        if !key.is_empty() {
            head.frame(ENTRY_KEY, key.len());
        }
        let tail = Head::of(ENTRY_VALUE, value_len);
        insert_at(
            &mut buf,
            value.start,
            [head.bytes(), key.as_bytes(), tail.bytes()],
        );
        fields.start.get_or_insert(value.start);
        fields.type_key |= key == VECTOR_TYPE_KEY;
    }

    fn map(&self, fields: Entries) -> Written {
        let mut buf = self.buf.borrow_mut();
        let start = fields.start.unwrap_or(buf.len());
        let head = Head::of(VALUE_MAP_VALUE, buf.len() - start);
        insert_at(&mut buf, start, [head.bytes()]);
        Written {
            start,
            entries: (!fields.type_key).then_some(start + head.len),
        }
    }
}

/// Put `parts`, one after the other, at `at` in `buf`, moving what follows (a value's bytes,
/// put in front of which is its framing) once, with two copies and no iterator (`Vec::splice`
/// of the same cost about a tenth of [`document_wire`]'s time).
fn insert_at<const N: usize>(buf: &mut Vec<u8>, at: usize, parts: [&[u8]; N]) {
    let len: usize = parts.iter().map(|part| part.len()).sum();
    let end = buf.len();
    buf.resize(end + len, 0);
    buf.copy_within(at..end, at + len);
    let mut to = at;
    for part in parts {
        buf[to..to + part.len()].copy_from_slice(part);
        to += part.len();
    }
}

/// A document's fields on the wire.
#[derive(Debug)]
enum WireFields<'s> {
    /// Encoded entries, each framed as a `Document.fields`.
    Entries(&'s [u8]),
    /// A document (only its fields set) read the tree's way.
    Tree(ProtoDocument),
}

/// A stored document ready to be written as the wire bytes of Firestore's `Document`
/// ([`DocumentWire::encode_raw`]), made by [`document_wire`].
#[derive(Debug)]
pub struct DocumentWire<'s> {
    name: String,
    fields: WireFields<'s>,
    create_time: ProtoTimestamp,
    update_time: ProtoTimestamp,
}

impl DocumentWire<'_> {
    /// The size of the `Document` message's content ([`DocumentWire::encode_raw`]'s bytes).
    pub fn encoded_len(&self) -> usize {
        let name = if self.name.is_empty() {
            0
        } else {
            string::encoded_len(DOCUMENT_NAME, &self.name)
        };
        let fields = match &self.fields {
            WireFields::Entries(bytes) => bytes.len(),
            WireFields::Tree(doc) => doc.encoded_len(),
        };
        name + fields
            + message::encoded_len(DOCUMENT_CREATE_TIME, &self.create_time)
            + message::encoded_len(DOCUMENT_UPDATE_TIME, &self.update_time)
    }

    /// Write the `Document` message's content (no length before it), fields in number order.
    pub fn encode_raw(&self, buf: &mut impl BufMut) {
        if !self.name.is_empty() {
            string::encode(DOCUMENT_NAME, &self.name, buf);
        }
        match &self.fields {
            WireFields::Entries(bytes) => buf.put_slice(bytes),
            WireFields::Tree(doc) => doc.encode_raw(buf),
        }
        message::encode(DOCUMENT_CREATE_TIME, &self.create_time, buf);
        message::encode(DOCUMENT_UPDATE_TIME, &self.update_time, buf);
    }

    /// [`DocumentWire::encode_raw`] into a new buffer of the right size.
    pub fn encode_to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_raw(&mut out);
        out
    }
}

/// A stored document, its data typed JSON text, ready to be written as the wire bytes of
/// Firestore's `Document`: decoded by prost, what [`proto::document_from_typed_json`] returns.
/// `scratch` holds the encoded fields (cleared first; reuse it across documents).
///
/// # Errors
/// As [`proto::document_from_typed_json`].
pub fn document_wire<'s>(
    db: &DatabaseName,
    path: &ResourcePath,
    text: &str,
    create_time: Timestamp,
    update_time: Timestamp,
    scratch: &'s mut Vec<u8>,
) -> Result<DocumentWire<'s>, TypedJsonError> {
    scratch.clear();
    // The wire bytes are about the size of the text (a little smaller: no quotes, shorter
    // framing than JSON's punctuation); reserved once, the buffer is not grown field by field.
    scratch.reserve(text.len());
    let build = WireBuild {
        db,
        buf: RefCell::new(std::mem::take(scratch)),
    };
    let root = typed_json::parse_with(text, &build);
    *scratch = build.buf.into_inner();
    let entries = root?
        .entries
        .filter(|&at| refile_entries(scratch.get_mut(at..).unwrap_or_default()));
    let scratch: &'s Vec<u8> = scratch;
    let fields = match entries {
        Some(at) => WireFields::Entries(scratch.get(at..).unwrap_or_default()),
        // Not a plain map, or one that may be a vector's wire form: the tree's reading, with
        // its refusals (`proto::document_fields`).
        None => WireFields::Tree(ProtoDocument {
            fields: proto::fields_from_typed_json(text, db)?,
            ..ProtoDocument::default()
        }),
    };
    Ok(DocumentWire {
        name: db.document_name(path),
        fields,
        create_time: timestamp_to_proto(create_time),
        update_time: timestamp_to_proto(update_time),
    })
}

/// Turn a map's entries (each framed as `MapValue.fields`) into a document's (each framed as
/// `Document.fields`): both keys are one byte, so only that byte changes. `false` when the
/// bytes are not such entries (never: they are what [`WireBuild`] wrote).
fn refile_entries(entries: &mut [u8]) -> bool {
    let mut at = 0;
    while let Some(key) = entries.get_mut(at) {
        if *key != MAP_ENTRY {
            return false;
        }
        *key = DOCUMENT_ENTRY;
        let mut rest = entries.get(at + 1..).unwrap_or_default();
        let before = rest.len();
        let Ok(len) = decode_varint(&mut rest).map(usize::try_from) else {
            return false;
        };
        let Ok(len) = len else { return false };
        at += 1 + (before - rest.len()) + len;
    }
    at == entries.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_byte_keys_are_protobufs() {
        for (tag, byte) in [
            (MAP_VALUE_FIELDS, MAP_ENTRY),
            (DOCUMENT_FIELDS, DOCUMENT_ENTRY),
        ] {
            let mut key = Vec::new();
            encode_key(tag, WireType::LengthDelimited, &mut key);
            assert_eq!(key, [byte]);
        }
    }
}
