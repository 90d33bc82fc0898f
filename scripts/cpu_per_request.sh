#!/usr/bin/env bash
# CPU per request of each process in a load run: the sidecar, Postgres (the cluster's postmaster
# and all its backends, those that exited during the run included) and the load generator.
# Usage: scripts/cpu_per_request.sh LABEL SIDECAR_PID -- wrk|pgbench ARGS...
# Prints: LABEL, requests/s (wrk's Requests/sec or pgbench's tps), then microseconds of CPU per
# request for the sidecar, Postgres, the load generator, and the whole machine (others: what the
# rest of the machine used meanwhile, divided by the same requests), then wrk's p50 and p99.
# Needs the cluster at 127.0.0.1:DOCSTORE_PG_PORT (default 5433); the load generator's output is
# kept in ${TMPDIR:-/tmp}/cpu_per_request-LABEL.out. Used for BENCHMARKS.md ("Sidecar HTTP").
source "$(dirname "$0")/lib.sh"

[ "$#" -ge 4 ] && [ "$3" = "--" ] || die "usage: scripts/cpu_per_request.sh LABEL SIDECAR_PID -- COMMAND..."
label="$1" sidecar="$2"
shift 3
out="${TMPDIR:-/tmp}/cpu_per_request-${label}.out"
data_dir="$("${PSQL[@]}" -d postgres -Atc "show data_directory")"
postmaster="$(head -1 "${data_dir}/postmaster.pid")"

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# Live processes, plus the reaped children's time the postmaster has collected.
postgres_ticks() {
  local sum p
  sum="$(awk '{ print $16 + $17 }' "/proc/${postmaster}/stat")"
  for p in "${postmaster}" $(pgrep -P "${postmaster}"); do sum=$((sum + $(ticks "${p}"))); done
  echo "${sum}"
}
busy_ticks() { head -1 /proc/stat | awk '{ print $2 + $3 + $4 + $7 + $8 }'; }

sleep 1 # backends of a previous run finish exiting
s0="$(ticks "${sidecar}")" p0="$(postgres_ticks)" b0="$(busy_ticks)" t0="$(date +%s.%N)"
/usr/bin/time -f "%U %S" -o "${out}.time" "$@" > "${out}" 2>&1 || die "$1 failed: see ${out}"
s1="$(ticks "${sidecar}")" p1="$(postgres_ticks)" b1="$(busy_ticks)" t1="$(date +%s.%N)"
read -r user system < "${out}.time"
rate="$(grep -E 'Requests/sec|^tps' "${out}" | grep -oE '[0-9]+(\.[0-9]+)?' | head -1)"
latency="$(awk '$1 == "50%" || $1 == "99%" { printf "%s ", $2 }' "${out}")"
hz="$(getconf CLK_TCK)"
awk -v label="${label}" -v rate="${rate:-0}" -v seconds="$(echo "${t1} - ${t0} - 0" | bc)" \
  -v sc=$((s1 - s0)) -v pg=$((p1 - p0)) -v busy=$((b1 - b0)) -v client="$(echo "${user} + ${system}" | bc)" \
  -v hz="${hz}" -v latency="${latency}" 'BEGIN {
    n = rate * seconds; if (n <= 0) { print label ": no requests"; exit 1 }
    us = 1e6 / n
    printf "%-18s %8.0f/s  CPU us per request: sidecar %4.0f  postgres %4.0f  load generator %4.0f  machine %5.0f (others %5.0f)  %s\n",
      label, rate, sc / hz * us, pg / hz * us, client * us, busy / hz * us, (busy - sc - pg) / hz * us - client * us, latency
  }'
