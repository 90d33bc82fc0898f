-- set with merge writes only the given fields; update replaces whole values at field paths.
select docstore.set('mg/a', '{"a": {"x": 1, "y": 2}, "b": 1, "c": {"keep": true}}') is not null;
select docstore.set('mg/a', '{"a": {"x": 10}, "d": 4}', merge => true) is not null;
select docstore.get('mg/a');
-- an empty map replaces that subtree
select docstore.set('mg/a', '{"c": {}}', merge => true) is not null;
select docstore.get('mg/a')->'c' as c;
-- $delete inside merge
select docstore.set('mg/a', '{"a": {"y": {"$delete": true}}}', merge => true) is not null;
select docstore.get('mg/a')->'a' as a;
-- merge creates a missing document
select docstore.set('mg/new', '{"z": {"q": 1}}', merge => true) is not null;
select docstore.get('mg/new');
-- update with a map value replaces the map (no merge)
select docstore.update('mg/a', '{"a": {"only": 1}}') is not null;
select docstore.get('mg/a')->'a' as replaced;
-- a non-map intermediate becomes a map
select docstore.update('mg/a', '{"b.inner": 1}') is not null;
select docstore.get('mg/a')->'b' as b;
select * from docstore.check_indexes();
