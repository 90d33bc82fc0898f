-- Security rules (docs/rules.md): the stored rulesets, the primitives the
-- compiled SQL calls, and the function behind the row-level-security policy (roles.sql creates
-- the policies, which name the docstore_client role).

-- One ruleset per database id. docstore.set_rules() compiles before it writes here; the
-- trigger below regenerates docstore.rules_policy after every change (pg_restore's COPY too).
create table docstore.rules (
    database_id text collate "C" primary key,
    source      text not null,
    updated_at  timestamptz not null default now()
);
comment on table docstore.rules is 'pg_docstore security rules, one ruleset per database id (write through docstore.set_rules)';
select pg_catalog.pg_extension_config_dump('docstore.rules', '');

-- docstore.rules_<name> for every primitive of the rules crate's catalog: LANGUAGE sql
-- wrappers Postgres inlines into the calling expression, over the five Rust entry points. The
-- variadic ones (list, map, path) are not STRICT: a NULL (error) element makes the result NULL.
do $$
declare
    p record;
    params text;
    args text;
begin
    for p in select name, arity from docstore.rules_catalog() loop
        if p.arity < 0 then
            execute format(
                'create function docstore.%I(variadic a jsonb[]) returns jsonb language sql immutable parallel safe as %L',
                'rules_' || p.name,
                format('select case when array_position(a, null) is null then docstore.rules_primv(%L, to_jsonb(a)) end', p.name));
        else
            select string_agg(chr(96 + i) || ' jsonb', ', '), string_agg(chr(96 + i), ', ')
              into params, args from generate_series(1, p.arity) i;
            execute format(
                'create function docstore.%I(%s) returns jsonb language sql immutable strict parallel safe as %L',
                'rules_' || p.name, params,
                format('select docstore.rules_prim%s(%L, %s)', p.arity, p.name, args));
        end if;
    end loop;
end $$;

-- Whether the row may be read by the current docstore_client: the per-document `list` rule of
-- the row's database (rules::policy regenerates this body). Locked (false) for a database
-- without rules or not listed in docstore.databases. SECURITY
-- DEFINER so that its get()/exists() (docstore.rules_lookup, which clients may not call) read
-- documents as the owner; its search_path is fixed, as a definer's must be.
create function docstore.rules_policy(database_id text, path text, data jsonb) returns boolean
language sql stable parallel safe security definer set search_path = pg_catalog, pg_temp
as $$ select false $$;

create function docstore.rules_changed() returns trigger language plpgsql as $$
begin
    perform docstore.rules_install();
    return null;
end $$;
create trigger rules_changed after insert or update or delete or truncate on docstore.rules
    for each statement execute function docstore.rules_changed();
-- Only the rules of listed databases count: creating or dropping one regenerates the policy
-- and invalidates every backend's ruleset cache as a change of the rules does.
create trigger databases_changed after insert or update or delete or truncate on docstore.databases
    for each statement execute function docstore.rules_changed();
