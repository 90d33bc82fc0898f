"""The sidecar as its least-privileged login role (docs/security.md, "The sidecar's role"):
docstore_sidecar, created by sql/sidecar_role.sql (LOGIN, REPLICATION, not a superuser, a member
of the extension's docstore_service), runs every path a real sidecar has: the replication slot
and live queries, a client's create and read (SET ROLE docstore_client with the request's
settings), the admin key (its own role: an administrator that bypasses the rules) and the
rules poll of live queries (docstore.rules).

Without the extension's grants to docstore_service each test fails: the script refuses (no
group role), a missing DML right makes the admin key a client (403 under deny-all rules), a
missing SELECT on docstore.rules leaves a stream running after its rules deny it."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import httpx
import pytest
from conftest import OPEN_RULES, PG_BIN, ROOT, as_postgres, own_sidecar, sidecar_login
from test_listen import Listener
from test_listen_rules import ended_by_permission

SCRIPT = ROOT / "sql" / "sidecar_role.sql"
ROLE = "docstore_sidecar"
SLOT = "least_privilege"
DENIED = "lpdenied"
OPEN = "lpopen"
DENY_ALL = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /{document=**} { allow read, write: if false; }
  }
}"""


def psql_script(stack, script: str) -> subprocess.CompletedProcess:
    """Run `script` through psql as postgres (on its standard input)."""
    return as_postgres(
        [
            str(PG_BIN / "psql"),
            "-X",
            "-q",
            "-h",
            "127.0.0.1",
            "-p",
            str(stack.cluster.port),
            "-U",
            "postgres",
            "-d",
            "docstore",
            "-f",
            "-",
        ],
        input=script,
    )


@pytest.fixture(scope="module")
def lp(stack):
    """A sidecar of its own, live queries on, logged in as docstore_sidecar."""
    url = sidecar_login(stack.cluster)
    for db, rules in ((DENIED, DENY_ALL), (OPEN, OPEN_RULES)):
        stack.sql("insert into docstore.databases (id) values (%s) on conflict do nothing", db)
        stack.sql("select docstore.set_rules(%s, %s)", rules, db)
    try:
        with own_sidecar(stack, slot=SLOT, database_url=url) as base:
            yield SimpleNamespace(url=base, admin=stack.admin)
    finally:
        for db in (DENIED, OPEN):
            stack.sql("select docstore.drop_rules(%s)", db)
        stack.sql("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", ROLE)


def test_the_role_is_not_a_superuser_and_the_sidecar_uses_it(stack, lp):
    rows = stack.sql(
        "select rolsuper, rolreplication, rolcanlogin, rolcreaterole, rolcreatedb, rolbypassrls "
        "from pg_roles where rolname = %s",
        ROLE,
    )
    assert rows == [(False, True, True, False, False, False)]
    httpx.get(lp.url + stack.doc("x/y"), headers=stack.admin, timeout=30)
    # Its pooled connections log in as the role. (The stack's own sidecar, whose connections
    # have the same application_name, logs in as postgres: a map from backend type to user
    # kept whichever row came last, so the check depended on pg_stat_activity's order.)
    assert stack.sql(
        "select count(*) > 0 from pg_stat_activity where backend_type = 'client backend' "
        "and application_name = 'docstore-sidecar' and usename = %s",
        ROLE,
    ) == [(True,)]
    # Its replication connection: the walsender holding its slot.
    assert stack.sql(
        "select a.usename from pg_replication_slots s "
        "join pg_stat_activity a on a.pid = s.active_pid where s.slot_name = %s",
        SLOT,
    ) == [(ROLE,)]


def test_the_slot_is_created_and_live_queries_deliver(stack, lp, coll):
    assert stack.sql("select active from pg_replication_slots where slot_name = %s", SLOT) == [
        (True,)
    ]
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
    client = stack.bearer(stack.token({"sub": "alice"}))
    admin = Listener(lp, params=[("sql", f"select * from /{coll}")])
    user = Listener(lp, params=[("sql", f"select * from /{coll}")], headers=client)
    try:
        for listener in (admin, user):
            assert listener.status == 200, listener.error_body
            assert listener.next()["event"] == "snapshot"
        stack.sql("select docstore.set(%s, '{\"n\": 2}')", f"{coll}/b")
        for listener in (admin, user):
            ev = listener.until(lambda e: e["event"] == "change")
            added = [c["document"]["path"] for t in ev["data"]["targets"] for c in t["changes"]]
            assert added == [f"{coll}/b"], ev
    finally:
        admin.close()
        user.close()


def test_a_client_create_answers_201_and_reads_back(stack, lp, coll):
    client = stack.bearer(stack.token({"sub": "alice"}))
    r = httpx.post(lp.url + stack.doc(coll), headers=client, json={"a": 1}, timeout=30)
    assert r.status_code == 201, r.text
    path = r.json()["path"]
    r = httpx.get(lp.url + stack.doc(path), headers=client, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"a": 1}


def test_the_admin_key_bypasses_rules_and_clients_do_not(stack, lp, coll):
    client = stack.bearer(stack.token({"sub": "alice"}))
    r = httpx.post(lp.url + stack.doc(coll, db=DENIED), headers=client, json={"a": 1}, timeout=30)
    assert r.status_code == 403, r.text
    assert stack.sql("select count(*) from docstore.entities where database_id = %s", DENIED) == [
        (0,)
    ]
    r = httpx.post(
        lp.url + stack.doc(coll, db=DENIED), headers=stack.admin, json={"a": 2}, timeout=30
    )
    assert r.status_code == 201, r.text
    path = r.json()["path"]
    r = httpx.get(lp.url + stack.doc(path, db=DENIED), headers=stack.admin, timeout=30)
    assert r.status_code == 200, r.text
    r = httpx.get(lp.url + stack.doc(path, db=DENIED), headers=client, timeout=30)
    assert r.status_code == 403, r.text
    r = httpx.post(
        lp.url + f"/v1/databases/{DENIED}:runQuery",
        headers=stack.admin,
        json={"sql": f"select * from /{coll}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    assert [row["path"] for row in r.json()] == [path]


def test_the_rules_poll_sees_a_rules_change(stack, lp, coll):
    stack.sql("select docstore.set_rules(%s, %s)", OPEN_RULES, OPEN)
    client = stack.bearer(stack.token({"sub": "alice"}))
    listener = Listener(
        lp,
        params=[("sql", f"select * from /{coll}")],
        headers=client,
        path=f"/v1/databases/{OPEN}:listen",
    )
    try:
        assert listener.status == 200, listener.error_body
        assert listener.next()["event"] == "snapshot"
        stack.sql("select docstore.set_rules(%s, %s)", DENY_ALL, OPEN)
        ended_by_permission(listener)
    finally:
        listener.close()
        stack.sql("select docstore.set_rules(%s, %s)", OPEN_RULES, OPEN)


def test_the_script_refuses_without_a_password(stack):
    with pytest.raises(subprocess.CalledProcessError) as e:
        psql_script(stack, SCRIPT.read_text())
    assert "needs a password" in e.value.stderr
