"""Linux system calls the standard library lacks, and their constants (ctypes).

Namespaces (``unshare``, ``setns``, a raw ``clone``), mounts, ``prctl``.
Stdlib only, Python 3.10+; importing it has no side effects (libc is loaded
on first use). Used inside the sandbox and by the host side (the bwrap
launcher, crash recovery).

>>> CLONE_NEW_MASK & CLONE_NEWNET == CLONE_NEWNET
True
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEW_MASK = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NAME = 15
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc: Any = None


def libc() -> Any:
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.mount.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.c_char_p,
        ]
        lib.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.unshare.argtypes = [ctypes.c_int]
        lib.setns.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.prctl.argtypes = [
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]
        lib.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        _libc = lib
    return _libc


def check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    check(libc().unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    """Enter the namespace ``fd`` refers to (``os.setns`` where Python has it)."""
    if _os_setns is not None:
        _os_setns(fd, nstype)
    elif "setns" in _NR:
        if _syscall()(_NR["setns"], fd, nstype, 0, 0, 0) < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns: {os.strerror(err)}")
    else:
        check(libc().setns(fd, nstype), "setns")


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    check(
        libc().mount(
            src.encode() if src is not None else None,
            target.encode(),
            fstype.encode() if fstype is not None else None,
            flags,
            data.encode() if data is not None else None,
        ),
        f"mount {target}",
    )


def umount2(target: str, flags: int) -> None:
    check(libc().umount2(target.encode(), flags), f"umount {target}")


_os_setns: Any = getattr(os, "setns", None)  # Python 3.12+
#: syscall(2) numbers of the calls made through ``syscall``, per architecture
_NRS = {
    "x86_64": {"clone": 56, "setns": 308, "pivot_root": 155},
    "aarch64": {"clone": 220, "setns": 268, "pivot_root": 41},
}
_NR: dict[str, int] = _NRS.get(os.uname().machine, {})
_syscall_fn: Any = None


def _syscall() -> Any:
    """libc's ``syscall`` with six long arguments: one ctypes function for every raw call
    (the zygote's loop makes them all after each clone, when each object it touches costs
    a page copy)."""
    global _syscall_fn
    if _syscall_fn is None:
        fn = libc().syscall
        fn.restype = ctypes.c_long
        fn.argtypes = [ctypes.c_long] + [ctypes.c_ulong] * 5
        _syscall_fn = fn
    return _syscall_fn


def clone_process(flags: int) -> int:
    """fork(2) into new namespaces in one step (a raw ``clone`` with ``flags``).

    Returns like ``os.fork()``. Only for single-threaded callers; the child
    must not rely on glibc's cached tid (it only forks and execs later, and
    ``os.fork`` there refreshes everything).
    """
    if "clone" not in _NR:
        raise OSError(errno.ENOSYS, "clone: unsupported architecture")
    pid = int(_syscall()(_NR["clone"], flags | signal.SIGCHLD, 0, 0, 0, 0))
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"clone: {os.strerror(err)}")
    return pid


def pivot_into_cwd() -> None:
    """Make the current directory (a mount point) this mount namespace's root and detach
    the old root with everything mounted below it (``pivot_root(".", ".")``, then a lazy
    unmount of what is now stacked on top: the old root)."""
    if "pivot_root" not in _NR:
        raise OSError(errno.ENOSYS, "pivot_root: unsupported architecture")
    dot = ctypes.create_string_buffer(b".")
    if _syscall()(_NR["pivot_root"], ctypes.addressof(dot), ctypes.addressof(dot), 0, 0, 0) < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root: {os.strerror(err)}")
    umount2(".", MNT_DETACH)
    os.chdir("/")


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    rc: int = libc().prctl(option, arg2, arg3, arg4, arg5)
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")
    return rc


def set_name(name: str) -> None:
    """Name this thread (``comm``, as ``ps`` and ``perf`` show it; 15 bytes).

    Through ``/proc`` when it can: in a fresh fork (every box) a first ``ctypes`` call
    copies many of the parent's pages (``benchmarks/history.md``, round 3: ~0.3 ms against
    ~0.12).
    """
    data = name.encode()[:15]
    try:
        fd = os.open("/proc/thread-self/comm", os.O_WRONLY)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError:  # no /proc here
        buf = ctypes.create_string_buffer(data)
        libc().prctl(PR_SET_NAME, ctypes.addressof(buf), 0, 0, 0)


def cap_last() -> int:
    """The highest capability number this kernel knows (``cap_last_cap``)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except OSError:
        return 63


def write_id_maps(
    proc_dir: int, inner: int, outer_uid: int, outer_gid: int, inner_gid: int = -1
) -> None:
    """Map uid ``inner`` (gid ``inner_gid``, else ``inner``) of a new user namespace onto
    ``outer_uid``/``outer_gid``, with ``setgroups`` denied."""
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{inner} {outer_uid} 1"),
        ("gid_map", f"{inner if inner_gid < 0 else inner_gid} {outer_gid} 1"),
    ):
        fd = os.open(name, os.O_WRONLY, dir_fd=proc_dir)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
