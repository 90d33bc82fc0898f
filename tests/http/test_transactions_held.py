"""Held transactions (docs/http.md, "Held transactions"): `:beginTransaction`, reads with
`transaction`, `:commit` with a transaction id, `:rollback`; their locks, snapshot, bounds,
expiry and ownership."""

import threading
import time

from conftest import own_sidecar

DB = "/v1/databases/(default)"
BEGIN = f"{DB}:beginTransaction"
COMMIT = f"{DB}:commit"
ROLLBACK = f"{DB}:rollback"
RUN_QUERY = f"{DB}:runQuery"
BATCH_GET = f"{DB}:batchGet"
# A well-formed id (16 bytes of base64) that no transaction has.
UNKNOWN_ID = "AAAAAAAAAAAAAAAAAAAAAA=="


def user(stack, sub):
    return stack.bearer(stack.token({"sub": sub}))


def begin(client, headers, read_only=False):
    options = {"readOnly": {}} if read_only else {"readWrite": {}}
    r = client.post(BEGIN, headers=headers, json={"options": options})
    assert r.status_code == 200, r.text
    return r.json()["transaction"]


def get_in(stack, client, headers, path, transaction):
    return client.get(stack.doc(path), headers=headers, params={"transaction": transaction})


def commit(client, headers, transaction, writes):
    return client.post(COMMIT, headers=headers, json={"writes": writes, "transaction": transaction})


def sidecar_waits_on_a_lock(stack):
    return any(row[2] == "Lock" for row in stack.sidecar_backends())


def test_two_clients_incrementing_one_counter_end_exact(stack, coll):
    """Each reads the counter in its transaction (locking it) and writes it + 1 without a
    precondition: without the lock updates would be lost. The second reader waits for the
    first transaction to end, then reads its outcome: no attempt is ABORTED."""
    path = f"{coll}/counter"
    with stack.client() as c:
        assert c.put(stack.doc(path), json={"n": 0}, headers=stack.admin).status_code == 200
    rounds = 8
    aborted = []
    failures = []

    def worker(sub):
        headers = user(stack, sub)
        with stack.client() as c:
            for _ in range(rounds):
                t = begin(c, headers)
                r = get_in(stack, c, headers, path, t)
                if r.status_code != 200:
                    failures.append(r.text)
                    return
                n = r.json()["data"]["n"]
                r = commit(c, headers, t, [{"set": path, "data": {"n": n + 1}}])
                if r.status_code == 409:
                    aborted.append(r.json())
                elif r.status_code != 200:
                    failures.append(r.text)
                    return

    threads = [threading.Thread(target=worker, args=(s,)) for s in ("alice", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert aborted == []
    with stack.client() as c:
        r = c.get(stack.doc(path), headers=stack.admin)
    assert r.json()["data"] == {"n": 2 * rounds}


def test_a_query_in_a_read_write_transaction_locks_its_documents(stack, client, coll):
    path = f"{coll}/a"
    client.put(stack.doc(path), json={"n": 1}, headers=stack.admin)
    alice = user(stack, "alice")
    t = begin(client, alice)
    r = client.post(
        RUN_QUERY, headers=alice, json={"sql": f"select * from /{coll}", "transaction": t}
    )
    assert r.status_code == 200, r.text
    rows = r.json()
    assert [row["data"] for row in rows] == [{"n": 1}]
    # Another writer of the document waits for the transaction.
    outcome = {}

    def other_writer():
        with stack.client() as c:
            outcome["r"] = c.patch(stack.doc(path), json={"n": 100}, headers=stack.admin)

    writer = threading.Thread(target=other_writer)
    writer.start()
    deadline = time.monotonic() + 30
    while not sidecar_waits_on_a_lock(stack):
        assert "r" not in outcome, "the other write did not wait for the transaction's lock"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    r = commit(client, alice, t, [{"set": path, "data": {"n": 2}}])
    assert r.status_code == 200, r.text
    writer.join()
    assert outcome["r"].status_code == 200, outcome["r"].text
    # The other write came after the commit.
    assert client.get(stack.doc(path), headers=stack.admin).json()["data"] == {"n": 100}


def test_a_read_only_transaction_reads_one_snapshot(stack, client, coll):
    a, b = f"{coll}/a", f"{coll}/b"
    client.put(stack.doc(a), json={"v": 1}, headers=stack.admin)
    client.put(stack.doc(b), json={"v": 1}, headers=stack.admin)
    alice = user(stack, "alice")
    t = begin(client, alice, read_only=True)
    assert get_in(stack, client, alice, a, t).json()["data"] == {"v": 1}
    # Another client writes both documents and adds one.
    client.put(stack.doc(a), json={"v": 2}, headers=stack.admin)
    client.put(stack.doc(b), json={"v": 2}, headers=stack.admin)
    client.put(stack.doc(f"{coll}/c"), json={"v": 2}, headers=stack.admin)
    assert get_in(stack, client, alice, a, t).json()["data"] == {"v": 1}
    r = client.post(BATCH_GET, headers=alice, json={"documents": [a, b], "transaction": t})
    assert r.status_code == 200, r.text
    assert [d["found"]["data"] for d in r.json()["documents"]] == [{"v": 1}, {"v": 1}]
    r = client.post(
        RUN_QUERY, headers=alice, json={"sql": f"select * from /{coll}", "transaction": t}
    )
    assert r.status_code == 200, r.text
    assert [row["data"] for row in r.json()] == [{"v": 1}, {"v": 1}]
    # A read-only transaction cannot write; that ends it.
    r = commit(client, alice, t, [{"set": a, "data": {"v": 3}}])
    assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", r.text
    assert client.get(stack.doc(a), headers=stack.admin).json()["data"] == {"v": 2}
    # Committed without writes, it simply ends.
    t = begin(client, alice, read_only=True)
    r = commit(client, alice, t, [])
    assert r.status_code == 200, r.text
    r = commit(client, alice, t, [])
    assert r.status_code == 400 and "invalid or expired" in r.json()["message"], r.text


def test_an_idle_transaction_expires(stack, coll):
    path = f"{coll}/a"
    with own_sidecar(stack, "--transaction-idle-seconds", "1") as url:
        with stack.client() as c:
            c.base_url = url
            alice = user(stack, "alice")
            t = begin(c, alice)
            time.sleep(2.5)
            r = commit(c, alice, t, [{"set": path, "data": {"n": 1}}])
            assert r.status_code == 400, r.text
            body = r.json()
            assert body["code"] == "INVALID_ARGUMENT"
            assert "invalid or expired" in body["message"]
            assert c.get(stack.doc(path), headers=stack.admin).status_code == 404


def test_the_per_caller_bound_and_rollback(stack, coll):
    with own_sidecar(stack, "--max-transactions-per-caller", "2", "--max-transactions", "3") as url:
        with stack.client() as c:
            c.base_url = url
            alice, bob = user(stack, "alice"), user(stack, "bob")
            first = begin(c, alice)
            begin(c, alice)
            r = c.post(BEGIN, headers=alice, json={})
            assert r.status_code == 429, r.text
            assert r.json()["code"] == "RESOURCE_EXHAUSTED"
            assert "--max-transactions-per-caller" in r.json()["message"]
            # Another caller has its own bound, under the total.
            begin(c, bob)
            r = c.post(BEGIN, headers=bob, json={})
            assert r.status_code == 429 and "--max-transactions" in r.json()["message"], r.text
            # A rollback releases its slot, and the id is then invalid.
            r = c.post(ROLLBACK, headers=alice, json={"transaction": first})
            assert r.status_code == 200, r.text
            begin(c, alice)
            r = c.post(ROLLBACK, headers=alice, json={"transaction": first})
            assert r.status_code == 400 and "invalid or expired" in r.json()["message"], r.text


def test_a_rollback_discards_the_writes_read_locks_and_all(stack, client, coll):
    path = f"{coll}/a"
    client.put(stack.doc(path), json={"n": 1}, headers=stack.admin)
    alice = user(stack, "alice")
    t = begin(client, alice)
    assert get_in(stack, client, alice, path, t).status_code == 200
    assert client.post(ROLLBACK, headers=alice, json={"transaction": t}).status_code == 200
    # The lock is gone: a write goes through at once.
    r = client.patch(stack.doc(path), json={"n": 2}, headers=stack.admin)
    assert r.status_code == 200, r.text


def test_another_caller_cannot_use_my_transaction(stack, client, coll):
    path = f"{coll}/a"
    alice, bob = user(stack, "alice"), user(stack, "bob")
    t = begin(client, alice)
    r = get_in(stack, client, bob, path, t)
    assert r.status_code == 403 and r.json()["code"] == "PERMISSION_DENIED", r.text
    r = commit(client, bob, t, [{"set": path, "data": {"by": "bob"}}])
    assert r.status_code == 403, r.text
    r = client.post(ROLLBACK, headers=bob, json={"transaction": t})
    assert r.status_code == 403, r.text
    r = client.post(ROLLBACK, headers=stack.admin, json={"transaction": t})
    assert r.status_code == 403, r.text
    # Still alice's, and still open.
    r = commit(client, alice, t, [{"set": path, "data": {"by": "alice"}}])
    assert r.status_code == 200, r.text
    assert client.get(stack.doc(path), headers=stack.admin).json()["data"] == {"by": "alice"}


def test_bad_transaction_ids_are_400(stack, client, coll):
    path = f"{coll}/a"
    alice = user(stack, "alice")
    for bad in ["not base64!", "AAAA", UNKNOWN_ID]:
        checks = [
            get_in(stack, client, alice, path, bad),
            client.post(BATCH_GET, headers=alice, json={"documents": [path], "transaction": bad}),
            client.post(
                RUN_QUERY, headers=alice, json={"sql": f"select * from /{coll}", "transaction": bad}
            ),
            commit(client, alice, bad, [{"set": path, "data": {"n": 1}}]),
            client.post(ROLLBACK, headers=alice, json={"transaction": bad}),
        ]
        for r in checks:
            assert r.status_code == 400, (bad, r.text)
            assert r.json()["code"] == "INVALID_ARGUMENT"
            assert "invalid or expired" in r.json()["message"]
    for body in [{"transaction": 5}, {"transaction": ""}, {}]:
        r = client.post(ROLLBACK, headers=alice, json=body)
        assert r.status_code == 400, r.text
    for body in [{"options": {"readOnly": {"readTime": "yesterday"}}}, {"options": 1}]:
        r = client.post(BEGIN, headers=alice, json=body)
        assert r.status_code == 400, r.text
    # Nothing was written.
    assert client.get(stack.doc(path), headers=stack.admin).status_code == 404
    # A transaction of another database.
    stack.open_database("txn-other")
    t = begin(client, alice)
    r = client.get(
        "/v1/databases/txn-other/documents/" + path, headers=alice, params={"transaction": t}
    )
    assert r.status_code == 400 and "belongs to database" in r.json()["message"], r.text
    client.post(ROLLBACK, headers=alice, json={"transaction": t})


def test_a_failed_read_ends_the_transaction(stack, client, coll):
    alice = user(stack, "alice")
    t = begin(client, alice)
    r = client.post(RUN_QUERY, headers=alice, json={"sql": "not a query", "transaction": t})
    assert r.status_code == 400, r.text
    r = commit(client, alice, t, [])
    assert r.status_code == 400 and "invalid or expired" in r.json()["message"], r.text


def test_a_deadlock_aborts_one_of_the_transactions(stack, client, coll):
    x, y = f"{coll}/x", f"{coll}/y"
    client.put(stack.doc(x), json={"n": 1}, headers=stack.admin)
    client.put(stack.doc(y), json={"n": 1}, headers=stack.admin)
    alice, bob = user(stack, "alice"), user(stack, "bob")
    ta, tb = begin(client, alice), begin(client, bob)
    assert get_in(stack, client, alice, x, ta).status_code == 200
    assert get_in(stack, client, bob, y, tb).status_code == 200
    out = {}

    def alice_reads_y():
        with stack.client() as c:
            out["alice"] = get_in(stack, c, alice, y, ta)

    waiter = threading.Thread(target=alice_reads_y)
    waiter.start()
    deadline = time.monotonic() + 30
    while not sidecar_waits_on_a_lock(stack):
        assert "alice" not in out, out["alice"].text
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # Bob now reads x, which alice holds: Postgres finds the deadlock and aborts one of them.
    out["bob"] = get_in(stack, client, bob, x, tb)
    waiter.join()
    statuses = {who: r.status_code for who, r in out.items()}
    assert sorted(statuses.values()) == [200, 409], {w: r.text for w, r in out.items()}
    loser = next(w for w, s in statuses.items() if s == 409)
    winner = "bob" if loser == "alice" else "alice"
    assert out[loser].json()["code"] == "ABORTED"
    # The loser's transaction is over; the winner's commits.
    headers = {"alice": (alice, ta), "bob": (bob, tb)}
    r = commit(client, headers[loser][0], headers[loser][1], [])
    assert r.status_code == 400 and "invalid or expired" in r.json()["message"], r.text
    r = commit(client, headers[winner][0], headers[winner][1], [])
    assert r.status_code == 200, r.text


def test_a_lock_wait_past_the_lock_timeout_is_aborted(stack, coll):
    path = f"{coll}/a"
    with own_sidecar(stack, "--transaction-lock-timeout-ms", "500") as url:
        with stack.client() as c:
            c.base_url = url
            assert c.put(stack.doc(path), json={"n": 1}, headers=stack.admin).status_code == 200
            alice, bob = user(stack, "alice"), user(stack, "bob")
            ta, tb = begin(c, alice), begin(c, bob)
            assert get_in(stack, c, alice, path, ta).status_code == 200
            # Bob waits for alice's lock until the lock timeout: ABORTED, his transaction ended.
            r = get_in(stack, c, bob, path, tb)
            assert r.status_code == 409 and r.json()["code"] == "ABORTED", r.text
            r = commit(c, bob, tb, [])
            assert r.status_code == 400 and "invalid or expired" in r.json()["message"], r.text
            r = commit(c, alice, ta, [{"set": path, "data": {"n": 2}}])
            assert r.status_code == 200, r.text
