"""Every solution of the bundled ``collimate-polyglot`` set, graded on one real node.

Each problem's reference solution must score 1.0 and its wrong one below 1.0, in every
built-in language: one batch per language on the suite's node (a few grades in flight).
"""

from __future__ import annotations

from typing import Any

import pytest

from collimate_envs.tasks import load_task_set
from collimate_rl.grading import grade_batch

from ._programs import FENCE, LANGUAGES, fenced

pytestmark = pytest.mark.bwrap

POLYGLOT = load_task_set("collimate-polyglot")


@pytest.mark.parametrize("lang", ["python", *LANGUAGES])
def test_reference_solutions_pass_and_wrong_ones_fail(
    lang: str, local_client: Any, need: Any
) -> None:
    template = "python3" if lang == "python" else lang
    need(template)
    completions, specs, labels = [], [], []
    for task in POLYGLOT:
        spec = task.to_reward_spec()
        for kind, code in (("ref", task.solution(lang)), ("wrong", task.wrong_solution_in(lang))):
            assert code is not None
            completions.append(fenced(code, FENCE[lang]))
            specs.append(spec)
            labels.append((task.task_id, kind))
    results = grade_batch(
        local_client, template, completions, specs, concurrency=3, timeout_seconds=60
    )
    failures = []
    for (task_id, kind), result in zip(labels, results, strict=True):
        ok = result.reward == 1.0 if kind == "ref" else result.reward < 1.0
        if not ok or result.infra_error:
            failures.append((task_id, kind, result.reward, result.error, result.tests[:2]))
    assert not failures, failures
