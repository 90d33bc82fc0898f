"""How long a stream keeps its events for resumes (docs/listen.md, "Positions, ids and
resuming"): every event younger than the grace (`--listen-grace-seconds`), at most
`--listen-replay` of them, and all streams of the process together at most
`--listen-replay-bytes`. A client away for less than the grace resumes without a reset
however many events its stream made meanwhile (up to the cap and the budget), and a position
whose next event is older than the grace, or was let go for the budget, is no longer held.

Without the age rule (a stream kept its last 1,024 events, whatever their age) the first test
gets `reset {retention_passed}` after 1,100 events, and the second test's resume of a position
older than the grace is replayed instead of reset. Without the byte budget the third test's
resume at its first change is replayed instead of reset (its stream keeps its 400 events: the
cap is 16,384).
"""

from __future__ import annotations

import dataclasses
import json
import time

import httpx
import psycopg
import pytest
from conftest import own_sidecar
from test_listen import WAIT, Listener, View, follow, has_doc

OLD_DEFAULT = 1024
GRACE = 2
BUDGET = 64 * 1024


def listen(sidecar, params, headers=None) -> Listener:
    listener = Listener(sidecar, params=params, headers=headers)
    assert listener.status == 200, listener.error_body
    return listener


def write_each(stack, coll: str, first: int, last: int) -> None:
    """One transaction per document `coll/d<i>` for i in first..last: one event each."""
    with psycopg.connect(stack.cluster.url(), autocommit=True) as conn:
        for i in range(first, last + 1):
            conn.execute(
                "select docstore.set(%s, %s::jsonb)", (f"{coll}/d{i}", json.dumps({"i": i}))
            )


def dropped(url: str, by: str) -> float:
    """How many kept events the sidecar's streams let go of, `by` why."""
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        if line.startswith(f'docstore_session_replay_dropped_total{{by="{by}"}} '):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def aged(url: str) -> float:
    """How many events the sidecar's streams let go of for being older than the grace."""
    return dropped(url, "age")


def until_aged(url: str, events: int) -> None:
    """Wait until the sidecar's streams let go of `events` events for their age."""
    deadline = time.monotonic() + WAIT
    while aged(url) < events:
        assert time.monotonic() < deadline, "events older than the grace are still kept"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def defaults(stack):
    """A sidecar keeping events for resumes as by default, its grace long enough for any
    machine to write the test's events within it."""
    with own_sidecar(stack, "--listen-grace-seconds", "600", slot="docstore_replay") as url:
        yield dataclasses.replace(stack, url=url)


@pytest.fixture(scope="module")
def short_grace(stack):
    """A sidecar whose streams keep their events for resumes 2 seconds."""
    flags = ("--listen-grace-seconds", str(GRACE))
    with own_sidecar(stack, *flags, slot="docstore_replay_grace") as url:
        yield dataclasses.replace(stack, url=url)


@pytest.fixture(scope="module")
def small_budget(stack):
    """A sidecar whose streams keep their events for resumes 600 seconds, but at most
    BUDGET bytes of them together: about 70 events of this file's one-document changes."""
    flags = ("--listen-grace-seconds", "600", "--listen-replay-bytes", str(BUDGET))
    with own_sidecar(stack, *flags, slot="docstore_replay_bytes") as url:
        yield dataclasses.replace(stack, url=url)


def test_a_resume_within_the_grace_is_replayed_past_the_old_count(defaults, coll):
    sql = f"select * from /{coll}"
    listener = listen(defaults, [("sql", sql)])
    view = View()
    try:
        first = listener.next()
        assert first["event"] == "snapshot", first
        view.apply(first)
    finally:
        listener.close()
    count = OLD_DEFAULT + 76
    write_each(defaults, coll, 1, count)
    headers = {**defaults.admin, "Last-Event-ID": first["id"]}
    resumed = listen(defaults, [("sql", sql)], headers)
    try:
        assert resumed.stream_id == listener.stream_id
        follow(resumed, view, has_doc("0", f"{coll}/d{count}"))
        kinds = [ev["event"] for ev in resumed.received]
        assert "reset" not in kinds and "snapshot" not in kinds, resumed.received[:2]
        assert kinds.count("change") == count
        assert sorted(d["data"]["i"] for d in view.targets["0"]) == list(range(1, count + 1))
    finally:
        resumed.close()


def test_a_position_older_than_the_grace_is_no_longer_held(short_grace, coll):
    url = short_grace.url
    sql = f"select * from /{coll}"
    listener = listen(short_grace, [("sql", sql)])
    resumed = []
    try:
        snapshot = listener.next()
        assert snapshot["event"] == "snapshot", snapshot
        write_each(short_grace, coll, 1, 1)
        one = listener.until(lambda ev: ev["event"] == "change")
        # The snapshot and the change after it grow older than the grace: they go, and the
        # floor rises to the change's position. The client stays connected all along (a
        # resume takes the stream over), so that the stream itself does not expire. This
        # sidecar's only stream is this test's: it logged two events so far.
        until_aged(url, 2)
        # At the floor: held, nothing to replay; the next change comes as usual.
        at_floor = listen(
            short_grace, [("sql", sql)], {**short_grace.admin, "Last-Event-ID": one["id"]}
        )
        resumed.append(at_floor)
        assert at_floor.stream_id == listener.stream_id
        write_each(short_grace, coll, 2, 2)
        two = at_floor.until(lambda ev: ev["event"] != "heartbeat")
        assert two["event"] == "change", two
        until_aged(url, 3)
        # Before the floor: the event after it is older than the grace.
        late = listen(
            short_grace, [("sql", sql)], {**short_grace.admin, "Last-Event-ID": one["id"]}
        )
        resumed.append(late)
        assert late.stream_id == listener.stream_id
        reset = late.next()
        assert reset["event"] == "reset", reset
        assert reset["data"]["reason"] == "retention_passed", reset
        fresh = late.next()
        assert fresh["event"] == "snapshot", fresh
        (target,) = fresh["data"]["targets"]
        assert sorted(d["data"]["i"] for d in target["documents"]) == [1, 2]
    finally:
        listener.close()
        for r in resumed:
            r.close()


def test_past_the_byte_budget_the_oldest_events_go_and_a_resume_before_them_resets(
    small_budget, coll
):
    url = small_budget.url
    sql = f"select * from /{coll}"
    count = 400
    listener = listen(small_budget, [("sql", sql)])
    resumed = []
    try:
        snapshot = listener.next()
        assert snapshot["event"] == "snapshot", snapshot
        write_each(small_budget, coll, 1, count)
        changes = []
        while len(changes) < count:
            ev = listener.until(lambda ev: ev["event"] != "heartbeat")
            assert ev["event"] == "change", ev
            changes.append(ev)
        # Far more than the budget holds, all younger than the grace: the oldest went for it.
        assert dropped(url, "bytes") > 0
        # Within what the budget kept: exactly the events after the position, no reset.
        recent = listen(
            small_budget,
            [("sql", sql)],
            {**small_budget.admin, "Last-Event-ID": changes[-21]["id"]},
        )
        resumed.append(recent)
        assert recent.stream_id == listener.stream_id
        replayed = [recent.until(lambda ev: ev["event"] != "heartbeat") for _ in range(20)]
        assert [ev["event"] for ev in replayed] == ["change"] * 20
        assert [ev["id"] for ev in replayed] == [ev["id"] for ev in changes[-20:]]
        # Before what it kept: reset, then a snapshot of every document, never a silent gap.
        old = listen(
            small_budget, [("sql", sql)], {**small_budget.admin, "Last-Event-ID": changes[0]["id"]}
        )
        resumed.append(old)
        assert old.stream_id == listener.stream_id
        reset = old.until(lambda ev: ev["event"] != "heartbeat")
        assert reset["event"] == "reset", reset
        assert reset["data"]["reason"] == "retention_passed", reset
        fresh = old.until(lambda ev: ev["event"] != "heartbeat")
        assert fresh["event"] == "snapshot", fresh
        (target,) = fresh["data"]["targets"]
        assert sorted(d["data"]["i"] for d in target["documents"]) == list(range(1, count + 1))
    finally:
        listener.close()
        for r in resumed:
            r.close()
