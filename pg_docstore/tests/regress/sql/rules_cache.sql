-- The per-backend cache of compiled rulesets (rules::cache): a change of docstore.rules takes
-- effect at this session's next statement, inside a transaction too; a rolled-back change
-- (whole transaction or savepoint) never does. Another session's changes: the isolation spec
-- rules_cache. Its own database id, so the other tests' (default) rules are not touched.
select docstore.create_database('rules-cache');
set docstore.database = 'rules-cache';
select set_config('docstore.auth', '{"sub": "alice"}', false);
-- A statement as docstore_client (the role is back to the superuser's afterwards, also inside
-- a transaction): 'ok' or the error.
create function pg_temp.as_client(statement text) returns text language plpgsql as $$
declare
  result text;
begin
  set role docstore_client;
  result := sqlstate_of(statement);
  reset role;
  return result;
end $$;
create function pg_temp.client_write(n int) returns text language sql as $$
  select pg_temp.as_client(format($q$select docstore.set('notes/n%s', '{"n": %s}')$q$, n, n))
$$;
create function pg_temp.client_read(n int) returns text language sql as $$
  select pg_temp.as_client(format($q$select docstore.get('notes/n%s')$q$, n))
$$;

-- No rules: locked (every client call denied).
select pg_temp.client_write(1) as locked_write;
-- Rules that allow: the ruleset is compiled and cached by the first write.
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{id} { allow read, write: if request.auth.uid == 'alice'; } } }$$, 'rules-cache');
select pg_temp.client_write(2) as allowed_write, pg_temp.client_read(2) as allowed_read;
select pg_temp.client_write(3) as allowed_again;
-- Replaced by rules that deny writes: the next statement sees them.
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{id} { allow read: if true; allow write: if false; } } }$$, 'rules-cache');
select pg_temp.client_write(4) as denied_write, pg_temp.client_read(2) as still_read;

-- A change inside a transaction takes effect at its next statement, and is undone by rollback.
begin;
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{id} { allow read, write: if true; } } }$$, 'rules-cache');
select pg_temp.client_write(5) as allowed_in_transaction;
rollback;
select pg_temp.client_write(5) as denied_after_rollback;

-- Savepoints: a change rolled back to a savepoint is undone; the one before it stays.
begin;
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{id} { allow read, write: if true; } } }$$, 'rules-cache');
savepoint s;
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{id} { allow read, write: if false; } } }$$, 'rules-cache');
select pg_temp.client_write(6) as denied_after_savepoint, pg_temp.client_read(2) as read_denied;
rollback to savepoint s;
select pg_temp.client_write(6) as allowed_after_rollback_to_savepoint;
commit;
select pg_temp.client_write(7) as allowed_after_commit;

-- A change of another database's rules does not change these (the entry is read again and
-- its unchanged source reused).
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /{document=**} { allow read, write: if false; } } }$$, 'rules-cache-other');
select pg_temp.client_write(8) as unaffected_by_other_database;
select docstore.drop_rules('rules-cache-other');

-- drop_rules locks the database again (its own denial, not the rules'); a rolled-back drop
-- does not.
begin;
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{id} { allow read, write: if false; } } }$$, 'rules-cache');
commit;
begin;
select docstore.drop_rules('rules-cache');
select pg_temp.client_write(9) as locked_after_drop_in_transaction;
rollback;
select pg_temp.client_write(9) as denied_by_rules_after_rolled_back_drop;
select docstore.drop_rules('rules-cache');
select pg_temp.client_write(9) as locked_after_drop;
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{id} { allow read, write: if true; } } }$$, 'rules-cache');

-- A write that fails after set_rules in the same transaction rolls both back.
begin;
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{id} { allow read, write: if false; } } }$$, 'rules-cache');
select docstore.create('notes/n2', '{}');
rollback;
select pg_temp.client_write(10) as allowed_after_failed_transaction;

-- get() reads below the executor (entities::read_data): it sees the transaction's own earlier
-- writes, also those of the same statement, and nothing rolled back.
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /rooms/{r} { allow write: if true; }
  match /rooms/{r}/messages/{m} {
    allow create: if request.auth.uid in get(/databases/$(database)/documents/rooms/$(r)).data.members;
  } } }$$, 'rules-cache');
begin;
select docstore.set('rooms/r1', '{"members": ["alice"]}') is not null as admin_wrote_room;
select pg_temp.as_client($$select docstore.create('rooms/r1/messages/m1', '{}')$$) as sees_uncommitted_room;
select pg_temp.as_client($$select docstore.create('rooms/r2/messages/m1', '{}')$$) as no_room;
rollback;
select pg_temp.as_client($$select docstore.create('rooms/r1/messages/m2', '{}')$$) as room_rolled_back;
select pg_temp.as_client($$select docstore.set('rooms/r3', '{"members": ["alice"]}') is not null,
  docstore.create('rooms/r3/messages/m1', '{}') is not null$$) as room_then_message_in_one_statement;
select pg_temp.as_client($$select docstore.set('rooms/r4', '{"members": ["bob"]}') is not null,
  docstore.create('rooms/r4/messages/m1', '{}') is not null$$) as not_a_member;
select docstore.drop_rules('rules-cache');

-- Clients cannot reach the rules table behind the cache.
select pg_temp.as_client('select source from docstore.rules') as client_reads_rules;
reset docstore.database;
