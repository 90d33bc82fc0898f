#!/usr/bin/env bash
# The Python virtual environment of the end-to-end tests and the Python lint: .venv/ from the
# pinned tests/requirements.txt, plus the Python SDK (sdk-python/, package `docstore`) installed
# editable. Run by `make up`. Idempotent: installs again only when requirements.txt or
# sdk-python/pyproject.toml changed (their hashes are kept in .venv/requirements.sha256 and
# .venv/sdk-python.sha256) or the venv broke.
source "$(dirname "$0")/lib.sh"

VENV="${ROOT}/.venv"
REQUIREMENTS="${ROOT}/tests/requirements.txt"
STAMP="${VENV}/requirements.sha256"

# python3 with the venv module and pip's bootstrap (Debian splits them into python3-venv).
if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  say "installing Debian packages: python3 python3-venv"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
fi

# A venv whose interpreter went away (python3 upgraded or removed) is made again.
if [ -d "${VENV}" ] && ! "${VENV}/bin/python" -c pass 2>/dev/null; then
  say "the Python venv in ${VENV} is broken: making it again"
  rm -rf "${VENV}"
fi
if [ ! -x "${VENV}/bin/python" ]; then
  say "creating the Python venv in ${VENV}"
  python3 -m venv "${VENV}"
fi

want="$(fingerprint "${REQUIREMENTS}")"
if [ "$(cat "${STAMP}" 2>/dev/null || true)" != "${want}" ]; then
  say "installing the test requirements into ${VENV} (tests/requirements.txt)"
  "${VENV}/bin/python" -m pip install --quiet --disable-pip-version-check -r "${REQUIREMENTS}"
  echo "${want}" > "${STAMP}"
fi

SDK_PROJECT="${ROOT}/sdk-python/pyproject.toml"
SDK_STAMP="${VENV}/sdk-python.sha256"
want="$(fingerprint "${SDK_PROJECT}")"
if [ "$(cat "${SDK_STAMP}" 2>/dev/null || true)" != "${want}" ] \
  || ! "${VENV}/bin/python" -c 'import docstore' 2>/dev/null; then
  say "installing the Python SDK into ${VENV} (pip install -e sdk-python)"
  "${VENV}/bin/python" -m pip install --quiet --disable-pip-version-check -e "${ROOT}/sdk-python"
  echo "${want}" > "${SDK_STAMP}"
fi
