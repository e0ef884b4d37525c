"""What ``/proc`` says a process has used, for the benchmark scripts.

>>> own_ms, reaped_ms, own_faults, reaped_faults = usage(os.getpid())
>>> own_ms >= 0 and reaped_faults >= 0
True
"""

from __future__ import annotations

import os


def usage(pid: int) -> tuple[float, float, int, int]:
    """``pid``'s CPU in ms (its own, then its reaped children's), then its minor page faults
    (the same two), from one read of ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    tick = 1000 / os.sysconf("SC_CLK_TCK")
    own, reaped = int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])
    return own * tick, reaped * tick, int(fields[7]), int(fields[8])


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (alive now), from ``/proc``."""
    from pathlib import Path

    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def tree_cpu_ms(pid: int) -> float:
    """CPU ms of ``pid``'s tree: each process's own and its reaped children's."""
    total = 0.0
    for p in tree(pid):
        try:
            own, reaped, _, _ = usage(p)
        except OSError:
            continue  # it exited meanwhile
        total += own + reaped
    return total
