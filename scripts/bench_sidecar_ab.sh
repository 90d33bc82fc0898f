#!/usr/bin/env bash
# Two sidecar binaries side by side, same database, same run: GETs of a ~1 KB document (one of
# 1,000, at random; wrk, 32 connections, 2 threads) with the admin key and with an HS256 JWT
# (the open ruleset of demo/open_rules.sql), alternating before/after within each round. Prints requests/s,
# p50/p99 and each sidecar's CPU per request (utime + stime of /proc/<pid>/stat over the run),
# which other processes on a shared machine inflate far less than the rates.
# Usage: DOCSTORE_PG_PORT=<port> scripts/bench_sidecar_ab.sh BEFORE_BIN AFTER_BIN [rounds, default 3] [seconds, default 8]
#   Database bench_ab is dropped at the end.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/bench_lib.sh"
[ "$#" -ge 2 ] || die "usage: scripts/bench_sidecar_ab.sh BEFORE_BIN AFTER_BIN [rounds] [seconds]"
declare -A BIN=([before]="$1" [after]="$2")
ROUNDS="${3:-3}"
SECONDS_PER_RUN="${4:-8}"
DB=bench_ab
bench_scratch "${DB}"
tmp="${BENCH_TMP}"
bench_documents "${DB}"
secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
declare -A TOKENS=([admin]="k${secret}" [jwt]="$(bench_jwt "${secret}")")
declare -A URLS PIDS
for which in before after; do
  bench_sidecar "${tmp}/${which}.log" "${BIN[${which}]}" "${DB}" "${secret}" "${TOKENS[admin]}"
  BENCH_PIDS+=("${BENCH_SIDECAR_PID}")
  PIDS[${which}]="${BENCH_SIDECAR_PID}"
  URLS[${which}]="${BENCH_SIDECAR_URL}"
  for who in admin jwt; do
    code="$(curl -sS -o "${tmp}/check" -w '%{http_code}' -H "Authorization: Bearer ${TOKENS[${who}]}" \
      "${URLS[${which}]}/v1/databases/(default)/documents/bench/d7")"
    [ "${code}" = 200 ] || die "GET through ${BIN[${which}]} as ${who}: ${code} $(cat "${tmp}/check")"
  done
done
bench_get_lua "${tmp}/get.lua"
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz="$(getconf CLK_TCK)"
echo "before: ${BIN[before]}"
echo "after:  ${BIN[after]}"
echo
echo "| round | who | load avg | before: req/s, p50/p99, sidecar CPU per request | after | after / before (req/s, CPU) |"
echo "|---|---|---|---|---|---|"
for r in $(seq 1 "${ROUNDS}"); do
  for who in admin jwt; do
    load="$(cut -d' ' -f1 /proc/loadavg)"
    declare -A RPS CPU CELL
    for which in before after; do
      t0="$(ticks "${PIDS[${which}]}")"
      wrk -t 2 -c 32 -d "${SECONDS_PER_RUN}s" --latency -s "${tmp}/get.lua" \
        -H "Authorization: Bearer ${TOKENS[${who}]}" "${URLS[${which}]}" > "${tmp}/wrk.out" 2>&1
      t1="$(ticks "${PIDS[${which}]}")"
      read -r n rps p50 p99 <<< "$(awk '/requests in/ { n = $1 } /Requests\/sec/ { rps = $2 }
        /^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 } END { printf "%d %d %s %s", n, rps, p50, p99 }' "${tmp}/wrk.out")"
      [ "${n}" -gt 0 ] || die "wrk served no request: $(cat "${tmp}/wrk.out")"
      RPS[${which}]="${rps}"
      CPU[${which}]="$(awk -v t="$((t1 - t0))" -v hz="${hz}" -v n="${n}" 'BEGIN { printf "%.1f", t / hz / n * 1e6 }')"
      CELL[${which}]="${rps}, ${p50}/${p99}, ${CPU[${which}]} us"
    done
    ratio="$(awk -v a="${RPS[after]}" -v b="${RPS[before]}" -v c="${CPU[after]}" -v d="${CPU[before]}" \
      'BEGIN { printf "%.2fx, %.2fx", a / b, c / d }')"
    echo "| ${r} | ${who} | ${load} | ${CELL[before]} | ${CELL[after]} | ${ratio} |"
  done
done
