"""CodeContests-style rows: stdin/stdout tests and solutions by language.

>>> row = {"name": "add", "description": "Print a + b.",
...        "public_tests": {"input": ["1 2\\n"], "output": ["3\\n"]},
...        "solutions": {"language": [2, 3], "solution": ["int main(){}", "print(3)"]}}
>>> task = from_codecontests_row(row)
>>> task.task_id, task.tests.cases, sorted(task.solutions), task.reference_solution
('add', (('1 2\\n', '3\\n'),), ['cpp', 'python'], 'print(3)')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collimate_envs.tasks._errors import TaskFormatError
from collimate_envs.tasks._model import Task
from collimate_envs.tasks._tests import IOTests
from collimate_envs.tasks.loaders._languages import CC_DIFFICULTY, by_language

__all__ = ["from_codecontests_row"]


def _io_cases(row: Mapping[str, Any], key: str) -> list[tuple[str, str]]:
    raw = row.get(key)
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise TaskFormatError(f"key {key!r} must be an object with 'input' and 'output' lists")
    inputs, outputs = raw.get("input", []), raw.get("output", [])
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise TaskFormatError(f"key {key!r}: 'input' and 'output' must be lists of one length")
    if not all(isinstance(x, str) for x in inputs + outputs):
        raise TaskFormatError(f"key {key!r}: inputs and outputs must be text")
    return list(zip(inputs, outputs, strict=True))


def from_codecontests_row(
    row: Mapping[str, Any], *, source: str = "codecontests", index: int = 0
) -> Task:
    """Read a CodeContests-style row: stdin/stdout tests and solutions by language.

    The tests are ``public_tests`` then ``private_tests`` (``generated_tests`` are left out:
    there can be hundreds; add them to ``private_tests`` to use them). ``solutions`` and
    ``incorrect_solutions`` give the reference and wrong solutions by language, either as
    CodeContests' ``{"language": [2, 3, 4], "solution": [...]}`` (2 C++, 3 Python 3,
    4 Java; Python 2 is skipped) or as ``{"cpp": "...", "rust": "..."}``. The Python one,
    if any, is also ``reference_solution``. ``memory_limit_bytes`` is kept as the tests'
    memory limit; ``time_limit`` is not applied (it was set for the original judges).
    """
    del index
    name = row.get("name")
    if not isinstance(name, str) or not name:
        raise TaskFormatError("key 'name' must be a non-empty string")
    description = row.get("description")
    if not isinstance(description, str):
        raise TaskFormatError("key 'description' must be a string")
    cases = _io_cases(row, "public_tests") + _io_cases(row, "private_tests")
    if not cases:
        raise TaskFormatError("no tests (public_tests and private_tests are empty)")
    memory = row.get("memory_limit_bytes")
    memory = (
        memory if isinstance(memory, int) and not isinstance(memory, bool) and memory > 0 else None
    )
    solutions = by_language(row.get("solutions"), "solutions")
    wrong = by_language(row.get("incorrect_solutions"), "incorrect_solutions")
    difficulty = row.get("difficulty")
    tags = row.get("cf_tags") or []
    prompt = (
        description.rstrip()
        + "\n\nRead the input from standard input and write the answer to standard output.\n"
    )
    return Task(
        task_id=name,
        prompt=prompt,
        tests=IOTests(cases=tuple(cases), memory_limit_bytes=memory),
        difficulty=CC_DIFFICULTY.get(difficulty) if isinstance(difficulty, int) else None,
        reference_solution=solutions.get("python"),
        wrong_solution=wrong.get("python"),
        source=source,
        tags=tuple(t for t in tags if isinstance(t, str)),
        solutions=solutions,
        wrong_solutions=wrong,
    )
