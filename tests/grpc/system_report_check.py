"""The oracle layer's own accounting (tests/grpc/system_plugin.py and scripts/firestore_system_tests.py),
run by scripts/firestore_system_tests.sh with the oracle's venv before the system tests (named so
that the e2e layer's `pytest tests`, whose venv lacks pytest-subtests, does not collect it): small
test files run through real pytest and pytest-subtests (pytester), their report read as the layer
reads python-firestore's.

The case that made it: python-firestore's query tests run a `verify_pipeline` subtest that skips
itself against any emulator; the test itself passed, yet the layer counted it as an unlisted skip
(80 "failures" against Google's emulator, 72 of them that subtest)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "firestore_system_tests", ROOT / "scripts" / "firestore_system_tests.py"
)
assert _spec is not None and _spec.loader is not None
system_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(system_tests)

SUITE = """
import pytest

def test_plain():
    assert True

def test_with_skipped_subtest(subtests):
    with subtests.test(msg="verify_pipeline"):
        pytest.skip("skip pipeline verification on emulator")
    assert True

def test_with_failed_subtest(subtests):
    with subtests.test(msg="part"):
        assert 1 == 2, "the part is wrong"

def test_skipped_itself():
    pytest.skip("not on an emulator")

def test_failing():
    assert False, "wrong"
"""


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, allowed: str):
    report_path = pytester.path / "report.jsonl"
    monkeypatch.setenv("FIRESTORE_SYSTEM_REPORT", str(report_path))
    pytester.makepyfile(test_suite=SUITE)
    pytester.runpytest_subprocess("-p", "system_plugin", "-p", "no:cacheprovider")
    allowed_path = pytester.path / "allowed.txt"
    allowed_path.write_text(allowed, encoding="utf-8")
    return report_path, allowed_path


@pytest.fixture
def plugin_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent))


@pytest.mark.usefixtures("plugin_on_path")
def test_a_skipped_subtest_is_its_own_item_and_its_test_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    report_path, _ = run(pytester, monkeypatch, "")
    results, subtests = system_tests.outcomes(report_path)
    assert results["test_suite.py::test_with_skipped_subtest"][0] == "passed"
    item = "test_suite.py::test_with_skipped_subtest [verify_pipeline]"
    assert subtests == {item, "test_suite.py::test_with_failed_subtest [part]"}
    assert results[item] == ("skipped", "skip pipeline verification on emulator")
    failed = results["test_suite.py::test_with_failed_subtest [part]"]
    assert failed[0] == "failed" and "the part is wrong" in failed[1]
    assert results["test_suite.py::test_skipped_itself"][0] == "skipped"
    assert results["test_suite.py::test_failing"][0] == "failed"
    assert results["test_suite.py::test_plain"][0] == "passed"
    # Every line the plugin wrote names the subtest (empty for the test's own phases).
    records = [json.loads(line) for line in report_path.read_text().splitlines()]
    assert all("subtest" in record for record in records)


@pytest.mark.usefixtures("plugin_on_path")
def test_the_report_counts_subtests_and_checks_them_against_the_allow_list(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    allowed = (
        "oracle\t*::test_with_skipped_subtest [[]verify_pipeline]\tpipelines\n"
        "oracle\t*::test_skipped_itself\tnot on an emulator\n"
        "oracle\t*::test_failing\texpected failure\n"
    )
    report_path, allowed_path = run(pytester, monkeypatch, allowed)
    status = system_tests.report(report_path, allowed_path)
    out = capsys.readouterr().out
    # Only the failed subtest fails; the skipped one is an allowed skip, its test a pass.
    assert status == 1
    assert "FAILED: test_suite.py::test_with_failed_subtest [part]: " in out
    assert "SKIPPED: test_suite.py::test_with_skipped_subtest [verify_pipeline]: skip" in out
    assert "firestore system tests: 3 passed, 1 failed, 3 skipped" in out

    # The same subtest skip without its allow-list line is a failure.
    allowed_path.write_text("oracle\t*::test_skipped_itself\tnot on an emulator\n")
    assert system_tests.report(report_path, allowed_path) == 1
    out = capsys.readouterr().out
    assert "FAILED: test_suite.py::test_with_skipped_subtest [verify_pipeline]: skipped, not" in out


@pytest.mark.usefixtures("plugin_on_path")
def test_the_baseline_lists_what_fails_twice_and_marks_the_rest_flaky(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    report_path, _ = run(pytester, monkeypatch, "")
    assert system_tests.failed_tests(report_path) == [
        "test_suite.py::test_with_failed_subtest",
        "test_suite.py::test_failing",
    ]
    # The rerun: test_failing fails again, the subtest's test now passes.
    rerun = pytester.path / "rerun.jsonl"
    rerun.write_text(
        json.dumps(
            {
                "id": "test_suite.py::test_failing",
                "when": "call",
                "outcome": "failed",
                "reason": "wrong",
                "subtest": "",
            }
        )
        + "\n"
        + json.dumps(
            {
                "id": "test_suite.py::test_with_failed_subtest",
                "when": "call",
                "outcome": "passed",
                "reason": "",
                "subtest": "",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    out = pytester.path / "baseline.txt"
    system_tests.baseline(report_path, rerun, out, ["emulator X", "suite Y", "command Z"])
    lines = out.read_text(encoding="utf-8").splitlines()
    entries = [line for line in lines if not line.startswith("#")]
    assert [line.split("\t")[0] for line in entries] == ["test_suite.py::test_failing"]
    assert any(
        line.startswith("# flaky: test_suite.py::test_with_failed_subtest [part]\t")
        for line in lines
    )
    assert "# Emulator: emulator X" in lines and "# Command: command Z" in lines
