#!/bin/sh
# Runs once, when the container's data directory is first created (after 10-pg_docstore.sql):
# the sidecar's login role (sql/sidecar_role.sql: LOGIN, REPLICATION, not a superuser, a member
# of the extension's docstore_service) with DOCSTORE_SIDECAR_PASSWORD, and the pg_hba.conf line
# that lets it open its replication connection from another container (the image's own lines
# cover databases, not replication).
set -eu
# The password reaches psql through its environment (\getenv), never through a meta-command
# line: there a space would split it and a backslash would start another meta-command (`\!`
# runs a shell command).
: "${DOCSTORE_SIDECAR_PASSWORD:?DOCSTORE_SIDECAR_PASSWORD is not set}"
export DOCSTORE_SIDECAR_PASSWORD
{ printf '%s\n' '\getenv password DOCSTORE_SIDECAR_PASSWORD'
  cat /docstore/sidecar_role.sql; } |
  psql -X -v ON_ERROR_STOP=1 --username "${POSTGRES_USER}" --dbname docstore -q -f -
echo "host replication docstore_sidecar all scram-sha-256" >> "${PGDATA}/pg_hba.conf"
