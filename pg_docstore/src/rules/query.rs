//! The `list` check of a client's query (docs/rules.md): rules are not filters. A query by a
//! client (`pg::owner::caller_writes_as_client`) is decided once, before anything is read, by
//! `docstore_rules::list::decide_query` against the query's constraints; a query that could
//! return a denied document fails with PERMISSION_DENIED (42501) whatever the data, and every
//! query in a database without rules does. An allowed query then reads as the extension's
//! owner, so no row-level-security filter runs per document. Plain SQL on `docstore.entities`
//! and `docstore.documents` keeps the per-row policy (the documented deviation).

use std::collections::HashMap;

use pgrx::spi::SpiClient;

use docstore_core::query::Query;
use docstore_rules::eval::{Budget, Decision};
use docstore_rules::Method;

use super::{client_ruleset, request, Lookups};
use crate::errors::DocstoreError;
use crate::pg::owner::{caller_writes_as_client, AsOwner};
use crate::pg::time::transaction_start;

/// Decide `query` for the caller. `None`: the caller is not a client; the query runs with the
/// caller's rights as before. `Some(guard)`: the query is
/// allowed; run it while the guard (statements as the owner) lives.
///
/// # Errors
/// [`DocstoreError::PermissionDenied`] (42501) as [`super::denied`] words it, also for a
/// database without rules ([`client_ruleset`]); a malformed
/// `docstore.auth`; SPI errors; a stored ruleset that no longer compiles.
pub fn authorize(
    client: &SpiClient<'_>,
    database: &str,
    query: &Query,
) -> Result<Option<AsOwner>, DocstoreError> {
    if !caller_writes_as_client() {
        return Ok(None);
    }
    if query.source.is_kindless() {
        // Rules decide a list per collection; a query over every collection would need
        // every matched path's list rule: it is for administrators only (docs/rules.md).
        return Err(DocstoreError::PermissionDenied(
            "a query over every collection (an empty collection id with all descendants) is for administrators only: security rules do not allow it to clients".into(),
        ));
    }
    // The ruleset and the get()/exists() lookups are read as the owner.
    let owner = AsOwner::new(client)?;
    let ruleset = client_ruleset(database)?;
    let path = query.source.path_under_parent()?;
    let request = request(Method::List, database, &path, None, transaction_start())?;
    let lookups = Lookups {
        database,
        batch: HashMap::new(),
    };
    let decision = docstore_rules::list::decide_query(
        &ruleset,
        &request,
        query,
        &lookups,
        &mut Budget::single(),
    );
    match decision {
        Decision::Allow => Ok(Some(owner)),
        Decision::Deny(reason) => Err(super::denied(
            &request,
            &reason,
            " (rules are not filters: the query itself must prove its list rule)",
        )),
    }
}
