"""A client's POST to a collection through a sidecar whose login role is not a superuser:
without EXECUTE on docstore.add_document_as_client it creates in the transaction (docstore.add,
then the read-back); granted EXECUTE, in one statement through that function. The create rule
decides the same either way (201, 403), the body is the same, and the function's call count
(track_functions) shows which path ran."""

import re

import httpx
import pytest
from login_role import assert_calls, calls, login_role
from test_process import start

DB = "clientcreate"
ROLE = "docstore_test_creator_login"
RULES = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /notes/{id} {
      allow create: if request.resource.data.owner == request.auth.uid;
      allow read: if resource.data.owner == request.auth.uid;
    }
  }
}"""
FUNCTION = "docstore.add_document_as_client(text, jsonb, text, text, text)"


@pytest.fixture
def database_url(stack):
    with login_role(stack, ROLE, DB, RULES) as url:
        yield url


def test_client_create_in_one_statement_or_in_a_transaction(stack, client, tmp_path, database_url):
    bodies = {}
    for granted in (False, True):
        if granted:
            stack.sql(f"grant execute on function {FUNCTION} to {ROLE}")
        before = calls(stack, "add_document_as_client")
        proc, url = start(
            stack, tmp_path, database_url, "--live", "false", "--jwt-secret", stack.jwt_secret
        )
        try:
            u1 = {"Authorization": f"Bearer {stack.token({'sub': 'u1'})}"}
            u2 = {"Authorization": f"Bearer {stack.token({'sub': 'u2'})}"}
            r = httpx.post(url + stack.doc("notes", db=DB), headers=u1, json={"owner": "u1"})
            assert r.status_code == 201, (granted, r.text)
            doc = r.json()
            assert re.fullmatch(r"notes/[A-Za-z0-9]{20}", doc["path"]), doc
            assert doc["data"] == {"owner": "u1"}
            assert doc["createTime"] == doc["updateTime"]
            # The body is the document as stored: what a GET of it returns.
            assert client.get(stack.doc(doc["path"], db=DB), headers=stack.admin).json() == doc
            bodies[granted] = doc
            r = httpx.post(url + stack.doc("notes", db=DB), headers=u2, json={"owner": "u1"})
            assert r.status_code == 403, (granted, r.text)
            assert r.json()["code"] == "PERMISSION_DENIED"
            r = httpx.post(url + stack.doc("notes", db=DB), json={"owner": "u1"})
            assert r.status_code == 403, (granted, r.text)
            r = httpx.post(url + stack.doc("notes", db=DB), headers=u1, json=[1])
            assert r.status_code == 400, (granted, r.text)
            assert r.json()["code"] == "INVALID_ARGUMENT"
        finally:
            proc.kill()
            proc.wait()
        # The sidecar's backends report their function calls when they exit; calls that
        # raised (the 403s) are not counted, so one.
        expected = before + (1 if granted else 0)
        assert_calls(stack, "add_document_as_client", expected, granted)
    # The denied creates wrote nothing: one document per path.
    rows = stack.sql("select count(*)::int from docstore.entities where database_id = %s", DB)
    assert rows[0][0] == 2
    assert set(bodies[False]) == set(bodies[True]) == {"path", "data", "createTime", "updateTime"}


def test_jwt_create_under_rules_through_the_main_sidecar(stack, client, database_url):
    """The project's sidecar connects as a superuser: its creates use the one-statement
    functions (admin and client) and answer as before."""
    u1 = {"Authorization": f"Bearer {stack.token({'sub': 'u1'})}"}
    u2 = {"Authorization": f"Bearer {stack.token({'sub': 'u2'})}"}
    r = client.post(stack.doc("notes", db=DB), headers=u1, json={"owner": "u1", "n": 1})
    assert r.status_code == 201, r.text
    doc = r.json()
    assert doc["data"] == {"owner": "u1", "n": 1}
    assert client.get(stack.doc(doc["path"], db=DB), headers=u1).json() == doc
    r = client.post(stack.doc("notes", db=DB), headers=u2, json={"owner": "u1"})
    assert r.status_code == 403, r.text
    assert r.json()["code"] == "PERMISSION_DENIED"
    r = client.post(stack.doc("notes", db=DB), headers=stack.admin, json={"owner": "anyone"})
    assert r.status_code == 201, r.text
    assert r.json()["data"] == {"owner": "anyone"}
    r = client.post(stack.doc("notes", db="missing-db"), headers=stack.admin, json={})
    assert r.status_code == 404, r.text
