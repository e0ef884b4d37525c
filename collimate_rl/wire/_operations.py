"""Client operations: multi-call protocols written once, driven by a sync or an async client.

An *operation* is a generator that yields :class:`ClientCall` (call this method
of the client and send me back its result, or throw its exception into me) or
:class:`~collimate_rl.wire._core.Sleep` (wait, then send me ``None``), and
finally returns its value. :func:`drive` and :func:`adrive` are its only two
drivers. The sandbox handles, the template handles and the grading batches
write their protocols (chunked upload, strict forking, cleanup on failure, a
batch's resends) as operations, so each exists once for the sync and the async
clients. This is the pattern of httpx's auth flows, one level above
:mod:`collimate_rl.wire._core`'s HTTP flows.

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

from collimate_rl.wire._core import Sleep

__all__ = [
    "ClientCall",
    "Op",
    "Sleep",
    "adrive",
    "adrive_from",
    "drive",
    "drive_from",
    "field_of",
    "to_dict",
]

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
    return drive_from(op, call, client)


def drive_from(op: Op[T], call: ClientCall | Sleep, client: Any) -> T:
    """:func:`drive`, from a ``call`` that ``op`` has already yielded."""
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


async def adrive(op: Op[T], client: Any) -> T:
    """Run ``op`` by awaiting calls on an async ``client``; the twin of :func:`drive`."""
    try:
        call = next(op)
    except StopIteration as stop:
        op.close()
        value: T = stop.value
        return value
    return await adrive_from(op, call, client)


async def adrive_from(op: Op[T], call: ClientCall | Sleep, client: Any) -> T:
    """:func:`adrive`, from a ``call`` that ``op`` has already yielded."""
    try:
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
