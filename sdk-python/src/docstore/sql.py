"""``client.sql(text)``: a query in the text dialect (docs/query.md), run by ``:runQuery``'s
``{"sql": text}``. Not in python-firestore.

``stream()``/``get()`` give DocumentSnapshots for a document query and, for an aggregation
query (``select count(*), avg(x) ...``), one list of AggregationResult named as the server
names them (aliases, else ``field_1``, ``field_2``, ...), in the order of the row's keys
(which is not the select list's: look results up by ``alias``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from docstore import async_watch, watch
from docstore.base_aggregation import results_of_row


class BaseSqlQuery:
    """A text-dialect query of one client (``client.sql(text)``)."""

    def __init__(self, client: Any, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"a query text is a str, got {type(text).__name__}")
        self._client = client
        self._text = text

    @property
    def text(self) -> str:
        """The query text."""
        return self._text

    def _route(self) -> str:
        return self._client._database_route(":runQuery")

    def _body(self) -> dict[str, Any]:
        return {"sql": self._text}

    def _run_query_body(self) -> dict[str, Any]:
        """The query as ``:runQuery`` and ``:explain`` take it."""
        return self._body()

    def _listen_target(self) -> dict[str, Any]:
        """The query's ``:listen`` target (docs/listen.md), for the listeners."""
        return self._body()

    def _listen_results(self, values: Any, read_time: Any) -> list[list[Any]]:
        """What ``get()`` returns for an aggregation query, made of a live row."""
        results = results_of_row({"aggregation": values}, self._client, None)
        for result in results:
            result.read_time = read_time
        return [results]

    def _item(self, row: Any) -> Any:
        if isinstance(row, dict) and "aggregation" in row:
            return results_of_row(row, self._client, None)
        return self._client._snapshot(None, row)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._text!r}>"


class SqlQuery(BaseSqlQuery):
    """A text-dialect query run through a synchronous ``Client``."""

    def stream(self) -> Iterator[Any]:
        """The results, as they arrive."""
        for row in self._client._transport.stream_json_array(
            "POST", self._route(), json=self._body()
        ):
            yield self._item(row)

    def get(self) -> list[Any]:
        """The results as a list."""
        return list(self.stream())

    def on_snapshot(self, callback: Any, on_error: Any = None) -> Any:
        """Listen to the query: as ``Query.on_snapshot`` for a document query, as
        ``AggregationQuery.on_snapshot`` for an aggregation (docstore.watch)."""
        return watch.sql_watch(self, callback, on_error)


class AsyncSqlQuery(BaseSqlQuery):
    """A text-dialect query run through an ``AsyncClient``."""

    async def stream(self) -> AsyncIterator[Any]:
        """The results, as they arrive (``async for``)."""
        async for row in self._client._transport.stream_json_array(
            "POST", self._route(), json=self._body()
        ):
            yield self._item(row)

    async def get(self) -> list[Any]:
        """The results as a list."""
        return [item async for item in self.stream()]

    def listen(self) -> AsyncIterator[Any]:
        """Listen to the query: QuerySnapshots, or for an aggregation ``get()``'s shape."""
        return async_watch.sql_listen(self)
