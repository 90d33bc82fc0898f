#!/usr/bin/env bash
# Security-rules costs in the extension (issue 13), same run, same data:
#   1. a primitive through its SQL wrapper (docstore.rules_add) vs its Rust entry point
#      (docstore.rules_prim2('add', ..)) over 100,000 values: the wrappers are inlined;
#   2. plain SQL over N documents (default 20,000) as the admin vs as docstore_client under the
#      row-level-security `list` policy (compiled SQL, per row);
#   3. N single-document creates as the admin vs as docstore_client under a ruleset with one
#      get() lookup (the evaluator in the write path);
#   4. docstore.query over M documents (default 100,000) as the admin vs as docstore_client
#      under a `list` rule: the client's query is decided once against its constraints, then
#      read like the admin's (issue 13's goal: at most 1.2x). Twenty-one alternating runs of each;
#      medians, minimums and their ratios are printed (the machine's noise is large).
# Usage: scripts/bench_rules.sh [documents] [list documents]
#   (against DOCSTORE_PG_PORT, default the dev cluster)
source "$(dirname "$0")/lib.sh"
N="${1:-20000}"
M="${2:-100000}"
DB=docstore_rbench
fresh_database "${DB}"
"${PSQL[@]}" -d "${DB}" -q -v n="${N}" -v m="${M}" <<'SQL'
create extension pg_docstore;
\timing on
create table nums as select to_jsonb(i) as v from generate_series(1, 100000) i;
\echo '1. wrapper, then Rust entry point (100,000 calls each, twice)'
select count(*) from nums where docstore.rules_add('1', v) is not null;
select count(*) from nums where docstore.rules_prim2('add', '1', v) is not null;
select count(*) from nums where docstore.rules_add('1', v) is not null;
select count(*) from nums where docstore.rules_prim2('add', '1', v) is not null;
\timing off
select count(*) from (select docstore.set('posts/p' || i, jsonb_build_object('owner', 'u' || (i % 10),
  'public', i % 2 = 0, 'n', i)) from generate_series(1, :n) i) s;
select docstore.set('admins/u1', '{}');
select docstore.set_rules($r$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  function isAdmin() { return exists(/databases/$(database)/documents/admins/$(request.auth.uid)); }
  match /posts/{p} {
    allow list: if resource.data.public == true || resource.data.owner == request.auth.uid;
    allow create: if request.resource.data.owner == request.auth.uid || isAdmin();
  }
  match /items/{i} { allow create: if request.resource.data.owner == request.auth.uid || isAdmin(); }
  match /feed/{f} { allow list: if resource.data.owner == request.auth.uid; }
} }$r$);
select set_config('docstore.auth', '{"sub": "u1"}', false);
\timing on
\echo '2. plain SQL over the documents: admin twice, then docstore_client twice'
select count(*) from docstore.documents where path like 'posts/%';
select count(*) from docstore.documents where path like 'posts/%';
set role docstore_client;
select count(*) from docstore.documents where path like 'posts/%';
select count(*) from docstore.documents where path like 'posts/%';
reset role;
\echo '3. creates: admin (no rules apply), then docstore_client (create rule with exists())'
select count(*) from (select docstore.create('free/f' || i, jsonb_build_object('owner', 'u2', 'n', i)) from generate_series(1, :n) i) s;
set role docstore_client;
select count(*) from (select docstore.create('items/i' || i, jsonb_build_object('owner', 'u2', 'n', i)) from generate_series(1, :n) i) s;
reset role;
\timing off
\echo '4. docstore.query over the feed: admin vs docstore_client (list check once), medians and minimums of 21'
select count(*) from (select docstore.set('feed/f' || i, jsonb_build_object('owner', 'u' || (i % 10),
  'public', i % 2 = 0, 'n', i)) from generate_series(1, :m) i) s;
do $$
declare
  q text;
  t0 timestamptz;
  n bigint;
  admin float8[];
  client float8[];
  a float8;
  c float8;
  amin float8;
  cmin float8;
begin
  foreach q in array array[$q$select * from /feed where owner = 'u1'$q$,
                           $q$select * from /feed where owner = 'u1' limit 100$q$,
                           $q$select count(*) from /feed where owner = 'u1'$q$] loop
    admin := '{}';
    client := '{}';
    for r in 1..21 loop
      t0 := clock_timestamp();
      select count(*) into n from docstore.query(q);
      admin := admin || extract(epoch from clock_timestamp() - t0) * 1000;
      set role docstore_client;
      t0 := clock_timestamp();
      select count(*) into n from docstore.query(q);
      client := client || extract(epoch from clock_timestamp() - t0) * 1000;
      reset role;
    end loop;
    select percentile_cont(0.5) within group (order by x), min(x) into a, amin from unnest(admin) x;
    select percentile_cont(0.5) within group (order by x), min(x) into c, cmin from unnest(client) x;
    raise notice '%: % rows; median admin % ms, client % ms, ratio %; minimum admin % ms, client % ms, ratio %',
      q, n, round(a::numeric, 2), round(c::numeric, 2), round((c / a)::numeric, 3),
      round(amin::numeric, 2), round(cmin::numeric, 2), round((cmin / amin)::numeric, 3);
  end loop;
end $$;
SQL
"${PSQL[@]}" -d postgres -qc "drop database ${DB}"
