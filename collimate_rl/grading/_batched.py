"""Grades sent to our local node in batches: one request per group, not one per exec.

The node's ``POST /v1/exec/batch`` extension (``client.exec_batch``) runs many
grading execs, each in its own session (a GRPO member) or one-shot. A client
without the method, or a node answering that it has no such route (a real
daemon, a gateway), gets ``None`` here and the caller grades exec by exec on
the contract's routes. Everything else is the per-exec path's: the warm stub
first and the full harness after a miss, the same frames, the same split of
task failures (rewards) and infrastructure failures (exceptions, per item).

>>> class NoBatch:
...     pass
>>> grade_jobs_batched(NoBatch(), [], None) is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from collimate_rl.errors import (
    CollimateError,
    CollimateTaskError,
    CollimateTransportError,
)
from collimate_rl.grading._grade_exec import _WARM, GradeRecorder, _missed, _one_shot, _record
from collimate_rl.grading._grade_job import _Job, _prepare
from collimate_rl.grading._grade_verdict import _finish, _infra, _task_failure
from collimate_rl.grading.result import GradeResult
from collimate_rl.wire._extensions import exec_batch_op, has_batch_route
from collimate_rl.wire._operations import Op, adrive, drive

if TYPE_CHECKING:
    from collimate_rl.grading.specs import RewardSpec

__all__ = [
    "BATCH_ITEMS",
    "BatchItem",
    "agrade_jobs_batched",
    "grade_items",
    "grade_jobs_batched",
    "prepare_items",
    "request_window",
    "supports_batches",
    "take_as_completed",
]

K = TypeVar("K")
R = TypeVar("R")

#: Most items per request (the node takes up to 1,024).
BATCH_ITEMS = 64

Outcome = GradeResult | CollimateError
#: One grade of :func:`grade_items`: (completion, spec, seed, session id or None).
BatchItem = tuple[str, "RewardSpec", "str | None", "str | None"]


def supports_batches(client: Any) -> bool:
    """Whether grades for ``client`` may go through ``exec_batch``."""
    return has_batch_route(client)


def _item(job: _Job, warm: bool) -> dict[str, Any]:
    if job.session_id is not None:
        return {**job.request(warm), "session_id": job.session_id}
    return {**_one_shot(job, warm), "template_id": job.template}  # the egress policy too


_GONE = "the node's batch route disappeared"


def _failed(exc: Exception) -> CollimateError:
    """What a batch request that failed as a whole answers for each of its items."""
    infra = _infra(exc)
    if infra is None and isinstance(exc, RuntimeError):  # e.g. its client was closed
        infra = CollimateTransportError(f"exec request failed: {exc}")
        infra.__cause__ = exc
    if infra is None:
        raise exc
    return infra


def _request(client: Any, jobs: Sequence[_Job]) -> Op[list[Any] | None]:
    """Answers for ``jobs``: the warm stub where it may work, then the full program for misses.

    An operation, driven by ``drive`` or ``adrive`` like the sandbox's; each
    request is :func:`~collimate_rl.wire._extensions.exec_batch_op` (items the
    node shed are resent, like a single exec's 503). ``None`` when the node has
    no batch route (nothing ran).
    """
    warm = _WARM.warm(client)
    items = [_item(job, warm) for job in jobs]
    answers = yield from exec_batch_op(client, items, _failed)
    if answers is None or not warm:
        return answers
    missed = [i for i, r in enumerate(answers) if not isinstance(r, Exception) and _missed(r)]
    if missed:
        _WARM.missed(client)
        full = [_item(jobs[i], False) for i in missed]
        again = yield from exec_batch_op(client, full, _failed)
        for i, answer in zip(missed, again or [CollimateError(_GONE)] * len(missed), strict=True):
            answers[i] = answer
    return answers


def _outcome(job: _Job, response: Any, recorder: GradeRecorder | None) -> Outcome:
    if isinstance(response, CollimateTaskError):
        result = _task_failure(job, response)
    elif isinstance(response, CollimateError):
        return response
    else:
        try:
            result = _finish(job, response)
        except CollimateError as exc:  # e.g. the sandbox lacks the language's toolchain
            return exc  # per item, as on the per-exec path
    _record(recorder, job, result)
    return result


OnChunk = Callable[[list[tuple[int, Outcome]]], bool]
#: A request's jobs and the index of its first.
Chunk = tuple[int, list[_Job]]

#: Requests in flight at once for a ``concurrency`` (see :func:`request_window`).
REQUESTS_IN_FLIGHT = 4


def request_window(concurrency: int) -> tuple[int, int]:
    """Items per request and requests in flight, for at most ``concurrency`` grades in flight.

    A batch request answers when its slowest item is done, so the grades go in a
    few smaller requests at once: a grade that hangs until its timeout holds back
    only its own request's answers, while the other requests keep the node busy.

    >>> [request_window(c) for c in (16, 64, 10, 2, 1)]
    [(4, 4), (16, 4), (3, 3), (1, 2), (1, 1)]
    """
    per_request = min(BATCH_ITEMS, -(-concurrency // REQUESTS_IN_FLIGHT))
    return per_request, max(1, concurrency // per_request)


class _Answers:
    """The requests' answers as they arrive, in whatever order: outcomes, and whether to go on."""

    def __init__(
        self, chunks: list[Chunk], recorder: GradeRecorder | None, on_chunk: OnChunk | None
    ) -> None:
        self.chunks = chunks
        self.outcomes: list[Outcome | None] = [None] * sum(len(jobs) for _, jobs in chunks)
        self.recorder = recorder
        self.on_chunk = on_chunk
        self.answered = False  # a request got its answers
        self.refused = False  # a request found no batch route
        self.halted = False  # ``on_chunk`` asked to stop

    @property
    def stopped(self) -> bool:
        """Send nothing more: the caller said so, or the node seems to have no batch route."""
        return self.halted or (self.refused and not self.answered)

    def take(self, chunk: Chunk, answers: list[Any] | None) -> None:
        """File one request's answers (``None``: the node has no batch route)."""
        if answers is None:
            self.refused = True
            if self.answered:  # another node behind the URL?
                self._file(chunk, [CollimateError(_GONE)] * len(chunk[1]))
            return
        self.answered = True
        self._file(chunk, answers)

    def _file(self, chunk: Chunk, answers: list[Any]) -> None:
        start, jobs = chunk
        done = [
            (start + i, _outcome(job, answer, self.recorder))
            for i, (job, answer) in enumerate(zip(jobs, answers, strict=True))
        ]
        for index, outcome in done:
            self.outcomes[index] = outcome
        if self.on_chunk is not None and not self.on_chunk(done):
            self.halted = True

    def result(self) -> list[Outcome | None] | None:
        """Every job's outcome, ``None`` for jobs not sent once ``on_chunk`` stopped; or
        ``None`` when the node refused the route before answering anything (nothing ran)."""
        if not self.answered:
            return None if self.refused else self.outcomes
        if not self.halted:  # jobs refused, or not sent, before the first answer came
            for chunk in self.chunks:
                if self.outcomes[chunk[0]] is None:
                    self._file(chunk, [CollimateError(_GONE)] * len(chunk[1]))
        return self.outcomes


def take_as_completed(
    futures: Mapping[Future[R], K],
    take: Callable[[K, Future[R]], None],
    stopped: Callable[[], bool],
) -> None:
    """Hand each finished future and its key to ``take``, as they finish.

    Once ``stopped()`` says so (or ``take`` raises), the futures not started yet
    are cancelled; those running finish and are taken too.
    """
    try:
        for future in as_completed(futures):
            if not future.cancelled():
                take(futures[future], future)
            if stopped():
                for pending in futures:
                    pending.cancel()
    except BaseException:
        for pending in futures:
            pending.cancel()
        raise


def _chunks(jobs: Sequence[_Job], per_request: int) -> list[Chunk]:
    step = max(1, min(per_request, BATCH_ITEMS))
    return [(start, list(jobs[start : start + step])) for start in range(0, len(jobs), step)]


def grade_jobs_batched(
    client: Any,
    jobs: Sequence[_Job],
    recorder: GradeRecorder | None,
    *,
    window: tuple[int, int] = (BATCH_ITEMS, 1),
    on_chunk: OnChunk | None = None,
) -> list[Outcome | None] | None:
    """Grade ``jobs`` through the node's batch route; per job a result or an infra error.

    ``window`` is (items per request, requests in flight): at most their product
    is in flight, the next request sent as soon as one is answered. ``on_chunk``
    gets each request's ``(index, outcome)`` pairs as they arrive and returns
    False to stop sending (the jobs not sent stay ``None``). ``None`` when the
    client or its node has no batch route: nothing ran, grade exec by exec then.
    """
    if not supports_batches(client):
        return None
    per_request, in_flight = window
    chunks = _chunks(jobs, per_request)
    answers = _Answers(chunks, recorder, on_chunk)
    if in_flight <= 1 or len(chunks) == 1:  # in turn, in this thread (a GRPO step)
        for chunk in chunks:
            if answers.stopped:
                break
            answers.take(chunk, drive(_request(client, chunk[1]), client))
        return answers.result()
    with ThreadPoolExecutor(max_workers=min(in_flight, len(chunks))) as pool:
        futures = {
            pool.submit(drive, _request(client, chunk[1]), client): chunk for chunk in chunks
        }
        take_as_completed(
            futures,
            lambda chunk, future: answers.take(chunk, future.result()),
            lambda: answers.stopped,
        )
    return answers.result()


async def agrade_jobs_batched(
    client: Any,
    jobs: Sequence[_Job],
    recorder: GradeRecorder | None,
    *,
    window: tuple[int, int] = (BATCH_ITEMS, 1),
    on_chunk: OnChunk | None = None,
) -> list[Outcome | None] | None:
    """The async twin of :func:`grade_jobs_batched` (an async client's ``exec_batch``)."""
    if not supports_batches(client):
        return None
    per_request, in_flight = window
    chunks = _chunks(jobs, per_request)
    answers = _Answers(chunks, recorder, on_chunk)
    limiter = anyio.CapacityLimiter(max(1, in_flight))

    async with anyio.create_task_group() as group:

        async def one(chunk: Chunk) -> None:
            async with limiter:
                if answers.stopped:
                    return
                reply = await adrive(_request(client, chunk[1]), client)
            answers.take(chunk, reply)
            if answers.stopped:
                group.cancel_scope.cancel()

        for chunk in chunks:
            group.start_soon(one, chunk)
    return answers.result()


def prepare_items(template: str, items: Sequence[BatchItem], timeout_seconds: float) -> list[_Job]:
    """Each item's grade, ready to send: its code extracted, its exec built."""
    return [
        _prepare(
            template,
            completion,
            spec,
            seed=seed,
            timeout_seconds=timeout_seconds,
            session_id=session_id,
            extract=True,
        )
        for completion, spec, seed, session_id in items
    ]


def grade_items(
    client: Any,
    template: str,
    items: Sequence[BatchItem],
    *,
    timeout_seconds: float,
    recorder: GradeRecorder | None = None,
) -> list[Outcome] | None:
    """Grade ``(completion, spec, seed, session_id)`` items in batches (e.g. a GRPO step).

    Each item grades in its own session (or one-shot in ``template`` when its
    session id is None). ``None`` when there is no batch route.

    Raises:
        CollimateUsageError: a bad item (before anything is sent).
    """
    if not supports_batches(client):
        return None
    outcomes = grade_jobs_batched(client, prepare_items(template, items, timeout_seconds), recorder)
    if outcomes is None:
        return None
    return [o if o is not None else CollimateError("not graded") for o in outcomes]
