"""``FunctionCallReward``: LiveCodeBench-style calls of ``fn_name`` with JSON inputs and outputs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from collimate_rl.grading import _codec
from collimate_rl.grading.specs._base import (
    DEFAULT_PER_TEST_TIMEOUT,
    RewardSpec,
    _case_field,
    _check_timeout,
    _usage,
)

__all__ = ["LCB_PRELUDE", "FunctionCallReward"]

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
