"""`:runQuery` (text and structured, aggregations, streamed) and `:commit` (batches,
preconditions, optimistic transactions)."""

import json
import re
import threading
import time

import httpx
from conftest import own_sidecar

RUN = "/v1/databases/(default):runQuery"
COMMIT = "/v1/databases/(default):commit"


def seed(stack, coll, n):
    stack.sql(
        "select count(docstore.set(%s || '/d' || lpad(i::text, 5, '0'), "
        "jsonb_build_object('i', i, 'even', i %% 2 = 0))) from generate_series(1, %s) i",
        coll,
        n,
    )


def test_run_query_text(stack, client, coll):
    seed(stack, coll, 10)
    r = client.post(
        RUN,
        headers=stack.admin,
        json={"sql": f"select * from /{coll} where i >= 5 order by i desc limit 3"},
    )
    assert r.status_code == 200, r.text
    rows = r.json()
    assert [row["data"]["i"] for row in rows] == [10, 9, 8]
    assert set(rows[0]) == {"path", "data", "createTime", "updateTime"}
    assert rows[0]["path"] == f"{coll}/d00010"


def test_rows_carry_the_create_time(stack, client, coll):
    """A row's createTime is the document's (its first write), not its update time: the same
    as a GET of the document, text and structured, in a held transaction too."""
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
    stack.sql("select docstore.set(%s, '{\"n\": 2}')", f"{coll}/a")
    got = client.get(stack.doc(f"{coll}/a"), headers=stack.admin).json()
    assert got["createTime"] < got["updateTime"]
    times = {"createTime": got["createTime"], "updateTime": got["updateTime"]}
    for body in (
        {"sql": f"select * from /{coll}"},
        {"structuredQuery": {"from": [{"collectionId": coll}]}},
        {"structuredQuery": {"from": [{"collectionId": coll}], "select": {"fields": []}}},
    ):
        r = client.post(RUN, headers=stack.admin, json=body)
        assert r.status_code == 200, r.text
        (row,) = r.json()
        assert {k: row[k] for k in times} == times, body


def test_run_query_structured(stack, client, coll):
    seed(stack, coll, 5)
    r = client.post(
        RUN,
        headers=stack.admin,
        json={
            "structuredQuery": {
                "from": [{"collectionId": coll}],
                "where": {
                    "fieldFilter": {"field": {"fieldPath": "i"}, "op": "GREATER_THAN", "value": 3}
                },
            }
        },
    )
    assert r.status_code == 200, r.text
    assert [row["data"]["i"] for row in r.json()] == [4, 5]


def test_aggregation_rows(stack, client, coll):
    seed(stack, coll, 4)
    r = client.post(RUN, headers=stack.admin, json={"sql": f"select count(*), sum(i) from /{coll}"})
    assert r.status_code == 200, r.text
    (row,) = r.json()
    assert set(row) == {"aggregation"}
    assert 4 in row["aggregation"].values() and 10 in row["aggregation"].values()


def test_empty_result_and_syntax_error(stack, client, coll):
    r = client.post(RUN, headers=stack.admin, json={"sql": f"select * from /{coll}"})
    assert r.status_code == 200 and r.json() == []
    r = client.post(RUN, headers=stack.admin, json={"sql": "selec * from /x"})
    assert r.status_code == 400
    assert r.json()["code"] == "INVALID_ARGUMENT"


def test_large_result_is_streamed(stack, client, coll):
    seed(stack, coll, 5000)
    with client.stream(
        "POST", RUN, headers=stack.admin, json={"sql": f"select * from /{coll}"}
    ) as r:
        assert r.status_code == 200
        assert "content-length" not in r.headers  # chunked: written as rows arrive
        chunks = [c for c in r.iter_bytes()]
    rows = json.loads(b"".join(chunks))
    assert len(rows) == 5000
    assert rows[0]["path"] == f"{coll}/d00001" and rows[-1]["data"]["i"] == 5000


def seed_large(stack, coll):
    """80 MB of documents: more than the socket buffers between Postgres and the client."""
    stack.sql(
        "select count(docstore.set(%s || '/d' || lpad(i::text, 5, '0'), "
        "jsonb_build_object('i', i, 'pad', repeat('x', 2000)))) from generate_series(1, 40000) i",
        coll,
    )


def test_first_rows_leave_before_the_result_is_read(stack, coll):
    # 80 MB of documents: more than the socket buffers between Postgres and the client, so the
    # statement is still running after the first chunk while the client does not read; and more
    # than work_mem, so a result collected before its first row is sent (a set-returning
    # function in FROM) would sit in a temporary file. Called in the select list, the extension
    # produces rows a batch at a time: no temporary file exists.
    # The statement runs as long as the client takes to read the answer; on a loaded machine
    # that once passed the default 30 s --statement-timeout-ms, which (as specified, see
    # test_statement_timeout_mid_stream_ends_the_array_with_an_error_item) ends the array
    # with an error item. This test is about streaming, so its sidecar has no timeout.
    seed_large(stack, coll)
    with (
        own_sidecar(stack, "--statement-timeout-ms", "0") as url,
        httpx.Client(base_url=url, timeout=120) as client,
        client.stream(
            "POST", RUN, headers=stack.admin, json={"sql": f"select * from /{coll}"}
        ) as r,
    ):
        assert r.status_code == 200
        chunks = r.iter_raw()
        first = next(chunks)
        assert first.startswith(b'[\n{"path":"' + f"{coll}/d00001".encode())
        running = stack.sql(
            "select state from pg_stat_activity where true "
            "and query like '%%docstore.query%%' and pid <> pg_backend_pid()"
        )
        assert running == [("active",)], running
        assert stack.sql("select count(*) from pg_ls_tmpdir()") == [(0,)]
        rest = b"".join(chunks)
    rows = json.loads(first + rest)
    assert "error" not in rows[-1], (len(rows), rows[-1])
    assert len(rows) == 40000 and rows[-1]["data"]["i"] == 40000


def test_statement_timeout_mid_stream_ends_the_array_with_an_error_item(stack, coll):
    """The statement timeout hits after the 200 header (the client stops reading an 80 MB
    answer for longer than --statement-timeout-ms): the array ends with a DEADLINE_EXCEEDED
    error item, never as if the rows so far were the whole result."""
    seed_large(stack, coll)
    with (
        own_sidecar(stack, "--statement-timeout-ms", "500") as url,
        httpx.Client(base_url=url, timeout=120) as client,
    ):
        with client.stream(
            "POST", RUN, headers=stack.admin, json={"sql": f"select * from /{coll}"}
        ) as r:
            assert r.status_code == 200
            chunks = r.iter_raw()
            first = next(chunks)
            # The statement cannot end before the client reads on (its rows fill the sockets),
            # so it is still running when the timeout passes.
            time.sleep(1.5)
            rows = json.loads(first + b"".join(chunks))
        assert 0 < len(rows) < 40000
        assert set(rows[-1]) == {"error"}, rows[-1]
        assert rows[-1]["error"]["code"] == "DEADLINE_EXCEEDED"
        assert all("path" in row for row in rows[:-1])
        # The connection went back to the pool usable: the next query is whole.
        r = client.post(RUN, headers=stack.admin, json={"sql": f"select * from /{coll} limit 2"})
        assert [row["data"]["i"] for row in r.json()] == [1, 2]


def test_commit_batch(stack, client, coll):
    client.put(stack.doc(f"{coll}/b"), json={"n": 1}, headers=stack.admin)
    r = client.post(
        COMMIT,
        headers=stack.admin,
        json={
            "writes": [
                {"create": f"{coll}/a", "data": {"n": 0}},
                {
                    "update": f"{coll}/b",
                    "fields": {"n": {"$increment": 1}},
                    "precondition": {"exists": True},
                },
                {"set": f"{coll}/c", "data": {"m": 1}, "merge": True},
                {"delete": f"{coll}/z"},
            ]
        },
    )
    assert r.status_code == 200, r.text
    answer = r.json()
    assert set(answer) == {"commitTime", "updateTimes"}
    assert len(answer["updateTimes"]) == 4
    got = client.get(stack.doc(f"{coll}/b"), headers=stack.admin).json()
    assert got["data"] == {"n": 2}
    assert got["updateTime"] == answer["commitTime"]
    r = client.post(
        COMMIT, headers=stack.admin, json={"writes": [{"create": f"{coll}/a", "data": {}}]}
    )
    assert r.status_code == 409 and r.json()["code"] == "ALREADY_EXISTS"


def test_optimistic_transaction_conflict_is_409_aborted(stack, client, coll):
    path = f"{coll}/acct"
    client.put(stack.doc(path), json={"balance": 10}, headers=stack.admin)
    read = client.get(stack.doc(path), headers=stack.admin).json()
    # Someone else writes in between.
    client.patch(stack.doc(path), json={"balance": {"$increment": 5}}, headers=stack.admin)
    body = {
        "transaction": True,
        "writes": [
            {
                "set": path,
                "data": {"balance": read["data"]["balance"] - 1},
                "precondition": {"updateTime": read["updateTime"]},
            }
        ],
    }
    r = client.post(COMMIT, headers=stack.admin, json=body)
    assert r.status_code == 409, r.text
    assert r.json()["code"] == "ABORTED"
    assert "retry" in (r.json()["hint"] or "")
    assert client.get(stack.doc(path), headers=stack.admin).json()["data"] == {"balance": 15}
    # Without "transaction" the same failure is 400 FAILED_PRECONDITION.
    body["transaction"] = False
    r = client.post(COMMIT, headers=stack.admin, json=body)
    assert r.status_code == 400 and r.json()["code"] == "FAILED_PRECONDITION"
    # Read again and retry: it commits.
    read = client.get(stack.doc(path), headers=stack.admin).json()
    body = {
        "transaction": True,
        "writes": [
            {
                "set": path,
                "data": {"balance": read["data"]["balance"] - 1},
                "precondition": {"updateTime": read["updateTime"]},
            }
        ],
    }
    r = client.post(COMMIT, headers=stack.admin, json=body)
    assert r.status_code == 200, r.text
    assert client.get(stack.doc(path), headers=stack.admin).json()["data"] == {"balance": 14}


def test_concurrent_transactions_one_wins(stack, coll):
    """Eight clients run the same read-modify-write transaction with retries; every
    increment lands exactly once. The first round is a certain conflict, not a matter of
    timing: all eight read the same version (a barrier) before any commits, so one wins and
    the seven others get 409 ABORTED. Retries are bounded by what can make them fail: each
    409 means another increment landed after the read, and there are only 40."""
    path = f"{coll}/counter"
    workers, rounds = 8, 5
    with stack.client() as c:
        c.put(stack.doc(path), json={"n": 0}, headers=stack.admin)
    aborted = []
    first_read = threading.Barrier(workers)
    errors = []

    def worker():
        with stack.client() as c:
            first = True
            for _ in range(rounds):
                for _attempt in range(workers * rounds + 1):
                    doc = c.get(stack.doc(path), headers=stack.admin).json()
                    if first:
                        first_read.wait(timeout=120)
                        first = False
                    r = c.post(
                        COMMIT,
                        headers=stack.admin,
                        json={
                            "transaction": True,
                            "writes": [
                                {
                                    "set": path,
                                    "data": {"n": doc["data"]["n"] + 1},
                                    "precondition": {"updateTime": doc["updateTime"]},
                                }
                            ],
                        },
                    )
                    if r.status_code == 200:
                        break
                    if r.status_code != 409:
                        errors.append(r.text)
                        return
                    aborted.append(1)
                else:
                    errors.append("an increment failed more often than increments landed")
                    return

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(aborted) >= workers - 1, "the first round's conflict did not happen"
    with stack.client() as c:
        assert c.get(stack.doc(path), headers=stack.admin).json()["data"] == {"n": workers * rounds}


def test_commit_body_shapes(stack, client):
    for body in ({}, {"writes": {}}, {"writes": [], "transaction": "yes"}, {"writes": [], "x": 1}):
        r = client.post(COMMIT, headers=stack.admin, json=body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["code"] == "INVALID_ARGUMENT"
    r = client.post(COMMIT, headers=stack.admin, json={"writes": [{"frobnicate": "a/b"}]})
    assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT"


def test_health_and_metrics(stack, client, coll):
    assert client.get("/healthz").json() == {"status": "ok"}
    client.get(stack.doc(f"{coll}/nope"), headers=stack.admin)
    text = client.get("/metrics").text
    assert re.search(
        r'docstore_http_requests_total\{[^}]*route="documents"[^}]*code="404"', text
    ) or re.search(r'docstore_http_requests_total\{[^}]*code="404"[^}]*route="documents"', text), (
        text
    )
    assert "docstore_http_request_duration_seconds_bucket" in text
    assert 'docstore_pg_pool_connections{state="idle"}' in text


def test_error_after_the_header_ends_the_array_with_an_error_item(stack, coll):
    """The query's backend is terminated while the client has read only the start of a
    large answer: the array ends with an {"error": ...} item, and the JSON stays valid."""
    import socket
    from urllib.parse import urlsplit

    stack.sql(
        "select count(docstore.set(%s || '/d' || i, jsonb_build_object('pad', "
        "repeat('x', 4000)))) from generate_series(1, 6000) i",
        coll,
    )
    u = urlsplit(stack.url)
    body = json.dumps({"sql": f"select * from /{coll}"}).encode()
    s = socket.create_connection((u.hostname, u.port), timeout=60)
    s.sendall(
        (
            f"POST {RUN} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            f"Authorization: Bearer {stack.admin_key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
    )
    data = s.recv(4096)
    assert data.startswith(b"HTTP/1.1 200"), data
    # Stop reading until the backend is gone.
    deadline = time.monotonic() + 30
    killed = []
    while not killed and time.monotonic() < deadline:
        killed = stack.sql(
            "select pg_terminate_backend(pid) from pg_stat_activity "
            "where application_name = 'docstore-sidecar' "
            "and query like '%%docstore.query%%'"
        )
        time.sleep(0.05)
    assert killed
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    head, _, raw = data.partition(b"\r\n\r\n")
    assert b"chunked" in head.lower()
    text, rest = b"", raw
    while True:  # undo the chunked transfer encoding
        size, _, rest = rest.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        text += rest[:n]
        rest = rest[n + 2 :]
    rows = json.loads(text)
    assert 0 < len(rows) < 6001
    assert set(rows[-1]) == {"error"}, rows[-1]
    assert rows[-1]["error"]["code"] in ("UNAVAILABLE", "INTERNAL")
    assert "docstore.query" not in json.dumps(rows[-1])


def test_max_query_results_caps_a_client_query(stack, client):
    """docstore.set_database_options(db, max_query_results => 2): a client's query over the
    cap gets its first 2 rows, then a RESOURCE_EXHAUSTED error item ends the answer; a query
    within it (a limit) is whole, and the admin key is not capped."""
    db = "capped-http"
    stack.open_database(db)
    try:
        for name in "abc":
            r = client.put(stack.doc(f"c/{name}", db), headers=stack.admin, json={})
            assert r.status_code == 200, r.text
        stack.sql("select docstore.set_database_options(%s, 2)", db)
        run = f"/v1/databases/{db}:runQuery"
        user = stack.bearer(stack.token({"sub": "u1"}))
        r = client.post(run, headers=user, json={"sql": "select * from /c"})
        assert r.status_code == 200, r.text
        rows = r.json()
        assert [row["path"] for row in rows[:2]] == ["c/a", "c/b"]
        assert rows[2]["error"]["code"] == "RESOURCE_EXHAUSTED"
        assert "max_query_results" in rows[2]["error"]["message"]
        assert len(rows) == 3
        r = client.post(run, headers=user, json={"sql": "select * from /c limit 2"})
        assert [row["path"] for row in r.json()] == ["c/a", "c/b"]
        r = client.post(run, headers=stack.admin, json={"sql": "select * from /c"})
        assert len(r.json()) == 3
    finally:
        stack.sql("select docstore.drop_database(%s)", db)


def test_limited_sum_and_avg_take_the_smallest_values_of_their_field(stack, client, coll):
    # Firestore's order for a limited sum/avg: its field's (the field's index serves it), only
    # documents holding the field; python-firestore's system tests check the same.
    for name, p in [("a", 5), ("b", 0), ("c", 3), ("e", "text"), ("f", 1)]:
        stack.sql(
            "select docstore.set(%s, jsonb_build_object('p', %s::jsonb))",
            f"{coll}/{name}",
            json.dumps(p),
        )
    stack.sql("select docstore.set(%s, '{\"q\": 1}')", f"{coll}/d")
    body = {
        "structuredAggregationQuery": {
            "structuredQuery": {"from": [{"collectionId": coll}], "limit": 3},
            "aggregations": [
                {"alias": "s", "sum": {"field": {"fieldPath": "p"}}},
                {"alias": "a", "avg": {"field": {"fieldPath": "p"}}},
                {"alias": "n", "count": {}},
            ],
        }
    }
    r = client.post(RUN, headers=stack.admin, json={"structuredQuery": body})
    assert r.status_code == 200, r.text
    assert r.json() == [{"aggregation": {"s": 4, "a": 4 / 3, "n": 3}}]
    # Without a limit every document counts, the one without p too.
    r = client.post(
        RUN, headers=stack.admin, json={"sql": f"select sum(p) as s, count(*) as n from /{coll}"}
    )
    assert r.status_code == 200, r.text
    assert r.json() == [{"aggregation": {"s": 9, "n": 6}}]


def kindless(parent=None, **members):
    query = {"from": [{"collectionId": "", "allDescendants": True}], **members}
    if parent:
        query["parent"] = parent
    return {"structuredQuery": query}


def test_kindless_query_returns_every_document_under_its_parent_in_name_order(stack, client, coll):
    paths = [
        f"{coll}/B",
        f"{coll}/B/s/x",
        f"{coll}/_z",
        f"{coll}/m/t/y/u/z",
        f"{coll}0/q",
        f"p{coll}/d",
    ]
    for p in paths:
        stack.sql("select docstore.set(%s, '{}')", p)
    # python-firestore's recursive() of the collection: the whole database between the
    # positions before every document of `coll` and after every document under it.
    bounded = kindless(
        orderBy=[{"field": {"fieldPath": "__name__"}}],
        startAt={"values": [f"{coll}/__id-9223372036854775808__"], "before": True},
        endAt={"values": [f"{coll}\u0001/__id-9223372036854775808__"], "before": False},
    )
    r = client.post(RUN, headers=stack.admin, json=bounded)
    assert r.status_code == 200, r.text
    assert [row["path"] for row in r.json()] == paths[:4]
    # Under a document: its subcollections' documents, at any depth.
    r = client.post(RUN, headers=stack.admin, json=kindless(parent=f"{coll}/m"))
    assert r.status_code == 200, r.text
    assert [row["path"] for row in r.json()] == [f"{coll}/m/t/y/u/z"]
    # An aggregation over it counts the same documents.
    agg = {"structuredAggregationQuery": {**bounded, "aggregations": [{"alias": "n", "count": {}}]}}
    r = client.post(RUN, headers=stack.admin, json={"structuredQuery": agg})
    assert r.status_code == 200, r.text
    assert r.json() == [{"aggregation": {"n": 4}}]


def test_kindless_query_bad_shapes_are_refused(stack, client, coll):
    stack.sql("select docstore.set(%s, '{\"a\": 1}')", f"{coll}/d")
    name_eq = {
        "fieldFilter": {"field": {"fieldPath": "__name__"}, "op": "EQUAL", "value": f"{coll}/d"}
    }
    for body in (
        {"structuredQuery": {"from": [{"collectionId": ""}]}},  # no allDescendants
        kindless(where={"fieldFilter": {"field": {"fieldPath": "a"}, "op": "EQUAL", "value": 1}}),
        kindless(orderBy=[{"field": {"fieldPath": "a"}}]),
        kindless(where=name_eq),
        kindless(parent=coll),  # the parent is a collection
        kindless(startAt={"values": [f"{coll}\u0000/__id-9223372036854775808__"]}),  # U+0000
    ):
        r = client.post(RUN, headers=stack.admin, json=body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["code"] == "INVALID_ARGUMENT", (body, r.text)
    # Queries write nothing: the document is as it was.
    r = client.get(stack.doc(f"{coll}/d"), headers=stack.admin)
    assert r.status_code == 200 and r.json()["data"] == {"a": 1}, r.text
