"""`:listen` (docs/listen.md): live queries over SSE against the real sidecar and Postgres.

Every state a test checks is built only from the events a listener received (snapshot,
change, reset) and compared with a fresh `:runQuery` of the same query after quiescence.
Waits have generous limits so that a broken stream fails instead of hanging; no test
asserts on a duration.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from conftest import free_port, sidecar_binary, wait_healthy

LISTEN = "/v1/databases/(default):listen"
RUN = "/v1/databases/(default):runQuery"
WAIT = 60


class Listener:
    """An SSE connection read by a thread; events arrive in a queue."""

    def __init__(self, stack, *, params=None, body=None, headers=None, path=LISTEN):
        self.events: queue.Queue = queue.Queue()
        self.received: list[dict] = []
        self.status: int | None = None
        self.error_body: str | None = None
        self.stream_id: str | None = None
        self._opened = threading.Event()
        self._stop = False
        self._client = httpx.Client(base_url=stack.url, timeout=httpx.Timeout(WAIT, read=None))
        method = "POST" if body is not None else "GET"
        hdrs = dict(stack.admin if headers is None else headers)
        self._thread = threading.Thread(
            target=self._run, args=(method, path, params, body, hdrs), daemon=True
        )
        self._thread.start()
        assert self._opened.wait(WAIT), "the stream did not open"

    def _run(self, method, path, params, body, headers):
        try:
            with self._client.stream(method, path, params=params, json=body, headers=headers) as r:
                self.status = r.status_code
                self.stream_id = r.headers.get("x-docstore-stream")
                if r.status_code != 200:
                    self.error_body = r.read().decode()
                    self._opened.set()
                    return
                self._opened.set()
                ev: dict = {}
                for line in r.iter_lines():
                    if self._stop:
                        return
                    if line == "":
                        if "event" in ev:
                            self.events.put(ev)
                        ev = {}
                    elif line.startswith(":") or line.startswith("retry:"):
                        continue
                    else:
                        name, _, value = line.partition(": ")
                        ev[name] = json.loads(value) if name == "data" else value
        except (httpx.HTTPError, OSError):
            pass
        finally:
            self._opened.set()
            self.events.put(None)

    def next(self) -> dict:
        ev = self.events.get(timeout=WAIT)
        assert ev is not None, "the stream ended"
        self.received.append(ev)
        return ev

    def until(self, pred) -> dict:
        """Events up to and including the first one `pred` accepts."""
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            ev = self.next()
            if pred(ev):
                return ev
        raise AssertionError("no matching event")

    def close(self):
        self._stop = True
        self._client.close()
        self._thread.join(WAIT)


class View:
    """Every target's result, built only from events."""

    def __init__(self):
        self.targets: dict[str, object] = {}
        self.positions: list[str] = []

    def apply(self, ev: dict) -> None:
        kind, data = ev["event"], ev["data"]
        if kind == "reset":
            self.targets.clear()
            return
        self.positions.append(ev["id"])
        if kind == "snapshot":
            for t in data["targets"]:
                self.targets[t["target"]] = (
                    t["aggregation"] if "aggregation" in t else list(t["documents"])
                )
            self._changes(data.get("changes", []))
        elif kind == "change":
            self._changes(data["targets"])

    def _changes(self, targets):
        for t in targets:
            if "aggregation" in t:
                self.targets[t["target"]] = t["aggregation"]
                continue
            docs = self.targets[t["target"]]
            for c in t["changes"]:
                if c["type"] == "removed":
                    assert docs[c["oldIndex"]]["path"] == c["path"], (docs, c)
                    docs.pop(c["oldIndex"])
                elif c["type"] == "added":
                    assert all(d["path"] != c["document"]["path"] for d in docs)
                    docs.insert(c["newIndex"], c["document"])
                else:
                    assert docs[c["oldIndex"]]["path"] == c["document"]["path"], (docs, c)
                    docs.pop(c["oldIndex"])
                    docs.insert(c["newIndex"], c["document"])

    def docs(self, target: str) -> list[tuple[str, dict]]:
        return [(d["path"], d["data"]) for d in self.targets[target]]


def fresh(stack, client, sql: str):
    r = client.post(RUN, headers=stack.admin, json={"sql": sql})
    assert r.status_code == 200, r.text
    rows = r.json()
    if rows and "aggregation" in rows[0]:
        return rows[0]["aggregation"]
    return [(row["path"], row["data"]) for row in rows]


def follow(listener: Listener, view: View, pred) -> dict:
    """Apply events to `view` up to the first one `pred` accepts."""
    while True:
        ev = listener.next()
        view.apply(ev)
        if pred(ev, view):
            return ev


def has_doc(target: str, path: str, data: dict | None = None):
    def pred(ev, view):
        docs = view.targets.get(target)
        if not isinstance(docs, list):
            return False
        return any(d["path"] == path and (data is None or d["data"] == data) for d in docs)

    return pred


def test_snapshot_then_changes_for_a_query_and_a_document(stack, client, coll):
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
    sql = f"select * from /{coll} order by n"
    listener = Listener(stack, params=[("sql", sql), ("document", f"{coll}/a")])
    try:
        assert listener.status == 200, listener.error_body
        view = View()
        first = listener.next()
        assert first["event"] == "snapshot"
        assert first["id"].startswith(listener.stream_id + ".")
        view.apply(first)
        assert view.docs("0") == [(f"{coll}/a", {"n": 1})]
        assert view.docs("1") == [(f"{coll}/a", {"n": 1})]
        stack.sql("select docstore.set(%s, '{\"n\": 0}')", f"{coll}/b")
        stack.sql("select docstore.set(%s, '{\"n\": 5}')", f"{coll}/a")
        follow(listener, view, has_doc("1", f"{coll}/a", {"n": 5}))
        assert view.docs("0") == fresh(stack, client, sql)
        assert view.docs("1") == [(f"{coll}/a", {"n": 5})]
        stack.sql("select docstore.delete(%s)", f"{coll}/a")
        follow(listener, view, lambda ev, v: v.targets["1"] == [])
        assert view.docs("0") == fresh(stack, client, sql) == [(f"{coll}/b", {"n": 0})]
        updated = [
            c
            for ev in listener.received
            if ev["event"] == "change"
            for t in ev["data"]["targets"]
            for c in t["changes"]
            if c["type"] != "removed"
        ]
        assert all(c["document"]["updateTime"].endswith("Z") for c in updated)
    finally:
        listener.close()


def test_documents_carry_their_create_time(stack, client, coll):
    """The documents of a snapshot and of a change carry the document's createTime (its first
    write), as a GET of it does, not their update time."""
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
    stack.sql("select docstore.set(%s, '{\"n\": 2}')", f"{coll}/a")
    created = client.get(stack.doc(f"{coll}/a"), headers=stack.admin).json()["createTime"]
    listener = Listener(
        stack, params=[("sql", f"select * from /{coll}"), ("document", f"{coll}/a")]
    )
    try:
        assert listener.status == 200, listener.error_body
        view = View()
        first = listener.next()
        assert first["event"] == "snapshot"
        view.apply(first)
        for target in ("0", "1"):
            (doc,) = view.targets[target]
            assert doc["createTime"] == created and doc["updateTime"] > created, doc
        stack.sql("select docstore.set(%s, '{\"n\": 3}')", f"{coll}/a")
        follow(listener, view, has_doc("0", f"{coll}/a", {"n": 3}))
        for target in ("0", "1"):
            (doc,) = view.targets[target]
            assert doc["data"] == {"n": 3} and doc["createTime"] == created, doc
    finally:
        listener.close()


def test_targets_advance_together_and_a_transaction_is_one_event(stack, client, coll):
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
    body = {
        "targets": [
            {"id": "all", "sql": f"select * from /{coll}"},
            {
                "id": "big",
                "structuredQuery": {
                    "from": [{"collectionId": coll}],
                    "where": {
                        "fieldFilter": {
                            "field": {"fieldPath": "n"},
                            "op": "GREATER_THAN_OR_EQUAL",
                            "value": 10,
                        }
                    },
                },
            },
            {"id": "doc", "document": f"{coll}/c"},
            {"id": "count", "sql": f"select count(*), sum(n) from /{coll}"},
        ]
    }
    listener = Listener(stack, body=body)
    try:
        assert listener.status == 200, listener.error_body
        view = View()
        first = listener.next()
        assert first["event"] == "snapshot"
        view.apply(first)
        assert {t["target"] for t in first["data"]["targets"]} == {"all", "big", "doc", "count"}
        assert view.targets["doc"] == []
        count_sql = f"select count(*), sum(n) from /{coll}"
        assert view.targets["count"] == fresh(stack, client, count_sql)
        assert sorted(view.targets["count"].values()) == [1, 1]
        writes = [
            {"set": f"{coll}/b", "data": {"n": 20}},
            {"set": f"{coll}/c", "data": {"n": 30}},
            {"update": f"{coll}/a", "fields": {"n": 11}},
        ]
        stack.sql("select docstore.commit(%s::jsonb)", json.dumps(writes))
        ev = listener.until(lambda e: e["event"] != "heartbeat")
        assert ev["event"] == "change", ev
        view.apply(ev)
        changed = {t["target"] for t in ev["data"]["targets"]}
        # One committed transaction, one event, every target's changes in it.
        assert changed == {"all", "big", "doc", "count"}, ev
        assert view.docs("all") == fresh(stack, client, f"select * from /{coll}")
        assert view.docs("big") == fresh(stack, client, f"select * from /{coll} where n >= 10")
        assert view.docs("doc") == [(f"{coll}/c", {"n": 30})]
        assert sorted(view.targets["count"].values()) == [3, 61]
        assert view.targets["count"] == fresh(stack, client, count_sql)
        tokens = [int(e["id"].rsplit(".", 1)[1], 16) for e in listener.received]
        assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    finally:
        listener.close()


def test_exact_hand_off_under_concurrent_writes(stack, client, coll):
    stack.sql(
        "select count(docstore.set(%s || '/d' || i, jsonb_build_object('n', i))) "
        "from generate_series(1, 20) i",
        coll,
    )
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int):
        import psycopg

        try:
            with psycopg.connect(stack.cluster.url(), autocommit=True) as conn:
                i = 0
                while not stop.is_set():
                    i += 1
                    k = (seed * 7 + i) % 30
                    if i % 5 == 0:
                        conn.execute("select docstore.delete(%s)", (f"{coll}/d{k}",))
                    else:
                        writes = [
                            {"set": f"{coll}/d{k}", "data": {"n": (i * 13 + seed) % 50}},
                            {"set": f"{coll}/d{(k + 11) % 30}", "data": {"n": i % 50}},
                        ]
                        conn.execute("select docstore.commit(%s::jsonb)", (json.dumps(writes),))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(s,), daemon=True) for s in range(3)]
    for t in threads:
        t.start()
    queries = [
        f"select * from /{coll}",
        f"select * from /{coll} where n >= 25",
        f"select * from /{coll} order by n desc limit 3",
    ]
    listeners = []
    try:
        for i in range(6):
            listeners.append(Listener(stack, params=[("sql", queries[i % 3])]))
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(WAIT)
        assert not errors, errors
        # Quiescence: a marker written after every writer stopped; once a listener shows it,
        # it has every earlier transaction.
        stack.sql("select docstore.set(%s, '{\"n\": 100}')", f"{coll}/marker")
        for i, listener in enumerate(listeners):
            assert listener.status == 200, listener.error_body
            view = View()
            follow(listener, view, has_doc("0", f"{coll}/marker"))
            assert view.docs("0") == fresh(stack, client, queries[i % 3]), queries[i % 3]
    finally:
        stop.set()
        for listener in listeners:
            listener.close()


def test_resume_with_last_event_id_misses_and_repeats_nothing(stack, client, coll):
    sql = f"select * from /{coll} order by n"
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
    listener = Listener(stack, params=[("sql", sql)])
    view = View()
    try:
        follow(listener, view, lambda ev, v: ev["event"] == "snapshot")
        last = listener.received[-1]["id"]
    finally:
        listener.close()
    stack.sql("select docstore.set(%s, '{\"n\": 2}')", f"{coll}/b")
    stack.sql("select docstore.set(%s, '{\"n\": 0}')", f"{coll}/a")
    stack.sql("select docstore.delete(%s)", f"{coll}/b")
    headers = {**stack.admin, "Last-Event-ID": last}
    resumed = Listener(stack, params=[("sql", sql)], headers=headers)
    try:
        assert resumed.status == 200, resumed.error_body
        assert resumed.stream_id == last.rsplit(".", 1)[0]
        seen = []
        while len(seen) < 3:
            ev = resumed.next()
            assert ev["event"] in ("change", "heartbeat"), ev
            if ev["event"] == "change":
                seen.append(ev)
            view.apply(ev)
        positions = [int(e["id"].rsplit(".", 1)[1], 16) for e in seen]
        assert positions == sorted(set(positions))
        assert positions[0] > int(last.rsplit(".", 1)[1], 16)
        assert view.docs("0") == fresh(stack, client, sql) == [(f"{coll}/a", {"n": 0})]
    finally:
        resumed.close()


def test_resume_outside_retention_resets_then_snapshots(stack, client, coll):
    sql = f"select * from /{coll}"
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
    # A stream this sidecar never had (another instance's): reset, then a new stream.
    listener = Listener(stack, params=[("sql", sql), ("resume", "0123abcd-1.0000000000000001")])
    try:
        assert listener.status == 200, listener.error_body
        reset = listener.next()
        assert reset["event"] == "reset"
        assert reset["data"]["reason"] == "restart"
        snap = listener.next()
        assert snap["event"] == "snapshot"
        view = View()
        view.apply(reset)
        view.apply(snap)
        assert view.docs("0") == fresh(stack, client, sql)
        token = snap["id"]
    finally:
        listener.close()
    # A known stream at a position it never reached: reset, then its current results.
    stream = token.rsplit(".", 1)[0]
    listener = Listener(stack, params=[("resume", f"{stream}.7fffffffffffffff")])
    try:
        reset = listener.next()
        assert reset["event"] == "reset"
        assert reset["data"]["reason"] == "retention_passed"
        snap = listener.next()
        assert snap["event"] == "snapshot"
        view = View()
        view.apply(snap)
        assert view.docs("0") == fresh(stack, client, sql)
    finally:
        listener.close()


def extra_sidecar(stack, slot: str, **env_extra: str):
    """A second sidecar on the test cluster with a slot of its own; yields its port."""
    port = free_port()
    log = Path(stack.cluster.dir) / f"sidecar-{slot}.log"
    env = {
        **os.environ,
        "DOCSTORE_DATABASE_URL": stack.cluster.url(),
        "DOCSTORE_LISTEN": f"127.0.0.1:{port}",
        "DOCSTORE_ADMIN_KEY": stack.admin_key,
        "DOCSTORE_JWT_SECRET": stack.jwt_secret,
        "DOCSTORE_SLOT": slot,
        **env_extra,
    }
    binary = str(sidecar_binary())
    proc = subprocess.Popen([binary], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log)
        yield port
    finally:
        proc.terminate()
        proc.wait(15)
        stack.sql(
            "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
            "where slot_name = %s and not active",
            slot,
        )


@pytest.fixture
def small_queue_sidecar(stack):
    """A second sidecar with a queue of 4 events per stream."""
    yield from extra_sidecar(stack, "docstore_small_queue", DOCSTORE_LISTEN_QUEUE="4")


@pytest.fixture
def own_slot_sidecar(stack):
    """A second sidecar whose slot a test may drop."""
    yield from extra_sidecar(stack, "docstore_dropped")


def test_a_slow_client_gets_reset_lagged(stack, coll, small_queue_sidecar):
    stack.sql("select docstore.set(%s, '{\"n\": 0}')", f"{coll}/a")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", small_queue_sidecar))
    path = f"{LISTEN}?sql={quote(f'select * from /{coll}')}"
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {stack.admin_key}\r\n"
        "Connection: close\r\n\r\n"
    )
    sock.sendall(request.encode())
    try:
        # The client reads nothing while many transactions change its target.
        big = "x" * 2000
        with __import__("psycopg").connect(stack.cluster.url(), autocommit=True) as conn:
            for i in range(1500):
                conn.execute(
                    "select docstore.set(%s, jsonb_build_object('n', %s::int, 'pad', %s::text))",
                    (f"{coll}/a", i, big),
                )
        sock.settimeout(WAIT)
        data = b""
        # Bounded as a whole: a stream that is never reset stays open on its heartbeats
        # (each resets the socket's timeout), so an unbounded read would hang, not fail.
        deadline = time.monotonic() + 4 * WAIT
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        else:
            raise AssertionError(f"the stream was not closed within {4 * WAIT} s: {data[-2000:]!r}")
    finally:
        sock.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0], head
    # Chunked transfer encoding: the frames survive it as text between chunk sizes.
    text = body.decode(errors="replace")
    assert "event: reset" in text, text[-2000:]
    tail = text[text.rindex("event: reset") :]
    assert '"reason":"lagged"' in tail
    assert "event: change" not in tail


def test_a_listen_query_creates_its_index_where_the_database_does_so(stack, client):
    """A database with automatic composite indexes (docs/query.md; make up's (default), the
    databases development mode creates): a listen query that needs a composite index creates
    it, as a query does, although the first results are read in a snapshot transaction (where
    the extension creates none), and the stream opens with them."""
    database = "auto-" + os.urandom(6).hex()
    stack.sql("select docstore.create_database(%s)", database)
    stack.sql(
        "select docstore.set_database_options(%s, null, auto_composite_indexes => true)", database
    )
    for name, n in (("a", 2), ("b", 1), ("c", 3)):
        doc = stack.doc(f"c/{name}", database)
        r = client.put(doc, headers=stack.admin, json={"k": 1 if name != "c" else 2, "n": n})
        assert r.status_code == 200, r.text
    sql = "select * from /c where k = 1 order by n"
    listener = Listener(stack, params=[("sql", sql)], path=f"/v1/databases/{database}:listen")
    try:
        assert listener.status == 200, listener.error_body
        view = View()
        follow(listener, view, lambda ev, v: ev["event"] == "snapshot")
        assert [path for path, _ in view.docs("0")] == ["c/b", "c/a"]
    finally:
        listener.close()
    indexes = stack.sql(
        "select count(*) from docstore.indexes where database_id = %s and state = 'READY'",
        database,
    )
    assert indexes == [(1,)]


def test_a_listen_query_missing_its_index_runs_once_where_the_database_creates_none(stack, client):
    """A database without automatic composite indexes (the default): a listen query that
    needs a composite index is refused with FAILED_PRECONDITION after one run, its snapshot
    read; no second run in a READ COMMITTED transaction, which could create nothing there.
    Postgres logs each failed statement (its log_min_error_statement), so the cluster's log
    shows which ran."""
    database = "noauto-" + os.urandom(6).hex()
    stack.sql("select docstore.create_database(%s)", database)
    r = client.put(stack.doc("c/a", database), headers=stack.admin, json={"k": 1, "n": 1})
    assert r.status_code == 200, r.text
    log = Path(stack.cluster.log)
    start = log.stat().st_size
    r = client.get(
        f"/v1/databases/{database}:listen",
        params=[("sql", "select * from /c where k = 1 order by n")],
        headers=stack.admin,
    )
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "FAILED_PRECONDITION", r.text
    assert "create_index" in r.text
    with log.open("rb") as f:
        f.seek(start)
        statements = [
            line.decode(errors="replace").split("STATEMENT:", 1)[1].strip()
            for line in f.read().splitlines()
            if b"STATEMENT:" in line and b"docstore.run_query" in line
        ]
    # The snapshot's read failed (so its failure is logged), and nothing ran the query again.
    assert len(statements) == 1, statements
    assert statements[0].startswith("select path, data"), statements


def test_bad_input_is_refused_before_the_stream_opens(stack, client, coll):
    cases = [
        ("/v1/databases/nosuchdb:listen", [("sql", f"select * from /{coll}")], 404, "NOT_FOUND"),
        (LISTEN, [("sql", "select * from")], 400, "INVALID_ARGUMENT"),
        (LISTEN, [("document", coll)], 400, "INVALID_ARGUMENT"),
        (
            LISTEN,
            [("sql", f"select * from /{coll}"), ("resume", "garbage")],
            400,
            "INVALID_ARGUMENT",
        ),
        (LISTEN, [("bogus", "1")], 400, "INVALID_ARGUMENT"),
        (
            LISTEN,
            [("document", f"{coll}/a"), ("access_token", "t1"), ("access_token", "t2")],
            400,
            "INVALID_ARGUMENT",
        ),
        (
            LISTEN,
            [("sql", f"select * from /{coll} where a = 1 and b > 2 order by b, c")],
            400,
            "FAILED_PRECONDITION",
        ),
    ]
    for path, params, status, code in cases:
        r = client.get(path, params=params, headers=stack.admin)
        assert r.status_code == status, (params, r.text)
        assert r.headers["content-type"] == "application/json"
        assert r.json()["code"] == code, r.text
        if code == "FAILED_PRECONDITION":
            assert "create_index" in r.text
    r = client.post(LISTEN, headers=stack.admin, json={"targets": [{"id": "x"}]})
    assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT"
    r = client.post(
        LISTEN,
        headers=stack.admin,
        json={
            "targets": [
                {"id": "x", "sql": f"select * from /{coll}"},
                {"id": "x", "document": f"{coll}/a"},
            ]
        },
    )
    assert r.status_code == 400 and "twice" in r.json()["message"]
    # A kindless query holding what it may not (a filter on a field) is refused as by :runQuery.
    kindless = {
        "parent": f"{coll}/p",
        "from": [{"collectionId": "", "allDescendants": True}],
        "where": {"fieldFilter": {"field": {"fieldPath": "a"}, "op": "EQUAL", "value": 1}},
    }
    r = client.post(
        LISTEN,
        headers=stack.admin,
        json={"targets": [{"id": "x", "structuredQuery": kindless}]},
    )
    assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", r.text


def test_a_kindless_query_is_a_live_target(stack, client, coll):
    """A kindless query (an empty collection id with allDescendants: every document under its
    parent, docs/query.md section 2) is a live target: a write in any collection under the
    parent, at any depth, reaches it; one elsewhere, or the parent document itself, does not.
    A caller under rules is refused it, as by :runQuery."""
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/p/x/a")
    query = {"parent": f"{coll}/p", "from": [{"collectionId": "", "allDescendants": True}]}

    def fresh_kindless():
        r = client.post(RUN, headers=stack.admin, json={"structuredQuery": query})
        assert r.status_code == 200, r.text
        return [(row["path"], row["data"]) for row in r.json()]

    listener = Listener(stack, body={"targets": [{"id": "k", "structuredQuery": query}]})
    try:
        assert listener.status == 200, listener.error_body
        view = View()
        first = listener.next()
        assert first["event"] == "snapshot", first
        view.apply(first)
        assert view.docs("k") == [(f"{coll}/p/x/a", {"n": 1})]
        for path in (f"{coll}/q/z/d", f"{coll}/p", f"{coll}/p/y/b", f"{coll}/p/x/a/deep/c"):
            stack.sql("select docstore.set(%s, '{\"n\": 2}')", path)
        follow(listener, view, has_doc("k", f"{coll}/p/x/a/deep/c"))
        assert view.docs("k") == fresh_kindless()
        assert [path for path, _ in view.docs("k")] == [
            f"{coll}/p/x/a",
            f"{coll}/p/x/a/deep/c",
            f"{coll}/p/y/b",
        ]
        stack.sql("select docstore.delete(%s)", f"{coll}/p/x/a")
        follow(listener, view, lambda ev, v: len(v.targets["k"]) == 2)
        assert view.docs("k") == fresh_kindless()
    finally:
        listener.close()
    user = {"Authorization": f"Bearer {stack.token({'sub': 'alice'})}"}
    r = client.post(LISTEN, headers=user, json={"targets": [{"id": "k", "structuredQuery": query}]})
    assert r.status_code == 403 and r.json()["code"] == "PERMISSION_DENIED", r.text


def test_access_token_authenticates_event_source_clients(stack, client, coll):
    token = stack.token({"sub": "alice"})
    listener = Listener(
        stack, params=[("document", f"{coll}/a"), ("access_token", token)], headers={}
    )
    try:
        assert listener.status == 200, listener.error_body
        assert listener.next()["event"] == "snapshot"
    finally:
        listener.close()
    r = client.get(LISTEN, params=[("document", f"{coll}/a"), ("access_token", "not-a-jwt")])
    assert r.status_code == 401 and r.json()["code"] == "UNAUTHENTICATED"
    r = client.get(
        LISTEN,
        params=[
            ("document", f"{coll}/a"),
            ("access_token", stack.token(secret="wrong-secret" * 3)),
        ],
    )
    assert r.status_code == 401


def test_targets_are_added_and_removed_on_a_running_stream(stack, client, coll):
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
    listener = Listener(stack, params=[("document", f"{coll}/a")])
    try:
        view = View()
        follow(listener, view, lambda ev, v: ev["event"] == "snapshot")
        stream = listener.stream_id
        targets = f"/v1/databases/(default):listen/{stream}/targets"
        other = stack.bearer(stack.token({"sub": "mallory"}))
        r = client.post(
            targets, headers=other, json={"targets": [{"id": "q", "sql": f"select * from /{coll}"}]}
        )
        assert r.status_code == 403, r.text
        r = client.post(
            targets,
            headers=stack.admin,
            json={"targets": [{"id": "q", "sql": f"select * from /{coll}"}]},
        )
        assert r.status_code == 200, r.text
        ev = follow(listener, view, lambda ev, v: "q" in v.targets)
        assert ev["event"] == "snapshot"
        assert view.docs("q") == fresh(stack, client, f"select * from /{coll}")
        # The target routes take only access_token, and one of it.
        token = stack.token({"sub": "mallory"})
        for params in ([("bogus", "1")], [("access_token", token), ("access_token", token)]):
            r = client.post(
                targets,
                params=params,
                headers={},
                json={"targets": [{"id": "z", "sql": f"select * from /{coll}"}]},
            )
            assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", r.text
            r = client.delete(f"{targets}/0", params=params, headers={})
            assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", r.text
        r = client.delete(f"{targets}/0", headers=stack.admin)
        assert r.status_code == 200, r.text
        assert client.delete(f"{targets}/0", headers=stack.admin).status_code == 404
        stack.sql("select docstore.set(%s, '{\"n\": 2}')", f"{coll}/a")
        ev = follow(listener, view, has_doc("q", f"{coll}/a", {"n": 2}))
        assert [t["target"] for t in ev["data"]["targets"]] == ["q"]
    finally:
        listener.close()


def test_metrics_count_streams_and_lag(stack, client, coll):
    listener = Listener(stack, params=[("document", f"{coll}/a")])
    try:
        listener.next()
        stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
        listener.until(lambda e: e["event"] == "change")
        text = ""
        for _ in range(50):
            text = client.get("/metrics").text
            if "docstore_session_streams" in text:
                break
            time.sleep(0.2)
        for name in (
            "docstore_session_streams",
            "docstore_session_targets",
            "docstore_session_commit_to_send_seconds",
            "docstore_changelog_retained_bytes",
        ):
            assert name in text, name
    finally:
        listener.close()


def test_a_dropped_slot_resets_every_stream_with_a_fresh_snapshot(stack, coll, own_slot_sidecar):
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
    sql = f"select * from /{coll}"
    other = type(stack)(**{**stack.__dict__, "url": f"http://127.0.0.1:{own_slot_sidecar}"})
    listener = Listener(other, params=[("sql", sql)])
    try:
        view = View()
        follow(listener, view, lambda ev, v: ev["event"] == "snapshot")
        # Drop the slot under the sidecar: end its walsender, then drop it before the
        # sidecar reconnects (it retries with backoff; so may this loop).
        for _ in range(200):
            stack.sql(
                "select pg_terminate_backend(active_pid) from pg_replication_slots "
                "where slot_name = 'docstore_dropped' and active_pid is not null"
            )
            dropped = stack.sql(
                "select pg_drop_replication_slot(slot_name) is null from pg_replication_slots "
                "where slot_name = 'docstore_dropped' and not active"
            )
            if dropped:
                break
        assert dropped, "the slot could not be dropped"
        # Written while the slot is gone: only a fresh snapshot can show it.
        stack.sql("select docstore.set(%s, '{\"n\": 2}')", f"{coll}/b")
        reset = listener.until(lambda e: e["event"] == "reset")
        assert reset["data"]["reason"] == "slot_lost"
        view.apply(reset)
        follow(listener, view, lambda ev, v: ev["event"] == "snapshot")
        with stack.client() as client:
            assert view.docs("0") == fresh(stack, client, sql)
        stack.sql("select docstore.set(%s, '{\"n\": 3}')", f"{coll}/c")
        follow(listener, view, has_doc("0", f"{coll}/c"))
        with stack.client() as client:
            assert view.docs("0") == fresh(stack, client, sql)
    finally:
        listener.close()


def test_a_limit_query_that_runs_out_of_slack_is_read_again(stack, client, coll):
    # 40 documents; the target keeps limit + slack (16) of them. Deleting the first 30 in
    # order, one transaction each, uses the slack up: the sidecar reads the query again and
    # sends the target a new snapshot. Its state must always equal a fresh query.
    stack.sql(
        "select count(docstore.set(%s || '/d' || lpad(i::text, 2, '0'), jsonb_build_object('n', i))) "
        "from generate_series(1, 40) i",
        coll,
    )
    sql = f"select * from /{coll} order by n limit 3"
    listener = Listener(stack, params=[("sql", sql)])
    try:
        view = View()
        follow(listener, view, lambda ev, v: ev["event"] == "snapshot")
        with __import__("psycopg").connect(stack.cluster.url(), autocommit=True) as conn:
            for i in range(1, 31):
                conn.execute("select docstore.delete(%s)", (f"{coll}/d{i:02d}",))
        stack.sql("select docstore.set(%s, '{\"n\": 0}')", f"{coll}/marker")
        follow(listener, view, has_doc("0", f"{coll}/marker"))
        assert view.docs("0") == fresh(stack, client, sql)
        assert view.docs("0")[1:] == [(f"{coll}/d31", {"n": 31}), (f"{coll}/d32", {"n": 32})]
        again = [e for e in listener.received[1:] if e["event"] == "snapshot"]
        assert again, "the slack never ran out: no second snapshot"
    finally:
        listener.close()
