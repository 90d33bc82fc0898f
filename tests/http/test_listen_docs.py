"""The curl examples of docs/listen.md, run in order with the real curl against the test
sidecar: each must get the status its `# => NNN` line states. A stream never ends by itself,
so its examples stop it with `--max-time` (curl's exit status 28); a stream's output must
start with its `retry:`, and its first event, if one came in time, be a `snapshot` or a
`reset`."""

import re
import shutil

from curl_docs import curl_env, examples, run


def test_every_block_states_its_status():
    found = examples("listen.md")
    assert len(found) >= 6
    text = " ".join(b for b, _ in found)
    for needle in ("-X POST", "access_token=", "Last-Event-ID", "document=", "sql="):
        assert needle in text, needle


def test_curl_examples(stack):
    assert shutil.which("curl"), "curl is not installed (make up installs it)"
    stack.sql('select docstore.set(\'restaurants/one\', \'{"city": "SF", "avgRating": 4.5}\')')
    env = curl_env(stack)
    for block, status in examples("listen.md"):
        result, got = run(block, env)
        streaming = "--max-time" in block
        assert result.returncode == (28 if streaming and status == 200 else 0), (
            block,
            result.returncode,
            result.stderr,
        )
        assert got == status, (block, result.stdout)
        if streaming and status == 200:
            assert result.stdout.startswith("retry: "), result.stdout[:200]
            # --max-time bounds the example, not the sidecar: on a loaded machine the first
            # event may come later (test_listen.py checks events without such a bound).
            first = re.search(r"^event: (\w+)$", result.stdout, re.M)
            if first:
                assert first.group(1) in ("snapshot", "reset"), result.stdout[:500]
