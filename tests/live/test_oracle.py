"""The live-query oracle campaign, short (tests/live/oracle.py; the long run is
scripts/oracle.sh). DOCSTORE_ORACLE_SEED picks the seed (default 12), DOCSTORE_ORACLE_SECONDS
the duration (default 60)."""

import os

from oracle import Campaign


def test_oracle_campaign_under_faults():
    seed = int(os.environ.get("DOCSTORE_ORACLE_SEED") or 12)
    seconds = float(os.environ.get("DOCSTORE_ORACLE_SECONDS") or 60)
    counts = Campaign(seed, seconds).run()
    print(f"oracle seed {seed}: {counts}")
    # The campaign did what it claims: transactions through both paths, events, and every
    # kind of fault at least once (the schedule cycles through them).
    assert counts.get("sql transactions", 0) > 0 and counts.get("http transactions", 0) > 0
    assert counts.get("events", 0) > counts.get("transactions", 0)
    assert counts.get("targets compared", 0) > 0
    for fault in ("faults:drop", "faults:sidecar SIGKILL", "faults:postgres restart fast"):
        assert counts.get(fault, 0) > 0, (fault, counts)
    # The slow reader's burst overflows its stream: a reset {reason: lagged}, then a reconnect.
    assert counts.get("faults:slow lagged", 0) > 0 and counts.get("reset:lagged", 0) > 0, counts
