"""Self-tests of the bundled ``collimate-basic`` data (local checker, no sandbox)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import _tasks_basic_source as source
import _tasks_checker as checker
import pytest

from collimate_envs.tasks import PropertyTests, Task, load_task_set

BASIC = load_task_set("collimate-basic")
IDS = [t.task_id for t in BASIC]
PROPERTY = [t for t in BASIC if isinstance(t.tests, PropertyTests)]


def test_shipped_file_matches_authoring_source() -> None:
    shipped = Path(source.DATA_FILE).read_text(encoding="utf-8")
    assert shipped == source.render(), (
        "collimate_basic.jsonl is stale: run .venv/bin/python tests/envs/tasks/_tasks_basic_source.py"
    )


def test_size_and_mix() -> None:
    assert len(BASIC) >= 60
    by_difficulty = Counter(t.difficulty for t in BASIC)
    assert by_difficulty["easy"] >= 25
    assert by_difficulty["medium"] >= 25
    assert by_difficulty["hard"] >= 10
    kinds = Counter(t.kind for t in BASIC)
    assert kinds["unit"] >= 10 and kinds["property"] >= 20 and kinds["io"] >= 6
    for difficulty in ("easy", "medium", "hard"):
        assert {t.kind for t in BASIC.filter(difficulty=difficulty)} >= {"property", "io"}


@pytest.mark.parametrize("task", BASIC, ids=IDS)
def test_task_is_complete(task: Task) -> None:
    assert task.task_id.startswith("basic/")
    assert task.source == "collimate-basic"
    assert task.reference_solution and task.wrong_solution
    assert task.reference_solution != task.wrong_solution
    assert task.tags
    compile(task.reference_solution, f"{task.task_id}:reference", "exec")
    compile(task.wrong_solution, f"{task.task_id}:wrong", "exec")
    if task.entry_point is None:
        assert task.kind == "io"
        assert "standard input" in task.prompt
    else:
        assert f"`{task.entry_point}(" in task.prompt, "the prompt must state the signature"
        assert f"def {task.entry_point}(" in task.reference_solution
    if isinstance(task.tests, PropertyTests):
        assert task.tests.reference == task.reference_solution


@pytest.mark.parametrize("task", BASIC, ids=IDS)
def test_reference_solution_passes(task: Task) -> None:
    assert task.reference_solution is not None
    outcome = checker.run(task, task.reference_solution)
    assert outcome.passed, outcome.failures


@pytest.mark.parametrize("task", BASIC, ids=IDS)
def test_wrong_solution_fails(task: Task) -> None:
    assert task.wrong_solution is not None
    outcome = checker.run(task, task.wrong_solution)
    assert not outcome.passed, "the tests do not discriminate the stored wrong solution"


@pytest.mark.parametrize("task", PROPERTY, ids=[t.task_id for t in PROPERTY])
def test_property_generator_is_valid_and_reproducible(task: Task) -> None:
    spec = task.tests
    assert isinstance(spec, PropertyTests)
    first = checker.generate_inputs(spec)
    assert first == checker.generate_inputs(spec), "same seed, same inputs"
    assert len({repr(args) for args in first}) > 1, "the generator should vary its inputs"
    ns: dict[str, object] = {}
    assert task.reference_solution is not None
    exec(compile(task.reference_solution, task.task_id, "exec"), ns)
    reference = ns[task.entry_point or ""]
    assert callable(reference)
    for args in first:
        assert isinstance(args, tuple), "the generator must give a tuple of positional arguments"
        # Inputs survive a JSON round trip (graders may ship them as JSON).
        assert json.loads(json.dumps(args)) == json.loads(json.dumps(list(args)))
        once = reference(*json.loads(json.dumps(args)))
        twice = reference(*json.loads(json.dumps(args)))
        assert once == twice, "the reference must be deterministic"
        json.dumps(once)


def test_wrong_solutions_fail_under_other_seeds() -> None:
    # Graders may pick their own seed: the stored wrong solutions must still be caught.
    for task in PROPERTY[::4]:
        spec = task.tests
        assert isinstance(spec, PropertyTests)
        reseeded = Task(
            task_id=task.task_id,
            prompt=task.prompt,
            tests=PropertyTests(
                spec.reference, spec.generator, k=spec.k, seed=random.Random(7).randint(1, 10**6)
            ),
            entry_point=task.entry_point,
        )
        assert task.wrong_solution is not None
        assert not checker.run(reseeded, task.wrong_solution).passed, task.task_id
