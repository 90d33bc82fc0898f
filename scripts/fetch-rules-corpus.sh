#!/usr/bin/env bash
# Fetch the corpus of public firestore.rules files listed in rules-compiler/corpus/SOURCES.md
# into rules-compiler/corpus/files/ (ignored by git: the files belong to their authors and are
# not redistributed here). Each file is read at its pinned commit and must match its pinned
# SHA-256 prefix; a mismatch is an error and the file is not kept.
#
# Usage: [RULES_CORPUS_MIRRORS=DIR] scripts/fetch-rules-corpus.sh
#   DIR holds git clones of the repositories SOURCES.md names, each named `<owner>+<name>`
#   (a bare repository, or a clone with its git directory at `<owner>+<name>/repo`); a file
#   is read from there, offline, at its pinned commit. A repository not found there is cloned
#   from GitHub (blobs on demand) into .docstore/rules-corpus/, which later runs reuse.
# It fetches every file it can: a file it cannot reach (no mirror and no clone from GitHub, or
# the blob not readable from the clone) is named in rules-compiler/corpus/not-fetched.tsv
# (`FILE<TAB>reason`), where the corpus tests read it and report that file as skipped (an
# allowed skip in tests/allowed-skips.txt); a file whose content does not match its pinned hash
# is not recorded there, so the tests fail on it as missing.
# Exit status 0 when every file of the table was fetched, 1 otherwise (each miss is named).
# Then: cargo test -p docstore-rules --test corpus -- --nocapture
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SOURCES="${ROOT}/rules-compiler/corpus/SOURCES.md"
DEST="${ROOT}/rules-compiler/corpus/files"
NOT_FETCHED="${ROOT}/rules-compiler/corpus/not-fetched.tsv"
mkdir -p "${DEST}"
: >"${NOT_FETCHED}"

strip() { # `x` -> x
  local s="${1#"${1%%[![:space:]]*}"}"
  s="${s%"${s##*[![:space:]]}"}"
  s="${s#\`}"
  printf '%s' "${s%\`}"
}

CLONES="${ROOT}/.docstore/rules-corpus"

# The git directory holding `repo` (owner/name): a mirror, an earlier clone, or a new clone.
gitdir_of() {
  local repo="$1" base
  for base in ${RULES_CORPUS_MIRRORS:+"${RULES_CORPUS_MIRRORS}/${repo/\//+}"} "${CLONES}/${repo/\//+}"; do
    for dir in "${base}/repo" "${base}"; do
      if git --git-dir="${dir}" rev-parse --git-dir >/dev/null 2>&1; then
        printf '%s' "${dir}"
        return 0
      fi
    done
  done
  mkdir -p "${CLONES}"
  GIT_TERMINAL_PROMPT=0 timeout 300 git clone --quiet --bare --filter=blob:none \
    "https://github.com/${repo}.git" "${CLONES}/${repo/\//+}" >/dev/null 2>&1 || {
    rm -rf "${CLONES:?}/${repo/\//+}"
    return 1
  }
  printf '%s' "${CLONES}/${repo/\//+}"
}

fetched=0
failed=0
# Table rows: | `file` | owner/name | `path` | `commit` | licence | `sha256` | expected |
while IFS='|' read -r _ file repo path commit _licence sha _expected _; do
  file="$(strip "${file}")"
  repo="$(strip "${repo}")"
  path="$(strip "${path}")"
  commit="$(strip "${commit}")"
  sha="$(strip "${sha}")"
  [[ "${commit}" =~ ^[0-9a-f]{40}$ ]] || continue
  if [ -f "${DEST}/${file}" ] && [ "$(sha256sum "${DEST}/${file}" | cut -c1-16)" = "${sha}" ]; then
    fetched=$((fetched + 1))
    continue
  fi
  rm -f "${DEST}/${file}"
  tmp="$(mktemp)"
  reason=
  if ! gitdir="$(gitdir_of "${repo}")"; then
    reason="${repo} unreachable: not in RULES_CORPUS_MIRRORS and not cloned from GitHub"
  elif ! git --git-dir="${gitdir}" show "${commit}:${path}" >"${tmp}" 2>/dev/null; then
    reason="${path} at ${commit} not readable from the clone of ${repo} (blobs come from GitHub on demand)"
  fi
  if [ -z "${reason}" ] && [ "$(sha256sum "${tmp}" | cut -c1-16)" = "${sha}" ]; then
    mv "${tmp}" "${DEST}/${file}"
    fetched=$((fetched + 1))
  else
    rm -f "${tmp}"
    if [ -n "${reason}" ]; then
      printf '%s\t%s\n' "${file}" "${reason}" >>"${NOT_FETCHED}"
      echo "not fetched: ${file}: ${reason}" >&2
    else
      echo "not fetched: ${file}: ${repo} ${path} at ${commit} does not have the pinned hash ${sha}" >&2
    fi
    failed=$((failed + 1))
  fi
done <"${SOURCES}"

echo "rules corpus: ${fetched} fetched into ${DEST}, ${failed} failed"
[ "${failed}" = 0 ]
