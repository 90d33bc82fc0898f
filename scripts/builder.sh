#!/usr/bin/env bash
# The background index builder: an index created over an existing collection becomes READY
# with no CALL, and a dropped one disappears; and its workers purge expired document versions. Needs the extension in shared_preload_libraries
# (`make up` sets it). Usage: scripts/builder.sh [documents (default 5000)]
source "$(dirname "$0")/lib.sh"
DOCS="${1:-5000}"
DB=docstore_builder
cluster_running || die "the cluster is not running: run 'make up' first"
[ "$("${PSQL[@]}" -d postgres -Atc "select count(*) from pg_stat_activity where backend_type = 'docstore index build launcher'")" = 1 ] ||
  die "no docstore index build launcher runs: is pg_docstore in shared_preload_libraries?"
fresh_database "${DB}"
sql() { "${PSQL[@]}" -d "${DB}" -Atc "$1"; }
sql "create extension pg_docstore" >/dev/null
sql "select count(docstore.set('bld/d' || i, jsonb_build_object('a', i % 10, 'b', i))) from generate_series(1, ${DOCS}) i" >/dev/null

# Wait (bounded: a builder that never comes fails the test, a slow machine does not) until
# the query $1 answers $2.
wait_for() {
  local i got=
  for i in $(seq 1 600); do
    got="$(sql "$1")"
    [ "${got}" = "$2" ] && return
    sleep 0.2
  done
  die "after 120 s, '$1' answers '${got}', expected '$2'"
}

id="$(sql "select docstore.create_index('bld', '[{\"field\": \"a\"}, {\"field\": \"b\", \"order\": \"desc\"}]')")"
wait_for "select state || ' ' || documents_done from docstore.list_indexes() where id = ${id}" "READY ${DOCS}"
check_passed "index ${id} over ${DOCS} existing documents became READY with no CALL"
entries="$(sql "select count(*) from docstore.index_entries where get_byte(key, 0) = 3 and substring(key from 2 for 4) = int4send(${id})")"
[ "${entries}" = "${DOCS}" ] || die "index ${id} has ${entries} entries, expected ${DOCS}"
got="$(sql "select count(*) from docstore.query('select * from /bld where a = 3 order by b desc')")"
[ "${got}" = $((DOCS / 10)) ] || die "the query through index ${id} returned ${got} documents, expected $((DOCS / 10))"
sql "select docstore.drop_index(${id})" >/dev/null
wait_for "select count(*) from docstore.indexes where id = ${id}" 0
entries="$(sql "select count(*) from docstore.index_entries where get_byte(key, 0) = 3 and substring(key from 2 for 4) = int4send(${id})")"
[ "${entries}" = 0 ] || die "dropped index ${id} still has ${entries} entries"
check_passed "dropped index ${id}: definition and entries removed with no CALL"
# CALL still waits for (and finishes) whatever is pending
id="$(sql "select docstore.create_index('bld', '[{\"field\": \"b\"}, {\"field\": \"a\"}]')")"
sql "call docstore.build_indexes()" >/dev/null
[ "$(sql "select state from docstore.list_indexes() where id = ${id}")" = READY ] || die "CALL returned before index ${id} was READY"
check_passed "CALL docstore.build_indexes() returned with index ${id} READY"
# The same worker purges document versions past their retention (docs/storage.md, "Version
# history"): two versions aged past the hour go, one inside it stays. A new index wakes the
# workers at once (the sweep every 60 s would too).
sql "select docstore.set('ver/a', '{\"n\": 1}'), docstore.set('ver/a', '{\"n\": 2}'), docstore.set('ver/a', '{\"n\": 3}'), docstore.set('ver/a', '{\"n\": 4}')" >/dev/null
sql "update docstore.entity_versions set superseded_time = superseded_time - interval '2 hours' where path = 'ver/a' and superseded_time < (select max(superseded_time) from docstore.entity_versions where path = 'ver/a')" >/dev/null
[ "$(sql "select count(*) from docstore.entity_versions where path = 'ver/a'")" = 3 ] || die "expected 3 versions of ver/a"
sql "select docstore.create_index('ver', '[{\"field\": \"n\"}, {\"field\": \"m\"}]')" >/dev/null
wait_for "select count(*) from docstore.entity_versions where path = 'ver/a'" 1
[ "$(sql "select data->>'n' from docstore.entity_versions where path = 'ver/a'")" = 3 ] || die "the version inside the retention was purged"
check_passed "versions past their retention purged with no CALL, the one inside it kept"
problems="$(sql "select count(*) from docstore.check_indexes()")"
[ "${problems}" = 0 ] || die "check_indexes reports ${problems} problems"
check_passed "check_indexes is clean"
"${PSQL[@]}" -d postgres -qc "drop database ${DB}"
