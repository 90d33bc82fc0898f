"""Every ```python block of sdk-python/README.md, run in order in one namespace against the real
sidecar (DOCSTORE_URL and DOCSTORE_ADMIN_KEY set, as `make up`'s dev.env sets them)."""

from __future__ import annotations

import re
from pathlib import Path

import docstore

README = Path(__file__).resolve().parents[2] / "sdk-python" / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_readme_examples_run(stack, monkeypatch, capsys):
    monkeypatch.setenv("DOCSTORE_URL", stack.url)
    monkeypatch.setenv("DOCSTORE_ADMIN_KEY", stack.admin_key)
    monkeypatch.delenv("DOCSTORE_TOKEN", raising=False)
    with docstore.Client(stack.url, token=stack.admin_key) as db:
        db.document("restaurants/two").delete()  # created by the examples
    blocks = BLOCK.findall(README.read_text())
    assert len(blocks) >= 10, "the README lost its examples"
    namespace: dict = {"__name__": "readme"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"README python block {i + 1} failed:\n{block}") from exc
    out = capsys.readouterr().out
    assert "changed since we read it" in out
