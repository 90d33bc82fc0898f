//! The fixed tables through SPI: entities, index entries and the index catalog.
//! Every statement is a cached plan with bound parameters; nothing is spliced into SQL.

pub mod catalog;
pub mod databases;
pub mod entities;
pub mod entries;
pub mod scan;
pub mod versions;
