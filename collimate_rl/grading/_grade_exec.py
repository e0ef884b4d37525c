"""One grade's I/O, sync and async: the warm stub where it may work, the full program after
a miss; the verdict read; the grade recorded."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Mapping
from typing import Any, Protocol

from collimate_rl.errors import CollimateTaskError
from collimate_rl.grading._grade_job import _Job
from collimate_rl.grading._grade_verdict import _field, _finish, _infra, _task_failure
from collimate_rl.grading._shipping import HARNESS_MISS, MISS_EXIT_CODE
from collimate_rl.grading.result import GradeResult
from collimate_rl.grading.specs import RewardSpec

__all__ = ["GradeRecorder"]


class GradeRecorder(Protocol):
    """What a grade appends itself to (:class:`~collimate_rl.grading.ReplayRecorder` is one)."""

    def record(
        self,
        template: str,
        spec: RewardSpec,
        completion: str,
        code: str,
        timeout_seconds: float,
        result: GradeResult,
        *,
        egress: Mapping[str, Any] | None = None,
    ) -> None: ...


class _SyncClient(Protocol):
    def exec_once(self, template_id: str, **kwargs: Any) -> Any: ...
    def session_exec(self, session_id: str, **kwargs: Any) -> Any: ...


class _AsyncClient(Protocol):
    async def exec_once(self, template_id: str, **kwargs: Any) -> Any: ...
    async def session_exec(self, session_id: str, **kwargs: Any) -> Any: ...


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


def _one_shot(job: _Job, warm: bool) -> dict[str, Any]:
    """The keyword arguments of a one-shot exec (``exec_once``, or a batch item)."""
    request = job.request(warm)
    if job.egress is not None:  # only when asked: a client need not know the keyword
        request["egress"] = job.egress
    return request


def _record(recorder: GradeRecorder | None, job: _Job, result: GradeResult) -> None:
    """Append a finished grade to ``recorder`` (with the policy it ran under)."""
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


def _run_sync(client: _SyncClient, job: _Job, recorder: GradeRecorder | None) -> GradeResult:
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
    _record(recorder, job, result)
    return result


async def _run_async(
    client: _AsyncClient, job: _Job, recorder: GradeRecorder | None
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
    _record(recorder, job, result)
    return result
