"""WriteBatch (atomic), BulkWriter (independent writes, per-write errors and retries) and
recursive_delete, sync and async."""

from __future__ import annotations

import threading

import pytest

import docstore
from docstore import exceptions


def test_batch_commits_all_and_returns_results(db, coll):
    col = db.collection(coll)
    col.document("u").set({"n": 1})
    col.document("d").set({"x": 1})
    col.document("mm").set({"v": {"old": 1}, "w": 5})
    batch = db.batch()
    batch.create(col.document("c"), {"v": 1})
    batch.set(col.document("s"), {"v": 2})
    batch.set(col.document("u"), {"m": 1}, merge=True)
    batch.update(col.document("u"), {"n": docstore.Increment(1)})
    batch.delete(col.document("d"))
    batch.set(col.document("mm"), {"v": {"x": 1}, "w": 0}, merge=["v"])  # two entries inside
    assert len(batch) == 6
    results = batch.commit()
    assert len(results) == 6 and all(r.update_time is not None for r in results)
    assert batch.write_results == results and batch.commit_time is not None
    assert col.document("u").get().to_dict() == {"n": 2, "m": 1}
    assert col.document("mm").get().to_dict() == {"v": {"x": 1}, "w": 5}
    assert col.document("c").get().exists and not col.document("d").get().exists


def test_batch_is_atomic(db, coll):
    col = db.collection(coll)
    col.document("exists").set({"v": 0})
    batch = db.batch()
    batch.set(col.document("new"), {"v": 1})
    batch.update(col.document("exists"), {"v": 1})
    batch.create(col.document("exists"), {"v": 2})  # fails: already exists
    with pytest.raises(exceptions.AlreadyExists):
        batch.commit()
    assert not col.document("new").get().exists
    assert col.document("exists").get().to_dict() == {"v": 0}


def test_batch_context_manager_and_limit(db, coll):
    col = db.collection(coll)
    with db.batch() as batch:
        batch.set(col.document("a"), {"v": 1})
    assert col.document("a").get().exists
    with pytest.raises(RuntimeError):
        with db.batch() as batch:
            batch.set(col.document("b"), {"v": 1})
            raise RuntimeError("no commit")
    assert not col.document("b").get().exists
    batch = db.batch()
    for i in range(500):
        batch.set(col.document(f"d{i}"), {})
    with pytest.raises(ValueError):
        batch.set(col.document("one-too-many"), {})


def test_async_batch(arun, coll):
    async def body(client):
        col = client.collection(coll)
        await col.document("u").set({"n": 1})
        batch = client.batch()
        batch.create(col.document("c"), {"v": 1})
        batch.update(col.document("u"), {"n": docstore.Increment(1)})
        batch.delete(col.document("gone"))
        results = await batch.commit()
        assert len(results) == 3
        assert (await col.document("u").get()).to_dict() == {"n": 2}
        failing = client.batch()
        failing.set(col.document("new"), {"v": 1})
        failing.update(col.document("missing"), {"v": 1})
        with pytest.raises(exceptions.NotFound):
            await failing.commit()
        assert not (await col.document("new").get()).exists
        async with client.batch() as batch:
            batch.set(col.document("ctx"), {"v": 1})
        assert (await col.document("ctx").get()).exists

    arun(body)


def test_bulk_writer_writes_independently(db, coll):
    col = db.collection(coll)
    col.document("exists").set({"v": 0})
    results, failures = [], []
    lock = threading.Lock()
    writer = db.bulk_writer()

    def on_result(ref, result, bw):
        with lock:
            results.append(ref.id)

    def on_error(failure, bw):
        with lock:
            failures.append((failure.operation.reference.id, failure.code, failure.attempts))
        return False

    writer.on_write_result(on_result)
    writer.on_write_error(on_error)
    for i in range(50):
        writer.set(col.document(f"d{i}"), {"i": i})
    writer.create(col.document("exists"), {"v": 1})  # fails alone
    writer.update(col.document("exists"), {"v": docstore.Increment(1)})
    # writes to one document keep their order
    for _ in range(10):
        writer.update(col.document("d0"), {"i": docstore.Increment(1)})
    writer.delete(col.document("d1"))
    writer.close()
    assert failures == [("exists", "ALREADY_EXISTS", 1)]
    assert len(results) == 50 + 1 + 10 + 1
    assert col.document("exists").get().to_dict() == {"v": 1}
    assert col.document("d0").get().to_dict() == {"i": 10}
    assert not col.document("d1").get().exists
    assert col.document("d49").get().to_dict() == {"i": 49}
    with pytest.raises(RuntimeError):
        writer.set(col.document("late"), {})


def test_bulk_writer_retries_when_told(db, coll):
    col = db.collection(coll)
    attempts = []

    def on_error(failure, bw):
        attempts.append(failure.attempts)
        if failure.attempts == 2:
            col.document("later").set({"v": 0})  # now the update can succeed
        return failure.attempts < 5

    with db.bulk_writer() as writer:
        writer.on_write_error(on_error)
        writer.update(col.document("later"), {"v": docstore.Increment(1)})
    assert attempts == [1, 2]
    assert col.document("later").get().to_dict() == {"v": 1}


def test_async_client_bulk_writer(arun, coll):
    async def body(client):
        writer = client.bulk_writer()
        for i in range(5):
            writer.set(writer._client.document(f"{coll}/d{i}"), {"i": i})
        writer.close()
        assert writer._client._transport._http.is_closed  # the writer's own sync client
        return [(await client.collection(coll).document(f"d{i}").get()).exists for i in range(5)]

    assert arun(body) == [True] * 5


def _tree(db, coll):
    col = db.collection(coll)
    col.document("a").set({})
    col.document("a").collection("s").document("x").set({})
    col.document("a").collection("s").document("x").collection("t").document("y").set({})
    col.document("b").set({})
    db.collection(coll + "_other").document("keep").set({})
    return col


def test_recursive_delete(db, coll):
    col = _tree(db, coll)
    assert db.recursive_delete(col.document("a")) == 3
    assert not col.document("a").get().exists
    assert not col.document("a").collection("s").document("x").get().exists
    assert col.document("b").get().exists
    assert db.recursive_delete(col) == 1
    assert list(col.list_documents()) == []
    assert db.collection(coll + "_other").document("keep").get().exists


def test_async_recursive_delete(db, arun, coll):
    _tree(db, coll)

    async def body(client):
        return await client.recursive_delete(client.collection(coll))

    assert arun(body) == 4
    assert list(db.collection(coll).list_documents()) == []
    assert db.collection(coll + "_other").document("keep").get().exists
