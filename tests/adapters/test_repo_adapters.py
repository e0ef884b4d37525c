"""Repo-v0 through the real frameworks: skyrl-gym's multi-turn env and openenv-core's server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("skyrl_gym")
pytest.importorskip("openenv.core")

import skyrl_gym
from openenv.core import GenericEnvClient

from collimate_rl import skyrl
from collimate_rl.openenv import create_app
from tests.adapters.test_openenv import _run
from tests.envs.repo._rows import CALC_ROW

skyrl.register()

_FIX = "```bash\nsed -i 's/(len(values) + 1)/len(values)/' calc/ops.py\n```"


def test_skyrl_runs_a_swe_row_with_tool_calls(socket_path: str, local_client: Any) -> None:
    before = {s["session_id"] for s in local_client.list_sessions()}
    env = skyrl_gym.make(
        "collimate_repo",
        env_config={"unix_socket": socket_path},
        extras={**CALC_ROW, "max_turns": 5},
    )
    chat, info = env.init([])
    assert info["task_id"] == "calc__mean-1" and "divides by one too many" in chat[0]["content"]
    view = json.dumps(
        {"name": "str_replace_editor", "arguments": {"command": "view", "path": "calc/ops.py"}}
    )
    out = env.step(view)
    assert not out["done"] and "def mean(values):" in out["observations"][0]["content"]
    assert out["metadata"]["tool_call"]["name"] == "str_replace_editor"
    assert env.step(_FIX)["reward"] == 0.0
    last = env.step('{"name": "submit", "arguments": {}}')
    assert last["done"] and last["reward"] == 1.0 and last["observations"] == []
    assert env.get_metrics()["collimate_solved"] == 1.0
    env.close()
    assert {s["session_id"] for s in local_client.list_sessions()} - before == set()


def test_skyrl_max_turns_ends_and_grades(socket_path: str) -> None:
    env = skyrl_gym.make(
        "collimate_repo",
        env_config={"unix_socket": socket_path},
        extras={**CALC_ROW, "max_turns": 1},
    )
    env.init([])
    out = env.step(_FIX)
    assert out["done"] and out["reward"] == 1.0 and out["metadata"]["end"] == "turns"
    env.close()


@pytest.fixture(scope="module")
def repo_url(socket_path: str) -> Iterator[str]:
    yield from _run(
        create_app(
            "collimate/Repo-v0", max_concurrent_envs=2, task_set=[CALC_ROW], unix_socket=socket_path
        )
    )


def test_openenv_serves_repo_episodes(repo_url: str) -> None:
    with GenericEnvClient(base_url=repo_url).sync() as env:
        first = env.reset(task_id="calc__mean-1")
        assert "divides by one too many" in first.observation["text"]
        step = env.step(
            {"tool_call": {"name": "bash", "arguments": {"command": "cat calc/ops.py"}}}
        )
        assert not step.done and "(len(values) + 1)" in step.observation["text"]
        env.step({"text": _FIX})
        last = env.step({"tool_call": {"name": "submit", "arguments": {}}})
        assert last.done and last.reward == 1.0
        assert (
            last.observation["info"]["forgeable"] is True
            and "calc/ops.py" in last.observation["info"]["diff"]
        )
