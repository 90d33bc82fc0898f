"""Kindless queries over gRPC (docs/grpc.md, docs/query.md section 2): RunQuery with an empty
collection_id and all_descendants returns every document under its parent in name order, which
is what python-firestore's `recursive()` and `recursive_delete` send (bounded by `__name__`
cursors, the end one's collection id ending in U+0000); what a kindless query may not hold is
INVALID_ARGUMENT, and a caller under rules is PERMISSION_DENIED."""

import pytest
from google.api_core import exceptions
from google.cloud import firestore

MIN_ID = "__id-9223372036854775808__"


def sdk_client(monkeypatch, address: str) -> firestore.Client:
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", address)
    return firestore.Client(project="demo")


def seed(db, coll):
    paths = [f"{coll}/B", f"{coll}/B/s/x", f"{coll}/_z", f"{coll}/m/t/y/u/z", f"{coll}0/q"]
    for path in paths:
        db.document(path).set({"p": path})
    return paths


def test_recursive_query_and_delete(monkeypatch, coll, firestore_emulator_host):
    db = sdk_client(monkeypatch, firestore_emulator_host)
    paths = seed(db, coll)
    got = [snap.reference.path for snap in db.collection(coll).recursive().stream()]
    assert got == paths[:4]
    nested = [snap.reference.path for snap in db.collection(coll, "m", "t").recursive().stream()]
    assert nested == [f"{coll}/m/t/y/u/z"]
    assert db.recursive_delete(db.collection(coll)) == 4
    assert [s.reference.path for s in db.collection(coll).recursive().stream()] == []
    assert db.document(f"{coll}0/q").get().exists


def test_recursive_query_at_a_read_time(monkeypatch, coll, firestore_emulator_host):
    """recursive() at a read_time answers every document under the collection as it was then
    (the version history, docs/storage.md), in name order, not the current ones and not
    nothing."""
    db = sdk_client(monkeypatch, firestore_emulator_host)
    paths = seed(db, coll)
    then = db.document(paths[0]).get().read_time
    db.document(f"{coll}/B/s/x").delete()
    db.document(f"{coll}/B").set({"p": "changed"})
    db.document(f"{coll}/C").set({"p": "new"})
    old = db.collection(coll).recursive().stream(read_time=then)
    assert [(s.reference.path, s.get("p")) for s in old] == [(p, p) for p in paths[:4]]
    nested = db.collection(coll, "B", "s").recursive().stream(read_time=then)
    assert [s.reference.path for s in nested] == [f"{coll}/B/s/x"]
    now = [s.reference.path for s in db.collection(coll).recursive().stream()]
    assert now == [f"{coll}/B", f"{coll}/C", f"{coll}/_z", f"{coll}/m/t/y/u/z"]
    # The same in a read-only transaction held at that time.
    api = db._firestore_api
    begun = api.begin_transaction(
        request={"database": db._database_string, "options": {"read_only": {"read_time": then}}},
        metadata=db._rpc_metadata,
    )
    from google.cloud.firestore_v1.types import firestore as types

    request = types.RunQueryRequest(
        parent=f"{db._database_string}/documents/{coll}/B",
        structured_query={"from_": [{"collection_id": "", "all_descendants": True}]},
        transaction=begun.transaction,
    )
    held = api.run_query(request=request, metadata=db._rpc_metadata)
    names = [r.document.name.split("/documents/")[1] for r in held if r.document.name]
    assert names == [f"{coll}/B/s/x"]
    api.rollback(
        request={"database": db._database_string, "transaction": begun.transaction},
        metadata=db._rpc_metadata,
    )


def run(db, query, parent=None, metadata=None):
    from google.cloud.firestore_v1.types import firestore as types

    request = types.RunQueryRequest(
        parent=parent or "projects/demo/databases/(default)/documents",
        structured_query=query,
    )
    return list(db._firestore_api.run_query(request=request, metadata=metadata or db._rpc_metadata))


def test_kindless_bad_input_is_invalid_argument(monkeypatch, coll, firestore_emulator_host):
    db = sdk_client(monkeypatch, firestore_emulator_host)
    db.document(f"{coll}/d").set({"a": 1})
    ref = f"projects/demo/databases/(default)/documents/{coll}"
    kindless = {"from_": [{"collection_id": "", "all_descendants": True}]}
    bad = [
        ({"from_": [{"collection_id": ""}]}, "all_descendants"),
        (
            {
                **kindless,
                "where": {
                    "field_filter": {
                        "field": {"field_path": "a"},
                        "op": "EQUAL",
                        "value": {"integer_value": 1},
                    }
                },
            },
            "__name__",
        ),
        ({**kindless, "order_by": [{"field": {"field_path": "a"}}]}, "ordered by __name__ only"),
        # U+0000 ends a collection id only in the recursive() end position.
        (
            {
                **kindless,
                "order_by": [{"field": {"field_path": "__name__"}}],
                "start_at": {"values": [{"reference_value": f"{ref}\0/d"}], "before": True},
            },
            "U+0000",
        ),
    ]
    for query, words in bad:
        with pytest.raises(exceptions.InvalidArgument) as raised:
            run(db, query)
        assert words in str(raised.value), (query, str(raised.value))
    assert db.document(f"{coll}/d").get().to_dict() == {"a": 1}


def test_kindless_query_is_for_the_admin_only(monkeypatch, stack, coll, firestore_emulator_host):
    db = sdk_client(monkeypatch, firestore_emulator_host)
    db.document(f"{coll}/d").set({"a": 1})
    token = stack.token({"sub": "u1"})
    metadata = [(k, v) for k, v in db._rpc_metadata if k != "authorization"] + [
        ("authorization", f"Bearer {token}")
    ]
    with pytest.raises(exceptions.PermissionDenied) as raised:
        run(db, {"from_": [{"collection_id": "", "all_descendants": True}]}, metadata=metadata)
    assert "administrators only" in str(raised.value)
