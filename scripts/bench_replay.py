"""What a listen stream's replay costs in memory (docs/listen.md, "Positions, ids and
resuming"): the sidecar's RSS growth while N streams on one busy collection-group target each
log M events for resumes, against the same run with `--listen-replay 0` (nothing kept).

It starts a sidecar of its own (the binary named, a slot of its own, dropped afterwards) on the
cluster of `make up` (DOCSTORE_DSN, default 127.0.0.1:5433 database `docstore`), in a docstore
database of its own (`replaybench`, dropped afterwards), opens N SSE streams each with the
target `select * from group(ticks)`, writes M transactions of one ~200-byte document each
(one under a different parent each, so every write is an `added` change of every stream;
`--pad` bytes of padding in each), and
reads every stream until it received all M events. RSS is read from /proc once the streams are
open and once every event was delivered. Usage (after `make up`):
    .venv/bin/python scripts/bench_replay.py BINARY [--streams N] [--events M] [--replay R]
        [--pad BYTES] [--replay-bytes B]
(`--replay-bytes B` passes `--listen-replay-bytes B`.) It also prints the sidecar's CPU time
from the first write to the end (SSE encoding included): the cost of the per-event work of
keeping events. The kept events per stream are min(M, R) (less when the byte budget binds);
the per-event figure is
(growth with R kept - growth with 0 kept) / (N * kept), and comparing two N at the same M
tells the per-stream part from what all streams share (the documents' fields)."""

import argparse
import contextlib
import os
import secrets
import socket
import subprocess
import sys
import threading
import time

import httpx
import psycopg

DSN = os.environ.get(
    "DOCSTORE_DSN",
    f"host=127.0.0.1 port={os.environ.get('DOCSTORE_PG_PORT', '5433')} user=postgres dbname=docstore",
)
DB = "replaybench"
QUERY = "select * from group(ticks)"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    """The process's user and system CPU time so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url() -> str:
    parts = dict(p.split("=", 1) for p in DSN.split())
    return (
        f"postgres://{parts.get('user', 'postgres')}@{parts.get('host', '127.0.0.1')}:"
        f"{parts.get('port', '5433')}/{parts.get('dbname', 'docstore')}"
    )


class Reader:
    """One SSE stream, read by a thread that counts its change events."""

    def __init__(self, url: str, key: str):
        self.changes = 0
        self.opened = threading.Event()
        self.client = httpx.Client(base_url=url, timeout=httpx.Timeout(30, read=None))
        self.headers = {"Authorization": f"Bearer {key}"}
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        with contextlib.suppress(httpx.HTTPError, OSError):
            with self.client.stream(
                "GET",
                f"/v1/databases/{DB}:listen",
                params=[("sql", QUERY)],
                headers=self.headers,
            ) as r:
                assert r.status_code == 200, r.read()
                for line in r.iter_lines():
                    if line == "event: snapshot":
                        self.opened.set()
                    elif line == "event: change":
                        self.changes += 1
                    elif line == "event: reset":
                        print("a stream was reset", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--replay", type=int, default=1_000_000)
    parser.add_argument("--pad", type=int, default=160, help="bytes of padding per document")
    parser.add_argument(
        "--replay-bytes",
        type=int,
        default=None,
        help="--listen-replay-bytes (not passed when unset: binaries without the flag)",
    )
    args = parser.parse_args()
    key = secrets.token_hex(16)
    port = free_port()
    slot = f"bench_replay_{os.getpid()}"
    url = f"http://127.0.0.1:{port}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("select docstore.drop_database(%s)", (DB,))
        conn.execute("select docstore.create_database(%s)", (DB,))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSTORE_")}
    env.update(
        DOCSTORE_DATABASE_URL=database_url(),
        DOCSTORE_LISTEN=f"127.0.0.1:{port}",
        DOCSTORE_ADMIN_KEY=key,
        DOCSTORE_JWT_SECRET=secrets.token_hex(32),
    )
    flags = ["--slot", slot, "--listen-replay", str(args.replay)]
    flags += ["--listen-grace-seconds", "3600", "--listen-queue", "100000"]
    if args.replay_bytes is not None:
        flags += ["--listen-replay-bytes", str(args.replay_bytes)]
    proc = subprocess.Popen(
        [args.binary, *flags], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "the sidecar exited"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "the sidecar did not become healthy"
            time.sleep(0.2)
        readers = [Reader(url, key) for _ in range(args.streams)]
        for r in readers:
            assert r.opened.wait(60), "a stream did not open"
        time.sleep(2)
        before = rss_kib(proc.pid)
        cpu_before = cpu_seconds(proc.pid)
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute("select set_config('docstore.database', %s, false)", (DB,))
            pad = "x" * args.pad
            for i in range(args.events):
                conn.execute(
                    "select docstore.set(%s, jsonb_build_object('i', %s::int, 'pad', %s::text))",
                    (f"parents/p{i}/ticks/t", i, pad),
                )
        deadline = time.monotonic() + 300
        while min(r.changes for r in readers) < args.events:
            assert time.monotonic() < deadline, [r.changes for r in readers]
            time.sleep(0.5)
        time.sleep(2)
        after = rss_kib(proc.pid)
        cpu = cpu_seconds(proc.pid) - cpu_before
        kept = min(args.events, args.replay)
        print(
            f"streams {args.streams} events {args.events} pad {args.pad} replay {args.replay} "
            f"replay-bytes {args.replay_bytes} (kept up to {kept} "
            f"per stream): rss KiB before {before} after {after} growth {after - before}; "
            f"sidecar CPU {cpu:.2f} s ({cpu * 1e6 / (args.events * args.streams):.1f} µs per "
            "event per stream, the 4 s of waits included)"
        )
    finally:
        proc.terminate()
        proc.wait(15)
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
                "where slot_name = %s and not active",
                (slot,),
            )
            conn.execute("select docstore.drop_database(%s)", (DB,))


if __name__ == "__main__":
    main()
