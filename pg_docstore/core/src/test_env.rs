//! What the project's tests read from their environment, one copy for every crate's tests
//! (feature `test-env`, enabled only by dev-dependencies and by pg_docstore's `pg_test`
//! feature; nothing in a release build uses it).
//!
//! - [`seed`]: the seed of a randomized test. `DOCSTORE_SEED` (one variable for every test;
//!   scripts/test.sh sets a fresh one per run and prints it), else a fresh seed; printed at the
//!   start, and the test prints it again in its failure message, so a failing run replays with
//!   `DOCSTORE_SEED=<seed>`.
//! - [`cluster_dsn`]: the cluster of a test that needs one (`DOCSTORE_TEST_DSN`). Without it the
//!   test is skipped, which `make test` does not allow: with `DOCSTORE_REQUIRE_CLUSTER=1`
//!   (scripts/test.sh sets it) a missing DSN fails the test.

use std::time::{SystemTime, UNIX_EPOCH};

/// The seed of the randomized test `test`: the variable `override_var` when given and set (a
/// test's own, older variable), else `DOCSTORE_SEED`, else a fresh one. Printed with how to
/// replay it. A value that is not a u64 is refused (a typo would otherwise run another seed).
#[allow(clippy::panic)] // test support: a bad seed variable fails the test that reads it
pub fn seed(test: &str, override_var: Option<&str>) -> u64 {
    let given = override_var
        .into_iter()
        .chain(["DOCSTORE_SEED"])
        .find_map(|var| std::env::var(var).ok().map(|v| (var, v)));
    chosen(test, given)
}

/// [`seed`] for a test whose process does not see the run's environment (a `#[pg_test]` runs
/// in a Postgres backend): `given` is `DOCSTORE_SEED` as passed some other way, else the
/// environment is read as [`seed`] does.
pub fn seed_given(test: &str, given: Option<&str>) -> u64 {
    match given {
        Some(value) => chosen(test, Some(("DOCSTORE_SEED", value.to_owned()))),
        None => seed(test, None),
    }
}

#[allow(clippy::panic)] // test support: a bad seed variable fails the test that reads it
fn chosen(test: &str, given: Option<(&str, String)>) -> u64 {
    let seed = match given {
        Some((var, value)) => value.trim().parse().unwrap_or_else(|_| {
            panic!("{var}={value:?} is not a seed (an unsigned 64-bit integer)")
        }),
        None => fresh(),
    };
    eprintln!("{test}: seed {seed} (replay with DOCSTORE_SEED={seed})");
    seed
}

/// A seed that differs from run to run: the clock and the process id, mixed (splitmix64).
fn fresh() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    #[allow(clippy::cast_possible_truncation)] // any 64 bits of the clock will do
    let mut z = (nanos as u64) ^ (u64::from(std::process::id()) << 32);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The connection string of the cluster test `test` needs (`DOCSTORE_TEST_DSN`), or `None`
/// when it is not set: the test then returns without checking anything, after saying so,
/// unless `DOCSTORE_REQUIRE_CLUSTER=1`, which makes a missing DSN a failure (`make test`).
#[allow(clippy::panic)] // test support: a missing cluster fails the test that needs it
pub fn cluster_dsn(test: &str) -> Option<String> {
    if let Ok(dsn) = std::env::var("DOCSTORE_TEST_DSN") {
        return Some(dsn);
    }
    if std::env::var("DOCSTORE_REQUIRE_CLUSTER").as_deref() == Ok("1") {
        panic!(
            "{test} needs a cluster: DOCSTORE_TEST_DSN is not set and DOCSTORE_REQUIRE_CLUSTER=1 \
             (set it to a database with pg_docstore, as scripts/test.sh does)"
        );
    }
    eprintln!(
        "{test}: not run: set DOCSTORE_TEST_DSN to a database with pg_docstore \
         (DOCSTORE_REQUIRE_CLUSTER=1 makes this a failure)"
    );
    None
}
