"""``CustomReward``: the user's own grader script, run in the trusted harness."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from collimate_rl.grading.specs._base import (
    DEFAULT_PER_TEST_TIMEOUT,
    RewardSpec,
    _check_timeout,
    _usage,
)

__all__ = ["CustomReward"]


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
