-- pg_docstore 0.1.0 -> 0.2.0 (ALTER EXTENSION pg_docstore UPDATE). Released upgrade scripts are
-- never edited; each change to the extension's SQL adds its statements here, under a comment
-- naming the change, until 0.2.0 is tagged. scripts/upgrade.sh checks that a 0.1.0 database
-- brought up to date by this script has the schema of a fresh 0.2.0 install.
\echo Use "ALTER EXTENSION pg_docstore UPDATE" to load this file. \quit

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
