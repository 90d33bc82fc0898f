-- Online index build: batches commit separately, progress is kept, a stopped build resumes.
select count(*) from (select docstore.set('bf/d' || lpad(i::text, 3, '0'), jsonb_build_object('a', i % 7, 'b', i)) from generate_series(1, 250) i) s;
select docstore.create_index('bf', '[{"field": "a"}, {"field": "b", "order": "desc"}]') as id \gset
select state, documents_done from docstore.list_indexes() where id = :id;
-- two batches by hand, as a build that was cancelled after them
select docstore.index_build_step(:id, 100) as done_1;
select docstore.index_build_step(:id, 100) as done_2;
select state, documents_done from docstore.list_indexes() where id = :id;
-- writes meanwhile, before and after the cursor
select docstore.set('bf/d001', '{"a": 100, "b": 1}') is not null;
select docstore.delete('bf/d002');
select docstore.set('bf/d249', '{"a": 100, "b": 249}') is not null;
select docstore.set('bf/d999', '{"a": 1, "b": 999}') is not null;
-- resume
call docstore.build_indexes(batch_size => 64);
select state, documents_done >= 250 as all_done from docstore.list_indexes() where id = :id;
select count(*) as entries from docstore.index_entries where get_byte(key, 0) = 3 and substring(key from 2 for 4) = int4send(:id);
select count(*) as documents from docstore.entities where collection_id = 'bf';
select * from docstore.check_indexes();
select sqlstate_of($$call docstore.build_indexes(batch_size => 0)$$);
-- A document whose entry is over the key limit stops its index's build: the index needs
-- repair (Firestore's NEEDS_REPAIR), writes stop maintaining it, queries do not use it, and
-- dropping it removes the entries written so far. Other indexes keep building.
select count(*) from (select docstore.set('rp/d' || i, jsonb_build_object('a', repeat('a', 1500), 'b', i, 'c', i)) from generate_series(1, 3) i) s;
select docstore.set('rp/x', jsonb_build_object('a', repeat('a', 1500), 'b', repeat('b', 1500))) is not null as poison_stored;
select docstore.create_index('rp', '[{"field": "a"}, {"field": "b"}]') as rp \gset
select docstore.create_index('rp', '[{"field": "c"}, {"field": "b"}]') as rp_other \gset
-- (the build's warning names the index id, which depends on the suites run before this one)
set client_min_messages = error;
call docstore.build_indexes(batch_size => 2);
reset client_min_messages;
select id = :rp as first, state, documents_done, regexp_replace(error, 'index \d+', 'index <id>') as error
from docstore.list_indexes() where id in (:rp, :rp_other) order by id;
select count(*) as entries_so_far from docstore.index_entries where get_byte(key, 0) = 3 and substring(key from 2 for 4) = int4send(:rp);
-- no longer maintained: a write with two long values succeeds now, and adds no entry to it
select docstore.set('rp/y', jsonb_build_object('a', repeat('a', 1500), 'b', repeat('b', 1500))) is not null as written;
select count(*) as entries_so_far from docstore.index_entries where get_byte(key, 0) = 3 and substring(key from 2 for 4) = int4send(:rp);
-- queries use the ready (c, b) index, never this one
select path from docstore.query('select * from /rp where c >= 1 order by c, b');
select left(sqlstate_of($$select * from docstore.query('select * from /rp where a = "x" order by b')$$), 5) as no_usable_index;
select * from docstore.check_indexes();
select docstore.drop_index(:rp);
select docstore.drop_index(:rp_other);
select count(*) as deleted from (select docstore.delete(path) from docstore.documents where collection = 'rp') s;
call docstore.build_indexes();
select count(*) as entries_left from docstore.index_entries where get_byte(key, 0) = 3 and substring(key from 2 for 4) = int4send(:rp);
select count(*) as definitions_left from docstore.list_indexes() where id = :rp;
select * from docstore.check_indexes();
