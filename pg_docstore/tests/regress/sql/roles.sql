-- docstore_client, the protected settings, the publication and the database catalog
-- (docs/storage.md, "Roles and settings"; docs/listen.md and docs/rules.md).

-- docstore_client exists, cannot log in, and has exactly these table rights
select rolname, rolcanlogin, rolsuper from pg_roles where rolname = 'docstore_client';
select t as "table",
       coalesce(string_agg(p, ', ' order by p) filter (where has_table_privilege('docstore_client', t, p)), '-') as rights
from unnest(array['docstore.entities', 'docstore.documents', 'docstore.databases', 'docstore.index_entries',
                  'docstore.indexes', 'docstore.field_exemptions']) t,
     unnest(array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) p
group by t order by t;
select has_schema_privilege('docstore_client', 'docstore', 'usage') as schema_usage;
-- every docstore function but the database catalog's
select p.oid::regprocedure as not_executable from pg_proc p
where p.pronamespace = 'docstore'::regnamespace and not has_function_privilege('docstore_client', p.oid, 'execute')
order by p.oid::regprocedure::text;
select reloptions from pg_class where oid = 'docstore.documents'::regclass;

-- the publication of the change stream
select pubname, schemaname, tablename from pg_publication_tables where pubname = 'docstore_changes';
-- re-creating the extension: the role is kept, the publication (not an extension member)
-- survives the drop empty and gets the new entities table back
begin;
drop extension pg_docstore cascade;
select count(*) as roles from pg_roles where rolname = 'docstore_client';
select pubname, (select count(*) from pg_publication_tables t where t.pubname = p.pubname) as tables
from pg_publication p where pubname = 'docstore_changes';
create extension pg_docstore;
select pubname, schemaname, tablename from pg_publication_tables where pubname = 'docstore_changes';
select has_table_privilege('docstore_client', 'docstore.entities', 'select') as can_read;
rollback;

-- (default) open to clients for what follows (a database without rules denies them: the test
-- locked), with an open ruleset like the demo's
select docstore.set_rules($rules$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /{document=**} { allow read, write: if true; } } }$rules$);
-- writes by docstore_client go through the docstore functions only
select docstore.commit('[{"set": "cl/a", "data": {"x": 1}}, {"set": "cl/b", "data": {"x": 2}}]') ? 'commitTime';
begin;
set local role docstore_client;
select docstore.set('cl/c', '{"x": 3, "tags": ["t"]}') is not null as set;
select docstore.set('cl/a', '{"y": 1}', merge => true) is not null as merged;
select docstore.create('cl/d', '{"x": 4}') is not null as created;
select sqlstate_of($$select docstore.create('cl/d', '{"x": 4}')$$);
select docstore.add('cl', '{"x": 5}') like 'cl/%' as added;
select docstore.update('cl/b', '{"x": {"$increment": 10}}') is not null as updated;
select docstore.delete('cl/c') as deleted;
select docstore.commit('[{"create": "cl/e", "data": {"x": 6}}, {"update": "cl/d", "fields": {"z": true}},
                         {"delete": "cl/a"}]') ? 'commitTime' as committed;
select regexp_replace(path, '^cl/[A-Za-z0-9]{20}$', 'cl/<auto id>') as path, data
from docstore.documents where collection = 'cl' order by (data->>'x')::int;
select path from docstore.query('select * from /cl where x >= 6 order by x');
select docstore.get('cl/d');
-- but never to the tables themselves
select sqlstate_of($$insert into docstore.entities select * from docstore.entities limit 1$$);
select sqlstate_of($$update docstore.entities set data = '{}'$$);
select sqlstate_of($$delete from docstore.entities$$);
select sqlstate_of('select count(*) from docstore.index_entries');
select sqlstate_of('select count(*) from docstore.indexes');
select sqlstate_of('select count(*) from docstore.field_exemptions');
-- nor administration
select sqlstate_of($$select docstore.create_database('client-db')$$);
select sqlstate_of($$select docstore.drop_database('client-db')$$);
select sqlstate_of($$select docstore.create_index('cl', '[{"field": "x"}, {"field": "y"}]')$$);
-- and a failed write leaves nothing behind
select sqlstate_of($$select docstore.commit('[{"set": "cl/f", "data": {}}, {"update": "cl/none", "fields": {"x": 1}}]')$$);
select docstore.get('cl/f');
reset role;
select count(*) from docstore.entities where path like 'cl/%';
select * from docstore.check_indexes();
rollback;

-- a member of docstore_client that was granted DML on entities writes with its own rights:
-- row-level security applies to it (and not to plain docstore_client writes)
create role docstore_test_writer;
grant docstore_client to docstore_test_writer;
grant insert, update, delete on docstore.entities to docstore_test_writer;
begin;
create policy writer_marks on docstore.entities as restrictive to docstore_test_writer using (true) with check (data ? 'mine');
set local role docstore_test_writer;
select sqlstate_of($$select docstore.set('cl/w', '{"x": 1}')$$);
select docstore.set('cl/w', '{"mine": true}') is not null as allowed;
set local role docstore_client;
select docstore.set('cl/v', '{"x": 1}') is not null as client_writes;
reset role;
select path from docstore.entities where path in ('cl/v', 'cl/w') order by path;
select * from docstore.check_indexes();
rollback;
revoke all on docstore.entities from docstore_test_writer;
revoke docstore_client from docstore_test_writer;
drop role docstore_test_writer;
select docstore.drop_rules();

-- Whether a role writes as a client (rules decide) or with its own rights is remembered per
-- backend (pg::names) and must follow every grant and revoke since, within one transaction
-- too: denied by the rules, then allowed with DML granted, then denied again once revoked.
create role docstore_test_switch;
grant docstore_client to docstore_test_switch;
select docstore.create_database('roles-switch');
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /{d=**} { allow read: if true; } } }$$, 'roles-switch');
set docstore.database = 'roles-switch';
begin;
set local role docstore_test_switch;
select sqlstate_of($$select docstore.set('sw/a', '{}')$$) as as_client;
reset role;
grant insert, update, delete on docstore.entities to docstore_test_switch;
set local role docstore_test_switch;
select sqlstate_of($$select docstore.set('sw/b', '{}')$$) as with_dml;
reset role;
revoke insert, update, delete on docstore.entities from docstore_test_switch;
set local role docstore_test_switch;
select sqlstate_of($$select docstore.set('sw/c', '{}')$$) as dml_revoked;
reset role;
rollback;
reset docstore.database;
select docstore.drop_rules('roles-switch'), docstore.drop_database('roles-switch');
revoke docstore_client from docstore_test_switch;
drop role docstore_test_switch;

-- docstore.auth and docstore.request: only superusers and roles granted SET change them
select name, context, vartype from pg_settings where name in ('docstore.auth', 'docstore.request') order by name;
begin;
set local role docstore_client;
select sqlstate_of($$select set_config('docstore.auth', '{"uid": "mallory"}', true)$$);
select sqlstate_of($$set local docstore.request = '{"method": "get"}'$$);
select sqlstate_of($$select set_config('docstore.request', '{}', false)$$);
select coalesce(current_setting('docstore.auth'), '') as auth;
-- docstore.database stays the session's to choose
select set_config('docstore.database', 'other', true);
rollback;
begin;
select set_config('docstore.auth', '{"uid": "alice"}', true);
set local role docstore_client;
select current_setting('docstore.auth') as auth_seen_by_client;
rollback;
-- the sidecar's login role: granted SET on both and membership in docstore_client
create role docstore_test_sidecar;
grant set on parameter docstore.auth, docstore.request to docstore_test_sidecar;
grant docstore_client to docstore_test_sidecar;
begin;
set local role docstore_test_sidecar;
select set_config('docstore.auth', '{"uid": "bob"}', true), set_config('docstore.request', '{"method": "create"}', true);
set local role docstore_client;
select current_setting('docstore.auth') as auth, current_setting('docstore.request') as request;
select sqlstate_of($$select set_config('docstore.auth', '{"uid": "eve"}', true)$$);
rollback;
revoke set on parameter docstore.auth, docstore.request from docstore_test_sidecar;
revoke docstore_client from docstore_test_sidecar;
drop role docstore_test_sidecar;

-- the database catalog
select id from docstore.databases order by id;
select docstore.create_database('staging');
select id from docstore.databases order by id;
select sqlstate_of($$select docstore.create_database('staging')$$);
select sqlstate_of($$select docstore.create_database('(default)')$$);
select sqlstate_of($$select docstore.create_database('Bad_Name')$$);
select sqlstate_of($$select docstore.drop_database('(default)')$$);
set docstore.database = 'staging';
select docstore.commit('[{"set": "s/a", "data": {"x": 1, "y": 2}}, {"set": "s/b", "data": {"x": 2, "y": 1}}]') ? 'commitTime';
select docstore.create_index('s', '[{"field": "x"}, {"field": "y", "order": "desc"}]') > 0 as indexed;
select docstore.exempt_field('s', 'y');
reset docstore.database;
select docstore.set('s/a', '{"x": "default"}') is not null as default_kept;
select (select count(*) from docstore.entities where database_id = 'staging') as documents,
       (select count(*) > 0 from docstore.index_entries where database_id = 'staging') as has_entries,
       (select count(*) from docstore.indexes where database_id = 'staging') as indexes,
       (select count(*) from docstore.field_exemptions where database_id = 'staging') as exemptions;
select docstore.drop_database('staging');
select docstore.drop_database('staging');
select (select count(*) from docstore.entities where database_id = 'staging') as documents,
       (select count(*) from docstore.index_entries where database_id = 'staging') as entries,
       (select count(*) from docstore.indexes where database_id = 'staging') as indexes,
       (select count(*) from docstore.field_exemptions where database_id = 'staging') as exemptions;
select docstore.get('s/a');
select id from docstore.databases order by id;
-- the SQL functions keep working for any valid id, listed or not
set docstore.database = 'unlisted';
select docstore.set('s/u', '{}') is not null as written;
select docstore.drop_database('unlisted');
select count(*) from docstore.entities where database_id = 'unlisted';
reset docstore.database;
select docstore.delete('s/a');
select * from docstore.check_indexes();

-- docstore_service: the rights of the sidecar's login role (docs/security.md, "The sidecar's
-- role"; sql/sidecar_role.sql makes the login a member)
select rolname, rolcanlogin, rolsuper, rolreplication from pg_roles where rolname = 'docstore_service';
select pg_has_role('docstore_service', 'docstore_client', 'member') as client_member;
select t as "table",
       coalesce(string_agg(p, ', ' order by p) filter (where has_table_privilege('docstore_service', t, p)), '-') as rights
from unnest(array['docstore.entities', 'docstore.rules', 'docstore.index_entries', 'docstore.indexes']) t,
     unnest(array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) p
group by t order by t;
select has_parameter_privilege('docstore_service', 'docstore.auth', 'set') as auth,
       has_parameter_privilege('docstore_service', 'docstore.request', 'set') as request;
select has_function_privilege('docstore_service', 'docstore.get_document_as_client(text, text, text, text)', 'execute') as client_read,
       has_function_privilege('docstore_service', 'docstore.add_document_as_client(text, jsonb, text, text, text)', 'execute') as client_add,
       has_function_privilege('docstore_service', 'docstore.create_database(text)', 'execute') as create_database;

-- development mode's databases (docs/grpc.md, "Names"): docstore.create_database_for_dev runs as
-- the extension's owner with a fixed search_path, and nobody may call it by default (PUBLIC,
-- docstore_client and docstore_service lack EXECUTE); sql/sidecar_role.sql -v dev_mode=on grants
-- it to the sidecar's login alone
select prosecdef, proconfig from pg_proc where oid = 'docstore.create_database_for_dev(text)'::regprocedure;
select exists (select from pg_proc p, aclexplode(p.proacl) a
               where p.oid = 'docstore.create_database_for_dev(text)'::regprocedure
                 and a.grantee = 0 and a.privilege_type = 'EXECUTE') as public_execute,
       has_function_privilege('docstore_client', 'docstore.create_database_for_dev(text)', 'execute') as client,
       has_function_privilege('docstore_service', 'docstore.create_database_for_dev(text)', 'execute') as service;
-- a login granted it (not a superuser, not the owner) creates a database with automatic
-- composite indexes on, and still may not call create_database or drop_database itself
begin;
create role regress_dev_login nosuperuser in role docstore_service;
grant execute on function docstore.create_database_for_dev(text) to regress_dev_login;
set local role regress_dev_login;
select sqlstate_of($$select docstore.create_database('dev-direct')$$);
select docstore.create_database_for_dev('dev-granted');
select sqlstate_of($$select docstore.create_database_for_dev('dev-granted')$$);
select sqlstate_of($$select docstore.create_database_for_dev('Bad_Name')$$);
select sqlstate_of($$select docstore.drop_database('dev-granted')$$);
reset role;
select id, auto_composite_indexes from docstore.databases where id like 'dev-%' order by id;
rollback;

-- a restore's `create publication docstore_changes` (pg_dump's, alone in its statement) replaces
-- the extension's publication, and docstore.entities is put back into it (docs/storage.md,
-- "Backups"); any other statement creating it fails as before
begin;
create publication docstore_changes with (publish = 'insert');
select pubname, pubinsert, pubupdate, schemaname, tablename
from pg_publication join pg_publication_tables using (pubname) where pubname = 'docstore_changes';
select sqlstate_of($$create publication docstore_changes for table docstore.databases$$);
rollback;
