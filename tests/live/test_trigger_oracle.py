"""The write-trigger oracle campaign, short (tests/live/trigger_oracle.py; the long run is
scripts/trigger_oracle.sh): one campaign per session, one test per check, each failing on its
failures and on covering less than it states. The seed is fresh per run and printed at the
start and in every failure; DOCSTORE_TRIGGER_ORACLE_SEED (or DOCSTORE_SEED) replays it.
DOCSTORE_TRIGGER_ORACLE_SECONDS, when set, repeats the fault plan for that long."""

import os

import pytest
from trigger_oracle import CHECKS, Campaign, campaign_seed


def show(config, text: str) -> None:
    """Print past pytest's capture (also under -q): the seed and the closing summary."""
    with config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        config.pluginmanager.get_plugin("terminalreporter").write_line(text)


@pytest.fixture(scope="module")
def campaign(pytestconfig):
    seed = campaign_seed()
    seconds = float(os.environ.get("DOCSTORE_TRIGGER_ORACLE_SECONDS") or 0) or None
    show(
        pytestconfig, f"\ntrigger oracle: seed {seed} (replay: DOCSTORE_TRIGGER_ORACLE_SEED={seed})"
    )
    done = Campaign(seed, seconds).run()
    show(pytestconfig, done.summary())
    return done


@pytest.mark.parametrize("check", list(CHECKS))
def test_trigger_oracle(campaign, check):
    problems = campaign.report()[check]
    assert not problems, (
        f"{check}: {CHECKS[check]}; seed {campaign.seed} (replay: DOCSTORE_TRIGGER_ORACLE_SEED="
        f"{campaign.seed}, logs in {campaign.dirs}):\n" + "\n".join(problems[:20])
    )
