-- Roles and the change publication (docs/storage.md, "Roles"; docs/listen.md and docs/rules.md).
-- Loaded last, when every docstore function exists.

-- docstore_client: what requests from end users run as (the sidecar does SET ROLE to it).
-- Roles belong to the cluster, not to a database: the extension may be created in several
-- databases (or again after a drop), so the role is created only when missing and never dropped.
do $$
begin
    if not exists (select from pg_catalog.pg_roles where rolname = 'docstore_client') then
        create role docstore_client nologin;
    end if;
end $$;
comment on role docstore_client is 'pg_docstore: end-user requests (reads under row-level security, writes through the docstore functions only)';

-- Reads: the documents, under whatever row-level security entities carries (the rules issue
-- adds its policies); the view runs with the caller's rights (security_invoker).
grant usage on schema docstore to docstore_client;
grant select on docstore.entities, docstore.documents, docstore.databases to docstore_client;
-- Writes: no INSERT, UPDATE or DELETE on entities. The docstore functions authorize each write
-- (writes::authorize) and then write as the extension's owner. Nothing on index_entries,
-- indexes or field_exemptions: queries read them as the owner.
grant execute on all functions in schema docstore to docstore_client;

-- Managing databases is for administrators (the extension's owner and superusers), as is
-- creating indexes (which needs the rights on docstore.indexes that clients lack).
revoke execute on function docstore.create_database(text), docstore.drop_database(text),
    docstore.set_database_options(text, bigint, boolean),
    docstore.set_version_retention(text, interval), docstore.purge_versions(bigint)
    from public, docstore_client;

-- Development mode's databases (docs/grpc.md, "Names"): a sidecar run with --dev-mode creates a
-- database a request names on first use, with automatic composite indexes on. Creating one
-- regenerates the rules policy, which only the extension's owner may do, so this function runs
-- as its owner (SECURITY DEFINER, fixed search_path) and does that one thing only: no drop, no
-- other option. Nobody may call it by default; sql/sidecar_role.sql grants it to the sidecar's
-- login only when run with `-v dev_mode=on` (scripts/sidecar.sh under `make up`).
create function docstore.create_database_for_dev(id text) returns void
language plpgsql strict security definer set search_path = pg_catalog, pg_temp as $$
begin
    perform docstore.create_database(id);
    perform docstore.set_database_options(id, null, auto_composite_indexes => true);
end $$;
revoke execute on function docstore.create_database_for_dev(text) from public, docstore_client;

-- The change stream's publication (docs/architecture.md). A publication cannot be a member of
-- an extension, so `drop extension` leaves it behind, empty (its table went with the
-- extension): a later `create extension` adds the new entities table to it.
do $$
begin
    if not exists (select from pg_catalog.pg_publication where pubname = 'docstore_changes') then
        create publication docstore_changes for table docstore.entities;
    elsif not exists (select from pg_catalog.pg_publication_tables
                      where pubname = 'docstore_changes'
                        and schemaname = 'docstore' and tablename = 'entities') then
        alter publication docstore_changes add table docstore.entities;
    end if;
end $$;

-- pg_dump dumps the publication by itself (it is no extension member), and `create extension`
-- in the restore has created it already: the dump's `create publication docstore_changes` would
-- fail. These event triggers (extension members, so not dumped) make that statement replace
-- the extension's copy (the dump's options win) and put docstore.entities back in it (pg_dump
-- leaves out the membership of an extension's table): a plain pg_dump / pg_restore works
-- (docs/storage.md, "Backups"). Only that one statement, alone, is matched.
create function docstore.publication_replace() returns event_trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    if exists (select from pg_catalog.pg_publication where pubname = 'docstore_changes')
       and current_query() ~* '^\s*create\s+publication\s+"?docstore_changes"?(\s+with\s*\([^;]*\))?\s*;?\s*$' then
        drop publication docstore_changes;
    end if;
end $$;
create function docstore.publication_complete() returns event_trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    -- Only the statement that created docstore_changes: another publication's CREATE, by any
    -- role, is not this trigger's business (and must not fail on the owner's rights).
    if exists (select from pg_catalog.pg_event_trigger_ddl_commands()
               where object_type = 'publication' and object_identity = 'docstore_changes')
       and not exists (select from pg_catalog.pg_publication_tables
                       where pubname = 'docstore_changes'
                         and schemaname = 'docstore' and tablename = 'entities') then
        alter publication docstore_changes add table docstore.entities;
    end if;
end $$;
-- (Event trigger functions cannot be called directly: no grant or revoke is needed.)
create event trigger docstore_publication_replace on ddl_command_start
    when tag in ('CREATE PUBLICATION') execute function docstore.publication_replace();
create event trigger docstore_publication_complete on ddl_command_end
    when tag in ('CREATE PUBLICATION') execute function docstore.publication_complete();

-- Security rules (docs/rules.md). Rules are for administrators to set; the functions
-- that write them and the trigger's are not for clients.
revoke execute on function docstore.set_rules(text, text), docstore.drop_rules(text),
    docstore.rules_install(), docstore.rules_changed()
    from public, docstore_client;
-- Write triggers (docs/triggers.md) are for administrators too, as are their tables (on
-- which clients have no rights: a trigger's secret is never readable by them).
revoke execute on function docstore.create_trigger(text, text, text[], text, text, jsonb),
    docstore.drop_trigger(text), docstore.retry_trigger(text), docstore.list_triggers()
    from public, docstore_client;
-- get()/exists() of the compiled rules read any document as the owner: only the policy
-- function (SECURITY DEFINER) calls them, never a client directly.
revoke execute on function docstore.rules_lookup(text, jsonb, text) from public, docstore_client;
-- The sidecar's one-statement client read sets docstore.auth itself (with its caller's rights
-- to set it): only superusers and roles granted EXECUTE (the sidecar's) call it.
revoke execute on function docstore.get_document_as_client(text, text, text, text)
    from public, docstore_client;
-- Its create counterpart likewise (a client's POST to a collection in one statement).
revoke execute on function docstore.add_document_as_client(text, jsonb, text, text, text)
    from public, docstore_client;
-- docstore_service: the rights of the sidecar's own login role (docs/security.md, "The sidecar's
-- role"). The extension creates this group role (NOLOGIN, cluster-wide, created when missing and
-- never dropped, like docstore_client) and grants it what the sidecar does; the operator creates
-- the LOGIN REPLICATION role as a member of it (sql/sidecar_role.sql), so no superuser is needed
-- at run time and no password is in the extension.
do $$
begin
    if not exists (select from pg_catalog.pg_roles where rolname = 'docstore_service') then
        create role docstore_service nologin;
    end if;
end $$;
comment on role docstore_service is 'pg_docstore: the sidecar''s rights (members: its login role, see sql/sidecar_role.sql)';
-- SET ROLE docstore_client for client requests (membership); its reads of documents.
grant docstore_client to docstore_service;
-- docstore.auth and docstore.request of client requests (SUSET settings).
grant set on parameter docstore.auth, docstore.request to docstore_service;
-- The admin key's requests run as the sidecar's role and bypass the rules: a role with DML on
-- entities is an administrator (writes::authorize), whose writes run with these rights.
grant insert, update, delete on docstore.entities to docstore_service;
-- The rules poll of live queries reads the stored rulesets.
grant select on docstore.rules to docstore_service;
-- The one-statement client read and create (revoked from everyone above).
grant execute on function docstore.get_document_as_client(text, text, text, text),
    docstore.add_document_as_client(text, jsonb, text, text, text) to docstore_service;
-- Write triggers' delivery (docs/triggers.md): the sidecar reads the triggers (their secrets
-- sign the deliveries), records matching changes and advances each trigger's position, marks
-- deliveries done, parked or due again, and inserts the acknowledgements of exactly-once effects.
grant select, update (position) on docstore.triggers to docstore_service;
grant select, insert, update, delete on docstore.trigger_deliveries to docstore_service;
grant select, insert on docstore.trigger_acks to docstore_service;

-- Row-level security on documents: clients (roles with docstore_client's privileges and no
-- DML on entities, as writes::authorize decides) see the rows the per-document `list` rule of
-- their database allows (docstore.rules_policy), and none of a database without rules or not
-- listed in docstore.databases (rules_set answers that without the policy function); every
-- other role reads and writes entities with its own grants, as before (superusers and the
-- owner bypass row-level security anyway). The list policy first asks, once per statement,
-- whether the caller is a client at all: a member of docstore_client that is not one (the
-- sidecar's own role) is admitted by docstore_not_clients, and without that test the rules
-- functions (SQL functions, parsed and planned at every call) ran for each row it read first,
-- six times the cost of the read itself.
alter table docstore.entities enable row level security;
create policy docstore_rules_list on docstore.entities for select to docstore_client
    using ((select pg_has_role('docstore_client', 'usage')
                and not has_table_privilege('docstore.entities', 'insert, update, delete'))
           and docstore.rules_set(database_id)
           and docstore.rules_policy(database_id, path, data));
create policy docstore_not_clients on docstore.entities for select to public
    using ((select not pg_has_role('docstore_client', 'usage')
                or has_table_privilege('docstore.entities', 'insert, update, delete')));
create policy docstore_insert on docstore.entities for insert to public with check (true);
create policy docstore_update on docstore.entities for update to public using (true);
create policy docstore_delete on docstore.entities for delete to public using (true);
