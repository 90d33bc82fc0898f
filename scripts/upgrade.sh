#!/usr/bin/env bash
# Extension upgrades, as a user of a released version meets them: for every released version V
# (its script as released is pg_docstore/sql/archive/pg_docstore--V.sql, installed by `make up`),
#   1. a database is created at V and given data (the demo in a database id of its own, a
#      composite index, a ruleset);
#   2. `ALTER EXTENSION pg_docstore UPDATE` brings it to the current version;
#   3. the data reads the same as before the update, and check_indexes finds nothing wrong;
#   4. the extension's objects are those of a fresh install of the current version (pg_dump
#      --binary-upgrade lists every member object of the extension; both dumps compared);
#   5. the SQL regression suite passes in the upgraded database.
# Each check prints `check passed: ...` or `check FAILED: ...`; the suite prints
# pg_regress' own summary. Usage: scripts/upgrade.sh [VERSION ...] (default: every archived one)
source "$(dirname "$0")/lib.sh"

cluster_running || die "the cluster is not running: run 'make up' first"
OUT_DIR="${ROOT}/target/upgrade"
mkdir -p "${OUT_DIR}"
CURRENT="$(grep -m1 '^version' "${ROOT}/Cargo.toml" | cut -d'"' -f2)"
UPGRADED=docstore_upgrade
FRESH=docstore_upgrade_fresh
FAILED=0

if [ "$#" -gt 0 ]; then
  versions=("$@")
else
  mapfile -t versions < <(find "${ROOT}/pg_docstore/sql/archive" -name 'pg_docstore--*.sql' \
    -printf '%f\n' | sed -E 's/^pg_docstore--(.*)\.sql$/\1/' | sort -V)
fi
[ "${#versions[@]}" -gt 0 ] || die "no released version in pg_docstore/sql/archive"

check() {
  local name="$1"
  shift
  if "$@"; then
    check_passed "${name}"
  else
    echo "check FAILED: ${name}"
    FAILED=1
  fi
}

# What the data reads as: documents, a query served by the composite index, a collection group
# query, an aggregation, the ruleset and the index catalog, in database id `upgrade-demo`.
read_back() {
  "${PSQL[@]}" -d "${UPGRADED}" -At <<'SQL'
set docstore.database = 'upgrade-demo';
select path, data::text, update_time from docstore.documents order by path;
select path from docstore.query('select * from /restaurants where city = "SF" order by avgRating desc');
select path from docstore.query('select * from group(ratings) where rating >= 4');
select data::text from docstore.query('select count(*), avg(rating) from group(ratings)');
select source from docstore.rules where database_id = 'upgrade-demo';
select collection_group, fields::text, scope, state from docstore.indexes
  where database_id = 'upgrade-demo' order by id;
SQL
}

# The extension's member objects as pg_dump --binary-upgrade writes them, without what differs
# between two databases of the same schema: OIDs, frozen transaction ids, the dump's nonce,
# sequence positions, and the body of docstore.rules_policy, which the extension generates
# from docstore.rules (a one-line body here: the demo's rules are dropped first).
extension_objects() {
  "${PG_BIN}/pg_dump" -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres --schema-only \
    --binary-upgrade --no-owner "$1" |
    grep -vE 'binary_upgrade_set_|^-- (Name|TOC entry|Dependencies):|^SELECT pg_catalog.set_config' |
    grep -vE '^--$|^$|^\\(un)?restrict |^UPDATE pg_catalog.pg_class$|^SET relfrozenxid|^WHERE oid = ' |
    grep -vE '^SELECT pg_catalog.setval\(' |
    sed -E "s/'\{[0-9,]+\}'/'{oids}'/g" |
    awk '/^CREATE FUNCTION docstore.rules_policy\(/ { policy = 1 }
         policy && /^    AS / { print "    AS (generated from docstore.rules)"; policy = 0; next }
         { print }'
}

# check_indexes of the demo's database id: no problem rows.
no_index_problems() {
  local problems
  problems="$("${PSQL[@]}" -d "${UPGRADED}" -qAt -c "set docstore.database = 'upgrade-demo'" \
    -c "select path || ': ' || problem from docstore.check_indexes() limit 20")"
  [ -z "${problems}" ] || {
    echo "${problems}"
    return 1
  }
}

same_file() { diff -u "$1" "$2" | head -n 80 && cmp -s "$1" "$2"; }

at_version() { [ "$("${PSQL[@]}" -d "${UPGRADED}" -Atc "select extversion from pg_extension where extname = 'pg_docstore'")" = "$1" ]; }

for from in "${versions[@]}"; do
  say "upgrade: ${from} -> ${CURRENT}"
  fresh_database "${UPGRADED}"
  # The regression suite drives index builds by hand (as scripts/regress.sh sets it up).
  "${PSQL[@]}" -d postgres -qc "alter database ${UPGRADED} set docstore.auto_build_indexes = off"
  "${PSQL[@]}" -d "${UPGRADED}" -qc "create extension pg_docstore version '${from}'"
  check "created at ${from}" at_version "${from}"
  "${PSQL[@]}" -d "${UPGRADED}" -q >/dev/null <<SQL
set docstore.database = 'upgrade-demo';
\i ${ROOT}/demo/restaurants.sql
select docstore.set_rules('rules_version = ''2'';
service cloud.firestore {
  match /databases/{database}/documents {
    match /restaurants/{id} { allow read: if true; allow write: if request.auth != null; }
  }
}', 'upgrade-demo');
SQL
  read_back > "${OUT_DIR}/${from}-before.txt"
  "${PSQL[@]}" -d "${UPGRADED}" -qc "alter extension pg_docstore update"
  check "ALTER EXTENSION pg_docstore UPDATE to ${CURRENT}" at_version "${CURRENT}"
  read_back > "${OUT_DIR}/${from}-after.txt"
  check "documents, queries, rules and indexes read as before the update" \
    same_file "${OUT_DIR}/${from}-before.txt" "${OUT_DIR}/${from}-after.txt"
  check "check_indexes finds no problem after the update" no_index_problems
  # The suite below reads every database id of the database: the demo's id goes first.
  "${PSQL[@]}" -d "${UPGRADED}" -qc "select docstore.drop_rules('upgrade-demo'), docstore.drop_database('upgrade-demo')" >/dev/null

  fresh_database "${FRESH}"
  "${PSQL[@]}" -d "${FRESH}" -qc "create extension pg_docstore"
  extension_objects "${FRESH}" > "${OUT_DIR}/${from}-fresh.sql"
  extension_objects "${UPGRADED}" > "${OUT_DIR}/${from}-upgraded.sql"
  check "the upgraded extension's objects are a fresh ${CURRENT} install's" \
    same_file "${OUT_DIR}/${from}-fresh.sql" "${OUT_DIR}/${from}-upgraded.sql"
  "${PSQL[@]}" -d postgres -qc "drop database ${FRESH}"

  # The regression suite in the upgraded database (its setup creates the extension only
  # where it is missing).
  DOCSTORE_REGRESS_DATABASE="${UPGRADED}" bash "${ROOT}/scripts/regress.sh" || FAILED=1
  check "check_indexes finds no problem after the regression suite" no_index_problems
done
exit "${FAILED}"
