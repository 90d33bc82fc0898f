"""Python SDK benchmark (BENCHMARKS.md "Python SDK"): the SDK against the same requests made
with bare httpx, each figure with its baseline from the same run, alternated A, B, A, B, ...

1. `doc.get()` in a loop through `docstore.Client` vs the same GET with a bare `httpx.Client`
   (keep-alive, same `Authorization` header); `doc.set()` vs the bare request the SDK sends
   (captured once from the SDK's own client: a POST `:commit` with one `set` entry).
2. `docstore.AsyncClient`, 64 concurrent `get()`s vs a bare `httpx.AsyncClient`, 64 concurrent GETs.
3. `import docstore` in a fresh process (wall time and `-X importtime` total) vs `import httpx`.
4. One `Client` with 100 document listeners: RSS delta and tracemalloc peak/current.

Starts its own throwaway cluster and sidecar with tests/conftest.py's machinery (Postgres from
DOCSTORE_PG_BIN, the sidecar from DOCSTORE_SIDECAR_BIN), or uses a running stack when
DOCSTORE_URL and DOCSTORE_ADMIN_KEY are set.

    .venv/bin/python scripts/bench_sdk.py [--rounds 5] [--seconds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

import docstore

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 64


@contextlib.contextmanager
def stack() -> Iterator[tuple[str, str]]:
    """(url, admin key) of a running stack, or of a throwaway one started here."""
    if os.environ.get("DOCSTORE_URL") and os.environ.get("DOCSTORE_ADMIN_KEY"):
        yield os.environ["DOCSTORE_URL"], os.environ["DOCSTORE_ADMIN_KEY"]
        return
    sys.path.insert(0, str(ROOT / "tests"))
    import conftest as t  # tests/conftest.py: Cluster, SETUP_SQL, wait_healthy
    import psycopg

    cluster = t.Cluster()
    proc = None
    try:
        cluster.start()
        t.as_postgres(
            [str(t.PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(cluster.port)]
            + ["-U", "postgres", "docstore"]
        )
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            for statement in t.SETUP_SQL:
                conn.execute(statement)
        port = t.free_port()
        key = secrets.token_urlsafe(24)
        log = cluster.dir / "sidecar.log"
        env = {
            **os.environ,
            "DOCSTORE_DATABASE_URL": cluster.url(),
            "DOCSTORE_LISTEN": f"127.0.0.1:{port}",
            "DOCSTORE_JWT_SECRET": secrets.token_urlsafe(32),
            "DOCSTORE_ADMIN_KEY": key,
            "RUST_LOG": "warn",
        }
        proc = subprocess.Popen(
            [str(t.sidecar_binary())], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        t.wait_healthy(url, proc, log)
        yield url, key
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=15)
        cluster.stop()
        shutil.rmtree(cluster.dir, ignore_errors=True)


def rate(fn: Callable[[], None], seconds: float, cpu: list[float]) -> float:
    """Calls of fn per second over about `seconds`; appends this process's CPU µs per call
    to `cpu` (less sensitive than throughput to the other tenants of the machine)."""
    n, start, cpu0 = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(20):
            fn()
        n += 20
    cpu.append((time.process_time() - cpu0) / n * 1e6)
    return n / elapsed


def alternate(a: Callable[[], None], b: Callable[[], None], rounds: int, seconds: float) -> dict:
    """Rounds of A then B (calls/s of each); medians and the median of the per-round ratios."""
    ra, rb, ca, cb = [], [], [], []
    for _ in range(rounds):
        ra.append(rate(a, seconds, ca))
        rb.append(rate(b, seconds, cb))
    ratios = [x / y for x, y in zip(ra, rb, strict=True)]
    return {
        "sdk": statistics.median(ra),
        "bare": statistics.median(rb),
        "sdk_cpu_us": statistics.median(ca),
        "bare_cpu_us": statistics.median(cb),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
    }


def sync_figures(url: str, key: str, coll: str, rounds: int, seconds: float) -> dict:
    path = f"{coll}/one"
    data = {"name": "one", "n": 1, "tags": ["a", "b"], "nested": {"x": 1.5, "y": "z"}}
    captured: list[httpx.Request] = []
    sdk_http = httpx.Client(base_url=url, event_hooks={"request": [captured.append]})
    db = docstore.Client(url, token=key, http_client=sdk_http)
    ref = db.document(path)
    ref.set(data)
    set_request = captured[-1]
    ref.get()
    get_request = captured[-1]
    bare = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"})
    # Strings, as a user writes them (an httpx.URL would skip the parse the SDK's request pays).
    get_url, set_url, set_body = str(get_request.url), str(set_request.url), set_request.content
    set_headers = {"content-type": "application/json"}
    sdk_http.event_hooks = {"request": [], "response": []}
    # The bare set re-sends the SDK's bytes; the SDK encodes `data` on every call.

    def bare_get() -> None:
        r = bare.get(get_url)
        r.raise_for_status()
        r.json()

    def bare_set() -> None:
        r = bare.post(set_url, content=set_body, headers=set_headers)
        r.raise_for_status()
        r.json()

    out = {
        "get": alternate(ref.get, bare_get, rounds, seconds),
        "set": alternate(lambda: ref.set(data), bare_set, rounds, seconds),
        "set_request": f"{set_request.method} {set_request.url.path} {set_body.decode()}",
    }
    db.close()
    sdk_http.close()
    bare.close()
    return out


def async_figures(url: str, key: str, coll: str, rounds: int, seconds: float) -> dict:
    path = f"{coll}/one"

    async def run_rate(one, cpu: list[float]) -> float:
        n, start, cpu0 = 0, time.perf_counter(), time.process_time()
        while (elapsed := time.perf_counter() - start) < seconds:
            await asyncio.gather(*(one() for _ in range(CONCURRENCY)))
            n += CONCURRENCY
        cpu.append((time.process_time() - cpu0) / n * 1e6)
        return n / elapsed

    async def main() -> dict:
        limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
        sdk_http = httpx.AsyncClient(base_url=url, limits=limits)
        db = docstore.AsyncClient(url, token=key, http_client=sdk_http)
        ref = db.document(path)
        await ref.set({"n": 1})
        route = f"/v1/databases/(default)/documents/{path}"
        bare = httpx.AsyncClient(
            base_url=url, limits=limits, headers={"Authorization": f"Bearer {key}"}
        )

        async def bare_get() -> None:
            r = await bare.get(route)
            r.raise_for_status()
            r.json()

        ra, rb, ca, cb = [], [], [], []
        await run_rate(ref.get, [])  # open the connections of both before measuring
        await run_rate(bare_get, [])
        for _ in range(rounds):
            ra.append(await run_rate(ref.get, ca))
            rb.append(await run_rate(bare_get, cb))
        await db.close()
        await sdk_http.aclose()
        await bare.aclose()
        ratios = [x / y for x, y in zip(ra, rb, strict=True)]
        return {
            "sdk": statistics.median(ra),
            "bare": statistics.median(rb),
            "sdk_cpu_us": statistics.median(ca),
            "bare_cpu_us": statistics.median(cb),
            "ratio": statistics.median(ratios),
            "ratios": ratios,
        }

    return asyncio.run(main())


def import_figures(rounds: int) -> dict:
    def wall(module: str) -> float:
        code = (
            f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
        )
        return float(subprocess.check_output([sys.executable, "-c", code], text=True)) * 1000

    def importtime(module: str) -> float:
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        # The cumulative time of the top-level module's own line (µs).
        for line in err.splitlines():
            m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)$", line)
            if m and m.group(2) == module:
                return int(m.group(1)) / 1000
        raise RuntimeError(err[-500:])

    out: dict = {}
    for name, fn in (("wall", wall), ("importtime", importtime)):
        a, b = [], []
        for _ in range(rounds):
            a.append(fn("docstore"))
            b.append(fn("httpx"))
        out[name] = {"docstore": statistics.median(a), "httpx": statistics.median(b)}
    return out


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def listener_memory(url: str, key: str, coll: str, n: int = 100) -> dict:
    db = docstore.Client(url, token=key)
    db.document(f"{coll}/warm").get()
    batch = db.batch()
    for i in range(n):
        batch.set(db.document(f"{coll}/l{i:03d}"), {"i": i})
    batch.commit()
    seen: set[int] = set()
    cond = threading.Condition()

    def callback(i: int):
        def cb(docs, changes, read_time) -> None:
            with cond:
                seen.add(i)
                cond.notify_all()

        return cb

    threads_before = threading.active_count()
    rss_before = rss_kib()
    tracemalloc.start()
    watches = [db.document(f"{coll}/l{i:03d}").on_snapshot(callback(i)) for i in range(n)]
    deadline = time.monotonic() + 60
    with cond:
        while len(seen) < n and time.monotonic() < deadline:
            cond.wait(deadline - time.monotonic())
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out = {
        "listeners": n,
        "first_snapshots": len(seen),
        "rss_delta_kib": rss_kib() - rss_before,
        "traced_current_kib": current / 1024,
        "traced_peak_kib": peak / 1024,
        "threads_added": threading.active_count() - threads_before,
    }
    for w in watches:
        w.unsubscribe()
    db.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    with stack() as (url, key):
        coll = f"bench_sdk_{uuid.uuid4().hex[:8]}"
        results = {
            "sync": sync_figures(url, key, coll, args.rounds, args.seconds),
            "async": async_figures(url, key, coll, args.rounds, args.seconds),
            "import": import_figures(args.rounds),
            "memory": listener_memory(url, key, coll),
        }
    print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
