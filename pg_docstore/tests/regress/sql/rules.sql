-- Security rules (docs/rules.md), in the style of Firebase's rules-unit-testing: each case runs
-- in `begin; set local role docstore_client; ...; rollback` with an authenticated or an
-- unauthenticated context, and asserts success ('ok' or a result) or failure (42501).
select docstore.set_rules($rules$rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    function signedIn() { return request.auth != null; }
    function isMember(room) {
      return request.auth.uid in get(/databases/$(database)/documents/rooms/$(room)).data.members;
    }
    match /users/{uid} {
      allow read: if signedIn() && request.auth.uid == uid;
      allow create: if signedIn() && request.auth.uid == uid
        && request.resource.data.keys().hasOnly(['name', 'age', 'joined'])
        && request.resource.data.joined == request.time;
      allow update: if request.auth.uid == uid && request.resource.data.age > resource.data.age;
      allow delete: if false;
    }
    match /rooms/{room} {
      allow get: if resource == null || request.auth.uid in resource.data.members;
      allow list: if signedIn() && request.auth.uid in resource.data.members;
      allow create: if signedIn() && request.resource.data.owner == request.auth.uid;
      allow update: if request.auth.uid == resource.data.owner;
      match /messages/{msg} {
        allow read: if isMember(room);
        allow create: if request.resource.data.from == request.auth.uid
          && request.auth.uid in getAfter(/databases/$(database)/documents/rooms/$(room)).data.members;
      }
    }
    match /public/{doc} { allow read; }
  }
}$rules$);
-- Administrators (here the superuser) bypass the rules.
select docstore.commit($$[
  {"set": "users/alice", "data": {"name": "Alice", "age": 30}},
  {"set": "rooms/r1", "data": {"owner": "alice", "members": ["alice", "bob"]}},
  {"set": "rooms/r2", "data": {"owner": "carol", "members": ["carol"]}},
  {"set": "rooms/r1/messages/m1", "data": {"from": "alice", "text": "hi"}},
  {"set": "rooms/r2/messages/m2", "data": {"from": "carol", "text": "secret"}},
  {"set": "public/p1", "data": {"x": 1}}]$$) ? 'commitTime' as seeded;

-- A client cannot choose who it is: docstore.auth and docstore.request are protected.
begin;
set local role docstore_client;
select sqlstate_of($$select set_config('docstore.auth', '{"sub": "alice"}', true)$$);
select sqlstate_of($$set docstore.request = '{}'$$);
-- nor change the rules
select sqlstate_of($$select docstore.set_rules('service cloud.firestore {}')$$);
select sqlstate_of($$select docstore.drop_rules()$$);
select sqlstate_of('select count(*) from docstore.rules');
-- nor read documents through the rules' lookups
select sqlstate_of($$select docstore.rules_lookup('get', '{"$path": ["databases", "(default)", "documents", "rooms", "r2"]}', '(default)')$$);
rollback;

-- Unauthenticated: get
begin;
set local role docstore_client;
select sqlstate_of($$select docstore.get('users/alice')$$) as get_user;
select docstore.get('public/p1') as get_public;
select docstore.get('public/missing') is null as get_public_missing;
-- a missing document is decided with resource = null: allowed here ...
select docstore.get('rooms/missing') is null as get_missing_room;
-- ... and denied here (request.auth is null)
select sqlstate_of($$select docstore.get('users/nobody')$$) as get_missing_user;
-- plain SQL sees only what the per-document list rule allows
select path from docstore.documents order by path;
select path from docstore.entities order by path;
rollback;

-- Authenticated as alice (the sidecar, or docstore.authenticate, sets docstore.auth)
begin;
select set_config('docstore.auth', '{"sub": "alice"}', true);
set local role docstore_client;
select docstore.get('users/alice') as get_own;
select sqlstate_of($$select docstore.get('users/bob')$$) as get_other;
select docstore.get('rooms/r1') as get_member;
select sqlstate_of($$select docstore.get('rooms/r2')$$) as get_not_member;
select docstore.get('rooms/r1/messages/m1') as get_message;
select sqlstate_of($$select docstore.get('rooms/r2/messages/m2')$$) as get_message_not_member;
select path from docstore.documents order by path;
-- docstore.query is decided once against the query (rules are not filters, rules_list.sql):
-- refused when it does not prove the list rule, whatever the data; plain SQL above is filtered
select sqlstate_of($$select * from docstore.query('select * from /rooms')$$) as query_unconstrained;
select path from docstore.query($$select * from /rooms where members array_contains 'alice'$$);
rollback;

-- Writes: create with request.time (= the commit time = serverTimestamp)
begin;
select set_config('docstore.auth', '{"sub": "carol"}', true);
set local role docstore_client;
select sqlstate_of($$select docstore.create('users/carol', '{"name": "Carol", "age": 1, "joined": {"$serverTimestamp": true}}')$$) as create_own;
select sqlstate_of($$select docstore.create('users/dave', '{"name": "Dave", "joined": {"$serverTimestamp": true}}')$$) as create_other;
select sqlstate_of($$select docstore.set('users/carol2', '{"name": "C"}')$$) as create_without_time;
select sqlstate_of($$select docstore.update('users/carol', '{"age": 5, "extra": 1}')$$) as update_increase;
select sqlstate_of($$select docstore.update('users/carol', '{"age": 4}')$$) as update_decrease;
-- an error in a rule (resource.data.age is missing) denies
select sqlstate_of($$select docstore.update('users/carol', '{"age": {"$delete": true}}')$$) as drop_age;
select sqlstate_of($$select docstore.update('users/carol', '{"age": 9}')$$) as update_after_error;
select sqlstate_of($$select docstore.delete('users/carol')$$) as delete_denied;
select sqlstate_of($$select docstore.update('rooms/r2', '{"members": ["carol", "x"]}')$$) as update_own_room;
reset role;
-- what the client wrote, and nothing of what was denied
select path, data - 'joined' as data, data->'joined' is not null as has_joined from docstore.entities
  where path in ('users/carol', 'users/dave', 'users/carol2') order by path;
select docstore.get('rooms/r2')->'members' as members;
rollback;

-- A denied write in a batch writes nothing, and getAfter sees the batch's after-state
begin;
select set_config('docstore.auth', '{"sub": "bob"}', true);
set local role docstore_client;
select sqlstate_of($$select docstore.commit('[
  {"create": "rooms/r3", "data": {"owner": "bob", "members": ["bob"]}},
  {"create": "rooms/r3/messages/m", "data": {"from": "bob"}}]')$$) as batch_with_get_after;
select sqlstate_of($$select docstore.commit('[
  {"create": "rooms/r4", "data": {"owner": "bob", "members": ["bob"]}},
  {"create": "rooms/r2/messages/m", "data": {"from": "bob"}}]')$$) as batch_denied;
reset role;
select path from docstore.entities where path like 'rooms/r3%' or path like 'rooms/r4%' or path = 'rooms/r2/messages/m'
  order by path;
rollback;

-- Compile errors: 42601 / 0A000 with line:column and the source line; nothing changes
select sqlstate_of($$select docstore.set_rules('service cloud.firestore {
  match /databases/{d}/documents { match /a/{b} { allow read: if 1 +; } } }')$$);
select sqlstate_of($$select docstore.set_rules('service firebase.storage { match /b/{bucket}/o { allow read: if true; } }')$$);
select sqlstate_of($$select docstore.set_rules('service cloud.firestore {}', 'Bad_Id')$$);
do $$
begin
  perform docstore.set_rules(E'service cloud.firestore {\n  match /databases/{d}/documents { allow read: if x.nope(); } }');
exception when others then
  declare detail text;
  begin
    get stacked diagnostics detail = pg_exception_detail;
    raise notice '% | % | %', sqlstate, sqlerrm, detail;
  end;
end $$;
select database_id, source like '%isMember%' as unchanged from docstore.rules;
-- more distinct get()/exists() documents than Firestore's budget (10 for reads) is refused
select sqlstate_of(format($$select docstore.set_rules(%L)$$, 'service cloud.firestore { match /databases/{d}/documents { match /a/{id} { allow get: if '
  || (select string_agg(format('exists(/databases/$(d)/documents/b/c%s)', i), ' || ') from generate_series(1, 11) i)
  || '; } } }'));
-- the SQL a ruleset compiles to
select docstore.rules_sql($$service cloud.firestore { match /databases/{d}/documents {
  match /a/{id} { allow get: if resource.data.n + 1 == 2; } } }$$);

-- The primitives as SQL functions: NULL is the rules' error, nothing raises
select docstore.rules_add('1', '2') as int_add, docstore.rules_add('1', '2.5') as float_add,
       docstore.rules_add('1', '"a"') is null as type_error, docstore.rules_div('1', '0') is null as div_zero,
       docstore.rules_add('9223372036854775807', '1') is null as overflow,
       docstore.rules_size('"😀"') as utf16_size,
       docstore.rules_matches('"abc"', '"b"') as whole_string,
       docstore.rules_list('1', '"a"') as list, docstore.rules_list('1', null) is null as list_error,
       docstore.rules_truth('true') as truth, docstore.rules_truth('1') is null as truth_error;
-- the wrappers are inlined: the plan calls the Rust entry point directly (and folds constants)
explain (verbose, costs off) select docstore.rules_add('1', data), docstore.rules_list(data, '2'), docstore.rules_add('1', '2')
  from docstore.entities;
-- every primitive of the catalog exists as docstore.rules_<name>
select count(*) = (select count(*) from docstore.rules_catalog()) as all_defined
  from docstore.rules_catalog() c
  join pg_proc p on p.proname = 'rules_' || c.name
  join pg_namespace n on n.oid = p.pronamespace and n.nspname = 'docstore';

-- docstore.authenticate: psql users present an HS256 JWT signed with docstore.jwt_secret
set docstore.jwt_secret = 'regress-secret';
begin;
set local role docstore_client;
select sqlstate_of($$select docstore.authenticate('eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSJ9.Oa-6xfaXcQToeCZ5H1IKIyAsqewB6bFqZwXcRFYIzqI')$$) as wrong_secret;
select sqlstate_of($$select docstore.authenticate('eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSIsImV4cCI6MTAwMDAwMDAwMH0.LplEEQJiwvcWHsGPKkRV5VVAH2GikYPI2az3IFtpQjI')$$) as expired;
select sqlstate_of($$select docstore.authenticate('not.a.jwt')$$) as malformed;
select sqlstate_of($$select docstore.get('users/alice')$$) as before;
-- a token without exp is refused (as by the sidecar; the checks: docs/security.md)
select sqlstate_of($$select docstore.authenticate('eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSIsIm5hbWUiOiJBbGljZSJ9.T2EY6f5yOGIT6ttn4N9b8ApiK7UL6NStmw_tXRCKGnE')$$) as no_exp;
select docstore.authenticate('eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSIsIm5hbWUiOiJBbGljZSIsImV4cCI6NDEwMjQ0NDgwMH0.cIberU7Uc9Uu5Q3VpvKndQDA-in6BMsA2ons-FImt_A') as claims;
select current_setting('docstore.auth') as auth;
select docstore.get('users/alice') as after;
select docstore.authenticate(null) as signed_out;
select sqlstate_of($$select docstore.get('users/alice')$$) as after_sign_out;
rollback;
reset docstore.jwt_secret;

-- drop_rules locks the database (no client reads its rows; docs/rules.md, "A database without
-- rules"); the superuser still sees them
begin;
select docstore.drop_rules();
select count(*) > 0 as admin_sees_documents from docstore.documents;
set local role docstore_client;
select count(*) from docstore.documents;
select sqlstate_of($$select docstore.get('public/p1')$$) as get_after_drop;
rollback;

-- get()/exists() read only the request's database, in SQL (the row filter) as in the
-- evaluator (docstore.get): a path into another database is an error, so both deny even
-- though public/p1 exists in (default).
select docstore.create_database('crossdb');
select docstore.set_rules($rules$rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /c/{id} {
      allow read: if exists(/databases/(default)/documents/public/p1);
    }
  }
}$rules$, 'crossdb');
begin;
set local docstore.database = 'crossdb';
select docstore.set('c/one', '{"x": 1}') is not null as seeded;
set local role docstore_client;
select sqlstate_of($$select docstore.get('c/one')$$) as get_cross_database;
select count(*) as rows_cross_database from docstore.entities where database_id = 'crossdb';
rollback;
select docstore.drop_rules('crossdb');

-- existsAfter()/getAfter() see the batch's after-state, exists()/get() the state before it
select docstore.create_database('afterdb');
select docstore.set_rules($rules$rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    function member(p) { return /databases/$(database)/documents/projects/$(p)/members/$(request.auth.uid); }
    match /projects/{p} {
      allow create: if existsAfter(member(p)) && !exists(member(p));
      match /members/{m} {
        allow create: if request.auth.uid == m
          && getAfter(/databases/$(database)/documents/projects/$(p)).data.owner == m;
      }
    }
  }
}$rules$, 'afterdb');
begin;
set local docstore.database = 'afterdb';
select set_config('docstore.auth', '{"sub": "bob"}', true);
set local role docstore_client;
select sqlstate_of($$select docstore.commit('[
  {"create": "projects/p1", "data": {"owner": "bob"}},
  {"create": "projects/p1/members/bob", "data": {}}]')$$) as project_with_its_member;
select sqlstate_of($$select docstore.commit('[{"create": "projects/p2", "data": {"owner": "bob"}}]')$$) as project_without_member;
select sqlstate_of($$select docstore.commit('[
  {"create": "projects/p3", "data": {"owner": "alice"}},
  {"create": "projects/p3/members/bob", "data": {}}]')$$) as member_of_someone_elses_project;
reset role;
select path from docstore.entities where database_id = 'afterdb' order by path;
rollback;
select docstore.drop_rules('afterdb');

-- A write that fails on its own (update of a missing document, create of an existing one, a
-- precondition) is decided by the rules first: a client the rules deny gets 42501 either way
-- and learns nothing of the document's existence; once the rules allow, the write's own error.
select docstore.create_database('existdb');
select docstore.set_rules($rules$rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /secrets/{id} { allow read, write: if request.auth.uid == 'owner'; }
    match /open/{id} { allow read, write: if true; }
  }
}$rules$, 'existdb');
begin;
set local docstore.database = 'existdb';
select docstore.set('secrets/s1', '{"x": 1}') is not null as seeded;
select set_config('docstore.auth', '{"sub": "mallory"}', true);
set local role docstore_client;
select sqlstate_of($$select docstore.update('secrets/s1', '{"x": 2}')$$) as update_existing;
select sqlstate_of($$select docstore.update('secrets/missing', '{"x": 2}')$$) as update_missing;
select sqlstate_of($$select docstore.create('secrets/s1', '{"x": 2}')$$) as create_existing;
select sqlstate_of($$select docstore.create('secrets/new', '{"x": 2}')$$) as create_new;
select sqlstate_of($$select docstore.commit('[{"set": "secrets/s1", "data": {}, "precondition": {"exists": false}}]')$$) as precondition_on_existing;
select sqlstate_of($$select docstore.commit('[{"delete": "secrets/missing", "precondition": {"exists": true}}]')$$) as precondition_on_missing;
select sqlstate_of($$select docstore.commit('[{"set": "open/a", "data": {}}, {"update": "secrets/missing", "fields": {"x": 1}}]')$$) as in_a_batch;
select sqlstate_of($$select docstore.update('open/missing', '{"x": 2}')$$) as allowed_update_missing;
reset role;
select set_config('docstore.auth', '{"sub": "owner"}', true);
set local role docstore_client;
select sqlstate_of($$select docstore.update('secrets/missing', '{"x": 2}')$$) as owner_update_missing;
select sqlstate_of($$select docstore.create('secrets/s1', '{"x": 2}')$$) as owner_create_existing;
reset role;
select path from docstore.entities where database_id = 'existdb' order by path;
rollback;
select docstore.drop_rules('existdb');

-- verify (a document a transaction read but does not write) needs the `get` permission, and
-- no write permission; a denied get refuses it before its precondition is told.
select docstore.create_database('verifydb');
select docstore.set_rules($rules$rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /readonly/{id} { allow get: if true; }
    match /writeonly/{id} { allow write: if true; }
  }
}$rules$, 'verifydb');
begin;
set local docstore.database = 'verifydb';
select docstore.set('readonly/r1', '{"x": 1}') is not null and docstore.set('writeonly/w1', '{"x": 1}') is not null as seeded;
select set_config('docstore.auth', '{"sub": "bob"}', true);
set local role docstore_client;
select sqlstate_of($$select docstore.commit('[
  {"verify": "readonly/r1", "precondition": {"exists": true}},
  {"set": "writeonly/w2", "data": {"y": 1}}]')$$) as verify_readable;
select sqlstate_of($$select docstore.commit('[{"verify": "readonly/missing", "precondition": {"exists": true}}]')$$) as verify_readable_fails;
select sqlstate_of($$select docstore.commit('[{"verify": "writeonly/w1", "precondition": {"exists": true}}]')$$) as verify_unreadable;
select sqlstate_of($$select docstore.commit('[{"verify": "writeonly/missing", "precondition": {"exists": true}}]')$$) as verify_unreadable_missing;
select sqlstate_of($$select docstore.commit('[
  {"set": "writeonly/w3", "data": {}},
  {"verify": "writeonly/w1", "precondition": {"exists": true}}]')$$) as verify_unreadable_in_a_batch;
reset role;
select path from docstore.entities where database_id = 'verifydb' order by path;
rollback;
select docstore.drop_rules('verifydb');
