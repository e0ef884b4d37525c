"""The memory cgroup (cgroup v1) around each template container: a safety net
against a sandbox that eats the machine's RAM (root only, where writable).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

__all__ = ["MemoryCgroup", "mem_total", "memcg_parent"]

log = logging.getLogger("collimate_rl.node.runtime")


def memcg_parent() -> Path | None:
    """Our own cgroup-v1 memory cgroup, if we are root and can create children in it."""
    if os.geteuid() != 0:
        return None
    base = Path("/sys/fs/cgroup/memory")
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            cg = base / parts[2].lstrip("/")
            if (cg / "memory.limit_in_bytes").exists() and os.access(cg, os.W_OK):
                return cg
    return None


def mem_total() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


class MemoryCgroup:
    """A cgroup-v1 memory cgroup around one template container (a safety net)."""

    def __init__(self, parent: Path, name: str, limit: int) -> None:
        self.path = parent / name
        self.path.mkdir()
        (self.path / "memory.limit_in_bytes").write_text(str(limit))
        self.procs = str(self.path / "cgroup.procs")

    def enter(self) -> None:
        """Called in the forked child before exec (still root)."""
        fd = os.open(self.procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    async def remove(self) -> None:
        for _ in range(400):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                await asyncio.sleep(0.005)
        log.warning("could not remove memory cgroup %s", self.path)
