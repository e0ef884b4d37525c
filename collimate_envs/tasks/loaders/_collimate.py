"""The collimate task format (our own, the bundled set's): rows to tasks and back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from collimate_envs.tasks._errors import TaskFormatError
from collimate_envs.tasks._model import (
    AssertTests,
    Difficulty,
    FunctionCallTests,
    IOTests,
    ProgramTests,
    PropertyTests,
    Task,
    TestSpec,
    UnitTests,
)
from collimate_envs.tasks.loaders._languages import language_fields, program_tests
from collimate_envs.tasks.loaders._rows import Row, _get, _task_id

__all__ = ["from_collimate_row", "to_collimate_row"]


def _case_args(raw: Any, where: str) -> tuple[Any, ...]:
    if not isinstance(raw, list):
        raise TaskFormatError(f"{where}: 'args' must be a list of positional arguments")
    return tuple(raw)


def _tests_from_json(raw: Any, reference: str | None) -> TestSpec:
    if not isinstance(raw, Mapping):
        raise TaskFormatError("key 'tests' must be an object with a 'kind'")
    kind = _get(raw, "kind", str)
    if kind in ("unit", "function_call"):
        cases_raw = _get(raw, "cases", list)
        cases = []
        for i, case in enumerate(cases_raw):
            if not isinstance(case, Mapping) or "args" not in case or "expected" not in case:
                raise TaskFormatError(f"tests.cases[{i}] must be an object with 'args', 'expected'")
            cases.append((_case_args(case["args"], f"tests.cases[{i}]"), case["expected"]))
        if kind == "unit":
            return UnitTests(cases=tuple(cases))
        return FunctionCallTests(
            fn_name=_get(raw, "fn_name", str),
            cases=tuple(cases),
            accept_wrapped=_get(raw, "accept_wrapped", bool, default=False),
        )
    if kind == "assert":
        return AssertTests(
            code=_get(raw, "code", str), check_fn=_get(raw, "check_fn", str, default=None)
        )
    if kind == "property":
        ref = _get(raw, "reference", str, default=reference)
        if ref is None:
            raise TaskFormatError("property tests need 'reference' or a reference_solution")
        return PropertyTests(
            reference=ref,
            generator=_get(raw, "generator", str),
            k=_get(raw, "k", int, default=50),
            seed=_get(raw, "seed", int, default=0),
        )
    if kind == "io":
        cases_io = []
        for i, case in enumerate(_get(raw, "cases", list)):
            if not isinstance(case, Mapping):
                raise TaskFormatError(f"tests.cases[{i}] must be an object with 'stdin', 'stdout'")
            cases_io.append((_get(case, "stdin", str), _get(case, "stdout", str)))
        memory = _get(raw, "memory_limit_bytes", int, default=None)
        return IOTests(cases=tuple(cases_io), memory_limit_bytes=memory)
    if kind == "program":
        return program_tests(raw)
    raise TaskFormatError(
        f"unknown tests.kind {kind!r}; expected unit, function_call, assert, property, io or program"
    )


def _difficulty(value: Any) -> Difficulty | None:
    if value is None:
        return None
    if value not in ("easy", "medium", "hard"):
        raise TaskFormatError(f"difficulty must be easy, medium or hard, got {value!r}")
    return cast(Difficulty, value)


def from_collimate_row(row: Row, *, source: str = "", index: int = 0) -> Task:
    """Read a row of the collimate task format (the bundled set's format).

    Keys: ``task_id``, ``prompt``, ``tests`` (an object with ``kind`` in ``unit``,
    ``function_call``, ``assert``, ``property``, ``io``, ``program``), and optionally
    ``entry_point``, ``difficulty``, ``reference_solution``, ``wrong_solution``, ``tags``,
    ``starter_code``, ``language``, ``solutions`` and ``wrong_solutions`` (objects mapping a
    language name to source).
    A property test's ``reference`` defaults to the row's ``reference_solution``.

    Args:
        row: the decoded JSON object.
        source: the set name to record on the task.
        index: the row's position (unused; accepted for a uniform loader signature).

    >>> t = from_collimate_row({"task_id": "a", "prompt": "Print hi.",
    ...     "tests": {"kind": "io", "cases": [{"stdin": "", "stdout": "hi\\n"}]}})
    >>> t.tests.cases
    (('', 'hi\\n'),)
    """
    del index
    reference = _get(row, "reference_solution", str, default=None)
    tags = _get(row, "tags", list, default=[])
    if not all(isinstance(tag, str) for tag in tags):
        raise TaskFormatError("key 'tags' must be a list of strings")
    return Task(
        task_id=_task_id(row, "task_id"),
        prompt=_get(row, "prompt", str),
        tests=_tests_from_json(row.get("tests"), reference),
        entry_point=_get(row, "entry_point", str, default=None),
        difficulty=_difficulty(row.get("difficulty")),
        reference_solution=reference,
        wrong_solution=_get(row, "wrong_solution", str, default=None),
        source=source,
        tags=tuple(tags),
        starter_code=_get(row, "starter_code", str, default=None),
        **language_fields(row),
    )


def to_collimate_row(task: Task) -> dict[str, Any]:
    """The collimate-format JSON object for a task (the inverse of :func:`from_collimate_row`).

    >>> from collimate_envs.tasks._model import UnitTests
    >>> t = Task("d", "Double it.", UnitTests(cases=(((2,), 4),)), entry_point="double")
    >>> to_collimate_row(t)["tests"]
    {'kind': 'unit', 'cases': [{'args': [2], 'expected': 4}]}
    """
    spec = task.tests
    tests: dict[str, Any] = {"kind": spec.kind}
    if isinstance(spec, (UnitTests, FunctionCallTests)):
        if isinstance(spec, FunctionCallTests):
            tests["fn_name"] = spec.fn_name
            if spec.accept_wrapped:
                tests["accept_wrapped"] = True
        tests["cases"] = [{"args": list(args), "expected": exp} for args, exp in spec.cases]
    elif isinstance(spec, AssertTests):
        tests["code"] = spec.code
        if spec.check_fn is not None:
            tests["check_fn"] = spec.check_fn
    elif isinstance(spec, PropertyTests):
        if spec.reference != task.reference_solution:
            tests["reference"] = spec.reference
        tests.update(generator=spec.generator, k=spec.k, seed=spec.seed)
    elif isinstance(spec, ProgramTests):
        tests.update(tests=spec.tests, stop_tokens=list(spec.stop_tokens))
    else:
        tests["cases"] = [{"stdin": i, "stdout": o} for i, o in spec.cases]
        if spec.memory_limit_bytes is not None:
            tests["memory_limit_bytes"] = spec.memory_limit_bytes
    row: dict[str, Any] = {"task_id": task.task_id, "prompt": task.prompt}
    optional = {
        "entry_point": task.entry_point,
        "difficulty": task.difficulty,
        "tags": list(task.tags) or None,
        "starter_code": task.starter_code,
    }
    row.update({k: v for k, v in optional.items() if v is not None})
    row["tests"] = tests
    for key in ("reference_solution", "wrong_solution"):
        value = getattr(task, key)
        if value is not None:
            row[key] = value
    if task.language is not None:
        row["language"] = task.language
    for key in ("solutions", "wrong_solutions"):
        if getattr(task, key):
            row[key] = dict(getattr(task, key))
    return row
