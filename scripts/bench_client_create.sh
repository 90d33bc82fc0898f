#!/usr/bin/env bash
# A create (POST of a ~1 KB document to a collection) over HTTP, admin key and JWT, in one
# statement (docstore.add_document, docstore.add_document_as_client) against the transaction it
# replaces (begin and settings, docstore.add, the read-back, commit), same sidecar binary, same
# run: two databases, in one of which both functions are renamed away, so the sidecar serving it
# falls back to the transaction. Rounds alternate: pgbench `select docstore.add(...)` (32
# clients, -M simple, values varied per transaction: bench_http.sh's baseline), then wrk (32
# connections, values varied per request) against the one-statement sidecar and the
# transaction sidecar, admin key then JWT. A checkpoint precedes every run.
# Usage: DOCSTORE_PG_PORT=<port> scripts/bench_client_create.sh [rounds, default 3] [seconds, default 10]
#   DOCSTORE_SIDECAR_BIN (default target/release/docstore-sidecar). Databases bench_add_one and
#   bench_add_tx are dropped at the end.
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
  for db in bench_add_one bench_add_tx; do
    "${PSQL[@]}" -d postgres -qc "drop database if exists ${db}" >/dev/null 2>&1 || true
  done
  rm -rf "${tmp}"
}
trap cleanup EXIT
doc="${BENCH_DOC}" # bench_lib.sh
for db in bench_add_one bench_add_tx; do
  fresh_database "${db}"
  "${PSQL[@]}" -d "${db}" -qc "create extension pg_docstore"
  bench_open "${db}"
done
# The transaction sidecar's database: the extension as it was before the one-statement create.
"${PSQL[@]}" -d bench_add_tx -q <<'SQL'
alter function docstore.add_document(text, jsonb, text) rename to add_document_off;
alter function docstore.add_document_as_client(text, jsonb, text, text, text) rename to add_document_as_client_off;
SQL
secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
admin_key="k${secret}"
declare -A URLS
for db in bench_add_one bench_add_tx; do
  port="$(free_port 18900)"
  DOCSTORE_DATABASE_URL="$(sidecar_database_url "${db}")" \
    DOCSTORE_LISTEN="127.0.0.1:${port}" DOCSTORE_JWT_SECRET="${secret}" DOCSTORE_ADMIN_KEY="${admin_key}" \
    DOCSTORE_POOL_SIZE=32 DOCSTORE_LIVE=false "${SIDECAR_BIN}" > "${tmp}/${db}.log" 2>&1 &
  pids+=($!)
  URLS[${db}]="http://127.0.0.1:${port}"
  for i in $(seq 1 150); do
    curl -fsS -o /dev/null --max-time 2 "${URLS[${db}]}/healthz" 2>/dev/null && break
    [ "${i}" -lt 150 ] || { cat "${tmp}/${db}.log"; die "the sidecar of ${db} did not start"; }
    sleep 0.2
  done
done
jwt="$("${PYTHON}" -c 'import sys, time, jwt; now = int(time.time()); print(jwt.encode({"sub": "bench", "iat": now, "exp": now + 3600}, sys.argv[1], algorithm="HS256"))' "${secret}")"
declare -A TOKENS=([admin]="${admin_key}" [jwt]="${jwt}")
sample="$(sed 's/:[rctap]/1/g' <<< "${doc}")"
# Both sidecars answer both kinds with 201 and the same body shape before anything is measured.
for db in bench_add_one bench_add_tx; do
  for who in admin jwt; do
    code="$(curl -sS -o "${tmp}/check" -w '%{http_code}' -X POST -H "Authorization: Bearer ${TOKENS[${who}]}" \
      -H 'Content-Type: application/json' --data "${sample}" "${URLS[${db}]}/v1/databases/(default)/documents/bench_http_add")"
    [ "${code}" = 201 ] || die "POST through ${db} as ${who}: ${code} $(cat "${tmp}/check")"
    "${PYTHON}" -c 'import json, sys; d = json.load(open(sys.argv[1])); assert sorted(d) == ["createTime", "data", "path", "updateTime"], d' "${tmp}/check"
  done
done
write_create_workload "${tmp}"
wrk_rate() { # who, url -> "requests/s p50 p99 errors"
  "${PSQL[@]}" -d postgres -qc checkpoint
  wrk -t 2 -c 32 -d "${SECONDS_PER_RUN}s" --latency -s "${tmp}/add.lua" -H "Authorization: Bearer ${TOKENS[$1]}" "$2" > "${tmp}/wrk.out" 2>&1
  awk '/Requests\/sec/ { rps = $2 } /^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 }
    /Non-2xx or 3xx responses:/ { errors += $NF }
    END { printf "%d %s %s %d", rps, p50, p99, errors }' "${tmp}/wrk.out"
}
cell() { # rps p50 p99 errors base -> "rps (ratio) p50/p99"
  awk -v o="$1" -v a="$2" -v b="$3" -v e="$4" -v t="$5" \
    'BEGIN { printf "%d (%.2fx) %s/%s%s", o, o / t, a, b, (e > 0 ? " (" e " errors)" : "") }'
}
echo "| round | load avg | pgbench docstore.add tps | admin, one statement | admin, transaction | JWT, one statement | JWT, transaction |"
echo "|---|---|---|---|---|---|---|"
for r in $(seq 1 "${ROUNDS}"); do
  load="$(cut -d' ' -f1 /proc/loadavg)"
  "${PSQL[@]}" -d postgres -qc checkpoint
  tps="$(pgbench -n -M simple -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c 32 -j 2 -T "${SECONDS_PER_RUN}" -f "${tmp}/add.sql" bench_add_one 2>&1 | awk '/^tps = /{ printf "%d", $3 }')"
  row="| ${r} | ${load} | ${tps}"
  for who in admin jwt; do
    for db in bench_add_one bench_add_tx; do
      read -r rps p50 p99 errors <<< "$(wrk_rate "${who}" "${URLS[${db}]}")"
      row="${row} | $(cell "${rps}" "${p50}" "${p99}" "${errors}" "${tps}")"
    done
  done
  echo "${row} |"
done
