"""The only module that does HTTP: ``Transport`` (over ``httpx.Client``) and ``AsyncTransport``
(over ``httpx.AsyncClient``).

- ``request(method, route, *, json=None, params=None, idempotent)`` -> the parsed JSON answer;
- ``stream_json_array(method, route, *, json=None, params=None)`` -> the items of a streamed
  JSON array (``:runQuery``, a collection GET), raising the final ``{"error": ...}`` item;
- ``stream(method, route, *, json=None, headers=None)`` -> a context manager yielding the
  ``httpx.Response`` of a 2xx answer with its body unread (SSE of ``:listen``).

``route`` is the URL path, e.g. ``/v1/databases/(default)/documents/c/a`` (``BaseClient`` builds
them). Every error answer becomes a ``docstore.exceptions`` instance (``from_error_body``). The
token (a str, or a callable returning one) goes in ``Authorization: Bearer``; a callable is
called before the first request and again after a 401, and that request is sent once more.
Idempotent requests are retried on UNAVAILABLE (503, or no connection) with jittered
exponential backoff; writes are never retried blindly.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json as jsonlib
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx

from docstore.exceptions import DocstoreError, Unavailable, from_error_body

DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
MAX_ATTEMPTS = 5
INITIAL_BACKOFF = 0.1
MAX_BACKOFF = 2.0

# Connection-level failures that are safe to retry for idempotent requests.
_RETRYABLE_TRANSPORT_ERRORS = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
)


def backoff_delays(attempts: int = MAX_ATTEMPTS) -> Iterator[float]:
    """The jittered sleeps between ``attempts`` tries (one fewer than attempts)."""
    delay = INITIAL_BACKOFF
    for _ in range(attempts - 1):
        yield random.uniform(0, delay)
        delay = min(delay * 2, MAX_BACKOFF)


def _error_of(response: httpx.Response) -> DocstoreError:
    try:
        body = response.json()
    except ValueError:
        body = None
    return from_error_body(response.status_code, body)


def _parse(response: httpx.Response) -> Any:
    if not response.content:
        return None
    return response.json()


class _JsonArrayReader:
    """Incremental reader of a JSON array whose items arrive in chunks."""

    def __init__(self) -> None:
        self._decoder = jsonlib.JSONDecoder()
        self._buf = ""
        self._pos = 0
        self._started = False
        self._done = False

    def feed(self, text: str) -> list[Any]:
        """Add text; return the items completed by it."""
        self._buf = self._buf[self._pos :] + text
        self._pos = 0
        items: list[Any] = []
        buf = self._buf
        while not self._done:
            pos = self._skip(buf, self._pos)
            if pos >= len(buf):
                break
            if not self._started:
                if buf[pos] != "[":
                    raise ValueError("the answer is not a JSON array")
                self._started = True
                self._pos = pos + 1
                continue
            if buf[pos] == "]":
                self._done = True
                self._pos = pos + 1
                break
            if buf[pos] == ",":
                pos = self._skip(buf, pos + 1)
                if pos >= len(buf):
                    break
            try:
                item, end = self._decoder.raw_decode(buf, pos)
            except jsonlib.JSONDecodeError:
                break  # incomplete: wait for more text
            # A number at the very end may still grow; wait for its delimiter.
            if self._skip(buf, end) >= len(buf) and not isinstance(item, (dict, list, str)):
                break
            items.append(item)
            self._pos = end
        return items

    @staticmethod
    def _skip(buf: str, pos: int) -> int:
        while pos < len(buf) and buf[pos] in " \t\r\n":
            pos += 1
        return pos

    def finish(self) -> None:
        """Raise if the array did not end (a cut answer)."""
        if not self._done:
            raise Unavailable("the streamed answer ended before the array was complete")


def _check_item(item: Any) -> Any:
    if isinstance(item, dict) and len(item) == 1 and "error" in item:
        raise from_error_body(None, item["error"])
    return item


class _TokenSource:
    def __init__(self, token: str | Callable[[], Any] | None) -> None:
        self._token = token
        self._current: str | None = token if isinstance(token, str) else None

    @property
    def refreshable(self) -> bool:
        return callable(self._token)


class Transport:
    """Synchronous HTTP to the sidecar (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        token: str | Callable[[], str] | None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._tokens = _TokenSource(token)
        self._owns_client = http_client is None
        self._http = (
            http_client if http_client is not None else httpx.Client(timeout=DEFAULT_TIMEOUT)
        )

    def close(self) -> None:
        """Close the HTTP client if the transport made it."""
        if self._owns_client:
            self._http.close()

    def auth_headers(self, *, refresh: bool = False) -> dict[str, str]:
        """The Authorization header (empty without a token); ``refresh`` re-calls a callable."""
        src = self._tokens
        if src.refreshable and (refresh or src._current is None):
            value = src._token()  # type: ignore[operator]
            src._current = value if value else None
        return {"Authorization": f"Bearer {src._current}"} if src._current else {}

    def url(self, route: str) -> str:
        """The absolute URL of a route."""
        return self.base_url + route

    def _send(
        self,
        method: str,
        route: str,
        *,
        json: Any,
        params: Any,
        headers: dict[str, str] | None,
        stream: bool,
    ) -> httpx.Response:
        refreshed = False
        while True:
            all_headers = dict(headers or {})
            all_headers.update(self.auth_headers(refresh=refreshed))
            request = self._http.build_request(
                method, self.url(route), json=json, params=params, headers=all_headers
            )
            response = self._http.send(request, stream=stream)
            if response.status_code == 401 and self._tokens.refreshable and not refreshed:
                response.close()
                refreshed = True
                continue
            return response

    def request(
        self,
        method: str,
        route: str,
        *,
        json: Any = None,
        params: Any = None,
        idempotent: bool,
    ) -> Any:
        """Send one request; the parsed JSON answer of a 2xx, else the mapped exception."""
        delays = backoff_delays() if idempotent else iter(())
        while True:
            try:
                response = self._send(
                    method, route, json=json, params=params, headers=None, stream=False
                )
            except _RETRYABLE_TRANSPORT_ERRORS as exc:
                delay = next(delays, None)
                if delay is None:
                    raise Unavailable(f"cannot reach {self.base_url}: {exc}") from exc
                time.sleep(delay)
                continue
            if response.is_success:
                return _parse(response)
            error = _error_of(response)
            if isinstance(error, Unavailable):
                delay = next(delays, None)
                if delay is not None:
                    time.sleep(delay)
                    continue
            raise error

    @contextlib.contextmanager
    def stream(
        self,
        method: str,
        route: str,
        *,
        json: Any = None,
        params: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Iterator[httpx.Response]:
        """A 2xx response with its body unread (the caller iterates it); errors raised."""
        try:
            response = self._send(
                method, route, json=json, params=params, headers=headers, stream=True
            )
        except _RETRYABLE_TRANSPORT_ERRORS as exc:
            raise Unavailable(f"cannot reach {self.base_url}: {exc}") from exc
        try:
            if not response.is_success:
                response.read()
                raise _error_of(response)
            yield response
        finally:
            response.close()

    def stream_json_array(
        self, method: str, route: str, *, json: Any = None, params: Any = None
    ) -> Iterator[Any]:
        """The items of a streamed JSON array, as they arrive; a final ``{"error": ...}`` item
        is raised as its exception, a cut answer as Unavailable."""
        reader = _JsonArrayReader()
        try:
            with self.stream(method, route, json=json, params=params) as response:
                for chunk in response.iter_text():
                    for item in reader.feed(chunk):
                        yield _check_item(item)
        except _RETRYABLE_TRANSPORT_ERRORS as exc:
            raise Unavailable(f"the answer was cut: {exc}") from exc
        reader.finish()


class AsyncTransport:
    """Asynchronous HTTP to the sidecar: ``Transport``'s methods as coroutines (the token may
    also be an async callable)."""

    def __init__(
        self,
        base_url: str,
        token: str | Callable[[], Any] | None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._tokens = _TokenSource(token)
        self._owns_client = http_client is None
        self._http = (
            http_client if http_client is not None else httpx.AsyncClient(timeout=DEFAULT_TIMEOUT)
        )

    async def close(self) -> None:
        """Close the HTTP client if the transport made it."""
        if self._owns_client:
            await self._http.aclose()

    async def auth_headers(self, *, refresh: bool = False) -> dict[str, str]:
        """The Authorization header (empty without a token); ``refresh`` re-calls a callable."""
        src = self._tokens
        if src.refreshable and (refresh or src._current is None):
            value = src._token()  # type: ignore[operator]
            if inspect.isawaitable(value):
                value = await value
            src._current = value if value else None
        return {"Authorization": f"Bearer {src._current}"} if src._current else {}

    def url(self, route: str) -> str:
        """The absolute URL of a route."""
        return self.base_url + route

    async def _send(
        self,
        method: str,
        route: str,
        *,
        json: Any,
        params: Any,
        headers: dict[str, str] | None,
        stream: bool,
    ) -> httpx.Response:
        refreshed = False
        while True:
            all_headers = dict(headers or {})
            all_headers.update(await self.auth_headers(refresh=refreshed))
            request = self._http.build_request(
                method, self.url(route), json=json, params=params, headers=all_headers
            )
            response = await self._http.send(request, stream=stream)
            if response.status_code == 401 and self._tokens.refreshable and not refreshed:
                await response.aclose()
                refreshed = True
                continue
            return response

    async def request(
        self,
        method: str,
        route: str,
        *,
        json: Any = None,
        params: Any = None,
        idempotent: bool,
    ) -> Any:
        """Send one request; the parsed JSON answer of a 2xx, else the mapped exception."""
        delays = backoff_delays() if idempotent else iter(())
        while True:
            try:
                response = await self._send(
                    method, route, json=json, params=params, headers=None, stream=False
                )
            except _RETRYABLE_TRANSPORT_ERRORS as exc:
                delay = next(delays, None)
                if delay is None:
                    raise Unavailable(f"cannot reach {self.base_url}: {exc}") from exc
                await asyncio.sleep(delay)
                continue
            if response.is_success:
                return _parse(response)
            error = _error_of(response)
            if isinstance(error, Unavailable):
                delay = next(delays, None)
                if delay is not None:
                    await asyncio.sleep(delay)
                    continue
            raise error

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        route: str,
        *,
        json: Any = None,
        params: Any = None,
        headers: dict[str, str] | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """A 2xx response with its body unread (the caller iterates it); errors raised."""
        try:
            response = await self._send(
                method, route, json=json, params=params, headers=headers, stream=True
            )
        except _RETRYABLE_TRANSPORT_ERRORS as exc:
            raise Unavailable(f"cannot reach {self.base_url}: {exc}") from exc
        try:
            if not response.is_success:
                await response.aread()
                raise _error_of(response)
            yield response
        finally:
            await response.aclose()

    async def stream_json_array(
        self, method: str, route: str, *, json: Any = None, params: Any = None
    ) -> AsyncIterator[Any]:
        """The items of a streamed JSON array, as they arrive (see ``Transport``)."""
        reader = _JsonArrayReader()
        try:
            async with self.stream(method, route, json=json, params=params) as response:
                async for chunk in response.aiter_text():
                    for item in reader.feed(chunk):
                        yield _check_item(item)
        except _RETRYABLE_TRANSPORT_ERRORS as exc:
            raise Unavailable(f"the answer was cut: {exc}") from exc
        reader.finish()
