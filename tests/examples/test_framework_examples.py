"""examples/{slime,skyrl,openenv}_*.py: each framework's own hook or loop gets real rewards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.examples.conftest import assert_real_rewards, needs, run_example

pytestmark = pytest.mark.slow


def _check_group_shape(rewards: list[float], group: int) -> None:
    """drafts.answers order: reference (all pass), wrong (some), stub and prose (none)."""
    for start in range(0, len(rewards), group):
        reference, wrong, stub, prose = rewards[start : start + group]
        assert reference == 1.0 and 0.0 < wrong < 1.0 and stub == prose == 0.0


def test_slime_hook_loaded_by_its_dotted_path(tmp_path: Path) -> None:
    report = run_example("slime_reward.py", tmp_path)
    assert report["per_sample_path"] == "collimate_rl.slime.reward_func"
    for mode in ("per_sample", "per_group"):
        assert_real_rewards(report[mode], report["group_size"])
        _check_group_shape(report[mode], report["group_size"])
    assert report["per_sample"] == report["per_group"]


def _final_rewards(episodes: list[dict[str, Any]]) -> list[float]:
    return [episode["rewards"][-1] for episode in episodes]


def _check_plans(episodes: list[dict[str, Any]], max_turns: int) -> None:
    """drafts.PLANS: solved at once; fixed after the feedback; still wrong; never code."""
    for episode in episodes:
        rewards, plan = episode["rewards"], tuple(episode["plan"])
        assert all(r == 0.0 for r in rewards[:-1]), episode  # only the last turn is graded
        if plan == ("reference",):
            assert rewards == [1.0]
        elif plan == ("wrong", "reference"):
            assert rewards == [0.0, 1.0]  # the feedback turn happened
        elif plan == ("wrong", "wrong"):
            assert len(rewards) == max_turns and 0.0 < rewards[-1] < 1.0
        else:
            assert len(rewards) == max_turns and rewards[-1] == 0.0


@needs("skyrl_gym", install="pip install -e '.[skyrl]'")
def test_skyrl_generator_loop_over_the_registry(tmp_path: Path) -> None:
    report = run_example("skyrl_multiturn.py", tmp_path)
    episodes = report["trajectories"]
    assert_real_rewards(_final_rewards(episodes), report["group_size"])
    _check_plans(episodes, max_turns=2)
    for episode in episodes:
        # the env's metrics SkyRL aggregates, and the chat it grows turn by turn
        assert episode["collimate_turns"] == len(episode["rewards"])
        assert episode["collimate_seed_ack_verified"] == 1.0
        assert len(episode["chat"]) == 2 * len(episode["rewards"])
    # Repo-v0 through the same registry: tool calls (JSON and a fenced bash block) and a
    # reward at submit from hidden tests; editing the tests earns nothing
    repo = {episode["plan"]: episode["rewards"] for episode in report["repo_trajectories"]}
    assert {plan: rewards[-1] for plan, rewards in repo.items()} == {
        "editor": 1.0,
        "bash": 1.0,
        "forge": 0.0,
        "nothing": 0.0,
    }
    assert all(r == 0.0 for rewards in repo.values() for r in rewards[:-1])


@needs("openenv", install="pip install -e '.[openenv]'")
def test_openenv_agents_against_the_env_server(tmp_path: Path) -> None:
    report = run_example("openenv_agent.py", tmp_path)
    episodes = report["episodes"]
    assert_real_rewards(_final_rewards(episodes), report["group_size"])
    _check_plans(episodes, max_turns=3)
    assert report["server_exit"] in (0, -15)  # stopped by SIGTERM, gracefully


def test_the_scripted_repo_agent_solves_its_task(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from tests.examples.conftest import EXAMPLE_TIMEOUT_SECONDS, EXAMPLES

    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLIMATE_")}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "repo_scripted_agent.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_SECONDS,
        check=False,
    )
    # it exits 0 only when the hidden tests gave the agent's fix a reward of 1.0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "> submit" in proc.stdout and "reward 1.0" in proc.stdout
