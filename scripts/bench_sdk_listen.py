"""Python SDK listener benchmark (BENCHMARKS.md "Python SDK"): a listener on a 1,000-document
query receiving changes at rising rates; per rate, whether the callback kept up (it saw the last
write within a second of the writers stopping), the lag, and the SDK's CPU per change (the
listener thread's CPU time: SSE parsing, protocol state, snapshots, DocumentChanges). Then the
import time of `docstore` and the memory of one client with 100 listeners.

Needs a running stack: DOCSTORE_URL and DOCSTORE_ADMIN_KEY (`make up`'s dev.env). The writers
run in other processes (bare httpx commits) so that only the listener's cost is in this one.

    .venv/bin/python scripts/bench_sdk_listen.py [--rates 50,100,200,400,800] [--seconds 4]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid

import httpx

import docstore

DOCS = 1000


def seed(db: docstore.Client, coll: str) -> None:
    for start in range(0, DOCS, 250):
        batch = db.batch()
        for i in range(start, start + 250):
            batch.set(db.document(f"{coll}/d{i:04d}"), {"n": i, "seq": 0})
        batch.commit()


def write_at(url: str, key: str, coll: str, rate: float, seconds: float, first: int, out) -> None:
    """One writer process: `rate` single-document commits per second for `seconds`."""
    route = url + "/v1/databases/(default):commit"
    headers = {"Authorization": f"Bearer {key}"}
    try:
        _write_loop(route, headers, coll, rate, seconds, first, out)
    except Exception:
        out.put((0, None))
        raise


def _write_loop(route, headers, coll, rate, seconds, first, out) -> None:
    sent, seq = 0, first
    with httpx.Client(timeout=30) as http:
        start = time.monotonic()
        while (now := time.monotonic()) - start < seconds:
            due = int((now - start) * rate)
            while sent < due:
                seq += 1
                doc = f"{coll}/d{seq % DOCS:04d}"
                body = {"writes": [{"set": doc, "data": {"n": seq % DOCS, "seq": seq}}]}
                http.post(route, json=body, headers=headers).raise_for_status()
                sent += 1
            time.sleep(0.001)
    out.put((sent, seq))


class Meter:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.changes = 0
        self.calls = 0
        self.cpu = 0.0
        self.seen: set[int] = set()

    def __call__(self, docs, changes, read_time) -> None:
        with self.cond:
            self.changes += len(changes)
            self.calls += 1
            for c in changes:
                self.seen.add(c.document.get("seq"))
            self.cpu = time.thread_time()
            self.cond.notify_all()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rates", default="50,100,200,400,800")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--writers", type=int, default=4)
    args = parser.parse_args()
    url, key = os.environ["DOCSTORE_URL"], os.environ["DOCSTORE_ADMIN_KEY"]
    coll = "benchlisten" + uuid.uuid4().hex[:8]
    db = docstore.Client(url, token=key)
    seed(db, coll)
    meter = Meter()
    watch = db.collection(coll).on_snapshot(meter)
    with meter.cond:
        meter.cond.wait_for(lambda: meter.calls >= 1, 60)
    print(f"listener on {DOCS} documents; writers: {args.writers} processes of bare httpx commits")
    print("rate/s  sent/s  changes  kept up  lag after stop  SDK CPU per change")
    seq_base = 0
    # spawn, not fork: this process runs the listener's thread.
    ctx = multiprocessing.get_context("spawn")
    for rate in (float(r) for r in args.rates.split(",")):
        out = ctx.Queue()
        with meter.cond:
            changes0, cpu0 = meter.changes, meter.cpu
        procs = [
            ctx.Process(
                target=write_at,
                args=(url, key, coll, rate / args.writers, args.seconds, seq_base + w * 10**7, out),
            )
            for w in range(args.writers)
        ]
        for p in procs:
            p.start()
        results = [out.get() for _ in procs]
        for p in procs:
            p.join()
        stopped = time.monotonic()
        sent = sum(r[0] for r in results)
        lasts = {r[1] for r in results if r[0] and r[1] is not None}
        with meter.cond:
            meter.cond.wait_for(lambda lasts=lasts: lasts <= meter.seen, 30)
            lag = time.monotonic() - stopped
            changes, cpu = meter.changes - changes0, meter.cpu - cpu0
        kept = lasts <= meter.seen and lag < 1.0
        per = cpu / changes * 1e6 if changes else float("nan")
        print(
            f"{rate:6.0f}  {sent / args.seconds:6.0f}  {changes:7d}  {'yes' if kept else 'NO':>7}"
            f"  {lag:12.3f} s  {per:10.1f} us"
        )
        seq_base += 10**8
    watch.unsubscribe()

    times = []
    for _ in range(5):
        code = (
            "import time; t = time.perf_counter(); import docstore; print(time.perf_counter() - t)"
        )
        run = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        times.append(float(run.stdout))
    print(f"import docstore: {statistics.median(times) * 1e3:.1f} ms (median of 5 fresh processes)")

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    client = docstore.Client(url, token=key)
    meters = [Meter() for _ in range(100)]
    watches = [client.document(f"{coll}/d{i:04d}").on_snapshot(m) for i, m in enumerate(meters)]
    for m in meters:
        with m.cond:
            m.cond.wait_for(lambda m=m: m.calls >= 1, 60)
    used = tracemalloc.get_traced_memory()[0] - before
    print(f"one client with 100 document listeners: {used / 1024:.0f} KiB of Python objects")
    for w in watches:
        w.unsubscribe()
    client.close()
    db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
