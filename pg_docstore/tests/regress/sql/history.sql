-- Version history and reads at a past time (docs/storage.md, "Version history").
select docstore.drop_database('hist') is not null;
select docstore.create_database('hist');
set docstore.database = 'hist';
create function pg_temp.err(statement text) returns text language sql as $$
  select regexp_replace(public.sqlstate_of(statement), '\d{4}-\d\d-\d\dT[0-9:.]+Z', 'T', 'g') $$;
-- A new database keeps one hour of versions, complete since its creation.
select version_retention, versions_since <= now() from docstore.databases where id = 'hist';
-- A document updated twice and deleted; another one created in between; a subcollection.
select docstore.set('h/a', '{"n": 1, "tag": "x"}') as t1 \gset
select docstore.set('h/a', '{"n": 2, "tag": "y"}') as t2 \gset
select docstore.set('h/b', '{"n": 5, "tag": "x"}') as t3 \gset
select docstore.update('h/a', '{"n": 3}') as t4 \gset
select docstore.set('h/a/sub/x', '{"n": 9}') as t5 \gset
select docstore.delete('h/a');
select docstore.last_commit_time() as t6 \gset
-- Each superseded version once, ended by the next commit's time.
select path, data, update_time < superseded_time from docstore.entity_versions
 where database_id = 'hist' order by superseded_time;
-- The document at each time: none before it existed, each version, none after the delete.
select data from docstore.get_document_at('h/a', :'t1'::timestamptz - interval '1 microsecond');
select data, create_time = :'t1', update_time = :'t1' from docstore.get_document_at('h/a', :'t1');
select data, create_time = :'t1', update_time = :'t2' from docstore.get_document_at('h/a', :'t3');
select data from docstore.get_document_at('h/a', :'t4');
select data from docstore.get_document_at('h/a', :'t5');
select data from docstore.get_document_at('h/a', :'t6');
select data from docstore.get_document_at('h/b', :'t2');
select data from docstore.get_document_at('h/b', :'t6');
-- A query at a time: filters, order, limit, cursors, projections and aggregations as now.
select path, data from docstore.run_query_at('{"from": [{"collectionId": "h"}]}', :'t3');
select path, data from docstore.run_query_at('{"from": [{"collectionId": "h"}], "where": {"fieldFilter": {"field": {"fieldPath": "n"}, "op": "GREATER_THAN", "value": 2}}}', :'t4');
select path, data from docstore.run_query_at('{"from": [{"collectionId": "h"}], "orderBy": [{"field": {"fieldPath": "n"}, "direction": "DESCENDING"}], "limit": 1}', :'t3');
select path, data from docstore.run_query_at('{"from": [{"collectionId": "h"}], "orderBy": [{"field": {"fieldPath": "n"}}], "startAt": {"values": [3], "before": false}}', :'t3');
select path, data from docstore.run_query_at('{"select": {"fields": [{"fieldPath": "tag"}]}, "from": [{"collectionId": "h"}], "where": {"fieldFilter": {"field": {"fieldPath": "tag"}, "op": "EQUAL", "value": "x"}}}', :'t4');
select path, data from docstore.run_query_at('{"structuredAggregationQuery": {"structuredQuery": {"from": [{"collectionId": "h"}]}, "aggregations": [{"alias": "c", "count": {}}, {"alias": "s", "sum": {"field": {"fieldPath": "n"}}}]}}', :'t4');
select path, data from docstore.run_query_at('{"from": [{"collectionId": "sub", "allDescendants": true}]}', :'t4');
select path, data from docstore.run_query_at('{"from": [{"collectionId": "sub", "allDescendants": true}]}', :'t6');
-- A kindless query at a time (every collection, python-firestore's recursive()): every document
-- under the parent as it was then, in name order, bounded by __name__ cursors.
select path, data from docstore.run_query_at('{"from": [{"collectionId": "", "allDescendants": true}]}', :'t5');
select path, data from docstore.run_query_at('{"from": [{"collectionId": "", "allDescendants": true}]}', :'t6');
select path, data from docstore.run_query_at('{"parent": "h/a", "from": [{"collectionId": "", "allDescendants": true}]}', :'t5');
select path, data from docstore.run_query_at('{"from": [{"collectionId": "", "allDescendants": true}], "orderBy": [{"field": {"fieldPath": "__name__"}}], "startAt": {"values": ["h/a/sub/__id-9223372036854775808__"], "before": true}, "endAt": {"values": ["h/a/sub\u0001/__id-9223372036854775808__"], "before": false}}', :'t5');
select path, data from docstore.run_query_at('{"from": [{"collectionId": "", "allDescendants": true}], "where": {"fieldFilter": {"field": {"fieldPath": "__name__"}, "op": "GREATER_THAN", "value": "h/a"}}, "limit": 1}', :'t5');
select path, data from docstore.run_query_at('{"structuredAggregationQuery": {"structuredQuery": {"from": [{"collectionId": "", "allDescendants": true}]}, "aggregations": [{"alias": "c", "count": {}}]}}', :'t5');
-- Listings at a time: the documents of a collection, the collections under a document (or the
-- root) and, under a collection, the ids with descendants.
select path, data from docstore.list_documents_at('h', :'t3');
select path, data from docstore.list_documents_at('h', :'t6');
select * from docstore.child_ids_at('', :'t1');
select * from docstore.child_ids_at('h', :'t4');
select * from docstore.child_ids_at('h', :'t6');
select * from docstore.child_ids_at('h/a', :'t6');
-- Bad read times: in the future (22023); before the history starts (55000); bad paths (22023).
select pg_temp.err($$select * from docstore.get_document_at('h/a', now() + interval '1 hour')$$);
select pg_temp.err($$select * from docstore.run_query_at('{"from": [{"collectionId": "h"}]}', now() - interval '1 day')$$);
select pg_temp.err($$select * from docstore.list_documents_at('h/a', now())$$);
select pg_temp.err($$select * from docstore.get_document_at('h', now())$$);
-- Older than the retention (55000): shorten it to a minute and read two minutes back, after
-- moving the history's start back too.
update docstore.databases set versions_since = now() - interval '1 day' where id = 'hist';
select docstore.set_version_retention('hist', '1 minute');
select pg_temp.err($$select * from docstore.get_document_at('h/a', now() - interval '2 minutes')$$);
-- The purge deletes what is past the retention only: age one version by two minutes.
update docstore.entity_versions set superseded_time = superseded_time - interval '2 minutes'
 where database_id = 'hist' and update_time = :'t1';
select docstore.purge_versions();
select count(*) from docstore.entity_versions where database_id = 'hist';
select docstore.set_version_retention('hist', '1 hour');
select docstore.purge_versions();
-- Retention 0: no versions are written, a time before the newest commit is refused (55000), one
-- at or after it reads the current documents; the purge drops the kept versions.
select docstore.set_version_retention('hist', '0');
select docstore.purge_versions();
select docstore.set('h/b', '{"n": 6}') as t7 \gset
select count(*) from docstore.entity_versions where database_id = 'hist';
select pg_temp.err(format($$select * from docstore.get_document_at('h/b', %L)$$, :'t3'));
select data from docstore.get_document_at('h/b', docstore.last_commit_time());
-- Turned on again, the history starts then: earlier times stay refused.
select docstore.set_version_retention('hist', '1 hour');
select versions_since > :'t7' from docstore.databases where id = 'hist';
select pg_temp.err(format($$select * from docstore.get_document_at('h/b', %L)$$, :'t3'));
select docstore.set('h/b', '{"n": 7}') as t8 \gset
select data from docstore.get_document_at('h/b', :'t8'::timestamptz - interval '1 microsecond');
-- Nothing half written: a batch that fails keeps no version.
select pg_temp.err($$select docstore.commit('[{"set": "h/b", "data": {"n": 8}}, {"update": "h/missing", "fields": {"n": 1}}]')$$);
select count(*) from docstore.entity_versions where database_id = 'hist';
select data from docstore.get_document('h/b');
-- Bad settings (22023), and only administrators change them or list at a time (42501).
select pg_temp.err($$select docstore.set_version_retention('nope', '1 hour')$$);
select pg_temp.err($$select docstore.set_version_retention('hist', '-1 hour')$$);
begin;
set local role docstore_client;
select pg_temp.err($$select docstore.set_version_retention('hist', '0')$$);
select pg_temp.err($$select * from docstore.list_documents_at('h', now())$$);
select pg_temp.err($$select * from docstore.child_ids_at('', now())$$);
-- A client's read at a time is decided by the rules: this database has none (42501).
select pg_temp.err($$select * from docstore.get_document_at('h/b', now())$$);
select pg_temp.err($$select * from docstore.run_query_at('{"from": [{"collectionId": "h"}]}', now())$$);
select pg_temp.err($$select count(*) from docstore.entity_versions$$);
rollback;
-- With rules, a client's read at a time is decided on the document as it was: the get rule
-- allows alice's notes only, and notes/n was alice's before bob took it; a query's list rule
-- decides the query (here: alice's notes only).
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /notes/{id} {
    allow get: if resource == null || resource.data.owner == request.auth.uid;
    allow list: if request.auth.uid == 'alice';
  } } }$$, 'hist');
select docstore.set('notes/n', '{"owner": "alice"}') as t9 \gset
select docstore.set('notes/n', '{"owner": "bob"}') is not null;
begin;
select set_config('docstore.auth', '{"sub": "alice"}', true);
set local role docstore_client;
select data from docstore.get_document_at('notes/n', :'t9');
select pg_temp.err($$select * from docstore.get_document('notes/n')$$);
select path, data from docstore.run_query_at('{"from": [{"collectionId": "notes"}]}', :'t9');
-- A kindless query at a time is for administrators, as now (42501).
select pg_temp.err(format($$select * from docstore.run_query_at('{"from": [{"collectionId": "", "allDescendants": true}]}', %L)$$, :'t9'));
rollback;
begin;
select set_config('docstore.auth', '{"sub": "bob"}', true);
set local role docstore_client;
select pg_temp.err(format($$select * from docstore.get_document_at('notes/n', %L)$$, :'t9'));
select pg_temp.err(format($$select * from docstore.run_query_at('{"from": [{"collectionId": "notes"}]}', %L)$$, :'t9'));
rollback;
-- Dropping the database drops its versions.
select docstore.drop_database('hist');
select count(*) from docstore.entity_versions where database_id = 'hist';
reset docstore.database;
