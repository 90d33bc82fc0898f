//! The sidecar's operations, under its transports: who calls ([`caller`]), what they ask
//! (one module per group of operations: typed requests in, typed results out) and the one
//! error ([`error`]). No type of a transport crosses in here: `http/` parses a request,
//! calls an operation and renders its result or error; another transport does the same.

pub mod caller;
pub mod context;
pub mod error;
