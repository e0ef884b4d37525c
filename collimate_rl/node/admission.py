"""Admission control: a bounded number of running execs and a bounded wait queue.

Work is admitted only while ``running + queued < max_inflight + max_queue``;
past that the request is refused with ``at_capacity`` *before* anything is
done, which is what makes the code safe for a client to retry. Admitted work
waits (FIFO) for one of ``max_inflight`` slots.

>>> import asyncio
>>> async def demo() -> tuple[int, int]:
...     gate = Admission(max_inflight=1, max_queue=0)
...     async with gate.slot():
...         try:
...             async with gate.slot():
...                 pass
...         except AtCapacity:
...             return gate.running, gate.queued
...     return -1, -1
>>> asyncio.run(demo())
(1, 0)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["Admission", "AtCapacity"]


class AtCapacity(Exception):
    """Every running slot and every queue place is taken; nothing was done."""


class Admission:
    """A counting gate with a bounded queue. Single event loop, not thread-safe.

    Args:
        max_inflight: execs allowed to run at once (>= 1).
        max_queue: execs allowed to wait for a slot (>= 0).
    """

    def __init__(self, max_inflight: int, max_queue: int) -> None:
        if max_inflight < 1 or max_queue < 0:
            raise ValueError("max_inflight must be >= 1 and max_queue >= 0")
        self.max_inflight = max_inflight
        self.max_queue = max_queue
        self._running = 0
        self._admitted = 0
        self._sem: asyncio.Semaphore | None = None
        self._idle: asyncio.Event | None = None

    @property
    def running(self) -> int:
        """Execs holding a slot."""
        return self._running

    @property
    def queued(self) -> int:
        """Admitted execs still waiting for a slot."""
        return self._admitted - self._running

    def _primitives(self) -> tuple[asyncio.Semaphore, asyncio.Event]:
        # Created lazily so the gate can be built outside the event loop.
        if self._sem is None or self._idle is None:
            self._sem = asyncio.Semaphore(self.max_inflight)
            self._idle = asyncio.Event()
            self._idle.set()
        return self._sem, self._idle

    @property
    def free(self) -> int:
        """Places left (running slots plus queue) before work is refused."""
        return max(0, self.max_inflight + self.max_queue - self._admitted)

    def check(self) -> None:
        """Raise :class:`AtCapacity` if a new exec would be refused now."""
        if self._admitted >= self.max_inflight + self.max_queue:
            raise AtCapacity(
                f"node at capacity: {self._running} running, {self.queued} queued "
                f"(max_inflight={self.max_inflight}, queue={self.max_queue}); retry later"
            )

    def reserve(self, count: int) -> int:
        """Admit up to ``count`` execs at once (a batch); how many were admitted.

        They run in :meth:`slot` with ``reserved=True``; the caller gives the
        places back with :meth:`release` once the whole batch has ended.
        """
        taken = min(count, self.free)
        if taken:
            _, idle = self._primitives()
            self._admitted += taken
            idle.clear()
        return taken

    def release(self, count: int = 1) -> None:
        """Give back ``count`` places (a batch's, when it has ended)."""
        _, idle = self._primitives()
        self._admitted -= count
        if self._admitted == 0:
            idle.set()

    @asynccontextmanager
    async def slot(self, *, reserved: bool = False) -> AsyncIterator[None]:
        """Hold one running slot for the body; refuse at once when full.

        ``reserved=True``: the place was taken by :meth:`reserve` (and is given
        back by the batch).
        """
        sem, idle = self._primitives()
        if not reserved:
            self.check()
            self._admitted += 1
            idle.clear()
        try:
            await sem.acquire()
            self._running += 1
            try:
                yield
            finally:
                self._running -= 1
                sem.release()
        finally:
            if not reserved:
                self.release()

    async def wait_idle(self) -> None:
        """Return once nothing is running or queued."""
        _, idle = self._primitives()
        await idle.wait()
