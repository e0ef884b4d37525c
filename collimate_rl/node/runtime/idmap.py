"""Idmapped mounts: an image's files, owned by its user on disk, owned by the sandbox uid.

An image's layers are unpacked by the node (root) with the owners their tar entries name:
root's, mostly. A template container runs as the sandbox uid in a user namespace that
maps that uid only, so root's files would show as ``nobody``: unreadable where their mode
says so (``/root``), unwritable, and an overlay cannot copy them up. An idmapped mount
(Linux 5.12+) shows a folder with its owners translated, without touching the files: the
launcher (root, in its private mount namespace, before it drops to the sandbox uid) mounts
each layer over itself with the image user's uid and gid shown as the sandbox uid's, so
bwrap binds those mounts. Other owners stay unmapped (``nobody``): the user cannot write
what root owns in an image that runs as someone else, as in Docker.

Everything here runs in a ``preexec_fn`` (``bwrap.Launch``): a forked child, single-threaded.

>>> MOUNT_ATTR_IDMAP
1048576
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

from ._sandbox import syscalls as sv

__all__ = ["idmap_userns", "idmapped_over_itself", "userns_with_maps", "write_maps"]

# linux/mount.h; the mount API's syscall numbers are the same on every architecture
_NR_OPEN_TREE = 428
_NR_MOVE_MOUNT = 429
_NR_MOUNT_SETATTR = 442
OPEN_TREE_CLONE = 1
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_IDMAP = 0x100000
_AT_FDCWD = -100


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


#: libc's ``syscall`` as a function object of this module's own: the shared one
#: (``syscalls.libc().syscall``) has six ``long`` argument types once the zygote's helpers
#: have used it, and these calls pass pointers and structures.
_syscall = ctypes.CDLL(None, use_errno=True).syscall
_syscall.restype = ctypes.c_long


def _call(nr: int, *args: object) -> int:
    rc = int(_syscall(ctypes.c_long(nr), *args))
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"syscall {nr}: {os.strerror(err)}")
    return rc


def idmap_userns(inner_uid: int, inner_gid: int, outer_uid: int, outer_gid: int) -> int:
    """A descriptor of a user namespace mapping ``inner`` onto ``outer`` (as root)."""
    return userns_with_maps(f"{inner_uid} {outer_uid} 1", f"{inner_gid} {outer_gid} 1")


def write_maps(pid: int, uid_map: str, gid_map: str) -> None:
    """Write ``/proc/PID/uid_map`` and ``gid_map`` (``inner outer count`` lines; as root,
    any number of lines of any host ids)."""
    for name, text in (("uid_map", uid_map), ("gid_map", gid_map)):
        fd = os.open(f"/proc/{pid}/{name}", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def userns_with_maps(uid_map: str, gid_map: str) -> int:
    """A descriptor of a user namespace with these maps (:func:`write_maps`; as root).

    A child enters a new user namespace; we write its maps, keep a descriptor of it and
    kill the child (the namespace lives on with the descriptor).
    """
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(ready_r)
            os.close(hold_w)
            sv.unshare(sv.CLONE_NEWUSER)
            os.write(ready_w, b"u")
            os.read(hold_r, 1)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(hold_r)
    try:
        if os.read(ready_r, 1) != b"u":
            raise OSError(1, "could not make a user namespace for the idmapped layers")
        write_maps(pid, uid_map, gid_map)
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(ready_r)
        os.close(hold_w)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


def idmapped_over_itself(path: str, userns_fd: int) -> None:
    """Mount ``path`` read-only over itself with its owners as ``userns_fd`` maps them."""
    tree = _call(
        _NR_OPEN_TREE,
        ctypes.c_int(_AT_FDCWD),
        ctypes.c_char_p(path.encode()),
        ctypes.c_uint(OPEN_TREE_CLONE | os.O_CLOEXEC),
    )
    try:
        attr = _MountAttr(
            MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            0,
            0,
            userns_fd,
        )
        _call(
            _NR_MOUNT_SETATTR,
            ctypes.c_int(tree),
            ctypes.c_char_p(b""),
            ctypes.c_uint(AT_EMPTY_PATH),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        )
        _call(
            _NR_MOVE_MOUNT,
            ctypes.c_int(tree),
            ctypes.c_char_p(b""),
            ctypes.c_int(_AT_FDCWD),
            ctypes.c_char_p(path.encode()),
            ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH),
        )
    finally:
        os.close(tree)
