"""The curl examples of docs/http.md, run in order with the real curl against the test
sidecar: each must get the status its `# => NNN` line states."""

import os
import re
import shutil
import subprocess
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "http.md"
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
    env = {
        **os.environ,
        "DOCSTORE_URL": stack.url,
        "DOCSTORE_ADMIN_KEY": stack.admin_key,
        "TOKEN": stack.token({"sub": "alice"}),
    }
    for block, status in examples():
        # The same command, with the status printed on a last line of its own.
        command = block.lstrip().replace("curl ", "curl -w '\\n%{http_code}' ", 1)
        result = subprocess.run(
            ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, (block, result.stderr)
        got = int(result.stdout.rstrip().rsplit("\n", 1)[-1])
        assert got == status, (block, result.stdout)
