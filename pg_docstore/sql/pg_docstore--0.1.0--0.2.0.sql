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
    using (docstore.rules_set(database_id) and docstore.rules_policy(database_id, path, data));
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
