"""Rows and answers for the examples whose framework does not train here (verl, slime, SkyRL, OpenEnv).

Those examples exercise a framework's own reward or environment path with real tasks of
``collimate-basic`` and real grading; what stands in is the *policy*: instead of a model's
samples, each group gets a fixed mix of answers per task, so the rewards must differ
within a group:

* the task's reference solution (passes every test);
* its hand-written wrong solution (passes some tests);
* a stub that returns ``None`` (parses, passes none);
* prose with no code (nothing to run).

Multi-turn examples follow :data:`PLANS` (e.g. wrong first, then the reference after the
test feedback). To scale up, replace :func:`answer` with your model's samples.

>>> [task.task_id for task in easy_unit_tasks(2)]
['basic/count-vowels', 'basic/clean-palindrome']
>>> asserts_ground_truth(easy_unit_tasks(1)[0])[0]
"assert count_vowels('') == 0"
>>> len(answers(easy_unit_tasks(1)[0]))
4
"""

from __future__ import annotations

from collimate_envs.tasks import Task, load_task_set


def easy_unit_tasks(count: int) -> list[Task]:
    """The first ``count`` easy unit-test tasks of ``collimate-basic`` that have a wrong solution."""
    tasks = [
        task
        for task in load_task_set("collimate-basic")
        if task.kind == "unit" and task.difficulty == "easy" and task.wrong_solution
    ]
    return tasks[:count]


def asserts_ground_truth(task: Task) -> list[str]:
    """The task's unit tests as assert statements: a ground truth every adapter reads."""
    name = task.entry_point
    return [
        f"assert {name}({', '.join(map(repr, args))}) == {expected!r}"
        for args, expected in task.tests.cases
    ]


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}```\n"


#: The answers of a group, in order.
KINDS = ("reference", "wrong", "stub", "prose")
#: Multi-turn plans, one per member of a group, turn by turn: solve at once; fix after the
#: test feedback; stay wrong; no code, then a stub.
PLANS = (("reference",), ("wrong", "reference"), ("wrong", "wrong"), ("prose", "stub"))


def answer(task: Task, kind: str) -> str:
    """One answer to ``task``: ``reference``, ``wrong``, ``stub`` (returns None) or ``prose``."""
    assert task.reference_solution and task.wrong_solution and task.entry_point
    if kind == "reference":
        return fenced(task.reference_solution)
    if kind == "wrong":
        return fenced(task.wrong_solution)
    if kind == "stub":
        return fenced(f"def {task.entry_point}(*args):\n    return None\n")
    return "I am not sure how to solve this."


def answers(task: Task) -> list[str]:
    """One group of answers to ``task``, one of each of :data:`KINDS`."""
    return [answer(task, kind) for kind in KINDS]
