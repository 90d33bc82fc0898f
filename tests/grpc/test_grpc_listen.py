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
