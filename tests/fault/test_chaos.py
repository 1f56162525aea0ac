"""The chaos suite, bounded for CI: every kind of process is killed with SIGKILL at least
once (then kinds at random) under a steady load of retried submissions, and nothing the
log must show is broken (``allot.client.chaos``; the long run is ``allot bench chaos``)."""

from pathlib import Path

import pytest

from allot.client.bench_chaos import check_again, report, summary
from allot.client.chaos import KINDS, Settings, run_chaos

LOAD_S = 75.0  # eight kinds in turn at 3 s, then about seventeen at random


@pytest.mark.slow
@pytest.mark.timeout(330)
async def test_every_kind_of_process_killed_under_load_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    settings = Settings(seconds=LOAD_S, seed=7, kill_every_s=3.0, settle_s=90.0)
    outcome = await run_chaos(tmp_path / "chaos", settings)
    figures = report(summary(outcome))

    assert outcome.passed, figures
    assert sorted(outcome.kills) == sorted(KINDS), figures  # each kind, and each came back
    verdict = outcome.verdict
    assert verdict.acknowledged == outcome.submissions > 30, figures
    assert (verdict.lost, verdict.duplicated, verdict.not_ended) == (0, 0, 0), figures
    assert outcome.settled_in_s is not None, figures
    assert verdict.plans_verified > 0, figures
    assert outcome.from_snapshot > 0, figures  # restarts began from the planner's snapshots
    # The run kept its log and what its clients were told: the check holds again from those.
    assert check_again(tmp_path / "chaos") == 0
