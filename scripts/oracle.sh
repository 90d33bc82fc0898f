#!/usr/bin/env bash
# The live-query oracle campaign, long (tests/live/oracle.py): random documents, subscriptions
# and transactions (SQL and HTTP) under faults (sidecar SIGKILL, Postgres restart, dropped
# connections resumed by Last-Event-ID, a slow reader), on a throwaway cluster and sidecar of
# its own, the fault plan repeated for SECONDS; then a quiet period and the checks (every
# subscriber's state against a fresh :runQuery, no missed transaction, ...).
# Usage: scripts/oracle.sh [seconds (default 600; 0: the short campaign of make test)] [seed]
# The seed is fresh unless given here or in DOCSTORE_SEED / DOCSTORE_ORACLE_SEED; it is printed
# at the start and with every failure.
# DOCSTORE_ORACLE_FAULTS=0 runs without faults; DOCSTORE_ORACLE_STRICT=0 only counts a target
# behind its stream's other targets (the requery freeze, fixed) instead of failing;
# DOCSTORE_KEEP_LOGS=1 keeps the cluster and sidecar logs; DOCSTORE_ORACLE_PARTITIONS=WxQ sets the
# sidecar's matcher partitions (default 2x2: write x query partitions, docs/architecture.md).
# DOCSTORE_ORACLE_TOPOLOGY=cluster runs the campaign against nats-server, two ingests (one
# standby) and two gateways (tests/cluster/oracle_stack.py) with the cluster's faults: SIGKILL
# of the active ingest, of a gateway (its clients resume on the other), of nats-server, and
# Postgres restarts; every resume goes to the other gateway. DOCSTORE_ORACLE_TOPOLOGY=matchers
# runs the same with two --role matcher processes holding the streams and gateways with
# --matching remote, and SIGKILL of a matcher among the faults (restarted after a random
# downtime; its streams continue on the other matcher within their connections).
source "$(dirname "$0")/lib.sh"
cd "${ROOT}"
[ -x .venv/bin/python ] || bash scripts/venv.sh
if [ "${DOCSTORE_ORACLE_TOPOLOGY:-}" = cluster ] || [ "${DOCSTORE_ORACLE_TOPOLOGY:-}" = matchers ]; then
  command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || die "nats-server is missing (make up installs it)"
fi
cargo build --release --quiet -p docstore-sidecar
export DOCSTORE_SIDECAR_BIN="${CARGO_TARGET_DIR:-${ROOT}/target}/release/docstore-sidecar"
exec .venv/bin/python tests/live/oracle.py "${1:-600}" "${2:-0}"
