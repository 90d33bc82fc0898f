# Running the layers of scripts/test.sh and counting what each one passed, failed and skipped.
# Sourced.
# shellcheck shell=bash
#
# run_layer NAME runs the function NAME with `set -e` in a subshell, its output shown and kept in
# target/test-logs/NAME.log, then prints the closing line `NAME: N passed, N failed, N skipped`
# from that log (count_NAME parses it when defined, count_checks otherwise: the layer's script
# prints one `check passed: ...` line per check, scripts/lib.sh's check_passed).
#
# A test that did not run is never a pass. Skips are counted from the runner's own summary
# (cargo's `N ignored` and `N filtered out`, pytest's skipped, xfailed and deselected) plus the
# cases a test reports it skipped itself (a line `SKIPPED: <id>: <reason>`, e.g. one per rules
# corpus file that could not be fetched). Every skip must be on the allow-list
# tests/allowed-skips.txt with its reason; the allowed ones print that reason, any other skip
# (including one without a name, e.g. a test filtered out by a pattern) is a failure. Tests a
# layer leaves out on purpose because another layer runs them are named with run_elsewhere
# (a line `run elsewhere: <test> (the <layer> layer)`) and are neither counted nor skipped here.
#
# A layer that exits non-zero counts at least one failure, and so does a layer that ran nothing.
# Lint checks are not tests: their line (`lint: N checks passed, N failed`) stays out of the
# totals, though a failed check fails the run. On a failure the run ends after `total: ...`
# with exit status 1.

TALLY_LOGS="${ROOT}/target/test-logs"
TALLY_ALLOWED="${ROOT}/tests/allowed-skips.txt"
TALLY_PASSED=0
TALLY_FAILED=0
TALLY_SKIPPED=0

run_layer() {
  local layer="$1" log="${TALLY_LOGS}/$1.log" status counts passed failed skipped
  declare -F "${layer}" >/dev/null || die "no test layer named '${layer}'"
  mkdir -p "${TALLY_LOGS}"
  set +e
  (
    set -e
    "${layer}"
  ) 2>&1 | tee "${log}"
  status="${PIPESTATUS[0]}"
  set -e
  if [ "${layer}" = lint ]; then
    counts="$(count_lint "${log}")"
    read -r passed failed <<< "${counts}"
    if [ "${status}" != 0 ] && [ "${failed}" = 0 ]; then failed=1; fi
    echo "lint: ${passed} checks passed, ${failed} failed (checks, not tests: not in the total)"
    if [ "${failed}" != 0 ]; then
      tally_total
      exit 1
    fi
    return 0
  fi
  if declare -F "count_${layer}" >/dev/null; then
    counts="$("count_${layer}" "${log}")" || counts="0 1 0"
  else
    counts="$(count_checks "${log}")" || counts="0 1 0"
  fi
  read -r passed failed skipped <<< "${counts}"
  if [ "${status}" != 0 ] && [ "${failed}" = 0 ]; then failed=1; fi
  if [ "$((passed + failed))" = 0 ]; then
    echo "${layer} ran no test"
    failed=1
  fi
  failed=$((failed + $(check_skips "${layer}" "${log}" "${skipped}")))
  echo "${layer}: ${passed} passed, ${failed} failed, ${skipped} skipped"
  TALLY_PASSED=$((TALLY_PASSED + passed))
  TALLY_FAILED=$((TALLY_FAILED + failed))
  TALLY_SKIPPED=$((TALLY_SKIPPED + skipped))
  if [ "${failed}" != 0 ]; then
    tally_total
    exit 1
  fi
}

tally_total() {
  echo "total: ${TALLY_PASSED} passed, ${TALLY_FAILED} failed, ${TALLY_SKIPPED} skipped"
  if [ "${TALLY_FAILED}" != 0 ] && [ -n "${DOCSTORE_SEED:-}" ]; then
    echo "seed of this run: DOCSTORE_SEED=${DOCSTORE_SEED} (set it to replay the randomized tests)"
  fi
}

# Record in the log that this layer leaves test $2 out (the caller passes cargo test's --skip)
# because layer $1 runs it: count_cargo subtracts it from the filtered-out tests.
run_elsewhere() { # layer test
  echo "run elsewhere: $2 (the $1 layer)"
}

# The skipped tests and cases of layer $1 named in its log $2 (one per line): cargo's ignored
# tests (`test NAME ... ignored`), and `SKIPPED: ID: reason` lines (our own tests and scripts,
# and tests/conftest.py for pytest).
skipped_ids() {
  {
    sed -nE 's/^test ([^ ]+) \.\.\. ignored.*/\1/p' "$2"
    sed -nE 's/^SKIPPED: ([^:]+(::[^:]+)*): .*/\1/p' "$2"
  } | sort -u
}

# The reason the allow-list gives for skipping test $2 in layer $1 (glob patterns), or nothing.
allowed_reason() { # layer id
  local layer pattern reason
  [ -f "${TALLY_ALLOWED}" ] || return 0
  while IFS=$'\t' read -r layer pattern reason; do
    case "${layer}" in '' | '#'*) continue ;; esac
    [ "${layer}" = "$1" ] || continue
    # shellcheck disable=SC2053 # the pattern is a glob on purpose
    if [[ "$2" == ${pattern} ]]; then
      printf '%s' "${reason}"
      return 0
    fi
  done < "${TALLY_ALLOWED}"
}

# Compare the skips of layer $1 (log $2, $3 skipped in all) with the allow-list: print each one
# with its reason or as unlisted, and print (on stdout, last) how many are failures: the
# unlisted ones and those without a name.
check_skips() { # layer log skipped
  local id reason named=0 bad=0
  while read -r id; do
    [ -n "${id}" ] || continue
    named=$((named + 1))
    reason="$(allowed_reason "$1" "${id}")"
    if [ -n "${reason}" ]; then
      echo "allowed skip: $1 ${id}: ${reason}" >&2
    else
      echo "UNLISTED SKIP: $1 ${id} (not on tests/allowed-skips.txt: a failure)" >&2
      bad=$((bad + 1))
    fi
  done < <(skipped_ids "$1" "$2")
  if [ "$3" -gt "${named}" ]; then
    echo "UNLISTED SKIP: $1: $(($3 - named)) skipped without a name (filtered out, deselected): a failure" >&2
    bad=$((bad + $3 - named))
  fi
  echo "${bad}"
}

# Each count_* prints "PASSED FAILED SKIPPED" for the log file $1.

# A test script's checks: its `check passed: ...` lines (scripts/lib.sh, check_passed); a failing
# check ends the script with a non-zero status, which run_layer counts.
count_checks() {
  echo "$(grep -c '^check passed: ' "$1" || true) 0 $(grep -c '^SKIPPED: ' "$1" || true)"
}

# cargo test: the sum of every "test result: ok. N passed; M failed; I ignored; 0 measured;
# F filtered out" line (one per binary). Ignored and filtered-out tests are skipped, except
# those run in another layer (run_elsewhere); cases a passing test skipped itself (SKIPPED:
# lines) are skipped too.
count_cargo() {
  local elsewhere own
  elsewhere="$(grep -c '^run elsewhere: ' "$1" || true)"
  own="$(grep -c '^SKIPPED: ' "$1" || true)"
  { grep -E 'test result: .* [0-9]+ passed; [0-9]+ failed' "$1" || true; } |
    sed -E 's/.* ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored; [0-9]+ measured; ([0-9]+) filtered out.*/\1 \2 \3 \4/' |
    awk -v elsewhere="${elsewhere}" -v own="${own}" '
      { p += $1; f += $2; s += $3 + $4 }
      END {
        s -= elsewhere
        # More tests named as run elsewhere than were left out: the accounting is wrong.
        if (s < 0) { f += 1; s = 0 }
        print p + 0, f + 0, s + own
      }'
}

# pg_regress and pg_isolation_regress (Postgres 15): the summary " All N tests passed. " or
# " M of N tests failed. " (ignored failures count as passed, as pg_regress counts them);
# without a summary (the driver stopped early), the per-test "... ok" and "... FAILED" lines.
count_pg_regress() {
  local line
  line="$(grep -E '^ *(All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests (passed|failed))' "$1" | tail -n 1 || true)"
  case "${line}" in
    *"All "*) sed -E 's/^ *All ([0-9]+) tests passed.*/\1 0 0/' <<< "${line}" ;;
    *"tests passed"*) sed -E 's/^ *([0-9]+) of ([0-9]+) tests passed.*/\2 0 0/' <<< "${line}" ;;
    *"these failures ignored"*)
      sed -E 's/^ *([0-9]+) of ([0-9]+) tests failed, ([0-9]+) of these.*/\1 \2 \3/' <<< "${line}" |
        awk '{ print $2 - $1 + $3, $1 - $3, 0 }'
      ;;
    *"tests failed"*)
      sed -E 's/^ *([0-9]+) of ([0-9]+) tests failed.*/\1 \2/' <<< "${line}" |
        awk '{ print $2 - $1, $1, 0 }'
      ;;
    *)
      echo "$(grep -cE '\.\.\. ok ' "$1" || true) $(grep -cE '\.\.\. FAILED' "$1" || true) 0"
      ;;
  esac
}

# The regression suite's first "test", setup (it creates the extension), is a set-up step: it
# is not counted (its failure still fails the layer, every later test failing with it).
count_regress() {
  local passed failed skipped
  read -r passed failed skipped <<< "$(count_pg_regress "$1")"
  if grep -qE '^test setup +\.\.\. ok' "$1"; then
    passed=$((passed - 1))
  fi
  echo "${passed} ${failed} ${skipped}"
}

# scripts/upgrade.sh: its own checks (`check passed: ...` / `check FAILED: ...`) and the
# regression suite it runs in the upgraded database.
count_upgrade() {
  local passed failed skipped
  read -r passed failed skipped <<< "$(count_regress "$1")"
  echo "$((passed + $(grep -c '^check passed: ' "$1" || true))) $((failed + $(grep -c '^check FAILED: ' "$1" || true))) ${skipped}"
}

count_core() { count_cargo "$1"; }
count_pgrx() { count_cargo "$1"; }
count_differential() { count_cargo "$1"; }
count_rules() { count_cargo "$1"; }
count_sidecar() { count_cargo "$1"; }
count_isolation() { count_pg_regress "$1"; }
count_e2e() { count_pytest "$1"; }
count_live() { count_pytest "$1"; }
count_cluster() { count_pytest "$1"; }
count_sdk() { count_pytest "$1"; }

# scripts/firestore_system_tests.sh: its closing line `firestore system tests: N passed, N
# failed, N skipped` (allow-listed failures among the skipped, each with a `SKIPPED:` line).
count_oracle() { count_summary 'firestore system tests' "$1"; }

# scripts/node_sdk_tests.sh: its closing line `node: N passed, N failed, N skipped`.
count_node() { count_summary node "$1"; }

# The numbers of the last line `$1: N passed, N failed, N skipped` of log $2 (none: "0 0 0").
count_summary() {
  local line
  line="$(grep -E "^$1: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped\$" "$2" | tail -n 1 || true)"
  if [ -z "${line}" ]; then
    echo "0 0 0"
    return
  fi
  sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\1 \2 \3/' <<< "${line}"
}

# pytest's summary line, e.g. "3 failed, 41 passed, 2 skipped, 1 deselected in 9.1s": errors
# and xpassed (an expected failure that passed) count as failed; skipped, xfailed and
# deselected as skipped.
count_pytest() {
  local line
  line="$(grep -E '[0-9]+ (passed|failed|errors?|skipped|deselected|xfailed)|no tests ran' "$1" | grep -E ' in [0-9.]+s' | tail -n 1 || true)"
  # shellcheck disable=SC2016 # awk's own $ fields
  awk '{
      for (i = 2; i <= NF; i++) {
        word = $i; sub(/[,=]+$/, "", word); n = $(i - 1) + 0
        if (word == "passed") p += n
        else if (word == "failed" || word == "error" || word == "errors" || word == "xpassed") f += n
        else if (word == "skipped" || word == "xfailed" || word == "deselected") s += n
      }
    } END { print p + 0, f + 0, s + 0 }' <<< "${line}"
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
