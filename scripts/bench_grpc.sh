#!/usr/bin/env bash
# gRPC front end against the HTTP API and against SQL (issue 26), in one run, interleaved in
# rounds so that the machine's load drifts alike over every figure:
#   get:    GetDocument of a random one of 1,000 ~1 KB documents | HTTP GET of the same |
#           `select docstore.get(...)` through pgbench;
#   batch:  BatchGetDocuments of 10 consecutive ones | POST :batchGet of the same |
#           one statement of 10 `docstore.get(...)` through pgbench;
#   commit: Commit of one set of a ~1 KB document (random id) | POST :commit of the same |
#           `select docstore.commit(...)` of the same through pgbench.
# Each round runs every (operation, side) once for BENCH_SECONDS with BENCH_CLIENTS concurrent
# clients (one connection each). The gRPC and HTTP sides are driven by the same load generator
# (livequery-sidecar/benches/grpc_load.rs: tonic's client over HTTP/2, hyper's over HTTP/1),
# so the client's cost is alike on both; the admin key authenticates both. The sidecar runs
# with live queries off (nothing but these calls).
#
# Command:   bash scripts/bench_grpc.sh [ROUNDS]      (default 3)
# Needs a running cluster with the extension (`make up`) at DOCSTORE_PG_PORT; it uses a fresh
# database `docstore_bench_grpc` (dropped at the end) and its own sidecar on free ports.
# Environment: DOCSTORE_SIDECAR_BIN (default target/release/docstore-sidecar, built if
# missing), BENCH_LOADGEN (the load generator's executable; default: built by cargo),
# BENCH_SECONDS (default 8), BENCH_CLIENTS (32), BENCH_THREADS (2: the load
# generator's and pgbench's threads), BENCH_GRPC_CONNECTIONS (0: one HTTP/2 connection per
# gRPC client, as HTTP has one HTTP/1 connection per client; 1: all gRPC clients multiplexed
# on one connection, as one SDK client object does).
# Prints a Markdown table per round, the medians, and the CPU per call of the server (the
# sidecar and its Postgres backends) and of the load generator (BENCHMARKS.md, "gRPC front end"); raw
# output in target/bench-grpc/.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/bench_lib.sh"

ROUNDS="${1:-3}"
SECONDS_PER_RUN="${BENCH_SECONDS:-8}"
CLIENTS="${BENCH_CLIENTS:-32}"
THREADS="${BENCH_THREADS:-2}"
GRPC_CONNECTIONS="${BENCH_GRPC_CONNECTIONS:-0}"
DB=docstore_bench_grpc
TARGET="${CARGO_TARGET_DIR:-${ROOT}/target}"
SIDECAR_BIN="${DOCSTORE_SIDECAR_BIN:-${TARGET}/release/docstore-sidecar}"
OUT="${ROOT}/target/bench-grpc"

"${PSQL[@]}" -d postgres -Atc "select 1" >/dev/null 2>&1 ||
  die "no Postgres answers on 127.0.0.1:${DOCSTORE_PG_PORT}: run 'make up' first"
if [ ! -x "${SIDECAR_BIN}" ]; then
  say "building the sidecar (release)"
  (cd "${ROOT}" && cargo build --release --quiet -p docstore-sidecar --bin docstore-sidecar)
fi
LOADGEN="${BENCH_LOADGEN:-}"
[ -n "${LOADGEN}" ] || say "building the load generator (cargo bench --no-run --bench grpc_load)"
[ -n "${LOADGEN}" ] || LOADGEN="$(cd "${ROOT}" && cargo bench --no-run -p docstore-sidecar --bench grpc_load --message-format=json 2>/dev/null |
  "${ROOT}/.venv/bin/python" -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "grpc_load" and m.get("executable"):
        print(m["executable"])')"
[ -x "${LOADGEN}" ] || die "the load generator did not build: cargo bench --no-run -p docstore-sidecar --bench grpc_load"

rm -rf "${OUT}"
mkdir -p "${OUT}"
tmp="$(mktemp -d)"
BENCH_SIDECAR_PID=
cleanup() {
  [ -z "${BENCH_SIDECAR_PID}" ] || kill "${BENCH_SIDECAR_PID}" 2>/dev/null || true
  [ -z "${BENCH_SIDECAR_PID}" ] || wait "${BENCH_SIDECAR_PID}" 2>/dev/null || true
  "${PSQL[@]}" -d postgres -qc "drop database if exists ${DB}" >/dev/null 2>&1 || true
  rm -rf "${tmp}"
}
trap cleanup EXIT

say "preparing database ${DB}: 1,000 documents of ~1 KB (bench/d1..d1000)"
bench_documents "${DB}"
admin_key="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
grpc_port="$(free_port 19787)"
bench_sidecar "${OUT}/sidecar.log" "${SIDECAR_BIN}" "${DB}" "${secret}" "${admin_key}" \
  DOCSTORE_GRPC_LISTEN="127.0.0.1:${grpc_port}"
http_addr="${BENCH_SIDECAR_URL#http://}"
say "sidecar pid ${BENCH_SIDECAR_PID}: HTTP ${http_addr}, gRPC 127.0.0.1:${grpc_port}"

# pgbench scripts: the same calls in SQL.
printf '\\set i random(1, 1000)\nselect docstore.get('"'"'bench/d'"'"' || :i);\n' > "${tmp}/get.sql"
printf '\\set i random(1, 991)\nselect docstore.get('"'"'bench/d'"'"' || (:i + k)) from generate_series(0, 9) k;\n' > "${tmp}/batch.sql"
printf '%s\n%s\n%s\n%s\n%s\nselect docstore.commit('"'"'[{"set": "bench_sql_commit/d:r", "data": %s}]'"'"');\n' \
  '\set r random(1, 1000000)' '\set c random(1, 100)' '\set t random(1, 20)' '\set a random(1, 4)' \
  '\set p random(1, 4)' "${BENCH_DOC}" > "${tmp}/commit.sql"

pgbench_run() { # op, name -> "tps p50 p99" (latencies from pgbench's per-transaction log)
  local mode=prepared
  [ "$1" != commit ] || mode=simple # the document literal holds pgbench variables
  rm -f "${tmp}"/pgbench.log*
  pgbench -n -M "${mode}" -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c "${CLIENTS}" \
    -j "${THREADS}" -T "${SECONDS_PER_RUN}" -l --log-prefix="${tmp}/pgbench.log" \
    -f "${tmp}/$1.sql" "${DB}" > "${OUT}/$2.pgbench" 2>&1 ||
    { cat "${OUT}/$2.pgbench" >&2; die "pgbench $2 failed"; }
  local tps
  tps="$(awk '/^tps = /{printf "%d", $3}' "${OUT}/$2.pgbench")"
  cat "${tmp}"/pgbench.log* | awk '{ print $3 / 1000 }' | sort -n | awk -v tps="${tps}" '
    { v[NR] = $1 }
    END { p50 = v[int(NR * 0.5) > 0 ? int(NR * 0.5) : 1]; p99 = v[int(NR * 0.99) > 0 ? int(NR * 0.99) : 1]
          printf "%d %.2f %.2f", tps, p50, p99 }'
}
# CPU time in microseconds (utime + stime) of the sidecar and of each of its Postgres
# backends, as "pid us" lines: sampled before and after each run of the load generator, so
# that the server's cost per call (the sidecar's and Postgres' share of the shared cores) is
# known apart from the load generator's own.
TICK_US=$((1000000 / $(getconf CLK_TCK)))
cpu_of() { # pid... -> "pid us" for each one alive
  local p
  for p in "$@"; do
    [ -r "/proc/${p}/stat" ] && sed 's/^.*) //' "/proc/${p}/stat" 2>/dev/null |
      awk -v p="${p}" -v t="${TICK_US}" '{ print p, ($12 + $13) * t }'
  done
}
server_cpu() { # -> "pid us" for the sidecar and its backends in ${DB}
  # shellcheck disable=SC2046
  cpu_of "${BENCH_SIDECAR_PID}" $("${PSQL[@]}" -d "${DB}" -Atc \
    "select pid from pg_stat_activity where datname = '${DB}' and application_name = 'docstore-sidecar'")
}
loadgen_run() { # kind, name -> "calls/s p50 p99 errors server-us-per-call loadgen-us-per-call"
  server_cpu > "${tmp}/cpu.before"
  /usr/bin/time -f '%U %S' -o "${OUT}/$2.time" \
    "${LOADGEN}" --kind "$1" --grpc "127.0.0.1:${grpc_port}" --http "${http_addr}" \
    --token "${admin_key}" --doc "${BENCH_DOC}" --clients "${CLIENTS}" \
    --seconds "${SECONDS_PER_RUN}" --threads "${THREADS}" --grpc-connections "${GRPC_CONNECTIONS}" > "${OUT}/$2.out" 2> "${OUT}/$2.err" ||
    { cat "${OUT}/$2.err" >&2; die "load generator $2 failed"; }
  server_cpu > "${tmp}/cpu.after"
  # A backend opened during the run counts from zero; one closed during it is not counted.
  local server
  server="$(awk 'NR == FNR { before[$1] = $2; next } { total += $2 - before[$1] } END { printf "%d", total }' \
    "${tmp}/cpu.before" "${tmp}/cpu.after")"
  awk -v server="${server}" -v secs="${SECONDS_PER_RUN}" -v loadgen="$(tail -n 1 "${OUT}/$2.time")" '
    { calls = $1 * secs; split(loadgen, lg, " ")
      printf "%s %s %s %s %.0f %.0f", $1, $2, $3, $4, (calls > 0 ? server / calls : 0), (calls > 0 ? (lg[1] + lg[2]) * 1e6 / calls : 0) }' "${OUT}/$2.out"
}
ratio() { awk "BEGIN { if ($2 > 0) printf \"%.2f\", $1 / $2; else print \"-\" }"; }

declare -A LABEL=([get]="GetDocument / GET, 1 KB" [batch]="BatchGetDocuments / :batchGet, 10 x 1 KB"
  [commit]="Commit / :commit, one set of 1 KB")
: > "${OUT}/rounds.tsv"
for round in $(seq 1 "${ROUNDS}"); do
  for op in get batch commit; do
    # Alternate which transport goes first, so neither always follows the SQL run.
    order=(grpc http sql)
    [ $((round % 2)) = 1 ] || order=(http grpc sql)
    for side in "${order[@]}"; do
      "${PSQL[@]}" -d "${DB}" -qc checkpoint
      say "round ${round}: ${op} over ${side}, ${CLIENTS} clients, ${SECONDS_PER_RUN} s"
      case "${side}" in
        sql) read -r rate p50 p99 <<< "$(pgbench_run "${op}" "${op}-sql-${round}")"; errors=0; server_us=-; loadgen_us=- ;;
        *) read -r rate p50 p99 errors server_us loadgen_us <<< "$(loadgen_run "${side}-${op}" "${op}-${side}-${round}")" ;;
      esac
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${round}" "${op}" "${side}" "${rate}" "${p50}" "${p99}" "${errors}" "${server_us}" "${loadgen_us}" >> "${OUT}/rounds.tsv"
    done
  done
done

{
  echo "Sidecar ${SIDECAR_BIN##*/} (pool 32, live queries off), ${CLIENTS} clients (gRPC connections: $([ "${GRPC_CONNECTIONS}" = 0 ] && echo "one per client" || echo "${GRPC_CONNECTIONS}")), ${SECONDS_PER_RUN} s per run, ${ROUNDS} rounds; cores: $(nproc); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| round | operation | gRPC calls/s (p50 / p99 ms) | HTTP requests/s (p50 / p99 ms) | pgbench tps (p50 / p99 ms) | gRPC / HTTP | gRPC / SQL | HTTP / SQL |"
  echo "|---|---|---|---|---|---|---|---|"
  for round in $(seq 1 "${ROUNDS}"); do
    for op in get batch commit; do
      row() { awk -F'\t' -v r="${round}" -v o="${op}" -v s="$1" '$1 == r && $2 == o && $3 == s { printf "%s %s %s %s", $4, $5, $6, $7 }' "${OUT}/rounds.tsv"; }
      read -r g gp50 gp99 gerr <<< "$(row grpc)"
      read -r h hp50 hp99 herr <<< "$(row http)"
      read -r s sp50 sp99 _ <<< "$(row sql)"
      note() { [ "$1" = 0 ] || echo " ($1 errors)"; }
      echo "| ${round} | ${LABEL[${op}]} | ${g} (${gp50} / ${gp99})$(note "${gerr}") | ${h} (${hp50} / ${hp99})$(note "${herr}") | ${s} (${sp50} / ${sp99}) | $(ratio "${g}" "${h}") | $(ratio "${g}" "${s}") | $(ratio "${h}" "${s}") |"
    done
  done
  echo
  echo "Medians over the rounds of each ratio:"
  echo
  echo "| operation | gRPC / HTTP (range) | gRPC / SQL (range) | HTTP / SQL (range) |"
  echo "|---|---|---|---|"
  for op in get batch commit; do
    awk -F'\t' -v o="${op}" '
      $2 == o { rate[$1, $3] = $4; rounds[$1] = 1 }
      function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      END {
        n = 0
        for (r in rounds) { n++; gh[n] = rate[r, "grpc"] / rate[r, "http"]; gs[n] = rate[r, "grpc"] / rate[r, "sql"]; hs[n] = rate[r, "http"] / rate[r, "sql"] }
        m1 = med(gh, n); lo1 = gh[1]; hi1 = gh[n]; m2 = med(gs, n); lo2 = gs[1]; hi2 = gs[n]; m3 = med(hs, n); lo3 = hs[1]; hi3 = hs[n]
        printf "| %s | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) |\n", o, m1, lo1, hi1, m2, lo2, hi2, m3, lo3, hi3
      }' "${OUT}/rounds.tsv"
  done
  echo
  echo "CPU per call, in microseconds (utime + stime over each run, divided by its calls): the"
  echo "server is the sidecar and its Postgres backends, the client the load generator, all on"
  echo "the same cores. The server's capacity ratio is HTTP's server CPU per call over gRPC's:"
  echo "how many gRPC calls the server can answer per HTTP request, whatever the client costs."
  echo
  echo "| round | operation | server gRPC / HTTP (us) | load generator gRPC / HTTP (us) | server capacity gRPC / HTTP |"
  echo "|---|---|---|---|---|"
  awk -F'\t' '$3 != "sql" { s[$1, $2, $3] = $8; l[$1, $2, $3] = $9; key[$1 "\t" $2] = 1 }
    END { for (k in key) { split(k, a, "\t"); r = a[1]; o = a[2]
            printf "| %s | %s | %s / %s | %s / %s | %.2f |\n", r, o, s[r, o, "grpc"], s[r, o, "http"], l[r, o, "grpc"], l[r, o, "http"], (s[r, o, "grpc"] > 0 ? s[r, o, "http"] / s[r, o, "grpc"] : 0) } }' \
    "${OUT}/rounds.tsv" | sort -t'|' -k2,2n -k3,3
} | tee "${OUT}/results.md"
