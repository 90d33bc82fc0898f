"""Document routes: GET, PUT (set, merge, update mask), PATCH (update), DELETE, POST (add),
GET of a collection; preconditions; what the database holds afterwards."""

import re

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
JSON = {"Content-Type": "application/json"}


def put(client, stack, path, data, params=None, headers=None):
    return client.put(
        stack.doc(path), json=data, params=params, headers={**stack.admin, **(headers or {})}
    )


def test_put_get_round_trip(stack, client, coll):
    data = {
        "name": "Zola",
        "n": 1,
        "x": 1.5,
        "big": 9007199254740993,
        "t": {"$timestamp": "2022-09-01T13:23:22.123456Z"},
        "m": {"a": [1, "b"]},
    }
    r = put(client, stack, f"{coll}/one", data)
    assert r.status_code == 200, r.text
    written = r.json()
    assert written["path"] == f"{coll}/one"
    assert written["data"] == data
    assert RFC3339.match(written["createTime"]) and RFC3339.match(written["updateTime"])
    r = client.get(stack.doc(f"{coll}/one"), headers=stack.admin)
    assert r.status_code == 200
    assert r.json() == written
    # Exact integers survive (no float rounding on the way).
    assert '"big":9007199254740993' in r.text.replace(" ", "")
    # What Postgres holds is what the API answered.
    (stored,) = stack.sql("select docstore.get(%s)", f"{coll}/one")[0]
    assert stored == data


def test_get_missing_is_404(stack, client, coll):
    r = client.get(stack.doc(f"{coll}/missing"), headers=stack.admin)
    assert r.status_code == 404
    assert r.json()["code"] == "NOT_FOUND"


def test_merge_and_update_mask(stack, client, coll):
    path = f"{coll}/m"
    put(client, stack, path, {"a": 1, "b": {"c": 2, "d": 3}, "e": 5})
    r = put(client, stack, path, {"b": {"c": 20}, "f": 6}, params={"merge": "true"})
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"a": 1, "b": {"c": 20, "d": 3}, "e": 5, "f": 6}
    # Only masked fields change; a masked field missing from the body is deleted.
    r = client.put(
        stack.doc(path),
        json={"a": 100, "e": 500, "b": {"d": 30}},
        params=[("updateMask", "a"), ("updateMask", "b.d"), ("updateMask", "f")],
        headers=stack.admin,
    )
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"a": 100, "b": {"c": 20, "d": 30}, "e": 5}
    # Without merge or mask, PUT replaces.
    r = put(client, stack, path, {"z": True})
    assert r.json()["data"] == {"z": True}
    # An update mask on a missing document creates it.
    r = client.put(
        stack.doc(f"{coll}/new"),
        json={"a": 1, "b": 2},
        params={"updateMask": "a"},
        headers=stack.admin,
    )
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"a": 1}


def test_patch_with_transforms(stack, client, coll):
    path = f"{coll}/p"
    put(client, stack, path, {"n": 1, "tags": ["a"], "m": {"x": 1}})
    r = client.patch(
        stack.doc(path),
        headers=stack.admin,
        json={
            "n": {"$increment": 2},
            "tags": {"$arrayUnion": ["b"]},
            "m.y": "z",
            "at": {"$serverTimestamp": True},
        },
    )
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["data"]["n"] == 3
    assert doc["data"]["tags"] == ["a", "b"]
    assert doc["data"]["m"] == {"x": 1, "y": "z"}
    # $serverTimestamp is the commit time, which is the update time.
    assert doc["data"]["at"] == {"$timestamp": doc["updateTime"]}
    # PATCH of a missing document: 404.
    r = client.patch(stack.doc(f"{coll}/nope"), headers=stack.admin, json={"n": 1})
    assert r.status_code == 404, r.text
    assert r.json()["code"] == "NOT_FOUND"


def test_preconditions(stack, client, coll):
    path = f"{coll}/pre"
    r = put(client, stack, path, {"v": 1}, params={"exists": "false"})
    assert r.status_code == 200, r.text
    t1 = r.json()["updateTime"]
    r = put(client, stack, path, {"v": 2}, params={"exists": "false"})
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "FAILED_PRECONDITION"
    assert path in r.json()["message"]
    r = client.patch(stack.doc(path), json={"v": 3}, params={"updateTime": t1}, headers=stack.admin)
    assert r.status_code == 200, r.text
    # The old update time no longer matches.
    r = client.patch(stack.doc(path), json={"v": 4}, params={"updateTime": t1}, headers=stack.admin)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "FAILED_PRECONDITION"
    assert client.get(stack.doc(path), headers=stack.admin).json()["data"] == {"v": 3}
    r = client.delete(stack.doc(path), params={"updateTime": t1}, headers=stack.admin)
    assert r.status_code == 400
    assert client.get(stack.doc(path), headers=stack.admin).status_code == 200


def test_delete(stack, client, coll):
    path = f"{coll}/d"
    put(client, stack, path, {"a": 1})
    r = client.delete(stack.doc(path), headers=stack.admin)
    assert r.status_code == 200
    assert r.json() == {"existed": True}
    r = client.delete(stack.doc(path), headers=stack.admin)
    assert r.json() == {"existed": False}
    r = client.delete(stack.doc(path), params={"exists": "true"}, headers=stack.admin)
    assert r.status_code == 400
    assert r.json()["code"] == "FAILED_PRECONDITION"
    put(client, stack, path, {"a": 1})
    r = client.delete(stack.doc(path), params={"exists": "true"}, headers=stack.admin)
    assert r.status_code == 200 and r.json() == {"existed": True}
    assert stack.sql("select docstore.get(%s)", path)[0][0] is None


def test_post_adds_with_random_id(stack, client, coll):
    r = client.post(stack.doc(f"{coll}/parent/sub"), json={"r": 5}, headers=stack.admin)
    assert r.status_code == 201, r.text
    doc = r.json()
    parent, doc_id = doc["path"].rsplit("/", 1)
    assert parent == f"{coll}/parent/sub"
    assert re.fullmatch(r"[A-Za-z0-9]{20}", doc_id)
    assert doc["data"] == {"r": 5}
    assert client.get(stack.doc(doc["path"]), headers=stack.admin).json() == doc


def test_list_collection(stack, client, coll):
    for i in range(5):
        put(client, stack, f"{coll}/d{i}", {"i": i})
    put(client, stack, f"{coll}/d0/sub/x", {"deep": True})
    r = client.get(stack.doc(coll), headers=stack.admin)
    assert r.status_code == 200, r.text
    rows = r.json()
    assert [row["path"] for row in rows] == [f"{coll}/d{i}" for i in range(5)]
    assert rows[2]["data"] == {"i": 2} and RFC3339.match(rows[2]["updateTime"])
    r = client.get(stack.doc(coll), params={"pageSize": 2}, headers=stack.admin)
    assert [row["path"] for row in r.json()] == [f"{coll}/d0", f"{coll}/d1"]
    r = client.get(stack.doc(f"{coll}/d0/sub"), headers=stack.admin)
    assert [row["path"] for row in r.json()] == [f"{coll}/d0/sub/x"]
    r = client.get(stack.doc(f"{coll}x"), headers=stack.admin)
    assert r.status_code == 200 and r.json() == []


def test_other_databases(stack, client, coll):
    stack.sql("insert into docstore.databases (id) values ('tenant-a') on conflict do nothing")
    path = f"{coll}/x"
    r = client.put(stack.doc(path, db="tenant-a"), json={"db": "a"}, headers=stack.admin)
    assert r.status_code == 200, r.text
    # Same path, other database: independent.
    assert client.get(stack.doc(path), headers=stack.admin).status_code == 404
    assert client.get(stack.doc(path, db="tenant-a"), headers=stack.admin).json()["data"] == {
        "db": "a"
    }
    rows = stack.sql("select database_id from docstore.entities where path = %s", path)
    assert rows == [("tenant-a",)]
