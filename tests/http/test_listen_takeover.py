"""Live streams cannot be taken over (docs/listen.md "Positions, ids and resuming"): a stream's
id carries 128 random bits, and knowing it is what lets a caller resume the stream or change
its targets. Callers that share an owner key (every anonymous caller; every JWT without `sub`)
cannot reach each other's streams by guessing an id from their own.

Each test fails with guessable ids (`<instance>-<counter>`): the guess from the attacker's own
id is then the victim's stream, which the shared owner key lets it change and resume.
"""

from __future__ import annotations

import re
import uuid

import pytest
from test_listen import Listener

DB = "takeover"


@pytest.fixture
def open_db(stack):
    stack.open_database(DB)
    yield
    stack.sql("select docstore.drop_rules(%s)", DB)


def listen_path(rest: str = "") -> str:
    return f"/v1/databases/{DB}:listen{rest}"


def guesses(own: str) -> list[str]:
    """The ids next to `own`, as an attacker derives them from its own stream's id."""
    instance, _, tail = own.rpartition("-")
    n = int(tail, 16)
    return [f"{instance}-{m:x}" for m in (n - 1, n + 1) if m >= 0]


@pytest.mark.parametrize("who", ["anonymous", "jwt_without_sub"])
def test_a_second_caller_with_the_same_owner_key_cannot_take_a_stream_over(
    stack, client, open_db, who
):
    coll = "c" + uuid.uuid4().hex[:12]
    r = client.put(stack.doc(f"{coll}/a", DB), headers=stack.admin, json={"n": 1})
    assert r.status_code == 200, r.text
    if who == "anonymous":
        victim_auth: dict[str, str] = {}
        attacker_auth: dict[str, str] = {}
    else:
        victim_auth = stack.bearer(stack.token({"name": "victim"}))
        attacker_auth = stack.bearer(stack.token({"name": "mallory"}))
    victim = Listener(
        stack, params=[("document", f"{coll}/a")], headers=victim_auth, path=listen_path()
    )
    attacker = Listener(
        stack, params=[("document", f"{coll}/b")], headers=attacker_auth, path=listen_path()
    )
    resumed = None
    try:
        assert victim.status == 200 and attacker.status == 200, (victim.error_body,)
        first = victim.next()
        assert first["event"] == "snapshot"
        stream = victim.stream_id
        # 128 random bits after the instance.
        assert re.fullmatch(r"[0-9a-f]+-[0-9a-f]{32}", stream), stream
        assert first["id"].startswith(stream + ".")
        position = first["id"].rpartition(".")[2]
        for guess in guesses(attacker.stream_id):
            assert guess != stream
            body = {"targets": [{"id": "x", "document": f"{coll}/a"}]}
            r = client.post(listen_path(f"/{guess}/targets"), headers=attacker_auth, json=body)
            assert r.status_code == 404 and r.json()["code"] == "NOT_FOUND", r.text
            r = client.delete(listen_path(f"/{guess}/targets/0"), headers=attacker_auth)
            assert r.status_code == 404 and r.json()["code"] == "NOT_FOUND", r.text
        # A forged resume token opens a new stream of the attacker's after a reset; the
        # victim's stream is not resumed.
        forged = f"{guesses(attacker.stream_id)[0]}.{position}"
        resumed = Listener(
            stack,
            params=[("document", f"{coll}/b"), ("resume", forged)],
            headers=attacker_auth,
            path=listen_path(),
        )
        assert resumed.status == 200, resumed.error_body
        assert resumed.stream_id != stream
        reset = resumed.next()
        assert reset["event"] == "reset", reset
        assert reset["data"]["reason"] == "retention_passed", reset
        # The owner still can, with the id.
        r = client.post(
            listen_path(f"/{stream}/targets"),
            headers=victim_auth,
            json={"targets": [{"id": "q", "document": f"{coll}/c"}]},
        )
        assert r.status_code == 200, r.text
        r = client.delete(listen_path(f"/{stream}/targets/q"), headers=victim_auth)
        assert r.status_code == 200, r.text
    finally:
        victim.close()
        attacker.close()
        if resumed is not None:
            resumed.close()
    # The owner resumes its stream with its token.
    again = Listener(
        stack, params=[("resume", first["id"])], headers=victim_auth, path=listen_path()
    )
    try:
        assert again.status == 200, again.error_body
        assert again.stream_id == stream
    finally:
        again.close()
