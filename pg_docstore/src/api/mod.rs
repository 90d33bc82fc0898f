//! The SQL surface of the extension, one module per area.

mod documents;
mod indexes;
mod query;
mod values;
