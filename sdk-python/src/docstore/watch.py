"""Listeners of the synchronous Client (python-firestore's ``watch``): ``on_snapshot``.

All listeners of one client share ONE ``:listen`` stream (docs/listen.md), read by one
background thread: the first listener opens it, later ones add their target to the running
stream (``POST .../:listen/{stream}/targets``), ``Watch.unsubscribe()`` removes it (``DELETE``)
and the last one ends the thread. Callbacks run on that thread, one at a time, in stream order,
and are called as python-firestore calls them: ``callback(docs, changes, read_time)`` with the
documents in query order (a document listener gets ``[DocumentSnapshot]``, or ``[]`` while the
document does not exist), the ``DocumentChange``s since the previous call, and the commit time
of the event; the first call comes with the first results, even empty ones, later calls only
when something changed.

A dropped connection is resumed with ``Last-Event-ID`` (nothing missed or repeated); after a
``reset`` the stream's next snapshot is handed over as the difference to what each callback
last saw (``docstore._listen``). ``reset {permission}`` ends every listener of the stream with
``PermissionDenied``, given to ``on_error`` (without one it is logged); so does a refusal when
the stream is opened again.
"""

from __future__ import annotations

import enum
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from docstore._listen import (
    REMOVED,
    Delivery,
    Event,
    ProtocolError,
    RawChange,
    Reset,
    SseParser,
    StreamState,
)
from docstore._types import parse_optional_timestamp
from docstore.exceptions import DocstoreError, NotFound, PermissionDenied, Unavailable

_LOGGER = logging.getLogger(__name__)

# docs/listen.md: at most 100 targets per request.
TARGETS_PER_REQUEST = 100
# Reconnection delay: the stream's `retry:` (1-2 s), doubled per failed attempt, capped.
DEFAULT_RETRY_MS = 1000
MAX_RETRY_S = 10.0
# How long on_snapshot waits for the stream to take (or refuse) a new target.
ACCEPT_WAIT_S = 60.0
# Errors after which the stream is simply opened again.
_RECONNECTABLE = (httpx.TransportError, httpx.StreamError, Unavailable, ProtocolError)


class ChangeType(enum.Enum):
    """The kind of a DocumentChange (python-firestore's ``ChangeType``)."""

    ADDED = 1
    REMOVED = 2
    MODIFIED = 3


class DocumentChange:
    """One change of a listened result (python-firestore's ``DocumentChange``): ``type``, the
    ``document`` (for REMOVED, the document as last seen), ``old_index`` (-1 for ADDED) and
    ``new_index`` (-1 for REMOVED), each counted after the changes before it were applied."""

    def __init__(self, type: ChangeType, document: Any, old_index: int, new_index: int) -> None:
        self.type = type
        self.document = document
        self.old_index = old_index
        self.new_index = new_index

    def __repr__(self) -> str:
        return (
            f"DocumentChange({self.type.name}, {self.document.reference.path!r}, "
            f"{self.old_index}, {self.new_index})"
        )


class QuerySnapshot:
    """A listened query result at one time (what ``listen()`` yields): ``docs`` in query
    order, ``document_changes()`` since the previous one, ``read_time``."""

    def __init__(self, docs: list[Any], changes: list[DocumentChange], read_time: Any) -> None:
        self.docs = docs
        self.changes = changes
        self.read_time = read_time

    def document_changes(self) -> list[DocumentChange]:
        """The changes since the previous snapshot of this listener."""
        return self.changes

    @property
    def size(self) -> int:
        """The number of documents."""
        return len(self.docs)

    @property
    def empty(self) -> bool:
        """Whether there is no document."""
        return not self.docs

    def __len__(self) -> int:
        return len(self.docs)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.docs)


class Snapshots:
    """Turns one listener's deliveries into what python-firestore hands over: (DocumentSnapshots
    in order, DocumentChanges, read time). A document's snapshot is made once per version and
    reused while the version stands (a change costs the changed documents, not the result's
    size); its ``read_time`` is the commit time of the event that brought that version.
    ``reference`` is a document listener's own reference (None for queries)."""

    def __init__(self, client: Any, reference: Any = None) -> None:
        self._client = client
        self._reference = reference
        self._made: dict[str, tuple[dict[str, Any], Any]] = {}

    def __call__(self, delivery: Delivery) -> tuple[list[Any], list[DocumentChange], Any]:
        """(docs, changes, read_time) of one delivery."""
        made, fresh = self._made, {}

        def snap(raw: dict[str, Any]) -> Any:
            path = raw["path"]
            hit = fresh.get(path) or made.get(path)
            if hit is not None and hit[0] is raw:
                return hit[1]
            snapshot = self._client._snapshot(self._reference, raw, delivery.read_time)
            fresh[path] = (raw, snapshot)
            return snapshot

        changes = [_change(c, snap) for c in delivery.changes]
        docs = [snap(d) for d in delivery.docs]
        for change in delivery.changes:
            if change.type == REMOVED:
                made.pop(change.document["path"], None)
        made.update(fresh)
        if len(made) > len(delivery.docs):
            self._made = {d["path"]: made[d["path"]] for d in delivery.docs}
        return docs, changes, parse_optional_timestamp(delivery.read_time)


def _change(c: RawChange, snap: Callable[[dict[str, Any]], Any]) -> DocumentChange:
    return DocumentChange(ChangeType[c.type], snap(c.document), c.old_index, c.new_index)


class Listener:
    """One target of a shared stream: its JSON (without id), what to do with a delivery, and
    where its error goes. Shared by the sync and async sessions."""

    def __init__(
        self,
        target: dict[str, Any],
        deliver: Callable[[Delivery], None],
        on_error: Callable[[BaseException], None] | None,
    ) -> None:
        self.target = target
        self.deliver = deliver
        self.on_error = on_error
        self.id = ""
        self.active = True
        self.failed = False
        self.refused: BaseException | None = None
        self.settled = threading.Event()

    def fail(self, error: BaseException) -> None:
        """End the listener with ``error``: to ``on_error``, else logged."""
        if self.failed:
            return
        self.failed = True
        self.active = False
        if self.on_error is None:
            _LOGGER.error("listener of %s closed: %s", self.target, error)
            return
        try:
            self.on_error(error)
        except Exception:
            _LOGGER.exception("on_error of a listener raised")


class SessionCore:
    """The I/O-free bookkeeping of one client's stream: listeners by target id, the protocol
    state, which targets the server holds; ``watch.py`` and ``async_watch.py`` drive it."""

    def __init__(self) -> None:
        self.listeners: dict[str, Listener] = {}
        self.state = StreamState()
        self.stream_id: str | None = None
        self.on_server: set[str] = set()
        self.connected = False
        self._ids = itertools.count()

    def register(self, listener: Listener) -> None:
        """Give the listener a target id and a fresh state."""
        listener.id = str(next(self._ids))
        self.listeners[listener.id] = listener
        self.state.add(listener.id)

    def forget(self, listener: Listener) -> bool:
        """Drop the listener; whether the server holds its target (to be deleted)."""
        listener.active = False
        self.listeners.pop(listener.id, None)
        self.state.remove(listener.id)
        if listener.id not in self.on_server or not self.connected:
            # Not held, or held by a stream that is away: deleted when it is opened again.
            return False
        self.on_server.discard(listener.id)
        return True

    def accept_held(self) -> None:
        """Settle (let on_snapshot return) every listener whose target the stream holds."""
        for target_id, listener in self.listeners.items():
            if target_id in self.on_server:
                listener.settled.set()

    def refuse(self, target_id: str, error: BaseException) -> Listener | None:
        """The server refused a target: drop its listener. Returned when it must be ended with
        ``fail`` (its on_snapshot has returned); otherwise its on_snapshot raises ``error``."""
        listener = self.listeners.get(target_id)
        if listener is None:
            return None
        self.forget(listener)
        if listener.settled.is_set():
            return listener
        listener.refused = error
        listener.settled.set()
        return None

    def open_body(self) -> tuple[dict[str, Any], dict[str, str] | None]:
        """The body and headers of the request (re)opening the stream."""
        targets = [{"id": i, **lst.target} for i, lst in self.listeners.items()]
        headers = None
        if self.state.resume_token is not None:
            headers = {"Last-Event-ID": self.state.resume_token}
        return {"targets": targets[:TARGETS_PER_REQUEST]}, headers

    def opened(self, stream_id: str | None, sent: dict[str, Any]) -> tuple[list[str], list[str]]:
        """The stream answered: the target ids still to add and to delete on it."""
        if stream_id is None or stream_id != self.stream_id:
            # A new stream: it holds exactly the targets of the opening request.
            self.on_server = {t["id"] for t in sent["targets"]}
        self.stream_id = stream_id
        self.connected = True
        missing = [i for i in self.listeners if i not in self.on_server]
        extra = [i for i in self.on_server if i not in self.listeners]
        return missing, extra

    def handle(self, event: Event) -> list[tuple[Listener, Delivery | Reset]]:
        """Apply an event: (listener, what it gets), in order."""
        out: list[tuple[Listener, Delivery | Reset]] = []
        for item in self.state.handle(event):
            if isinstance(item, Reset):
                out.extend((lst, item) for lst in list(self.listeners.values()))
            else:
                lst = self.listeners.get(item.target)
                if lst is not None:
                    out.append((lst, item))
        return out

    def lost(self, *, forget_stream: bool) -> None:
        """The connection ended; ``forget_stream``: open a new stream next time (its snapshot
        is then handed over as a difference)."""
        self.connected = False
        if forget_stream:
            self.stream_id = None
            self.state.resume_token = None
            self.on_server = set()


def retry_delay(retry_ms: int | None, failures: int) -> float:
    """Seconds before reconnecting: the stream's ``retry:``, doubled per failure, jittered."""
    base = (retry_ms or DEFAULT_RETRY_MS) / 1000.0
    return min(base * 2 ** max(failures - 1, 0), MAX_RETRY_S) * random.uniform(0.5, 1.0)


def permission_error(reset: Reset) -> PermissionDenied:
    """The error a ``reset {permission}`` ends the listeners with."""
    return PermissionDenied(reset.message or "the security rules no longer allow this stream")


class Watch:
    """A running listener (python-firestore's ``Watch``); ``unsubscribe()`` stops it."""

    def __init__(self, session: _Session, listener: Listener) -> None:
        self._session = session
        self._listener = listener

    @property
    def is_active(self) -> bool:
        """Whether the listener still receives changes."""
        return self._listener.active

    def unsubscribe(self) -> None:
        """Stop the listener: no callback after this returns (unless one is running)."""
        self._session.remove(self._listener)

    close = unsubscribe


class _Session:
    """One client's shared stream and the thread that reads it."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.RLock()
        self._core = SessionCore()
        self._thread: threading.Thread | None = None
        self._retry_ms: int | None = None

    @property
    def stream_id(self) -> str | None:
        """The id of the stream (X-Docstore-Stream) once opened."""
        return self._core.stream_id

    def _route(self, suffix: str = "") -> str:
        return self._client._database_route(":listen" + suffix)

    def add(self, listener: Listener) -> None:
        """Put a listener on the stream; raises what the server refuses its target with."""
        with self._lock:
            self._core.register(listener)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="docstore-listen", daemon=True
                )
                self._thread.start()
            elif self._core.connected:
                self._post_targets([listener.id])
        listener.settled.wait(ACCEPT_WAIT_S)
        if listener.refused is not None:
            with self._lock:
                self._core.forget(listener)
            raise listener.refused

    def remove(self, listener: Listener) -> None:
        """Take a listener off the stream."""
        with self._lock:
            if listener.id not in self._core.listeners:
                listener.active = False
                return
            held = self._core.forget(listener)
            stream_id = self._core.stream_id
        if held and stream_id is not None:
            try:
                self._client._transport.request(
                    "DELETE",
                    self._route(f"/{stream_id}/targets/{listener.id}"),
                    idempotent=True,
                )
            except (DocstoreError, httpx.HTTPError):
                # The stream is gone or going: the next one will not carry the target.
                pass

    def _post_targets(self, ids: list[str]) -> None:
        """Add targets to the running stream (under the lock); a refused one settles its
        listener with the error; a stream the server no longer has is reopened by the thread."""
        core = self._core
        for start in range(0, len(ids), TARGETS_PER_REQUEST):
            chunk = [i for i in ids[start : start + TARGETS_PER_REQUEST] if i in core.listeners]
            if not chunk:
                continue
            body = {"targets": [{"id": i, **core.listeners[i].target} for i in chunk]}
            try:
                self._client._transport.request(
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
                core.on_server.add(i)
                core.listeners[i].settled.set()

    def _delete_targets(self, ids: list[str]) -> None:
        for i in ids:
            try:
                self._client._transport.request(
                    "DELETE", self._route(f"/{self._core.stream_id}/targets/{i}"), idempotent=True
                )
            except (DocstoreError, httpx.HTTPError):
                pass
            self._core.on_server.discard(i)

    def _run(self) -> None:
        failures = 0
        parser = SseParser()
        while True:
            with self._lock:
                if not self._core.listeners or self._client._transport._http.is_closed:
                    self._thread = None
                    self._core.lost(forget_stream=True)
                    return
                body, headers = self._core.open_body()
            try:
                with self._client._transport.stream(
                    "POST", self._route(), json=body, headers=headers
                ) as response:
                    with self._lock:
                        missing, extra = self._core.opened(
                            response.headers.get("x-docstore-stream"), body
                        )
                        self._post_targets(missing)
                        self._delete_targets(extra)
                        self._core.accept_held()
                    failures = 0
                    parser = SseParser()
                    for line in response.iter_lines():
                        event = parser.feed(line)
                        if parser.retry_ms is not None:
                            self._retry_ms = parser.retry_ms
                        if event is not None and not self._dispatch(event):
                            return
                        if not self._core.listeners:
                            break
                with self._lock:
                    self._core.lost(forget_stream=False)
            except ProtocolError as error:
                _LOGGER.warning("listen stream out of step (%s): subscribing afresh", error)
                with self._lock:
                    self._core.lost(forget_stream=True)
                failures += 1
            except _RECONNECTABLE:
                with self._lock:
                    self._core.lost(forget_stream=False)
                failures += 1
            except DocstoreError as error:
                self._end_all(error)
                return
            if failures:
                time.sleep(retry_delay(self._retry_ms, failures))

    def _dispatch(self, event: Event) -> bool:
        """Hand an event to its listeners; False when it ended the stream for good."""
        with self._lock:
            items = self._core.handle(event)
        for listener, item in items:
            if isinstance(item, Reset):
                if item.reason == "permission":
                    self._end_all(permission_error(item))
                    return False
                continue
            if not listener.active:
                continue
            try:
                listener.deliver(item)
            except Exception:
                _LOGGER.exception("a listener's callback raised")
        return True

    def _end_all(self, error: BaseException) -> None:
        with self._lock:
            listeners = list(self._core.listeners.values())
            ended = [self._core.refuse(listener.id, error) for listener in listeners]
            self._core.lost(forget_stream=True)
            self._thread = None
        for listener in ended:
            if listener is not None:
                listener.fail(error)


_SESSIONS_LOCK = threading.Lock()


def session_of(client: Any) -> _Session:
    """The client's shared stream (made on first use, kept on the client)."""
    with _SESSIONS_LOCK:
        session = getattr(client, "_watch_session", None)
        if session is None:
            session = _Session(client)
            client._watch_session = session
        return session


def target_watch(
    client: Any,
    target: dict[str, Any],
    deliver: Callable[[Delivery], None],
    on_error: Callable[[BaseException], None] | None = None,
) -> Watch:
    """Listen to one ``:listen`` target (``{"sql": ...}``, ``{"structuredQuery": ...}``,
    ``{"document": path}``) on the client's shared stream; ``deliver`` gets each Delivery."""
    listener = Listener(target, deliver, on_error)
    session = session_of(client)
    session.add(listener)
    return Watch(session, listener)


def document_watch(
    ref: Any, callback: Callable[..., Any], on_error: Callable[[BaseException], None] | None = None
) -> Watch:
    """``DocumentReference.on_snapshot``: ``callback([DocumentSnapshot] or [], changes,
    read_time)``."""
    client = ref._client

    snapshots = Snapshots(client, ref)

    def deliver(delivery: Delivery) -> None:
        callback(*snapshots(delivery))

    return target_watch(client, {"document": ref.path}, deliver, on_error)


def docs_watch(
    client: Any,
    target: dict[str, Any],
    callback: Callable[..., Any],
    on_error: Callable[[BaseException], None] | None = None,
) -> Watch:
    """A query-shaped target: ``callback(docs, changes, read_time)`` as python-firestore's
    ``Query.on_snapshot``."""

    snapshots = Snapshots(client)

    def deliver(delivery: Delivery) -> None:
        callback(*snapshots(delivery))

    return target_watch(client, target, deliver, on_error)


def query_watch(
    query: Any,
    callback: Callable[..., Any],
    on_error: Callable[[BaseException], None] | None = None,
) -> Watch:
    """``Query.on_snapshot`` (also a ``client.sql(...)`` query): the query gives its target
    with ``_listen_target()`` (``{"structuredQuery": ...}`` or ``{"sql": ...}``)."""
    client = _client_of(query)
    return docs_watch(client, query._listen_target(), callback, on_error)


def aggregation_watch(
    aggregation: Any,
    callback: Callable[..., Any],
    on_error: Callable[[BaseException], None] | None = None,
) -> Watch:
    """``AggregationQuery.on_snapshot``: ``callback(results, read_time)`` where ``results`` is
    what ``aggregation._listen_results(row, read_time)`` makes of the live row (the shape its
    ``get()`` returns)."""
    client = _client_of(aggregation)

    def deliver(delivery: Delivery) -> None:
        read_time = parse_optional_timestamp(delivery.read_time)
        callback(aggregation._listen_results(delivery.aggregation, read_time), read_time)

    return target_watch(client, aggregation._listen_target(), deliver, on_error)


def _client_of(query: Any) -> Any:
    client = getattr(query, "_client", None)
    if client is None:
        client = query._parent._client
    return client


def sql_watch(
    sql: Any, callback: Callable[..., Any], on_error: Callable[[BaseException], None] | None = None
) -> Watch:
    """``client.sql(text).on_snapshot``: a document query calls ``callback(docs, changes,
    read_time)``, an aggregation ``callback(results, read_time)`` (as ``aggregation_watch``)."""
    client = sql._client

    snapshots = Snapshots(client)

    def deliver(delivery: Delivery) -> None:
        if delivery.aggregation is not None:
            read_time = parse_optional_timestamp(delivery.read_time)
            callback(sql._listen_results(delivery.aggregation, read_time), read_time)
        else:
            callback(*snapshots(delivery))

    return target_watch(client, sql._listen_target(), deliver, on_error)
