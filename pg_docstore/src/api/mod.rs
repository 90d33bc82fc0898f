//! The SQL surface of the extension, one module per area.

mod databases;
mod documents;
mod history;
pub(crate) mod indexes;
mod query;
mod rules;
mod triggers;
mod values;
