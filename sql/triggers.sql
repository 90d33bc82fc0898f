-- Write triggers (docs/triggers.md): the triggers, the changes recorded for their delivery and
-- the acknowledgements of exactly-once effects. Administrators write them through
-- docstore.create_trigger / drop_trigger / retry_trigger; clients have no rights on them
-- (roles.sql), so a trigger's secret is never readable by docstore_client.

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
    -- how many trigger deliveries led to this change: 0 for a client's or psql's write, d + 1
    -- for a write an exactly-once endpoint answered to a change of depth d
    depth        integer not null default 0,
    primary key (trigger_name, change_id)
);
-- the deliverer's claim walks the due pending rows of every trigger in next_attempt order
create index trigger_deliveries_due on docstore.trigger_deliveries (next_attempt)
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
