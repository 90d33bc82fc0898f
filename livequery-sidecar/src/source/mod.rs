//! Stage 1: the replication connection and the pgoutput decoder (the live-query issue).
//!
//! `pgoutput` decodes one logical replication message; `entities` turns the messages of
//! `docstore.entities` into document changes.

pub mod entities;
pub mod pgoutput;
