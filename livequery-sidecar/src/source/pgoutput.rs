//! The pgoutput decoder: one logical replication message (the payload of an XLogData
//! message, or one row of `pg_logical_slot_peek_binary_changes`) into a [`Message`].
//!
//! Protocol version 1 (no streamed or two-phase transactions), as specified in the
//! PostgreSQL documentation, "Logical Replication Message Formats", and written by
//! `src/backend/replication/logical/proto.c`. All integers are big-endian; a String is
//! NUL-terminated. Values borrow from the input, so a 1 MiB document is never copied here.
//!
//! Pure: no I/O, and no input panics (fuzzed by `livequery-sidecar/fuzz`, target
//! `pgoutput`). This file, like `entities.rs`, uses nothing of the sidecar but its sibling
//! (`super::pgoutput`), so the fuzz crate includes it by path without building tokio.

use std::fmt;

use thiserror::Error;

/// A WAL position (`XLogRecPtr`), printed as Postgres prints it (`16/B374D848`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

impl Lsn {
    /// Parse Postgres' text form `XXXXXXXX/XXXXXXXX` (hex, upper or lower case).
    pub fn parse(text: &str) -> Option<Lsn> {
        let (high, low) = text.split_once('/')?;
        if high.is_empty() || low.is_empty() || high.len() > 8 || low.len() > 8 {
            return None;
        }
        let high = u32::from_str_radix(high, 16).ok()?;
        let low = u32::from_str_radix(low, 16).ok()?;
        Some(Lsn((u64::from(high) << 32) | u64::from(low)))
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

/// Why a message could not be decoded. Always a fault of the stream (or of a fuzzer), never
/// of a user's write.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("pgoutput message is empty")]
    Empty,
    #[error("pgoutput message '{tag}' ends early at byte {at}")]
    UnexpectedEnd { tag: char, at: usize },
    #[error("unknown pgoutput message type 0x{0:02x}")]
    UnknownMessage(u8),
    #[error("pgoutput message '{tag}': {what} is not valid UTF-8")]
    InvalidUtf8 { tag: char, what: &'static str },
    #[error("pgoutput message '{tag}': unexpected byte 0x{byte:02x} at {at} ({expected})")]
    UnexpectedByte {
        tag: char,
        at: usize,
        byte: u8,
        expected: &'static str,
    },
    #[error("pgoutput message '{tag}': negative length {length} at {at}")]
    NegativeLength { tag: char, at: usize, length: i32 },
    #[error("pgoutput message '{tag}': {count} trailing bytes")]
    TrailingBytes { tag: char, count: usize },
}

/// One decoded pgoutput message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    Begin(Begin),
    Commit(Commit),
    Origin(Origin<'a>),
    Relation(Relation),
    Type(TypeInfo),
    Insert(Insert<'a>),
    Update(Update<'a>),
    Delete(Delete<'a>),
    Truncate(Truncate),
    Logical(LogicalMessage<'a>),
}

/// 'B': the start of a committed transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Begin {
    /// The LSN of the commit record.
    pub final_lsn: Lsn,
    /// Commit time, microseconds since 2000-01-01 UTC (Postgres' epoch).
    pub commit_time: i64,
    /// The transaction's 32-bit xid.
    pub xid: u32,
}

/// 'C': the end of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commit {
    /// Unused by Postgres (0).
    pub flags: u8,
    /// The LSN of the commit record.
    pub commit_lsn: Lsn,
    /// The LSN just past the commit record: what a consumer confirms.
    pub end_lsn: Lsn,
    /// Commit time, microseconds since 2000-01-01 UTC.
    pub commit_time: i64,
}

/// 'O': the transaction was replicated from another origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin<'a> {
    pub commit_lsn: Lsn,
    pub name: &'a str,
}

/// 'R': the description of a relation, sent before its first change in a session and
/// again after its definition changed. Owned: the decoder of rows keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// The relation's OID: what later changes refer to.
    pub id: u32,
    /// Schema name (`pg_catalog` when Postgres sent the empty string).
    pub namespace: String,
    pub name: String,
    /// `relreplident`: `d` default, `n` nothing, `f` full, `i` index.
    pub replica_identity: u8,
    pub columns: Vec<Column>,
}

/// One column of a [`Relation`] (dropped and generated columns are not sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Part of the replica identity (the key a Delete carries).
    pub is_key: bool,
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
}

/// 'Y': the name of a type a relation's column uses (sent for non-builtin types).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeInfo {
    pub id: u32,
    pub namespace: String,
    pub name: String,
}

/// 'I': a new row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert<'a> {
    pub relation_id: u32,
    pub new: Tuple<'a>,
}

/// 'U': a changed row. `old` is there only when the replica identity changed ('K') or the
/// relation's identity is FULL ('O').
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update<'a> {
    pub relation_id: u32,
    pub old: Option<OldTuple<'a>>,
    pub new: Tuple<'a>,
}

/// 'D': a removed row, by its key ('K') or, with identity FULL, its whole old row ('O').
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete<'a> {
    pub relation_id: u32,
    pub old: OldTuple<'a>,
}

/// The old row of an Update or a Delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OldTuple<'a> {
    /// 'K': the replica identity columns; the others are null.
    Key(Tuple<'a>),
    /// 'O': the whole old row (replica identity FULL).
    Full(Tuple<'a>),
}

impl<'a> OldTuple<'a> {
    /// The tuple, whichever kind.
    pub fn tuple(&self) -> &Tuple<'a> {
        match self {
            OldTuple::Key(t) | OldTuple::Full(t) => t,
        }
    }
}

/// 'T': relations truncated in one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncate {
    pub cascade: bool,
    pub restart_identity: bool,
    pub relation_ids: Vec<u32>,
}

/// 'M': a message of `pg_logical_emit_message`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogicalMessage<'a> {
    /// Emitted with `transactional = true`: delivered inside its transaction.
    pub transactional: bool,
    pub lsn: Lsn,
    pub prefix: &'a str,
    pub content: &'a [u8],
}

/// The columns of one row, in the order of the relation's [`Column`]s.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tuple<'a> {
    pub columns: Vec<ColumnValue<'a>>,
}

/// One column's value in a [`Tuple`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnValue<'a> {
    /// 'n': SQL NULL (also every non-key column of a 'K' tuple).
    Null,
    /// 'u': a TOASTed value that the Update did not change; its value is not sent. The
    /// consumer takes it from the previous version of the row: never read it as empty.
    UnchangedToast,
    /// 't': the type's text output.
    Text(&'a [u8]),
    /// 'b': the type's binary send format (only with the `binary` option).
    Binary(&'a [u8]),
}

/// Decode one pgoutput message (protocol version 1).
///
/// # Errors
/// [`DecodeError`] for any input that is not exactly one well-formed message: an unknown
/// type byte, a truncated field, an unknown tuple or action byte, text that is not UTF-8,
/// or trailing bytes.
pub fn decode(bytes: &[u8]) -> Result<Message<'_>, DecodeError> {
    let (&tag, _) = bytes.split_first().ok_or(DecodeError::Empty)?;
    let mut r = Reader {
        bytes,
        pos: 1,
        tag: char::from(tag),
    };
    let message = match tag {
        b'B' => Message::Begin(Begin {
            final_lsn: Lsn(r.u64()?),
            commit_time: r.i64()?,
            xid: r.u32()?,
        }),
        b'C' => Message::Commit(Commit {
            flags: r.u8()?,
            commit_lsn: Lsn(r.u64()?),
            end_lsn: Lsn(r.u64()?),
            commit_time: r.i64()?,
        }),
        b'O' => Message::Origin(Origin {
            commit_lsn: Lsn(r.u64()?),
            name: r.string("origin name")?,
        }),
        b'R' => Message::Relation(relation(&mut r)?),
        b'Y' => Message::Type(TypeInfo {
            id: r.u32()?,
            namespace: namespace(r.string("type namespace")?),
            name: r.string("type name")?.to_owned(),
        }),
        b'I' => {
            let relation_id = r.u32()?;
            r.expect(b'N', "'N' (new tuple)")?;
            Message::Insert(Insert {
                relation_id,
                new: tuple(&mut r)?,
            })
        }
        b'U' => {
            let relation_id = r.u32()?;
            let at = r.pos;
            let old = match r.u8()? {
                b'K' => Some(OldTuple::Key(tuple(&mut r)?)),
                b'O' => Some(OldTuple::Full(tuple(&mut r)?)),
                b'N' => None,
                byte => return Err(r.unexpected(at, byte, "'K', 'O' or 'N'")),
            };
            if old.is_some() {
                r.expect(b'N', "'N' (new tuple)")?;
            }
            Message::Update(Update {
                relation_id,
                old,
                new: tuple(&mut r)?,
            })
        }
        b'D' => {
            let relation_id = r.u32()?;
            let at = r.pos;
            let old = match r.u8()? {
                b'K' => OldTuple::Key(tuple(&mut r)?),
                b'O' => OldTuple::Full(tuple(&mut r)?),
                byte => return Err(r.unexpected(at, byte, "'K' or 'O'")),
            };
            Message::Delete(Delete { relation_id, old })
        }
        b'T' => {
            let count = r.u32()?;
            let options = r.u8()?;
            // Each relation id takes 4 bytes: refuse a count the input cannot hold before
            // allocating for it.
            if (count as usize).saturating_mul(4) > r.remaining() {
                return Err(r.end());
            }
            let mut relation_ids = Vec::with_capacity(count as usize);
            for _ in 0..count {
                relation_ids.push(r.u32()?);
            }
            Message::Truncate(Truncate {
                cascade: options & 1 != 0,
                restart_identity: options & 2 != 0,
                relation_ids,
            })
        }
        b'M' => {
            let flags = r.u8()?;
            let lsn = Lsn(r.u64()?);
            let prefix = r.string("message prefix")?;
            let length = r.length()?;
            Message::Logical(LogicalMessage {
                transactional: flags & 1 != 0,
                lsn,
                prefix,
                content: r.take(length)?,
            })
        }
        other => return Err(DecodeError::UnknownMessage(other)),
    };
    match r.remaining() {
        0 => Ok(message),
        count => Err(DecodeError::TrailingBytes { tag: r.tag, count }),
    }
}

/// Postgres sends the empty string for `pg_catalog`.
fn namespace(text: &str) -> String {
    if text.is_empty() {
        "pg_catalog".to_owned()
    } else {
        text.to_owned()
    }
}

fn relation(r: &mut Reader<'_>) -> Result<Relation, DecodeError> {
    let id = r.u32()?;
    let namespace = namespace(r.string("relation namespace")?);
    let name = r.string("relation name")?.to_owned();
    let replica_identity = r.u8()?;
    let count = r.u16()?;
    // A column takes at least 10 bytes (flags, empty name, type, modifier).
    if usize::from(count).saturating_mul(10) > r.remaining() {
        return Err(r.end());
    }
    let mut columns = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let flags = r.u8()?;
        columns.push(Column {
            is_key: flags & 1 != 0,
            name: r.string("column name")?.to_owned(),
            type_oid: r.u32()?,
            type_modifier: r.i32()?,
        });
    }
    Ok(Relation {
        id,
        namespace,
        name,
        replica_identity,
        columns,
    })
}

fn tuple<'a>(r: &mut Reader<'a>) -> Result<Tuple<'a>, DecodeError> {
    let count = r.u16()?;
    // Each column takes at least its kind byte.
    if usize::from(count) > r.remaining() {
        return Err(r.end());
    }
    let mut columns = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let at = r.pos;
        let value = match r.u8()? {
            b'n' => ColumnValue::Null,
            b'u' => ColumnValue::UnchangedToast,
            b't' => {
                let length = r.length()?;
                ColumnValue::Text(r.take(length)?)
            }
            b'b' => {
                let length = r.length()?;
                ColumnValue::Binary(r.take(length)?)
            }
            byte => return Err(r.unexpected(at, byte, "'n', 'u', 't' or 'b'")),
        };
        columns.push(value);
    }
    Ok(Tuple { columns })
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    tag: char,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    fn end(&self) -> DecodeError {
        DecodeError::UnexpectedEnd {
            tag: self.tag,
            at: self.bytes.len(),
        }
    }

    fn unexpected(&self, at: usize, byte: u8, expected: &'static str) -> DecodeError {
        DecodeError::UnexpectedByte {
            tag: self.tag,
            at,
            byte,
            expected,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.end())?;
        let slice = self.bytes.get(self.pos..end).ok_or_else(|| self.end())?;
        self.pos = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    fn expect(&mut self, want: u8, expected: &'static str) -> Result<(), DecodeError> {
        let at = self.pos;
        match self.u8()? {
            byte if byte == want => Ok(()),
            byte => Err(self.unexpected(at, byte, expected)),
        }
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An Int32 byte count that must not be negative.
    fn length(&mut self) -> Result<usize, DecodeError> {
        let at = self.pos;
        let length = self.i32()?;
        usize::try_from(length).map_err(|_| DecodeError::NegativeLength {
            tag: self.tag,
            at,
            length,
        })
    }

    /// A NUL-terminated string.
    fn string(&mut self, what: &'static str) -> Result<&'a str, DecodeError> {
        let rest = self.bytes.get(self.pos..).ok_or_else(|| self.end())?;
        let nul = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.end())?;
        let text = std::str::from_utf8(&rest[..nul]).map_err(|_| DecodeError::InvalidUtf8 {
            tag: self.tag,
            what,
        })?;
        self.pos += nul + 1;
        Ok(text)
    }
}

#[cfg(test)]
#[path = "pgoutput_tests.rs"]
mod tests;
