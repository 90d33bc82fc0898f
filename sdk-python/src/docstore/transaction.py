"""Transaction and ``@transactional`` of the synchronous Client (python-firestore's
``transaction``)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

from docstore.base_document import DocumentSnapshot, project
from docstore.base_transaction import (
    EXCEED_ATTEMPTS_TEMPLATE,
    MAX_ATTEMPTS,
    BaseTransaction,
    backoff,
)
from docstore.exceptions import Aborted


class Transaction(BaseTransaction):
    """A transaction of a synchronous ``Client``: reads (``get``, ``get_all``,
    ``ref.get(transaction=...)``) before writes (``create``, ``set``, ``update``, ``delete``);
    run it with ``@docstore.transactional``."""

    def _get_document(self, reference: Any, field_paths: Any = None) -> DocumentSnapshot:
        self._check_read()
        snapshot = self._record(reference.get())
        if field_paths is not None and snapshot.exists:
            snapshot._data = project(snapshot._data, field_paths)
        return snapshot

    def _get_all(self, references: list[Any], field_paths: Any = None) -> list[DocumentSnapshot]:
        self._check_read()
        snapshots = list(self._client.get_all(references, field_paths=field_paths))
        for snapshot in snapshots:
            self._record(snapshot)
        return snapshots

    def get_all(self, references: list[Any], **_: Any) -> Iterator[DocumentSnapshot]:
        """Read several documents in the transaction (one snapshot)."""
        return iter(self._get_all(list(references)))

    def get(self, ref_or_query: Any, **_: Any) -> Iterator[DocumentSnapshot]:
        """Read a document (a generator of its one snapshot, as python-firestore's) or run a
        query in the transaction (its documents' versions are checked at commit)."""
        if getattr(type(ref_or_query), "_docstore_reference", False):
            return iter([self._get_document(ref_or_query)])
        self._check_read()
        return iter(self._record_query(list(ref_or_query.stream())))

    def _commit(self) -> list[Any]:
        """Send the writes and verify entries; Aborted when a read document changed."""
        if not self._in_progress:
            raise ValueError("The transaction is not in progress, so it cannot be committed.")
        try:
            if not self._has_work():
                self.write_results = []
                return []
            entries, is_write = self._commit_writes()
            answer = self._client._commit(entries, transaction=True)
            return self._results(answer, is_write)
        finally:
            self._clean_up()

    def _rollback(self) -> None:
        """Drop the writes (nothing was sent: the server holds no transaction state)."""
        self._clean_up()


class _Transactional:
    """What ``@transactional`` returns: calls the function with a fresh attempt of the
    transaction until its commit is not ABORTED (at most ``max_attempts`` times)."""

    def __init__(self, to_wrap: Callable[..., Any]) -> None:
        self.to_wrap = to_wrap
        functools.update_wrapper(self, to_wrap)

    def __call__(self, transaction: Transaction, *args: Any, **kwargs: Any) -> Any:
        last: Aborted | None = None
        for attempt in range(transaction._max_attempts):
            if attempt:
                time.sleep(backoff(attempt))
            transaction._begin()
            try:
                result = self.to_wrap(transaction, *args, **kwargs)
            except BaseException:
                transaction._rollback()
                raise
            try:
                transaction._commit()
                return result
            except Aborted as exc:
                last = exc
        raise ValueError(EXCEED_ATTEMPTS_TEMPLATE.format(transaction._max_attempts)) from last


def transactional(to_wrap: Callable[..., Any]) -> _Transactional:
    """Decorate ``fn(transaction, *args)`` so that calling it with ``client.transaction()``
    runs it in the transaction and retries it on ABORTED (python-firestore's ``transactional``).
    After ``max_attempts`` aborted commits: ValueError from the last Aborted."""
    return _Transactional(to_wrap)


__all__ = ["MAX_ATTEMPTS", "Transaction", "transactional"]
