//! Write triggers' delivery (docs/triggers.md): a consumer of the change stream that records
//! the changes matching each trigger in `docstore.trigger_deliveries` before the slot moves
//! past them (`record`), and a task that POSTs them to the triggers' URLs from there, signed,
//! in commit order per document (`deliver`). `select` decides which changes a trigger records;
//! `sign` builds a delivery's body and signature. The SQL is `pg::triggers`.

pub mod deliver;
pub mod record;
pub mod select;
pub mod sign;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::pg::Db;
use crate::source::Consumer;

pub use deliver::Settings;

/// Start delivery and return the recorder, the consumer the live-query hub feeds.
///
/// # Errors
/// No TLS configuration for the HTTP client.
pub fn start(db: &Db, settings: Settings) -> Result<Box<dyn Consumer>, String> {
    let recorded = Arc::new(Notify::new());
    deliver::start(db.clone(), settings, Arc::clone(&recorded))?;
    Ok(Box::new(record::start(
        db.clone(),
        settings.max_depth,
        recorded,
    )))
}
