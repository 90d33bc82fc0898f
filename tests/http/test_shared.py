"""GETs on shared connections (--shared-connections, docs/http.md "Connections"): the
statements of many requests in flight are pipelined on the same Postgres connection. Each
request still gets its own answer (document, 404, 403) whatever fails next to it, one
connection serves them all, and a shared connection whose backend ends is replaced."""

import asyncio
import time

import httpx
import pytest
from test_process import start

DB = "sharedconn"
APP = "docstore-shared-test"
RULES = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /things/{id} {
      allow get: if resource.data.open == true;
    }
  }
}"""


@pytest.fixture
def shared_sidecar(stack, tmp_path):
    stack.sql("insert into docstore.databases (id) values (%s) on conflict do nothing", DB)
    stack.sql("select docstore.set_rules(%s, %s)", RULES, DB)
    with httpx.Client(base_url=stack.url, headers=stack.admin, timeout=60) as http:
        for db in ("(default)", DB):
            for i in range(20):
                r = http.put(stack.doc(f"things/t{i}", db), json={"n": i, "open": i % 2 == 0})
                assert r.status_code == 200, r.text
    admin = "k" * 20
    proc, url = start(
        stack,
        tmp_path,
        stack.cluster.url() + f"?application_name={APP}",
        "--shared-connections",
        "1",
        # No live queries: their connections (the slot's, the rules poll) are not counted.
        "--live",
        "false",
        "--admin-key",
        admin,
        "--jwt-secret",
        stack.jwt_secret,
    )
    try:
        yield url, {"Authorization": f"Bearer {admin}"}
    finally:
        proc.kill()
        proc.wait()
        stack.sql("select docstore.drop_rules(%s)", DB)


def backends(stack) -> list[int]:
    """The sidecar's connections that served documents (not its replication connection, nor the
    pooled one of its start-up health check)."""
    rows = stack.sql(
        "select pid from pg_stat_activity where application_name = %s "
        "and backend_type = 'client backend' and query <> 'select 1'",
        APP,
    )
    return [pid for (pid,) in rows]


def test_concurrent_gets_on_one_connection_each_get_their_own_answer(stack, shared_sidecar):
    url, admin = shared_sidecar
    client = {"Authorization": f"Bearer {stack.token({'sub': 'u1'})}"}
    # (database, id, headers, expected status, expected n): documents, missing ones, an unknown
    # database, and rule denials (odd n is not open; a missing document has no resource.data)
    # interleaved, so failing statements sit in the pipeline between succeeding ones.
    cases = []
    for i in range(24):
        cases.append(("(default)", f"t{i}", admin, 200 if i < 20 else 404, i))
        cases.append((DB, f"t{i}", client, 200 if i < 20 and i % 2 == 0 else 403, i))
        cases.append((DB, f"t{i}", admin, 200 if i < 20 else 404, i))
        cases.append(("nosuchdb", f"t{i}", admin, 404, i))

    async def run() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            for _ in range(3):
                answers = await asyncio.gather(
                    *(http.get(stack.doc(f"things/{i}", db), headers=h) for db, i, h, _, _ in cases)
                )
                for (db, i, _, status, n), r in zip(cases, answers, strict=True):
                    assert r.status_code == status, (db, i, r.text)
                    if status == 200:
                        assert r.json()["data"]["n"] == n, (db, i, r.text)
                        assert r.json()["path"] == f"things/{i}", r.text

    asyncio.run(run())
    # All of it went through the one shared connection.
    assert len(backends(stack)) == 1, stack.sql(
        "select pid, backend_type, query from pg_stat_activity where application_name = %s", APP
    )


def test_a_shared_connection_whose_backend_ended_is_replaced(stack, shared_sidecar):
    url, admin = shared_sidecar
    doc = url + stack.doc("things/t2")
    assert httpx.get(doc, headers=admin).status_code == 200
    (before,) = backends(stack)
    stack.sql("select pg_terminate_backend(%s)", before)
    deadline = time.monotonic() + 10
    while before in backends(stack) and time.monotonic() < deadline:
        time.sleep(0.05)
    # A wait, not a delay: the test goes on only once the backend is gone (else it would not
    # test the replacement).
    assert before not in backends(stack)
    # The request that finds the connection closed opens a new one.
    r = httpx.get(doc, headers=admin)
    assert r.status_code == 200, r.text
    assert r.json()["data"]["n"] == 2
    after = backends(stack)
    assert len(after) == 1 and after != [before]
