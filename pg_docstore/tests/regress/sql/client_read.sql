-- docstore.get_document_as_client: the sidecar's client GET in one statement. It sets
-- docstore.auth, docstore.request and docstore.database for the transaction and reads as
-- docstore_client exactly as get_document does (the get rule decides). Its own database ids.
select docstore.create_database('as-client'), docstore.create_database('as-client-open');
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{id} {
    allow get: if resource == null || resource.data.owner == request.auth.uid;
  } } }$$, 'as-client');
set docstore.database = 'as-client';
select docstore.set('notes/a', '{"owner": "alice", "n": 1}') is not null as seeded;
reset docstore.database;

-- The owner reads it; the same row as get_document after set local role.
select data, create_time = update_time as same_times
  from docstore.get_document_as_client('notes/a', '{"sub": "alice"}', '{}', 'as-client');
begin;
select set_config('docstore.auth', '{"sub": "alice"}', true), set_config('docstore.database', 'as-client', true);
set local role docstore_client;
select data from docstore.get_document('notes/a');
rollback;
-- Another user and an unauthenticated request are denied; a missing document is no row.
select sqlstate_of($$select * from docstore.get_document_as_client('notes/a', '{"sub": "bob"}', '{}', 'as-client')$$) as bob;
select sqlstate_of($$select * from docstore.get_document_as_client('notes/a', 'null', '{}', 'as-client')$$) as unauthenticated;
select count(*) as missing from docstore.get_document_as_client('notes/none', '{"sub": "bob"}', '{}', 'as-client');
-- A database without rules denies clients; with an open ruleset it answers, and the session's
-- own database is not used.
set docstore.database = 'as-client-open';
select docstore.set('notes/a', '{"owner": "alice"}') is not null as seeded_open;
reset docstore.database;
select sqlstate_of($$select * from docstore.get_document_as_client('notes/a', 'null', '{}', 'as-client-open')$$) as without_rules;
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /{document=**} { allow read, write: if true; } } }$$, 'as-client-open');
select data as open_database from docstore.get_document_as_client('notes/a', 'null', '{}', 'as-client-open');
-- Plain SQL as a client: a row of the open database passes its list rule; the other
-- database's rows are filtered by its list rule (it has none: no row passes). An
-- administrator's own policy still applies to plain SQL; get_document_as_client reads as the
-- owner once the get rule allowed, so it does not.
begin;
set local role docstore_client;
select database_id, path from docstore.entities
  where database_id in ('as-client', 'as-client-open') order by 1, 2;
rollback;
select docstore.rules_set('as-client') as ruled, docstore.rules_set('as-client-open') as open;
create policy test_hide_open on docstore.entities as restrictive for select to docstore_client
  using (database_id <> 'as-client-open');
begin;
set local role docstore_client;
select count(*) as hidden_by_own_policy from docstore.entities where database_id = 'as-client-open';
rollback;
select count(*) as get_hidden_by_own_policy
  from docstore.get_document_as_client('notes/a', 'null', '{}', 'as-client-open');
drop policy test_hide_open on docstore.entities;

-- The settings last until the end of the transaction; the role is the caller's again at once.
begin;
select count(*) from docstore.get_document_as_client('notes/a', '{"sub": "alice"}', '{"path": "x"}', 'as-client');
select current_user, current_setting('docstore.auth') as auth, current_setting('docstore.request') as request,
  current_setting('docstore.database') as database;
rollback;
select current_setting('docstore.auth', true) is distinct from '{"sub": "alice"}' as auth_restored,
  current_setting('docstore.database') as database_restored;

-- Bad input: malformed claims (where rules read them), an invalid database id or path.
select sqlstate_of($$select * from docstore.get_document_as_client('notes/a', '{bad', '{}', 'as-client')$$) as bad_auth;
select sqlstate_of($$select * from docstore.get_document_as_client('notes/a', '[1]', '{}', 'as-client')$$) as auth_not_object;
select sqlstate_of($$select * from docstore.get_document_as_client('notes/a', 'null', '{}', 'Bad_Id')$$) as bad_database;
select sqlstate_of($$select * from docstore.get_document_as_client('notes', 'null', '{}', 'as-client')$$) as collection_path;
select sqlstate_of($$select * from docstore.get_document_as_client('notes/a', e'{"sub": "a\u0001"}', '{}', 'as-client')$$) as raw_control_character_in_claims;
select count(*) as null_argument from docstore.get_document_as_client('notes/a', null, '{}', 'as-client');

-- Who may call it: not docstore_client (it would choose its own claims), not PUBLIC.
begin;
set local role docstore_client;
select sqlstate_of($$select * from docstore.get_document_as_client('notes/a', '{"sub": "alice"}', '{}', 'as-client')$$) as as_docstore_client;
rollback;
-- A login role like the sidecar's: granted EXECUTE, SET on the two settings and membership of
-- docstore_client, it reads; without the membership it is refused (as set role would be).
create role docstore_test_sidecar;
grant usage on schema docstore to docstore_test_sidecar;
grant execute on function docstore.get_document_as_client(text, text, text, text) to docstore_test_sidecar;
grant set on parameter docstore.auth, docstore.request to docstore_test_sidecar;
begin;
set local role docstore_test_sidecar;
select sqlstate_of($$select * from docstore.get_document_as_client('notes/a', '{"sub": "alice"}', '{}', 'as-client')$$) as not_a_member;
rollback;
grant docstore_client to docstore_test_sidecar;
begin;
set local role docstore_test_sidecar;
select data from docstore.get_document_as_client('notes/a', '{"sub": "alice"}', '{}', 'as-client');
select current_user;
rollback;
-- Without SET on docstore.auth it cannot choose the claims.
revoke set on parameter docstore.auth from docstore_test_sidecar;
begin;
set local role docstore_test_sidecar;
select sqlstate_of($$select * from docstore.get_document_as_client('notes/a', '{"sub": "alice"}', '{}', 'as-client')$$) as no_set_right;
rollback;
revoke set on parameter docstore.request from docstore_test_sidecar;
drop owned by docstore_test_sidecar;
drop role docstore_test_sidecar;
select docstore.drop_rules('as-client'), docstore.drop_rules('as-client-open');
-- Leave no documents for the tests after this one.
select docstore.drop_database('as-client'), docstore.drop_database('as-client-open');
