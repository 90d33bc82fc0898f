-- The sidecar's login role (docs/security.md, "The sidecar's role"): LOGIN, REPLICATION, not a
-- superuser, a member of docstore_service (the group role `create extension pg_docstore`
-- creates, with every right the sidecar uses). An operator runs it once per cluster, as a
-- superuser (only superusers create REPLICATION roles), after the extension was created:
--
--   psql -d docstore -v password="$SECRET" -f sql/sidecar_role.sql [-v role=NAME] [-v dev_mode=on]
--
-- With `-v dev_mode=on` (for a sidecar run with --dev-mode, as under `make up`; never in
-- production) the role may also create a database a request names
-- (docstore.create_database_for_dev, docs/grpc.md "Names"); without it that right is revoked.
-- then points the sidecar at postgresql://docstore_sidecar:$SECRET@host:port/docstore. Roles are
-- cluster-wide, so this is not part of the extension (which holds no password and creates no
-- login); the grants it relies on are the extension's, in every database it is created in.
-- Running it again sets the password and attributes again (a password rotation).
\set ON_ERROR_STOP on
\if :{?role}
\else
\set role docstore_sidecar
\endif
\if :{?dev_mode}
\else
\set dev_mode off
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
\if :dev_mode
grant execute on function docstore.create_database_for_dev(text) to :"role";
\else
revoke execute on function docstore.create_database_for_dev(text) from :"role";
\endif
