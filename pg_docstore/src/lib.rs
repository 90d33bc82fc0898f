//! pg_docstore: the PostgreSQL extension. Glue around `docstore-core`.
//!
//! - `api/`: what SQL sees (thin `#[pg_extern]` functions in schema `docstore`).
//! - `writes/`: the write pipeline (lock, apply, validate, write entities and entry deltas).
//! - `storage/`: the fixed tables through cached SPI plans.
//! - `pg/`: Datum, SPI, time, random and background-worker glue; the only place with `unsafe`.
//! - `errors`: the one mapping from domain errors to SQLSTATEs.
//! - `rules`: the security rules (stored rulesets, requests, lookups, the RLS policy).
//! - `guc`: the settings (`docstore.database`, and the protected `docstore.auth` and
//!   `docstore.request`).

mod api;
mod errors;
mod executor;
mod guc;
mod pg;
mod rules;
mod storage;
mod writes;

::pgrx::pg_module_magic!(name, version);

pgrx::extension_sql_file!("../../sql/schema.sql", name = "schema", bootstrap);
pgrx::extension_sql_file!(
    "../../sql/index_build.sql",
    name = "index_build",
    requires = ["schema", index_build_step]
);
pgrx::extension_sql_file!(
    "../../sql/rules.sql",
    name = "rules",
    requires = [
        "schema",
        rules_catalog,
        rules_prim1,
        rules_prim2,
        rules_prim3,
        rules_prim4,
        rules_primv,
        rules_install
    ]
);
pgrx::extension_sql_file!(
    "../../sql/triggers.sql",
    name = "triggers",
    requires = ["schema"]
);
pgrx::extension_sql_file!("../../sql/roles.sql", name = "roles", finalize);

#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    errors::keep_backtraces_out_of_errors();
    guc::init();
    pg::catalog_cache::register();
    pg::names::register();
    pg::heap::register();
    pg::background::init();
    pg::commit_clock::init();
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    /// The test cluster's backends do not inherit the test runner's environment (they run as
    /// `postgres`), so the run's `DOCSTORE_SEED` reaches the randomized `#[pg_test]`s as the
    /// setting `docstore_test.seed` (read by `rules::differential`).
    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        match std::env::var("DOCSTORE_SEED") {
            Ok(seed) if seed.trim().parse::<u64>().is_ok() => {
                let line: &'static str =
                    Box::leak(format!("docstore_test.seed = '{}'", seed.trim()).into_boxed_str());
                vec![line]
            }
            _ => vec![],
        }
    }
}
