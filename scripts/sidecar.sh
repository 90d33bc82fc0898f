#!/usr/bin/env bash
# The sidecar (docstore-sidecar, the HTTP API) as `make up` runs it, next to the project cluster.
# Usage: scripts/sidecar.sh start|stop|status|restart
#   start    build it (release), generate .docstore/dev.env once (its FIRESTORE_EMULATOR_HOST
#            line at every start), create or update its login role docstore_sidecar (not a
#            superuser; sql/sidecar_role.sql, password generated once in
#            .docstore/sidecar.password, mode 600), start it in the background as that role
#            (pid and log under .docstore/) unless it already runs this very binary against
#            this very cluster, and wait for /healthz; a rebuilt binary, a restarted cluster, a
#            recreated extension or a dead process restarts it.
#   stop     stop it (SIGTERM, then SIGKILL after 10 s).
#   status   say whether it runs and whether /healthz answers; exit 1 when it does not run.
#   restart  stop, then start.
# Environment: DOCSTORE_HTTP_PORT (default 8787), DOCSTORE_GRPC_PORT (the gRPC front end,
# docs/grpc.md; default the HTTP port + 1000), DOCSTORE_PG_PORT (default 5433), CARGO_TARGET_DIR
# (where cargo builds; default target/). The sidecar runs in development mode (--dev-mode).
source "$(dirname "$0")/lib.sh"

DOCSTORE_HTTP_PORT="${DOCSTORE_HTTP_PORT:-8787}"
DOCSTORE_GRPC_PORT="${DOCSTORE_GRPC_PORT:-$((DOCSTORE_HTTP_PORT + 1000))}"
SIDECAR_STATE="${ROOT}/.docstore"
SIDECAR_PID="${SIDECAR_STATE}/sidecar.pid"
SIDECAR_LOG="${SIDECAR_STATE}/sidecar.log"
# What the running process was started against (started_against).
SIDECAR_STAMP="${SIDECAR_STATE}/sidecar.stamp"
DEV_ENV="${SIDECAR_STATE}/dev.env"
# The sidecar's own login role (docs/security.md, "The sidecar's role") and its password.
SIDECAR_ROLE=docstore_sidecar
SIDECAR_PASSWORD_FILE="${SIDECAR_STATE}/sidecar.password"
SIDECAR_BIN="${CARGO_TARGET_DIR:-${ROOT}/target}/release/docstore-sidecar"
HEALTH_URL="http://127.0.0.1:${DOCSTORE_HTTP_PORT}/healthz"
# How long start waits for /healthz before it gives up (seconds).
HEALTH_WAIT=60

# Random hex of $1 bytes from the kernel's generator.
random_hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# .docstore/dev.env: the development secrets, written once and never overwritten (the tests,
# users' scripts and tokens already minted depend on them). Remove the file to get new ones.
# Only its FIRESTORE_EMULATOR_HOST line follows the port (set_emulator_host).
ensure_dev_env() {
  mkdir -p "${SIDECAR_STATE}"
  if [ ! -f "${DEV_ENV}" ]; then
    say "generating development secrets in ${DEV_ENV} (once)"
    (
      umask 077
      cat > "${DEV_ENV}" <<ENV
# Development settings of the sidecar, generated once by scripts/sidecar.sh; never commit them.
# Shell syntax: \`source .docstore/dev.env\`. Remove this file to get new secrets.
DOCSTORE_JWT_SECRET=$(random_hex 32)
DOCSTORE_ADMIN_KEY=$(random_hex 24)
DOCSTORE_URL=http://127.0.0.1:${DOCSTORE_HTTP_PORT}
ENV
    )
  fi
  set_emulator_host
  local url
  url="$(sed -n 's/^DOCSTORE_URL=//p' "${DEV_ENV}")"
  [ "${url}" = "http://127.0.0.1:${DOCSTORE_HTTP_PORT}" ] ||
    say "note: ${DEV_ENV} says DOCSTORE_URL=${url}, but the sidecar listens on port ${DOCSTORE_HTTP_PORT}"
}

# The line FIRESTORE_EMULATOR_HOST=127.0.0.1:PORT of dev.env, rewritten at every start (the only
# line that is; the secrets stay): Google's Firestore SDKs connect to the address it names, the
# gRPC front end's port (DOCSTORE_GRPC_PORT, docs/grpc.md).
set_emulator_host() {
  local tmp
  tmp="$(mktemp "${DEV_ENV}.XXXXXX")"
  { grep -v '^FIRESTORE_EMULATOR_HOST=' "${DEV_ENV}" || true; } > "${tmp}"
  echo "FIRESTORE_EMULATOR_HOST=127.0.0.1:${DOCSTORE_GRPC_PORT}" >> "${tmp}"
  mv "${tmp}" "${DEV_ENV}"
}

# The login role the sidecar runs as: created (or its password and attributes set again) by
# sql/sidecar_role.sql with a password generated once into .docstore/sidecar.password (mode
# 600). The password goes to psql on its standard input, not on a command line. The sidecar
# runs with --dev-mode here, so the role may create the databases requests name (dev_mode=on:
# EXECUTE on docstore.create_database_for_dev, docs/grpc.md "Names").
ensure_sidecar_role() {
  if [ ! -s "${SIDECAR_PASSWORD_FILE}" ]; then
    (umask 077 && random_hex 24 > "${SIDECAR_PASSWORD_FILE}")
  fi
  chmod 600 "${SIDECAR_PASSWORD_FILE}"
  { printf '\\set password %s\n' "$(cat "${SIDECAR_PASSWORD_FILE}")"
    cat "${ROOT}/sql/sidecar_role.sql"; } |
    "${PSQL[@]}" -d "${DATABASE}" -q -v dev_mode=on -f - >/dev/null ||
    die "could not create the sidecar's role ${SIDECAR_ROLE} (sql/sidecar_role.sql)"
}

# Value of setting $1 in dev.env.
dev_setting() { sed -n "s/^$1=//p" "${DEV_ENV}"; }

# The pid of the sidecar this script started, if that process still runs it.
running_pid() {
  local pid
  pid="$(cat "${SIDECAR_PID}" 2>/dev/null || true)"
  [ -n "${pid}" ] || return 1
  kill -0 "${pid}" 2>/dev/null || return 1
  # The pid may have been reused by another program since.
  tr '\0' ' ' < "/proc/${pid}/cmdline" 2>/dev/null | grep -q docstore-sidecar || return 1
  echo "${pid}"
}

# The binary's fingerprint, the extension's SQL (up.sh's stamp) and the cluster's start time: a
# recreated extension or a restarted cluster leaves the sidecar's pooled connections with stale
# prepared statements or none, so a change of any of them restarts it.
started_against() {
  local started
  started="$("${PSQL[@]}" -d postgres -Atc "select pg_postmaster_start_time()" 2>/dev/null || echo unknown)"
  echo "role ${SIDECAR_ROLE}, binary $(fingerprint "${SIDECAR_BIN}"), extension $(cat "${PGSTATE}/extension.sha256" 2>/dev/null || echo none), cluster started ${started}"
}

healthy() { curl -fsS -o /dev/null --max-time 2 "${HEALTH_URL}" 2>/dev/null; }

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/${DOCSTORE_HTTP_PORT}") 2>/dev/null; }

build() {
  say "building the sidecar (docstore-sidecar, release)"
  (cd "${ROOT}" && cargo build --release --quiet -p docstore-sidecar)
  [ -x "${SIDECAR_BIN}" ] || die "the build left no binary at ${SIDECAR_BIN}"
}

start() {
  cluster_running || die "Postgres is not running: run 'make up' first"
  ensure_dev_env
  ensure_sidecar_role
  build
  local stamp pid
  stamp="$(started_against)"
  if pid="$(running_pid)"; then
    if [ "$(cat "${SIDECAR_STAMP}" 2>/dev/null || true)" = "${stamp}" ]; then
      wait_healthy "${pid}"
      say "the sidecar runs (pid ${pid}) on 127.0.0.1:${DOCSTORE_HTTP_PORT}"
      return
    fi
    say "the sidecar's binary, the extension or the cluster changed: restarting the sidecar"
    stop
  elif [ -f "${SIDECAR_PID}" ]; then
    say "the sidecar is not running (see ${SIDECAR_LOG}): starting it again"
    rm -f "${SIDECAR_PID}"
  fi
  port_taken && die "port ${DOCSTORE_HTTP_PORT} is taken by another program (set DOCSTORE_HTTP_PORT)"
  (exec 3<>"/dev/tcp/127.0.0.1/${DOCSTORE_GRPC_PORT}") 2>/dev/null &&
    die "port ${DOCSTORE_GRPC_PORT} is taken by another program (set DOCSTORE_GRPC_PORT)"
  say "starting the sidecar on 127.0.0.1:${DOCSTORE_HTTP_PORT} (log: ${SIDECAR_LOG})"
  echo "--- $(date -u +%FT%TZ) starting ${SIDECAR_BIN}" >> "${SIDECAR_LOG}"
  # setsid: its own session, so a ^C in the terminal that ran `make up` does not reach it.
  DOCSTORE_DATABASE_URL="postgresql://${SIDECAR_ROLE}:$(cat "${SIDECAR_PASSWORD_FILE}")@127.0.0.1:${DOCSTORE_PG_PORT}/${DATABASE}" \
    DOCSTORE_LISTEN="127.0.0.1:${DOCSTORE_HTTP_PORT}" \
    DOCSTORE_GRPC_LISTEN="127.0.0.1:${DOCSTORE_GRPC_PORT}" \
    DOCSTORE_DEV_MODE=true \
    DOCSTORE_JWT_SECRET="$(dev_setting DOCSTORE_JWT_SECRET)" \
    DOCSTORE_ADMIN_KEY="$(dev_setting DOCSTORE_ADMIN_KEY)" \
    setsid "${SIDECAR_BIN}" >> "${SIDECAR_LOG}" 2>&1 < /dev/null &
  pid=$!
  echo "${pid}" > "${SIDECAR_PID}"
  echo "${stamp}" > "${SIDECAR_STAMP}"
  wait_healthy "${pid}"
  say "the sidecar is up (pid ${pid})"
}

# Wait (bounded) until /healthz answers 200; fail early when the process has exited.
wait_healthy() {
  local pid="$1" i
  for i in $(seq 1 $((HEALTH_WAIT * 5))); do
    healthy && return 0
    if ! kill -0 "${pid}" 2>/dev/null; then
      tail -n 20 "${SIDECAR_LOG}" >&2 || true
      rm -f "${SIDECAR_PID}"
      die "the sidecar exited during start-up (log above, ${SIDECAR_LOG})"
    fi
    sleep 0.2
  done
  tail -n 20 "${SIDECAR_LOG}" >&2 || true
  die "the sidecar (pid ${pid}) did not answer ${HEALTH_URL} within ${HEALTH_WAIT} s (log above)"
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "${SIDECAR_PID}"
    say "the sidecar is not running"
    return
  fi
  kill -TERM "${pid}" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${pid}" 2>/dev/null; then
    say "the sidecar did not stop within 10 s: killing it"
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  rm -f "${SIDECAR_PID}"
  say "stopped the sidecar (pid ${pid})"
}

status() {
  local pid
  if pid="$(running_pid)"; then
    if healthy; then
      echo "sidecar: running (pid ${pid}), ${HEALTH_URL} answers"
    else
      echo "sidecar: running (pid ${pid}), ${HEALTH_URL} does not answer (log: ${SIDECAR_LOG})"
    fi
  else
    echo "sidecar: not running"
    return 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  restart)
    stop
    start
    ;;
  *) die "usage: scripts/sidecar.sh start|stop|status|restart" ;;
esac
