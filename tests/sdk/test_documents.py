"""Documents and collections through the SDK, sync and async: create, set (replace, merge,
merge with field paths), update (field paths, transforms, DELETE_FIELD), delete, write options
(exists / last_update_time), get (missing, field_paths), DocumentSnapshot, add, document(),
list_documents, collections(), get_all."""

from __future__ import annotations

import datetime

import pytest

import docstore
from docstore import exceptions


def test_create_get_snapshot(db, coll):
    ref = db.collection(coll).document("a")
    result = ref.create({"name": "Zola", "address": {"zip": "94103"}})
    assert isinstance(result.update_time, datetime.datetime)
    snap = ref.get()
    assert snap.exists and snap.id == "a" and snap.reference == ref
    assert snap.to_dict() == {"name": "Zola", "address": {"zip": "94103"}}
    assert snap.get("address.zip") == "94103"
    assert snap.get(docstore.FieldPath("address", "zip")) == "94103"
    assert snap.create_time == snap.update_time == result.update_time
    assert snap.update_time.tzinfo is not None
    with pytest.raises(KeyError):
        snap.get("address.city")
    # to_dict() is a copy
    snap.to_dict()["name"] = "changed"
    assert snap.get("name") == "Zola"
    with pytest.raises(exceptions.AlreadyExists):
        ref.create({"name": "again"})
    assert ref.get().to_dict()["name"] == "Zola"


def test_missing_document_snapshot(db, coll):
    snap = db.collection(coll).document("none").get()
    assert not snap.exists
    assert snap.to_dict() is None and snap.get("a") is None
    assert snap.create_time is None and snap.update_time is None
    assert snap.id == "none"


def test_set_replace_merge_and_merge_fields(db, coll):
    ref = db.collection(coll).document("s")
    ref.set({"a": 1, "m": {"x": 1, "y": 2}, "keep": True})
    ref.set({"b": 2})
    assert ref.get().to_dict() == {"b": 2}
    ref.set({"m": {"x": 10}, "c": docstore.SERVER_TIMESTAMP}, merge=True)
    got = ref.get().to_dict()
    assert got["b"] == 2 and got["m"] == {"x": 10}
    assert isinstance(got["c"], datetime.datetime)
    ref.set({"m": {"y": 5}, "gone": docstore.DELETE_FIELD, "b": docstore.DELETE_FIELD}, merge=True)
    got = ref.get().to_dict()
    assert "b" not in got and got["m"] == {"x": 10, "y": 5}
    # merge with field paths: only those fields are written
    ref.set({"m": {"x": 99, "y": 99}, "b": 3, "ignored": 1}, merge=["m.x", "b"])
    got = ref.get().to_dict()
    assert got["m"] == {"x": 99, "y": 5} and got["b"] == 3 and "ignored" not in got
    # a listed field whose value is a map replaces the stored map (as in Firestore)
    result = ref.set({"m": {"z": 1}, "b": 4}, merge=["m"])
    got = ref.get()
    assert got.get("m") == {"z": 1} and got.get("b") == 3
    assert got.update_time == result.update_time
    with pytest.raises(ValueError):
        ref.set({"a": 1}, merge=["not_in_data"])
    with pytest.raises(ValueError):
        ref.set({"a": docstore.DELETE_FIELD})


def test_update_paths_transforms_and_missing(db, coll):
    ref = db.collection(coll).document("u")
    ref.set({"n": 1, "arr": [1, 2], "hi": 5, "lo": 5, "m": {"a": 1, "b": 2}, "weird key": 0})
    ref.update(
        {
            "n": docstore.Increment(2),
            "arr": docstore.ArrayUnion([2, 3]),
            "hi": docstore.Maximum(9),
            "lo": docstore.Minimum(1),
            "m.a": docstore.DELETE_FIELD,
            "m.c": 3,
            docstore.FieldPath("weird key"): docstore.Increment(1.5),
            "`x.y`": "quoted",
            "t": docstore.SERVER_TIMESTAMP,
        }
    )
    got = ref.get().to_dict()
    assert got["n"] == 3 and got["arr"] == [1, 2, 3] and got["hi"] == 9 and got["lo"] == 1
    assert got["m"] == {"b": 2, "c": 3} and got["weird key"] == 1.5 and got["x.y"] == "quoted"
    assert isinstance(got["t"], datetime.datetime)
    ref.update({"arr": docstore.ArrayRemove([1, 3])})
    assert ref.get().get("arr") == [2]
    with pytest.raises(exceptions.NotFound):
        db.collection(coll).document("missing").update({"a": 1})
    assert not db.collection(coll).document("missing").get().exists
    for bad in ({"a..b": 1}, {"`a": 1}, {}, {"a": 1, "a.b": 2}):
        with pytest.raises(ValueError):
            ref.update(bad)


def test_delete_and_write_options(db, coll):
    ref = db.collection(coll).document("d")
    first = ref.set({"v": 1})
    assert isinstance(ref.delete(), datetime.datetime)
    assert not ref.get().exists
    ref.delete()  # deleting a missing document is no error
    with pytest.raises(exceptions.FailedPrecondition):
        ref.delete(option=db.write_option(exists=True))
    second = ref.set({"v": 2})
    stale = db.write_option(last_update_time=first.update_time)
    with pytest.raises(exceptions.FailedPrecondition):
        ref.update({"v": 3}, option=stale)
    with pytest.raises(exceptions.FailedPrecondition):
        ref.delete(option=stale)
    assert ref.get().get("v") == 2
    ref.update({"v": 3}, option=db.write_option(last_update_time=second.update_time))
    assert ref.get().get("v") == 3
    ref.delete(option=db.write_option(exists=True))
    assert not ref.get().exists
    with pytest.raises(TypeError):
        db.write_option(exists=True, last_update_time=second.update_time)
    with pytest.raises(TypeError):
        db.write_option(bogus=1)


def test_get_field_paths(db, coll):
    ref = db.collection(coll).document("f")
    ref.set({"a": 1, "b": {"c": 2, "d": 3}, "e": 4})
    snap = ref.get(field_paths=["a", "b.c", "nope"])
    assert snap.to_dict() == {"a": 1, "b": {"c": 2}}


def test_references_and_paths(db, coll):
    col = db.collection(coll)
    assert col.id == coll and col.path == coll and col.parent is None
    sub = col.document("x").collection("sub")
    assert sub.path == f"{coll}/x/sub" and sub.parent == col.document("x")
    assert db.collection(coll, "x", "sub") == sub == db.collection(f"{coll}/x/sub")
    assert db.document(coll, "x") == db.document(f"{coll}/x")
    auto = col.document()
    assert len(auto.id) == 20 and auto.parent == col
    for bad in (f"{coll}/x", "a//b"):
        with pytest.raises(ValueError):
            db.collection(bad)
    for bad in (coll, f"{coll}/x/sub", "a//b"):
        with pytest.raises(ValueError):
            db.document(bad)


def test_ids_with_any_characters(db, coll):
    ref = db.collection(coll).document("id with spaces, ?#% and é")
    ref.set({"ok": True})
    assert ref.get().to_dict() == {"ok": True}
    assert [r.id for r in db.collection(coll).list_documents()] == [ref.id]


def test_add_and_list_documents(db, coll):
    col = db.collection(coll)
    update_time, ref = col.add({"n": 1})
    assert isinstance(update_time, datetime.datetime) and len(ref.id) == 20
    assert ref.get().to_dict() == {"n": 1}
    _, named = col.add({"n": 2}, document_id="named")
    assert named.id == "named"
    with pytest.raises(exceptions.AlreadyExists):
        col.add({"n": 3}, document_id="named")
    listed = list(col.list_documents())
    assert sorted(r.id for r in listed) == sorted([ref.id, "named"])
    assert all(isinstance(r, docstore.DocumentReference) for r in listed)


def test_get_all_in_order_with_missing(db, coll):
    col = db.collection(coll)
    col.document("a").set({"v": "a"})
    col.document("c").set({"v": "c", "w": 1})
    refs = [col.document("c"), col.document("b"), col.document("a"), col.document("c")]
    snaps = list(db.get_all(refs))
    assert [s.id for s in snaps] == ["c", "b", "a", "c"]
    assert [s.exists for s in snaps] == [True, False, True, True]
    assert snaps[0].to_dict() == {"v": "c", "w": 1}
    assert snaps[0].read_time is not None and snaps[0].read_time == snaps[2].read_time
    assert list(db.get_all([col.document("c")], field_paths=["w"]))[0].to_dict() == {"w": 1}


def test_collections(db, coll):
    db.collection(coll).document("p").collection("s1").document("x").set({})
    db.collection(coll).document("p").collection("s2").document("y").set({})
    db.collection(coll).document("q").set({})
    assert [c.id for c in db.collection(coll).document("p").collections()] == ["s1", "s2"]
    assert coll in [c.id for c in db.collections()]
    root = next(c for c in db.collections() if c.id == coll)
    assert isinstance(root, docstore.CollectionReference)


def test_async_documents(arun, coll):
    async def body(client):
        col = client.collection(coll)
        ref = col.document("a")
        await ref.create({"n": 1, "m": {"x": 1}})
        with pytest.raises(exceptions.AlreadyExists):
            await ref.create({"n": 1})
        await ref.set({"m": {"y": 2}}, merge=True)
        await ref.set({"m": {"x": 5, "z": 9}}, merge=["m.x"])
        await ref.update({"n": docstore.Increment(1), "m.y": docstore.DELETE_FIELD})
        snap = await ref.get()
        assert snap.to_dict() == {"n": 2, "m": {"x": 5}}
        stale = client.write_option(last_update_time=datetime.datetime(2001, 1, 1))
        with pytest.raises(exceptions.FailedPrecondition):
            await ref.update({"n": 0}, option=stale)
        current = client.write_option(last_update_time=snap.update_time)
        await ref.update({"n": 0}, option=current)
        with pytest.raises(exceptions.NotFound):
            await col.document("none").update({"a": 1})
        _, added = await col.add({"k": 1})
        assert (await added.get()).to_dict() == {"k": 1}
        listed = sorted([r.id async for r in col.list_documents()])
        assert listed == sorted(["a", added.id])
        assert (await ref.get(field_paths=["n"])).to_dict() == {"n": 0}
        await ref.delete()
        assert not (await ref.get()).exists
        with pytest.raises(exceptions.FailedPrecondition):
            await ref.delete(option=client.write_option(exists=True))
        assert isinstance(ref, docstore.AsyncDocumentReference)

    arun(body)


def test_async_get_all_and_collections(arun, coll):
    async def body(client):
        col = client.collection(coll)
        ref = col.document("a")
        await ref.set({"n": 1})
        snaps = [s async for s in client.get_all([ref, col.document("none")])]
        assert [s.exists for s in snaps] == [True, False]
        assert snaps[0].to_dict() == {"n": 1}
        await ref.collection("sub").document("x").set({})
        assert [c.id async for c in ref.collections()] == ["sub"]
        assert coll in [c.id async for c in client.collections()]

    arun(body)
