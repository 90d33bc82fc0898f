"""The synchronous Client (python-firestore's ``client.Client``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import httpx

from docstore._http import Transport
from docstore.base_client import BaseClient
from docstore.base_document import DocumentSnapshot
from docstore.batch import WriteBatch
from docstore.bulk_writer import BulkWriter, BulkWriterOptions
from docstore.collection import CollectionReference
from docstore.document import DocumentReference
from docstore.query import CollectionGroup
from docstore.sql import SqlQuery
from docstore.transaction import Transaction

MAX_BATCH_GET = 1000


class Client(BaseClient):
    """A client of one database of a pg_docstore sidecar, over HTTP.

    ``url`` defaults to ``$DOCSTORE_URL`` (else ``http://127.0.0.1:8787``); ``token`` to
    ``$DOCSTORE_TOKEN``, else ``$DOCSTORE_ADMIN_KEY`` (the admin key bypasses security rules,
    like Google's server SDKs), else none (unauthenticated). ``token`` may be a callable
    returning a fresh JWT: called before the first request and after a 401. ``http_client``:
    an ``httpx.Client`` to send requests with (the caller closes it).
    """

    _document_class = DocumentReference
    _collection_class = CollectionReference

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | Callable[[], str] | None = None,
        database: str = "(default)",
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(url, token=token, database=database)
        self._transport = Transport(self._url, self._token, http_client)

    def close(self) -> None:
        """Close the HTTP connections the client opened (listeners are not stopped)."""
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def sql(self, text: str) -> SqlQuery:
        """A query in the text dialect (docs/query.md): ``stream()``, ``get()``."""
        return SqlQuery(self, text)

    def collection_group(self, collection_id: str) -> CollectionGroup:
        """A query over every collection named ``collection_id``, at any depth."""
        if "/" in collection_id:
            raise ValueError(f"collection id {collection_id!r} must not contain '/'")
        return CollectionGroup(self.collection(collection_id), all_descendants=True)

    def _commit(self, writes: list[dict[str, Any]], transaction: bool = False) -> Any:
        body: dict[str, Any] = {"writes": writes}
        if transaction:
            body["transaction"] = True
        return self._transport.request(
            "POST", self._database_route(":commit"), json=body, idempotent=False
        )

    def _batch_get(self, paths: list[str]) -> Any:
        """``:batchGet`` of up to 1000 paths: ``{"readTime", "documents"}``."""
        return self._transport.request(
            "POST", self._database_route(":batchGet"), json={"documents": paths}, idempotent=True
        )

    def get_all(
        self,
        references: Iterable[DocumentReference],
        field_paths: Any = None,
        transaction: Any = None,
        **_: Any,
    ) -> Iterator[DocumentSnapshot]:
        """Snapshots of several documents (missing ones with ``exists`` False), in the order
        given; each group of up to 1000 is read at one snapshot."""
        refs = list(references)
        if transaction is not None:
            yield from transaction._get_all(refs, field_paths)
            return
        for start in range(0, len(refs), MAX_BATCH_GET):
            chunk = refs[start : start + MAX_BATCH_GET]
            answer = self._batch_get([r.path for r in chunk])
            yield from self._batch_get_snapshots(chunk, answer, field_paths)

    def _collections_under(self, parent: str) -> Iterator[CollectionReference]:
        answer = self._transport.request(
            "POST",
            self._database_route(":listCollectionIds"),
            json={"parent": parent},
            idempotent=True,
        )
        prefix = (parent,) if parent else ()
        for collection_id in answer.get("collectionIds") or []:
            yield self.collection(*prefix, collection_id)

    def explain(self, query: Any, *, run: bool = False) -> dict[str, Any]:
        """The plan of ``query`` as a dict (docs/query.md, section 7: the indexes, key ranges
        and join of each branch); with ``run``, the query is also run and ``"analyze"`` counts
        what it read. ``query``: a Query, CollectionReference, CollectionGroup, aggregation
        query or ``client.sql(...)``. Admin key only (``PermissionDenied`` otherwise). Not in
        python-firestore (its ``explain_options``): the shape differs, docs/sdk-python.md."""
        return self._transport.request(
            "POST",
            self._database_route(":explain"),
            json=self._explain_body(query, run),
            idempotent=True,
        )

    def collections(self) -> Iterator[CollectionReference]:
        """The root collections holding at least one document (admin key only)."""
        return self._collections_under("")

    def batch(self) -> WriteBatch:
        """A WriteBatch: writes applied atomically by ``commit()``."""
        return WriteBatch(self)

    def transaction(self, max_attempts: int = 5, read_only: bool = False) -> Transaction:
        """A Transaction; run a function in it with ``@docstore.transactional``."""
        return Transaction(self, max_attempts=max_attempts, read_only=read_only)

    def bulk_writer(self, options: BulkWriterOptions | None = None) -> BulkWriter:
        """A BulkWriter: many independent writes sent in parallel."""
        return BulkWriter(self, options)

    def recursive_delete(
        self,
        reference: CollectionReference | DocumentReference,
        *,
        bulk_writer: BulkWriter | None = None,
        chunk_size: int = 5000,
    ) -> int:
        """Delete a document or a collection with every document below it (subcollections
        found through ``collections()``, so the admin key is needed); returns how many
        documents were deleted. Not atomic; ``chunk_size`` is accepted for python-firestore's
        signature (documents are listed as a stream)."""
        writer = bulk_writer if bulk_writer is not None else self.bulk_writer()
        try:
            count = self._recursive_delete(reference, writer)
            writer.flush()
        finally:
            if bulk_writer is None:
                writer.close()
        return count

    def _recursive_delete(
        self, reference: Any, writer: BulkWriter, exists: bool | None = None
    ) -> int:
        if isinstance(reference, DocumentReference):
            count = 0
            for sub in reference.collections():
                count += self._recursive_delete(sub, writer)
            if exists if exists is not None else reference.get().exists:
                count += 1
            writer.delete(reference)
            return count
        if isinstance(reference, CollectionReference):
            count = 0
            for doc in list(reference.list_documents()):
                count += self._recursive_delete(doc, writer, exists=True)
            return count
        raise TypeError("recursive_delete() takes a DocumentReference or a CollectionReference")
