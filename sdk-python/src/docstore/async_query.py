"""The asynchronous Query: ``stream()`` (an async iterator) and ``get()`` over ``:runQuery``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from docstore import async_watch
from docstore.async_aggregation import AsyncAggregationQuery
from docstore.base_document import DocumentSnapshot
from docstore.base_query import BaseQuery


class AsyncQuery(BaseQuery):
    """A query run through an ``AsyncClient``."""

    def _aggregation_query(self) -> AsyncAggregationQuery:
        return AsyncAggregationQuery(self)

    def aggregate(self, *aggregations: Any) -> AsyncAggregationQuery:
        """An aggregation query of ``aggregations`` (CountAggregation, SumAggregation,
        AvgAggregation objects)."""
        query = AsyncAggregationQuery(self)
        query.add_aggregations(list(aggregations))
        return query

    def _rows(self) -> AsyncIterator[Any]:
        client = self._client
        return client._transport.stream_json_array(
            "POST", client._database_route(":runQuery"), json=self._run_query_body()
        )

    async def stream(self, transaction: Any = None) -> AsyncIterator[DocumentSnapshot]:
        """The results, as they arrive (``async for``); ValueError for ``limit_to_last``
        queries (use ``get()``)."""
        if self._limit_to_last:
            raise ValueError(
                "queries with limit_to_last() cannot be streamed: use AsyncQuery.get() instead"
            )
        if transaction is not None:
            transaction._check_read()
        async for row in self._rows():
            snapshot = self._client._snapshot(None, row)
            if transaction is not None:
                transaction._record_query([snapshot])
            yield snapshot

    async def get(self, transaction: Any = None) -> list[DocumentSnapshot]:
        """The results as a list (``limit_to_last`` queries included, in the query's order)."""
        if transaction is not None:
            transaction._check_read()
        snapshots = self._snapshots_of([row async for row in self._rows()])
        if transaction is not None:
            transaction._record_query(snapshots)
        return snapshots

    def listen(self) -> AsyncIterator[Any]:
        """Listen to the query: ``async for snapshot in query.listen()`` yields a QuerySnapshot
        now and after each change (docstore.async_watch)."""
        return async_watch.query_listen(self)


AsyncQuery._query_class = AsyncQuery


class AsyncCollectionGroup(AsyncQuery):
    """All collections with one id, anywhere in the database (``client.collection_group``)."""
