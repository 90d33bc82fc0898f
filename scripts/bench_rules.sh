#!/usr/bin/env bash
# Security-rules costs in the extension (issue 13), same run, same data:
#   1. a primitive through its SQL wrapper (docstore.rules_add) vs its Rust entry point
#      (docstore.rules_prim2('add', ..)) over 100,000 values: the wrappers are inlined;
#   2. plain SQL over N documents (default 20,000) as the admin vs as docstore_client under the
#      row-level-security `list` policy (compiled SQL, per row);
#   3. issue 13's write figure: single-document creates as docstore_client under the 33-line
#      chat ruleset of rules-compiler/benches/rules.rs (a message create: one get() of its room,
#      then checks of the sender, the text and the keys), against the same unruled create (the
#      admin, whom no rule applies to) and a client's create under an open ruleset (`allow read,
#      write: if true`; a database without rules denies clients). Ten rounds of N/10 creates
#      each, the three in an order that rotates from round to round, document ids ending in
#      the variant's letter (so all three insert into the same index pages); per-round ratios,
#      their median, and the totals;
#   4. docstore.query over M documents (default 100,000) as the admin vs as docstore_client
#      under a `list` rule: the client's query is decided once against its constraints, then
#      read like the admin's (issue 13's goal: at most 1.2x). Twenty-one alternating runs of each;
#      medians, minimums and their ratios are printed (the machine's noise is large);
#   5. section 3's admin and chat-client creates measured in the backend's own CPU time (utime +
#      stime of /proc/self/stat, read between rounds: other processes do not inflate it; 10 ms
#      ticks), the order alternating from round to round. Not in the default sections.
# Usage: scripts/bench_rules.sh [documents] [list documents] [sections, default "1 2 3 4"]
#   (against DOCSTORE_PG_PORT, default the dev cluster)
source "$(dirname "$0")/lib.sh"
N="${1:-20000}"
M="${2:-100000}"
SECTIONS="${3:-1 2 3 4}"
section() { case " ${SECTIONS} " in *" $1 "*) echo true ;; *) echo false ;; esac; }
DB=docstore_rbench
fresh_database "${DB}"
"${PSQL[@]}" -d "${DB}" -q -v n="${N}" -v m="${M}" \
  -v s1="$(section 1)" -v s2="$(section 2)" -v s3="$(section 3)" -v s4="$(section 4)" \
  -v s5="$(section 5)" -v chat="$([ "$(section 3)$(section 5)" = falsefalse ] && echo false || echo true)" <<'SQL'
create extension pg_docstore;
\if :s1
\timing on
create table nums as select to_jsonb(i) as v from generate_series(1, 100000) i;
\echo '1. wrapper, then Rust entry point (100,000 calls each, twice)'
select count(*) from nums where docstore.rules_add('1', v) is not null;
select count(*) from nums where docstore.rules_prim2('add', '1', v) is not null;
select count(*) from nums where docstore.rules_add('1', v) is not null;
select count(*) from nums where docstore.rules_prim2('add', '1', v) is not null;
\timing off
\endif
\if :s2
select count(*) from (select docstore.set('posts/p' || i, jsonb_build_object('owner', 'u' || (i % 10),
  'public', i % 2 = 0, 'n', i)) from generate_series(1, :n) i) s;
\endif
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
\if :s2
\timing on
\echo '2. plain SQL over the documents: admin twice, then docstore_client twice'
select count(*) from docstore.documents where path like 'posts/%';
select count(*) from docstore.documents where path like 'posts/%';
set role docstore_client;
select count(*) from docstore.documents where path like 'posts/%';
select count(*) from docstore.documents where path like 'posts/%';
reset role;
\timing off
\endif
\if :chat
select docstore.create_database('chat');
select docstore.create_database('chat-open');
select docstore.set_rules($open$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /{document=**} { allow read, write: if true; } } }$open$, 'chat-open');
set docstore.database = 'chat';
select docstore.set('rooms/r1', '{"owner": "u1", "members": ["u1", "u2"], "name": "general"}');
select docstore.set_rules($chat$rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    function signedIn() { return request.auth != null; }
    function room(id) { return get(/databases/$(database)/documents/rooms/$(id)).data; }
    function isMember(id) { return signedIn() && request.auth.uid in room(id).members; }
    function isOwner() { return signedIn() && resource.data.owner == request.auth.uid; }

    match /rooms/{roomId} {
      allow get: if signedIn() && request.auth.uid in resource.data.members;
      allow create: if signedIn()
                    && request.resource.data.owner == request.auth.uid
                    && request.auth.uid in request.resource.data.members
                    && request.resource.data.name is string;
      allow update: if isOwner()
                    && request.resource.data.diff(resource.data).affectedKeys()
                         .hasOnly(['members', 'name', 'updated'])
                    && request.resource.data.name.size() <= 100
                    && request.resource.data.members.size() <= 50;
      allow delete: if isOwner();

      match /messages/{messageId} {
        allow get: if isMember(roomId);
        allow create: if isMember(roomId)
                      && request.resource.data.sender == request.auth.uid
                      && request.resource.data.text is string
                      && request.resource.data.text.size() > 0
                      && request.resource.data.text.size() <= 2000
                      && request.resource.data.keys().hasOnly(['sender', 'text', 'sent']);
        allow update, delete: if signedIn() && resource.data.sender == request.auth.uid;
      }
    }
  }
}
$chat$, 'chat');
reset docstore.database;
select set_config('bench.n', :'n', false);
\endif
\if :chat
-- One round of `per` message creates by `who`: 'admin' (unruled), 'client' (docstore_client
-- under the chat ruleset) or 'open' (docstore_client in chat-open, under an open ruleset).
-- Document ids end in the variant's letter, so the variants' keys interleave in every index
-- and each variant's inserts land in the same pages: with the letter as a prefix each
-- variant filled a part of each index of its own, where page splits cost differently
-- (swapping the prefixes of admin and client moved the ratio from 1.33 to 1.16: BENCHMARKS.md).
create function pg_temp.creates(who text, r int, per int) returns void language plpgsql as $f$
begin
  perform set_config('docstore.database', case who when 'open' then 'chat-open' else 'chat' end, false);
  if who <> 'admin' then
    set role docstore_client;
  end if;
  perform count(*) from (select docstore.create('rooms/r1/messages/m' || (r * per + i) || left(who, 1),
    jsonb_build_object('sender', 'u1', 'text', 'hello ' || i, 'sent', i)) from generate_series(1, per) i) s;
  reset role;
end $f$;
-- This backend's CPU time so far, in 10 ms ticks (utime + stime).
create function pg_temp.ticks() returns bigint language sql as $f$
  select st[14]::bigint + st[15]::bigint from string_to_array(pg_read_file('/proc/self/stat'), ' ') st
$f$;
\endif
\if :s3
\echo '3. creates under the chat ruleset (database chat): admin (unruled) vs docstore_client, and a client under an open ruleset (chat-open)'
do $$
declare
  per int := greatest(current_setting('bench.n')::int / 10, 1);
  variants text[] := array['admin', 'client', 'open'];
  ms float8[] := array[0, 0, 0];
  ratios float8[] := '{}';
  ratios_open float8[] := '{}';
  round_ms float8[];
  t0 timestamptz;
  v int;
begin
  -- Ten rounds; the variants' order rotates from round to round, so each goes first,
  -- second and third about equally often.
  for r in 0..9 loop
    round_ms := array[0, 0, 0];
    for k in 0..2 loop
      v := (r + k) % 3 + 1;
      t0 := clock_timestamp();
      perform pg_temp.creates(variants[v], r, per);
      round_ms[v] := extract(epoch from clock_timestamp() - t0) * 1000;
      ms[v] := ms[v] + round_ms[v];
    end loop;
    ratios := ratios || round_ms[2] / round_ms[1];
    ratios_open := ratios_open || round_ms[3] / round_ms[1];
  end loop;
  perform set_config('docstore.database', '', false);
  raise notice '% creates each in 10 rounds: admin (unruled) % ms, client under the chat ruleset % ms, client under the open ruleset % ms',
    per * 10, round(ms[1]::numeric), round(ms[2]::numeric), round(ms[3]::numeric);
  raise notice 'chat ruleset / unruled: total %, median of rounds %, min %, max %',
    round((ms[2] / ms[1])::numeric, 3),
    (select round(percentile_cont(0.5) within group (order by x)::numeric, 3) from unnest(ratios) x),
    (select round(min(x)::numeric, 3) from unnest(ratios) x), (select round(max(x)::numeric, 3) from unnest(ratios) x);
  raise notice 'client under the open ruleset / unruled: total %, median of rounds %',
    round((ms[3] / ms[1])::numeric, 3),
    (select round(percentile_cont(0.5) within group (order by x)::numeric, 3) from unnest(ratios_open) x);
end $$;
\endif
\if :s5
\echo '5. section 3 in the backend''s CPU time: admin (unruled) vs docstore_client under the chat ruleset'
do $$
declare
  per int := greatest(current_setting('bench.n')::int / 10, 1);
  a bigint := 0;
  c bigint := 0;
  t0 bigint;
begin
  -- Ten rounds (rounds 10-19: section 3's documents stay apart), admin first in even rounds,
  -- the client first in odd ones.
  for r in 10..19 loop
    for k in 0..1 loop
      t0 := pg_temp.ticks();
      if (r + k) % 2 = 0 then
        perform pg_temp.creates('admin', r, per);
        a := a + pg_temp.ticks() - t0;
      else
        perform pg_temp.creates('client', r, per);
        c := c + pg_temp.ticks() - t0;
      end if;
    end loop;
  end loop;
  perform set_config('docstore.database', '', false);
  raise notice '% creates each, CPU time in 10 ms ticks: admin (unruled) %, client under the chat ruleset %; ratio %',
    per * 10, a, c, round(c::numeric / greatest(a, 1), 3);
end $$;
\endif
\if :s4
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
\endif
SQL
"${PSQL[@]}" -d postgres -qc "drop database ${DB}"
