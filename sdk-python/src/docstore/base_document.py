"""Document references and snapshots without I/O (python-firestore's ``base_document``)."""

from __future__ import annotations

import copy
import datetime
from typing import Any

from docstore.field_path import FieldPath, get_nested_value, to_field_path


def join_path(*parts: str) -> tuple[str, ...]:
    """The segments of a path given as parts that may themselves hold ``/`` (``"c/a", "s"``).
    ValueError for empty segments and non-str parts, as python-firestore raises."""
    segments: list[str] = []
    for part in parts:
        if not isinstance(part, str):
            raise TypeError(f"path parts are str, got {type(part).__name__}")
        for segment in part.strip("/").split("/"):
            if segment == "":
                raise ValueError(f"path {'/'.join(parts)!r} has an empty segment")
            segments.append(segment)
    if not segments:
        raise ValueError("a path has at least one segment")
    return tuple(segments)


class BaseDocumentReference:
    """A reference to a document (which may not exist): ``client.document("c/a")``."""

    # Lets docstore._values recognise references without importing this module.
    _docstore_reference = True

    def __init__(self, *path: str, client: Any) -> None:
        segments = join_path(*path)
        if len(segments) % 2 != 0:
            raise ValueError(
                f"{'/'.join(segments)!r} is not a document path: "
                "a document path has an even number of segments"
            )
        self._path = segments
        self._client = client

    @property
    def id(self) -> str:
        """The document's ID (the last segment)."""
        return self._path[-1]

    @property
    def path(self) -> str:
        """The document's path, ``collection/id[/collection/id...]``."""
        return "/".join(self._path)

    @property
    def _document_path(self) -> str:
        return self.path

    @property
    def parent(self) -> Any:
        """The collection holding the document."""
        return self._client.collection(*self._path[:-1])

    def collection(self, collection_id: str) -> Any:
        """A subcollection of this document."""
        return self._client.collection(*self._path, collection_id)

    def __copy__(self) -> BaseDocumentReference:
        return self  # immutable; shares the client

    def __deepcopy__(self, memo: Any) -> BaseDocumentReference:
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BaseDocumentReference):
            return NotImplemented
        return self._path == other._path and self._client is other._client

    def __hash__(self) -> int:
        return hash(self._path)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r}>"


class DocumentSnapshot:
    """A document as read at one time (python-firestore's ``DocumentSnapshot``).

    ``exists`` is False for a missing document (then ``to_dict()`` is None). Times are tz-aware
    UTC datetimes; ``read_time`` is None where the server does not report one.
    """

    def __init__(
        self,
        reference: Any,
        data: dict[str, Any] | None,
        exists: bool,
        read_time: datetime.datetime | None,
        create_time: datetime.datetime | None,
        update_time: datetime.datetime | None,
    ) -> None:
        self._reference = reference
        self._data = data if data is not None else {}
        self._exists = exists
        self.read_time = read_time
        self.create_time = create_time
        self.update_time = update_time

    @property
    def exists(self) -> bool:
        """Whether the document existed when read."""
        return self._exists

    @property
    def id(self) -> str:
        """The document's ID."""
        return self._reference.id

    @property
    def reference(self) -> Any:
        """The DocumentReference of the document."""
        return self._reference

    def to_dict(self) -> dict[str, Any] | None:
        """A copy of the document's data; None when it does not exist."""
        if not self._exists:
            return None
        return copy.deepcopy(self._data)

    def get(self, field_path: str | FieldPath) -> Any:
        """The value at ``field_path`` (``"a.b"``, backticks, or a FieldPath); None when the
        document does not exist; KeyError when the field is absent."""
        to_field_path(field_path)  # validate even for a missing document
        if not self._exists:
            return None
        return copy.deepcopy(get_nested_value(field_path, self._data))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DocumentSnapshot):
            return NotImplemented
        return self._reference == other._reference and self._data == other._data

    def __hash__(self) -> int:
        return hash((self._reference, self.update_time))

    def __repr__(self) -> str:
        return f"<DocumentSnapshot {self._reference.path!r} exists={self._exists}>"


def project(data: dict[str, Any], field_paths: Any) -> dict[str, Any]:
    """``data`` restricted to ``field_paths`` (``get(field_paths=[...])``)."""
    out: dict[str, Any] = {}
    for raw in field_paths:
        path = to_field_path(raw)
        try:
            value = get_nested_value(path, data)
        except KeyError:
            continue
        target = out
        for part in path.parts[:-1]:
            target = target.setdefault(part, {})
        target[path.parts[-1]] = value
    return out


def is_missing_database(error: Exception) -> bool:
    """Whether a NOT_FOUND answer of a document GET is about the database (unknown id), not the
    document: the sidecar's message is then ``database "<id>" does not exist`` (docs/http.md,
    Resources), and ``get()`` must raise instead of answering "missing"."""
    return str(getattr(error, "message", "")).startswith("database ")
