"""Several sandbox operations at once: their first execs go to the node in one request.

A fork group's ``exec_each`` runs one operation per child (see
:mod:`collimate_rl.wire._operations`). On our local node their first
``session_exec`` calls travel together through the ``exec_batch`` extension
(:func:`~collimate_rl.wire._extensions.exec_batch_op`), one request for the
whole group; every later call of an operation, and every call where the node
has no such route, is driven on its own. :func:`drive_batched` and
:func:`adrive_batched` are the sync and async twins.

>>> drive_batched([], object())
[]
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import anyio

from collimate_rl.wire._extensions import exec_batch_op
from collimate_rl.wire._operations import (
    ClientCall,
    Op,
    Sleep,
    adrive,
    adrive_from,
    drive,
    drive_from,
)

__all__ = ["adrive_batched", "drive_batched"]

T = TypeVar("T")

#: ``(True, value)`` or ``(False, exception)``: how one operation ended.
Outcome = tuple[bool, Any]


class _Started(Generic[T]):
    """Operations run to their first call; their first execs, ready to go as one batch."""

    def __init__(self, ops: list[Op[T]]) -> None:
        self.ops = ops
        self.outcomes: list[Outcome | None] = [None] * len(ops)
        self.firsts: list[ClientCall | Sleep | None] = []
        for i, op in enumerate(ops):
            try:
                self.firsts.append(next(op))
            except StopIteration as stop:
                op.close()
                self.outcomes[i] = (True, stop.value)
                self.firsts.append(None)
            except Exception as exc:
                self.outcomes[i] = (False, exc)
                self.firsts.append(None)
        self.execs = {
            i: c
            for i, c in enumerate(self.firsts)
            if isinstance(c, ClientCall) and c.method == "session_exec"
        }

    def batch(self) -> list[dict[str, Any]] | None:
        """The first execs as ``exec_batch`` items (``None``: fewer than two, not worth one)."""
        if len(self.execs) < 2:
            return None
        return [dict(call.kwargs, session_id=call.args[0]) for call in self.execs.values()]

    def resume(self, answers: list[Any] | None) -> list[tuple[int, ClientCall | Sleep]]:
        """Hand each operation its batch answer (``None``: there was none); the next call of
        each one still running."""
        sent = dict(zip(self.execs, answers, strict=True)) if answers is not None else {}
        running: list[tuple[int, ClientCall | Sleep]] = []
        for i, op in enumerate(self.ops):
            first = self.firsts[i]
            if self.outcomes[i] is not None or first is None:
                continue
            try:
                if i in sent:
                    answer = sent[i]
                    call = op.throw(answer) if isinstance(answer, Exception) else op.send(answer)
                else:
                    call = first
                running.append((i, call))
            except StopIteration as stop:
                op.close()
                self.outcomes[i] = (True, stop.value)
            except Exception as exc:
                self.outcomes[i] = (False, exc)
        return running

    def results(self) -> list[Outcome]:
        return [o if o is not None else (False, RuntimeError("not run")) for o in self.outcomes]


def drive_batched(ops: list[Op[T]], client: Any) -> list[Outcome]:
    """Run several operations; their first ``session_exec`` calls go in one ``exec_batch``.

    On our local node that is one request for a whole fork group; elsewhere (no
    ``exec_batch``, or a node answering 404 ``not_found``) every operation is
    driven on its own, one after another. Returns ``(True, value)`` or
    ``(False, exception)`` per operation, in order.
    """
    started = _Started(ops)
    items = started.batch()
    answers = drive(exec_batch_op(client, items), client) if items is not None else None
    for i, call in started.resume(answers):
        try:
            started.outcomes[i] = (True, drive_from(ops[i], call, client))
        except Exception as exc:
            started.outcomes[i] = (False, exc)
    return started.results()


async def adrive_batched(ops: list[Op[T]], client: Any, limit: int) -> list[Outcome]:
    """The async twin of :func:`drive_batched`: the operations still running after the
    batch go on concurrently, at most ``limit`` at a time."""
    started = _Started(ops)
    items = started.batch()
    answers = await adrive(exec_batch_op(client, items), client) if items is not None else None
    limiter = anyio.CapacityLimiter(max(1, limit))

    async def rest(i: int, call: ClientCall | Sleep) -> None:
        async with limiter:
            try:
                started.outcomes[i] = (True, await adrive_from(ops[i], call, client))
            except Exception as exc:
                started.outcomes[i] = (False, exc)

    async with anyio.create_task_group() as group:
        for i, call in started.resume(answers):
            group.start_soon(rest, i, call)
    return started.results()
