"""Small helpers shared by the supervisor's processes: logging, heap freezing, keys.

>>> b36(36 * 36 + 1)
'101'
"""

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


def replace_environ(env: dict[str, str]) -> None:
    """Make ``os.environ`` (and the C environment) exactly ``env``, touching only what differs.

    In a freshly forked process every page written is a copy-on-write fault:
    rewriting a dozen variables that are already right costs more than the rest
    of its start-up.

    >>> old = dict(os.environ)
    >>> replace_environ({"A_B": "1"}); dict(os.environ)
    {'A_B': '1'}
    >>> replace_environ(old)
    """
    for key in [k for k in os.environ if k not in env]:
        del os.environ[key]
    for key, value in env.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def close_other_fds(keep: set[int]) -> None:
    """Close every descriptor above 2 but ``keep`` (nothing of the server's may stay open).

    Ranges, not a ``/proc/self/fd`` listing: a process just cloned into another pid
    namespace may not find itself in the ``/proc`` it sees.
    """
    start = 3
    for fd in sorted(k for k in keep if k >= 3):
        if fd > start:
            os.closerange(start, fd)
        start = max(start, fd + 1)
    try:
        limit = max(int(os.sysconf("SC_OPEN_MAX")), start)
    except (ValueError, OSError):
        limit = 1 << 16
    os.closerange(start, max(limit, 1 << 16))
