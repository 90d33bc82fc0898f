-- pg_docstore storage: Firestore's fixed Entities / IndexEntries layout (docs/storage.md).
-- Hand-written; loaded first when the extension is created. Objects live in schema docstore.
-- Every table carries the database id: several Firestore databases share one Postgres database.

-- The database of this session: `set docstore.database = 'name'`; default '(default)'.
create function docstore.current_database_id() returns text
language sql stable parallel safe
as $$ select coalesce(nullif(current_setting('docstore.database', true), ''), '(default)') $$;

-- One row per document.
create table docstore.entities (
    database_id   text collate "C" not null,
    -- encoded document name: segment by segment, so byte order is Firestore's name order
    name          bytea not null,
    -- encoded parent collection path: one collection is one range of (database_id, parent, name)
    parent        bytea not null,
    -- last segment of the parent path: one collection group is one range of
    -- (database_id, collection_id, name)
    collection_id text collate "C" not null,
    path          text collate "C" not null,
    data          jsonb not null,
    create_time   timestamptz not null,
    update_time   timestamptz not null,
    primary key (database_id, name)
) with (fillfactor = 90);
create index entities_by_collection on docstore.entities (database_id, parent, name);
create index entities_by_group on docstore.entities (database_id, collection_id, name);
-- The change stream carries a document's previous version with every update and delete: the
-- exact `before` of write triggers (docs/triggers.md; its WAL cost is in BENCHMARKS.md).
alter table docstore.entities replica identity full;

-- One row per index entry; the key's byte order is the index order (docs/storage.md).
create table docstore.index_entries (
    database_id text collate "C" not null,
    key         bytea not null,
    -- the entity this entry points at (entities.name)
    name        bytea not null,
    primary key (database_id, key)
);
-- Keys are never compressed, in the table or in its btree (the setting reaches the primary
-- key's column): Postgres would try pglz on every key over ~500 bytes, a long string value's,
-- and keep the result only when it saved a quarter, while every later comparison of a
-- compressed key would decompress it. Instead a key has a fixed limit of 2,600 bytes
-- (docstore_core::index::MAX_ENTRY_KEY_BYTES), which the btree's 2,704-byte rows always hold.
alter table docstore.index_entries alter column key set storage external;

-- Claims on the names of documents being created (storage::entities::lock_missing): a writer
-- of a document that does not exist yet inserts its name here and deletes it at once; a second
-- writer of the name waits in the primary key's unique check until the first transaction ends.
-- Never holds a live row after a transaction, so it is unlogged and not dumped.
create unlogged table docstore.creating (
    database_id text collate "C" not null,
    name        bytea not null,
    primary key (database_id, name)
);

-- Composite (and collection-group single-field) index definitions and their build state.
create table docstore.indexes (
    id               serial primary key,
    database_id      text collate "C" not null,
    collection_group text collate "C" not null,
    scope            text not null check (scope in ('collection', 'collection_group')),
    fields           jsonb not null,
    -- CREATING: maintained by writes, being backfilled, not used by queries.
    -- READY: maintained and used. DELETING: neither; entries being removed.
    -- NEEDS_REPAIR (Firestore's name): the backfill met a document whose entry is over the key
    -- limit; neither maintained nor used, some entries may exist; drop it to remove them.
    state            text not null default 'CREATING'
                     check (state in ('CREATING', 'READY', 'DELETING', 'NEEDS_REPAIR')),
    -- why a build stopped (NEEDS_REPAIR)
    error            text,
    -- backfill progress: the last entity name done (resumable after a crash or cancel)
    backfill_cursor  bytea,
    documents_done   bigint not null default 0,
    created_at       timestamptz not null default clock_timestamp(),
    ready_at         timestamptz
);
create unique index indexes_unique_definition
    on docstore.indexes (database_id, collection_group, scope, fields) where state <> 'DELETING';

-- Field paths with no automatic index entries (inherited by subfields).
create table docstore.field_exemptions (
    database_id      text collate "C" not null,
    collection_group text collate "C" not null,
    field_path       text collate "C" not null,
    created_at       timestamptz not null default clock_timestamp(),
    primary key (database_id, collection_group, field_path)
);

-- The Firestore databases that exist (the sidecar answers 404 for any other id). The SQL
-- functions work for any valid id (`set docstore.database`); docstore.create_database and
-- docstore.drop_database keep this list. max_query_results: the most documents one client query
-- may return (NULL: no cap); auto_composite_indexes: a query that needs a composite index
-- creates and builds it (off by default); both set by docstore.set_database_options
-- (docs/storage.md).
create table docstore.databases (
    id                     text collate "C" primary key,
    created_at             timestamptz not null default now(),
    max_query_results      bigint check (max_query_results > 0),
    auto_composite_indexes boolean not null default false,
    -- How long superseded document versions are kept for reads at a past read_time
    -- (docstore.set_version_retention; 0: none kept); since when the history is complete.
    version_retention      interval not null default interval '1 hour'
                           check (version_retention >= interval '0'),
    versions_since         timestamptz not null default now()
);
insert into docstore.databases (id) values ('(default)');

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

-- Ad-hoc SQL over the documents of the session's database, with the rights of the caller
-- (security_invoker: row-level security on entities applies to whoever reads the view).
create view docstore.documents with (security_invoker = true) as
select e.path,
       -- the collection path: the path without its last segment
       left(e.path, length(e.path) - length(regexp_replace(e.path, '^.*/', '')) - 1) as collection,
       e.collection_id,
       e.data,
       e.create_time,
       e.update_time
from docstore.entities e
where e.database_id = docstore.current_database_id();

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

comment on table docstore.entities is 'pg_docstore documents (write through docstore.set/update/commit, never directly)';
comment on table docstore.index_entries is 'pg_docstore index entries (maintained by every docstore write)';
comment on table docstore.entity_versions is 'pg_docstore superseded document versions, kept for version_retention (maintained by every docstore write)';
comment on view docstore.documents is 'The documents of the current docstore database (SET docstore.database)';

-- Backups: the tables of an extension are not dumped unless registered, so pg_dump would write
-- every definition and no document. Registered, their rows (and the index id sequence) are
-- dumped and restored after `create extension` (docs/storage.md, "Backups"). The '(default)'
-- database row is created by the extension itself, so it is left out of the dump.
select pg_catalog.pg_extension_config_dump('docstore.entities', '');
select pg_catalog.pg_extension_config_dump('docstore.index_entries', '');
select pg_catalog.pg_extension_config_dump('docstore.indexes', '');
select pg_catalog.pg_extension_config_dump('docstore.indexes_id_seq', '');
select pg_catalog.pg_extension_config_dump('docstore.field_exemptions', '');
select pg_catalog.pg_extension_config_dump('docstore.databases', $$where id <> '(default)'$$);
