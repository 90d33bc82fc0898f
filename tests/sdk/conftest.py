"""Fixtures of the SDK tests: clients of the `docstore` package against the session's real
cluster and sidecar (tests/conftest.py's `stack`).

- `db`: a synchronous docstore.Client with the admin key;
- `arun(fn)`: runs `await fn(client)` with a fresh docstore.AsyncClient (admin key) in a new
  event loop and returns its result (no pytest plugin needed);
- `user_client(token)`: a Client with a JWT or token callable (rules apply).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import docstore


@pytest.fixture
def db(stack):
    with docstore.Client(stack.url, token=stack.admin_key) as client:
        yield client


@pytest.fixture
def arun(stack) -> Callable[[Callable[[docstore.AsyncClient], Awaitable[Any]]], Any]:
    def run(fn: Callable[[docstore.AsyncClient], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            async with docstore.AsyncClient(stack.url, token=stack.admin_key) as client:
                return await fn(client)

        return asyncio.run(main())

    return run
