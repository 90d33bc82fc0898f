"""The live-query oracle (issue 12 item 6, issue 23 item 2): random documents, random
subscriptions, random multi-document transactions through SQL and HTTP, and faults (the
sidecar killed with SIGKILL, Postgres restarted fast and immediate, connections dropped and
resumed with Last-Event-ID, a client too slow to read). Every subscriber builds its state
only from the events it receives. The checks (CHECKS, one pytest test each in
test_oracle.py; each also fails when it covered less than it states, see `Campaign.report`):

- writes: every write commits or fails as its path expects (EXPECTED_SQL, EXPECTED_HTTP:
  contention, a missing document); an internal error (XX000, HTTP 500) or any other status
  fails, and an outcome in doubt (a lost connection, 503) is allowed only during a fault;
- shapes: every query shape subscribed is served (indexes are created as asked), or refused
  with a reason in REFUSED_SHAPES (counted and printed);
- events, while running: each `change` applies exactly (an `added` of a present document, a
  `removed`/`modified` of an absent one, or a wrong index is a failure); every document a
  target shows is the version the stream's `__all` target (every document of the campaign)
  shows at that position; the `__all` target's changes in one event are exactly one
  transaction's writes (never split or mixed); positions never go back, two change events
  never share one, no transaction is delivered twice;
- missed: every transaction committed after a stream's last snapshot of `__all` (its first
  one, or the one after its last reset) arrived on it; a transaction counts as after the
  snapshot when its commit position (as any stream delivered it; every stream must deliver
  it at the same one) is past the snapshot's position, or, when no stream delivered it, the
  WAL position read before it started is;
- quiet: at the end, faults and writers stopped, every stream reaches the final WAL
  position by its events;
- states: then every target's state equals a fresh `:runQuery` (or document read);
- faults: every planned fault ran, and the stack served writes again after it.

The short campaign (pytest, `make test`) is bounded by counts (FAULT_PLAN, SHORT_TXNS, GAP,
TAIL), the long one (scripts/oracle.sh SECONDS) repeats the fault plan for SECONDS. No check
depends on the machine's speed: every wait is for an event or a state, bounded by BOUND
seconds, and reaching the bound fails the run. The seed (fresh per run, printed at the start
and with every failure; DOCSTORE_SEED or DOCSTORE_ORACLE_SEED replays it) decides the
documents, queries, transactions and the order of the faults; thread timing is the machine's.
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
from conftest import (  # noqa: E402
    PG_BIN,
    Cluster,
    as_postgres,
    free_port,
    sidecar_binary,
)

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


def random_query(rng: random.Random) -> tuple[str, str]:
    """A query of one of the shapes the planner serves and the matcher keeps live, and the
    shape's name (a refused shape fails the run unless it is in `REFUSED_SHAPES`)."""
    s = rng.choice(SOURCES)
    a = rng.randrange(10)
    w1, w2 = rng.sample(WORDS, 2)
    t1, t2 = rng.sample(TAGS, 2)
    shapes = [
        ("eq", f"select * from {s} where a = {a}"),
        ("gt", f"select * from {s} where a > {a}"),
        ("le", f"select * from {s} where a <= {a}"),
        ("ne", f"select * from {s} where a != {a}"),
        ("in", f"select * from {s} where b in ('{w1}', '{w2}')"),
        ("not in", f"select * from {s} where b not in ('{w1}', '{w2}')"),
        ("array_contains", f"select * from {s} where tags array_contains '{t1}'"),
        (
            "array_contains_any",
            f"select * from {s} where tags array_contains_any ('{t1}', '{t2}')",
        ),
        ("or", f"select * from {s} where a = {a} or b = '{w1}'"),
        ("eq and range", f"select * from {s} where b = '{w1}' and a >= {a}"),
        ("order desc limit", f"select * from {s} order by a desc limit {rng.randrange(1, 6)}"),
        (
            "order limit offset",
            f"select * from {s} order by a limit {rng.randrange(1, 5)} offset {rng.randrange(4)}",
        ),
        (
            "eq order limit",
            f"select * from {s} where b = '{w1}' order by a limit {rng.randrange(1, 4)}",
        ),
        ("limit last", f"select * from {s} order by a limit last {rng.randrange(1, 5)}"),
        (
            "limit last offset",
            f"select * from {s} order by c desc limit last {rng.randrange(1, 4)} offset 1",
        ),
        (
            "cursors",
            f"select * from {s} order by a start after ({a}) end at ({min(9, a + 3)})",
        ),
        (
            "two orders cursor",
            f"select * from {s} order by c desc, a start at ({rng.randrange(100)}) limit 4",
        ),
        ("eq order other field", f"select * from {s} where b = '{w1}' order by c limit 3"),
        ("aggregations", f"select count(*), sum(a), avg(c) from {s} where b = '{w1}'"),
        ("count alias", f"select count(*) as n from {s} where a >= {a}"),
        ("aggregations limit", f"select sum(c) as total, count(*) from {s} order by a limit 5"),
    ]
    return rng.choice(shapes)


# How the cluster's oracle explains an adoption's reset where a target is an aggregation.
AGGREGATION_NOT_REWOUND = "retention_passed (an aggregation target is not rewound)"


def aggregates(s: Subscriber) -> bool:
    """Whether one of the stream's targets is an aggregation (`select count(*) ...`)."""
    return any("(" in t.get("sql", "").split(" from ", 1)[0] for t in s.targets.values())


# Query shapes the server may refuse, each with the reason; any other refusal fails the run.
# Refusals are counted per shape and printed.
REFUSED_SHAPES: dict[str, str] = {}


def random_target(rng: random.Random) -> tuple[dict[str, str], str]:
    """A target and its shape's name."""
    if rng.random() < 0.15:
        return {"document": rng.choice(POOL)}, "document"
    shape, sql = random_query(rng)
    return {"sql": sql}, shape


# The failures each write path expects (anything else, an internal error above all, fails
# the run): (SQLSTATE, a word of the message) of the SQL writers' two paths (statements one
# by one, docstore.commit), (HTTP status, canonical code) of :commit.
CONTENTION = "contention: a conflict with a concurrent transaction"
EXPECTED_SQL = {
    "sql statements": {
        ("40001", ""): CONTENTION,
        ("40P01", ""): "deadlock: two transactions update the same documents in other orders",
        ("P0002", "not found"): "docstore.update of a document that does not exist",
    },
    "sql batch": {
        ("40001", ""): CONTENTION,
        ("40P01", ""): "deadlock: two transactions update the same documents in other orders",
        ("55000", "precondition failed"): "an update (precondition exists) of a missing document",
    },
}
EXPECTED_HTTP = {
    (409, "ABORTED"): CONTENTION,
    (400, "FAILED_PRECONDITION"): "an update (precondition exists) of a missing document",
}
# Outcomes left unknown (the transaction may or may not have committed), allowed only while
# a fault runs or recovers: a lost connection (no SQLSTATE), Postgres shutting down or
# starting (class 57, 08), the sidecar unreachable or without a database (503 UNAVAILABLE).
IN_DOUBT_SQL_CLASSES = ("57", "08")
IN_DOUBT_HTTP = {(503, "UNAVAILABLE")}


@dataclass
class Txn:
    id: str
    via: str
    writes: list[tuple[str, str, dict | None]]  # (kind, path, data/fields)
    outcome: str = "pending"  # committed | failed | unknown
    # A WAL position read before the transaction started (None when it could not be read):
    # its commit lies past it, so a stream whose snapshot is at an earlier position must
    # deliver it.
    lo: int | None = None
    # A WAL position read after it committed (None when it could not be read): its commit
    # lies before it, so a stream that reached it must have delivered it.
    hi: int | None = None

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


def parse_partitions(text: str) -> tuple[int, int]:
    """`WxQ` (write x query partitions of the sidecar's matcher), e.g. `2x2`."""
    w, _, q = text.lower().partition("x")
    return int(w), int(q)


class Stack:
    def __init__(self, workdir_note: list[str], partitions: tuple[int, int] = (1, 1)) -> None:
        self.binary = sidecar_binary()
        self.partitions = partitions
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
        self.proc = self.spawn(self.port, self.log)

    def spawn(
        self,
        port: int,
        log: Path,
        args: tuple[str, ...] = (),
        want: int = 200,
        text: str = "",
        also: tuple[int, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen:
        """Start the sidecar with `args` (and `env` over the campaign's environment) on `port`
        and wait until its /healthz answers `want` (with `text` in its body), or `also`
        (another status and text) when given."""
        environment = {
            **os.environ,
            "DOCSTORE_DATABASE_URL": self.cluster.url(),
            "DOCSTORE_LISTEN": f"127.0.0.1:{port}",
            "DOCSTORE_JWT_SECRET": secrets.token_urlsafe(32),
            "DOCSTORE_ADMIN_KEY": self.admin_key,
            "DOCSTORE_HEARTBEAT_MS": "200",
            "DOCSTORE_LISTEN_QUEUE": "64",
            "DOCSTORE_MATCH_WRITE_PARTITIONS": str(self.partitions[0]),
            "DOCSTORE_MATCH_QUERY_PARTITIONS": str(self.partitions[1]),
            "RUST_LOG": os.environ.get("RUST_LOG", "info"),
        }
        for name in ("DOCSTORE_JWKS_FILE", "DOCSTORE_JWT_ISSUER", "DOCSTORE_JWT_AUDIENCE"):
            environment.pop(name, None)
        environment.update(env or {})
        proc = subprocess.Popen(
            [str(self.binary), *args],
            env=environment,
            stdout=log.open("a"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise OracleFailure(f"the sidecar {args} exited with {proc.returncode}")
            try:
                got = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                if got.status_code == want and text in got.text:
                    return proc
                if also is not None and got.status_code == also[0] and also[1] in got.text:
                    return proc
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise OracleFailure(f"the sidecar {args} did not answer /healthz with {want}")

    # What a topology of several processes overrides (tests/cluster/oracle_stack.py).
    FAULTS: tuple[str, ...] = ()

    def listen_url(self, s: Subscriber) -> str:
        """Where subscriber `s` (re)connects: the one sidecar."""
        return LISTEN

    def explains(self, s: Subscriber, reason: str) -> str | None:
        """Why a reset of `s` is expected of this stack (`None`: it is not). One process:
        every reset the other checks allow."""
        return "one process"

    def fault(self, kind: str, rng: random.Random) -> None:
        raise OracleFailure(f"no fault {kind} in this stack")

    def continued(self, stream: str, position: int) -> bool:
        """Whether the stack moved `stream` to another process at `position` within its
        client's connection (a remote-matching gateway whose matcher went away): the next
        event is then an adoption's catch-up. One process never does."""
        return False

    def kill_sidecar(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart_postgres(self, mode: str = "immediate") -> None:
        self.cluster.restart(mode, BOUND)

    def servers(self) -> list[str]:
        """The URLs of the processes that hold streams (their `/metrics` count resets)."""
        return [self.url]

    def metric(self, name: str, label: str) -> float:
        """The sum of `name{...label...}` over `servers()`, each read (a process skipped
        once would make the next sum look like growth)."""
        return sum(metric_value(read_metrics(url), name, label) for url in self.servers())

    def processes(self) -> list[tuple[str, str | None, Path]]:
        """(name, URL or None, log) of every process of the stack, for `diagnose`."""
        return [("sidecar", self.url, self.log)]

    def diagnose(self, full: bool) -> str:
        """What each process says now: its /healthz, its `docstore_` metrics (`full`: all of
        them and its log's tail; else those that tell a stream's fate)."""
        out = []
        for name, url, log in self.processes():
            out.append(f"-- {name} {url or ''}")
            if url is not None:
                for path in ("healthz", "metrics"):
                    try:
                        r = httpx.get(f"{url}/{path}", timeout=5)
                        text = r.text
                    except httpx.HTTPError as e:
                        out.append(f"   /{path}: {e!r}")
                        continue
                    if path == "healthz":
                        out.append(f"   /healthz {r.status_code}: {text.strip()[:400]}")
                        continue
                    wanted = DIAGNOSED_METRICS if not full else ("docstore_",)
                    out.extend(
                        f"   {line}"
                        for line in text.splitlines()
                        if line.startswith(wanted) and "_bucket{" not in line
                    )
            if full and log.exists():
                lines = log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
                out.append(f"   {log.name}, last {len(lines)} lines:")
                out.extend(f"   | {line}" for line in lines)
        return "\n".join(out)

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


# What a wait that reached its bound prints of each process (`Stack.diagnose`): how streams
# ended, how many there are, what each gateway received and where its JetStream reading
# stands (restarts, duplicates), the source's state.
DIAGNOSED_METRICS = (
    "docstore_session_resets_total",
    "docstore_session_streams",
    "docstore_session_adopted_total",
    "docstore_gateway_received_transactions_total",
    "docstore_gateway_jetstream_restarts_total",
    "docstore_gateway_duplicates_total",
    "docstore_gateway_rejected_total",
    "docstore_gateway_nats_reconnects_total",
    "docstore_ingest_active",
    "docstore_ingest_published_transactions_total",
    "docstore_ingest_publish_retries_total",
    "docstore_source_failure",
)
LOG_TAIL = 60
# Seconds between the two readings of a diagnosis (`Campaign.diagnosis`).
DIAGNOSIS_GAP = 5
# The characters of an event's data `Subscriber.describe` shows.
DESCRIBED_DATA = 300


def read_metrics(url: str) -> str:
    """The text of `url`/metrics, retried for BOUND seconds (a busy process answers late)."""
    deadline = time.monotonic() + BOUND
    while True:
        try:
            r = httpx.get(f"{url}/metrics", timeout=10)
            if r.status_code == 200:
                return r.text
            problem = f"answered {r.status_code}"
        except httpx.HTTPError as e:
            problem = repr(e)
        if time.monotonic() > deadline:
            raise OracleFailure(f"{url}/metrics not read in {BOUND} s: {problem}")
        time.sleep(0.5)


def metric_value(text: str, name: str, label: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and label in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


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
    # The position of the first snapshot of `__all` since the last reset (None before it):
    # every transaction committed after it must arrive, unless a later snapshot (a requery's,
    # docs/listen.md: the stream sends nothing meanwhile) may hold it: (the position reached
    # before it, its position) of each.
    baseline: int | None = None
    resnapshots: list[tuple[int, int]] = field(default_factory=list)
    # What the stream did, for the report of a missed transaction: (position, what).
    trace: list[tuple[int, str]] = field(default_factory=list)
    events: int = 0
    # The gateway it connects to next and the position it resumed from there (a cluster).
    gateway: int = 0
    resumed_from: int = 0
    # Resumed on a process that adopts the stream: its first change event takes the client
    # from its position to the process's in one event (docs/listen.md, "Resuming on another
    # process"), checked as a delta of state, not as one transaction.
    adopting: bool = False
    # The last event before this connection was a reset: the stream had ended on its holder.
    after_end: bool = False
    # `events` when this connection was made (a cluster).
    connected_at: int = 0
    # The position and message of the last reset received (for its explanation).
    reset_at: int = 0
    reset_message: str = ""
    resets: dict[str, int] = field(default_factory=dict)
    resumes: int = 0
    connects: int = 0
    drops: int = 0
    drop: threading.Event = field(default_factory=threading.Event)
    pause: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    failures: int = 0
    suspect: dict[str, str] = field(default_factory=dict)
    recent: deque = field(default_factory=lambda: deque(maxlen=6))

    def fail(self, message: str, check: str = "events") -> None:
        self.failures += 1
        if self.failures > 3:
            return
        self.oracle.fail(
            check, f"stream {self.name} (event {self.events}, last id {self.last_id}): {message}"
        )
        if self.failures == 1:
            self.oracle.dump(
                f"stream {self.name}: {message}\ntargets: {json.dumps(self.targets, indent=1)}\n"
                + "recent events:\n"
                + "\n".join(f"{k} {i} {d}" for k, i, d in self.recent)
                + f"\nstate: {json.dumps(self.state, indent=1)}\n"
            )

    def describe(self) -> str:
        """Where the stream stands, for a wait that reached its bound: its connection, its
        resets, its last events (data cut) and its trace."""
        head = (
            f"stream {self.name}{' (the slow reader)' if self.slow else ''}: gateway "
            f"{self.gateway}, resumed from {self.resumed_from:x}, position {self.position:x}, "
            f"last id {self.last_id}, events {self.events}, connects {self.connects}, resumes "
            f"{self.resumes}, drops {self.drops}, resets {self.resets}, paused "
            f"{self.pause.is_set()}, snapshot of __all at "
            f"{'none' if self.baseline is None else f'{self.baseline:x}'}, targets without a "
            f"state {sorted(t for t in self.targets if self.state.get(t) is None)}"
        )
        recent = [
            f"  {k} {i}" + ("" if k == "heartbeat" else f" {d[:DESCRIBED_DATA]}")
            for k, i, d in self.recent
        ]
        trace = ", ".join(f"{p:x} {w}" for p, w in self.trace[-10:])
        return "\n".join([head, "  last events:", *recent, f"  trace: {trace}"])

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
        self.oracle.count("deliveries checked")
        self.trace.append((self.position, tid))
        known = self.oracle.positions.setdefault(tid, self.position)
        self.oracle.arrivals.setdefault(self.position, time.monotonic())
        if known != self.position:
            self.fail(f"transaction {tid} at {self.position:x}, another stream had it at {known:x}")

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
        with self.oracle.progress:
            self.handle_event(kind, event_id, data)
            self.oracle.progress.notify_all()

    def handle_event(self, kind: str, event_id: str | None, data: str) -> None:
        self.events += 1
        self.recent.append((kind, event_id, data))
        self.oracle.count("events")
        if event_id:
            self.last_id = event_id
        payload = json.loads(data) if data else {}
        pos = position_of(event_id) if event_id else self.position
        if kind in ("reset", "snapshot"):
            self.trace.append((pos, f"{kind} {payload.get('reason', '')}"))
        if kind == "reset":
            # What this stream reached before the reset must have arrived.
            self.oracle.check_missed(self, upto=self.position)
            reason = payload.get("reason", "?")
            self.resets[reason] = self.resets.get(reason, 0) + 1
            self.oracle.count(f"reset:{reason}")
            self.reset_at = pos
            self.reset_message = payload.get("message", "")
            why = self.oracle.stack.explains(self, reason)
            if why is not None:
                self.oracle.count(f"reset explained: {why}")
            else:
                self.fail(
                    f"reset {{{reason}}} ({self.reset_message!r}) after resuming from "
                    f"{self.resumed_from:x} on gateway {self.gateway}: not explained; trace "
                    + ", ".join(f"{p:x} {w}" for p, w in self.trace[-8:]),
                    "faults",
                )
            self.adopting = False
            self.state = {}
            self.suspect = {}
            self.seen = set()
            self.never_reset = False
            self.baseline = None
            self.resnapshots = []
            self.last_change = -1
            self.position = 0
            return
        if pos < self.position:
            self.fail(f"position went back from {self.position:x} to {pos:x} ({kind})")
        reached = self.position
        self.position = pos
        # An adoption's catch-up: on the process the client resumed on, or, with matchers,
        # on the matcher its gateway continued the same connection on.
        catch_up = self.adopting and kind == "change"
        if kind == "change" and not catch_up and event_id is not None:
            if self.oracle.stack.continued(event_id.rsplit(".", 1)[0], reached):
                catch_up = True
                self.oracle.count("matcher failovers: catch-up events")
        if kind in ("heartbeat", "snapshot", "change"):
            self.adopting = False
        if kind == "heartbeat":
            return
        if catch_up:
            # Every transaction in (reached, pos] is in this one event, as a requery
            # snapshot would hold them.
            self.resnapshots.append((reached, pos))
            self.oracle.count("adoptions: catch-up events")
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
                if target == "__all":
                    if self.baseline is None:
                        self.baseline = pos
                    else:
                        self.resnapshots.append((reached, pos))
                        self.oracle.count("snapshots without a reset (requeries)")
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
        if not catch_up:
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
        self.trace.append((self.position, f"connect (Last-Event-ID {self.last_id})"))
        url = self.oracle.stack.listen_url(self)
        with client.stream("POST", url, json=self.body(), headers=headers) as r:
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
                        self.drops += 1
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

# The short campaign (tests/live/test_oracle.py, `make test`) is bounded by counts, not by
# time: every kind of fault this many times (in a shuffled order), GAP committed transactions
# before each fault, and at the end TAIL committed transactions after every stream holds its
# last snapshot, SHORT_TXNS at least in all. The long run (scripts/oracle.sh) repeats the
# fault plan until its seconds have passed.
FAULT_PLAN = {"drop": 2, "slow": 1, "sidecar": 1, "postgres fast": 1, "postgres immediate": 1}
# The cluster's (tests/cluster/oracle_stack.py): the active ingest, a gateway (its clients
# resume on the other one) and nats-server killed with SIGKILL, and Postgres restarted; every
# resume goes to the other gateway, so each drop is a resume elsewhere too.
CLUSTER_FAULT_PLAN = {
    "drop": 2,
    "slow": 1,
    "ingest": 1,
    "gateway": 1,
    "nats": 1,
    "postgres immediate": 1,
}
# With matchers (topology `matchers`): the cluster's faults and SIGKILL of a matcher (its
# streams continue on the other one within their client connections).
FAULT_PLANS = {
    "single": FAULT_PLAN,
    "cluster": CLUSTER_FAULT_PLAN,
    "matchers": {**CLUSTER_FAULT_PLAN, "matcher": 2},
}
SHORT_TXNS = 800
# Every process's `--listen-grace-seconds` and `--listen-replay` (the defaults; the stacks
# do not change them): a stream keeps its events for resumes while they are younger than
# GRACE seconds, at most its last REPLAY of them (docs/listen.md, "Positions, ids and
# resuming").
GRACE = 60
REPLAY = 16384
# A process logs an event before any stream here receives it, so the event's age there is
# more than its age here since its first arrival, by that delivery's delay: an age within
# this many seconds of GRACE explains its going.
ARRIVAL_SLACK = 5
GAP = 40
TAIL = 80
# Every wait is for an event or a state, bounded by BOUND seconds; reaching the bound fails
# the run (it never stands for "the machine is done by now").
BOUND = 300
# The slow reader's burst: large documents only its stream follows, written until the
# sidecar reports a lagged session; this many without one fails the run.
SLOW_MAX_WRITES = 20000
# Bursts the slow reader may read through before its own stream lags (another stream's lag
# also ends a burst); its stream not lagged after this many fails the run.
SLOW_BURSTS = 3

# The checks, one pytest test each (tests/live/test_oracle.py). Each fails on a failure of
# its kind and when it covered less than it states (see `Campaign.report`).
CHECKS = {
    "writes": "every write committed or failed as its kind expects (EXPECTED_SQL, "
    "EXPECTED_HTTP; in doubt only during a fault)",
    "shapes": "every query shape was served, or refused with an allow-listed reason",
    "events": "every event applied exactly: no split, mixed, duplicated or reordered transaction",
    "missed": "every transaction committed after a stream's last snapshot arrived on it "
    "(streams that were reset included)",
    "quiet": "faults and writers stopped, every stream reached the final position by its events",
    "states": "every target's state built from events equals a fresh query",
    "faults": "every planned fault ran and the stack recovered from it",
}


class Abort(Exception):
    """A wait reached its bound or too much failed: the run stops, its checks report."""


def lsn_value(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def campaign_seed() -> int:
    """DOCSTORE_ORACLE_SEED, else DOCSTORE_SEED, else a fresh one."""
    for name in ("DOCSTORE_ORACLE_SEED", "DOCSTORE_SEED"):
        value = os.environ.get(name)
        if value and int(value):
            return int(value)
    return random.randrange(1, 2**31)


class Campaign:
    def __init__(
        self,
        seed: int,
        seconds: float | None = None,
        streams: int = 6,
        faults: bool = True,
        partitions: tuple[int, int] = (1, 1),
        topology: str = "single",
    ) -> None:
        self.seed = seed
        # `single`: one sidecar; `cluster`: nats-server, two ingests and two gateways
        # (tests/cluster/oracle_stack.py) with their own faults; `matchers`: the same with two
        # matchers holding the streams and gateways that match remotely on them.
        self.topology = topology
        self.fault_plan = FAULT_PLANS[topology]
        self.partitions = partitions
        self.seconds = seconds
        self.rng = random.Random(seed)
        self.n_streams = streams
        self.faults = faults
        self.failures: dict[str, list[str]] = {check: [] for check in CHECKS}
        self.counts: dict[str, int] = {}
        self.txns: dict[str, Txn] = {}
        self.lock = threading.RLock()
        # Notified at every event, transaction and count: the waits below wait on it.
        self.progress = threading.Condition(self.lock)
        self.stop = threading.Event()
        self.dirs: list[str] = []
        self.stack: Stack | None = None
        self.subs: list[Subscriber] = []
        self.shapes: dict[str, str] = {}  # query -> shape
        self.positions: dict[str, int] = {}  # transaction -> its position (as delivered)
        # position -> when a stream here first received its event (time.monotonic())
        self.arrivals: dict[int, float] = {}
        self.planned: dict[str, int] = {}
        # Odd while a fault runs or the stack recovers from it: a write that overlaps an odd
        # value or a change may end in doubt.
        self.fault_seq = 0
        self.strict = os.environ.get("DOCSTORE_ORACLE_STRICT", "1") != "0"
        self.started = time.monotonic()
        # What each fault did, in order (the last few go into a wait's diagnosis).
        self.fault_notes: list[str] = []

    def fail(self, check: str, message: str) -> None:
        with self.lock:
            if len(self.failures[check]) < 50:
                self.failures[check].append(message)

    def failed(self) -> int:
        return sum(len(v) for v in self.failures.values())

    def dump(self, text: str) -> None:
        """Details of a failure, in the kept log directory."""
        if self.dirs:
            with self.lock, open(Path(self.dirs[0]) / "oracle-failures.txt", "a") as f:
                f.write(text + "\n\n")

    def count(self, name: str, n: int = 1) -> None:
        with self.progress:
            self.counts[name] = self.counts.get(name, 0) + n
            self.progress.notify_all()

    def wait_until(self, predicate: Any, what: str, check: str) -> None:
        """Wait until `predicate()` (read under the campaign's lock) holds; BOUND seconds
        without it fail `check` and abort the run."""
        with self.progress:
            if (
                self.progress.wait_for(lambda: predicate() or self.failed() >= 20, timeout=BOUND)
                and not self.failed() >= 20
            ):
                return
        if self.failed() < 20:
            self.fail(check, f"waited {BOUND} s for {what}\n{self.diagnosis(what)}")
        raise Abort(what)

    def diagnosis(self, what: str) -> str:
        """What decides a wait that reached its bound: the last fault's notes, every stream's
        state and last events, and what each process of the stack reports; the same with
        every metric and the logs' tails in oracle-failures.txt of the kept log directory."""
        with self.lock:
            streams = "\n".join(s.describe() for s in self.subs)
            notes = "\n".join(self.fault_notes[-6:])
        if self.stack is None:
            return f"{notes}\n{streams}"
        # Twice, DIAGNOSIS_GAP apart, while the writers still write: a process whose
        # received transactions do not grow reads nothing (its streams wait in vain).
        short = self.stack.diagnose(full=False)
        time.sleep(DIAGNOSIS_GAP)
        later = self.stack.diagnose(full=False)
        full = self.stack.diagnose(full=True)
        self.dump(f"waited {BOUND} s for {what}\n{notes}\n{streams}\n{full}")
        where = f"{self.dirs[0]}/oracle-failures.txt" if self.dirs else "(no log directory)"
        return (
            f"{notes}\n{streams}\n{short}\n{DIAGNOSIS_GAP} s later:\n{later}\n"
            f"(every metric and the logs' tails: {where})"
        )

    def committed(self) -> int:
        return self.counts.get("transactions", 0)

    def await_transactions(self, n: int, what: str) -> None:
        goal = self.committed() + n
        self.wait_until(lambda: self.committed() >= goal, f"{n} transactions {what}", "writes")

    # -- set-up -----------------------------------------------------------------------------

    def ensure_indexes(self, query: str, shape: str) -> bool:
        """Run the query once; create the indexes it asks for and wait until READY. A
        refusal of another kind fails the run unless its shape is in REFUSED_SHAPES."""
        for _ in range(6):
            try:
                self.stack.sql("select count(*) from docstore.query(%s)", query)
                return True
            except psycopg.Error as e:
                if e.sqlstate != "55000" or "create_index" not in str(e):
                    if shape in REFUSED_SHAPES:
                        self.count(f"refused shape (allowed): {shape}")
                    else:
                        self.fail(
                            "shapes",
                            f"query shape {shape!r} refused ({e.sqlstate}): {query}: {e} "
                            "(allow-list it in REFUSED_SHAPES with the reason, or fix it)",
                        )
                    return False
                m = re.search(r"(docstore\.create_index\(.*?\));?\s*$", str(e), re.S | re.M)
                if not m:
                    self.fail("shapes", f"55000 without a create_index call: {query}: {e}")
                    return False
                self.stack.sql("select " + m.group(1))
                self.stack.sql("call docstore.build_indexes()")
                self.count("indexes")
        self.fail("shapes", f"query shape {shape!r} still needs an index after 6 builds: {query}")
        return False

    def make_subscribers(self) -> list[Subscriber]:
        subs = []
        checked: dict[str, bool] = {}
        for n in range(self.n_streams):
            targets: dict[str, dict[str, str]] = {"__all": {"sql": ALL}}
            for k in range(self.rng.randrange(2, 7)):
                t, shape = random_target(self.rng)
                q = t.get("sql")
                if q is not None:
                    if q not in checked:
                        checked[q] = self.ensure_indexes(q, shape)
                    if not checked[q]:
                        continue
                    self.shapes[q] = shape
                    self.count("query targets")
                targets[f"q{k}"] = t
            if n == 0:
                # The slow reader's own target, outside `__all`: its burst (see `fault`)
                # fills the stream's buffers with large events.
                targets[PADS] = {"sql": "select * from /pads"}
            subs.append(Subscriber(f"s{n}", targets, self, slow=(n == 0)))
        return subs

    # -- writers ----------------------------------------------------------------------------

    def new_txn(self, rng: random.Random, via: str, k: int, lo: int | None) -> Txn:
        txn = random_txn(rng, f"{via}-{k}", via)
        txn.lo = lo
        with self.lock:
            self.txns[txn.id] = txn
        return txn

    def in_fault(self, seq: int) -> bool:
        """Whether a fault ran during a write that started when `fault_seq` was `seq`."""
        return seq % 2 == 1 or self.fault_seq != seq

    def committed_txn(self, txn: Txn, via: str) -> None:
        txn.outcome = "committed"
        self.count(f"committed: {via}")
        self.count("transactions")

    def sql_failure(self, txn: Txn | None, via: str, e: psycopg.Error, seq: int) -> None:
        state = e.sqlstate
        label = txn.id if txn else "(connecting)"
        expected = EXPECTED_SQL.get(via, {})
        if txn is not None and any(state == st and word in str(e) for st, word in expected):
            txn.outcome = "failed"
            self.count(f"expected failure: {via} {state}")
            return
        if txn is not None:
            txn.outcome = "unknown"
        if (state is None or state[:2] in IN_DOUBT_SQL_CLASSES) and self.in_fault(seq):
            self.count(f"in doubt during a fault: {via} {state or 'connection lost'}")
            return
        self.fail("writes", f"{via} transaction {label} failed with {state}: {e}")

    def sql_writer(self, seed: int, name: str) -> None:
        rng = random.Random(seed)
        k = 0
        conn: psycopg.Connection | None = None
        while not self.stop.is_set():
            seq = self.fault_seq
            txn = None
            via = "sql"
            try:
                if conn is None:
                    conn = psycopg.connect(self.stack.cluster.url(), autocommit=True)
                lo = lsn_value(conn.execute("select pg_current_wal_lsn()::text").fetchone()[0])
                txn = self.new_txn(rng, name, k, lo)
                k += 1
                batch = rng.random() < 0.3
                via = "sql batch" if batch else "sql statements"
                with conn.transaction():
                    if batch:
                        body = [sql_batch_write(w) for w in txn.writes]
                        conn.execute("select docstore.commit(%s)", (json.dumps(body),))
                    else:
                        for kind, path, data in txn.writes:
                            run_sql_write(conn, kind, path, data)
                self.committed_txn(txn, via)
                try:
                    row = conn.execute("select pg_current_wal_lsn()::text").fetchone()
                    txn.hi = lsn_value(row[0])
                except psycopg.Error:
                    conn.close()
                    conn = None
            except psycopg.Error as e:
                self.sql_failure(txn, via, e, seq)
                if conn is not None and (conn.closed or conn.broken):
                    conn.close()
                    conn = None
            time.sleep(rng.random() * 0.04)
        if conn is not None:
            conn.close()

    def http_writer(self, seed: int) -> None:
        rng = random.Random(seed)
        k = 0
        lsn_conn: psycopg.Connection | None = None
        with httpx.Client(base_url=self.stack.url, timeout=BOUND) as client:
            while not self.stop.is_set():
                seq = self.fault_seq
                lo = None
                try:
                    if lsn_conn is None:
                        lsn_conn = psycopg.connect(self.stack.cluster.url(), autocommit=True)
                    row = lsn_conn.execute("select pg_current_wal_lsn()::text").fetchone()
                    lo = lsn_value(row[0])
                except psycopg.Error as e:
                    if lsn_conn is not None:
                        lsn_conn.close()
                    lsn_conn = None
                    if not self.in_fault(seq):
                        self.fail("writes", f"reading the WAL position failed outside a fault: {e}")
                txn = self.new_txn(rng, "http", k, lo)
                k += 1
                body = {"writes": [http_write(w) for w in txn.writes]}
                try:
                    r = client.post(COMMIT, json=body, headers=self.stack.admin)
                except httpx.HTTPError as e:
                    txn.outcome = "unknown"
                    if self.in_fault(seq):
                        self.count(f"in doubt during a fault: http {type(e).__name__}")
                    else:
                        self.fail("writes", f"http transaction {txn.id}: {e!r}")
                    time.sleep(0.1)  # the sidecar is down: do not spin
                    continue
                if r.status_code == 200:
                    self.committed_txn(txn, "http")
                    try:
                        if lsn_conn is not None:
                            row = lsn_conn.execute("select pg_current_wal_lsn()::text").fetchone()
                            txn.hi = lsn_value(row[0])
                    except psycopg.Error:
                        lsn_conn.close()
                        lsn_conn = None
                else:
                    try:
                        code = r.json().get("code")
                    except ValueError:
                        code = None
                    key = (r.status_code, code)
                    if key in EXPECTED_HTTP:
                        txn.outcome = "failed"
                        self.count(f"expected failure: http {r.status_code} {code}")
                    else:
                        txn.outcome = "unknown"
                        if key in IN_DOUBT_HTTP and self.in_fault(seq):
                            self.count(f"in doubt during a fault: http {r.status_code} {code}")
                        else:
                            self.fail(
                                "writes",
                                f"http transaction {txn.id} answered {r.status_code}: "
                                f"{r.text[:400]}",
                            )
                time.sleep(rng.random() * 0.04)
        if lsn_conn is not None:
            lsn_conn.close()

    # -- faults -----------------------------------------------------------------------------

    def fault(self, kind: str, subs: list[Subscriber]) -> None:
        self.fault_seq += 1
        self.note(f"fault {kind}: begins")
        try:
            self.run_fault(kind, subs)
            self.recover(kind)
        finally:
            self.fault_seq += 1
        self.note(f"fault {kind}: recovered")
        self.count(f"faults:{kind}")

    def run_fault(self, kind: str, subs: list[Subscriber]) -> None:
        if kind == "drop":
            # Where a resume goes to another process (the cluster), an aggregation target is
            # not rewound, so its stream's adoption resets instead of catching up: while no
            # adoption has caught up, a drop picks among the streams without one, so that the
            # `faults` check's "adoptions with a catch-up event" does not hang on the seed.
            pool = subs
            if self.topology != "single" and not self.counts.get("adoptions: catch-up events"):
                pool = [t for t in subs if not t.slow and not aggregates(t)] or subs
            s = self.rng.choice(pool)
            drops = s.drops
            s.drop.set()
            self.wait_until(lambda: s.drops > drops, f"stream {s.name} to drop", "faults")
        elif kind == "slow":
            s = subs[0]
            for burst in range(1, SLOW_BURSTS + 1):
                lagged = s.resets.get("lagged", 0)
                end = self.slow_burst(s, burst)
                # The slow reader reads what was buffered, reconnects and is reset. A reader
                # whose own stream did not lag (the count grew for another stream's) reads on
                # past the burst without a reset: then a burst again. Only its `lagged` reset
                # ends the fault: another reset it read meanwhile (an adoption's, after a
                # matcher was killed during the burst) may come before the lagged one, which
                # it must read before the next pause, or it stays paused on a connection
                # that has already ended.
                self.wait_until(
                    lambda lagged=lagged, end=end: (
                        (s.resets.get("lagged", 0) > lagged and self.ready(s))
                        or (s.resets.get("lagged", 0) == lagged and s.position > end)
                    ),
                    "the slow reader's reset and snapshot",
                    "faults",
                )
                if s.resets.get("lagged", 0) > lagged:
                    break
                self.count("slow: bursts the slow reader read through (another stream lagged)")
                self.note(f"slow burst {burst}: the reader read past {end:x} without a reset")
            else:
                self.fail("faults", f"the slow reader's stream did not lag in {SLOW_BURSTS} bursts")
        elif kind in self.stack.FAULTS:
            self.stack.fault(kind, self.rng)
        elif kind == "sidecar":
            with self.stack.lock:
                self.stack.kill_sidecar()
                time.sleep(self.rng.random())  # a random downtime, not a wait for anything
                self.stack.start_sidecar()
        else:
            # `fast` waits for the sidecar's walsender (it hung once), `immediate` is a
            # crash with recovery.
            with self.stack.lock:
                self.stack.restart_postgres(kind.split()[1])

    def slow_burst(self, s: Subscriber, burst: int) -> int:
        """Pause the slow reader and write large documents only its stream follows, until its
        socket, the server's write buffer and its queue are full: the sidecar resets a
        session {lagged} (counted on the servers that hold streams). Returns the WAL position
        after the burst."""
        before = self.stack.metric("docstore_session_resets_total", 'reason="lagged"')
        s.pause.set()
        try:
            pad = "p" * 1200
            lagged = False
            with psycopg.connect(self.stack.cluster.url(), autocommit=True) as conn:
                for i in range(SLOW_MAX_WRITES):
                    conn.execute(
                        "select docstore.set(%s, %s::jsonb)",
                        (f"pads/p{i % 50:02d}", json.dumps({"n": i, "pad": pad})),
                    )
                    if i % 100 == 99:
                        now = self.stack.metric("docstore_session_resets_total", 'reason="lagged"')
                        if now > before:
                            lagged = True
                            break
                row = conn.execute("select pg_current_wal_lsn()::text").fetchone()
            end = lsn_value(row[0]) if row else 0
        finally:
            s.pause.clear()
        self.note(
            f"slow burst {burst}: {i + 1} writes to the end {end:x}, lagged resets counted "
            f"{before:.0f} -> {now:.0f} on the servers; stream {s.name} on gateway "
            f"{s.gateway}, resets {s.resets}, position {s.position:x}"
        )
        if not lagged:
            self.fail(
                "faults",
                f"the slow reader never lagged ({SLOW_MAX_WRITES} writes)\n"
                + self.diagnosis("the slow reader's lag"),
            )
            raise Abort("the slow reader never lagged")
        return end

    def note(self, text: str) -> None:
        with self.lock:
            self.fault_notes.append(f"{time.monotonic() - self.started:.1f} s: {text}")

    def recover(self, kind: str) -> None:
        """The stack serves writes again: a probe through each path commits (documents
        outside every target). Polled, bounded by BOUND (a failure when reached)."""
        deadline = time.monotonic() + BOUND
        probe = {"writes": [{"set": "probes/http", "data": {"after": kind}}]}
        sql_ok = http_ok = False
        while not (sql_ok and http_ok):
            if not http_ok:
                try:
                    r = httpx.post(
                        f"{self.stack.url}{COMMIT}",
                        json=probe,
                        headers=self.stack.admin,
                        timeout=30,
                    )
                    http_ok = r.status_code == 200
                except httpx.HTTPError:
                    pass
            if not sql_ok:
                try:
                    self.stack.sql("select docstore.set('probes/sql', '{}'::jsonb)")
                    sql_ok = True
                except psycopg.Error:
                    pass
            if time.monotonic() > deadline:
                self.fail("faults", f"the stack did not serve writes {BOUND} s after {kind}")
                raise Abort(kind)
            if not (sql_ok and http_ok):
                time.sleep(0.1)

    # -- the end ----------------------------------------------------------------------------

    def delivered_within(self, lo: int, hi: int) -> int:
        """How many transactions a stream delivered at a position in (lo, hi]: each one
        changed `__all` (it was an event there), so it is an event of every stream that held
        `__all` at that position (a lower bound of those events: a transaction no stream
        delivered yet is not counted)."""
        with self.lock:
            return sum(1 for at in self.positions.values() if lo < at <= hi)

    def age_after(self, lo: int) -> float | None:
        """Seconds since a stream here first received the first event after position `lo`
        (`None`: none has arrived)."""
        with self.lock:
            after = [p for p in self.arrivals if p > lo]
            return time.monotonic() - self.arrivals[min(after)] if after else None

    def check_missed(self, s: Subscriber, upto: int | None) -> None:
        """Every transaction committed after the stream's last snapshot of `__all` arrived on
        it: at a reset, those it had passed (committed at or before `upto`); at the end, every
        one. A transaction that committed while a requery held the stream (after the position
        the stream had reached, at or before the requery's snapshot) is in that snapshot
        instead of in a change (docs/listen.md), and is excused.

        Where a transaction committed is its position as a stream delivered it (the commit
        LSN, `positions`); one no stream delivered yet is placed by the WAL positions read
        around it instead: after a position when `lo` is past it, before one when `hi` is not
        past it (a transaction in flight at the snapshot, lo <= base < commit, is then not
        required: only the exact position decides it)."""
        if s.baseline is None:
            return
        base = s.baseline

        def after_base(t: Txn) -> bool:
            at = self.positions.get(t.id)
            return at > base if at is not None else t.lo is not None and t.lo > base

        def reached(t: Txn) -> bool:
            at = self.positions.get(t.id)
            if upto is None:
                return True
            return at <= upto if at is not None else t.hi is not None and t.hi <= upto

        def held_by(t: Txn, held: int, q: int) -> bool:
            at = self.positions.get(t.id)
            if at is not None:
                return held < at <= q
            return t.lo is not None and t.lo < q and (t.hi is None or t.hi > held)

        after = [
            t
            for t in self.txns.values()
            if t.outcome == "committed" and after_base(t) and reached(t)
        ]
        required = {t.id for t in after if not any(held_by(t, h, q) for h, q in s.resnapshots)}
        self.count("missed check: in a requery snapshot", len({t.id for t in after} - required))
        when = "at the end" if upto is None else f"at a reset (reached {upto:x})"
        self.count("missed check: transactions", len(required))
        if upto is not None:
            self.count("missed check: transactions before a reset", len(required))
        if not s.never_reset:
            self.count("missed check: transactions after a reset", len(required))
        missed = required - s.seen
        if missed:
            self.dump_missed(s, missed)
            s.fail(
                f"{when}: snapshot at {base:x}, missed {len(missed)} of {len(required)} "
                "transactions committed after it: "
                + ", ".join(f"{t} ({self.placed(t)})" for t in sorted(missed)[:10])
                + f"; requery snapshots (held after, at) {[f'{h:x} {q:x}' for h, q in s.resnapshots]}",
                check="missed",
            )

    def placed(self, tid: str) -> str:
        """Where a transaction committed, as far as the campaign knows."""
        t, at = self.txns[tid], self.positions.get(tid)
        lo, hi = (f"{v:x}" if v is not None else "?" for v in (t.lo, t.hi))
        return f"at {at:x}" if at is not None else f"between {lo} and {hi}"

    def dump_missed(self, s: Subscriber, missed: set[str]) -> None:
        """The stream's connects, resets, snapshots and transactions around what it missed."""
        at = sorted(p for p in (self.positions.get(t, 0) for t in missed) if p)
        lines = [
            f"stream {s.name} missed {sorted(missed)}; their positions on other streams "
            + ", ".join(f"{t}@{self.positions.get(t, 0):x}" for t in sorted(missed))
        ]
        for pos, what in s.trace:
            near = bool(at) and at[0] - 0x40000 <= pos <= at[-1] + 0x40000
            if near or what.startswith(("connect", "reset", "snapshot")):
                lines.append(f"  {pos:x} {what}")
        self.dump("\n".join(lines))

    def fresh(self, client: httpx.Client, target: dict[str, str]) -> Any:
        if "document" in target:
            r = client.get(
                f"/v1/databases/{DB}/documents/{target['document']}", headers=self.stack.admin
            )
            if r.status_code == 404:
                return []
            r.raise_for_status()
            doc = r.json()
            return [{k: doc[k] for k in ("path", "data", "createTime", "updateTime")}]
        r = client.post(RUN, json={"sql": target["sql"]}, headers=self.stack.admin)
        r.raise_for_status()
        rows = r.json()
        if rows and "aggregation" in rows[0]:
            return rows[0]["aggregation"]
        return rows

    def ready(self, s: Subscriber) -> bool:
        return s.baseline is not None and all(s.state.get(t) is not None for t in s.targets)

    def quiet_period(self, subs: list[Subscriber]) -> None:
        """Faults and writers stopped: every stream reaches the WAL position after the last
        write by its events (heartbeats carry positions), then the checks run."""
        final = lsn_value(self.stack.sql("select pg_current_wal_lsn()::text")[0][0])
        try:
            self.wait_until(
                lambda: all(s.position >= final and self.ready(s) for s in subs),
                f"every stream to reach {final:x}",
                "quiet",
            )
        except Abort:
            for s in subs:
                if s.position < final or not self.ready(s):
                    self.fail(
                        "quiet",
                        f"stream {s.name} at {s.position:x}, targets without state "
                        f"{[t for t in s.targets if s.state.get(t) is None]}; connects "
                        f"{s.connects}, resumes {s.resumes}, resets {s.resets}",
                    )
                    self.dump(
                        f"stream {s.name} never reached {final:x}; recent events:\n"
                        + "\n".join(f"{k} {i} {d[:300]}" for k, i, d in s.recent)
                    )
            raise
        self.count("streams at the final position", len(subs))
        with self.lock:
            for s in subs:
                s.stop.set()
            for s in subs:
                for message in s.suspect.values():
                    self.fail("events", f"stream {s.name} at quiescence: {message}")
                self.check_missed(s, upto=None)
                self.count("missed check: streams", 1)
                if not s.never_reset:
                    self.count("missed check: streams after a reset", 1)
        with httpx.Client(base_url=self.stack.url, timeout=BOUND) as client:
            for s in subs:
                for t, spec in s.targets.items():
                    try:
                        want = self.fresh(client, spec)
                    except httpx.HTTPError as e:
                        self.fail("states", f"the fresh query of {s.name} {t} ({spec}) failed: {e}")
                        continue
                    got = s.state.get(t)
                    if got != want:
                        self.fail(
                            "states",
                            f"stream {s.name} target {t} ({spec}): built from events\n  {got}\n"
                            f"but a fresh query gives\n  {want}",
                        )
                    self.count("targets compared")

    # -- the run ----------------------------------------------------------------------------

    def plan(self) -> list[str]:
        kinds = [k for k, n in self.fault_plan.items() for _ in range(n)] if self.faults else []
        self.rng.shuffle(kinds)
        for k in kinds:
            self.planned[k] = self.planned.get(k, 0) + 1
        return kinds

    def drive(self, subs: list[Subscriber]) -> None:
        """The faults, between transactions; then TAIL transactions after every stream holds
        its last snapshot (the missed check's material for streams that were reset)."""
        while True:
            kinds = self.plan()
            for kind in kinds:
                self.await_transactions(GAP, f"before the fault {kind}")
                self.fault(kind, subs)
            if not kinds:
                self.await_transactions(GAP, "(no faults)")
            if self.seconds is None or time.monotonic() - self.started >= self.seconds:
                break
        self.wait_until(
            lambda: all(self.ready(s) for s in subs), "every stream's snapshot", "quiet"
        )
        self.await_transactions(TAIL, "after every stream's last snapshot")
        goal = SHORT_TXNS
        self.wait_until(lambda: self.committed() >= goal, f"{goal} transactions", "writes")

    def run(self) -> Campaign:
        keep = bool(os.environ.get("DOCSTORE_KEEP_LOGS"))
        try:
            if self.topology in ("cluster", "matchers"):
                sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
                from oracle_stack import ClusterStack

                self.stack = ClusterStack(
                    self.dirs, self.partitions, matchers=self.topology == "matchers"
                )
            else:
                self.stack = Stack(self.dirs, self.partitions)
            subs = self.subs = self.make_subscribers()
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
            writers = [
                threading.Thread(target=self.sql_writer, args=(self.seed + 1, "sqlA"), daemon=True),
                threading.Thread(target=self.sql_writer, args=(self.seed + 2, "sqlB"), daemon=True),
                threading.Thread(target=self.http_writer, args=(self.seed + 3,), daemon=True),
            ]
            quiet = False
            try:
                self.wait_until(lambda: all(self.ready(s) for s in subs), "the streams", "quiet")
                for w in writers:
                    w.start()
                self.drive(subs)
                quiet = True
            except Abort:
                pass
            except (OracleFailure, subprocess.CalledProcessError, psycopg.Error) as e:
                # The stack did not come back from a fault (or the run could not drive it).
                self.fail("faults", f"the run stopped: {e!r}")
            finally:
                self.stop.set()
                for w in writers:
                    if w.is_alive() or w.ident is not None:
                        w.join(timeout=BOUND)
                        if w.is_alive():
                            self.fail("writes", f"a writer did not stop in {BOUND} s")
                            quiet = False
            if quiet:
                try:
                    self.quiet_period(subs)
                except Abort:
                    pass
            for s in subs:
                s.stop.set()
                self.count("resumes", s.resumes)
            for t in threads:
                t.join(timeout=BOUND)
        finally:
            if self.stack is not None:
                if self.topology == "matchers":
                    self.count("matcher failovers", self.stack.failovers())
                self.stack.close(keep or self.failed() > 0)
        return self

    # -- the report -------------------------------------------------------------------------

    def report(self) -> dict[str, list[str]]:
        """Each check's problems: its failures, and what it covered below the minimum it
        states. Empty lists everywhere: the run is green."""
        c = self.counts.get
        n = self.n_streams
        targets = sum(len(s.targets) for s in self.subs)
        resets = sum(v for k, v in self.counts.items() if k.startswith("reset:"))
        need: dict[str, list[tuple[str, int, int]]] = {
            "writes": [
                ("committed transactions", c("transactions", 0), SHORT_TXNS),
                (
                    "committed through SQL",
                    c("committed: sql statements", 0) + c("committed: sql batch", 0),
                    GAP,
                ),
                ("committed through HTTP", c("committed: http", 0), GAP),
            ],
            "shapes": [("query targets", c("query targets", 0), n)],
            "events": [
                ("events", c("events", 0), SHORT_TXNS),
                ("transaction deliveries checked", c("deliveries checked", 0), SHORT_TXNS),
            ],
            "missed": [
                ("streams checked", c("missed check: streams", 0), n),
                ("streams checked after a reset", c("missed check: streams after a reset", 0), 1),
                (
                    "transactions checked after a reset",
                    c("missed check: transactions after a reset", 0),
                    TAIL // 2,
                ),
                ("transactions checked", c("missed check: transactions", 0), n * TAIL // 2),
            ],
            "quiet": [("streams at the final position", c("streams at the final position", 0), n)],
            "states": [("targets compared", c("targets compared", 0), max(targets, n))],
            "faults": [
                *((f"faults:{k}", c(f"faults:{k}", 0), v) for k, v in self.planned.items()),
                ("resets seen", resets, 1 if self.faults else 0),
                ("reset:lagged", c("reset:lagged", 0), 1 if self.planned.get("slow") else 0),
                # An adoption either catches up (one event) or, for a stream with an
                # aggregation target (not rewound), resets; a seed may give every stream one.
                (
                    "adoptions with a catch-up event or an aggregation target's reset",
                    c("adoptions: catch-up events", 0)
                    + c(f"reset explained: {AGGREGATION_NOT_REWOUND}", 0),
                    1 if self.topology != "single" and self.faults else 0,
                ),
            ],
        }
        out = {}
        for check in CHECKS:
            problems = list(self.failures[check])
            for what, got, want in need[check]:
                if got < want:
                    problems.append(f"covered {got} {what}, fewer than the {want} it states")
            out[check] = problems
        return out

    def summary(self) -> str:
        c = self.counts.get
        resets = {k[6:]: v for k, v in self.counts.items() if k.startswith("reset:")}
        faults = {k[7:]: v for k, v in self.counts.items() if k.startswith("faults:")}
        explained = {k[16:]: v for k, v in self.counts.items() if k.startswith("reset explained:")}
        expected = {k: v for k, v in self.counts.items() if k.startswith(("expected", "in doubt"))}
        prefix = "refused shape (allowed): "
        refused = {
            k[len(prefix) :]: f"{v}x, {REFUSED_SHAPES.get(k[len(prefix) :])}"
            for k, v in self.counts.items()
            if k.startswith(prefix)
        }
        lines = [
            f"oracle: seed {self.seed} (replay: DOCSTORE_SEED={self.seed}), "
            f"{time.monotonic() - self.started:.0f} s, matcher partitions "
            f"{self.partitions[0]}x{self.partitions[1]}",
            f"  streams checked {c('missed check: streams', 0)} of {self.n_streams}, resets seen "
            f"{sum(resets.values())} {resets}, targets compared {c('targets compared', 0)}",
            f"  transactions committed {c('transactions', 0)} (sql statements "
            f"{c('committed: sql statements', 0)}, sql batch {c('committed: sql batch', 0)}, "
            f"http {c('committed: http', 0)}); events {c('events', 0)}, transaction "
            f"deliveries checked (one transaction per event, none twice) "
            f"{c('deliveries checked', 0)}",
            f"  missed check: {c('missed check: transactions', 0)} transaction deliveries "
            f"required on {c('missed check: streams', 0)} streams; after a reset "
            f"{c('missed check: transactions after a reset', 0)} on "
            f"{c('missed check: streams after a reset', 0)} streams; checked at resets (up to "
            f"the position reached) {c('missed check: transactions before a reset', 0)}; "
            f"{c('snapshots without a reset (requeries)', 0)} requery snapshots, "
            f"{c('missed check: in a requery snapshot', 0)} transactions excused by one",
            f"  faults {faults} (planned {self.planned}); slow bursts read through without "
            f"the reader's reset (another stream lagged): "
            f"{c('slow: bursts the slow reader read through (another stream lagged)', 0)}",
            *(
                [
                    f"  adoptions on the other gateway: {c('adoptions: catch-up events', 0)} "
                    f"catch-up events (one event from the client's position to the "
                    f"gateway's, excusing the transactions in between as a requery snapshot "
                    f"does); resets explained {explained or 'none'}"
                    + (
                        f"; connections continued on another matcher {c('matcher failovers', 0)}"
                        if self.topology == "matchers"
                        else ""
                    )
                ]
                if self.topology != "single"
                else []
            ),
            f"  expected write failures {expected or 'none'}",
            f"  query targets {c('query targets', 0)}; refused query shapes (allow-list: "
            f"{sorted(REFUSED_SHAPES) or 'empty'}): {refused or 'none'}",
        ]
        return "\n".join(lines)

    def problems_text(self) -> str:
        report = self.report()
        out = []
        for check, problems in report.items():
            for p in problems[:20]:
                out.append(f"[{check}] {p}")
        if out:
            out.append(f"(replay: DOCSTORE_SEED={self.seed}; logs in {self.dirs})")
        return "\n".join(out)


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
    """`oracle.py [SECONDS [SEED]]`: SECONDS 0 or absent runs the short campaign (bounded by
    counts); a SEED of 0 or absent takes campaign_seed(). DOCSTORE_ORACLE_PARTITIONS (`WxQ`,
    default 2x2) sets the sidecar's matcher partitions; DOCSTORE_ORACLE_TOPOLOGY=cluster runs it
    against nats-server, two ingests and two gateways (tests/cluster/oracle_stack.py),
    `matchers` against the same with two matchers and gateways that match on them."""
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0
    seed = int(sys.argv[2]) if len(sys.argv) > 2 and int(sys.argv[2]) else campaign_seed()
    print(
        f"oracle: seed {seed} (replay: DOCSTORE_SEED={seed}), "
        + (f"{seconds:.0f} s" if seconds else "the short campaign"),
        flush=True,
    )
    faults = os.environ.get("DOCSTORE_ORACLE_FAULTS", "1") != "0"
    partitions = parse_partitions(os.environ.get("DOCSTORE_ORACLE_PARTITIONS") or "2x2")
    topology = os.environ.get("DOCSTORE_ORACLE_TOPOLOGY") or "single"
    campaign = Campaign(
        seed, seconds or None, faults=faults, partitions=partitions, topology=topology
    ).run()
    print(campaign.summary(), flush=True)
    problems = campaign.problems_text()
    if problems:
        print(f"oracle: FAILED, seed {seed}\n{problems}", flush=True)
        return 1
    print(f"oracle: passed, seed {seed}: every check ran ({', '.join(CHECKS)})", flush=True)
    return 0


if __name__ == "__main__":
    # tests/cluster/oracle_stack.py imports this file as `oracle`: one module, not a second
    # copy whose OracleFailure the campaign's handlers would not catch.
    sys.modules.setdefault("oracle", sys.modules[__name__])
    sys.exit(main())
