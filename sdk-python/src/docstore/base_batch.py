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


def _paths_to_maps(document_data: dict[str, Any], merge: Any) -> list[Any]:
    """The listed merge fields whose value is a map (they must replace, not merge)."""
    out = []
    for raw in merge:
        path = to_field_path(raw)
        if isinstance(get_nested_value(path, document_data), dict):
            out.append(path)
    return out


def set_entries(path: str, document_data: Any, merge: Any = False) -> list[dict[str, Any]]:
    """The commit entries of ``set``: ``{"set": path, "data", "merge"}``; ``merge`` is a bool or
    a list of field paths. With a list, only those fields are written (ValueError for one not in
    the data); a listed field whose value is a map replaces the stored one, so a first entry
    deletes it (the commit format merges maps recursively). The last entry is the user's write.
    """
    if isinstance(merge, bool):
        data = _values.encode_data(document_data, allow_delete=merge)
        return [{"set": path, "data": data, "merge": merge}]
    if isinstance(merge, (list, tuple)) and merge:
        restricted = merge_data(document_data, merge)
        entries = []
        replaced = _paths_to_maps(document_data, merge)
        if replaced:
            deletes: dict[str, Any] = {}
            for field in replaced:
                target = deletes
                for part in field.parts[:-1]:
                    target = target.setdefault(part, {})
                target[field.parts[-1]] = {"$delete": True}
            entries.append({"set": path, "data": deletes, "merge": True})
        data = _values.encode_data(restricted, allow_delete=True)
        entries.append({"set": path, "data": data, "merge": True})
        return entries
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
    """Writes collected to commit atomically (python-firestore's ``BaseWriteBatch``).

    Each write is a list of commit entries whose last one is the write the user sees a
    WriteResult of (``set`` with merge fields may need two)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._writes: list[list[dict[str, Any]]] = []
        self.write_results: list[WriteResult] | None = None
        self.commit_time: datetime.datetime | None = None

    def _add_write(self, entries: list[dict[str, Any]]) -> None:
        if sum(len(w) for w in self._writes) + len(entries) > MAX_BATCH_WRITES:
            raise ValueError(f"a batch holds at most {MAX_BATCH_WRITES} writes")
        self._writes.append(entries)

    def __len__(self) -> int:
        return len(self._writes)

    def create(self, reference: Any, document_data: dict[str, Any]) -> None:
        """Create the document (the commit fails with AlreadyExists if it exists)."""
        self._add_write([create_entry(reference.path, document_data)])

    def set(self, reference: Any, document_data: dict[str, Any], merge: Any = False) -> None:
        """Replace the document, or merge into it (``merge=True`` or a list of field paths)."""
        self._add_write(set_entries(reference.path, document_data, merge))

    def update(
        self,
        reference: Any,
        field_updates: dict[str, Any],
        option: WriteOption | None = None,
    ) -> None:
        """Update fields of an existing document (the commit fails with NotFound otherwise)."""
        self._add_write([update_entry(reference.path, field_updates, option)])

    def delete(self, reference: Any, option: WriteOption | None = None) -> None:
        """Delete the document (no error when it is missing, unless ``option`` demands)."""
        self._add_write([delete_entry(reference.path, option)])

    def _entries(self) -> tuple[list[dict[str, Any]], list[bool]]:
        """The commit's entries, and for each whether it is the last of a user's write."""
        entries: list[dict[str, Any]] = []
        visible: list[bool] = []
        for write in self._writes:
            entries.extend(write)
            visible.extend([False] * (len(write) - 1) + [True])
        return entries, visible

    def _results(self, answer: Any, visible: list[bool]) -> list[WriteResult]:
        commit_time, results = write_results(answer)
        self.commit_time = commit_time
        self.write_results = [r for r, v in zip(results, visible, strict=False) if v]
        return self.write_results

    def _commit_entries(self) -> tuple[list[dict[str, Any]], list[bool]]:
        return self._entries()

    def _finish(self, answer: Any, visible: list[bool]) -> list[WriteResult]:
        results = self._results(answer, visible)
        self._writes = []
        return results
