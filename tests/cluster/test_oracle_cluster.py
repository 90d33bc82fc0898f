"""The live-query oracle campaign against the cluster, short (tests/live/oracle.py with the
stack of tests/cluster/oracle_stack.py), in two topologies: `cluster` (nats-server, two
ingests, two gateways that match themselves) and `matchers` (the same, with two `--role
matcher` processes holding the streams and gateways that match on them, `--matching
remote`). The long run is `DOCSTORE_ORACLE_TOPOLOGY=cluster|matchers scripts/oracle.sh`. The
same random subscriptions and transactions and the same checks as tests/live/test_oracle.py,
with the cluster's faults: SIGKILL of the active ingest, of a gateway (its clients resume on
the other one), of nats-server, of a matcher (`matchers`: its streams continue on the other
one within their client connections), and a Postgres restart; every resume goes to the other
gateway, and a reset not explained (oracle_stack.ClusterStack.explains) fails the `faults`
check. The seed is fresh per run and printed; DOCSTORE_SEED replays it (both topologies take
it). DOCSTORE_ORACLE_TOPOLOGY runs one topology only; DOCSTORE_ORACLE_PARTITIONS (default 2x2)
sets the matcher partitions of each hub."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "live"))
from conftest import assert_campaign_check, show_past_capture  # noqa: E402
from oracle import CHECKS, Campaign, campaign_seed, parse_partitions  # noqa: E402

TOPOLOGIES = [
    t
    for t in ("cluster", "matchers")
    if os.environ.get("DOCSTORE_ORACLE_TOPOLOGY") in (None, "", t)
]


@pytest.fixture(scope="module", params=TOPOLOGIES)
def campaign(request, pytestconfig):
    topology = request.param
    seed = campaign_seed()
    partitions = os.environ.get("DOCSTORE_ORACLE_PARTITIONS") or "2x2"
    show_past_capture(
        pytestconfig, f"\noracle ({topology}): seed {seed} (replay: DOCSTORE_SEED={seed})"
    )
    done = Campaign(seed, None, partitions=parse_partitions(partitions), topology=topology).run()
    show_past_capture(pytestconfig, done.summary())
    return done


@pytest.mark.parametrize("check", list(CHECKS))
def test_oracle_cluster(campaign, check):
    assert_campaign_check(campaign, check, CHECKS, "DOCSTORE_SEED")
