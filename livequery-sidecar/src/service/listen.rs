//! Live queries: open a stream on targets (or resume one after a position), add targets to a
//! running stream, remove one. The session hub (`session/`) runs the streams; its events are
//! typed, and each transport renders them.

use docstore_core::Code;
use serde_json::Value as Json;

use super::caller::{Caller, Principal};
use super::context::RulesMethod;
use super::error::ServiceError;
use super::Service;
use crate::session::{self, Connection, Resumed, Session, SessionError, TargetRequest};
use crate::source::Lsn;

impl From<SessionError> for ServiceError {
    fn from(e: SessionError) -> ServiceError {
        match e {
            SessionError::Pg(e) => ServiceError::from(e),
            SessionError::Unavailable(m) => ServiceError::new(Code::Unavailable, m),
            SessionError::NotFound(m) => ServiceError::not_found(m),
            SessionError::PermissionDenied(m) => ServiceError::new(Code::PermissionDenied, m),
            SessionError::InvalidArgument(m) => ServiceError::invalid_argument(m),
            SessionError::ResourceExhausted { limit, message } => ServiceError {
                limit: Some(limit),
                ..ServiceError::new(Code::ResourceExhausted, message)
            },
            SessionError::Remote { code, message } => ServiceError::new(code, message),
        }
    }
}

/// The session of the live queries.
///
/// # Errors
/// UNAVAILABLE when this sidecar runs without them.
pub fn session(service: &Service) -> Result<Session, ServiceError> {
    service.session.clone().ok_or_else(|| {
        ServiceError::new(
            Code::Unavailable,
            "live queries are not running in this sidecar",
        )
    })
}

/// The owner of `caller`'s streams in `database`: the owner key, the key of the per-caller
/// stream cap (a JWT's subject, or the client address of an anonymous caller) and the run-as
/// of its reads (the rules' `list`).
pub fn owner(caller: &Caller, database: &str) -> session::Caller {
    let client = || {
        caller
            .peer
            .map_or_else(|| "addr:unknown".to_owned(), |ip| format!("addr:{ip}"))
    };
    let (key, quota) = match &caller.principal {
        Principal::Admin => ("admin".to_owned(), None),
        Principal::Anonymous => ("anonymous".to_owned(), Some(client())),
        Principal::User(claims) => {
            let sub = claims.get("sub").unwrap_or(&Json::Null);
            let quota = match sub {
                Json::String(sub) => format!("sub:{sub}"),
                _ => client(),
            };
            (format!("user:{sub}"), Some(quota))
        }
    };
    session::Caller {
        key,
        quota,
        run_as: caller.run_as(RulesMethod::List, database, "", None),
    }
}

/// Open a stream on `targets` of `database`; with `resume` (a stream and a position of it),
/// take that stream over after the position instead, or, when it is gone, open a new one
/// that starts with a reset saying why.
///
/// # Errors
/// A target's initial read (its query's error, the rules' denial), a cap, an unknown
/// database, the hub not ready.
///
/// # Cancel safety
/// Dropped before the stream opened, nothing is registered; after, the stream waits for a
/// resume for its grace period.
pub async fn open(
    session: &Session,
    caller: &Caller,
    database: &str,
    targets: Vec<TargetRequest>,
    resume: Option<(String, Lsn)>,
) -> Result<Connection, ServiceError> {
    let owner = owner(caller, database);
    let mut lead = None;
    if let Some((stream, position)) = resume {
        match session.resume(database, &stream, position, &owner).await? {
            Resumed::Connection(connection) => return Ok(connection),
            Resumed::Unknown(reason) => lead = Some(reason),
        }
    }
    Ok(session.open(database, owner, targets, lead).await?)
}

/// Add `targets` to the running stream `stream` of `caller`.
///
/// # Errors
/// As [`open`]; NOT_FOUND for a stream that is not `caller`'s or gone; a target id in use.
///
/// # Cancel safety
/// Dropped mid-way, the targets may or may not be added.
pub async fn add_targets(
    session: &Session,
    caller: &Caller,
    database: &str,
    stream: &str,
    targets: Vec<TargetRequest>,
) -> Result<(), ServiceError> {
    Ok(session
        .add_targets(database, stream, owner(caller, database), targets)
        .await?)
}

/// Remove the target `id` from the running stream `stream` of `caller`.
///
/// # Errors
/// NOT_FOUND for a stream that is not `caller`'s or a target it does not have.
///
/// # Cancel safety
/// Dropped mid-way, the target may or may not be removed.
pub async fn remove_target(
    session: &Session,
    caller: &Caller,
    stream: &str,
    id: &str,
) -> Result<(), ServiceError> {
    Ok(session
        .remove_target(stream, &owner(caller, "").key, id)
        .await?)
}
