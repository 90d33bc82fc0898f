//! Row streams of one plan branch, in the plan's order: a scan over several key ranges, the
//! zig-zag merge join of several scans (`docstore_core::plan::next_agreed`, the step the
//! simulator runs too), and a collection listing, over SPI.

use pgrx::spi::SpiClient;

use docstore_core::encoding::encode_segments;
use docstore_core::plan::{
    collection_bounds, key_matches, name_order_key, next_agreed, order_key, scan_bounds, Branch,
    CollectionScan, JoinRow, KeyCheck, KeyRange, Plan, Scan, StepError,
};
use docstore_core::ResourcePath;

use crate::errors::DocstoreError;
use crate::storage::scan::{KeyStream, ScanStats, Source};

/// A row of a branch: its position in the plan's order, and whether the document must be
/// checked with the matcher (an indexed value was truncated).
pub type Row = JoinRow;

fn key_error(e: impl std::fmt::Display) -> DocstoreError {
    DocstoreError::Internal(format!("index key does not decode: {e}"))
}

/// One stream per key range, read in scan direction (backward: last range first).
pub struct Ranges {
    streams: Vec<KeyStream>,
    current: usize,
    backward: bool,
}

impl Ranges {
    fn new(
        source: Source,
        database: &str,
        fixed: Vec<u8>,
        ranges: Vec<KeyRange>,
        backward: bool,
        batch: i64,
    ) -> Self {
        let mut streams: Vec<KeyStream> = ranges
            .into_iter()
            .map(|r| {
                KeyStream::new(
                    source,
                    database,
                    fixed.clone(),
                    r.start,
                    r.end,
                    backward,
                    batch,
                )
            })
            .collect();
        if backward {
            streams.reverse();
        }
        Ranges {
            streams,
            current: 0,
            backward,
        }
    }

    fn peek(&mut self, client: &SpiClient<'_>) -> Result<Option<Vec<u8>>, DocstoreError> {
        while let Some(stream) = self.streams.get_mut(self.current) {
            if let Some((key, _)) = stream.peek(client)? {
                return Ok(Some(key.clone()));
            }
            self.current += 1;
        }
        Ok(None)
    }

    fn advance(&mut self) {
        if let Some(stream) = self.streams.get_mut(self.current) {
            stream.advance();
        }
    }

    /// Skip to keys at or beyond `target` in scan direction.
    fn seek(&mut self, target: &[u8]) {
        while let Some(stream) = self.streams.get_mut(self.current) {
            let (lower, upper) = stream.bounds();
            // The whole range is before the boundary in scan direction: nothing to keep.
            let past = if self.backward {
                target <= lower
            } else {
                target >= upper
            };
            if past {
                self.current += 1;
                continue;
            }
            stream.seek(target);
            return;
        }
    }

    fn stats(&self) -> ScanStats {
        self.streams
            .iter()
            .fold(ScanStats::default(), |acc, s| ScanStats {
                queries: acc.queries + s.stats.queries,
                rows: acc.rows + s.stats.rows,
            })
    }
}

/// The first row of `ranges` at its current position that passes the key filters of `scan`
/// (not consumed).
fn current(
    scan: &Scan,
    ranges: &mut Ranges,
    client: &SpiClient<'_>,
) -> Result<Option<Row>, DocstoreError> {
    while let Some(key) = ranges.peek(client)? {
        let position = order_key(scan, &key).map_err(key_error)?;
        match key_matches(scan, &position) {
            KeyCheck::Fail => ranges.advance(),
            check => {
                return Ok(Some(Row {
                    key: position,
                    recheck: check == KeyCheck::Recheck,
                }))
            }
        }
    }
    Ok(None)
}

/// A branch's rows in the plan's order. It owns its state (no borrow of the plan), so a query
/// can be read across several calls of a set-returning function.
pub enum BranchStream {
    Join {
        /// The branch's index in `plan.branches`.
        branch: usize,
        /// One stream per scan of the branch, in the order of its definitions.
        scans: Vec<Ranges>,
        /// Where the lead resumes: past the last row returned.
        resume: Option<Vec<u8>>,
        done: bool,
    },
    Listing {
        ranges: Ranges,
        filter: Listing,
    },
}

/// Which listed names belong to the branch (a group under a parent document).
pub struct Listing {
    under: Option<ResourcePath>,
}

impl BranchStream {
    pub fn scans(plan: &Plan, branch: usize, scans: &[Scan], database: &str, batch: i64) -> Self {
        let rows = scans
            .iter()
            .map(|scan| {
                Ranges::new(
                    Source::Entries,
                    database,
                    Vec::new(),
                    scan_bounds(plan, scan),
                    scan.backward,
                    batch,
                )
            })
            .collect();
        BranchStream::Join {
            branch,
            scans: rows,
            resume: None,
            done: false,
        }
    }

    pub fn listing(
        plan: &Plan,
        collection: &CollectionScan,
        database: &str,
        batch: i64,
    ) -> Result<Self, DocstoreError> {
        let bounds = collection_bounds(plan, collection);
        let (source, fixed, under) =
            if collection.all_descendants && collection.collection_id.is_empty() {
                // Kindless: every document under the parent, which the name ranges hold.
                (Source::Kindless, Vec::new(), collection.parent.clone())
            } else if collection.all_descendants {
                (
                    Source::Group,
                    collection.collection_id.as_bytes().to_vec(),
                    collection.parent.clone(),
                )
            } else {
                let path = match &collection.parent {
                    Some(p) => p.child(&collection.collection_id)?,
                    None => ResourcePath::from_segments(vec![collection.collection_id.clone()])?,
                };
                let mut fixed = Vec::new();
                encode_segments(&mut fixed, path.segments());
                (Source::Collection, fixed, None)
            };
        Ok(BranchStream::Listing {
            ranges: Ranges::new(source, database, fixed, bounds, collection.backward, batch),
            filter: Listing { under },
        })
    }

    /// Whether the stream can yield a document name twice: a join whose scans read several
    /// key ranges (an `in` or `array-contains-any` value list) can; a listing and single-range
    /// scans cannot.
    pub fn may_repeat(&self) -> bool {
        match self {
            BranchStream::Listing { .. } => false,
            BranchStream::Join { scans, .. } => scans.iter().any(|r| r.streams.len() > 1),
        }
    }

    /// The next row, consumed.
    pub fn next(
        &mut self,
        plan: &Plan,
        client: &SpiClient<'_>,
    ) -> Result<Option<Row>, DocstoreError> {
        match self {
            BranchStream::Listing { ranges, filter } => {
                while let Some(name) = ranges.peek(client)? {
                    ranges.advance();
                    let key = name_order_key(&name).map_err(key_error)?;
                    let inside = match (&filter.under, key.name()) {
                        (None, _) => true,
                        (Some(parent), Some(path)) => {
                            path.segments().len() > parent.segments().len()
                                && path.segments().starts_with(parent.segments())
                        }
                        (Some(_), None) => false,
                    };
                    if inside {
                        return Ok(Some(Row {
                            key,
                            recheck: false,
                        }));
                    }
                }
                Ok(None)
            }
            BranchStream::Join {
                branch,
                scans,
                resume,
                done,
            } => {
                if *done {
                    return Ok(None);
                }
                let Some(Branch::Scans(definitions)) = plan.branches.get(*branch) else {
                    return Err(DocstoreError::Internal(
                        "branch stream without its scans".into(),
                    ));
                };
                let step = next_agreed(plan, definitions, resume.as_deref(), |s, seek| {
                    let (Some(ranges), Some(scan)) = (scans.get_mut(s), definitions.get(s)) else {
                        return Ok(None);
                    };
                    if let Some(target) = seek {
                        ranges.seek(target);
                    }
                    current(scan, ranges, client)
                });
                match step {
                    Ok(Some((row, after))) => {
                        *resume = Some(after);
                        Ok(Some(row))
                    }
                    Ok(None) => {
                        *done = true;
                        Ok(None)
                    }
                    Err(StepError::Source(e)) => Err(e),
                    Err(StepError::Backwards) => Err(DocstoreError::Internal(
                        "zig-zag seek went backwards".into(),
                    )),
                }
            }
        }
    }

    pub fn stats(&self) -> ScanStats {
        match self {
            BranchStream::Listing { ranges, .. } => ranges.stats(),
            BranchStream::Join { scans, .. } => {
                scans.iter().fold(ScanStats::default(), |acc, s| {
                    let st = s.stats();
                    ScanStats {
                        queries: acc.queries + st.queries,
                        rows: acc.rows + st.rows,
                    }
                })
            }
        }
    }
}
