"""The asynchronous AggregationQuery."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from docstore import async_watch
from docstore.base_aggregation import AggregationResult, BaseAggregationQuery


class AsyncAggregationQuery(BaseAggregationQuery):
    """Aggregates of a query, run through an ``AsyncClient``."""

    async def stream(self, transaction: Any = None) -> AsyncIterator[list[AggregationResult]]:
        """Yields one list of AggregationResult (one per aggregate)."""
        if transaction is not None:
            transaction._check_read()
        client = self._client
        async for row in client._transport.stream_json_array(
            "POST", client._database_route(":runQuery"), json=self._run_query_body()
        ):
            yield self._results_of(row)

    async def get(self, transaction: Any = None) -> list[list[AggregationResult]]:
        """``[[AggregationResult, ...]]``, as python-firestore returns."""
        return [results async for results in self.stream(transaction=transaction)]

    def listen(self) -> AsyncIterator[list[list[AggregationResult]]]:
        """Listen to the aggregation: yields ``get()``'s shape now and after each change."""
        return async_watch.aggregation_listen(self)
