"""AsyncCollectionReference of the AsyncClient (python-firestore's ``async_collection``)."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import Any

from docstore import _values
from docstore._types import parse_optional_timestamp
from docstore.async_query import AsyncQuery
from docstore.base_collection import BaseCollectionReference


class AsyncCollectionReference(BaseCollectionReference, AsyncQuery):
    """A collection (and the query over all of its documents), for the AsyncClient."""

    async def add(
        self, document_data: dict[str, Any], document_id: str | None = None
    ) -> tuple[datetime.datetime | None, Any]:
        """Create a document (with a server-chosen random ID unless ``document_id``);
        returns ``(update_time, document_reference)``."""
        if document_id is not None:
            ref = self.document(document_id)
            return (await ref.create(document_data)).update_time, ref
        doc = await self._client._transport.request(
            "POST",
            self._client._path_route(self.path),
            json=_values.encode_data(document_data, allow_delete=False),
            idempotent=False,
        )
        return parse_optional_timestamp(doc.get("updateTime")), self._client.document(doc["path"])

    async def list_documents(self, page_size: int | None = None) -> AsyncIterator[Any]:
        """AsyncDocumentReferences of the collection's documents, in ID order."""
        async for doc in self._client._transport.stream_json_array(
            "GET", self._client._path_route(self.path)
        ):
            yield self._client.document(doc["path"])
