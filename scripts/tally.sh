# Running the layers of scripts/test.sh and counting what each one passed and failed. Sourced.
# shellcheck shell=bash
#
# run_layer NAME runs the function NAME with `set -e` in a subshell, its output shown and kept in
# target/test-logs/NAME.log, then prints the closing line `NAME: N passed, N failed` from that
# log (count_NAME parses it when defined, count_plain otherwise: the layer's script prints its
# own bare "N passed, N failed" line, or counts as one test). A layer that exits non-zero
# counts at least one failure, and so does a layer that ran nothing: a test that cannot fail is a
# defect. On a failure the run ends after `total: N passed, N failed` with exit status 1.

TALLY_LOGS="${ROOT}/target/test-logs"
TALLY_PASSED=0
TALLY_FAILED=0

run_layer() {
  local layer="$1" log="${TALLY_LOGS}/$1.log" status counts passed failed
  declare -F "${layer}" >/dev/null || die "no test layer named '${layer}'"
  mkdir -p "${TALLY_LOGS}"
  set +e
  (
    set -e
    "${layer}"
  ) 2>&1 | tee "${log}"
  status="${PIPESTATUS[0]}"
  set -e
  if declare -F "count_${layer}" >/dev/null; then
    counts="$("count_${layer}" "${log}")" || counts="0 0"
  else
    counts="$(count_plain "${log}" "${status}")" || counts="0 1"
  fi
  read -r passed failed <<< "${counts}"
  if [ "${status}" != 0 ] && [ "${failed}" = 0 ]; then failed=1; fi
  if [ "$((passed + failed))" = 0 ]; then
    echo "${layer} ran no test"
    failed=1
  fi
  echo "${layer}: ${passed} passed, ${failed} failed"
  TALLY_PASSED=$((TALLY_PASSED + passed))
  TALLY_FAILED=$((TALLY_FAILED + failed))
  if [ "${failed}" != 0 ]; then
    echo "total: ${TALLY_PASSED} passed, ${TALLY_FAILED} failed"
    exit 1
  fi
}

tally_total() { echo "total: ${TALLY_PASSED} passed, ${TALLY_FAILED} failed"; }

# Each count_* prints "PASSED FAILED" for the log file $1.

# The last bare "N passed, N failed" line a script printed itself (concurrency.sh, faults.sh);
# a script that prints none counts as one test, passed when its exit status $2 is 0.
count_plain() {
  local line
  line="$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1 || true)"
  if [ -n "${line}" ]; then
    sed -E 's/^([0-9]+) passed, ([0-9]+) failed.*/\1 \2/' <<< "${line}"
  elif [ "$2" = 0 ]; then
    echo "1 0"
  else
    echo "0 1"
  fi
}

# cargo test: the sum of every "test result: ok. N passed; M failed; ..." line (one per binary).
count_cargo() {
  { grep -E 'test result: .* [0-9]+ passed; [0-9]+ failed' "$1" || true; } |
    sed -E 's/.* ([0-9]+) passed; ([0-9]+) failed.*/\1 \2/' |
    awk '{ p += $1; f += $2 } END { print p + 0, f + 0 }'
}

# pg_regress and pg_isolation_regress (Postgres 15): the summary " All N tests passed. " or
# " M of N tests failed. " (ignored failures count as passed, as pg_regress counts them);
# without a summary (the driver stopped early), the per-test "... ok" and "... FAILED" lines.
count_pg_regress() {
  local line
  line="$(grep -E '^ *(All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests (passed|failed))' "$1" | tail -n 1 || true)"
  case "${line}" in
    *"All "*) sed -E 's/^ *All ([0-9]+) tests passed.*/\1 0/' <<< "${line}" ;;
    *"tests passed"*) sed -E 's/^ *([0-9]+) of ([0-9]+) tests passed.*/\2 0/' <<< "${line}" ;;
    *"these failures ignored"*)
      sed -E 's/^ *([0-9]+) of ([0-9]+) tests failed, ([0-9]+) of these.*/\1 \2 \3/' <<< "${line}" |
        awk '{ print $2 - $1 + $3, $1 - $3 }'
      ;;
    *"tests failed"*)
      sed -E 's/^ *([0-9]+) of ([0-9]+) tests failed.*/\1 \2/' <<< "${line}" |
        awk '{ print $2 - $1, $1 }'
      ;;
    *)
      echo "$(grep -cE '\.\.\. ok ' "$1" || true) $(grep -cE '\.\.\. FAILED' "$1" || true)"
      ;;
  esac
}

count_core() { count_cargo "$1"; }
count_pgrx() { count_cargo "$1"; }
count_differential() { count_cargo "$1"; }
count_rules() { count_cargo "$1"; }
count_sidecar() { count_cargo "$1"; }
count_regress() { count_pg_regress "$1"; }
count_isolation() { count_pg_regress "$1"; }
count_e2e() { count_pytest "$1"; }

# pytest's summary line, e.g. "3 failed, 41 passed, 2 skipped in 9.1s" (errors count as failed).
count_pytest() {
  local line
  line="$(grep -E '[0-9]+ (passed|failed|errors?)|no tests ran' "$1" | grep -E ' in [0-9.]+s' | tail -n 1 || true)"
  local passed failed errors
  passed="$(grep -oE '[0-9]+ passed' <<< "${line}" | cut -d' ' -f1 || true)"
  failed="$(grep -oE '[0-9]+ failed' <<< "${line}" | cut -d' ' -f1 || true)"
  errors="$(grep -oE '[0-9]+ errors?' <<< "${line}" | cut -d' ' -f1 || true)"
  echo "${passed:-0} $((${failed:-0} + ${errors:-0}))"
}

# lint: one "lint check passed: ..." or "lint check FAILED: ..." line per check (lint_check).
count_lint() {
  echo "$(grep -c '^lint check passed: ' "$1" || true) $(grep -c '^lint check FAILED: ' "$1" || true)"
}

# Run one lint check, a command, and say how it went; every check runs, failing or not.
lint_check() {
  local name="$1"
  shift
  if "$@"; then
    echo "lint check passed: ${name}"
  else
    echo "lint check FAILED: ${name}"
    LINT_FAILED=1
  fi
}
