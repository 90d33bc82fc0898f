"""Minimal reproductions of what the oracle campaign found in the live-query code. A test
is marked xfail(strict=True) while its bug stands: the day it is fixed the test passes,
strict turns that into a failure, and the marker goes."""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from oracle import BOUND, LISTEN, Stack


@pytest.fixture(scope="module")
def live_stack():
    s = Stack([])
    yield s
    s.close(keep=False)


def events(stack: Stack, targets: list[dict], out: list, stop: threading.Event) -> None:
    """Read a :listen stream into `out` as (event, data) until `stop`."""
    with (
        httpx.Client(base_url=stack.url, timeout=httpx.Timeout(30, read=None)) as client,
        client.stream("POST", LISTEN, json={"targets": targets}, headers=stack.admin) as r,
    ):
        kind = None
        for line in r.iter_lines():
            if stop.is_set():
                return
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                out.append((kind, json.loads(line[6:])))


def wait_for(out: list, pred, what: str, seen: int = 0) -> tuple[str, dict]:
    """The first event from index `seen` on that `pred` accepts."""
    import time

    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        while seen < len(out):
            ev = out[seen]
            seen += 1
            if pred(ev):
                return ev
        time.sleep(0.05)
    raise AssertionError(f"no {what} in {out}")


def test_a_requeried_target_advances_with_its_stream(live_stack):
    """Found by the oracle (seed 5, `order by c desc limit last 3 offset 1`). A transaction
    deletes every row a `limit 1` target keeps (1 + slack 16), so the target needs a
    requery. The event of that transaction must carry the target's new state too: with the
    bug it carries only the other target's changes (the deleted top document is gone from
    `all` but still shown by `top`), and `top` catches up in a later snapshot."""
    s = live_stack
    coll = "requery"
    for i in range(30):
        s.sql("select docstore.set(%s, %s::jsonb)", f"{coll}/d{i:02d}", json.dumps({"a": i}))
    out: list = []
    stop = threading.Event()
    reader = threading.Thread(
        target=events,
        args=(
            s,
            [
                {"id": "all", "sql": f"select * from /{coll}"},
                {"id": "top", "sql": f"select * from /{coll} order by a limit 1"},
            ],
            out,
            stop,
        ),
        daemon=True,
    )
    reader.start()
    try:
        wait_for(out, lambda e: e[0] == "snapshot", "snapshot")
        start = len(out)
        deletes = [{"delete": f"{coll}/d{i:02d}"} for i in range(17)]
        s.sql("select docstore.commit(%s::jsonb)", json.dumps(deletes))
        kind, data = wait_for(
            out,
            lambda e: (
                any(t["target"] == "all" for t in e[1].get("targets", []) + e[1].get("changes", []))
                and e[0] in ("change", "snapshot")
            ),
            "event of the delete",
            start,
        )
        touched = {t["target"] for t in data.get("targets", []) + data.get("changes", [])}
        assert "top" in touched, (
            f"the {kind} event of the transaction changes `all` but not `top` (which still "
            f"shows {coll}/d00, deleted in it): {data}"
        )
    finally:
        stop.set()


def test_a_fast_shutdown_is_not_held_up_by_the_sidecar(live_stack):
    """Found by the oracle's first Postgres restart (`pg_ctl restart -m fast` timed out
    after 60 s; the walsender of the sidecar's slot stayed until the sidecar went away).
    At a fast shutdown the walsender sends the WAL up to the shutdown checkpoint and exits
    only when the client's reported flush position reaches it (WalSndDone); pgwire-replication
    reports write = flush = apply = the LSN the sidecar confirms, which the sidecar held
    back for retention, so the shutdown never completed while the sidecar was connected.
    The walsender asks for a reply (a keepalive with reply requested) while it waits; the
    sidecar now answers such a keepalive by confirming all it received."""
    import subprocess

    s = live_stack
    s.sql("select docstore.set('shutdown/a', '{\"n\": 1}')")
    out: list = []
    stop = threading.Event()
    reader = threading.Thread(
        target=events,
        args=(s, [{"id": "all", "sql": "select * from /shutdown"}], out, stop),
        daemon=True,
    )
    reader.start()
    wait_for(out, lambda ev: ev[0] == "snapshot", "first snapshot")
    try:
        s.cluster.restart("fast", BOUND)
    except subprocess.CalledProcessError as e:
        # Bring it back for whatever runs next, then fail.
        s.restart_postgres()
        raise AssertionError(f"pg_ctl restart -m fast failed: {e.stdout} {e.stderr}") from e
    # The stream lives on through the restart: a write after it reaches the subscriber
    # (as a change, or in the snapshot after a reset if the sidecar had to reset).
    try:
        seen = len(out)
        s.sql("select docstore.set('shutdown/b', '{\"n\": 2}')")
        wait_for(out, lambda ev: "shutdown/b" in json.dumps(ev[1]), "event with shutdown/b", seen)
    finally:
        stop.set()
