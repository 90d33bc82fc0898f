"""Auth: admin key, JWTs (HS256), no header; what reaches Postgres (docstore.auth,
docstore.request, the role); every kind of bad token is 401 UNAUTHENTICATED."""

import base64
import contextlib
import http.server
import json
import threading
import time

import httpx
import pytest
from conftest import own_sidecar


def write(client, stack, path, data):
    r = client.put(stack.doc(path), json=data, headers=stack.admin)
    assert r.status_code == 200, r.text


OWNER_RULES = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /{document=**} {
      allow read: if request.auth != null && resource.data.owner == request.auth.uid;
      allow write: if request.auth != null;
    }
  }
}"""


@pytest.fixture
def owner_rules(stack):
    """Database 'authtest': a document may be read by its owner (the JWT's sub), written by any
    signed-in caller; a trigger records docstore.auth, docstore.request and the role of every
    write (client writes run as the extension's owner, in the caller's transaction)."""
    stack.sql("insert into docstore.databases (id) values ('authtest') on conflict do nothing")
    stack.sql("select docstore.set_rules(%s, 'authtest')", OWNER_RULES)
    statements = [
        "create table public.test_seen (auth text, request text, session_role text)",
        # The sidecar's login (not a superuser) writes as the admin.
        "grant insert on public.test_seen to public",
        """create function public.test_record() returns trigger language plpgsql as $$
           begin
             insert into public.test_seen values (current_setting('docstore.auth', true),
               current_setting('docstore.request', true), current_setting('role'));
             return new;
           end $$""",
        """create trigger test_record before insert on docstore.entities
             for each row when (new.database_id = 'authtest') execute function public.test_record()""",
    ]
    for s in statements:
        stack.sql(s)
    yield
    stack.sql("drop trigger if exists test_record on docstore.entities")
    stack.sql("drop function if exists public.test_record()")
    stack.sql("drop table if exists public.test_seen")
    stack.sql("select docstore.drop_rules('authtest')")


def test_claims_and_request_reach_postgres(stack, client, coll, owner_rules):
    path = f"{coll}/mine"
    r = client.put(stack.doc(path, db="authtest"), json={"owner": "u1"}, headers=stack.admin)
    assert r.status_code == 200, r.text
    url = stack.doc(path, db="authtest")
    # The owner reads it; another user and an anonymous caller are denied by the get rule,
    # which reads the claims from docstore.auth.
    r = client.get(url, headers=stack.bearer(stack.token({"sub": "u1"})))
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"owner": "u1"}
    assert client.get(url, headers=stack.bearer(stack.token({"sub": "u2"}))).status_code == 403
    assert client.get(url).status_code == 403
    # The admin key bypasses the rules (runs as the sidecar's own role).
    assert client.get(url, headers=stack.admin).status_code == 200
    # A client's write: its claims, request and role reach Postgres (the admin's write above
    # set neither claims nor the client role).
    r = client.put(
        stack.doc(f"{coll}/theirs", db="authtest"),
        json={"owner": "u2"},
        headers=stack.bearer(stack.token({"sub": "u2"})),
    )
    assert r.status_code == 200, r.text
    rows = stack.sql("select auth, request, session_role from public.test_seen order by ctid")
    assert len(rows) == 2, rows
    auth, request, role = rows[1]
    assert json.loads(auth)["sub"] == "u2"
    request = json.loads(request)
    assert request["method"] == "write"
    assert request["path"] == f"/databases/authtest/documents/{coll}/theirs"
    assert role == "docstore_client"


def test_requests_run_as_docstore_client(stack, client, coll):
    """A user's request runs as role docstore_client, which the rules decide: in a database
    without rules a JWT and an anonymous request are denied, while the admin key (the
    sidecar's own role) is not checked."""
    stack.sql("insert into docstore.databases (id) values ('authclient') on conflict do nothing")
    r = client.put(stack.doc(f"{coll}/hidden", db="authclient"), json={"a": 1}, headers=stack.admin)
    assert r.status_code == 200, r.text
    url = stack.doc(f"{coll}/hidden", db="authclient")
    user = stack.bearer(stack.token({"sub": "u1"}))
    assert client.get(url, headers=user).status_code == 403
    assert client.get(url).status_code == 403
    assert client.get(url, headers=stack.admin).status_code == 200


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


@contextlib.contextmanager
def rotating_jwks(*sets: dict):
    """An issuer's JWKS URL on a local HTTP server: the n-th request gets sets[n] (the last one
    from then on). Yields (url, a list whose length is the number of requests served)."""
    served: list[int] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(sets[min(len(served), len(sets) - 1)]).encode()
            served.append(1)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json", served
    finally:
        server.shutdown()
        server.server_close()


def rsa_key(kid: str):
    """A fresh RSA key and its public JWK with `kid`."""
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": kid, "alg": "RS256", "use": "sig"})
    return key, jwk


def test_jwks_url_rotation_and_sql_agree(stack, coll):
    """--jwks-url: fetched at start; a token with the issuer's new kid makes the sidecar refetch
    and is accepted; a kid unknown within --jwks-refetch-seconds is 401 without a fetch. SQL's
    docstore.authenticate accepts and refuses the same tokens with the same JWKS in
    docstore.jwt_jwks (docs/security.md)."""
    import jwt
    import psycopg

    (key_a, jwk_a), (key_b, jwk_b), (key_c, jwk_c) = rsa_key("a"), rsa_key("b"), rsa_key("c")

    def token(key, kid, **claims):
        body = {"sub": "u1", "exp": int(time.time()) + 600, **claims}
        return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})

    sets = [{"keys": [jwk_a]}, {"keys": [jwk_b]}, {"keys": [jwk_c]}]
    with (
        rotating_jwks(*sets) as (url, served),
        own_sidecar(stack, "--jwks-url", url, "--jwks-refetch-seconds", "3600") as base,
        httpx.Client(base_url=base, timeout=30) as c,
    ):
        doc = stack.doc(f"{coll}/a")
        assert len(served) == 1
        assert c.get(doc, headers=stack.bearer(token(key_a, "a"))).status_code != 401
        # The issuer rotated to kid "b": refetched on the first token naming it.
        assert c.get(doc, headers=stack.bearer(token(key_b, "b"))).status_code != 401
        assert len(served) == 2
        # Kid "c" would be served next, but not within the refetch interval.
        r = c.get(doc, headers=stack.bearer(token(key_c, "c")))
        assert r.status_code == 401, r.text
        assert r.json()["code"] == "UNAUTHENTICATED"
        assert len(served) == 2
        # A token without exp: refused here as in SQL below.
        no_exp = jwt.encode({"sub": "u1"}, key_b, algorithm="RS256", headers={"kid": "b"})
        assert c.get(doc, headers=stack.bearer(no_exp)).status_code == 401

    with psycopg.connect(stack.cluster.url()) as conn:
        conn.execute("select set_config('docstore.jwt_jwks', %s, true)", (json.dumps(sets[1]),))
        conn.execute("set local role docstore_client")
        claims = conn.execute(
            "select docstore.authenticate(%s)::text", (token(key_b, "b"),)
        ).fetchone()[0]
        assert json.loads(claims)["sub"] == "u1"
        for bad in (no_exp, token(key_c, "c"), token(key_a, "b")):
            with pytest.raises(psycopg.Error) as e:
                with conn.transaction():
                    conn.execute("select docstore.authenticate(%s)", (bad,))
            assert e.value.sqlstate == "28000", bad
