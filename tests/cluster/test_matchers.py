"""The `matcher` role (docs/architecture.md, "Processes"): a real nats-server, one ingest, two
`--role matcher` sidecars and two `--role gateway --matching remote` sidecars on the session's
test cluster. A gateway runs no hub: each stream lives on one matcher, which forwards its
frames; when that matcher is SIGKILLed the gateway resumes the stream on the other one, and
the same client connection continues.

"No loss, repetition or reset" is checked from the events a client received: no `reset`,
positions strictly increasing across everything it read (also across a resume on the other
gateway), every written document in exactly one change event, and the state the events build
equal to a fresh `:runQuery` after a marker document every stream must see last. Each
transaction writes documents of its own, so a resume's single catch-up event carries each of
them once. No test asserts on a duration.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from conftest import sse_events
from test_cluster import (
    LISTEN,
    MAX_PAYLOAD,
    WAIT,
    Cluster,
    fresh,
    lagged_stream,
    resumed_with_reset_and_snapshot,
    short,
    short_state,
)

MARKER_TIMEOUT = WAIT


class Stream:
    """One SSE connection to `url` (a gateway) read by a thread; `headers` may carry a
    Last-Event-ID. `events` is every (event, id, data)."""

    def __init__(self, url: str, headers: dict[str, str], coll: str) -> None:
        self.events: list[tuple[str, str, dict]] = []
        self.status: int | None = None
        self.error = b""
        self.lock = threading.Lock()
        self.opened = threading.Event()
        self.client = httpx.Client(base_url=url, timeout=httpx.Timeout(WAIT, read=None))
        body = {"targets": [{"id": "all", "sql": f"select * from /{coll}"}]}
        self.thread = threading.Thread(target=self.run, args=(headers, body), daemon=True)
        self.thread.start()
        assert self.opened.wait(WAIT), "the stream did not open"

    def run(self, headers: dict[str, str], body: dict) -> None:
        try:
            with self.client.stream("POST", LISTEN, json=body, headers=headers) as r:
                self.status = r.status_code
                if r.status_code != 200:
                    self.error = r.read()
                    return
                self.opened.set()
                for ev in sse_events(r.iter_lines()):
                    with self.lock:
                        self.events.append((ev["event"], ev.get("id", ""), ev["data"]))
        except (httpx.HTTPError, OSError):
            pass
        finally:
            self.opened.set()

    def snapshot(self) -> list[tuple[str, str, dict]]:
        with self.lock:
            return list(self.events)

    def wait(self, what, describe: str) -> None:
        deadline = time.monotonic() + MARKER_TIMEOUT
        while time.monotonic() < deadline:
            if what(self.snapshot()):
                return
            time.sleep(0.05)
        raise AssertionError(f"never {describe}: last events {self.snapshot()[-4:]}")

    def wait_for_doc(self, suffix: str) -> None:
        self.wait(lambda evs: any(suffix in paths(d) for k, _, d in evs if k != "reset"), suffix)

    def close(self) -> None:
        self.client.close()
        self.thread.join(WAIT)


def paths(data: dict) -> set[str]:
    """The short paths a snapshot or change event names."""
    out: set[str] = set()
    for t in data.get("targets", []):
        out |= {short(d["path"]) for d in t.get("documents", [])}
        for c in t.get("changes", []):
            out.add(short(c["path"] if c["type"] == "removed" else c["document"]["path"]))
    for t in data.get("changes", []):
        for c in t["changes"]:
            out.add(short(c["path"] if c["type"] == "removed" else c["document"]["path"]))
    return out


def position(data: dict) -> int:
    high, low = data["position"].split("/")
    return int(high, 16) << 32 | int(low, 16)


def replay(events: list[tuple[str, str, dict]], state: dict | None = None) -> dict[str, dict]:
    """The state `events` build on `state`, checking: no reset, positions strictly increase,
    no document changed twice by change events (each is written once)."""
    state = dict(state or {})
    last = -1
    changed: dict[str, int] = {}
    for index, (kind, _, data) in enumerate(events):
        assert kind != "reset", f"reset at event {index}: {data}"
        if kind not in ("snapshot", "change", "heartbeat"):
            continue
        p = position(data)
        assert p > last, f"position went back or repeated at event {index}: {events[index - 1 :]}"
        last = p
        if kind == "snapshot":
            state = {short(d["path"]): d["data"] for t in data["targets"] for d in t["documents"]}
            changes = [c for t in data.get("changes", []) for c in t["changes"]]
        elif kind == "change":
            changes = [c for t in data["targets"] for c in t["changes"]]
        else:
            changes = []
        for ch in changes:
            if ch["type"] == "removed":
                state.pop(short(ch["path"]), None)
                continue
            path = short(ch["document"]["path"])
            if kind == "change" and "marker" not in ch["document"]["data"]:
                changed[path] = changed.get(path, 0) + 1
                assert changed[path] == 1, f"{path} changed twice (a repetition) at event {index}"
            state[path] = ch["document"]["data"]
    return state


def write(c: Cluster, coll: str, txns: range) -> None:
    """Transactions that each set two documents of their own."""
    with psycopg.connect(c.stack.cluster.url(), autocommit=True) as conn:
        for txn in txns:
            with conn.transaction():
                for k in range(2):
                    conn.execute(
                        "select docstore.set(%s, %s::jsonb)",
                        (f"{coll}/t{txn}-{k}", json.dumps({"txn": txn, "k": k})),
                    )


def mark(c: Cluster, coll: str, name: str) -> None:
    c.stack.sql("select docstore.set(%s, '{\"marker\": true}'::jsonb)", f"{coll}/{name}")


def continued_whole(c: Cluster, coll: str, stream) -> None:
    """A marker written now reaches `stream` on its same connection, and everything it was
    sent replays (no document missed or changed twice) to a fresh query's result."""
    mark(c, coll, "zz-marker")
    stream.wait_for_doc(f"{coll}/zz-marker")
    assert stream.thread.is_alive(), "the connection ended"
    assert replay(stream.snapshot()) == short_state(fresh(c, coll))


def holder(c: Cluster, before: dict[str, float]):
    """The matcher whose forwarded connections grew since `before`."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        for m in c.matchers:
            if c.metric(m, "docstore_matcher_connections") > before[m.name]:
                return m
        time.sleep(0.05)
    raise AssertionError("no matcher took the stream")


def connections(c: Cluster) -> dict[str, float]:
    return {m.name: c.metric(m, "docstore_matcher_connections") for m in c.matchers}


def kill(c: Cluster, m) -> None:
    m.proc.send_signal(signal.SIGKILL)
    m.proc.wait(WAIT)
    c.matchers.remove(m)


def replace_killed(c: Cluster) -> None:
    """Start matchers until there are two again."""
    while len(c.matchers) < 2:
        c.spawned += 1
        m = c.start("matcher", f"matcher{c.spawned}")
        c.wait_health(m, 200)
        c.matchers.append(m)


@pytest.fixture(scope="module")
def cluster(stack, tmp_path_factory):
    c = Cluster(stack, tmp_path_factory.mktemp("matchers"))
    try:
        c.ingest = c.start("ingest", "ingest1")
        c.wait_health(c.ingest, 200)
        c.matchers = [c.start("matcher", "matcher1"), c.start("matcher", "matcher2")]
        c.spawned = 2
        for m in c.matchers:
            c.wait_health(m, 200)
        c.gateways = [c.start("gateway", f"gateway{i}", DOCSTORE_MATCHING="remote") for i in (1, 2)]
        for g in c.gateways:
            c.wait_health(g, 200)
        yield c
    finally:
        c.close()


@pytest.fixture
def matchers(cluster):
    """Two live matchers before the test and after it."""
    replace_killed(cluster)
    yield cluster
    replace_killed(cluster)


def test_a_remote_stream_gets_its_snapshot_and_changes(matchers, coll):
    c = matchers
    write(c, coll, range(3))
    stream = Stream(c.gateways[0].url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        first = next(d for k, _, d in stream.snapshot() if k == "snapshot")
        assert {short(d["path"]) for d in first["targets"][0]["documents"]} == {
            f"{coll}/t{t}-{k}" for t in range(3) for k in range(2)
        }
        write(c, coll, range(3, 10))
        mark(c, coll, "zz-marker")
        stream.wait_for_doc(f"{coll}/zz-marker")
        assert replay(stream.snapshot()) == short_state(fresh(c, coll))
        assert sum(c.metric(m, "docstore_matcher_frames_forwarded_total") for m in c.matchers) > 0
        # The matcher serves no client API.
        r = httpx.post(c.matchers[0].url + LISTEN, headers=c.stack.admin, json={}, timeout=WAIT)
        assert r.status_code == 404, r.text
    finally:
        stream.close()


def test_a_killed_matcher_moves_its_streams_and_the_connection_continues(matchers, coll):
    c = matchers
    write(c, coll, range(5))
    before = connections(c)
    failovers = c.metric(c.gateways[0], "docstore_gateway_failovers_total")
    stream = Stream(c.gateways[0].url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        write(c, coll, range(5, 15))
        mark(c, coll, "m1")
        stream.wait_for_doc(f"{coll}/m1")
        kill(c, holder(c, before))
        # Written while the stream's matcher is gone.
        write(c, coll, range(15, 30))
        mark(c, coll, "zz-marker")
        stream.wait_for_doc(f"{coll}/zz-marker")
        write(c, coll, range(30, 35))
        mark(c, coll, "zz-marker2")
        stream.wait_for_doc(f"{coll}/zz-marker2")
        assert stream.thread.is_alive(), "the connection ended"
        assert replay(stream.snapshot()) == short_state(fresh(c, coll))
        assert c.metric(c.gateways[0], "docstore_gateway_failovers_total") > failovers
    finally:
        stream.close()


def test_a_matcher_killed_before_a_new_streams_first_event_hands_it_over_whole(matchers, coll):
    """The ingest is stopped (SIGSTOP) while a stream opens: its matcher answers the open but
    has no position to send the first snapshot at, and is SIGKILLed then; the ingest goes on.
    The client holds nothing yet, so the gateway's resume at position 0 on the other matcher
    sends every target whole: the client's first event is the snapshot, on the same
    connection, and no reset (without that, the other matcher could not bring a client from
    position 0 and the connection ended with `reset`)."""
    c = matchers
    write(c, coll, range(3))
    before = connections(c)
    continued = c.metric(c.gateways[0], 'docstore_gateway_failovers_total{outcome="continued"')
    c.ingest.proc.send_signal(signal.SIGSTOP)
    try:
        stream = Stream(c.gateways[0].url, c.stack.admin, coll)
        killed = holder(c, before)
        assert stream.snapshot() == [], "the first event came before the matcher was killed"
        kill(c, killed)
    finally:
        c.ingest.proc.send_signal(signal.SIGCONT)
    try:
        stream.wait(lambda evs: bool(evs), "a first event")
        kind, _, data = stream.snapshot()[0]
        assert kind == "snapshot", data
        write(c, coll, range(3, 8))
        continued_whole(c, coll, stream)
        failovers = 'docstore_gateway_failovers_total{outcome="continued"'
        assert c.metric(c.gateways[0], failovers) > continued
    finally:
        stream.close()


def scrape(r) -> dict[str, float]:
    """Every sample of `r`'s /metrics, by name with its labels."""
    text = httpx.get(f"{r.url}/metrics", timeout=10).text
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_each_role_reports_its_position_in_the_stream(matchers, coll):
    """The ingest reports the stream sequence and commit LSN JetStream acknowledged last; a
    matcher, the ones it handed to its hub and how many messages the stream holds after
    them. Once a matcher's sequence reached the ingest's, its commit LSN did too. A
    remote-matching gateway reads no stream: it reports the newest position it passed on to
    a client and, per matcher holding some of its connections, the age of that matcher's
    last message (before, it reported no position at all)."""
    c = matchers
    g = c.gateways[0]
    before = connections(c)
    stream = Stream(g.url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        held = logged_id(holder(c, before), "matcher")
        write(c, coll, range(2))
        mark(c, coll, "m")
        stream.wait_for_doc(f"{coll}/m")
        passed = max(position(d) for k, _, d in stream.snapshot() if k != "reset")
        age = f'docstore_gateway_matcher_frame_age_seconds{{matcher="{held}"}}'
        deadline = time.monotonic() + WAIT
        while (got := scrape(g)).get("docstore_gateway_relayed_commit_lsn", 0) < passed:
            own = {k: v for k, v in got.items() if k.startswith("docstore_gateway_")}
            assert time.monotonic() < deadline, f"the gateway never reported {passed}: {own}"
            time.sleep(0.05)
        while age not in (got := scrape(g)):
            own = {k: v for k, v in got.items() if k.startswith("docstore_gateway_")}
            assert time.monotonic() < deadline, f"no {age}: {own}"
            time.sleep(0.05)
        assert got[age] >= 0, got
    finally:
        stream.close()
    ingest = scrape(c.ingest)
    published = ingest["docstore_ingest_stream_sequence"]
    lsn = ingest["docstore_ingest_commit_lsn"]
    assert published > 0 and lsn > 0, ingest
    for m in c.matchers:
        deadline = time.monotonic() + WAIT
        while (got := scrape(m)).get("docstore_gateway_stream_sequence", 0) < published:
            assert time.monotonic() < deadline, f"{m.name} never read sequence {published}"
            time.sleep(0.05)
        assert got["docstore_gateway_commit_lsn"] >= lsn, got
        # Pending counts what the stream held after the matcher's last message when it came
        # (it changes only when a message arrives): never more than the ingest published
        # since, read after it.
        since = (
            scrape(c.ingest)["docstore_ingest_stream_sequence"]
            - got["docstore_gateway_stream_sequence"]
        )
        assert 0 <= got["docstore_gateway_pending_messages"] <= since, (got, since)


def test_a_matcher_started_after_the_clients_position_takes_the_stream_over(matchers, coll):
    """A matcher reads the change stream from the changelog's keep before its start, so the
    stream of a killed matcher moves to one that started after the client's last position
    without a reset."""
    c = matchers
    write(c, coll, range(5))
    before = connections(c)
    stream = Stream(c.gateways[0].url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        write(c, coll, range(5, 10))
        mark(c, coll, "m1")
        stream.wait_for_doc(f"{coll}/m1")
        held = holder(c, before)
        kill(c, next(m for m in c.matchers if m is not held))
        # The only other matcher now starts after the client's last position.
        replace_killed(c)
        kill(c, held)
        write(c, coll, range(10, 20))
        continued_whole(c, coll, stream)
    finally:
        stream.close()


def test_a_client_resumes_on_the_other_gateway_after_its_matcher_was_killed(matchers, coll):
    c = matchers
    write(c, coll, range(5))
    before = connections(c)
    first = Stream(c.gateways[0].url, c.stack.admin, coll)
    try:
        first.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        write(c, coll, range(5, 12))
        mark(c, coll, "m1")
        first.wait_for_doc(f"{coll}/m1")
        killed = holder(c, before)
    finally:
        first.close()
    seen = first.snapshot()
    state = replay(seen)
    kill(c, killed)
    write(c, coll, range(12, 25))
    mark(c, coll, "zz-marker")
    last_id = seen[-1][1]
    headers = {**c.stack.admin, "Last-Event-ID": last_id}
    second = Stream(c.gateways[1].url, headers, coll)
    try:
        assert second.status == 200, second.error
        second.wait_for_doc(f"{coll}/zz-marker")
        got = second.snapshot()
        assert got and got[0][0] != "snapshot", f"the resume started over: {got[:2]}"
        assert position(got[0][2]) > position(seen[-1][2])
        assert replay(seen + got) == replay(got, state) == short_state(fresh(c, coll))
    finally:
        second.close()


def test_a_stream_its_gateway_ended_as_lagged_is_not_continued_elsewhere(matchers, coll):
    """A remote-matching gateway ends a connection whose client reads too slowly with `reset
    {lagged}` (its own queue is full, not the matcher's). As on one process, the stream ends
    for good: its registry entry is gone before the client reads that reset, so the client's
    resume with the reset's id on the other gateway gets a reset and a new snapshot, never
    the ended stream continued with a `change` (the oracle campaign saw one on stream s2).
    Its gateway counts the reset in `docstore_session_resets_total`."""
    c = matchers
    slow_gateway = c.start(
        "gateway", "gateway-slow", DOCSTORE_MATCHING="remote", DOCSTORE_LISTEN_QUEUE="4"
    )
    c.wait_health(slow_gateway, 200)
    write(c, coll, range(3))
    sql = f"select * from /{coll}"
    try:
        with lagged_stream(c, slow_gateway, coll, sql) as events:
            write(c, coll, range(3, 6))
            resumed_with_reset_and_snapshot(c, c.gateways[1].url, events[-1][1], coll, sql)
    finally:
        slow_gateway.proc.terminate()
        slow_gateway.proc.wait(15)


def test_a_connection_whose_gateway_a_matcher_thought_gone_ends_and_resumes(matchers, coll):
    """A matcher drops the forwarding of a gateway whose presence entry expired. A gateway
    that still lives (its entry expired while nats-server restarted, as in the oracle
    campaign) was left waiting for frames that never came: its client's connection stayed
    open and silent for good. Now the matcher sends the connection's end as it drops it, the
    connection ends, and the client's resume continues the stream with nothing missed. Here
    the gateway is stopped (SIGSTOP) until the matcher logs the drop."""
    c = matchers
    g = c.gateways[0]
    write(c, coll, range(3))
    before = connections(c)
    stream = Stream(g.url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        m = holder(c, before)
        logged = m.log.read_text(errors="replace").count("the gateway is gone")
        # Stopped, the gateway writes no presence entry: its entry expires, the matcher drops
        # its connection; then it runs on.
        g.proc.send_signal(signal.SIGSTOP)
        try:
            deadline = time.monotonic() + WAIT
            while m.log.read_text(errors="replace").count("the gateway is gone") == logged:
                assert time.monotonic() < deadline, "the matcher never dropped the gateway"
                time.sleep(0.05)
        finally:
            g.proc.send_signal(signal.SIGCONT)
        stream.thread.join(WAIT)
        assert not stream.thread.is_alive(), "the connection stayed open without frames"
    finally:
        stream.close()
    seen = stream.snapshot()
    write(c, coll, range(3, 8))
    mark(c, coll, "zz-marker")
    second = Stream(g.url, {**c.stack.admin, "Last-Event-ID": seen[-1][1]}, coll)
    try:
        assert second.status == 200, second.error
        second.wait_for_doc(f"{coll}/zz-marker")
        got = second.snapshot()
        assert got and got[0][0] != "snapshot", f"the resume started over: {got[:2]}"
        assert replay(seen + got) == short_state(fresh(c, coll))
    finally:
        second.close()


def forwarded_route(s: socket.socket, stream_id: str, skip: str = "") -> tuple[str, int]:
    """Read the frames a raw NATS subscription `s` gets until one of stream `stream_id` on a
    route other than `skip`: its route and number."""
    buf = b""
    deadline = time.monotonic() + WAIT
    while True:
        while b"\r\n" in buf:
            line, rest = buf.split(b"\r\n", 1)
            if not line.startswith(b"MSG "):
                buf = rest
                continue
            size = int(line.split()[-1])
            if len(rest) < size + 2:
                break
            payload, buf = rest[:size], rest[size + 2 :]
            forwarded = json.loads(payload[1:])
            if forwarded["stream"] == stream_id and forwarded["route"] != skip:
                return forwarded["route"], forwarded["seq"]
        assert time.monotonic() < deadline, "no frame of the stream was forwarded"
        buf += s.recv(65536)


def test_a_connection_whose_matcher_ends_it_with_a_gap_continues_on_a_matcher(matchers, coll):
    """A matcher that could not publish a frame ends the connection's forwarding and sends
    its end under the number after the lost frame's (session/serve.rs; its unit tests refuse
    publishes, which a real nats-server cannot be made to do on cue). Here that end is
    published on the gateway's subject with such a number: the gateway sees the gap, resumes
    the stream at the last frame it passed on, and the same client connection continues
    with nothing lost or repeated."""
    c = matchers
    g = c.gateways[0]
    write(c, coll, range(3))
    continued = 'docstore_gateway_failovers_total{outcome="continued"'
    failovers = c.metric(g, continued)
    gaps = c.metric(g, "docstore_gateway_frame_gaps_total")
    stream = Stream(g.url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        sid = stream.snapshot()[0][2]["stream"]
        subject = f"docstore.gateway.{logged_id(g, 'gateway')}"
        with socket.create_connection(("127.0.0.1", c.nats.port), timeout=WAIT) as s:
            s.recv(4096)
            s.sendall(b'CONNECT {"verbose":false}\r\n')
            s.sendall(f"SUB {subject} 1\r\n".encode())
            write(c, coll, range(3, 6))
            route, seq = forwarded_route(s, sid)
            # Far past any number the matcher reaches meanwhile: a gap.
            end = b"\x01" + json.dumps({"route": route, "stream": sid, "seq": seq + 1000}).encode()
            s.sendall(f"PUB {subject} {len(end)}\r\n".encode() + end + b"\r\n")
        deadline = time.monotonic() + WAIT
        while c.metric(g, continued) <= failovers:
            assert time.monotonic() < deadline, "the gateway did not resume the connection"
            time.sleep(0.05)
        assert c.metric(g, "docstore_gateway_frame_gaps_total") > gaps
        write(c, coll, range(6, 12))
        continued_whole(c, coll, stream)
    finally:
        stream.close()


def gap(c: Cluster, gateway: str, coll: str, sid: str, txns: range, skip: str = "") -> str:
    """Write `txns` and, once a frame of stream `sid` is forwarded on a route other than
    `skip`, publish on `gateway`'s subject an end far past that frame's number on its route
    (a gap, as after a frame NATS refused: its matcher cannot reach that number meanwhile).
    Returns the route."""
    subject = f"docstore.gateway.{gateway}"
    with socket.create_connection(("127.0.0.1", c.nats.port), timeout=WAIT) as s:
        s.recv(4096)
        s.sendall(b'CONNECT {"verbose":false}\r\n')
        s.sendall(f"SUB {subject} 1\r\n".encode())
        write(c, coll, txns)
        route, seq = forwarded_route(s, sid, skip)
        end = b"\x01" + json.dumps({"route": route, "stream": sid, "seq": seq + 1000}).encode()
        s.sendall(f"PUB {subject} {len(end)}\r\n".encode() + end + b"\r\n")
        s.sendall(b"PING\r\n")
    return route


def test_a_second_gap_soon_after_a_failover_waits_before_failing_over(matchers, coll):
    """A connection whose route has a gap fails over at once; when the route it moved to has
    a gap again before it passed frames on for a while (a matcher that keeps refusing
    frames, NATS flapping), the gateway waits before that failover (100 ms doubling up to
    5 s, with jitter) instead of failing over in a tight loop. Both failovers are counted
    with their cause, the second as one that waited, and the same client connection
    continues with nothing lost or repeated."""
    c = matchers
    g = c.gateways[0]
    write(c, coll, range(3))
    continued = 'docstore_gateway_failovers_total{outcome="continued",cause="gap"}'
    waits = "docstore_gateway_failover_waits_total"
    before = {m: c.metric(g, m) for m in (continued, waits)}
    stream = Stream(g.url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        sid = stream.snapshot()[0][2]["stream"]
        gateway = logged_id(g, "gateway")
        route = gap(c, gateway, coll, sid, range(3, 5))
        deadline = time.monotonic() + WAIT
        while c.metric(g, continued) < before[continued] + 1:
            assert time.monotonic() < deadline, "the gateway did not resume the connection"
            time.sleep(0.05)
        assert c.metric(g, waits) == before[waits], "the first failover waited"
        gap(c, gateway, coll, sid, range(5, 7), skip=route)
        while c.metric(g, continued) < before[continued] + 2:
            assert time.monotonic() < deadline, "the gateway did not resume the connection again"
            time.sleep(0.05)
        assert c.metric(g, waits) == before[waits] + 1, "the second failover did not wait"
        write(c, coll, range(7, 12))
        continued_whole(c, coll, stream)
    finally:
        stream.close()


def test_a_connection_whose_route_ends_silently_continues_on_a_matcher(matchers, coll):
    """A route whose end is lost in core NATS while its matcher lives on: here the matcher
    is sent a detach for the route as its gateway would send one (so it stops forwarding and
    sends nothing more, no end), while the gateway still waits on the route. The gateway,
    hearing nothing on the route for its silence bound, asks the matcher which of its silent
    routes it still forwards; told this one is gone, it resumes the stream at the last frame
    it passed on, and the same client connection continues with nothing lost or repeated."""
    c = matchers
    g = c.gateways[0]
    write(c, coll, range(3))
    continued = 'docstore_gateway_failovers_total{outcome="continued"'
    gone = 'docstore_gateway_silent_routes_total{outcome="gone"}'
    failovers = c.metric(g, continued)
    found_gone = c.metric(g, gone)
    stream = Stream(g.url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        sid = stream.snapshot()[0][2]["stream"]
        gateway = logged_id(g, "gateway")
        with socket.create_connection(("127.0.0.1", c.nats.port), timeout=WAIT) as s:
            s.recv(4096)
            s.sendall(b'CONNECT {"verbose":false}\r\n')
            s.sendall(f"SUB docstore.gateway.{gateway} 1\r\n".encode())
            write(c, coll, range(3, 6))
            route, _ = forwarded_route(s, sid)
            detach = {"gateway": gateway, "route": route, "op": "detach"}
            call = b"\x01" + json.dumps(detach).encode()
            # Every matcher is sent it; only the one forwarding the route has it.
            for m in c.matchers:
                subject = f"docstore.matcher.{logged_id(m, 'matcher')}"
                s.sendall(f"PUB {subject} _INBOX.test {len(call)}\r\n".encode() + call + b"\r\n")
            s.sendall(b"PING\r\n")
        deadline = time.monotonic() + WAIT
        while c.metric(g, continued) <= failovers:
            assert time.monotonic() < deadline, "the gateway did not resume the silent connection"
            time.sleep(0.05)
        assert c.metric(g, gone) > found_gone
        write(c, coll, range(6, 12))
        continued_whole(c, coll, stream)
    finally:
        stream.close()


def test_routes_silent_while_the_ingest_stalls_are_held_not_failed_over(matchers, coll):
    """The ingest is stopped (SIGSTOP): no frame, not even a heartbeat, reaches any route,
    so the gateway asks the matchers about its silent routes. They still forward them: the
    routes are held, nothing fails over, and once the ingest continues the same connection
    gets every write made meanwhile."""
    c = matchers
    g = c.gateways[0]
    write(c, coll, range(3))
    held = 'docstore_gateway_silent_routes_total{outcome="held"}'
    gone = 'docstore_gateway_silent_routes_total{outcome="gone"}'
    continued = 'docstore_gateway_failovers_total{outcome="continued"'
    stream = Stream(g.url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        before = {m: c.metric(g, m) for m in (held, gone, continued)}
        c.ingest.proc.send_signal(signal.SIGSTOP)
        try:
            write(c, coll, range(3, 6))
            deadline = time.monotonic() + WAIT
            while c.metric(g, held) <= before[held]:
                assert time.monotonic() < deadline, "no silent route was checked and held"
                time.sleep(0.05)
        finally:
            c.ingest.proc.send_signal(signal.SIGCONT)
        assert c.metric(g, gone) == before[gone]
        assert c.metric(g, continued) == before[continued]
        continued_whole(c, coll, stream)
    finally:
        stream.close()


def test_a_matcher_with_nothing_to_send_does_not_read_as_stuck(matchers, coll):
    """While the ingest is stopped (SIGSTOP) no frame reaches any route, so the age of the
    stream's matcher's last frame would grow as if the matcher were stuck. The gateway's
    check of its silent routes, which the matcher answers (it still forwards them), counts
    as hearing from it: `docstore_gateway_matcher_frame_age_seconds` starts over after a
    check (before, it only grew while the ingest was stopped)."""
    c = matchers
    g = c.gateways[0]
    held = 'docstore_gateway_silent_routes_total{outcome="held"}'
    before = connections(c)
    stream = Stream(g.url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        age = f'docstore_gateway_matcher_frame_age_seconds{{matcher="{logged_id(holder(c, before), "matcher")}"}}'
        checked = c.metric(g, held)
        c.ingest.proc.send_signal(signal.SIGSTOP)
        try:
            # Once the route was first checked (silent: no frame comes any more), the age
            # is read until it goes down, before two more checks came.
            deadline = time.monotonic() + WAIT
            while c.metric(g, held) <= checked:
                assert time.monotonic() < deadline, "the silent route was never checked"
                time.sleep(0.05)
            ages: list[float] = []
            while not any(b < a for a, b in zip(ages, ages[1:], strict=False)):
                assert c.metric(g, held) < checked + 3, f"the age never started over: {ages}"
                assert time.monotonic() < deadline, f"the route was not checked again: {ages}"
                got = scrape(g).get(age)
                if got is not None and (not ages or got != ages[-1]):
                    ages.append(got)
                time.sleep(0.05)
        finally:
            c.ingest.proc.send_signal(signal.SIGCONT)
        write(c, coll, range(3))
        continued_whole(c, coll, stream)
    finally:
        stream.close()


def test_targets_are_added_to_and_removed_from_a_remote_stream(matchers, coll):
    c = matchers
    write(c, coll, range(2))
    c.stack.sql("select docstore.set(%s, '{\"other\": 1}'::jsonb)", f"{coll}x/o1")
    stream = Stream(c.gateways[0].url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
        sid = stream.snapshot()[0][2]["stream"]
        base = c.gateways[0].url + LISTEN + f"/{sid}/targets"
        add = {"targets": [{"id": "other", "sql": f"select * from /{coll}x"}]}
        r = httpx.post(base, headers=c.stack.admin, json=add, timeout=WAIT)
        assert r.status_code == 200, r.text
        assert r.json()["targets"] == ["other"]

        def other_snapshot(evs):
            return any(
                k == "snapshot" and any(t["target"] == "other" for t in d["targets"])
                for k, _, d in evs
            )

        stream.wait(other_snapshot, "a snapshot of the added target")
        again = httpx.post(base, headers=c.stack.admin, json=add, timeout=WAIT)
        assert again.status_code == 400, again.text
        r = httpx.delete(f"{base}/other", headers=c.stack.admin, timeout=WAIT)
        assert r.status_code == 200, r.text
        assert r.json()["removed"] == "other"
        missing = httpx.delete(f"{base}/other", headers=c.stack.admin, timeout=WAIT)
        assert missing.status_code == 404, missing.text
        n = len(stream.snapshot())
        c.stack.sql("select docstore.set(%s, '{\"other\": 2}'::jsonb)", f"{coll}x/o1")
        mark(c, coll, "zz-marker")
        stream.wait_for_doc(f"{coll}/zz-marker")
        for _, _, d in stream.snapshot()[n:]:
            assert all(t["target"] != "other" for t in d.get("targets", [])), d
        unknown = httpx.delete(
            c.gateways[0].url + LISTEN + "/nosuchstream-1/targets/all",
            headers=c.stack.admin,
            timeout=WAIT,
        )
        assert unknown.status_code == 404, unknown.text
    finally:
        stream.close()


def test_events_larger_than_max_payload_reach_a_remote_gateway_whole(matchers, coll):
    """A snapshot of several MB and a change event over 1 MB, each far over the NATS server's
    `max_payload` (`MAX_PAYLOAD`), cross from matcher to gateway in parts and arrive whole and
    equal to `:runQuery` (before parts, such an event closed the connection with `lagged`)."""
    c = matchers
    parts = sum(c.metric(m, "docstore_matcher_frame_parts_total") for m in c.matchers)
    with psycopg.connect(c.stack.cluster.url(), autocommit=True) as conn:
        for i in range(30):
            data = {"n": i, "blob": f"{i % 10}" * 100_000}
            conn.execute("select docstore.set(%s, %s::jsonb)", (f"{coll}/big{i}", json.dumps(data)))
    stream = Stream(c.gateways[0].url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k in ("snapshot", "reset") for k, _, _ in evs), "a snapshot")
        kind, _, first = stream.snapshot()[0]
        assert kind == "snapshot", f"{kind}: {first}"
        assert len(json.dumps(first)) > 3_000_000
        assert {short(d["path"]) for d in first["targets"][0]["documents"]} == {
            f"{coll}/big{i}" for i in range(30)
        }
        # One transaction of two documents near the 1 MiB document limit: one change event.
        with psycopg.connect(c.stack.cluster.url(), autocommit=True) as conn:
            with conn.transaction():
                for k in range(2):
                    data = {"k": k, "blob": f"{k}" * 600_000}
                    conn.execute(
                        "select docstore.set(%s, %s::jsonb)", (f"{coll}/huge{k}", json.dumps(data))
                    )
        mark(c, coll, "zz-marker")
        stream.wait_for_doc(f"{coll}/zz-marker")
        changes = [d for k, _, d in stream.snapshot() if k == "change"]
        assert any(len(json.dumps(d)) > 1_200_000 for d in changes)
        assert stream.thread.is_alive(), "the connection ended"
        assert replay(stream.snapshot()) == short_state(fresh(c, coll))
        after = sum(c.metric(m, "docstore_matcher_frame_parts_total") for m in c.matchers)
        assert after > parts + 3_000_000 / MAX_PAYLOAD
    finally:
        stream.close()


def test_a_garbage_call_is_refused_and_a_garbage_frame_skipped(matchers, coll):
    """A call that does not decode gets INVALID_ARGUMENT; a frame or part that does not decode
    is skipped and counted; both processes keep serving (the wire format's unit tests and the
    fuzz target `matcher_wire` cover the decoders byte by byte)."""
    c = matchers
    rejected = sum(c.metric(m, "docstore_matcher_rejected_total") for m in c.matchers)
    frames = c.metric(c.gateways[0], "docstore_gateway_rejected_frames_total")
    with socket.create_connection(("127.0.0.1", c.nats.port), timeout=WAIT) as s:
        s.recv(4096)
        s.sendall(b'CONNECT {"verbose":false,"headers":true}\r\n')
        s.sendall(b"SUB _INBOX.garbage 1\r\n")
        for m in c.matchers:
            subject = f"docstore.matcher.{logged_id(m, 'matcher')}"
            payload = b"\x01{not json"
            s.sendall(
                f"PUB {subject} _INBOX.garbage {len(payload)}\r\n".encode() + payload + b"\r\n"
            )
        subject = f"docstore.gateway.{logged_id(c.gateways[0], 'gateway')}"
        payload = b'\x01{"route":"r","stream":"s","seq":0,"frame":1}'
        s.sendall(f"PUB {subject} {len(payload)}\r\n".encode() + payload + b"\r\n")
        # Parts with a part header that does not read: no route, a place past the count.
        for head in (
            "Docstore-Part: 1/2\r\n",
            "Docstore-Route: r\r\nDocstore-Frame: 0/9\r\nDocstore-Part: 3/2\r\n",
        ):
            head_bytes = f"NATS/1.0\r\n{head}\r\n".encode()
            total = len(head_bytes) + len(payload)
            s.sendall(f"HPUB {subject} {len(head_bytes)} {total}\r\n".encode())
            s.sendall(head_bytes + payload + b"\r\n")
        got = b""
        deadline = time.monotonic() + WAIT
        while got.count(b"INVALID_ARGUMENT") < len(c.matchers):
            assert time.monotonic() < deadline, got
            got += s.recv(65536)
    assert sum(c.metric(m, "docstore_matcher_rejected_total") for m in c.matchers) > rejected
    deadline = time.monotonic() + WAIT
    while c.metric(c.gateways[0], "docstore_gateway_rejected_frames_total") < frames + 3:
        assert time.monotonic() < deadline, "the gateway did not count the garbage frame"
        time.sleep(0.05)
    # Both still serve.
    stream = Stream(c.gateways[0].url, c.stack.admin, coll)
    try:
        stream.wait(lambda evs: any(k == "snapshot" for k, _, _ in evs), "a snapshot")
    finally:
        stream.close()


def logged_id(r, kind: str) -> str:
    """The id a matcher or a remote-matching gateway logged at start."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        text = re.sub(r"\x1b\[[0-9;]*m", "", r.log.read_text(errors="replace"))
        found = re.search(rf"{kind}=([0-9a-z]+)", text)
        if found:
            return found.group(1)
        time.sleep(0.05)
    raise AssertionError(f"{r.name} logged no {kind} id")


def test_no_matcher_answers_unavailable_not_a_hang(stack, tmp_path: Path, coll):
    c = Cluster(stack, tmp_path)
    try:
        # A nats-server of its own and no matcher (nor ingest: the module's holds the slot).
        c.gateways = [c.start("gateway", "gateway1", DOCSTORE_MATCHING="remote")]
        c.wait_health(c.gateways[0], 200)
        body = {"targets": [{"id": "all", "sql": f"select * from /{coll}"}]}
        r = httpx.post(c.gateways[0].url + LISTEN, headers=c.stack.admin, json=body, timeout=WAIT)
        assert r.status_code == 503, r.text
        assert r.json()["code"] == "UNAVAILABLE", r.text
        assert "matcher" in r.text
    finally:
        c.close()
