"""ListDocuments and ListCollectionIds through Google's Python SDK (docs/grpc.md, "What is
supported"): a collection's documents in name order with the "missing" ones (no document, but a
subcollection below that id) in their place, paged, and reads at a read_time: the listing as it
was then, from the version history; one older than the history is FAILED_PRECONDITION."""

import datetime

import pytest
from google.api_core import exceptions
from google.cloud import firestore


def sdk_client(monkeypatch, address: str) -> firestore.Client:
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", address)
    return firestore.Client(project="demo")


def test_list_documents_shows_missing_ones_in_name_order(
    monkeypatch, coll, firestore_emulator_host
):
    db = sdk_client(monkeypatch, firestore_emulator_host)
    c = db.collection(coll)
    c.document("b").set({"n": 2})
    c.document("A").set({"n": 1})
    c.document("m").collection("sub").document("x").set({"n": 3})
    c.document("z").collection("sub").document("y").collection("deep").document("w").set({})
    c.document("b").collection("sub").document("x").set({"n": 4})
    # Not listed: documents of other collections.
    db.collection(coll + "-other").document("q").set({})
    got = [ref.id for ref in c.list_documents()]
    assert got == ["A", "b", "m", "z"]
    # Pages of one: the SDK follows next_page_token.
    assert [ref.id for ref in c.list_documents(page_size=1)] == got
    # A subcollection lists the same way.
    assert [ref.id for ref in c.document("z").collection("sub").list_documents()] == ["y"]
    assert list(db.collection(coll + "-empty").list_documents()) == []


def test_list_documents_pages_and_masks(monkeypatch, coll, firestore_emulator_host):
    from google.cloud.firestore_v1.types import firestore as types

    db = sdk_client(monkeypatch, firestore_emulator_host)
    for i in range(5):
        db.collection(coll).document(f"d{i}").set({"i": i, "other": "x"})
    db.collection(coll).document("d2").collection("s").document("t").set({})
    api = db._firestore_api
    parent = "projects/demo/databases/(default)/documents"
    first = api.list_documents(
        request=types.ListDocumentsRequest(
            parent=parent, collection_id=coll, page_size=2, mask={"field_paths": ["i"]}
        ),
        metadata=db._rpc_metadata,
    )
    page = next(iter(first.pages))
    assert [d.name.rsplit("/", 1)[1] for d in page.documents] == ["d0", "d1"]
    assert page.next_page_token == "d1"
    assert dict(page.documents[0].fields).keys() == {"i"}
    rest = api.list_documents(
        request=types.ListDocumentsRequest(
            parent=parent, collection_id=coll, page_token="d1", show_missing=True
        ),
        metadata=db._rpc_metadata,
    )
    docs = list(rest)
    assert [d.name.rsplit("/", 1)[1] for d in docs] == ["d2", "d3", "d4"]
    assert docs[0].update_time is not None and "other" in docs[0].fields
    with pytest.raises(exceptions.InvalidArgument) as raised:
        list(
            api.list_documents(
                request=types.ListDocumentsRequest(parent=parent, collection_id=coll, order_by="i"),
                metadata=db._rpc_metadata,
            )
        )
    assert "__name__" in str(raised.value)


def test_reads_at_a_read_time(monkeypatch, coll, firestore_emulator_host):
    db = sdk_client(monkeypatch, firestore_emulator_host)
    doc = db.collection(coll).document("p")
    written = doc.collection("kids").document("k").set({})
    # At the newest commit (this write's time): the current listing (docs/grpc.md,
    # "Transactions and read times").
    then = written.update_time
    assert [c.id for c in doc.collections(read_time=then)] == ["kids"]
    assert [r.id for r in db.collection(coll).list_documents(read_time=then)] == ["p"]
    # Later writes: a listing at that time is still the listing as it was (the version history).
    doc.collection("pets").document("q").set({})
    db.collection(coll).document("o").set({"n": 1})
    doc.collection("kids").document("k").delete()
    assert [c.id for c in doc.collections()] == ["pets"]
    assert [c.id for c in doc.collections(read_time=then)] == ["kids"]
    assert [r.id for r in db.collection(coll).list_documents(read_time=then)] == ["p"]
    assert [r.id for r in db.collection(coll).list_documents()] == ["o", "p"]
    future = datetime.datetime.now(tz=datetime.UTC) + datetime.timedelta(minutes=5)
    with pytest.raises(exceptions.InvalidArgument) as raised:
        list(doc.collections(read_time=future))
    assert "in the future" in str(raised.value)
    # Older than the history (the retention is an hour, and the database is younger than two).
    past = datetime.datetime.now(tz=datetime.UTC) - datetime.timedelta(hours=2)
    with pytest.raises(exceptions.FailedPrecondition) as raised:
        list(doc.collections(read_time=past))
    assert "version history" in str(raised.value) or "version retention" in str(raised.value)
    with pytest.raises(exceptions.FailedPrecondition):
        list(db.collection(coll).list_documents(read_time=past))


def test_list_documents_in_a_transaction(monkeypatch, stack, coll, firestore_emulator_host):
    """ListDocuments with `transaction` reads in the held transaction: in a read-write one the
    documents listed stay locked until it ends (as a query's, docs/grpc.md), a read-only one
    reads its snapshot and locks nothing."""
    import psycopg
    from google.cloud.firestore_v1.types import firestore as types

    db = sdk_client(monkeypatch, firestore_emulator_host)
    api, database = db._firestore_api, db._database_string
    for i in range(2):
        db.collection(coll).document(f"d{i}").set({"i": i})
    db.collection(coll).document("gone").collection("s").document("t").set({})
    parent = f"{database}/documents"

    def listing(transaction, **extra):
        request = types.ListDocumentsRequest(
            parent=parent, collection_id=coll, transaction=transaction, **extra
        )
        return list(api.list_documents(request=request, metadata=db._rpc_metadata))

    def locked(doc_id):
        try:
            stack.sql(
                "select 1 from docstore.entities where database_id = '(default)' "
                "and path = %s for update nowait",
                f"{coll}/{doc_id}",
            )
            return False
        except psycopg.errors.LockNotAvailable:
            return True

    rw = api.begin_transaction(request={"database": database}, metadata=db._rpc_metadata)
    docs = listing(rw.transaction, show_missing=True)
    assert [d.name.rsplit("/", 1)[1] for d in docs] == ["d0", "d1", "gone"]
    assert docs[0].fields["i"].integer_value == 0
    assert locked("d0") and locked("d1")
    api.rollback(
        request={"database": database, "transaction": rw.transaction},
        metadata=db._rpc_metadata,
    )
    assert not locked("d0")

    ro = api.begin_transaction(
        request={"database": database, "options": {"read_only": {}}},
        metadata=db._rpc_metadata,
    )
    # Its snapshot is taken by its first read; a document written after it is not listed.
    first = listing(ro.transaction)
    db.collection(coll).document("d2").set({"i": 2})
    snapshot = listing(ro.transaction)
    assert snapshot == first
    assert [d.name.rsplit("/", 1)[1] for d in snapshot] == ["d0", "d1"]
    assert not locked("d0")

    # An unknown id: INVALID_ARGUMENT, as for every read in a transaction.
    with pytest.raises(exceptions.InvalidArgument) as raised:
        listing(b"\x00" * 16)
    assert "invalid or expired" in str(raised.value)


def test_list_documents_of_every_collection_under_a_parent(
    monkeypatch, coll, firestore_emulator_host
):
    """Without a `collection_id`, ListDocuments lists the documents of every collection directly
    under `parent`, in name order (collection id, then document id: `a` before `a-b`, though
    "a-b/..." sorts before "a/..." as text), paged with `{collection}/{id}` tokens; with
    `show_missing` also the missing documents, those of a collection holding no document
    directly included."""
    from google.cloud.firestore_v1.types import firestore as types

    db = sdk_client(monkeypatch, firestore_emulator_host)
    api = db._firestore_api
    top = db.collection(coll).document("p")
    top.set({"top": True})
    top.collection("b").document("y").set({"n": 2})
    top.collection("b").document("x").set({"n": 1})
    top.collection("a-b").document("w").set({"n": 3})
    top.collection("a").document("z").set({"n": 4})
    # Deeper documents are not listed; `c` holds none directly (c/m is missing).
    top.collection("b").document("x").collection("s").document("t").set({})
    top.collection("c").document("m").collection("d").document("n").set({})
    parent = top._document_path

    def names(docs):
        return [d.name.split("/documents/", 1)[1].removeprefix(f"{coll}/p/") for d in docs]

    def request(**extra):
        return types.ListDocumentsRequest(parent=parent, **extra)

    everything = list(api.list_documents(request=request(), metadata=db._rpc_metadata))
    assert names(everything) == ["a/z", "a-b/w", "b/x", "b/y"]
    assert everything[0].fields["n"].integer_value == 4
    missing = api.list_documents(request=request(show_missing=True), metadata=db._rpc_metadata)
    assert names(missing) == ["a/z", "a-b/w", "b/x", "b/y", "c/m"]
    # Pages of two: each token is the last `{collection}/{id}` of its page.
    pages = api.list_documents(request=request(page_size=2), metadata=db._rpc_metadata).pages
    got = [(names(page.documents), page.next_page_token) for page in pages]
    assert got == [(["a/z", "a-b/w"], "a-b/w"), (["b/x", "b/y"], "")]
    after = api.list_documents(request=request(page_token="a/z"), metadata=db._rpc_metadata)
    assert names(after) == ["a-b/w", "b/x", "b/y"]
    # A token without its collection: INVALID_ARGUMENT.
    with pytest.raises(exceptions.InvalidArgument) as raised:
        list(api.list_documents(request=request(page_token="z"), metadata=db._rpc_metadata))
    assert "{collection}/{id}" in str(raised.value)
