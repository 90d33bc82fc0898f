"""Transactions without I/O (python-firestore's ``base_transaction``).

A transaction here is optimistic, as docs/http.md ("Optimistic transactions") describes: reads
record each document's ``updateTime`` (or that it was missing); ``commit`` sends the writes with
those times as preconditions, plus a ``{"verify": path, "precondition": ...}`` entry for every
document read but not written, in one ``:commit`` with ``"transaction": true``. If another
writer changed, created or deleted any of those documents in between, the commit is ABORTED and
``@transactional`` runs the function again (up to ``max_attempts``, with backoff).

Reads are separate requests, so the verify entries are also what makes the reads of several
documents one consistent view; a read-only transaction (``read_only=True``: writes raise
ValueError) therefore commits its verify entries too, and is retried like the others. A
transaction that read one document and writes nothing sends no commit.
"""

from __future__ import annotations

import random
from typing import Any

from docstore._types import format_timestamp
from docstore.base_batch import BaseWriteBatch
from docstore.base_document import DocumentSnapshot

MAX_ATTEMPTS = 5
INITIAL_BACKOFF = 0.05
MAX_BACKOFF = 2.0

READ_AFTER_WRITE_ERROR = "Attempted read after write in a transaction."
WRITE_READ_ONLY = "Cannot perform write operation in read-only transaction."
EXCEED_ATTEMPTS_TEMPLATE = "Failed to commit transaction in {:d} attempts."
_VERBS = ("create", "set", "update", "delete", "verify")


def backoff(attempt: int) -> float:
    """The jittered sleep before retry number ``attempt`` (1 for the first retry)."""
    return random.uniform(0, min(INITIAL_BACKOFF * 2 ** (attempt - 1), MAX_BACKOFF))


def _path_of(entry: dict[str, Any]) -> str:
    for verb in _VERBS:
        if verb in entry:
            return entry[verb]
    raise ValueError(f"not a write: {entry!r}")


class BaseTransaction(BaseWriteBatch):
    """Reads that record versions, then writes committed atomically (python-firestore's
    ``Transaction``): made by ``client.transaction(max_attempts=5, read_only=False)``."""

    def __init__(self, client: Any, max_attempts: int = MAX_ATTEMPTS, read_only: bool = False):
        super().__init__(client)
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._max_attempts = max_attempts
        self._read_only = read_only
        # path -> the updateTime text read, or None when the document was missing.
        self._read_versions: dict[str, str | None] = {}
        self._in_progress = False

    @property
    def in_progress(self) -> bool:
        """Whether the transaction has begun and not yet committed or rolled back."""
        return self._in_progress

    def _begin(self) -> None:
        self._writes = []
        self._read_versions = {}
        self._in_progress = True

    def _clean_up(self) -> None:
        self._writes = []
        self._read_versions = {}
        self._in_progress = False

    def _add_write(self, entries: list[dict[str, Any]]) -> None:
        if self._read_only:
            raise ValueError(WRITE_READ_ONLY)
        super()._add_write(entries)

    def _check_read(self) -> None:
        if self._writes:
            raise ValueError(READ_AFTER_WRITE_ERROR)

    def _record(self, snapshot: DocumentSnapshot) -> DocumentSnapshot:
        """Note the version of a document read in the transaction (the first read wins: a
        later read that sees another version makes the commit abort anyway)."""
        path = snapshot.reference.path
        if path not in self._read_versions:
            update_time = snapshot.update_time
            if snapshot.exists and update_time is None:
                raise ValueError(f"the read of {path!r} carries no updateTime")
            self._read_versions[path] = (
                format_timestamp(update_time) if snapshot.exists else None  # type: ignore[arg-type]
            )
        return snapshot

    def _record_query(self, snapshots: Any) -> Any:
        """Record the documents a query read in the transaction; returns them (ValueError
        after a write, like every read)."""
        self._check_read()
        for snapshot in snapshots:
            self._record(snapshot)
        return snapshots

    def _commit_writes(self) -> tuple[list[dict[str, Any]], list[bool]]:
        """The commit's entries (the writes, each written document that was read guarded by
        its version, then a verify entry per document read but not written), and for each
        whether it is the last entry of a user's write."""
        writes, visible = self._entries()
        entries: list[dict[str, Any]] = []
        is_write: list[bool] = []
        guarded: set[str] = set()
        for entry, shown in zip(writes, visible, strict=True):
            path = _path_of(entry)
            if path in self._read_versions and path not in guarded:
                guarded.add(path)
                precondition = _precondition_of(self._read_versions[path])
                if "precondition" in entry:
                    entries.append({"verify": path, "precondition": precondition})
                    is_write.append(False)
                else:
                    entry = {**entry, "precondition": precondition}
            entries.append(entry)
            is_write.append(shown)
        for path, version in self._read_versions.items():
            if path not in guarded:
                entries.append({"verify": path, "precondition": _precondition_of(version)})
                is_write.append(False)
        return entries, is_write

    def _has_work(self) -> bool:
        """Whether the commit has anything to do: writes, or reads of two or more documents
        whose consistency the verify entries check (one read alone is consistent)."""
        return bool(self._writes) or len(self._read_versions) > 1


def _precondition_of(version: str | None) -> dict[str, Any]:
    if version is None:
        return {"exists": False}
    return {"updateTime": version}
