#!/usr/bin/env bash
# The write-trigger oracle campaign, long (tests/live/trigger_oracle.py): random creates,
# updates and deletes (SQL and HTTP) delivered to an at-least-once and an exactly-once trigger
# whose endpoint fails, times out, closes connections and has changes delivered twice, under
# faults (sidecar SIGKILL, Postgres restart fast and immediate), on a throwaway cluster and
# sidecar of its own, the fault plan repeated for SECONDS; then quiescence and the checks
# (every committed change delivered, in commit order per document, with the exact payload;
# the exactly-once counters exact). One run per seed; the last line of each is its summary.
# Usage: scripts/trigger_oracle.sh [seconds per seed (default 300; 0: the short campaign)]
#        [seed ...] (default: one fresh seed, or DOCSTORE_TRIGGER_ORACLE_SEED / DOCSTORE_SEED)
# DOCSTORE_KEEP_LOGS=1 keeps the cluster and sidecar logs (kept anyway when a run fails).
source "$(dirname "$0")/lib.sh"
cd "${ROOT}"
[ -x .venv/bin/python ] || bash scripts/venv.sh
cargo build --release --quiet -p docstore-sidecar
export DOCSTORE_SIDECAR_BIN="${CARGO_TARGET_DIR:-${ROOT}/target}/release/docstore-sidecar"
seconds="${1:-300}"
shift || true
seeds=("$@")
[ "${#seeds[@]}" -gt 0 ] || seeds=(0)
status=0
for seed in "${seeds[@]}"; do
  .venv/bin/python tests/live/trigger_oracle.py "${seconds}" "${seed}" || status=1
done
exit "${status}"
