"""Transactions and read times over gRPC (docs/grpc.md, "Transactions and read times"), through
Google's Python SDK as an app uses them: `@firestore.transactional` retrying on ABORTED, read-only
transactions at one snapshot, rollback, ids that belong to their caller, `new_transaction` on a
read, and reads at a `read_time` (from the version history; FAILED_PRECONDITION older than it)."""

import datetime
import threading

import pytest
from conftest import grpc_sidecar
from google.api_core import exceptions
from google.cloud import firestore
from google.cloud.firestore_v1 import _helpers

# A well-formed id (16 bytes) that no transaction has.
UNKNOWN_ID = b"\0" * 16


def sdk_client(monkeypatch, address: str) -> firestore.Client:
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", address)
    return firestore.Client(project="demo")


def as_user(db: firestore.Client, stack, sub: str) -> list[tuple[str, str]]:
    """The call metadata of user `sub` (a JWT) instead of the SDK's `Bearer owner`."""
    return [
        *_helpers.metadata_with_prefix(db._database_string),
        ("authorization", f"Bearer {stack.token({'sub': sub})}"),
    ]


@pytest.mark.parametrize(("threads", "rounds"), [(4, 5), (8, 12)])
def test_transactional_increments_from_several_threads_end_exact(
    monkeypatch, coll, firestore_emulator_host, threads, rounds
):
    """Each attempt reads the counter in its transaction (locking it first, then reading) and
    writes it + 1: no update is lost, whatever the interleaving, and no read is ABORTED
    (Python's SDK does not retry a failed read): 8 threads starved a reader that read first
    and locked after, retried a bounded number of times."""
    db = sdk_client(monkeypatch, firestore_emulator_host)
    ref = db.collection(coll).document("counter")
    ref.set({"n": 0})
    failures = []

    @firestore.transactional
    def increment(tx):
        snap = ref.get(transaction=tx)
        tx.update(ref, {"n": snap.get("n") + 1})

    def worker():
        own = firestore.Client(project="demo")
        try:
            for _ in range(rounds):
                increment(own.transaction())
        except Exception as e:  # noqa: BLE001
            failures.append(repr(e))

    started = [threading.Thread(target=worker) for _ in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    assert failures == []
    assert ref.get().get("n") == threads * rounds


def test_a_commit_that_waits_past_the_lock_timeout_is_aborted_and_retried(monkeypatch, stack, coll):
    """A first transaction holds the document (it read it); the second writes it blindly: its
    commit waits for the lock past --transaction-lock-timeout-ms, is ABORTED, and the SDK
    begins again (with retry_transaction) and commits."""
    with grpc_sidecar(stack, "--dev-mode", "--transaction-lock-timeout-ms", "200") as address:
        db = sdk_client(monkeypatch, address)
        ref = db.collection(coll).document("a")
        ref.set({"by": "nobody"})
        holder = db.transaction()
        holder._begin()
        assert ref.get(transaction=holder).get("by") == "nobody"
        attempts = []

        @firestore.transactional
        def write(tx):
            attempts.append(tx._id)
            if len(attempts) == 2:
                holder._rollback()
            tx.set(ref, {"by": "writer"})

        write(db.transaction())
        assert len(attempts) == 2 and attempts[0] != attempts[1]
        assert ref.get().to_dict() == {"by": "writer"}


def test_a_read_only_transaction_reads_one_snapshot(monkeypatch, coll, firestore_emulator_host):
    db = sdk_client(monkeypatch, firestore_emulator_host)
    other = firestore.Client(project="demo")
    a, b = db.collection(coll).document("a"), db.collection(coll).document("b")
    a.set({"v": 1})
    b.set({"v": 1})
    seen = []

    @firestore.transactional
    def read(tx):
        seen.append(a.get(transaction=tx).get("v"))
        # Another client writes both documents and adds one.
        other.collection(coll).document("a").set({"v": 2})
        other.collection(coll).document("b").set({"v": 2})
        other.collection(coll).document("c").set({"v": 2})
        seen.append([s.get("v") for s in tx.get_all([a, b])])
        seen.append(sorted(s.get("v") for s in tx.get(db.collection(coll).limit(10))))
        seen.append(db.collection(coll).count().get(transaction=tx)[0][0].value)

    read(db.transaction(read_only=True))
    assert seen == [1, [1, 1], [1, 1], 2]
    assert a.get().get("v") == 2


def test_a_raised_exception_rolls_the_transaction_back(monkeypatch, coll, firestore_emulator_host):
    db = sdk_client(monkeypatch, firestore_emulator_host)
    ref = db.collection(coll).document("a")

    @firestore.transactional
    def create_then_fail(tx):
        tx.create(ref, {"v": 1})
        raise RuntimeError("rollback")

    with pytest.raises(RuntimeError):
        create_then_fail(db.transaction())
    assert not ref.get().exists
    # An unknown id: INVALID_ARGUMENT, as Firestore, saying the words Node's SDK retries on.
    with pytest.raises(exceptions.InvalidArgument) as raised:
        db._firestore_api.rollback(
            request={"database": db._database_string, "transaction": UNKNOWN_ID},
            metadata=db._rpc_metadata,
        )
    assert "invalid or expired" in str(raised.value)
    assert "transaction has expired" in str(raised.value)


def test_another_callers_transaction_is_refused(monkeypatch, stack, coll, firestore_emulator_host):
    db = sdk_client(monkeypatch, firestore_emulator_host)
    api, database = db._firestore_api, db._database_string
    alice, bob = as_user(db, stack, "alice"), as_user(db, stack, "bob")
    name = f"{database}/documents/{coll}/a"
    t = api.begin_transaction(request={"database": database}, metadata=alice).transaction
    write = {"update": {"name": name, "fields": {"by": {"string_value": "bob"}}}}
    for metadata in (bob, db._rpc_metadata):  # another user, and the admin
        with pytest.raises(exceptions.PermissionDenied):
            api.commit(
                request={"database": database, "writes": [write], "transaction": t},
                metadata=metadata,
            )
        with pytest.raises(exceptions.PermissionDenied):
            api.rollback(request={"database": database, "transaction": t}, metadata=metadata)
        with pytest.raises(exceptions.PermissionDenied):
            api.get_document(request={"name": name, "transaction": t}, metadata=metadata)
    # Still alice's, and still open.
    write["update"]["fields"]["by"]["string_value"] = "alice"
    api.commit(request={"database": database, "writes": [write], "transaction": t}, metadata=alice)
    assert db.collection(coll).document("a").get().get("by") == "alice"


def test_a_read_with_new_transaction_answers_its_id(monkeypatch, coll, firestore_emulator_host):
    """BatchGetDocuments and RunQuery with `new_transaction` begin a transaction, read in it and
    answer its id with their first response, as Node's SDK uses them."""
    db = sdk_client(monkeypatch, firestore_emulator_host)
    api, database = db._firestore_api, db._database_string
    ref = db.collection(coll).document("a")
    ref.set({"n": 1})
    answers = list(
        api.batch_get_documents(
            request={
                "database": database,
                "documents": [f"{database}/documents/{coll}/a"],
                "new_transaction": {"read_write": {}},
            },
            metadata=db._rpc_metadata,
        )
    )
    t = answers[0].transaction
    assert len(t) == 16 and answers[0].found.fields["n"].integer_value == 1
    write = {
        "update": {
            "name": f"{database}/documents/{coll}/a",
            "fields": {"n": {"integer_value": 2}},
        }
    }
    api.commit(
        request={"database": database, "writes": [write], "transaction": t},
        metadata=db._rpc_metadata,
    )
    assert ref.get().get("n") == 2
    answers = list(
        api.run_query(
            request={
                "parent": f"{database}/documents",
                "structured_query": {"from_": [{"collection_id": coll}]},
                "new_transaction": {"read_only": {}},
            },
            metadata=db._rpc_metadata,
        )
    )
    t = answers[0].transaction
    assert len(t) == 16 and [a.document.fields["n"].integer_value for a in answers] == [2]
    api.rollback(request={"database": database, "transaction": t}, metadata=db._rpc_metadata)
    # Ended: its id is now invalid.
    with pytest.raises(exceptions.InvalidArgument):
        api.rollback(request={"database": database, "transaction": t}, metadata=db._rpc_metadata)


def test_reads_at_a_read_time(monkeypatch, coll, firestore_emulator_host):
    """A read at a read time reads the documents as they were then (the version history,
    docs/grpc.md "Transactions and read times"), answered at that time, in or outside a
    read-only transaction; one older than the history is FAILED_PRECONDITION; a future one
    INVALID_ARGUMENT."""
    db = sdk_client(monkeypatch, firestore_emulator_host)
    ref = db.collection(coll).document("a")
    ref.set({"v": 1})
    read_time = ref.get().read_time
    snap = ref.get(read_time=read_time)
    assert snap.get("v") == 1 and snap.read_time == read_time
    assert [s.get("v") for s in db.collection(coll).stream(read_time=read_time)] == [1]
    assert db.collection(coll).count().get(read_time=read_time)[0][0].value == 1
    assert coll in [c.id for c in db.collections(read_time=read_time)]

    ref.set({"v": 2})
    other = db.collection(coll).document("b")
    other.set({"v": 5})
    assert ref.get().get("v") == 2
    snap = ref.get(read_time=read_time)
    assert snap.get("v") == 1 and snap.read_time == read_time
    assert not other.get(read_time=read_time).exists
    assert [s.get("v") for s in db.collection(coll).stream(read_time=read_time)] == [1]
    query = db.collection(coll).where(filter=firestore.FieldFilter("v", ">=", 1))
    assert [s.get("v") for s in query.stream(read_time=read_time)] == [1]
    assert [s.get("v") for s in query.stream()] == [2, 5]
    assert db.collection(coll).count().get(read_time=read_time)[0][0].value == 1
    assert db.collection(coll).sum("v").get(read_time=read_time)[0][0].value == 1
    # A deleted document reads as it was before its delete.
    ref.delete()
    assert ref.get(read_time=read_time).get("v") == 1
    # A read-only transaction at that time reads the same.
    api = db._firestore_api
    begun = api.begin_transaction(
        request={
            "database": db._database_string,
            "options": {"read_only": {"read_time": read_time}},
        },
        metadata=db._rpc_metadata,
    )
    got = list(
        api.batch_get_documents(
            request={
                "database": db._database_string,
                "documents": [ref._document_path, other._document_path],
                "transaction": begun.transaction,
            },
            metadata=db._rpc_metadata,
        )
    )
    assert got[0].found.fields["v"].integer_value == 1 and got[1].missing
    api.rollback(
        request={"database": db._database_string, "transaction": begun.transaction},
        metadata=db._rpc_metadata,
    )

    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=2)
    reads = [
        lambda: ref.get(read_time=past),
        lambda: list(db.collection(coll).stream(read_time=past)),
        lambda: db.collection(coll).count().get(read_time=past),
        lambda: list(db.collections(read_time=past)),
    ]
    for read in reads:
        with pytest.raises(exceptions.FailedPrecondition) as raised:
            read()
        assert "version history" in str(raised.value) or "version retention" in str(raised.value)

    future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    with pytest.raises(exceptions.InvalidArgument) as raised:
        ref.get(read_time=future)
    assert "in the future" in str(raised.value)
