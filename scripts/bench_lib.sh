# What the HTTP benchmarks share (bench_http.sh, bench_client_create.sh, bench_shared.sh,
# bench_sidecar_ab.sh), so they measure the same thing: the ~1 KB document and its create
# workload, the 1,000-document database, starting a sidecar, a JWT, the GET script. Sourced
# after lib.sh, not run.
# shellcheck shell=bash

# ~1 KB, 10 top-level scalar fields (scripts/bench_writes.sh's document, a longer description):
# the placeholders :r :c :t :a :p are replaced per document (pgbench variables, Lua, SQL replace()).
BENCH_DOC='{"name": "Restaurant :r", "city": "City :c", "type": "Type :t", "avgRating": :a.5, "numRatings": :r, "price": :p, "open": true, "phone": "+1-555-:r", "address": "1234 Market Street, Suite :r, San Francisco, CA 94103, United States of America", "description": "A neighbourhood favourite serving slow-smoked brisket, ribs and seasonal sides, with a long list of Californian wines and local craft beers on tap; reservations recommended on weekends, walk-ins welcome at the bar, private dining for up to forty guests, catering available for events of every size, and a patio that is dog friendly. Kitchen open until late every day except Monday, brunch on Saturdays and Sundays from ten, happy hour from four to six with half-price small plates and oysters, live music on Thursday nights, gift cards available at the host stand and online, parking validated at the garage across the street :r. Ask about the tasting menu, the smoked vegetables for guests who eat no meat, and the seasonal pies, baked every morning by the pastry team next door."}'

# write_create_workload DIR: DIR/add.lua (wrk: a POST of BENCH_DOC to bench_http_add with values
# varied per request) and DIR/add.sql (pgbench: docstore.add of the same to bench_sql_add, varied
# per transaction). The Lua script formats 1,000 requests with random values once per wrk thread
# and sends them in turn: building each body by substitution cost wrk 69 us of CPU per request
# (pgbench spends 28 on its own), on the cores the sidecar and Postgres share.
write_create_workload() {
  cat > "$1/add.lua" <<LUA
math.randomseed(os.time())
local template = [[${BENCH_DOC}]]
wrk.headers["Content-Type"] = "application/json"
local requests = {}
local next_request = 0
request = function()
  if #requests == 0 then
    for i = 1, 1000 do
      local body = template:gsub(":r", tostring(math.random(1, 1000000))):gsub(":c", tostring(math.random(1, 100)))
      body = body:gsub(":t", tostring(math.random(1, 20))):gsub(":a", tostring(math.random(1, 4))):gsub(":p", tostring(math.random(1, 4)))
      requests[i] = wrk.format("POST", "/v1/databases/(default)/documents/bench_http_add", nil, body)
    end
  end
  next_request = next_request % #requests + 1
  return requests[next_request]
end
LUA
  printf '%s\n%s\n%s\n%s\n%s\nselect docstore.add('"'"'bench_sql_add'"'"', '"'"'%s'"'"');\n' \
    '\set r random(1, 1000000)' '\set c random(1, 100)' '\set t random(1, 20)' '\set a random(1, 4)' \
    '\set p random(1, 4)' "${BENCH_DOC}" > "$1/add.sql"
}

# bench_documents DB: a fresh database DB with the extension and 1,000 documents bench/d1 ..
# bench/d1000 of BENCH_DOC (~1 KB each), analyzed. Needs lib.sh.
bench_documents() {
  fresh_database "$1"
  "${PSQL[@]}" -d "$1" -q -v doc="${BENCH_DOC}" > /dev/null <<'SQL'
create extension pg_docstore;
SQL
  bench_open "$1"
  "${PSQL[@]}" -d "$1" -q -v doc="${BENCH_DOC}" > /dev/null <<'SQL'
select count(docstore.set('bench/d' || i, replace(replace(replace(replace(replace(:'doc',
  ':r', i::text), ':c', '1'), ':t', '2'), ':a', '3'), ':p', '4')::jsonb)) from generate_series(1, 1000) i;
analyze;
SQL
}

# bench_open DB: install the demo's open ruleset (demo/open_rules.sql) on (default) in Postgres
# database DB, so JWT and anonymous requests are allowed (a database without rules denies them,
# docs/rules.md): the benchmarks' "client" rows measure a client under that ruleset.
bench_open() {
  "${PSQL[@]}" -d "$1" -q -f "${ROOT}/demo/open_rules.sql" > /dev/null
}

# bench_sidecar LOG BIN DB SECRET ADMIN_KEY [NAME=VALUE ...]: start the sidecar BIN on a free port
# against database DB (pool of 32, no live queries; the NAME=VALUE settings added), its output
# into LOG, and wait for /healthz. Sets BENCH_SIDECAR_URL and BENCH_SIDECAR_PID.
bench_sidecar() {
  local log="$1" bin="$2" db="$3" secret="$4" admin_key="$5" port i
  shift 5
  port="$(free_port 18700)"
  env DOCSTORE_DATABASE_URL="$(sidecar_database_url "${db}")" \
    DOCSTORE_LISTEN="127.0.0.1:${port}" DOCSTORE_JWT_SECRET="${secret}" DOCSTORE_ADMIN_KEY="${admin_key}" \
    DOCSTORE_POOL_SIZE=32 DOCSTORE_LIVE=false "$@" "${bin}" > "${log}" 2>&1 &
  BENCH_SIDECAR_PID=$!
  BENCH_SIDECAR_URL="http://127.0.0.1:${port}"
  for i in $(seq 1 150); do
    curl -fsS -o /dev/null --max-time 2 "${BENCH_SIDECAR_URL}/healthz" 2>/dev/null && return 0
    [ "${i}" -lt 150 ] || { cat "${log}"; die "the sidecar ${bin} did not start"; }
    sleep 0.2
  done
}

# bench_jwt SECRET: an HS256 JWT (sub "bench") valid for an hour, minted with the test venv.
bench_jwt() {
  "${ROOT}/.venv/bin/python" -c 'import sys, time, jwt; now = int(time.time()); print(jwt.encode({"sub": "bench", "iat": now, "exp": now + 3600}, sys.argv[1], algorithm="HS256"))' "$1"
}

# bench_get_lua FILE: wrk's GET of one of bench_documents' documents, at random.
bench_get_lua() {
  cat > "$1" <<'LUA'
request = function()
  return wrk.format("GET", "/v1/databases/(default)/documents/bench/d" .. math.random(1, 1000))
end
LUA
}

# bench_scratch DB: a scratch directory BENCH_TMP and a list BENCH_PIDS for the processes a
# benchmark starts; at exit the processes are stopped, database DB is dropped and the
# directory removed.
bench_scratch() {
  BENCH_DB="$1"
  BENCH_TMP="$(mktemp -d)"
  BENCH_PIDS=()
  trap bench_cleanup EXIT
}
bench_cleanup() {
  local p
  for p in "${BENCH_PIDS[@]}"; do kill "${p}" 2>/dev/null || true; wait "${p}" 2>/dev/null || true; done
  "${PSQL[@]}" -d postgres -qc "drop database if exists ${BENCH_DB}" >/dev/null 2>&1 || true
  rm -rf "${BENCH_TMP}"
}
