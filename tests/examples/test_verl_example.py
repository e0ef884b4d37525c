"""examples/verl_reward.py: verl's reward managers score a DataProto batch with our compute_score."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.examples._verl_venv import VenvUnavailable, verl_python
from tests.examples.conftest import REPO, assert_real_rewards, run_example

# the first run on a machine builds the venv (minutes; see _verl_venv.py)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="session")
def verl_interpreter() -> Path:
    try:
        return verl_python()
    except VenvUnavailable as exc:
        if os.environ.get("CI"):  # CI installs what the examples need: a skip would hide it
            raise
        pytest.skip(f"no venv with verl could be built: {exc}")


def test_reward_managers_score_a_batch(verl_interpreter: Path, tmp_path: Path) -> None:
    report = run_example("verl_reward.py", tmp_path, python=verl_interpreter, pythonpath=REPO)
    # the path is our adapter's file, loaded by verl's get_custom_reward_fn
    assert report["path"] == str(REPO / "collimate_rl" / "verl.py")
    group = report["group_size"]
    assert_real_rewards(report["naive"], group)
    # one call per response and one call per batch give the same scores
    assert report["batch"] == report["naive"]
    # each group: the reference passes every test, the stub and the prose none
    for start in range(0, len(report["naive"]), group):
        reference, wrong, stub, prose = report["naive"][start : start + group]
        assert reference == 1.0 and stub == prose == 0.0 and wrong < 1.0
