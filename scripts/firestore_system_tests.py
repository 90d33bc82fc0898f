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

A test's outcome is that of its phases: failed when setup, call or teardown failed, skipped when
one skipped (and none failed), passed otherwise. An allow-listed failure counts as skipped and is
printed as `SKIPPED: ID: expected failure: REASON` (scripts/tally.sh checks every `SKIPPED:` line
against the allow-list again); an unlisted skip counts as failed.
"""

from __future__ import annotations

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


def outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """Test id -> (outcome, reason), in the order the tests ran."""
    result: dict[str, tuple[str, str]] = {}
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        outcome, reason = record["outcome"], record["reason"]
        if outcome == "failed" and record["when"] != "call":
            reason = f"{record['when']}: {reason}"
        previous = result.get(record["id"])
        if previous is None or rank[outcome] > rank[previous[0]]:
            result[record["id"]] = (outcome, reason)
    return result


def report(report_path: Path, allowed_path: Path) -> int:
    entries = allowed(allowed_path)
    results = outcomes(report_path) if report_path.exists() else {}
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
    ran = sum(1 for outcome, _ in results.values() if outcome != "skipped")
    print(f"{len(results)} tests, {ran} ran")
    print(f"firestore system tests: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "preflight":
        return preflight(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == "report":
        return report(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
