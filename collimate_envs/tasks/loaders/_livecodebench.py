"""LiveCodeBench rows (and SkyRL's ``lcb`` rows): stdin/stdout or functional test cases."""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from collections.abc import Mapping
from typing import Any

from collimate_envs.tasks._errors import TaskFormatError
from collimate_envs.tasks._model import FunctionCallTests, IOTests, Task, TestSpec
from collimate_envs.tasks.loaders._rows import (
    Row,
    _get,
    _json_field,
    _task_id,
    _with_instructions,
)

__all__ = ["from_livecodebench_row"]


class _StrOnlyUnpickler(pickle.Unpickler):
    """Unpickles plain data only: LiveCodeBench pickles a JSON *string*; refuse any object."""

    def find_class(self, module: str, name: str) -> Any:
        raise TaskFormatError(f"refusing to unpickle {module}.{name} from a test-case field")


def _lcb_cases(value: Any, key: str) -> list[Any]:
    """Decode LiveCodeBench test cases: a list, JSON text, or base64(zlib(pickle(JSON text)))."""
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        raise TaskFormatError(f"key {key!r} must be a JSON string or a list")
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError:
        try:
            raw = zlib.decompress(base64.b64decode(value.encode("ascii"), validate=True))
            text = _StrOnlyUnpickler(io.BytesIO(raw)).load()
            decoded = json.loads(text) if isinstance(text, (str, bytes)) else text
        except TaskFormatError:
            raise
        except Exception as exc:  # any decoding failure means the field is malformed
            raise TaskFormatError(
                f"key {key!r} is neither JSON nor LiveCodeBench's compressed encoding: {exc}"
            ) from exc
    if not isinstance(decoded, list):
        raise TaskFormatError(f"key {key!r} must decode to a list of test cases")
    return decoded


def _functional_args(text: str, where: str) -> tuple[Any, ...]:
    try:
        return tuple(json.loads(line) for line in text.split("\n") if line.strip())
    except json.JSONDecodeError as exc:
        raise TaskFormatError(
            f"{where}: functional input lines must be JSON values: {exc}"
        ) from exc


def _lcb_tests(cases: list[Any], func_name: str | None) -> TestSpec:
    if not cases:
        raise TaskFormatError("no test cases (public, private or ground_truth)")
    for i, case in enumerate(cases):
        if not (
            isinstance(case, Mapping)
            and isinstance(case.get("input"), str)
            and isinstance(case.get("output"), str)
        ):
            raise TaskFormatError(f"test case {i} must be an object with string 'input', 'output'")
    testtype = cases[0].get("testtype", "stdin")
    if testtype == "stdin":
        return IOTests(cases=tuple((c["input"], c["output"]) for c in cases))
    if testtype != "functional":
        raise TaskFormatError(f"testtype must be 'stdin' or 'functional', got {testtype!r}")
    if func_name is None:
        meta = cases[0].get("metadata")
        func_name = meta.get("func_name") if isinstance(meta, Mapping) else None
    if not isinstance(func_name, str):
        raise TaskFormatError("functional tests need metadata.func_name")
    parsed = []
    for i, c in enumerate(cases):
        try:
            expected = json.loads(c["output"])
        except json.JSONDecodeError as exc:
            raise TaskFormatError(f"test case {i}: output must be a JSON value: {exc}") from exc
        parsed.append((_functional_args(c["input"], f"test case {i}"), expected))
    return FunctionCallTests(fn_name=func_name, cases=tuple(parsed))


def _skyrl_row(row: Row, source: str, index: int) -> Task:
    spec = _get(row, "reward_spec", Mapping)
    cases = _lcb_cases(spec.get("ground_truth"), "reward_spec.ground_truth")
    tests = _lcb_tests(cases, None)
    raw_prompt = row.get("prompt")
    if isinstance(raw_prompt, str):
        prompt = raw_prompt
    elif isinstance(raw_prompt, list) and all(
        isinstance(m, Mapping) and isinstance(m.get("content"), str) for m in raw_prompt
    ):
        prompt = "\n\n".join(m["content"] for m in raw_prompt if m.get("role", "user") == "user")
    else:
        raise TaskFormatError("key 'prompt' must be a string or a list of chat messages")
    extra = row.get("extra_info")
    extra = extra if isinstance(extra, Mapping) else {}
    task_id = next(
        (str(v) for v in (row.get("task_id"), extra.get("task_id"), extra.get("index")) if v),
        f"{source}/{index}",
    )
    return Task(
        task_id=task_id,
        prompt=prompt,
        tests=tests,
        entry_point=tests.fn_name if isinstance(tests, FunctionCallTests) else None,
        source=source,
    )


def from_livecodebench_row(row: Row, *, source: str = "livecodebench", index: int = 0) -> Task:
    """Read a LiveCodeBench row, or a SkyRL ``lcb`` row carrying ``reward_spec.ground_truth``.

    Public and private test cases are merged. The first case's ``testtype`` decides the kind:
    ``stdin`` gives :class:`IOTests`; ``functional`` gives :class:`FunctionCallTests` (each
    input line is one JSON argument, the output one JSON value; ``metadata.func_name`` names
    the function). Compressed private cases (base64 + zlib + pickled JSON text) are decoded
    without unpickling any object.

    >>> t = from_livecodebench_row({"question_id": "q1", "question_content": "Sum a and b.",
    ...     "public_test_cases": '[{"input": "1\\\\n2", "output": "3", "testtype": "functional"}]',
    ...     "metadata": '{"func_name": "add"}', "difficulty": "easy"})
    >>> t.tests.fn_name, t.tests.cases
    ('add', (((1, 2), 3),))
    """
    if "reward_spec" in row and "question_content" not in row:
        return _skyrl_row(row, source, index)
    meta = _json_field(row, "metadata", default={})
    if not isinstance(meta, Mapping):
        raise TaskFormatError("key 'metadata' must be an object (or its JSON text)")
    cases = _lcb_cases(row.get("public_test_cases"), "public_test_cases") + _lcb_cases(
        row.get("private_test_cases"), "private_test_cases"
    )
    func_name = meta.get("func_name")
    tests = _lcb_tests(cases, func_name if isinstance(func_name, str) else None)
    starter = _get(row, "starter_code", str, default="")
    title = _get(row, "question_title", str, default="")
    statement = _get(row, "question_content", str)
    if title:
        statement = f"{title}\n\n{statement}"
    difficulty = row.get("difficulty")
    key = "question_id" if "question_id" in row else "task_id"
    return Task(
        task_id=_task_id(row, key) if key in row else f"{source}/{index}",
        prompt=_with_instructions(statement, starter, isinstance(tests, IOTests)),
        tests=tests,
        entry_point=tests.fn_name if isinstance(tests, FunctionCallTests) else None,
        difficulty=difficulty if difficulty in ("easy", "medium", "hard") else None,
        source=source,
        starter_code=starter or None,
    )
