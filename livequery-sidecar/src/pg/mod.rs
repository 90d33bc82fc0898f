//! The SQL the sidecar runs through tokio-postgres.
