-- docstore.add_document and docstore.add_document_as_client: the sidecar's POST to a
-- collection in one statement. Both add as docstore.add does (one write path) and return the
-- new document as stored; the client one sets docstore.auth, docstore.request and
-- docstore.database for the transaction and adds as docstore_client (the create rule decides).
select docstore.create_database('add-doc'), docstore.create_database('add-doc-open');
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{id} {
    allow create: if request.resource.data.owner == request.auth.uid;
    allow get: if resource.data.owner == request.auth.uid;
  } } }$$, 'add-doc');

-- The admin function: a random id in the collection, the row exactly as stored (what the
-- sidecar read back), docstore.database set until the end of the transaction.
begin;
select path, data, create_time, update_time
  from docstore.add_document('notes', '{"owner": "alice", "n": 1}', 'add-doc') \gset added_
select :'added_path' ~ '^notes/[A-Za-z0-9]{20}$' as random_id, :'added_data' as data,
  :'added_create_time' = :'added_update_time' as same_times;
select e.path = :'added_path' as same_path, e.data::text = :'added_data' as same_data,
  e.create_time = :'added_create_time'::timestamptz as same_create_time,
  e.update_time = :'added_update_time'::timestamptz as same_update_time
  from docstore.entities e where e.database_id = 'add-doc' and e.path = :'added_path';
select current_setting('docstore.database') as database_for_the_transaction;
rollback;
-- The data as the write stored it, not as given: the transform is applied (the commit time).
select (data->'at'->>'$timestamp')::timestamptz = update_time as server_time_is_the_commit_time
  from docstore.add_document('notes', '{"owner": "x", "at": {"$serverTimestamp": true}}', 'add-doc-open');

-- The client function: the create rule decides with the given claims (a denial names the
-- random id, shown as <id>).
select path ~ '^notes/[A-Za-z0-9]{20}$' as random_id, data, create_time = update_time as same_times
  from docstore.add_document_as_client('notes', '{"owner": "alice"}', '{"sub": "alice"}', '{}', 'add-doc');
select regexp_replace(sqlstate_of($$select * from docstore.add_document_as_client('notes', '{"owner": "alice"}', '{"sub": "bob"}', '{}', 'add-doc')$$), '/[A-Za-z0-9]{20}', '/<id>') as bob_for_alice;
select regexp_replace(sqlstate_of($$select * from docstore.add_document_as_client('notes', '{"owner": "alice"}', 'null', '{}', 'add-doc')$$), '/[A-Za-z0-9]{20}', '/<id>') as unauthenticated;
select regexp_replace(sqlstate_of($$select * from docstore.add_document_as_client('other', '{"owner": "alice"}', '{"sub": "alice"}', '{}', 'add-doc')$$), '/[A-Za-z0-9]{20}', '/<id>') as no_rule;
-- Alice's note and the one the admin added in the other database; nothing of the denials.
select database_id, count(*) from docstore.entities where database_id like 'add-doc%'
  group by 1 order by 1;
-- A database without rules denies clients (nothing is written); an open ruleset opens it.
select regexp_replace(sqlstate_of($$select * from docstore.add_document_as_client('notes', '{"owner": "carol"}', 'null', '{}', 'add-doc-open')$$), '/[A-Za-z0-9]{20}', '/<id>') as without_rules;
select count(*) as carol_notes from docstore.entities where database_id = 'add-doc-open' and data->>'owner' = 'carol';
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /{document=**} { allow read, write: if true; } } }$$, 'add-doc-open');
select data from docstore.add_document_as_client('notes', '{"owner": "carol"}', 'null', '{}', 'add-doc-open')
  where data->>'owner' = 'carol';
select docstore.drop_rules('add-doc-open');

-- The settings last until the end of the transaction; the role is the caller's again at once.
begin;
select count(*) from docstore.add_document_as_client('notes', '{"owner": "alice"}', '{"sub": "alice"}', '{"path": "x"}', 'add-doc');
select current_user, current_setting('docstore.auth') as auth, current_setting('docstore.request') as request,
  current_setting('docstore.database') as database;
rollback;

-- Bad input: a document path or an invalid collection, data that is not an object, an
-- invalid database id, malformed claims.
select sqlstate_of($$select * from docstore.add_document('notes/a', '{}', 'add-doc')$$) as document_path;
select sqlstate_of($$select * from docstore.add_document('', '{}', 'add-doc')$$) as empty_collection;
select sqlstate_of($$select * from docstore.add_document('notes//x', '{}', 'add-doc')$$) as empty_segment;
select sqlstate_of($$select * from docstore.add_document('notes', '[1]', 'add-doc')$$) as array_data;
select sqlstate_of($$select * from docstore.add_document('notes', '1', 'add-doc')$$) as number_data;
select sqlstate_of($$select * from docstore.add_document('notes', '{}', 'Bad_Id')$$) as bad_database;
select sqlstate_of($$select * from docstore.add_document_as_client('notes/a', '{"owner": "alice"}', '{"sub": "alice"}', '{}', 'add-doc')$$) as client_document_path;
select sqlstate_of($$select * from docstore.add_document_as_client('notes', '[1]', '{"sub": "alice"}', '{}', 'add-doc')$$) as client_array_data;
select sqlstate_of($$select * from docstore.add_document_as_client('notes', '{"owner": "alice"}', '{bad', '{}', 'add-doc')$$) as bad_auth;
select sqlstate_of($$select * from docstore.add_document_as_client('notes', '{"owner": "alice"}', 'null', '{}', 'Bad_Id')$$) as client_bad_database;
select count(*) as null_argument from docstore.add_document_as_client('notes', null, '{"sub": "alice"}', '{}', 'add-doc');

-- Who may call them: add_document as docstore.add (anyone, with its own rights: as
-- docstore_client the rules decide); add_document_as_client not docstore_client (it would
-- choose its own claims), not PUBLIC.
begin;
set local role docstore_client;
select regexp_replace(sqlstate_of($$select * from docstore.add_document('notes', '{"owner": "alice"}', 'add-doc')$$), '/[A-Za-z0-9]{20}', '/<id>') as admin_function_as_client;
select sqlstate_of($$select * from docstore.add_document_as_client('notes', '{"owner": "alice"}', '{"sub": "alice"}', '{}', 'add-doc')$$) as as_docstore_client;
rollback;
create role docstore_test_creator;
grant usage on schema docstore to docstore_test_creator;
select has_function_privilege('docstore_test_creator', 'docstore.add_document(text, jsonb, text)', 'execute') as add_document_by_public,
  has_function_privilege('docstore_test_creator', 'docstore.add_document_as_client(text, jsonb, text, text, text)', 'execute') as as_client_by_public;
-- A login role like the sidecar's: granted EXECUTE, SET on the two settings and membership of
-- docstore_client, it adds; without the membership it is refused (as set role would be).
grant execute on function docstore.add_document_as_client(text, jsonb, text, text, text) to docstore_test_creator;
grant set on parameter docstore.auth, docstore.request to docstore_test_creator;
begin;
set local role docstore_test_creator;
select sqlstate_of($$select * from docstore.add_document_as_client('notes', '{"owner": "alice"}', '{"sub": "alice"}', '{}', 'add-doc')$$) as not_a_member;
rollback;
grant docstore_client to docstore_test_creator;
begin;
set local role docstore_test_creator;
select data from docstore.add_document_as_client('notes', '{"owner": "alice"}', '{"sub": "alice"}', '{}', 'add-doc');
select current_user;
rollback;
-- Without SET on docstore.auth it cannot choose the claims.
revoke set on parameter docstore.auth from docstore_test_creator;
begin;
set local role docstore_test_creator;
select sqlstate_of($$select * from docstore.add_document_as_client('notes', '{"owner": "alice"}', '{"sub": "alice"}', '{}', 'add-doc')$$) as no_set_right;
rollback;
revoke set on parameter docstore.request from docstore_test_creator;
drop owned by docstore_test_creator;
drop role docstore_test_creator;
select docstore.drop_rules('add-doc');
-- Leave no documents for the tests after this one.
select docstore.drop_database('add-doc'), docstore.drop_database('add-doc-open');
