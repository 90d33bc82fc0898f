-- Online index builds (docs/storage.md, "Index builds"). The background index builder
-- (pg::background) runs them by itself; CALL docstore.build_indexes() runs them in the caller's
-- session and returns when none is left (for scripts that want to wait, and clusters without
-- the builder). Backfills CREATING indexes and removes DELETING ones in batches, committing
-- after each batch, so it can be cancelled or crash and simply be called again: it resumes
-- where it stopped.

-- Waits until every client transaction that started before `since` has ended: those may have
-- read the index catalog before the change and would not maintain the index.
create function docstore.wait_for_older_transactions(since timestamptz, timeout interval default '10 minutes')
returns void language plpgsql as $$
declare
    deadline timestamptz := pg_catalog.clock_timestamp() + timeout;
begin
    loop
        -- pg_stat_activity is read once per transaction and then cached: drop the cached copy,
        -- or a transaction seen open at the first look would be waited for forever.
        perform pg_catalog.pg_stat_clear_snapshot();
        exit when not exists (
            select 1 from pg_catalog.pg_stat_activity
            where pid <> pg_catalog.pg_backend_pid()
              and datname = pg_catalog.current_database()
              and backend_type = 'client backend'
              and xact_start < since
        );
        if pg_catalog.clock_timestamp() > deadline then
            raise exception 'transactions older than the index change are still open after %', timeout
                using errcode = '55000',
                      hint = 'Find them in pg_stat_activity (xact_start), end them, and call docstore.build_indexes() again.';
        end if;
        perform pg_catalog.pg_sleep(0.05);
    end loop;
end $$;

create procedure docstore.build_indexes(batch_size int default 1000)
language plpgsql as $$
declare
    index_id int;
    done boolean;
begin
    if batch_size < 1 then
        raise exception 'batch_size must be positive' using errcode = '22023';
    end if;
    loop
        select id into index_id from docstore.indexes
        where state in ('CREATING', 'DELETING') order by id limit 1;
        exit when not found;
        perform docstore.wait_for_older_transactions(clock_timestamp());
        loop
            done := docstore.index_build_step(index_id, batch_size);
            commit;
            exit when done;
        end loop;
    end loop;
end $$;
