"""What a grade produced.

>>> r = GradeResult(reward=0.5, passed=1, total=2)
>>> r.ok, r.tests
(False, ())
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["TEST_STATUSES", "GradeResult", "TestOutcome"]

#: Per-test statuses: ``pass``; ``fail`` (wrong answer); ``error`` (the
#: candidate raised, exited non-zero or answered something unreadable);
#: ``timeout``; ``crash`` (the candidate's process died); ``compile_error``
#: (the candidate's program does not compile; one outcome for the grade).
TEST_STATUSES = ("pass", "fail", "error", "timeout", "crash", "compile_error")
#: How the detail of a test that did not run starts: an all-or-nothing grade ends at its
#: first failing test and reports the rest as failed, not run (the harness's ``NOT_RUN``).
NOT_RUN = "not run:"


@dataclasses.dataclass(frozen=True)
class TestOutcome:
    """One test's verdict.

    Attributes:
        name: e.g. ``"test 3"``, ``"case 0"``, ``"trial 7"``, ``"test 0:12"``
            (an assert on line 12).
        status: one of :data:`TEST_STATUSES`.
        detail: a short explanation (what came back, the exception).
        input: a short ``repr`` of the input, when there is one.
    """

    __test__ = False  # not a pytest class

    name: str
    status: str
    detail: str = ""
    input: str | None = None

    @property
    def ran(self) -> bool:
        """Whether the test ran (an all-or-nothing grade skips those after a failure).

        >>> TestOutcome("test 2", "fail", "not run: an earlier test failed").ran
        False
        """
        return not (self.status == "fail" and self.detail.startswith(NOT_RUN))

    @classmethod
    def from_frame(cls, data: dict[str, Any]) -> TestOutcome:
        status = str(data.get("status", "error"))
        return cls(
            name=str(data.get("name", "")),
            status=status if status in TEST_STATUSES else "error",
            detail=str(data.get("detail", "")),
            input=str(data["input"]) if data.get("input") is not None else None,
        )


@dataclasses.dataclass(frozen=True)
class GradeResult:
    """The outcome of grading one candidate.

    Task failures (wrong answers, exceptions, timeouts, crashes, a missing
    verdict) are rewards: ``infra_error`` stays ``False``. ``infra_error`` is
    ``True`` only in results :func:`~collimate_rl.grading.grade_batch` made
    for ``on_infra_error="zero"``; such a reward is not a measurement.

    Attributes:
        reward: in [0, 1].
        passed, total: the harness's test counts (0, 0 if it gave no verdict).
        exit_code: the exec's exit code (-1: the exec timed out).
        tests: per-test outcomes (the first 256).
        output_tail: the candidate's last output (bounded), or the exec's when
            there was no verdict.
        seed, seed_ack: the seed the exec actually used and its acknowledgement.
        fork_time_ms, exec_time_ms, total_time_ms: the node's timings.
        infra_error: see above.
        error: why there is no (full) verdict, if so.
        output_digest: sha256 of the verdict (without its nonce); equal
            digests mean the harness saw the same thing. Used by replay.
        forgeable: the spec's tests run inside the candidate's own process
            (``MultiPLEReward``: pass means exit code 0), so a candidate can
            fake a pass. A trainer should not trust such a reward against an
            adversarial policy.
    """

    reward: float
    passed: int = 0
    total: int = 0
    exit_code: int | None = None
    tests: tuple[TestOutcome, ...] = ()
    output_tail: str = ""
    seed: str | None = None
    seed_ack: str | None = None
    fork_time_ms: float | None = None
    exec_time_ms: float | None = None
    total_time_ms: float | None = None
    infra_error: bool = False
    error: str | None = None
    output_digest: str | None = None
    forgeable: bool = False

    @property
    def compile_error(self) -> bool:
        """The candidate's program did not compile (it scored 0)."""
        return any(t.status == "compile_error" for t in self.tests)

    @property
    def ok(self) -> bool:
        """Every test passed (and there was at least one)."""
        return self.total > 0 and self.passed == self.total
