"""The ``:listen`` protocol of docs/listen.md without I/O: what ``watch.py`` (one thread per
client) and ``async_watch.py`` (one task per client) both drive.

- ``SseParser``: text/event-stream lines -> ``Event`` (``event``/``id``/``data``/``retry``
  fields, ``:`` comments).
- ``TargetState``: the documents of one target in query order (or its aggregation row), what
  the callback last saw. ``apply_changes`` applies a ``change`` event's entries with Firestore's
  index meaning; ``replace`` turns a ``snapshot`` (a new target's first results, or the results
  after a ``reset``) into the difference to what the callback last saw, as python-firestore's
  watch computes it after a reset: REMOVED (by path), then ADDED, then MODIFIED (in the new
  order), never an ADDED for a document the callback already has.
- ``StreamState``: the targets of one stream, the resume token (the id of the last event
  fully handled), and ``handle(event)`` -> what to hand each listener.

Documents are the raw typed-JSON objects of the wire (``{"path", "data", "createTime", "updateTime"}``);
turning them into snapshots is the caller's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

ADDED = "ADDED"
REMOVED = "REMOVED"
MODIFIED = "MODIFIED"


class ProtocolError(Exception):
    """An event that does not fit the state it applies to (a stream out of step): the caller
    drops the stream and subscribes afresh, which yields a snapshot and with it a difference."""


@dataclass
class Event:
    """One server-sent event: its name, its id (the resume token) and its parsed data."""

    name: str
    id: str | None
    data: Any


class SseParser:
    """Incremental text/event-stream parser (the WHATWG rules this protocol uses): feed it
    lines without their line ends; each blank line dispatches the event gathered so far."""

    def __init__(self) -> None:
        self.retry_ms: int | None = None
        self._name = ""
        self._id: str | None = None
        self._data: list[str] = []

    def feed(self, line: str) -> Event | None:
        """Take one line; the complete event when ``line`` is blank and one was gathered."""
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._name = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self.retry_ms = int(value)
        return None

    def _dispatch(self) -> Event | None:
        name, data, event_id = self._name or "message", self._data, self._id
        self._name, self._data, self._id = "", [], None
        if not data:
            return None
        text = "\n".join(data)
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise ProtocolError(f"event {name!r} carries data that is not JSON") from exc
        return Event(name, event_id, parsed)


@dataclass
class RawChange:
    """One change as the callback sees it: type, the document (the removed one for REMOVED),
    its index before (-1 for ADDED) and after (-1 for REMOVED)."""

    type: str
    document: dict[str, Any]
    old_index: int
    new_index: int


def _path(doc: Any) -> str:
    if not isinstance(doc, dict) or not isinstance(doc.get("path"), str):
        raise ProtocolError(f"not a document: {doc!r}")
    return doc["path"]


@dataclass
class TargetState:
    """What one target's callback last saw: documents in order, or an aggregation row."""

    docs: list[dict[str, Any]] = field(default_factory=list)
    aggregation: dict[str, Any] | None = None
    pushed: bool = False

    def paths(self) -> list[str]:
        """The paths of the documents, in order."""
        return [d["path"] for d in self.docs]

    def apply_changes(self, changes: Any) -> list[RawChange]:
        """Apply a ``change`` event's entries in order (removed at oldIndex, added at newIndex,
        modified: remove at oldIndex then insert at newIndex); ProtocolError if one does not fit."""
        if not isinstance(changes, list):
            raise ProtocolError("changes is not a list")
        out: list[RawChange] = []
        for c in changes:
            if not isinstance(c, dict):
                raise ProtocolError(f"not a change: {c!r}")
            kind = c.get("type")
            old, new = c.get("oldIndex"), c.get("newIndex")
            if kind == "removed":
                doc = self._take(old, c.get("path"))
                out.append(RawChange(REMOVED, doc, old, -1))
            elif kind == "added":
                doc = c.get("document")
                path = _path(doc)
                if any(d["path"] == path for d in self.docs):
                    raise ProtocolError(f"{path} added twice")
                self._put(new, doc)
                out.append(RawChange(ADDED, doc, -1, new))
            elif kind == "modified":
                doc = c.get("document")
                self._take(old, _path(doc))
                self._put(new, doc)
                out.append(RawChange(MODIFIED, doc, old, new))
            else:
                raise ProtocolError(f"unknown change type {kind!r}")
        return out

    def _take(self, index: Any, path: Any) -> dict[str, Any]:
        if not isinstance(index, int) or not 0 <= index < len(self.docs):
            raise ProtocolError(f"oldIndex {index!r} out of range")
        if path is not None and self.docs[index]["path"] != path:
            raise ProtocolError(f"oldIndex {index} holds {self.docs[index]['path']}, not {path}")
        return self.docs.pop(index)

    def _put(self, index: Any, doc: dict[str, Any]) -> None:
        if not isinstance(index, int) or not 0 <= index <= len(self.docs):
            raise ProtocolError(f"newIndex {index!r} out of range")
        self.docs.insert(index, doc)

    def replace(self, documents: Any) -> list[RawChange]:
        """Replace the documents by a snapshot's and return the difference to the old ones,
        in python-firestore's order: removals (by path), additions, then modifications (a
        document whose updateTime changed), both in the new order; each index counts the
        documents as they stand after the changes before it."""
        if not isinstance(documents, list):
            raise ProtocolError("documents is not a list")
        new_paths = [_path(d) for d in documents]
        if len(set(new_paths)) != len(new_paths):
            raise ProtocolError("a snapshot lists a document twice")
        rank = {p: i for i, p in enumerate(new_paths)}
        new_by_path = dict(zip(new_paths, documents, strict=True))
        current = list(self.docs)
        old_by_path = {d["path"]: d for d in current}
        changes: list[RawChange] = []

        for path in sorted(p for p in old_by_path if p not in rank):
            index = next(i for i, d in enumerate(current) if d["path"] == path)
            changes.append(RawChange(REMOVED, current.pop(index), index, -1))

        modified = [
            p
            for p in new_paths
            if p in old_by_path
            and old_by_path[p].get("updateTime") != new_by_path[p].get("updateTime")
        ]
        settled = {p for p in new_paths if p in old_by_path} - set(modified)

        def slot(path: str) -> int:
            # Settled documents (unchanged, or already applied) stay in the new order: the
            # slot lies after the last settled one preceding `path` there and before the next
            # settled one. Between them only modified documents not yet applied stand, at
            # their old places (python-firestore compares their old values with the query's
            # order); they are taken to sort where they sort now, exact when their change did
            # not move them.
            lo = 0
            for i, d in enumerate(current):
                if d["path"] in settled and rank[d["path"]] < rank[path]:
                    lo = i + 1
            at = lo
            while (
                at < len(current)
                and current[at]["path"] not in settled
                and rank[current[at]["path"]] < rank[path]
            ):
                at += 1
            return at

        for path in (p for p in new_paths if p not in old_by_path):
            index = slot(path)
            current.insert(index, new_by_path[path])
            settled.add(path)
            changes.append(RawChange(ADDED, new_by_path[path], -1, index))

        for path in modified:
            old_index = next(i for i, d in enumerate(current) if d["path"] == path)
            current.pop(old_index)
            index = slot(path)
            current.insert(index, new_by_path[path])
            settled.add(path)
            changes.append(RawChange(MODIFIED, new_by_path[path], old_index, index))

        if [d["path"] for d in current] != new_paths:
            # Unchanged documents in another order than before (not something a query's
            # order allows): say so as removals and additions rather than lose the order.
            changes = [RawChange(REMOVED, d, 0, -1) for d in self.docs] + [
                RawChange(ADDED, d, -1, i) for i, d in enumerate(documents)
            ]
        self.docs = list(documents)
        return changes


@dataclass
class Delivery:
    """What one listener is handed after an event: its documents (or aggregation row) now,
    the changes since what it last saw, and the event's commit time (RFC 3339 text)."""

    target: str
    docs: list[dict[str, Any]]
    changes: list[RawChange]
    aggregation: dict[str, Any] | None
    read_time: str | None


@dataclass
class Reset:
    """A ``reset`` event: ``reason`` and ``message`` (``permission`` ends the stream)."""

    reason: str
    message: str


class StreamState:
    """The targets of one stream and its resume token; ``handle`` turns an event into what
    each listener is handed."""

    def __init__(self) -> None:
        self.targets: dict[str, TargetState] = {}
        self.resume_token: str | None = None

    def add(self, target_id: str) -> None:
        """A new target: its first snapshot will be handed over whole (all ADDED)."""
        self.targets[target_id] = TargetState()

    def remove(self, target_id: str) -> None:
        """Forget a target; later events naming it are ignored."""
        self.targets.pop(target_id, None)

    def handle(self, event: Event) -> list[Delivery | Reset]:
        """Apply one event; the deliveries (one per target whose callback must run) or the
        Reset. The resume token moves to the event's id once it is applied."""
        data = event.data if isinstance(event.data, dict) else {}
        read_time = data.get("commitTime")
        out: list[Delivery | Reset] = []
        if event.name == "snapshot":
            for t in _target_list(data.get("targets")):
                state = self.targets.get(t.get("target"))
                if state is None:
                    continue
                if "aggregation" in t:
                    out.extend(self._aggregate(t, state, read_time))
                    continue
                changes = state.replace(t.get("documents"))
                out.extend(self._deliver(t["target"], state, changes, read_time))
            out.extend(self._changes(data.get("changes") or [], read_time))
        elif event.name == "change":
            out.extend(self._changes(data.get("targets"), read_time))
        elif event.name == "reset":
            out.append(Reset(str(data.get("reason", "")), str(data.get("message", ""))))
        if event.id is not None:
            self.resume_token = event.id
        return out

    def _changes(self, targets: Any, read_time: str | None) -> list[Delivery]:
        out: list[Delivery] = []
        for t in _target_list(targets):
            state = self.targets.get(t.get("target"))
            if state is None:
                continue
            if "aggregation" in t:
                out.extend(self._aggregate(t, state, read_time))
                continue
            changes = state.apply_changes(t.get("changes"))
            out.extend(self._deliver(t["target"], state, changes, read_time))
        return out

    @staticmethod
    def _deliver(
        target: str, state: TargetState, changes: list[RawChange], read_time: str | None
    ) -> list[Delivery]:
        if state.pushed and not changes:
            return []
        state.pushed = True
        return [Delivery(target, list(state.docs), changes, None, read_time)]

    @staticmethod
    def _aggregate(t: dict[str, Any], state: TargetState, read_time: str | None) -> list[Delivery]:
        row = t["aggregation"]
        if not isinstance(row, dict):
            raise ProtocolError("aggregation is not an object")
        if state.pushed and row == state.aggregation:
            return []
        state.pushed = True
        state.aggregation = row
        return [Delivery(t["target"], [], [], row, read_time)]


def _target_list(targets: Any) -> list[dict[str, Any]]:
    if not isinstance(targets, list) or not all(
        isinstance(t, dict) and isinstance(t.get("target"), str) for t in targets
    ):
        raise ProtocolError("targets is not a list of targets")
    return targets
