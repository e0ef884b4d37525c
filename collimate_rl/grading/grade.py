"""Grade completions on a node: one exec per candidate, verdicts as rewards.

Task failures (wrong answer, exception, timeout, crash, no verdict) come back
as :class:`GradeResult` rewards. Infrastructure failures (the node is down,
draining or at capacity past the retry budget, the session is gone, the
transport broke) raise a :class:`~collimate_rl.errors.CollimateError`: they are
never folded into a reward, except as a flagged ``infra_error`` result when a
batch asks for ``on_infra_error="zero"``.

Preparing a grade (``_grade_job``), its I/O (``_grade_exec``), reading the
answer (``_grade_verdict``) and batches (``_grade_batch``) each have their own
module; the sync and async entry points share all but the I/O calls.

>>> import subprocess, sys, tempfile
>>> from collimate_rl.grading import UnitTestReward
>>> class PlainSubprocess:  # stands in for a node client here; no sandbox at all
...     def exec_once(self, template_id, *, code, files, timeout_seconds, seed):
...         for f in files:
...             with open(f["path"], "w") as fh:
...                 fh.write(f["content"])
...         with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
...             fh.write(code)
...         env = {"COLLIMATE_SEED": seed or "0" * 64, "COLLIMATE_CODE_FILE": fh.name}
...         run = subprocess.run([sys.executable, "-I", fh.name], env=env, capture_output=True,
...                              text=True, timeout=timeout_seconds)
...         return {"stdout": run.stdout + run.stderr, "exit_code": run.returncode, "seed": env["COLLIMATE_SEED"]}
>>> spec = UnitTestReward([{"input": [2, 2], "expected": 4}, {"input": [1, 2], "expected": 3}], entry="add")
>>> result = grade(PlainSubprocess(), "python3", "```python\\ndef add(a, b):\\n    return a * b\\n```", spec)
>>> result.reward, result.passed, result.total, [t.status for t in result.tests]
(0.5, 1, 2, ['pass', 'fail'])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collimate_rl.grading._grade_batch import (
    InfraErrorMode,
    ProgressCallback,
    ResultCallback,
    agrade_batch,
    grade_batch,
)
from collimate_rl.grading._grade_exec import GradeRecorder, _run_async, _run_sync
from collimate_rl.grading._grade_job import Extract, _prepare
from collimate_rl.grading._grade_verdict import OUTPUT_TAIL_CHARS
from collimate_rl.grading.result import GradeResult
from collimate_rl.grading.specs import RewardSpec

__all__ = [
    "OUTPUT_TAIL_CHARS",
    "InfraErrorMode",
    "ProgressCallback",
    "ResultCallback",
    "agrade",
    "agrade_batch",
    "grade",
    "grade_batch",
]


def grade(
    client: Any,
    template: str,
    completion: str,
    spec: RewardSpec,
    *,
    seed: str | None = None,
    timeout_seconds: float = 30.0,
    session_id: str | None = None,
    extract: Extract = True,
    recorder: GradeRecorder | None = None,
    egress: Mapping[str, Any] | None = None,
) -> GradeResult:
    """Grade one completion in one exec.

    Args:
        client: a daemon-surface client (``exec_once`` / ``session_exec``).
        template: the template id (``"python3"`` on a local node; ``"cpp"``,
            ``"java"``, ... grade those languages, see ``IOReward``).
        completion: the model's text; the code is extracted from it.
        spec: the reward spec.
        seed: 64 hex characters, or ``None`` for a fresh one (echoed back).
        timeout_seconds: the exec's timeout; the harness keeps a margin so a
            hanging candidate still gets a verdict.
        session_id: run in this session instead of a one-shot exec. Note:
            concurrent grades in one session share its filesystem.
        extract: ``True`` (the program :func:`~collimate_rl.grading.extract_code` finds in
            the spec's language: the prose dropped, helpers and imports kept), ``False`` (the
            completion is the code) or a callable.
        recorder: a :class:`~collimate_rl.grading.ReplayRecorder` to append to
            (it records ``egress`` too).
        egress: the egress policy of a one-shot grade on a networked template
            (docs/egress.md); a session's policy is set when it is created.

    Raises:
        CollimateError: an infrastructure failure (never a task failure).
        CollimateUsageError: bad arguments.
    """
    job = _prepare(
        template,
        completion,
        spec,
        seed=seed,
        timeout_seconds=timeout_seconds,
        session_id=session_id,
        extract=extract,
        egress=egress,
    )
    return _run_sync(client, job, recorder)


async def agrade(
    client: Any,
    template: str,
    completion: str,
    spec: RewardSpec,
    *,
    seed: str | None = None,
    timeout_seconds: float = 30.0,
    session_id: str | None = None,
    extract: Extract = True,
    recorder: GradeRecorder | None = None,
    egress: Mapping[str, Any] | None = None,
) -> GradeResult:
    """The async twin of :func:`grade` (for ``AsyncCollimateClient``)."""
    job = _prepare(
        template,
        completion,
        spec,
        seed=seed,
        timeout_seconds=timeout_seconds,
        session_id=session_id,
        extract=extract,
        egress=egress,
    )
    return await _run_async(client, job, recorder)
