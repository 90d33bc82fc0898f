#!/usr/bin/env bash
# A second SDK against the Firestore gRPC front end: @google-cloud/firestore (Node), pinned in
# tests/grpc/node/package-lock.json, doing CRUD, a query, an onSnapshot listener and runTransaction
# (tests/grpc/node/firestore.test.mjs, node:test) against FIRESTORE_EMULATOR_HOST.
# Usage: FIRESTORE_EMULATOR_HOST=HOST:PORT scripts/node_sdk_tests.sh
#   (default HOST:PORT: the FIRESTORE_EMULATOR_HOST line of .docstore/dev.env, which `make up`
#   writes). Needs Node 20 or newer and npm; `npm ci` installs the package into
#   tests/grpc/node/node_modules (git-ignored) again whenever package-lock.json changed.
# Bounded: the tests give up on a server that has not answered within 10 s, each test within
# 30 s (--test-timeout), the whole run within 300 s. Closes with `node: N passed, N failed,
# N skipped` (cancelled tests count as failed).
source "$(dirname "$0")/lib.sh"
cd "${ROOT}"

DIR="${ROOT}/tests/grpc/node"
TAP="${ROOT}/target/node-sdk.tap"

if [ -z "${FIRESTORE_EMULATOR_HOST:-}" ] && [ -f .docstore/dev.env ]; then
  FIRESTORE_EMULATOR_HOST="$(sed -n 's/^FIRESTORE_EMULATOR_HOST=//p' .docstore/dev.env)"
fi
[ -n "${FIRESTORE_EMULATOR_HOST:-}" ] ||
  die "set FIRESTORE_EMULATOR_HOST=HOST:PORT (or run 'make up', which writes it into .docstore/dev.env)"
export FIRESTORE_EMULATOR_HOST GCLOUD_PROJECT="${GCLOUD_PROJECT:-demo-docstore}"

command -v node >/dev/null && command -v npm >/dev/null || die "the node layer needs Node 20 or newer and npm"
major="$(node -p 'process.versions.node.split(".")[0]')"
[ "${major}" -ge 20 ] || die "the node layer needs Node 20 or newer (found $(node --version))"

want="$(fingerprint "${DIR}/package-lock.json")"
if [ "$(cat "${DIR}/node_modules/.package-lock.sha256" 2>/dev/null || true)" != "${want}" ]; then
  say "installing @google-cloud/firestore (npm ci, tests/grpc/node/package-lock.json)"
  (cd "${DIR}" && npm ci --no-audit --no-fund --loglevel=error)
  echo "${want}" > "${DIR}/node_modules/.package-lock.sha256"
fi

say "@google-cloud/firestore $(node -p "require('${DIR}/node_modules/@google-cloud/firestore/package.json').version") against ${FIRESTORE_EMULATOR_HOST}"
mkdir -p "$(dirname "${TAP}")"
set +e
(
  cd "${DIR}"
  timeout --kill-after=10 300 node --test --test-reporter=tap --test-timeout=30000 \
    --test-force-exit firestore.test.mjs
) | tee "${TAP}"
status="${PIPESTATUS[0]}"
set -e

# node:test's TAP summary: `# pass N`, `# fail N`, `# cancelled N`, `# skipped N`, `# todo N`.
summary() { sed -nE "s/^# $1 ([0-9]+)$/\\1/p" "${TAP}" | tail -n 1; }
passed="$(summary pass)"
failed=$(($(summary fail || true) + $(summary cancelled || true) + 0))
skipped=$(($(summary skipped || true) + $(summary todo || true) + 0))
passed="${passed:-0}"
if [ "${status}" != 0 ] && [ "${failed}" = 0 ]; then failed=1; fi
echo "node: ${passed} passed, ${failed} failed, ${skipped} skipped"
[ "${failed}" = 0 ]
