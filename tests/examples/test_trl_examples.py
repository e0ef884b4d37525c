"""examples/trl_*.py: TRL's GRPOTrainer trains with our reward, at toy scale, on the CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.examples.conftest import assert_real_rewards, needs, run_example

pytestmark = [
    pytest.mark.slow,
    needs("torch", "transformers", "trl", "datasets", install="pip install -e '.[examples]'"),
]

STEPS = 40
#: How much the last quarter's mean reward must beat the first quarter's (seen: 0.21 -> 0.43).
MARGIN = 0.1


def test_grpo_trainer_learns_from_sandboxed_rewards(tmp_path: Path) -> None:
    report = run_example("trl_grpo.py", tmp_path, "--steps", str(STEPS))
    batches = report["reward_batches"]
    # TRL called the reward once per step, with every completion of the step
    assert len(batches) == STEPS
    for batch in batches:
        assert len(batch) == 32
        assert_real_rewards(batch, report["group_size"])
    means = report["mean_reward"]
    assert len(means) == STEPS
    # what TRL logged is what our reward returned
    assert means == pytest.approx([float(np.mean(b)) for b in batches])
    # The run is seeded and single-threaded (the same rewards twice in a row here); the
    # quarter means keep the check robust to a changed rounding of one step.
    quarter = STEPS // 4
    first, last = np.mean(means[:quarter]), np.mean(means[-quarter:])
    assert last - first >= MARGIN, f"mean reward {first:.3f} -> {last:.3f}: {means}"


def test_rollout_hook_drives_the_group_vector_env(tmp_path: Path) -> None:
    steps = 10
    report = run_example("trl_rollout_env.py", tmp_path, "--steps", str(steps))
    batches = report["reward_batches"]
    # one rollout per step, each grading 4 groups of 8 in the vector env
    assert len(batches) == steps
    for batch in batches:
        assert len(batch) == 32
        assert_real_rewards(batch, report["group_size"])
    # the env's rewards are what TRL trained on
    assert report["mean_reward"] == pytest.approx([float(np.mean(b)) for b in batches])
