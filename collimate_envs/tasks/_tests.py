"""The five data-only grading descriptions a :class:`~collimate_envs.tasks.Task` carries.

==========================  ======================================================================
:class:`UnitTests`          call ``entry_point(*args)`` and compare with ``expected``
:class:`FunctionCallTests`  the same, LiveCodeBench/APPS style (``class Solution`` methods allowed)
:class:`AssertTests`        run assert code after the solution (HumanEval ``check``, MBPP asserts)
:class:`PropertyTests`      compare with a reference solution on generated random inputs
:class:`IOTests`            run the solution as a program: stdin in, stdout compared
==========================  ======================================================================

>>> UnitTests(cases=(((2,), 4),)).kind
'unit'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from collimate_envs.tasks._errors import TaskFormatError

__all__ = [
    "AssertTests",
    "FunctionCallTests",
    "IOTests",
    "ProgramTests",
    "PropertyTests",
    "TestSpec",
    "UnitTests",
]

#: One call: the positional arguments and the expected (JSON-compatible) return value.
Case = tuple[tuple[Any, ...], Any]


def _check_cases(cases: object, what: str) -> None:
    if not isinstance(cases, tuple) or not cases:
        raise TaskFormatError(f"{what} needs a non-empty tuple of cases")
    for case in cases:
        if not (isinstance(case, tuple) and len(case) == 2 and isinstance(case[0], tuple)):
            raise TaskFormatError(
                f"{what} cases must be (args_tuple, expected) pairs, got {case!r}"
            )


@dataclass(frozen=True)
class UnitTests:
    """Call the entry point with fixed arguments and compare the results.

    A case passes when the return value equals ``expected`` after tuples are turned into lists
    (expected values are JSON-compatible). Arguments are passed as fresh copies.

    Attributes:
        cases: ``((args, expected), ...)``.

    >>> UnitTests(cases=(((1, 2), 3),)).cases[0]
    ((1, 2), 3)
    """

    cases: tuple[Case, ...]
    kind: ClassVar[str] = "unit"

    def __post_init__(self) -> None:
        _check_cases(self.cases, "UnitTests")


@dataclass(frozen=True)
class FunctionCallTests:
    """LiveCodeBench/APPS call-based tests: like :class:`UnitTests` with their conventions.

    The function ``fn_name`` is looked up at module level or, when the solution defines
    ``class Solution``, called as a method of ``Solution()``. Tuple results become lists.

    Attributes:
        fn_name: the function or method to call.
        cases: ``((args, expected), ...)``.
        accept_wrapped: APPS quirk: an expected value ``[x]`` also accepts the result ``x``.

    >>> FunctionCallTests(fn_name="add", cases=(((1, 2), 3),)).kind
    'function_call'
    """

    fn_name: str
    cases: tuple[Case, ...]
    accept_wrapped: bool = False
    kind: ClassVar[str] = "function_call"

    def __post_init__(self) -> None:
        if not self.fn_name.isidentifier():
            raise TaskFormatError(f"fn_name must be an identifier, got {self.fn_name!r}")
        _check_cases(self.cases, "FunctionCallTests")


@dataclass(frozen=True)
class AssertTests:
    """Assert-style tests: run ``code`` after the solution, in the same namespace.

    The tests pass when nothing raises. With ``check_fn`` set (HumanEval), ``code`` only
    defines that function and the grader then calls ``check_fn(<entry point>)``.

    Attributes:
        code: the test code (setup code first, for MBPP).
        check_fn: the checker to call with the candidate function, or ``None``.

    >>> AssertTests(code="def check(f):\\n    assert f(1) == 2\\n", check_fn="check").script("inc")
    'def check(f):\\n    assert f(1) == 2\\n\\ncheck(inc)\\n'
    """

    code: str
    check_fn: str | None = None
    kind: ClassVar[str] = "assert"

    def __post_init__(self) -> None:
        if not self.code.strip():
            raise TaskFormatError("AssertTests needs non-empty code")
        if self.check_fn is not None and not self.check_fn.isidentifier():
            raise TaskFormatError(f"check_fn must be an identifier, got {self.check_fn!r}")

    def script(self, entry_point: str) -> str:
        """The self-contained test script to run after the solution.

        Args:
            entry_point: the candidate function's name.

        Returns:
            ``code``, followed by the ``check_fn(entry_point)`` call when there is a checker.
        """
        if self.check_fn is None:
            return self.code
        return f"{self.code.rstrip()}\n\n{self.check_fn}({entry_point})\n"


@dataclass(frozen=True)
class PropertyTests:
    """Compare the solution with a reference on ``k`` random inputs.

    ``generator`` is a Python expression evaluated with the name ``random`` bound to a
    :class:`random.Random` seeded with ``seed``; each evaluation gives the tuple of positional
    arguments for one call. The solution passes when it returns what the reference returns.

    Attributes:
        reference: source code defining the entry point correctly.
        generator: the input-generating expression.
        k: how many inputs to try.
        seed: the default seed for the generator (graders may use their own).

    >>> spec = PropertyTests(
    ...     reference="def neg(x):\\n    return -x\\n",
    ...     generator="(random.randint(-9, 9),)",
    ...     k=20,
    ... )
    >>> spec.kind, spec.k
    ('property', 20)
    """

    reference: str
    generator: str
    k: int = 50
    seed: int = 0
    kind: ClassVar[str] = "property"

    def __post_init__(self) -> None:
        if not self.reference.strip() or not self.generator.strip():
            raise TaskFormatError("PropertyTests needs a reference and a generator")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise TaskFormatError(f"PropertyTests.k must be a positive int, got {self.k!r}")
        try:
            compile(self.generator, "<generator>", "eval")
        except SyntaxError as exc:
            raise TaskFormatError(f"PropertyTests.generator is not an expression: {exc}") from exc


@dataclass(frozen=True)
class IOTests:
    """Run the solution as a program, feed ``stdin`` and compare its output with ``stdout``.

    Outputs are compared line by line after stripping each line; trailing blank lines are
    ignored. The solution may be in any language the template runs (see
    :mod:`collimate_rl.grading.languages`).

    Attributes:
        cases: ``((stdin, expected_stdout), ...)``.
        memory_limit_bytes: the problem's memory limit per run, if it states one.

    >>> IOTests(cases=(("1 2\\n", "3\\n"),)).kind
    'io'
    """

    cases: tuple[tuple[str, str], ...]
    memory_limit_bytes: int | None = None
    kind: ClassVar[str] = "io"

    def __post_init__(self) -> None:
        if not isinstance(self.cases, tuple) or not self.cases:
            raise TaskFormatError("IOTests needs a non-empty tuple of cases")
        for case in self.cases:
            if not (
                isinstance(case, tuple)
                and len(case) == 2
                and all(isinstance(part, str) for part in case)
            ):
                raise TaskFormatError(f"IOTests cases must be (stdin, stdout) strings: {case!r}")


@dataclass(frozen=True)
class ProgramTests:
    """MultiPL-E tests: ``prompt + solution + "\\n" + tests`` runs as one program; exit 0 passes.

    The task's ``prompt`` is the code to continue and its ``language`` the language. The
    tests share the solution's process, so a solution can fake a pass (grades say
    ``forgeable``; see :class:`collimate_rl.grading.MultiPLEReward`).

    Attributes:
        tests: the test code that follows the solution.
        stop_tokens: where a raw continuation is cut (MultiPL-E's stop tokens).

    >>> ProgramTests(tests="}\\nint main() {}\\n", stop_tokens=("\\n}",)).kind
    'program'
    """

    tests: str
    stop_tokens: tuple[str, ...] = ()
    kind: ClassVar[str] = "program"

    def __post_init__(self) -> None:
        if not self.tests.strip():
            raise TaskFormatError("ProgramTests needs non-empty test code")
        if not isinstance(self.stop_tokens, tuple) or not all(
            isinstance(s, str) and s for s in self.stop_tokens
        ):
            raise TaskFormatError("ProgramTests.stop_tokens must be a tuple of non-empty strings")


TestSpec = UnitTests | FunctionCallTests | AssertTests | PropertyTests | IOTests | ProgramTests
