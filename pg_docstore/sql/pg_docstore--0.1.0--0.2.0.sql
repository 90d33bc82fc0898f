-- pg_docstore 0.1.0 -> 0.2.0 (ALTER EXTENSION pg_docstore UPDATE). Released upgrade scripts are
-- never edited; each change to the extension's SQL adds its statements here, under a comment
-- naming the change, until 0.2.0 is tagged. scripts/upgrade.sh checks that a 0.1.0 database
-- brought up to date by this script has the schema of a fresh 0.2.0 install.
\echo Use "ALTER EXTENSION pg_docstore UPDATE" to load this file. \quit
