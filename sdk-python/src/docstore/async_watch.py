"""Listeners of the AsyncClient: ``async for snapshot in ref.listen()`` (python-firestore has
no async listeners; this is ours).

As in ``watch.py``, all listeners of one client share ONE ``:listen`` stream, here read by one
asyncio task: the first ``listen()`` opens it, later ones add their target to the running
stream, leaving the ``async for`` (or closing the iterator) removes it, the last one ends the
task. A query listener yields ``QuerySnapshot`` (documents in order, ``document_changes()``,
``read_time``), a document listener ``DocumentSnapshot`` (``exists`` False while missing), an
aggregation listener what its ``_listen_results(row, read_time)`` makes. The first item is the
first results; later ones come only when something changed. Resuming, reset differences and
``reset {permission}`` are as in ``watch.py``; the PermissionDenied is raised from the
iterator.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from docstore._listen import Delivery, Event, ProtocolError, Reset, SseParser
from docstore._types import parse_optional_timestamp
from docstore.exceptions import DocstoreError, NotFound, Unavailable
from docstore.watch import (
    _RECONNECTABLE,
    ACCEPT_WAIT_S,
    TARGETS_PER_REQUEST,
    Listener,
    QuerySnapshot,
    SessionCore,
    Snapshots,
    permission_error,
    retry_delay,
)

_LOGGER = logging.getLogger(__name__)


class _End:
    """The end of a listener's queue: the error it ends with."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _AsyncSession:
    """One AsyncClient's shared stream and the task that reads it."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._core = SessionCore()
        self._task: asyncio.Task[None] | None = None
        self._retry_ms: int | None = None

    @property
    def stream_id(self) -> str | None:
        """The id of the stream (X-Docstore-Stream) once opened."""
        return self._core.stream_id

    def _route(self, suffix: str = "") -> str:
        return self._client._database_route(":listen" + suffix)

    async def add(self, listener: Listener) -> None:
        """Put a listener on the stream; raises what the server refuses its target with."""
        listener.settled = asyncio.Event()  # type: ignore[assignment]
        self._core.register(listener)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        elif self._core.connected:
            await self._post_targets([listener.id])
        try:
            await asyncio.wait_for(listener.settled.wait(), ACCEPT_WAIT_S)  # type: ignore[arg-type]
        except asyncio.TimeoutError:
            pass
        if listener.refused is not None:
            self._core.forget(listener)
            raise listener.refused

    async def remove(self, listener: Listener) -> None:
        """Take a listener off the stream."""
        if listener.id not in self._core.listeners:
            listener.active = False
            return
        held = self._core.forget(listener)
        stream_id = self._core.stream_id
        if held and stream_id is not None:
            try:
                await self._client._transport.request(
                    "DELETE",
                    self._route(f"/{stream_id}/targets/{listener.id}"),
                    idempotent=True,
                )
            except (DocstoreError, httpx.HTTPError):
                pass

    async def _post_targets(self, ids: list[str]) -> None:
        core = self._core
        for start in range(0, len(ids), TARGETS_PER_REQUEST):
            chunk = [i for i in ids[start : start + TARGETS_PER_REQUEST] if i in core.listeners]
            if not chunk:
                continue
            body = {"targets": [{"id": i, **core.listeners[i].target} for i in chunk]}
            try:
                await self._client._transport.request(
                    "POST", self._route(f"/{core.stream_id}/targets"), json=body, idempotent=False
                )
            except (NotFound, Unavailable, httpx.HTTPError):
                return
            except DocstoreError as error:
                for i in chunk:
                    ended = core.refuse(i, error)
                    if ended is not None:
                        ended.fail(error)
                continue
            for i in chunk:
                if i in core.listeners:
                    core.on_server.add(i)
                    core.listeners[i].settled.set()

    async def _delete_targets(self, ids: list[str]) -> None:
        for i in ids:
            try:
                await self._client._transport.request(
                    "DELETE", self._route(f"/{self._core.stream_id}/targets/{i}"), idempotent=True
                )
            except (DocstoreError, httpx.HTTPError):
                pass
            self._core.on_server.discard(i)

    async def _run(self) -> None:
        failures = 0
        try:
            while self._core.listeners and not self._client._transport._http.is_closed:
                body, headers = self._core.open_body()
                try:
                    async with self._client._transport.stream(
                        "POST", self._route(), json=body, headers=headers
                    ) as response:
                        missing, extra = self._core.opened(
                            response.headers.get("x-docstore-stream"), body
                        )
                        await self._post_targets(missing)
                        await self._delete_targets(extra)
                        self._core.accept_held()
                        failures = 0
                        parser = SseParser()
                        async for line in response.aiter_lines():
                            event = parser.feed(line)
                            if parser.retry_ms is not None:
                                self._retry_ms = parser.retry_ms
                            if event is not None and not self._dispatch(event):
                                return
                            if not self._core.listeners:
                                break
                    self._core.lost(forget_stream=False)
                except ProtocolError as error:
                    _LOGGER.warning("listen stream out of step (%s): subscribing afresh", error)
                    self._core.lost(forget_stream=True)
                    failures += 1
                except _RECONNECTABLE:
                    self._core.lost(forget_stream=False)
                    failures += 1
                except DocstoreError as error:
                    self._end_all(error)
                    return
                if failures:
                    await asyncio.sleep(retry_delay(self._retry_ms, failures))
        finally:
            self._task = None
            self._core.lost(forget_stream=not self._core.listeners)

    def _dispatch(self, event: Event) -> bool:
        for listener, item in self._core.handle(event):
            if isinstance(item, Reset):
                if item.reason == "permission":
                    self._end_all(permission_error(item))
                    return False
                continue
            if listener.active:
                listener.deliver(item)
        return True

    def _end_all(self, error: BaseException) -> None:
        listeners = list(self._core.listeners.values())
        ended = [self._core.refuse(listener.id, error) for listener in listeners]
        self._core.lost(forget_stream=True)
        for listener in ended:
            if listener is not None:
                listener.fail(error)


def session_of(client: Any) -> _AsyncSession:
    """The AsyncClient's shared stream (made on first use, kept on the client)."""
    session = getattr(client, "_watch_session", None)
    if session is None:
        session = _AsyncSession(client)
        client._watch_session = session
    return session


async def target_listen(
    client: Any, target: dict[str, Any], convert: Callable[[Delivery], Any]
) -> AsyncIterator[Any]:
    """Listen to one ``:listen`` target on the client's shared stream; yields
    ``convert(delivery)`` for each delivery; the listener ends when the iterator does."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    listener = Listener(target, queue.put_nowait, lambda error: queue.put_nowait(_End(error)))
    session = session_of(client)
    await session.add(listener)
    try:
        while True:
            item = await queue.get()
            if isinstance(item, _End):
                raise item.error
            yield convert(item)
    finally:
        await session.remove(listener)


def document_listen(ref: Any) -> AsyncIterator[Any]:
    """``AsyncDocumentReference.listen()``: DocumentSnapshots (``exists`` False while missing)."""
    client = ref._client

    def convert(delivery: Delivery) -> Any:
        if delivery.docs:
            return client._snapshot(ref, delivery.docs[0], delivery.read_time)
        return client._missing(ref, delivery.read_time)

    return target_listen(client, {"document": ref.path}, convert)


def docs_listen(client: Any, target: dict[str, Any]) -> AsyncIterator[QuerySnapshot]:
    """A query-shaped target: QuerySnapshots."""

    snapshots = Snapshots(client)

    def convert(delivery: Delivery) -> QuerySnapshot:
        return QuerySnapshot(*snapshots(delivery))

    return target_listen(client, target, convert)


def query_listen(query: Any) -> AsyncIterator[QuerySnapshot]:
    """``AsyncQuery.listen()`` (also ``client.sql(...).listen()``): the query gives its target
    with ``_listen_target()``."""
    return docs_listen(_client_of(query), query._listen_target())


def aggregation_listen(aggregation: Any) -> AsyncIterator[Any]:
    """``AsyncAggregationQuery.listen()``: what ``aggregation._listen_results(row, read_time)``
    makes of each new row."""

    def convert(delivery: Delivery) -> Any:
        read_time = parse_optional_timestamp(delivery.read_time)
        return aggregation._listen_results(delivery.aggregation, read_time)

    return target_listen(_client_of(aggregation), aggregation._listen_target(), convert)


def _client_of(query: Any) -> Any:
    client = getattr(query, "_client", None)
    if client is None:
        client = query._parent._client
    return client


def sql_listen(sql: Any) -> AsyncIterator[Any]:
    """``client.sql(text).listen()``: QuerySnapshots, or for an aggregation ``get()``'s shape."""
    client = sql._client

    snapshots = Snapshots(client)

    def convert(delivery: Delivery) -> Any:
        if delivery.aggregation is not None:
            read_time = parse_optional_timestamp(delivery.read_time)
            return sql._listen_results(delivery.aggregation, read_time)
        return QuerySnapshot(*snapshots(delivery))

    return target_listen(client, sql._listen_target(), convert)
