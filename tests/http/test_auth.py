"""Auth: admin key, JWTs (HS256), no header; what reaches Postgres (docstore.auth,
docstore.request, the role); every kind of bad token is 401 UNAUTHENTICATED."""

import base64
import json
import time

import pytest


def write(client, stack, path, data):
    r = client.put(stack.doc(path), json=data, headers=stack.admin)
    assert r.status_code == 200, r.text


@pytest.fixture
def owner_policy(stack):
    """Row-level security on database 'authtest' only: a document is visible when its owner
    is the JWT's sub, and only to a `get` request (reads docstore.auth and docstore.request,
    as compiled rules will)."""
    stack.sql("insert into docstore.databases (id) values ('authtest') on conflict do nothing")
    # The extension keeps row-level security on entities with permissive policies of its own
    # (the rules' `list` filter, open for a database without rules), so a test policy
    # restricts only AS RESTRICTIVE, and row-level security is never switched off.
    statements = [
        """create policy test_owner_read on docstore.entities as restrictive for select using (
             database_id <> 'authtest'
             or (data->>'owner' = current_setting('docstore.auth', true)::jsonb->>'sub'
                 and current_setting('docstore.request', true)::jsonb->>'method' = 'get'
                 and current_setting('docstore.request', true)::jsonb->>'path'
                     = '/databases/authtest/documents/' || path))""",
    ]
    for s in statements:
        stack.sql(s)
    yield
    stack.sql("drop policy if exists test_owner_read on docstore.entities")


def test_claims_and_request_reach_postgres(stack, client, coll, owner_policy):
    path = f"{coll}/mine"
    r = client.put(stack.doc(path, db="authtest"), json={"owner": "u1"}, headers=stack.admin)
    assert r.status_code == 200, r.text
    url = stack.doc(path, db="authtest")
    # The owner sees it; another user and an anonymous caller do not (the policy hides it).
    r = client.get(url, headers=stack.bearer(stack.token({"sub": "u1"})))
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"owner": "u1"}
    assert client.get(url, headers=stack.bearer(stack.token({"sub": "u2"}))).status_code == 404
    assert client.get(url).status_code == 404
    # The admin key bypasses row-level security (runs as the sidecar's own role).
    assert client.get(url, headers=stack.admin).status_code == 200


def test_requests_run_as_docstore_client(stack, client, coll):
    """A user's request runs as role docstore_client: a policy that hides every row from that
    role (and from no other) hides the document from a JWT and an anonymous request, while
    the admin key (the sidecar's own role) still sees it."""
    write(client, stack, f"{coll}/hidden", {"a": 1})
    url = stack.doc(f"{coll}/hidden")
    stack.sql(
        "create policy test_hide_from_clients on docstore.entities "
        "as restrictive for select to docstore_client using (false)"
    )
    try:
        user = stack.bearer(stack.token({"sub": "u1"}))
        assert client.get(url, headers=user).status_code == 404
        assert client.get(url).status_code == 404
        assert client.get(url, headers=stack.admin).status_code == 200
    finally:
        stack.sql("drop policy if exists test_hide_from_clients on docstore.entities")


def test_no_header_is_unauthenticated_not_an_error(stack, client, coll):
    write(client, stack, f"{coll}/open", {"a": 1})
    r = client.get(stack.doc(f"{coll}/open"))
    assert r.status_code == 200, r.text


def b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def tampered(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "admin"
    return f"{header}.{b64(claims)}.{signature}"


def bad_tokens(stack):
    now = int(time.time())
    return {
        "expired": stack.token({"sub": "u"}, exp=now - 3600),
        "not yet valid": stack.token({"sub": "u", "nbf": now + 3600}),
        "wrong key": stack.token({"sub": "u"}, secret="not-the-secret-" + "x" * 20),
        "tampered": tampered(stack.token({"sub": "u"})),
        "wrong alg": stack.token({"sub": "u"}, algorithm="HS512"),
        "no exp": stack.token({"sub": "u"}, exp=None),
        "none alg": b64({"alg": "none", "typ": "JWT"})
        + "."
        + b64({"sub": "u", "exp": now + 600})
        + ".",
        "garbage": "not-a-jwt",
        "near admin key": stack.admin_key + "x",
    }


def test_bad_tokens_are_401(stack, client, coll):
    write(client, stack, f"{coll}/a", {"a": 1})
    for name, token in bad_tokens(stack).items():
        r = client.get(stack.doc(f"{coll}/a"), headers=stack.bearer(token))
        assert r.status_code == 401, (name, r.text)
        body = r.json()
        assert body["code"] == "UNAUTHENTICATED", name
        assert set(body) == {"code", "message", "detail", "hint"}
    for header in ("Basic dXNlcjpwdw==", "Bearer", "Bearer  x y", "token"):
        r = client.get(stack.doc(f"{coll}/a"), headers={"Authorization": header})
        assert r.status_code == 401, (header, r.text)


def test_rs256_token_without_jwks_is_401(stack, client, coll):
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = jwt.encode({"sub": "u", "exp": int(time.time()) + 600}, key, algorithm="RS256")
    r = client.get(stack.doc(f"{coll}/a"), headers=stack.bearer(token))
    assert r.status_code == 401


def test_admin_key_bypasses_nothing_for_other_keys(stack, client, coll):
    """The admin key is compared whole: a prefix or a JWT signed with it is not admin."""
    write(client, stack, f"{coll}/a", {"a": 1})
    r = client.get(stack.doc(f"{coll}/a"), headers=stack.bearer(stack.admin_key[:-1]))
    assert r.status_code == 401
    r = client.get(
        stack.doc(f"{coll}/a"),
        headers=stack.bearer(stack.token({"sub": "u"}, secret=stack.admin_key)),
    )
    assert r.status_code == 401
