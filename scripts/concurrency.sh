#!/usr/bin/env bash
# Real concurrency with pgbench: N clients hammer one counter and race to create the same
# documents; the totals must be exact; concurrent commits get distinct times, each client's
# strictly increasing (docs/storage.md, "Commit times"). Usage: scripts/concurrency.sh [transactions per client]
source "$(dirname "$0")/lib.sh"
N="${1:-300}"
CLIENTS=4
DB=docstore_concurrency
fresh_database "${DB}"
"${PSQL[@]}" -d "${DB}" -q <<'SQL'
create extension pg_docstore;
select docstore.set('race/counter', '{"n": 0}');
create table created (path text, ok boolean);
create table stamped (pid int, seq bigint, path text);
create sequence stamp_seq;
create function try_create(p text) returns boolean language plpgsql as $$
begin
  perform docstore.create(p, '{"v": 1}');
  return true;
exception when unique_violation then
  return false;
end $$;
SQL
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
echo "select docstore.update('race/counter', '{\"n\": {\"\$increment\": 1}}');" > "${tmp}/increment.sql"
printf '%s\n' '\set p random(1, 40)' \
  "insert into created select 'race/d' || :p, try_create('race/d' || :p);" > "${tmp}/create.sql"
echo "insert into stamped select pg_backend_pid(), nextval('stamp_seq'), docstore.add('stamp', '{}');" > "${tmp}/stamp.sql"
PGBENCH=(pgbench -n -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c "${CLIENTS}" -j 2 -t "${N}")
"${PGBENCH[@]}" -f "${tmp}/increment.sql" "${DB}" > "${tmp}/increment.log" 2>&1 || { cat "${tmp}/increment.log"; die "pgbench failed"; }
"${PGBENCH[@]}" -f "${tmp}/create.sql" "${DB}" > "${tmp}/create.log" 2>&1 || { cat "${tmp}/create.log"; die "pgbench failed"; }
"${PGBENCH[@]}" -f "${tmp}/stamp.sql" "${DB}" > "${tmp}/stamp.log" 2>&1 || { cat "${tmp}/stamp.log"; die "pgbench failed"; }
got="$("${PSQL[@]}" -d "${DB}" -Atc "select docstore.get('race/counter')->>'n'")"
want=$((CLIENTS * N))
[ "${got}" = "${want}" ] || die "counter is ${got}, expected ${want} (${CLIENTS} clients x ${N} increments)"
check_passed "concurrent increments: ${got} = ${CLIENTS} x ${N}"
check="$("${PSQL[@]}" -d "${DB}" -Atc "select count(*) filter (where ok) = count(distinct path) and count(distinct path) = (select count(*) from docstore.entities where collection_id = 'race') - 1 from created")"
[ "${check}" = t ] || die "create races: some path was created twice or not at all"
check_passed "concurrent creates: every path created exactly once, the rest got 23505"
# The cluster preloads the library (make up), so every commit takes its own time from the
# instance's shared record: no two commits share one, and a client's next commit is later.
check="$("${PSQL[@]}" -d "${DB}" -Atc "
  select count(*) = ${CLIENTS} * ${N} and count(distinct t) = count(*) and bool_and(t > prev)
    from (select d.update_time t, lag(d.update_time, 1, '-infinity') over (partition by s.pid order by s.seq) prev
            from stamped s join docstore.documents d on d.path = s.path) x")"
[ "${check}" = t ] || die "commit times: two commits share a time, or a client's commit is not later than its previous one"
check_passed "commit times: ${CLIENTS} x ${N} concurrent commits, all distinct, each client's strictly increasing"
problems="$("${PSQL[@]}" -d "${DB}" -Atc "select count(*) from docstore.check_indexes()")"
[ "${problems}" = 0 ] || die "check_indexes reports ${problems} problems after the concurrency run"
check_passed "check_indexes is clean after the concurrency run"
