"""``UnitTestReward``: call records or assert-style test code against the candidate's function."""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from collimate_rl.grading import _codec
from collimate_rl.grading._pysource import parse
from collimate_rl.grading._starter import join_starter
from collimate_rl.grading.specs._base import (
    DEFAULT_PER_TEST_TIMEOUT,
    RewardSpec,
    _check_timeout,
    _usage,
)

__all__ = ["UnitTestReward"]


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


@functools.lru_cache(maxsize=1024)  # a task's tests, once per task, not per group member
def _referenced_names(code: str) -> frozenset[str]:
    tree = parse(code)
    if tree is None:
        return frozenset()
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))


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

    Reward: passed / total, or 1.0 only when all pass (``all_or_nothing``). An
    all-or-nothing grade ends at the first test that does not pass (every spec but
    :class:`CustomReward`): the rest fail with "not run" and never reach the candidate.

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
