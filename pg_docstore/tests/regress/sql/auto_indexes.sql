-- Automatic composite indexes (docs/query.md): a per-database option, off by default. With it
-- on, a query that needs a composite index creates exactly the index its 55000 error names,
-- builds it in the query's transaction and answers; with it off, the error is unchanged.
create function public.hint_of(statement text) returns text language plpgsql as $$
declare
  message text;
  hint text;
begin
  execute statement;
  return 'ok';
exception when others then
  get stacked diagnostics message = message_text, hint = pg_exception_hint;
  return sqlstate || ': ' || message || ' | hint: ' || coalesce(hint, '');
end $$;
select auto_composite_indexes from docstore.databases where id = '(default)';
select docstore.create_database('auto-on');
select docstore.create_database('auto-off');
select auto_composite_indexes from docstore.databases where id in ('auto-on', 'auto-off');

-- The same documents in both.
set docstore.database = 'auto-off';
select docstore.commit('[
  {"set": "shops/a", "data": {"city": "SF", "rating": 4, "type": "BBQ"}},
  {"set": "shops/b", "data": {"city": "SF", "rating": 5, "type": "Thai"}},
  {"set": "shops/c", "data": {"city": "LA", "rating": 3, "type": "BBQ"}},
  {"set": "shops/d", "data": {"city": "SF", "rating": 2, "type": "BBQ"}},
  {"set": "malls/m/shops/e", "data": {"city": "SF", "rating": 1, "type": "BBQ"}}]') ? 'commitTime' as seeded;
set docstore.database = 'auto-on';
select docstore.commit('[
  {"set": "shops/a", "data": {"city": "SF", "rating": 4, "type": "BBQ"}},
  {"set": "shops/b", "data": {"city": "SF", "rating": 5, "type": "Thai"}},
  {"set": "shops/c", "data": {"city": "LA", "rating": 3, "type": "BBQ"}},
  {"set": "shops/d", "data": {"city": "SF", "rating": 2, "type": "BBQ"}},
  {"set": "malls/m/shops/e", "data": {"city": "SF", "rating": 1, "type": "BBQ"}}]') ? 'commitTime' as seeded;

-- Off: the missing-index error as before, hint included; nothing is created.
set docstore.database = 'auto-off';
select hint_of($$select * from docstore.query('select * from /shops where city = "SF" order by rating desc')$$) as off;
select count(*) as no_index from docstore.list_indexes();
-- The reference: the same query after a manual create_index and build.
select docstore.create_index('shops', '[{"field": "city"}, {"field": "rating", "order": "desc"}]') > 0 as created;
call docstore.build_indexes();
create temp table manual as
  select row_number() over () as n, path, data
  from docstore.query('select * from /shops where city = "SF" order by rating desc');
select n, path from manual order by n;

-- On (the cap is set too: pass the current one, NULL here).
select docstore.set_database_options('auto-on', null, auto_composite_indexes => true);
select auto_composite_indexes, max_query_results from docstore.databases where id = 'auto-on';
set docstore.database = 'auto-on';
create temp table auto as
  select row_number() over () as n, path, data
  from docstore.query('select * from /shops where city = "SF" order by rating desc');
select count(*) as rows, bool_and(m.path is not null and m.path = a.path and m.data = a.data) as same_as_manual
  from auto a full join manual m using (n);
-- Exactly the index the error named, READY, backfilled.
select collection_group, scope, fields, state, documents_done from docstore.list_indexes();
-- Used from now on; writes maintain it.
select docstore.set('shops/f', '{"city": "SF", "rating": 3}') is not null as written;
select string_agg(path, ' ') as with_new_doc
  from docstore.query('select * from /shops where city = "SF" order by rating desc');
select count(*) as still_one from docstore.list_indexes();
select * from docstore.check_indexes();

-- run_query, an aggregation, and a collection-group query each create theirs.
select coalesce(string_agg(path, ' '), '-') as run_query from docstore.run_query('{"from": [{"collectionId": "shops"}], "where": {"fieldFilter": {"field": {"fieldPath": "type"}, "op": "EQUAL", "value": "BBQ"}}, "orderBy": [{"field": {"fieldPath": "rating"}}]}');
select data as aggregation from docstore.query('select count(*) from /shops where city = "SF" and type > "B"');
select string_agg(path, ' ') as group_query
  from docstore.query('select * from group(shops) where type = "BBQ" order by rating');
select collection_group, scope, fields, state from docstore.list_indexes() order by id;

-- A client's query creates the index with the extension owner's rights (clients may not call
-- create_index); rolled back, the index is gone with the transaction.
select docstore.set_rules('rules_version = ''2''; service cloud.firestore { match /databases/{d}/documents { match /{doc=**} { allow read, write: if true; } } }');
begin;
set local role docstore_client;
select sqlstate_of($$select docstore.create_index('shops', '[{"field": "type"}, {"field": "city"}]')$$) as client_create_index;
rollback;
begin;
set local role docstore_client;
select string_agg(path, ' ') as client_query
  from docstore.query('select * from /shops where type = "BBQ" order by city desc');
reset role;
select count(*) filter (where state = 'READY') as ready_in_transaction from docstore.list_indexes();
rollback;
select count(*) as after_rollback from docstore.list_indexes();

-- Where nothing may be written or the transaction reads at one snapshot: the 55000 error with
-- a hint saying why no index was created, and nothing created.
begin read only;
select hint_of($$select * from docstore.query('select * from /shops where rating = 3 order by city')$$) as read_only;
rollback;
begin isolation level repeatable read;
select hint_of($$select * from docstore.query('select * from /shops where rating = 3 order by city')$$) as repeatable_read;
rollback;
select count(*) as unchanged from docstore.list_indexes();

-- NULL keeps the option; false turns it off again.
select docstore.set_database_options('auto-on', null);
select auto_composite_indexes as kept from docstore.databases where id = 'auto-on';
select docstore.set_database_options('auto-on', null, false);
select auto_composite_indexes as off_again from docstore.databases where id = 'auto-on';
select hint_of($$select * from docstore.query('select * from /shops where rating = 3 order by city')$$) as off_again;
-- A client may not set it.
begin;
set local role docstore_client;
select sqlstate_of($$select docstore.set_database_options('auto-on', null, true)$$) as client;
rollback;
select auto_composite_indexes as unchanged from docstore.databases where id = 'auto-on';

select docstore.drop_database('auto-on'), docstore.drop_database('auto-off');
reset docstore.database;
