"""The live-query oracle campaign, short (tests/live/oracle.py; the long run is
scripts/oracle.sh): one campaign per session, bounded by counts, and one test per check, each
failing on its failures and on covering less than it states. The seed is fresh per run and
printed at the start and in every failure; DOCSTORE_SEED (or DOCSTORE_ORACLE_SEED) replays
it. DOCSTORE_ORACLE_SECONDS, when set, repeats the fault plan for that long. The campaign runs
once per matcher partitioning: 1x1 (one cell, the inline path) and 2x2 (two write x two query
partitions, the tasks' path); DOCSTORE_ORACLE_PARTITIONS (e.g. `2x2`) runs only that one."""

import os

import pytest
from conftest import assert_campaign_check, show_past_capture
from oracle import CHECKS, Campaign, campaign_seed, parse_partitions

PARTITIONS = (
    [os.environ["DOCSTORE_ORACLE_PARTITIONS"]]
    if os.environ.get("DOCSTORE_ORACLE_PARTITIONS")
    else ["1x1", "2x2"]
)


@pytest.fixture(scope="module", params=PARTITIONS)
def campaign(pytestconfig, request):
    seed = campaign_seed()
    seconds = float(os.environ.get("DOCSTORE_ORACLE_SECONDS") or 0) or None
    show_past_capture(
        pytestconfig, f"\noracle: seed {seed} (replay: DOCSTORE_SEED={seed}), {request.param}"
    )
    done = Campaign(seed, seconds, partitions=parse_partitions(request.param)).run()
    show_past_capture(pytestconfig, done.summary())
    return done


@pytest.mark.parametrize("check", list(CHECKS))
def test_oracle(campaign, check):
    assert_campaign_check(campaign, check, CHECKS, "DOCSTORE_SEED")
