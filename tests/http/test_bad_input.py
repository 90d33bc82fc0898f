"""Bad input over HTTP: each answered with the right canonical code and status, and nothing
written; a client that goes away leaves no transaction open."""

import json
import socket
import time
from urllib.parse import urlsplit

import psycopg


def raw_request(
    stack, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """Send the request line exactly as given (HTTP clients normalise `..` and `%2F`)."""
    u = urlsplit(stack.url)
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {u.hostname}:{u.port}",
        "Connection: close",
        f"Content-Length: {len(body)}",
    ]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def test_invalid_json(stack, client, coll):
    r = client.put(
        stack.doc(f"{coll}/a"),
        content=b'{"a": 1,,}',
        headers={**stack.admin, "Content-Type": "application/json"},
    )
    assert r.status_code == 400
    assert r.json()["code"] == "INVALID_ARGUMENT"
    assert "not valid JSON" in r.json()["message"]
    for url, body in (
        ("/v1/databases/(default):runQuery", b"{"),
        ("/v1/databases/(default):commit", b"[1"),
        (stack.doc(coll), b"\xff\xfe"),
    ):
        r = client.post(
            url, content=body, headers={**stack.admin, "Content-Type": "application/json"}
        )
        assert r.status_code == 400, (url, r.text)
        assert r.json()["code"] == "INVALID_ARGUMENT"
    # JSON, but not an object.
    r = client.put(stack.doc(f"{coll}/a"), json=[1, 2], headers=stack.admin)
    assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT"
    # Bad typed JSON is the extension's error (22P02), passed through with its message.
    r = client.put(
        stack.doc(f"{coll}/a"), json={"t": {"$timestamp": "yesterday"}}, headers=stack.admin
    )
    assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT"
    assert "timestamp" in r.json()["message"].lower()
    assert client.get(stack.doc(f"{coll}/a"), headers=stack.admin).status_code == 404


def test_wrong_content_type(stack, client, coll):
    for ctype in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = dict(stack.admin)
        if ctype:
            headers["Content-Type"] = ctype
        r = client.put(stack.doc(f"{coll}/a"), content=b'{"a": 1}', headers=headers)
        assert r.status_code == 400, (ctype, r.text)
        assert r.json()["code"] == "INVALID_ARGUMENT"
        assert "application/json" in r.json()["message"]
    r = client.put(
        stack.doc(f"{coll}/a"),
        content=b'{"a": 1}',
        headers={**stack.admin, "Content-Type": "application/json; charset=utf-8"},
    )
    assert r.status_code == 200


def test_oversized_body(stack, client, coll):
    big = b'{"s": "' + b"x" * (10 * 1024 * 1024) + b'"}'
    r = client.put(
        stack.doc(f"{coll}/big"),
        content=big,
        headers={**stack.admin, "Content-Type": "application/json"},
    )
    assert r.status_code == 413
    assert r.json()["code"] == "RESOURCE_EXHAUSTED"

    # Without a Content-Length (chunked): refused while reading.
    def chunks():
        for _ in range(11):
            yield b" " * (1024 * 1024)

    r = client.post(
        "/v1/databases/(default):commit",
        content=chunks(),
        headers={**stack.admin, "Content-Type": "application/json"},
    )
    assert r.status_code == 413
    # A document over the extension's 1 MiB limit, inside the body limit: 54000 -> 413 too.
    r = client.put(
        stack.doc(f"{coll}/big"), json={"s": "x" * (1024 * 1024 + 10)}, headers=stack.admin
    )
    assert r.status_code == 413, r.text
    assert r.json()["code"] == "RESOURCE_EXHAUSTED"
    assert client.get(stack.doc(f"{coll}/big"), headers=stack.admin).status_code == 404


def test_bad_paths(stack, coll):
    auth = {"Authorization": f"Bearer {stack.admin_key}", "Content-Type": "application/json"}
    base = "/v1/databases/(default)/documents"
    cases = [
        ("PUT", f"{base}/{coll}"),  # odd segments for a document write
        ("PATCH", f"{base}/{coll}/a/b"),
        ("DELETE", f"{base}/{coll}"),
        ("POST", f"{base}/{coll}/a"),  # even segments for an add
        ("GET", f"{base}/{coll}/../x/y"),
        ("GET", f"{base}/{coll}/./x"),
        ("GET", f"{base}/{coll}//x"),
        ("GET", f"{base}/{coll}/"),
        ("GET", f"{base}/"),
        ("GET", f"{base}/{coll}/a%2Fb"),
        ("GET", f"{base}/{coll}/a%2fb/c/d"),
        ("PUT", f"{base}/{coll}/%2E%2E"),
        ("GET", f"{base}/{coll}/a%zz"),
        ("GET", f"{base}/{coll}/__reserved__"),
    ]
    for method, path in cases:
        status, body = raw_request(stack, method, path, b'{"a": 1}', auth)
        assert status == 400, (method, path, body)
        assert b'"INVALID_ARGUMENT"' in body, (method, path, body)
    # Nothing was written under any of them.
    assert stack.sql("select count(*) from docstore.entities where path like %s", coll + "%") == [
        (0,)
    ]
    # Unknown routes are 404 NOT_FOUND with the JSON error.
    for method, path in (
        ("GET", "/v1/databases/(default)"),
        ("GET", "/nowhere"),
        ("GET", "/v1/databases/(default):runQuery"),
        ("POST", "/v1/databases/(default):nothing"),
    ):
        status, body = raw_request(stack, method, path, b"", auth)
        assert status == 404, (method, path, body)
        assert b'"NOT_FOUND"' in body


def test_database_ids(stack, client, coll):
    r = client.get(stack.doc(f"{coll}/a", db="no-such-db"), headers=stack.admin)
    assert r.status_code == 404
    assert r.json()["code"] == "NOT_FOUND"
    assert "no-such-db" in r.json()["message"]
    for bad in ("Upper", "abc", "1abc", "a_b_c", "x" * 64, "abcd-", "(other)"):
        r = client.get(stack.doc(f"{coll}/a", db=bad), headers=stack.admin)
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["code"] == "INVALID_ARGUMENT"
    r = client.post(
        "/v1/databases/no-such-db:runQuery", json={"sql": "select * from /a"}, headers=stack.admin
    )
    assert r.status_code == 404


def test_query_needing_a_missing_index(stack, client, coll):
    for i in range(3):
        client.put(stack.doc(f"{coll}/d{i}"), json={"a": 1, "b": i}, headers=stack.admin)
    r = client.post(
        "/v1/databases/(default):runQuery",
        headers=stack.admin,
        json={"sql": f"select * from /{coll} where a = 1 order by b desc"},
    )
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["code"] == "FAILED_PRECONDITION"
    assert "docstore.create_index(" in body["message"]


def test_batch_whose_third_write_fails_writes_nothing(stack, client, coll):
    client.put(stack.doc(f"{coll}/exists"), json={"n": 0}, headers=stack.admin)
    writes = [
        {"set": f"{coll}/w1", "data": {"n": 1}},
        {"update": f"{coll}/exists", "fields": {"n": {"$increment": 1}}},
        {"update": f"{coll}/missing", "fields": {"n": 1}},
        {"set": f"{coll}/w4", "data": {"n": 4}},
    ]
    r = client.post("/v1/databases/(default):commit", json={"writes": writes}, headers=stack.admin)
    assert r.status_code == 404, r.text
    assert r.json()["code"] == "NOT_FOUND"
    assert client.get(stack.doc(f"{coll}/w1"), headers=stack.admin).status_code == 404
    assert client.get(stack.doc(f"{coll}/w4"), headers=stack.admin).status_code == 404
    assert client.get(stack.doc(f"{coll}/exists"), headers=stack.admin).json()["data"] == {"n": 0}
    # Same with a bad third write (invalid data): the whole batch is refused.
    writes[2] = {"set": f"{coll}/w3", "data": {"t": {"$timestamp": "no"}}}
    r = client.post("/v1/databases/(default):commit", json={"writes": writes}, headers=stack.admin)
    assert r.status_code == 400, r.text
    assert client.get(stack.doc(f"{coll}/w1"), headers=stack.admin).status_code == 404


def idle_in_transaction(stack) -> list[tuple]:
    return [b for b in stack.sidecar_backends() if b[1] and b[1].startswith("idle in transaction")]


def wait_until(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_client_disconnect_during_blocked_write(stack, coll):
    """A write waits on a row lock a psql session holds; the client goes away. The sidecar
    cancels the statement: its backend stops waiting while the lock is still held, no
    transaction stays open, and the write never happens."""
    path = f"{coll}/locked"
    stack.sql("select docstore.set(%s, '{\"v\": 0}')", path)
    holder = psycopg.connect(stack.cluster.url())
    try:
        holder.execute("select 1 from docstore.entities where path = %s for update", (path,))
        u = urlsplit(stack.url)
        body = b'{"v": 1}'
        s = socket.create_connection((u.hostname, u.port))
        s.sendall(
            (
                f"PUT {stack.doc(path)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {stack.admin_key}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )

        def waiting():
            return [b for b in stack.sidecar_backends() if b[2] == "Lock"]

        assert wait_until(lambda: len(waiting()) == 1), stack.sidecar_backends()
        s.close()
        # The lock is still held, yet the sidecar's backend stops waiting.
        assert wait_until(lambda: not waiting()), stack.sidecar_backends()
        assert idle_in_transaction(stack) == []
    finally:
        holder.rollback()
        holder.close()
    time.sleep(0.2)
    assert stack.sql("select docstore.get(%s)", path) == [({"v": 0},)]
    assert idle_in_transaction(stack) == []


def test_client_disconnect_during_streamed_query(stack, client, coll):
    """A large streamed result; the client reads a little and goes away."""
    stack.sql(
        "select count(docstore.set(%s || '/d' || i, jsonb_build_object('i', i, 'pad', "
        "repeat('x', 2000)))) from generate_series(1, 3000) i",
        coll,
    )
    u = urlsplit(stack.url)
    body = ('{"sql": "select * from /%s"}' % coll).encode()
    s = socket.create_connection((u.hostname, u.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(
        (
            f"POST /v1/databases/(default):runQuery HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {stack.admin_key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
    )
    first = s.recv(1024)
    assert first.startswith(b"HTTP/1.1 200"), first
    s.close()
    assert wait_until(
        lambda: (
            idle_in_transaction(stack) == []
            and not [
                b
                for b in stack.sidecar_backends()
                if b[1] == "active" and "docstore.query" in (b[3] or "")
            ]
        )
    ), stack.sidecar_backends()
    # The sidecar still serves.
    r = client.get("/healthz")
    assert r.status_code == 200


def test_unknown_query_parameter(stack, client, coll):
    r = client.put(
        stack.doc(f"{coll}/a"), json={"a": 1}, params={"mrege": "true"}, headers=stack.admin
    )
    assert r.status_code == 400
    assert "mrege" in r.json()["message"]


def test_errors_never_echo_database_internals(stack, client, coll):
    """A query whose text fails in Postgres' own parser would show SQL if echoed; the
    extension's syntax error is ours and passes, but no response holds a SQL statement of
    the sidecar."""
    r = client.post(
        "/v1/databases/(default):runQuery",
        headers=stack.admin,
        json={"sql": "select * from /%s where" % coll},
    )
    assert r.status_code == 400
    body = r.text.lower()
    for leak in ("docstore.query($1)", "set_config", "select path, data"):
        assert leak not in body


RUN_QUERY = "/v1/databases/(default):runQuery"


def test_malformed_structured_query(stack, client, coll):
    """A structuredQuery the parser refuses is 400 INVALID_ARGUMENT whose message names
    where it is wrong; nothing runs."""
    source = [{"collectionId": coll}]
    for query, where in (
        ({"from": coll}, "from"),
        ({"frm": source}, "frm"),
        ({"from": source, "where": {"fieldFilter": {"op": "EQUAL"}}}, "where.fieldFilter"),
        ({"from": source, "orderBy": [{"field": {"fieldPath": "a"}, "direction": "UP"}]}, "UP"),
        ({"from": source, "limit": -1}, "limit"),
        ({"from": source, "limit": "ten"}, "limit"),
    ):
        r = client.post(RUN_QUERY, headers=stack.admin, json={"structuredQuery": query})
        assert r.status_code == 400, (query, r.text)
        assert r.json()["code"] == "INVALID_ARGUMENT", (query, r.text)
        assert where in r.json()["message"], (query, r.text)
    for body in (
        {"structuredQuery": []},
        {"structuredQuery": "x"},
        {"sql": "x", "structuredQuery": {}},
    ):
        r = client.post(RUN_QUERY, headers=stack.admin, json=body)
        assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", (body, r.text)
        assert "structuredQuery" in r.json()["message"], (body, r.text)


def test_bad_page_size(stack, client, coll):
    """pageSize is a non-negative integer: anything else is 400 INVALID_ARGUMENT naming it;
    0 gives no document (it gave one: the extension's listing let one row past `limit 0`)."""
    for name in ("a", "b", "c"):
        assert client.put(
            stack.doc(f"{coll}/{name}"), json={"n": 1}, headers=stack.admin
        ).is_success
    for bad in ("abc", "-1", "1.5", "", "99999999999999999999", "0x10"):
        r = client.get(stack.doc(coll), params={"pageSize": bad}, headers=stack.admin)
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["code"] == "INVALID_ARGUMENT", (bad, r.text)
        assert "pageSize" in r.json()["message"], (bad, r.text)
    for size, paths in ((0, []), (1, [f"{coll}/a"]), (5, [f"{coll}/{n}" for n in "abc"])):
        r = client.get(stack.doc(coll), params={"pageSize": size}, headers=stack.admin)
        assert r.status_code == 200, (size, r.text)
        assert [d["path"] for d in r.json()] == paths, size
    # pageSize is for collections only.
    r = client.get(stack.doc(f"{coll}/a"), params={"pageSize": 1}, headers=stack.admin)
    assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT"


def test_malformed_update_time(stack, client, coll):
    """?updateTime= that is not an RFC 3339 time (with at most microseconds) is 400
    INVALID_ARGUMENT naming the parameter, for PUT, PATCH and DELETE; the document is
    untouched."""
    doc = stack.doc(f"{coll}/t")
    written = client.put(doc, json={"v": 0}, headers=stack.admin).json()
    for bad in ("nope", "2026-13-45T00:00:00Z", "2026-01-01T00:00:00.000000001Z", "2026-01-01"):
        for method, body in (("PUT", {"v": 1}), ("PATCH", {"v": 1}), ("DELETE", None)):
            r = client.request(
                method, doc, params={"updateTime": bad}, json=body, headers=stack.admin
            )
            assert r.status_code == 400, (method, bad, r.text)
            assert r.json()["code"] == "INVALID_ARGUMENT", (method, bad, r.text)
            # The message names the parameter and the value given (not a write of a batch).
            message = r.json()["message"]
            assert "updateTime" in message and bad in message, (method, bad, r.text)
    got = client.get(doc, headers=stack.admin).json()
    assert (got["data"], got["updateTime"]) == ({"v": 0}, written["updateTime"])


def read_response(s: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response from a keep-alive connection: status, headers (lower-cased), body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, f"the connection closed before an answer: {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = s.recv(65536)
        assert chunk, "the connection closed inside an answer"
        body += chunk
    return int(lines[0].split(" ", 2)[1]), headers, body


def keep_alive_request(
    stack, method: str, path: str, body: bytes, headers: dict[str, str]
) -> bytes:
    u = urlsplit(stack.url)
    lines = [f"{method} {path} HTTP/1.1", f"Host: {u.hostname}:{u.port}"]
    lines += [f"Content-Length: {len(body)}", "Content-Type: application/json"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_an_answer_before_the_body_is_read_says_the_connection_closes(stack, coll):
    """A request answered before its body is read (a bad query parameter, a bad token): the
    sidecar does not reuse that connection, and its answer says `Connection: close`, so a
    client does not send its next request into the closing connection. A request whose body
    is read keeps its connection: a second request on it is answered."""
    u = urlsplit(stack.url)
    auth = {"Authorization": f"Bearer {stack.admin_key}"}
    body = json.dumps({"sql": f"select * from /{coll}"}).encode()
    early = [
        (RUN_QUERY + "?bogus=1", auth, 400),
        (RUN_QUERY, {"Authorization": "Bearer not-a-token"}, 401),
        ("/v1/databases/(default):listen/nosuchstream/targets?bogus=1", auth, 400),
    ]
    for path, headers, status in early:
        with socket.create_connection((u.hostname, u.port), timeout=30) as s:
            # The next request pipelined right behind: it must not be taken for an answer's.
            second = keep_alive_request(stack, "GET", "/healthz", b"", {})
            s.sendall(keep_alive_request(stack, "POST", path, body, headers) + second)
            got, answer_headers, _ = read_response(s)
            assert got == status, (path, got)
            assert answer_headers.get("connection") == "close", (path, answer_headers)
            assert s.recv(65536) == b"", path
    # A body read to its end: the connection serves the next request.
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        for _ in range(2):
            s.sendall(keep_alive_request(stack, "POST", RUN_QUERY, body, auth))
            got, answer_headers, _ = read_response(s)
            assert got == 200 and "connection" not in answer_headers, answer_headers
        s.sendall(keep_alive_request(stack, "GET", "/healthz", b"", {}))
        assert read_response(s)[0] == 200
