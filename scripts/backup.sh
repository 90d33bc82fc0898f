#!/usr/bin/env bash
# Backups: pg_dump -Fc (and plain) of a database with documents, a composite index, an exemption and a
# second docstore database, pg_restore into a fresh database, then the two must agree:
# the same documents (path, data, create and update times), the same indexes and exemptions,
# the same answers to queries, check_indexes clean, and writes keep working (a new index gets
# a fresh id: the sequence came along). Usage: scripts/backup.sh
source "$(dirname "$0")/lib.sh"
SRC=docstore_backup_src
DST=docstore_backup_dst
PLAIN=docstore_backup_plain
cluster_running || die "the cluster is not running: run 'make up' first"
tmp="$(mktemp -d)"
chmod 755 "${tmp}"
trap 'rm -rf "${tmp}"' EXIT
fresh_database "${SRC}"
fresh_database "${DST}"
src() { "${PSQL[@]}" -d "${SRC}" -Atc "$1"; }
dst() { "${PSQL[@]}" -d "${DST}" -Atc "$1"; }

src "create extension pg_docstore" >/dev/null
src "select count(docstore.set('bk/d' || i, jsonb_build_object('a', i % 7, 'b', i, 'note', repeat('n', i % 50),
                                  'at', jsonb_build_object('\$timestamp', '2024-01-0' || (1 + i % 9) || 'T00:00:00Z'))))
     from generate_series(1, 3000) i" >/dev/null
src "select docstore.set('bk/d1/sub/x', '{\"a\": 1, \"b\": -1}')" >/dev/null
src "select docstore.exempt_field('bk', 'note')" >/dev/null
src "select docstore.create_index('bk', '[{\"field\": \"a\"}, {\"field\": \"b\", \"order\": \"desc\"}]')" >/dev/null
src "select docstore.create_index('sub', '[{\"field\": \"a\"}]', scope => 'collection_group')" >/dev/null
src "call docstore.build_indexes()" >/dev/null
src "select docstore.create_database('second')" >/dev/null
src "set docstore.database = 'second'; select docstore.set('bk/only', '{\"in\": \"second\"}')" >/dev/null
# A write trigger with a recorded change and an acknowledgement (docs/triggers.md).
src "set docstore.trigger_url_prefixes = 'https://hooks.example.com/';
     select docstore.create_trigger('bk', 'bk/{id}', '{write}', 'https://hooks.example.com/bk', 'exactly_once')" >/dev/null
src "insert into docstore.trigger_deliveries (trigger_name, change_id, position, commit_time, path, event, after, params)
     values ('bk', 'c1', '0/10', now(), 'bk/d1', 'create', '{}', '{\"id\": \"d1\"}');
     insert into docstore.trigger_acks (trigger_name, change_id) values ('bk', 'c1')" >/dev/null

pg_dump -Fc -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -d "${SRC}" > "${tmp}/dump"
# A plain restore, no extra flag: the dump's `create publication docstore_changes` replaces the
# copy the restore's `create extension` made (the extension's event triggers, docs/storage.md
# "Backups"). --exit-on-error makes any error fail this script.
pg_restore --exit-on-error -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -d "${DST}" "${tmp}/dump"
say "pg_dump -Fc of ${SRC} restored into ${DST} (plain pg_restore)"

# Everything the extension keeps, row by row (hashes of the sorted rows).
fingerprint_of() {
  local run="$1"
  "${run}" "select
    (select md5(string_agg(database_id || path || data::text || create_time || update_time, ',' order by database_id, name)) from docstore.entities),
    (select count(*) from docstore.entities),
    (select md5(string_agg(database_id || encode(key, 'hex') || encode(name, 'hex'), ',' order by database_id, key)) from docstore.index_entries),
    (select md5(string_agg(id || database_id || collection_group || scope || fields::text || state, ',' order by id)) from docstore.indexes),
    (select md5(string_agg(database_id || collection_group || field_path, ',' order by 1)) from docstore.field_exemptions),
    (select string_agg(id, ',' order by id) from docstore.databases),
    (select md5(string_agg(t::text, ',' order by t.name)) from docstore.triggers t),
    (select md5(string_agg(d::text, ',' order by d.trigger_name, d.change_id)) from docstore.trigger_deliveries d),
    (select md5(string_agg(a::text, ',' order by a.trigger_name, a.change_id)) from docstore.trigger_acks a)"
}
a="$(fingerprint_of src)"; b="$(fingerprint_of dst)"
[ "${a}" = "${b}" ] || die "the restored database differs: ${a} vs ${b}"
case "${b}" in *"|0|"*) die "the restored database has no documents: ${b}" ;; esac
[ "$(dst "select count(*) from docstore.triggers")" = 1 ] || die "the restored database has no trigger"
check_passed "documents, index entries, indexes, exemptions, databases and triggers (with deliveries and acknowledgements) are identical"

for q in "select * from /bk where a = 3 order by b desc limit 5" \
         "select count(*) from /bk where a >= 5" \
         "select * from group(sub) where a = 1"; do
  qa="$(src "select json_agg(r) from docstore.query('${q}') r")"
  qb="$(dst "select json_agg(r) from docstore.query('${q}') r")"
  [ "${qa}" = "${qb}" ] || die "query '${q}' answers differently after the restore"
done
check_passed "queries answer the same"

[ "$(dst "select count(*) from docstore.check_indexes()")" = 0 ] || die "check_indexes is not clean after the restore"
[ "$(dst "select count(*) from pg_publication_tables where pubname = 'docstore_changes' and tablename = 'entities'")" = 1 ] ||
  die "the restored database has no publication docstore_changes of docstore.entities"
# The plain-text format through psql, stopping at the first error, likewise.
fresh_database "${PLAIN}"
pg_dump -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -d "${SRC}" > "${tmp}/dump.sql"
"${PSQL[@]}" -q -d "${PLAIN}" -f "${tmp}/dump.sql" >/dev/null
[ "$("${PSQL[@]}" -d "${PLAIN}" -Atc "select string_agg(schemaname || '.' || tablename, ',') from pg_publication_tables where pubname = 'docstore_changes'")" = docstore.entities ] ||
  die "the plain-format restore has no publication docstore_changes of docstore.entities alone"
[ "$("${PSQL[@]}" -d "${PLAIN}" -Atc "select count(*) from docstore.entities")" = "$(src "select count(*) from docstore.entities")" ] ||
  die "the plain-format restore has other documents"
check_passed "plain pg_restore and plain-format psql restores end without errors, with the publication of docstore.entities"
before="$(src "select max(id) from docstore.indexes")"
new="$(dst "select docstore.create_index('bk', '[{\"field\": \"b\"}, {\"field\": \"a\"}]')")"
[ "${new}" -gt "${before}" ] || die "a new index got id ${new}, not above the restored ${before}: the sequence was not restored"
dst "call docstore.build_indexes()" >/dev/null
dst "select docstore.set('bk/new', '{\"a\": 3, \"b\": 1e9}')" >/dev/null
[ "$(dst "select count(*) from docstore.query('select * from /bk where a = 3 order by b desc')")" = \
  "$(( $(src "select count(*) from docstore.query('select * from /bk where a = 3 order by b desc')") + 1 ))" ] ||
  die "a write after the restore is not found by a query"
[ "$(dst "select count(*) from docstore.check_indexes()")" = 0 ] || die "check_indexes is not clean after writes"
check_passed "writes, index builds and queries keep working; the index id sequence was restored"
"${PSQL[@]}" -d postgres -qc "drop database ${SRC}" -qc "drop database ${DST}" -qc "drop database ${PLAIN}"
