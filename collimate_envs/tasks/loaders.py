"""Pure functions turning one JSON row of a known dataset format into a :class:`Task`.

Every function raises :class:`TaskFormatError` (without a location; the file reader adds the
path and line) when the row does not have the expected shape.

=================  =========================================================================
format             row keys -> task
=================  =========================================================================
``collimate``      ``task_id, prompt, tests{kind,...}`` -> any test kind (our own format)
``humaneval``      ``task_id, prompt, canonical_solution, test, entry_point`` -> AssertTests
``mbpp``           ``task_id, text, code, test_list`` -> AssertTests
``livecodebench``  ``question_content, public/private_test_cases`` or SkyRL ``reward_spec``
                   -> IOTests (stdin) or FunctionCallTests (functional)
``apps``           ``problem_id, question, input_output, solutions`` -> IOTests or
                   FunctionCallTests (``fn_name``)
``codecontests``   ``name, description, public/private_tests, solutions`` -> IOTests with
                   reference solutions by language
``multipl_e``      ``name, language, prompt, tests, stop_tokens`` -> ProgramTests
=================  =========================================================================

>>> row = {"task_id": "T/0", "prompt": "def inc(x):\\n", "canonical_solution": "    return x + 1\\n",
...        "test": "def check(candidate):\\n    assert candidate(1) == 2\\n", "entry_point": "inc"}
>>> detect_format(row)
'humaneval'
>>> task = from_humaneval_row(row)
>>> task.kind, task.entry_point, task.tests.check_fn
('assert', 'inc', 'check')
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import zlib
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, cast

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
from collimate_envs.tasks._polyglot_rows import (
    from_codecontests_row,
    from_multipl_e_row,
    language_fields,
    program_tests,
)

__all__ = [
    "FORMATS",
    "LOADERS",
    "RowLoader",
    "detect_format",
    "from_apps_row",
    "from_codecontests_row",
    "from_collimate_row",
    "from_humaneval_row",
    "from_livecodebench_row",
    "from_mbpp_row",
    "from_multipl_e_row",
    "to_collimate_row",
]

Row = Mapping[str, Any]
RowLoader = Callable[..., Task]
T = TypeVar("T")

_MISSING: Final = object()


def _get(row: Row, key: str, typ: type[T] | tuple[type, ...], *, default: Any = _MISSING) -> T:
    """``row[key]``, checked to be of ``typ`` (``None`` counts as absent when a default exists)."""
    value = row.get(key, _MISSING)
    if value is _MISSING or (value is None and default is not _MISSING):
        if default is _MISSING:
            raise TaskFormatError(f"missing key {key!r}")
        return cast(T, default)
    if not isinstance(value, typ) or (isinstance(value, bool) and typ is not bool):
        names = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise TaskFormatError(f"key {key!r} must be {names}, got {type(value).__name__}")
    return cast(T, value)


def _json_field(row: Row, key: str, *, default: Any = _MISSING) -> Any:
    """A field that datasets store either as JSON text or already decoded."""
    value = row.get(key, _MISSING)
    if value is _MISSING or value is None or value == "":
        if default is _MISSING:
            raise TaskFormatError(f"missing key {key!r}")
        return default
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise TaskFormatError(f"key {key!r} holds invalid JSON text: {exc}") from exc


def _task_id(row: Row, key: str) -> str:
    value: str | int = _get(row, key, (str, int))
    return str(value)


# --------------------------------------------------------------------------------------------
# collimate (our own format)


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


# --------------------------------------------------------------------------------------------
# HumanEval and MBPP


def from_humaneval_row(row: Row, *, source: str = "humaneval", index: int = 0) -> Task:
    """Read a HumanEval row: the prompt is the function header and docstring to complete.

    The reference solution is ``prompt + canonical_solution``; the tests are the row's
    ``check(candidate)`` function, called with the entry point.
    """
    del index
    prompt = _get(row, "prompt", str)
    entry_point = _get(row, "entry_point", str)
    return Task(
        task_id=_task_id(row, "task_id"),
        prompt=prompt,
        tests=AssertTests(code=_get(row, "test", str), check_fn="check"),
        entry_point=entry_point,
        reference_solution=prompt + _get(row, "canonical_solution", str),
        source=source,
        starter_code=prompt,
    )


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


# --------------------------------------------------------------------------------------------
# LiveCodeBench (and SkyRL's lcb rows) and APPS


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


def _with_instructions(statement: str, starter: str, stdin: bool) -> str:
    parts = [statement.rstrip()]
    if starter.strip():
        parts.append(f"Complete this starter code:\n```python\n{starter.rstrip()}\n```")
    if stdin:
        parts.append("Read the input from standard input and write the answer to standard output.")
    return "\n\n".join(parts) + "\n"


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


# --------------------------------------------------------------------------------------------
# format detection

#: The loader for each format name.
LOADERS: Final[dict[str, RowLoader]] = {
    "collimate": from_collimate_row,
    "humaneval": from_humaneval_row,
    "mbpp": from_mbpp_row,
    "livecodebench": from_livecodebench_row,
    "apps": from_apps_row,
    "codecontests": from_codecontests_row,
    "multipl_e": from_multipl_e_row,
}
#: The accepted ``format`` values (``"auto"`` detects the format from the first row).
FORMATS: Final = ("auto", *LOADERS)

_SIGNATURES: Final = (
    ("collimate", frozenset({"task_id", "prompt", "tests"})),
    ("humaneval", frozenset({"task_id", "prompt", "canonical_solution", "test", "entry_point"})),
    ("mbpp", frozenset({"text", "code", "test_list"})),
    ("livecodebench", frozenset({"question_content"})),
    ("livecodebench", frozenset({"reward_spec"})),
    ("apps", frozenset({"question", "input_output"})),
    ("codecontests", frozenset({"name", "description", "public_tests"})),
    ("multipl_e", frozenset({"name", "language", "prompt", "tests"})),
)


def detect_format(row: Row) -> str | None:
    """The format a row looks like, judged by its keys, or ``None``.

    >>> detect_format({"text": "...", "code": "...", "test_list": []})
    'mbpp'
    >>> detect_format({"foo": 1}) is None
    True
    """
    keys = set(row)
    for name, required in _SIGNATURES:
        if required <= keys:
            return name
    return None
