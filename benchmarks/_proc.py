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
