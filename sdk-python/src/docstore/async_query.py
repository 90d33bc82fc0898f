"""The asynchronous Query (filled by the query work)."""

from __future__ import annotations

from docstore.base_query import BaseQuery


class AsyncQuery(BaseQuery):
    """A query run through an ``AsyncClient``."""


class AsyncCollectionGroup(AsyncQuery):
    """All collections with one id, anywhere in the database (``client.collection_group``)."""
