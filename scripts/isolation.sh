#!/usr/bin/env bash
# Concurrency specs with Postgres' own isolation tester against the project cluster, in a
# fresh database `docstore_isolation`. Usage: scripts/isolation.sh [spec ...]
source "$(dirname "$0")/lib.sh"

SPEC_DIR="${ROOT}/pg_docstore/tests/isolation"
OUT_DIR="${ROOT}/target/isolation"
PG_ISOLATION="$(pgxs_tool isolation/pg_isolation_regress)"
cluster_running || die "the cluster is not running: run 'make up' first"

if [ "$#" -gt 0 ]; then
  specs=("$@")
else
  mapfile -t specs < <(test_names "${SPEC_DIR}/specs" spec)
fi
fresh_database docstore_isolation
# No background index builder in this database (as in the regression tests): its sweep holds a
# snapshot for a while, and a spec such as rules_truncate expects VACUUM to remove and truncate
# rows no transaction of its own can see; the specs build their indexes with CALL.
"${PSQL[@]}" -d postgres -qc "alter database docstore_isolation set docstore.auto_build_indexes = off"
"${PSQL[@]}" -d docstore_isolation -qc "create extension pg_docstore"
mkdir -p "${OUT_DIR}"
"${PG_ISOLATION}" --use-existing --host=127.0.0.1 --port="${DOCSTORE_PG_PORT}" --user=postgres \
  --dbname=docstore_isolation --inputdir="${SPEC_DIR}" --outputdir="${OUT_DIR}" \
  --bindir="${PG_BIN}" "${specs[@]}"
