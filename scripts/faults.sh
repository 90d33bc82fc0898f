#!/usr/bin/env bash
# Index builds and writes against waits and faults, on a real cluster of their own (a throwaway
# one, scripts/lib.sh: the crashes below would otherwise drop every connection to `make up`'s).
# 0. A build first waits for the transactions that began before it (they may have read the
#    catalog before the index existed); it must see such a transaction end and go on.
# Then a build is stopped mid-way twice:
#   1. cancelled (pg_cancel_backend), as a user pressing ^C;
#   2. its backend killed with SIGKILL, which makes Postgres end every backend and replay WAL
#      (crash recovery): every connection to the cluster drops for a moment.
# Each time the committed progress must survive (state CREATING, some but not all documents
# done), and calling build_indexes again must finish it: READY, exactly one entry per document,
# check_indexes clean.
# 3. Writers are killed the same way mid-stream: every acknowledged write must survive crash
#    recovery, an unacknowledged one be there whole or not at all, and check_indexes be clean.
# Usage: scripts/faults.sh [documents (default 20000)]
source "$(dirname "$0")/lib.sh"
DOCS="${1:-20000}"
DB=docstore_faults
[ -f "$(installed_library)" ] || die "the extension is not installed: run 'make up' first"
start_throwaway_cluster
fresh_database "${DB}"
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"; stop_throwaway_cluster' EXIT
sql() { "${PSQL[@]}" -d "${DB}" -Atc "$1"; }

sql "create extension pg_docstore" >/dev/null
sql "select count(docstore.add('fl', jsonb_build_object('a', i % 13, 'b', i))) from generate_series(1, ${DOCS}) i" >/dev/null

index_state() { sql "select state || ' ' || documents_done from docstore.list_indexes() where id = $1"; }
entries_of() {
  sql "select count(*) from docstore.index_entries where get_byte(key, 0) = 3 and substring(key from 2 for 4) = int4send($1)"
}

# Start a build in the background (a child of this shell, to wait for).
start_build() {
  "${PSQL[@]}" -d "${DB}" -qc "call docstore.build_indexes(batch_size => 100)" > "${tmp}/build.log" 2>&1 &
  build=$!
}

# Wait until the build of index $1 has committed some batches; print its backend's pid.
building_backend() {
  local i
  for i in $(seq 1 600); do
    read -r state done < <(index_state "$1")
    if [ "${state}" = CREATING ] && [ "${done}" -gt 0 ]; then
      sql "select pid from pg_stat_activity where datname = '${DB}' and query like 'call docstore.build_indexes%'"
      return
    fi
    sleep 0.02
  done
  die "the build of index $1 made no progress"
}

# After a fault: the committed progress is there and the build is not finished.
check_stopped() { # index id, what happened
  read -r state done < <(index_state "$1")
  [ "${state}" = CREATING ] || die "after $2 the index is ${state}, expected CREATING (raise the document count if it finished first)"
  [ "${done}" -gt 0 ] && [ "${done}" -lt "${DOCS}" ] || die "after $2, ${done} of ${DOCS} documents are recorded as done"
  check_passed "$2: the build stopped at ${done} of ${DOCS} documents, progress kept"
}

# After a SIGKILL: wait until crash recovery has ended and the cluster answers again.
back_from_crash() {
  for _ in $(seq 1 300); do
    sql "select 1" >/dev/null 2>&1 && return
    sleep 0.1
  done
  die "the cluster did not come back after the crash"
}

# Resume and check the result.
check_resumed() { # index id, what happened
  sql "call docstore.build_indexes()" >/dev/null
  read -r state done < <(index_state "$1")
  [ "${state}" = READY ] || die "after resuming from $2 the index is ${state}"
  local entries problems
  entries="$(entries_of "$1")"
  [ "${entries}" = "${DOCS}" ] || die "after resuming from $2 the index has ${entries} entries for ${DOCS} documents"
  problems="$(sql "select count(*) from docstore.check_indexes()")"
  [ "${problems}" = 0 ] || die "check_indexes reports ${problems} problems after resuming from $2"
  check_passed "$2: resumed to READY with ${entries} entries, check_indexes clean"
}

# 0. the wait for older transactions ends when they end (bounded at 60 s, twenty times the
#    older transaction's length, so a wait that misses the end fails here instead of after
#    build_indexes' 10 minutes). The older transaction writes a row just before it commits: the
#    wait must see that row, which it cannot if it returned while the transaction was open (a
#    check of the transaction's state, not of when its psql process exits).
sql "create table older_done (x int)" >/dev/null
"${PSQL[@]}" -d "${DB}" -qc "begin; select 1; select pg_sleep(3); insert into older_done values (1); commit;" > "${tmp}/older.log" 2>&1 &
older=$!
seen=0
for _ in $(seq 1 600); do
  [ "$(sql "select count(*) from pg_stat_activity where datname = '${DB}' and query like '%pg_sleep(3)%' and pid <> pg_backend_pid()")" = 1 ] && { seen=1; break; }
  sleep 0.05
done
[ "${seen}" = 1 ] || die "the older transaction never started"
sql "select docstore.wait_for_older_transactions(clock_timestamp(), timeout => '60 seconds')" > "${tmp}/wait.log" 2>&1 ||
  { cat "${tmp}/wait.log"; die "the wait did not see the older transaction end"; }
[ "$(sql "select count(*) from older_done")" = 1 ] || die "the wait returned while the older transaction was still open"
wait "${older}" || { cat "${tmp}/older.log"; die "the older transaction failed"; }
check_passed "wait: a build waits for an older transaction and goes on when it ends"

# 1. cancel
id="$(sql "select docstore.create_index('fl', '[{\"field\": \"a\"}, {\"field\": \"b\", \"order\": \"desc\"}]')")"
start_build
pid="$(building_backend "${id}")"
sql "select pg_cancel_backend(${pid})" >/dev/null
wait "${build}" && die "the cancelled build reported success"
grep -q "canceling statement due to user request" "${tmp}/build.log" || { cat "${tmp}/build.log"; die "the build was not cancelled"; }
check_stopped "${id}" "cancel"
check_resumed "${id}" "cancel"

# 2. SIGKILL of the building backend: crash recovery of the whole cluster
id="$(sql "select docstore.create_index('fl', '[{\"field\": \"b\"}, {\"field\": \"a\"}]')")"
start_build
pid="$(building_backend "${id}")"
as_root kill -KILL "${pid}"
wait "${build}" && die "the killed build reported success"
back_from_crash
grep -q "terminating connection because of crash of another server process\|server closed the connection unexpectedly" \
  "${tmp}/build.log" || { cat "${tmp}/build.log"; die "the build did not end with the crash"; }
check_stopped "${id}" "crash"
check_resumed "${id}" "crash"

# 3. SIGKILL during writes: every acknowledged write survives crash recovery, an unacknowledged
#    one is there whole or not at all, and the index entries match the documents exactly.
sql "select docstore.set('fw/counter', '{\"n\": 0}')" >/dev/null
for i in $(seq 1 20000); do
  echo "select docstore.update('fw/counter', '{\"n\": {\"\$increment\": 1}}');"
done > "${tmp}/increments.sql"
for i in $(seq 1 20000); do
  echo "select docstore.add('fw', jsonb_build_object('i', ${i}, 'tags', jsonb_build_array(${i} % 7, 'x')));"
done > "${tmp}/adds.sql"
# One statement per line, autocommit: a line of output is a committed, acknowledged write.
"${PSQL[@]}" -d "${DB}" -At -f "${tmp}/increments.sql" > "${tmp}/increments.out" 2>/dev/null &
incrementer=$!
"${PSQL[@]}" -d "${DB}" -At -f "${tmp}/adds.sql" > "${tmp}/adds.out" 2>/dev/null &
adder=$!
for _ in $(seq 1 600); do
  [ "$(wc -l < "${tmp}/increments.out")" -gt 500 ] && [ "$(wc -l < "${tmp}/adds.out")" -gt 500 ] && break
  sleep 0.02
done
pid="$(sql "select pid from pg_stat_activity where datname = '${DB}' and query like '%fw/counter%increment%' and pid <> pg_backend_pid() limit 1")"
[ -n "${pid}" ] || die "the writers finished before the fault (raise the number of writes)"
as_root kill -KILL "${pid}"
wait "${incrementer}" && die "the incrementing session survived the crash"
wait "${adder}" && die "the adding session survived the crash"
back_from_crash
acked_increments="$(wc -l < "${tmp}/increments.out")"
acked_adds="$(wc -l < "${tmp}/adds.out")"
n="$(sql "select docstore.get('fw/counter')->>'n'")"
added="$(sql "select count(*) from docstore.entities where collection_id = 'fw' and path <> 'fw/counter'")"
[ "${n}" -ge "${acked_increments}" ] && [ "${n}" -le $((acked_increments + 1)) ] ||
  die "after the crash the counter is ${n}, with ${acked_increments} increments acknowledged"
[ "${added}" -ge "${acked_adds}" ] && [ "${added}" -le $((acked_adds + 1)) ] ||
  die "after the crash ${added} documents exist, with ${acked_adds} adds acknowledged"
problems="$(sql "select count(*) from docstore.check_indexes()")"
[ "${problems}" = 0 ] || die "check_indexes reports ${problems} problems after the crash"
check_passed "crash during writes: counter ${n} for ${acked_increments} acknowledged increments, ${added} documents for ${acked_adds} acknowledged adds, check_indexes clean"
