//! pg_docstore: the PostgreSQL extension. Glue around `docstore-core`.
//!
//! - `api/`: what SQL sees (thin `#[pg_extern]` functions in schema `docstore`).
//! - `pg/`: Datum glue; the only place with `unsafe`.
//! - `errors`: the one mapping from domain errors to SQLSTATEs.

mod api;
mod errors;
mod pg;

::pgrx::pg_module_magic!(name, version);

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
