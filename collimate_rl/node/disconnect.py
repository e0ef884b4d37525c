"""Cancelling work whose HTTP client went away.

A trainer that crashes mid-step leaves its execs running on the node: uvicorn
notices the closed connection, but nothing tells the handler, so each exec
would keep its admission slot until its own timeout. :func:`until_client_leaves`
runs a handler's work next to a watch on the ASGI ``receive`` channel: once the
request body has been read, the next message uvicorn delivers is
``http.disconnect``, sent as soon as the client's connection closes. Then the
work is cancelled (the runtime kills an exec whose request it closes, and the
admission slot is released by the cancellation) and :class:`ClientGone` is
raised; its handler answers with nothing the client could still read.

>>> import asyncio
>>> async def demo() -> str:
...     gone = asyncio.Event()
...     async def receive() -> dict[str, str]:
...         await gone.wait()
...         return {"type": "http.disconnect"}
...     async def slow_exec() -> str:
...         await asyncio.sleep(60)
...         return "result"
...     asyncio.get_running_loop().call_later(0.01, gone.set)
...     try:
...         return await until_client_leaves(receive, slow_exec())
...     except ClientGone:
...         return "cancelled"
>>> asyncio.run(demo())
'cancelled'
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from collimate_rl.node.request_ids import route_label

__all__ = ["CLIENT_CLOSED_REQUEST", "ClientGone", "on_client_gone", "until_client_leaves"]

logger = logging.getLogger("collimate_rl.node")

T = TypeVar("T")

#: The status logged for a request whose client left first (nginx's convention);
#: nobody receives it.
CLIENT_CLOSED_REQUEST = 499

Receive = Callable[[], Awaitable[Mapping[str, Any]]]


class ClientGone(Exception):
    """The HTTP client disconnected before its work finished; the work was cancelled."""


async def _disconnected(receive: Receive) -> None:
    """Return once ``receive`` delivers ``http.disconnect``.

    Called only after the request body was read, so no body chunk is lost;
    any other message (none is expected) is ignored.
    """
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return


async def until_client_leaves(receive: Receive, work: Awaitable[T]) -> T:
    """Await ``work``, cancelling it if the client disconnects first.

    Args:
        receive: the request's ASGI receive channel (``request.receive``),
            whose body has already been read.
        work: the handler's work (e.g. one exec).

    Raises:
        ClientGone: the client left; ``work`` was cancelled and has finished
            unwinding (its result, if it raced to one, is dropped).
    """
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the server is stopping: take the work down with us
        for pending in (task, watch):
            pending.cancel()
        await asyncio.gather(task, watch, return_exceptions=True)
        raise
    if task.done():
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
        return task.result()
    task.cancel()
    # Wait for the cancellation to unwind: the exec's process is killed and its
    # slot released before the next queued request is told it may run.
    await asyncio.gather(task, return_exceptions=True)
    raise ClientGone("the client disconnected; its request was cancelled")


async def on_client_gone(request: Request, exc: Exception) -> Response:
    """The handler for :class:`ClientGone`: log one line; the client is not there to answer."""
    node = getattr(request.app.state, "node", None)
    if node is not None:
        node.metrics.cancellations.labels(route_label(request.method, request.url.path)).inc()
    logger.info(
        "client went away: %s %s cancelled (its processes killed, its slot freed)",
        request.method,
        request.url.path,
    )
    return Response(status_code=CLIENT_CLOSED_REQUEST)
