"""Grade completions on a node: one exec per candidate, verdicts as rewards.

Task failures (wrong answer, exception, timeout, crash, no verdict) come back
as :class:`GradeResult` rewards. Infrastructure failures (the node is down,
draining or at capacity past the retry budget, the session is gone, the
transport broke) raise a :class:`~collimate_rl.errors.CollimateError`: they are
never folded into a reward, except as a flagged ``infra_error`` result when a
batch asks for ``on_infra_error="zero"``.

The request building and response reading are shared; the sync and async
entry points only do the I/O.

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

import contextlib
import dataclasses
import hashlib
import json
import math
import re
import secrets
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import httpx

from collimate_rl.errors import (
    CollimateError,
    CollimateTaskError,
    CollimateTransportError,
    CollimateUsageError,
)
from collimate_rl.grading._shipping import HARNESS_MISS, MISS_EXIT_CODE
from collimate_rl.grading.extract import extract_code
from collimate_rl.grading.result import GradeResult, TestOutcome
from collimate_rl.grading.specs import Program, RewardSpec

if TYPE_CHECKING:
    from collimate_rl.grading.replay import ReplayRecorder

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

#: ``GradeResult.output_tail`` keeps at most this many characters.
OUTPUT_TAIL_CHARS = 4096

InfraErrorMode = Literal["raise", "zero", "skip"]
ProgressCallback = Callable[[int, int], None]
ResultCallback = Callable[[int, GradeResult], None]
Extract = bool | Callable[[str], str]

_SEED = re.compile(r"[0-9a-fA-F]{64}")


class _SyncClient(Protocol):
    def exec_once(self, template_id: str, **kwargs: Any) -> Any: ...
    def session_exec(self, session_id: str, **kwargs: Any) -> Any: ...


class _AsyncClient(Protocol):
    async def exec_once(self, template_id: str, **kwargs: Any) -> Any: ...
    async def session_exec(self, session_id: str, **kwargs: Any) -> Any: ...


@dataclasses.dataclass(frozen=True)
class _Job:
    """One prepared grade (everything but the I/O)."""

    template: str
    spec: RewardSpec
    completion: str
    source: str
    program: Program
    nonce: str
    seed: str | None
    timeout_seconds: float
    session_id: str | None
    egress: Mapping[str, Any] | None = None

    def request(self, warm: bool = False) -> dict[str, Any]:
        return {
            "code": self.program.warm_code
            if warm and self.program.warm_code
            else self.program.code,
            "files": self.program.files,
            "timeout_seconds": max(1, math.ceil(self.timeout_seconds)),
            "seed": self.seed,
        }


def _prepare(
    template: str,
    completion: str,
    spec: RewardSpec,
    *,
    seed: str | None,
    timeout_seconds: float,
    session_id: str | None,
    extract: Extract,
    egress: Mapping[str, Any] | None = None,
) -> _Job:
    if not isinstance(spec, RewardSpec):
        raise CollimateUsageError(f"spec must be a RewardSpec, not {type(spec).__name__}")
    if not isinstance(completion, str):
        raise CollimateUsageError(f"completion must be text, not {type(completion).__name__}")
    if seed is not None and not (isinstance(seed, str) and _SEED.fullmatch(seed)):
        raise CollimateUsageError(f"seed must be 64 hex characters or None, not {seed!r}")
    if not timeout_seconds > 0:
        raise CollimateUsageError(f"timeout_seconds must be positive, not {timeout_seconds!r}")
    if egress is not None and session_id is not None:
        raise CollimateUsageError(
            "egress applies to one-shot grades; a session's policy is set when it is created"
        )
    if extract is True:
        source = extract_code(completion, entry=spec.extract_entry)
    elif extract is False:
        source = completion
    else:
        source = extract(completion)
    nonce = secrets.token_hex(16)
    program = spec.build(source, nonce=nonce, timeout_seconds=timeout_seconds)
    return _Job(
        template,
        spec,
        completion,
        source,
        program,
        nonce,
        seed,
        timeout_seconds,
        session_id,
        dict(egress) if egress is not None else None,
    )


class _WarmClients:
    """Which clients get the short warm stub: all until one answers it with a miss.

    A miss (the sandbox has no matching warm harness: a gateway, another
    version) costs one extra exec that ran nothing; from then on that client
    gets the full program. Clients that cannot be weakly referenced always do.
    """

    def __init__(self) -> None:
        self._cold: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()

    def warm(self, client: Any) -> bool:
        try:
            return client not in self._cold
        except TypeError:
            return False

    def missed(self, client: Any) -> None:
        with contextlib.suppress(TypeError):
            self._cold[client] = True


_WARM = _WarmClients()


def _missed(response: Any) -> bool:
    """Whether a warm stub found no warm harness (it ran nothing then)."""
    if isinstance(response, CollimateTaskError):
        stdout, code = response.output, response.exit_code
    else:
        stdout, code = _field(response, "stdout"), _field(response, "exit_code")
    if code != MISS_EXIT_CODE or not isinstance(stdout, str):
        return False
    lines = stdout.strip().splitlines()
    return bool(lines) and lines[-1].strip() == HARNESS_MISS


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
    common: dict[str, Any] = {
        "exit_code": exit_code,
        "seed": _field(response, "seed") or job.seed,
        "seed_ack": _field(response, "seed_ack"),
        "fork_time_ms": _float(_field(response, "fork_time_ms")),
        "exec_time_ms": _float(_field(response, "exec_time_ms")),
        "total_time_ms": _float(_field(response, "total_time_ms")),
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


def _one_shot(job: _Job, warm: bool) -> dict[str, Any]:
    request = job.request(warm)
    if job.egress is not None:  # only when asked: a client need not know the keyword
        request["egress"] = job.egress
    return request


def _call_sync(client: _SyncClient, job: _Job, warm: bool) -> Any:
    if job.session_id is not None:
        return client.session_exec(job.session_id, **job.request(warm))
    return client.exec_once(job.template, **_one_shot(job, warm))


async def _call_async(client: _AsyncClient, job: _Job, warm: bool) -> Any:
    if job.session_id is not None:
        return await client.session_exec(job.session_id, **job.request(warm))
    return await client.exec_once(job.template, **_one_shot(job, warm))


def _exec_sync(client: _SyncClient, job: _Job) -> Any:
    """The exec's response: the warm stub first where it may work, the full program after a miss."""
    if _WARM.warm(client):
        try:
            response = _call_sync(client, job, warm=True)
        except CollimateTaskError as exc:
            if not _missed(exc):
                raise
        else:
            if not _missed(response):
                return response
        _WARM.missed(client)
    return _call_sync(client, job, warm=False)


async def _exec_async(client: _AsyncClient, job: _Job) -> Any:
    """The async twin of :func:`_exec_sync`."""
    if _WARM.warm(client):
        try:
            response = await _call_async(client, job, warm=True)
        except CollimateTaskError as exc:
            if not _missed(exc):
                raise
        else:
            if not _missed(response):
                return response
        _WARM.missed(client)
    return await _call_async(client, job, warm=False)


def _run_sync(client: _SyncClient, job: _Job, recorder: ReplayRecorder | None) -> GradeResult:
    try:
        response = _exec_sync(client, job)
    except CollimateTaskError as exc:
        result = _task_failure(job, exc)
    except Exception as exc:
        infra = _infra(exc)
        if infra is None or infra is exc:
            raise
        raise infra from exc
    else:
        result = _finish(job, response)
    if recorder is not None:
        recorder.record(
            job.template,
            job.spec,
            job.completion,
            job.source,
            job.timeout_seconds,
            result,
            egress=job.egress,
        )
    return result


async def _run_async(
    client: _AsyncClient, job: _Job, recorder: ReplayRecorder | None
) -> GradeResult:
    try:
        response = await _exec_async(client, job)
    except CollimateTaskError as exc:
        result = _task_failure(job, exc)
    except Exception as exc:
        infra = _infra(exc)
        if infra is None or infra is exc:
            raise
        raise infra from exc
    else:
        result = _finish(job, response)
    if recorder is not None:
        recorder.record(
            job.template,
            job.spec,
            job.completion,
            job.source,
            job.timeout_seconds,
            result,
            egress=job.egress,
        )
    return result


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
    recorder: ReplayRecorder | None = None,
    egress: Mapping[str, Any] | None = None,
) -> GradeResult:
    """Grade one completion in one exec.

    Args:
        client: a daemon-surface client (``exec_once`` / ``session_exec``).
        template: the template id (``"python3"`` on a local node).
        completion: the model's text; the code is extracted from it.
        spec: the reward spec.
        seed: 64 hex characters, or ``None`` for a fresh one (echoed back).
        timeout_seconds: the exec's timeout; the harness keeps a margin so a
            hanging candidate still gets a verdict.
        session_id: run in this session instead of a one-shot exec. Note:
            concurrent grades in one session share its filesystem.
        extract: ``True`` (the last fenced python block, see
            :func:`extract_code`), ``False`` (the completion is the code) or a
            callable.
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
    recorder: ReplayRecorder | None = None,
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


def _batch_jobs(
    template: str,
    completions: Sequence[str],
    spec: RewardSpec | Sequence[RewardSpec],
    seeds: str | Sequence[str | None] | None,
    on_infra_error: str,
    concurrency: int,
    **kwargs: Any,
) -> list[_Job]:
    if on_infra_error not in ("raise", "zero", "skip"):
        raise CollimateUsageError(
            f"on_infra_error must be 'raise', 'zero' or 'skip', not {on_infra_error!r}"
        )
    if not isinstance(concurrency, int) or concurrency < 1:
        raise CollimateUsageError(f"concurrency must be a positive int, not {concurrency!r}")
    n = len(completions)
    specs = [spec] * n if isinstance(spec, RewardSpec) else list(spec)
    seed_list = [seeds] * n if seeds is None or isinstance(seeds, str) else list(seeds)
    if len(specs) != n or len(seed_list) != n:
        raise CollimateUsageError(
            f"got {n} completions but {len(specs)} specs and {len(seed_list)} seeds"
        )
    return [
        _prepare(template, c, s, seed=sd, **kwargs)
        for c, s, sd in zip(completions, specs, seed_list, strict=False)
    ]


def _zero(job: _Job, exc: CollimateError) -> GradeResult:
    return GradeResult(
        reward=0.0,
        seed=job.seed,
        infra_error=True,
        error=f"infrastructure error: {type(exc).__name__}: {exc}",
    )


def _report_result(
    on_result: ResultCallback | None,
    jobs: list[_Job],
    index: int,
    results: list[GradeResult | None],
    errors: dict[int, CollimateError],
    on_infra_error: str,
) -> None:
    """Hand one finished grade to ``on_result`` as :func:`_assemble` will see it."""
    if on_result is None:
        return
    result = results[index]
    if index in errors:
        if on_infra_error == "zero":
            on_result(index, _zero(jobs[index], errors[index]))
    elif result is not None:
        on_result(index, result)


def _assemble(
    jobs: list[_Job],
    results: list[GradeResult | None],
    errors: dict[int, CollimateError],
    on_infra_error: str,
) -> list[GradeResult]:
    if errors and on_infra_error == "raise":
        raise errors[min(errors)]
    out: list[GradeResult] = []
    for i, job in enumerate(jobs):
        result = results[i]
        if i in errors:
            if on_infra_error == "zero":
                out.append(_zero(job, errors[i]))
        elif result is not None:
            out.append(result)
    return out


def grade_batch(
    client: Any,
    template: str,
    completions: Sequence[str],
    spec: RewardSpec | Sequence[RewardSpec],
    *,
    seeds: str | Sequence[str | None] | None = None,
    timeout_seconds: float = 30.0,
    concurrency: int = 16,
    on_infra_error: InfraErrorMode = "raise",
    progress: ProgressCallback | None = None,
    session_id: str | None = None,
    extract: Extract = True,
    recorder: ReplayRecorder | None = None,
    on_result: ResultCallback | None = None,
    egress: Mapping[str, Any] | None = None,
) -> list[GradeResult]:
    """Grade many completions concurrently; results keep the input order.

    Args:
        spec: one spec for all, or one per completion.
        seeds: ``None`` (fresh per exec), one seed for all (common random
            numbers), or one per completion.
        concurrency: at most this many execs in flight.
        on_infra_error: ``"raise"`` (default: the lowest-index infrastructure
            error propagates after in-flight grades finish; resample the
            group), ``"zero"`` (that slot gets reward 0.0 with
            ``infra_error=True``) or ``"skip"`` (that slot is dropped).
        progress: called as ``progress(done, total)`` after each grade.
        on_result: called as ``on_result(index, result)`` as each grade
            finishes, before ``progress`` (to stream results, e.g. to a
            resumable log); under ``on_infra_error="zero"`` an infrastructure
            failure comes as its flagged zero result, under ``"skip"`` and
            ``"raise"`` it does not come at all.
        Other arguments (``egress`` included): as for :func:`grade`.
    """
    jobs = _batch_jobs(
        template,
        completions,
        spec,
        seeds,
        on_infra_error,
        concurrency,
        timeout_seconds=timeout_seconds,
        session_id=session_id,
        extract=extract,
        egress=egress,
    )
    results: list[GradeResult | None] = [None] * len(jobs)
    errors: dict[int, CollimateError] = {}
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=min(concurrency, len(jobs))) as pool:
        futures: dict[Future[GradeResult], int] = {
            pool.submit(_run_sync, client, job, recorder): i for i, job in enumerate(jobs)
        }
        done = 0
        try:
            for future in as_completed(futures):
                if future.cancelled():
                    continue
                index = futures[future]
                try:
                    results[index] = future.result()
                except CollimateError as exc:
                    errors[index] = exc
                    if on_infra_error == "raise":
                        for pending in futures:
                            pending.cancel()
                _report_result(on_result, jobs, index, results, errors, on_infra_error)
                done += 1
                if progress is not None:
                    progress(done, len(jobs))
        except BaseException:
            for pending in futures:
                pending.cancel()
            raise
    return _assemble(jobs, results, errors, on_infra_error)


async def agrade_batch(
    client: Any,
    template: str,
    completions: Sequence[str],
    spec: RewardSpec | Sequence[RewardSpec],
    *,
    seeds: str | Sequence[str | None] | None = None,
    timeout_seconds: float = 30.0,
    concurrency: int = 16,
    on_infra_error: InfraErrorMode = "raise",
    progress: ProgressCallback | None = None,
    session_id: str | None = None,
    extract: Extract = True,
    recorder: ReplayRecorder | None = None,
    on_result: ResultCallback | None = None,
    egress: Mapping[str, Any] | None = None,
) -> list[GradeResult]:
    """The async twin of :func:`grade_batch` (runs on asyncio or trio via anyio)."""
    jobs = _batch_jobs(
        template,
        completions,
        spec,
        seeds,
        on_infra_error,
        concurrency,
        timeout_seconds=timeout_seconds,
        session_id=session_id,
        extract=extract,
        egress=egress,
    )
    results: list[GradeResult | None] = [None] * len(jobs)
    errors: dict[int, CollimateError] = {}
    limiter = anyio.CapacityLimiter(concurrency)
    done = 0

    async with anyio.create_task_group() as group:

        async def one(index: int, job: _Job) -> None:
            nonlocal done
            async with limiter:
                try:
                    results[index] = await _run_async(client, job, recorder)
                except CollimateError as exc:
                    errors[index] = exc
                    if on_infra_error == "raise":
                        group.cancel_scope.cancel()
                        return
            _report_result(on_result, jobs, index, results, errors, on_infra_error)
            done += 1
            if progress is not None:
                progress(done, len(jobs))

        for index, job in enumerate(jobs):
            group.start_soon(one, index, job)
    return _assemble(jobs, results, errors, on_infra_error)
