"""Hardening a process that will run sandbox code: capabilities, no_new_privs, rlimits.

Exec children, the factory, the service keeper and bakes all go through
here; the seccomp filter (``seccomp.py``) is loaded last, by the caller.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

from .layout import INTERNAL_DIR
from .syscalls import (
    CLONE_NEWNS,
    LINUX_CAPABILITY_VERSION_3,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_SET_NO_NEW_PRIVS,
    check,
    libc,
    mount,
    prctl,
    unshare,
)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


#: capset(2)'s header and an empty data pair, built once where this module is imported (the
#: master, before any box): building ctypes objects in a fresh fork copies ~25 of its
#: parent's pages (``benchmarks/box_cost.py``), and these are only ever read.
_NO_CAPS = (_CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)())
_NO_CAPS_ADDRESSES = (ctypes.addressof(_NO_CAPS[0]), ctypes.addressof(_NO_CAPS[1]))


def drop_bounding_set(cap_last: int) -> None:
    """Empty the capability bounding set (inherited by every later fork)."""
    call = libc().prctl  # (a tight loop: it runs in every box, see box.py)
    for cap in range(cap_last + 1):
        if call(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            if err != errno.EINVAL:  # EINVAL: unknown to this kernel
                raise OSError(err, f"prctl(PR_CAPBSET_DROP, {cap}): {os.strerror(err)}")


def drop_all_capabilities(cap_last: int, *, bounding: bool = True) -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets.

    ``bounding=False`` when the bounding set is already empty (the session
    server empties it once at start-up; that saves ~40 prctl calls per exec).
    """
    if bounding:
        drop_bounding_set(cap_last)
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    check(libc().capset(*_NO_CAPS_ADDRESSES), "capset")
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def keep_only_capabilities(keep: frozenset[int], cap_last: int) -> None:
    """Hold ``keep`` only: the bounding set, and the effective, permitted and inheritable
    sets (a root process's ``execve`` grants inheritable | bounding), no ambient ones;
    ``no_new_privs`` set."""
    for cap in range(cap_last + 1):
        if cap not in keep and libc().prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            if err != errno.EINVAL:  # EINVAL: unknown to this kernel
                raise OSError(err, f"prctl(PR_CAPBSET_DROP, {cap}): {os.strerror(err)}")
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    data = (_CapData * 2)()
    for cap in keep:
        word = data[cap // 32]
        bit = 1 << (cap % 32)
        word.effective |= bit
        word.permitted |= bit
        word.inheritable |= bit
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    check(libc().capset(ctypes.addressof(header), ctypes.addressof(data)), "capset")
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def hide_internals_and_drop_capabilities(cap_last: int, *, bounding: bool = False) -> None:
    """Harden a process that will run sandbox code (an exec, the factory, a service).

    In a private mount namespace the node's internal folder becomes an empty,
    read-only tmpfs, then every capability is dropped (the bounding set only
    with ``bounding``: a session server empties it once for its whole session).
    The caller loads its seccomp filter last.
    """
    unshare(CLONE_NEWNS)
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    mount("none", INTERNAL_DIR, "tmpfs", flags, "size=4k,mode=0555")
    drop_all_capabilities(cap_last, bounding=bounding)


def apply_limits(lim: dict[str, Any]) -> None:
    """Set the exec's rlimits (soft = hard = the limit, capped by the hard limit)."""
    import resource

    for res, value in (
        (resource.RLIMIT_CPU, lim["cpu_seconds"]),
        (resource.RLIMIT_AS, lim["address_space_bytes"]),
        (resource.RLIMIT_NPROC, lim["processes"]),
        (resource.RLIMIT_FSIZE, lim["file_size_bytes"]),
        (resource.RLIMIT_NOFILE, lim["open_files"]),
        (resource.RLIMIT_CORE, 0),
    ):
        try:
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):
            _soft, hard = resource.getrlimit(res)
            resource.setrlimit(res, (min(value, hard) if hard >= 0 else value, hard))
