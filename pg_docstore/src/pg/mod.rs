//! Datum, SPI and background-worker glue. All `unsafe` of the extension lives under this module.

pub mod background;
pub mod catalog_cache;
pub mod commit_clock;
pub mod heap;
pub mod jsonb;
pub mod names;
pub mod owner;
pub mod random;
pub mod spi;
pub mod time;
