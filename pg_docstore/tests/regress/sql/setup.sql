-- Run first by scripts/regress.sh in a fresh database: the extension and test helpers. In a
-- database that scripts/upgrade.sh brought to this version the extension is already there.
set client_min_messages = warning;
create extension if not exists pg_docstore;
reset client_min_messages;
-- Runs a statement and reports its SQLSTATE and message instead of failing the script.
create function public.sqlstate_of(statement text) returns text language plpgsql as $$
begin
  execute statement;
  return 'ok';
exception when others then
  return sqlstate || ': ' || sqlerrm;
end $$;
