"""APPS rows: call-based (``fn_name``) or stdin/stdout tests, difficulties by contest level."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from collimate_envs.tasks._errors import TaskFormatError
from collimate_envs.tasks._model import Difficulty, FunctionCallTests, IOTests, Task, TestSpec
from collimate_envs.tasks.loaders._rows import (
    Row,
    _get,
    _json_field,
    _task_id,
    _with_instructions,
)

__all__ = ["from_apps_row"]


_APPS_DIFFICULTY: Final[dict[str, Difficulty]] = {
    "introductory": "easy",
    "interview": "medium",
    "competition": "hard",
}


def _apps_text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + "\n"
    raise TaskFormatError(f"{where} must be a string (or a list of lines)")


def from_apps_row(row: Row, *, source: str = "apps", index: int = 0) -> Task:
    """Read an APPS row. With ``fn_name`` the tests are call-based, otherwise stdin/stdout.

    Difficulties map introductory/interview/competition to easy/medium/hard. The first of
    ``solutions`` becomes the reference solution. Call-based expected values keep APPS's
    quirk that ``[x]`` also accepts ``x`` (``accept_wrapped``).

    >>> t = from_apps_row({"problem_id": 5, "question": "Echo the number.", "difficulty": "interview",
    ...     "input_output": '{"inputs": ["4\\\\n"], "outputs": ["4\\\\n"]}', "solutions": '["print(input())"]'})
    >>> t.task_id, t.difficulty, t.tests.cases, t.reference_solution
    ('5', 'medium', (('4\\n', '4\\n'),), 'print(input())')
    """
    del index
    io_spec = _json_field(row, "input_output")
    if not isinstance(io_spec, Mapping):
        raise TaskFormatError("key 'input_output' must be a JSON object with inputs/outputs")
    inputs, outputs = io_spec.get("inputs"), io_spec.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or not inputs:
        raise TaskFormatError("input_output needs non-empty 'inputs' and 'outputs' lists")
    if len(inputs) != len(outputs):
        raise TaskFormatError(
            f"input_output has {len(inputs)} inputs but {len(outputs)} outputs; they must pair up"
        )
    fn_name = io_spec.get("fn_name")
    tests: TestSpec
    if fn_name is not None:
        if not isinstance(fn_name, str):
            raise TaskFormatError("input_output.fn_name must be a string")
        if not all(isinstance(i, list) for i in inputs):
            raise TaskFormatError("call-based inputs must be lists of arguments")
        cases = tuple((tuple(i), o) for i, o in zip(inputs, outputs, strict=True))
        tests = FunctionCallTests(fn_name=fn_name, cases=cases, accept_wrapped=True)
    else:
        tests = IOTests(
            cases=tuple(
                (_apps_text(i, f"inputs[{n}]"), _apps_text(o, f"outputs[{n}]"))
                for n, (i, o) in enumerate(zip(inputs, outputs, strict=True))
            )
        )
    solutions = _json_field(row, "solutions", default=[])
    if not isinstance(solutions, list) or not all(isinstance(s, str) for s in solutions):
        raise TaskFormatError("key 'solutions' must be a JSON list of strings")
    starter = _get(row, "starter_code", str, default="")
    difficulty = row.get("difficulty")
    return Task(
        task_id=_task_id(row, "problem_id"),
        prompt=_with_instructions(_get(row, "question", str), starter, isinstance(tests, IOTests)),
        tests=tests,
        entry_point=fn_name,
        difficulty=_APPS_DIFFICULTY.get(difficulty) if isinstance(difficulty, str) else None,
        reference_solution=solutions[0] if solutions else None,
        source=source,
        starter_code=starter or None,
    )
