-- Run first by scripts/regress.sh in a fresh database: the extension and test helpers.
create extension pg_docstore;
-- Runs a statement and reports its SQLSTATE and message instead of failing the script.
create function public.sqlstate_of(statement text) returns text language plpgsql as $$
begin
  execute statement;
  return 'ok';
exception when others then
  return sqlstate || ': ' || sqlerrm;
end $$;
