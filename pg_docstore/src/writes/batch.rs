//! The JSON form of `docstore.commit(writes)`, parsed by core ([`docstore_core::commit`]),
//! turned into the write path's [`Write`]s: the update-time precondition in Postgres
//! microseconds, and none of the single-document functions' shortcuts.

use serde_json::Value as Json;

use docstore_core::commit;

use super::{Operation, Precondition, Write};
use crate::errors::DocstoreError;
use crate::pg::time::from_timestamp;

/// Parse a batch.
///
/// # Errors
/// [`DocstoreError::Commit`] naming the write and what is wrong with it.
pub fn parse(json: &Json) -> Result<Vec<Write>, DocstoreError> {
    Ok(commit::parse(json)?.into_iter().map(from_commit).collect())
}

/// The write path's form of a parsed write.
fn from_commit(write: commit::Write) -> Write {
    Write {
        path: write.path,
        operation: match write.operation {
            commit::Operation::Mutate(mutation) => Operation::Mutate(mutation),
            commit::Operation::Delete => Operation::Delete,
            commit::Operation::Verify => Operation::Verify,
        },
        precondition: write.precondition.map(|p| match p {
            commit::Precondition::Exists(exists) => Precondition::Exists(exists),
            commit::Precondition::UpdateTime(t) => Precondition::UpdateTime(from_timestamp(t)),
        }),
        generated_id: false,
        verbatim: None,
    }
}
