-- Deny by default (docs/rules.md, "A database without rules"): a client (docstore_client) is
-- denied in a database without rules and in a database id docstore.databases does not list,
-- through the docstore functions (42501) and in plain SQL (the list policy passes no row).
-- Administrators (here the superuser) are not.
select docstore.create_database('locked');
set docstore.database = 'locked';
select docstore.set('notes/a', '{"owner": "alice"}') is not null as seeded_locked;
-- A database id that is not listed, with a ruleset that would open it.
set docstore.database = 'unlisted';
select docstore.set('notes/a', '{"owner": "alice"}') is not null as seeded_unlisted;
select docstore.set_rules($rules$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /{document=**} { allow read, write: if true; } } }$rules$, 'unlisted');
reset docstore.database;

-- Every call of a client, authenticated or not, in both databases: denied before anything is
-- read or written, with the same text whether the document exists or not.
create function pg_temp.client_calls(database text, auth text) returns table (call text, result text)
language plpgsql as $$
begin
  perform set_config('docstore.auth', auth, true), set_config('docstore.database', database, true);
  set local role docstore_client;
  return query values
    ('get', sqlstate_of($q$select docstore.get('notes/a')$q$)),
    ('get missing', sqlstate_of($q$select docstore.get('notes/missing')$q$)),
    ('get_document', sqlstate_of($q$select * from docstore.get_document('notes/a')$q$)),
    ('query', sqlstate_of($q$select * from docstore.query('select * from /notes')$q$)),
    ('run_query', sqlstate_of($q$select * from docstore.run_query('{"from": [{"collectionId": "notes"}]}')$q$)),
    ('count', sqlstate_of($q$select * from docstore.query('select count(*) from /notes')$q$)),
    ('set', sqlstate_of($q$select docstore.set('notes/b', '{"owner": "alice"}')$q$)),
    ('create', sqlstate_of($q$select docstore.create('notes/c', '{"owner": "alice"}')$q$)),
    ('update', sqlstate_of($q$select docstore.update('notes/a', '{"owner": "bob"}')$q$)),
    ('delete', sqlstate_of($q$select docstore.delete('notes/a')$q$)),
    ('commit', sqlstate_of($q$select docstore.commit('[{"set": "notes/d", "data": {}}]')$q$)),
    ('documents view', (select count(*)::text from docstore.documents)),
    ('entities', (select count(*)::text from docstore.entities where database_id = database));
  reset role;
end $$;
begin;
select * from pg_temp.client_calls('locked', '{"sub": "alice"}');
rollback;
begin;
select * from pg_temp.client_calls('locked', 'null');
rollback;
begin;
select * from pg_temp.client_calls('unlisted', '{"sub": "alice"}');
rollback;
-- The policy's own answer, and the rules cache's: neither database counts as ruled.
select docstore.rules_set('locked') as locked_ruled, docstore.rules_set('unlisted') as unlisted_ruled;
-- Nothing was written by the denied calls.
select database_id, path from docstore.entities where database_id in ('locked', 'unlisted') order by 1, 2;
-- The sidecar's one-statement client calls are denied the same way.
select sqlstate_of($$select * from docstore.get_document_as_client('notes/a', '{"sub": "alice"}', '{}', 'locked')$$) as get_as_client;
select sqlstate_of($$select * from docstore.add_document_as_client('notes', '{"owner": "alice"}', '{"sub": "alice"}', '{}', 'locked')$$) as add_as_client;

-- Administrators read and write both databases.
set docstore.database = 'unlisted';
select docstore.get('notes/a') as admin_get, (select count(*) from docstore.documents) as admin_view;
reset docstore.database;

-- Listing the database makes its rules count, from the next statement of the same session
-- (the trigger of docstore.databases invalidates the rules cache and regenerates the policy);
-- dropping it locks it again.
select docstore.create_database('unlisted');
begin;
select set_config('docstore.auth', 'null', true), set_config('docstore.database', 'unlisted', true);
set local role docstore_client;
select docstore.get('notes/a') as listed_get, (select count(*) from docstore.documents) as listed_view;
rollback;
set docstore.database = 'unlisted';
select docstore.set('notes/a', '{"owner": "alice"}') is not null as seeded_again;
reset docstore.database;
select docstore.drop_database('unlisted');
set docstore.database = 'unlisted';
select docstore.set('notes/a', '{"owner": "alice"}') is not null as seeded_after_drop;
reset docstore.database;
begin;
select set_config('docstore.auth', 'null', true), set_config('docstore.database', 'unlisted', true);
set local role docstore_client;
select sqlstate_of($$select docstore.get('notes/a')$$) as dropped_get, (select count(*) from docstore.documents) as dropped_view;
rollback;

-- Rules dropped: the database is locked again.
select docstore.set_rules($rules$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /{document=**} { allow read: if true; } } }$rules$, 'locked');
begin;
select set_config('docstore.auth', 'null', true), set_config('docstore.database', 'locked', true);
set local role docstore_client;
select docstore.get('notes/a') as open_get, (select count(*) from docstore.documents) as open_view;
rollback;
select docstore.drop_rules('locked');
begin;
select set_config('docstore.auth', 'null', true), set_config('docstore.database', 'locked', true);
set local role docstore_client;
select sqlstate_of($$select docstore.get('notes/a')$$) as closed_get, (select count(*) from docstore.documents) as closed_view;
rollback;

-- Dropping a database drops its rules: created again with the same id, it starts locked.
select docstore.drop_rules('unlisted');
select docstore.set_rules($rules$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /{document=**} { allow read: if true; } } }$rules$, 'locked');
select docstore.drop_database('locked'), docstore.drop_database('unlisted');
select count(*) as rules_left_of_dropped from docstore.rules where database_id = 'locked';
select docstore.create_database('locked');
begin;
select set_config('docstore.auth', 'null', true), set_config('docstore.database', 'locked', true);
set local role docstore_client;
select sqlstate_of($$select docstore.get('notes/a')$$) as recreated_get;
rollback;

-- Leave nothing for the tests after this one.
select docstore.drop_database('locked');
