#!/usr/bin/env bash
# HTTP benchmarks of the sidecar (issue 11), each against its SQL baseline in the same run:
#   a. GET of a ~1 KB document at 32 connections (wrk --latency, random one of 1,000 documents)
#      vs `select docstore.get(...)` through pgbench with 32 clients: requests/s, ratio, p50/p99;
#   b. create: POST of a ~1 KB document to a collection (wrk + Lua, values varied per request)
#      vs `docstore.add(...)` through pgbench with 32 clients;
#   c. :runQuery returning 1,000 documents, one client, N runs timed by curl: documents/s and time to first
#      byte of the body vs `select * from docstore.query(...)` through pgbench, one client (both the
#      median of per-run times after a warm-up run).
# HTTP rows run once with the admin key and once with an HS256 JWT (the rules path). For a and b
# a second baseline sends the SQL in the shape of the sidecar's admin transaction (begin;
# set_config; the call; commit: four round trips) through pgbench, to tell what the round trips
# cost from what HTTP costs.
#
# Command:   bash scripts/bench_http.sh        (make bench-http)
# Needs a running cluster with the extension (`make up`) at DOCSTORE_PG_PORT (default 5433).
# It starts its own sidecar on a free port with throwaway secrets against a fresh Postgres
# database `docstore_bench_http` (dropped at the end), so the demo data and `make up`'s sidecar
# are untouched. With BENCH_CLUSTER=throwaway it runs on a throwaway cluster of its own instead
# (scripts/lib.sh; default settings, removed at the end), where it may also create the role
# `docstore_client` when the installed extension does not yet (the JWT rows need it; it never
# creates a role on the project cluster). Environment:
#   DOCSTORE_SIDECAR_BIN  the binary (default: target/release/docstore-sidecar, built if missing)
#   BENCH_SECONDS (default 15) per wrk/pgbench run, BENCH_CONNECTIONS (32), BENCH_THREADS (2),
#   BENCH_QUERY_RUNS (default 20) runQuery repetitions, BENCH_POOL_SIZE (the sidecar's pool,
#   default BENCH_CONNECTIONS: as many Postgres backends as pgbench's clients).
# Prints a Markdown table for BENCHMARKS.md ("Sidecar HTTP"); raw output in target/bench-http/.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/bench_lib.sh"

SECONDS_PER_RUN="${BENCH_SECONDS:-15}"
CONNECTIONS="${BENCH_CONNECTIONS:-32}"
THREADS="${BENCH_THREADS:-2}"
QUERY_RUNS="${BENCH_QUERY_RUNS:-20}"
POOL_SIZE="${BENCH_POOL_SIZE:-${CONNECTIONS}}"
DOCUMENTS=1000
DB=docstore_bench_http
SIDECAR_BIN="${DOCSTORE_SIDECAR_BIN:-${CARGO_TARGET_DIR:-${ROOT}/target}/release/docstore-sidecar}"
OUT="${ROOT}/target/bench-http"
PYTHON="${ROOT}/.venv/bin/python"

THROWAWAY=0
if [ "${BENCH_CLUSTER:-project}" = throwaway ]; then
  [ -f "$(installed_library)" ] || die "the extension is not installed: run 'make up' first"
  say "starting a throwaway cluster"
  start_throwaway_cluster
  THROWAWAY=1
fi
"${PSQL[@]}" -d postgres -Atc "select 1" >/dev/null 2>&1 ||
  die "no Postgres answers on 127.0.0.1:${DOCSTORE_PG_PORT}: run 'make up' first"
command -v wrk >/dev/null || {
  say "installing Debian's wrk"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
}
[ -x "${PYTHON}" ] || bash "${ROOT}/scripts/venv.sh"
if [ ! -x "${SIDECAR_BIN}" ]; then
  say "building the sidecar (release)"
  (cd "${ROOT}" && cargo build --release --quiet -p docstore-sidecar)
fi
rm -rf "${OUT}"
mkdir -p "${OUT}"
tmp="$(mktemp -d)"
sidecar_pid=
cleanup() {
  [ -z "${sidecar_pid}" ] || kill "${sidecar_pid}" 2>/dev/null || true
  [ -z "${sidecar_pid}" ] || wait "${sidecar_pid}" 2>/dev/null || true
  "${PSQL[@]}" -d postgres -qc "select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = '${DB}' and not active" >/dev/null 2>&1 || true
  "${PSQL[@]}" -d postgres -qc "drop database if exists ${DB}" >/dev/null 2>&1 || true
  rm -rf "${tmp}"
  stop_throwaway_cluster
}
trap cleanup EXIT

doc="${BENCH_DOC}" # bench_lib.sh

say "preparing database ${DB}: ${DOCUMENTS} documents of ~1 KB in collection bench"
fresh_database "${DB}"
"${PSQL[@]}" -d "${DB}" -q -v doc="${doc}" -v n="${DOCUMENTS}" <<'SQL'
create extension pg_docstore;
-- The sidecar answers only for database ids listed here; until the extension creates the
-- table, this database gets it as the end-to-end tests' set-up makes it.
do $$ begin
  if to_regclass('docstore.databases') is null then
    create table docstore.databases (id text primary key, created_at timestamptz not null default now());
    insert into docstore.databases (id) values ('(default)');
  end if;
end $$;
select count(docstore.set('bench/d' || i,
  replace(replace(replace(replace(replace(:'doc', ':r', i::text), ':c', (i % 100)::text),
    ':t', (i % 20)::text), ':a', (i % 4 + 1)::text), ':p', (i % 4 + 1)::text)::jsonb))
from generate_series(1, :n) i;
analyze;
SQL
if [ "${THROWAWAY}" = 1 ]; then
  # As the end-to-end tests' set-up does, until the extension creates the role.
  "${PSQL[@]}" -d "${DB}" -q <<'SQL'
do $$ begin
  if not exists (select from pg_roles where rolname = 'docstore_client') then
    create role docstore_client nologin;
    grant usage on schema docstore to docstore_client;
    grant select, insert, update, delete on docstore.entities to docstore_client;
  end if;
end $$;
SQL
fi
# JWT requests need rules that allow them (a database without rules denies them); an extension
# from before rules existed was open anyway.
if [ "$("${PSQL[@]}" -d "${DB}" -Atc "select to_regclass('docstore.rules') is not null")" = t ]; then
  bench_open "${DB}"
fi
bytes="$("${PSQL[@]}" -d "${DB}" -Atc "select octet_length(docstore.get('bench/d1')::text)")"

# The sidecar under test, on a free port, with secrets of this run only.
port="$(free_port 18787)"
jwt_secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
admin_key="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
url="http://127.0.0.1:${port}"
say "starting ${SIDECAR_BIN} on ${url}"
DOCSTORE_DATABASE_URL="$(sidecar_database_url "${DB}")" \
  DOCSTORE_LISTEN="127.0.0.1:${port}" DOCSTORE_JWT_SECRET="${jwt_secret}" \
  DOCSTORE_ADMIN_KEY="${admin_key}" DOCSTORE_POOL_SIZE="${POOL_SIZE}" "${SIDECAR_BIN}" > "${OUT}/sidecar.log" 2>&1 &
sidecar_pid=$!
for i in $(seq 1 300); do
  curl -fsS -o /dev/null --max-time 2 "${url}/healthz" 2>/dev/null && break
  kill -0 "${sidecar_pid}" 2>/dev/null || { cat "${OUT}/sidecar.log"; die "the sidecar exited"; }
  [ "${i}" -lt 300 ] || die "the sidecar did not answer /healthz within 60 s"
  sleep 0.2
done
jwt="$("${PYTHON}" -c 'import sys, time, jwt; now = int(time.time()); print(jwt.encode({"sub": "bench", "iat": now, "exp": now + 3600}, sys.argv[1], algorithm="HS256"))' "${jwt_secret}")"
declare -A TOKENS=([admin]="${admin_key}" [jwt]="${jwt}")
declare -A LABELS=([admin]="admin key" [jwt]="JWT (HS256)")

# Each request kind answers 2xx once before it is measured (a benchmark of errors is worthless).
documents_url="${url}/v1/databases/(default)/documents"
query_url="${url}/v1/databases/(default):runQuery"
check() { # who, method, url[, body] -> prints a line unless the answer is 2xx
  local code args=(-sS -o "${tmp}/check.out" -w '%{http_code}' -X "$2" -H "Authorization: Bearer ${TOKENS[$1]}")
  [ -z "${4:-}" ] || args+=(-H 'Content-Type: application/json' --data "$4")
  code="$(curl "${args[@]}" "$3" || true)"
  case "${code}" in 2??) ;; *) echo "$1 $2 $3 -> ${code}: $(head -c 300 "${tmp}/check.out" 2>/dev/null)" ;; esac
}
sample="$(sed 's/:[rctap]/1/g' <<< "${doc}")"
skip=()
for who in admin jwt; do
  problem="$(check "${who}" GET "${documents_url}/bench/d1")$(check "${who}" POST "${documents_url}/bench_http_add" "${sample}")$(check "${who}" POST "${query_url}" '{"sql": "select * from /bench"}')"
  if [ -n "${problem}" ]; then
    echo "${problem}" | tee "${OUT}/${who}.refused"
    skip+=("${who}")
  fi
done

# wrk scripts: a random document of the 1,000; a create with values varied per request.
cat > "${tmp}/get.lua" <<LUA
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/v1/databases/(default)/documents/bench/d" .. math.random(1, ${DOCUMENTS}))
end
LUA
printf '\\set i random(1, %d)\nselect docstore.get('"'"'bench/d'"'"' || :i);\n' "${DOCUMENTS}" > "${tmp}/get.sql"
write_create_workload "${tmp}"
echo "select * from docstore.query('select * from /bench');" > "${tmp}/query.sql"
# The same calls inside the sidecar's first transaction shape (pg/mod.rs, RequestTx, admin):
# four statements, one round trip each. It is kept as it was for comparison with earlier runs;
# the sidecar itself now sends fewer: an admin GET is one statement, a client GET and any
# create one statement too when its role may call the extension's one-statement functions
# (docstore.get_document_as_client, add_document, add_document_as_client; else a client GET is
# four statements in one round trip, a create three round trips).
for kind in get add; do
  {
    grep '^\\set' "${tmp}/${kind}.sql"
    echo "begin;"
    echo "select set_config('docstore.database', '(default)', true);"
    grep -v '^\\set' "${tmp}/${kind}.sql"
    echo "commit;"
  } > "${tmp}/${kind}_tx.sql"
done

pgbench_tps() { # script, mode, clients, name[, transactions] -> transactions per second
  local run=(-T "${SECONDS_PER_RUN}")
  [ -z "${5:-}" ] || run=(-t "$5")
  "${PSQL[@]}" -d "${DB}" -qc checkpoint
  pgbench -n -M "$2" -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c "$3" \
    -j "$(($3 < THREADS ? $3 : THREADS))" "${run[@]}" -f "$1" "${DB}" > "${OUT}/$4.pgbench" 2>&1 ||
    { cat "${OUT}/$4.pgbench" >&2; die "pgbench $4 failed"; }
  awk '/^tps = /{printf "%.1f", $3}' "${OUT}/$4.pgbench"
}
wrk_run() { # who, lua script, name -> "requests/s p50 p99 errors"
  "${PSQL[@]}" -d "${DB}" -qc checkpoint
  wrk -t "${THREADS}" -c "${CONNECTIONS}" -d "${SECONDS_PER_RUN}s" --latency -s "$2" \
    -H "Authorization: Bearer ${TOKENS[$1]}" "${url}" > "${OUT}/$3.wrk" 2>&1 ||
    { cat "${OUT}/$3.wrk" >&2; die "wrk $3 failed"; }
  awk '
    /Requests\/sec:/ { rps = int($2) }
    $1 == "50%" { p50 = $2 }
    $1 == "99%" { p99 = $2 }
    /Non-2xx or 3xx responses:/ { errors += $NF }
    /Socket errors:/ { gsub(/,/, ""); errors += $4 + $6 + $8 + $10 }
    END { printf "%d %s %s %d", rps, p50, p99, errors }' "${OUT}/$3.wrk"
}
ratio() { awk "BEGIN { if ($2 > 0) printf \"%.2f\", $1 / $2; else print \"-\" }"; }
skipped() { [[ " ${skip[*]-} " == *" $1 "* ]]; }

rows=()
for kind in get add; do
  case "${kind}" in
    get) what="GET 1 KB document, ${CONNECTIONS} connections" mode=prepared ;;
    add) what="create (POST to a collection), ${CONNECTIONS} connections" mode=simple ;;
  esac
  say "${kind}: pgbench baseline, ${CONNECTIONS} clients, ${SECONDS_PER_RUN} s"
  base="$(pgbench_tps "${tmp}/${kind}.sql" "${mode}" "${CONNECTIONS}" "${kind}-sql" | cut -d. -f1)"
  say "${kind}: pgbench, the sidecar's transaction shape, ${CONNECTIONS} clients, ${SECONDS_PER_RUN} s"
  shaped="$(pgbench_tps "${tmp}/${kind}_tx.sql" "${mode}" "${CONNECTIONS}" "${kind}-sql-tx" | cut -d. -f1)"
  for who in admin jwt; do
    if skipped "${who}"; then
      rows+=("| ${what}, ${LABELS[${who}]} | refused (see target/bench-http/${who}.refused) | ${base} tps | - | - | ${shaped} tps |")
      continue
    fi
    say "${kind}: wrk, ${who}, ${CONNECTIONS} connections, ${SECONDS_PER_RUN} s"
    measured="$(wrk_run "${who}" "${tmp}/${kind}.lua" "${kind}-${who}")"
    read -r rps p50 p99 errors <<< "${measured}"
    note=""
    [ "${errors}" = 0 ] || note=" (${errors} errors)"
    rows+=("| ${what}, ${LABELS[${who}]} | ${rps} req/s${note} | ${base} tps | $(ratio "${rps}" "${base}") | ${p50} / ${p99} | ${shaped} tps ($(ratio "${shaped}" "${base}")) |")
  done
done

# c. runQuery: documents/s and time to first body byte, one client, sequential runs.
cat > "${tmp}/query.py" <<'PY'
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

url, token, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
body = json.dumps({"sql": "select * from /bench"})


def count(text):
    """Documents in a runQuery answer: a JSON array or one JSON value per line (NDJSON); items
    shaped {"document": ...} (Firestore's runQuery) count only when they hold a document."""
    try:
        items = json.loads(text)
    except ValueError:
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not isinstance(items, list):
        items = [items]
    if any(isinstance(item, dict) and "document" in item for item in items):
        return sum(1 for item in items if isinstance(item, dict) and item.get("document"))
    return len(items)


first, total, docs = [], [], set()
# Timed by curl (C), not by Python: an httpx loop over 1 MB of chunks measured the client more
# than the sidecar (60 ms against curl's 17 ms for the same answer).
for _ in range(runs + 1):
    with tempfile.NamedTemporaryFile() as out:
        timing = subprocess.run(
            ["curl", "-sS", "--fail", "-o", out.name, "-w", "%{time_starttransfer} %{time_total}",
             "-X", "POST", "-H", f"Authorization: Bearer {token}",
             "-H", "Content-Type: application/json", "--data-binary", body, url],
            check=True, capture_output=True, text=True,
        ).stdout.split()
        docs.add(count(Path(out.name).read_text()))
    first.append(float(timing[0]))
    total.append(float(timing[1]))
first, total = first[1:], total[1:]  # the first run warms the connection and caches
n = docs.pop() if len(docs) == 1 else -1  # -1: the runs disagreed
ms = [statistics.median(first) * 1000, max(first) * 1000, statistics.median(total) * 1000]
print(f"{n} {n / statistics.median(total):.0f} " + " ".join(f"{m:.1f}" for m in ms))
PY
say "runQuery: pgbench baseline, 1 client, ${QUERY_RUNS} runs"
# Timed as the HTTP rows are: the median of per-run times (pgbench's per-transaction log, -l),
# the first run left out. pgbench's tps over ${QUERY_RUNS} runs was not a baseline: it counted
# the first call in a fresh backend (loading the extension's library and warming its caches)
# and moved 20x between runs (87,100 and 4,100 documents/s).
rm -f "${OUT}"/query-sql.log*
"${PSQL[@]}" -d "${DB}" -qc checkpoint
pgbench -n -M prepared -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c 1 -t "$((QUERY_RUNS + 1))" \
  -l --log-prefix="${OUT}/query-sql.log" -f "${tmp}/query.sql" "${DB}" > "${OUT}/query-sql.pgbench" 2>&1 ||
  { cat "${OUT}/query-sql.pgbench" >&2; die "pgbench query-sql failed"; }
# Log columns: client, transaction number, latency (us), ...; median of all but the first.
qbase_ms="$(awk '$2 > 0 { print $3 / 1000 }' "${OUT}"/query-sql.log* | sort -n |
  awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
qbase_docs="$(awk "BEGIN { if (${qbase_ms} > 0) printf \"%d\", ${DOCUMENTS} * 1000 / ${qbase_ms}; else print 0 }")"
for who in admin jwt; do
  if skipped "${who}"; then
    rows+=("| runQuery ${DOCUMENTS} documents, ${LABELS[${who}]} | refused | ${qbase_docs} docs/s | - | - | - |")
    continue
  fi
  say "runQuery: HTTP, ${who}, 1 client, ${QUERY_RUNS} runs"
  # A failed answer (say a 500) is a row of the table, not the end of the run.
  if ! measured="$("${PYTHON}" "${tmp}/query.py" "${query_url}" "${TOKENS[${who}]}" "${QUERY_RUNS}" 2> "${OUT}/query-${who}.err")"; then
    rows+=("| runQuery ${DOCUMENTS} documents, 1 client, ${LABELS[${who}]} | failed: $(grep -m1 -oE "'[0-9]{3} [^']*'" "${OUT}/query-${who}.err" || echo "see target/bench-http/query-${who}.err") | ${qbase_docs} docs/s | - | - | - |")
    continue
  fi
  echo "${measured}" > "${OUT}/query-${who}.out"
  read -r n dps ttfb ttfb_max elapsed <<< "${measured}"
  note=""
  [ "${n}" = "${DOCUMENTS}" ] || note=" (answer held ${n} documents)"
  rows+=("| runQuery ${DOCUMENTS} documents, 1 client, ${LABELS[${who}]} | ${dps} docs/s${note}, TTFB ${ttfb} ms (max ${ttfb_max}), whole answer ${elapsed} ms | ${qbase_docs} docs/s (median ${qbase_ms} ms) | $(ratio "${dps}" "${qbase_docs}") | - | - |")
done

{
  echo "Cluster: $([ "${THROWAWAY}" = 1 ] && echo "a throwaway one (default settings)" || echo "the project cluster on port ${DOCSTORE_PG_PORT}"). Document size: ${bytes} bytes of typed JSON; sidecar pool ${POOL_SIZE} connections; wrk ${THREADS} threads; ${SECONDS_PER_RUN} s per run. Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| what | HTTP (sidecar) | baseline: SQL through pgbench, same run | ratio | HTTP p50 / p99 | pgbench, sidecar's transaction shape (ratio to baseline) |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "${OUT}/results.md"
