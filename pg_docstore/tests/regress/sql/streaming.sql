-- Rows are returned as they are read, and the per-database cap on a client query's documents.
set docstore.database = 'streaming';
select bool_and(docstore.commit((select jsonb_agg(jsonb_build_object(
    'set', 'big/d' || lpad(i::text, 5, '0'), 'data', jsonb_build_object('n', i)))
  from generate_series(b * 500 + 1, b * 500 + 500) i)) ? 'commitTime') as seeded
  from generate_series(0, 5) b;
-- Called in the select list, the first row comes after one batch: the transaction's counter
-- of entities rows fetched by index stays far below the 3,000 documents. Read to the end, it
-- covers them all. (In FROM, Postgres collects the whole result first.)
begin;
declare c cursor for
  select (r).path from (select docstore.query('select * from /big') r offset 0) q;
fetch 1 from c;
select idx_tup_fetch < 1500 as first_row_read_one_batch
  from pg_stat_xact_user_tables where relid = 'docstore.entities'::regclass;
move forward all in c;
select idx_tup_fetch >= 3000 as all_rows_read
  from pg_stat_xact_user_tables where relid = 'docstore.entities'::regclass;
commit;
-- Same rows, same order, either way; limit, offset, order and a merge of branches.
select (select array_agg(path) from docstore.query('select * from /big order by n desc limit 5 offset 2'))
     = (select array_agg((r).path) from (select docstore.query('select * from /big order by n desc limit 5 offset 2') r offset 0) q)
  as same_rows;
select count(*) as all_docs, count(distinct path) as distinct_docs
  from (select (r).path from (select docstore.query('select * from /big where n in [1, 2, 2999] or n > 2990') r offset 0) q) s;

-- The cap: off by default; set by an administrator; client queries over it fail with 54000
-- (after the rows before it), administrators' are not capped.
select max_query_results from docstore.databases where id = '(default)';
select docstore.create_database('capped');
set docstore.database = 'capped';
-- open to clients (a database without rules denies them before any cap applies)
select docstore.set_rules('rules_version = ''2''; service cloud.firestore { match /databases/{d}/documents { match /{doc=**} { allow read, write: if true; } } }');
select docstore.commit('[{"set": "c/a", "data": {}}, {"set": "c/b", "data": {}},
  {"set": "c/c", "data": {}}, {"set": "c/d", "data": {}}]') ? 'commitTime' as seeded;
select docstore.set_database_options('capped', max_query_results => 3);
select max_query_results from docstore.databases where id = 'capped';
select count(*) as admin_not_capped from docstore.query('select * from /c');
begin;
set local role docstore_client;
select sqlstate_of($$select count(*) from docstore.query('select * from /c')$$) as over_cap;
select count(*) as under_cap from docstore.query('select * from /c limit 3');
select data as count_is_one_row from docstore.query('select count(*) from /c');
rollback;
-- Bad input: a cap below 1, an unknown database, a client setting options; nothing changes.
select sqlstate_of($$select docstore.set_database_options('capped', 0)$$) as zero;
select sqlstate_of($$select docstore.set_database_options('capped', -5)$$) as negative;
select sqlstate_of($$select docstore.set_database_options('no-such-db', 5)$$) as unknown;
select sqlstate_of($$select docstore.set_database_options('bad id!', 5)$$) as bad_id;
begin;
set local role docstore_client;
select sqlstate_of($$select docstore.set_database_options('capped', 100)$$) as client;
rollback;
select max_query_results as unchanged from docstore.databases where id = 'capped';
-- NULL removes the cap.
select docstore.set_database_options('capped', null);
begin;
set local role docstore_client;
select count(*) as uncapped from docstore.query('select * from /c');
rollback;
reset docstore.database;
select docstore.drop_database('capped');
select docstore.drop_database('streaming');
