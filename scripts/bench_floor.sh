#!/usr/bin/env bash
# What the storage layout costs by itself: the writes of issue 3 done in plain SQL on tables
# shaped exactly like docstore.entities and docstore.index_entries, with the same rows and keys
# docstore writes, but none of our code (no typed JSON, no Rust, no SPI). Each pgbench run
# (16 clients) alternates with its plain baseline and with docstore in the same round:
#   create:  plain insert + GIN  |  SQL floor: entity row + its 10 index-entry rows  |  docstore.add
#   counter: plain UPDATE n+1    |  SQL floor: lock, update the row, swap its entry  |  docstore.update $increment
# The floor is the best an implementation of this layout could do through SQL statements;
# docstore writes index entries below the executor (docs/storage.md), so it can beat it
# (BENCHMARKS.md).
# Usage: scripts/bench_floor.sh [seconds per run (default 15)] [rounds (default 2)]
source "$(dirname "$0")/lib.sh"
SECONDS_PER_RUN="${1:-15}"
ROUNDS="${2:-2}"
CLIENTS=16
DB=docstore_floor
cluster_running || die "the cluster is not running: run 'make up' first"
fresh_database "${DB}"
"${PSQL[@]}" -d "${DB}" -q <<'SQL'
create extension pg_docstore;
-- The documents of scripts/bench_writes.sh (~1 KB, 10 top-level fields), written by docstore
-- once so that the pool holds the exact index-entry keys docstore computes for each of them.
select count(docstore.add('restaurants', jsonb_build_object(
  'name', 'Restaurant ' || i, 'city', 'City ' || (i % 100), 'type', 'Type ' || (i % 20),
  'avgRating', (i % 4) + 0.5, 'numRatings', i, 'price', i % 4, 'open', true, 'phone', '+1-555-' || i,
  'address', '1234 Market Street, Suite ' || i || ', San Francisco, CA 94103, United States of America',
  'description', 'A neighbourhood favourite serving slow-smoked brisket, ribs and seasonal sides, with a long list of Californian wines and local craft beers on tap; reservations recommended on weekends, walk-ins welcome at the bar, private dining for up to forty guests, catering available for events of every size, and a patio that is dog friendly. Kitchen open until late every day except Monday, brunch on Saturdays and Sundays from ten, happy hour from four to six with half-price small plates and oysters, live music on Thursday nights, gift cards available at the host stand and online, parking validated at the garage across the street ' || i || '.')))
from generate_series(1, 20000) i;
-- Per document: its data, parent key, and its entry keys without the trailing name.
create table pool as
select row_number() over () as id, e.data, e.parent,
       array_agg(substr(i.key, 1, length(i.key) - length(e.name))) as prefixes
from docstore.entities e
join docstore.index_entries i on i.database_id = e.database_id and i.name = e.name
group by e.name, e.data, e.parent;
create unique index on pool (id);
-- Tables shaped like ours (sql/schema.sql), without our code.
create table floor_entities (like docstore.entities including all);
create table floor_entries (like docstore.index_entries including all);
create table plain (id bigserial primary key, data jsonb not null);
create index plain_gin on plain using gin (data jsonb_path_ops);
create table counter (id int primary key, n bigint not null);
insert into counter values (1, 0);
insert into floor_entities values ('(default)', '\x01aa', '\x01', 'counters', 'counters/hot', '{"n": 0}', now(), now());
insert into floor_entries values ('(default)', '\x01' || '0'::bytea, '\x01aa');
select docstore.set('counters/hot', '{"n": 0}') is not null as ready;
-- The counter floor: what docstore.update does, in SQL: lock and read the row, write the new
-- data and update time, delete the old value's entry and insert the new one.
-- (Index scans only, as docstore's own statements: the table's statistics lag the load.)
create function floor_increment() returns void language plpgsql set enable_seqscan = off as $$
declare d jsonb;
begin
  select data into d from floor_entities where database_id = '(default)' and name = '\x01aa' for update;
  with u as (update floor_entities set data = jsonb_build_object('n', (d->>'n')::bigint + 1), update_time = now()
             where database_id = '(default)' and name = '\x01aa'),
       x as (delete from floor_entries where database_id = '(default)' and key = '\x01'::bytea || (d->>'n')::bytea)
  insert into floor_entries select '(default)', '\x01'::bytea || ((d->>'n')::bigint + 1)::text::bytea, '\x01aa';
end $$;
analyze;
SQL
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
pick='\set i random(1, 20000)'
printf '%s\ninsert into plain (data) select data from pool where id = :i;\n' "${pick}" > "${tmp}/plain_create.sql"
# A fresh random 20-character id, encoded as docstore encodes names.
printf '%s\n%s\n' "${pick}" "with n as (select '\\x0172657374617572616e7473000101'::bytea || convert_to(substr(md5(random()::text), 1, 20), 'UTF8') || '\\x000100'::bytea as n), p as (select * from pool where id = :i), e as (insert into floor_entities select '(default)', n.n, p.parent, 'restaurants', 'restaurants/x', p.data, now(), now() from p, n) insert into floor_entries select '(default)', k || n.n, n.n from p, n, unnest(p.prefixes) k;" > "${tmp}/floor_create.sql"
printf '%s\nselect docstore.add('"'"'restaurants'"'"', data) from pool where id = :i;\n' "${pick}" > "${tmp}/docstore_create.sql"
echo "update counter set n = n + 1 where id = 1;" > "${tmp}/plain_counter.sql"
echo "select floor_increment();" > "${tmp}/floor_counter.sql"
echo "select docstore.update('counters/hot', '{\"n\": {\"\$increment\": 1}}');" > "${tmp}/docstore_counter.sql"
run() { # script -> transactions per second
  "${PSQL[@]}" -d "${DB}" -qc checkpoint
  pgbench -n -M prepared -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c "${CLIENTS}" -j 2 \
    -T "${SECONDS_PER_RUN}" -f "$1" "${DB}" 2>&1 | awk '/^tps = /{print int($3)}'
}
ratio() { awk "BEGIN{printf \"%.2f\", $1/$2}"; }
rounds() { # kind (create|counter): one table row per round, baseline, floor and docstore back to back
  local round p f d
  for round in $(seq 1 "${ROUNDS}"); do
    p="$(run "${tmp}/plain_$1.sql")"; f="$(run "${tmp}/floor_$1.sql")"; d="$(run "${tmp}/docstore_$1.sql")"
    echo "| ${round} | ${p} | ${f} | ${d} | $(ratio "${f}" "${p}") | $(ratio "${d}" "${p}") | $(ratio "${d}" "${f}") |"
  done
}
echo "| round | plain insert + GIN | SQL floor: entity + 10 entries | docstore.add | floor / plain | docstore / plain | docstore / floor |"
echo "|---|---|---|---|---|---|---|"
rounds create
echo
"${PSQL[@]}" -d "${DB}" -qc analyze
echo "| round | plain UPDATE n+1 | SQL floor: lock, update, swap entry | docstore \$increment | floor / plain | docstore / plain | docstore / floor |"
echo "|---|---|---|---|---|---|---|"
rounds counter
