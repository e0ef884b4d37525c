"""Reading an exec's answer: the verdict as a ``GradeResult``; a task failure as a reward,
an infrastructure failure as the error it stands for."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import httpx

from collimate_rl.errors import (
    CollimateError,
    CollimateTaskError,
    CollimateTransportError,
    CollimateUsageError,
)
from collimate_rl.grading._grade_job import _Job
from collimate_rl.grading.result import GradeResult, TestOutcome
from collimate_rl.grading.specs import RewardSpec

__all__ = ["OUTPUT_TAIL_CHARS"]

#: ``GradeResult.output_tail`` keeps at most this many characters.
OUTPUT_TAIL_CHARS = 4096


def _field(response: Any, name: str) -> Any:
    if isinstance(response, Mapping) or hasattr(response, "get"):
        return response.get(name)
    return getattr(response, name, None)


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _finish(job: _Job, response: Any) -> GradeResult:
    stdout = _field(response, "stdout")
    stdout = stdout if isinstance(stdout, str) else ""
    raw_exit = _field(response, "exit_code")
    exit_code = raw_exit if isinstance(raw_exit, int) and not isinstance(raw_exit, bool) else None
    frame = RewardSpec.read_frame(stdout, job.nonce)
    if frame is not None and frame.raw.get("toolchain_missing"):
        raise CollimateUsageError(
            f"template {job.template!r} cannot run this candidate: {frame.raw['toolchain_missing']} "
            "(the language's compiler or runtime is not installed in that sandbox; grade it on "
            "the local node's template of the same name, or name an image that has it)"
        )
    common: dict[str, Any] = {
        "exit_code": exit_code,
        "seed": _field(response, "seed") or job.seed,
        "seed_ack": _field(response, "seed_ack"),
        "fork_time_ms": _float(_field(response, "fork_time_ms")),
        "exec_time_ms": _float(_field(response, "exec_time_ms")),
        "total_time_ms": _float(_field(response, "total_time_ms")),
        "forgeable": bool(getattr(job.spec, "forgeable", False)),
    }
    if frame is None:
        why = "the exec timed out" if exit_code == -1 else "the harness gave no verdict"
        return GradeResult(
            reward=0.0,
            output_tail=stdout[-OUTPUT_TAIL_CHARS:],
            error=f"{why} (exit code {exit_code})",
            output_digest=_digest(stdout),
            **common,
        )
    verdict = json.dumps(frame.raw, sort_keys=True, separators=(",", ":"))
    return GradeResult(
        reward=job.spec.reward_of(frame),
        passed=frame.passed,
        total=frame.total,
        tests=tuple(TestOutcome.from_frame(t) for t in frame.tests),
        output_tail=frame.output_tail[-OUTPUT_TAIL_CHARS:],
        error=frame.error,
        output_digest=_digest(verdict),
        **common,
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def _task_failure(job: _Job, exc: CollimateTaskError) -> GradeResult:
    return GradeResult(
        reward=0.0,
        exit_code=exc.exit_code,
        output_tail=exc.output[-OUTPUT_TAIL_CHARS:],
        seed=job.seed,
        error=f"task error: {exc}",
        output_digest=_digest(exc.output),
        forgeable=bool(getattr(job.spec, "forgeable", False)),
    )


def _infra(exc: BaseException) -> CollimateError | None:
    """The infrastructure error ``exc`` stands for, or ``None`` if it is not one."""
    if isinstance(exc, CollimateTaskError):
        return None
    if isinstance(exc, CollimateError):
        return exc
    if isinstance(exc, (OSError, httpx.HTTPError, TimeoutError)):
        err = CollimateTransportError(f"exec request failed: {type(exc).__name__}: {exc}")
        err.__cause__ = exc
        return err
    return None
