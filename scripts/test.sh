#!/usr/bin/env bash
# `make test`: every test, in pyramid order. Expects `make up` to have run (make test does).
# Usage: scripts/test.sh [lint|core|rules|pgrx|regress|upgrade|differential|sidecar|isolation|concurrency|builder|bulk|backup|faults|e2e|sdk|live|cluster|oracle|node ...]  (default: all, in this order)
# Each layer closes with the line `<layer>: N passed, N failed, N skipped`, the run with
# `total: N passed, N failed, N skipped` (scripts/tally.sh: a skip not on tests/allowed-skips.txt
# is a failure); the first failing layer ends the run with exit status 1.
# DOCSTORE_SEED: the seed of every randomized test (differentials, matcher oracle, proptest);
# a fresh one per run when unset, printed here and by each test, so `DOCSTORE_SEED=S
# scripts/test.sh LAYER` replays a run.
source "$(dirname "$0")/lib.sh"
source "${ROOT}/scripts/tally.sh"
cd "${ROOT}"

DOCSTORE_SEED="${DOCSTORE_SEED:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}"
# proptest's own seed variable, from the same seed (its failures also print the input).
PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-${DOCSTORE_SEED}}"
# Tests that need a cluster (DOCSTORE_TEST_DSN) fail without one instead of passing.
DOCSTORE_REQUIRE_CLUSTER=1
export DOCSTORE_SEED PROPTEST_RNG_SEED DOCSTORE_REQUIRE_CLUSTER
say "seed: DOCSTORE_SEED=${DOCSTORE_SEED} (replay: DOCSTORE_SEED=${DOCSTORE_SEED} scripts/test.sh ...)"

lint() {
  say "lint: cargo fmt --check, cargo clippy -D warnings (the whole workspace: extension, core, sidecar), ruff, docker compose config"
  LINT_FAILED=0
  lint_check "cargo fmt" cargo fmt --all -- --check
  lint_check "cargo clippy" cargo clippy --workspace --all-targets --features pg_docstore/pg_test -- -D warnings
  [ -x .venv/bin/ruff ] || bash scripts/venv.sh
  lint_check "ruff check" .venv/bin/ruff check tests sdk-python
  lint_check "ruff format" .venv/bin/ruff format --check tests sdk-python
  lint_check "docker compose config" compose_config
  return "${LINT_FAILED}"
}

# docker-compose.yml is valid (the Compose plugin, or Debian's docker-compose).
compose_config() {
  if docker compose version >/dev/null 2>&1; then
    docker compose config -q
  else
    command -v docker-compose >/dev/null ||
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null ||
      return 1
    docker-compose config -q
  fi
}

core() {
  say "docstore-core: unit, property (proptest: 256 to 10,000 cases each, seeded from DOCSTORE_SEED) and seed tests"
  # The differential test needs a cluster and is the differential layer's: left out here by
  # name (run_elsewhere), so it is neither run twice nor counted as skipped.
  local differential=docstore_query_returns_what_the_oracle_returns
  run_elsewhere differential "${differential}"
  # firestore-proto: the protobuf value conversion of the gRPC front end (tests/proto_values.rs).
  cargo test -p docstore-core --features firestore-proto -- --exact --skip "${differential}"
  say "docstore-jwt: the JWT verifier of SQL and the sidecar, every case of tests/vectors/jwt.json"
  cargo test -p docstore-jwt
}

rules() {
  say "docstore-rules: lexer, parser, checker, evaluator, SQL back end, Firebase's examples, differential against hidane-rules, corpus of public rulesets"
  # One run, with --nocapture so the corpus tests' report (how many files parse, compile, are
  # refused and why; agreement with hidane-rules) is in the log. Their files are fetched first,
  # every one that can be (scripts/fetch-rules-corpus.sh: from RULES_CORPUS_MIRRORS, else from
  # GitHub); each one that could not be is a skipped case with its reason (`SKIPPED:
  # rules-corpus/FILE`, allowed by tests/allowed-skips.txt).
  bash scripts/fetch-rules-corpus.sh ||
    say "rules corpus: some files could not be fetched (set RULES_CORPUS_MIRRORS to local clones); the tests skip them"
  cargo test -p docstore-rules -- --nocapture
}

pgrx() {
  say "pg_docstore: #[pg_test] tests in a throwaway cluster run as postgres"
  ensure_traversable
  mkdir -p target/test-pgdata
  as_root chown postgres:postgres target/test-pgdata
  CARGO_PGRX_TEST_RUNAS=postgres cargo pgrx test pg${PG_MAJOR} -p pg_docstore
  # `cargo pgrx test` installed its debug build over the system extension directory: put the
  # release build back so the project cluster (and the regression tests) run the real thing.
  bash scripts/up.sh >/dev/null
}

regress() {
  say "SQL regression tests (pg_regress against the project cluster)"
  bash scripts/regress.sh
}

differential() {
  say "differential: docstore.query against the naive evaluator (query::evaluate) on random documents and queries"
  cluster_running || die "the cluster is not running: run 'make up' first"
  # The test drops and recreates this database. 10,000 queries here (about half a minute);
  # DOCSTORE_DIFFERENTIAL_CASES passes through (DOCSTORE_SEED, above, is the seed).
  DOCSTORE_DIFFERENTIAL_CASES="${DOCSTORE_DIFFERENTIAL_CASES:-10000}" \
    DOCSTORE_TEST_DSN="host=127.0.0.1 port=${DOCSTORE_PG_PORT} user=postgres dbname=docstore_differential" \
    cargo test -p docstore-core --test differential -- --nocapture
}

sidecar() {
  say "docstore-sidecar: unit and property tests, fuzz seeds, the replication source against the project cluster"
  cluster_running || die "the cluster is not running: run 'make up' first"
  fresh_database docstore_sidecar_test
  "${PSQL[@]}" -d docstore_sidecar_test -qc "create extension pg_docstore"
  DOCSTORE_TEST_DSN="host=127.0.0.1 port=${DOCSTORE_PG_PORT} user=postgres dbname=docstore_sidecar_test" \
    cargo test -p docstore-sidecar
}

isolation() {
  say "concurrency specs (pg_isolation_regress against the project cluster)"
  bash scripts/isolation.sh
}

concurrency() {
  say "concurrency under load (pgbench: exact counters and create races)"
  bash scripts/concurrency.sh
}

builder() {
  say "background index builder: an index becomes READY and a dropped one goes away with no CALL"
  bash scripts/builder.sh
}

bulk() {
  say "bulk writes: 200,000 new documents in one transaction at default lock settings"
  bash scripts/bulk.sh
}

upgrade() {
  say "upgrades: every released version created with data, ALTER EXTENSION pg_docstore UPDATE, compared with a fresh install, then the regression suite"
  bash scripts/upgrade.sh
}

backup() {
  say "backups: pg_dump -Fc / pg_restore round trip into a fresh database"
  bash scripts/backup.sh
}

faults() {
  say "faults: index builds (an older transaction, a cancel, a killed backend) and writes killed mid-stream (crash recovery)"
  bash scripts/faults.sh
}

e2e() {
  say "end-to-end: pytest (tests/) against a cluster and a sidecar of its own, over real HTTP"
  [ -x .venv/bin/pytest ] || bash scripts/venv.sh
  cargo build --release --quiet -p docstore-sidecar
  # The suite starts this binary; pytest's exit status 5 (no test collected) fails the layer.
  DOCSTORE_SIDECAR_BIN="${CARGO_TARGET_DIR:-${ROOT}/target}/release/docstore-sidecar" \
    .venv/bin/pytest -q tests --ignore=tests/live --ignore=tests/sdk --ignore=tests/cluster
}

sdk() {
  say "Python SDK: pytest (tests/sdk) of the docstore package (sdk-python/, installed editable in .venv) against a cluster and sidecar of its own"
  bash scripts/venv.sh
  # DOCSTORE_SIDECAR_BIN set: that binary is used as it is (nothing is built).
  if [ -z "${DOCSTORE_SIDECAR_BIN:-}" ]; then
    cargo build --release --quiet -p docstore-sidecar
  fi
  DOCSTORE_SIDECAR_BIN="${DOCSTORE_SIDECAR_BIN:-${CARGO_TARGET_DIR:-${ROOT}/target}/release/docstore-sidecar}" \
    .venv/bin/pytest -q tests/sdk
}

live() {
  say "live queries and write triggers: the oracle campaigns (tests/live: random subscriptions and transactions under faults, states compared with fresh queries; random writes delivered to misbehaving trigger endpoints under faults, deliveries and exactly-once counters compared with what committed) on clusters and sidecars of their own"
  [ -x .venv/bin/pytest ] || bash scripts/venv.sh
  cargo build --release --quiet -p docstore-sidecar
  # DOCSTORE_ORACLE_SEED (default 12) and DOCSTORE_ORACLE_SECONDS (default 60) pass through;
  # the long run is scripts/oracle.sh. DOCSTORE_TRIGGER_ORACLE_SEED and
  # DOCSTORE_TRIGGER_ORACLE_SECONDS likewise for the write-trigger campaign
  # (scripts/trigger_oracle.sh).
  DOCSTORE_SIDECAR_BIN="${CARGO_TARGET_DIR:-${ROOT}/target}/release/docstore-sidecar" \
    .venv/bin/pytest -q tests/live
}

cluster() {
  say "cluster: the roles ingest and gateway over a real nats-server -js (tests/cluster: every transaction once and whole on each gateway, SIGKILL of the active ingest, a NATS restart, a transaction bigger than max_payload, garbage on the stream, an ingest killed while NATS is down; the live-query oracle campaign with SIGKILL of the active ingest, of a gateway and of nats-server and a Postgres restart, every resume on the other gateway, once with gateways that match themselves and once with two matchers and remote-matching gateways, a matcher SIGKILLed too) on clusters of their own"
  [ -x .venv/bin/pytest ] || bash scripts/venv.sh
  command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] ||
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null
  cargo build --release --quiet -p docstore-sidecar
  DOCSTORE_SIDECAR_BIN="${CARGO_TARGET_DIR:-${ROOT}/target}/release/docstore-sidecar" \
    .venv/bin/pytest -q tests/cluster
}

# A test that fails and is not on tests/allowed-skips.txt (layer oracle) fails the layer; the run
# takes about 5 minutes (FIRESTORE_SYSTEM_RUN_TIMEOUT bounds it).
oracle() {
  say "oracle: python-firestore's own system tests, unchanged, against the sidecar's Firestore gRPC front end (FIRESTORE_EMULATOR_HOST)"
  # FIRESTORE_EMULATOR_HOST: as given, else the line `make up` writes into .docstore/dev.env.
  bash scripts/firestore_system_tests.sh
}

# @google-cloud/firestore (Node) against the same server.
node() {
  say "node: @google-cloud/firestore (tests/grpc/node, node:test) against the sidecar's Firestore gRPC front end (FIRESTORE_EMULATOR_HOST)"
  bash scripts/node_sdk_tests.sh
}

steps=("$@")
[ "${#steps[@]}" -gt 0 ] || steps=(lint core rules pgrx regress upgrade differential sidecar isolation concurrency builder bulk backup faults e2e sdk live cluster oracle node)
for step in "${steps[@]}"; do
  run_layer "${step}"
done
tally_total
say "all tests passed (DOCSTORE_SEED=${DOCSTORE_SEED})"
