"""A client's GET through a sidecar whose login role is not a superuser: without EXECUTE on
docstore.get_document_as_client it reads in the four-statement transaction; granted EXECUTE, in
one statement through that function. The get rule decides the same either way (200, 403, 404),
and the function's call count (track_functions) shows which path ran."""

import time

import httpx
import pytest
from test_process import start

DB = "clientread"
ROLE = "docstore_test_login"
RULES = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /notes/{id} { allow get: if resource == null || resource.data.owner == request.auth.uid; }
  }
}"""
FUNCTION = "docstore.get_document_as_client(text, text, text, text)"


@pytest.fixture
def login_role(stack):
    stack.sql(f"create role {ROLE} login")
    stack.sql(f"grant docstore_client to {ROLE}")
    stack.sql(f"grant set on parameter docstore.auth, docstore.request to {ROLE}")
    stack.sql(f"alter role {ROLE} set track_functions = 'all'")
    stack.sql("insert into docstore.databases (id) values (%s) on conflict do nothing", DB)
    stack.sql("select docstore.set_rules(%s, %s)", RULES, DB)
    yield
    stack.sql("select docstore.drop_rules(%s)", DB)
    stack.sql(f"revoke set on parameter docstore.auth, docstore.request from {ROLE}")
    stack.sql(f"drop owned by {ROLE}")
    stack.sql(f"drop role {ROLE}")


def calls() -> str:
    return (
        "select coalesce(sum(calls), 0)::int from pg_stat_user_functions "
        "where schemaname = 'docstore' and funcname = 'get_document_as_client'"
    )


def test_client_get_in_one_statement_or_in_a_transaction(stack, client, tmp_path, login_role):
    r = client.put(stack.doc("notes/a", db=DB), json={"owner": "u1"}, headers=stack.admin)
    assert r.status_code == 200, r.text
    database_url = stack.cluster.url().replace("postgres@", f"{ROLE}@", 1)
    for granted in (False, True):
        if granted:
            stack.sql(f"grant execute on function {FUNCTION} to {ROLE}")
        before = stack.sql(calls())[0][0]
        proc, url = start(
            stack, tmp_path, database_url, "--live", "false", "--jwt-secret", stack.jwt_secret
        )
        try:
            u1 = {"Authorization": f"Bearer {stack.token({'sub': 'u1'})}"}
            u2 = {"Authorization": f"Bearer {stack.token({'sub': 'u2'})}"}
            r = httpx.get(url + stack.doc("notes/a", db=DB), headers=u1)
            assert r.status_code == 200, (granted, r.text)
            assert r.json()["data"] == {"owner": "u1"}
            r = httpx.get(url + stack.doc("notes/a", db=DB), headers=u2)
            assert r.status_code == 403, (granted, r.text)
            assert r.json()["code"] == "PERMISSION_DENIED"
            r = httpx.get(url + stack.doc("notes/none", db=DB), headers=u2)
            assert r.status_code == 404, (granted, r.text)
        finally:
            proc.kill()
            proc.wait()
        # The sidecar's backends report their function calls when they exit; a call that
        # raised (the 403) is not counted, so two of the three.
        expected = before + (2 if granted else 0)
        deadline = time.monotonic() + 10
        while stack.sql(calls())[0][0] != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stack.sql(calls())[0][0] == expected, granted
