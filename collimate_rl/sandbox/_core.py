"""The transport-free core of the sandbox handle: operations written once, driven twice.

An *operation* is a generator that yields :class:`ClientCall` (call this method
of the client and send me back its result, or throw its exception into me) and
finally returns its value. :func:`drive` and :func:`adrive` are the only two
drivers: the sync :class:`~collimate_rl.sandbox.Sandbox` and the async
:class:`~collimate_rl.sandbox.AsyncSandbox` differ only in which one they
call, so multi-step protocols (chunked upload, strict forking, cleanup on
failure) exist once. This is the pattern of httpx's auth flows.

>>> def op():
...     info = yield ClientCall("get", ("a",))
...     return info.upper()
>>> drive(op(), {"a": "x"})
'X'
"""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from collimate_rl.errors import CollimateNotFoundError
from collimate_rl.wire._extensions import (
    forget_batch_route,
    has_batch_route,
    is_missing_route,
    resend_waits,
    shed_items,
)

__all__ = ["ClientCall", "Op", "Sleep", "adrive", "drive", "drive_batched", "field_of", "to_dict"]

T = TypeVar("T")


@dataclass(frozen=True)
class ClientCall:
    """One call of a client method, before any I/O happens.

    Attributes:
        method: the client method's name, e.g. ``"session_exec"``.
        args: positional arguments.
        kwargs: keyword arguments.

    >>> ClientCall("delete_session", ("s-1",))
    ClientCall(method='delete_session', args=('s-1',), kwargs={})
    """

    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Sleep:
    """Wait ``seconds`` (``time.sleep`` or ``anyio.sleep``); the operation gets ``None`` back."""

    seconds: float


#: An operation: yields client calls (or sleeps), receives their results, returns ``T``.
Op = Generator[ClientCall | Sleep, Any, T]


def drive(op: Op[T], client: Any) -> T:
    """Run ``op`` with blocking calls on ``client``.

    A call's exception (any :class:`Exception`) is thrown into the operation,
    which may clean up (yielding more calls) and re-raise.
    """
    try:
        call = next(op)
    except StopIteration as stop:
        op.close()
        value: T = stop.value
        return value
    return _drive_from(op, call, client)


def _drive_from(op: Op[T], call: ClientCall | Sleep, client: Any) -> T:
    """:func:`drive`, from a call ``op`` has already yielded."""
    try:
        while True:
            if isinstance(call, Sleep):
                time.sleep(call.seconds)
                call = op.send(None)
                continue
            try:
                result = getattr(client, call.method)(*call.args, **call.kwargs)
            except Exception as exc:
                call = op.throw(exc)
            else:
                call = op.send(result)
    except StopIteration as stop:
        value: T = stop.value
        return value
    finally:
        op.close()


def drive_batched(ops: list[Op[T]], client: Any) -> list[tuple[bool, Any]]:
    """Run several operations; their first ``session_exec`` calls go in one ``exec_batch``.

    On our local node that is one request for a whole fork group; elsewhere (no
    ``exec_batch``, or a node answering 404 ``not_found``) every operation is
    driven on its own, one after another. Returns ``(True, value)`` or
    ``(False, exception)`` per operation, in order.
    """
    out: list[tuple[bool, Any] | None] = [None] * len(ops)
    firsts: list[ClientCall | Sleep | None] = []
    for i, op in enumerate(ops):
        try:
            firsts.append(next(op))
        except StopIteration as stop:
            op.close()
            out[i] = (True, stop.value)
            firsts.append(None)
        except Exception as exc:
            out[i] = (False, exc)
            firsts.append(None)
    batch = [
        i for i, c in enumerate(firsts) if isinstance(c, ClientCall) and c.method == "session_exec"
    ]
    answers = _exec_batch(client, [firsts[i] for i in batch]) if len(batch) > 1 else None
    sent = dict(zip(batch, answers, strict=True)) if answers is not None else {}
    for i, op in enumerate(ops):
        if out[i] is not None:
            continue
        try:
            if i in sent:
                answer = sent[i]
                call = op.throw(answer) if isinstance(answer, Exception) else op.send(answer)
            else:
                call = firsts[i]  # type: ignore[assignment]
            out[i] = (True, _drive_from(op, call, client))
        except StopIteration as stop:
            op.close()
            out[i] = (True, stop.value)
        except Exception as exc:
            out[i] = (False, exc)
    return [pair if pair is not None else (False, RuntimeError("not run")) for pair in out]


def _exec_batch(client: Any, calls: list[Any]) -> list[Any] | None:
    """The answers to ``session_exec`` calls, in one request; None if there is no such route.

    Items the node shed (they did not run) are sent again, within the client's retries.
    """
    if not has_batch_route(client):
        return None
    items = [dict(call.kwargs, session_id=call.args[0]) for call in calls]

    def send(batch: list[dict[str, Any]]) -> list[Any]:
        try:
            return list(client.exec_batch(batch))
        except Exception as exc:
            if is_missing_route(exc):
                raise
            return [exc] * len(batch)

    try:
        answers = send(items)
    except CollimateNotFoundError:
        forget_batch_route(client)
        return None
    for wait in resend_waits(client):
        shed = shed_items(answers)
        if not shed:
            break
        time.sleep(wait)
        try:
            again = send([items[i] for i in shed])
        except CollimateNotFoundError as gone:  # the route vanished (another node?)
            again = [gone] * len(shed)
        for i, answer in zip(shed, again, strict=True):
            answers[i] = answer
    return answers


async def adrive(op: Op[T], client: Any) -> T:
    """Run ``op`` by awaiting calls on an async ``client``; the twin of :func:`drive`."""
    try:
        call = next(op)
        while True:
            if isinstance(call, Sleep):
                await anyio.sleep(call.seconds)
                call = op.send(None)
                continue
            try:
                result = await getattr(client, call.method)(*call.args, **call.kwargs)
            except Exception as exc:
                call = op.throw(exc)
            else:
                call = op.send(result)
    except StopIteration as stop:
        value: T = stop.value
        return value
    finally:
        op.close()


def field_of(obj: Any, key: str, default: Any = None) -> Any:
    """Read ``key`` from a wire response: a mapping, or a typed object with dict access.

    >>> field_of({"id": "a"}, "id"), field_of({}, "id", "-")
    ('a', '-')
    """
    if obj is None:
        return default
    getter = getattr(obj, "get", None)
    if callable(getter):
        return getter(key, default)
    return getattr(obj, key, default)


def to_dict(obj: Any) -> dict[str, Any]:
    """A plain ``dict`` copy of a wire response (for ``raw`` fields).

    >>> to_dict({"a": 1})
    {'a': 1}
    """
    if isinstance(obj, Mapping):
        return dict(obj)
    for name in ("to_dict", "model_dump", "as_dict"):
        method = getattr(obj, name, None)
        if callable(method):
            out = method()
            if isinstance(out, Mapping):
                return dict(out)
    raw = getattr(obj, "raw", None)
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        return dict(obj)
    except (TypeError, ValueError):
        return {}
