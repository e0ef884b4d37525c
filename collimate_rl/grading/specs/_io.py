"""``IOReward``: the candidate run as a program on stdin/stdout cases."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from collimate_rl.grading.specs._base import (
    DEFAULT_PER_TEST_TIMEOUT,
    RewardSpec,
    _case_field,
    _check_timeout,
    _usage,
)

__all__ = ["IOReward"]


@dataclasses.dataclass(frozen=True)
class IOReward(RewardSpec):
    """Stdin/stdout cases (LiveCodeBench stdin, APPS, CodeContests).

    Each case runs the candidate as ``__main__`` in a fresh process with the
    case's ``input`` on stdin and compares its stdout with ``output``. With
    ``strip_whitespace`` (default) both are stripped and compared line by line,
    each line stripped. ``float_tolerance`` compares numeric tokens within
    that relative/absolute tolerance (``0.0`` makes ``1.0`` equal ``1``).

    >>> IOReward([{"input": "1 2\\n", "output": "3\\n"}]).cases[0]["output"]
    '3\\n'
    """

    cases: Sequence[Mapping[str, Any]]
    _: dataclasses.KW_ONLY
    strip_whitespace: bool = True
    float_tolerance: float | None = None
    all_or_nothing: bool = False
    prelude: str = ""
    per_test_timeout: float = DEFAULT_PER_TEST_TIMEOUT
    kind: ClassVar[str] = "io"

    def __post_init__(self) -> None:
        _check_timeout(self.per_test_timeout)
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
        }
