"""The `:listen` protocol without I/O (docstore._listen): SSE parsing, applying change events,
the difference a listener is handed after a reset's snapshot, resume token bookkeeping."""

from __future__ import annotations

import json
import random

import pytest

from docstore._listen import (
    ADDED,
    MODIFIED,
    REMOVED,
    Delivery,
    Event,
    ProtocolError,
    Reset,
    SseParser,
    StreamState,
    TargetState,
)


def doc(path: str, t: int = 1, **data) -> dict:
    return {"path": path, "data": data, "updateTime": f"2026-01-01T00:00:{t:02d}Z"}


def parse(text: str) -> tuple[list[Event], SseParser]:
    parser = SseParser()
    events = [ev for line in text.split("\n") if (ev := parser.feed(line)) is not None]
    return events, parser


def test_sse_fields_comments_and_retry():
    events, parser = parse(
        "retry: 1371\n\n"
        ": keep-alive\n\n"
        'event: snapshot\nid: s-1.0000000000000001\ndata: {"a":\n'
        "data: 1}\n\n"
        "event:heartbeat\nid:s-1.02\ndata:{}\n\n"
        'data: {"x": 2}\n\n'
        "event: ignored-without-data\n\n"
    )
    assert parser.retry_ms == 1371
    assert [(e.name, e.id, e.data) for e in events] == [
        ("snapshot", "s-1.0000000000000001", {"a": 1}),
        ("heartbeat", "s-1.02", {}),
        ("message", None, {"x": 2}),
    ]


def test_sse_data_that_is_not_json_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        parse("event: change\ndata: {nope\n\n")


def apply(old: list[dict], changes) -> list[str]:
    """The paths after applying `changes` one by one to `old`, checking every index."""
    cur = [d["path"] for d in old]
    for c in changes:
        if c.type == REMOVED:
            assert c.new_index == -1 and cur[c.old_index] == c.document["path"]
            cur.pop(c.old_index)
        elif c.type == ADDED:
            assert c.old_index == -1 and c.document["path"] not in cur
            cur.insert(c.new_index, c.document["path"])
        else:
            assert cur[c.old_index] == c.document["path"]
            cur.pop(c.old_index)
            cur.insert(c.new_index, c.document["path"])
    return cur


def test_replace_orders_removals_additions_modifications_like_python_firestore():
    state = TargetState([doc("c/a", n=1), doc("c/b", n=2), doc("c/c", n=3), doc("c/d", n=4)])
    new = [doc("c/a", n=1), doc("c/x", n=2), doc("c/c", 2, n=3), doc("c/e", n=9)]
    changes = state.replace(new)
    assert [(c.type, c.document["path"], c.old_index, c.new_index) for c in changes] == [
        (REMOVED, "c/b", 1, -1),
        (REMOVED, "c/d", 2, -1),
        (ADDED, "c/x", -1, 1),
        (ADDED, "c/e", -1, 3),
        (MODIFIED, "c/c", 2, 2),
    ]
    assert state.paths() == ["c/a", "c/x", "c/c", "c/e"]


def test_replace_with_the_same_documents_is_no_change():
    docs = [doc("c/a"), doc("c/b")]
    state = TargetState(list(docs))
    assert state.replace([dict(d) for d in docs]) == []


def test_replace_never_adds_what_the_listener_has_and_ends_at_the_snapshot():
    rng = random.Random(25)
    for _ in range(500):
        universe = [f"c/{i:02d}" for i in range(12)]
        old_paths = rng.sample(universe, rng.randint(0, 8))
        old = [doc(p, 1) for p in old_paths]
        new_paths = rng.sample(universe, rng.randint(0, 8))
        # Unchanged documents keep their relative order (as a query's order guarantees);
        # changed ones (a new updateTime) may go anywhere.
        changed = {p for p in new_paths if rng.random() < 0.4}
        kept = [p for p in old_paths if p in new_paths and p not in changed]
        moving = [p for p in new_paths if p not in kept]
        order = list(kept)
        for p in moving:
            order.insert(rng.randint(0, len(order)), p)
        new = [doc(p, 2 if p in changed or p not in old_paths else 1) for p in order]
        state = TargetState(list(old))
        changes = state.replace(new)
        assert apply(old, changes) == order
        assert state.paths() == order
        assert all(c.type != ADDED or c.document["path"] not in old_paths for c in changes)


def test_apply_changes_and_refuse_what_does_not_fit():
    state = TargetState([doc("c/a"), doc("c/b")])
    changes = state.apply_changes(
        [
            {"type": "removed", "oldIndex": 0, "path": "c/a"},
            {"type": "added", "newIndex": 1, "document": doc("c/c")},
            {"type": "modified", "oldIndex": 0, "newIndex": 1, "document": doc("c/b", 2)},
        ]
    )
    assert [(c.type, c.old_index, c.new_index) for c in changes] == [
        (REMOVED, 0, -1),
        (ADDED, -1, 1),
        (MODIFIED, 0, 1),
    ]
    assert state.paths() == ["c/c", "c/b"]
    for bad in (
        {"type": "removed", "oldIndex": 5, "path": "c/c"},
        {"type": "removed", "oldIndex": 0, "path": "c/b"},
        {"type": "added", "newIndex": 0, "document": doc("c/c")},
        {"type": "added", "newIndex": 9, "document": doc("c/z")},
        {"type": "renamed"},
    ):
        with pytest.raises(ProtocolError):
            TargetState([doc("c/c"), doc("c/b")]).apply_changes([bad])


def ev(name: str, event_id: str, data: dict) -> Event:
    return Event(name, event_id, json.loads(json.dumps(data)))


def test_stream_state_first_snapshot_reset_and_resume_token():
    stream = StreamState()
    stream.add("q")
    stream.add("n")
    out = stream.handle(
        ev(
            "snapshot",
            "s.1",
            {
                "commitTime": "T1",
                "targets": [
                    {"target": "q", "documents": []},
                    {"target": "n", "aggregation": {"count": 0}},
                    {"target": "gone", "documents": [doc("c/a")]},
                ],
            },
        )
    )
    # A first snapshot is handed over even when empty (python-firestore's first push).
    assert [(d.target, d.docs, d.changes, d.aggregation, d.read_time) for d in out] == [
        ("q", [], [], None, "T1"),
        ("n", [], [], {"count": 0}, "T1"),
    ]
    assert stream.resume_token == "s.1"
    out = stream.handle(
        ev(
            "change",
            "s.2",
            {
                "targets": [
                    {
                        "target": "q",
                        "changes": [{"type": "added", "newIndex": 0, "document": doc("c/a")}],
                    },
                    {"target": "n", "aggregation": {"count": 1}},
                ]
            },
        )
    )
    assert [d.target for d in out] == ["q", "n"]
    assert stream.handle(ev("heartbeat", "s.3", {})) == []
    assert stream.resume_token == "s.3"
    assert stream.handle(ev("reset", "s.4", {"reason": "restart", "message": "m"})) == [
        Reset("restart", "m")
    ]
    # The snapshot after a reset: only what differs from what the listener saw.
    out = stream.handle(
        ev(
            "snapshot",
            "t.1",
            {
                "targets": [
                    {"target": "q", "documents": [doc("c/a"), doc("c/b")]},
                    {"target": "n", "aggregation": {"count": 1}},
                ]
            },
        )
    )
    assert len(out) == 1 and isinstance(out[0], Delivery)
    assert [(c.type, c.document["path"], c.new_index) for c in out[0].changes] == [
        (ADDED, "c/b", 1)
    ]
    assert stream.resume_token == "t.1"
