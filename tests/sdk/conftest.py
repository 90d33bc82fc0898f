"""Fixtures of the SDK tests: clients of the `docstore` package against the session's real
cluster and sidecar (tests/conftest.py's `stack`).

- `db`: a synchronous docstore.Client with the admin key;
- `arun(fn)`: runs `await fn(client)` with a fresh docstore.AsyncClient (admin key) in a new
  event loop and returns its result (no pytest plugin needed);
- `own_sidecar`: tests/conftest.py's `own_sidecar(stack, *flags)` context manager (a sidecar of
  the test's own); this directory's conftest shadows the module name `conftest`, so tests here
  get it through this fixture.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
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


@pytest.fixture
def own_sidecar(request) -> Any:
    parent = Path(__file__).resolve().parents[1] / "conftest.py"
    for plugin in request.config.pluginmanager.get_plugins():
        if getattr(plugin, "__file__", None) and Path(plugin.__file__).resolve() == parent:
            return plugin.own_sidecar
    raise RuntimeError("tests/conftest.py is not loaded")
