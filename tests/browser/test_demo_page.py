"""The live demo page (GET /demo, docs/demo.md) in a real headless Chromium.

The browser is driven over the Chrome DevTools Protocol (a websocket: Page.navigate,
Runtime.evaluate); writes go through SQL (docstore.set, docstore.commit, docstore.delete) to the
test cluster. After each write the test polls the page's DOM until the rendered list is the
query's result computed here from the test's own copy of the data (a generous overall timeout
only fails the test). A MutationObserver in the page records every list it rendered, so the test
also checks that each write appeared at once: no rendered list is ever a partial transaction.

Set DOCSTORE_CHROMIUM to a Chromium binary; otherwise `chromium` (Debian's package, which
`make up` installs) is looked up on PATH. Without one the test skips, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

websocket = pytest.importorskip(
    "websocket", reason="websocket-client is missing: run scripts/venv.sh"
)

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 90.0
CITY = "SF"


def chromium_binary() -> str | None:
    explicit = os.environ.get("DOCSTORE_CHROMIUM")
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """A headless Chromium and a CDP session on its one page."""

    def __init__(self, binary: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="docstore-chromium-"))
        self.log = self.dir / "chromium.log"
        args = [
            binary,
            "--headless=new",
            "--remote-debugging-port=0",
            f"--user-data-dir={self.dir / 'profile'}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--disable-background-networking",
            "about:blank",
        ]
        if os.geteuid() == 0:
            # Chromium refuses to run as root inside its sandbox.
            args.insert(1, "--no-sandbox")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log.open("w"))
        self.next_id = 0
        self.ws = None
        try:
            port = self._devtools_port()
            page = self._page_target(port)
            self.ws = websocket.create_connection(
                page["webSocketDebuggerUrl"], timeout=TIMEOUT, suppress_origin=True
            )
        except BaseException:
            self.close()
            raise

    def _devtools_port(self) -> int:
        active = self.dir / "profile" / "DevToolsActivePort"
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"chromium exited with {self.proc.returncode}: {self.log.read_text()}"
                )
            lines = active.read_text().splitlines() if active.exists() else []
            if lines and lines[0].strip().isdigit():
                return int(lines[0])
            time.sleep(0.1)
        raise RuntimeError(f"chromium wrote no DevToolsActivePort: {self.log.read_text()}")

    def _page_target(self, port: int) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return pages[0]
            time.sleep(0.1)
        raise RuntimeError("chromium shows no page target")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One CDP command; events arriving meanwhile are skipped."""
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


# What the page shows: its status, position, stream, and the rows of the list.
STATE_JS = """!document.getElementById("status") ? JSON.stringify({
  loading: document.location.href,
  body: document.body ? document.body.textContent.slice(0, 300) : "",
}) : JSON.stringify({
  status: document.getElementById("status").textContent,
  state: document.getElementById("status").dataset.state,
  position: document.getElementById("position").textContent,
  stream: document.getElementById("stream").textContent,
  rows: [...document.querySelectorAll("#results li")].map((li) => [
    li.dataset.path,
    li.querySelector(".name").textContent,
    li.querySelector(".rating").textContent,
  ]),
})"""

# Every list the page renders from now on, as [path, name, rating] rows, and every status.
RECORD_JS = """(() => {
  window.__rendered = [];
  window.__statuses = [];
  const read = () => [...document.querySelectorAll("#results li")].map((li) => [
    li.dataset.path, li.querySelector(".name").textContent, li.querySelector(".rating").textContent,
  ]);
  new MutationObserver(() => window.__rendered.push(read()))
    .observe(document.getElementById("results"), { childList: true });
  const status = document.getElementById("status");
  new MutationObserver(() => window.__statuses.push(status.textContent))
    .observe(status, { childList: true, characterData: true, subtree: true });
  return true;
})()"""


def js_number(x: float | int) -> str:
    """A number as JavaScript's String() prints it (the tests use no exponents)."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


class Restaurants:
    """The test's own copy of the restaurants and the query's result on it."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}

    def top(self) -> list[list[str]]:
        rows = [(p, d) for p, d in self.docs.items() if d.get("city") == CITY]
        # avgRating desc; the tests give no two restaurants of the city one rating.
        rows.sort(key=lambda r: -r[1]["avgRating"])
        return [[p, d["name"], js_number(d["avgRating"])] for p, d in rows[:10]]


def load_demo(stack) -> Restaurants:
    """demo/restaurants.sql, as make up loads it, on no other restaurants; its indexes are
    created when this cluster has none yet."""
    stack.sql(
        "select count(docstore.delete(path)) from docstore.entities "
        "where database_id = '(default)' and path like 'restaurants/%'"
    )
    statements = [
        s.strip() for s in (ROOT / "demo" / "restaurants.sql").read_text().split(";\n") if s.strip()
    ]
    has_index = stack.sql(
        "select count(*) from docstore.indexes "
        "where database_id = '(default)' and collection_group = 'restaurants'"
    )[0][0]
    for statement in statements:
        if has_index and ("create_index" in statement or "build_indexes" in statement):
            continue
        stack.sql(statement)
    model = Restaurants()
    for path, data in stack.sql(
        "select path, data from docstore.entities "
        "where database_id = '(default)' and path ~ '^restaurants/[^/]+$'"
    ):
        model.docs[path] = data
    return model


def lsn(text: str) -> int:
    """A position `X/Y` (Postgres' LSN form) as a number."""
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def restaurant(name: str, rating: float, city: str = CITY) -> dict[str, Any]:
    return {"name": name, "city": city, "type": "Test", "avgRating": rating, "numRatings": 1}


def wait_for(browser: Browser, want_rows: list[list[str]], what: str) -> dict[str, Any]:
    """Poll the page until it shows `want_rows`, connected; the state it shows."""
    deadline = time.monotonic() + TIMEOUT
    seen: dict[str, Any] = {}
    while time.monotonic() < deadline:
        seen = json.loads(browser.evaluate(STATE_JS))
        if seen.get("state") == "connected" and seen["rows"] == want_rows:
            return seen
        time.sleep(0.1)
    pytest.fail(f"{what}: the page never showed {want_rows}; it shows {seen}")


def chromium_or_skip() -> str:
    binary = chromium_binary()
    if binary is None:
        pytest.skip(
            "no Chromium: install Debian's chromium (make up does) or set DOCSTORE_CHROMIUM"
        )
    return binary


def open_page(stack, browser: Browser, rows: list[list[str]]) -> dict[str, Any]:
    """Open /demo with a JWT in the fragment; wait for the first list; record from then on."""
    token = stack.token({"sub": "demo-viewer"})
    browser.call("Page.enable")
    browser.call("Page.navigate", url=f"{stack.url}/demo#city={CITY}&token={token}")
    shown = wait_for(browser, rows, "the initial snapshot")
    assert shown["status"] == "connected"
    assert shown["position"] != "-" and "/" in shown["position"], shown
    assert shown["stream"] != "-", shown
    # The token left the address bar once read.
    assert "token" not in browser.evaluate("location.href")
    assert browser.evaluate(RECORD_JS) is True
    return shown


def test_demo_page_follows_the_live_query(stack):
    binary = chromium_or_skip()
    model = load_demo(stack)
    # The demo's three SF restaurants, best first.
    assert [r[0] for r in model.top()] == [
        "restaurants/three",
        "restaurants/one",
        "restaurants/two",
    ]
    browser = Browser(binary)
    try:
        expected = [model.top()]
        shown = open_page(stack, browser, expected[-1])
        positions = [shown["position"]]

        def step(what: str, write, *params: Any) -> None:
            stack.sql(write, *params)
            expected.append(model.top())
            seen = wait_for(browser, expected[-1], what)
            positions.append(seen["position"])

        # Eight more SF restaurants in one transaction: eleven in the city, ten shown.
        batch = {
            f"restaurants/sf{i}": restaurant(f"SF Place {i}", round(3.01 + i / 10, 2))
            for i in range(1, 9)
        }
        model.docs.update(batch)
        step(
            "eight restaurants in one commit",
            "select docstore.commit(%s::jsonb)",
            json.dumps([{"set": p, "data": d} for p, d in batch.items()]),
        )
        assert "restaurants/sf1" not in [r[0] for r in expected[-1]]  # eleventh: not shown
        assert len(expected[-1]) == 10

        # A rating change that reorders: Smoke House from 3.5 to 4.9, to the top.
        model.docs["restaurants/two"]["avgRating"] = 4.9
        step(
            "a rating change",
            "select docstore.set('restaurants/two', %s::jsonb)",
            json.dumps(model.docs["restaurants/two"]),
        )
        assert expected[-1][0][0] == "restaurants/two"

        # A new restaurant enters the top list at 4.6; the tenth (SF Place 2, 3.2) leaves.
        model.docs["restaurants/new"] = restaurant("Newcomer", 4.6)
        step(
            "a new restaurant",
            "select docstore.set('restaurants/new', %s::jsonb)",
            json.dumps(model.docs["restaurants/new"]),
        )
        assert "restaurants/sf2" not in [r[0] for r in expected[-1]]

        # One leaves by a deletion (Taqueria Uno); SF Place 2 comes back as tenth.
        del model.docs["restaurants/three"]
        step("a deletion", "select docstore.delete('restaurants/three')")
        assert expected[-1][-1][0] == "restaurants/sf2"

        # One leaves by moving to another city (Ground Pit to LA).
        model.docs["restaurants/one"]["city"] = "LA"
        step(
            "a city change",
            "select docstore.set('restaurants/one', %s::jsonb)",
            json.dumps(model.docs["restaurants/one"]),
        )

        # One transaction of three documents: a rating falls to the bottom, one is deleted,
        # one is added at the top. The page shows all three at once.
        model.docs["restaurants/two"]["avgRating"] = 3.05
        del model.docs["restaurants/sf8"]
        model.docs["restaurants/star"] = restaurant("Star", 4.95)
        step(
            "a three-document transaction",
            "select docstore.commit(%s::jsonb)",
            json.dumps(
                [
                    {"set": "restaurants/two", "data": model.docs["restaurants/two"]},
                    {"delete": "restaurants/sf8"},
                    {"set": "restaurants/star", "data": model.docs["restaurants/star"]},
                ]
            ),
        )
        assert expected[-1][0][0] == "restaurants/star"
        assert expected[-1][-1][0] == "restaurants/two"

        # Every list the page rendered after the first was one of the results, in order: each
        # transaction appeared whole, in one render.
        rendered = browser.evaluate("JSON.stringify(window.__rendered)")
        assert json.loads(rendered) == expected[1:]
        # Each write moved the position the page shows forward.
        lsns = [lsn(p) for p in positions]
        assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns), positions
        assert json.loads(browser.evaluate(STATE_JS))["state"] == "connected"
    finally:
        browser.close()


# Drop the sidecar's replication slot under it (terminating its walsender until the drop
# succeeds): the sidecar recreates the slot and resets every stream (reason slot_lost).
DROP_SLOT = """do $$
begin
  for i in 1..600 loop
    perform pg_terminate_backend(active_pid) from pg_replication_slots
      where slot_name = 'docstore_sidecar' and active_pid is not null;
    begin
      perform pg_drop_replication_slot('docstore_sidecar');
      return;
    exception when object_in_use then
      perform pg_sleep(0.05);
    end;
  end loop;
  raise exception 'the slot docstore_sidecar stayed in use';
end $$"""


def test_demo_page_clears_on_reset_and_takes_the_next_snapshot(stack):
    binary = chromium_or_skip()
    model = load_demo(stack)
    browser = Browser(binary)
    try:
        before = model.top()
        open_page(stack, browser, before)
        stack.sql(DROP_SLOT)
        # The reset clears the list; the snapshot after it is the whole result again.
        wait_for(browser, before, "the snapshot after the reset")
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            rendered = json.loads(browser.evaluate("JSON.stringify(window.__rendered)"))
            if rendered[-1:] == [before]:
                break
            time.sleep(0.1)
        statuses = json.loads(browser.evaluate("JSON.stringify(window.__statuses)"))
        # Seen once in `make test` (2026-11-28): no status at all within TIMEOUT; the
        # sidecar's log, kept in the message, says whether it recreated the slot.
        assert any(s.startswith("reset (slot_lost)") for s in statuses), (
            statuses,
            rendered,
            stack.sidecar_log.read_text().splitlines()[-40:],
        )
        assert statuses[-1] == "connected", statuses
        assert rendered == [[], before], rendered
        # The stream after the reset still follows writes.
        model.docs["restaurants/two"]["avgRating"] = 4.85
        stack.sql(
            "select docstore.set('restaurants/two', %s::jsonb)",
            json.dumps(model.docs["restaurants/two"]),
        )
        wait_for(browser, model.top(), "a write after the reset")
        assert model.top()[0][0] == "restaurants/two"
    finally:
        browser.close()
