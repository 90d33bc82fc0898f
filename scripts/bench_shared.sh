#!/usr/bin/env bash
# One-statement requests on shared, pipelined connections (the sidecar's default,
# --shared-connections) against the same requests on pooled connections, one request per
# connection at a time (--shared-connections 0), same binary, same database, same run; each
# against issue 11's pgbench baseline (32 clients):
#   GET of a ~1 KB document (one of 1,000, at random) vs `select docstore.get(...)` (-M prepared);
#   create (POST of bench_lib.sh's ~1 KB document) vs `select docstore.add(...)` (-M simple);
# each with the admin key and with an HS256 JWT (the open ruleset of demo/open_rules.sql: the
# `get`/`create` rule is not what is measured). Rounds alternate pgbench, then wrk (32 connections, 2 threads)
# against the shared and the pooled sidecar, admin then JWT (creates only against the first:
# a create takes a pooled connection in both). A checkpoint precedes every create run.
# Usage: DOCSTORE_PG_PORT=<port> scripts/bench_shared.sh [rounds, default 3] [seconds, default 8]
#   DOCSTORE_SIDECAR_BIN (default target/release/docstore-sidecar), BENCH_SHARED (the shared
#   sidecar's --shared-connections, default 2), BENCH_WHAT ("get create", default both).
#   Database bench_shared is dropped at the end.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/bench_lib.sh"
ROUNDS="${1:-3}"
SECONDS_PER_RUN="${2:-8}"
SHARED="${BENCH_SHARED:-2}"
WHAT="${BENCH_WHAT:-get create}"
SIDECAR_BIN="${DOCSTORE_SIDECAR_BIN:-${CARGO_TARGET_DIR:-${ROOT}/target}/release/docstore-sidecar}"
DB=bench_shared
bench_scratch "${DB}"
tmp="${BENCH_TMP}"
bench_documents "${DB}"
secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
admin_key="k${secret}"
declare -A URLS
for mode in shared pooled; do
  connections="${SHARED}"
  [ "${mode}" = shared ] || connections=0
  bench_sidecar "${tmp}/${mode}.log" "${SIDECAR_BIN}" "${DB}" "${secret}" "${admin_key}" \
    DOCSTORE_SHARED_CONNECTIONS="${connections}"
  BENCH_PIDS+=("${BENCH_SIDECAR_PID}")
  URLS[${mode}]="${BENCH_SIDECAR_URL}"
done
jwt="$(bench_jwt "${secret}")"
declare -A TOKENS=([admin]="${admin_key}" [jwt]="${jwt}")
sample="$(sed 's/:[rctap]/1/g' <<< "${BENCH_DOC}")"
# Both sidecars answer every kind before anything is measured.
for mode in shared pooled; do
  for who in admin jwt; do
    code="$(curl -sS -o "${tmp}/check" -w '%{http_code}' -H "Authorization: Bearer ${TOKENS[${who}]}" \
      "${URLS[${mode}]}/v1/databases/(default)/documents/bench/d7")"
    [ "${code}" = 200 ] || die "GET through the ${mode} sidecar as ${who}: ${code} $(cat "${tmp}/check")"
    code="$(curl -sS -o "${tmp}/check" -w '%{http_code}' -X POST -H "Authorization: Bearer ${TOKENS[${who}]}" \
      -H 'Content-Type: application/json' --data "${sample}" "${URLS[${mode}]}/v1/databases/(default)/documents/bench_http_add")"
    [ "${code}" = 201 ] || die "POST through the ${mode} sidecar as ${who}: ${code} $(cat "${tmp}/check")"
  done
done
write_create_workload "${tmp}"
bench_get_lua "${tmp}/get.lua"
cat > "${tmp}/get.sql" <<'SQL'
\set i random(1, 1000)
select docstore.get('bench/d' || :i);
SQL
wrk_rate() { # script, who, url -> "requests/s p50 p99 errors"
  wrk -t 2 -c 32 -d "${SECONDS_PER_RUN}s" --latency -s "$1" -H "Authorization: Bearer ${TOKENS[$2]}" "$3" > "${tmp}/wrk.out" 2>&1
  awk '/Requests\/sec/ { rps = $2 } /^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 }
    /Non-2xx or 3xx responses:/ { errors += $NF } /Socket errors/ { errors += 1 }
    END { printf "%d %s %s %d", rps, p50, p99, errors }' "${tmp}/wrk.out"
}
cell() { # rps p50 p99 errors base -> "rps (ratio) p50/p99"
  awk -v o="$1" -v a="$2" -v b="$3" -v e="$4" -v t="$5" \
    'BEGIN { printf "%d (%.2fx) %s/%s%s", o, o / t, a, b, (e > 0 ? " (" e " errors)" : "") }'
}
pgbench_tps() { # mode, script
  pgbench -n -M "$1" -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c 32 -j 2 -T "${SECONDS_PER_RUN}" -f "$2" "${DB}" 2>&1 |
    awk '/^tps = /{ printf "%d", $3 }'
}
echo "Shared sidecar: --shared-connections ${SHARED}; pooled: 0 (pool of 32). ${SECONDS_PER_RUN} s per run."
echo
echo "| round | what | load avg | pgbench tps | admin, shared | admin, pooled | JWT, shared | JWT, pooled |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "${ROUNDS}"); do
  for what in ${WHAT}; do
    load="$(cut -d' ' -f1 /proc/loadavg)"
    case "${what}" in
      get) script="${tmp}/get.lua"; tps="$(pgbench_tps prepared "${tmp}/get.sql")" ;;
      create) script="${tmp}/add.lua"; "${PSQL[@]}" -d postgres -qc checkpoint; tps="$(pgbench_tps simple "${tmp}/add.sql")" ;;
      *) die "BENCH_WHAT: get or create, not ${what}" ;;
    esac
    row="| ${r} | ${what} | ${load} | ${tps}"
    for who in admin jwt; do
      for mode in shared pooled; do
        if [ "${what}" = create ] && [ "${mode}" = pooled ]; then
          row="${row} | (as shared)" # creates take a pooled connection in both
          continue
        fi
        [ "${what}" = get ] || "${PSQL[@]}" -d postgres -qc checkpoint
        read -r rps p50 p99 errors <<< "$(wrk_rate "${script}" "${who}" "${URLS[${mode}]}")"
        row="${row} | $(cell "${rps}" "${p50}" "${p99}" "${errors}" "${tps}")"
      done
    done
    echo "${row} |"
  done
done
