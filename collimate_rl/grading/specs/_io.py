"""``IOReward``: the candidate run as a program on stdin/stdout cases."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from collimate_rl.grading.languages import (
    DEFAULT_COMPILE_MEMORY_BYTES,
    DEFAULT_COMPILE_OUTPUT_BYTES,
    DEFAULT_COMPILE_TIMEOUT,
    check_limits,
    limits_payload,
)
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
