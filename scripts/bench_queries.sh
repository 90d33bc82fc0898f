#!/usr/bin/env bash
# Query benchmarks of issue 4, against a plain jsonb table in the same run:
#   1. equality + order + limit 10 (`where city = .. order by avgRating desc limit 10`) vs the same
#      query on a plain jsonb table with a btree expression index on (city, avgRating desc);
#   2. two-equality zig-zag with limit 10 (each equality alone 10% of the documents, both 1%)
#      at 100k and 1M documents: latency and index rows read (explain run => true);
#   3. count(*) over ~100k matching documents (1M collection): rows/s.
# Usage: scripts/bench_queries.sh [seconds per latency run (default 10)] [remeasure]
#   remeasure: skip loading, measure the database a previous run left (1M documents).
source "$(dirname "$0")/lib.sh"
SECONDS_PER_RUN="${1:-10}"
MODE="${2:-full}"
DB=docstore_qbench
cluster_running || die "the cluster is not running: run 'make up' first"
[ "${MODE}" = remeasure ] || fresh_database "${DB}"
[ "${MODE}" = remeasure ] || "${PSQL[@]}" -d "${DB}" -q <<'SQL'
create extension pg_docstore;
create table plain (id int primary key, data jsonb not null);
create index plain_city_rating on plain ((data->>'city'), ((data->>'avgRating')::float8) desc);
create index plain_a on plain ((data->>'a'));
-- The same pseudo-random restaurant for docstore and the plain table.
create function restaurant(i int) returns jsonb language sql immutable as $$
  select jsonb_build_object(
    'name', 'Restaurant ' || i,
    'city', 'c' || (abs(hashint4(i)) % 100),
    'type', 't' || (abs(hashint4(i + 1000000000)) % 20),
    'avgRating', ((abs(hashint4(i + 2000000000)) % 500) / 100.0 + 0.005)::float8,
    'numRatings', abs(hashint4(-i)) % 1000,
    'a', abs(hashtext('a' || i)) % 10,
    'b', abs(hashtext('b' || i)) % 10)
$$;
create procedure load(first int, last int) language plpgsql as $$
begin
  for s in first..last by 500 loop
    perform docstore.commit((select jsonb_agg(jsonb_build_object('create', 'r/d' || lpad(i::text, 7, '0'), 'data', restaurant(i)))
                             from generate_series(s, least(s + 499, last)) i));
    insert into plain select i, restaurant(i) from generate_series(s, least(s + 499, last)) i;
    commit;
  end loop;
end $$;
select docstore.create_index('r', '[{"field": "city"}, {"field": "avgRating", "order": "desc"}]') > 0 as index_created;
call docstore.build_indexes();
SQL
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
latency() { # sql -> average latency in ms
  echo "$1" > "${tmp}/q.sql"
  pgbench -n -M prepared -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c 1 -T "${SECONDS_PER_RUN}" -f "${tmp}/q.sql" "${DB}" 2>&1 |
    awk '/latency average/{print $4}'
}
Q1_DOC="select * from docstore.query('select * from /r where city = \"c42\" order by avgRating desc limit 10');"
Q1_PLAIN="select id, data from plain where data->>'city' = 'c42' order by (data->>'avgRating')::float8 desc limit 10;"
Q2_TEXT='select * from /r where a = 3 and b = 7 limit 10'
Q2_DOC="select * from docstore.query('${Q2_TEXT}');"
measure() { # size
  "${PSQL[@]}" -d "${DB}" -qc "vacuum analyze" >/dev/null
  local d1 p1 d2 read2
  d1="$(latency "${Q1_DOC}")"; p1="$(latency "${Q1_PLAIN}")"
  d1b="$(latency "${Q1_DOC}")"; p1b="$(latency "${Q1_PLAIN}")"
  d2="$(latency "${Q2_DOC}")"
  read2="$("${PSQL[@]}" -d "${DB}" -Atc "select docstore.explain('${Q2_TEXT}', run => true)->'analyze'")"
  echo "| $1 | ${p1} / ${p1b} | ${d1} / ${d1b} | $(awk "BEGIN{printf \"%.2f\", (${d1}+${d1b})/(${p1}+${p1b})}") | ${d2} | ${read2} |"
}
echo "| documents | plain eq+order+limit 10 (ms, 2 runs) | docstore (ms, 2 runs) | ratio | zig-zag a=3 and b=7 limit 10 (ms) | zig-zag read |"
echo "|---|---|---|---|---|---|"
if [ "${MODE}" = remeasure ]; then
  measure "$("${PSQL[@]}" -d "${DB}" -Atc "select count(*) from docstore.entities")"
else
  "${PSQL[@]}" -d "${DB}" -qc "call load(1, 100000)"
  measure 100000
  "${PSQL[@]}" -d "${DB}" -qc "call load(100001, 1000000)"
  measure 1000000
fi
echo
start=$(date +%s%N)
count="$("${PSQL[@]}" -d "${DB}" -Atc "select data->>'field_1' from docstore.query('select count(*) from /r where a = 3')")"
end=$(date +%s%N)
pstart=$(date +%s%N)
pcount="$("${PSQL[@]}" -d "${DB}" -Atc "select count(*) from plain where data->>'a' = '3'")"
pend=$(date +%s%N)
ms=$(( (end - start) / 1000000 )); pms=$(( (pend - pstart) / 1000000 ))
echo "| count(*) where a = 3 | matching | ms | rows/s |"
echo "|---|---|---|---|"
echo "| docstore (index range of a=3, no documents read) | ${count} | ${ms} | $(( count * 1000 / (ms > 0 ? ms : 1) )) |"
echo "| plain table, btree expression index on data->>'a' | ${pcount} | ${pms} | $(( pcount * 1000 / (pms > 0 ? pms : 1) )) |"
echo
"${PSQL[@]}" -d "${DB}" -Atc "select 'check_indexes problems: ' || count(*) from docstore.check_indexes()"
