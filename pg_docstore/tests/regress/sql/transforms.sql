-- Field transforms with Firestore's semantics.
select docstore.set('t/a', '{"n": 1, "d": 1.5, "s": "x", "big": 9223372036854775806, "arr": [1, 2, 2], "m": {"k": 1}}') is not null;
select docstore.update('t/a', '{"n": {"$increment": 2}, "d": {"$increment": 1}, "s": {"$increment": 5}, "new": {"$increment": 7}, "big": {"$increment": 10}}') is not null;
select docstore.get('t/a') - 'arr' - 'm';
-- integer + double is double arithmetic
select docstore.update('t/a', '{"n": {"$increment": 0.5}}') is not null;
select docstore.get('t/a')->'n' as n;
-- max/min keep the stored value when equal, take the operand's type when it wins
select docstore.set('t/m', '{"a": 3, "b": 3.0, "c": 1, "e": {"$double": "NaN"}}') is not null;
select docstore.update('t/m', '{"a": {"$max": 3.0}, "b": {"$min": 3}, "c": {"$max": 2.5}, "d": {"$min": -1}, "e": {"$max": 10}}') is not null;
select docstore.get('t/m');
-- arrays: union appends missing elements once (1 == 1.0), remove drops every equal element
select docstore.update('t/a', '{"arr": {"$arrayUnion": [2, 3, 3, 1.0, "x"]}}') is not null;
select docstore.get('t/a')->'arr' as union_result;
select docstore.update('t/a', '{"arr": {"$arrayRemove": [2, "x"]}, "s": {"$arrayRemove": [1]}}') is not null;
select docstore.get('t/a')->'arr' as remove_result, docstore.get('t/a')->'s' as not_an_array;
-- serverTimestamp is the commit time: the same for every write of one commit
select docstore.commit('[
  {"set": "t/ts1", "data": {"at": {"$serverTimestamp": true}}},
  {"set": "t/ts2", "data": {"nested": {"at": {"$serverTimestamp": true}}}}
]') is not null;
select (docstore.get('t/ts1')->'at') = (docstore.get('t/ts2')->'nested'->'at') as same_commit_time;
select (docstore.get('t/ts1')->'at'->>'$timestamp')::timestamptz = update_time as equals_update_time
from docstore.documents where path = 't/ts1';
-- $delete removes a field (nested too); deleting a missing field is fine
select docstore.update('t/a', '{"m.k": {"$delete": true}, "nope": {"$delete": true}, "d": {"$delete": true}}') is not null;
select docstore.get('t/a') ? 'd' as has_d, docstore.get('t/a')->'m' as m;
-- transforms in set and create
select docstore.create('t/c', '{"n": {"$increment": 3}, "arr": {"$arrayUnion": [1]}}') is not null;
select docstore.get('t/c');
select * from docstore.check_indexes();
