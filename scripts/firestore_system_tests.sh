#!/usr/bin/env bash
# The oracle: python-firestore's own system tests (tests/system/test_system.py and
# test_system_async.py of the google-cloud-firestore sdist), unchanged, against the Firestore
# gRPC server at FIRESTORE_EMULATOR_HOST, as they run against Google's emulator.
# Usage: FIRESTORE_EMULATOR_HOST=HOST:PORT scripts/firestore_system_tests.sh [PYTEST ARGS...]
#   (default HOST:PORT: the FIRESTORE_EMULATOR_HOST line of .docstore/dev.env, which `make up`
#   writes). Extra arguments go to pytest (e.g. `-k test_document_get`).
#
# - The sdist, at the version tests/grpc/system-requirements.txt pins (its hash checked here), is
#   fetched with pip into target/firestore-system/ (never into the repository), and only its
#   tests/system/{test_system,test_system_async,test__helpers}.py are extracted.
# - They run in their own venv, target/firestore-system-venv, from that requirements file (the
#   SDK itself at the same version, pytest < 8, pytest-asyncio 0.21.2, pytest-timeout, and what
#   the tests import).
# - A preflight gRPC call fails the run at once when nothing answers gRPC at the address (the SDK
#   would retry each RPC for a minute); each test is bounded by pytest-timeout
#   (FIRESTORE_SYSTEM_TEST_TIMEOUT seconds, default 120) and the whole run by
#   FIRESTORE_SYSTEM_RUN_TIMEOUT (default 3600).
# - GCLOUD_PROJECT (the variable the tests read) and GOOGLE_CLOUD_PROJECT: the project id of the
#   resource names, default `demo-docstore`.
# - The closing lines (scripts/firestore_system_tests.py report): every skip and allow-listed
#   failure as `SKIPPED: ID: REASON`, every other failure as `FAILED: ID: REASON`, then
#   `firestore system tests: N passed, N failed, N skipped`. The allow-list is
#   tests/allowed-skips.txt, layer `oracle`; the script fails when a test fails or skips that it
#   does not name. Before the suite, tests/grpc/system_report_check.py checks that accounting
#   (the plugin and the report, on small suites run through real pytest): the run stops if it fails.
#
# Calibration against Google's own emulator (not part of `make test`: it needs Google's emulator):
#   scripts/firestore_system_tests.sh --baseline [PYTEST ARGS...]
# starts the Cloud Firestore emulator on a free loopback port, runs the same tests against it,
# runs the failed ones once more, and rewrites tests/grpc/emulator-baseline.txt: one line per
# test the emulator fails (`ID<TAB>REASON`), those that passed on the rerun as `# flaky:` lines,
# under a header naming the emulator's version, the date and the command. The emulator is the
# jar in FIRESTORE_EMULATOR_JAR, else the one of Google's Debian package
# google-cloud-cli-firestore-emulator (gcloud's), else the one firebase-tools downloads
# (`firebase setup:emulators:firestore`, firebase-tools FIREBASE_TOOLS_VERSION, default 15.34.2,
# installed into target/firebase-tools, which refuses a Java older than 21: its jar may need one
# too). JAVA: the java binary
# (default: java on PATH). The emulator is stopped when the script exits.
source "$(dirname "$0")/lib.sh"
cd "${ROOT}"

BASELINE=0
if [ "${1:-}" = --baseline ]; then
  BASELINE=1
  shift
fi

REQUIREMENTS="${ROOT}/tests/grpc/system-requirements.txt"
ALLOWED="${ROOT}/tests/allowed-skips.txt"
PLUGIN_DIR="${ROOT}/tests/grpc"
WORK="${ROOT}/target/firestore-system"
VENV="${ROOT}/target/firestore-system-venv"
# sha256 of the sdist of the pinned version (PyPI's published hash); change both together.
SDIST_SHA256=d403b12375e4f68176bb638451417330a7a66d11c9cace98f7778109b884d9ab
TESTS=(test_system.py test_system_async.py test__helpers.py)

VERSION="$(sed -n 's/^google-cloud-firestore==//p' "${REQUIREMENTS}")"
[ -n "${VERSION}" ] || die "${REQUIREMENTS} pins no google-cloud-firestore==VERSION"

if [ "${BASELINE}" = 1 ]; then
  # shellcheck source=scripts/firestore_emulator.sh
  source "$(dirname "$0")/firestore_emulator.sh"
  start_firestore_emulator # sets FIRESTORE_EMULATOR_HOST and EMULATOR_VERSION; stops it at exit
fi
if [ -z "${FIRESTORE_EMULATOR_HOST:-}" ] && [ -f .docstore/dev.env ]; then
  FIRESTORE_EMULATOR_HOST="$(sed -n 's/^FIRESTORE_EMULATOR_HOST=//p' .docstore/dev.env)"
fi
[ -n "${FIRESTORE_EMULATOR_HOST:-}" ] ||
  die "set FIRESTORE_EMULATOR_HOST=HOST:PORT (or run 'make up', which writes it into .docstore/dev.env)"
GCLOUD_PROJECT="${GCLOUD_PROJECT:-${GOOGLE_CLOUD_PROJECT:-demo-docstore}}"
export FIRESTORE_EMULATOR_HOST GCLOUD_PROJECT GOOGLE_CLOUD_PROJECT="${GCLOUD_PROJECT}"

# The venv, again when the requirements changed or the interpreter went away.
if [ -d "${VENV}" ] && ! "${VENV}/bin/python" -c pass 2>/dev/null; then
  rm -rf "${VENV}"
fi
[ -x "${VENV}/bin/python" ] || python3 -m venv "${VENV}"
want="$(fingerprint "${REQUIREMENTS}")"
if [ "$(cat "${VENV}/requirements.sha256" 2>/dev/null || true)" != "${want}" ]; then
  say "installing the oracle's requirements into ${VENV} (tests/grpc/system-requirements.txt)"
  "${VENV}/bin/python" -m pip install --quiet --disable-pip-version-check -r "${REQUIREMENTS}"
  echo "${want}" > "${VENV}/requirements.sha256"
fi

# The tests, from the sdist of the same version.
SDIST="${WORK}/dist/google_cloud_firestore-${VERSION}.tar.gz"
if [ ! -f "${SDIST}" ]; then
  say "fetching the google-cloud-firestore ${VERSION} sdist (its tests/system)"
  "${VENV}/bin/python" -m pip download --quiet --disable-pip-version-check --no-binary :all: \
    --no-deps "google-cloud-firestore==${VERSION}" -d "${WORK}/dist"
fi
[ "$(fingerprint "${SDIST}")" = "${SDIST_SHA256}" ] ||
  die "${SDIST} does not have the pinned sha256 ${SDIST_SHA256}: remove it and run again"
rm -rf "${WORK}/tests"
mkdir -p "${WORK}/tests/system"
for file in "${TESTS[@]}"; do
  tar -xzf "${SDIST}" -C "${WORK}/tests/system" --strip-components=3 \
    "google_cloud_firestore-${VERSION}/tests/system/${file}" ||
    die "the sdist has no tests/system/${file}"
done

say "the layer's own accounting first (tests/grpc/system_report_check.py)"
(
  cd "${PLUGIN_DIR}"
  PYTHONPATH="${PLUGIN_DIR}" timeout --kill-after=10 300 "${VENV}/bin/python" -m pytest -q \
    -p no:cacheprovider --confcutdir=. system_report_check.py
) || die "the oracle layer's accounting is wrong (tests/grpc/system_report_check.py): its counts cannot be trusted"

say "preflight: does ${FIRESTORE_EMULATOR_HOST} answer gRPC?"
"${VENV}/bin/python" scripts/firestore_system_tests.py preflight "${FIRESTORE_EMULATOR_HOST}" "${GCLOUD_PROJECT}" ||
  die "the oracle needs a Firestore gRPC server at FIRESTORE_EMULATOR_HOST=${FIRESTORE_EMULATOR_HOST}"

# run_suite REPORT [PYTEST ARGS...]: the tests, one JSON line per phase into REPORT; sets
# `status` to pytest's exit status.
run_suite() {
  local report="$1"
  shift
  rm -f "${report}"
  set +e
  (
    cd "${WORK}"
    FIRESTORE_SYSTEM_REPORT="${report}" PYTHONPATH="${PLUGIN_DIR}" \
      timeout --kill-after=30 "${FIRESTORE_SYSTEM_RUN_TIMEOUT:-3600}" \
      "${VENV}/bin/python" -m pytest -p system_plugin -p no:cacheprovider -q -rN --tb=line \
      --timeout="${FIRESTORE_SYSTEM_TEST_TIMEOUT:-120}" "$@"
  )
  status=$?
  set -e
}

say "python-firestore ${VERSION} system tests against ${FIRESTORE_EMULATOR_HOST} (project ${GCLOUD_PROJECT})"
REPORT="${WORK}/report.jsonl"
run_suite "${REPORT}" tests/system/test_system.py tests/system/test_system_async.py "$@"
# pytest: 0 all passed, 1 some failed; anything else (interrupted, internal error, no test
# collected, the run's timeout) fails the run whatever the report says.
pytest_finished() {
  case "${status}" in
    0 | 1) ;;
    *) die "pytest ended with status ${status} (124: the run exceeded FIRESTORE_SYSTEM_RUN_TIMEOUT)" ;;
  esac
}

if [ "${BASELINE}" = 1 ]; then
  pytest_finished
  # The failed tests once more, alone: a test that passes then is flaky, not a failure.
  RERUN="${WORK}/rerun.jsonl"
  mapfile -t failed < <("${VENV}/bin/python" scripts/firestore_system_tests.py failed "${REPORT}")
  rm -f "${RERUN}"
  if [ "${#failed[@]}" -gt 0 ]; then
    say "the ${#failed[@]} failed tests once more"
    run_suite "${RERUN}" "${failed[@]}"
  fi
  OUT="${ROOT}/tests/grpc/emulator-baseline.txt"
  "${VENV}/bin/python" scripts/firestore_system_tests.py baseline "${REPORT}" "${RERUN}" "${OUT}" \
    "Cloud Firestore emulator ${EMULATOR_VERSION} (${EMULATOR_SOURCE}), ${JAVA_VERSION}" \
    "python-firestore ${VERSION} system tests (tests/grpc/system-requirements.txt)" \
    "scripts/firestore_system_tests.sh --baseline${*:+ $*}"
  say "wrote ${OUT#"${ROOT}/"}"
  exit 0
fi

"${VENV}/bin/python" scripts/firestore_system_tests.py report "${REPORT}" "${ALLOWED}" || exit 1
pytest_finished
