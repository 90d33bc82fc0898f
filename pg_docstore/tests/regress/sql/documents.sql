-- Documents: set, get, create, add, update, delete, the documents view, databases.
select docstore.set('restaurants/one', '{"name": "One", "city": "SF", "avgRating": 4.5, "tags": ["bbq", "cheap"]}') is not null as set;
select docstore.get('restaurants/one');
select docstore.get('/restaurants/one') = docstore.get('restaurants/one') as leading_slash_ok;
select docstore.get('restaurants/missing') is null as missing_is_null;
select docstore.create('restaurants/two', '{"name": "Two", "city": "LA"}') is not null as created;
select docstore.set('restaurants/one/ratings/r1', '{"rating": 5}') is not null as subcollection;
-- set replaces the whole document
select docstore.set('restaurants/two', '{"name": "Two!"}') is not null;
select docstore.get('restaurants/two');
-- update changes only the named fields; dotted paths reach into maps; backticks quote
select docstore.update('restaurants/one', '{"avgRating": 4.7, "address.zip": "94103", "`odd.key`": true}') is not null;
select docstore.get('restaurants/one');
-- add makes a 20-character id
select length(split_part(docstore.add('restaurants', '{"name": "Auto"}'), '/', 2)) as id_length;
select count(*) from docstore.documents where collection = 'restaurants';
select regexp_replace(path, '^restaurants/[A-Za-z0-9]{20}$', 'restaurants/<auto-id>') as path, collection, collection_id
from docstore.documents where collection_id in ('restaurants', 'ratings') order by 1;
-- what is stored is canonical typed JSON, whichever way the input wrote the same values
-- (a canonical input is stored as given, the others are printed again)
select docstore.set('forms/a', '{"x": 1.50, "y": 100.00, "z": 2.5, "t": {"$timestamp": "2022-09-01T13:23:22Z"}, "s": "é"}') is not null;
select docstore.create('forms/b', '{"x": 1.5, "y": 100.0, "z": 2.5, "t": {"$timestamp": "2022-09-01T13:23:22.000000Z"}, "s": "é"}') is not null;
select docstore.add('forms', '{"n": {"$serverTimestamp": true}, "m": {"$map": {"$ref": 1}}}') like 'forms/%';
select path, data from docstore.documents where collection = 'forms' and path in ('forms/a', 'forms/b') order by path;
select data = (select data from docstore.documents where path = 'forms/b') as same_jsonb,
       data::text = (select data::text from docstore.documents where path = 'forms/b') as same_text
from docstore.documents where path = 'forms/a';
select data->'n' ? '$timestamp' as server_time, data->'m' as wrapped
from docstore.documents where collection = 'forms' and path not in ('forms/a', 'forms/b');
select docstore.set('forms/a', '{"x": 1.5}', merge => true) is not null;
select docstore.get('forms/a') = docstore.get('forms/b') as merge_kept_the_rest;
-- update times strictly increase, create time stays
select docstore.set('counters/c', '{"n": 1}') < docstore.set('counters/c', '{"n": 2}') as monotonic;
select create_time < update_time as kept_create_time from docstore.documents where path = 'counters/c';
-- the instance's newest commit time is known: at least the last time assigned (read_time checks)
select docstore.set('counters/c', '{"n": 2}') as last_set \gset
select docstore.last_commit_time() >= :'last_set'::timestamptz as newest_commit_known;
-- delete reports whether the document existed; deleting twice is fine
select docstore.delete('restaurants/two') as existed, docstore.delete('restaurants/two') as again;
select docstore.get('restaurants/two') is null as gone;
-- several databases share one Postgres database
set docstore.database = 'other-db';
select docstore.get('restaurants/one') is null as isolated;
select docstore.set('restaurants/one', '{"elsewhere": true}') is not null;
select count(*) from docstore.documents;
reset docstore.database;
select docstore.get('restaurants/one')->'elsewhere' is null as default_untouched;
-- a typed value round trip through storage
select docstore.set('types/all', '{"i": 9007199254740993, "d": 1e18, "dd": 1000000000000000000.0, "ts": {"$timestamp": "2024-02-29T12:00:00.5Z"}, "b": {"$bytes": "AAEC"}, "r": {"$ref": "restaurants/one"}, "g": {"$geo": [1.5, -2]}, "v": {"$vector": [1, 2.5]}, "nan": {"$double": "NaN"}, "m": {"$map": {"$ref": "literal"}}}') is not null;
select docstore.get('types/all');
select * from docstore.check_indexes();
