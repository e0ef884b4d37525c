"""Many grades at once (``grade_batch``, ``agrade_batch``): bounded concurrency, results in
input order, and what an infrastructure failure does to its slot."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any, Literal

import anyio

from collimate_rl.errors import CollimateError, CollimateUsageError
from collimate_rl.grading._batched import agrade_jobs_batched, grade_jobs_batched
from collimate_rl.grading._grade_exec import GradeRecorder, _run_async, _run_sync
from collimate_rl.grading._grade_job import Extract, _Job, _prepare
from collimate_rl.grading.result import GradeResult
from collimate_rl.grading.specs import RewardSpec

__all__ = ["InfraErrorMode", "ProgressCallback", "ResultCallback", "agrade_batch", "grade_batch"]

InfraErrorMode = Literal["raise", "zero", "skip"]

ProgressCallback = Callable[[int, int], None]

ResultCallback = Callable[[int, GradeResult], None]


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


def _chunk_taker(
    jobs: list[_Job],
    results: list[GradeResult | None],
    errors: dict[int, CollimateError],
    on_infra_error: str,
    on_result: ResultCallback | None,
    progress: ProgressCallback | None,
) -> Callable[[list[tuple[int, GradeResult | CollimateError]]], bool]:
    """Files a batch request's outcomes as they arrive; False once a ``"raise"`` batch failed."""
    finished = 0

    def take(chunk: list[tuple[int, GradeResult | CollimateError]]) -> bool:
        nonlocal finished
        for index, outcome in chunk:
            if isinstance(outcome, CollimateError):
                errors[index] = outcome
            else:
                results[index] = outcome
            _report_result(on_result, jobs, index, results, errors, on_infra_error)
            finished += 1
            if progress is not None:
                progress(finished, len(jobs))
        return not (errors and on_infra_error == "raise")

    return take


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
    recorder: GradeRecorder | None = None,
    on_result: ResultCallback | None = None,
    egress: Mapping[str, Any] | None = None,
) -> list[GradeResult]:
    """Grade many completions concurrently; results keep the input order.

    Args:
        spec: one spec for all, or one per completion.
        seeds: ``None`` (fresh per exec), one seed for all (common random
            numbers), or one per completion.
        concurrency: at most this many execs in flight (on our local node:
            batch requests of that many grades, up to 64, one at a time).
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
    take = _chunk_taker(jobs, results, errors, on_infra_error, on_result, progress)
    batched = grade_jobs_batched(client, jobs, recorder, per_request=concurrency, on_chunk=take)
    if batched is not None:  # our node: one request
        return _assemble(jobs, results, errors, on_infra_error)
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
    recorder: GradeRecorder | None = None,
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
    if not jobs:
        return []
    take = _chunk_taker(jobs, results, errors, on_infra_error, on_result, progress)
    batched = await agrade_jobs_batched(
        client, jobs, recorder, per_request=concurrency, on_chunk=take
    )
    if batched is not None:  # our node: one request
        return _assemble(jobs, results, errors, on_infra_error)
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
