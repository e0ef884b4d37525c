"""The task model: a problem statement plus a typed, data-only description of how it is graded.

A :class:`Task` never runs code. Its ``tests`` field is one of the six grading descriptions
in :mod:`._tests` (unit, function-call, assert, property, stdin/stdout tests in any language,
and MultiPL-E programs); :meth:`Task.to_reward_spec` turns it into the grading layer's reward
spec (:mod:`._specs`).

>>> task = Task(
...     task_id="demo/double",
...     prompt="Write `double(x: int) -> int` returning twice `x`.",
...     entry_point="double",
...     tests=UnitTests(cases=(((2,), 4), ((-3,), -6))),
...     reference_solution="def double(x):\\n    return 2 * x\\n",
...     difficulty="easy",
... )
>>> task.tests.kind, len(task.tests.cases)
('unit', 2)
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from collimate_envs.tasks._errors import TaskFormatError
from collimate_envs.tasks._specs import reward_spec_for
from collimate_envs.tasks._tests import (
    AssertTests,
    FunctionCallTests,
    IOTests,
    ProgramTests,
    PropertyTests,
    TestSpec,
    UnitTests,
)

if TYPE_CHECKING:
    from collimate_rl.grading import RewardSpec

__all__ = [
    "DIFFICULTIES",
    "AssertTests",
    "Difficulty",
    "FunctionCallTests",
    "IOTests",
    "ProgramTests",
    "PropertyTests",
    "Task",
    "TestSpec",
    "UnitTests",
]

Difficulty = Literal["easy", "medium", "hard"]
#: The difficulty labels, easiest first.
DIFFICULTIES: tuple[Difficulty, ...] = get_args(Difficulty)


@dataclass(frozen=True)
class Task:
    """One problem: what the model sees and how its answer is graded.

    Attributes:
        task_id: unique within its task set.
        prompt: the statement shown to the model (signature or I/O format included).
        tests: the grading description.
        entry_point: the function to call; ``None`` for stdin/stdout programs.
        difficulty: ``"easy"``, ``"medium"``, ``"hard"``, or ``None`` when the source has none.
        reference_solution: a complete solution that passes the tests, if known.
        wrong_solution: a plausible solution that fails the tests (a negative control).
        source: the task set or file it came from.
        tags: free-form labels.
        starter_code: code the model is asked to complete, if any.
        language: the one language the task is posed in (a MultiPL-E row), or ``None``:
            Python for function tests, any language for stdin/stdout tests.
        solutions: reference solutions by language name (``{"cpp": ..., "java": ...}``).
        wrong_solutions: wrong solutions (negative controls) by language name.

    >>> Task(task_id="t", prompt="p", tests=IOTests(cases=(("", "ok\\n"),))).entry_point is None
    True
    """

    task_id: str
    prompt: str
    tests: TestSpec
    entry_point: str | None = None
    difficulty: Difficulty | None = None
    reference_solution: str | None = None
    wrong_solution: str | None = None
    source: str = ""
    tags: tuple[str, ...] = field(default=())
    starter_code: str | None = None
    language: str | None = None
    solutions: Mapping[str, str] = field(default_factory=dict, hash=False)
    wrong_solutions: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not self.task_id:
            raise TaskFormatError("task_id must be a non-empty string")
        if self.difficulty is not None and self.difficulty not in DIFFICULTIES:
            raise TaskFormatError(
                f"difficulty must be one of {DIFFICULTIES} or None, got {self.difficulty!r}"
            )
        if isinstance(self.tests, (IOTests, ProgramTests)):
            if self.entry_point is not None:
                raise TaskFormatError(f"{type(self.tests).__name__} tasks take no entry_point")
            if isinstance(self.tests, ProgramTests) and not self.language:
                raise TaskFormatError("ProgramTests tasks need a language")
        elif isinstance(self.tests, FunctionCallTests):
            if self.entry_point not in (None, self.tests.fn_name):
                raise TaskFormatError("entry_point must equal FunctionCallTests.fn_name")
        elif self.entry_point is None:
            raise TaskFormatError(f"{self.tests.kind} tests need an entry_point")
        if self.entry_point is not None and (
            not self.entry_point.isidentifier() or keyword.iskeyword(self.entry_point)
        ):
            raise TaskFormatError(f"entry_point must be an identifier, got {self.entry_point!r}")

    def solution(self, language: str | None = None) -> str | None:
        """The reference solution in ``language`` (a name or alias; ``None``: Python).

        >>> t = Task("t", "p", IOTests(cases=(("", "hi\\n"),)), solutions={"cpp": "int main(){}"})
        >>> t.solution("c++"), t.solution("java")
        ('int main(){}', None)
        """
        return _in_language(self.solutions, self.reference_solution, language)

    def wrong_solution_in(self, language: str | None = None) -> str | None:
        """The wrong solution in ``language`` (a name or alias; ``None``: Python)."""
        return _in_language(self.wrong_solutions, self.wrong_solution, language)

    @property
    def kind(self) -> str:
        """The grading kind: ``unit``, ``function_call``, ``assert``, ``property``, ``io`` or ``program``.

        >>> Task(task_id="t", prompt="p", tests=IOTests(cases=(("", "x"),))).kind
        'io'
        """
        return self.tests.kind

    def to_reward_spec(self, **options: Any) -> RewardSpec:
        """Build the grading layer's reward spec for this task.

        Imports :mod:`collimate_rl.grading` lazily, so the task model stays usable without it.

        Args:
            **options: passed to the spec, e.g. ``all_or_nothing=True``, ``per_test_timeout``.

        Returns:
            A ``UnitTestReward``, ``FunctionCallReward``, ``IOReward``, ``PropertyReward`` or
            (multi-argument property tests) ``CustomReward`` from :mod:`collimate_rl.grading`.

        >>> task = Task("t", "p", IOTests(cases=(("1\\n", "1\\n"),)))
        >>> task.to_reward_spec().cases
        [{'input': '1\\n', 'output': '1\\n'}]
        """
        return reward_spec_for(self, **options)


def _in_language(
    by_language: Mapping[str, str], python: str | None, language: str | None
) -> str | None:
    from collimate_rl.grading.languages import language as resolve

    name = "python" if language is None else resolve(language).name
    if name in by_language:
        return by_language[name]
    return python if name == "python" else None
