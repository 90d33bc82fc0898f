#!/usr/bin/env bash
# `make down`: stop the cluster (data stays in .pgdata/; `make clean` removes it).
source "$(dirname "$0")/lib.sh"
if cluster_running; then
  as_postgres "${PG_BIN}/pg_ctl" -D "${PGDATA}" -w -m fast stop >/dev/null
  say "stopped Postgres on port ${DOCSTORE_PG_PORT}"
else
  say "Postgres is not running"
fi
