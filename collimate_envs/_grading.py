"""The envs' one path to a grade, with the infra-error policy applied in one place."""

from __future__ import annotations

from typing import Any

from collimate_rl.errors import CollimateError, CollimateTaskError

__all__ = ["InfraPolicy", "grade_or_flag"]

InfraPolicy = str  # "raise" | "flag"


def grade_or_flag(
    client: Any,
    template: str,
    completion: str,
    spec: Any,
    *,
    seed: str,
    timeout_seconds: int,
    policy: InfraPolicy,
    session_id: str | None = None,
) -> Any:
    """Grade one completion; on an infrastructure failure raise, or flag a zero result.

    Task failures (wrong answers, crashes, timeouts) are grades and never get here
    as exceptions.
    """
    from collimate_rl.grading import GradeResult, grade

    try:
        return grade(
            client,
            template,
            completion,
            spec,
            seed=seed,
            timeout_seconds=timeout_seconds,
            session_id=session_id,
        )
    except CollimateTaskError:
        raise
    except CollimateError as exc:
        if policy == "raise":
            raise
        return GradeResult(reward=0.0, infra_error=True, error=str(exc), seed=seed)
