#!/usr/bin/env bash
# SQL regression tests with Postgres' own pg_regress against the project's cluster
# (`cargo pgrx regress` runs initdb itself, which cannot run as root).
# Each run uses a fresh database `docstore_regress`. Usage: scripts/regress.sh [test ...]
source "$(dirname "$0")/lib.sh"

REGRESS_DIR="${ROOT}/pg_docstore/tests/regress"
OUT_DIR="${ROOT}/target/regress"
PG_REGRESS="$(pgxs_tool regress/pg_regress)"
cluster_running || die "the cluster is not running: run 'make up' first"

if [ "$#" -gt 0 ]; then
  tests=("$@")
else
  mapfile -t tests < <(test_names "${REGRESS_DIR}/sql" sql setup.sql)
fi

# DOCSTORE_REGRESS_DATABASE: run in that existing database instead (scripts/upgrade.sh, in a
# database brought to this version by ALTER EXTENSION UPDATE, with the same setting).
database="${DOCSTORE_REGRESS_DATABASE:-}"
if [ -z "${database}" ]; then
  database=docstore_regress
  fresh_database "${database}"
  # The tests drive index builds by hand (index_build_step, CALL build_indexes): no background
  # builder in this database (scripts/builder.sh tests that one).
  "${PSQL[@]}" -d postgres -qc "alter database ${database} set docstore.auto_build_indexes = off"
fi
mkdir -p "${OUT_DIR}"
"${PG_REGRESS}" --use-existing --host=127.0.0.1 --port="${DOCSTORE_PG_PORT}" --user=postgres \
  --dbname="${database}" --inputdir="${REGRESS_DIR}" --outputdir="${OUT_DIR}" \
  --bindir="${PG_BIN}" setup "${tests[@]}"
