//! Datum glue. All `unsafe` of the extension lives under this module.

pub mod jsonb;
