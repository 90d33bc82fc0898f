"""Errors: the one table canonical code -> class, each class raised where the server answers
it (real sidecar), the token (a callable re-called after 401), retries of idempotent calls on
UNAVAILABLE and none for writes, a streamed answer's final error item."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import uuid

import psycopg
import pytest

import docstore
from docstore import _http, exceptions


def test_every_canonical_code_maps_to_its_class():
    names = {
        "CANCELLED": "Cancelled",
        "UNKNOWN": "Unknown",
        "INVALID_ARGUMENT": "InvalidArgument",
        "DEADLINE_EXCEEDED": "DeadlineExceeded",
        "NOT_FOUND": "NotFound",
        "ALREADY_EXISTS": "AlreadyExists",
        "PERMISSION_DENIED": "PermissionDenied",
        "RESOURCE_EXHAUSTED": "ResourceExhausted",
        "FAILED_PRECONDITION": "FailedPrecondition",
        "ABORTED": "Aborted",
        "OUT_OF_RANGE": "OutOfRange",
        "UNIMPLEMENTED": "Unimplemented",
        "INTERNAL": "Internal",
        "UNAVAILABLE": "Unavailable",
        "DATA_LOSS": "DataLoss",
        "UNAUTHENTICATED": "Unauthenticated",
    }
    assert set(exceptions.CODE_TO_CLASS) == set(names)
    for code, name in names.items():
        body = {"code": code, "message": "m", "detail": "d", "hint": "h"}
        error = exceptions.from_error_body(418, body)
        assert type(error).__name__ == name and type(error) is getattr(exceptions, name)
        assert isinstance(error, exceptions.DocstoreError)
        assert (error.code, error.message, error.detail, error.hint, error.status) == (
            code,
            "m",
            "d",
            "h",
            418,
        )
    assert type(exceptions.from_error_body(400, {"code": "NEW_CODE"})) is exceptions.Unknown
    assert type(exceptions.from_error_body(503, None)) is exceptions.Unavailable
    assert type(exceptions.from_error_body(502, "<html>")) is exceptions.Unavailable


def test_not_found_already_exists_failed_precondition(db, coll):
    ref = db.collection(coll).document("a")
    with pytest.raises(exceptions.NotFound) as info:
        ref.update({"a": 1})
    assert info.value.status == 404 and "not found" in info.value.message
    ref.create({})
    with pytest.raises(exceptions.AlreadyExists) as info:
        ref.create({})
    assert info.value.status == 409
    with pytest.raises(exceptions.FailedPrecondition) as info:
        ref.delete(option=db.write_option(exists=False))
    assert info.value.status == 400
    assert ref.get().to_dict() == {}


def test_unknown_database_is_not_found_and_bad_id_invalid_argument(stack):
    with docstore.Client(stack.url, token=stack.admin_key, database="nosuchdb") as client:
        with pytest.raises(exceptions.NotFound):
            client.document("c/a").set({})
        with pytest.raises(exceptions.NotFound, match="database"):
            client.document("c/a").get()

    async def main():
        async with docstore.AsyncClient(stack.url, token=stack.admin_key, database="nosuchdb") as c:
            with pytest.raises(exceptions.NotFound, match="database"):
                await c.document("c/a").get()

    asyncio.run(main())
    with docstore.Client(stack.url, token=stack.admin_key, database="Bad_Id") as client:
        with pytest.raises(exceptions.InvalidArgument):
            client.document("c/a").set({})


def test_aborted_from_a_stale_transaction_commit(db, coll):
    ref = db.collection(coll).document("a")
    ref.set({"n": 0})
    transaction = db.transaction()
    transaction._begin()
    ref.get(transaction=transaction)
    ref.set({"n": 5})  # another writer
    transaction.update(ref, {"n": 1})
    with pytest.raises(exceptions.Aborted) as info:
        transaction._commit()
    assert info.value.status == 409
    assert ref.get().to_dict() == {"n": 5}


def test_permission_denied_and_unauthenticated(stack, coll):
    locked = "locked-" + uuid.uuid4().hex[:8]
    stack.sql("select docstore.create_database(%s)", locked)
    try:
        token = stack.token({"sub": "alice"})
        with docstore.Client(stack.url, token=token, database=locked) as client:
            with pytest.raises(exceptions.PermissionDenied) as info:
                client.document("c/a").set({"v": 1})
            assert info.value.status == 403
    finally:
        stack.sql("select docstore.drop_database(%s)", locked)
    with docstore.Client(stack.url, token="not-a-jwt") as client:
        with pytest.raises(exceptions.Unauthenticated) as info:
            client.collection(coll).document("a").get()
        assert info.value.status == 401


def test_collections_needs_the_admin_key(stack, db, coll):
    db.collection(coll).document("a").set({})
    with docstore.Client(stack.url, token=stack.token({"sub": "alice"})) as client:
        with pytest.raises(exceptions.PermissionDenied):
            list(client.collections())


def test_resource_exhausted_for_a_document_over_one_mib(db, coll):
    ref = db.collection(coll).document("big")
    with pytest.raises(exceptions.ResourceExhausted) as info:
        ref.set({"s": "x" * (1024 * 1024 + 10)})
    assert info.value.status == 413
    assert not ref.get().exists


def test_streamed_answer_error_item_is_raised(stack, coll):
    """A client listing over the database's max_query_results gets the first rows, then the
    final error item is raised as ResourceExhausted."""
    name = "capped-" + uuid.uuid4().hex[:8]
    stack.open_database(name)
    try:
        with docstore.Client(stack.url, token=stack.admin_key, database=name) as admin:
            for doc_id in "abc":
                admin.collection("c").document(doc_id).set({})
        stack.sql("select docstore.set_database_options(%s, 2)", name)
        token = stack.token({"sub": "u1"})
        with docstore.Client(stack.url, token=token, database=name) as client:
            seen = []
            with pytest.raises(exceptions.ResourceExhausted) as info:
                for ref in client.collection("c").list_documents():
                    seen.append(ref.id)
            assert seen == ["a", "b"]
            assert info.value.status is None and "max_query_results" in info.value.message
    finally:
        stack.sql("select docstore.drop_database(%s)", name)


def test_deadline_exceeded_when_a_statement_times_out(stack, coll, own_sidecar):
    """A write blocked on a row lock past --statement-timeout-ms is DEADLINE_EXCEEDED (504)."""
    path = f"{coll}/locked"
    stack.sql("select docstore.commit(%s::jsonb)", json.dumps([{"set": path, "data": {}}]))
    with own_sidecar(stack, "--statement-timeout-ms", "300") as url:
        with psycopg.connect(stack.cluster.url()) as holder:
            holder.execute(
                "select docstore.commit(%s::jsonb)",
                (json.dumps([{"update": path, "fields": {"by": "holder"}}]),),
            )
            with docstore.Client(url, token=stack.admin_key) as client:
                with pytest.raises(exceptions.DeadlineExceeded) as info:
                    client.document(path).update({"by": "sdk"})
                assert info.value.status == 504
            holder.rollback()
    with docstore.Client(stack.url, token=stack.admin_key) as client:
        assert client.document(path).get().to_dict() == {}


def test_unreachable_server_is_unavailable():
    with docstore.Client("http://127.0.0.1:1") as client:
        with pytest.raises(exceptions.Unavailable):
            client.document("c/a").get()
        with pytest.raises(exceptions.Unavailable):
            client.document("c/a").set({})


def test_token_callable_is_called_first_and_again_after_401(stack, db, coll):
    db.collection(coll).document("a").set({"v": 1})
    calls = []

    def token():
        calls.append(1)
        if len(calls) == 1:
            return stack.token({"sub": "alice"}, expires_in=-3600)  # expired
        return stack.token({"sub": "alice"})

    with docstore.Client(stack.url, token=token) as client:
        assert calls == []
        assert client.collection(coll).document("a").get().to_dict() == {"v": 1}
        assert len(calls) == 2
        client.collection(coll).document("b").set({"v": 2})
        assert len(calls) == 2

    bad_calls = []

    def always_bad():
        bad_calls.append(1)
        return "not-a-jwt"

    with docstore.Client(stack.url, token=always_bad) as client:
        with pytest.raises(exceptions.Unauthenticated):
            client.collection(coll).document("a").get()
        assert len(bad_calls) == 2


def test_async_token_callable_and_errors(stack, db, coll):
    db.collection(coll).document("a").set({"v": 1})
    calls = []

    async def token():
        calls.append(1)
        if len(calls) == 1:
            return stack.token({"sub": "alice"}, expires_in=-3600)
        return stack.token({"sub": "alice"})

    async def main():
        async with docstore.AsyncClient(stack.url, token=token) as client:
            snap = await client.collection(coll).document("a").get()
            with pytest.raises(exceptions.NotFound):
                await client.collection(coll).document("none").update({"a": 1})
            with pytest.raises(exceptions.AlreadyExists):
                await client.collection(coll).document("a").create({})
            return snap.to_dict()

    assert asyncio.run(main()) == {"v": 1}
    assert len(calls) == 2


class _Unavailable(http.server.BaseHTTPRequestHandler):
    """Answers every request 503 UNAVAILABLE and counts them."""

    count = 0

    def _answer(self) -> None:
        type(self).count += 1
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = json.dumps({"code": "UNAVAILABLE", "message": "down"}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def unavailable_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unavailable)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_reads_are_retried_on_unavailable_and_writes_are_not(unavailable_server):
    url = f"http://127.0.0.1:{unavailable_server.server_address[1]}"
    with docstore.Client(url, token="k") as client:
        _Unavailable.count = 0
        with pytest.raises(exceptions.Unavailable):
            client.document("c/a").get()
        assert _Unavailable.count == _http.MAX_ATTEMPTS
        _Unavailable.count = 0
        with pytest.raises(exceptions.Unavailable):
            client.document("c/a").set({"v": 1})
        assert _Unavailable.count == 1

    async def main():
        async with docstore.AsyncClient(url, token="k") as client:
            _Unavailable.count = 0
            with pytest.raises(exceptions.Unavailable):
                await client.document("c/a").get()
            reads = _Unavailable.count
            _Unavailable.count = 0
            with pytest.raises(exceptions.Unavailable):
                await client.document("c/a").update({"v": 1})
            return reads, _Unavailable.count

    assert asyncio.run(main()) == (_http.MAX_ATTEMPTS, 1)


def test_client_side_validation_is_value_and_type_errors(db):
    with pytest.raises(ValueError):
        db.document("only-a-collection")
    with pytest.raises(ValueError):
        db.collection("c/a")
    with pytest.raises(ValueError):
        docstore.FieldPath.from_string("a..b")
    with pytest.raises(ValueError):
        docstore.FieldPath()
    with pytest.raises(TypeError):
        db.document(1)
    with pytest.raises(ValueError):
        docstore.Increment("1")
    with pytest.raises(ValueError):
        docstore.ArrayUnion([])
    with pytest.raises(ValueError):
        db.transaction(max_attempts=0)
