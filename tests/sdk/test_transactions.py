"""Transactions through the SDK: @transactional / @async_transactional, reads recorded and
checked at commit (a `verify` entry for documents read but not written), retries on ABORTED up
to max_attempts, reads after writes refused, read-only transactions, and the counter: 8 threads
x 25 increments end at exactly 200."""

from __future__ import annotations

import threading

import pytest

import docstore
from docstore import exceptions


def test_counter_8_threads_x_25_increments(stack, coll):
    attempts = []
    lock = threading.Lock()

    @docstore.transactional
    def increment(transaction, ref):
        with lock:
            attempts.append(1)
        snap = ref.get(transaction=transaction)
        transaction.update(ref, {"n": snap.get("n") + 1})

    with docstore.Client(stack.url, token=stack.admin_key) as setup:
        setup.collection(coll).document("counter").set({"n": 0})

    errors = []

    def worker():
        with docstore.Client(stack.url, token=stack.admin_key) as client:
            ref = client.collection(coll).document("counter")
            for _ in range(25):
                try:
                    increment(client.transaction(max_attempts=100), ref)
                except Exception as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with docstore.Client(stack.url, token=stack.admin_key) as check:
        assert check.collection(coll).document("counter").get().get("n") == 200
    # Each function run was one attempt; more than 200 means conflicts were retried.
    print(f"200 increments took {len(attempts)} attempts")


def test_async_counter(stack, coll):
    import asyncio

    @docstore.async_transactional
    async def increment(transaction, ref):
        snap = await ref.get(transaction=transaction)
        transaction.update(ref, {"n": snap.get("n") + 1})

    async def main():
        async with docstore.AsyncClient(stack.url, token=stack.admin_key) as client:
            ref = client.collection(coll).document("counter")
            await ref.set({"n": 0})

            async def worker():
                for _ in range(10):
                    await increment(client.transaction(max_attempts=100), ref)

            await asyncio.gather(*(worker() for _ in range(4)))
            return (await ref.get()).get("n")

    assert asyncio.run(main()) == 40


def test_conflicting_write_aborts_and_retries(db, coll):
    ref = db.collection(coll).document("a")
    ref.set({"n": 0})
    runs = []

    @docstore.transactional
    def bump(transaction):
        snap = ref.get(transaction=transaction)
        runs.append(snap.get("n"))
        if len(runs) == 1:
            ref.update({"n": 100})  # another writer, between the read and the commit
        transaction.update(ref, {"n": snap.get("n") + 1})

    bump(db.transaction())
    assert runs == [0, 100]
    assert ref.get().get("n") == 101


def test_max_attempts_exhausted_is_value_error_from_aborted(db, coll):
    ref = db.collection(coll).document("a")
    ref.set({"n": 0})
    runs = []

    @docstore.transactional
    def always_conflicts(transaction):
        snap = ref.get(transaction=transaction)
        runs.append(1)
        ref.update({"n": docstore.Increment(1)})
        transaction.set(ref, {"n": -1, "seen": snap.get("n")})

    with pytest.raises(ValueError, match="3 attempts") as info:
        always_conflicts(db.transaction(max_attempts=3))
    assert isinstance(info.value.__cause__, exceptions.Aborted)
    assert len(runs) == 3
    assert ref.get().to_dict() == {"n": 3}


def test_created_after_read_as_missing_aborts(db, coll):
    ref = db.collection(coll).document("new")
    runs = []

    @docstore.transactional
    def create_once(transaction):
        snap = ref.get(transaction=transaction)
        runs.append(snap.exists)
        if len(runs) == 1:
            ref.set({"by": "other"})
        transaction.set(ref, {"by": "transaction", "existed": snap.exists})

    create_once(db.transaction())
    assert runs == [False, True]
    assert ref.get().to_dict() == {"by": "transaction", "existed": True}


def test_read_but_not_written_document_is_verified(db, coll):
    """A document only read in the transaction and changed by someone else before the commit
    aborts it (the commit's verify entry), though the transaction writes another document."""
    col = db.collection(coll)
    source, target = col.document("source"), col.document("target")
    source.set({"v": 1})
    runs = []

    @docstore.transactional
    def copy(transaction):
        snap = source.get(transaction=transaction)
        runs.append(snap.get("v"))
        if len(runs) == 1:
            source.update({"v": 2})
        transaction.set(target, {"v": snap.get("v")})

    copy(db.transaction())
    assert runs == [1, 2]
    assert target.get().to_dict() == {"v": 2}


def test_deleted_after_read_aborts(db, coll):
    col = db.collection(coll)
    source, target = col.document("source"), col.document("target")
    source.set({"v": 1})
    runs = []

    @docstore.transactional
    def copy(transaction):
        snap = source.get(transaction=transaction)
        runs.append(snap.exists)
        if len(runs) == 1:
            source.delete()
        transaction.set(target, {"existed": snap.exists})

    copy(db.transaction())
    assert runs == [True, False]
    assert target.get().to_dict() == {"existed": False}


def test_get_all_and_transaction_get_record_reads(db, coll):
    col = db.collection(coll)
    a, b = col.document("a"), col.document("b")
    a.set({"v": 1})
    runs = []

    @docstore.transactional
    def read_two(transaction):
        snaps = list(transaction.get_all([a, b]))
        one = list(transaction.get(a))
        runs.append(([s.exists for s in snaps], one[0].get("v")))
        if len(runs) == 1:
            b.set({"v": 2})  # b was read as missing
        transaction.set(col.document("out"), {"n": len(runs)})

    read_two(db.transaction())
    assert runs == [([True, False], 1), ([True, True], 1)]
    assert col.document("out").get().to_dict() == {"n": 2}


def test_read_after_write_is_value_error(db, coll):
    ref = db.collection(coll).document("a")
    ref.set({"n": 0})

    @docstore.transactional
    def bad(transaction):
        transaction.set(ref, {"n": 1})
        ref.get(transaction=transaction)

    with pytest.raises(ValueError, match="read after write"):
        bad(db.transaction())
    assert ref.get().to_dict() == {"n": 0}


def test_error_in_function_rolls_back(db, coll):
    ref = db.collection(coll).document("a")

    @docstore.transactional
    def fails(transaction):
        transaction.set(ref, {"n": 1})
        raise KeyError("boom")

    transaction = db.transaction()
    with pytest.raises(KeyError):
        fails(transaction)
    assert not ref.get().exists and not transaction.in_progress


def test_read_only_transaction_refuses_writes(db, coll):
    ref = db.collection(coll).document("a")
    ref.set({"n": 0})

    @docstore.transactional
    def reads(transaction):
        return ref.get(transaction=transaction).get("n")

    assert reads(db.transaction(read_only=True)) == 0

    @docstore.transactional
    def writes(transaction):
        transaction.set(ref, {"n": 1})

    with pytest.raises(ValueError, match="read-only"):
        writes(db.transaction(read_only=True))
    assert ref.get().get("n") == 0


def test_transaction_write_results_and_all_write_kinds(db, coll):
    col = db.collection(coll)
    col.document("u").set({"n": 1})
    col.document("d").set({})

    @docstore.transactional
    def all_kinds(transaction):
        transaction.get(col.document("u"))
        transaction.create(col.document("c"), {"v": 1})
        transaction.set(col.document("s"), {"v": 2}, merge=True)
        transaction.update(col.document("u"), {"n": docstore.Increment(1)})
        transaction.delete(col.document("d"))
        return "done"

    transaction = db.transaction()
    assert all_kinds(transaction) == "done"
    assert transaction.write_results is not None and len(transaction.write_results) == 4
    assert col.document("u").get().get("n") == 2
    assert col.document("c").get().exists and not col.document("d").get().exists


def test_async_transaction_conflict_verify_and_errors(arun, coll):
    async def body(client):
        col = client.collection(coll)
        source, target = col.document("source"), col.document("target")
        await source.set({"v": 1})

        @docstore.async_transactional
        async def always(transaction):
            await source.get(transaction=transaction)
            await source.update({"v": docstore.Increment(1)})
            transaction.set(source, {"v": 0})

        with pytest.raises(ValueError, match="2 attempts") as info:
            await always(client.transaction(max_attempts=2))
        assert isinstance(info.value.__cause__, exceptions.Aborted)

        @docstore.async_transactional
        async def read_after_write(transaction):
            transaction.set(target, {"v": 9})
            await target.get(transaction=transaction)

        with pytest.raises(ValueError, match="read after write"):
            await read_after_write(client.transaction())
        assert not (await target.get()).exists
        assert (await source.get()).to_dict() == {"v": 3}

        runs = []

        @docstore.async_transactional
        async def copy(transaction):
            snap = await source.get(transaction=transaction)
            runs.append(snap.get("v"))
            if len(runs) == 1:
                await source.update({"v": 2})
            transaction.set(target, {"v": snap.get("v")})

        await copy(client.transaction())
        assert runs == [3, 2]
        assert (await target.get()).to_dict() == {"v": 2}

        @docstore.async_transactional
        async def many(transaction):
            snaps = [s async for s in await transaction.get_all([source, target])]
            one = [s async for s in await transaction.get(source)]
            transaction.set(col.document("out"), {"n": len(snaps) + len(one)})

        await many(client.transaction())
        assert (await col.document("out").get()).to_dict() == {"n": 3}

    arun(body)
