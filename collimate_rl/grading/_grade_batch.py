"""Many grades at once (``grade_batch``, ``agrade_batch``): bounded concurrency, results in
input order, and what an infrastructure failure does to its slot."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal

import anyio

from collimate_rl.errors import CollimateError, CollimateUsageError
from collimate_rl.grading._batched import (
    agrade_jobs_batched,
    grade_jobs_batched,
    request_window,
    take_as_completed,
)
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


class _Results:
    """The outcomes of one batch as they arrive, whichever path graded them."""

    def __init__(
        self,
        jobs: list[_Job],
        on_infra_error: str,
        on_result: ResultCallback | None,
        progress: ProgressCallback | None,
    ) -> None:
        self.jobs = jobs
        self.on_infra_error = on_infra_error
        self.on_result = on_result
        self.progress = progress
        self.results: list[GradeResult | None] = [None] * len(jobs)
        self.errors: dict[int, CollimateError] = {}
        self.finished = 0

    @property
    def failed_hard(self) -> bool:
        """An infrastructure error under ``"raise"``: stop sending more."""
        return bool(self.errors) and self.on_infra_error == "raise"

    def file(self, index: int, outcome: GradeResult | CollimateError) -> None:
        """Keep one grade's outcome, hand it to ``on_result`` as :meth:`assemble` will see
        it, and count it for ``progress``."""
        if isinstance(outcome, CollimateError):
            self.errors[index] = outcome
            if self.on_result is not None and self.on_infra_error == "zero":
                self.on_result(index, _zero(self.jobs[index], outcome))
        else:
            self.results[index] = outcome
            if self.on_result is not None:
                self.on_result(index, outcome)
        self.finished += 1
        if self.progress is not None:
            self.progress(self.finished, len(self.jobs))

    def file_future(self, index: int, future: Future[GradeResult]) -> None:
        """File a per-exec grade: its result, or the infrastructure error it raised."""
        try:
            outcome: GradeResult | CollimateError = future.result()
        except CollimateError as exc:
            outcome = exc
        self.file(index, outcome)

    def take_chunk(self, chunk: list[tuple[int, GradeResult | CollimateError]]) -> bool:
        """File a batch request's outcomes; False once a ``"raise"`` batch failed."""
        for index, outcome in chunk:
            self.file(index, outcome)
        return not self.failed_hard

    def assemble(self) -> list[GradeResult]:
        """The results in input order, infrastructure errors handled per ``on_infra_error``."""
        if self.failed_hard:
            raise self.errors[min(self.errors)]
        out: list[GradeResult] = []
        for i, job in enumerate(self.jobs):
            result = self.results[i]
            if i in self.errors:
                if self.on_infra_error == "zero":
                    out.append(_zero(job, self.errors[i]))
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
        concurrency: at most this many execs in flight (on our local node: in
            up to four batch requests at once, so a grade that hangs holds back
            only its own request's answers; see ``_batched.request_window``).
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
    if not jobs:
        return []
    outcomes = _Results(jobs, on_infra_error, on_result, progress)
    batched = grade_jobs_batched(
        client, jobs, recorder, window=request_window(concurrency), on_chunk=outcomes.take_chunk
    )
    if batched is not None:  # our node: its batch route
        return outcomes.assemble()
    with ThreadPoolExecutor(max_workers=min(concurrency, len(jobs))) as pool:
        futures: dict[Future[GradeResult], int] = {
            pool.submit(_run_sync, client, job, recorder): i for i, job in enumerate(jobs)
        }
        take_as_completed(futures, outcomes.file_future, lambda: outcomes.failed_hard)
    return outcomes.assemble()


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
    if not jobs:
        return []
    outcomes = _Results(jobs, on_infra_error, on_result, progress)
    batched = await agrade_jobs_batched(
        client, jobs, recorder, window=request_window(concurrency), on_chunk=outcomes.take_chunk
    )
    if batched is not None:  # our node: its batch route
        return outcomes.assemble()
    limiter = anyio.CapacityLimiter(concurrency)

    async with anyio.create_task_group() as group:

        async def one(index: int, job: _Job) -> None:
            async with limiter:
                try:
                    outcome: GradeResult | CollimateError = await _run_async(client, job, recorder)
                except CollimateError as exc:
                    outcome = exc
            outcomes.file(index, outcome)
            if outcomes.failed_hard:
                group.cancel_scope.cancel()

        for index, job in enumerate(jobs):
            group.start_soon(one, index, job)
    return outcomes.assemble()
