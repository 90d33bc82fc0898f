"""CollectionReference of the synchronous Client (python-firestore's ``collection``)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

from docstore import _values
from docstore._types import parse_optional_timestamp
from docstore.base_collection import BaseCollectionReference
from docstore.query import Query


class CollectionReference(BaseCollectionReference, Query):
    """A collection (and the query over all of its documents)."""

    def add(
        self, document_data: dict[str, Any], document_id: str | None = None
    ) -> tuple[datetime.datetime | None, Any]:
        """Create a document (with a server-chosen random ID unless ``document_id``);
        returns ``(update_time, document_reference)``."""
        if document_id is not None:
            ref = self.document(document_id)
            return ref.create(document_data).update_time, ref
        doc = self._client._transport.request(
            "POST",
            self._client._path_route(self.path),
            json=_values.encode_data(document_data, allow_delete=False),
            idempotent=False,
        )
        return parse_optional_timestamp(doc.get("updateTime")), self._client.document(doc["path"])

    def list_documents(self, page_size: int | None = None) -> Iterator[Any]:
        """DocumentReferences of the collection's documents, in ID order (``page_size`` is
        accepted for python-firestore's signature; every document is listed)."""
        for doc in self._client._transport.stream_json_array(
            "GET", self._client._path_route(self.path)
        ):
            yield self._client.document(doc["path"])
