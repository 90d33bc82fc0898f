//! Security rules in the extension (docs/rules.md), on top of the pure crate
//! `docstore-rules`:
//! - the stored rulesets (`docstore.rules`, one per database id), compiled once per backend
//!   and change of the table ([`cache`]);
//! - the `request` of a call (`docstore.auth` claims, method, path, time);
//! - the documents `get()`/`exists()`/`getAfter()`/`existsAfter()` read ([`Lookups`]), those
//!   stored converted once per transaction ([`lookup_cache`]);
//! - [`policy`]: the row-level-security function generated from every stored ruleset;
//! - [`query`]: the `list` check of a client's `docstore.query`/`run_query`, once per query.
//!
//! A database without a ruleset, or not listed in `docstore.databases`, is locked (Firestore's
//! locked mode): every request of a client is denied ([`client_ruleset`]) and the `list`
//! policy passes none of its rows; `docstore.set_rules` opens it to what its rules allow. Roles that are not clients (superusers, the owner, roles with
//! DML on entities: see `pg::owner::caller_writes_as_client`) are administrators: no rule
//! applies to them, as Firestore's admin SDK bypasses rules.

pub mod cache;
#[cfg(any(test, feature = "pg_test"))]
mod differential;
pub mod lookup_cache;
pub mod policy;
pub mod query;

use std::collections::HashMap;
use std::rc::Rc;

use docstore_core::encoding::encode_name;
use docstore_core::value::Map;
use docstore_core::ResourcePath;
use docstore_rules::eval::{self, Document, Documents, Request};
use docstore_rules::prim::Val;
use docstore_rules::{Method, Ruleset};

use crate::errors::DocstoreError;
use crate::guc;
use crate::pg::time::to_timestamp;
use crate::storage::entities;

/// The ruleset of `database`, or `None` when none is set, when `docstore.databases` does not
/// list the database, or when the extension's SQL has no `docstore.rules` yet: compiled once per backend and change of `docstore.rules`
/// ([`cache`]). Reads the table below the executor, so no rights on it are needed.
///
/// # Errors
/// A stored source that no longer compiles (42601 / 0A000).
pub fn ruleset(database: &str) -> Result<Option<Rc<Ruleset>>, DocstoreError> {
    cache::ruleset(database, compile)
}

/// The ruleset a client's request in `database` is decided by ([`ruleset`]).
///
/// # Errors
/// [`DocstoreError::PermissionDenied`] (42501) for a locked database: one without a ruleset or
/// not listed in `docstore.databases` (the same text for both, and whatever the request, so it
/// tells a client nothing about the documents); a stored source that no longer compiles.
pub fn client_ruleset(database: &str) -> Result<Rc<Ruleset>, DocstoreError> {
    ruleset(database)?.ok_or_else(|| {
        DocstoreError::PermissionDenied(format!(
            "database {database} has no security rules: clients are denied until an administrator sets them (docstore.set_rules)"
        ))
    })
}

/// Compile `source`, refusing a ruleset whose methods need more distinct document lookups
/// than Firestore allows (10 for reads, 20 for writes, which may come in batches).
///
/// # Errors
/// [`DocstoreError::Rules`]: 42601 syntax, 0A000 unsupported.
pub fn compile(source: &str) -> Result<Ruleset, DocstoreError> {
    let ruleset = docstore_rules::compile(source).map_err(DocstoreError::Rules)?;
    for m in docstore_rules::sql::generate(&ruleset, "request", "resource").methods {
        let limit = match m.method {
            Method::Get | Method::List => 10,
            _ => 20,
        };
        if m.lookups > limit {
            return Err(DocstoreError::InvalidArgument(format!(
                "the '{}' rules read {} distinct documents with get()/exists(); at most {limit} are allowed",
                m.method.name(),
                m.lookups
            )));
        }
    }
    Ok(ruleset)
}

/// The `request` of a call by the current session.
///
/// # Errors
/// A malformed `docstore.auth` (22023), a time outside years 1-9999.
pub fn request(
    method: Method,
    database: &str,
    path: &ResourcePath,
    resource: Option<Document>,
    pg_time: i64,
) -> Result<Request, DocstoreError> {
    Ok(Request {
        method,
        database: database.to_owned(),
        path: path.clone(),
        auth: guc::auth()?,
        resource,
        time: to_timestamp(pg_time)?,
        query: None,
    })
}

/// The documents rules may look up: those of the current batch (before and after its writes)
/// and any other of the database as stored, read below the executor
/// ([`entities::read_data`]), so `entities`' row-level security does not hide documents from
/// the rules.
pub struct Lookups<'a> {
    pub database: &'a str,
    /// Encoded name -> (before the batch, after the batch).
    pub batch: HashMap<&'a [u8], (Option<&'a Map>, Option<&'a Map>)>,
}

impl Lookups<'_> {
    fn stored(&self, name: &[u8]) -> Option<Map> {
        // A Postgres error raises (it never returns here); a conversion failure of what we
        // stored ourselves is reported as a missing document.
        let data = entities::read_data(self.database, name).ok()??;
        entities::stored_fields(&data.text()).ok()
    }

    /// The value of a stored document that is not in the batch ([`lookup_cache`]); the
    /// conversion without the cache when the evaluator's database is another one (never, as
    /// [`request`] builds it).
    fn stored_value(&self, path: &ResourcePath, name: &[u8], database: &str) -> Option<Rc<Val>> {
        if database == self.database {
            lookup_cache::stored_value(database, path, name)
        } else {
            self.stored(name)
                .map(|data| Rc::new(eval::document_value(database, path, &data)))
        }
    }
}

impl Lookups<'_> {
    /// The document `path` as `get()` (`after` false) or `getAfter()` (`after` true) reads it:
    /// the batch's state before or after its writes when the batch writes it, else as stored.
    fn data(&self, path: &ResourcePath, after: bool) -> Option<Map> {
        let name = encode_name(path);
        match self.batch.get(name.as_slice()) {
            Some(&(before, written)) => (if after { written } else { before }).cloned(),
            None => self.stored(&name),
        }
    }

    /// [`Lookups::data`] as a rules value; a stored document through [`lookup_cache`].
    fn value(&self, path: &ResourcePath, database: &str, after: bool) -> Option<Rc<Val>> {
        let name = encode_name(path);
        match self.batch.get(name.as_slice()) {
            Some(&(before, written)) => (if after { written } else { before })
                .map(|data| Rc::new(eval::document_value(database, path, data))),
            None => self.stored_value(path, &name, database),
        }
    }
}

impl Documents for Lookups<'_> {
    fn get(&self, path: &ResourcePath) -> Option<Map> {
        self.data(path, false)
    }

    fn get_after(&self, path: &ResourcePath) -> Option<Map> {
        self.data(path, true)
    }

    fn get_value(&self, path: &ResourcePath, database: &str) -> Option<Rc<Val>> {
        self.value(path, database, false)
    }

    fn get_after_value(&self, path: &ResourcePath, database: &str) -> Option<Rc<Val>> {
        self.value(path, database, true)
    }
}

/// Decide one request; a denial is PERMISSION_DENIED (42501).
///
/// # Errors
/// [`DocstoreError::PermissionDenied`] as [`denied`] words it.
pub fn decide(
    ruleset: &Ruleset,
    request: &Request,
    stored: Option<&Document>,
    documents: &dyn Documents,
    budget: &mut eval::Budget,
) -> Result<(), DocstoreError> {
    match eval::evaluate(ruleset, request, stored, documents, budget) {
        eval::Decision::Allow => Ok(()),
        eval::Decision::Deny(reason) => Err(denied(request, &reason, "")),
    }
}

/// A denial as the client sees it: the kind of access (`get`, `list`, or `write` for every
/// create, update and delete) and the path, never the evaluator's reason. Which rules ran and
/// how each failed depends on the stored documents (a `set` is decided as `create` or
/// `update` by whether its document exists; a rule reading `resource` fails differently on a
/// missing document), so the reason would tell a client what the rules hide (docs/rules.md,
/// "What a denial tells"). The reason goes to the server log only (`LOG_SERVER_ONLY`, never
/// sent to a client, whatever its `client_min_messages`). `suffix` is appended to the
/// client's message (a fixed text, nothing read from the data).
pub fn denied(request: &Request, reason: &str, suffix: &str) -> DocstoreError {
    let access = match request.method {
        Method::Get => "get",
        Method::List => "list",
        Method::Create | Method::Update | Method::Delete => "write",
    };
    pgrx::ereport!(
        pgrx::PgLogLevel::LOG_SERVER_ONLY,
        pgrx::PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!(
            "pg_docstore: a client was denied in database {}: {reason}",
            request.database
        )
    );
    DocstoreError::PermissionDenied(format!(
        "the security rules deny '{access}' on {}{suffix}",
        request.path
    ))
}
