//! Streams over `docstore.index_entries` key ranges and `docstore.entities` name ranges:
//! batched, seekable, forward or backward. A seek inside the fetched batch costs nothing; a
//! seek past it is one index range query starting at the target (a key seek, not a scan).

use std::collections::VecDeque;

use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid};

use crate::errors::DocstoreError;
use crate::pg::spi::plan;

const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
const BYTEA: PgOid = PgOid::BuiltIn(PgBuiltInOids::BYTEAOID);
const INT8: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8OID);

/// Where a stream reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `index_entries` keys (yields key and entity name).
    Entries,
    /// `entities` of one collection: `parent` fixed, names in the range (yields name, name).
    Collection,
    /// `entities` of one collection group: `collection_id` fixed (yields name, name).
    Group,
    /// `entities` of every collection (a kindless query): names in the range only, by the
    /// primary key (yields name, name).
    Kindless,
}

/// Counters for `explain(..., analyze => true)`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScanStats {
    pub queries: u64,
    pub rows: u64,
}

/// A stream of (key, name) in `[lower, upper)`, ascending or descending.
pub struct KeyStream {
    source: Source,
    database: String,
    /// Fixed column for Collection (encoded parent) and Group (collection id bytes).
    fixed: Vec<u8>,
    lower: Vec<u8>,
    upper: Vec<u8>,
    backward: bool,
    buffer: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// Continue after (exclusive) this key when the buffer runs out; None: from the range start.
    resume_after: Option<Vec<u8>>,
    exhausted: bool,
    batch: i64,
    pub stats: ScanStats,
}

impl KeyStream {
    pub fn new(
        source: Source,
        database: &str,
        fixed: Vec<u8>,
        lower: Vec<u8>,
        upper: Vec<u8>,
        backward: bool,
        batch: i64,
    ) -> Self {
        KeyStream {
            source,
            database: database.to_owned(),
            fixed,
            lower,
            upper,
            backward,
            buffer: VecDeque::new(),
            resume_after: None,
            exhausted: false,
            batch: batch.max(1),
            stats: ScanStats::default(),
        }
    }

    fn sql(&self) -> &'static str {
        // $2 lower bound, $3 upper bound, $4 limit, $5 fixed column (unused for entries; parameters
        // have declared types, so SPI prepares them anyway), $6 0 = inclusive start
        // (range start) / 1 = exclusive (resume after a key). Bounds are in scan direction.
        match (self.source, self.backward) {
            (Source::Entries, false) => {
                "select key, name from docstore.index_entries where database_id = $1 \
                 and key >= $2 and key < $3 and ($6 = 0 or key > $2) order by key limit $4"
            }
            (Source::Entries, true) => {
                "select key, name from docstore.index_entries where database_id = $1 \
                 and key >= $2 and key < $3 and ($6 = 0 or key < $3) order by key desc limit $4"
            }
            (Source::Collection, false) => {
                "select name, name from docstore.entities where database_id = $1 and parent = $5 \
                 and name >= $2 and name < $3 and ($6 = 0 or name > $2) order by name limit $4"
            }
            (Source::Collection, true) => {
                "select name, name from docstore.entities where database_id = $1 and parent = $5 \
                 and name >= $2 and name < $3 and ($6 = 0 or name < $3) order by name desc limit $4"
            }
            (Source::Group, false) => {
                "select name, name from docstore.entities where database_id = $1 \
                 and collection_id = convert_from($5, 'UTF8') \
                 and name >= $2 and name < $3 and ($6 = 0 or name > $2) order by name limit $4"
            }
            (Source::Group, true) => {
                "select name, name from docstore.entities where database_id = $1 \
                 and collection_id = convert_from($5, 'UTF8') \
                 and name >= $2 and name < $3 and ($6 = 0 or name < $3) order by name desc limit $4"
            }
            (Source::Kindless, false) => {
                "select name, name from docstore.entities where database_id = $1 and $5 is not null \
                 and name >= $2 and name < $3 and ($6 = 0 or name > $2) order by name limit $4"
            }
            (Source::Kindless, true) => {
                "select name, name from docstore.entities where database_id = $1 and $5 is not null \
                 and name >= $2 and name < $3 and ($6 = 0 or name < $3) order by name desc limit $4"
            }
        }
    }

    fn fill(&mut self, client: &SpiClient<'_>) -> Result<(), DocstoreError> {
        if self.exhausted || !self.buffer.is_empty() {
            return Ok(());
        }
        let (lower, upper, exclusive) = match (&self.resume_after, self.backward) {
            (None, _) => (self.lower.clone(), self.upper.clone(), 0i64),
            (Some(after), false) => (after.clone(), self.upper.clone(), 1),
            (Some(after), true) => (self.lower.clone(), after.clone(), 1),
        };
        // Index entries are read as the extension owner; listings of entities as the caller.
        let _owner = match self.source {
            Source::Entries => Some(crate::pg::owner::AsOwner::new(client)?),
            Source::Collection | Source::Group | Source::Kindless => None,
        };
        let stmt = plan(client, self.sql(), &[TEXT, BYTEA, BYTEA, INT8, BYTEA, INT8])?;
        let rows = client.select(
            &*stmt,
            None,
            &[
                self.database.as_str().into(),
                lower.into(),
                upper.into(),
                self.batch.into(),
                self.fixed.clone().into(),
                exclusive.into(),
            ],
        )?;
        self.stats.queries += 1;
        let mut fetched = 0i64;
        for row in rows {
            let key: Vec<u8> = row.get(1)?.unwrap_or_default();
            let name: Vec<u8> = row.get(2)?.unwrap_or_default();
            self.buffer.push_back((key, name));
            fetched += 1;
        }
        self.stats.rows += u64::try_from(fetched).unwrap_or(0);
        if fetched < self.batch {
            self.exhausted = true;
        }
        // Streams that keep going fetch bigger batches (up to 1024).
        self.batch = (self.batch * 2).min(1024);
        Ok(())
    }

    /// The current (key, name), fetching when needed.
    pub fn peek(
        &mut self,
        client: &SpiClient<'_>,
    ) -> Result<Option<&(Vec<u8>, Vec<u8>)>, DocstoreError> {
        self.fill(client)?;
        Ok(self.buffer.front())
    }

    /// Move past the current entry.
    pub fn advance(&mut self) {
        if let Some((key, _)) = self.buffer.pop_front() {
            if self.buffer.is_empty() {
                self.resume_after = Some(key);
            }
        }
    }

    /// The current range `[lower, upper)`.
    pub fn bounds(&self) -> (&[u8], &[u8]) {
        (&self.lower, &self.upper)
    }

    /// Skip to the keys at or after a boundary in scan direction: `>= target` forward,
    /// `< target` backward (the contract of `docstore_core::plan::seek_key`).
    pub fn seek(&mut self, target: &[u8]) {
        let kept = |key: &[u8]| {
            if self.backward {
                key < target
            } else {
                key >= target
            }
        };
        while let Some((key, _)) = self.buffer.front() {
            if kept(key) {
                return;
            }
            self.buffer.pop_front();
        }
        // Not in the buffer: restart the range at the boundary.
        self.buffer.clear();
        self.exhausted = false;
        self.resume_after = None;
        if self.backward {
            if target < self.upper.as_slice() {
                self.upper = target.to_vec();
            }
        } else if target > self.lower.as_slice() {
            self.lower = target.to_vec();
        }
        self.batch = self.batch.min(16);
    }
}
