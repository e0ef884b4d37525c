"""What an eval measured: pass@k per k, per-task counts, and what could not be measured.

Infrastructure failures are listed apart and never count as wrong answers: a task's
``n`` is the number of completions that were actually graded.

>>> report = EvalReport.build(
...     task_set="demo", ks=(1, 2), completions=4,
...     tallies=[TaskTally("a", n=2, correct=1), TaskTally("b", n=2, correct=0)],
... )
>>> report.pass_at_k
{1: 0.25, 2: 0.5}
>>> report.complete
True
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collimate_rl.evaluation._passk import pass_at_k

__all__ = ["EvalReport", "InfraFailure", "TaskTally"]


@dataclass(frozen=True)
class TaskTally:
    """One task's counts.

    Attributes:
        task_id: the task.
        n: completions graded.
        correct: of those, how many passed every test.
        infra_errors: completions that could not be graded (infrastructure).
        pending: completions not graded yet (``limit``).

    >>> TaskTally("t", n=4, correct=1).pass_at(2)
    0.5
    """

    task_id: str
    n: int
    correct: int
    infra_errors: int = 0
    pending: int = 0

    def pass_at(self, k: int) -> float | None:
        """This task's pass@k, or ``None`` when fewer than ``k`` completions were graded."""
        return pass_at_k(self.n, self.correct, k) if self.n >= k else None


@dataclass(frozen=True)
class InfraFailure:
    """A completion that could not be graded, and why."""

    index: int
    task_id: str
    error: str


@dataclass(frozen=True)
class EvalReport:
    """The result of :func:`~collimate_rl.evaluation.evaluate`.

    Attributes:
        task_set: the task set's name.
        ks: the k values asked for.
        pass_at_k: ``{k: mean pass@k}`` over the tasks with at least ``k`` graded
            completions (``None`` when there is none).
        tasks_counted: ``{k: number of tasks that entered pass@k}``.
        tasks: per-task counts, in order of first appearance.
        completions: the completions given.
        graded, correct: completions graded, and correct among them.
        infra_failures: completions that hit an infrastructure error (not graded).
        pending: completions left for a later run (``limit``).
        resumed: graded completions read back from the output file, not regraded.
        output: the results file, if any.
    """

    task_set: str
    ks: tuple[int, ...]
    pass_at_k: dict[int, float | None]
    tasks_counted: dict[int, int]
    tasks: tuple[TaskTally, ...]
    completions: int
    graded: int
    correct: int
    infra_failures: tuple[InfraFailure, ...] = ()
    pending: int = 0
    resumed: int = 0
    output: str | None = None

    @classmethod
    def build(
        cls,
        *,
        task_set: str,
        ks: Sequence[int],
        completions: int,
        tallies: Sequence[TaskTally],
        infra_failures: Sequence[InfraFailure] = (),
        resumed: int = 0,
        output: str | None = None,
    ) -> EvalReport:
        """Aggregate per-task tallies into a report (the mean of per-task pass@k)."""
        scores: dict[int, float | None] = {}
        counted: dict[int, int] = {}
        for k in ks:
            values = [v for v in (t.pass_at(k) for t in tallies) if v is not None]
            scores[k] = sum(values) / len(values) if values else None
            counted[k] = len(values)
        return cls(
            task_set=task_set,
            ks=tuple(ks),
            pass_at_k=scores,
            tasks_counted=counted,
            tasks=tuple(tallies),
            completions=completions,
            graded=sum(t.n for t in tallies),
            correct=sum(t.correct for t in tallies),
            infra_failures=tuple(infra_failures),
            pending=sum(t.pending for t in tallies),
            resumed=resumed,
            output=output,
        )

    @property
    def complete(self) -> bool:
        """Every completion was graded (no infrastructure failure, nothing pending)."""
        return self.pending == 0 and not self.infra_failures

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``pass@k`` keys are strings such as ``"pass@1"``)."""
        return {
            "task_set": self.task_set,
            "pass_at_k": {f"pass@{k}": v for k, v in self.pass_at_k.items()},
            "tasks_counted": {f"pass@{k}": v for k, v in self.tasks_counted.items()},
            "completions": self.completions,
            "graded": self.graded,
            "correct": self.correct,
            "infra_errors": len(self.infra_failures),
            "pending": self.pending,
            "resumed": self.resumed,
            "complete": self.complete,
            "output": self.output,
            "tasks": [
                {
                    "task_id": t.task_id,
                    "n": t.n,
                    "correct": t.correct,
                    "infra_errors": t.infra_errors,
                    "pending": t.pending,
                }
                for t in self.tasks
            ],
            "infra_failures": [
                {"index": f.index, "task_id": f.task_id, "error": f.error}
                for f in self.infra_failures
            ],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)
