"""The synchronous Query (filled by the query work)."""

from __future__ import annotations

from docstore.base_query import BaseQuery


class Query(BaseQuery):
    """A query run through a synchronous ``Client``."""


class CollectionGroup(Query):
    """All collections with one id, anywhere in the database (``client.collection_group``)."""
