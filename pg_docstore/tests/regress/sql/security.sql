-- What a client (docstore_client) cannot do or learn through the SQL functions (docs/rules.md,
-- "What a denial tells"; docs/storage.md, "Roles").

-- A temporary table named pg_class in the session does not decide whom the extension runs as
-- when it reads its internal tables (the owner is looked up once per backend, so this comes
-- first in the session). The fake names docstore_client itself as the owner: queries would
-- then read index_entries as the client and fail.
begin;
set local role docstore_client;
create temp table pg_class (oid oid, relowner oid);
insert into pg_class select 'docstore.index_entries'::regclass, oid from pg_roles
  where rolname = 'docstore_client';
commit;
select docstore.create_database('secure');
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents { match /{d=**} { allow read, write: if true; } } }$$, 'secure');
set docstore.database = 'secure';
select count(*) as seeded from (select docstore.set('people/p' || i,
  jsonb_build_object('ssn', 'ssn-' || i, 'n', i)) from generate_series(1, 8) i) s;
-- a composite index (CREATING: writes maintain it, so they read its definition as the owner)
select docstore.create_index('people', '[{"field": "ssn"}, {"field": "n", "order": "desc"}]') is not null as indexed;
begin;
set local role docstore_client;
select sqlstate_of($$select path from docstore.query('select * from /people where ssn = "ssn-3"')$$) as fake_pg_class;
select path from docstore.query('select * from /people where ssn = "ssn-3"');
commit;
drop table pg_temp.pg_class;
-- A new session (a wrong owner would stay cached in this one).
\c
-- Nor do the session's temporary types: a temporary domain `text` whose check calls a function
-- of the client's would run that function as the owner if a statement the extension runs as
-- the owner named the type without pg_catalog (its checks record who ran them).
begin;
set local role docstore_client;
create temp table seen (who name);
create function pg_temp.spy(v pg_catalog.text) returns boolean language sql
  as $$ insert into pg_temp.seen select current_user; select true $$;
create domain pg_temp.text as pg_catalog.text check (pg_temp.spy(value));
create domain pg_temp.bytea as pg_catalog.bytea check (pg_temp.spy(value::pg_catalog.text));
commit;
set docstore.database = 'secure';
begin;
set local role docstore_client;
select path from docstore.query('select * from /people where ssn = "ssn-4"');
select docstore.set('people/p9', '{"ssn": "ssn-9"}') is not null as client_wrote;
commit;
select who as ran_as_owner from pg_temp.seen;
drop domain pg_temp.text;
drop domain pg_temp.bytea;
-- A new session for the rest.
\c
set docstore.database = 'secure';

-- Errors as a client reads them: SQLSTATE, message, detail and hint.
create function public.error_of(statement text) returns text language plpgsql as $$
declare
  message text;
  detail text;
  hint text;
begin
  execute statement;
  return 'ok';
exception when others then
  get stacked diagnostics message = message_text, detail = pg_exception_detail,
    hint = pg_exception_hint;
  return sqlstate || ': ' || message || ' | detail: ' || coalesce(detail, '') || ' | hint: '
    || coalesce(hint, '');
end $$;

-- A Postgres error raised inside the extension's own statements (here: a write in a read-only
-- transaction) reaches the client with Postgres' detail, never a Rust backtrace (whatever
-- RUST_BACKTRACE the server runs with).
begin read only;
set local role docstore_client;
select error_of($$select docstore.set('people/p1', '{"n": 0}')$$) as read_only_write;
rollback;

-- A deny-all ruleset: explain with run is decided by the list rules as query is (refused the
-- same way before anything is read), so its counts cannot tell whether a document with a
-- given value exists. The plan alone reads no document.
select docstore.set_rules($$rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /{document=**} { allow read, write: if false; }
  }
}$$, 'secure');
begin;
set local role docstore_client;
select error_of($$select docstore.explain('select * from /people where ssn = "ssn-3"', run => true)$$) as explain_run_present;
select error_of($$select docstore.explain('select * from /people where ssn = "nobody"', run => true)$$) as explain_run_absent;
select error_of($$select * from docstore.query('select * from /people where ssn = "ssn-3"')$$) as query;
select docstore.explain('select * from /people where ssn = "ssn-3"') ? 'analyze' as plan_reports_reads;
rollback;
-- administrators still get the counts
select docstore.explain('select * from /people where ssn = "ssn-3"', run => true) -> 'analyze' -> 'results' as admin_results;

-- An allowed run tells a client only its count of results: the index counters would also
-- count other users' entries (here the zig-zag join reads bob's card in the ssn index).
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /cards/{c} { allow list: if resource.data.owner == request.auth.uid; } } }$$, 'secure');
select docstore.set('cards/a', '{"owner": "alice", "ssn": "ssn-1"}') is not null as alices,
  docstore.set('cards/b', '{"owner": "bob", "ssn": "ssn-1"}') is not null as bobs;
begin;
select set_config('docstore.auth', '{"sub": "alice"}', true);
set local role docstore_client;
select docstore.explain('select * from /cards where owner = "alice" and ssn = "ssn-1"', run => true) -> 'analyze' as client_analyze;
rollback;
select docstore.explain('select * from /cards where owner = "alice" and ssn = "ssn-1"', run => true) -> 'analyze' as admin_analyze;

-- A denial reads the same whether or not the document exists: a set is decided as a create or
-- an update by existence, and a rule reading `resource` fails differently on a missing
-- document, so the message names neither the rule nor its outcome (the server log has them).
select docstore.set_rules($$rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /notes/{id} {
      allow get: if resource.data.owner == request.auth.uid;
      allow create: if request.resource.data.owner == request.auth.uid && request.auth.uid == 'nobody';
      allow update: if resource.data.owner == request.auth.uid;
      allow delete: if false;
    }
    match /other/{id} { allow write: if true; }
  }
}$$, 'secure');
select docstore.set('notes/there', '{"owner": "alice"}') is not null as seeded;
begin;
select set_config('docstore.auth', '{"sub": "bob"}', true);
set local role docstore_client;
create temp table denials (op text, present text, absent text);
insert into denials values
  ('set', error_of($$select docstore.set('notes/there', '{"owner": "bob"}')$$),
          error_of($$select docstore.set('notes/absent', '{"owner": "bob"}')$$)),
  ('set merge', error_of($$select docstore.set('notes/there', '{"owner": "bob"}', merge => true)$$),
                error_of($$select docstore.set('notes/absent', '{"owner": "bob"}', merge => true)$$)),
  ('commit', error_of($$select docstore.commit('[{"set": "notes/there", "data": {"owner": "bob"}}]')$$),
             error_of($$select docstore.commit('[{"set": "notes/absent", "data": {"owner": "bob"}}]')$$)),
  ('commit batch', error_of($$select docstore.commit('[{"set": "other/x", "data": {}}, {"set": "notes/there", "data": {"owner": "bob"}}]')$$),
                   error_of($$select docstore.commit('[{"set": "other/x", "data": {}}, {"set": "notes/absent", "data": {"owner": "bob"}}]')$$)),
  ('create', error_of($$select docstore.create('notes/there', '{"owner": "bob"}')$$),
             error_of($$select docstore.create('notes/absent', '{"owner": "bob"}')$$)),
  ('update', error_of($$select docstore.update('notes/there', '{"owner": "bob"}')$$),
             error_of($$select docstore.update('notes/absent', '{"owner": "bob"}')$$)),
  ('delete', error_of($$select docstore.delete('notes/there')$$),
             error_of($$select docstore.delete('notes/absent')$$)),
  ('get', error_of($$select docstore.get('notes/there')$$),
          error_of($$select docstore.get('notes/absent')$$));
select op, replace(present, 'notes/there', 'notes/<id>') = replace(absent, 'notes/absent', 'notes/<id>')
  as same, present from denials order by op;
rollback;
-- nothing was written
select docstore.get('notes/there') as unchanged, docstore.get('notes/absent') is null as still_absent;

-- Every SECURITY DEFINER function of the extension has a fixed search_path.
select p.oid::regprocedure as definer_without_search_path
from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
where n.nspname = 'docstore' and p.prosecdef
  and not exists (select from unnest(p.proconfig) c where c like 'search_path=%');
select count(*) > 0 as definers_checked
from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
where n.nspname = 'docstore' and p.prosecdef;

-- set_rules and drop_rules without a database act on the session's (docstore.database), as the
-- document functions do; (default)'s rules (whatever earlier tests left) are untouched.
create temp table default_rules as
  select source, updated_at from docstore.rules where database_id = '(default)';
select docstore.create_database('secure-two');
set docstore.database = 'secure-two';
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents { match /{d=**} { allow read: if true; } } }$$);
select count(*) as session_rules from docstore.rules where database_id = 'secure-two';
select docstore.drop_rules() as dropped_session_rules;
select count(*) as session_rules from docstore.rules where database_id = 'secure-two';
select (select array_agg((source, updated_at)) from docstore.rules where database_id = '(default)')
  is not distinct from (select array_agg((source, updated_at)) from default_rules) as default_untouched;
reset docstore.database;
select sqlstate_of($$select docstore.set_rules('x', 'not valid!')$$) as bad_database;
