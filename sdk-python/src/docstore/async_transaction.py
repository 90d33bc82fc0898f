"""AsyncTransaction and ``@async_transactional`` (python-firestore's ``async_transaction``)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from docstore.base_document import DocumentSnapshot, project
from docstore.base_transaction import EXCEED_ATTEMPTS_TEMPLATE, BaseTransaction, backoff
from docstore.exceptions import Aborted


async def _aiter(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


class AsyncTransaction(BaseTransaction):
    """A transaction of an ``AsyncClient`` (see ``Transaction``); run it with
    ``@docstore.async_transactional``."""

    async def _get_document(self, reference: Any, field_paths: Any = None) -> DocumentSnapshot:
        self._check_read()
        snapshot = self._record(await reference.get())
        if field_paths is not None and snapshot.exists:
            snapshot._data = project(snapshot._data, field_paths)
        return snapshot

    async def _get_all(
        self, references: list[Any], field_paths: Any = None
    ) -> list[DocumentSnapshot]:
        self._check_read()
        snapshots = [s async for s in self._client.get_all(references, field_paths=field_paths)]
        for snapshot in snapshots:
            self._record(snapshot)
        return snapshots

    async def get_all(self, references: list[Any], **_: Any) -> AsyncIterator[DocumentSnapshot]:
        """Read several documents in the transaction (one snapshot)."""
        return _aiter(await self._get_all(list(references)))

    async def get(self, ref_or_query: Any, **_: Any) -> AsyncIterator[DocumentSnapshot]:
        """Read a document (an async generator of its one snapshot) or run a query in the
        transaction (its documents' versions are checked at commit)."""
        if getattr(type(ref_or_query), "_docstore_reference", False):
            return _aiter([await self._get_document(ref_or_query)])
        self._check_read()
        snapshots = [s async for s in ref_or_query.stream()]
        return _aiter(self._record_query(snapshots))

    async def _commit(self) -> list[Any]:
        """Send the writes and verify entries; Aborted when a read document changed."""
        if not self._in_progress:
            raise ValueError("The transaction is not in progress, so it cannot be committed.")
        try:
            if not self._has_work():
                self.write_results = []
                return []
            entries, is_write = self._commit_writes()
            answer = await self._client._commit(entries, transaction=True)
            return self._results(answer, is_write)
        finally:
            self._clean_up()

    async def _rollback(self) -> None:
        """Drop the writes (nothing was sent)."""
        self._clean_up()


class _AsyncTransactional:
    """What ``@async_transactional`` returns (see ``_Transactional``)."""

    def __init__(self, to_wrap: Callable[..., Coroutine[Any, Any, Any]]) -> None:
        self.to_wrap = to_wrap
        functools.update_wrapper(self, to_wrap)

    async def __call__(self, transaction: AsyncTransaction, *args: Any, **kwargs: Any) -> Any:
        last: Aborted | None = None
        for attempt in range(transaction._max_attempts):
            if attempt:
                await asyncio.sleep(backoff(attempt))
            transaction._begin()
            try:
                result = await self.to_wrap(transaction, *args, **kwargs)
            except BaseException:
                await transaction._rollback()
                raise
            try:
                await transaction._commit()
                return result
            except Aborted as exc:
                last = exc
        raise ValueError(EXCEED_ATTEMPTS_TEMPLATE.format(transaction._max_attempts)) from last


def async_transactional(
    to_wrap: Callable[..., Coroutine[Any, Any, Any]],
) -> _AsyncTransactional:
    """Decorate ``async def fn(transaction, *args)`` to run in an AsyncTransaction with
    retries on ABORTED (python-firestore's ``async_transactional``)."""
    return _AsyncTransactional(to_wrap)
