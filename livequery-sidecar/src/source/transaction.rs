//! Assembling decoded pgoutput messages, Begin .. Commit, into committed [`Transaction`]s.
//!
//! Pure: it takes messages however they arrived (raw XLogData payloads, the boundary events
//! pgwire-replication decodes itself, or rows of `pg_logical_slot_peek_binary_changes`).

use docstore_core::value::Timestamp;
use thiserror::Error;

use super::entities::{Change, EntitiesDecoder, RowError};
use super::pgoutput::{DecodeError, LogicalMessage, Lsn, Message};

/// A committed transaction of the change stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Transaction {
    /// Its 32-bit xid, as pgoutput sends it (widen it against a snapshot: `changelog`).
    pub xid: u32,
    /// The LSN of its commit record: its position in the stream.
    pub commit_lsn: Lsn,
    /// The LSN just past its commit record: what the slot is confirmed to once no consumer
    /// needs the transaction.
    pub end_lsn: Lsn,
    pub commit_time: Timestamp,
    /// The changes of `docstore.entities`, in commit order.
    pub changes: Vec<Change>,
    /// Transactional `pg_logical_emit_message`s (heartbeats among them), in order.
    pub messages: Vec<EmittedMessage>,
}

/// A message of `pg_logical_emit_message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmittedMessage {
    pub lsn: Lsn,
    pub prefix: String,
    pub content: Vec<u8>,
}

impl From<&LogicalMessage<'_>> for EmittedMessage {
    fn from(m: &LogicalMessage<'_>) -> Self {
        EmittedMessage {
            lsn: m.lsn,
            prefix: m.prefix.to_owned(),
            content: m.content.to_vec(),
        }
    }
}

/// What the assembler hands on.
#[derive(Debug, Clone, PartialEq)]
pub enum Assembled {
    /// A transaction, at its Commit.
    Transaction(Transaction),
    /// A non-transactional `pg_logical_emit_message` (delivered at once, outside any
    /// transaction).
    Message(EmittedMessage),
}

/// Why the stream could not be assembled into transactions.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum AssembleError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Row(#[from] RowError),
    #[error("pgoutput {0} outside a transaction")]
    OutsideTransaction(&'static str),
    #[error("pgoutput Begin of xid {new} inside the open transaction of xid {open}")]
    NestedBegin { open: u32, new: u32 },
    #[error("Commit at {commit} does not end the transaction that Begin announced at {begin}")]
    CommitMismatch { begin: Lsn, commit: Lsn },
    #[error("commit time {0} (microseconds since 2000-01-01) is out of range")]
    CommitTime(i64),
}

/// Builds transactions from a stream of messages; keeps the relations it has seen (they
/// outlive transactions) and the open transaction.
#[derive(Debug, Default)]
pub struct Assembler {
    rows: EntitiesDecoder,
    open: Option<Transaction>,
}

impl Assembler {
    /// An assembler at the start of a replication session.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a transaction has begun and not yet committed.
    pub fn in_transaction(&self) -> bool {
        self.open.is_some()
    }

    /// Decode one raw pgoutput message and take it in.
    ///
    /// # Errors
    /// As [`Assembler::push`], and [`AssembleError::Decode`].
    pub fn push_bytes(&mut self, bytes: &[u8]) -> Result<Option<Assembled>, AssembleError> {
        let message = super::pgoutput::decode(bytes)?;
        self.push(&message)
    }

    /// Take in one message; a Commit hands on its transaction, a non-transactional message
    /// itself.
    ///
    /// # Errors
    /// A row that does not decode, a Begin inside a transaction, a change or Commit outside
    /// one, a Commit at another LSN than its Begin announced. After an error the stream is
    /// not trustworthy: reconnect (the open transaction is dropped, and is sent again).
    pub fn push(&mut self, message: &Message<'_>) -> Result<Option<Assembled>, AssembleError> {
        match message {
            Message::Begin(begin) => {
                if let Some(open) = &self.open {
                    let open = open.xid;
                    self.open = None;
                    return Err(AssembleError::NestedBegin {
                        open,
                        new: begin.xid,
                    });
                }
                self.open = Some(Transaction {
                    xid: begin.xid,
                    commit_lsn: begin.final_lsn,
                    end_lsn: begin.final_lsn,
                    commit_time: commit_time(begin.commit_time)?,
                    changes: Vec::new(),
                    messages: Vec::new(),
                });
                Ok(None)
            }
            Message::Commit(commit) => {
                let mut txn = self
                    .open
                    .take()
                    .ok_or(AssembleError::OutsideTransaction("Commit"))?;
                if commit.commit_lsn != txn.commit_lsn {
                    return Err(AssembleError::CommitMismatch {
                        begin: txn.commit_lsn,
                        commit: commit.commit_lsn,
                    });
                }
                txn.end_lsn = commit.end_lsn;
                txn.commit_time = commit_time(commit.commit_time)?;
                Ok(Some(Assembled::Transaction(txn)))
            }
            Message::Logical(m) if !m.transactional => Ok(Some(Assembled::Message(m.into()))),
            Message::Logical(m) => {
                let txn = self
                    .open
                    .as_mut()
                    .ok_or(AssembleError::OutsideTransaction("transactional Message"))?;
                txn.messages.push(m.into());
                Ok(None)
            }
            Message::Relation(_) | Message::Type(_) | Message::Origin(_) => {
                self.rows.apply(message, &mut Vec::new())?;
                Ok(None)
            }
            Message::Insert(_) | Message::Update(_) | Message::Delete(_) | Message::Truncate(_) => {
                let Some(txn) = self.open.as_mut() else {
                    return Err(AssembleError::OutsideTransaction("row change"));
                };
                if let Err(e) = self.rows.apply(message, &mut txn.changes) {
                    self.open = None;
                    return Err(e.into());
                }
                Ok(None)
            }
        }
    }
}

/// A commit time of pgoutput (microseconds since 2000-01-01) as a timestamp.
///
/// # Errors
/// [`AssembleError::CommitTime`] outside Firestore's timestamp range.
pub fn commit_time(pg_micros: i64) -> Result<Timestamp, AssembleError> {
    Timestamp::from_postgres_micros(pg_micros).ok_or(AssembleError::CommitTime(pg_micros))
}

#[cfg(test)]
mod tests {
    use super::*;
    // `super::super`, not `crate::source`: the fuzz crate includes this file by path.
    use super::super::pgoutput::{Begin, Commit};

    fn begin(xid: u32, lsn: u64) -> Message<'static> {
        Message::Begin(Begin {
            final_lsn: Lsn(lsn),
            commit_time: 0,
            xid,
        })
    }

    fn commit(lsn: u64, end: u64) -> Message<'static> {
        Message::Commit(Commit {
            flags: 0,
            commit_lsn: Lsn(lsn),
            end_lsn: Lsn(end),
            commit_time: 1,
        })
    }

    #[test]
    fn begin_messages_commit() {
        let mut a = Assembler::new();
        assert_eq!(a.push(&begin(7, 100)), Ok(None));
        let heartbeat = Message::Logical(LogicalMessage {
            transactional: true,
            lsn: Lsn(90),
            prefix: "docstore-heartbeat",
            content: b"1",
        });
        assert_eq!(a.push(&heartbeat), Ok(None));
        let Ok(Some(Assembled::Transaction(txn))) = a.push(&commit(100, 120)) else {
            panic!("no transaction")
        };
        assert_eq!(txn.xid, 7);
        assert_eq!((txn.commit_lsn, txn.end_lsn), (Lsn(100), Lsn(120)));
        assert_eq!(txn.commit_time.postgres_micros(), 1);
        assert_eq!(txn.messages.len(), 1);
        assert_eq!(txn.messages[0].prefix, "docstore-heartbeat");
        assert!(!a.in_transaction());
    }

    #[test]
    fn out_of_order_boundaries_are_errors() {
        let mut a = Assembler::new();
        assert_eq!(
            a.push(&commit(1, 2)),
            Err(AssembleError::OutsideTransaction("Commit"))
        );
        a.push(&begin(1, 10)).unwrap();
        assert!(matches!(
            a.push(&begin(2, 20)),
            Err(AssembleError::NestedBegin { open: 1, new: 2 })
        ));
        a.push(&begin(3, 30)).unwrap();
        assert!(matches!(
            a.push(&commit(31, 40)),
            Err(AssembleError::CommitMismatch { .. })
        ));
        let plain = Message::Logical(LogicalMessage {
            transactional: false,
            lsn: Lsn(5),
            prefix: "p",
            content: b"",
        });
        assert!(matches!(a.push(&plain), Ok(Some(Assembled::Message(_)))));
    }
}
