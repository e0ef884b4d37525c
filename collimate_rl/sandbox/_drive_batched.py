"""Several sandbox operations at once: their first execs go to the node in one request.

A :class:`~collimate_rl.sandbox.ForkGroup`'s ``exec_each`` runs one operation
per child (see :mod:`collimate_rl.wire._operations`). On our local node their
first ``session_exec`` calls travel together through the ``exec_batch``
extension, one request for the whole group; every later call of an operation
(and every call on a daemon or a gateway) is driven on its own.

>>> drive_batched([], object())
[]
"""

from __future__ import annotations

from typing import Any, TypeVar

from collimate_rl.wire._extensions import exec_batch_op
from collimate_rl.wire._operations import ClientCall, Op, Sleep, drive, drive_from

__all__ = ["drive_batched"]

T = TypeVar("T")


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
    execs = {
        i: c
        for i, c in enumerate(firsts)
        if isinstance(c, ClientCall) and c.method == "session_exec"
    }
    sent: dict[int, Any] = {}
    if len(execs) > 1:
        items = [dict(call.kwargs, session_id=call.args[0]) for call in execs.values()]
        answers = drive(exec_batch_op(client, items), client)
        sent = dict(zip(execs, answers, strict=True)) if answers is not None else {}
    for i, op in enumerate(ops):
        if out[i] is not None:
            continue
        try:
            if i in sent:
                answer = sent[i]
                call = op.throw(answer) if isinstance(answer, Exception) else op.send(answer)
            else:
                call = firsts[i]  # type: ignore[assignment]
            out[i] = (True, drive_from(op, call, client))
        except StopIteration as stop:
            op.close()
            out[i] = (True, stop.value)
        except Exception as exc:
            out[i] = (False, exc)
    return [pair if pair is not None else (False, RuntimeError("not run")) for pair in out]
