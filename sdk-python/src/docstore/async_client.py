"""The AsyncClient (python-firestore's ``async_client.AsyncClient``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpx

from docstore._http import AsyncTransport
from docstore.async_batch import AsyncWriteBatch
from docstore.async_collection import AsyncCollectionReference
from docstore.async_document import AsyncDocumentReference
from docstore.async_query import AsyncCollectionGroup
from docstore.base_client import BaseClient
from docstore.base_document import DocumentSnapshot

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

    def collections(self) -> AsyncIterator[AsyncCollectionReference]:
        """The root collections holding at least one document (admin key only)."""
        return self._collections_under("")

    def batch(self) -> AsyncWriteBatch:
        """An AsyncWriteBatch: writes applied atomically by ``await commit()``."""
        return AsyncWriteBatch(self)
