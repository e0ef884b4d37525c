"""Member mount namespaces kept for reuse: a dead session's, when it changed nothing.

Building a light session's mount namespace (``members.py``) costs the master ~0.5
ms of CPU per GRPO rollout: a copy of the container's mounts, five new ones (the
anchor and layer tmpfs, the overlay with its feature probes, a devpts instance)
and their teardown when the last descriptor closes. Most rollouts of a grading
run write no file, so the namespace their session leaves is the one the next
session would build. This pool keeps such namespaces and hands them out again.

A namespace comes here only when

* its session was rooted in the template: built from the master's own namespace
  (its own anchor tmpfs, the template's layers, upper layer 0) and never forked
  (a fork's children would build theirs from it);
* every box of the session has been reaped: nothing can write in it any more;
* everything a box can change in it is as it was built (:func:`look`): the upper
  layer, the overlay's work dir, ``/tmp``, ``/dev/shm``, the devpts root and its
  ``ptmx``: the same entries (none), extended attributes, inode, mode, owner,
  link count, size and timestamps. A create, delete, rename, chmod, chown,
  ``utime`` or xattr changes one of these; ``ctime`` changes on any of them
  (with multigrain timestamps, even right after the build's ``stat``; without them,
  the entries, modes, owners and xattrs, which are what could carry data, still are
  compared).

So no file, name, mode or attribute of one session reaches the next. What the
next one can tell is that its namespace is older than itself (its dirs' times),
and how many inodes its tmpfs handed out before (a file's inode number, after an
earlier session's ``O_TMPFILE`` files): the kind of covert channel a pipe's
inode number (a machine-wide counter) already is between any two processes, and
no path for data.

>>> SpareMounts().take(['/l/0']) is None
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

#: What a box can change in a member namespace, below its layer dir, then absolute.
_LAYER_PATHS = ("u0", "w0", "w0/work", "tmp", "shm")
_DEVPTS_PATHS = ("/dev/pts", "/dev/pts/ptmx")


def look(layer_dir: str) -> tuple[Any, ...]:
    """What a box could have changed in the member namespace we are in (see above)."""
    paths = [os.path.join(layer_dir, p) for p in _LAYER_PATHS] + list(_DEVPTS_PATHS)
    return tuple(_look_at(p) for p in paths)


def _look_at(path: str) -> tuple[Any, ...]:
    try:
        # the listing first: a first read of a dir sets its atime (relatime), later ones not
        try:
            entries: list[str] | None = sorted(os.listdir(path))
        except NotADirectoryError:
            entries = None
        st = os.lstat(path)
    except OSError as exc:
        return ("missing", exc.errno)
    xattrs: dict[str, bytes] | None
    try:
        names = os.listxattr(path, follow_symlinks=False)
        xattrs = {n: os.getxattr(path, n, follow_symlinks=False) for n in names}
    except OSError:
        xattrs = None
    fields = (st.st_ino, st.st_mode, st.st_uid, st.st_gid, st.st_nlink, st.st_size)
    times = (st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns)
    return (fields, times, entries, xattrs)


@dataclass
class Spare:
    """A dead session's member mount namespace, as it was built."""

    mnt: int  # the namespace (a descriptor)
    lowers: list[str]  # its overlay's lower layers
    layer_dir: str  # its layer dir, in that namespace
    built: tuple[Any, ...]  # :func:`look` right after the build


class SpareMounts:
    """Pristine member mount namespaces of dead template-rooted sessions, up to ``cap``."""

    def __init__(self, cap: int = 64) -> None:
        self.cap = cap
        self.free: list[Spare] = []
        self.reused = 0  # namespaces handed out again
        self.dirty = 0  # offered, found changed and closed

    def take(self, lowers: list[str]) -> Spare | None:
        """A spare whose overlay has ``lowers``, or None."""
        for i in range(len(self.free) - 1, -1, -1):
            if self.free[i].lowers == lowers:
                self.reused += 1
                return self.free.pop(i)
        return None

    def offer(self, spare: Spare, now: tuple[Any, ...]) -> None:
        """Keep ``spare`` if ``now`` (:func:`look` in it, all its boxes reaped) is as built."""
        pristine = now == spare.built
        self.dirty += not pristine
        if pristine and len(self.free) < self.cap:
            self.free.append(spare)
        else:
            os.close(spare.mnt)
