"""The AsyncClient (python-firestore's ``async_client.AsyncClient``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpx

from docstore._http import AsyncTransport
from docstore.async_batch import AsyncWriteBatch
from docstore.async_collection import AsyncCollectionReference
from docstore.async_document import AsyncDocumentReference
from docstore.async_query import AsyncCollectionGroup
from docstore.async_transaction import AsyncTransaction
from docstore.base_client import BaseClient
from docstore.base_document import DocumentSnapshot
from docstore.bulk_writer import BulkWriter, BulkWriterOptions
from docstore.sql import AsyncSqlQuery

MAX_BATCH_GET = 1000


class AsyncClient(BaseClient):
    """The asyncio client: the same arguments as ``Client`` (``http_client`` is an
    ``httpx.AsyncClient``; ``token`` may also be an async callable)."""

    _document_class = AsyncDocumentReference
    _collection_class = AsyncCollectionReference

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | Callable[[], Any] | None = None,
        database: str = "(default)",
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(url, token=token, database=database)
        self._transport = AsyncTransport(self._url, self._token, http_client)

    async def close(self) -> None:
        """Close the HTTP connections the client opened."""
        await self._transport.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def sql(self, text: str) -> AsyncSqlQuery:
        """A query in the text dialect (docs/query.md): ``stream()``, ``get()``."""
        return AsyncSqlQuery(self, text)

    def collection_group(self, collection_id: str) -> AsyncCollectionGroup:
        """A query over every collection named ``collection_id``, at any depth."""
        if "/" in collection_id:
            raise ValueError(f"collection id {collection_id!r} must not contain '/'")
        return AsyncCollectionGroup(self.collection(collection_id), all_descendants=True)

    async def _commit(self, writes: list[dict[str, Any]], transaction: bool = False) -> Any:
        body: dict[str, Any] = {"writes": writes}
        if transaction:
            body["transaction"] = True
        return await self._transport.request(
            "POST", self._database_route(":commit"), json=body, idempotent=False
        )

    async def _batch_get(self, paths: list[str]) -> Any:
        """``:batchGet`` of up to 1000 paths: ``{"readTime", "documents"}``."""
        return await self._transport.request(
            "POST", self._database_route(":batchGet"), json={"documents": paths}, idempotent=True
        )

    async def get_all(
        self,
        references: Iterable[AsyncDocumentReference],
        field_paths: Any = None,
        transaction: Any = None,
        **_: Any,
    ) -> AsyncIterator[DocumentSnapshot]:
        """Snapshots of several documents (missing ones with ``exists`` False), in the order
        given; each group of up to 1000 is read at one snapshot."""
        refs = list(references)
        if transaction is not None:
            for snap in await transaction._get_all(refs, field_paths):
                yield snap
            return
        for start in range(0, len(refs), MAX_BATCH_GET):
            chunk = refs[start : start + MAX_BATCH_GET]
            answer = await self._batch_get([r.path for r in chunk])
            for snap in self._batch_get_snapshots(chunk, answer, field_paths):
                yield snap

    async def _collections_under(self, parent: str) -> AsyncIterator[AsyncCollectionReference]:
        answer = await self._transport.request(
            "POST",
            self._database_route(":listCollectionIds"),
            json={"parent": parent},
            idempotent=True,
        )
        prefix = (parent,) if parent else ()
        for collection_id in answer.get("collectionIds") or []:
            yield self.collection(*prefix, collection_id)

    async def explain(self, query: Any, *, run: bool = False) -> dict[str, Any]:
        """As ``Client.explain``: the plan of ``query`` as a dict (docs/query.md, section 7);
        with ``run``, also what running it read. Admin key only."""
        return await self._transport.request(
            "POST",
            self._database_route(":explain"),
            json=self._explain_body(query, run),
            idempotent=True,
        )

    def collections(self) -> AsyncIterator[AsyncCollectionReference]:
        """The root collections holding at least one document (admin key only)."""
        return self._collections_under("")

    def batch(self) -> AsyncWriteBatch:
        """An AsyncWriteBatch: writes applied atomically by ``await commit()``."""
        return AsyncWriteBatch(self)

    def transaction(self, max_attempts: int = 5, read_only: bool = False) -> AsyncTransaction:
        """An AsyncTransaction; run a function in it with ``@docstore.async_transactional``."""
        return AsyncTransaction(self, max_attempts=max_attempts, read_only=read_only)

    def _to_sync_copy(self) -> Any:
        from docstore.client import Client

        return Client(self._url, token=self._token, database=self._database)

    def bulk_writer(self, options: BulkWriterOptions | None = None) -> BulkWriter:
        """A BulkWriter (thread-based, over a synchronous copy of this client, as
        python-firestore's); close it when done."""
        return BulkWriter(self._to_sync_copy(), options, _owns_client=True)

    async def recursive_delete(
        self,
        reference: AsyncCollectionReference | AsyncDocumentReference,
        *,
        bulk_writer: BulkWriter | None = None,
        chunk_size: int = 5000,
    ) -> int:
        """Delete a document or a collection with every document below it (admin key);
        returns how many documents were deleted. Not atomic."""
        paths: list[str] = []
        count = await self._collect_deletes(reference, paths)
        writer = bulk_writer if bulk_writer is not None else self.bulk_writer()
        try:
            for path in paths:
                writer.delete(writer._client.document(path))
            await asyncio.to_thread(writer.flush)
        finally:
            if bulk_writer is None:
                await asyncio.to_thread(writer.close)
        return count

    async def _collect_deletes(
        self, reference: Any, paths: list[str], exists: bool | None = None
    ) -> int:
        if isinstance(reference, AsyncDocumentReference):
            count = 0
            async for sub in reference.collections():
                count += await self._collect_deletes(sub, paths)
            if exists if exists is not None else (await reference.get()).exists:
                count += 1
            paths.append(reference.path)
            return count
        if isinstance(reference, AsyncCollectionReference):
            count = 0
            docs = [d async for d in reference.list_documents()]
            for doc in docs:
                count += await self._collect_deletes(doc, paths, exists=True)
            return count
        raise TypeError("recursive_delete() takes a DocumentReference or a CollectionReference")
