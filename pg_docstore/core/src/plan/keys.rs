//! Between key bytes and positions in the plan's order.
//!
//! - [`order_key`] reads a scan's key into an [`OrderKey`] (pinned components from the scan,
//!   the others decoded from the suffix), so that keys of different scans, and rows of
//!   different branches, compare with [`Plan::compare`].
//! - [`seek_key`] is the inverse for seeking: the boundary, in one scan's byte layout,
//!   between the keys before a position and the keys at or after it (a full row position for
//!   zig-zag joins, or a cursor's prefix).
//! - [`scan_bounds`] / [`collection_bounds`] are a scan's ranges cut by the plan's cursors.
//! - [`key_matches`] checks the scan's key filters on a decoded key.
//!
//! A value longer than 1,500 bytes is stored cut; the decoder recognises it (a full indexed
//! encoding is never longer than 1,500 bytes, and a cut one is never a complete encoding)
//! and keeps its bytes, which still order correctly against the other keys of the index.

use thiserror::Error;

use crate::encoding::{self, tag, DecodeError, MAX_INDEXED_VALUE_BYTES};
use crate::error::ErrorKind;
use crate::value::Value;

use super::ranges::{intersect_range, successor_or_top};
use super::terms::holds_for;
use super::{Bound, CollectionScan, KeyRange, OrderKey, OrderValue, Plan, Scan, Slot, SuffixPart};

/// A key that does not have the scan's layout (a corrupt entry, or a key of another scan).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    #[error("the key does not start with the scan's prefix")]
    Prefix,
    #[error("the key's suffix does not decode: {0}")]
    Decode(#[from] DecodeError),
    #[error("the key's suffix has no value for order component {0}")]
    Missing(usize),
}

impl KeyError {
    /// The kind of failure: a key without the scan's layout is corrupt or a bug, so every
    /// key error is [`ErrorKind::Internal`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Internal
    }
}

/// The outcome of [`key_matches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyCheck {
    /// The key passes every key filter.
    Pass,
    /// The key fails one: skip it.
    Fail,
    /// A tested value is cut at 1,500 bytes: check the document with the matcher.
    Recheck,
}

/// A scan's key layout, shared by index scans and collection listings.
struct Layout<'a> {
    prefix: &'a [u8],
    suffix: &'a [SuffixPart],
    slots: &'a [Slot],
    backward: bool,
}

const NAME_SUFFIX: [SuffixPart; 1] = [SuffixPart::Name { descending: false }];
const NAME_SLOTS: [Slot; 1] = [Slot::Part(0)];

impl<'a> Layout<'a> {
    fn scan(scan: &'a Scan) -> Layout<'a> {
        Layout {
            prefix: &scan.prefix,
            suffix: &scan.suffix,
            slots: &scan.slots,
            backward: scan.backward,
        }
    }

    fn collection(collection: &CollectionScan) -> Layout<'static> {
        Layout {
            prefix: &[],
            suffix: &NAME_SUFFIX,
            slots: &NAME_SLOTS,
            backward: collection.backward,
        }
    }
}

/// One value off the front of `bytes` (ascending form): the value and its length; a cut value
/// has no decoded value and is 1,500 bytes long.
fn read_value(bytes: &[u8]) -> Result<(OrderValue, usize), KeyError> {
    match encoding::decode_prefix(bytes) {
        Ok((value, used)) if used <= MAX_INDEXED_VALUE_BYTES => Ok((
            OrderValue {
                encoded: bytes[..used].to_vec(),
                value: Some(value),
                truncated: false,
            },
            used,
        )),
        // Longer than an indexed value can be, or incomplete: the value was cut.
        _ if bytes.len() >= MAX_INDEXED_VALUE_BYTES => Ok((
            OrderValue {
                encoded: bytes[..MAX_INDEXED_VALUE_BYTES].to_vec(),
                value: None,
                truncated: true,
            },
            MAX_INDEXED_VALUE_BYTES,
        )),
        Ok(_) => Err(KeyError::Decode(DecodeError::Invalid(
            "an indexed value longer than 1500 bytes",
        ))),
        Err(e) => Err(KeyError::Decode(e)),
    }
}

fn inverted(bytes: &[u8]) -> Vec<u8> {
    bytes.iter().map(|b| !b).collect()
}

fn decode(layout: &Layout<'_>, key: &[u8]) -> Result<OrderKey, KeyError> {
    let rest = key.strip_prefix(layout.prefix).ok_or(KeyError::Prefix)?;
    let mut parts: Vec<OrderValue> = Vec::with_capacity(layout.suffix.len());
    let mut at = 0;
    for part in layout.suffix {
        let tail = &rest[at.min(rest.len())..];
        match part {
            SuffixPart::Value { descending, .. } => {
                let (value, used) = if *descending {
                    read_value(&inverted(tail))?
                } else {
                    read_value(tail)?
                };
                parts.push(value);
                at += used;
            }
            SuffixPart::Name { descending } => {
                let path = if *descending {
                    encoding::decode_name(&inverted(tail))?
                } else {
                    encoding::decode_name(tail)?
                };
                parts.push(OrderValue::name(&path));
                at = rest.len();
            }
        }
    }
    let values = layout
        .slots
        .iter()
        .enumerate()
        .map(|(i, slot)| match slot {
            Slot::Fixed { value, .. } => Ok(value.clone()),
            Slot::Part(p) => parts.get(*p).cloned().ok_or(KeyError::Missing(i)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(OrderKey { values })
}

/// The position of one of the scan's keys in the plan's order.
///
/// # Errors
/// [`KeyError`] when the key does not have the scan's layout.
pub fn order_key(scan: &Scan, key: &[u8]) -> Result<OrderKey, KeyError> {
    decode(&Layout::scan(scan), key)
}

/// The position of a row of a [`super::Branch::Collection`] listing, from its encoded name.
///
/// # Errors
/// [`KeyError::Decode`] when the bytes are not an encoded name.
pub fn name_order_key(name: &[u8]) -> Result<OrderKey, KeyError> {
    let path = encoding::decode_name(name)?;
    Ok(OrderKey {
        values: vec![OrderValue::name(&path)],
    })
}

/// The end of the search: every key of the layout with prefix `bytes` is at (`!exclusive`)
/// or before (`exclusive`) the position.
fn finish(layout: &Layout<'_>, bytes: Vec<u8>, exclusive: bool) -> Vec<u8> {
    // Forward: keys >= boundary are at or after; backward: keys < boundary are.
    if exclusive != layout.backward {
        successor_or_top(&bytes)
    } else {
        bytes
    }
}

fn seek(layout: &Layout<'_>, position: &OrderKey, exclusive: bool) -> Vec<u8> {
    let mut bytes = layout.prefix.to_vec();
    let mut next_part = 0;
    for (value, slot) in position.values.iter().zip(layout.slots) {
        match slot {
            Slot::Fixed {
                value: fixed,
                descending,
            } => {
                let o = value.encoded.cmp(&fixed.encoded);
                let o = if *descending { o.reverse() } else { o };
                if o.is_ne() {
                    // Before every key here: all are after it; past them: none is.
                    return finish(layout, bytes, o.is_gt());
                }
            }
            Slot::Part(part) => {
                for p in next_part..=*part {
                    match layout.suffix.get(p) {
                        Some(SuffixPart::Value { descending, .. }) => {
                            let mut encoded = value.encoded.clone();
                            encoding::truncate(&mut encoded);
                            if *descending {
                                encoding::invert(&mut encoded);
                            }
                            bytes.extend(encoded);
                        }
                        Some(SuffixPart::Name { descending }) => {
                            let Some(Value::Reference(path)) = &value.value else {
                                // Not a name: it sorts before every name (a lower type) or
                                // after them all.
                                let lower =
                                    value.encoded.first().is_some_and(|&t| t < tag::REFERENCE);
                                let query_descending = *descending != layout.backward;
                                let before = lower != query_descending;
                                return finish(layout, bytes, !before);
                            };
                            let mut name = encoding::encode_name(path);
                            if *descending {
                                encoding::invert(&mut name);
                            }
                            bytes.extend(name);
                        }
                        None => return finish(layout, bytes, exclusive),
                    }
                }
                next_part = part + 1;
            }
        }
    }
    finish(layout, bytes, exclusive)
}

/// The boundary, in this scan's key bytes, between the keys before `position` in the plan's
/// order and the keys at or after it (strictly after it when `exclusive`). A forward scan's
/// keys at or after the position are those `>=` the boundary; a backward scan's are those
/// `<` the boundary. `position` is a full row position (zig-zag: seek every scan to the
/// candidate) or a prefix (a cursor: the block of keys that share those values).
pub fn seek_key(scan: &Scan, position: &OrderKey, exclusive: bool) -> Vec<u8> {
    seek(&Layout::scan(scan), position, exclusive)
}

/// A cursor's position and exclusivity for seeking. Where a value is cut (longer than 1,500
/// bytes), the position stops at that value and keeps its whole block (the plan then asks
/// for a recheck).
fn cursor_seek(bound: &Bound, start: bool) -> (OrderKey, bool) {
    let exclusive = if start {
        !bound.inclusive
    } else {
        bound.inclusive
    };
    match bound.position.values.iter().position(|v| v.truncated) {
        Some(i) => (
            OrderKey {
                values: bound.position.values[..=i].to_vec(),
            },
            // Start: at or after the block; end: everything up to the end of the block.
            !start,
        ),
        None => (bound.position.clone(), exclusive),
    }
}

fn bounds(plan: &Plan, layout: &Layout<'_>, ranges: &[KeyRange]) -> Vec<KeyRange> {
    let mut lo: Option<Vec<u8>> = None;
    let mut hi: Option<Vec<u8>> = None;
    if let Some(start) = &plan.start {
        let (position, exclusive) = cursor_seek(start, true);
        let boundary = seek(layout, &position, exclusive);
        if layout.backward {
            hi = Some(boundary);
        } else {
            lo = Some(boundary);
        }
    }
    if let Some(end) = &plan.end {
        // Rows strictly after the end bound are the keys at or after this boundary.
        let (position, exclusive) = cursor_seek(end, false);
        let boundary = seek(layout, &position, exclusive);
        if layout.backward {
            lo = Some(boundary);
        } else {
            hi = Some(boundary);
        }
    }
    ranges
        .iter()
        .filter_map(|r| intersect_range(r, lo.as_deref(), hi.as_deref()))
        .collect()
}

fn whole(prefix: &[u8]) -> KeyRange {
    KeyRange {
        start: prefix.to_vec(),
        end: successor_or_top(prefix),
    }
}

/// The key ranges to read for a scan: its ranges (the whole prefix when it has none), cut by
/// the plan's start and end cursors; ascending byte order (a backward scan reads them last
/// to first, each descending).
pub fn scan_bounds(plan: &Plan, scan: &Scan) -> Vec<KeyRange> {
    let ranges = if scan.ranges.is_empty() {
        vec![whole(&scan.prefix)]
    } else {
        scan.ranges.clone()
    };
    bounds(plan, &Layout::scan(scan), &ranges)
}

/// The encoded-name ranges to read for a collection listing, cut by the plan's cursors.
pub fn collection_bounds(plan: &Plan, collection: &CollectionScan) -> Vec<KeyRange> {
    let ranges = if collection.ranges.is_empty() {
        vec![whole(&[])]
    } else {
        collection.ranges.clone()
    };
    bounds(plan, &Layout::collection(collection), &ranges)
}

/// Whether a decoded key passes the scan's key filters (and `name_under`).
pub fn key_matches(scan: &Scan, key: &OrderKey) -> KeyCheck {
    let Some(name) = key.name() else {
        return KeyCheck::Fail;
    };
    if let Some(parent) = &scan.name_under {
        let segments = name.segments();
        if segments.len() <= parent.segments().len() || !segments.starts_with(parent.segments()) {
            return KeyCheck::Fail;
        }
    }
    let mut result = KeyCheck::Pass;
    for filter in &scan.key_filters {
        match key
            .values
            .get(filter.position)
            .and_then(|v| v.value.as_ref())
        {
            Some(value) => match holds_for(&filter.filter, value, Some(name)) {
                Ok(true) => {}
                Ok(false) => return KeyCheck::Fail,
                Err(_) => result = KeyCheck::Recheck,
            },
            None => result = KeyCheck::Recheck,
        }
    }
    result
}
