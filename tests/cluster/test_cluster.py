"""Several processes over NATS JetStream (docs/architecture.md, "Processes"): a real
nats-server, two `--role ingest` sidecars (one active, one standby) and two `--role gateway`
sidecars on the session's test cluster, all on free ports.

Every check is built from the events the listeners received and compared with a fresh
`:runQuery` after quiescence (a marker document every listener must see last). Transactions
are SQL transactions of `docstore.set` / `docstore.delete`; each set writes the field `txn`,
so a listener can tell which transaction a change came from: a transaction must arrive in one
event (whole), once (no duplicate), and none may be missing. No test asserts on a duration.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from conftest import free_port, sidecar_binary, sidecar_env, sidecar_login, sse_events

WAIT = 60

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
# Small, so that test 4's transaction of about 250 KB is split into parts.
MAX_PAYLOAD = 64 * 1024
SLOT = "cluster_e2e"
STREAM = "DOCSTORE_TX"
SUBJECT = f"docstore.{STREAM}"
RUN = "/v1/databases/(default):runQuery"
LISTEN = "/v1/databases/(default):listen"


class Nats:
    """nats-server on a free port with its store under `dir` (JetStream unless told
    otherwise) and configuration `extra` (default: the cluster tests' `max_payload`);
    restartable on the same port and store. Started at once unless `start` is false."""

    def __init__(
        self,
        dir: Path,
        extra: str = f"max_payload: {MAX_PAYLOAD}\n",
        jetstream: bool = True,
        start: bool = True,
    ) -> None:
        self.dir = dir
        self.port = free_port()
        store = f'jetstream {{ store_dir: "{dir / "store"}" }}\n' if jetstream else ""
        self.conf = dir / "nats.conf"
        self.conf.write_text(f"listen: 127.0.0.1:{self.port}\n{store}{extra}")
        self.proc: subprocess.Popen | None = None
        if start:
            self.start()

    @property
    def url(self) -> str:
        return self.url_with("")

    def url_with(self, auth: str) -> str:
        """The server's URL carrying credentials `auth` (`user:password` or a token)."""
        return f"nats://{auth + '@' if auth else ''}127.0.0.1:{self.port}"

    def start(self) -> None:
        log = (self.dir / "nats.log").open("a")
        self.proc = subprocess.Popen(
            [NATS_SERVER, "-c", str(self.conf)], stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + WAIT
        while True:
            with contextlib.suppress(OSError):
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(4096).startswith(b"INFO"):
                        return
            assert time.monotonic() < deadline, (self.dir / "nats.log").read_text()
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(WAIT)
            self.proc = None

    def publish_raw(self, payload: bytes, headers: dict[str, str] | None = None) -> None:
        """Publish `payload` on the stream's subject over the plain NATS protocol (JetStream
        stores it like any message of its subject); waits for the server's PONG."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=WAIT) as s:
            s.recv(4096)
            s.sendall(b'CONNECT {"verbose":false,"headers":true}\r\n')
            if headers:
                head = "NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                head_bytes = (head + "\r\n").encode()
                total = len(head_bytes) + len(payload)
                s.sendall(f"HPUB {SUBJECT} {len(head_bytes)} {total}\r\n".encode())
                s.sendall(head_bytes + payload + b"\r\n")
            else:
                s.sendall(f"PUB {SUBJECT} {len(payload)}\r\n".encode() + payload + b"\r\n")
            s.sendall(b"PING\r\n")
            got = b""
            while b"PONG" not in got:
                chunk = s.recv(4096)
                assert chunk, "nats-server closed the connection"
                assert b"-ERR" not in chunk, chunk
                got += chunk


@dataclass
class Role:
    name: str
    url: str
    proc: subprocess.Popen
    log: Path


class Listener:
    """An SSE stream on one gateway read by a thread: `events` is every (event, id, data)."""

    def __init__(self, url: str, admin: dict[str, str], coll: str) -> None:
        self.events: list[tuple[str, str, dict]] = []
        self.lock = threading.Lock()
        self.opened = threading.Event()
        self.stop = False
        self.client = httpx.Client(base_url=url, timeout=httpx.Timeout(WAIT, read=None))
        body = {"targets": [{"id": "all", "sql": f"select * from /{coll}"}]}
        self.thread = threading.Thread(target=self.run, args=(admin, body), daemon=True)
        self.thread.start()
        assert self.opened.wait(WAIT), "the stream did not open"

    def run(self, admin: dict[str, str], body: dict) -> None:
        try:
            with self.client.stream("POST", LISTEN, json=body, headers=admin) as r:
                assert r.status_code == 200, r.read()
                self.opened.set()
                ev: dict = {}
                for line in r.iter_lines():
                    if self.stop:
                        return
                    if line == "":
                        if "event" in ev:
                            with self.lock:
                                self.events.append((ev["event"], ev.get("id", ""), ev["data"]))
                        ev = {}
                    elif not line.startswith(":") and not line.startswith("retry:"):
                        name, _, value = line.partition(": ")
                        ev[name] = json.loads(value) if name == "data" else value
        except (httpx.HTTPError, OSError):
            pass
        finally:
            self.opened.set()

    def snapshot(self) -> list[tuple[str, str, dict]]:
        with self.lock:
            return list(self.events)

    def wait_for_doc(self, path_suffix: str) -> None:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            for kind, _, data in self.snapshot():
                if kind == "change" and any(
                    c.get("document", {}).get("path", "").endswith(path_suffix)
                    for t in data["targets"]
                    for c in t["changes"]
                ):
                    return
            time.sleep(0.05)
        raise AssertionError(f"no change with {path_suffix}: {self.snapshot()[-5:]}")

    def close(self) -> None:
        self.stop = True
        self.client.close()
        self.thread.join(WAIT)


class Cluster:
    """nats-server, ingests and gateways of the test, and what they serve."""

    def __init__(self, stack, dir: Path) -> None:
        self.stack = stack
        self.dir = dir
        self.binary = str(sidecar_binary())
        self.database_url = sidecar_login(stack.cluster, role="docstore_cluster_e2e")
        self.nats = Nats(dir)
        self.roles: list[Role] = []

    def start(self, role: str, name: str, **env: str) -> Role:
        """Start a `role` process named `name`; `env`: variables of its own."""
        port = free_port()
        log = self.dir / f"{name}.log"
        env = sidecar_env(self.stack, port, self.database_url, **{"RUST_LOG": "info", **env})
        args = ["--role", role, "--nats-url", self.nats.url, "--slot", SLOT]
        proc = subprocess.Popen(
            [self.binary, *args], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
        )
        r = Role(name, f"http://127.0.0.1:{port}", proc, log)
        self.roles.append(r)
        return r

    def wait_health(self, r: Role, want: int, text: str = "") -> None:
        deadline = time.monotonic() + WAIT
        last = ""
        while time.monotonic() < deadline:
            assert r.proc.poll() is None, f"{r.name} exited: {r.log.read_text()[-3000:]}"
            try:
                got = httpx.get(f"{r.url}/healthz", timeout=5)
                last = got.text
                if got.status_code == want and text in got.text:
                    return
            except httpx.HTTPError as e:
                last = str(e)
            time.sleep(0.1)
        raise AssertionError(f"{r.name} /healthz never {want} {text!r}: {last}")

    def metric(self, r: Role, name: str) -> float:
        text = httpx.get(f"{r.url}/metrics", timeout=10).text
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name) and not line.startswith("#")
        )

    def close(self) -> None:
        for r in self.roles:
            if r.proc.poll() is None:
                r.proc.terminate()
                try:
                    r.proc.wait(15)
                except subprocess.TimeoutExpired:
                    r.proc.kill()
                    r.proc.wait(15)
        self.nats.kill()
        self.stack.sql(
            "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
            "where slot_name = %s and not active",
            SLOT,
        )


@pytest.fixture(scope="module")
def cluster(stack, tmp_path_factory):
    c = Cluster(stack, tmp_path_factory.mktemp("cluster"))
    try:
        c.ingest = c.start("ingest", "ingest1")
        c.wait_health(c.ingest, 200)
        c.standby = c.start("ingest", "ingest2")
        c.wait_health(c.standby, 503, "standby")
        c.gateways = [c.start("gateway", "gateway1"), c.start("gateway", "gateway2")]
        for g in c.gateways:
            c.wait_health(g, 200)
        yield c
    finally:
        c.close()
        if os.environ.get("DOCSTORE_KEEP_LOGS"):
            print(f"cluster logs kept in {c.dir}")


def run_txn(conn: psycopg.Connection, coll: str, txn: int, rng: random.Random) -> set[str]:
    """One SQL transaction of 1-4 writes in `coll`; returns the paths it set."""
    sets: set[str] = set()
    with conn.transaction():
        for _ in range(rng.randint(1, 4)):
            path = f"{coll}/d{rng.randint(0, 15)}"
            if rng.random() < 0.25:
                conn.execute("select docstore.delete(%s)", (path,))
                sets.discard(path)
            else:
                data = {"txn": txn, "v": rng.randint(0, 1_000_000)}
                conn.execute("select docstore.set(%s, %s::jsonb)", (path, json.dumps(data)))
                sets.add(path)
    return sets


def fresh(c: Cluster, coll: str) -> dict[str, dict]:
    r = httpx.post(
        c.gateways[0].url + RUN,
        headers=c.stack.admin,
        json={"sql": f"select * from /{coll}"},
        timeout=WAIT,
    )
    assert r.status_code == 200, r.text
    return {row["path"]: row["data"] for row in r.json()}


def check_stream(
    events: list[tuple[str, str, dict]], written: dict[int, set[str]], coll: str
) -> dict[str, dict]:
    """Every transaction of `written` (its set paths) in exactly one change event, whole;
    positions strictly increase; no reset. Returns the state the events build."""
    state: dict[str, dict] = {}
    seen: dict[int, list[int]] = {}
    last_position = -1
    for index, (kind, _, data) in enumerate(events):
        assert kind != "reset", f"reset: {data}"
        if kind not in ("snapshot", "change"):
            continue
        position = int(data["position"].split("/")[0], 16) << 32 | int(
            data["position"].split("/")[1], 16
        )
        assert position > last_position, f"position went back at event {index}"
        last_position = position
        if kind == "snapshot":
            for t in data["targets"]:
                state = {d["path"]: d["data"] for d in t["documents"]}
            changes = [c for t in data.get("changes", []) for c in t["changes"]]
        else:
            changes = [c for t in data["targets"] for c in t["changes"]]
        in_event: dict[int, set[str]] = {}
        for ch in changes:
            if ch["type"] == "removed":
                state.pop(ch["path"], None)
                continue
            doc = ch["document"]
            state[doc["path"]] = doc["data"]
            if kind == "change" and "txn" in doc["data"]:
                in_event.setdefault(doc["data"]["txn"], set()).add(short(doc["path"]))
        for txn, paths in in_event.items():
            seen.setdefault(txn, []).append(index)
            if txn in written:
                assert paths == written[txn], f"transaction {txn} split: {paths} != {written[txn]}"
    for txn, paths in written.items():
        if paths:
            assert len(seen.get(txn, [])) == 1, f"transaction {txn} in events {seen.get(txn)}"
    return state


def quiesce(c: Cluster, listeners: list[Listener], coll: str, marker: str) -> None:
    c.stack.sql("select docstore.set(%s, '{\"marker\": true}'::jsonb)", f"{coll}/{marker}")
    for listener in listeners:
        listener.wait_for_doc(f"{coll}/{marker}")


def short(path: str) -> str:
    """A document path without the resource prefix, if it has one."""
    return path.rsplit("/documents/", 1)[-1]


def short_state(state: dict[str, dict]) -> dict[str, dict]:
    return {short(p): d for p, d in state.items()}


def workload(c: Cluster, coll: str, txns: range, rng: random.Random, pause=None) -> dict:
    written: dict[int, set[str]] = {}
    with psycopg.connect(c.stack.cluster.url(), autocommit=True) as conn:
        for txn in txns:
            written[txn] = run_txn(conn, coll, txn, rng)
            if pause is not None:
                pause(txn)
    return written


def listen_all(c: Cluster, coll: str) -> list[Listener]:
    listeners = [Listener(g.url, c.stack.admin, coll) for g in c.gateways]
    for listener in listeners:
        deadline = time.monotonic() + WAIT
        while not any(k == "snapshot" for k, _, _ in listener.snapshot()):
            assert time.monotonic() < deadline, "no snapshot"
            time.sleep(0.05)
    return listeners


def check_all(c: Cluster, listeners: list[Listener], written: dict, coll: str) -> None:
    quiesce(c, listeners, coll, "zz-marker")
    want = short_state(fresh(c, coll))
    for listener in listeners:
        got = short_state(check_stream(listener.snapshot(), written, coll))
        assert got == want


def seeded() -> random.Random:
    seed = int(os.environ.get("DOCSTORE_SEED", random.randrange(1 << 32)))
    print(f"DOCSTORE_SEED={seed}")
    return random.Random(seed)


def test_every_gateway_sees_every_transaction_once_and_whole(cluster, coll):
    rng = seeded()
    listeners = listen_all(cluster, coll)
    try:
        written = workload(cluster, coll, range(60), rng)
        check_all(cluster, listeners, written, coll)
        assert cluster.metric(cluster.ingest, "docstore_ingest_published_transactions_total") > 0
        for g in cluster.gateways:
            assert cluster.metric(g, "docstore_gateway_received_transactions_total") > 0
    finally:
        for listener in listeners:
            listener.close()


def test_a_killed_ingest_is_replaced_by_the_standby_without_loss(cluster, coll):
    rng = seeded()
    listeners = listen_all(cluster, coll)
    killed = cluster.ingest

    def kill_midway(txn: int) -> None:
        if txn == 20:
            killed.proc.send_signal(signal.SIGKILL)
            killed.proc.wait(WAIT)

    try:
        written = workload(cluster, coll, range(60), rng, pause=kill_midway)
        cluster.wait_health(cluster.standby, 200)
        check_all(cluster, listeners, written, coll)
    finally:
        for listener in listeners:
            listener.close()
    # The standby is the active ingest now; a new standby takes the old one's place.
    cluster.ingest = cluster.standby
    cluster.standby = cluster.start("ingest", "ingest3")
    cluster.wait_health(cluster.standby, 503, "standby")


def test_gateways_continue_after_a_nats_restart(cluster, coll):
    rng = seeded()
    listeners = listen_all(cluster, coll)

    def restart_midway(txn: int) -> None:
        if txn == 15:
            cluster.nats.kill()
        if txn == 30:
            cluster.nats.start()

    try:
        written = workload(cluster, coll, range(45), rng, pause=restart_midway)
        for g in cluster.gateways:
            cluster.wait_health(g, 200)
        check_all(cluster, listeners, written, coll)
        for g in cluster.gateways:
            reconnects = cluster.metric(g, "docstore_gateway_nats_reconnects_total")
            restarts = cluster.metric(g, "docstore_gateway_jetstream_restarts_total")
            assert reconnects + restarts >= 1
    finally:
        for listener in listeners:
            listener.close()


def test_a_transaction_bigger_than_max_payload_arrives_whole(cluster, coll):
    listeners = listen_all(cluster, coll)
    try:
        written: dict[int, set[str]] = {1: set()}
        with psycopg.connect(cluster.stack.cluster.url(), autocommit=True) as conn:
            with conn.transaction():
                for i in range(5):
                    path = f"{coll}/big{i}"
                    data = {"txn": 1, "blob": f"{i}" * 50_000}
                    conn.execute("select docstore.set(%s, %s::jsonb)", (path, json.dumps(data)))
                    written[1].add(path)
        check_all(cluster, listeners, written, coll)
    finally:
        for listener in listeners:
            listener.close()


def test_garbage_on_the_stream_is_logged_and_skipped(cluster, coll):
    rejected = [cluster.metric(g, "docstore_gateway_rejected_total") for g in cluster.gateways]
    listeners = listen_all(cluster, coll)
    try:
        cluster.nats.publish_raw(b"\x01{not json")
        cluster.nats.publish_raw(b"\x07" + b"a future version")
        cluster.nats.publish_raw(b"\x01{}", {"Docstore-Part": "3/2"})
        written = workload(cluster, coll, range(5), seeded())
        check_all(cluster, listeners, written, coll)
        for g, before in zip(cluster.gateways, rejected, strict=True):
            assert cluster.metric(g, "docstore_gateway_rejected_total") == before + 3
            cluster.wait_health(g, 200)
            assert "JetStream message skipped" in g.log.read_text()
    finally:
        for listener in listeners:
            listener.close()


def test_an_ingest_killed_while_nats_is_down_loses_nothing(cluster, coll):
    """The slot is confirmed only past what JetStream acknowledged: while NATS is down the
    active ingest's publishes wait unacknowledged, so the slot stays before them (watched
    over a number of polls), and an ingest SIGKILLed then (whatever it had buffered dies
    with it) leaves them to the standby, which reads them again from the slot."""
    rng = seeded()
    listeners = listen_all(cluster, coll)
    try:
        cluster.nats.kill()
        [(before,)] = cluster.stack.sql("select pg_current_wal_insert_lsn()::text")
        written = workload(cluster, coll, range(5), rng)
        for _ in range(50):
            [(confirmed,)] = cluster.stack.sql(
                "select confirmed_flush_lsn <= %s::pg_lsn from pg_replication_slots "
                "where slot_name = %s",
                before,
                SLOT,
            )
            assert confirmed, "the slot was confirmed past what JetStream does not hold"
            time.sleep(0.2)
        cluster.ingest.proc.send_signal(signal.SIGKILL)
        cluster.ingest.proc.wait(WAIT)
        cluster.nats.start()
        cluster.wait_health(cluster.standby, 200)
        for g in cluster.gateways:
            cluster.wait_health(g, 200)
        check_all(cluster, listeners, written, coll)
    finally:
        for listener in listeners:
            listener.close()
    cluster.ingest = cluster.standby
    cluster.standby = cluster.start("ingest", "ingest4")
    cluster.wait_health(cluster.standby, 503, "standby")


def test_a_gateway_that_read_nothing_before_nats_restarted_misses_nothing(cluster, coll):
    """A gateway reads from the end the stream had when it started, by sequence, and goes on
    from there when NATS restarts before it read anything (a consumer made again from the end
    of that moment would skip what the ingest published before it was made). The active
    ingest is held (SIGSTOP) while a new gateway starts and a stream opens on it, so that the
    gateway has read nothing; the gateway is held while NATS restarts and the ingest publishes
    the workload (the other gateways saw all of it); then the new gateway's stream must get
    every transaction."""
    rng = seeded()
    ingest = cluster.ingest
    gateway = None
    listener = None
    others: list[Listener] = []
    ingest.proc.send_signal(signal.SIGSTOP)
    try:
        gateway = cluster.start("gateway", "gateway3")
        cluster.wait_health(gateway, 200)
        listener = Listener(gateway.url, cluster.stack.admin, coll)
        gateway.proc.send_signal(signal.SIGSTOP)
        cluster.nats.kill()
        cluster.nats.start()
    finally:
        ingest.proc.send_signal(signal.SIGCONT)
    try:
        for g in cluster.gateways:
            cluster.wait_health(g, 200)
        others = listen_all(cluster, coll)
        written = workload(cluster, coll, range(20), rng)
        quiesce(cluster, others, coll, "published")
        gateway.proc.send_signal(signal.SIGCONT)
        cluster.wait_health(gateway, 200)
        check_all(cluster, [listener], written, coll)
    finally:
        if gateway is not None:
            gateway.proc.send_signal(signal.SIGCONT)
        for one in [*others, *([listener] if listener else [])]:
            one.close()
        if gateway is not None:
            gateway.proc.terminate()
            gateway.proc.wait(WAIT)
            cluster.roles.remove(gateway)


def test_a_new_stream_sends_no_heartbeat_before_its_first_snapshot(cluster, coll):
    """A stream sends no heartbeat before its first snapshot: a heartbeat's position would be
    a token at which the client holds no results, and a resume with it on another gateway
    would be adopted as if the client had them (a `change` to a client with nothing to apply
    it to). The active ingest is held (SIGSTOP) while transactions commit and a stream opens
    on a gateway, and for longer than a heartbeat interval; let go, it publishes them, and the
    gateway passes transactions at positions before the stream's read (heartbeat candidates)
    before the one its first snapshot waits for."""
    ingest = cluster.ingest
    ingest.proc.send_signal(signal.SIGSTOP)
    try:
        workload(cluster, coll, range(5), seeded())
        listener = Listener(cluster.gateways[0].url, cluster.stack.admin, coll)
        time.sleep(2)  # the stream's last event (its opening) is older than an interval
    finally:
        ingest.proc.send_signal(signal.SIGCONT)
    try:
        deadline = time.monotonic() + WAIT
        while not listener.snapshot():
            assert time.monotonic() < deadline, "no event"
            time.sleep(0.05)
        first = listener.snapshot()[0]
        assert first[0] == "snapshot", first
        check_all(cluster, [listener], {}, coll)
    finally:
        listener.close()


def resumed_with_reset_and_snapshot(
    cluster: Cluster, url: str, token: str, coll: str, sql: str
) -> None:
    """Resume `token` on the gateway at `url`: its first events are a reset and a snapshot
    (no change before it) equal to a fresh query of `coll`."""
    headers = {**cluster.stack.admin, "Last-Event-ID": token}
    with httpx.Client(base_url=url, timeout=httpx.Timeout(WAIT)) as client:
        body = {"targets": [{"id": "all", "sql": sql}]}
        with client.stream("POST", LISTEN, json=body, headers=headers) as r:
            assert r.status_code == 200, r.read()
            got: list[tuple[str, dict]] = []
            for ev in sse_events(r.iter_lines()):
                got.append((ev["event"], ev["data"]))
                if ev["event"] in ("snapshot", "change"):
                    break
    assert [k for k, _ in got] == ["reset", "snapshot"], got
    shown = {short(d["path"]): d["data"] for d in got[1][1]["targets"][0]["documents"]}
    assert shown == short_state(fresh(cluster, coll))


@contextlib.contextmanager
def lagged_stream(cluster: Cluster, gateway, coll: str, sql: str):
    """A stream of `sql` opened on `gateway` by a client that reads nothing (a 4 KiB receive
    buffer) while documents of 4 KB are written to `coll`, until the gateway counts a lagged
    reset; then the client reads: yields its events, the last `reset {lagged}`."""
    transport = httpx.HTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)])
    slow = httpx.Client(base_url=gateway.url, transport=transport, timeout=httpx.Timeout(WAIT))
    events: list[tuple[str, str, dict]] = []
    go = threading.Event()
    opened = threading.Event()

    def read() -> None:
        with contextlib.suppress(httpx.HTTPError):
            body = {"targets": [{"id": "all", "sql": sql}]}
            with slow.stream("POST", LISTEN, json=body, headers=cluster.stack.admin) as r:
                opened.set()
                go.wait()
                for ev in sse_events(r.iter_lines()):
                    events.append((ev["event"], ev.get("id", ""), ev["data"]))
        opened.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert opened.wait(WAIT), "the stream did not open"
        name = 'docstore_session_resets_total{reason="lagged"}'
        lagged = cluster.metric(gateway, name)
        big = "x" * 4000
        with psycopg.connect(cluster.stack.cluster.url(), autocommit=True) as conn:
            for i in range(20000):
                conn.execute(
                    "select docstore.set(%s, jsonb_build_object('n', %s::int, 'pad', %s::text))",
                    (f"{coll}/big", i, big),
                )
                if i % 50 == 49 and cluster.metric(gateway, name) > lagged:
                    break
        assert cluster.metric(gateway, name) > lagged, "the slow stream never lagged"
        go.set()
        reader.join(WAIT)
        assert not reader.is_alive(), f"the stream did not end: last events {events[-3:]}"
        assert events and events[-1][0] == "reset", events[-3:]
        assert events[-1][2]["reason"] == "lagged", events[-1]
        yield events
    finally:
        go.set()
        slow.close()


def test_a_stream_that_lags_after_a_nats_restart_ends_and_starts_over_on_another_gateway(
    cluster, coll
):
    """The cluster oracle's slow reader waited once in vain for its `reset {lagged}` and the
    next snapshot right after nats-server restarted (BENCHMARKS.md, "Against the cluster, a
    fresh seed"). Here nats-server restarts on its store, both gateways read JetStream again
    (a write reaches each), then a client on a gateway with a queue of 4 reads nothing while
    its target changes a lot: the gateway ends the stream; the client reads its `reset
    {lagged}` (sent once the registry forgot the stream), resumes on the other gateway with
    that id, and gets a reset and a snapshot equal to a fresh query."""
    slow_gateway = cluster.start("gateway", "gateway-slow", DOCSTORE_LISTEN_QUEUE="4")
    cluster.wait_health(slow_gateway, 200)
    other = cluster.gateways[0]
    cluster.nats.kill()
    cluster.nats.start()
    for g in (slow_gateway, other):
        cluster.wait_health(g, 200)
    listeners = [Listener(g.url, cluster.stack.admin, coll) for g in (slow_gateway, other)]
    try:
        quiesce(cluster, listeners, coll, "after-restart")
    finally:
        for listener in listeners:
            listener.close()
    sql = f"select * from /{coll}"
    try:
        with lagged_stream(cluster, slow_gateway, coll, sql) as events:
            resumed_with_reset_and_snapshot(cluster, other.url, events[-1][1], coll, sql)
    finally:
        slow_gateway.proc.terminate()
        slow_gateway.proc.wait(15)
