-- pg_docstore 0.1.0 -> 0.2.0 (ALTER EXTENSION pg_docstore UPDATE). Released upgrade scripts are
-- never edited; each change to the extension's SQL adds its statements here, under a comment
-- naming the change, until 0.2.0 is tagged. scripts/upgrade.sh checks that a 0.1.0 database
-- brought up to date by this script has the schema of a fresh 0.2.0 install.
\echo Use "ALTER EXTENSION pg_docstore UPDATE" to load this file. \quit

-- Security hardening (docs/security.md): rules_lookup, a SECURITY DEFINER function,
-- gets a fixed search_path; set_rules and drop_rules default to the session's database
-- (docstore.database) instead of '(default)'; wait_for_older_transactions names its catalogs
-- with pg_catalog.
CREATE OR REPLACE FUNCTION docstore."rules_lookup"(
	"kind" TEXT, /* & str */
	"path" jsonb, /* TypedJsonb */
	"request_database" TEXT /* & str */
) RETURNS jsonb /* Option < TypedJsonb > */
STRICT STABLE SECURITY DEFINER PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rules_lookup_wrapper';

CREATE OR REPLACE FUNCTION docstore."set_rules"(
	"source" TEXT, /* & str */
	"database" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS VOID /* Result < (), ErrorReport > */
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'set_rules_wrapper';

CREATE OR REPLACE FUNCTION docstore."drop_rules"(
	"database" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS bool /* Result < bool, ErrorReport > */
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'drop_rules_wrapper';

create or replace function docstore.wait_for_older_transactions(since timestamptz, timeout interval default '10 minutes')
returns void language plpgsql as $$
declare
    deadline timestamptz := pg_catalog.clock_timestamp() + timeout;
begin
    loop
        -- pg_stat_activity is read once per transaction and then cached: drop the cached copy,
        -- or a transaction seen open at the first look would be waited for forever.
        perform pg_catalog.pg_stat_clear_snapshot();
        exit when not exists (
            select 1 from pg_catalog.pg_stat_activity
            where pid <> pg_catalog.pg_backend_pid()
              and datname = pg_catalog.current_database()
              and backend_type = 'client backend'
              and xact_start < since
        );
        if pg_catalog.clock_timestamp() > deadline then
            raise exception 'transactions older than the index change are still open after %', timeout
                using errcode = '55000',
                      hint = 'Find them in pg_stat_activity (xact_start), end them, and call docstore.build_indexes() again.';
        end if;
        perform pg_catalog.pg_sleep(0.05);
    end loop;
end $$;

-- A per-database cap on the documents of a client query (docstore.set_database_options).
alter table docstore.databases
    add column max_query_results bigint check (max_query_results > 0);
-- pg_docstore::api::databases::set_database_options
CREATE  FUNCTION docstore."set_database_options"(
	"id" TEXT, /* &str */
	"max_query_results" bigint /* core::option::Option<i64> */
) RETURNS VOID /* core::result::Result<(), pgrx_pg_sys::submodules::panic::ErrorReport> */
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'set_database_options_wrapper';
revoke execute on function docstore.set_database_options(text, bigint) from public;

-- Deny by default (docs/rules.md, "A database without rules"): clients are denied in a database
-- without rules or not listed in docstore.databases. The list policy passes no row of such a
-- database, the policy function's default is false, and creating or dropping a database
-- regenerates it (only listed databases' rules count).
alter policy docstore_rules_list on docstore.entities
    using ((select pg_has_role('docstore_client', 'usage')
                and not has_table_privilege('docstore.entities', 'insert, update, delete'))
           and docstore.rules_set(database_id)
           and docstore.rules_policy(database_id, path, data));
create or replace function docstore.rules_policy(database_id text, path text, data jsonb) returns boolean
language sql stable parallel safe security definer set search_path = pg_catalog, pg_temp
as $$ select false $$;
create trigger databases_changed after insert or update or delete or truncate on docstore.databases
    for each statement execute function docstore.rules_changed();
-- Regenerate the policy function from the stored rulesets: new triggers above, and it now
-- decides only stored rows where the list rules read other documents (docs/security.md, "What a
-- non-admin caller cannot learn").
select docstore.rules_install() where exists (select from docstore.rules);

-- docstore.explain of a query in the structured JSON form (the sidecar's :explain, the Python
-- SDK's client.explain): an overload of explain(text, run).
-- pg_docstore::api::query::explain
CREATE  FUNCTION docstore."explain"(
	"structured" jsonb, /* TypedJsonb */
	"run" bool DEFAULT false /* bool */
) RETURNS jsonb /* Result < TypedJsonb, ErrorReport > */
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'explain_structured_wrapper';
grant execute on function docstore.explain(jsonb, boolean) to docstore_client;

-- Automatic composite indexes, a per-database option (docs/query.md, "Automatic composite
-- indexes"): a column of docstore.databases and a parameter of docstore.set_database_options.
-- (Added without a default, then filled: a column added with a default keeps a "missing value"
-- in the catalog that a fresh install does not have.)
alter table docstore.databases add column auto_composite_indexes boolean;
update docstore.databases set auto_composite_indexes = false;
alter table docstore.databases alter column auto_composite_indexes set default false,
    alter column auto_composite_indexes set not null;
drop function docstore.set_database_options(text, bigint);
-- pg_docstore::api::databases::set_database_options
CREATE  FUNCTION docstore."set_database_options"(
	"id" TEXT, /* &str */
	"max_query_results" bigint, /* core::option::Option<i64> */
	"auto_composite_indexes" bool DEFAULT NULL /* core::option::Option<bool> */
) RETURNS VOID /* core::result::Result<(), pgrx_pg_sys::submodules::panic::ErrorReport> */
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'set_database_options_wrapper';
revoke execute on function docstore.set_database_options(text, bigint, boolean) from public;

-- Least privilege for the sidecar: the group role docstore_service (sql/roles.sql).
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

-- A plain pg_dump / pg_restore: the publication's event triggers (sql/roles.sql).
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
    if exists (select from pg_catalog.pg_publication where pubname = 'docstore_changes')
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

-- The publication event trigger acts on CREATE PUBLICATION docstore_changes only (sql/roles.sql):
-- another publication's CREATE by a role that does not own docstore_changes failed while the
-- publication lacked docstore.entities.
create or replace function docstore.publication_complete() returns event_trigger
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

-- Write triggers (docs/triggers.md): catalog tables, list_triggers (sql/triggers.sql), the
-- create/drop/retry functions, and their revokes from clients (sql/roles.sql).
create table docstore.triggers (
    name        text collate "C" primary key,
    database_id text collate "C" not null,
    pattern     text not null,
    events      text[] not null,
    url         text not null,
    mode        text not null check (mode in ('at_least_once', 'exactly_once')),
    options     jsonb not null default '{}',
    -- the HMAC-SHA256 key of the X-Docstore-Signature header, shown once by create_trigger
    secret      text not null,
    -- the change stream position up to which this trigger's matching changes are recorded in
    -- trigger_deliveries (advanced in the same transaction as those rows are inserted)
    position    pg_lsn not null default '0/0',
    created_at  timestamptz not null default now()
);
comment on table docstore.triggers is 'pg_docstore write triggers (write through docstore.create_trigger)';
select pg_catalog.pg_extension_config_dump('docstore.triggers', '');

-- One row per trigger and matching committed change, recorded as the change stream is decoded
-- and delivered from here (a slow endpoint never holds the slot back). change_id is the
-- change's identity in the stream (unique per trigger: the primary key), sent as the
-- Idempotency-Key. Per document, changes are delivered in position order; a parked change
-- holds back its document's later ones.
create table docstore.trigger_deliveries (
    trigger_name text collate "C" not null,
    change_id    text collate "C" not null,
    position     pg_lsn not null,
    commit_time  timestamptz not null,
    path         text collate "C" not null,
    event        text not null check (event in ('create', 'update', 'delete')),
    before       jsonb,
    after        jsonb,
    params       jsonb not null default '{}',
    attempts     integer not null default 0,
    next_attempt timestamptz not null default now(),
    state        text not null default 'pending' check (state in ('pending', 'parked', 'done')),
    last_error   text,
    primary key (trigger_name, change_id)
);
create index trigger_deliveries_due on docstore.trigger_deliveries (trigger_name, next_attempt)
    where state = 'pending';
create index trigger_deliveries_document on docstore.trigger_deliveries (trigger_name, path, position)
    where state <> 'done';
comment on table docstore.trigger_deliveries is 'pg_docstore write triggers: changes to deliver (docs/triggers.md)';
select pg_catalog.pg_extension_config_dump('docstore.trigger_deliveries', '');

-- Exactly-once effects: the acknowledgement of a change, inserted in the same transaction as
-- the writes its endpoint answered with. Its primary key makes a second commit of the same
-- change's effects fail (a repeated delivery then only marks the change done).
create table docstore.trigger_acks (
    trigger_name text collate "C" not null,
    change_id    text collate "C" not null,
    acked_at     timestamptz not null default now(),
    primary key (trigger_name, change_id)
);
comment on table docstore.trigger_acks is 'pg_docstore write triggers: changes whose exactly-once effects are committed';
select pg_catalog.pg_extension_config_dump('docstore.trigger_acks', '');

-- Every trigger with its delivery state; never the secret.
create function docstore.list_triggers()
returns table (name text, database_id text, pattern text, events text[], url text, mode text,
               options jsonb, created_at timestamptz, "position" pg_lsn, pending bigint,
               parked bigint, failures bigint)
language sql stable set search_path = pg_catalog, pg_temp
as $$
    select t.name, t.database_id, t.pattern, t.events, t.url, t.mode, t.options, t.created_at,
           t.position,
           count(*) filter (where d.state = 'pending'),
           count(*) filter (where d.state = 'parked'),
           count(*) filter (where d.state <> 'done' and d.attempts > 0)
    from docstore.triggers t
    left join docstore.trigger_deliveries d on d.trigger_name = t.name
    group by t.name
    order by t.name
$$;
CREATE OR REPLACE FUNCTION docstore."create_trigger"(
	"name" TEXT, /* & str */
	"pattern" TEXT, /* & str */
	"events" TEXT[], /* Vec < Option < String > > */
	"url" TEXT, /* & str */
	"mode" TEXT DEFAULT 'at_least_once', /* & str */
	"options" jsonb DEFAULT '{}' /* pgrx :: JsonB */
) RETURNS TEXT /* Result < Option < String > , ErrorReport > */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'create_trigger_wrapper';
CREATE OR REPLACE FUNCTION docstore."drop_trigger"(
	"name" TEXT /* & str */
) RETURNS VOID /* Result < (), ErrorReport > */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'drop_trigger_wrapper';
CREATE OR REPLACE FUNCTION docstore."retry_trigger"(
	"name" TEXT /* & str */
) RETURNS bigint /* Result < i64, ErrorReport > */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'retry_trigger_wrapper';
revoke execute on function docstore.create_trigger(text, text, text[], text, text, jsonb),
    docstore.drop_trigger(text), docstore.retry_trigger(text), docstore.list_triggers()
    from public, docstore_client;

-- docstore.last_commit_time(): the newest commit time of the instance (read_time checks).
CREATE OR REPLACE FUNCTION docstore."last_commit_time"() RETURNS timestamp with time zone /* Result < Option < TimestampWithTimeZone > , ErrorReport > */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'last_commit_time_wrapper';
grant execute on function docstore.last_commit_time() to docstore_client;

-- The exact `before` of write triggers (docs/triggers.md): REPLICA IDENTITY FULL on entities, so
-- every update and delete carries the whole previous row in the change stream.
alter table docstore.entities replica identity full;

-- Write triggers' delivery by the sidecar (docs/triggers.md): the chain depth of a recorded
-- change, and the sidecar's rights on the trigger tables (docstore_service).
-- (Added without a default, then filled, as auto_composite_indexes above.)
alter table docstore.trigger_deliveries add column depth integer;
update docstore.trigger_deliveries set depth = 0;
alter table docstore.trigger_deliveries alter column depth set default 0,
    alter column depth set not null;
grant select, update (position) on docstore.triggers to docstore_service;
grant select, insert, update, delete on docstore.trigger_deliveries to docstore_service;
grant select, insert on docstore.trigger_acks to docstore_service;

-- Write triggers' claim (docs/triggers.md): the due pending deliveries of every trigger in
-- next_attempt order, so a claim's cost is the rows it looks at, not the backlog.
drop index docstore.trigger_deliveries_due;
create index trigger_deliveries_due on docstore.trigger_deliveries (next_attempt)
    where state = 'pending';

-- Development mode's databases under the least-privilege login (sql/roles.sql): one SECURITY
-- DEFINER function, granted to the sidecar's login only by sql/sidecar_role.sql -v dev_mode=on.
create function docstore.create_database_for_dev(id text) returns void
language plpgsql strict security definer set search_path = pg_catalog, pg_temp as $$
begin
    perform docstore.create_database(id);
    perform docstore.set_database_options(id, null, auto_composite_indexes => true);
end $$;
revoke execute on function docstore.create_database_for_dev(text) from public, docstore_client;

-- Version history for reads at a past read_time (docs/storage.md, "Version history"): the
-- per-database retention (1 hour by default; the history of an upgraded database starts at
-- the upgrade), the versions table, its setter and purge, and the reads at a time.
-- (Added without a default, then filled, as auto_composite_indexes above.)
alter table docstore.databases
    add column version_retention interval check (version_retention >= interval '0'),
    add column versions_since timestamptz;
update docstore.databases set version_retention = interval '1 hour', versions_since = now();
alter table docstore.databases
    alter column version_retention set default interval '1 hour',
    alter column version_retention set not null,
    alter column versions_since set default now(),
    alter column versions_since set not null;
-- Superseded versions of documents, for reads at a past read_time (docs/storage.md, "Version
-- history"): written by the write path in the writing transaction (the row an update replaced
-- or a delete removed, with the commit time that ended it), purged past the database's
-- version_retention. A version was the document from update_time (inclusive) to
-- superseded_time (exclusive).
create table docstore.entity_versions (
    database_id     text collate "C" not null,
    name            bytea not null,
    parent          bytea not null,
    collection_id   text collate "C" not null,
    path            text collate "C" not null,
    data            jsonb not null,
    create_time     timestamptz not null,
    update_time     timestamptz not null,
    superseded_time timestamptz not null
);
-- A document's versions (point reads at a time).
create index entity_versions_by_name on docstore.entity_versions (database_id, name, superseded_time);
-- The versions live at a time T are among those superseded after T: one range (reads at T),
-- and the expired ones are one range too (the purge).
create index entity_versions_by_time on docstore.entity_versions (database_id, superseded_time);
comment on table docstore.entity_versions is 'pg_docstore superseded document versions, kept for version_retention (maintained by every docstore write)';

-- A database's version retention (docs/storage.md, "Version history"): how long superseded
-- versions are kept for reads at a past read_time; 0 keeps none (a read_time before the newest
-- commit is then refused). Turning it on starts the history now: earlier times stay unreadable.
-- Waits for the transactions writing documents (SHARE on entities), so every write that commits
-- after the history's start keeps its versions. Administrators only (sql/roles.sql).
create function docstore.set_version_retention(id text, retention interval) returns void
language plpgsql as $$
begin
    if retention is null or retention < interval '0' then
        raise exception using errcode = '22023',
            message = 'version_retention must be an interval of 0 or more';
    end if;
    lock table docstore.entities in share mode;
    update docstore.databases d
       set version_retention = retention,
           versions_since = case when d.version_retention = interval '0'
                                 then clock_timestamp() else d.versions_since end
     where d.id = set_version_retention.id;
    if not found then
        raise exception using errcode = '22023',
            message = format('database ''%s'' is not in docstore.databases (docstore.create_database)', id);
    end if;
end $$;

-- Delete the versions past their database's retention, at most max_rows per database (one range
-- of entity_versions_by_time each): bounded work, which the background worker repeats every
-- minute (docs/storage.md, "Version history"). Returns how many were deleted.
create function docstore.purge_versions(max_rows bigint default 10000) returns bigint
language sql as $$
    with expired as (
        select x.row from docstore.databases d
        cross join lateral (
            select e.ctid as row from docstore.entity_versions e
            where e.database_id = d.id
              and e.superseded_time < clock_timestamp() - d.version_retention
            order by e.superseded_time limit max_rows) x),
    gone as (
        delete from docstore.entity_versions
        where ctid = any(array(select row from expired)) returning 1)
    select count(*) from gone
$$;
revoke execute on function docstore.set_version_retention(text, interval),
    docstore.purge_versions(bigint) from public, docstore_client;
-- pg_docstore::api::history::get_document_at
CREATE  FUNCTION docstore."get_document_at"(
	"path" TEXT, /* &str */
	"read_time" timestamp with time zone /* TimestampWithTimeZone */
) RETURNS TABLE (
	"data" jsonb,  /* JsonbOut */
	"create_time" timestamp with time zone,  /* TimestampWithTimeZone */
	"update_time" timestamp with time zone  /* TimestampWithTimeZone */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'get_document_at_wrapper';

-- pg_docstore::api::history::run_query_at
CREATE  FUNCTION docstore."run_query_at"(
	"structured" jsonb, /* TypedJsonb */
	"read_time" timestamp with time zone /* TimestampWithTimeZone */
) RETURNS TABLE (
	"path" TEXT,  /* String */
	"data" jsonb,  /* JsonbOut */
	"update_time" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'run_query_at_wrapper';

-- pg_docstore::api::history::list_documents_at
CREATE  FUNCTION docstore."list_documents_at"(
	"collection" TEXT, /* &str */
	"read_time" timestamp with time zone /* TimestampWithTimeZone */
) RETURNS TABLE (
	"path" TEXT,  /* String */
	"data" jsonb,  /* JsonbOut */
	"create_time" timestamp with time zone,  /* TimestampWithTimeZone */
	"update_time" timestamp with time zone  /* TimestampWithTimeZone */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'list_documents_at_wrapper';

-- pg_docstore::api::history::child_ids_at
CREATE  FUNCTION docstore."child_ids_at"(
	"parent" TEXT, /* &str */
	"read_time" timestamp with time zone /* TimestampWithTimeZone */
) RETURNS TABLE (
	"id" TEXT,  /* String */
	"direct" bool  /* bool */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'child_ids_at_wrapper';
grant execute on function docstore.get_document_at(text, timestamptz),
    docstore.run_query_at(jsonb, timestamptz), docstore.list_documents_at(text, timestamptz),
    docstore.child_ids_at(text, timestamptz) to docstore_client;

-- Issue 26: query, run_query and run_query_at also return each document's create_time (a
-- fourth column, after update_time). A function's result type cannot be replaced: dropped and
-- created again, with its grant.
DROP FUNCTION docstore."query"(text);
-- pg_docstore::api::query::query
CREATE  FUNCTION docstore."query"(
	"text" TEXT /* & str */
) RETURNS TABLE (
	"path" TEXT,  /* String */
	"data" jsonb,  /* JsonbOut */
	"update_time" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"create_time" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'query_wrapper';

DROP FUNCTION docstore."run_query"(jsonb);
-- pg_docstore::api::query::run_query
CREATE  FUNCTION docstore."run_query"(
	"structured" jsonb /* TypedJsonb */
) RETURNS TABLE (
	"path" TEXT,  /* String */
	"data" jsonb,  /* JsonbOut */
	"update_time" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"create_time" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'run_query_wrapper';

DROP FUNCTION docstore."run_query_at"(jsonb, timestamptz);
-- pg_docstore::api::history::run_query_at
CREATE  FUNCTION docstore."run_query_at"(
	"structured" jsonb, /* TypedJsonb */
	"read_time" timestamp with time zone /* TimestampWithTimeZone */
) RETURNS TABLE (
	"path" TEXT,  /* String */
	"data" jsonb,  /* JsonbOut */
	"update_time" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"create_time" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'run_query_at_wrapper';
grant execute on function docstore.query(text), docstore.run_query(jsonb),
    docstore.run_query_at(jsonb, timestamptz) to docstore_client;
