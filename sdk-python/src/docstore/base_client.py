"""What Client and AsyncClient share, without I/O (python-firestore's ``base_client``):
configuration from the environment, routes, and turning answers into snapshots."""

from __future__ import annotations

import os
import secrets
import string
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from docstore import _values
from docstore._types import WriteOption, make_write_option, parse_optional_timestamp
from docstore.base_document import DocumentSnapshot, join_path, project

DEFAULT_URL = "http://127.0.0.1:8787"
DEFAULT_DATABASE = "(default)"
_AUTO_ID_CHARS = string.ascii_letters + string.digits


def auto_id() -> str:
    """A random 20-character document ID (python-firestore's ``_auto_id``)."""
    return "".join(secrets.choice(_AUTO_ID_CHARS) for _ in range(20))


def resolve_url(url: str | None) -> str:
    """``url``, else ``$DOCSTORE_URL``, else the sidecar's default address."""
    return url or os.environ.get("DOCSTORE_URL") or DEFAULT_URL


def resolve_token(token: Any) -> Any:
    """``token``, else ``$DOCSTORE_TOKEN``, else ``$DOCSTORE_ADMIN_KEY``, else None."""
    if token is not None:
        return token
    return os.environ.get("DOCSTORE_TOKEN") or os.environ.get("DOCSTORE_ADMIN_KEY") or None


class BaseClient:
    """Configuration and routes shared by Client and AsyncClient."""

    _document_class: Any = None
    _collection_class: Any = None

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | Callable[[], Any] | None = None,
        database: str = DEFAULT_DATABASE,
    ) -> None:
        if not isinstance(database, str) or not database:
            raise ValueError("database must be a non-empty str")
        self._url = resolve_url(url)
        self._token = resolve_token(token)
        self._database = database
        self._db_route = "/v1/databases/" + quote(database, safe="()")

    @property
    def url(self) -> str:
        """The sidecar's base URL."""
        return self._url

    @property
    def database(self) -> str:
        """The database id, ``(default)`` unless given."""
        return self._database

    # Routes (docs/http.md).
    def _database_route(self, suffix: str) -> str:
        """``/v1/databases/{db}`` + suffix, e.g. ``:commit``."""
        return self._db_route + suffix

    def _explain_body(self, query: Any, run: Any) -> dict[str, Any]:
        """The ``:explain`` body of ``query`` (docs/http.md): a Query, CollectionReference,
        CollectionGroup or aggregation query (its ``structuredQuery``), or ``client.sql(...)``
        (its text)."""
        if not isinstance(run, bool):
            raise TypeError(f"run is True or False, got {type(run).__name__}")
        body_of = getattr(query, "_run_query_body", None)
        if body_of is None:
            raise TypeError(
                "explain() takes a query (a Query, CollectionReference, CollectionGroup, "
                f"aggregation query or client.sql(...)), got {type(query).__name__}"
            )
        return {**body_of(), "run": run}

    def _path_route(self, path: str) -> str:
        """``/v1/databases/{db}/documents/{path}``, each segment percent-encoded."""
        return (
            self._db_route
            + "/documents/"
            + "/".join(quote(segment, safe="") for segment in path.split("/"))
        )

    # References.
    def collection(self, *collection_path: str) -> Any:
        """A CollectionReference: ``collection("c")``, ``collection("c/a/s")`` or
        ``collection("c", "a", "s")``; ValueError for a path with an even number of segments."""
        return self._collection_class(*collection_path, client=self)

    def document(self, *document_path: str) -> Any:
        """A DocumentReference: ``document("c/a")`` or ``document("c", "a")``; ValueError for a
        path with an odd number of segments."""
        return self._document_class(*document_path, client=self)

    def write_option(self, **kwargs: Any) -> WriteOption:
        """A write precondition: ``write_option(last_update_time=dt)`` or
        ``write_option(exists=bool)``."""
        return make_write_option(**kwargs)

    # Answers -> snapshots.
    def _snapshot(self, reference: Any, doc: Any, read_time: Any = None) -> DocumentSnapshot:
        """A snapshot of an existing document from ``{"path","data","createTime","updateTime"}``
        (``reference`` None: made from ``path``)."""
        if reference is None:
            reference = self.document(doc["path"])
        return DocumentSnapshot(
            reference,
            _values.decode_data(doc.get("data") or {}, self),
            True,
            parse_optional_timestamp(read_time),
            parse_optional_timestamp(doc.get("createTime")),
            parse_optional_timestamp(doc.get("updateTime")),
        )

    def _missing(self, reference: Any, read_time: Any = None) -> DocumentSnapshot:
        """A snapshot of a document that does not exist."""
        return DocumentSnapshot(
            reference, None, False, parse_optional_timestamp(read_time), None, None
        )

    def _batch_get_snapshots(
        self, refs: list[Any], answer: Any, field_paths: Any
    ) -> list[DocumentSnapshot]:
        read_time = answer.get("readTime")
        out = []
        for ref, item in zip(refs, answer["documents"], strict=True):
            if "found" in item:
                snap = self._snapshot(ref, item["found"], read_time)
                if field_paths is not None:
                    snap._data = project(snap._data, field_paths)
            else:
                snap = self._missing(ref, read_time)
            out.append(snap)
        return out


def collection_path_of(*path: str) -> tuple[str, ...]:
    """The segments of a collection path; ValueError unless their number is odd."""
    segments = join_path(*path)
    if len(segments) % 2 != 1:
        raise ValueError(
            f"{'/'.join(segments)!r} is not a collection path: "
            "a collection path has an odd number of segments"
        )
    return segments
