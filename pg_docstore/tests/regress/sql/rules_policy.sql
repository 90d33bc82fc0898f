-- The row-level-security function docstore.rules_policy is callable by clients (a policy's
-- functions run with the querying user's privileges), with a row of their own making. A `list`
-- rule that reads other documents must not turn it into an oracle over documents the client
-- may not read (docs/security.md, "What a non-admin caller cannot learn"): it decides only rows stored exactly
-- as given. Its own database id.
select docstore.create_database('policy-oracle');
set docstore.database = 'policy-oracle';
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{n} {
    allow list: if get(/databases/$(database)/documents/secrets/$(resource.data.probe)).data.v
                   == resource.data.guess;
  }
  match /open/{n} { allow list: if resource.data.public == true; }
  match /secrets/{s} { allow read: if false; }
} }$$, 'policy-oracle');
select docstore.set('secrets/s1', '{"v": "red"}') is not null as written;
select docstore.set('notes/right', '{"probe": "s1", "guess": "red"}') is not null as written;
select docstore.set('notes/wrong', '{"probe": "s1", "guess": "blue"}') is not null as written;
select docstore.set('open/a', '{"public": true}') is not null as written;
-- A database whose list rules read no other document.
select docstore.create_database('policy-plain');
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /open/{n} { allow list: if resource.data.public == true; }
} }$$, 'policy-plain');
select set_config('docstore.auth', '{"sub": "mallory"}', false);

begin;
set local role docstore_client;
-- Plain SQL: the policy decides the stored rows as before.
select path from docstore.entities where database_id = 'policy-oracle' order by path;
-- Made-up rows: the same answer (false) whether the probed secret exists or not, and whatever
-- its content is guessed to be.
select docstore.rules_policy('policy-oracle', 'notes/x', '{"probe": "s1", "guess": "red"}') as existing_right_guess,
       docstore.rules_policy('policy-oracle', 'notes/x', '{"probe": "s1", "guess": "blue"}') as existing_wrong_guess,
       docstore.rules_policy('policy-oracle', 'notes/x', '{"probe": "s2", "guess": "red"}') as missing;
-- A stored path with other data than stored is made up too.
select docstore.rules_policy('policy-oracle', 'notes/wrong', '{"probe": "s1", "guess": "red"}') as stored_path_other_data;
-- The stored rows themselves: what plain SQL shows, nothing more.
select path, docstore.rules_policy(database_id, path, data) as decided
  from docstore.entities where database_id = 'policy-oracle' order by path;
-- In a database with lookups, every made-up row is false, also one its lookup-free rules allow.
select docstore.rules_policy('policy-oracle', 'open/x', '{"public": true}') as lookup_database;
-- In a database whose list rules read no other document, the values given are decided as
-- given (they tell nothing about stored documents).
select docstore.rules_policy('policy-plain', 'open/x', '{"public": true}') as no_lookups,
       docstore.rules_policy('policy-plain', 'open/x', '{"public": false}') as no_lookups_denied;
commit;
reset docstore.auth;
