"""The curl examples of docs/listen.md, run in order with the real curl against the test
sidecar: each must get the status its `# => NNN` line states. A stream never ends by itself,
so its examples stop it with `--max-time` (curl's exit status 28); a stream's output must
start with its `retry:`, and its first event, if one came in time, be a `snapshot` or a
`reset`."""

import os
import re
import shutil
import subprocess
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "listen.md"
BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
EXPECT = re.compile(r"^# => (\d{3})$", re.M)


def examples() -> list[tuple[str, int]]:
    out = []
    for block in BLOCK.findall(DOC.read_text()):
        statuses = EXPECT.findall(block)
        assert len(statuses) == 1, f"a curl block states one status: {block}"
        assert block.lstrip().startswith("curl "), block
        out.append((block, int(statuses[0])))
    return out


def test_every_block_states_its_status():
    found = examples()
    assert len(found) >= 6
    text = " ".join(b for b, _ in found)
    for needle in ("-X POST", "access_token=", "Last-Event-ID", "document=", "sql="):
        assert needle in text, needle


def test_curl_examples(stack):
    assert shutil.which("curl"), "curl is not installed (make up installs it)"
    stack.sql('select docstore.set(\'restaurants/one\', \'{"city": "SF", "avgRating": 4.5}\')')
    env = {
        **os.environ,
        "DOCSTORE_URL": stack.url,
        "DOCSTORE_ADMIN_KEY": stack.admin_key,
        "TOKEN": stack.token({"sub": "alice"}),
    }
    for block, status in examples():
        command = block.lstrip().replace("curl ", "curl -w '\\n%{http_code}' ", 1)
        result = subprocess.run(
            ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60
        )
        streaming = "--max-time" in block
        assert result.returncode == (28 if streaming and status == 200 else 0), (
            block,
            result.returncode,
            result.stderr,
        )
        got = int(result.stdout.rstrip().rsplit("\n", 1)[-1])
        assert got == status, (block, result.stdout)
        if streaming and status == 200:
            assert result.stdout.startswith("retry: "), result.stdout[:200]
            # --max-time bounds the example, not the sidecar: on a loaded machine the first
            # event may come later (test_listen.py checks events without such a bound).
            first = re.search(r"^event: (\w+)$", result.stdout, re.M)
            if first:
                assert first.group(1) in ("snapshot", "reset"), result.stdout[:500]
