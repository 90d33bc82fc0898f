-- Automatic and composite index entries, exemptions, check_indexes.
create temp view entry_count as
select count(*) as entries from docstore.index_entries where database_id = '(default)';
-- one document: entries for each field, each map subfield, and each distinct array element
select docstore.set('ix/a', '{"city": "SF", "address": {"zip": "94103", "street": "Main"}, "tags": ["x", "y", "x"]}') is not null;
-- city, address, address.zip, address.street, tags, tags contains x, tags contains y
select count(*) as entries_of_ix_a from docstore.index_entries where name = (select name from docstore.entities where path = 'ix/a');
-- an update that changes one field rewrites only that field's entries
create temp table keys_before as select key from docstore.index_entries where database_id = '(default)';
select docstore.update('ix/a', '{"city": "LA"}') is not null;
select count(*) as removed from keys_before k where not exists (select 1 from docstore.index_entries e where e.key = k.key);
select count(*) as added from docstore.index_entries e where database_id = '(default)' and not exists (select 1 from keys_before k where k.key = e.key);
-- rewriting the same values writes nothing
create temp table keys_now as select key from docstore.index_entries;
select docstore.set('ix/a', (select docstore.get('ix/a'))) is not null;
select count(*) as changed from docstore.index_entries e where not exists (select 1 from keys_now k where k.key = e.key);
-- composite indexes: validation, creation, building, use in check_indexes, dropping
select sqlstate_of($$select docstore.create_index('ix', '[{"field": "city"}]')$$);
select sqlstate_of($$select docstore.create_index('ix', '[{"field": "a", "order": "sideways"}, {"field": "b"}]')$$);
select sqlstate_of($$select docstore.create_index('ix/a', '[{"field": "a"}, {"field": "b"}]')$$);
select sqlstate_of($$select docstore.create_index('ix', '[{"field": "a"}, {"field": "b"}]', scope => 'planet')$$);
select docstore.set('ix/b', '{"city": "SF", "avgRating": 4}') is not null;
select docstore.set('ix/c', '{"city": "SF", "avgRating": 3.5}') is not null;
select docstore.set('ix/d', '{"city": "SF"}') is not null;
select docstore.create_index('ix', '[{"field": "city"}, {"field": "avgRating", "order": "desc"}]') as ix_index \gset
select :ix_index > 0 as created;
select replace(sqlstate_of($$select docstore.create_index('ix', '[{"field": "city"}, {"field": "avgRating", "order": "desc"}]')$$), ': ' || :ix_index || ' ', ': <id> ');
select collection_group, scope, fields, state from docstore.list_indexes();
-- writes during CREATING already maintain the index
select docstore.set('ix/e', '{"city": "NY", "avgRating": 5}') is not null;
call docstore.build_indexes();
select collection_group, state, documents_done from docstore.list_indexes();
-- entries exist for documents with both fields only (ix/b, ix/c, ix/e)
select count(*) as composite_entries from docstore.index_entries where get_byte(key, 0) = 3;
select * from docstore.check_indexes();
-- a collection-group single-field index
select docstore.set('ix/b/reviews/r1', '{"stars": 5}') is not null;
select docstore.create_index('reviews', '[{"field": "stars"}]', scope => 'collection_group') > 0;
call docstore.build_indexes(batch_size => 1);
select collection_group, scope, state from docstore.list_indexes() order by id;
-- drop: the index stops being maintained, build_indexes removes its entries
select docstore.drop_index((select id from docstore.list_indexes() where collection_group = 'ix'));
select sqlstate_of($$select docstore.drop_index(424242)$$);
call docstore.build_indexes();
select count(*) as composite_entries_left from docstore.index_entries e
where get_byte(key, 0) = 3 and not exists (select 1 from docstore.indexes i where i.id = (get_byte(e.key, 1) << 24) + (get_byte(e.key, 2) << 16) + (get_byte(e.key, 3) << 8) + get_byte(e.key, 4));
-- exemptions: no automatic entries for the field and its subfields, inherited
select docstore.exempt_field('ix', 'address');
select count(*) as address_entries from docstore.index_entries where position(convert_to('address', 'UTF8') in key) > 0 and get_byte(key, 0) in (1, 2) and name in (select name from docstore.entities where collection_id = 'ix');
select docstore.set('ix/f', '{"address": {"zip": "1"}, "city": "SF"}') is not null;
select count(*) as address_entries_after_write from docstore.index_entries where position(convert_to('address', 'UTF8') in key) > 0 and get_byte(key, 0) in (1, 2) and name in (select name from docstore.entities where collection_id = 'ix');
select * from docstore.check_indexes();
select docstore.remove_exemption('ix', 'address');
select count(*) > 0 as address_entries_back from docstore.index_entries where position(convert_to('address', 'UTF8') in key) > 0 and name in (select name from docstore.entities where collection_id = 'ix');
select * from docstore.check_indexes();
-- check_indexes finds corruption: a missing entry, an extra entry, an orphan
begin;
delete from docstore.index_entries where key = (select key from docstore.index_entries where name = (select name from docstore.entities where path = 'ix/b') order by key limit 1);
update docstore.index_entries set name = (select name from docstore.entities where path = 'ix/c')
  where key = (select key from docstore.index_entries where get_byte(key, 0) = 1 and name = (select name from docstore.entities where path = 'ix/e') order by key desc limit 1);
delete from docstore.entities where path = 'ix/f';
select path, regexp_replace(problem, ': .*', '') as problem from docstore.check_indexes() order by 1, 2 limit 6;
rollback;
select * from docstore.check_indexes();
