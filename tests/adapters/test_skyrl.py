"""The SkyRL adapter through the real skyrl-gym: ``make`` on our ids, driven as SkyRL's generator drives envs."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from collimate_rl.errors import CollimateError
from collimate_rl.seeds import DET_SEED, seed_from_key
from tests.adapters.conftest import ADD_GT, BAD, GOOD, HALF

skyrl_gym = pytest.importorskip("skyrl_gym")
omegaconf = pytest.importorskip("omegaconf")

from collimate_rl import skyrl  # noqa: E402

PROMPT = [{"role": "user", "content": "Write add(a, b)."}]


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    skyrl.register()


def row(max_turns: int = 1, **extra: Any) -> dict[str, Any]:
    """A SkyRL dataset row's ``extras`` (every column but the prompt and env_class)."""
    return {
        "data_source": "toy",
        "reward_spec": {"method": "rule", "ground_truth": ADD_GT},
        "extra_info": {"index": 7},
        "max_turns": max_turns,
        **extra,
    }


def rollout(env: Any, actions: list[str], prompt: Any = PROMPT) -> list[dict[str, Any]]:
    """SkyRL's generator loop: init, step until done, metrics, close."""
    env.init(prompt)
    outs = []
    try:
        for action in actions:
            out = env.step(action)
            outs.append(out)
            if out["done"]:
                break
    finally:
        env.close()
    return outs


def test_register_is_idempotent_and_documents_the_ids() -> None:
    assert skyrl.register() == sorted(skyrl.ENV_IDS)
    for env_id in skyrl.ENV_IDS:
        assert env_id in skyrl_gym.registry


def test_register_refuses_an_id_owned_by_another_env() -> None:
    from skyrl_gym.envs.registration import deregister

    skyrl_gym.register(id="collimate_taken", entry_point="skyrl_gym.envs.gsm8k.env:GSM8kEnv")
    skyrl.ENV_IDS["collimate_taken"] = ("collimate_rl.skyrl._env:CollimateEnv", {})
    try:
        with pytest.raises(skyrl_gym.error.RegistrationError):
            skyrl.register(["collimate_taken"])
    finally:
        del skyrl.ENV_IDS["collimate_taken"]
        deregister("collimate_taken")


@pytest.mark.parametrize(
    ("completion", "reward"), [(GOOD, 1.0), (BAD, 0.0), (HALF, pytest.approx(2 / 3))]
)
def test_single_turn_grades_through_make(socket_path: str, completion: str, reward: Any) -> None:
    env = skyrl_gym.make("collimate_code", env_config={"unix_socket": socket_path}, extras=row())
    assert isinstance(env, skyrl.CollimateCodeEnv)
    assert env.spec.id == "collimate_code" and env.env_id == "collimate/Code-v0"
    (out,) = rollout(env, [completion])
    assert out["done"] is True and out["observations"] == []
    assert out["reward"] == reward
    assert out["metadata"]["total"] == 3 and out["metadata"]["infra_error"] is False
    assert env.get_metrics()["collimate_turns"] == 1


def test_env_config_may_be_an_omegaconf_dictconfig(socket_path: str) -> None:
    config = omegaconf.OmegaConf.create({"unix_socket": socket_path, "timeout_seconds": 10})
    env = skyrl_gym.make("collimate_code", env_config=config, extras=row())
    (out,) = rollout(env, [GOOD])
    assert out["reward"] == 1.0


def test_skyrl_lcb_rows_grade_unchanged(socket_path: str) -> None:
    tests = [
        {
            "input": "2\n3",
            "output": "5",
            "testtype": "functional",
            "metadata": {"func_name": "add"},
        },
        {
            "input": "-1\n1",
            "output": "0",
            "testtype": "functional",
            "metadata": {"func_name": "add"},
        },
    ]
    extras = {"reward_spec": {"method": "rule", "ground_truth": json.dumps(tests)}, "max_turns": 1}
    env = skyrl_gym.make("collimate_code", env_config={"unix_socket": socket_path}, extras=extras)
    (out,) = rollout(env, [GOOD])
    assert out["reward"] == 1.0 and out["metadata"]["total"] == 2


def test_multi_turn_feeds_test_results_back(socket_path: str) -> None:
    env = skyrl_gym.make("collimate_code", env_config={"unix_socket": socket_path}, extras=row(3))
    assert env.env_id == "collimate/CodeFeedback-v0" and env.max_turns == 3
    first, second = rollout(env, [BAD, GOOD, GOOD])
    assert first["done"] is False and first["reward"] == 0.0
    (message,) = first["observations"]
    assert message["role"] == "user" and "passed 0/3" in message["content"]
    assert second["done"] is True and second["reward"] == 1.0
    metrics = env.get_metrics()
    assert metrics["collimate_turns"] == 2 and metrics["collimate_solved"] == 1.0


def test_multi_turn_stops_at_max_turns(socket_path: str) -> None:
    env = skyrl_gym.make(
        "collimate_code_feedback", env_config={"unix_socket": socket_path}, extras=row(2)
    )
    outs = rollout(env, [BAD, BAD, BAD])
    assert [o["done"] for o in outs] == [False, True]
    from skyrl_gym.metrics import aggregate_for_environment

    metrics = aggregate_for_environment("collimate_code_feedback", [env.get_metrics()])
    assert metrics["collimate_turns"] == 2.0 and metrics["collimate_solved"] == 0.0


def test_shell_env_runs_and_closes_its_session(socket_path: str, local_client: Any) -> None:
    env = skyrl_gym.make(
        "collimate_shell",
        env_config={"unix_socket": socket_path},
        extras={"max_turns": 3, "task_id": "shell/fix-config"},
    )
    chat, info = env.init([])
    assert info["task_id"] == "shell/fix-config" and "config.ini" in chat[0]["content"]
    out = env.step("ls")
    assert out["done"] is False and "config.ini" in out["observations"][0]["content"]
    assert len(local_client.list_sessions()) >= 1
    env.close()
    env.close()


def test_generic_id_takes_the_env_from_env_config(socket_path: str) -> None:
    config = {"unix_socket": socket_path, "env_id": "collimate/CodeFeedback-v0"}
    env = skyrl_gym.make("collimate", env_config=config, extras=row(1))
    (out,) = rollout(env, [BAD])
    assert env.env_id == "collimate/CodeFeedback-v0" and out["done"] is True


def test_crn_seed_is_the_shared_row_key(socket_path: str) -> None:
    config = {"unix_socket": socket_path, "seed_mode": "crn"}
    seeds = set()
    for _ in range(2):
        env = skyrl_gym.make("collimate_code", env_config=config, extras=row())
        (out,) = rollout(env, [GOOD])
        seeds.add(out["metadata"]["seed"])
    assert seeds == {seed_from_key("toy:7")}
    env = skyrl_gym.make(
        "collimate_code", env_config={**config, "seed_mode": "deterministic"}, extras=row()
    )
    assert rollout(env, [GOOD])[0]["metadata"]["seed"] == DET_SEED


def test_concurrent_envs_on_worker_threads(socket_path: str) -> None:
    """SkyRL runs init/step/close in a thread pool: no signals, no shared state."""

    def one(i: int) -> float:
        env = skyrl_gym.make(
            "collimate_code", env_config={"unix_socket": socket_path}, extras=row()
        )
        return float(rollout(env, [GOOD if i % 2 else BAD])[0]["reward"])

    with ThreadPoolExecutor(8) as pool:
        rewards = list(pool.map(one, range(8)))
    assert rewards == [0.0, 1.0] * 4


def test_infra_errors_raise_instead_of_scoring(tmp_path: Any) -> None:
    config = {"unix_socket": str(tmp_path / "no-node.sock"), "timeout_seconds": 2}
    env = skyrl_gym.make("collimate_code", env_config=config, extras=row())
    env.init(PROMPT)
    with pytest.raises(CollimateError):
        env.step(GOOD)
    env.close()


def test_a_row_without_ground_truth_or_task_uses_the_env_task_set(socket_path: str) -> None:
    env = skyrl_gym.make(
        "collimate_code",
        env_config={"unix_socket": socket_path},
        extras={"max_turns": 1, "task_id": "basic/count-vowels"},
    )
    chat, info = env.init([])
    assert info["task_id"] == "basic/count-vowels" and "vowel" in chat[0]["content"].lower()
    env.close()


def test_flagged_infra_errors_show_in_metadata_and_metrics(tmp_path: Any) -> None:
    config = {
        "unix_socket": str(tmp_path / "no-node.sock"),
        "timeout_seconds": 2,
        "env_kwargs": {"on_infra_error": "flag"},
    }
    env = skyrl_gym.make("collimate_code", env_config=config, extras=row())
    (out,) = rollout(env, [GOOD])
    assert out["metadata"]["infra_error"] is True and out["reward"] == 0.0
    assert env.get_metrics()["collimate_infra_errors"] == 1
