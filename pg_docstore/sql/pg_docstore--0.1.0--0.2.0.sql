-- pg_docstore 0.1.0 -> 0.2.0 (ALTER EXTENSION pg_docstore UPDATE). Released upgrade scripts are
-- never edited; each change to the extension's SQL adds its statements here, under a comment
-- naming the change, until 0.2.0 is tagged. scripts/upgrade.sh checks that a 0.1.0 database
-- brought up to date by this script has the schema of a fresh 0.2.0 install.
\echo Use "ALTER EXTENSION pg_docstore UPDATE" to load this file. \quit

-- Deny by default (docs/rules.md, "A database without rules"): clients are denied in a database
-- without rules or not listed in docstore.databases. The list policy passes no row of such a
-- database, the policy function's default is false, and creating or dropping a database
-- regenerates it (only listed databases' rules count).
alter policy docstore_rules_list on docstore.entities
    using (docstore.rules_set(database_id) and docstore.rules_policy(database_id, path, data));
create or replace function docstore.rules_policy(database_id text, path text, data jsonb) returns boolean
language sql stable parallel safe security definer set search_path = pg_catalog, pg_temp
as $$ select false $$;
create trigger databases_changed after insert or update or delete or truncate on docstore.databases
    for each statement execute function docstore.rules_changed();
select docstore.rules_install() where exists (select from docstore.rules);
