//! Authorization of a batch, the first stage of the write pipeline.
//!
//! Two kinds of caller write documents:
//! - roles with rights on `docstore.entities` (superusers, the owner, roles granted DML):
//!   their writes run with their own rights, so grants, row-level security, triggers and
//!   check constraints on entities apply as to any `INSERT`/`UPDATE`/`DELETE`;
//! - clients: roles with the privileges of `docstore_client` and no DML right on entities
//!   (what the sidecar's requests run as). Their batch is authorized here, then written as
//!   the extension's owner (like index entries, see `pg::owner`).
//!
//! Until security rules exist, every client write is allowed. The rules issue evaluates the
//! ruleset's write rules for each write here (with `docstore.auth` and `docstore.request`) and
//! refuses the batch with PERMISSION_DENIED (42501) when one is denied.

use super::Write;
use crate::errors::DocstoreError;
use crate::pg::owner::caller_writes_as_client;

/// Whose rights a batch's statements run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    /// The caller's own rights on `docstore.entities`.
    Caller,
    /// The extension owner's, after this stage allowed every write of the batch.
    Extension,
}

/// Decide whose rights write `writes` to `database`.
///
/// # Errors
/// None yet; the rules issue adds PERMISSION_DENIED for a write the rules deny.
pub fn authorize(_database: &str, _writes: &[Write]) -> Result<Authority, DocstoreError> {
    if caller_writes_as_client() {
        Ok(Authority::Extension)
    } else {
        Ok(Authority::Caller)
    }
}
