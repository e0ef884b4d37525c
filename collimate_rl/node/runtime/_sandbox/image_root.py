"""An image template's sessions: the image's root filesystem as ``/`` (docs/architecture.md).

An image template's container is the node's own view (the host's ``/usr``, the node's
Python, the supervisor): its master and zygote run there, as for every template. What
differs is the session: its overlay on ``/sandbox`` stacks the image's layers (bound at
``/.collimate/l/<i>``, the lowest a small skeleton of mount points the node adds) under the
session's writable upper layer, so ``/sandbox`` *is* the image's root with the session's
changes. Into it go the container's ``/dev`` (with the session's own ``/dev/shm`` and
devpts); its ``/proc`` is the box's own. A box then ``chroot``s into ``/sandbox`` before it
drops its capabilities (``box.py``), so nothing the candidate runs can name a path outside
the image root: not the node's runtime, its Python, nor another image's layers (they are
not in this container at all). The init that stays outside is not dumpable, and no
descriptor of the old root survives into the box.

The image's user: the box maps ``cfg["image"]["uid"]``/``gid`` (the image's ``User``) onto
the container's sandbox uid, so the candidate runs as the image says, and the layer files
that user owns (root's, usually) are its own (the launcher idmaps them: ``bwrap.Launch``).

>>> image_settings({"image": {"uid": 0, "gid": 0, "workdir": "/app"}})
(0, 0, '/app')
>>> image_settings({}) is None
True
"""

from __future__ import annotations

import os
from typing import Any

from .layout import SANDBOX_DIR
from .syscalls import MS_BIND, MS_REC, mount


def image_settings(cfg: dict[str, Any]) -> tuple[int, int, str] | None:
    """``(uid, gid, working dir)`` of an image template's sessions; ``None``: not one."""
    image = cfg.get("image")
    if not image:
        return None
    return int(image["uid"]), int(image["gid"]), str(image["workdir"])


def mount_image_dev() -> None:
    """Show the container's ``/dev``, with the session's ``/dev/shm`` and devpts, in the
    image root on ``/sandbox`` (in the session's mount namespace, after its overlay and
    after every remount of it: a fork's freeze mounts a new overlay)."""
    mount("/dev", os.path.join(SANDBOX_DIR, "dev"), None, MS_BIND | MS_REC, None)


def mount_image_root_parts() -> None:
    """A session server's image root: the container's ``/dev`` and the session's own
    ``/proc`` (the server is pid 1 of the session's pid namespace) inside ``/sandbox``, for
    its execs and its service, which ``chroot`` there (a box mounts its own ``/proc``)."""
    from .syscalls import MS_NODEV, MS_NOEXEC, MS_NOSUID

    mount_image_dev()
    proc = os.path.join(SANDBOX_DIR, "proc")
    mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)


def enter_image_root(workdir: str) -> None:
    """Make ``/sandbox`` this process's root, and ``workdir`` (inside it) its cwd.

    Runs in a box that still holds its capabilities (``chroot`` needs one), before it
    drops them: afterwards nothing it runs can leave the root (no capability to
    ``chroot`` again, no descriptor of a directory outside it).
    """
    os.chroot(SANDBOX_DIR)
    try:
        os.chdir(workdir)
    except OSError:
        os.chdir("/")
