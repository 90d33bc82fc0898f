-- The documents rules read with get()/exists() are converted once per transaction and reused
-- while the row version read is still the one the statement sees with the same bytes
-- (rules::lookup_cache). Every change of the document within the transaction, and every
-- undoing of one (savepoint rollback), must show in the next decision. Its own database id.
select docstore.create_database('rules-lookups');
set docstore.database = 'rules-lookups';
select set_config('docstore.auth', '{"sub": "alice"}', false);
select docstore.set_rules($$rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /rooms/{room}/messages/{m} {
    allow create: if get(/databases/$(database)/documents/rooms/$(room)).data.open == true
                  && !exists(/databases/$(database)/documents/bans/$(request.auth.uid));
  } } }$$, 'rules-lookups');
-- A client's create of message n in room r1: 'ok' or the error (the role is back to the
-- superuser's afterwards, also inside a transaction).
create function pg_temp.post(n int) returns text language plpgsql as $$
declare
  result text;
begin
  set role docstore_client;
  result := sqlstate_of(format($q$select docstore.create('rooms/r1/messages/m%s', '{"n": %s}')$q$, n, n));
  reset role;
  return result;
end $$;

-- Updates and deletes of the room by the same transaction.
select docstore.set('rooms/r1', '{"open": true}') is not null as written;
begin;
select pg_temp.post(1) as open, pg_temp.post(2) as open_again;
select docstore.set('rooms/r1', '{"open": false}') is not null as written;
select pg_temp.post(3) as closed_in_transaction;
select docstore.set('rooms/r1', '{"open": true}') is not null as written;
select pg_temp.post(4) as reopened_in_transaction;
select docstore.delete('rooms/r1');
select pg_temp.post(5) as deleted_in_transaction;
select docstore.set('rooms/r1', '{"open": true}') is not null as written;
select pg_temp.post(6) as recreated_in_transaction;
commit;

-- Within one statement: the lookups of the first writes do not decide the later ones.
begin;
select pg_temp.post(7) as before_statement;
select pg_temp.post(8) as open_first,
       docstore.update('rooms/r1', '{"open": false}') is not null as closed,
       pg_temp.post(9) as closed_later_in_statement;
rollback;

-- Savepoints: what a rolled-back savepoint wrote is no longer seen, what it deleted is
-- seen again (with the bytes read before the savepoint).
begin;
select pg_temp.post(10) as open;
savepoint s;
select docstore.set('rooms/r1', '{"open": false}') is not null as written;
select pg_temp.post(11) as closed_in_savepoint;
rollback to savepoint s;
select pg_temp.post(12) as open_after_rollback;
savepoint t;
select docstore.delete('rooms/r1');
select pg_temp.post(13) as deleted_in_savepoint;
rollback to savepoint t;
select pg_temp.post(14) as there_after_rollback;
-- A savepoint that is released keeps its change.
savepoint u;
select docstore.set('rooms/r1', '{"open": false}') is not null as written;
release savepoint u;
select pg_temp.post(15) as closed_after_release;
rollback;

-- A change committed by an earlier transaction; an update to the same bytes.
begin;
select pg_temp.post(16) as open;
commit;
select docstore.set('rooms/r1', '{"open": false}') is not null as written;
begin;
select pg_temp.post(17) as closed_next_transaction;
select docstore.set('rooms/r1', '{"open": false}') is not null as written;
select pg_temp.post(18) as same_bytes_new_row;
select docstore.set('rooms/r1', '{"open": true}') is not null as written;
select pg_temp.post(19) as open_again;
commit;

-- exists() of a document the transaction creates and deletes (absent documents are read
-- every time).
begin;
select pg_temp.post(20) as not_banned;
select docstore.set('bans/alice', '{}') is not null as written;
select pg_temp.post(21) as banned;
select pg_temp.post(22) as still_banned;
select docstore.delete('bans/alice');
select pg_temp.post(23) as unbanned;
savepoint s;
select docstore.set('bans/alice', '{}') is not null as written;
select pg_temp.post(24) as banned_in_savepoint;
rollback to savepoint s;
select pg_temp.post(25) as unbanned_after_rollback;
commit;

-- The table truncated in place by this transaction (its second TRUNCATE: the first gave it
-- new storage, which the second empties): the room's row version read before is past the
-- table's end, and the next lookup must read the room again, not that block. The whole
-- transaction rolls back, the table's rows with it.
begin;
truncate docstore.entities, docstore.index_entries;
select count(*) as filled from (select docstore.set('fill/f' || i, jsonb_build_object('pad',
  (select string_agg(md5(i::text || '.' || j), '') from generate_series(1, 60) j))) from generate_series(1, 40) i) s;
select pg_relation_size('docstore.entities') > 8 * 8192 as room_past_block_8;
select docstore.set('rooms/r1', '{"open": true}') is not null as written;
select pg_temp.post(26) as read_past_the_fill;
truncate docstore.entities, docstore.index_entries;
select docstore.set('rooms/r1', '{"open": true}') is not null as written;
select pg_temp.post(27) as after_truncate_in_place;
rollback;

-- What was written (the savepoint and one-statement blocks rolled back): messages 1, 2, 4,
-- 6, 16, 19, 20, 23, 25.
select string_agg(substr(path, length('rooms/r1/messages/') + 1), ', ' order by (data->>'n')::int)
  from docstore.documents where path like 'rooms/r1/messages/%';
reset docstore.database;
select docstore.drop_rules('rules-lookups'), docstore.drop_database('rules-lookups');
