"""The synchronous Query (python-firestore's ``query``): ``stream()`` and ``get()`` over
``:runQuery``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from docstore import watch
from docstore.aggregation import AggregationQuery
from docstore.base_document import DocumentSnapshot
from docstore.base_query import BaseQuery


class Query(BaseQuery):
    """A query run through a synchronous ``Client``."""

    def _aggregation_query(self) -> AggregationQuery:
        return AggregationQuery(self)

    def aggregate(self, *aggregations: Any) -> AggregationQuery:
        """An aggregation query of ``aggregations`` (CountAggregation, SumAggregation,
        AvgAggregation objects)."""
        query = AggregationQuery(self)
        query.add_aggregations(list(aggregations))
        return query

    def _rows(self) -> Iterator[Any]:
        client = self._client
        return client._transport.stream_json_array(
            "POST", client._database_route(":runQuery"), json=self._run_query_body()
        )

    def stream(self, transaction: Any = None) -> Iterator[DocumentSnapshot]:
        """The results, as they arrive. A ``limit_to_last`` query cannot be streamed
        (ValueError: use ``get()``), as in python-firestore. With ``transaction``, the
        documents are recorded as read by it."""
        if self._limit_to_last:
            raise ValueError(
                "queries with limit_to_last() cannot be streamed: use Query.get() instead"
            )
        if transaction is not None:
            transaction._check_read()
        for row in self._rows():
            snapshot = self._client._snapshot(None, row)
            if transaction is not None:
                transaction._record_query([snapshot])
            yield snapshot

    def get(self, transaction: Any = None) -> list[DocumentSnapshot]:
        """The results as a list (``limit_to_last`` queries included, in the query's order)."""
        if transaction is not None:
            transaction._check_read()
        snapshots = self._snapshots_of(list(self._rows()))
        if transaction is not None:
            transaction._record_query(snapshots)
        return snapshots

    def on_snapshot(self, callback: Any, on_error: Any = None) -> Any:
        """Listen to the query: ``callback(docs, changes, read_time)`` from a background
        thread (docstore.watch); returns a Watch (``unsubscribe()``)."""
        return watch.query_watch(self, callback, on_error)


Query._query_class = Query


class CollectionGroup(Query):
    """All collections with one id, anywhere in the database (``client.collection_group``)."""
