"""Client construction: url and token from the environment ($DOCSTORE_URL, $DOCSTORE_TOKEN
before $DOCSTORE_ADMIN_KEY, none), token="" for no credentials, an injected httpx client, sync
and async."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

import docstore
from docstore import exceptions


@pytest.fixture
def locked(stack):
    """A database without rules: only the admin key may write."""
    name = "locked-" + uuid.uuid4().hex[:8]
    stack.sql("select docstore.create_database(%s)", name)
    yield name
    stack.sql("select docstore.drop_database(%s)", name)


def test_environment_defaults(stack, locked, monkeypatch):
    monkeypatch.setenv("DOCSTORE_URL", stack.url)
    monkeypatch.setenv("DOCSTORE_ADMIN_KEY", stack.admin_key)
    monkeypatch.delenv("DOCSTORE_TOKEN", raising=False)
    with docstore.Client(database=locked) as admin:  # the admin key bypasses rules
        assert admin.url == stack.url
        admin.document("c/a").set({"v": 1})
    monkeypatch.setenv("DOCSTORE_TOKEN", stack.token({"sub": "alice"}))
    with docstore.Client(database=locked) as user:  # $DOCSTORE_TOKEN comes first
        with pytest.raises(exceptions.PermissionDenied):
            user.document("c/a").set({"v": 2})
    monkeypatch.delenv("DOCSTORE_TOKEN")
    with docstore.Client(token="", database=locked) as anonymous:  # no credentials at all
        with pytest.raises(exceptions.PermissionDenied):
            anonymous.document("c/a").get()
    monkeypatch.delenv("DOCSTORE_ADMIN_KEY")
    with docstore.Client(database=locked) as anonymous:
        with pytest.raises(exceptions.PermissionDenied):
            anonymous.document("c/a").set({"v": 3})
    with docstore.Client(stack.url, token=stack.admin_key, database=locked) as admin:
        assert admin.document("c/a").get().to_dict() == {"v": 1}


def test_async_environment_defaults(stack, locked, monkeypatch):
    monkeypatch.setenv("DOCSTORE_URL", stack.url)
    monkeypatch.setenv("DOCSTORE_ADMIN_KEY", stack.admin_key)
    monkeypatch.setenv("DOCSTORE_TOKEN", stack.token({"sub": "alice"}))

    async def main():
        async with docstore.AsyncClient(database=locked) as user:
            with pytest.raises(exceptions.PermissionDenied):
                await user.document("c/a").set({"v": 1})
        async with docstore.AsyncClient(token=stack.admin_key, database=locked) as admin:
            await admin.document("c/a").set({"v": 1})
            return (await admin.document("c/a").get()).to_dict()

    assert asyncio.run(main()) == {"v": 1}


def test_injected_http_clients_are_used_and_left_open(stack, coll):
    sent = []
    http = httpx.Client(event_hooks={"request": [lambda request: sent.append(request.method)]})
    with docstore.Client(stack.url, token=stack.admin_key, http_client=http) as client:
        client.collection(coll).document("a").set({"v": 1})
        assert client.collection(coll).document("a").get().exists
    assert sent == ["POST", "GET"]
    assert not http.is_closed  # the caller's client
    http.close()

    async def main():
        seen = []

        async def hook(request):
            seen.append(request.method)

        async with httpx.AsyncClient(event_hooks={"request": [hook]}) as ahttp:
            async with docstore.AsyncClient(
                stack.url, token=stack.admin_key, http_client=ahttp
            ) as client:
                await client.collection(coll).document("a").get()
            assert not ahttp.is_closed
        return seen

    assert asyncio.run(main()) == ["GET"]


def test_databases_are_separate(stack, coll):
    name = "second-" + uuid.uuid4().hex[:8]
    stack.open_database(name)
    try:
        with docstore.Client(stack.url, token=stack.admin_key, database=name) as other:
            other.collection(coll).document("a").set({"in": name})
            assert other.database == name
        with docstore.Client(stack.url, token=stack.admin_key) as default:
            assert not default.collection(coll).document("a").get().exists
    finally:
        stack.sql("select docstore.drop_database(%s)", name)
