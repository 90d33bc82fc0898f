"""The curl examples of docs/http.md, run in order with the real curl against the test
sidecar: each must get the status its `# => NNN` line states and a body holding what its
`# body:` line states."""

import json
import shutil

from curl_docs import body_matches, body_of, curl_env, examples, run, stated_body


def test_every_block_states_its_status():
    found = examples("http.md")
    assert len(found) >= 15
    routes = " ".join(b for b, _ in found)
    for needle in (
        "-X PUT",
        "-X PATCH",
        "-X DELETE",
        "-X POST",
        ":runQuery",
        ":commit",
        "structuredQuery",
        "/healthz",
        "/metrics",
        '"transaction": true',
    ):
        assert needle in routes, needle


def test_curl_examples(stack):
    # make up installs curl: the examples are what users run, so they never skip.
    assert shutil.which("curl"), "curl is not installed (make up installs it)"
    # Start from no restaurants (through the extension, so index entries go too).
    stack.sql(
        "select count(docstore.delete(path)) from docstore.entities "
        "where database_id = '(default)' and path like 'restaurants/%'"
    )
    env = curl_env(stack)
    for block, status in examples("http.md"):
        stated = stated_body(block)
        assert stated is not None, f"the block states no body: {block}"
        result, got = run(block, env)
        assert result.returncode == 0, (block, result.stderr)
        assert got == status, (block, result.stdout)
        body = body_of(result)
        kind, value = stated
        if kind == "contains":
            assert value in body, (block, body)
        else:
            assert body_matches(value, json.loads(body)), (block, body)


def test_stated_bodies_are_checked():
    """The body check can fail: a changed value, a missing member, an extra array item."""
    doc = {"path": "a/b", "data": {"x": 1}, "updateTime": "t"}
    assert body_matches({"path": "a/b", "data": {"x": 1}}, doc)
    assert not body_matches({"data": {}}, doc)
    assert body_matches({"data": {"x": "…"}}, doc)
    assert not body_matches({"data": {"y": "…"}}, doc)
    assert not body_matches({"data": {"x": 2}}, doc)
    assert not body_matches({"code": "NOT_FOUND"}, doc)
    assert body_matches([{"path": "a/b"}], [doc])
    assert not body_matches([{"path": "a/b"}], [doc, doc])
