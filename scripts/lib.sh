# Shared settings and helpers of the set-up and test scripts. Sourced, not run.
# shellcheck shell=bash

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_MAJOR=15
# DOCSTORE_PG_BIN: another copy of the Postgres binaries (e.g. a relocated one, so a build under
# test does not replace the extension installed for the machine); tests/conftest.py reads it too.
PG_BIN="${DOCSTORE_PG_BIN:-/usr/lib/postgresql/${PG_MAJOR}/bin}"
PG_CONFIG="${PG_BIN}/pg_config"
PGRX_VERSION="0.18.1"
DOCSTORE_PG_PORT="${DOCSTORE_PG_PORT:-5433}"
PGSTATE="${ROOT}/.pgdata"
PGDATA="${PGSTATE}/data"
PGSOCKET="${PGSTATE}/run"
PGLOG="${PGSTATE}/postgres.log"
DATABASE="docstore"
# psql as the scripts run it, on the cluster at DOCSTORE_PG_PORT (again after that changes).
use_port() { PSQL=(psql -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${DOCSTORE_PG_PORT}" -U postgres); }
use_port

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
# A test script's check that held: scripts/tally.sh counts these lines, one test each (what
# comes before a check, a set-up step, is not a test and says so with `say`).
check_passed() { printf 'check passed: %s\n' "$*"; }

# Run a command as root (directly, or through sudo for a normal user).
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Run a command as the postgres system user (Postgres refuses to run as root).
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi
}

cluster_running() {
  [ -f "${PGDATA}/postmaster.pid" ] && as_postgres "${PG_BIN}/pg_ctl" -D "${PGDATA}" status >/dev/null 2>&1
}

installed_library() { echo "$("${PG_CONFIG}" --pkglibdir)/pg_docstore.so"; }
installed_sql_dir() { echo "$("${PG_CONFIG}" --sharedir)/extension"; }

fingerprint() {
  if [ -e "$1" ]; then sha256sum "$1" | cut -d' ' -f1; else echo none; fi
}

# Postgres runs as `postgres` and must be able to reach the project directory (traverse only).
ensure_traversable() {
  local dir="${ROOT}"
  if as_postgres test -x "${dir}" 2>/dev/null; then return; fi
  say "granting the postgres user traverse (o+x) on the directories above ${ROOT}"
  while [ "${dir}" != "/" ]; do
    as_root chmod o+x "${dir}"
    dir="$(dirname "${dir}")"
  done
}

# Path of a test driver that postgresql-server-dev ships under pgxs/src/test (e.g.
# regress/pg_regress), or die.
pgxs_tool() {
  local tool
  tool="$("${PG_CONFIG}" --pkglibdir)/pgxs/src/test/$1"
  [ -x "${tool}" ] || die "$(basename "$1") not found (install postgresql-server-dev-${PG_MAJOR})"
  echo "${tool}"
}

# The tests in a directory: names of its *.$2 files without the extension, sorted, except $3.
test_names() {
  find "$1" -name "*.$2" ! -name "${3:-}" -printf '%f\n' | sed "s/\.$2\$//" | sort
}

# Drop and create database $1 (empty).
fresh_database() {
  "${PSQL[@]}" -d postgres -qc "drop database if exists $1" -c "create database $1"
}

# A free TCP port on 127.0.0.1 at or above $1.
free_port() {
  local port="$1"
  while (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; do port=$((port + 1)); done
  echo "${port}"
}

# Start a throwaway cluster of its own for tests that crash Postgres on purpose, so they never
# take down the project cluster (and the sidecar's connections to it). Sets DOCSTORE_PG_PORT and
# PSQL to it, and stops and removes it when the calling script exits (the script's own EXIT
# trap, if any, must call stop_throwaway_cluster too). Same server as `make up`'s, installed
# extension included; default settings otherwise (fsync on: crash tests need real durability),
# plus the server options in THROWAWAY_OPTIONS when set (e.g. "-c wal_level=logical").
start_throwaway_cluster() {
  THROWAWAY_DIR="$(mktemp -d /tmp/docstore-throwaway.XXXXXX)"
  chmod 755 "${THROWAWAY_DIR}"
  mkdir -p "${THROWAWAY_DIR}/data" "${THROWAWAY_DIR}/run"
  as_root chown -R postgres:postgres "${THROWAWAY_DIR}"
  as_postgres chmod 700 "${THROWAWAY_DIR}/data"
  as_postgres "${PG_BIN}/initdb" -D "${THROWAWAY_DIR}/data" -U postgres --encoding=UTF8 --locale=C \
    --auth-local=trust --auth-host=trust >/dev/null
  DOCSTORE_PG_PORT="$(free_port $((DOCSTORE_PG_PORT + 100)))"
  as_postgres "${PG_BIN}/pg_ctl" -D "${THROWAWAY_DIR}/data" -l "${THROWAWAY_DIR}/postgres.log" -w \
    -o "-p ${DOCSTORE_PG_PORT} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${THROWAWAY_DIR}/run ${THROWAWAY_OPTIONS:-}" \
    start >/dev/null
  use_port
  trap stop_throwaway_cluster EXIT
}

stop_throwaway_cluster() {
  [ -n "${THROWAWAY_DIR:-}" ] || return 0
  as_postgres "${PG_BIN}/pg_ctl" -D "${THROWAWAY_DIR}/data" -m immediate stop >/dev/null 2>&1 || true
  as_root rm -rf "${THROWAWAY_DIR}"
  THROWAWAY_DIR=
}

# sidecar_database_url DB: the URL of database DB (which has the extension) for a
# least-privileged login of the benchmarks' sidecars, docstore_sidecar_bench, made by
# sql/sidecar_role.sql on the cluster at DOCSTORE_PG_PORT (the project's or a throwaway one) at
# each call, with the one password kept in .docstore/bench-sidecar.password: the benchmarks run
# the sidecar as production does, not as the superuser. (Not make up's docstore_sidecar: setting
# its password again would lock out the running sidecar's new connections.)
sidecar_database_url() {
  local password_file="${ROOT}/.docstore/bench-sidecar.password"
  mkdir -p "${ROOT}/.docstore"
  [ -s "${password_file}" ] || (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "${password_file}")
  { printf '\\set password %s\n' "$(cat "${password_file}")"
    cat "${ROOT}/sql/sidecar_role.sql"; } |
    PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -d "$1" -q -v role=docstore_sidecar_bench -f - >/dev/null ||
    die "could not create the benchmarks' sidecar role (sql/sidecar_role.sql) in database $1"
  echo "postgresql://docstore_sidecar_bench:$(cat "${password_file}")@127.0.0.1:${DOCSTORE_PG_PORT}/$1"
}
