//! The sidecar's operations, under its transports: who calls ([`caller`]), what they ask
//! (one module per group of operations: typed requests in, typed results out) and the one
//! error ([`error`]). No type of a transport crosses in here: `http/` parses a request,
//! calls an operation and renders its result or error; another transport does the same.

pub mod batch_get;
pub mod caller;
pub mod collections;
pub mod commit;
pub mod context;
pub mod databases;
pub mod documents;
pub mod error;
pub mod jwks;
pub mod listen;
pub mod query;
pub mod read_time;
pub mod transactions;

use crate::pg::Db;
use crate::session::Session;
use caller::Verifier;

/// What every operation shares, whatever the transport.
pub struct Service {
    pub db: Db,
    pub verifier: Verifier,
    /// The live-query hub (`None`: listening is UNAVAILABLE).
    pub session: Option<Session>,
    /// The held transactions ([`transactions`]).
    pub transactions: std::sync::Arc<transactions::Transactions>,
}
