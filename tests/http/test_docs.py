"""The curl examples of docs/http.md, run in order with the real curl against the test
sidecar: each must get the status its `# => NNN` line states."""

import shutil

from curl_docs import curl_env, examples, run


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
        result, got = run(block, env)
        assert result.returncode == 0, (block, result.stderr)
        assert got == status, (block, result.stdout)
