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
-- reading is not writing: no document and no index entry is written (42501)
select sqlstate_of($$select docstore.add('acl', '{"x": 1}')$$);
select sqlstate_of($$select docstore.update('acl/a', '{"x": 5}')$$);
rollback;
-- no right on the documents: the query is refused, nothing leaks from the index
begin;
set local role docstore_test_outsider;
select sqlstate_of($$select count(*) from docstore.query('select * from /acl where x = 1')$$);
select sqlstate_of($$select data from docstore.query('select count(*) from /acl where x = 1')$$);
rollback;
-- Writes need rights on the documents only: index entries are maintained by the extension,
-- like an index, once the caller's write to entities has passed its rights.
grant insert, update, delete on docstore.entities to docstore_test_client;
begin;
set local role docstore_test_client;
select docstore.set('acl/w', '{"x": 1, "tags": ["a", "b"]}') is not null as set;
select docstore.update('acl/w', '{"x": {"$increment": 1}, "tags": {"$arrayRemove": ["a"]}}') is not null as updated;
select docstore.add('acl', '{"x": 2}') like 'acl/%' as added;
select docstore.commit('[{"create": "acl/v", "data": {"x": 3}}, {"delete": "acl/a"}]') ? 'commitTime' as committed;
select count(*) from docstore.query('select * from /acl where x = 2');
select path from docstore.query('select * from /acl where tags array_contains "b"');
select sqlstate_of('select count(*) from docstore.index_entries');
reset role;
select * from docstore.check_indexes();
rollback;
-- add() writes its document row below the executor only when an INSERT would check nothing
-- more; row-level security, triggers and check constraints on entities still apply
begin;
-- (the extension enables row-level security and its own policies are permissive, so an
-- administrator's policy restricts writes when it is AS RESTRICTIVE)
create policy marked on docstore.entities as restrictive to docstore_test_client using (true) with check (data ? 'mine');
set local role docstore_test_client;
select sqlstate_of($$select docstore.add('acl', '{"x": 1}')$$);
select docstore.add('acl', '{"mine": true}') like 'acl/%' as allowed;
reset role;
select count(*) from docstore.entities where path like 'acl/%' and data ? 'mine';
select * from docstore.check_indexes();
rollback;
begin;
create function public.refuse_x() returns trigger language plpgsql as $$
begin
  if new.data ? 'x' then raise exception 'no x here' using errcode = '23514'; end if;
  return new;
end $$;
create trigger refuse_x before insert on docstore.entities for each row execute function public.refuse_x();
select sqlstate_of($$select docstore.add('acl', '{"x": 1}')$$);
rollback;
begin;
alter table docstore.entities add constraint small_documents check (pg_column_size(data) < 200);
select sqlstate_of($$select docstore.add('acl', jsonb_build_object('big', repeat('x', 300)))$$);
rollback;
-- without the right to insert documents, nothing is written (42501)
begin;
set local role docstore_test_outsider;
select sqlstate_of($$select docstore.set('acl/o', '{"x": 1}')$$);
reset role;
select count(*) from docstore.entities where path = 'acl/o';
rollback;
revoke all on docstore.entities from docstore_test_client;
revoke all on schema docstore from docstore_test_client, docstore_test_outsider;
drop role docstore_test_client;
drop role docstore_test_outsider;
select * from docstore.check_indexes();
