"""Who may address the sidecar (docs/http.md "Hosts and origins"): a loopback sidecar answers
only loopback `Host` names (and those of --allowed-hosts), so a page whose DNS name was rebound
to 127.0.0.1 cannot reach it; CORS headers go only to the origins of --cors-origins; a request
with two `Authorization` headers is refused.

Each test fails on a sidecar without the check: the rebound Host is served, the listed origin
gets no CORS answer, and the first of two Authorization headers is used.
"""

from __future__ import annotations

import httpx
from conftest import own_sidecar

APP = "https://app.example"


def cors_headers(r: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in r.headers.items() if k.lower().startswith("access-control-")}


def test_a_dns_rebinding_host_is_refused(stack, client):
    port = stack.url.rsplit(":", 1)[1]
    for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.attacker.example"):
        r = client.get("/healthz", headers={"Host": host})
        assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", (host, r.text)
        assert "--allowed-hosts" in r.json()["hint"]
        r = client.get(stack.doc("c/d"), headers={**stack.admin, "Host": host})
        assert r.status_code == 400, (host, r.text)
    for host in ("localhost", f"localhost:{port}", "127.0.0.1:1", "[::1]", f"[::1]:{port}"):
        r = client.get("/healthz", headers={"Host": host})
        assert r.status_code == 200, (host, r.text)


def test_allowed_hosts_adds_names(stack):
    with own_sidecar(stack, "--allowed-hosts", "sidecar,api.example") as url:
        for host, status in (
            ("sidecar:8787", 200),
            ("api.example", 200),
            ("localhost", 200),
            ("attacker.example", 400),
        ):
            r = httpx.get(url + "/healthz", headers={"Host": host}, timeout=30)
            assert r.status_code == status, (host, r.text)


def test_no_cors_headers_without_cors_origins(stack, client):
    r = client.get("/healthz", headers={"Origin": APP})
    assert r.status_code == 200 and cors_headers(r) == {}, r.headers
    r = client.options(
        "/v1/databases/(default)/documents/c/d",
        headers={"Origin": APP, "Access-Control-Request-Method": "PUT"},
    )
    assert cors_headers(r) == {}, r.headers


def test_cors_answers_listed_origins_only(stack):
    with own_sidecar(stack, "--cors-origins", f"{APP},https://other.example") as url:
        with httpx.Client(base_url=url, timeout=30) as c:
            path = "/v1/databases/(default)/documents/c/d"
            r = c.options(
                path,
                headers={
                    "Origin": APP,
                    "Access-Control-Request-Method": "PUT",
                    "Access-Control-Request-Headers": "authorization, content-type",
                },
            )
            assert r.status_code == 204, r.text
            assert r.headers["access-control-allow-origin"] == APP
            methods = {m.strip() for m in r.headers["access-control-allow-methods"].split(",")}
            assert {"GET", "POST", "PUT", "PATCH", "DELETE"} <= methods
            allowed = {
                h.strip().lower() for h in r.headers["access-control-allow-headers"].split(",")
            }
            assert {"authorization", "content-type", "last-event-id"} <= allowed
            r = c.get(path, headers={**stack.admin, "Origin": APP})
            assert r.headers["access-control-allow-origin"] == APP, r.headers
            # Unlisted origins: no CORS header at all, on preflights and on responses.
            evil = "https://evil.example"
            r = c.options(path, headers={"Origin": evil, "Access-Control-Request-Method": "PUT"})
            assert cors_headers(r) == {}, r.headers
            r = c.get(path, headers={**stack.admin, "Origin": evil})
            assert cors_headers(r) == {}, r.headers
            r = c.get(path, headers=stack.admin)
            assert cors_headers(r) == {}, r.headers


def test_two_authorization_headers_are_refused(stack, client):
    anonymous_then_admin = [
        ("Authorization", f"Bearer {stack.admin_key}"),
        ("Authorization", "Bearer not-a-token"),
    ]
    for headers in (anonymous_then_admin, list(reversed(anonymous_then_admin))):
        r = client.get(stack.doc("c/d"), headers=headers)
        assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", r.text
        assert "Authorization" in r.json()["message"]
        r = client.get(
            "/v1/databases/(default):listen", params={"document": "c/d"}, headers=headers
        )
        assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", r.text
