"""pytest plugin of the oracle layer (scripts/firestore_system_tests.sh), loaded with
`-p system_plugin` into python-firestore's system tests: it writes one JSON line per test phase
(node id, phase, outcome, one-line reason) to $FIRESTORE_SYSTEM_REPORT, from which
scripts/firestore_system_tests.py names every failure and skip with its reason. It only
observes: the tests run unchanged.

A subtest's report (pytest-subtests' `subtests.test(msg=...)`, e.g. the `verify_pipeline` part
of the query tests) carries `subtest`, pytest-subtests' own description of it (`[msg]`, with its
keyword arguments): its outcome is the subtest's, not the test's."""

from __future__ import annotations

import json
import os
from typing import Any


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _reason(report: Any) -> str:
    if report.passed:
        return ""
    longrepr = report.longrepr
    if report.skipped:
        if hasattr(report, "wasxfail"):
            return f"xfail: {report.wasxfail}"
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            return str(longrepr[2]).removeprefix("Skipped: ")
        return _first_line(str(longrepr))
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return _first_line(crash.message)
    text = str(longrepr).strip().splitlines()
    return text[-1].strip() if text else "failed"


def _write(record: dict[str, str]) -> None:
    path = os.environ.get("FIRESTORE_SYSTEM_REPORT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def _subtest(report: Any) -> str:
    """pytest-subtests' description of the subtest the report is of, "" for the test's own."""
    if getattr(report, "context", None) is None:
        return ""
    describe = getattr(report, "sub_test_description", None)
    return describe() if callable(describe) else "[subtest]"


def pytest_runtest_logreport(report: Any) -> None:
    _write(
        {
            "id": report.nodeid,
            "when": report.when,
            "outcome": report.outcome,
            "reason": _reason(report),
            "subtest": _subtest(report),
        }
    )


def pytest_collectreport(report: Any) -> None:
    # A module that does not import (a missing dependency) is a failure, not a silent gap.
    if report.failed:
        _write(
            {
                "id": report.nodeid,
                "when": "collect",
                "outcome": "failed",
                "reason": _reason(report),
            }
        )
