"""docstore.triggers: a delivery's signature and an exactly-once answer, without a sidecar
(tests/http/test_triggers.py checks them against real deliveries)."""

from __future__ import annotations

import json

import pytest

from docstore import triggers

SECRET = "whsec_" + "ab" * 32
BODY = json.dumps(
    {
        "trigger": "t",
        "changeId": "0000000001000000-0",
        "event": "create",
        "path": "restaurants/one/ratings/x",
        "params": {"id": "one", "rating": "x"},
        "before": None,
        "after": {"path": "restaurants/one/ratings/x", "data": {"stars": 4}},
        "commitTime": "2026-11-27T00:00:00.000000Z",
    }
).encode()


def test_sign_is_hmac_sha256_of_time_dot_body():
    # The same vector as the sidecar's unit test (triggers/sign.rs).
    assert (
        triggers.sign("key", b"{}", 1_700_000_000)
        == "t=1700000000,v1=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae"
    )


def test_a_good_signature_parses():
    header = triggers.sign(SECRET, BODY, 1_000)
    delivery = triggers.parse(SECRET, header, BODY, now=1_010)
    assert delivery.change_id == "0000000001000000-0"
    assert delivery.params == {"id": "one", "rating": "x"}
    assert delivery.before is None and delivery.after["data"] == {"stars": 4}


@pytest.mark.parametrize(
    ("header", "body", "now", "why"),
    [
        (None, BODY, 1_000, "no X-Docstore-Signature"),
        ("garbage", BODY, 1_000, "malformed"),
        ("t=abc,v1=00", BODY, 1_000, "malformed"),
        ("t=1000", BODY, 1_000, "malformed"),
        (triggers.sign(SECRET, BODY, 1_000), BODY + b" ", 1_000, "does not match"),
        (triggers.sign("whsec_other", BODY, 1_000), BODY, 1_000, "does not match"),
        (triggers.sign(SECRET, BODY, 1_000), BODY, 1_301, "too old"),
        (triggers.sign(SECRET, BODY, 1_000), BODY, 699, "too old"),
    ],
)
def test_bad_signatures_are_refused(header, body, now, why):
    with pytest.raises(triggers.InvalidSignature, match=why):
        triggers.verify(SECRET, header, body, now=now)


def test_answer_and_increment():
    body = triggers.answer([triggers.increment("restaurants/one", {"numRatings": 1})])
    assert json.loads(body) == {
        "writes": [{"update": "restaurants/one", "fields": {"numRatings": {"$increment": 1}}}]
    }
    assert json.loads(triggers.answer()) == {"writes": []}
