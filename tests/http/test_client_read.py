"""A client's GET through a sidecar whose login role is not a superuser: without EXECUTE on
docstore.get_document_as_client it reads in the four-statement transaction; granted EXECUTE, in
one statement through that function. The get rule decides the same either way (200, 403, 404),
and the function's call count (track_functions) shows which path ran."""

import httpx
import pytest
from login_role import assert_calls, calls, login_role
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
def database_url(stack):
    with login_role(stack, ROLE, DB, RULES) as url:
        yield url


def test_client_get_in_one_statement_or_in_a_transaction(stack, client, tmp_path, database_url):
    r = client.put(stack.doc("notes/a", db=DB), json={"owner": "u1"}, headers=stack.admin)
    assert r.status_code == 200, r.text
    for granted in (False, True):
        if granted:
            stack.sql(f"grant execute on function {FUNCTION} to {ROLE}")
        before = calls(stack, "get_document_as_client")
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
        assert_calls(stack, "get_document_as_client", expected, granted)
