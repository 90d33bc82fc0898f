#!/usr/bin/env bash
# A client's (JWT) GET of a ~1 KB document over HTTP, in one statement
# (docstore.get_document_as_client) against the pipelined transaction it replaces (begin,
# settings and role, get_document, commit), same sidecar binary, same run: two databases of
# 1,000 documents, in one of which the function is renamed away, so the sidecar serving it falls
# back to the transaction. Rounds alternate: pgbench `select docstore.get(...)` (32 clients, the
# issue's baseline), wrk against the one-statement sidecar, wrk against the transaction sidecar.
# Usage: DOCSTORE_PG_PORT=<port> scripts/bench_client_get.sh [rounds, default 3] [seconds, default 10]
#   DOCSTORE_SIDECAR_BIN (default target/release/docstore-sidecar). Databases bench_get_one and
#   bench_get_tx are dropped at the end.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/bench_lib.sh"
ROUNDS="${1:-3}"
SECONDS_PER_RUN="${2:-10}"
SIDECAR_BIN="${DOCSTORE_SIDECAR_BIN:-${CARGO_TARGET_DIR:-${ROOT}/target}/release/docstore-sidecar}"
PYTHON="${ROOT}/.venv/bin/python"
tmp="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "${p}" 2>/dev/null || true; wait "${p}" 2>/dev/null || true; done
  for db in bench_get_one bench_get_tx; do
    "${PSQL[@]}" -d postgres -qc "drop database if exists ${db}" >/dev/null 2>&1 || true
  done
  rm -rf "${tmp}"
}
trap cleanup EXIT
doc='{"name": "Restaurant :r", "city": "City :r", "address": "1234 Market Street, Suite :r, San Francisco, CA 94103, United States of America", "description": "A neighbourhood favourite serving slow-smoked brisket, ribs and seasonal sides, with a long list of Californian wines and local craft beers on tap; reservations recommended on weekends, walk-ins welcome at the bar, private dining for up to forty guests, catering available for events of every size, and a patio that is dog friendly. Kitchen open until late every day except Monday, brunch on Saturdays and Sundays from ten, happy hour from four to six with half-price small plates and oysters, live music on Thursday nights, gift cards available at the host stand and online, parking validated at the garage across the street :r. Ask about the tasting menu and the seasonal pies, baked every morning by the pastry team next door.", "n": :r}'
for db in bench_get_one bench_get_tx; do
  fresh_database "${db}"
  "${PSQL[@]}" -d "${db}" -q -v doc="${doc}" <<'SQL'
create extension pg_docstore;
select count(docstore.set('bench/d' || i, replace(:'doc', ':r', i::text)::jsonb)) from generate_series(1, 1000) i;
analyze;
SQL
  bench_open "${db}"
done
# The transaction sidecar's database: the extension as it was before the one-statement read.
"${PSQL[@]}" -d bench_get_tx -qc "alter function docstore.get_document_as_client(text, text, text, text) rename to get_document_as_client_off"
secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
declare -A URLS
for db in bench_get_one bench_get_tx; do
  port="$(free_port 18800)"
  DOCSTORE_DATABASE_URL="$(sidecar_database_url "${db}")" \
    DOCSTORE_LISTEN="127.0.0.1:${port}" DOCSTORE_JWT_SECRET="${secret}" DOCSTORE_ADMIN_KEY="k${secret}" \
    DOCSTORE_POOL_SIZE=32 "${SIDECAR_BIN}" > "${tmp}/${db}.log" 2>&1 &
  pids+=($!)
  URLS[${db}]="http://127.0.0.1:${port}"
  for i in $(seq 1 150); do
    curl -fsS -o /dev/null --max-time 2 "${URLS[${db}]}/healthz" 2>/dev/null && break
    [ "${i}" -lt 150 ] || { cat "${tmp}/${db}.log"; die "the sidecar of ${db} did not start"; }
    sleep 0.2
  done
done
jwt="$("${PYTHON}" -c 'import sys, time, jwt; now = int(time.time()); print(jwt.encode({"sub": "bench", "iat": now, "exp": now + 3600}, sys.argv[1], algorithm="HS256"))' "${secret}")"
for db in bench_get_one bench_get_tx; do
  code="$(curl -sS -o "${tmp}/check" -w '%{http_code}' -H "Authorization: Bearer ${jwt}" "${URLS[${db}]}/v1/databases/(default)/documents/bench/d1")"
  [ "${code}" = 200 ] || die "GET through ${db}: ${code} $(cat "${tmp}/check")"
done
cat > "${tmp}/get.lua" <<'LUA'
request = function()
  return wrk.format("GET", "/v1/databases/(default)/documents/bench/d" .. math.random(1, 1000))
end
LUA
cat > "${tmp}/get.sql" <<'SQL'
\set i random(1, 1000)
select docstore.get('bench/d' || :i);
SQL
wrk_rate() { # url -> "requests/s p50 p99"
  wrk -t 2 -c 32 -d "${SECONDS_PER_RUN}s" --latency -s "${tmp}/get.lua" -H "Authorization: Bearer ${jwt}" "$1" > "${tmp}/wrk.out" 2>&1
  awk '/Requests\/sec/ { rps = $2 } /^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 } END { printf "%d %s %s", rps, p50, p99 }' "${tmp}/wrk.out"
}
echo "| round | pgbench docstore.get tps | JWT GET, one statement: req/s (ratio) p50/p99 | JWT GET, transaction: req/s (ratio) p50/p99 | one statement / transaction |"
echo "|---|---|---|---|---|"
for r in $(seq 1 "${ROUNDS}"); do
  tps="$(pgbench -n -M prepared -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c 32 -j 2 -T "${SECONDS_PER_RUN}" -f "${tmp}/get.sql" bench_get_one 2>&1 | awk '/^tps = /{ printf "%d", $3 }')"
  read -r one one50 one99 <<< "$(wrk_rate "${URLS[bench_get_one]}")"
  read -r four four50 four99 <<< "$(wrk_rate "${URLS[bench_get_tx]}")"
  awk -v r="${r}" -v t="${tps}" -v o="${one}" -v f="${four}" -v a="${one50}/${one99}" -v b="${four50}/${four99}" \
    'BEGIN { printf "| %d | %d | %d (%.2fx) %s | %d (%.2fx) %s | %.2f |\n", r, t, o, o / t, a, f, f / t, b, o / f }'
done
