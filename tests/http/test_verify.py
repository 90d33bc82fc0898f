"""`:commit`'s `{"verify": path, "precondition": ...}` entries (docs/http.md, "Optimistic
transactions"): a document a transaction read but does not write is checked and locked like a
write, and nothing of it is written."""

import threading

import psycopg
import pytest

COMMIT = "/v1/databases/(default):commit"


def read(stack, client, path):
    r = client.get(stack.doc(path), headers=stack.admin)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_transaction_aborts_when_a_document_it_only_read_changed(stack, client, coll):
    a, b = f"{coll}/a", f"{coll}/b"
    client.put(stack.doc(a), json={"n": 1}, headers=stack.admin)
    client.put(stack.doc(b), json={"n": 10}, headers=stack.admin)

    def transaction(seen_a, seen_b):
        return {
            "transaction": True,
            "writes": [
                {"verify": a, "precondition": {"updateTime": seen_a["updateTime"]}},
                {
                    "set": b,
                    "data": {"n": seen_a["data"]["n"] + seen_b["data"]["n"]},
                    "precondition": {"updateTime": seen_b["updateTime"]},
                },
            ],
        }

    seen_a, seen_b = read(stack, client, a), read(stack, client, b)
    # Someone changes A (which the transaction only reads) in between.
    client.patch(stack.doc(a), json={"n": 2}, headers=stack.admin)
    r = client.post(COMMIT, headers=stack.admin, json=transaction(seen_a, seen_b))
    assert r.status_code == 409, r.text
    assert r.json()["code"] == "ABORTED"
    assert read(stack, client, b)["data"] == {"n": 10}
    assert read(stack, client, b)["updateTime"] == seen_b["updateTime"]
    # Without "transaction" the same failure is 400 FAILED_PRECONDITION.
    body = transaction(seen_a, seen_b)
    body["transaction"] = False
    r = client.post(COMMIT, headers=stack.admin, json=body)
    assert r.status_code == 400 and r.json()["code"] == "FAILED_PRECONDITION", r.text
    # Read again and retry: it commits; A is not written, its entry is its own update time.
    seen_a, seen_b = read(stack, client, a), read(stack, client, b)
    r = client.post(COMMIT, headers=stack.admin, json=transaction(seen_a, seen_b))
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["updateTimes"] == [seen_a["updateTime"], answer["commitTime"]]
    assert read(stack, client, b)["data"] == {"n": 12}
    assert read(stack, client, a) == seen_a


def test_verify_of_a_missing_document(stack, client, coll):
    gone = f"{coll}/gone"
    r = client.post(
        COMMIT,
        headers=stack.admin,
        json={"transaction": True, "writes": [{"verify": gone, "precondition": {"exists": False}}]},
    )
    assert r.status_code == 200, r.text
    assert r.json()["updateTimes"] == [None]
    assert client.get(stack.doc(gone), headers=stack.admin).status_code == 404
    # Someone creates it after the transaction saw it missing: aborted.
    client.put(stack.doc(gone), json={}, headers=stack.admin)
    r = client.post(
        COMMIT,
        headers=stack.admin,
        json={"transaction": True, "writes": [{"verify": gone, "precondition": {"exists": False}}]},
    )
    assert r.status_code == 409 and r.json()["code"] == "ABORTED", r.text


@pytest.mark.parametrize(
    "entry",
    [
        {"verify": "X", "precondition": None},
        {"verify": "X", "precondition": {}},
        {"verify": "X", "precondition": {"exists": "yes"}},
        {"verify": "X", "precondition": {"updateTime": "yesterday"}},
        {"verify": "X", "precondition": {"exists": True, "updateTime": "2001-01-01T00:00:00Z"}},
        {"verify": "X", "precondition": {"exists": True}, "data": {}},
        {"verify": "X", "precondition": {"exists": True}, "delete": "X"},
        {"verify": "COLL", "precondition": {"exists": True}},
        {"verify": "X/..", "precondition": {"exists": True}},
        {"verify": 7, "precondition": {"exists": True}},
    ],
)
def test_a_bad_verify_entry_is_400_and_writes_nothing(stack, client, coll, entry):
    def resolve(v):
        if isinstance(v, str):
            return v.replace("COLL", coll).replace("X", f"{coll}/x")
        return v

    entry = {k: resolve(v) for k, v in entry.items()}
    for transaction in (False, True):
        r = client.post(
            COMMIT,
            headers=stack.admin,
            json={
                "transaction": transaction,
                "writes": [{"set": f"{coll}/written", "data": {"n": 1}}, entry],
            },
        )
        assert r.status_code == 400, (entry, r.text)
        assert r.json()["code"] == "INVALID_ARGUMENT", (entry, r.text)
        assert client.get(stack.doc(f"{coll}/written"), headers=stack.admin).status_code == 404


def test_a_verify_without_precondition_is_a_lock_that_writes_nothing(stack, client, coll):
    # Held transactions lock a point read's documents this way before reading them
    # (docs/http.md): accepted, the verified document neither created nor
    # changed, the batch's other writes applied.
    client.put(stack.doc(f"{coll}/there"), headers=stack.admin, json={"n": 1}).raise_for_status()
    before = client.get(stack.doc(f"{coll}/there"), headers=stack.admin).json()
    for transaction in (False, True):
        r = client.post(
            COMMIT,
            headers=stack.admin,
            json={
                "transaction": transaction,
                "writes": [
                    {"set": f"{coll}/written", "data": {"n": transaction}},
                    {"verify": f"{coll}/missing"},
                    {"verify": f"{coll}/there"},
                ],
            },
        )
        assert r.status_code == 200, r.text
        # A verify answers the verified document's update time (none when it is missing).
        assert r.json()["updateTimes"][1:] == [None, before["updateTime"]], r.text
        assert client.get(stack.doc(f"{coll}/missing"), headers=stack.admin).status_code == 404
        assert client.get(stack.doc(f"{coll}/there"), headers=stack.admin).json() == before
        written = client.get(stack.doc(f"{coll}/written"), headers=stack.admin).json()
        assert written["data"] == {"n": transaction}


def test_verify_locks_the_document_like_a_write(stack, client, coll):
    """A commit holding a verify of A makes a concurrent writer of A wait until it ends: the
    writer is seen waiting on a lock while the verifying transaction is open, and finishes
    once it commits."""
    a = f"{coll}/a"
    client.put(stack.doc(a), json={"n": 1}, headers=stack.admin)
    with psycopg.connect(stack.cluster.url()) as conn:
        conn.execute(
            "select docstore.commit(%s::jsonb)",
            ('[{"verify": "%s", "precondition": {"exists": true}}]' % a,),
        )
        holder = conn.execute("select pg_backend_pid()").fetchone()[0]
        done = []

        def writer():
            with stack.client() as c:
                done.append(c.patch(stack.doc(a), json={"n": 2}, headers=stack.admin))

        t = threading.Thread(target=writer)
        t.start()
        waiting = False
        for _ in range(600):
            rows = stack.sql(
                "select count(*) from pg_stat_activity where %s = any(pg_blocking_pids(pid))",
                holder,
            )
            if rows[0][0] > 0:
                waiting = True
                break
            t.join(0.05)
        assert waiting, "the writer of a verified document did not wait for the verifying commit"
        assert not done
        conn.commit()
    t.join(60)
    assert done and done[0].status_code == 200, done and done[0].text
    assert read(stack, client, a)["data"] == {"n": 2}


RULES = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /readonly/{id} { allow get: if true; }
    match /writeonly/{id} { allow write: if true; }
  }
}"""


def test_a_client_verify_needs_get_not_write(stack, client):
    db = "verifytest"
    stack.sql("insert into docstore.databases (id) values (%s) on conflict do nothing", db)
    stack.sql("select docstore.set_rules(%s, %s)", RULES, db)
    commit = f"/v1/databases/{db}:commit"
    try:
        for path in ("readonly/r", "writeonly/w"):
            r = client.put(stack.doc(path, db=db), json={"x": 1}, headers=stack.admin)
            assert r.status_code == 200, r.text
        user = stack.bearer(stack.token({"sub": "u"}))
        r = client.post(
            commit,
            headers=user,
            json={
                "transaction": True,
                "writes": [
                    {"verify": "readonly/r", "precondition": {"exists": True}},
                    {"set": "writeonly/new", "data": {"y": 1}},
                ],
            },
        )
        assert r.status_code == 200, r.text
        for path in ("writeonly/w", "writeonly/missing"):
            r = client.post(
                commit,
                headers=user,
                json={
                    "transaction": True,
                    "writes": [
                        {"set": "writeonly/other", "data": {}},
                        {"verify": path, "precondition": {"exists": True}},
                    ],
                },
            )
            assert r.status_code == 403 and r.json()["code"] == "PERMISSION_DENIED", r.text
            other = client.get(stack.doc("writeonly/other", db=db), headers=stack.admin)
            assert other.status_code == 404
    finally:
        stack.sql("select docstore.drop_rules(%s)", db)
