"""``PropertyReward``: the candidate against a reference on inputs drawn from the exec's seed."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from collimate_rl.grading.specs._base import (
    DEFAULT_PER_TEST_TIMEOUT,
    RewardSpec,
    _check_timeout,
    _usage,
)

__all__ = ["PropertyReward"]


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
