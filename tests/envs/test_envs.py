"""The env suite on the real local node: registration, check_env, determinism, groups, leaks."""

from __future__ import annotations

import gc
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

import collimate_envs
from collimate_envs import _groups
from collimate_envs import info as keys
from collimate_envs.shell import ShellEnv
from collimate_envs.tasks import load_task_set
from collimate_envs.vector import GroupVectorEnv


def _fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


def _live_sessions(client: object) -> set[str]:
    return {str(s["session_id"]) for s in client.list_sessions()}  # type: ignore[attr-defined]


@pytest.fixture
def no_leaks(local_client: object):
    """Fails the test if it leaves sessions behind on the node."""
    before = _live_sessions(local_client)
    yield
    gc.collect()
    assert _live_sessions(local_client) - before == set()


def test_import_registers_every_env() -> None:
    for env_id in collimate_envs.ENV_IDS:
        assert env_id in gym.registry
    assert gym.registry["collimate/Code-v0"].vector_entry_point is not None


def test_module_prefixed_id_needs_no_prior_import() -> None:
    code = (
        "import gymnasium as gym\n"
        "env = gym.make('collimate_envs:collimate/Code-v0')\n"
        "print(env.spec.id)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "collimate/Code-v0"


# Repo-v0's default set is the bundled collimate-repos (its own tests check the env).
@pytest.mark.parametrize("env_id", [e for e in collimate_envs.ENV_IDS if e != "collimate/Repo-v0"])
def test_check_env_default_configuration(env_id: str) -> None:
    # The default backend: the process-wide embedded local node.
    env = gym.make(env_id)
    check_env(env.unwrapped)
    env.close()


def test_check_env_on_a_given_node(
    local_node: object, local_client: object, no_leaks: None
) -> None:
    # connect() arguments survive gymnasium's re-making of the env from its spec.
    env = gym.make("collimate/Code-v0", unix_socket=str(local_node.socket_path))  # type: ignore[attr-defined]
    check_env(env.unwrapped)
    env.close()


def test_code_env_grades_reference_and_wrong(local_client: object) -> None:
    env = gym.make("collimate/Code-v0", client=local_client)
    task = env.unwrapped.tasks.tasks[0]
    prompt, info = env.reset(seed=1, options={"task_id": task.task_id})
    assert prompt == task.prompt and info[keys.TASK_ID] == task.task_id
    _, reward, terminated, truncated, info = env.step(_fenced(task.reference_solution))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info[keys.PASSED] == info[keys.TOTAL] > 0 and not info[keys.INFRA_ERROR]
    env.reset(seed=1, options={"task_id": task.task_id})
    _, reward, *_ = env.step(_fenced("raise SystemExit(0)"))
    assert reward == 0.0


def test_seeded_reset_and_step_are_deterministic(local_client: object) -> None:
    def rollout() -> tuple[str, float, dict[str, object]]:
        env = gym.make("collimate/Code-v0", client=local_client)
        prompt, _ = env.reset(seed=1234)
        _, reward, _, _, info = env.step(_fenced("def solve(*a):\n    return 0"))
        return prompt, float(reward), info

    assert rollout() == rollout()


def test_render_ansi_shows_prompt_completion_and_result(local_client: object) -> None:
    env = gym.make("collimate/Code-v0", client=local_client, render_mode="ansi")
    prompt, _ = env.reset(seed=3)
    env.step(_fenced("print('hello')"))
    text = env.render()
    assert (
        "PROMPT" in text and prompt[:40] in text and "print('hello')" in text and "RESULT" in text
    )


def test_feedback_env_returns_feedback_then_terminates(local_client: object) -> None:
    env = gym.make("collimate/CodeFeedback-v0", client=local_client, max_turns=3)
    task = env.unwrapped.tasks.tasks[0]
    env.reset(seed=0, options={"task_id": task.task_id})
    obs, reward, terminated, truncated, info = env.step(_fenced("def nope(): pass"))
    assert not terminated and not truncated and reward == 0.0
    assert "Attempt 1 of 3" in obs and info[keys.TURN] == 1
    obs, reward, terminated, truncated, _ = env.step(_fenced(task.reference_solution))
    assert terminated and reward == 1.0


def test_feedback_lists_the_failure_not_the_tests_that_did_not_run() -> None:
    from collimate_envs.feedback import format_feedback
    from collimate_rl.grading import GradeResult, TestOutcome

    skipped = "not run: an earlier test failed and the reward is all-or-nothing"
    tests = (
        TestOutcome("test 0:2", "pass"),
        TestOutcome("test 0:3", "fail", "got None"),
        *(TestOutcome("test 0", "fail", skipped) for _ in range(4)),
    )
    result = GradeResult(reward=0.0, passed=1, total=6, exit_code=0, tests=tests)
    lines = format_feedback(result, 1, 3).splitlines()
    assert lines[1:] == ["- test 0:3: fail: got None", "- 4 more not run after the first failure"]


def test_shell_env_fix_and_submit(local_client: object, no_leaks: None) -> None:
    env = ShellEnv(client=local_client)
    obs, info = env.reset(options={"task_id": "shell/fix-median"})
    assert "stats.py" in obs
    obs, reward, *_ = env.step("python3 test_stats.py")
    assert "AssertionError" in obs and reward == 0.0
    fixed = (
        "def median(values):\n"
        "    s = sorted(values)\n"
        "    n = len(s)\n"
        "    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\n"
    )
    obs, reward, *_ = env.step("write stats.py\n" + fixed)
    obs, reward, *_ = env.step("python3 test_stats.py")
    assert "ok" in obs
    _, reward, terminated, truncated, info = env.step("submit")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info[keys.PASSED] == info[keys.TOTAL] == 5
    env.close()


def test_shell_env_output_check_and_truncation(local_client: object, no_leaks: None) -> None:
    env = ShellEnv(client=local_client, max_turns=1)
    env.reset(options={"task_id": "shell/count-lines"})
    _, reward, terminated, truncated, _ = env.step("grep -c ERROR data/log.txt > answer.txt")
    assert (reward, terminated, truncated) == (1.0, False, True)
    env.close()


# -- the GRPO group vector env -------------------------------------------------------------


def test_make_vec_builds_groups(local_client: object, no_leaks: None) -> None:
    envs = gym.make_vec("collimate/Code-v0", num_envs=6, group_size=3, client=local_client)
    assert isinstance(envs.unwrapped, GroupVectorEnv)
    prompts, infos = envs.reset(seed=7)
    assert len(prompts) == 6
    assert prompts[0] == prompts[1] == prompts[2] and prompts[3] == prompts[4] == prompts[5]
    assert list(infos[keys.GROUP]) == [0, 0, 0, 1, 1, 1]
    members = [m for g in envs.unwrapped._groups for m in g.members]
    assert len(set(members)) == 6
    envs.close()


def test_group_step_grades_members_and_advantages(local_client: object, no_leaks: None) -> None:
    envs = GroupVectorEnv(num_envs=4, group_size=4, client=local_client)
    task = envs.tasks.tasks[0]
    envs.reset(seed=0, options={"task_id": task.task_id})
    good = _fenced(task.reference_solution)
    actions = (good, _fenced("import os\nos._exit(3)"), good, _fenced("while True: pass"))
    _, rewards, terminated, truncated, infos = envs.step(actions)
    assert list(rewards) == [1.0, 0.0, 1.0, 0.0]
    assert terminated.all() and not truncated.any()
    assert infos[keys.ADVANTAGE][0] > 0 > infos[keys.ADVANTAGE][1]
    assert np.isclose(infos[keys.ADVANTAGE].sum(), 0.0)
    assert infos[f"_{keys.ADVANTAGE}"].all()
    envs.close()


def test_members_are_isolated(local_client: object, no_leaks: None) -> None:
    envs = GroupVectorEnv(num_envs=2, group_size=2, client=local_client)
    envs.reset(seed=0)
    first, second = envs._groups[0].members
    local_client.session_exec(first, command="echo secret > mine.txt")
    out = local_client.session_exec(second, command="cat mine.txt")
    assert out["exit_code"] != 0
    envs.close()


def test_reset_takes_the_members_forked_ahead(
    local_client: object, no_leaks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    envs = GroupVectorEnv(num_envs=4, group_size=2, client=local_client)
    envs.reset(seed=0)
    first = [m for g in envs._groups for m in g.members]
    _, ahead = envs.forker._spare[1].result()
    envs.reset(seed=1)
    second = [m for g in envs._groups for m in g.members]
    assert second == ahead and not set(first) & set(second)
    out = local_client.session_exec(second[0], command="ls -A /sandbox | wc -l")
    assert out["stdout"].strip() == "0"  # fresh: nothing from the template's parent or episode 1
    _, stale = envs.forker._spare[1].result()
    monkeypatch.setattr(_groups, "SPARE_MAX_AGE_SECONDS", 0.0)
    envs.reset(seed=2)  # members forked ahead but too old: fresh ones instead
    third = [m for g in envs._groups for m in g.members]
    assert not set(third) & (set(second) | set(stale))
    envs.close()


def test_a_lost_parent_is_replaced(local_client: object, no_leaks: None) -> None:
    envs = GroupVectorEnv(num_envs=2, group_size=2, client=local_client)
    envs.reset(seed=0)
    envs.forker._spare[1].result()
    local_client.delete_session(envs.forker.parent)  # e.g. reaped by the node's idle TTL
    for seed in (1, 2):  # the spare was forked before; the next fork finds no parent
        envs.reset(seed=seed)
        task = envs._group_tasks[0]
        _, rewards, *_ = envs.step((_fenced(task.reference_solution),) * 2)
        assert list(rewards) == [1.0, 1.0]
    envs.close()


def test_crn_members_share_seed_vanilla_members_do_not(local_client: object) -> None:
    actions = (_fenced("x = 1"),) * 4
    for mode, shared in (("crn", True), ("vanilla", False)):
        envs = GroupVectorEnv(num_envs=4, group_size=2, seed_mode=mode, client=local_client)
        envs.reset(seed=0)
        _, _, _, _, infos = envs.step(actions)
        seeds = list(infos[keys.SEED])
        assert (seeds[0] == seeds[1]) is shared and seeds[0] != seeds[2]
        envs.close()


def test_autoreset_next_step(local_client: object) -> None:
    envs = GroupVectorEnv(num_envs=2, group_size=2, client=local_client)
    envs.reset(seed=0)
    envs.step(("x",) * 2)
    prompts, rewards, terminated, _, infos = envs.step(("ignored",) * 2)
    assert all(prompts) and not terminated.any() and not rewards.any()
    assert infos[f"_{keys.TASK_ID}"].all()
    envs.close()


def test_autoreset_same_step(local_client: object) -> None:
    envs = GroupVectorEnv(
        num_envs=2, group_size=2, autoreset_mode=AutoresetMode.SAME_STEP, client=local_client
    )
    envs.reset(seed=0)
    prompts, _, terminated, _, infos = envs.step(("x",) * 2)
    assert terminated.all() and all(prompts)
    assert infos["_final_obs"].all() and infos["_final_info"].all()
    assert keys.PASSED in infos["final_info"]
    envs.close()


def test_autoreset_disabled_needs_group_aligned_mask(local_client: object) -> None:
    envs = GroupVectorEnv(
        num_envs=4, group_size=2, autoreset_mode=AutoresetMode.DISABLED, client=local_client
    )
    envs.reset(seed=0)
    envs.step(("x",) * 4)
    with pytest.raises(RuntimeError, match="reset_mask"):
        envs.step(("x",) * 4)
    with pytest.raises(ValueError, match="whole groups"):
        envs.reset(options={"reset_mask": np.array([True, False, False, False])})
    envs.reset(options={"reset_mask": np.array([True, True, True, True])})
    envs.step(("x",) * 4)
    envs.close()


def test_no_sessions_after_close_exception_or_gc(local_client: object) -> None:
    before = _live_sessions(local_client)
    envs = GroupVectorEnv(num_envs=4, group_size=2, client=local_client)
    envs.reset(seed=0)
    envs.forker._spare[1].result()  # the next episode's members, forked ahead
    # the pristine parent + 4 members + 4 spare members
    assert len(_live_sessions(local_client) - before) == 9
    envs.close()
    assert _live_sessions(local_client) == before

    envs = GroupVectorEnv(num_envs=2, group_size=2, client=local_client)
    envs.reset(seed=0)
    with pytest.raises(ValueError):
        envs.step(("only one action",))
    envs = None
    gc.collect()
    assert _live_sessions(local_client) == before


# -- gymnasium's own vector envs -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gymnasium_vector_envs(mode: str, local_node: object, local_client: object) -> None:
    # AsyncVectorEnv needs shared_memory=False: Text observations cannot live in shared memory.
    vector_kwargs = {"shared_memory": False} if mode == "async" else {}
    envs = gym.make_vec(
        "collimate/Code-v0",
        num_envs=2,
        vectorization_mode=mode,
        vector_kwargs=vector_kwargs,
        unix_socket=str(local_node.socket_path),  # type: ignore[attr-defined]
    )
    prompts, infos = envs.reset(seed=5)
    assert len(prompts) == 2 and all(prompts)
    tasks = {t.task_id: t for t in load_task_set("collimate-basic")}
    actions = tuple(_fenced(tasks[tid].reference_solution) for tid in infos[keys.TASK_ID])
    _, rewards, terminated, _, infos = envs.step(actions)
    assert list(rewards) == [1.0, 1.0] and terminated.all()
    envs.close()
