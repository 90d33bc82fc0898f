"""Write batches without I/O (python-firestore's ``base_batch``): the commit format's entries
(docs/http.md, ":commit") built from python-firestore's calls, shared by documents, batches,
transactions and the bulk writer."""

from __future__ import annotations

import datetime
from typing import Any

from docstore import _values
from docstore._types import WriteOption, WriteResult, parse_optional_timestamp
from docstore.field_path import get_nested_value, to_field_path

MAX_BATCH_WRITES = 500


def _precondition(entry: dict[str, Any], option: WriteOption | None) -> dict[str, Any]:
    if option is not None:
        if not isinstance(option, WriteOption):
            raise TypeError("option must come from client.write_option(...)")
        entry["precondition"] = option.to_precondition()
    return entry


def create_entry(path: str, document_data: Any) -> dict[str, Any]:
    """``{"create": path, "data"}``."""
    return {"create": path, "data": _values.encode_data(document_data, allow_delete=False)}


def merge_data(document_data: Any, merge: Any) -> dict[str, Any]:
    """The data of ``set(data, merge=[paths])``: only the listed fields (ValueError for a
    listed field absent from ``data``, as python-firestore raises)."""
    if not isinstance(document_data, dict):
        raise TypeError(f"document data must be a dict, got {type(document_data).__name__}")
    out: dict[str, Any] = {}
    for raw in merge:
        path = to_field_path(raw)
        try:
            value = get_nested_value(path, document_data)
        except KeyError:
            raise ValueError(
                f"merge field {path.to_api_repr()!r} is not in the document data"
            ) from None
        target = out
        for part in path.parts[:-1]:
            target = target.setdefault(part, {})
        target[path.parts[-1]] = value
    return out


def set_entry(path: str, document_data: Any, merge: Any = False) -> dict[str, Any]:
    """``{"set": path, "data", "merge"}``; ``merge`` is a bool or a list of field paths."""
    if isinstance(merge, bool):
        data = _values.encode_data(document_data, allow_delete=merge)
        return {"set": path, "data": data, "merge": merge}
    if isinstance(merge, (list, tuple)) and merge:
        data = _values.encode_data(merge_data(document_data, merge), allow_delete=True)
        return {"set": path, "data": data, "merge": True}
    raise ValueError("merge is True, False or a non-empty list of field paths")


def update_entry(path: str, field_updates: Any, option: WriteOption | None) -> dict[str, Any]:
    """``{"update": path, "fields"}`` (the document must exist)."""
    entry = {"update": path, "fields": _values.encode_update(field_updates)}
    return _precondition(entry, option)


def delete_entry(path: str, option: WriteOption | None) -> dict[str, Any]:
    """``{"delete": path}``."""
    return _precondition({"delete": path}, option)


def write_results(answer: Any) -> tuple[datetime.datetime | None, list[WriteResult]]:
    """The commit time and one WriteResult per write, from ``{"commitTime", "updateTimes"}``."""
    commit_time = parse_optional_timestamp(answer.get("commitTime"))
    results = [
        WriteResult(parse_optional_timestamp(t) or commit_time)
        for t in answer.get("updateTimes") or []
    ]
    return commit_time, results


class BaseWriteBatch:
    """Writes collected to commit atomically (python-firestore's ``BaseWriteBatch``)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._writes: list[dict[str, Any]] = []
        self.write_results: list[WriteResult] | None = None
        self.commit_time: datetime.datetime | None = None

    def _add_write(self, entry: dict[str, Any]) -> None:
        if len(self._writes) >= MAX_BATCH_WRITES:
            raise ValueError(f"a batch holds at most {MAX_BATCH_WRITES} writes")
        self._writes.append(entry)

    def __len__(self) -> int:
        return len(self._writes)

    def create(self, reference: Any, document_data: dict[str, Any]) -> None:
        """Create the document (the commit fails with AlreadyExists if it exists)."""
        self._add_write(create_entry(reference.path, document_data))

    def set(self, reference: Any, document_data: dict[str, Any], merge: Any = False) -> None:
        """Replace the document, or merge into it (``merge=True`` or a list of field paths)."""
        self._add_write(set_entry(reference.path, document_data, merge))

    def update(
        self,
        reference: Any,
        field_updates: dict[str, Any],
        option: WriteOption | None = None,
    ) -> None:
        """Update fields of an existing document (the commit fails with NotFound otherwise)."""
        self._add_write(update_entry(reference.path, field_updates, option))

    def delete(self, reference: Any, option: WriteOption | None = None) -> None:
        """Delete the document (no error when it is missing, unless ``option`` demands)."""
        self._add_write(delete_entry(reference.path, option))

    def _commit_body(self) -> dict[str, Any]:
        return {"writes": self._writes}

    def _finish(self, answer: Any) -> list[WriteResult]:
        self.commit_time, self.write_results = write_results(answer)
        self._writes = []
        return self.write_results
