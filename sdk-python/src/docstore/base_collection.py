"""Collection references without I/O (python-firestore's ``base_collection``).

A collection reference is a query over the whole collection (it subclasses the query classes,
with itself as the query's parent)."""

from __future__ import annotations

from typing import Any

from docstore.base_client import auto_id, collection_path_of
from docstore.base_query import BaseQuery


class BaseCollectionReference(BaseQuery):
    """A reference to a collection: ``client.collection("restaurants")``."""

    def __init__(self, *path: str, client: Any) -> None:
        self._path = collection_path_of(*path)
        self._client = client
        BaseQuery.__init__(self, self)

    @property
    def id(self) -> str:
        """The collection's ID (the last segment)."""
        return self._path[-1]

    @property
    def path(self) -> str:
        """The collection's path."""
        return "/".join(self._path)

    @property
    def parent(self) -> Any:
        """The document holding this collection, or None for a root collection."""
        if len(self._path) == 1:
            return None
        return self._client.document(*self._path[:-1])

    def document(self, document_id: str | None = None) -> Any:
        """A DocumentReference in this collection; a random 20-character ID when none given."""
        if document_id is None:
            document_id = auto_id()
        return self._client.document(*self._path, document_id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BaseCollectionReference):
            return NotImplemented
        return self._path == other._path and self._client is other._client

    def __hash__(self) -> int:
        return hash(self._path)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r}>"
