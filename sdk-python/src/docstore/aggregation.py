"""The synchronous AggregationQuery (python-firestore's ``aggregation``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from docstore import watch
from docstore.base_aggregation import AggregationResult, BaseAggregationQuery


class AggregationQuery(BaseAggregationQuery):
    """Aggregates of a query, run through a synchronous ``Client``."""

    def stream(self, transaction: Any = None) -> Iterator[list[AggregationResult]]:
        """Yields one list of AggregationResult (one per aggregate)."""
        if transaction is not None:
            transaction._check_read()
        client = self._client
        for row in client._transport.stream_json_array(
            "POST", client._database_route(":runQuery"), json=self._run_query_body()
        ):
            yield self._results_of(row)

    def get(self, transaction: Any = None) -> list[list[AggregationResult]]:
        """``[[AggregationResult, ...]]``, as python-firestore returns."""
        return list(self.stream(transaction=transaction))

    def on_snapshot(self, callback: Any, on_error: Any = None) -> Any:
        """Listen to the aggregation: ``callback(results, read_time)`` (``results`` shaped as
        ``get()``'s) from a background thread (docstore.watch); returns a Watch."""
        return watch.aggregation_watch(self, callback, on_error)
