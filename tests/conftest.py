"""End-to-end fixtures: a throwaway Postgres 15 cluster with the installed pg_docstore and a
real docstore-sidecar, both on free ports, started once per test session.

Environment:
  DOCSTORE_SIDECAR_BIN  the sidecar binary (default: `cargo build --release`, then
                        $CARGO_TARGET_DIR or target, /release/docstore-sidecar)
  DOCSTORE_PG_BIN       Postgres' bin directory (default /usr/lib/postgresql/15/bin)
  DOCSTORE_KEEP_LOGS    keep the temporary directory (cluster and sidecar logs) after the run
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import httpx
import jwt
import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
PG_BIN = Path(os.environ.get("DOCSTORE_PG_BIN", "/usr/lib/postgresql/15/bin"))


# Every port free_port() handed out in this session: it releases its port at once, so two
# callers asking before either binds could otherwise be given the same one.
HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A free port on 127.0.0.1 that no earlier call of this session returned."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in HANDED_OUT:
            HANDED_OUT.add(port)
            return port


def as_postgres(args: list[str], **kw: Any) -> subprocess.CompletedProcess:
    """Run a command as the postgres system user (Postgres refuses to run as root)."""
    if os.geteuid() == 0:
        args = ["runuser", "-u", "postgres", "--", *args]
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


def sidecar_binary() -> Path:
    explicit = os.environ.get("DOCSTORE_SIDECAR_BIN")
    if explicit:
        return Path(explicit)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    # Always through cargo: a no-op when the binary is fresh, and a rebuild when the target
    # directory holds a binary of other sources (a target directory shared by worktrees).
    subprocess.run(["cargo", "build", "--release", "-p", "docstore-sidecar"], cwd=ROOT, check=True)
    return target / "release" / "docstore-sidecar"


class Cluster:
    """A throwaway cluster under /tmp, removed at the end."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="docstore-pytest-"))
        self.dir.chmod(0o755)
        self.data = self.dir / "data"
        self.run = self.dir / "run"
        self.log = self.dir / "postgres.log"
        self.port = free_port()
        for d in (self.data, self.run):
            d.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            for d in (self.data, self.run):
                shutil.chown(d, "postgres", "postgres")
        self.data.chmod(0o700)

    def start(self) -> None:
        as_postgres(
            [
                str(PG_BIN / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--encoding=UTF8",
                "--locale=C",
                "--auth-local=trust",
                "--auth-host=trust",
            ]
        )
        base = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.run} "
            "-c wal_level=logical -c fsync=off -c max_connections=100"
        )
        # As make up runs it: the extension in shared_preload_libraries (its background
        # builder and the protected settings docstore.auth / docstore.request).
        options = base + " -c shared_preload_libraries=pg_docstore"
        try:
            as_postgres(
                [
                    str(PG_BIN / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-l",
                    str(self.log),
                    "-w",
                    "-t",
                    "60",
                    "-o",
                    options,
                    "start",
                ]
            )
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"Postgres did not start; see {self.log}") from e

    def stop(self) -> None:
        try:
            as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"])
        except subprocess.CalledProcessError:
            pass

    def restart(self, mode: str, timeout: int = 60) -> None:
        """`pg_ctl restart -m <mode>`: `immediate` (a crash: recovery at start) or `fast` (a
        clean shutdown, which waits for a connected walsender to be confirmed)."""
        as_postgres(
            [
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-m",
                mode,
                "-w",
                "-t",
                str(timeout),
                "restart",
            ]
        )

    def url(self, database: str = "docstore") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_docstore(self) -> None:
        """Create the database `docstore` with the extension and the tests' setup (SETUP_SQL)."""
        as_postgres(
            [
                str(PG_BIN / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "docstore",
            ]
        )
        with psycopg.connect(self.url(), autocommit=True) as conn:
            for statement in SETUP_SQL:
                conn.execute(statement)


# The ruleset `make up` installs on its demo database (demo/open_rules.sql): anyone may read
# and write. A database without rules denies every non-admin caller (docs/rules.md), so the
# tests install it where they want an open database ((default) here, others with
# Stack.open_database).
OPEN_RULES = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /{document=**} { allow read, write: if true; }
  }
}"""

SETUP_SQL = [
    "create extension if not exists pg_docstore",
    (ROOT / "demo" / "open_rules.sql").read_text(),
]


# The login role of the session's sidecar (`stack`).
STACK_ROLE = "docstore_sidecar_e2e"


@dataclass
class Stack:
    """The running cluster and sidecar, as the tests use them."""

    cluster: Cluster
    url: str
    admin_key: str
    jwt_secret: str
    sidecar: subprocess.Popen
    sidecar_log: Path
    admin: dict[str, str] = field(default_factory=dict)

    def token(
        self,
        claims: dict[str, Any] | None = None,
        *,
        secret: str | None = None,
        expires_in: int = 3600,
        algorithm: str = "HS256",
        **extra: Any,
    ) -> str:
        """An HS256 JWT signed with the sidecar's secret (or `secret`); `exp` is added
        unless the claims hold one (pass exp=None to leave it out)."""
        body = dict(claims or {})
        body.update(extra)
        if "exp" not in body:
            body["exp"] = int(time.time()) + expires_in
        elif body["exp"] is None:
            del body["exp"]
        return jwt.encode(body, secret or self.jwt_secret, algorithm=algorithm)

    def bearer(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def sql(self, query: str, *params: Any) -> list[tuple]:
        """Run one statement as postgres in the docstore database (autocommit)."""
        with psycopg.connect(self.cluster.url(), autocommit=True) as conn:
            cur = conn.execute(query, params or None)
            return cur.fetchall() if cur.description else []

    def open_database(self, db: str) -> None:
        """Create database `db` (if missing) and install the open ruleset on it."""
        self.sql(
            "select docstore.create_database(%s) "
            "where not exists (select from docstore.databases where id = %s)",
            db,
            db,
        )
        self.sql("select docstore.set_rules(%s, %s)", OPEN_RULES, db)

    @staticmethod
    def doc(path: str, db: str = "(default)") -> str:
        """The URL path of a document or collection."""
        return f"/v1/databases/{db}/documents/{path}"

    def client(self, **kw: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, **kw)

    def sidecar_backends(self) -> list[tuple]:
        """(pid, state, wait_event_type, query) of the sidecar's connections."""
        return self.sql(
            "select pid, state, wait_event_type, query from pg_stat_activity "
            "where application_name = 'docstore-sidecar'"
        )


def wait_healthy(
    url: str,
    proc: subprocess.Popen,
    log: Path,
    timeout: float = 60,
    error: type[Exception] = RuntimeError,
) -> None:
    """Wait until the sidecar `proc` answers 200 on /healthz; raise `error` (the caller's own
    exception type: the campaigns catch theirs) with the end of its log when it exits or does
    not get healthy within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise error(f"the sidecar exited with {proc.returncode}: {log_tail(log)}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise error(f"the sidecar did not become healthy: {log_tail(log)}")


def serve_posts(
    port: int, respond: Callable[[bytes, dict[str, str]], tuple[int, bytes] | None]
) -> http.server.ThreadingHTTPServer:
    """A local HTTP endpoint on 127.0.0.1:`port` (the write triggers' target in tests), served
    by daemon threads: each POST's body and lower-cased headers go to `respond`, which returns
    the (status, body) to answer, or None to drop the connection unanswered. Stop it with
    `stop_server`."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            answer = respond(raw, {k.lower(): v for k, v in self.headers.items()})
            if answer is None:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            status, body = answer
            with contextlib.suppress(OSError):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def stop_server(server: http.server.ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


def sse_events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The events of a `text/event-stream` body read line by line, each as a dict of its
    fields (`event`, `id`, `data` parsed as JSON), as they complete; comments, `retry:` and
    field-less blocks are skipped."""
    ev: dict[str, Any] = {}
    for line in lines:
        if line == "":
            if "event" in ev:
                yield ev
            ev = {}
        elif not line.startswith((":", "retry:")):
            name, _, value = line.partition(": ")
            ev[name] = json.loads(value) if name == "data" else value


def log_tail(log: Path, chars: int = 4000) -> str:
    """The end of a process's log file (all of it when short), for an error message."""
    try:
        text = log.read_text(errors="replace")
    except OSError as e:
        return f"(no log at {log}: {e})"
    return text if len(text) <= chars else f"...{text[-chars:]}"


def show_past_capture(config: pytest.Config, text: str) -> None:
    """Print past pytest's capture (also under -q): a campaign's seed and its closing summary."""
    with config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        config.pluginmanager.get_plugin("terminalreporter").write_line(text)


def assert_campaign_check(campaign: Any, check: str, checks: dict[str, str], replay: str) -> None:
    """One check of an oracle campaign (tests/live, tests/cluster): fails with the check's
    first 20 problems, its seed as the environment variable `replay` replays it, and the
    campaign's logs."""
    problems = campaign.report()[check]
    assert not problems, (
        f"{check}: {checks[check]}; seed {campaign.seed} (replay: {replay}="
        f"{campaign.seed}, logs in {campaign.dirs}):\n" + "\n".join(problems[:20])
    )


@pytest.fixture(scope="session")
def stack():
    binary = sidecar_binary()
    cluster = Cluster()
    proc = None
    try:
        cluster.start()
        cluster.create_docstore()
        port = free_port()
        # Hex: tests pass these as command-line values (`--jwt-secret VALUE`), and a base64url
        # secret starting with '-' (1 run in 32) would be read as a flag.
        admin_key = secrets.token_hex(24)
        jwt_secret = secrets.token_hex(32)
        log = cluster.dir / "sidecar.log"
        # The sidecar's least-privileged login (sql/sidecar_role.sql), not the superuser: every
        # e2e test also proves the extension's grants. A role of its own: other tests run the
        # script for docstore_sidecar again, with a new password.
        database_url = sidecar_login(cluster, role=STACK_ROLE)
        env = {
            **os.environ,
            "DOCSTORE_DATABASE_URL": database_url,
            "DOCSTORE_LISTEN": f"127.0.0.1:{port}",
            "DOCSTORE_JWT_SECRET": jwt_secret,
            "DOCSTORE_ADMIN_KEY": admin_key,
            "RUST_LOG": os.environ.get("RUST_LOG", "info"),
        }
        for name in (
            "DOCSTORE_JWKS_FILE",
            "DOCSTORE_JWT_ISSUER",
            "DOCSTORE_JWT_AUDIENCE",
            "DOCSTORE_MAX_BODY_BYTES",
            "DOCSTORE_POOL_SIZE",
        ):
            env.pop(name, None)
        proc = subprocess.Popen(
            [str(binary)], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc, log)
        s = Stack(
            cluster=cluster,
            url=url,
            admin_key=admin_key,
            jwt_secret=jwt_secret,
            sidecar=proc,
            sidecar_log=log,
        )
        s.admin = s.bearer(admin_key)
        yield s
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        cluster.stop()
        if os.environ.get("DOCSTORE_KEEP_LOGS"):
            print(f"logs kept in {cluster.dir}")
        else:
            shutil.rmtree(cluster.dir, ignore_errors=True)


@pytest.fixture
def client(stack):
    with stack.client() as c:
        yield c


@pytest.fixture
def coll() -> str:
    """A collection id no other test uses."""
    return "c" + uuid.uuid4().hex[:12]


def sidecar_login(cluster: Cluster, *psql_vars: str, role: str = "docstore_sidecar") -> str:
    """Run sql/sidecar_role.sql on `cluster`'s database docstore as an operator would (psql as
    postgres, `-v` PSQL_VARS such as "dev_mode=on", a new random password) for the login
    `role`; the database URL of that login (docs/security.md, "The sidecar's role")."""
    password = secrets.token_hex(16)
    options = [arg for var in (*psql_vars, f"role={role}") for arg in ("-v", var)]
    as_postgres(
        [
            str(PG_BIN / "psql"),
            "-X",
            "-q",
            "-h",
            "127.0.0.1",
            "-p",
            str(cluster.port),
            "-U",
            "postgres",
            "-d",
            "docstore",
            *options,
            "-f",
            "-",
        ],
        input=f"\\set password {password}\n" + (ROOT / "sql" / "sidecar_role.sql").read_text(),
    )
    return cluster.url().replace("postgres@", f"{role}:{password}@", 1)


def sidecar_env(stack, port: int, database_url: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a sidecar a test starts on the test cluster: this process's, without
    its DOCSTORE_ settings, then the cluster's URL (or `database_url`), `127.0.0.1:port`, the
    stack's admin key and JWT secret, and the variables `extra` sets."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSTORE_")}
    env.update(
        {
            "DOCSTORE_DATABASE_URL": database_url or stack.cluster.url(),
            "DOCSTORE_LISTEN": f"127.0.0.1:{port}",
            "DOCSTORE_ADMIN_KEY": stack.admin_key,
            "DOCSTORE_JWT_SECRET": stack.jwt_secret,
            **extra,
        }
    )
    return env


@contextlib.contextmanager
def own_sidecar(stack, *flags: str, slot: str | None = None, database_url: str | None = None):
    """A sidecar of the test's own on the test cluster, started with `flags`; yields its URL.

    Without `slot` it serves no live queries (`--live false`); with one, its live queries use
    that slot (dropped afterwards). It logs in as postgres unless `database_url` says
    otherwise."""
    port = free_port()
    log = Path(stack.cluster.dir) / f"sidecar-{port}.log"
    env = sidecar_env(stack, port, database_url)
    live = ["--slot", slot] if slot else ["--live", "false"]
    binary = str(sidecar_binary())
    proc = subprocess.Popen(
        [binary, *live, *flags], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        if slot:
            stack.sql(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
                "where slot_name = %s and not active",
                slot,
            )


@contextlib.contextmanager
def grpc_sidecar(stack, *flags: str):
    """A sidecar of the test's own serving the gRPC front end (docs/grpc.md) on a free port,
    started with `flags` besides `--grpc-listen`; yields `host:port`, the value of
    `FIRESTORE_EMULATOR_HOST` for Google's SDKs."""
    address = f"127.0.0.1:{free_port()}"
    with own_sidecar(stack, "--grpc-listen", address, *flags):
        yield address


@pytest.fixture(scope="session")
def firestore_emulator_host(stack):
    """The gRPC front end of a sidecar in development mode (`Bearer owner`, what the SDKs send
    to an emulator, is the admin): its `host:port`."""
    with grpc_sidecar(stack, "--dev-mode") as address:
        yield address


# What did not run, named for scripts/tally.sh: one line `SKIPPED: <node id>: <reason>` per
# skipped, xfailed or deselected test at the end of the run, checked there against
# tests/allowed-skips.txt (an unlisted skip fails `make test`).
_NOT_RUN: list[tuple[str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        if hasattr(report, "wasxfail"):
            reason = f"xfailed: {report.wasxfail}"
        elif isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2])
        else:
            reason = str(report.longrepr)
        _NOT_RUN.append((report.nodeid, reason.replace("\n", " ")))


def pytest_deselected(items: list[pytest.Item]) -> None:
    _NOT_RUN.extend((item.nodeid, "deselected") for item in items)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for nodeid, reason in _NOT_RUN:
        terminalreporter.write_line(f"SKIPPED: {nodeid}: {reason}")
