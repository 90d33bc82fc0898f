#!/usr/bin/env bash
# Write benchmarks of issue 3, each against its baseline in the same run (pgbench, 16 clients):
#   1. create a ~1 KB document with 10 automatically indexed fields (docstore.add) vs inserting
#      the same document into a plain jsonb table with a GIN (jsonb_path_ops) index;
#   2. hot counter: docstore.update(path, {"n": {"$increment": 1}}) on one document vs
#      UPDATE t SET n = n + 1 WHERE id = 1;
#   3. WAL bytes per document write (pg_current_wal_lsn deltas over a fixed number of writes).
# Rounds alternate baseline and docstore so drift on a shared machine hits both.
# Usage: scripts/bench_writes.sh [seconds per run (default 20)] [rounds (default 2)]
source "$(dirname "$0")/lib.sh"
SECONDS_PER_RUN="${1:-20}"
ROUNDS="${2:-2}"
CLIENTS=16
DB=docstore_bench
cluster_running || die "the cluster is not running: run 'make up' first"
fresh_database "${DB}"
"${PSQL[@]}" -d "${DB}" -q <<'SQL'
create extension pg_docstore;
create table plain (id bigserial primary key, data jsonb not null);
create index plain_gin on plain using gin (data jsonb_path_ops);
create table counter (id int primary key, n bigint not null);
insert into counter values (1, 0);
select docstore.set('counters/hot', '{"n": 0}') is not null as ready;
select count(docstore.add('restaurants', jsonb_build_object('warm', i))) from generate_series(1, 2000) i;
analyze;
SQL
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
# ~1 KB, 10 top-level scalar fields (10 automatic index entries), values varied per write.
doc='{"name": "Restaurant :r", "city": "City :c", "type": "Type :t", "avgRating": :a.5, "numRatings": :r, "price": :p, "open": true, "phone": "+1-555-:r", "address": "1234 Market Street, Suite :r, San Francisco, CA 94103, United States of America", "description": "A neighbourhood favourite serving slow-smoked brisket, ribs and seasonal sides, with a long list of Californian wines and local craft beers on tap; reservations recommended on weekends, walk-ins welcome at the bar, private dining for up to forty guests, catering available for events of every size, and a patio that is dog friendly. Kitchen open until late every day except Monday, brunch on Saturdays and Sundays from ten, happy hour from four to six with half-price small plates and oysters, live music on Thursday nights, gift cards available at the host stand and online, parking validated at the garage across the street :r."}'
vars='\set r random(1, 1000000)
\set c random(1, 100)
\set t random(1, 20)
\set a random(1, 4)
\set p random(1, 4)'
printf '%s\nselect docstore.add('"'"'restaurants'"'"', '"'"'%s'"'"');\n' "${vars}" "${doc}" > "${tmp}/docstore_create.sql"
printf '%s\ninsert into plain (data) values ('"'"'%s'"'"');\n' "${vars}" "${doc}" > "${tmp}/plain_create.sql"
echo "select docstore.update('counters/hot', '{\"n\": {\"\$increment\": 1}}');" > "${tmp}/docstore_counter.sql"
echo "update counter set n = n + 1 where id = 1;" > "${tmp}/plain_counter.sql"

# The create scripts substitute variables inside JSON literals, which needs the simple protocol
# (prepared mode binds them as parameters); baseline and docstore always use the same mode.
mode_of() { case "$1" in *create*) echo simple ;; *) echo prepared ;; esac; }
run() { # script -> transactions per second
  "${PSQL[@]}" -d "${DB}" -qc checkpoint
  pgbench -n -M "$(mode_of "$1")" -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c "${CLIENTS}" -j 2 \
    -T "${SECONDS_PER_RUN}" -f "$1" "${DB}" 2>&1 | awk '/^tps = /{print int($3)}'
}
wal_per_write() { # script, writes -> bytes per write
  "${PSQL[@]}" -d "${DB}" -qc checkpoint
  local before after
  before="$("${PSQL[@]}" -d "${DB}" -Atc "select pg_current_wal_lsn()")"
  pgbench -n -M "$(mode_of "$1")" -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c 4 -j 2 -t "$(( $2 / 4 ))" -f "$1" "${DB}" >/dev/null 2>&1
  after="$("${PSQL[@]}" -d "${DB}" -Atc "select pg_current_wal_lsn()")"
  "${PSQL[@]}" -d "${DB}" -Atc "select round(pg_wal_lsn_diff('${after}', '${before}') / $2)"
}

# Random-key btree inserts slow down as the tables grow while the plain table's appends do not,
# so each round says how many documents the collection held when it started.
documents() { "${PSQL[@]}" -d "${DB}" -Atc "select count(*) from docstore.entities where collection_id = 'restaurants'"; }
echo "| round | documents at start | plain insert + GIN (tps) | docstore.add (tps) | ratio | plain UPDATE n+1 (tps) | docstore \$increment (tps) | ratio |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "${ROUNDS}"); do
  size="$(documents)"
  pc="$(run "${tmp}/plain_create.sql")"
  dc="$(run "${tmp}/docstore_create.sql")"
  pu="$(run "${tmp}/plain_counter.sql")"
  du="$(run "${tmp}/docstore_counter.sql")"
  echo "| ${round} | ${size} | ${pc} | ${dc} | $(awk "BEGIN{printf \"%.2f\", ${dc}/${pc}}") | ${pu} | ${du} | $(awk "BEGIN{printf \"%.2f\", ${du}/${pu}}") |"
done
pw="$(wal_per_write "${tmp}/plain_create.sql" 8000)"
dw="$(wal_per_write "${tmp}/docstore_create.sql" 8000)"
pwu="$(wal_per_write "${tmp}/plain_counter.sql" 8000)"
dwu="$(wal_per_write "${tmp}/docstore_counter.sql" 8000)"
echo
echo "| WAL bytes per write | plain | docstore | ratio |"
echo "|---|---|---|---|"
echo "| create ~1 KB, 10 fields | ${pw} | ${dw} | $(awk "BEGIN{printf \"%.2f\", ${dw}/${pw}}") |"
echo "| counter increment | ${pwu} | ${dwu} | $(awk "BEGIN{printf \"%.2f\", ${dwu}/${pwu}}") |"
echo
"${PSQL[@]}" -d "${DB}" -Atc "select 'check_indexes problems: ' || count(*) from docstore.check_indexes()"
