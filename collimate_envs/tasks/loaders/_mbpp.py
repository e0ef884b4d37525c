"""MBPP rows: a statement, a reference solution and assert strings."""

from __future__ import annotations

import re
from typing import Final

from collimate_envs.tasks._errors import TaskFormatError
from collimate_envs.tasks._model import AssertTests, Task
from collimate_envs.tasks.loaders._rows import Row, _get, _task_id

__all__ = ["from_mbpp_row"]


_DEF_RE: Final = re.compile(r"^\s*def\s+([A-Za-z_]\w*)\s*\(", re.MULTILINE)
_CALL_RE: Final = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_NOT_ENTRY: Final = frozenset(
    {"assert", "set", "sorted", "list", "tuple", "dict", "len", "abs", "round", "str", "int"}
    | {"float", "bool", "math", "isclose", "all", "any", "frozenset", "max", "min", "sum"}
    | {"type", "isinstance"}
)


def _mbpp_entry_point(code: str, tests: list[str]) -> str:
    defined: list[str] = _DEF_RE.findall(code)
    called: list[str] = [
        name for t in tests for name in _CALL_RE.findall(t) if name not in _NOT_ENTRY
    ]
    for name in called:
        if name in defined:
            return name
    if called:
        return called[0]
    raise TaskFormatError("cannot tell the function under test: no call found in 'test_list'")


def from_mbpp_row(row: Row, *, source: str = "mbpp", index: int = 0) -> Task:
    """Read an MBPP row: ``text`` plus the asserts (the usual MBPP prompt) as the prompt.

    The entry point is the first function defined in ``code`` that the asserts call.
    ``test_imports`` (sanitized MBPP) and ``test_setup_code`` run before the asserts;
    ``challenge_test_list`` is not used.

    >>> t = from_mbpp_row({"task_id": 7, "text": "Add two numbers.",
    ...     "code": "def add(a, b):\\n    return a + b", "test_list": ["assert add(1, 2) == 3"]})
    >>> t.task_id, t.entry_point, t.tests.code
    ('7', 'add', 'assert add(1, 2) == 3')
    """
    del index
    tests = _get(row, "test_list", list)
    if not tests or not all(isinstance(t, str) for t in tests):
        raise TaskFormatError("key 'test_list' must be a non-empty list of assert strings")
    code = _get(row, "code", str).replace("\r\n", "\n")
    setup = _get(row, "test_setup_code", str, default="")
    imports = _get(row, "test_imports", list, default=[])
    if not all(isinstance(line, str) for line in imports):
        raise TaskFormatError("key 'test_imports' must be a list of import strings")
    setup = "\n".join([*imports, setup]).strip()
    text = _get(row, "text", str)
    prompt = f"{text}\nYour code should pass these tests:\n\n" + "\n".join(tests) + "\n"
    return Task(
        task_id=_task_id(row, "task_id"),
        prompt=prompt,
        tests=AssertTests(code="\n".join([setup, *tests]) if setup.strip() else "\n".join(tests)),
        entry_point=_mbpp_entry_point(code, tests),
        reference_solution=code,
        source=source,
    )
