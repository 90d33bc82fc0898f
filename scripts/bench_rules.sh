#!/usr/bin/env bash
# Security-rules costs in the extension (issue 13), same run, same data:
#   1. a primitive through its SQL wrapper (docstore.rules_add) vs its Rust entry point
#      (docstore.rules_prim2('add', ..)) over 100,000 values: the wrappers are inlined;
#   2. plain SQL over N documents (default 20,000) as the admin vs as docstore_client under the
#      row-level-security `list` policy (compiled SQL, per row);
#   3. N single-document creates as the admin vs as docstore_client under a ruleset with one
#      get() lookup (the evaluator in the write path).
# Usage: scripts/bench_rules.sh [documents]   (against DOCSTORE_PG_PORT, default the dev cluster)
source "$(dirname "$0")/lib.sh"
N="${1:-20000}"
DB=docstore_rbench
fresh_database "${DB}"
"${PSQL[@]}" -d "${DB}" -q -v n="${N}" <<'SQL'
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
SQL
"${PSQL[@]}" -d postgres -qc "drop database ${DB}"
