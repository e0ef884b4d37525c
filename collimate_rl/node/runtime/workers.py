"""The host's side of a template's workers: a pool of persistent connections.

A light session (``_sandbox/members.py``) has no process to talk to: its execs
and grades go to one of its template's workers (``_sandbox/worker.py``), which
the master forks on request. Each worker serves one connection, kept open for
the worker's life, one request at a time; the pool hands idle ones out and
starts more (up to ``cap``) when all are busy. A worker whose request was
cancelled or overran is stopped (its boxes die with its connections) and
forgotten; the pool starts a fresh one when needed.

:func:`grade_of` tells a grade from any other exec: a grade is exactly the
exec the grading layer sends with the node's warm harness, the warm stub for
its one payload file (``collimate_rl.grading._shipping.warm_stub``).

>>> stub = warm_stub_for("/tmp/p.json")
>>> spec = ExecSpec(seed="0" * 64, code=stub, files=(("/tmp/p.json", b"{}"),))
>>> grade_of(spec)
b'{}'
>>> grade_of(ExecSpec(seed="0" * 64, code="print(1)")) is None
True
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import marshal
import struct
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from ._warm import compile_block, warm_stub_for
from .base import ExecSpec, RuntimeError_

__all__ = ["WorkerPool", "exec_header", "grade_of", "grade_request"]

log = logging.getLogger("collimate_rl.node.runtime")
T = TypeVar("T")

#: Ask the template's master (``TemplateHost.master``).
MasterCall = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


if sys.version_info >= (3, 11):

    async def _within(call: Awaitable[T], timeout: float | None) -> T:
        """``call``'s result, or ``TimeoutError`` past ``timeout`` s (``None``: no limit).

        In the caller's task: ``asyncio.wait_for`` made a task per worker call.
        """
        async with asyncio.timeout(timeout):  # novm (3.11+ only, guarded above)
            return await call

else:  # pragma: no cover - Python 3.10
    _within = asyncio.wait_for


def grade_of(spec: ExecSpec) -> bytes | None:
    """The payload when ``spec`` is a grade with the node's warm harness, else ``None``."""
    if spec.command is not None or spec.commands is not None or len(spec.files) != 1:
        return None
    path, data = spec.files[0]
    if spec.code is None or spec.code != warm_stub_for(path):
        return None
    return data


#: Compiled test blocks (``marshal``) by (source, index): a group's members share them.
_BLOCKS: dict[tuple[str, int], tuple[int, bytes]] = {}
_BLOCKS_MAX = 1024


def grade_request(header: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
    """A worker's grade request: ``payload``, and its test blocks compiled here.

    Compiling an assert block (parse, rewrite the asserts, compile) is a pure
    function of its source and costs a grade about a millisecond; the members
    of a GRPO group share their tests but are graded by different workers. So
    the node compiles each block once (with the same harness function the
    worker would run, in the same interpreter build) and sends the code along:
    ``header["compiled"]`` lists ``[index, assert count, size]``, the payload
    is followed by the ``marshal`` data. A worker that cannot use it compiles.
    """
    try:
        data = json.loads(payload)
        blocks = data["blocks"] if data.get("kind") == "asserts" else []
        sources = [str(block["code"]) for block in blocks]
    except (ValueError, KeyError, TypeError):
        return header, payload
    compiled, blobs = [], []
    for index, source in enumerate(sources):
        hit = _BLOCKS.get((source, index))
        if hit is None:
            try:
                code, static = compile_block(source, index)
            except (SyntaxError, ValueError):
                continue  # the worker reports it, as without this
            hit = (static, marshal.dumps(code))
            if len(_BLOCKS) >= _BLOCKS_MAX:
                _BLOCKS.pop(next(iter(_BLOCKS)))
            _BLOCKS[(source, index)] = hit
        compiled.append([index, hit[0], len(hit[1])])
        blobs.append(hit[1])
    if not compiled:
        return header, payload
    header = dict(header, compiled=compiled, payload_size=len(payload))
    return header, payload + b"".join(blobs)


def exec_header(spec: ExecSpec) -> tuple[dict[str, Any], bytes]:
    """The exec frame a session server or a worker gets: header and payload (the files)."""
    header: dict[str, Any] = {
        "op": "exec",
        "seed": spec.seed,
        "timeout": float(spec.timeout_seconds),
        "env": [list(kv) for kv in spec.env],
        "files": [[p, len(d)] for p, d in spec.files],
    }
    if spec.command is not None:
        header["command"] = spec.command
    elif spec.commands is not None:
        header["commands"] = [list(a) for a in spec.commands]
    else:
        header["code"] = spec.code or ""
    return header, b"".join(d for _, d in spec.files)


class _Worker:
    def __init__(self, pid: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.pid = pid
        self.reader = reader
        self.writer = writer

    async def call(self, header: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
        if payload:
            header = dict(header, payload_len=len(payload))
        data = json.dumps(header).encode()
        # one write (one send, one wake-up of the worker), as the worker answers
        self.writer.writelines([struct.pack(">I", len(data)), data, payload])
        await self.writer.drain()
        (n,) = struct.unpack(">I", await self.reader.readexactly(4))
        reply: dict[str, Any] = json.loads(await self.reader.readexactly(n))
        plen = int(reply.get("payload_len", 0))
        body = await self.reader.readexactly(plen) if plen else b""
        return reply, body

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class WorkerPool:
    """A template's workers: idle ones handed out, more started up to ``cap``."""

    def __init__(self, master: MasterCall, sock_dir: Path, cap: int = 256) -> None:
        self._master = master
        self._sock_dir = sock_dir
        self.cap = cap
        self._idle: list[_Worker] = []
        self._count = 0  # started and not stopped
        self._freed = asyncio.Condition()
        self._closed = False

    @property
    def size(self) -> int:
        return self._count

    async def request(
        self, header: dict[str, Any], payload: bytes, timeout: float | None
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request to an idle worker; its reply. Raises ``RuntimeError_``."""
        worker = await self._acquire()
        try:
            reply = await _within(worker.call(header, payload), timeout)
        except asyncio.TimeoutError as exc:  # TimeoutError itself since 3.11
            self._stop(worker)
            raise RuntimeError_("the worker's reply is overdue") from exc
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            self._stop(worker)
            raise RuntimeError_(f"the worker failed: {exc!r}") from exc
        except BaseException:  # cancelled: its work must not go on
            self._stop(worker)
            raise
        await self._release(worker)
        return reply

    async def _acquire(self) -> _Worker:
        async with self._freed:
            while True:
                if self._closed:
                    raise RuntimeError_("the template is stopping")
                if self._idle:
                    return self._idle.pop()
                if self._count < self.cap:
                    self._count += 1
                    break
                await self._freed.wait()
        try:
            return await self._start()
        except BaseException:
            await self._forget()
            raise

    async def _start(self) -> _Worker:
        reply = await self._master({"op": "worker"})
        if not reply.get("ok"):
            raise RuntimeError_(f"could not start a worker: {reply.get('error')}")
        path = self._sock_dir / str(reply["sock"])
        try:
            reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
        except OSError as exc:
            raise RuntimeError_(f"could not reach the worker: {exc!r}") from exc
        finally:
            with contextlib.suppress(OSError):
                path.unlink()  # it serves this one connection only
        return _Worker(int(reply["pid"]), reader, writer)

    async def _release(self, worker: _Worker) -> None:
        async with self._freed:
            if self._closed:
                worker.close()
                return
            self._idle.append(worker)
            self._freed.notify()

    async def _forget(self) -> None:
        async with self._freed:
            self._count -= 1
            self._freed.notify()

    def _stop(self, worker: _Worker) -> None:
        """Stop a worker that may still be busy (its boxes die with it); forget it."""
        worker.close()

        async def stop() -> None:
            with contextlib.suppress(RuntimeError_):
                await self._master({"op": "stop_worker", "pid": worker.pid})
            await self._forget()

        task = asyncio.ensure_future(stop())
        task.add_done_callback(_log_failure)

    async def close(self) -> None:
        """Hang up on every idle worker (each exits); busy ones go with the container."""
        async with self._freed:
            self._closed = True
            idle, self._idle = self._idle, []
            self._freed.notify_all()
        for worker in idle:
            worker.close()


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("stopping a worker failed: %r", task.exception())
