-- Write triggers (docs/triggers.md): the SQL API, its checks with their SQLSTATEs, the
-- client role refused, the secret not readable by clients, the catalog tables in pg_dump.

-- no URL prefix allowed by default: nothing is created
select sqlstate_of($$select docstore.create_trigger('t0', 'a/{x}', '{create}', 'https://example.com/h')$$);
select count(*) as triggers from docstore.triggers;
set docstore.trigger_url_prefixes = 'https://hooks.example.com/, http://localhost:9000/';

-- a generated secret is returned once; a given one is not returned
select docstore.create_trigger('avg', 'restaurants/{id}/ratings/{rating}', '{create}',
                               'https://hooks.example.com/avg', 'exactly_once') like 'whsec_%' as secret_shown;
select length(secret) as secret_length from docstore.triggers where name = 'avg';
select docstore.create_trigger('all', '/{doc=**}', '{write}', 'http://localhost:9000/all',
                               options => '{"secret": "0123456789abcdef0123", "role": "app"}') as no_secret_shown;
select name, secret from docstore.triggers where name = 'all';
select docstore.create_trigger('ud', 'users/{uid}', '{delete,update,update}', 'https://hooks.example.com/u') is not null as created;
select name, database_id, pattern, events, url, mode, options, "position", pending, parked, failures
from docstore.list_triggers();
-- list_triggers never has the secret
select count(*) as secret_columns from pg_proc p, unnest(p.proargnames) a
where p.oid = 'docstore.list_triggers'::regproc and a = 'secret';

-- bad input: SQLSTATE and nothing written
select sqlstate_of($$select docstore.create_trigger('avg', 'a/{x}', '{create}', 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b1', 'a//b', '{create}', 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b2', 'a/{x=**}/b', '{create}', 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b3', 'a/{x}/b/{x}', '{create}', 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b4', 'a/{x-y}', '{create}', 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b5', 'a/{x}/b', '{create}', 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b6', '', '{create}', 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b7', 'a/{x}', '{insert}', 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b8', 'a/{x}', '{}', 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b9', 'a/{x}', array[null]::text[], 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b10', 'a/{x}', '{create}', 'https://hooks.example.com/a', 'twice')$$);
select sqlstate_of($$select docstore.create_trigger('b11', 'a/{x}', '{create}', 'https://evil.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b12', 'a/{x}', '{create}', 'ftp://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.create_trigger('b13', 'a/{x}', '{create}', 'https://hooks.example.com/a', options => '{"retries": 3}')$$);
select sqlstate_of($$select docstore.create_trigger('b14', 'a/{x}', '{create}', 'https://hooks.example.com/a', options => '{"secret": "short"}')$$);
select sqlstate_of($$select docstore.create_trigger('b15', 'a/{x}', '{create}', 'https://hooks.example.com/a', options => '[]')$$);
select sqlstate_of($$select docstore.create_trigger('1bad', 'a/{x}', '{create}', 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.drop_trigger('nope')$$);
select sqlstate_of($$select docstore.retry_trigger('nope')$$);
select array_agg(name order by name) as triggers from docstore.triggers;

-- retry_trigger: parked changes back to pending (rows as the sidecar will record them)
insert into docstore.trigger_deliveries (trigger_name, change_id, position, commit_time, path, event, after, attempts, state, last_error)
values ('avg', 'c1', '0/10', now(), 'restaurants/r/ratings/1', 'create', '{}', 8, 'parked', 'HTTP 500'),
       ('avg', 'c2', '0/20', now(), 'restaurants/r/ratings/2', 'create', '{}', 2, 'pending', 'timeout'),
       ('avg', 'c3', '0/30', now(), 'restaurants/r/ratings/3', 'create', '{}', 1, 'done', null);
insert into docstore.trigger_acks (trigger_name, change_id) values ('avg', 'c3');
select name, pending, parked, failures from docstore.list_triggers() where name = 'avg';
select docstore.retry_trigger('avg') as retried;
select change_id, state, attempts from docstore.trigger_deliveries order by change_id;
select docstore.retry_trigger('avg') as retried_again;
-- an acknowledgement is unique per trigger and change (the exactly-once guard)
select sqlstate_of($$insert into docstore.trigger_acks (trigger_name, change_id) values ('avg', 'c3')$$);

-- the client role: refused every function, no rights on the tables, never the secret
begin;
set local role docstore_client;
select sqlstate_of($$select docstore.create_trigger('c', 'a/{x}', '{create}', 'https://hooks.example.com/a')$$);
select sqlstate_of($$select docstore.drop_trigger('avg')$$);
select sqlstate_of($$select docstore.retry_trigger('avg')$$);
select sqlstate_of($$select * from docstore.list_triggers()$$);
select sqlstate_of($$select secret from docstore.triggers$$);
select sqlstate_of($$select * from docstore.trigger_deliveries$$);
select sqlstate_of($$select * from docstore.trigger_acks$$);
select sqlstate_of($$insert into docstore.trigger_acks (trigger_name, change_id) values ('avg', 'x')$$);
rollback;
select t as "table", has_table_privilege('docstore_client', t, 'select') as client_select
from unnest(array['docstore.triggers', 'docstore.trigger_deliveries', 'docstore.trigger_acks']) t;

-- pg_dump dumps the catalog tables' rows: they are the extension's config tables
select c.relname
from pg_extension e, unnest(e.extconfig) cfg(oid) join pg_class c on c.oid = cfg.oid
where e.extname = 'pg_docstore' and c.relname like 'trigger%' order by c.relname;

-- drop_trigger takes its deliveries and acknowledgements with it
select docstore.drop_trigger('avg');
select (select count(*) from docstore.trigger_deliveries) as deliveries,
       (select count(*) from docstore.trigger_acks) as acks;
select docstore.drop_trigger('all'), docstore.drop_trigger('ud');
select count(*) as triggers from docstore.list_triggers();
reset docstore.trigger_url_prefixes;
set docstore.trigger_url_prefixes = '*';
select docstore.create_trigger('dev', 'a/{x}', '{create}', 'http://10.0.0.1/anything') is not null as any_url_in_development;
select docstore.drop_trigger('dev');
reset docstore.trigger_url_prefixes;
