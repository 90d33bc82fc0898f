"""Typed values through the SDK: Python -> typed JSON -> Postgres -> typed JSON -> Python, for
every value of the shared vectors (tests/vectors/value_order.json, also read by the Rust tests)
and the issue's list (2^53+1, NaN, -0.0, infinities, datetimes with microseconds, bytes,
GeoPoint, references, Vector, `$`-keys), sync and async; and the client-side refusals."""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path
from typing import Any

import pytest

import docstore
from docstore import _values

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "value_order.json"
UTC = datetime.timezone.utc


def same(a: Any, b: Any) -> bool:
    """Identical values: same Python type, same bits for floats (NaN equal to NaN, -0.0 not
    equal to 0.0), recursively."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (docstore.GeoPoint, docstore.Vector)):
        return same(list(_flat(a)), list(_flat(b)))
    if isinstance(a, datetime.datetime):
        return a == b and a.utcoffset() == b.utcoffset()
    return a == b


def _flat(v: Any) -> list[float]:
    return [v.latitude, v.longitude] if isinstance(v, docstore.GeoPoint) else list(v)


def vector_values(client: Any) -> list[tuple[str, Any]]:
    """Every value of the vectors file, decoded as the SDK decodes server answers."""
    groups = json.loads(VECTORS.read_text())
    out = []
    for g, group in enumerate(groups):
        for i, raw in enumerate(group):
            out.append(
                (f"group {g} value {i}: {json.dumps(raw)}", _values.decode_value(raw, client))
            )
    return out


def issue_values(client: Any) -> dict[str, Any]:
    ref = client.document("restaurants/one")
    return {
        "int_2_53_plus_1": 2**53 + 1,
        "int_min": -(2**63),
        "int_max": 2**63 - 1,
        "nan": math.nan,
        "neg_zero": -0.0,
        "inf": math.inf,
        "neg_inf": -math.inf,
        "float": 0.1,
        "float_integral": 1e18,
        "when": datetime.datetime(2022, 9, 1, 13, 23, 22, 123456, tzinfo=UTC),
        "when_min": datetime.datetime(1, 1, 1, tzinfo=UTC),
        "bytes": b"\x00\x01\xfe\xff",
        "empty_bytes": b"",
        "geo": docstore.GeoPoint(37.5, -122.25),
        "geo_neg_zero": docstore.GeoPoint(-0.0, 0.0),
        "ref": ref,
        "vector": docstore.Vector([1.0, math.nan, -0.0, 2.5]),
        "empty_vector": docstore.Vector([]),
        "none": None,
        "bools": [True, False],
        "nested": {"a": [1, "x", None, {"b": [2.5]}], "c": {}},
        "$ref": "a string under a tag-named key",
        "dollar_map": {"$ref": "restaurants/one"},
        "dollar_transform": {"$increment": 1},
        "dollar_map_key": {"$map": {"x": 1}},
        "dollar_other": {"$other": 1, "$bytes": "not bytes"},
        "unicode key é 中": "value é 中 😀",
        "dotted.key": {"`back`tick": 1},
        "empty_list": [],
        "list_of_lists": [[1, 2], [3.0]],
    }


def test_vectors_round_trip_sync(db, coll):
    values = vector_values(db)
    assert len(values) > 100, "the vectors file lost its values"
    ref = db.collection(coll).document("vectors")
    ref.set({name: value for name, value in values})
    got = ref.get().to_dict()
    for name, value in values:
        assert same(got[name], value), f"{name}: wrote {value!r}, read {got[name]!r}"


def test_vectors_round_trip_async(arun, coll):
    async def body(client):
        values = vector_values(client)
        ref = client.collection(coll).document("vectors")
        await ref.set({name: value for name, value in values})
        return values, (await ref.get()).to_dict()

    values, got = arun(body)
    for name, value in values:
        assert same(got[name], value), f"{name}: wrote {value!r}, read {got[name]!r}"


def test_vectors_decode_as_the_typed_json_rules_say():
    """Spot checks of the decoder on the vectors: integer syntax beyond int64 is a double,
    an integer fits int64 exactly, tags decode to their types."""
    assert same(_values.decode_value(9223372036854775808, None), 9223372036854775808.0)
    assert same(_values.decode_value(9223372036854775807, None), 9223372036854775807)
    assert same(_values.decode_value({"$double": "-0.0"}, None), -0.0)
    assert same(_values.decode_value({"$double": 1}, None), 1.0)
    assert same(
        _values.decode_value({"$timestamp": "1970-01-01T01:00:00+01:00"}, None),
        datetime.datetime(1970, 1, 1, tzinfo=UTC),
    )
    assert same(_values.decode_value({"$map": {"$ref": "x"}}, None), {"$ref": "x"})
    assert same(_values.decode_value({"$ref": "a/b", "x": 1}, None), {"$ref": "a/b", "x": 1})


@pytest.mark.parametrize("name", sorted(issue_values(docstore.Client("http://unused")).keys()))
def test_issue_values_round_trip_sync(db, coll, name):
    value = issue_values(db)[name]
    ref = db.collection(coll).document("v")
    ref.set({name: value, "inside": {"list": [value]}})
    snap = ref.get()
    assert same(snap.to_dict()[name], value), f"wrote {value!r}, read {snap.to_dict()[name]!r}"
    assert same(snap.to_dict()["inside"]["list"][0], value)


def test_issue_values_round_trip_async(arun, coll):
    async def body(client):
        values = issue_values(client)
        ref = client.collection(coll).document("v")
        await ref.set(values)
        return values, (await ref.get()).to_dict()

    values, got = arun(body)
    for name, value in values.items():
        assert same(got[name], value), f"{name}: wrote {value!r}, read {got[name]!r}"


def test_references_decode_to_the_clients_references(db, coll):
    ref = db.collection(coll).document("r")
    target = db.document("restaurants", "one")
    ref.set({"r": target})
    got = ref.get().get("r")
    assert isinstance(got, docstore.DocumentReference)
    assert got == target and got._client is db


def test_datetimes_are_utc_with_microseconds(db, coll):
    ref = db.collection(coll).document("t")
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    ref.set(
        {
            "aware": datetime.datetime(2022, 9, 1, 15, 23, 22, 100001, tzinfo=plus2),
            "naive": datetime.datetime(2022, 9, 1, 13, 23, 22, 5),
        }
    )
    got = ref.get().to_dict()
    assert same(got["aware"], datetime.datetime(2022, 9, 1, 13, 23, 22, 100001, tzinfo=UTC))
    assert same(got["naive"], datetime.datetime(2022, 9, 1, 13, 23, 22, 5, tzinfo=UTC))


def test_dollar_keys_in_updates_and_merges(db, coll):
    """A map whose only key is a tag is data, not a transform, in update() and merges too."""
    ref = db.collection(coll).document("d")
    ref.set({"a": 1})
    ref.update({"m": {"$increment": 5}, "n": {"$delete": True}})
    ref.set({"o": {"$serverTimestamp": True}}, merge=True)
    got = ref.get().to_dict()
    assert got == {
        "a": 1,
        "m": {"$increment": 5},
        "n": {"$delete": True},
        "o": {"$serverTimestamp": True},
    }


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (2**63, ValueError),
        (-(2**63) - 1, ValueError),
        (object(), TypeError),
        ({1, 2}, TypeError),
        (datetime.date(2022, 1, 1), TypeError),
        ({1: "int key"}, TypeError),
        ([docstore.SERVER_TIMESTAMP], ValueError),
        ([docstore.Increment(1)], ValueError),
        ({"a": [docstore.ArrayUnion([1])]}, ValueError),
    ],
)
def test_unsupported_values_are_refused_before_sending(db, coll, value, error):
    ref = db.collection(coll).document("bad")
    with pytest.raises(error):
        ref.set({"v": value})
    with pytest.raises(error):
        ref.update({"v": value})
    assert not ref.get().exists


def test_values_the_server_refuses_are_invalid_argument(db, coll):
    ref = db.collection(coll).document("bad")
    for value in (docstore.GeoPoint(100, 0), "nul \x00 inside", docstore.Vector([0.0] * 2049)):
        with pytest.raises(docstore.exceptions.InvalidArgument):
            ref.set({"v": value})
    assert not ref.get().exists
