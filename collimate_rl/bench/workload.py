"""The rollouts every GRPO runner grades: tasks, completions, and the same work for each runner.

Each group member answers with the task's reference solution (even members) or a wrong one
(odd members), so the pass and the fail paths both run. The unisolated runners get the same
(task, completion) pairs the vector env graded, as a plain test program
(:func:`plain_program`); skyrl-gym's LiveCodeBench grader gets them as its ground-truth rows
(:func:`lcb_case`).

>>> from collimate_envs.tasks import load_task_set
>>> task = load_task_set("collimate-basic")["basic/count-vowels"]
>>> right, wrong = group_completions(task, 2)
>>> right.startswith("```python\\n"), right == wrong
(True, False)
>>> program = plain_program(task, right)
>>> import subprocess, sys
>>> subprocess.run([sys.executable, "-c", program]).returncode
0
>>> subprocess.run([sys.executable, "-c", plain_program(task, wrong)], capture_output=True).returncode
1
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass
from typing import Any

from collimate_envs.tasks import (
    AssertTests,
    FunctionCallTests,
    IOTests,
    ProgramTests,
    PropertyTests,
    Task,
    UnitTests,
)
from collimate_rl.grading import extract_code

__all__ = ["LCBCase", "Rollout", "group_completions", "lcb_case", "plain_program"]


@dataclass(frozen=True)
class Rollout:
    """One graded completion: the task, the model's answer, and whether it should pass."""

    task: Task
    completion: str
    should_pass: bool


def _fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def _wrong_solution(task: Task) -> str:
    if task.wrong_solution is not None:
        return task.wrong_solution
    if task.entry_point is None:
        return "print()\n"
    # HumanEval ships no wrong answers: a stub that returns None fails its asserts.
    return f"def {task.entry_point}(*args, **kwargs):\n    return None\n"


def group_completions(task: Task, size: int, tag: str = "0") -> list[str]:
    """``size`` fenced completions: the reference solution for even members, a wrong one for odd.

    Each ends with its own comment (``# sample <tag>.<member>``): a model's samples differ in
    their text even when they give the same answer, so no two are read once for all (the
    client's source analysis keeps recent results). Give each group of a run its own ``tag``.

    Raises:
        ValueError: the task has no reference solution.
    """
    if task.reference_solution is None:
        raise ValueError(f"task {task.task_id!r} has no reference solution to benchmark with")
    answers = (task.reference_solution, _wrong_solution(task))
    return [_fence(f"{answers[i % 2].rstrip()}\n# sample {tag}.{i}") for i in range(size)]


# -- the unisolated runners' program ------------------------------------------------------

_NORM = """
def _norm(value):
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value
"""

_CALLS = """
import json as _json
{norm}
_target = {target}
for _args, _want in _json.loads({cases!r}):
    assert _norm(_target(*_args)) == _want, (_args, _want)
"""

_PROPERTY = """
import copy as _copy, random as _random
{norm}
_ref_ns = {{}}
exec({reference!r}, _ref_ns)
_rng = _random.Random({seed})
for _ in range({k}):
    _args = eval({generator!r}, {{"random": _rng}})
    assert _norm({entry}(*_copy.deepcopy(_args))) == _norm(_ref_ns[{entry!r}](*_args)), _args
"""

_IO = """
import contextlib as _contextlib, io as _io, sys as _sys
def _lines(text):
    lines = [line.strip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines
for _stdin, _want in {cases!r}:
    _sys.stdin, _out = _io.StringIO(_stdin), _io.StringIO()
    with _contextlib.redirect_stdout(_out):
        exec({code!r}, {{"__name__": "__main__"}})
    assert _lines(_out.getvalue()) == _lines(_want), (_stdin, _want)
"""


def plain_program(task: Task, completion: str) -> str:
    """A self-contained program that exits 0 iff ``completion`` passes ``task``'s tests.

    What an unisolated grader runs: the candidate's code and the tests in one process, no
    oracle, no isolation. Property inputs come from ``PropertyTests.seed``.
    """
    code = extract_code(completion)
    tests = task.tests
    if isinstance(tests, AssertTests):
        assert task.entry_point is not None  # the task model guarantees it
        return f"{code}\n\n{tests.script(task.entry_point)}"
    if isinstance(tests, (UnitTests, FunctionCallTests)):
        name = tests.fn_name if isinstance(tests, FunctionCallTests) else str(task.entry_point)
        target = f"Solution().{name}" if "class Solution" in code else name
        cases = json.dumps([[list(args), want] for args, want in tests.cases])
        return code + "\n" + _CALLS.format(norm=_NORM, target=target, cases=cases)
    if isinstance(tests, PropertyTests):
        return code + _PROPERTY.format(
            norm=_NORM,
            reference=tests.reference,
            seed=tests.seed,
            k=tests.k,
            generator=tests.generator,
            entry=task.entry_point,
        )
    if isinstance(tests, ProgramTests):  # MultiPL-E: the program checks itself
        raise ValueError("plain_program grades Python tasks; MultiPL-E rows are whole programs")
    return _IO.format(cases=list(tests.cases), code=code)


# -- skyrl-gym's LiveCodeBench rows --------------------------------------------------------


@dataclass(frozen=True)
class LCBCase:
    """A rollout in skyrl-gym's ``lcb`` format: the completion it grades and its test rows."""

    completion: str
    tests: list[dict[str, Any]]


def _functional(fn_name: str, cases: list[tuple[tuple[Any, ...], Any]]) -> list[dict[str, Any]]:
    return [
        {
            "input": "\n".join(json.dumps(arg) for arg in args),
            "output": json.dumps(want),
            "testtype": "functional",
            "metadata": {"func_name": fn_name},
        }
        for args, want in cases
    ]


def _property_cases(task: Task, tests: PropertyTests) -> list[tuple[tuple[Any, ...], Any]]:
    # LCB rows are fixed input/output pairs: draw the inputs and run the (trusted, bundled)
    # reference here, once, to get the outputs.
    namespace: dict[str, Any] = {}
    exec(tests.reference, namespace)
    reference = namespace[str(task.entry_point)]
    rng = random.Random(tests.seed)
    cases = []
    for _ in range(tests.k):
        args = tuple(eval(tests.generator, {"random": rng}))
        cases.append((args, json.loads(json.dumps(reference(*copy.deepcopy(args))))))
    return cases


def lcb_case(task: Task, completion: str) -> LCBCase:
    """``task``'s tests as skyrl-gym ``lcb`` ground-truth rows (``reward_spec.ground_truth``).

    Unit, function-call and property tests become ``functional`` rows (property inputs drawn
    once, outputs from the reference); stdin/stdout tests ``stdin`` rows. Assert tests
    (HumanEval) have no LCB form: the completion carries the test script after the code and
    one ``stdin`` row expects empty output, so LCB's program runner executes the asserts.

    >>> from collimate_envs.tasks import load_task_set
    >>> task = load_task_set("collimate-basic")["basic/count-vowels"]
    >>> case = lcb_case(task, "```python\\ndef count_vowels(s):\\n    return 0\\n```")
    >>> case.tests[2]["input"], case.tests[2]["output"], case.tests[2]["metadata"]
    ('"Education"', '5', {'func_name': 'count_vowels'})
    """
    tests = task.tests
    if isinstance(tests, UnitTests):
        return LCBCase(completion, _functional(str(task.entry_point), list(tests.cases)))
    if isinstance(tests, FunctionCallTests):
        return LCBCase(completion, _functional(tests.fn_name, list(tests.cases)))
    if isinstance(tests, PropertyTests):
        cases = _property_cases(task, tests)
        return LCBCase(completion, _functional(str(task.entry_point), cases))
    if isinstance(tests, IOTests):
        rows = [
            {"input": stdin, "output": stdout, "testtype": "stdin", "metadata": {}}
            for stdin, stdout in tests.cases
        ]
        return LCBCase(completion, rows)
    program = plain_program(task, completion)
    return LCBCase(
        _fence(program), [{"input": "", "output": "", "testtype": "stdin", "metadata": {}}]
    )
