#!/usr/bin/env bash
# The sidecar as several processes over NATS JetStream (docs/architecture.md, "Processes"),
# against `make up`'s Postgres: nats-server -js, one ingest plus a standby ingest, two matchers
# (--role matcher) and two gateways that match on them (--role gateway --matching remote), each
# on a free port.
# Usage: scripts/cluster.sh up|down
#   up    start them (after `make up`; the sidecar's release binary is built if missing) as the
#         least-privileged login of `make up` (docstore_sidecar, .docstore/sidecar.password),
#         with make up's secrets (.docstore/dev.env); NATS keeps its store in
#         .docstore/cluster/nats/. Writes .docstore/cluster.env (DOCSTORE_GATEWAYS=http://...,
#         http://... and NATS_URL=nats://...) and each pid to .docstore/cluster/<role><n>.pid
#         (nats.pid, ingest1.pid, ingest2.pid, matcher1.pid, matcher2.pid, gateway1.pid,
#         gateway2.pid); logs beside them.
#   down  stop exactly those pids (SIGTERM, then SIGKILL after 10 s), and nothing else.
# The slot of the cluster is docstore_cluster (make up's own sidecar keeps docstore_sidecar); it
# stays after down, so the next up continues from it (drop it with
# select pg_drop_replication_slot('docstore_cluster') when done; make up bounds the WAL it keeps).
source "$(dirname "$0")/lib.sh"

STATE="${ROOT}/.docstore"
DIR="${STATE}/cluster"
ENV_FILE="${STATE}/cluster.env"
SIDECAR_BIN="${CARGO_TARGET_DIR:-${ROOT}/target}/release/docstore-sidecar"
NATS_BIN="$(command -v nats-server || echo /usr/sbin/nats-server)"
SLOT=docstore_cluster
NAMES=(gateway2 gateway1 matcher2 matcher1 ingest2 ingest1 nats)

# The pid in .docstore/cluster/$1.pid if that process still runs.
pid_of() {
  local pid
  pid="$(cat "${DIR}/$1.pid" 2>/dev/null || true)"
  [ -n "${pid}" ] && kill -0 "${pid}" 2>/dev/null && echo "${pid}"
}

wait_health() { # NAME URL STATUS
  local i code
  for i in $(seq 1 600); do
    pid_of "$1" >/dev/null || die "$1 exited; see ${DIR}/$1.log"
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$2/healthz" || true)"
    [ "${code}" = "$3" ] && return 0
    sleep 0.1
  done
  die "$1 did not answer /healthz with $3; see ${DIR}/$1.log"
}

start_role() { # NAME ROLE PORT [ARGS...]
  local name="$1" role="$2" port="$3"
  shift 3
  DOCSTORE_LISTEN="127.0.0.1:${port}" setsid "${SIDECAR_BIN}" --role "${role}" --nats-url "${NATS_URL}" \
    --slot "${SLOT}" "$@" > "${DIR}/${name}.log" 2>&1 < /dev/null &
  echo $! > "${DIR}/${name}.pid"
}

up() {
  [ -f "${STATE}/dev.env" ] && [ -s "${STATE}/sidecar.password" ] || die "run make up first"
  for name in "${NAMES[@]}"; do
    ! pid_of "${name}" >/dev/null || die "${name} runs already (scripts/cluster.sh down first)"
  done
  [ -x "${NATS_BIN}" ] || die "nats-server is missing (make up installs it)"
  [ -x "${SIDECAR_BIN}" ] || (cd "${ROOT}" && cargo build --release --quiet -p docstore-sidecar)
  mkdir -p "${DIR}/nats"
  local nats_port port1 port2 port3 port4 port5 port6
  nats_port="$(free_port 4222)"
  NATS_URL="nats://127.0.0.1:${nats_port}"
  say "starting nats-server -js on ${NATS_URL}"
  setsid "${NATS_BIN}" -js -a 127.0.0.1 -p "${nats_port}" -sd "${DIR}/nats" > "${DIR}/nats.log" 2>&1 < /dev/null &
  echo $! > "${DIR}/nats.pid"
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/${nats_port}") 2>/dev/null && break; sleep 0.1; done
  # make up's secrets and least-privileged login.
  set -a
  # shellcheck disable=SC1091
  source "${STATE}/dev.env"
  set +a
  DOCSTORE_DATABASE_URL="postgresql://docstore_sidecar:$(cat "${STATE}/sidecar.password")@127.0.0.1:${DOCSTORE_PG_PORT}/${DATABASE}"
  export DOCSTORE_DATABASE_URL
  unset DOCSTORE_GRPC_LISTEN DOCSTORE_DEV_MODE
  port1="$(free_port 18800)"
  say "starting ingest1 (active) on 127.0.0.1:${port1}"
  start_role ingest1 ingest "${port1}"
  wait_health ingest1 "http://127.0.0.1:${port1}" 200
  port2="$(free_port $((port1 + 1)))"
  say "starting ingest2 (standby) on 127.0.0.1:${port2}"
  start_role ingest2 ingest "${port2}"
  wait_health ingest2 "http://127.0.0.1:${port2}" 503
  port5="$(free_port $((port2 + 1)))"
  say "starting matcher1 and matcher2"
  start_role matcher1 matcher "${port5}"
  port6="$(free_port $((port5 + 1)))"
  start_role matcher2 matcher "${port6}"
  wait_health matcher1 "http://127.0.0.1:${port5}" 200
  wait_health matcher2 "http://127.0.0.1:${port6}" 200
  port3="$(free_port $((port6 + 1)))"
  start_role gateway1 gateway "${port3}" --matching remote
  port4="$(free_port $((port3 + 1)))"
  start_role gateway2 gateway "${port4}" --matching remote
  wait_health gateway1 "http://127.0.0.1:${port3}" 200
  wait_health gateway2 "http://127.0.0.1:${port4}" 200
  cat > "${ENV_FILE}" <<ENV
DOCSTORE_GATEWAYS=http://127.0.0.1:${port3},http://127.0.0.1:${port4}
NATS_URL=${NATS_URL}
ENV
  say "cluster up: gateways http://127.0.0.1:${port3} and http://127.0.0.1:${port4} (${ENV_FILE})"
}

down() {
  local name pid
  for name in "${NAMES[@]}"; do
    pid="$(pid_of "${name}" || true)"
    if [ -n "${pid}" ]; then
      kill "${pid}" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
      kill -0 "${pid}" 2>/dev/null && kill -9 "${pid}" 2>/dev/null || true
      say "stopped ${name} (pid ${pid})"
    fi
    rm -f "${DIR}/${name}.pid"
  done
  rm -f "${ENV_FILE}"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
