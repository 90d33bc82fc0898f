//! Authorization of a batch (docs/rules.md).
//!
//! Two kinds of caller write documents:
//! - roles with rights on `docstore.entities` (superusers, the owner, roles granted DML):
//!   administrators for the rules. Their writes run with their own rights, so grants,
//!   row-level security, triggers and check constraints on entities apply as to any
//!   `INSERT`/`UPDATE`/`DELETE`, and no security rule is evaluated (Firestore's admin access);
//! - clients: roles with the privileges of `docstore_client` and no DML right on entities
//!   (what the sidecar's requests run as). Their batch is written as the extension's owner
//!   (like index entries, see `pg::owner`), and each write is first decided by the database's
//!   security rules ([`Rules::check`]) once the batch has been applied in memory: `resource` is
//!   the document before the write (null when missing), `request.resource` the document after
//!   it (merges and transforms applied, `$serverTimestamp` = `request.time` = the commit time),
//!   `getAfter()` sees the batch's after-state, and `get()`/`exists()` share one budget of 10
//!   distinct documents (20 for a batch of several writes). A verify (which writes nothing) is
//!   decided as a `get` of the document in its state at that point of the batch. One denied
//!   write refuses the batch with PERMISSION_DENIED (42501) before anything is written.

use std::collections::HashMap;
use std::rc::Rc;

use docstore_core::mutation::WriteKind;
use docstore_core::value::Map;
use docstore_core::{ResourcePath, Timestamp};
use docstore_rules::eval::{Budget, Document};
use docstore_rules::{Method, Ruleset};

use super::Write;
use crate::errors::DocstoreError;
use crate::pg::owner::caller_writes_as_client;
use crate::rules::{self, Lookups};

/// Whose rights a batch's statements run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    /// The caller's own rights on `docstore.entities`.
    Caller,
    /// The extension owner's; the batch must pass [`Rules::check`].
    Extension,
}

/// Decide whose rights write `writes` to `database`.
///
/// # Errors
/// None today (kept fallible for the callers' shape).
pub fn authorize(_database: &str, _writes: &[Write]) -> Result<Authority, DocstoreError> {
    if caller_writes_as_client() {
        Ok(Authority::Extension)
    } else {
        Ok(Authority::Caller)
    }
}

/// One write as the rules see it.
struct Decided {
    index: usize,
    method: Method,
    path: ResourcePath,
    before: Option<Map>,
    after: Option<Map>,
}

/// The rules a client's batch must pass, and what it did (recorded while it is applied).
pub struct Rules {
    ruleset: Rc<Ruleset>,
    writes: Vec<Decided>,
}

impl Rules {
    /// The rules of `database` for a batch with `authority`: `None` for administrators.
    ///
    /// # Errors
    /// [`DocstoreError::PermissionDenied`] for a client in a database without rules
    /// ([`rules::client_ruleset`]), before anything is read; a stored ruleset that no longer
    /// compiles.
    pub fn of(database: &str, authority: Authority) -> Result<Option<Rules>, DocstoreError> {
        if authority == Authority::Caller {
            return Ok(None);
        }
        Ok(Some(Rules {
            ruleset: rules::client_ruleset(database)?,
            writes: Vec::new(),
        }))
    }

    /// Record write `index` on `path`: the document before and after it.
    pub fn record(
        &mut self,
        index: usize,
        write: &Write,
        before: Option<Map>,
        after: Option<&Map>,
    ) {
        let method = match (&write.operation, &before) {
            // A verify reads the document: the `get` rule decides it.
            (super::Operation::Verify, _) => Method::Get,
            (super::Operation::Delete, _) => Method::Delete,
            (super::Operation::Mutate(_), None) => Method::Create,
            (super::Operation::Mutate(_), Some(_)) => Method::Update,
        };
        self.writes.push(Decided {
            index,
            method,
            path: write.path.clone(),
            before,
            after: after.cloned(),
        });
    }

    /// Decide every recorded write. `batch` maps each document of the batch (encoded name) to
    /// its state before and after the whole batch; `pg_time` is the commit time.
    ///
    /// # Errors
    /// [`DocstoreError::PermissionDenied`] (naming the write in a batch) for the first denied
    /// write; a malformed `docstore.auth`.
    pub fn check(
        self,
        database: &str,
        batch: HashMap<&[u8], (Option<&Map>, Option<&Map>)>,
        pg_time: i64,
    ) -> Result<(), DocstoreError> {
        let lookups = Lookups { database, batch };
        let several = self.writes.len() > 1;
        let mut budget = budget(several);
        for w in self.writes {
            decide(
                &self.ruleset,
                database,
                w,
                several,
                &lookups,
                &mut budget,
                pg_time,
            )?;
        }
        Ok(())
    }

    /// Decide write `index`, which failed on its own (a precondition, an update of a missing
    /// document, a create of an existing one), as it would have been decided had it applied:
    /// `resource` = its document now (`name` in `batch`, the batch's state so far),
    /// `request.resource` = what the write would make of it
    /// ([`docstore_core::mutation::Mutation::apply_ignoring_existence`]), `create` or `update`
    /// by the write's kind (for `set`, by whether the document exists). The caller reports
    /// the write's own error only when this allows it, so a client the rules deny learns
    /// nothing about the document's existence (Firestore answers PERMISSION_DENIED there too).
    ///
    /// # Errors
    /// [`DocstoreError::PermissionDenied`] when the rules deny the write; a malformed
    /// `docstore.auth`.
    #[allow(clippy::too_many_arguments)]
    pub fn check_failed(
        &self,
        database: &str,
        index: usize,
        several: bool,
        write: &Write,
        name: &[u8],
        batch: HashMap<&[u8], (Option<&Map>, Option<&Map>)>,
        server_time: Timestamp,
        pg_time: i64,
    ) -> Result<(), DocstoreError> {
        let current = batch.get(name).and_then(|(_, now)| *now).cloned();
        let (method, after) = match &write.operation {
            super::Operation::Verify => (Method::Get, None),
            super::Operation::Delete => (Method::Delete, None),
            super::Operation::Mutate(m) => {
                let method = match (m.kind(), &current) {
                    (WriteKind::Create, _) | (WriteKind::Set { .. }, None) => Method::Create,
                    (WriteKind::Update, _) | (WriteKind::Set { .. }, Some(_)) => Method::Update,
                };
                let after = m.apply_ignoring_existence(current.as_ref(), server_time);
                (method, Some(after))
            }
        };
        let failed = Decided {
            index,
            method,
            path: write.path.clone(),
            before: current,
            after,
        };
        let lookups = Lookups { database, batch };
        let mut budget = budget(several);
        decide(
            &self.ruleset,
            database,
            failed,
            several,
            &lookups,
            &mut budget,
            pg_time,
        )
    }
}

/// The lookup budget of a request: 10 distinct documents, 20 for a batch of several writes.
fn budget(several: bool) -> Budget {
    if several {
        Budget::batch()
    } else {
        Budget::single()
    }
}

/// Decide one write with the batch's lookups and budget.
fn decide(
    ruleset: &Ruleset,
    database: &str,
    w: Decided,
    several: bool,
    lookups: &Lookups<'_>,
    budget: &mut Budget,
    pg_time: i64,
) -> Result<(), DocstoreError> {
    let document = |data: Option<Map>| {
        data.map(|data| Document {
            path: w.path.clone(),
            data,
        })
    };
    let request = rules::request(w.method, database, &w.path, document(w.after), pg_time)?;
    let stored = document(w.before);
    rules::decide(ruleset, &request, stored.as_ref(), lookups, budget).map_err(|e| {
        if several {
            DocstoreError::InWrite {
                index: w.index,
                error: Box::new(e),
            }
        } else {
            e
        }
    })
}
