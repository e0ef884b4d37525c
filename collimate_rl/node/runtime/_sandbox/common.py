"""Small helpers shared by the supervisor's processes: logging, heap freezing, keys.

>>> b36(36 * 36 + 1)
'101'
"""

# ruff: noqa: SIM105
from __future__ import annotations

import os
import sys


def log_exception(what: str) -> None:
    try:
        import traceback

        sys.stderr.write(f"collimate supervisor: {what} failed:\n")
        traceback.print_exc()
        sys.stderr.flush()
    except BaseException:
        pass


def freeze_heap(collect: bool = True, trim: bool = True) -> None:
    """Move every live object out of the GC's reach before serving forks.

    A collection in a forked child would touch every object header and
    copy-on-write most of the parent's heap (slow under virtualization).
    With ``trim`` (the master: every session forks its image), free heap
    memory goes back to the kernel first (``malloc_trim``): every fork copies
    the page tables of what stays resident.
    """
    import gc

    if collect:
        gc.collect()
    if trim:
        release_free_memory()
    gc.freeze()


def release_free_memory() -> None:
    """Give glibc's free heap pages back to the kernel (no-op without ``malloc_trim``)."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def close_other_fds(keep: set[int]) -> None:
    """Close every descriptor above 2 but ``keep`` (nothing of the server's may stay open)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
