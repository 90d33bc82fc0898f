"""The oracle layer's two steps around pytest (scripts/firestore_system_tests.sh runs them with
the Python of target/firestore-system-venv):

  preflight HOST PROJECT   one gRPC call (ListCollectionIds, 10 s deadline) to the server at HOST:
                           exit 0 when it answers gRPC at all (any status, UNIMPLEMENTED
                           included), 2 when it cannot be reached or does not speak gRPC
                           (UNAVAILABLE, DEADLINE_EXCEEDED): the SDK would retry every RPC for a
                           minute, so the suite would take hours to fail.
  report REPORT ALLOWED    read the JSON lines of tests/grpc/system_plugin.py and the allow-list
                           (tests/allowed-skips.txt, layer `oracle`), print every failure and
                           skip with its reason, close with
                           `firestore system tests: N passed, N failed, N skipped`; exit 1 when a
                           test failed or skipped that the allow-list does not name.

  failed REPORT             the node ids of the tests that failed (one a line; a failed subtest
                           names its test), for the baseline's rerun.
  baseline REPORT RERUN OUT EMULATOR SUITE COMMAND
                           write OUT (tests/grpc/emulator-baseline.txt): a header naming the
                           emulator, the suite, the date and the command, then one line
                           `ID<TAB>REASON` per test or subtest that failed in REPORT and again in
                           RERUN, then one `# flaky: ID<TAB>REASON` line per one that passed in
                           RERUN (the allow-list plays no part: this is what the emulator does).

A test's outcome is that of its phases: failed when setup, call or teardown failed, skipped when
one skipped (and none failed), passed otherwise. A subtest (pytest-subtests, e.g. the
`verify_pipeline` part of the query tests, which skips itself against any emulator) that skipped
or failed is an item of its own, `ID [MSG]`, counted apart from its test: a skipped subtest does
not make its passed test a skip, nor a failed one its test a pass; a passed subtest is part of
its test's pass and not counted. An allow-listed failure counts as skipped and is printed as
`SKIPPED: ID: expected failure: REASON` (scripts/tally.sh checks every `SKIPPED:` line against
the allow-list again); an unlisted skip counts as failed.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import sys
from pathlib import Path

LAYER = "oracle"


def preflight(host: str, project: str) -> int:
    import grpc
    from google.cloud.firestore_v1.types import ListCollectionIdsRequest

    request = ListCollectionIdsRequest(parent=f"projects/{project}/databases/(default)/documents")
    with grpc.insecure_channel(host) as channel:
        call = channel.unary_unary(
            "/google.firestore.v1.Firestore/ListCollectionIds",
            request_serializer=ListCollectionIdsRequest.serialize,
            response_deserializer=lambda raw: raw,
        )
        try:
            call(request, timeout=10, metadata=[("authorization", "Bearer owner")])
            code, details = grpc.StatusCode.OK, ""
        except grpc.RpcError as error:
            code, details = error.code(), error.details()
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        print(
            f"FIRESTORE_EMULATOR_HOST={host} does not answer gRPC ({code.name}: {details}): "
            "is the sidecar running, with its gRPC front end?",
            file=sys.stderr,
        )
        return 2
    print(f"FIRESTORE_EMULATOR_HOST={host} answers gRPC (ListCollectionIds: {code.name})")
    return 0


def allowed(path: Path) -> list[tuple[str, str]]:
    """The (pattern, reason) pairs of layer `oracle`: shell globs, as scripts/tally.sh reads them."""
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) == 3 and fields[0] == LAYER:
            entries.append((fields[1], fields[2]))
    return entries


def allowed_reason(entries: list[tuple[str, str]], test: str) -> str | None:
    for pattern, reason in entries:
        if fnmatch.fnmatchcase(test, pattern):
            return reason
    return None


def outcomes(path: Path) -> tuple[dict[str, tuple[str, str]], set[str]]:
    """Item id -> (outcome, reason), in the order the tests ran: every test, and every subtest
    (`ID [MSG]`) that skipped or failed; and the ids of those subtests."""
    result: dict[str, tuple[str, str]] = {}
    subtests: set[str] = set()
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        outcome, reason = record["outcome"], record["reason"]
        item = record["id"]
        subtest = record.get("subtest", "")
        if subtest:
            if outcome == "passed":
                continue
            item = f"{item} {subtest}"
            subtests.add(item)
        elif outcome == "failed" and record["when"] != "call":
            reason = f"{record['when']}: {reason}"
        previous = result.get(item)
        if previous is None or rank[outcome] > rank[previous[0]]:
            result[item] = (outcome, reason)
    return result, subtests


def report(report_path: Path, allowed_path: Path) -> int:
    entries = allowed(allowed_path)
    results, subtest_ids = outcomes(report_path) if report_path.exists() else ({}, set())
    passed = failed = skipped = 0
    expected: list[str] = []
    skips: list[str] = []
    failures: list[str] = []
    for test, (outcome, reason) in results.items():
        listed = allowed_reason(entries, test)
        if outcome == "passed":
            passed += 1
        elif listed is not None:
            skipped += 1
            line = f"SKIPPED: {test}: {'expected failure: ' if outcome == 'failed' else ''}{reason}"
            (expected if outcome == "failed" else skips).append(line)
        else:
            failed += 1
            what = "skipped, not on tests/allowed-skips.txt: " if outcome == "skipped" else ""
            failures.append(f"FAILED: {test}: {what}{reason}")
    for line in skips + expected + failures:
        print(line)
    if not results:
        print("FAILED: no test ran (see the pytest output above)")
        failed += 1
    subtests = len(subtest_ids)
    ran = sum(1 for outcome, _ in results.values() if outcome != "skipped")
    print(f"{len(results) - subtests} tests and {subtests} subtests that did not pass, {ran} ran")
    print(f"firestore system tests: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


def failed_tests(report_path: Path) -> list[str]:
    results, subtest_ids = outcomes(report_path)
    tests: list[str] = []
    for item, (outcome, _) in results.items():
        if outcome != "failed":
            continue
        test = item.split(" [", 1)[0] if item in subtest_ids else item
        if test not in tests:
            tests.append(test)
    return tests


def baseline(report_path: Path, rerun_path: Path, out: Path, header: list[str]) -> int:
    first, _ = outcomes(report_path)
    again, _ = outcomes(rerun_path) if rerun_path.exists() else ({}, set())
    fails: list[str] = []
    flaky: list[str] = []
    for item, (outcome, reason) in first.items():
        if outcome != "failed":
            continue
        # No rerun at all: a failure. A passed subtest leaves no entry, hence the default.
        if not again or again.get(item, ("passed", ""))[0] == "failed":
            fails.append(f"{item}\t{reason}")
        else:
            flaky.append(f"# flaky: {item}\t{reason}")
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for outcome, _ in first.values():
        counts[outcome] += 1
    lines = [
        "# What Google's Cloud Firestore emulator fails of the oracle layer: the reference the",
        "# oracle is calibrated against (docs/architecture.md, the oracle layer). Regenerated,",
        "# never edited by hand, by `scripts/firestore_system_tests.sh --baseline` (not part of",
        "# make test); the allow-list (tests/allowed-skips.txt) names these as expected failures.",
        f"# Emulator: {header[0]}",
        f"# Suite: {header[1]}",
        f"# Date: {datetime.date.today().isoformat()}",
        f"# Command: {header[2]}",
        f"# Outcome: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['skipped']} skipped (tests, and subtests that did not pass)",
        "# Format: one line per test id the emulator fails, `ID<TAB>REASON` (its first run's",
        "# reason, whose details may differ between runs); `# flaky:` lines failed once and",
        "# passed when run again alone.",
        *fails,
        *flaky,
    ]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(fails)} failures, {len(flaky)} flaky, written to {out}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "preflight":
        return preflight(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == "report":
        return report(Path(argv[1]), Path(argv[2]))
    if len(argv) == 2 and argv[0] == "failed":
        print("\n".join(failed_tests(Path(argv[1]))))
        return 0
    if len(argv) == 7 and argv[0] == "baseline":
        return baseline(Path(argv[1]), Path(argv[2]), Path(argv[3]), argv[4:])
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
