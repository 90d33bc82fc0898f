-- Bad input: a specific SQLSTATE and a message naming the path or field; nothing written.
select docstore.set('er/exists', '{"n": 1}') is not null;
create temp table snapshot as select (select count(*) from docstore.entities) as docs, (select count(*) from docstore.index_entries) as entries;
-- paths (22023)
select sqlstate_of($$select docstore.set('er', '{}')$$);
select sqlstate_of($$select docstore.set('er//x', '{}')$$);
select sqlstate_of($$select docstore.set('er/__id__', '{}')$$);
select sqlstate_of($$select docstore.set('er/..', '{}')$$);
select sqlstate_of($$select docstore.get('')$$);
select sqlstate_of($$select docstore.add('er/exists', '{}')$$);
select sqlstate_of(format($$select docstore.set('er/%s', '{}')$$, repeat('x', 1501)));
-- an ID mentioning the name typed JSON reserves: refused by set and add (22023), and by commit,
-- whose writes are typed JSON text (22P02)
select sqlstate_of($$select docstore.set('er/a serde_json::private::Number', '{}')$$);
select sqlstate_of($$select docstore.commit('[{"set": "er/a serde_json::private::Number", "data": {}}]')$$);
select sqlstate_of($$select docstore.add('serde_json::private::Number', '{}')$$);
-- field paths and names (22023)
select sqlstate_of($$select docstore.update('er/exists', '{"a..b": 1}')$$);
select sqlstate_of($$select docstore.update('er/exists', '{"a b": 1}')$$);
select sqlstate_of($$select docstore.update('er/exists', '{"a": 1, "a.b": 2}')$$);
select sqlstate_of($$select docstore.set('er/x', '{"__reserved__": 1}')$$);
select sqlstate_of($$select docstore.set('er/x', '{"": 1}')$$);
-- transforms (22023)
select sqlstate_of($$select docstore.update('er/exists', '{"n": {"$increment": "one"}}')$$);
select sqlstate_of($$select docstore.update('er/exists', '{"n": {"$arrayUnion": 1}}')$$);
select sqlstate_of($$select docstore.set('er/x', '{"a": [{"$increment": 1}]}')$$);
select sqlstate_of($$select docstore.set('er/x', '{"n": {"$delete": true}}')$$);
-- typed JSON (22P02)
select sqlstate_of($$select docstore.set('er/x', '{"t": {"$timestamp": "noon"}}')$$);
select sqlstate_of($$select docstore.set('er/x', '[1, 2]')$$);
-- the key serde_json uses for exact numbers: would read back as the number 5, or not at all
select sqlstate_of($$select docstore.set('er/x', '{"a": {"$serde_json::private::Number": "5"}}')$$);
select sqlstate_of($$select docstore.update('er/exists', '{"m.`$serde_json::private::Number`": true}')$$);
select sqlstate_of($$select * from docstore.run_query('{"from": [{"collectionId": "er"}], "where": {"fieldFilter": {"field": {"fieldPath": "a"}, "op": "EQUAL", "value": {"$serde_json::private::Number": "5"}}}}')$$);
-- not found (P0002), already exists (23505)
select sqlstate_of($$select docstore.update('er/missing', '{"n": 1}')$$);
select sqlstate_of($$select docstore.create('er/exists', '{"n": 2}')$$);
-- too large (54000): over 1 MiB, nesting over 20, over 40000 index entries
select sqlstate_of(format($$select docstore.set('er/big', '{"s": "%s"}')$$, repeat('x', 1048576)));
select sqlstate_of(format($$select docstore.set('er/deep', '%s')$$, repeat('{"a":', 21) || '1' || repeat('}', 21)));
select sqlstate_of(format($$select docstore.set('er/wide', '{"a": [%s]}')$$, (select string_agg(i::text, ',') from generate_series(1, 40001) i)));
-- an index key over 2600 bytes (54000): a long field name and document id next to a long value,
-- or two long values in a composite index; exempting the field lets the document in
-- (runs of a repeated letter printed as one letter and "...")
select regexp_replace(sqlstate_of(format($$select docstore.set('er/%s', '{"%s": "%s"}')$$, repeat('d', 1000), repeat('f', 1000), repeat('v', 1500))), '(.)\1{9,}', '\1...', 'g');
select docstore.create_index('erc', '[{"field": "a"}, {"field": "b"}]') as erc_index \gset
select replace(sqlstate_of(format($$select docstore.set('erc/x', '{"a": "%s", "b": "%s"}')$$, repeat('a', 1500), repeat('b', 1500))), 'index ' || :erc_index, 'index <id>');
select docstore.drop_index(:erc_index);
call docstore.build_indexes();
select docstore.exempt_field('er', repeat('f', 1000));
select docstore.set('er/' || repeat('d', 1000), jsonb_build_object(repeat('f', 1000), repeat('v', 1500))) is not null as stored_when_exempt;
select docstore.delete('er/' || repeat('d', 1000));
select docstore.remove_exemption('er', repeat('f', 1000));
-- the database setting
set docstore.database = 'Bad_Name';
select sqlstate_of($$select docstore.get('er/exists')$$);
reset docstore.database;
-- nothing of any failed write remains
select (select count(*) from docstore.entities) = docs as no_documents_added,
       (select count(*) from docstore.index_entries) = entries as no_entries_added,
       docstore.get('er/exists') as unchanged
from snapshot;
select * from docstore.check_indexes();
-- a read-only transaction writes nothing, documents or index entries (25006)
begin read only;
select sqlstate_of($$select docstore.add('ro', '{"a": 1}')$$);
select sqlstate_of($$select docstore.set('ro/a', '{"a": 1}')$$);
select sqlstate_of($$select docstore.commit('[{"create": "ro/b", "data": {"a": 1}}]')$$);
rollback;
select count(*) from docstore.entities where path like 'ro/%';
select * from docstore.check_indexes();
