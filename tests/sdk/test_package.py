"""The package as users get it: the wheel built from sdk-python/ (`pip wheel --no-deps`),
installed into a second, fresh venv with its one dependency, imported from there (not from the
source tree) and used against the real sidecar."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

SDK = Path(__file__).resolve().parents[2] / "sdk-python"


def run(*args: str | Path, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=600, **kw
    )
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result


def test_wheel_installs_and_works_in_a_fresh_venv(stack, tmp_path, coll):
    wheels = tmp_path / "wheels"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, SDK)
    (wheel,) = wheels.glob("docstore-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    modules = sorted(p.name for p in (SDK / "src" / "docstore").glob("*.py"))
    for module in modules:
        assert f"docstore/{module}" in names, f"{module} is missing from the wheel"
    assert "docstore/py.typed" in names
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Requires-Dist: httpx==0.28.*" in text and "Requires-Python: >=3.10" in text
    requires = [line for line in text.splitlines() if line.startswith("Requires-Dist:")]
    assert requires == ["Requires-Dist: httpx==0.28.*"], "httpx must be the only dependency"

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel)
    script = textwrap.dedent(
        f"""
        import docstore
        assert "{tmp_path}" in docstore.__file__, docstore.__file__
        client = docstore.Client({stack.url!r}, token={stack.admin_key!r})
        ref = client.collection({coll!r}).document("wheel")
        ref.set({{"n": 2**53 + 1, "at": docstore.SERVER_TIMESTAMP}})
        ref.update({{"n": docstore.Increment(1)}})
        print(ref.get().get("n"))
        """
    )
    out = run(python, "-c", script, cwd=tmp_path)
    assert out.stdout.strip() == str(2**53 + 2)
