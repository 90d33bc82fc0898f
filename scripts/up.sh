#!/usr/bin/env bash
# `make up`: install what is missing, build and install the extension, run a Postgres 15
# cluster with logical decoding on 127.0.0.1:5433 (data in .pgdata/), create database
# `docstore` with the extension. Idempotent: a second run reuses everything, reinstalls the
# extension when the code changed and restarts the cluster when the library changed.
source "$(dirname "$0")/lib.sh"

install_packages() {
  local wanted=(postgresql-15 postgresql-server-dev-15 postgresql-contrib libclang-dev clang sudo build-essential pkg-config libssl-dev curl chromium nats-server)
  local missing=()
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  # Debian starts a `main` cluster on 5432 when postgresql-15 is installed; we leave it alone.
}

install_rust_tools() {
  command -v cargo >/dev/null || die "cargo is missing: install Rust 1.89 or newer (rustup) first"
  if [ "$(cargo pgrx --version 2>/dev/null | awk '{print $2}')" != "${PGRX_VERSION}" ]; then
    say "installing cargo-pgrx ${PGRX_VERSION} (a few minutes, once)"
    cargo install cargo-pgrx --version "=${PGRX_VERSION}" --locked --quiet
  fi
  if ! grep -qs "^pg${PG_MAJOR} = \"${PG_CONFIG}\"" "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
    say "pointing pgrx at the system Postgres ${PG_MAJOR}"
    cargo pgrx init --pg"${PG_MAJOR}" "${PG_CONFIG}" >/dev/null
  fi
}

install_extension() {
  say "building and installing pg_docstore (release)"
  local before after
  before="$(fingerprint "$(installed_library)")"
  local sudo_flag=()
  [ "$(id -u)" -eq 0 ] || sudo_flag=(--sudo)
  (cd "${ROOT}" && cargo pgrx install --release -p pg_docstore --pg-config "${PG_CONFIG}" "${sudo_flag[@]}" >/dev/null)
  # The full scripts of released versions (pgrx installs the current one and the upgrade
  # scripts pg_docstore--A--B.sql): scripts/upgrade.sh creates a database at an old version.
  as_root install -m 644 "${ROOT}"/pg_docstore/sql/archive/pg_docstore--*.sql "$(installed_sql_dir)/"
  after="$(fingerprint "$(installed_library)")"
  LIBRARY_CHANGED=0
  [ "${before}" = "${after}" ] || LIBRARY_CHANGED=1
}

init_cluster() {
  ensure_traversable
  if [ ! -f "${PGDATA}/PG_VERSION" ]; then
    say "creating the cluster in ${PGDATA}"
    mkdir -p "${PGDATA}" "${PGSOCKET}"
    as_root chown -R postgres:postgres "${PGSTATE}"
    chmod 700 "${PGDATA}"
    as_postgres "${PG_BIN}/initdb" -D "${PGDATA}" -U postgres --encoding=UTF8 --locale=C \
      --auth-local=trust --auth-host=trust >/dev/null
  fi
  # Our settings live in their own file so they can be re-applied without touching initdb's.
  as_postgres tee "${PGDATA}/docstore.conf" >/dev/null <<CONF
# Written by scripts/up.sh on every run; edit scripts/up.sh instead.
port = ${DOCSTORE_PG_PORT}
listen_addresses = '127.0.0.1'
unix_socket_directories = '${PGSOCKET}'
wal_level = logical
max_replication_slots = 16
max_wal_senders = 16
shared_buffers = 512MB
max_connections = 200
# Index entries have random keys, so right after a checkpoint most btree inserts log a full
# page image; compressing those cuts WAL volume several-fold (BENCHMARKS.md).
wal_compression = lz4
# The background index builder (and the protected settings docstore.auth/docstore.request,
# defined before any session can set them) need the library loaded at server start.
shared_preload_libraries = 'pg_docstore'
# The sidecar's replication slot holds WAL until the sidecar confirms it. A sidecar that is
# down (or stuck) must not fill the disk: past 4GB of WAL (about 600,000 document creates at
# 6.8 KB each, hours of development traffic) Postgres invalidates the slot, and the sidecar
# recreates it and sends every stream a typed reset (docs/architecture.md).
max_slot_wal_keep_size = 4GB
CONF
  grep -q "^include_if_exists = 'docstore.conf'" "${PGDATA}/postgresql.conf" ||
    echo "include_if_exists = 'docstore.conf'" | as_postgres tee -a "${PGDATA}/postgresql.conf" >/dev/null
}

start_cluster() {
  # Postgres runs with RUST_BACKTRACE=1, as from a developer's shell: the extension must keep
  # Rust backtraces out of the errors clients read (the regression test `security` checks it).
  export RUST_BACKTRACE=1
  if cluster_running; then
    if [ "${LIBRARY_CHANGED}" = 1 ]; then
      say "the extension library changed: restarting the cluster"
      as_postgres "${PG_BIN}/pg_ctl" -D "${PGDATA}" -l "${PGLOG}" -w -m fast restart >/dev/null
    else
      # Pick up settings changed in docstore.conf; restart when one of them needs it
      # (shared_preload_libraries, for one).
      local loaded pending
      loaded="$("${PSQL[@]}" -d postgres -Atc "select pg_conf_load_time()")"
      as_postgres "${PG_BIN}/pg_ctl" -D "${PGDATA}" reload >/dev/null
      # The postmaster reloads asynchronously; new sessions show its new load time once done.
      for _ in $(seq 1 50); do
        [ "$("${PSQL[@]}" -d postgres -Atc "select pg_conf_load_time()")" != "${loaded}" ] && break
        sleep 0.1
      done
      pending="$("${PSQL[@]}" -d postgres -Atc "select string_agg(name, ', ') from pg_settings where pending_restart")"
      if [ -n "${pending}" ]; then
        say "settings that need a restart changed (${pending}): restarting the cluster"
        as_postgres "${PG_BIN}/pg_ctl" -D "${PGDATA}" -l "${PGLOG}" -w -m fast restart >/dev/null
      fi
    fi
  else
    say "starting Postgres on 127.0.0.1:${DOCSTORE_PG_PORT}"
    as_postgres "${PG_BIN}/pg_ctl" -D "${PGDATA}" -l "${PGLOG}" -w start >/dev/null
  fi
}

# DROP EXTENSION pg_docstore CASCADE, tried again (at most 3 times) when it deadlocks with
# another session of the database: the background worker the launcher starts for every
# database when the cluster starts (index builds, version purge), or a user's session. Any
# other error stops the script.
drop_extension() {
  local attempt out
  for attempt in 1 2 3; do
    if out="$(PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -d "${DATABASE}" -qc \
      "drop extension if exists pg_docstore cascade" 2>&1)"; then
      return 0
    fi
    case "${out}" in
      *"deadlock detected"*)
        say "dropping the extension deadlocked with another session (attempt ${attempt} of 3; ${PGLOG} names it)"
        sleep 1
        ;;
      *) die "dropping the extension failed: ${out}" ;;
    esac
  done
  die "dropping the extension deadlocked 3 times with other sessions of database ${DATABASE} (${PGLOG} names them): close them and run make up again"
}

create_database() {
  if [ "$("${PSQL[@]}" -d postgres -Atc "select count(*) from pg_database where datname = '${DATABASE}'")" = 0 ]; then
    "${PSQL[@]}" -d postgres -qc "create database ${DATABASE}"
  fi
  # While the extension is 0.x its SQL can change without a version bump: when the installed
  # script differs from the one this database was created with, recreate the extension.
  local script stamp
  script="$(installed_sql_dir)/pg_docstore--$(grep -m1 '^version' "${ROOT}/Cargo.toml" | cut -d'"' -f2).sql"
  stamp="$(fingerprint "${script}")"
  local recorded
  recorded="$(cat "${PGSTATE}/extension.sha256" 2>/dev/null || echo none)"
  if [ "${recorded}" != "${stamp}" ] && [ "${recorded}" != none ]; then
    say "the extension's SQL changed: recreating it in database ${DATABASE} (development builds only)"
    # The running sidecar polls the extension's tables: its write-trigger deliverer claims from
    # docstore.trigger_deliveries joined to docstore.triggers, locking them in the opposite order
    # to DROP EXTENSION ... CASCADE, and Postgres cancelled the drop as a deadlock. Stop it
    # first; `scripts/sidecar.sh start` at the end of this script starts it again.
    if bash "${ROOT}/scripts/sidecar.sh" status >/dev/null; then
      bash "${ROOT}/scripts/sidecar.sh" stop
    fi
    drop_extension
    rm -f "${PGSTATE}/dev-options.done"
  fi
  "${PSQL[@]}" -d "${DATABASE}" -qc "create extension if not exists pg_docstore" 2>&1 | grep -v NOTICE || true
  echo "${stamp}" > "${PGSTATE}/extension.sha256"
}

load_demo() {
  if [ "$("${PSQL[@]}" -d "${DATABASE}" -Atc "select count(*) from docstore.entities where database_id = '(default)'")" = 0 ]; then
    say "loading the demo dataset (demo/restaurants.sql)"
    "${PSQL[@]}" -d "${DATABASE}" -q -f "${ROOT}/demo/restaurants.sql" >/dev/null
  fi
}

# The demo database is open to every caller through an explicit ruleset (a database without
# rules denies clients, docs/rules.md): installed once, never over rules someone set.
open_demo() {
  if [ "$("${PSQL[@]}" -d "${DATABASE}" -Atc "select count(*) from docstore.rules where database_id = '(default)'")" = 0 ]; then
    "${PSQL[@]}" -d "${DATABASE}" -q -f "${ROOT}/demo/open_rules.sql" >/dev/null
    say "installed the demo's open ruleset on (default) (demo/open_rules.sql): anyone may read and write; replace it with docstore.set_rules or close it with docstore.drop_rules()"
  fi
}

# The (default) database as development mode configures the databases it creates
# (docstore.create_database_for_dev, docs/grpc.md "Names"): automatic composite indexes on, so
# Google's SDKs and their tests, written for the emulator (which needs no index definitions), run
# unchanged against this stack (docs/query.md "Automatic composite indexes"). Set once per
# created extension (the stamp), never over a setting someone changed since.
dev_database_options() {
  [ -f "${PGSTATE}/dev-options.done" ] && return 0
  "${PSQL[@]}" -d "${DATABASE}" -qAtc "select docstore.set_database_options('(default)',
    (select max_query_results from docstore.databases where id = '(default)'),
    auto_composite_indexes => true)" >/dev/null
  touch "${PGSTATE}/dev-options.done"
  say "turned on automatic composite indexes for (default), as development mode does for the databases it creates (docs/query.md); turn them off with docstore.set_database_options('(default)', <its max_query_results>, auto_composite_indexes => false)"
}

install_packages
install_rust_tools
install_extension
init_cluster
start_cluster
create_database
load_demo
open_demo
dev_database_options
bash "${ROOT}/scripts/venv.sh"
bash "${ROOT}/scripts/sidecar.sh" start

EMULATOR_HOST="$(sed -n 's/^FIRESTORE_EMULATOR_HOST=//p' "${ROOT}/.docstore/dev.env")"

cat <<DONE

pg_docstore is up.
  psql:    psql -h 127.0.0.1 -p ${DOCSTORE_PG_PORT} -U postgres ${DATABASE}
  try:     select docstore.get('restaurants/one');
           select path, data->>'name' from docstore.documents where collection = 'restaurants';
  rules:   (default) is open to every caller (demo/open_rules.sql); other databases deny
           clients until docstore.set_rules (docs/rules.md)
  indexes: (default) creates the composite index a query needs (automatic composite indexes,
           as development mode's databases; docs/query.md)
  HTTP:    source .docstore/dev.env
           curl -H "Authorization: Bearer \$DOCSTORE_ADMIN_KEY" "\$DOCSTORE_URL/v1/databases/(default)/documents/restaurants/one"
  SDKs:    export FIRESTORE_EMULATOR_HOST=${EMULATOR_HOST}
           (Google's Firestore SDKs, gRPC front end in development mode, docs/grpc.md; also in .docstore/dev.env)
  logs:    ${PGLOG}, .docstore/sidecar.log
  stop:    make down
DONE
