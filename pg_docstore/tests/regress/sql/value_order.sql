-- Firestore's cross-type order, as the index encoding sorts it (bytea order = memcmp).
create temp table samples (label text, v jsonb);
insert into samples values
  ('map {b}',           '{"b": 1}'),
  ('map {a:2}',         '{"a": 2}'),
  ('map {a:1}',         '{"a": 1}'),
  ('map {}',            '{}'),
  ('vector [1,2]',      '{"$vector": [1.0, 2.0]}'),
  ('vector [9]',        '{"$vector": [9.0]}'),
  ('array [1,2]',       '[1, 2]'),
  ('array [1]',         '[1]'),
  ('array [null,9]',    '[null, 9]'),
  ('array []',          '[]'),
  ('geo (10,0)',        '{"$geo": [10, 0]}'),
  ('geo (-10,170)',     '{"$geo": [-10, 170]}'),
  ('ref a/b/c/d',       '{"$ref": "a/b/c/d"}'),
  ('ref a-/b',          '{"$ref": "a-/b"}'),
  ('ref a/b',           '{"$ref": "a/b"}'),
  ('bytes ff',          '{"$bytes": "/w=="}'),
  ('bytes 00',          '{"$bytes": "AA=="}'),
  ('bytes empty',       '{"$bytes": ""}'),
  ('string b',          '"b"'),
  ('string é',          '"é"'),
  ('string a',          '"a"'),
  ('string empty',      '""'),
  ('timestamp 2024',    '{"$timestamp": "2024-01-01T00:00:00Z"}'),
  ('timestamp 1970',    '{"$timestamp": "1970-01-01T00:00:00Z"}'),
  ('timestamp 0001',    '{"$timestamp": "0001-01-01T00:00:00Z"}'),
  ('+Infinity',         '{"$double": "Infinity"}'),
  ('2^63 (double)',     '9223372036854775808'),
  ('int64 max',         '9223372036854775807'),
  ('2^53+1',            '9007199254740993'),
  ('2^53 (double)',     '9007199254740992.0'),
  ('1.5',               '1.5'),
  ('1 (int)',           '1'),
  ('1.0 (double)',      '1.0'),
  ('0 (int)',           '0'),
  ('-0.0 (double)',     '{"$double": "-0.0"}'),
  ('-1',                '-1'),
  ('int64 min',         '-9223372036854775808'),
  ('-Infinity',         '{"$double": "-Infinity"}'),
  ('NaN',               '{"$double": "NaN"}'),
  ('true',              'true'),
  ('false',             'false'),
  ('null',              'null');

-- Ascending: one rank per distinct value, equal values share a rank.
select dense_rank() over (order by docstore.encode_value(v)) as rank, label
from samples order by docstore.encode_value(v), label;

-- Descending reverses it exactly.
select label from samples order by docstore.encode_value(v, descending => true), label desc limit 5;

-- compare_values agrees with the encoding on every pair.
select count(*) as pairs,
       count(*) filter (where docstore.compare_values(a.v, b.v)
                        = sign(case when docstore.encode_value(a.v) < docstore.encode_value(b.v) then -1
                                    when docstore.encode_value(a.v) > docstore.encode_value(b.v) then 1 else 0 end)) as agree
from samples a cross join samples b;

-- Canonical typed JSON survives jsonb.
select docstore.typed_json(v) as canonical from samples
where label in ('2^53 (double)', '-0.0 (double)', 'timestamp 1970', 'map {a:1}', 'geo (10,0)')
order by label;
select docstore.typed_json('{"$map": {"$ref": "not a tag here"}}') as escaped_map;

-- Bad typed JSON: SQLSTATE 22P02 with a message naming the problem and where it is.
select sqlstate_of($$select docstore.encode_value('{"a": {"$timestamp": "yesterday"}}')$$);
select sqlstate_of($$select docstore.encode_value('{"$ref": "restaurants"}')$$);
select sqlstate_of($$select docstore.encode_value('{"$geo": [91, 0]}')$$);
select sqlstate_of($$select docstore.encode_value('{"$bytes": "not base64!"}')$$);
select sqlstate_of($$select docstore.encode_value('{"x": [1, "a\u0000"]}')$$);
select sqlstate_of($$select docstore.encode_value('{"$double": "nan"}')$$);
select sqlstate_of($$select docstore.compare_values('1', '{"n": {"$increment": 1}}')$$);
select sqlstate_of($$select docstore.encode_value('1e400')$$);
