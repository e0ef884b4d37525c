"""Small helpers shared by the supervisor's processes: logging, heap freezing, keys.

>>> b36(36 * 36 + 1)
'101'
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import NoReturn


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


def reap_until(pid: int) -> int:  # pragma: no cover - pid 1 of a box
    """Reap children (orphans come to a pid 1) until ``pid`` exits; its wait status."""
    while True:
        try:
            got, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1 << 8
        except InterruptedError:
            continue
        if got == pid:
            return status


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


def fork_until_ready(child: Callable[[int], object], what: str) -> int:
    """Fork a helper process and wait until it says ``ok`` on its ready pipe; its pid.

    ``child(ready_w)`` runs in the new process and must never return (it ends
    with ``os._exit``; a failed set-up with :func:`say_start_failed`). Anything
    else on the pipe, or the pipe closing, means the helper did not come up: it
    is killed and reaped, and ``OSError`` names ``what`` and the helper's words.
    """
    ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the helper
        os.close(ready_r)
        child(ready_w)
        os._exit(1)
    os.close(ready_w)
    try:
        reply = os.read(ready_r, 4096)
    finally:
        os.close(ready_r)
    if reply != b"ok":
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        raise OSError(f"{what} did not start: {reply.decode(errors='replace') or 'it died'}")
    return pid


def say_start_failed(ready_w: int, exc: BaseException) -> NoReturn:  # pragma: no cover - a helper
    """A helper of :func:`fork_until_ready` that could not set itself up: say why, and exit."""
    with contextlib.suppress(BaseException):
        os.write(ready_w, f"{type(exc).__name__}: {exc}".encode())
    os._exit(1)


def kill_and_reap_all() -> None:  # pragma: no cover - pid 1 of a box or a job
    """Kill every other process of this pid namespace (we are its pid 1) and reap them."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        return  # ESRCH: nothing else alive
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def kill_pidfd(pidfd: int) -> None:
    """SIGKILL the process ``pidfd`` refers to (nothing if it is gone already)."""
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)


def take_low_fds() -> None:
    """Fill fds 0..4 (with /dev/null where free), so later descriptors are all >= 5."""
    while True:
        fd = os.open(os.devnull, os.O_RDWR)  # (no O_CLOEXEC: kept across nothing but forks)
        if fd > 4:
            os.close(fd)
            return
