-- Queries run with the caller's rights on documents (entities); index entries, which hold
-- every document's field values, are never readable by client roles, yet their queries use them.
drop role if exists docstore_test_client;
drop role if exists docstore_test_outsider;
create role docstore_test_client;
create role docstore_test_outsider;
grant usage on schema docstore to docstore_test_client, docstore_test_outsider;
grant select on docstore.entities to docstore_test_client;
select docstore.commit('[{"set": "acl/a", "data": {"x": 1, "y": "a"}}, {"set": "acl/b", "data": {"x": 1, "y": "b"}},
                         {"set": "acl/c", "data": {"x": 2, "y": "c"}}]') ? 'commitTime';
begin;
set local role docstore_test_client;
select sqlstate_of('select count(*) from docstore.index_entries');
select sqlstate_of('select count(*) from docstore.indexes');
select path from docstore.query('select * from /acl where x = 1');
select path from docstore.query('select * from /acl where x = 1 and y = "b"');
select data from docstore.query('select count(*) from /acl where x = 1');
select path from docstore.query('select * from /acl order by y desc limit 2');
rollback;
-- no right on the documents: the query is refused, nothing leaks from the index
begin;
set local role docstore_test_outsider;
select sqlstate_of($$select count(*) from docstore.query('select * from /acl where x = 1')$$);
select sqlstate_of($$select data from docstore.query('select count(*) from /acl where x = 1')$$);
rollback;
revoke all on docstore.entities from docstore_test_client;
revoke all on schema docstore from docstore_test_client, docstore_test_outsider;
drop role docstore_test_client;
drop role docstore_test_outsider;
select * from docstore.check_indexes();
