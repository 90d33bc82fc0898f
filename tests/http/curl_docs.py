"""The curl examples of a spec in docs/ (docs/http.md, docs/listen.md): each ```sh block is
one curl command with a `# => NNN` line stating the HTTP status it gets, and (docs/http.md,
every block) a `# body: ...` line stating what the body holds: `# body: <JSON>`, checked by
`body_matches`, or `# body contains: <text>` for a body that is not JSON. Shared by the tests
that run them against the test sidecar."""

import json
import os
import re
import subprocess
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
EXPECT = re.compile(r"^# => (\d{3})$", re.M)
BODY = re.compile(r"^# body( contains)?: (.*)$", re.M)


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


def stated_body(block: str) -> tuple[str, object] | None:
    """What the block says its body holds: ("json", value) or ("contains", text); None when
    it says nothing."""
    found = BODY.findall(block)
    assert len(found) <= 1, f"a curl block states one body: {block}"
    if not found:
        return None
    contains, text = found[0]
    return ("contains", text) if contains else ("json", json.loads(text))


def body_matches(stated: object, got: object) -> bool:
    """The stated JSON against the body: an object's stated members must be there, each
    matching (others may be there too: times, generated ids), and a stated `{}` is an empty
    object; an array must have as many items as stated, each matching its stated item; the
    string "…" matches any value; anything else must be equal."""
    if stated == "…":
        return True
    if isinstance(stated, dict):
        return (
            isinstance(got, dict)
            and (bool(stated) or not got)
            and all(k in got and body_matches(v, got[k]) for k, v in stated.items())
        )
    if isinstance(stated, list):
        return (
            isinstance(got, list)
            and len(got) == len(stated)
            and all(body_matches(s, g) for s, g in zip(stated, got, strict=True))
        )
    return stated == got


def body_of(result: subprocess.CompletedProcess) -> str:
    """The body curl printed, without the status line `run` adds."""
    return result.stdout.rstrip().rsplit("\n", 1)[0] if "\n" in result.stdout.rstrip() else ""
