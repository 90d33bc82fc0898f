"""The curl examples of a spec in docs/ (docs/http.md, docs/listen.md): each ```sh block is
one curl command with a `# => NNN` line stating the HTTP status it gets. Shared by the tests
that run them against the test sidecar."""

import os
import re
import subprocess
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
EXPECT = re.compile(r"^# => (\d{3})$", re.M)


def examples(doc: str) -> list[tuple[str, int]]:
    """Every example of `docs/<doc>` with the status it states, in order."""
    out = []
    for block in BLOCK.findall((DOCS / doc).read_text()):
        statuses = EXPECT.findall(block)
        assert len(statuses) == 1, f"a curl block states one status: {block}"
        assert block.lstrip().startswith("curl "), block
        out.append((block, int(statuses[0])))
    return out


def curl_env(stack) -> dict[str, str]:
    """The environment the examples are written for: the sidecar's URL, the admin key and a
    user's token."""
    return {
        **os.environ,
        "DOCSTORE_URL": stack.url,
        "DOCSTORE_ADMIN_KEY": stack.admin_key,
        "TOKEN": stack.token({"sub": "alice"}),
    }


def run(block: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, int]:
    """Run one example with the status printed on a last line of its own; returns the
    process and that status."""
    command = block.lstrip().replace("curl ", "curl -w '\\n%{http_code}' ", 1)
    result = subprocess.run(
        ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60
    )
    return result, int(result.stdout.rstrip().rsplit("\n", 1)[-1])
