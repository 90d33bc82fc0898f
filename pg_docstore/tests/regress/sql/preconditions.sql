-- commit(): atomic batches, preconditions, all or nothing.
select jsonb_array_length(docstore.commit('[
  {"create": "pc/a", "data": {"n": 1}},
  {"set": "pc/b", "data": {"n": 2}},
  {"update": "pc/a", "fields": {"n": {"$increment": 10}}},
  {"delete": "pc/none"}
]')->'updateTimes') as writes;
select docstore.get('pc/a') as a, docstore.get('pc/b') as b;
-- exists preconditions
select docstore.commit('[{"update": "pc/b", "fields": {"n": 3}, "precondition": {"exists": true}}]') ? 'commitTime' as ok;
select sqlstate_of($$select docstore.commit('[{"set": "pc/c", "data": {}, "precondition": {"exists": true}}]')$$);
select sqlstate_of($$select docstore.commit('[{"set": "pc/a", "data": {}, "precondition": {"exists": false}}]')$$);
-- updateTime precondition: optimistic concurrency
create temp table seen as select update_time from docstore.documents where path = 'pc/b';
select docstore.commit(format('[{"update": "pc/b", "fields": {"n": 4}, "precondition": {"updateTime": "%s"}}]',
  to_char((select update_time from seen) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::jsonb) ? 'commitTime' as first_writer_wins;
select sqlstate_of(format($$select docstore.commit('[{"update": "pc/b", "fields": {"n": 5}, "precondition": {"updateTime": "%s"}}]')$$,
  to_char((select update_time from seen) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))) ~ '^55000: precondition failed for pc/b: its update time is' as stale_writer_fails;
select docstore.get('pc/b')->'n' as n;
-- a failing write rolls back the whole batch, including earlier writes
select sqlstate_of($$select docstore.commit('[
  {"set": "pc/x", "data": {"n": 1}},
  {"update": "pc/a", "fields": {"n": 99}},
  {"create": "pc/a", "data": {}}
]')$$);
select docstore.get('pc/x') is null as x_not_written, docstore.get('pc/a')->'n' as a_unchanged;
-- the same document twice in one batch: applied in order
select docstore.commit('[{"set": "pc/twice", "data": {"n": 1}}, {"update": "pc/twice", "fields": {"n": {"$increment": 1}}}]') ? 'commitTime';
select docstore.get('pc/twice');
-- verify: a document read but not written (transactions). Checked and locked like a write,
-- nothing written; its updateTimes entry is the document's current update time (null: missing).
create temp table before_verify as select path, update_time, data from docstore.entities where path in ('pc/a', 'pc/b');
select r->'updateTimes'->0 = to_jsonb(to_char((select update_time from before_verify where path = 'pc/a') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')) as verify_time_is_the_documents,
       r->'updateTimes'->1 as missing_is_null,
       r->'updateTimes'->2 = r->'commitTime' as write_time_is_the_commit_time
from docstore.commit(format('[
  {"verify": "pc/a", "precondition": {"updateTime": "%s"}},
  {"verify": "pc/nothing", "precondition": {"exists": false}},
  {"update": "pc/b", "fields": {"n": 6}, "precondition": {"exists": true}}]',
  to_char((select update_time from before_verify where path = 'pc/a') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::jsonb) r;
select e.update_time = b.update_time and e.data = b.data as verified_unchanged
from docstore.entities e join before_verify b using (path) where path = 'pc/a';
select docstore.get('pc/nothing') is null as verify_creates_nothing;
select sqlstate_of($$select docstore.commit('[{"verify": "pc/a", "precondition": {"exists": true}}]')$$) as verify_only_ok;
-- a failed verify fails the batch (55000), and the batch's writes are not made
select sqlstate_of($$select docstore.commit('[
  {"set": "pc/y", "data": {"n": 1}},
  {"verify": "pc/a", "precondition": {"exists": false}}]')$$);
select sqlstate_of($$select docstore.commit('[{"verify": "pc/nothing", "precondition": {"exists": true}}]')$$);
select sqlstate_of($$select docstore.commit('[{"verify": "pc/a", "precondition": {"updateTime": "2001-01-01T00:00:00.000000Z"}}]')$$) ~ '^55000: precondition failed for pc/a: its update time is' as stale_verify_fails;
select docstore.get('pc/y') is null as y_not_written;
-- a verify after a write of the same document in the batch sees the write
select sqlstate_of($$select docstore.commit('[
  {"delete": "pc/twice"},
  {"verify": "pc/twice", "precondition": {"exists": false}}]')$$) as verify_sees_the_batch;
select sqlstate_of($$select docstore.commit('[
  {"set": "pc/twice", "data": {}},
  {"verify": "pc/twice", "precondition": {"exists": false}}]')$$) as verify_sees_the_batch_fails;
-- a verify without a precondition only locks (an existing and a missing document): nothing
-- is checked or written
select jsonb_array_length(docstore.commit('[{"verify": "pc/a"}, {"verify": "pc/nothing"}]')->'updateTimes') as locked_only;
select docstore.get('pc/nothing') is null as nothing_written;
-- malformed verify entries
select sqlstate_of($$select docstore.commit('[{"verify": "pc/a", "precondition": {"exists": true}, "data": {}}]')$$);
select sqlstate_of($$select docstore.commit('[{"verify": "pc", "precondition": {"exists": true}}]')$$);
select sqlstate_of($$select docstore.commit('[{"verify": "pc/a", "precondition": {"updateTime": "soon"}}]')$$);
-- malformed batches
select sqlstate_of($$select docstore.commit('{"set": "pc/a"}')$$);
select sqlstate_of($$select docstore.commit('[{"set": "pc/a"}]')$$);
select sqlstate_of($$select docstore.commit('[{"set": "pc/a", "data": {}, "delete": "pc/a"}]')$$);
select sqlstate_of($$select docstore.commit('[{"upsert": "pc/a", "data": {}}]')$$);
select sqlstate_of($$select docstore.commit('[{"set": "pc/a", "data": {}, "merge": "yes"}]')$$);
select sqlstate_of($$select docstore.commit('[{"set": "pc/a", "data": {}, "precondition": {"exists": true, "updateTime": "x"}}]')$$);
select sqlstate_of($$select docstore.commit('[{"set": "pc", "data": {}}]')$$);
select sqlstate_of($$select docstore.commit('[{"set": "pc/a", "data": {}, "extra": 1}]')$$);
select sqlstate_of(format($$select docstore.commit('%s')$$, (select jsonb_agg(jsonb_build_object('delete', 'pc/d' || i)) from generate_series(1, 501) i)));
select * from docstore.check_indexes();
