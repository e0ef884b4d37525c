"""Reward specs: how a candidate program is graded inside the sandbox.

A spec turns a candidate's source into one exec: ``code`` is the generic
harness (no secrets in it) and ``files`` carries one JSON payload with the
tests. The harness prints a single result frame,
``COLLIMATE_RESULT <nonce> <json>``, which :meth:`RewardSpec.read_frame`
checks against the nonce the caller chose.

>>> spec = UnitTestReward([{"input": [2, 3], "expected": 5}], entry="add")
>>> program = spec.build("def add(a, b):\\n    return a + b\\n", nonce="ab" * 16)
>>> program.files[0]["path"].startswith("/tmp/colgrade_")
True
>>> spec.parse("noise\\n0.5\\n")  # the 0.8.0 bare-float contract still parses
0.5
"""

from __future__ import annotations

import abc
import ast
import dataclasses
import hashlib
import json
import math
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading import _codec
from collimate_rl.grading._pysource import parse
from collimate_rl.grading._shipping import full_program, warm_stub
from collimate_rl.grading._starter import join_starter
from collimate_rl.grading.languages import (
    DEFAULT_COMPILE_MEMORY_BYTES,
    DEFAULT_COMPILE_OUTPUT_BYTES,
    DEFAULT_COMPILE_TIMEOUT,
    check_limits,
    limits_payload,
)

__all__ = [
    "DEFAULT_PER_TEST_TIMEOUT",
    "LCB_PRELUDE",
    "RESULT_PREFIX",
    "CustomReward",
    "Frame",
    "FunctionCallReward",
    "IOReward",
    "Program",
    "PropertyReward",
    "RewardSpec",
    "UnitTestReward",
    "spec_from_dict",
]

RESULT_PREFIX = "COLLIMATE_RESULT"
DEFAULT_PER_TEST_TIMEOUT = 6.0

#: Imports LiveCodeBench-style graders make available to candidates (stdlib only).
LCB_PRELUDE = (
    "from typing import *\n"
    "from collections import *\n"
    "from functools import *\n"
    "from itertools import *\n"
    "from heapq import *\n"
    "from bisect import *\n"
    "import math, string, re, sys, heapq, bisect, itertools, functools, collections\n"
)


class Program(NamedTuple):
    """One exec's worth of grading: the harness ``code`` and its ``files``.

    ``warm_code`` is the same exec for a sandbox that has the harness warm
    (the local node): a short stub, see :mod:`collimate_rl.grading._shipping`.
    """

    code: str
    files: list[dict[str, str]]
    warm_code: str = ""


class Frame(NamedTuple):
    """The harness's verdict, parsed from its result line."""

    passed: int
    total: int
    tests: list[dict[str, Any]]
    output_tail: str
    reward: float | None
    error: str | None
    raw: dict[str, Any]


def _budget(timeout_seconds: float) -> float:
    # Leave the harness time to kill the candidate and print its frame before
    # the exec's own timeout hits.
    margin = min(2.0, max(0.5, 0.2 * timeout_seconds))
    return max(0.2, timeout_seconds - margin)


def _usage(message: str) -> CollimateUsageError:
    return CollimateUsageError(message)


class RewardSpec(abc.ABC):
    """How to grade a candidate: build the program, read its verdict.

    Subclasses are frozen dataclasses; :meth:`to_dict` / :func:`spec_from_dict`
    round-trip them (the replay manifest stores specs that way).
    """

    interpreter: ClassVar[str] = "python3"
    kind: ClassVar[str]

    # Every concrete spec has these dataclass fields.
    per_test_timeout: float
    all_or_nothing: bool

    @property
    def extract_entry(self) -> str | None:
        """The name :func:`extract_code` should prefer a block for."""
        return getattr(self, "entry", None)

    @abc.abstractmethod
    def _payload(self, source: str) -> dict[str, Any]:
        """The kind-specific part of the harness payload."""

    def build(
        self, candidate: str, *, nonce: str | None = None, timeout_seconds: float = 30.0
    ) -> Program:
        """Compose the exec for ``candidate`` (its source code).

        Args:
            candidate: the program to grade (already extracted).
            nonce: the secret the harness stamps on its result frame; pass the
                same value to :meth:`read_frame`. Default: a fresh one, which
                only :meth:`parse` (nonce-agnostic) can then read.
            timeout_seconds: the exec's timeout; the harness keeps a margin so
                it can always print its frame.
        """
        nonce = nonce or secrets.token_hex(16)
        payload = {"source": candidate, **self._payload(candidate)}  # a spec may rewrite it
        payload.update(
            v=1,
            kind=self.kind,
            nonce=nonce,
            per_test_timeout=float(self.per_test_timeout),
            budget_seconds=_budget(float(timeout_seconds)),
        )
        path = f"/tmp/colgrade_{secrets.token_hex(8)}.json"
        files = [{"path": path, "content": json.dumps(payload)}]
        return Program(code=full_program(path), files=files, warm_code=warm_stub(path))

    @staticmethod
    def read_frame(output: str, nonce: str) -> Frame | None:
        """The verdict stamped with ``nonce`` in ``output``, or ``None``.

        Only the harness knows the nonce, so lines printed by anything else
        (including a candidate that somehow reached the exec's stdout) are
        ignored.
        """
        marker = f"{RESULT_PREFIX} {nonce} "
        for line in reversed(output.splitlines()):
            if line.startswith(marker):
                return _frame_from_json(line[len(marker) :])
        return None

    def reward_of(self, frame: Frame) -> float:
        """The reward a frame is worth under this spec (fraction or all-or-nothing)."""
        if frame.error and frame.total == 0:
            return 0.0
        if frame.reward is not None:
            value = frame.reward
        else:
            value = frame.passed / frame.total if frame.total else 0.0
        if self.all_or_nothing:
            return 1.0 if value >= 1.0 else 0.0
        return value

    def parse(self, stdout: str) -> float:
        """The reward in ``stdout`` (nonce-agnostic; kept for the 0.8.0 contract).

        Reads the last result frame if there is one; otherwise the last
        non-blank line as a bare float clamped to [0, 1] (0.0 if it is not a
        number). :func:`~collimate_rl.grading.grade` does not use this: it
        trusts only frames carrying its own nonce.
        """
        pattern = re.compile(rf"^{RESULT_PREFIX} [0-9a-f]+ (.*)$")
        for line in reversed(stdout.splitlines()):
            found = pattern.match(line)
            if found:
                frame = _frame_from_json(found.group(1))
                return self.reward_of(frame) if frame else 0.0
        for line in reversed(stdout.splitlines()):
            if line.strip():
                try:
                    value = float(line.strip())
                except ValueError:
                    return 0.0
                return 0.0 if math.isnan(value) else max(0.0, min(1.0, value))
        return 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (values through the codec, so tuples survive)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return {"type": type(self).__name__, "fields": _codec.encode(fields)}

    def digest(self) -> str:
        """sha256 of :meth:`to_dict` (stable for equal specs)."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _frame_from_json(text: str) -> Frame | None:
    try:
        raw = json.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    passed, total = raw.get("passed"), raw.get("total")
    if type(passed) is not int or type(total) is not int or not 0 <= passed <= total:
        return None
    tests = raw.get("tests", [])
    tests = [t for t in tests if isinstance(t, dict)] if isinstance(tests, list) else []
    reward = raw.get("reward")
    if reward is not None:
        reward = float(reward) if isinstance(reward, (int, float)) else 0.0
        reward = 0.0 if math.isnan(reward) else max(0.0, min(1.0, reward))
    error = raw.get("error")
    tail = raw.get("output_tail", "")
    return Frame(
        passed=passed,
        total=total,
        tests=tests,
        output_tail=tail if isinstance(tail, str) else "",
        reward=reward,
        error=error if isinstance(error, str) else None,
        raw=raw,
    )


def _defined_names(source: str) -> set[str]:
    """Top-level functions, classes and simple assignments of ``source``."""
    tree = parse(source)
    if tree is None:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _referenced_names(code: str) -> set[str]:
    tree = parse(code)
    if tree is None:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _check_timeout(value: float) -> None:
    if not value > 0:
        raise _usage(f"per_test_timeout must be positive, not {value!r}")


@dataclasses.dataclass(frozen=True)
class UnitTestReward(RewardSpec):
    """Unit tests: ``[{"input", "expected"}]`` records or assert-style test code.

    Records call ``entry(*input)`` when ``input`` is a list (``entry(input)``
    otherwise; write a single list argument as ``[[...]]``) and compare with
    strict structural equality (``bool`` is not ``int``; a tuple equals a list,
    since JSON has no tuples). Test code (a string, or a list of strings, one
    test each) runs in the trusted harness with ``entry`` and ``candidate``
    standing for the candidate's function; every ``assert`` counts as one test.
    An exception outside an assert fails every assert in that test.

    ``starter_code`` is code the answer completes (HumanEval's ``prompt``): an
    answer that defines ``entry`` runs with the starter's imports and helpers in
    scope; any other answer is the body and runs as ``starter_code + answer``
    (see :func:`~collimate_rl.grading.reward_spec_from_ground_truth`).

    Reward: passed / total, or 1.0 only when all pass (``all_or_nothing``).

    >>> UnitTestReward("assert add(1, 2) == 3", entry="add").kind
    'asserts'
    >>> UnitTestReward([{"input": [1], "expected": 1}]).kind
    'calls'
    """

    tests: Any
    entry: str = "solve"
    all_or_nothing: bool = False
    setup: str = ""
    prelude: str = ""
    float_tolerance: float | None = None
    per_test_timeout: float = DEFAULT_PER_TEST_TIMEOUT
    starter_code: str = ""

    def __post_init__(self) -> None:
        _check_timeout(self.per_test_timeout)
        tests = self.tests
        if isinstance(tests, str):
            return
        if not isinstance(tests, Sequence) or isinstance(tests, (bytes, bytearray)):
            raise _usage(
                "UnitTestReward.tests must be a list of {'input', 'expected'} records, "
                "a list of assert statements, or a string of test code"
            )
        for test in tests:
            if isinstance(test, str):
                continue
            if not isinstance(test, Mapping) or "input" not in test or "expected" not in test:
                raise _usage(
                    "each unit test must be a dict with 'input' and 'expected' "
                    f"(or a string of assert code), not {test!r:.80}"
                )
        if any(isinstance(t, str) for t in tests) and not all(isinstance(t, str) for t in tests):
            raise _usage("do not mix assert strings and {'input', 'expected'} records")

    @property
    def kind(self) -> str:  # type: ignore[override]
        if isinstance(self.tests, str) or (self.tests and isinstance(self.tests[0], str)):
            return "asserts"
        return "calls"

    def _payload(self, source: str) -> dict[str, Any]:
        prelude, setup = self.prelude, self.setup
        if self.starter_code:
            joined = join_starter(self.starter_code, source, self.entry)
            source = joined.source
            prelude = "\n".join(part for part in (prelude, joined.prelude) if part)
            setup = "\n".join(part for part in (joined.helpers, setup) if part)
        common = {"entry": self.entry, "prelude": prelude, "module": "candidate", "source": source}
        if self.kind == "asserts":
            blocks = [self.tests] if isinstance(self.tests, str) else list(self.tests)
            referenced = set().union(*(_referenced_names(b) for b in blocks))
            proxied = sorted((_defined_names(source) & referenced) - {self.entry})
            return dict(
                common,
                setup=setup,
                proxied=proxied,
                blocks=[{"name": f"test {i}", "code": code} for i, code in enumerate(blocks)],
            )
        tests = []
        for test in self.tests:
            args = test["input"] if isinstance(test["input"], list) else [test["input"]]
            record = {
                "args": _codec.encode(list(args)),
                "expected": _codec.encode(test["expected"]),
            }
            tests.append(record)
        return dict(common, tests=tests, loose_sequences=True, float_tolerance=self.float_tolerance)


@dataclasses.dataclass(frozen=True)
class PropertyReward(RewardSpec):
    """Reference vs candidate on ``k`` inputs drawn from the exec's seed.

    ``generator`` is an expression (``random`` in scope) evaluated ``k`` times
    after ``random.seed(int(seed, 16))``, so one seed gives the same inputs on
    every call and every fork (common random numbers). ``reference`` is either
    a function definition (named ``entry``, ``reference`` or ``ref``) or the
    body of ``def _ref(x)``. It runs only in the trusted harness; the
    candidate's ``entry(x)`` gets its own copy of each input.

    >>> spec = PropertyReward("return sorted(x)", "[random.randint(0, 9) for _ in range(5)]", k=8)
    >>> spec.k, spec.entry
    (8, 'solve')
    """

    reference: str
    generator: str
    k: int = 16
    entry: str = "solve"
    all_or_nothing: bool = False
    float_tolerance: float | None = None
    prelude: str = ""
    per_test_timeout: float = DEFAULT_PER_TEST_TIMEOUT
    kind: ClassVar[str] = "property"

    def __post_init__(self) -> None:
        _check_timeout(self.per_test_timeout)
        if not isinstance(self.k, int) or self.k < 0:
            raise _usage(f"PropertyReward.k must be a non-negative int, not {self.k!r}")
        try:
            compile(f"({self.generator})", "<generator>", "eval")
        except SyntaxError as exc:
            raise _usage(f"PropertyReward.generator must be an expression: {exc}") from None

    def _payload(self, source: str) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "reference": self.reference,
            "generator": self.generator,
            "k": self.k,
            "float_tolerance": self.float_tolerance,
            "prelude": self.prelude,
            "module": "candidate",
        }


def _case_field(case: Mapping[str, Any], names: tuple[str, ...], what: str) -> Any:
    for name in names:
        if name in case:
            return case[name]
    raise _usage(f"each case needs {what} (one of {', '.join(map(repr, names))}), not {case!r:.80}")


@dataclasses.dataclass(frozen=True)
class IOReward(RewardSpec):
    """Stdin/stdout cases (LiveCodeBench stdin, APPS, CodeContests).

    Each case runs the candidate as ``__main__`` in a fresh process with the
    case's ``input`` on stdin and compares its stdout with ``output``. With
    ``strip_whitespace`` (default) both are stripped and compared line by line,
    each line stripped (LiveCodeBench's and CodeContests' normalisation).
    ``float_tolerance`` compares numeric tokens within that relative/absolute
    tolerance (``0.0`` makes ``1.0`` equal ``1``).

    Other languages: ``language`` (``"cpp"``, ``"java"``, ... see
    :mod:`collimate_rl.grading.languages`) is compiled once and each case runs
    as a new process. ``None`` takes the language the template id names (the
    local node's ``"cpp"`` template grades C++), else Python. A program that
    does not compile scores 0 with a ``compile_error`` outcome; a non-zero exit
    is a runtime error, a signal a crash. Limits: ``per_test_timeout`` (wall
    seconds per case), ``memory_limit_bytes`` (address space per case; default
    1 GiB for compiled and other languages, the template's for Python),
    ``output_limit_bytes`` (stdout per case, default 8 MiB), and for the
    compiler ``compile_timeout``, ``compile_memory_bytes``, ``compile_output_bytes``.

    >>> IOReward([{"input": "1 2\\n", "output": "3\\n"}]).cases[0]["output"]
    '3\\n'
    >>> IOReward([{"input": "", "output": "hi"}], language="c++").language
    'cpp'
    """

    cases: Sequence[Mapping[str, Any]]
    _: dataclasses.KW_ONLY
    strip_whitespace: bool = True
    float_tolerance: float | None = None
    all_or_nothing: bool = False
    prelude: str = ""
    per_test_timeout: float = DEFAULT_PER_TEST_TIMEOUT
    language: str | None = None
    memory_limit_bytes: int | None = None
    output_limit_bytes: int | None = None
    compile_timeout: float = DEFAULT_COMPILE_TIMEOUT
    compile_memory_bytes: int = DEFAULT_COMPILE_MEMORY_BYTES
    compile_output_bytes: int = DEFAULT_COMPILE_OUTPUT_BYTES
    kind: ClassVar[str] = "io"

    def __post_init__(self) -> None:
        _check_timeout(self.per_test_timeout)
        check_limits(self)
        if isinstance(self.cases, (str, bytes)) or not isinstance(self.cases, Sequence):
            raise _usage("IOReward.cases must be a list of {'input', 'output'} dicts")
        for case in self.cases:
            if not isinstance(case, Mapping):
                raise _usage(f"each IOReward case must be a dict, not {case!r:.80}")
            for value in (
                _case_field(case, ("input", "stdin"), "an input"),
                _case_field(case, ("output", "expected", "stdout"), "an output"),
            ):
                if not isinstance(value, str):
                    raise _usage(f"IOReward inputs and outputs must be text, not {value!r:.80}")

    @property
    def extract_entry(self) -> str | None:
        return None

    def _payload(self, source: str) -> dict[str, Any]:
        cases = [
            {
                "stdin": _case_field(c, ("input", "stdin"), "an input"),
                "expected": _case_field(c, ("output", "expected", "stdout"), "an output"),
            }
            for c in self.cases
        ]
        return {
            "cases": cases,
            "strip_whitespace": self.strip_whitespace,
            "float_tolerance": self.float_tolerance,
            "prelude": self.prelude,
            "module": "__main__",
            **limits_payload(self, source),
        }


def _json_value(text: Any, what: str) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        raise _usage(f"{what} must be JSON text, not {text!r:.80}") from None


@dataclasses.dataclass(frozen=True)
class FunctionCallReward(RewardSpec):
    """Call ``fn_name`` on inputs and compare outputs (LiveCodeBench functional).

    A case's ``input`` is newline-separated JSON values, one per positional
    argument (or a ready list of arguments); ``output`` is one JSON value. If
    the candidate defines ``class Solution`` and no top-level ``fn_name``, the
    method of a fresh ``Solution()`` is called. Tuples compare as lists.
    A case may give ``expected`` (a value) instead of ``output`` (JSON text),
    and ``any_of``, a list of other accepted outputs in the same form.

    >>> spec = FunctionCallReward("add", [{"input": "1\\n2", "output": "3"}])
    >>> spec.kind, spec.extract_entry
    ('calls', 'add')
    """

    fn_name: str
    cases: Sequence[Mapping[str, Any]]
    _: dataclasses.KW_ONLY
    float_tolerance: float | None = None
    all_or_nothing: bool = False
    prelude: str = LCB_PRELUDE
    per_test_timeout: float = DEFAULT_PER_TEST_TIMEOUT
    kind: ClassVar[str] = "calls"

    def __post_init__(self) -> None:
        _check_timeout(self.per_test_timeout)
        if not self.fn_name or not str(self.fn_name).isidentifier():
            raise _usage(f"FunctionCallReward.fn_name must be an identifier, not {self.fn_name!r}")
        self._tests()  # validate early

    @property
    def extract_entry(self) -> str | None:
        return self.fn_name

    def _tests(self) -> list[dict[str, Any]]:
        tests = []
        for case in self.cases:
            if not isinstance(case, Mapping):
                raise _usage(f"each FunctionCallReward case must be a dict, not {case!r:.80}")
            raw_in = _case_field(case, ("input", "args"), "an input")
            if isinstance(raw_in, str):
                args = [
                    _json_value(line, "each input line")
                    for line in raw_in.split("\n")
                    if line.strip()
                ]
            elif isinstance(raw_in, list):
                args = raw_in
            else:
                raise _usage(
                    f"a case input must be JSON lines or a list of arguments, not {raw_in!r:.80}"
                )
            # "output" / "any_of" are JSON text (LiveCodeBench); "expected" is a value.
            as_json = "output" in case
            expected = _case_field(case, ("output", "expected"), "an output")
            expected = _json_value(expected, "an output") if as_json else expected
            record: dict[str, Any] = {
                "args": _codec.encode(args),
                "expected": _codec.encode(expected),
            }
            alternatives = case.get("any_of", ())
            if isinstance(alternatives, (str, bytes)) or not isinstance(alternatives, Sequence):
                raise _usage(f"a case's any_of must be a list of outputs, not {alternatives!r:.80}")
            if alternatives:
                record["any_of"] = [
                    _codec.encode(_json_value(alt, "an any_of output") if as_json else alt)
                    for alt in alternatives
                ]
            tests.append(record)
        return tests

    def _payload(self, source: str) -> dict[str, Any]:
        return {
            "entry": self.fn_name,
            "tests": self._tests(),
            "tuples_as_lists": True,
            "loose_sequences": True,
            "float_tolerance": self.float_tolerance,
            "prelude": self.prelude,
            "module": "candidate",
        }


@dataclasses.dataclass(frozen=True)
class CustomReward(RewardSpec):
    """Your own grader script, run in the trusted harness.

    The script defines ``grade(api)`` returning a float in [0, 1] or a
    ``(passed, total)`` pair. ``api.call(name, *args)`` calls the candidate
    (in its own process; raises if it raised, hung or died),
    ``api.run_program(stdin)`` runs it as a program and returns
    ``(stdout, exit_code or None)``, ``api.record(name, ok, detail)`` adds
    a per-test outcome; ``api.source``, ``api.seed`` and ``api.random`` (a
    ``random.Random`` seeded from the exec's seed) are there too. An uncaught
    exception in the script gives reward 0.0 with ``error`` set.

    >>> CustomReward("def grade(api):\\n    return 1.0 if api.call('f') == 2 else 0.0").kind
    'custom'
    """

    script: str
    _: dataclasses.KW_ONLY
    entry: str = "solve"
    all_or_nothing: bool = False
    prelude: str = ""
    per_test_timeout: float = DEFAULT_PER_TEST_TIMEOUT
    kind: ClassVar[str] = "custom"

    def __post_init__(self) -> None:
        _check_timeout(self.per_test_timeout)
        try:
            compile(self.script, "<grader>", "exec")
        except SyntaxError as exc:
            raise _usage(f"CustomReward.script does not compile: {exc}") from None

    def _payload(self, source: str) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "script": self.script,
            "prelude": self.prelude,
            "module": "candidate",
        }


_SPEC_TYPES: dict[str, type[RewardSpec]] = {
    cls.__name__: cls
    for cls in (UnitTestReward, PropertyReward, IOReward, FunctionCallReward, CustomReward)
}


def spec_from_dict(data: Mapping[str, Any]) -> RewardSpec:
    """Rebuild a spec from :meth:`RewardSpec.to_dict`.

    >>> spec = IOReward([{"input": "", "output": "hi"}], float_tolerance=1e-6)
    >>> spec_from_dict(spec.to_dict()) == spec
    True
    """
    try:
        cls = _SPEC_TYPES[data["type"]]
        fields = _codec.decode(data["fields"])
    except (KeyError, TypeError, _codec.CodecError) as exc:
        raise _usage(f"not a reward spec description: {exc}") from None
    return cls(**fields)
