#!/usr/bin/env bash
# Write triggers' benchmarks (issue 28, Performance), with scripts/bench_live.sh's cluster,
# sidecar and docstore-loadgen (whose --trigger-listen serves a local endpoint that answers 200
# at once and records when each delivery arrived):
#   triggers       delivery throughput and commit -> endpoint latency (p50 / p99, from the
#                  writer's COMMIT returning and from the change's commitTime) at 100 and
#                  1,000 writes/s (BENCH_TRIGGER_RATES), one trigger on every written document
#   triggers-live  the cost on the live path: live-query latency (1,000 subscriptions,
#                  100 writes/s) with 0 and with 10 triggers on every write, interleaved
# Command:   bash scripts/bench_triggers.sh [scenario...]   (default: both)
# Environment as bench_live.sh's (BENCH_REPEAT, BENCH_SECONDS, BENCH_BUILD, ...). Prints the
# Markdown rows for BENCHMARKS.md ("Write triggers"); raw output in target/bench-live/.
set -euo pipefail
[ "$#" -gt 0 ] || set -- triggers triggers-live
exec bash "$(dirname "$0")/bench_live.sh" "$@"
