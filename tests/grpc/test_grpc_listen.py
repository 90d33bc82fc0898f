"""Listen over gRPC (docs/grpc.md, "Listen") through Google's own Python SDK,
google-cloud-firestore, pointed at a sidecar with live queries by FIRESTORE_EMULATOR_HOST:
`DocumentReference.on_snapshot` sees a document appear, change and go, and
`Query.on_snapshot` on an ordered query sees its documents ADDED, MODIFIED and REMOVED (a
document leaving the query and a deleted one), as the SDK computes them from the stream."""

import queue
import uuid

import pytest
from conftest import free_port, own_sidecar
from google.cloud import firestore

# How long one snapshot may take before the test reports a hang (not a performance bound).
HANG = 60


@pytest.fixture(scope="module")
def live_grpc(stack):
    """A sidecar of this module's own with live queries (a slot of its own) and the gRPC
    front end in development mode: its `host:port`."""
    address = f"127.0.0.1:{free_port()}"
    slot = "grpc_listen_" + uuid.uuid4().hex[:8]
    with own_sidecar(stack, "--grpc-listen", address, "--dev-mode", slot=slot):
        yield address


@pytest.fixture
def db(monkeypatch, live_grpc) -> firestore.Client:
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", live_grpc)
    return firestore.Client(project="demo")


def test_document_on_snapshot(db, coll):
    ref = db.collection(coll).document("one")
    seen: queue.Queue = queue.Queue()
    watch = ref.on_snapshot(lambda docs, changes, read_time: seen.put((docs, read_time)))
    try:
        # A missing document: a snapshot without documents (as against Firestore).
        docs, first_read = seen.get(timeout=HANG)
        assert docs == []

        ref.set({"n": 1})
        docs, read_time = seen.get(timeout=HANG)
        assert docs[0].exists and docs[0].to_dict() == {"n": 1}
        assert read_time >= first_read and read_time >= docs[0].update_time

        ref.update({"n": 2})
        docs, _ = seen.get(timeout=HANG)
        assert docs[0].to_dict() == {"n": 2}

        ref.delete()
        docs, _ = seen.get(timeout=HANG)
        assert docs == []
    finally:
        watch.unsubscribe()


def test_create_time_is_the_documents(db, coll):
    """RunQuery and Listen (its first result and a later change) send a document's
    create_time, the time of its first write, not its update time (as Firestore)."""
    ref = db.collection(coll).document("a")
    created = ref.set({"n": 1}).update_time
    updated = ref.set({"n": 2}).update_time
    assert updated > created
    (snap,) = db.collection(coll).get()
    assert (snap.create_time, snap.update_time) == (created, updated)
    assert ref.get().create_time == created
    seen: queue.Queue = queue.Queue()
    watch = db.collection(coll).on_snapshot(lambda docs, changes, read_time: seen.put(docs))
    try:
        (doc,) = seen.get(timeout=HANG)
        assert (doc.create_time, doc.update_time) == (created, updated)
        later = ref.set({"n": 3}).update_time
        (doc,) = seen.get(timeout=HANG)
        assert doc.to_dict() == {"n": 3}
        assert (doc.create_time, doc.update_time) == (created, later)
    finally:
        watch.unsubscribe()


def test_query_on_snapshot_added_modified_removed(db, coll):
    col = db.collection(coll)
    col.document("a").set({"n": 1})
    col.document("b").set({"n": 2})
    query = col.where(filter=firestore.FieldFilter("n", ">=", 1)).order_by("n")
    seen: queue.Queue = queue.Queue()

    def on_snapshot(docs, changes, read_time):
        seen.put(
            (
                [d.id for d in docs],
                [(c.type.name, c.document.id) for c in changes],
            )
        )

    watch = query.on_snapshot(on_snapshot)
    try:
        assert seen.get(timeout=HANG) == (["a", "b"], [("ADDED", "a"), ("ADDED", "b")])

        col.document("c").set({"n": 3})
        assert seen.get(timeout=HANG) == (["a", "b", "c"], [("ADDED", "c")])

        col.document("a").set({"n": 5})
        assert seen.get(timeout=HANG) == (["b", "c", "a"], [("MODIFIED", "a")])

        # Leaves the query, still exists.
        col.document("b").set({"n": 0})
        assert seen.get(timeout=HANG) == (["c", "a"], [("REMOVED", "b")])

        col.document("c").delete()
        assert seen.get(timeout=HANG) == (["a"], [("REMOVED", "c")])
    finally:
        watch.unsubscribe()


class RawListen:
    """One Listen call through the SDK's own transport, its requests fed by hand: the
    protocol's responses as they come (`ListenResponse` protobufs)."""

    def __init__(self, db: firestore.Client):
        self.requests: queue.Queue = queue.Queue()
        self.call = db._firestore_api._transport.listen(
            iter(self.requests.get, None), metadata=db._rpc_metadata
        )

    def add(self, db: firestore.Client, coll: str, **target) -> None:
        from google.cloud.firestore_v1.types import firestore as types
        from google.cloud.firestore_v1.types import query as query_types

        structured = query_types.StructuredQuery(
            from_=[query_types.StructuredQuery.CollectionSelector(collection_id=coll)]
        )
        self.requests.put(
            types.ListenRequest(
                database=db._database_string,
                add_target=types.Target(
                    target_id=1,
                    query=types.Target.QueryTarget(
                        parent=db._database_string + "/documents", structured_query=structured
                    ),
                    **target,
                ),
            )
        )

    def until_current(self) -> list:
        """The responses up to and with the CURRENT of target 1."""
        seen = []
        for response in self.call:
            pb = type(response).pb(response)
            seen.append(pb)
            change = pb.target_change
            if pb.WhichOneof("response_type") == "target_change" and (
                change.target_change_type == change.CURRENT
            ):
                return seen
        raise AssertionError(f"the stream ended before CURRENT: {seen}")

    def close(self) -> None:
        self.requests.put(None)
        self.call.cancel()


def kinds(responses: list) -> list[str]:
    """Each response as `document`, `filter <count>` or its target change's type."""
    out = []
    for pb in responses:
        kind = pb.WhichOneof("response_type")
        if kind == "target_change":
            out.append(
                type(pb.target_change).TargetChangeType.Name(pb.target_change.target_change_type)
            )
        elif kind == "filter":
            out.append(f"filter {pb.filter.count}")
        else:
            out.append(kind)
    return out


@pytest.mark.parametrize("expected_count", [None, 1])
def test_a_resume_with_expected_count_gets_the_true_count(db, coll, expected_count):
    """A target resumed within the retention with an `expected_count` (the count of
    documents the SDK holds) gets an ExistenceFilter with the target's true count just before
    its CURRENT: here 3 documents at the token, one more written while the client was away
    (replayed), so 4 against the 1 it says; the client can tell it holds the wrong set and
    listen again. Without `expected_count` no filter comes (the resume as before)."""
    col = db.collection(coll)
    for name in ("a", "b", "c"):
        col.document(name).set({"n": 1})
    first = RawListen(db)
    first.add(db, coll)
    responses = first.until_current()
    first.close()
    assert kinds(responses) == [
        "ADD",
        "document_change",
        "document_change",
        "document_change",
        "CURRENT",
    ]
    token = responses[-1].target_change.resume_token
    # Written while the client is away; another listener seeing it shows the sidecar has
    # handled it (so the resume replays it rather than meeting it later).
    seen: queue.Queue = queue.Queue()
    watch = col.on_snapshot(lambda docs, changes, read_time: seen.put(len(docs)))
    try:
        assert seen.get(timeout=HANG) == 3
        col.document("d").set({"n": 2})
        assert seen.get(timeout=HANG) == 4
    finally:
        watch.unsubscribe()

    target = {"resume_token": token}
    if expected_count is not None:
        target["expected_count"] = expected_count
    again = RawListen(db)
    try:
        again.add(db, coll, **target)
        resumed = kinds(again.until_current())
    finally:
        again.close()
    # The replay of what was missed, no RESET, then (asked for) the true count, CURRENT.
    expected = ["ADD", "document_change"]
    expected += ["filter 4"] if expected_count is not None else []
    assert resumed == expected + ["CURRENT"]
