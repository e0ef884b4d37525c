"""The host's worker pool over real unix sockets: replies, reuse, and an overdue worker stopped.

The master is a fake that answers ``worker`` with a socket this test serves (a worker
that echoes, or one that never answers) and records ``stop_worker``; everything else is
the pool's own code: its connections, framing, timeout and bookkeeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.node.runtime.base import RuntimeError_
from collimate_rl.node.runtime.workers import WorkerPool

pytestmark = [pytest.mark.anyio]


class FakeWorkers:
    """Serves worker sockets in ``folder`` and plays the master's part for them."""

    def __init__(self, folder: Path, *, answer: bool) -> None:
        self.folder = folder
        self.answer = answer
        self.started = 0
        self.stopped: list[int] = []
        self.servers: list[asyncio.AbstractServer] = []

    async def master(self, message: dict[str, Any]) -> dict[str, Any]:
        if message["op"] == "stop_worker":
            self.stopped.append(message["pid"])
            return {"ok": True}
        assert message == {"op": "worker"}
        self.started += 1
        name = f"w{self.started}"
        server = await asyncio.start_unix_server(self._serve, str(self.folder / name))
        self.servers.append(server)
        return {"ok": True, "sock": name, "pid": 1000 + self.started}

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (n,) = struct.unpack(">I", await reader.readexactly(4))
                header = json.loads(await reader.readexactly(n))
                payload = await reader.readexactly(int(header.get("payload_len", 0)))
                if not self.answer:
                    await reader.read()  # until the pool hangs up
                    return
                reply = json.dumps({"echo": header["op"], "payload_len": len(payload)}).encode()
                writer.write(struct.pack(">I", len(reply)) + reply + payload)
                await writer.drain()
        writer.close()

    def close(self) -> None:
        for server in self.servers:
            server.close()


async def _eventually(condition: Callable[[], bool]) -> None:
    """Wait up to a second for ``condition`` (a stop runs in a task of its own)."""
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def _pool(tmp_path: Path, *, answer: bool) -> AsyncIterator[tuple[WorkerPool, FakeWorkers]]:
    """A pool over fake workers that answer (or never do); closed, with its servers, after."""
    fake = FakeWorkers(tmp_path, answer=answer)
    pool = WorkerPool(fake.master, tmp_path)
    try:
        yield pool, fake
    finally:
        await pool.close()
        fake.close()


async def test_a_reply_comes_back_and_the_worker_serves_the_next_request(tmp_path: Path) -> None:
    async with _pool(tmp_path, answer=True) as (pool, fake):
        for timeout in (5.0, None):
            reply, body = await pool.request({"op": "grade"}, b"payload", timeout)
            assert reply["echo"] == "grade" and body == b"payload"
        assert fake.started == 1 and pool.size == 1  # one worker, reused


async def test_an_overdue_worker_is_stopped_and_forgotten(tmp_path: Path) -> None:
    async with _pool(tmp_path, answer=False) as (pool, fake):
        with pytest.raises(RuntimeError_, match="overdue"):
            await pool.request({"op": "grade"}, b"", 0.2)
        await _eventually(lambda: pool.size == 0)
        assert fake.stopped == [1001] and pool.size == 0
        # the pool starts a fresh worker for the next request
        with pytest.raises(RuntimeError_, match="overdue"):
            await pool.request({"op": "grade"}, b"", 0.05)
        assert fake.started == 2


async def test_a_cancelled_request_stops_its_worker(tmp_path: Path) -> None:
    async with _pool(tmp_path, answer=False) as (pool, fake):
        task = asyncio.ensure_future(pool.request({"op": "grade"}, b"", None))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await _eventually(lambda: bool(fake.stopped))
        assert fake.stopped == [1001]
