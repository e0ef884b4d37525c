"""The box of an image template's warm fork-server IZ, on its way into the image for good.

The master clones it like any box (``image_zygote.py`` says why and when) over a record of
the template's pristine files; :func:`become_image_zygote` then makes it IZ: into the image's
root with nothing of the container's left in its mount namespace, no capability, the
``nest`` seccomp filter, and the image's ``python3`` running ``warm_image.py``.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

from .hardening import drop_all_capabilities
from .layout import SANDBOX_DIR, SANDBOX_ID
from .seccomp import load_seccomp
from .syscalls import (
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    mount,
    pivot_into_cwd,
    write_id_maps,
)
from .warm_image import BOOT, CTL_FD, READY_FD


def become_image_zygote(spec: Any) -> NoReturn:  # pragma: no cover - IZ's box
    """IZ's box (``spec``: its ``box.BoxSpec``): into the image's root for good, then its
    ``python3`` (see the module).

    Its record's namespace has no ``/dev`` in the root yet: the mounts a namespace got from a
    more privileged one are locked, and neither a bind of a mount with locked mounts on it
    (the candidates' lower layer, made first) nor a ``pivot_root`` onto a locked mount is allowed.
    """
    ready = spec.ready_w
    try:
        # IZ is the sandbox uid, not the image's user: a candidate maps that user onto IZ's ids,
        # and a user namespace made without CAP_SETFCAP may not map its parent's uid 0
        proc = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY)
        try:
            write_id_maps(proc, SANDBOX_ID, SANDBOX_ID, SANDBOX_ID)
        finally:
            os.close(proc)
        mount(None, "/", None, MS_REC | MS_PRIVATE, None)  # (pivot_root refuses shared)
        # a mount of this namespace's own over the root (pivot_root refuses a locked one)
        mount(SANDBOX_DIR, SANDBOX_DIR, None, MS_BIND, None)
        lower = SANDBOX_DIR + "/tmp"  # the root without its mounts: the candidates' lower layer
        mount(SANDBOX_DIR, lower, None, MS_BIND, None)
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
        mount(None, lower, None, flags, None)
        mount("/dev", SANDBOX_DIR + "/dev", None, MS_BIND | MS_REC, None)
        mount("proc", SANDBOX_DIR + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        os.chdir(SANDBOX_DIR)
        pivot_into_cwd()
        prog_r, ctl = spec.fds
        os.dup2(prog_r, 0)
        os.dup2(ctl, CTL_FD)
        os.dup2(ready, READY_FD)
        ready = READY_FD
        os.closerange(READY_FD + 1, 1 << 16)
        for fd in (0, CTL_FD, READY_FD):
            os.set_inheritable(fd, True)
        drop_all_capabilities(spec.cap_last, bounding=True)
        load_seccomp(spec.cfg["_seccomp_nest"])
        settings = spec.cfg["warm_image"]
        python3 = settings["python3"]
        env = {"PATH": settings["path"], "LC_ALL": "C.UTF-8"}
        os.execve(python3, [python3, "-I", "-S", "-B", "-c", BOOT], env)
    except BaseException as exc:
        try:
            os.write(ready, f"error {type(exc).__name__}: {exc}".encode()[:4000])
        finally:
            os._exit(1)
    os._exit(1)  # (execve does not return)
