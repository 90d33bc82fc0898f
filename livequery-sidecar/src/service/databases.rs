//! Databases on first use: in development mode a request naming a database that does not exist
//! creates it, with automatic composite indexes on, as the Firebase emulator serves any
//! database a client names without index definitions (docs/grpc.md, "Names").

use docstore_core::Code;

use super::error::ServiceError;
use super::Service;
use crate::pg::databases as pg_databases;
use crate::pg::PgError;

/// Create database `id` unless it exists (see [`pg_databases::create_on_first_use`]).
///
/// # Errors
/// FAILED_PRECONDITION when the sidecar's role may not create databases (42501: creating one
/// regenerates the rules policy, which only the extension's owner may do), database errors.
///
/// # Cancel safety
/// As [`pg_databases::create_on_first_use`]: dropped mid-way, nothing is committed.
pub async fn create_on_first_use(service: &Service, id: &str) -> Result<(), ServiceError> {
    match pg_databases::create_on_first_use(&service.db, id).await {
        Ok(()) => Ok(()),
        Err(PgError::Db(e))
            if e.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) =>
        {
            Err(ServiceError::new(
                Code::FailedPrecondition,
                format!(
                    "database \"{id}\" does not exist, and development mode cannot create it: the sidecar's role may not create databases"
                ),
            )
            .with_hint("create it as an administrator with select docstore.create_database('<id>'), or run the sidecar as the extension's owner (docs/grpc.md, \"Names\")"))
        }
        Err(e) => Err(e.into()),
    }
}
