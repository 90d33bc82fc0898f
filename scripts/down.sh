#!/usr/bin/env bash
# `make down`: stop the sidecar and the cluster (data stays in .pgdata/; `make clean` removes it).
source "$(dirname "$0")/lib.sh"
bash "${ROOT}/scripts/sidecar.sh" stop
if cluster_running; then
  as_postgres "${PG_BIN}/pg_ctl" -D "${PGDATA}" -w -m fast stop >/dev/null
  say "stopped Postgres on port ${DOCSTORE_PG_PORT}"
else
  say "Postgres is not running"
fi
