#!/usr/bin/env bash
# The write cost of the version history (docs/storage.md, "Version history"): pgbench of an
# update-heavy workload (docstore.update of random documents among 10,000, each with 10
# automatically indexed fields: every call replaces a version) in a database keeping versions
# for one hour against one keeping none (version_retention 0), in the same run. Rounds alternate
# the two (and each run starts after a checkpoint) so drift on a shared machine hits both. First, the WAL bytes per update of each
# (2,000 updates in one statement, after a checkpoint), which a loaded machine does not blur.
# Usage: scripts/bench_history.sh [seconds per run (default 60)] [rounds (default 1)]
source "$(dirname "$0")/lib.sh"
SECONDS_PER_RUN="${1:-60}"
ROUNDS="${2:-1}"
CLIENTS=4
DB=docstore_bench_history
cluster_running || die "the cluster is not running: run 'make up' first"
fresh_database "${DB}"
"${PSQL[@]}" -d "${DB}" -q >/dev/null <<'SQL'
create extension pg_docstore;
select docstore.create_database('history-on'), docstore.create_database('history-off');
select docstore.set_version_retention('history-on', '1 hour');
select docstore.set_version_retention('history-off', '0');
select set_config('docstore.database', 'history-on', false);
select count(docstore.set('docs/d' || i, jsonb_build_object('a', i, 'b', 'x', 'c', i * 2,
  'd', true, 'e', 'text', 'f', 1.5, 'g', i % 7, 'h', 'y', 'i', i, 'j', 'z'))) from generate_series(1, 10000) i;
select set_config('docstore.database', 'history-off', false);
select count(docstore.set('docs/d' || i, jsonb_build_object('a', i, 'b', 'x', 'c', i * 2,
  'd', true, 'e', 'text', 'f', 1.5, 'g', i % 7, 'h', 'y', 'i', i, 'j', 'z'))) from generate_series(1, 10000) i;
analyze;
SQL
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
cat > "${tmp}/update.sql" <<'PGBENCH'
\set id random(1, 10000)
\set v random(1, 1000000)
select docstore.update('docs/d' || :id, ('{"a": ' || :v || ', "g": ' || (:v % 7) || '}')::jsonb);
PGBENCH

# Each run starts right after a checkpoint, so both pay the same full-page images (the run
# after another one would otherwise find its pages already logged since the checkpoint).
tps() {
  "${PSQL[@]}" -d "${DB}" -qc checkpoint
  PGOPTIONS="-c docstore.database=$1" "${PG_BIN}/pgbench" -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" \
    -U postgres -n -c "${CLIENTS}" -j 2 -T "${SECONDS_PER_RUN}" -f "${tmp}/update.sql" "${DB}" \
    | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}

wal() {
  "${PSQL[@]}" -d "${DB}" -Atq <<SQL | tail -n 1
checkpoint;
set docstore.database = '$1';
select pg_current_wal_lsn() as l0 \gset
select count(docstore.update('docs/d' || i, jsonb_build_object('a', -i))) from generate_series(1, 2000) i;
select round(pg_wal_lsn_diff(pg_current_wal_lsn(), :'l0') / 2000);
SQL
}
echo "WAL bytes per update: history off $(wal history-off), history on (1 hour) $(wal history-on)"

for round in $(seq 1 "${ROUNDS}"); do
  if [ $((round % 2)) -eq 1 ]; then
    off="$(tps history-off)"
    on="$(tps history-on)"
  else
    on="$(tps history-on)"
    off="$(tps history-off)"
  fi
  kept="$("${PSQL[@]}" -d "${DB}" -Atc "select count(*) from docstore.entity_versions where database_id = 'history-on'")"
  echo "round ${round}: history off ${off} tps, history on (1 hour) ${on} tps, on/off $(awk -v a="${on}" -v b="${off}" 'BEGIN { printf "%.3f", a / b }'), versions kept ${kept}"
done
"${PSQL[@]}" -d postgres -qc "drop database ${DB}"
