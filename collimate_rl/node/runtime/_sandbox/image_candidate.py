"""A candidate of an image's warm fork-server (``warm_image.py``): C, built from a clone.

IZ clones C into new user, mount, pid and IPC namespaces (and a pooled network namespace).
C is pid 1 of its own and root of its user namespace, nothing more: a capability there
reaches only what that namespace owns. Before anything of the grade reaches it, C:

1. maps the image's user onto IZ's ids, makes a size-limited tmpfs with an overlay's upper and
   work dirs, mounts the overlay (lower: IZ's ``/tmp``, the pristine image root without its
   mounts), the container's ``/dev`` with a private ``/dev/shm``, and its own ``/proc``, pivots
   into it and detaches the rest (:func:`build_root`);
2. drops every capability, fences itself with Landlock (as a box does, its root writable) and
   loads the candidates' seccomp filter, which refuses mounts and namespaces again (filters
   stack: the strictest verdict wins);
3. reads its environment and seed from its image worker on a pipe (IZ never holds them),
   applies them and the limits, and says it is ready.

Then it serves the harness's requests (``_child._candidate_main``); when it exits, its
namespaces go with it. Stdlib only, Python 3.10+ (the image's).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from .hardening import apply_limits, drop_all_capabilities
from .seccomp import load_seccomp
from .seeding import apply_python_seed
from .syscalls import (
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PR_SET_DUMPABLE,
    PR_SET_PDEATHSIG,
    mount,
    pivot_into_cwd,
    prctl,
    write_id_maps,
)

#: The harness's module name (``collimate_rl.grading._shipping.WARM_MODULE``).
HARNESS = "collimate_harness"


def candidate_job(
    fds: list[int], ids: tuple[int, int], settings: dict[str, Any]
) -> None:  # pragma: no cover - C
    """C: build its root, harden, take its environment, serve the harness; never returns."""
    sock, out_w, err_w, in_r, setup_r, ready_w = fds
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # IZ gone: its candidates go too
        prctl(PR_SET_DUMPABLE, 1)  # (IZ is not) so that C may write its own id maps
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        build_root(ids, settings)
        drop_all_capabilities(int(settings["cap_last"]), bounding=True)
        settings["_fence"].apply()  # no TCP, no other fence's abstract sockets
        load_seccomp(settings["_filter"])  # the candidates': no mounts, no namespaces
        setup = json.loads(_read_all(setup_r))
        os.environ.clear()
        os.environ.update(setup["env"])
        apply_limits(settings["limits"])
        os.umask(0o022)
        try:
            os.chdir(settings["workdir"])
        except OSError:
            os.chdir("/")
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as a fresh interpreter has them
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        apply_python_seed(str(setup["seed"]))
        os.write(ready_w, b"ok")
    except BaseException as exc:
        try:
            os.write(ready_w, f"error {type(exc).__name__}: {exc}".encode()[:4000])
        finally:
            os._exit(1)
    os.close(ready_w)
    harness: Any = sys.modules[HARNESS]
    try:
        harness._candidate_main([sock, out_w, err_w, in_r])
    finally:
        os._exit(0)


def _read_all(fd: int) -> bytes:  # pragma: no cover - C
    data = bytearray()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            os.close(fd)
            return bytes(data)
        data += chunk


def build_root(ids: tuple[int, int], settings: dict[str, Any]) -> None:  # pragma: no cover
    """C's root: a fresh copy-on-write layer over the pristine image (see the module)."""
    uid, gid = settings["user"]  # the image's user, as IZ's ids (``ids``)
    proc = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY)
    try:
        write_id_maps(proc, uid, ids[0], ids[1], gid)
    finally:
        os.close(proc)
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    lower = os.open("/tmp", os.O_PATH | os.O_DIRECTORY)  # the image root, without mounts
    try:
        size = int(settings["disk_bytes"])
        mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=0755")
        for name in ("u", "w", "r"):
            os.mkdir(f"/tmp/{name}", 0o755)
        options = f"lowerdir=/proc/self/fd/{lower},upperdir=/tmp/u,workdir=/tmp/w,userxattr"
        mount("overlay", "/tmp/r", "overlay", MS_NOSUID | MS_NODEV, options)
    finally:
        os.close(lower)
    mount("/dev", "/tmp/r/dev", None, MS_BIND | MS_REC, None)
    mount("tmpfs", "/tmp/r/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    mount("proc", "/tmp/r/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    os.chdir("/tmp/r")
    pivot_into_cwd()
