#!/usr/bin/env bash
# WAL bytes per create / update / delete on docstore.entities with REPLICA IDENTITY DEFAULT
# (the primary key) and FULL (the whole old row: the exact `before` of write triggers,
# docs/triggers.md). Needs the project cluster of `make up`; leaves the table at FULL.
# usage: bash scripts/bench_replica_identity.sh [writes per run, default 2000] [rounds, default 2]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
n="${1:-2000}"
rounds="${2:-2}"
psql_() { "${PG_BIN}/psql" -X -q -At -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -d docstore "$@"; }
# small: 5 fields (~100 bytes); large: a 4 KiB incompressible string besides (TOASTed).
small="jsonb_build_object('name', 'r' || i, 'city', 'Paris', 'stars', i % 5, 'open', true, 'tags', jsonb_build_array('a', 'b'))"
large="jsonb_build_object('name', 'r' || i, 'stars', i % 5, 'text', (select string_agg(md5(random()::text), '') from generate_series(1, 128)))"
per_write() { # statement over i -> WAL bytes per write
  psql_ -c "checkpoint" >/dev/null
  local a b
  a=$(psql_ -c "select pg_current_wal_insert_lsn()")
  psql_ -c "do \$\$ begin for i in 1..${n} loop perform $1; end loop; end \$\$" >/dev/null
  b=$(psql_ -c "select pg_current_wal_insert_lsn()")
  psql_ -c "select round(('$b'::pg_lsn - '$a'::pg_lsn) / ${n})"
}
printf '%-8s %-6s %8s %8s %8s\n' identity doc create update delete
for round in $(seq "${rounds}"); do
  for size in small large; do
    doc="${small}"; [ "${size}" = large ] && doc="${large}"
    for identity in default full; do
      psql_ -c "alter table docstore.entities replica identity ${identity}"
      c=$(per_write "docstore.create('walbench/d' || i, ${doc})")
      u=$(per_write "docstore.update('walbench/d' || i, jsonb_build_object('stars', (i + 1) % 5))")
      d=$(per_write "docstore.delete('walbench/d' || i)")
      printf '%-8s %-6s %8s %8s %8s\n' "${identity}" "${size}" "$c" "$u" "$d"
    done
  done
done
psql_ -c "alter table docstore.entities replica identity full"
