"""CPU time per rollout: everything the benchmark process and its children run.

As root with a writable cgroup-v1 ``cpuacct`` hierarchy, the benchmark moves
itself into a fresh cpuacct cgroup before it starts the node, so the count
covers the client, the node and every sandbox (and the unisolated runners'
processes), and nothing else on the machine. Elsewhere it falls back to the
machine's busy time from ``/proc/stat`` (other load counts too; the report
says which).

>>> meter = CpuMeter(None)
>>> meter.kind
'system-wide'
>>> start = meter.read()
>>> meter.read() >= start
True
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = ["CpuMeter"]

_CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class CpuMeter:
    """Reads CPU milliseconds used so far (a cgroup's, or the whole machine's)."""

    def __init__(self, cgroup: Path | None) -> None:
        self.cgroup = cgroup
        self.kind = "cpuacct cgroup (client + node + sandboxes)" if cgroup else "system-wide"

    @classmethod
    def start(cls) -> CpuMeter:
        """Move this process into a new cpuacct cgroup where possible (call before the node)."""
        if os.geteuid() != 0 or not (_CPUACCT / "cgroup.procs").exists():
            return cls(None)
        path = _CPUACCT / f"collimate-bench-{secrets.token_hex(4)}"
        try:
            path.mkdir()
            (path / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return cls(None)
        return cls(path)

    def read(self) -> float:
        """CPU milliseconds so far."""
        if self.cgroup is not None:
            return int((self.cgroup / "cpuacct.usage").read_text()) / 1e6
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return (sum(fields[:8]) - idle) * 1000.0 / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        """Leave and remove the cgroup (its other processes, if any, move up too)."""
        if self.cgroup is None:
            return
        parent = self.cgroup.parent / "cgroup.procs"
        with contextlib.suppress(OSError):
            for pid in (self.cgroup / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    parent.write_text(pid)
        with contextlib.suppress(OSError):
            self.cgroup.rmdir()
        self.cgroup = None
