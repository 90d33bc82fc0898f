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
