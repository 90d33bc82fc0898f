-- The list check of queries (docs/rules.md, "Queries: rules are not filters"): docstore.query
-- and docstore.run_query by a client are decided once against the query's own constraints,
-- before anything is read. A query that could return a denied document fails with 42501
-- whatever the data; an allowed one returns every match. Plain SQL keeps the per-row filter.
select docstore.create_database('listcheck');
set docstore.database = 'listcheck';
select docstore.set_rules($rules$rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /posts/{p} {
      allow list: if resource.data.owner == request.auth.uid;
      allow list: if resource.data.public == true && request.query.limit <= 20;
    }
    match /rooms/{room} {
      allow list: if request.auth.uid in resource.data.members;
      match /messages/{m} {
        allow list: if request.auth.uid in get(/databases/$(database)/documents/rooms/$(room)).data.members;
      }
    }
    match /{path=**}/comments/{c} { allow list: if resource.data.visible == true; }
    match /{path=**}/tags/{t} { allow list: if request.auth != null; }
  }
}$rules$, 'listcheck');

-- Empty database: the decision does not depend on the data.
begin;
select set_config('docstore.auth', '{"sub": "alice"}', true);
set local role docstore_client;
select sqlstate_of($$select * from docstore.query('select * from /posts')$$) as unconstrained_on_empty;
select count(*) as own_on_empty from docstore.query($$select * from /posts where owner = 'alice'$$);
rollback;

-- Administrators (here the superuser) are not checked.
select count(*) from (select docstore.set('posts/p' || i, jsonb_build_object('owner', 'u' || (i % 3),
  'public', i % 2 = 0, 'n', i)) from generate_series(1, 12) i) s;
select docstore.commit($$[
  {"set": "posts/a1", "data": {"owner": "alice", "public": false, "n": 100}},
  {"set": "rooms/r1", "data": {"members": ["alice", "bob"]}},
  {"set": "rooms/r2", "data": {"members": ["carol"]}},
  {"set": "rooms/r1/messages/m1", "data": {"text": "hi"}},
  {"set": "rooms/r2/messages/m2", "data": {"text": "secret"}},
  {"set": "rooms/r1/comments/c1", "data": {"visible": true}},
  {"set": "rooms/r2/comments/c2", "data": {"visible": false}},
  {"set": "comments/c3", "data": {"visible": true}},
  {"set": "rooms/r1/tags/t1", "data": {}},
  {"set": "tags/t2", "data": {}}]$$) ? 'commitTime' as seeded;
select count(*) as admin_all_posts from docstore.query('select * from /posts');

begin;
select set_config('docstore.auth', '{"sub": "alice"}', true);
set local role docstore_client;
-- allowed: the query fixes what the rule reads
select path from docstore.query($$select * from /posts where owner = 'alice'$$);
select path from docstore.query('select * from /posts where public = true limit 3');
select path from docstore.run_query('{"from": [{"collectionId": "posts"}], "where": {"fieldFilter": {"field": {"fieldPath": "owner"}, "op": "EQUAL", "value": "alice"}}}');
-- refused whatever the data: no constraint, another owner, a limit over the rule's
select sqlstate_of($$select * from docstore.query('select * from /posts')$$) as unconstrained;
select sqlstate_of($$select * from docstore.query('select * from /posts where owner = ''u1''')$$) as other_owner;
select sqlstate_of($$select * from docstore.query('select * from /posts where public = true limit 21')$$) as limit_too_big;
-- refused: the rule reads a field the query does not fix (a range is not a constraint)
select sqlstate_of($$select * from docstore.query('select * from /posts where n > 1000')$$) as unconstrained_field;
select sqlstate_of($$select * from docstore.run_query('{"from": [{"collectionId": "posts"}]}')$$) as structured_unconstrained;
-- array_contains proves `uid in resource.data.members`
select path from docstore.query($$select * from /rooms where members array_contains 'alice'$$);
select sqlstate_of($$select * from docstore.query('select * from /rooms')$$) as rooms_unconstrained;
-- get() in a list rule, with the room bound by the collection path
select path from docstore.query('select * from /rooms/r1/messages');
select sqlstate_of($$select * from docstore.query('select * from /rooms/r2/messages')$$) as messages_not_member;
-- collection groups need a recursive rule (covering every depth), and the constraints
select path from docstore.query('select * from group(tags)');
select sqlstate_of($$select * from docstore.query('select * from group(comments)')$$) as group_unconstrained;
select sqlstate_of($$select * from docstore.query('select * from group(messages)')$$) as group_not_recursive;
-- aggregations are list queries too
select data from docstore.query($$select count(*) from /posts where owner = 'alice'$$);
select sqlstate_of($$select * from docstore.query('select count(*) from /posts')$$) as count_unconstrained;
-- plain SQL keeps the per-document filter (the documented deviation): filtered, not refused
select path from docstore.documents where path like 'posts/%' order by path;
select path from docstore.entities where database_id = 'listcheck' and path like 'rooms/%' order by path;
rollback;
-- unauthenticated: the member rules err on request.auth.uid
begin;
set local role docstore_client;
select sqlstate_of($$select * from docstore.query('select * from group(tags)')$$) as group_unauthenticated;
select sqlstate_of($$select * from docstore.query($q$select * from /rooms where members array_contains 'alice'$q$)$$) as rooms_unauthenticated;
rollback;
reset docstore.database;
