-- Queries: every operator, plan shapes (explain), cursors, aggregations, errors.
select docstore.commit('[
  {"set": "q/a", "data": {"city": "SF", "type": "BBQ", "rating": 4.5, "n": 1, "tags": ["x", "y"], "m": {"k": 1}}},
  {"set": "q/b", "data": {"city": "SF", "type": "BBQ", "rating": 3, "n": 2, "tags": ["y"]}},
  {"set": "q/c", "data": {"city": "SF", "type": "Thai", "rating": 5, "n": 3, "tags": []}},
  {"set": "q/d", "data": {"city": "LA", "type": "BBQ", "rating": 4.5, "n": 4, "nan": {"$double": "NaN"}}},
  {"set": "q/e", "data": {"city": "NY", "rating": "five", "n": null}},
  {"set": "q/f", "data": {"type": "Thai", "rating": 1, "n": 6.5}},
  {"set": "q/a/sub/s1", "data": {"city": "SF"}},
  {"set": "other/x/q/z", "data": {"city": "SF", "rating": 2}}
]') ? 'commitTime';
create function q(text) returns text language sql as $$ select coalesce(string_agg(path, ' ' order by ordinality), '-') from docstore.query($1) with ordinality $$;
-- equality, one and two fields (zig-zag of automatic indexes), missing fields never match
select q('select * from /q where city = "SF"');
select q('select * from /q where city = "SF" and type = "BBQ"');
select q('select * from /q where n = null');
select q('select * from /q where n is null');
select q('select * from /q where nan is nan');
-- ranges stay inside the operand's type; order by the inequality field, then name
select q('select * from /q where rating > 3');
select q('select * from /q where rating >= 4.5');
select q('select * from /q where rating < "z"');
select q('select * from /q where rating != 4.5');
select q('select * from /q where n is not null');
select q('select * from /q where rating not in [4.5, 3]');
-- in, array_contains, array_contains_any, or
select q('select * from /q where city in ["LA", "NY"]');
select q('select * from /q where tags array_contains "y"');
select q('select * from /q where tags array_contains_any ["x", "z"]');
select q('select * from /q where city = "LA" or type = "Thai"');
-- order, limit, offset, limit last, cursors, __name__
select q('select * from /q order by rating desc');
select q('select * from /q order by __name__ desc limit 2');
select q('select * from /q order by rating limit 2 offset 1');
select q('select * from /q order by n limit last 2');
-- limit 0 returns no document, whichever way the query runs (a plain listing returned one)
select q('select * from /q limit 0') as listing, q('select * from /q order by rating limit 0') as scan, q('select * from /q limit 0 offset 1') as with_offset;
select q('select * from /q order by rating start after (3) end at (4.5)');
select q('select * from /q where __name__ > "q/c"');
-- projections and maps
select path, data from docstore.query('select city, m.k from /q where n = 1');
-- collection groups need a collection_group index; plain listing does not
select q('select * from group(q)');
select sqlstate_of('select q(''select * from group(q) where city = "SF"'')');
select docstore.create_index('q', '[{"field": "city"}]', scope => 'collection_group') > 0;
call docstore.build_indexes();
select q('select * from group(q) where city = "SF"');
-- composite indexes: equality + order needs one; the error names the exact call
select sqlstate_of('select q(''select * from /q where city = "SF" order by rating desc'')');
select docstore.create_index('q', '[{"field": "city"}, {"field": "rating", "order": "desc"}]') > 0;
select sqlstate_of('select q(''select * from /q where city = "SF" order by rating desc'')');
call docstore.build_indexes();
select q('select * from /q where city = "SF" order by rating desc');
select q('select * from /q where city = "SF" and rating >= 4.5 order by rating desc');
-- aggregations (count from the index, sum/avg from the documents)
select data from docstore.query('select count(*) from /q where city = "SF"');
select data from docstore.query('select count(*), sum(rating), avg(rating) from /q where type = "BBQ"');
select data from docstore.query('select count_up_to(2) from /q');
-- structured form
select coalesce(string_agg(path, ' '), '-') from docstore.run_query('{"from": [{"collectionId": "q"}], "where": {"fieldFilter": {"field": {"fieldPath": "city"}, "op": "EQUAL", "value": "SF"}}, "limit": 2}');
-- plan shapes
select jsonb_path_query(docstore.explain('select * from /q where city = "SF" and type = "BBQ"'), '$.branches[0].keyvalue()') ->> 'key' as shape;
select jsonb_array_length(docstore.explain('select * from /q where city in ["LA", "NY"]')->'branches') as union_branches;
select (docstore.explain('select * from /q where city = "SF" limit 1', run => true)->'analyze'->>'results')::int as results;
-- the structured form of a query explains as its text form does, run or not
select docstore.explain('select * from /q where city = "SF" and type = "BBQ" limit 1')
     = docstore.explain('{"from": [{"collectionId": "q"}], "where": {"compositeFilter": {"op": "AND", "filters": [{"fieldFilter": {"field": {"fieldPath": "city"}, "op": "EQUAL", "value": "SF"}}, {"fieldFilter": {"field": {"fieldPath": "type"}, "op": "EQUAL", "value": "BBQ"}}]}}, "limit": 1}'::jsonb) as same_plan;
select docstore.explain('select * from /q where city = "SF" and type = "BBQ"', run => true)
     = docstore.explain('{"from": [{"collectionId": "q"}], "where": {"compositeFilter": {"op": "AND", "filters": [{"fieldFilter": {"field": {"fieldPath": "city"}, "op": "EQUAL", "value": "SF"}}, {"fieldFilter": {"field": {"fieldPath": "type"}, "op": "EQUAL", "value": "BBQ"}}]}}}'::jsonb, run => true) as same_run;
select (docstore.explain('{"from": [{"collectionId": "q"}], "where": {"fieldFilter": {"field": {"fieldPath": "city"}, "op": "EQUAL", "value": "SF"}}}'::jsonb, run => true)->'analyze'->>'results')::int as structured_results;
-- errors
select sqlstate_of($$select q('select * from /q where')$$);
select sqlstate_of($$select q('select * from /q/a where x = 1')$$);
select sqlstate_of($$select q('select * from /q where x in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]')$$);
select sqlstate_of($$select q('select * from /q where x array_contains_any 5')$$);
select sqlstate_of($$select q('select * from /q order by rating start at (1, "q/a", 3)')$$);
select sqlstate_of($$select q('select * from /q where t = {"$timestamp": "soon"}')$$);
select sqlstate_of($$select docstore.run_query('{"from": []}')$$);
select sqlstate_of($$select docstore.explain('[{"from": [{"collectionId": "q"}]}]'::jsonb)$$);
select sqlstate_of($$select docstore.explain('{"from": [{"collectionId": "q"}], "bogus": 1}'::jsonb, run => true)$$);
select sqlstate_of($$select docstore.explain('{"from": [{"collectionId": "q"}], "where": {"fieldFilter": {"field": {"fieldPath": "city"}, "op": "EQUAL", "value": "SF"}}, "orderBy": [{"field": {"fieldPath": "type"}}]}'::jsonb)$$);
-- values longer than the 1,500 indexed bytes: documents are re-checked (array_contains too)
select docstore.commit(replace('[{"set": "long/k", "data": {"tags": ["b<X>0"], "s": "b<X>0"}}]', '<X>', repeat('x', 1600))::jsonb) ? 'commitTime';
select q(replace('select * from /long where tags array_contains "b<X>1"', '<X>', repeat('x', 1600))) as contains_other;
select q(replace('select * from /long where tags array_contains_any ["b<X>1", "z"]', '<X>', repeat('x', 1600))) as any_other;
select q(replace('select * from /long where tags array_contains "b<X>0"', '<X>', repeat('x', 1600))) as contains_same;
select q(replace('select * from /long where s = "b<X>1"', '<X>', repeat('x', 1600))) as equal_other;
-- an exempted field gets a single-field index on request (the planner's suggestion works)
select docstore.exempt_field('q', 'n');
select sqlstate_of('select q(''select * from /q where n = 2'')');
select docstore.create_index('q', '[{"field": "n"}]') > 0 as single_field_index_of_exempted_field;
call docstore.build_indexes();
select q('select * from /q where n = 2');
select sqlstate_of($$select docstore.create_index('q', '[{"field": "city"}]')$$);
select * from docstore.check_indexes();
-- each document row carries the document's create time (its first write) and update time; an
-- aggregation row neither
select docstore.commit('[{"set": "ct/a", "data": {"n": 1}}]') ? 'commitTime' as created;
select docstore.commit('[{"set": "ct/a", "data": {"n": 2}}]') ? 'commitTime' as updated;
select r.path, r.create_time = e.create_time as create_time, r.update_time = e.update_time as update_time,
       r.create_time < r.update_time as created_first
  from docstore.query('select * from /ct') r join docstore.entities e on e.path = r.path;
select r.path, r.create_time = e.create_time as create_time, r.create_time < r.update_time as created_first
  from docstore.run_query('{"from": [{"collectionId": "ct"}], "select": {"fields": []}}') r join docstore.entities e on e.path = r.path;
select r.path, r.create_time = e.create_time as create_time, r.update_time = e.update_time as update_time
  from docstore.entities e, docstore.run_query_at('{"from": [{"collectionId": "ct"}]}', e.update_time) r
 where e.path = 'ct/a';
select path, create_time, update_time from docstore.query('select count(*) from /ct');
