#!/usr/bin/env bash
# Live-query benchmarks (issue 12, Performance), end to end on this machine: a throwaway
# Postgres cluster of its own (installed extension, wal_level=logical), a sidecar of this
# checkout on a free port, and docstore-loadgen (loadgen/) opening SSE listen streams and
# writing through Postgres. Scenarios, each run BENCH_REPEAT times:
#   latency     1,000 subscriptions (10 streams x 100), 100 writes/s: commit -> client event
#   scale       equality + order + limit subscriptions at BENCH_SCALE_RATE writes/s (1,000):
#               1,000 (10 x 100) then 10,000 (100 x 100) subscriptions, same rate (BENCH_SCALE_SUBS:
#               "1k:10 10k:100", subscriptions:streams of 100), at each matcher partitioning of
#               BENCH_PARTITIONS ("1x1"; e.g. "1x1 2x2 1x2 2x1": write x query partitions,
#               docs/architecture.md "Matching and scale"), in that order; BENCH_READY_TIMEOUT
#               (180): seconds the loadgen waits for every first snapshot
#   ladder      1,000 and 10,000 subscriptions at each of BENCH_LADDER's rates (writes/s):
#               where it stops keeping up, and 1k against 10k at rates it keeps up with
#   transport   the latency run over SSE and over gRPC Listen (the sidecar's --grpc-listen,
#               docs/grpc.md), interleaved: each round runs both, SSE first in odd rounds, gRPC
#               first in even ones (issue 26)
#   cluster     the latency run through one process and through the cluster of --role ingest,
#               nats-server -js and --role gateway (docs/architecture.md "Processes"), interleaved:
#               the cost NATS adds to commit -> event (issue 27)
#   cluster-scale the scale run (BENCH_SCALE_SUBS, BENCH_SCALE_RATE) through the cluster's
#               ingest -> nats-server -> gateway: matching scale in the cluster (issue 27)
#   rules       the latency run under a ruleset (list rule with one get() of the city's document):
#               as the admin key (rules bypassed) then as a JWT stream, whose every event is
#               decided by the sidecar's rules evaluator (session/guard) before it is sent
#   throughput  1,000 subscriptions, pgbench `select docstore.add(...)` with BENCH_CLIENTS
#               clients for BENCH_SECONDS: the same pgbench alone first (the baseline: what
#               Postgres sustains), then with the sidecar decoding and the streams reading
#   triggers    write triggers' delivery (issue 28): one trigger on loadgen/{id} posting to the
#               loadgen's local endpoint (answers 200 at once), no streams, writes at each of
#               BENCH_TRIGGER_RATES (100 1000): commit -> endpoint latency and deliveries/s
#   fanout      the Firestore paper's fan-out (Fig. 9): one document of city c0 written once a
#               second, BENCH_FANOUT listeners (SSE, one connection each, from 4 loopback
#               addresses; default "1000 10000 19000": a process may hold 20,000 files on this
#               machine, RLIMIT_NOFILE's hard limit, which root cannot raise here) and
#               BENCH_FANOUT_GRPC listeners over gRPC Listen, 100 per HTTP/2 connection
#               (default 50000): commitTime -> each listener and -> the last one, p50 / p99
#   fanout-cluster  the fan-out at BENCH_FANOUT_CLUSTER listeners (default 50000) over the
#               cluster: nats-server -js, an ingest and BENCH_FANOUT_GATEWAYS gateways (4), each
#               with its share of the listeners from a loadgen of its own (every process under the
#               20,000 files one may hold here); a loadgen with no listeners writes c0 once a
#               second; scripts/fanout_merge.py merges the processes' receive times into
#               commitTime -> the last listener of all, per write
#   ycsb        YCSB workloads A (50/50 read/update) and B (95/5) over HTTP (GET / PATCH of one
#               field of 100 bytes, 10,000 documents of 900 bytes, uniform keys, open loop at each
#               of BENCH_YCSB_RATES ops/s, 0 = as fast as BENCH_YCSB_CONNECTIONS connections go),
#               and the same workload in SQL through pgbench at the same rate (the baseline)
#   triggers-live  the latency run (1,000 subscriptions, 100 writes/s) with 0 and then 10
#               triggers on loadgen/{id} (1,000 deliveries/s to the loadgen's endpoint),
#               interleaved: what delivering costs the live path
# Every subscription is `select * from /loadgen where city = "cK" order by rating desc limit 10`
# over 3 preloaded documents per city; every write enters its city's top 10 (its rating is above
# every earlier one: 10^13 + the clock in microseconds, for the loadgen's writes and pgbench's alike), so
# each write is one `added` change on exactly one subscription.
#
# Command:   bash scripts/bench_live.sh [scenario...]     (default: all but rules)
# Needs: the installed extension (`make up` on the rulesext branch installs it); runs as root or
# with sudo (Postgres runs as user postgres). Environment: BENCH_REPEAT (2), BENCH_SECONDS (20),
# BENCH_SCALE_RATE (1000), BENCH_LADDER ("250 500"), BENCH_CLIENTS (8),
# BENCH_CONNECTIONS (writer connections, 8), BENCH_TRIGGER_RATES ("100 1000"), CARGO_TARGET_DIR, BENCH_BUILD=0 (use the binaries
# already built there), BENCH_PG_OPTIONS (more `-c name=value` for the cluster, e.g. to preload
# pg_stat_statements while measuring).
# Prints the loadgen summaries and, at the end, the Markdown rows for BENCHMARKS.md
# ("Live queries"); raw output in target/bench-live/.
source "$(dirname "$0")/lib.sh"

REPEAT="${BENCH_REPEAT:-2}"
SECONDS_PER_RUN="${BENCH_SECONDS:-20}"
SCALE_RATE="${BENCH_SCALE_RATE:-1000}"
SCALE_SUBS="${BENCH_SCALE_SUBS:-1k:10 10k:100}"
PARTITIONS="${BENCH_PARTITIONS:-1x1}"
READY_TIMEOUT="${BENCH_READY_TIMEOUT:-180}"
# The matcher partitions of the next sidecar started (write, query).
MATCH_W=1
MATCH_Q=1
LADDER="${BENCH_LADDER:-250 500}"
CLIENTS="${BENCH_CLIENTS:-8}"
WRITERS="${BENCH_CONNECTIONS:-8}"
TRIGGER_RATES="${BENCH_TRIGGER_RATES:-100 1000}"
FANOUT="${BENCH_FANOUT-1000 10000 19000}"
FANOUT_GRPC="${BENCH_FANOUT_GRPC-50000}"
FANOUT_CLUSTER="${BENCH_FANOUT_CLUSTER:-50000}"
FANOUT_GATEWAYS="${BENCH_FANOUT_GATEWAYS:-4}"
YCSB_RATES="${BENCH_YCSB_RATES:-500 1000 2000 0}"
YCSB_CONNECTIONS="${BENCH_YCSB_CONNECTIONS:-16}"
YCSB_RECORDS=10000
CITIES=10000
PER_CITY=3
DB=docstore_bench_live
TARGET="${CARGO_TARGET_DIR:-${ROOT}/target}/release"
OUT="${ROOT}/target/bench-live"
SCENARIOS=("$@")
[ "${#SCENARIOS[@]}" -gt 0 ] || SCENARIOS=(latency scale ladder throughput)
# The rules scenario's ruleset: a stream may list a city's documents when the city is open.
RULES="rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /loadgen/{doc} {
      allow list: if request.auth != null
        && get(/databases/\$(database)/documents/cities/\$(resource.data.city)).data.open == true;
    }
  }
}"

[ -f "$(installed_library)" ] || die "the extension is not installed: run 'make up' first"
if [ "${BENCH_BUILD:-1}" = 1 ]; then
  say "building docstore-sidecar and docstore-loadgen (release)"
  (cd "${ROOT}" && cargo build --release --quiet -p docstore-sidecar -p docstore-loadgen)
fi
rm -rf "${OUT}"
mkdir -p "${OUT}"

# The cluster: like `make up`'s (logical decoding, the library preloaded), fsync on.
THROWAWAY_OPTIONS="-c wal_level=logical -c shared_preload_libraries=pg_docstore -c max_connections=200 -c max_replication_slots=8 -c max_wal_senders=8 -c shared_buffers=512MB -c wal_compression=lz4 ${BENCH_PG_OPTIONS:-}"
say "starting a throwaway cluster"
start_throwaway_cluster
postmaster_pid="$(as_postgres head -1 "${THROWAWAY_DIR}/data/postmaster.pid")"
sidecar_pid=
cleanup() {
  if declare -F stop_sidecar >/dev/null; then stop_sidecar; fi
  stop_throwaway_cluster
}
trap cleanup EXIT
trap 'exit 143' TERM INT

say "preparing ${DB}: ${PER_CITY} documents in each of ${CITIES} cities, index (city, rating desc)"
fresh_database "${DB}"
"${PSQL[@]}" -d "${DB}" -q -v cities="${CITIES}" -v per="${PER_CITY}" <<'SQL'
create extension pg_docstore;
-- The sidecar answers only for database ids listed here (as bench_http.sh sets it up when the
-- installed extension predates the table).
do $$ begin
  if to_regclass('docstore.databases') is null then
    create table docstore.databases (id text primary key, created_at timestamptz not null default now());
    insert into docstore.databases (id) values ('(default)');
  end if;
end $$;
select docstore.create_index('loadgen', '[{"field": "city"}, {"field": "rating", "order": "desc"}]') > 0 as index_created;
select count(docstore.set('loadgen/p' || c || '-' || k,
  jsonb_build_object('city', 'c' || c, 'rating', k, 'name', 'preloaded ' || k, 'note', repeat('x', 200))))
from generate_series(0, :cities - 1) c, generate_series(1, :per) k;
analyze;
SQL
for i in $(seq 1 100); do
  "${PSQL[@]}" -d "${DB}" -Atc "select count(*) from docstore.query('select * from /loadgen where city = \"c1\" order by rating desc limit 10')" >/dev/null 2>&1 && break
  [ "${i}" -lt 100 ] || die "the index (city, rating desc) never became ready"
  sleep 0.5
done

port="$(free_port 18900)"
grpc_port="$(free_port 19900)"
admin_key="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
jwt_secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# An HS256 JWT of the sidecar's secret for `sub` $1, valid for an hour.
jwt() {
  python3 - "${jwt_secret}" "$1" <<'PY'
import base64, hashlib, hmac, json, sys, time
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
body = b64(json.dumps({"sub": sys.argv[2], "exp": int(time.time()) + 3600}).encode())
sig = hmac.new(sys.argv[1].encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
print(f"{head}.{body}.{b64(sig)}")
PY
}
# Each run gets a fresh sidecar and a fresh slot: no backlog of the previous run to decode, no
# streams of the previous run in their resume grace, a clean RSS baseline. Every stream comes
# from 127.0.0.1: the connection and stream caps are raised above the load.
# CLUSTER=1: the next start_sidecar starts the sidecar as a gateway (--role gateway) behind a
# nats-server -js and an ingest (--role ingest) of its own (docs/architecture.md, "Processes"):
# the loadgen talks to the gateway at the same port, and measures the gateway's CPU.
CLUSTER=0
nats_pid=
ingest_pid=
# GATEWAYS > 1 (with CLUSTER=1): start_sidecar starts that many gateways on the one NATS; their
# ports and pids (the first is port / sidecar_pid).
GATEWAYS=1
gateway_ports=()
gateway_pids=()
sidecar_env() { # the environment of a sidecar listening on $1
  exec env DOCSTORE_DATABASE_URL="$(sidecar_database_url "${DB}")" \
    DOCSTORE_LISTEN="127.0.0.1:$1" DOCSTORE_ADMIN_KEY="${admin_key}" DOCSTORE_JWT_SECRET="${jwt_secret}" DOCSTORE_SLOT=bench_live \
    DOCSTORE_MATCH_WRITE_PARTITIONS="${MATCH_W}" DOCSTORE_MATCH_QUERY_PARTITIONS="${MATCH_Q}" \
    DOCSTORE_LISTEN_GRACE_SECONDS=2 DOCSTORE_MAX_CONNECTIONS=1000000 DOCSTORE_MAX_CONNECTIONS_PER_CLIENT=1000000 \
    DOCSTORE_MAX_STREAMS=1000000 DOCSTORE_MAX_STREAMS_PER_CALLER=1000000 RUST_LOG=warn "${@:2}"
}
wait_health() { # port pid
  for i in $(seq 1 300); do
    curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$1/healthz" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { tail -50 "${OUT}/sidecar.log"; die "the sidecar exited"; }
    [ "${i}" -lt 300 ] || die "the sidecar on port $1 did not answer /healthz within 60 s"
    sleep 0.2
  done
}
start_sidecar() {
  # The previous run's walsender may still hold the slot for a moment after its sidecar ended.
  for _ in $(seq 1 100); do
    [ "$("${PSQL[@]}" -d "${DB}" -qAtc "select count(pg_drop_replication_slot(slot_name)) from pg_replication_slots where slot_name = 'bench_live' and not active; select count(*) from pg_replication_slots where slot_name = 'bench_live'" | tail -1)" = 0 ] && break
    sleep 0.1
  done
  local role=()
  gateway_ports=("${port}")
  gateway_pids=()
  if [ "${CLUSTER}" = 1 ]; then
    local nats_port ingest_port
    nats_port="$(free_port 14222)"
    rm -rf "${OUT}/nats"
    mkdir -p "${OUT}/nats"
    "$(command -v nats-server || echo /usr/sbin/nats-server)" -js -a 127.0.0.1 -p "${nats_port}" -sd "${OUT}/nats" >> "${OUT}/nats.log" 2>&1 &
    nats_pid=$!
    for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/${nats_port}") 2>/dev/null && break; sleep 0.1; done
    role=(--role gateway --nats-url "nats://127.0.0.1:${nats_port}")
    ingest_port="$(free_port $((port + 2)))"
    sidecar_env "${ingest_port}" "${TARGET}/docstore-sidecar" --role ingest --nats-url "nats://127.0.0.1:${nats_port}" >> "${OUT}/sidecar.log" 2>&1 &
    ingest_pid=$!
    wait_health "${ingest_port}" "${ingest_pid}"
  fi
  sidecar_env "${port}" "${TARGET}/docstore-sidecar" --grpc-listen "127.0.0.1:${grpc_port}" "${role[@]}" >> "${OUT}/sidecar.log" 2>&1 &
  sidecar_pid=$!
  wait_health "${port}" "${sidecar_pid}"
  gateway_pids=("${sidecar_pid}")
  local g more
  for g in $(seq 2 "${GATEWAYS}"); do
    [ "${CLUSTER}" = 1 ] || break
    more="$(free_port $((port + 10 * g)))"
    sidecar_env "${more}" "${TARGET}/docstore-sidecar" "${role[@]}" >> "${OUT}/sidecar.log" 2>&1 &
    gateway_pids+=($!)
    gateway_ports+=("${more}")
    wait_health "${more}" "$!"
  done
}
stop_sidecar() {
  local pid
  for pid in "${sidecar_pid}" "${gateway_pids[@]:1}" "${ingest_pid}" "${nats_pid}"; do
    [ -n "${pid}" ] || continue
    kill "${pid}" 2>/dev/null || true
    wait "${pid}" 2>/dev/null || true
  done
  sidecar_pid=
  ingest_pid=
  nats_pid=
  gateway_pids=()
}

ROWS=()
TROWS=()
# Run the loadgen (name, flags...): its summary on stdout and in OUT/name.txt, the load average
# before it in OUT/name.load.
loadgen() {
  local name="$1"
  shift
  cut -d' ' -f1-3 /proc/loadavg > "${OUT}/${name}.load"
  [ -n "${sidecar_pid}" ] || start_sidecar
  DOCSTORE_LOADGEN_TOKEN="${LOADGEN_TOKEN:-${admin_key}}" "${TARGET}/docstore-loadgen" --sidecar "127.0.0.1:${port}" \
    --grpc "127.0.0.1:${grpc_port}" \
    --pg "postgresql://postgres@127.0.0.1:${DOCSTORE_PG_PORT}/${DB}" --sidecar-pid "${sidecar_pid}" \
    --postmaster-pid "${postmaster_pid}" --label "${name}" "$@" | tee "${OUT}/${name}.txt"
}
row() { # name[, note]: the table row of a finished run (and the end of its sidecar)
  stop_sidecar
  ROWS+=("$(sed -n 's/^ROW //p' "${OUT}/$1.txt") $(cat "${OUT}/$1.load") | ${2:-} |")
}

# Write triggers: N triggers on loadgen/{id} (every write) posting to the loadgen's endpoint.
trigger_port="$(free_port 19100)"
create_triggers() { # N
  "${PSQL[@]}" -d "${DB}" -qAt -v n="$1" -v url="http://127.0.0.1:${trigger_port}/" <<'SQL' >/dev/null
set docstore.trigger_url_prefixes = 'http://127.0.0.1:';
select count(docstore.create_trigger('bench' || k, 'loadgen/{id}', '{write}', :'url'))
from generate_series(1, :n) k;
SQL
}
drop_triggers() {
  "${PSQL[@]}" -d "${DB}" -qAtc "select count(docstore.drop_trigger(name)) from docstore.triggers where name like 'bench%'" >/dev/null
}
trow() { # name: the write triggers' table row of a finished run
  TROWS+=("$(sed -n 's/^TRIGGERS //p' "${OUT}/$1.txt") $(cat "${OUT}/$1.load") |")
}

pgbench_add() { # name -> pgbench output in OUT/name.pgbench, tps on stdout
  cat > "${OUT}/add.sql" <<'PGB'
\set c random(0, 999)
select docstore.add('loadgen', jsonb_build_object('city', 'c' || :c, 'rating', 10000000000000 + (extract(epoch from clock_timestamp()) * 1000000)::bigint, 'name', 'pgbench', 'note', repeat('x', 200)));
PGB
  pgbench -n -M prepared -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres -c "${CLIENTS}" -j 2 \
    -T "${SECONDS_PER_RUN}" -f "${OUT}/add.sql" "${DB}" > "${OUT}/$1.pgbench" 2>&1 ||
    { cat "${OUT}/$1.pgbench" >&2; die "pgbench $1 failed"; }
  awk '/^tps = /{printf "%.0f", $3}' "${OUT}/$1.pgbench"
}

FROWS=()
frow() { # name, note: the fan-out table row of a finished run
  stop_sidecar
  FROWS+=("$(sed -n 's/^FANOUT //p' "${OUT}/$1.txt") $(cat "${OUT}/$1.load") | $2 |")
}

# Back to the preloaded documents (3 per city): every scale run subscribes over the same data.
# The writes of a run before it filled its cities' windows, and the memory per subscription
# measured after it counted those documents (a 2x2 run after a 1x1 one held 8.2-9.0 KiB per
# subscription; alone, or first, 6.3-6.8).
only_preloaded() {
  "${PSQL[@]}" -d "${DB}" -qAt -c "select count(docstore.delete(path)) from docstore.documents where collection = 'loadgen' and path not like 'loadgen/p%'" >/dev/null
}

YROWS=()
ycsb_load() { # the YCSB records: usertable/user0 .. with field0 .. field8 of 100 bytes each
  "${PSQL[@]}" -d "${DB}" -qAt -v n="${YCSB_RECORDS}" <<'SQL' >/dev/null
select count(docstore.set('usertable/user' || k,
  (select jsonb_object_agg('field' || f, substr(repeat(md5(k::text || '-' || f), 4), 1, 100))
   from generate_series(0, 8) f)))
from generate_series(0, :n - 1) k;
analyze;
SQL
}
# pgbench with YCSB workload $1 (a or b) at rate $2 (0: unthrottled): the same operations as the
# loadgen's HTTP requests, in SQL (docstore.get_document, what the sidecar's GET calls, and
# docstore.update of one field); p50 / p99 from the per-transaction log, from the scheduled start.
pgbench_ycsb() { # workload rate name
  local reads=50 rate_flag=()
  [ "$1" = b ] && reads=95
  [ "$2" = 0 ] || rate_flag=(-R "$2")
  cat > "${OUT}/ycsb-read.sql" <<PGB
\set k random(0, $((YCSB_RECORDS - 1)))
select * from docstore.get_document('usertable/user' || :k);
PGB
  cat > "${OUT}/ycsb-update.sql" <<PGB
\set k random(0, $((YCSB_RECORDS - 1)))
\set f random(0, 8)
select docstore.update('usertable/user' || :k, jsonb_build_object('field' || :f, substr(repeat(md5(random()::text), 4), 1, 100)));
PGB
  rm -rf "${OUT}/pglog-$3" && mkdir -p "${OUT}/pglog-$3"
  (cd "${OUT}/pglog-$3" && pgbench -n -M prepared -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres \
    -c "${YCSB_CONNECTIONS}" -j 2 -T "${SECONDS_PER_RUN}" "${rate_flag[@]}" -l \
    -f "${OUT}/ycsb-read.sql@${reads}" -f "${OUT}/ycsb-update.sql@$((100 - reads))" "${DB}") \
    > "${OUT}/$3.pgbench" 2>&1 || { cat "${OUT}/$3.pgbench" >&2; die "pgbench $3 failed"; }
  # Log lines: client_id transaction_no time script_no time_epoch time_us [schedule_lag].
  local done
  done="$(awk '/^tps = /{printf "%.0f", $3}' "${OUT}/$3.pgbench")"
  cat "${OUT}/pglog-$3"/pgbench_log.* | awk '{ lat = $3 + ($7 == "" ? 0 : $7); print $4, lat }' |
    sort -k1,1n -k2,2n | awk -v name="$3" -v w="$1" -v asked="$2" -v done="${done}" '
      { v[$1, ++n[$1]] = $2 }
      function q(s, p,   r) { r = int(p * n[s] + 0.999999); if (r < 1) r = 1; return sprintf("%.2f", v[s, r] / 1000) }
      END { printf "| %s | %s | %s | %s | %s | %s | %s | %s | - |", name, toupper(w), (asked == 0 ? "max" : asked), done, q(0, 0.5), q(0, 0.99), q(1, 0.5), q(1, 0.99) }'
}

for scenario in "${SCENARIOS[@]}"; do
  for r in $(seq 1 "${REPEAT}"); do
    case "${scenario}" in
      latency)
        loadgen "latency-1k-100ws-r${r}" --streams 10 --targets 100 --rate 100 --seconds "${SECONDS_PER_RUN}" --connections 2
        row "latency-1k-100ws-r${r}" ;;
      scale)
        for subs in ${SCALE_SUBS}; do
          for parts in ${PARTITIONS}; do
            MATCH_W="${parts%%x*}" MATCH_Q="${parts##*x}"
            name="scale-${subs%%:*}-${SCALE_RATE}ws-${parts}-r${r}"
            only_preloaded
            loadgen "${name}" --streams "${subs##*:}" --targets 100 --rate "${SCALE_RATE}" --seconds "${SECONDS_PER_RUN}" --connections "${WRITERS}" --ready-timeout "${READY_TIMEOUT}"
            row "${name}" "matcher ${parts}"
          done
        done
        MATCH_W=1 MATCH_Q=1 ;;
      ladder)
        for rate in ${LADDER}; do
          for subs in 1k:10 10k:100; do
            name="ladder-${subs%%:*}-${rate}ws-r${r}"
            loadgen "${name}" --streams "${subs##*:}" --targets 100 --rate "${rate}" --seconds "${SECONDS_PER_RUN}" --connections "${WRITERS}"
            row "${name}"
          done
        done ;;
      cluster)
        # The latency run through one process (role all) and through the cluster (ingest ->
        # NATS JetStream -> gateway), interleaved: what NATS adds to commit -> event (issue 27).
        order=(all cluster)
        [ $((r % 2)) = 1 ] || order=(cluster all)
        for mode in "${order[@]}"; do
          [ "${mode}" = cluster ] && CLUSTER=1
          loadgen "${mode}-1k-100ws-r${r}" --streams 10 --targets 100 --rate 100 --seconds "${SECONDS_PER_RUN}" --connections 2
          row "${mode}-1k-100ws-r${r}" "$([ "${mode}" = cluster ] && echo "gateway <- nats-server <- ingest (sidecar CPU: the gateway's)" || echo "one process")"
          CLUSTER=0
        done ;;
      cluster-scale)
        for subs in ${SCALE_SUBS}; do
          CLUSTER=1
          name="cluster-scale-${subs%%:*}-${SCALE_RATE}ws-r${r}"
          loadgen "${name}" --streams "${subs##*:}" --targets 100 --rate "${SCALE_RATE}" --seconds "${SECONDS_PER_RUN}" --connections "${WRITERS}" --ready-timeout "${READY_TIMEOUT}"
          row "${name}" "gateway <- nats-server <- ingest (sidecar CPU: the gateway's)"
          CLUSTER=0
        done ;;
      transport)
        order=(sse grpc)
        [ $((r % 2)) = 1 ] || order=(grpc sse)
        for transport in "${order[@]}"; do
          loadgen "${transport}-1k-100ws-r${r}" --transport "${transport}" --streams 10 --targets 100 --rate 100 --seconds "${SECONDS_PER_RUN}" --connections 2
          row "${transport}-1k-100ws-r${r}" "${transport}"
        done ;;
      rules)
        "${PSQL[@]}" -d "${DB}" -qAt -v cities="${CITIES}" -v rules="${RULES}" <<'SQL' >/dev/null
select count(docstore.set('cities/c' || c, '{"open": true}')) from generate_series(0, :cities - 1) c;
select docstore.set_rules(:'rules');
SQL
        loadgen "rules-admin-1k-100ws-r${r}" --streams 10 --targets 100 --rate 100 --seconds "${SECONDS_PER_RUN}" --connections 2
        row "rules-admin-1k-100ws-r${r}" "admin key: rules bypassed"
        LOADGEN_TOKEN="$(jwt "bench-user")" loadgen "rules-jwt-1k-100ws-r${r}" --streams 10 --targets 100 --rate 100 --seconds "${SECONDS_PER_RUN}" --connections 2
        row "rules-jwt-1k-100ws-r${r}" "JWT: every event's document decided by the list rule with one get() (held after the first read)"
        "${PSQL[@]}" -d "${DB}" -qAtc "select docstore.drop_rules('(default)')" >/dev/null ;;
      throughput)
        say "pgbench docstore.add alone (${CLIENTS} clients, ${SECONDS_PER_RUN} s; no sidecar, no slot)"
        stop_sidecar
        "${PSQL[@]}" -d "${DB}" -qAtc "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = 'bench_live'" >/dev/null
        base="$(pgbench_add "pgbench-alone-r${r}")"
        ready="${OUT}/ready-${r}"
        rm -f "${ready}"
        name="throughput-1k-pgbench${CLIENTS}-r${r}"
        start_sidecar
        loadgen "${name}" --streams 10 --targets 100 --rate 0 --seconds "$((SECONDS_PER_RUN + 4))" \
          --ready-file "${ready}" --drain-seconds 5 &
        lg=$!
        while [ ! -f "${ready}" ]; do
          kill -0 "${lg}" 2>/dev/null || die "the loadgen exited before its streams were ready"
          sleep 0.2
        done
        sleep 1
        with="$(pgbench_add "pgbench-with-r${r}")"
        wait "${lg}"
        row "${name}" "pgbench ${CLIENTS} clients: alone ${base} tps, with the sidecar and streams ${with} tps"
        echo "pgbench docstore.add, ${CLIENTS} clients: alone ${base} tps, while decoded and streamed ${with} tps" ;;
      triggers)
        for rate in ${TRIGGER_RATES}; do
          name="triggers-1-${rate}ws-r${r}"
          create_triggers 1
          loadgen "${name}" --streams 0 --rate "${rate}" --seconds "${SECONDS_PER_RUN}" --connections "${WRITERS}" \
            --cities 1000 --trigger-listen "127.0.0.1:${trigger_port}" --triggers 1
          stop_sidecar
          drop_triggers
          trow "${name}"
        done ;;
      triggers-live)
        loadgen "live-0triggers-1k-100ws-r${r}" --streams 10 --targets 100 --rate 100 --seconds "${SECONDS_PER_RUN}" --connections 2
        row "live-0triggers-1k-100ws-r${r}" "no trigger"
        create_triggers 10
        loadgen "live-10triggers-1k-100ws-r${r}" --streams 10 --targets 100 --rate 100 --seconds "${SECONDS_PER_RUN}" --connections 2 \
          --trigger-listen "127.0.0.1:${trigger_port}" --triggers 10
        row "live-10triggers-1k-100ws-r${r}" "10 triggers on every write: 1,000 deliveries/s asked (the triggers row says how many arrived)"
        drop_triggers
        trow "live-10triggers-1k-100ws-r${r}" ;;
      fanout)
        # One stream per listener, each following city c0; a write to c0 once a second.
        for n in ${FANOUT}; do
          name="fanout-sse-${n}-r${r}"
          loadgen "${name}" --fanout --streams "${n}" --targets 1 --rate 1 --seconds "${SECONDS_PER_RUN}" \
            --connections 1 --source-ips 4 --open-concurrency 200 --ready-timeout 900 --drain-seconds 10
          frow "${name}" "SSE, ${n} connections"
        done
        for n in ${FANOUT_GRPC}; do
          name="fanout-grpc-${n}-r${r}"
          loadgen "${name}" --transport grpc --streams-per-connection 100 --fanout --streams "${n}" --targets 1 \
            --rate 1 --seconds "${SECONDS_PER_RUN}" --connections 1 --open-concurrency 200 --ready-timeout 900 --drain-seconds 10
          frow "${name}" "gRPC Listen, $((n / 100)) HTTP/2 connections of 100 streams"
        done ;;
      fanout-cluster)
        # Listeners split over the gateways, one observing loadgen each (--rate 0 until the
        # stop file); once all listen, a loadgen without listeners writes c0 once a second.
        name="fanout-cluster-${FANOUT_CLUSTER}-${FANOUT_GATEWAYS}gw-r${r}"
        cut -d' ' -f1-3 /proc/loadavg > "${OUT}/${name}.load"
        CLUSTER=1 GATEWAYS="${FANOUT_GATEWAYS}"
        start_sidecar
        stop_file="${OUT}/${name}.stop"
        rm -f "${stop_file}"
        observers=()
        for g in $(seq 1 "${FANOUT_GATEWAYS}"); do
          share=$(( FANOUT_CLUSTER / FANOUT_GATEWAYS + (g <= FANOUT_CLUSTER % FANOUT_GATEWAYS ? 1 : 0) ))
          rm -f "${OUT}/${name}.ready${g}"
          DOCSTORE_LOADGEN_TOKEN="${admin_key}" "${TARGET}/docstore-loadgen" --sidecar "127.0.0.1:${gateway_ports[g - 1]}" \
            --pg "postgresql://postgres@127.0.0.1:${DOCSTORE_PG_PORT}/${DB}" --sidecar-pid "${gateway_pids[g - 1]}" \
            --label "${name}-gw${g}" --fanout --streams "${share}" --targets 1 --rate 0 --seconds 1800 \
            --stop-file "${stop_file}" --ready-file "${OUT}/${name}.ready${g}" --deliveries-out "${OUT}/${name}.gw${g}.deliveries" \
            --source-ips 4 --open-concurrency 200 --ready-timeout 1200 --drain-seconds 0 > "${OUT}/${name}.gw${g}.txt" 2>&1 &
          observers+=($!)
        done
        for g in $(seq 1 "${FANOUT_GATEWAYS}"); do
          while [ ! -f "${OUT}/${name}.ready${g}" ]; do
            kill -0 "${observers[g - 1]}" 2>/dev/null || { cat "${OUT}/${name}.gw${g}.txt"; die "the loadgen of gateway ${g} exited"; }
            sleep 0.5
          done
        done
        say "all ${FANOUT_CLUSTER} listening; writing"
        DOCSTORE_LOADGEN_TOKEN="${admin_key}" "${TARGET}/docstore-loadgen" --sidecar "127.0.0.1:${port}" \
          --pg "postgresql://postgres@127.0.0.1:${DOCSTORE_PG_PORT}/${DB}" --postmaster-pid "${postmaster_pid}" \
          --label "${name}-writer" --fanout --streams 0 --targets 1 --rate 1 --seconds "${SECONDS_PER_RUN}" --connections 1 \
          --deliveries-out "${OUT}/${name}.writes" > "${OUT}/${name}.writer.txt" 2>&1 || { cat "${OUT}/${name}.writer.txt"; die "the writer failed"; }
        sleep 10
        touch "${stop_file}"
        for pid in "${observers[@]}"; do wait "${pid}" || true; done
        cat "${OUT}/${name}".gw*.txt | grep -E "^(==|subscriptions|cpu|events)" || true
        python3 "${ROOT}/scripts/fanout_merge.py" "${name}" "${FANOUT_CLUSTER}" "${OUT}/${name}.writes" "${OUT}/${name}".gw*.deliveries | tee "${OUT}/${name}.txt"
        stop_sidecar
        CLUSTER=0 GATEWAYS=1
        FROWS+=("$(sed -n 's/^FANOUT //p' "${OUT}/${name}.txt") - | - | - | - | - | $(cat "${OUT}/${name}.load") | ${FANOUT_GATEWAYS} gateways <- nats-server <- ingest |")
        ;;
      ycsb)
        [ "${r}" -gt 1 ] || { say "loading ${YCSB_RECORDS} YCSB records of 900 bytes"; ycsb_load; }
        for w in a b; do
          for rate in ${YCSB_RATES}; do
            name="ycsb-${w}-${rate}-http-r${r}"
            loadgen "${name}" --ycsb "${w}" --collection usertable --records "${YCSB_RECORDS}" --rate "${rate}" \
              --seconds "${SECONDS_PER_RUN}" --connections "${YCSB_CONNECTIONS}"
            YROWS+=("$(sed -n 's/^YCSB //p' "${OUT}/${name}.txt") $(cat "${OUT}/${name}.load") |")
            stop_sidecar
            cut -d' ' -f1-3 /proc/loadavg > "${OUT}/ycsb-${w}-${rate}-sql-r${r}.load"
            YROWS+=("$(pgbench_ycsb "${w}" "${rate}" "ycsb-${w}-${rate}-sql-r${r}") - | - | - | - | $(cat "${OUT}/ycsb-${w}-${rate}-sql-r${r}.load") |")
          done
        done ;;
      *) die "unknown scenario ${scenario} (latency, scale, ladder, transport, cluster, cluster-scale, rules, throughput, triggers, triggers-live, fanout, fanout-cluster, ycsb)" ;;
    esac
  done
done

echo
echo "| run | subscriptions | writes/s asked -> done | delivered / missed | commit returned -> event p50 / p99 / max (ms) | commitTime -> event p50 / p99 / max (ms) | p99 first -> last 5 s (ms) | sidecar CPU | Postgres CPU | loadgen CPU | machine busy (of 200%) | resets | load avg before | notes |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
if [ "${#FROWS[@]}" -gt 0 ]; then
  echo
  echo "| run | listeners | writes reaching every listener | deliveries / expected | commitTime -> each listener p50 / p99 / max (ms) | commitTime -> last listener p50 / p99 / max (ms) | all listening after | sidecar RSS per listener | sidecar CPU | Postgres CPU | loadgen CPU | load avg before | notes |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${FROWS[@]}"
fi
if [ "${#YROWS[@]}" -gt 0 ]; then
  echo
  echo "| run | workload | ops/s asked | ops/s done | read p50 (ms) | read p99 (ms) | update p50 (ms) | update p99 (ms) | errors | sidecar CPU | Postgres CPU | loadgen CPU | machine busy (of 200%) | load avg before |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${YROWS[@]}"
fi
if [ "${#TROWS[@]}" -gt 0 ]; then
  echo
  echo "| run | writes/s asked -> done | triggers | deliveries / missed | repeated | deliveries/s | commit returned -> endpoint p50 / p99 / max (ms) | commitTime -> endpoint p50 / p99 / max (ms) | p99 first -> last 5 s (ms) | sidecar CPU | Postgres CPU | loadgen CPU | machine busy (of 200%) | drain (s) | load avg before |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${TROWS[@]}"
fi
