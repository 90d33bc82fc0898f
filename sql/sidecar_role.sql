-- The sidecar's login role (docs/security.md, "The sidecar's role"): LOGIN, REPLICATION, not a
-- superuser, a member of docstore_service (the group role `create extension pg_docstore`
-- creates, with every right the sidecar uses). An operator runs it once per cluster, as a
-- superuser (only superusers create REPLICATION roles), after the extension was created:
--
--   psql -d docstore -v password="$SECRET" -f sql/sidecar_role.sql [-v role=NAME]
--
-- then points the sidecar at postgresql://docstore_sidecar:$SECRET@host:port/docstore. Roles are
-- cluster-wide, so this is not part of the extension (which holds no password and creates no
-- login); the grants it relies on are the extension's, in every database it is created in.
-- Running it again sets the password and attributes again (a password rotation).
\set ON_ERROR_STOP on
\if :{?role}
\else
\set role docstore_sidecar
\endif
\if :{?password}
\else
do $$ begin
    raise exception 'sql/sidecar_role.sql needs a password: psql -v password=... -f sql/sidecar_role.sql';
end $$;
\endif
select not exists (select from pg_catalog.pg_roles where rolname = 'docstore_service') as no_group \gset
\if :no_group
do $$ begin
    raise exception 'role docstore_service does not exist: create extension pg_docstore first';
end $$;
\endif
select not exists (select from pg_catalog.pg_roles where rolname = :'role') as missing \gset
\if :missing
create role :"role" login replication inherit nosuperuser nocreatedb nocreaterole
    password :'password';
\else
alter role :"role" login replication inherit nosuperuser nocreatedb nocreaterole
    password :'password';
\endif
comment on role :"role" is 'pg_docstore: the sidecar''s login (sql/sidecar_role.sql)';
grant docstore_service to :"role";
