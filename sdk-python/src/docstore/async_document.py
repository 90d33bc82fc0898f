"""AsyncDocumentReference of the AsyncClient (python-firestore's ``async_document``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from docstore import async_watch, base_batch
from docstore._types import WriteOption, WriteResult
from docstore.base_document import (
    BaseDocumentReference,
    DocumentSnapshot,
    is_missing_database,
    project,
)
from docstore.exceptions import NotFound


class AsyncDocumentReference(BaseDocumentReference):
    """A reference to a document, read and written through an ``AsyncClient``."""

    async def _write(self, entries: list[dict[str, Any]]) -> WriteResult:
        _, results = base_batch.write_results(await self._client._commit(entries))
        return results[-1]

    async def create(self, document_data: dict[str, Any]) -> WriteResult:
        """Create the document; AlreadyExists if it exists."""
        return await self._write([base_batch.create_entry(self.path, document_data)])

    async def set(self, document_data: dict[str, Any], merge: Any = False) -> WriteResult:
        """Replace the document (created when missing), or with ``merge=True`` merge into it;
        ``merge=[field paths]`` writes only those fields (others are kept)."""
        return await self._write(base_batch.set_entries(self.path, document_data, merge))

    async def update(
        self, field_updates: dict[str, Any], option: WriteOption | None = None
    ) -> WriteResult:
        """Update fields (keys are field paths; values may be transforms or DELETE_FIELD);
        NotFound when the document does not exist."""
        return await self._write([base_batch.update_entry(self.path, field_updates, option)])

    async def delete(self, option: WriteOption | None = None) -> Any:
        """Delete the document (no error when missing); returns the commit time."""
        answer = await self._client._commit([base_batch.delete_entry(self.path, option)])
        commit_time, _ = base_batch.write_results(answer)
        return commit_time

    async def get(
        self, field_paths: Any = None, transaction: Any = None, **_: Any
    ) -> DocumentSnapshot:
        """Read the document: a DocumentSnapshot (``exists`` False when missing).
        ``field_paths`` restricts the data; ``transaction`` reads inside it."""
        if transaction is not None:
            return await transaction._get_document(self, field_paths)
        try:
            doc = await self._client._transport.request(
                "GET", self._client._path_route(self.path), idempotent=True
            )
        except NotFound as error:
            if is_missing_database(error):
                raise
            return self._client._missing(self)
        snapshot = self._client._snapshot(self, doc, doc.get("readTime"))
        if field_paths is not None:
            snapshot._data = project(snapshot._data, field_paths)
        return snapshot

    async def collections(self, page_size: int | None = None) -> AsyncIterator[Any]:
        """The subcollections holding at least one document (admin key only)."""
        async for collection in self._client._collections_under(self.path):
            yield collection

    def listen(self) -> AsyncIterator[DocumentSnapshot]:
        """Listen to the document: ``async for snapshot in ref.listen()`` yields a
        DocumentSnapshot now and after each change (docstore.async_watch)."""
        return async_watch.document_listen(self)
