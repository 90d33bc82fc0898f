"""The write-trigger oracle campaign, short (tests/live/trigger_oracle.py; the long run is
scripts/trigger_oracle.sh): one campaign per session, one test per check, each failing on its
failures and on covering less than it states. The seed is fresh per run and printed at the
start and in every failure; DOCSTORE_TRIGGER_ORACLE_SEED (or DOCSTORE_SEED) replays it.
DOCSTORE_TRIGGER_ORACLE_SECONDS, when set, repeats the fault plan for that long."""

import os

import pytest
from conftest import assert_campaign_check, show_past_capture
from trigger_oracle import CHECKS, Campaign, campaign_seed


@pytest.fixture(scope="module")
def campaign(pytestconfig):
    seed = campaign_seed()
    seconds = float(os.environ.get("DOCSTORE_TRIGGER_ORACLE_SECONDS") or 0) or None
    show_past_capture(
        pytestconfig, f"\ntrigger oracle: seed {seed} (replay: DOCSTORE_TRIGGER_ORACLE_SEED={seed})"
    )
    done = Campaign(seed, seconds).run()
    show_past_capture(pytestconfig, done.summary())
    return done


@pytest.mark.parametrize("check", list(CHECKS))
def test_trigger_oracle(campaign, check):
    assert_campaign_check(campaign, check, CHECKS, "DOCSTORE_TRIGGER_ORACLE_SEED")
