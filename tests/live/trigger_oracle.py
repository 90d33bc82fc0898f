"""The write-trigger oracle (issue 28 item 6; docs/triggers.md, "The fault campaign"): a seeded
random workload of creates, updates and deletes over a small set of documents (several writes
per transaction, the same document twice in one now and then), through SQL and through the
sidecar's `:commit`, delivered by a real sidecar to two triggers on `src/{id}` (one
`at_least_once`, one `exactly_once`) whose endpoint, an HTTP server in this process,
misbehaves at random (BEHAVIOURS: fails with 500, answers after the sidecar's timeout, closes
the connection unanswered, answers 200 and has the change delivered again); meanwhile the
sidecar is killed with SIGKILL and restarted and Postgres is restarted (`pg_ctl restart -m
fast` and `-m immediate`). Then quiescence: every change recorded, nothing pending, parked
changes replayed with `retry_trigger`; then the checks (CHECKS, one pytest test each in
test_trigger_oracle.py):

- writes: every write committed, or failed only as a fault explains (a lost connection,
  Postgres shutting down or starting, 503); an outcome in doubt is resolved from the writer's
  log document (written first in every transaction, so a probe that locks it waits for a
  transaction still in flight);
- quiet: everything recorded and delivered, nothing pending or parked, within BOUND seconds;
- at_least_once: every committed change (the truth: what the writers committed, in commit
  order per document, from their own commit results, never from the sidecar) reached the
  endpoint and was answered 2xx at least once; no change that was not committed did; per
  document the first deliveries, and the first 2xx answers, come in commit order; every
  delivery's `event`, `before`, `after` and `params` are the truth's;
- exactly_once: the same of the exactly-once trigger's deliveries, and its effects: its
  endpoint answers every delivery (duplicates too) with writes incrementing a counter per
  source document and a global one, and at the end every counter equals the number of
  committed changes, and the acknowledgements are one per change;
- faults: every planned fault ran, every endpoint behaviour happened, and both triggers got
  duplicate deliveries (what the exactly-once check is about).

The short campaign (pytest, `make test` layer `live`) runs FAULT_PLAN once, GAP committed
transactions before each fault, at least SHORT_TXNS in all; the long one
(scripts/trigger_oracle.sh SECONDS SEED) repeats the plan for SECONDS. Every wait is for a
state, bounded by BOUND seconds. The seed (DOCSTORE_TRIGGER_ORACLE_SEED, else DOCSTORE_SEED,
else fresh; printed at the start and with every failure) decides the transactions, the
endpoint's behaviours and the order of the faults; thread timing is the machine's.
"""

from __future__ import annotations

import http.server
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from conftest import (  # noqa: E402
    Cluster,
    free_port,
    serve_posts,
    sidecar_binary,
    stop_server,
    wait_healthy,
)

DB = "(default)"
COMMIT = f"/v1/databases/{DB}:commit"
PATTERN = "src/{id}"
# The documents, each written by one writer only, so that the writer knows their commit order.
WRITERS = {
    "sql": [f"src/a{n:02d}" for n in range(8)],
    "http": [f"src/b{n:02d}" for n in range(8)],
}
# The two triggers, on the same pattern and every event.
TRIGGERS = {"alo": "at_least_once", "eo": "exactly_once"}
TOTAL = "counters/_all"
TIMEOUT_MS = 400
SIDECAR_FLAGS = [
    "--trigger-attempts",
    "4",
    "--trigger-backoff-ms",
    "20",
    "--trigger-backoff-max-ms",
    "200",
    "--trigger-timeout-ms",
    str(TIMEOUT_MS),
]
# What the endpoint does with a delivery, and how often: `ok` answers 200 (the exactly-once
# trigger's with its counter writes), `fail` 500, `slow` answers 200 after the sidecar's
# timeout, `close` closes the connection without an answer, `twice` answers 200 and has the
# change delivered again (its delivery row put back to pending once done, as when the outcome
# of a delivery is lost: a second sidecar's claim after the lease, a crash before the mark).
BEHAVIOURS = {"ok": 0.55, "fail": 0.12, "slow": 0.06, "close": 0.12, "twice": 0.15}
FAULT_PLAN = {"sidecar kill": 3, "postgres fast": 1, "postgres immediate": 2}
GAP = 40
# The writers wait while more changes than this are undelivered (per trigger): the campaign
# is about what is delivered, not how fast, and a backlog the machine cannot drain would only
# make quiescence wait (a long run on a busy machine writes more slowly instead).
MAX_BACKLOG = 300
SHORT_TXNS = 400
BOUND = 300
WORDS = ["x", "y", "z", "w"]

CHECKS = {
    "writes": "every write committed, or failed as a fault explains; every doubt resolved",
    "quiet": "everything recorded and delivered, nothing pending or parked",
    "at_least_once": "every committed change delivered (2xx) at least once, none other, "
    "in commit order per document, with the truth's payload",
    "exactly_once": "every committed change delivered, in order, and its effects committed "
    "exactly once (counters exact)",
    "faults": "every planned fault ran, every endpoint behaviour happened, duplicates seen",
}


class Abort(Exception):
    pass


def campaign_seed() -> int:
    """DOCSTORE_TRIGGER_ORACLE_SEED, else DOCSTORE_SEED, else a fresh one."""
    for name in ("DOCSTORE_TRIGGER_ORACLE_SEED", "DOCSTORE_SEED"):
        value = os.environ.get(name)
        if value and int(value):
            return int(value)
    return random.randrange(1, 2**31)


# ---------------------------------------------------------------------------------------------
# The truth: the changes the writers committed


@dataclass(frozen=True)
class Change:
    path: str
    event: str
    before: dict | None
    after: dict | None

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        """Unique: every write gives the document a fresh `w`."""
        return (
            self.event,
            self.before["w"] if self.before else None,
            self.after["w"] if self.after else None,
        )


def fresh_doc(rng: random.Random, w: str) -> dict[str, Any]:
    doc: dict[str, Any] = {"w": w, "v": rng.randrange(100), "s": rng.choice(WORDS)}
    if rng.random() < 0.4:
        doc["l"] = [rng.randrange(10) for _ in range(rng.randrange(4))]
    if rng.random() < 0.3:
        doc["m"] = {"x": rng.randrange(10), "ok": rng.random() < 0.5}
    return doc


def plan_txn(
    rng: random.Random, txn: str, docs: list[str], state: dict[str, dict | None], net: bool
) -> tuple[list[tuple[str, str, dict | None]], list[Change], dict[str, dict | None]]:
    """A transaction of 1 to 4 writes on `docs` (a document may come twice), the changes it
    makes if it commits, and the documents' states after it. SQL statements make a change
    each; a commit (`net`: `docstore.commit`, `:commit`) writes each document once, its state
    after all of the commit's writes to it, so it makes one change per document at most."""
    sim = dict(state)
    writes: list[tuple[str, str, dict | None]] = []
    changes: list[Change] = []
    for i in range(rng.randrange(1, 5)):
        path = rng.choice(docs)
        cur = sim[path]
        w = f"{txn}.{i}"
        r = rng.random()
        if cur is None:
            if r < 0.85:
                data = fresh_doc(rng, w)
                writes.append(("set", path, data))
                changes.append(Change(path, "create", None, data))
                sim[path] = data
            else:
                # The delete of a missing document: no change, nothing to deliver.
                writes.append(("delete", path, None))
        elif r < 0.4:
            data = fresh_doc(rng, w)
            writes.append(("set", path, data))
            changes.append(Change(path, "update", cur, data))
            sim[path] = data
        elif r < 0.75:
            fields = {"w": w, "v": rng.randrange(100)}
            data = {**cur, **fields}
            writes.append(("update", path, fields))
            changes.append(Change(path, "update", cur, data))
            sim[path] = data
        else:
            writes.append(("delete", path, None))
            changes.append(Change(path, "delete", cur, None))
            sim[path] = None
    if net:
        touched = list(dict.fromkeys(c.path for c in changes))
        changes = []
        for path in touched:
            before, after = state[path], sim[path]
            if before is None and after is None:
                continue
            event = "create" if before is None else "delete" if after is None else "update"
            changes.append(Change(path, event, before, after))
    return writes, changes, sim


def sql_write(conn: psycopg.Connection, kind: str, path: str, data: dict | None) -> None:
    if kind == "set":
        conn.execute("select docstore.set(%s, %s::jsonb)", (path, json.dumps(data)))
    elif kind == "update":
        conn.execute("select docstore.update(%s, %s::jsonb)", (path, json.dumps(data)))
    else:
        conn.execute("select docstore.delete(%s)", (path,))


def http_write(kind: str, path: str, data: dict | None) -> dict[str, Any]:
    if kind == "set":
        return {"set": path, "data": data}
    if kind == "update":
        return {"update": path, "fields": data, "precondition": {"exists": True}}
    return {"delete": path}


# ---------------------------------------------------------------------------------------------
# The endpoint


class Endpoint:
    """Both triggers' endpoint (`/alo`, `/eo`): records every delivery as it arrives, then
    behaves as the seeded draw says."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.port = free_port()
        self.lock = threading.Lock()
        self.arrivals: list[dict[str, Any]] = []
        self.behaved: dict[str, int] = {}
        self.replays: list[tuple[str, str]] = []
        self.replaying = 0
        self.server: http.server.ThreadingHTTPServer | None = None

    def url(self, trigger: str) -> str:
        return f"http://127.0.0.1:{self.port}/{trigger}"

    def arrive(self, body: dict[str, Any]) -> tuple[str, float]:
        with self.lock:
            r, acc = self.rng.random(), 0.0
            behaviour = "ok"
            for name, p in BEHAVIOURS.items():
                acc += p
                if r < acc:
                    behaviour = name
                    break
            delay = self.rng.uniform(0, 0.03)
            self.arrivals.append({**body, "behaviour": behaviour})
            self.behaved[behaviour] = self.behaved.get(behaviour, 0) + 1
            if behaviour == "twice":
                self.replays.append((body["trigger"], body["changeId"]))
        return behaviour, delay

    def start(self) -> None:
        self.server = serve_posts(self.port, self.respond)

    def respond(self, raw: bytes, _headers: dict[str, str]) -> tuple[int, bytes] | None:
        body = json.loads(raw)
        behaviour, delay = self.arrive(body)
        if behaviour == "close":
            return None
        if behaviour == "fail":
            return 500, b""
        time.sleep(TIMEOUT_MS / 1000 + 0.3 if behaviour == "slow" else delay)
        answer = b""
        if body["trigger"] == "eo":
            doc = "counters/" + body["params"]["id"]
            answer = json.dumps(
                {
                    "writes": [
                        {"update": doc, "fields": {"n": {"$increment": 1}}},
                        {"update": TOTAL, "fields": {"n": {"$increment": 1}}},
                    ]
                }
            ).encode()
        return 200, answer

    def stop(self) -> None:
        if self.server is not None:
            stop_server(self.server)
            self.server = None


# ---------------------------------------------------------------------------------------------
# The stack


class Stack:
    def __init__(self) -> None:
        self.binary = sidecar_binary()
        self.cluster = Cluster()
        self.cluster.start()
        self.cluster.create_docstore()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.admin_key = secrets.token_hex(24)
        self.admin = {"Authorization": f"Bearer {self.admin_key}"}
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.killed_at: float | None = None

    def sql(self, query: str, *params: Any) -> list[tuple]:
        with psycopg.connect(self.cluster.url(), autocommit=True, connect_timeout=10) as conn:
            cur = conn.execute(query, params or None)
            return cur.fetchall() if cur.description else []

    def start_sidecar(self) -> None:
        self.starts += 1
        log = self.cluster.dir / f"sidecar-{self.starts}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSTORE_")}
        env.update(
            {
                "DOCSTORE_DATABASE_URL": self.cluster.url(),
                "DOCSTORE_LISTEN": f"127.0.0.1:{self.port}",
                "DOCSTORE_ADMIN_KEY": self.admin_key,
                "DOCSTORE_JWT_SECRET": secrets.token_hex(32),
                "RUST_LOG": os.environ.get("RUST_LOG", "info"),
            }
        )
        self.proc = subprocess.Popen(
            [str(self.binary), *SIDECAR_FLAGS],
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )
        wait_healthy(self.url, self.proc, log, BOUND, Abort)

    def kill_sidecar(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.killed_at = time.time()

    def restart_postgres(self, mode: str) -> None:
        self.cluster.restart(mode, BOUND)

    def close(self, keep: bool) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.cluster.stop()
        if not keep:
            shutil.rmtree(self.cluster.dir, ignore_errors=True)


def in_doubt_sql(e: psycopg.Error) -> bool:
    """A failure a fault explains: a lost connection (no SQLSTATE), Postgres shutting down or
    starting (classes 57, 08)."""
    state = getattr(e, "sqlstate", None)
    return state is None or state[:2] in ("57", "08")


# ---------------------------------------------------------------------------------------------
# The campaign


class Campaign:
    def __init__(self, seed: int, seconds: float | None = None) -> None:
        self.seed = seed
        self.seconds = seconds
        self.rng = random.Random(seed)
        self.stack: Stack | None = None
        self.endpoint = Endpoint(seed + 5)
        self.truth: dict[str, list[Change]] = {p: [] for ps in WRITERS.values() for p in ps}
        self.lock = threading.Lock()
        self.stop = threading.Event()  # the writers'
        self.backlog = 0  # the most undelivered changes of a trigger (the replayer reads it)
        self.finished = threading.Event()  # the replayer's, after quiescence
        self.counts: dict[str, int] = {}
        self.failures: dict[str, list[str]] = {c: [] for c in CHECKS}
        self.planned: dict[str, int] = {}
        self.started = time.monotonic()
        self.dirs: list[str] = []

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    def fail(self, check: str, message: str) -> None:
        with self.lock:
            self.failures[check].append(message)

    def committed(self) -> int:
        with self.lock:
            return self.counts.get("transactions", 0)

    def wait_until(self, check: Any, what: str, failure: str) -> None:
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.1)
        self.fail(failure, f"waited {BOUND} s for {what}")
        raise Abort(what)

    # -- the writers ----------------------------------------------------------------------

    def writer(self, name: str, seed: int) -> None:
        rng = random.Random(seed)
        docs = WRITERS[name]
        state: dict[str, dict | None] = {p: None for p in docs}
        log = f"txlog/{name}"
        n = 0
        while not self.stop.is_set():
            if self.backlog > MAX_BACKLOG:
                self.count("writer waits for the backlog")
                time.sleep(0.2)
                continue
            n += 1
            txn = f"{name}{n}"
            writes, changes, after = plan_txn(rng, txn, docs, state, net=name == "http")
            # The log document first: a transaction in flight holds its lock from the start.
            writes.insert(0, ("set", log, {"txn": txn}))
            if name == "sql":
                outcome = self.commit_sql(writes)
            else:
                outcome = self.commit_http(writes)
            if outcome == "unknown":
                self.count(f"in doubt: {name}")
                outcome = "committed" if self.resolve(log, txn) else "failed"
                self.count(f"in doubt: {name} {outcome}")
            if outcome == "committed":
                with self.lock:
                    for c in changes:
                        self.truth[c.path].append(c)
                    self.counts["transactions"] = self.counts.get("transactions", 0) + 1
                    self.counts[f"committed: {name}"] = self.counts.get(f"committed: {name}", 0) + 1
                    for c in changes:
                        self.counts[f"changes: {c.event}"] = (
                            self.counts.get(f"changes: {c.event}", 0) + 1
                        )
                state = after
            else:
                time.sleep(0.1)
            time.sleep(rng.uniform(0, 0.08))

    def commit_sql(self, writes: list[tuple[str, str, dict | None]]) -> str:
        assert self.stack is not None
        try:
            with psycopg.connect(self.stack.cluster.url(), connect_timeout=10) as conn:
                for w in writes:
                    sql_write(conn, *w)
                conn.commit()
            return "committed"
        except psycopg.Error as e:
            if not in_doubt_sql(e):
                self.fail("writes", f"an SQL transaction failed: {e.sqlstate} {e}")
            return "unknown"

    def commit_http(self, writes: list[tuple[str, str, dict | None]]) -> str:
        assert self.stack is not None
        try:
            r = httpx.post(
                self.stack.url + COMMIT,
                json={"writes": [http_write(*w) for w in writes]},
                headers=self.stack.admin,
                timeout=BOUND,
            )
        except httpx.HTTPError:
            return "unknown"
        if r.status_code == 200:
            return "committed"
        if r.status_code != 503:
            self.fail("writes", f":commit answered {r.status_code}: {r.text[:300]}")
        return "unknown"

    def resolve(self, log: str, txn: str) -> bool:
        """Whether the transaction `txn` committed: once the backends of a killed sidecar are
        gone, lock its writer's log document (waiting for a transaction still in flight,
        which wrote it first), then read it."""
        assert self.stack is not None
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            try:
                killed = self.stack.killed_at
                if killed is not None and self.stack.sql(
                    "select from pg_stat_activity where application_name like "
                    "'docstore-sidecar%%' and backend_start < to_timestamp(%s)",
                    killed,
                ):
                    # A killed sidecar's backend may still run what it was sent (pipelined
                    # statements wait in its socket): it may take the lock after the probe.
                    time.sleep(0.1)
                    continue
                with psycopg.connect(self.stack.cluster.url(), connect_timeout=10) as conn:
                    conn.execute(
                        "select docstore.set(%s, '{\"probe\": true}'::jsonb, merge => true)",
                        (log,),
                    )
                    ((data,),) = conn.execute("select docstore.get(%s)", (log,)).fetchall()
                    conn.rollback()
                    return bool(data) and data.get("txn") == txn
            except psycopg.Error:
                time.sleep(0.2)
        self.fail("writes", f"the outcome of {txn} could not be read in {BOUND} s")
        raise Abort("resolve")

    # -- replays (the endpoint's `twice`) ---------------------------------------------------

    def replayer(self) -> None:
        """Put the deliveries the endpoint answered `twice` back to pending once they are done
        (a change not done yet, or never marked because the sidecar died, is delivered again
        anyway); keep `backlog` current; replay parked changes with `retry_trigger` (a parked
        change holds its document's later ones back)."""
        assert self.stack is not None
        tries: dict[tuple[str, str], int] = {}
        while not self.finished.is_set():
            with self.endpoint.lock:
                todo, self.endpoint.replays = self.endpoint.replays, []
                self.endpoint.replaying = len(todo)
            keep = []
            for key in todo:
                try:
                    rows = self.stack.sql(
                        "update docstore.trigger_deliveries set state = 'pending', "
                        "next_attempt = now() where trigger_name = %s and change_id = %s "
                        "and state = 'done' returning 1",
                        *key,
                    )
                except psycopg.Error:
                    rows = None
                if rows:
                    self.count(f"replays: {key[0]}")
                elif tries.get(key, 0) < 20:
                    tries[key] = tries.get(key, 0) + 1
                    keep.append(key)
            with self.endpoint.lock:
                self.endpoint.replays.extend(keep)
                self.endpoint.replaying = 0
            try:
                rows = self.stack.sql(
                    "select name, pending + parked, parked from docstore.list_triggers()"
                )
                self.backlog = max((n for _, n, _ in rows), default=0)
                for name, _, parked in rows:
                    # An operator replays what ran out of attempts (its document waits).
                    if parked:
                        self.stack.sql("select docstore.retry_trigger(%s)", name)
                        self.count(f"retry_trigger: {name}", parked)
            except psycopg.Error:
                pass
            time.sleep(0.2)

    # -- faults ---------------------------------------------------------------------------

    def fault(self, kind: str) -> None:
        assert self.stack is not None
        if kind == "sidecar kill":
            self.stack.kill_sidecar()
            time.sleep(self.rng.uniform(0, 1.5))
            self.stack.start_sidecar()
        elif kind == "postgres fast":
            self.stack.restart_postgres("fast")
        else:
            self.stack.restart_postgres("immediate")
        self.count(f"faults: {kind}")

    def drive(self) -> None:
        while True:
            kinds = [k for k, n in FAULT_PLAN.items() for _ in range(n)]
            self.rng.shuffle(kinds)
            for kind in kinds:
                self.planned[kind] = self.planned.get(kind, 0) + 1
                goal = self.committed() + GAP
                self.wait_until(lambda g=goal: self.committed() >= g, f"{GAP} txns", "writes")
                self.fault(kind)
            if self.seconds is None or time.monotonic() - self.started >= self.seconds:
                break
        goal = max(SHORT_TXNS, self.committed() + GAP)
        self.wait_until(lambda: self.committed() >= goal, f"{goal} transactions", "writes")

    # -- quiescence -----------------------------------------------------------------------

    def quiesce(self) -> None:
        """Everything recorded (a last write, outside the pattern, recorded past the WAL
        position before it), nothing pending or parked (parked ones retried)."""
        assert self.stack is not None
        (before,) = self.stack.sql("select pg_current_wal_lsn()::text")[0]
        self.stack.sql("select docstore.set('txlog/end', '{\"end\": true}'::jsonb)")

        def settled() -> bool:
            rows = self.stack.sql(
                "select name, position >= %s::pg_lsn, pending, parked "
                "from docstore.list_triggers()",
                before,
            )
            done = True
            for name, recorded, pending, parked in rows:
                if parked:
                    self.stack.sql("select docstore.retry_trigger(%s)", name)
                    self.count(f"retry_trigger: {name}", parked)
                done = done and recorded and pending == 0 and parked == 0
            with self.endpoint.lock:
                replays = bool(self.endpoint.replays) or self.endpoint.replaying > 0
            return done and not replays and len(rows) == len(TRIGGERS)

        try:
            self.wait_until(settled, "every change recorded and delivered", "quiet")
        except Abort:
            self.fail("quiet", self.diagnose())
            raise

    def diagnose(self) -> str:
        """What the deliveries and the sidecar's connections were doing (a failed quiet)."""
        assert self.stack is not None
        lines = ["deliveries (trigger, state, count, attempts, next due, last error):"]
        for row in self.stack.sql(
            "select trigger_name, state, count(*), max(attempts), min(next_attempt) - now(), "
            "max(last_error) from docstore.trigger_deliveries where state <> 'done' "
            "group by 1, 2 order by 1, 2"
        ):
            lines.append(f"  {row}")
        lines.append("the sidecar's backends (state, wait event, age of the state, query):")
        for row in self.stack.sql(
            "select state, wait_event_type || ':' || wait_event, now() - state_change, "
            "left(query, 120) from pg_stat_activity where application_name = 'docstore-sidecar'"
        ):
            lines.append(f"  {row}")
        return "\n".join(lines)

    # -- the checks -----------------------------------------------------------------------

    def check_deliveries(self, trigger: str, check: str) -> None:
        """Every committed change delivered and answered 2xx at least once, no other; first
        deliveries and first 2xx answers in commit order per document; payloads exact."""
        with self.endpoint.lock:
            arrivals = [a for a in self.endpoint.arrivals if a["trigger"] == trigger]
        truth = {c.key: c for changes in self.truth.values() for c in changes}
        first: dict[str, dict] = {}
        first_ok: dict[str, dict] = {}
        for a in arrivals:
            first.setdefault(a["changeId"], a)
            # `slow` answers 200 too, after the sidecar's timeout: on a loaded machine the
            # sidecar may read it before its timer fires (the answer then counts).
            if a["behaviour"] in ("ok", "twice", "slow"):
                first_ok.setdefault(a["changeId"], a)
        self.count(f"deliveries: {trigger}", len(arrivals))
        self.count(f"duplicates: {trigger}", len(arrivals) - len(first))

        def key(a: dict) -> tuple[str, str | None, str | None]:
            return (
                a["event"],
                a["before"]["data"]["w"] if a.get("before") else None,
                a["after"]["data"]["w"] if a.get("after") else None,
            )

        ids: dict[tuple, str] = {}
        for cid, a in first.items():
            k = key(a)
            if k in ids and ids[k] != cid:
                self.fail(check, f"{trigger}: one change under two ids {ids[k]}, {cid}")
            ids[k] = cid
            want = truth.get(k)
            if want is None:
                self.fail(check, f"{trigger}: delivered {cid} {k} on {a['path']}, never committed")
                continue
            got = (
                a["path"],
                a["params"],
                a["before"]["data"] if a["before"] else None,
                a["after"]["data"] if a["after"] else None,
            )
            expected = (want.path, {"id": want.path.split("/")[1]}, want.before, want.after)
            if got != expected:
                self.fail(check, f"{trigger}: {cid} carries {got}, the truth is {expected}")
            for doc in (a["before"], a["after"]):
                if doc is not None and doc["path"] != want.path:
                    self.fail(check, f"{trigger}: {cid} holds a document of {doc['path']}")
        for path, changes in self.truth.items():
            for c in changes:
                if c.key not in ids:
                    self.fail(check, f"{trigger}: missed {c.event} of {path} ({c.key})")
                elif ids[c.key] not in first_ok:
                    self.fail(check, f"{trigger}: {ids[c.key]} ({path}) never answered 2xx")
            self.count(f"changes checked: {trigger}", len(changes))
            want = [c.key for c in changes]
            for what, seen in (("first deliveries", first), ("first 2xx answers", first_ok)):
                got = [key(a) for a in seen.values() if a["path"] == path and key(a) in truth]
                if [k for k in got if k in set(want)] != [k for k in want if k in set(got)]:
                    self.fail(
                        check, f"{trigger}: {path}'s {what} out of commit order: {got}, {want}"
                    )
            # The change ids agree: positions (and indexes in a transaction) increase.
            order = [
                (int(cid.split("-")[0], 16), int(cid.split("-")[1]))
                for cid, a in first.items()
                if a["path"] == path
            ]
            if order != sorted(order):
                self.fail(check, f"{trigger}: {path}'s change ids arrived out of order: {order}")

    def check_counters(self) -> None:
        assert self.stack is not None
        total = 0
        for path, changes in self.truth.items():
            counter = "counters/" + path.split("/")[1]
            ((data,),) = self.stack.sql("select docstore.get(%s)", counter)
            total += len(changes)
            if data["n"] != len(changes):
                self.fail(
                    "exactly_once",
                    f"{counter} is {data['n']}, the committed changes of {path} {len(changes)}",
                )
            self.count("counters compared")
        ((data,),) = self.stack.sql("select docstore.get(%s)", TOTAL)
        if data["n"] != total:
            self.fail("exactly_once", f"{TOTAL} is {data['n']}, the committed changes {total}")
        ((acks,),) = self.stack.sql(
            "select count(*) from docstore.trigger_acks where trigger_name = 'eo'"
        )
        if acks != total:
            self.fail("exactly_once", f"{acks} acknowledgements of {total} changes")
        self.count("counter total", data["n"])

    # -- the run --------------------------------------------------------------------------

    def setup(self) -> None:
        stack = self.stack = Stack()
        self.dirs.append(str(stack.cluster.dir))
        for path in [*self.truth, TOTAL]:
            stack.sql(
                "select docstore.set(%s, '{\"n\": 0}'::jsonb)", "counters/" + path.split("/")[-1]
            )
        for name in WRITERS:
            stack.sql("select docstore.set(%s, '{\"txn\": null}'::jsonb)", f"txlog/{name}")
        self.endpoint.start()
        with psycopg.connect(stack.cluster.url(), autocommit=True) as conn:
            conn.execute("set docstore.trigger_url_prefixes = '*'")
            for name, mode in TRIGGERS.items():
                conn.execute(
                    "select docstore.create_trigger(%s, %s, '{write}', %s, %s)",
                    (name, PATTERN, self.endpoint.url(name), mode),
                )
        stack.start_sidecar()
        # Changes are decoded from the sidecar's slot, created at its first start: what commits
        # before it exists is never decoded (docs/triggers.md, "Recording").
        self.wait_until(
            lambda: stack.sql(
                "select 1 from pg_replication_slots where slot_name = 'docstore_sidecar'"
            ),
            "the sidecar's replication slot",
            "faults",
        )

    def run(self) -> Campaign:
        keep = bool(os.environ.get("DOCSTORE_KEEP_LOGS"))
        threads = []
        try:
            self.setup()
            threads = [
                threading.Thread(target=self.writer, args=(name, self.seed + i), daemon=True)
                for i, name in enumerate(WRITERS, 1)
            ]
            replayer = threading.Thread(target=self.replayer, daemon=True)
            replayer.start()
            for t in threads:
                t.start()
            try:
                self.drive()
            finally:
                self.stop.set()
                for t in threads:
                    t.join(timeout=BOUND)
                    if t.is_alive():
                        self.fail("writes", f"a thread did not stop in {BOUND} s")
                        raise Abort("threads")
            try:
                self.quiesce()
            except Abort:
                pass  # the checks still tell what was missed
            finally:
                self.finished.set()
                replayer.join(timeout=BOUND)
            self.check_deliveries("alo", "at_least_once")
            self.check_deliveries("eo", "exactly_once")
            self.check_counters()
        except Abort:
            pass
        except (subprocess.CalledProcessError, psycopg.Error, httpx.HTTPError, OSError) as e:
            self.fail("faults", f"the run stopped: {e!r}")
        finally:
            self.stop.set()
            self.finished.set()
            self.endpoint.stop()
            if self.stack is not None:
                self.stack.close(keep or any(self.report().values()))
        return self

    # -- the report -----------------------------------------------------------------------

    def report(self) -> dict[str, list[str]]:
        """Each check's failures, and what it covered below what it states."""
        c = self.counts.get
        behaved = self.endpoint.behaved
        changes = sum(len(v) for v in self.truth.values())
        need: dict[str, list[tuple[str, int, int]]] = {
            "writes": [
                ("committed transactions", c("transactions", 0), SHORT_TXNS),
                ("committed through SQL", c("committed: sql", 0), GAP),
                ("committed through HTTP", c("committed: http", 0), GAP),
            ],
            "quiet": [],
            "at_least_once": [("changes checked", c("changes checked: alo", 0), SHORT_TXNS)],
            "exactly_once": [
                ("changes checked", c("changes checked: eo", 0), SHORT_TXNS),
                ("counters compared", c("counters compared", 0), len(self.truth)),
            ],
            "faults": [
                *((f"faults: {k}", c(f"faults: {k}", 0), v) for k, v in self.planned.items()),
                *((f"endpoint {b}", behaved.get(b, 0), 1) for b in BEHAVIOURS),
                ("duplicates: alo", c("duplicates: alo", 0), 1),
                ("duplicates: eo", c("duplicates: eo", 0), 1),
                ("replays: eo", c("replays: eo", 0), 1),
            ],
        }
        out = {}
        for check in CHECKS:
            problems = list(self.failures[check])
            if changes == 0 and check != "writes":
                problems.append("no change committed")
            for what, got, want in need[check]:
                if got < want:
                    problems.append(f"covered {got} {what}, fewer than the {want} it states")
            out[check] = problems
        return out

    def summary(self) -> str:
        c = self.counts.get
        changes = sum(len(v) for v in self.truth.values())
        events = {e: c(f"changes: {e}", 0) for e in ("create", "update", "delete")}
        doubt = {k[10:]: v for k, v in self.counts.items() if k.startswith("in doubt: ")}
        faults = {k[8:]: v for k, v in self.counts.items() if k.startswith("faults: ")}
        report = self.report()
        missed = sum(1 for p in report["at_least_once"] + report["exactly_once"] if "missed" in p)
        order = sum(1 for p in report["at_least_once"] + report["exactly_once"] if "out of" in p)
        verdict = "passed" if not any(report.values()) else "FAILED"
        return (
            f"trigger oracle: {verdict}, seed {self.seed} (replay: "
            f"DOCSTORE_TRIGGER_ORACLE_SEED={self.seed}), {time.monotonic() - self.started:.0f} s; "
            f"{c('transactions', 0)} transactions (sql {c('committed: sql', 0)}, http "
            f"{c('committed: http', 0)}; in doubt {doubt or 'none'}), {changes} changes "
            f"{events}; at_least_once: {c('deliveries: alo', 0)} deliveries, "
            f"{c('duplicates: alo', 0)} duplicates, {c('replays: alo', 0)} replays; "
            f"exactly_once: {c('deliveries: eo', 0)} deliveries, {c('duplicates: eo', 0)} "
            f"duplicates, {c('replays: eo', 0)} replays, counters {c('counter total', 0)} of "
            f"{changes}; endpoint {dict(self.endpoint.behaved)}; faults {faults}; retried "
            f"parked {c('retry_trigger: alo', 0) + c('retry_trigger: eo', 0)}; writers paused "
            f"for the backlog {c('writer waits for the backlog', 0)}x; missed {missed}, "
            f"out of order {order}, failures {sum(len(v) for v in report.values())}"
        )

    def problems_text(self) -> str:
        out = [f"[{check}] {p}" for check, ps in self.report().items() for p in ps[:20]]
        if out:
            out.append(f"(replay: DOCSTORE_TRIGGER_ORACLE_SEED={self.seed}; logs in {self.dirs})")
        return "\n".join(out)


def main() -> int:
    """`trigger_oracle.py [SECONDS [SEED]]`: SECONDS 0 or absent runs the short campaign; a
    SEED of 0 or absent takes campaign_seed()."""
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0
    seed = int(sys.argv[2]) if len(sys.argv) > 2 and int(sys.argv[2]) else campaign_seed()
    print(
        f"trigger oracle: seed {seed} (replay: DOCSTORE_TRIGGER_ORACLE_SEED={seed}), "
        + (f"{seconds:.0f} s" if seconds else "the short campaign"),
        flush=True,
    )
    campaign = Campaign(seed, seconds or None).run()
    problems = campaign.problems_text()
    if problems:
        print(problems, flush=True)
    print(campaign.summary(), flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
