"""Every bundled ``collimate-repos`` task through Repo-v0's own grader in the sandbox:
the gold patch scores 1.0 and no change 0.0 (the set's own checks run on the host)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from collimate_envs._backend import Backend
from collimate_envs.repo import apply_patch, grade_changes, load_repo_tasks
from collimate_envs.repo._workspace import write_files
from collimate_envs.repo.env import TaskSandboxes

TASKS = load_repo_tasks("collimate-repos").tasks


@pytest.fixture(scope="module")
def sandboxes(local_client: Any) -> Iterator[TaskSandboxes]:
    made = TaskSandboxes(Backend.from_kwargs(local_client, {}), timeout=300)
    yield made
    made.close()


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS, ids=[t.task_id for t in TASKS])
def test_gold_scores_one_and_no_change_zero(sandboxes: TaskSandboxes, task: Any) -> None:
    prepared = sandboxes.prepare(task)
    try:
        gold, empty = prepared.fork(2)
        try:
            write_files(gold, task.workdir, apply_patch(task.files, task.gold_patch))
            graded = grade_changes(prepared, gold)
            assert graded.reward == 1.0, (graded.tests, graded.log_tail[-2000:])
            assert graded.rejected is None and graded.forgeable
            nothing = grade_changes(prepared, empty)
            assert nothing.reward == 0.0 and nothing.diff == ""
            assert any(nothing.tests[t] != "passed" for t in task.fail_to_pass)
        finally:
            gold.close()
            empty.close()
    finally:
        prepared.close()
