"""The live-query oracle (issue 12 item 6): random documents, random subscriptions, random
multi-document transactions through SQL and HTTP, and faults (the sidecar killed with SIGKILL,
Postgres restarted, connections dropped and resumed with Last-Event-ID, a client too slow to
read). Every subscriber builds its state only from the events it receives; the checks:

- while running, after every event: each `change` applies exactly (an `added` of a present
  document, a `removed`/`modified` of an absent one, or a wrong index is a failure); every
  document a target shows is the version the stream's `__all` target (every document of the
  campaign) shows at that position, so no two targets of a stream are ever at different
  positions; the `__all` target's changes in one event are exactly one transaction's writes
  (all of its sets and updates, the deletes of documents it held, nothing else): no
  transaction is ever split; positions never go back, and two change events never share one;
- a transaction is never delivered twice on a stream, and a stream that was never reset saw
  every committed transaction (0 missed);
- after quiescence (writers stopped, every stream past the WAL position after the last
  write), every target's state equals a fresh `:runQuery` of its query, in order.

Run: `python tests/live/oracle.py SECONDS SEED` (scripts/oracle.sh), or through pytest
(tests/live/test_oracle.py). The seed (DOCSTORE_ORACLE_SEED) decides the documents,
queries, transactions and the fault schedule; thread timing is the machine's.
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from conftest import PG_BIN, Cluster, as_postgres, free_port, sidecar_binary  # noqa: E402

DB = "(default)"
LISTEN = f"/v1/databases/{DB}:listen"
RUN = f"/v1/databases/{DB}:runQuery"
COMMIT = f"/v1/databases/{DB}:commit"

# The documents of the campaign: every one is in a collection named `items`, so the
# collection group `group(items)` (each stream's `__all` target) holds all of them.
POOL = (
    [f"items/i{n:02d}" for n in range(24)]
    + [f"shops/s1/items/j{n:02d}" for n in range(10)]
    + [f"shops/s2/items/k{n:02d}" for n in range(6)]
)
SOURCES = ["/items", "group(items)", "/shops/s1/items"]
ALL = "select * from group(items)"
PADS = "pads"
WORDS = ["x", "y", "z", "w"]
TAGS = ["t1", "t2", "t3", "t4"]


class OracleFailure(AssertionError):
    pass


# ---------------------------------------------------------------------------------------------
# Random documents, queries and transactions


def random_doc(rng: random.Random, txn: str) -> dict[str, Any]:
    doc: dict[str, Any] = {"txn": txn, "a": rng.randrange(10), "b": rng.choice(WORDS)}
    r = rng.random()
    if r < 0.6:
        doc["c"] = rng.randrange(100)
    elif r < 0.8:
        doc["c"] = rng.randrange(1000) / 10
    elif r < 0.9:
        doc["c"] = None
    if rng.random() < 0.7:
        doc["tags"] = rng.sample(TAGS, rng.randrange(4))
    return doc


def random_query(rng: random.Random) -> str:
    """A query of one of the shapes the planner serves and the matcher keeps live."""
    s = rng.choice(SOURCES)
    a = rng.randrange(10)
    w1, w2 = rng.sample(WORDS, 2)
    t1, t2 = rng.sample(TAGS, 2)
    shapes = [
        f"select * from {s} where a = {a}",
        f"select * from {s} where a > {a}",
        f"select * from {s} where a <= {a}",
        f"select * from {s} where a != {a}",
        f"select * from {s} where b in ('{w1}', '{w2}')",
        f"select * from {s} where b not in ('{w1}', '{w2}')",
        f"select * from {s} where tags array_contains '{t1}'",
        f"select * from {s} where tags array_contains_any ('{t1}', '{t2}')",
        f"select * from {s} where a = {a} or b = '{w1}'",
        f"select * from {s} where b = '{w1}' and a >= {a}",
        f"select * from {s} order by a desc limit {rng.randrange(1, 6)}",
        f"select * from {s} order by a limit {rng.randrange(1, 5)} offset {rng.randrange(4)}",
        f"select * from {s} where b = '{w1}' order by a limit {rng.randrange(1, 4)}",
        f"select * from {s} order by a limit last {rng.randrange(1, 5)}",
        f"select * from {s} order by c desc limit last {rng.randrange(1, 4)} offset 1",
        f"select * from {s} order by a start after ({a}) end at ({min(9, a + 3)})",
        f"select * from {s} order by c desc, a start at ({rng.randrange(100)}) limit 4",
        f"select * from {s} where b = '{w1}' order by c limit 3",
        f"select count(*), sum(a), avg(c) from {s} where b = '{w1}'",
        f"select count(*) as n from {s} where a >= {a}",
        f"select sum(c) as total, count(*) from {s} order by a limit 5",
    ]
    return rng.choice(shapes)


def random_target(rng: random.Random) -> dict[str, str]:
    if rng.random() < 0.15:
        return {"document": rng.choice(POOL)}
    return {"sql": random_query(rng)}


@dataclass
class Txn:
    id: str
    via: str
    writes: list[tuple[str, str, dict | None]]  # (kind, path, data/fields)
    outcome: str = "pending"  # committed | failed | unknown

    @property
    def sets(self) -> set[str]:
        return {p for k, p, _ in self.writes if k != "delete"}

    @property
    def deletes(self) -> set[str]:
        return {p for k, p, _ in self.writes if k == "delete"}


def random_txn(rng: random.Random, txn_id: str, via: str) -> Txn:
    paths = rng.sample(POOL, rng.randrange(1, 5))
    writes: list[tuple[str, str, dict | None]] = []
    for i, p in enumerate(paths):
        r = rng.random()
        if i == 0 or r < 0.45:
            writes.append(("set", p, random_doc(rng, txn_id)))
        elif r < 0.6:
            writes.append(("merge", p, {"txn": txn_id, "a": rng.randrange(10)}))
        elif r < 0.75:
            writes.append(("update", p, {"txn": txn_id, "a": {"$increment": 1}}))
        else:
            writes.append(("delete", p, None))
    rng.shuffle(writes)
    return Txn(txn_id, via, writes)


# ---------------------------------------------------------------------------------------------
# The stack: a cluster and a sidecar this campaign may kill and restart


class Stack:
    def __init__(self, workdir_note: list[str]) -> None:
        self.binary = sidecar_binary()
        self.cluster = Cluster()
        self.cluster.start()
        as_postgres(
            [
                str(PG_BIN / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.cluster.port),
                "-U",
                "postgres",
                "docstore",
            ]
        )
        self.sql("create extension if not exists pg_docstore")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.admin_key = secrets.token_urlsafe(24)
        self.admin = {"Authorization": f"Bearer {self.admin_key}"}
        self.log = self.cluster.dir / "sidecar.log"
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()
        workdir_note.append(str(self.cluster.dir))
        self.start_sidecar()

    def sql(self, query: str, *params: Any) -> list[tuple]:
        with psycopg.connect(self.cluster.url(), autocommit=True) as conn:
            cur = conn.execute(query, params or None)
            return cur.fetchall() if cur.description else []

    def start_sidecar(self) -> None:
        env = {
            **os.environ,
            "DOCSTORE_DATABASE_URL": self.cluster.url(),
            "DOCSTORE_LISTEN": f"127.0.0.1:{self.port}",
            "DOCSTORE_JWT_SECRET": secrets.token_urlsafe(32),
            "DOCSTORE_ADMIN_KEY": self.admin_key,
            "DOCSTORE_HEARTBEAT_MS": "200",
            "DOCSTORE_LISTEN_QUEUE": "64",
            "RUST_LOG": os.environ.get("RUST_LOG", "info"),
        }
        for name in ("DOCSTORE_JWKS_FILE", "DOCSTORE_JWT_ISSUER", "DOCSTORE_JWT_AUDIENCE"):
            env.pop(name, None)
        self.proc = subprocess.Popen(
            [str(self.binary)], env=env, stdout=self.log.open("a"), stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise OracleFailure(f"the sidecar exited with {self.proc.returncode}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise OracleFailure("the sidecar did not become healthy")

    def kill_sidecar(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart_postgres(self, mode: str = "immediate") -> None:
        """`pg_ctl restart -m <mode>`: `immediate` (a crash: recovery at start) or `fast`
        (a clean shutdown, which waits for the sidecar's walsender to be confirmed)."""
        as_postgres(
            [
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(self.cluster.data),
                "-l",
                str(self.cluster.log),
                "-m",
                mode,
                "-w",
                "-t",
                "60",
                "restart",
            ]
        )

    def metric(self, name: str, label: str) -> float:
        try:
            text = httpx.get(f"{self.url}/metrics", timeout=5).text
        except httpx.HTTPError:
            return 0.0
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and label in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def close(self, keep: bool) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.cluster.stop()
        if not keep:
            import shutil

            shutil.rmtree(self.cluster.dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# A subscriber


def position_of(event_id: str) -> int:
    return int(event_id.rsplit(".", 1)[1], 16)


def same_doc(a: dict, b: dict) -> bool:
    return a["path"] == b["path"] and a["data"] == b["data"] and a["updateTime"] == b["updateTime"]


@dataclass
class Subscriber:
    name: str
    targets: dict[str, dict[str, str]]  # id -> {"sql": ...} | {"document": ...}
    oracle: Campaign
    slow: bool = False
    state: dict[str, Any] = field(default_factory=dict)  # id -> list of docs | aggregation
    last_id: str | None = None
    position: int = 0
    last_change: int = -1
    seen: set[str] = field(default_factory=set)  # transactions since the last reset
    never_reset: bool = True
    events: int = 0
    resets: dict[str, int] = field(default_factory=dict)
    resumes: int = 0
    connects: int = 0
    drop: threading.Event = field(default_factory=threading.Event)
    pause: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    failures: int = 0
    suspect: dict[str, str] = field(default_factory=dict)
    recent: deque = field(default_factory=lambda: deque(maxlen=6))

    def fail(self, message: str) -> None:
        self.failures += 1
        if self.failures > 3:
            return
        self.oracle.fail(
            f"stream {self.name} (event {self.events}, last id {self.last_id}): {message}"
        )
        if self.failures == 1:
            self.oracle.dump(
                f"stream {self.name}: {message}\ntargets: {json.dumps(self.targets, indent=1)}\n"
                + "recent events:\n"
                + "\n".join(f"{k} {i} {d}" for k, i, d in self.recent)
                + f"\nstate: {json.dumps(self.state, indent=1)}\n"
            )

    # -- applying events ------------------------------------------------------------------

    def apply_changes(self, target: str, changes: list[dict]) -> None:
        docs = self.state.get(target)
        if not isinstance(docs, list):
            self.fail(f"changes for target {target} whose state is {docs!r}")
            return
        for ch in changes:
            kind = ch["type"]
            if kind == "removed":
                i = ch["oldIndex"]
                if not (0 <= i < len(docs)) or docs[i]["path"] != ch["path"]:
                    self.fail(f"{target}: removed {ch['path']} at {i}, state {paths(docs)}")
                    return
                del docs[i]
            elif kind == "added":
                doc = ch["document"]
                if any(d["path"] == doc["path"] for d in docs):
                    self.fail(f"{target}: added {doc['path']} which is present")
                    return
                if not (0 <= ch["newIndex"] <= len(docs)):
                    self.fail(f"{target}: added at {ch['newIndex']} of {len(docs)}")
                    return
                docs.insert(ch["newIndex"], doc)
            elif kind == "modified":
                doc, i = ch["document"], ch["oldIndex"]
                if not (0 <= i < len(docs)) or docs[i]["path"] != doc["path"]:
                    self.fail(f"{target}: modified {doc['path']} at {i}, state {paths(docs)}")
                    return
                del docs[i]
                if not (0 <= ch["newIndex"] <= len(docs)):
                    self.fail(f"{target}: modified to {ch['newIndex']} of {len(docs)}")
                    return
                docs.insert(ch["newIndex"], doc)
            else:
                self.fail(f"{target}: unknown change type {kind}")

    def apply_delta(self, item: dict) -> None:
        target = item["target"]
        if target in self.suspect:
            self.fail(self.suspect.pop(target) + " (and then a change to it, not a snapshot)")
        if target not in self.targets:
            self.fail(f"an event for unknown target {target}")
        elif "aggregation" in item:
            if self.state.get(target) is None:
                self.fail(f"an aggregation change for {target} before its snapshot")
            self.state[target] = item["aggregation"]
        else:
            self.apply_changes(target, item.get("changes", []))

    def check_transaction(self, item: dict | None, before: list[dict] | None) -> None:
        """The `__all` target's changes of one event are exactly one transaction's writes."""
        if item is None:
            return
        changes = item.get("changes", [])
        written = {c["document"]["path"]: c["document"] for c in changes if c["type"] != "removed"}
        removed = {c["path"] for c in changes if c["type"] == "removed"}
        txns = {d["data"].get("txn") for d in written.values()}
        if len(txns) != 1:
            self.fail(f"one event holds the writes of transactions {sorted(map(str, txns))}")
            return
        (tid,) = txns
        txn = self.oracle.txns.get(tid)
        if txn is None:
            self.fail(f"an event of transaction {tid} which was never attempted")
            return
        if txn.outcome == "failed":
            self.fail(f"an event of transaction {tid} which failed ({txn.via})")
        present = {d["path"] for d in before or []}
        if set(written) != txn.sets or removed != (txn.deletes & present):
            self.fail(
                f"transaction {tid} split or mixed: event wrote {sorted(written)} removed "
                f"{sorted(removed)}; the transaction set {sorted(txn.sets)} deleted "
                f"{sorted(txn.deletes)} (present before: {sorted(txn.deletes & present)})"
            )
        if tid in self.seen:
            self.fail(f"transaction {tid} delivered twice")
        self.seen.add(tid)

    def check_consistency(self) -> None:
        """Every document a target shows is the version `__all` shows now. A target that
        shows another version is a suspect: if its next event is its own snapshot (a
        requery's), that is the requery freeze the session hub once had (a failure unless
        DOCSTORE_ORACLE_STRICT=0, which only counts it); a change to it, or quiescence, while it is a suspect
        fails."""
        everything = self.state.get("__all")
        if not isinstance(everything, list):
            return
        by_path = {d["path"]: d for d in everything}
        if len(by_path) != len(everything):
            self.fail("__all holds a document twice")
        for target, docs in self.state.items():
            if target in ("__all", PADS) or not isinstance(docs, list) or target in self.suspect:
                continue
            seen = set()
            for d in docs:
                if d["path"] in seen:
                    self.fail(f"{target} holds {d['path']} twice")
                seen.add(d["path"])
                other = by_path.get(d["path"])
                if other is None or not same_doc(d, other):
                    self.suspect[target] = (
                        f"targets at different positions: {target} shows {d} while __all "
                        f"shows {other}"
                    )
                    if self.oracle.strict:
                        self.fail(self.suspect[target])
                    break

    def on_event(self, kind: str, event_id: str | None, data: str) -> None:
        self.events += 1
        self.recent.append((kind, event_id, data))
        self.oracle.count("events")
        if event_id:
            self.last_id = event_id
        payload = json.loads(data) if data else {}
        pos = position_of(event_id) if event_id else self.position
        if kind == "reset":
            reason = payload.get("reason", "?")
            self.resets[reason] = self.resets.get(reason, 0) + 1
            self.oracle.count(f"reset:{reason}")
            self.state = {}
            self.suspect = {}
            self.seen = set()
            self.never_reset = False
            self.last_change = -1
            self.position = 0
            return
        if pos < self.position:
            self.fail(f"position went back from {self.position:x} to {pos:x} ({kind})")
        self.position = pos
        if kind == "heartbeat":
            return
        if kind not in ("snapshot", "change"):
            self.fail(f"unknown event {kind}")
            return
        all_before = self.state.get("__all")
        all_before = list(all_before) if isinstance(all_before, list) else None
        if kind == "snapshot":
            for item in payload.get("targets", []):
                target = item["target"]
                if target not in self.targets:
                    self.fail(f"a snapshot of unknown target {target}")
                    continue
                self.state[target] = (
                    item["aggregation"] if "aggregation" in item else list(item["documents"])
                )
                if self.suspect.pop(target, None) is not None:
                    self.oracle.count("requery freezes (targets behind their stream)")
            deltas = payload.get("changes", [])
        else:
            deltas = payload.get("targets", [])
        has_txn = bool(deltas)
        if has_txn:
            if pos == self.last_change:
                self.fail(f"two events with changes at position {pos:x}")
            self.last_change = pos
        all_delta = None
        for item in deltas:
            if item["target"] == "__all":
                all_delta = item
            self.apply_delta(item)
        if kind == "change" and all_delta is None and any(d["target"] != PADS for d in deltas):
            self.fail("a change event without a change to __all (every write is under it)")
        self.check_transaction(all_delta, all_before)
        self.check_consistency()

    # -- the connection ---------------------------------------------------------------------

    def body(self) -> dict:
        return {"targets": [{"id": k, **v} for k, v in self.targets.items()]}

    def run(self) -> None:
        opts = [(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)] if self.slow else []
        transport = httpx.HTTPTransport(socket_options=opts)
        with httpx.Client(
            base_url=self.oracle.stack.url,
            transport=transport,
            timeout=httpx.Timeout(10, read=30),
        ) as client:
            while not self.stop.is_set():
                try:
                    self.connect(client)
                except (httpx.HTTPError, OSError):
                    pass
                except json.JSONDecodeError as e:
                    self.fail(f"an event's data is not JSON: {e}")
                except Exception as e:  # noqa: BLE001 - a reader that dies would look like a hang
                    import traceback

                    self.fail(f"the reader raised {e!r}: {traceback.format_exc()[-1500:]}")
                if not self.stop.is_set():
                    time.sleep(0.2)

    def connect(self, client: httpx.Client) -> None:
        headers = dict(self.oracle.stack.admin)
        if self.last_id:
            headers["Last-Event-ID"] = self.last_id
            self.resumes += 1
        self.connects += 1
        with client.stream("POST", LISTEN, json=self.body(), headers=headers) as r:
            if r.status_code != 200:
                r.read()
                if r.status_code not in (503,):
                    self.fail(f":listen answered {r.status_code}: {r.text[:300]}")
                    time.sleep(1)
                return
            kind, event_id, data = "message", None, []
            for line in r.iter_lines():
                while self.pause.is_set() and not self.stop.is_set():
                    time.sleep(0.05)
                if self.stop.is_set():
                    return
                if line == "":
                    if data or event_id:
                        self.on_event(kind, event_id, "\n".join(data))
                    kind, event_id, data = "message", None, []
                    if self.drop.is_set():
                        self.drop.clear()
                        self.oracle.count("drops")
                        return
                    continue
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    kind = value
                elif name == "id":
                    event_id = value
                elif name == "data":
                    data.append(value)


def paths(docs: list[dict]) -> list[str]:
    return [d["path"] for d in docs]


# ---------------------------------------------------------------------------------------------
# The campaign


class Campaign:
    def __init__(self, seed: int, seconds: float, streams: int = 6, faults: bool = True) -> None:
        self.seed = seed
        self.seconds = seconds
        self.rng = random.Random(seed)
        self.n_streams = streams
        self.faults = faults
        self.failures: list[str] = []
        self.counts: dict[str, int] = {}
        self.txns: dict[str, Txn] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.paused = threading.Event()  # writers hold while the stack restarts
        self.dirs: list[str] = []
        self.stack: Stack | None = None
        self.schedule: list[str] = []
        self.strict = os.environ.get("DOCSTORE_ORACLE_STRICT", "1") != "0"

    def fail(self, message: str) -> None:
        with self.lock:
            if len(self.failures) < 50:
                self.failures.append(message)

    def dump(self, text: str) -> None:
        """Details of a failure, in the kept log directory."""
        if self.dirs:
            with self.lock, open(Path(self.dirs[0]) / "oracle-failures.txt", "a") as f:
                f.write(text + "\n\n")

    def count(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + n

    # -- set-up -----------------------------------------------------------------------------

    def ensure_indexes(self, query: str) -> bool:
        """Run the query once; create the indexes it asks for and wait until READY. False
        when the query is refused for another reason."""
        for _ in range(6):
            try:
                self.stack.sql("select count(*) from docstore.query(%s)", query)
                return True
            except psycopg.Error as e:
                if e.sqlstate != "55000":
                    self.count("queries refused")
                    print(f"oracle: query refused ({e.sqlstate}): {query}: {e}", file=sys.stderr)
                    return False
                m = re.search(r"(docstore\.create_index\(.*?\));?\s*$", str(e), re.S | re.M)
                if not m:
                    raise OracleFailure(f"55000 without a create_index call: {e}") from e
                self.stack.sql("select " + m.group(1))
                self.stack.sql("call docstore.build_indexes()")
                self.count("indexes")
        return False

    def make_subscribers(self) -> list[Subscriber]:
        subs = []
        checked: dict[str, bool] = {}
        for n in range(self.n_streams):
            targets: dict[str, dict[str, str]] = {"__all": {"sql": ALL}}
            for k in range(self.rng.randrange(2, 7)):
                t = random_target(self.rng)
                q = t.get("sql")
                if q is not None:
                    if q not in checked:
                        checked[q] = self.ensure_indexes(q)
                    if not checked[q]:
                        continue
                targets[f"q{k}"] = t
            if n == 0:
                # The slow reader's own target, outside `__all`: its burst (see `fault`)
                # fills the stream's buffers with large events.
                targets[PADS] = {"sql": "select * from /pads"}
            subs.append(Subscriber(f"s{n}", targets, self, slow=(n == 0)))
        return subs

    # -- writers ----------------------------------------------------------------------------

    def new_txn(self, rng: random.Random, via: str, k: int) -> Txn:
        txn = random_txn(rng, f"{via}-{k}", via)
        with self.lock:
            self.txns[txn.id] = txn
        return txn

    def sql_writer(self, seed: int, name: str) -> None:
        rng = random.Random(seed)
        k = 0
        conn = None
        while not self.stop.is_set():
            if self.paused.is_set():
                time.sleep(0.05)
                continue
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.stack.cluster.url(), autocommit=True)
                txn = self.new_txn(rng, name, k)
                k += 1
                try:
                    with conn.transaction():
                        if rng.random() < 0.3:
                            batch = [sql_batch_write(w) for w in txn.writes]
                            conn.execute("select docstore.commit(%s)", (json.dumps(batch),))
                        else:
                            for kind, path, data in txn.writes:
                                run_sql_write(conn, kind, path, data)
                    txn.outcome = "committed"
                    self.count("transactions")
                    self.count("sql transactions")
                except psycopg.OperationalError:
                    txn.outcome = "unknown"
                    conn = None
                    time.sleep(0.2)
                except psycopg.Error:
                    txn.outcome = "failed"
                    self.count("failed transactions")
            except psycopg.OperationalError:
                conn = None
                time.sleep(0.2)
            time.sleep(rng.random() * 0.04)
        if conn is not None:
            conn.close()

    def http_writer(self, seed: int) -> None:
        rng = random.Random(seed)
        k = 0
        with httpx.Client(base_url=self.stack.url, timeout=10) as client:
            while not self.stop.is_set():
                if self.paused.is_set():
                    time.sleep(0.05)
                    continue
                txn = self.new_txn(rng, "http", k)
                k += 1
                body = {"writes": [http_write(w) for w in txn.writes]}
                try:
                    r = client.post(COMMIT, json=body, headers=self.stack.admin)
                except httpx.HTTPError:
                    txn.outcome = "unknown"
                    time.sleep(0.2)
                    continue
                if r.status_code == 200:
                    txn.outcome = "committed"
                    self.count("transactions")
                    self.count("http transactions")
                elif r.status_code in (400, 404, 409):
                    txn.outcome = "failed"
                    self.count("failed transactions")
                else:
                    txn.outcome = "unknown"
                    time.sleep(0.2)
                time.sleep(rng.random() * 0.04)

    # -- faults -----------------------------------------------------------------------------

    def fault(self, subs: list[Subscriber]) -> None:
        if not self.schedule:
            self.schedule = ["drop", "drop", "slow", "sidecar", "postgres"]
            self.rng.shuffle(self.schedule)
        kind = self.schedule.pop()
        if kind == "drop":
            s = self.rng.choice(subs)
            s.drop.set()
            self.count("faults:drop")
        elif kind == "slow":
            s = subs[0]
            before = self.stack.metric("docstore_session_resets_total", 'reason="lagged"')
            s.pause.set()
            # A burst of large documents only the slow reader's stream follows: more than
            # its socket, the server's write buffer and its queue can hold.
            pad = "p" * 1200
            with psycopg.connect(self.stack.cluster.url(), autocommit=True) as conn:
                for i in range(2500):
                    if self.stop.is_set():
                        break
                    conn.execute(
                        "select docstore.set(%s, %s::jsonb)",
                        (f"pads/p{i % 50:02d}", json.dumps({"n": i, "pad": pad})),
                    )
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline and not self.stop.is_set():
                time.sleep(0.25)
                now = self.stack.metric("docstore_session_resets_total", 'reason="lagged"')
                if now > before:
                    self.count("faults:slow lagged")
                    break
            else:
                self.count("faults:slow not lagged")
            s.pause.clear()
        elif kind == "sidecar":
            with self.stack.lock:
                self.stack.kill_sidecar()
                time.sleep(self.rng.random())
                self.stack.start_sidecar()
            self.count("faults:sidecar SIGKILL")
        else:
            # Alternating, a clean shutdown first: `fast` waits for the sidecar's walsender
            # (it hung once), `immediate` is a crash with recovery.
            done = sum(v for k, v in self.counts.items() if k.startswith("faults:postgres"))
            mode = "fast" if done % 2 == 0 else "immediate"
            with self.stack.lock:
                self.stack.restart_postgres(mode)
            self.count(f"faults:postgres restart {mode}")

    # -- the end ----------------------------------------------------------------------------

    def fresh(self, client: httpx.Client, target: dict[str, str]) -> Any:
        if "document" in target:
            r = client.get(
                f"/v1/databases/{DB}/documents/{target['document']}", headers=self.stack.admin
            )
            if r.status_code == 404:
                return []
            r.raise_for_status()
            doc = r.json()
            return [{"path": doc["path"], "data": doc["data"], "updateTime": doc["updateTime"]}]
        r = client.post(RUN, json={"sql": target["sql"]}, headers=self.stack.admin)
        r.raise_for_status()
        rows = r.json()
        if rows and "aggregation" in rows[0]:
            return rows[0]["aggregation"]
        return rows

    def quiesce_and_compare(self, subs: list[Subscriber]) -> None:
        lsn = self.stack.sql("select pg_current_wal_lsn()::text")[0][0]
        hi, lo = lsn.split("/")
        target_pos = (int(hi, 16) << 32) | int(lo, 16)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            behind = [
                s
                for s in subs
                if s.position < target_pos or any(s.state.get(t) is None for t in s.targets)
            ]
            if not behind:
                break
            time.sleep(0.2)
        else:
            for s in behind:
                self.fail(
                    f"stream {s.name} never reached {lsn} (at {s.position:x}; targets without "
                    f"state: {[t for t in s.targets if s.state.get(t) is None]}; connects "
                    f"{s.connects}, resumes {s.resumes}, resets {s.resets}, last id {s.last_id})"
                )
                self.dump(
                    f"stream {s.name} never reached {lsn}; recent events:\n"
                    + "\n".join(f"{k} {i} {d[:300]}" for k, i, d in s.recent)
                )
            return
        committed = {t.id for t in self.txns.values() if t.outcome == "committed"} - {"seed"}
        for s in subs:
            for message in s.suspect.values():
                self.fail(f"stream {s.name} at quiescence: {message}")
            s.stop.set()
            if s.never_reset:
                missed = committed - s.seen
                if missed:
                    self.fail(
                        f"stream {s.name} missed {len(missed)} transactions: {sorted(missed)[:10]}"
                    )
        with httpx.Client(base_url=self.stack.url, timeout=30) as client:
            for s in subs:
                for t, spec in s.targets.items():
                    want = self.fresh(client, spec)
                    got = s.state.get(t)
                    if got != want:
                        self.fail(
                            f"stream {s.name} target {t} ({spec}): built from events\n  {got}\n"
                            f"but a fresh query gives\n  {want}"
                        )
                    self.count("targets compared")

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> dict[str, int]:
        keep = bool(os.environ.get("DOCSTORE_KEEP_LOGS"))
        ok = False
        try:
            self.stack = Stack(self.dirs)
            subs = self.make_subscribers()
            # Some documents before the streams open: the first snapshots are not empty.
            seeder = random.Random(self.seed + 7)
            for p in POOL[::2]:
                self.stack.sql(
                    "select docstore.set(%s, %s::jsonb)", p, json.dumps(random_doc(seeder, "seed"))
                )
            self.txns["seed"] = Txn("seed", "sql", [], "committed")
            threads = [threading.Thread(target=s.run, daemon=True) for s in subs]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 60
            while any(s.state.get("__all") is None for s in subs):
                if time.monotonic() > deadline:
                    raise OracleFailure("the streams did not open")
                time.sleep(0.1)
            writers = [
                threading.Thread(target=self.sql_writer, args=(self.seed + 1, "sqlA"), daemon=True),
                threading.Thread(target=self.sql_writer, args=(self.seed + 2, "sqlB"), daemon=True),
                threading.Thread(target=self.http_writer, args=(self.seed + 3,), daemon=True),
            ]
            for w in writers:
                w.start()
            end = time.monotonic() + self.seconds
            while time.monotonic() < end and len(self.failures) < 10:
                time.sleep(self.rng.uniform(1.5, 4))
                if self.faults and time.monotonic() < end:
                    self.fault(subs)
            self.stop.set()
            for w in writers:
                w.join(timeout=30)
            # A restart that left the stack down would hang everything below.
            if self.stack.proc is None or self.stack.proc.poll() is not None:
                self.stack.start_sidecar()
            self.quiesce_and_compare(subs)
            for s in subs:
                s.stop.set()
                self.count("resumes", s.resumes)
            for t in threads:
                t.join(timeout=35)
            ok = not self.failures
        finally:
            if self.stack is not None:
                self.stack.close(keep or not ok)
        if self.failures:
            raise OracleFailure(
                f"DOCSTORE_ORACLE_SEED={self.seed}: {len(self.failures)} failures "
                f"(logs in {self.dirs}):\n"
                + "\n".join(self.failures[:20])
                + f"\ncounts: {self.counts}"
            )
        return self.counts


def run_sql_write(conn: psycopg.Connection, kind: str, path: str, data: dict | None) -> None:
    if kind == "set":
        conn.execute("select docstore.set(%s, %s::jsonb)", (path, json.dumps(data)))
    elif kind == "merge":
        conn.execute("select docstore.set(%s, %s::jsonb, merge => true)", (path, json.dumps(data)))
    elif kind == "update":
        conn.execute("select docstore.update(%s, %s::jsonb)", (path, json.dumps(data)))
    else:
        conn.execute("select docstore.delete(%s)", (path,))


def sql_batch_write(w: tuple[str, str, dict | None]) -> dict:
    return http_write(w)


def http_write(w: tuple[str, str, dict | None]) -> dict:
    kind, path, data = w
    if kind == "set":
        return {"set": path, "data": data}
    if kind == "merge":
        return {"set": path, "data": data, "merge": True}
    if kind == "update":
        return {"update": path, "fields": data, "precondition": {"exists": True}}
    return {"delete": path}


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60
    seed = (
        int(sys.argv[2])
        if len(sys.argv) > 2
        else int(os.environ.get("DOCSTORE_ORACLE_SEED", "0") or 0)
    )
    if not seed:
        seed = random.randrange(1, 2**31)
    print(f"oracle: seed {seed}, {seconds:.0f} s", flush=True)
    started = time.monotonic()
    try:
        faults = os.environ.get("DOCSTORE_ORACLE_FAULTS", "1") != "0"
        counts = Campaign(seed, seconds, faults=faults).run()
    except OracleFailure as e:
        print(f"oracle: FAILED\n{e}", flush=True)
        return 1
    print(
        f"oracle: passed, seed {seed}, {time.monotonic() - started:.0f} s: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
