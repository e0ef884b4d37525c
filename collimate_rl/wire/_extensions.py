"""Which clients may use our local node's batch routes, learnt once per client.

``exec_batch`` / ``delete_sessions`` exist on our node only. A real daemon or a
gateway answers the route with 404 ``not_found``; the caller remembers that per
client (weakly) and uses the contract's per-session routes from then on. Items the
node shed (``at_capacity``: they did not run) are resent like a single exec's 503:
:func:`shed_items` finds them, :func:`resend_waits` says how long to wait before each try.
:func:`exec_batch_op` is the one request-and-resend protocol over them, as an operation
that the fork groups and the grading batches both drive.

>>> class Daemon:
...     def exec_batch(self, items): ...
>>> d = Daemon()
>>> has_batch_route(d), forget_batch_route(d), has_batch_route(d)
(True, None, False)
"""

from __future__ import annotations

import contextlib
import random
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from collimate_rl.errors import CollimateCapacityError, CollimateNotFoundError
from collimate_rl.wire._operations import ClientCall, Op, Sleep

__all__ = [
    "exec_batch_op",
    "forget_batch_route",
    "has_batch_route",
    "is_missing_route",
    "resend_waits",
    "shed_items",
]

_WITHOUT: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def has_batch_route(client: Any) -> bool:
    """Whether ``client`` has ``exec_batch`` and its node has not refused the route."""
    if not callable(getattr(client, "exec_batch", None)):
        return False
    try:
        return client not in _WITHOUT
    except TypeError:  # not weakly referenceable: ask every time
        return True


def forget_batch_route(client: Any) -> None:
    """Remember that ``client``'s node has no batch route."""
    with contextlib.suppress(TypeError):
        _WITHOUT[client] = True


def is_missing_route(exc: BaseException) -> bool:
    """Whether ``exc`` is a node saying it has no such route (404 ``not_found``)."""
    return isinstance(exc, CollimateNotFoundError) and exc.error_code == "not_found"


def shed_items(answers: Sequence[Any]) -> list[int]:
    """The positions of a batch's answers that are items the node shed (safe to resend).

    >>> shed_items(["ok", CollimateCapacityError("shed", error_code="at_capacity"), "ok"])
    [1]
    """
    return [i for i, answer in enumerate(answers) if isinstance(answer, CollimateCapacityError)]


def resend_waits(client: Any) -> Iterator[float]:
    """Seconds to wait before each resend of shed items: one per retry ``client`` allows,
    full-jitter exponential backoff from its ``backoff`` (as for a single exec's 503).

    >>> class Client:
    ...     retries, backoff = 2, 0.1
    >>> [0 <= wait <= 0.1 * 2**i for i, wait in enumerate(resend_waits(Client()))]
    [True, True]
    """
    backoff = float(getattr(client, "backoff", 0.15))
    for attempt in range(int(getattr(client, "retries", 0))):
        yield random.uniform(0, backoff * 2**attempt)


def _as_is(exc: Exception) -> Any:
    return exc


def exec_batch_op(
    client: Any,
    items: list[dict[str, Any]],
    failed: Callable[[Exception], Any] = _as_is,
) -> Op[list[Any] | None]:
    """Every item's answer to one ``exec_batch``; ``None`` when the node has no such route.

    An operation (drive it with :func:`~collimate_rl.wire._operations.drive` or
    ``adrive``). An answer is the node's response for its item, or the item's own
    error. A request that fails as a whole answers each of its items with
    ``failed(exc)`` (which may raise instead). Items the node shed are resent
    within the client's retries; a route that goes away after the first answer
    (another node behind the URL) answers what it still owed with ``failed`` of
    that 404. A node without the route is remembered (:func:`forget_batch_route`).

    >>> from collimate_rl.wire._operations import drive
    >>> class Node:
    ...     def exec_batch(self, items):
    ...         return [{"exit_code": 0, "n": item["n"]} for item in items]
    >>> node = Node()
    >>> drive(exec_batch_op(node, [{"n": 1}, {"n": 2}]), node)
    [{'exit_code': 0, 'n': 1}, {'exit_code': 0, 'n': 2}]
    """
    if not has_batch_route(client):
        return None
    answers = yield from _ask(client, items, failed)
    if isinstance(answers, BaseException):
        return None  # nothing ran
    for wait in resend_waits(client):
        shed = shed_items(answers)
        if not shed:
            break
        yield Sleep(wait)
        again = yield from _ask(client, [items[i] for i in shed], failed)
        if isinstance(again, BaseException):
            again = [failed(again)] * len(shed)
        for i, answer in zip(shed, again, strict=True):
            answers[i] = answer
    return answers


def _ask(
    client: Any, items: list[dict[str, Any]], failed: Callable[[Exception], Any]
) -> Op[list[Any] | Exception]:
    """One request's answers, or the 404 of a node without the route (now remembered)."""
    try:
        return list((yield ClientCall("exec_batch", (items,))))
    except Exception as exc:
        if not is_missing_route(exc):
            return [failed(exc)] * len(items)
        forget_batch_route(client)
        return exc
