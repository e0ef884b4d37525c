"""Light sessions: records in the master, their mount namespaces built on first use.

A light session (a template without a service or network) has no process of
its own. The master keeps a :class:`Member` record: the overlay's lower layers,
and once something ran in it, the descriptors of its *member mount namespace*
(its size-limited tmpfs with the overlay's upper and work dirs, the overlay on
``/sandbox``, ``/tmp``, ``/dev/shm``, a devpts instance) and its *member IPC
namespace*. Boxes (``boxes.py``) are cloned into copies of that mount namespace,
so the session's files persist across its execs, and the namespaces live as
long as a descriptor does: the record's, a running box's, or a fork's.

The master builds a member namespace in-process (``Home.fresh_mount_ns``): a
copy of its own namespace, or of the fork parent's (where the frozen layers are
mounted). A lineage's layer dirs live on a private anchor tmpfs mounted on
``/.collimate/s`` in the first namespace of the lineage, so nothing is created
in the container's shared ``/.collimate`` and nothing needs removing: the
anchor goes with the last namespace that mounts it. The anchor also holds the
empty, read-only dir every box binds over ``/.collimate`` (``box.py``).

A fork freezes the parent's upper layer (in the parent's namespace, when it
changed) and makes child records whose ``base`` is the parent's namespace.

A dead session's namespace that nothing changed is built once and used again
(``spare_mounts.py``): the next template-rooted session takes it instead of a build.

>>> m = Member("k", ["/l/0"])
>>> (m.mounted, m.layer_dir, m.depth)
(False, '', 0)
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from .home import Home, open_ns
from .image_root import mount_image_dev
from .layers import freeze_upper, overlay_options
from .layout import ANCHOR_DIR, COVER_DIR, SANDBOX_DIR
from .spare_mounts import Spare, SpareMounts, look
from .syscalls import (
    CLONE_NEWIPC,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    MS_REMOUNT,
    mount,
    setns,
    unshare,
)


@dataclass
class Member:
    """One light session, as the master knows it."""

    key: str
    lowers: list[str]
    base: int = -1  # the mount namespace its lowers are visible in (a fork's), or -1
    mnt: int = -1  # its member mount namespace, once built
    ipc: int = -1
    gen: int = 0  # the upper layer in use: u<gen>, w<gen>
    depth: int = 0
    layer_dir: str = ""  # its tmpfs with the upper, work, tmp and shm dirs (once mounted)
    built: tuple[Any, ...] | None = None  # a reusable namespace's ``look`` when built
    boxes: set[int] = field(default_factory=set)  # live boxes (pids in the master's namespace)
    execs: int = 0  # exec boxes it was handed (``standby.py`` arms a standby one from the second)

    @property
    def mounted(self) -> bool:
        return self.mnt >= 0

    def close(self, keep_mnt: bool = False) -> None:
        for fd in (self.base, self.ipc) if keep_mnt else (self.base, self.mnt, self.ipc):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.base = self.ipc = -1
        if not keep_mnt:
            self.mnt = -1


class Members:
    """The master's light sessions by key."""

    def __init__(self, home: Home, disk_bytes: int, image: bool = False) -> None:
        self.home = home
        self.disk_bytes = disk_bytes
        #: an image template: ``/sandbox`` is the image's root, with ``/dev`` inside it
        self.image = image
        self.by_key: dict[str, Member] = {}
        self.spares = SpareMounts()
        self.draining: dict[str, Member] = {}  # dropped, reusable once their boxes are reaped

    def __contains__(self, key: str) -> bool:
        return key in self.by_key

    def get(self, key: str) -> Member | None:
        return self.by_key.get(key)

    def create(self, key: str, lowers: list[str]) -> Member:
        member = Member(key, list(lowers))
        self.by_key[key] = member
        return member

    def drop(self, key: str) -> Member | None:
        """Forget a session; the caller kills its boxes. Its namespaces go with the last fd,
        or, when reusable, its mount namespace goes to the spares once its boxes are reaped."""
        member = self.by_key.pop(key, None)
        if member is None:
            return None
        reusable = member.mounted and member.built is not None
        member.close(keep_mnt=reusable)
        if reusable:
            self.draining[key] = member
            self._retire_if_done(member)
        return member

    def box_gone(self, key: str, pid: int) -> None:
        """A box of session ``key`` was reaped."""
        member = self.by_key.get(key) or self.draining.get(key)
        if member is not None:
            member.boxes.discard(pid)
            self._retire_if_done(member)

    def _retire_if_done(self, member: Member) -> None:
        if member.boxes or self.draining.pop(member.key, None) is None:
            return
        assert member.built is not None
        spare = Spare(member.mnt, member.lowers, member.layer_dir, member.built)
        member.mnt = -1
        try:
            with self.home.inside(mnt=spare.mnt):
                now = look(spare.layer_dir)
        except OSError:
            os.close(spare.mnt)
            return
        self.spares.offer(spare, now)

    def fork(self, parent: Member, keys: list[str]) -> list[Member]:
        """Child records of ``parent`` (frozen first when it changed since the last freeze)."""
        if parent.mounted:
            with self.home.inside(mnt=parent.mnt):
                changed = freeze_upper(parent.layer_dir, parent.lowers, parent.gen)
                if changed is not None and self.image:  # the new overlay has no /dev yet
                    mount_image_dev()
            if changed is not None:
                parent.lowers, parent.gen = changed
        base = parent.mnt if parent.mounted else parent.base
        parent.built = None  # its children may build theirs from its namespace
        children = []
        for key in keys:
            child = self.create(key, parent.lowers)
            child.depth = parent.depth + 1
            child.base = os.dup(base) if base >= 0 else -1
            children.append(child)
        return children

    def mount(self, member: Member, image_dev: bool = True) -> None:
        """Build the member's mount and IPC namespaces (first use).

        ``image_dev=False``: an image template's root without the container's ``/dev`` in
        it (the image zygote's record, ``image_zygote.py``; never a spare).
        """
        if member.mounted:
            return
        rooted = member.base < 0  # the template's layers, in a namespace of its own lineage
        spare = self.spares.take(member.lowers) if rooted and image_dev else None
        if spare is not None:
            mnt, member.layer_dir, member.built = spare.mnt, spare.layer_dir, spare.built
        else:
            member.layer_dir = os.path.join(ANCHOR_DIR, member.key)
            with self.home.fresh_mount_ns(member.base):
                if rooted:  # the first namespace of a lineage: its private anchor
                    _anchor()
                self._layers(member, image_dev)
                member.built = look(member.layer_dir) if rooted else None
                mnt = open_ns("mnt")
        try:
            unshare(CLONE_NEWIPC)
            try:
                ipc = open_ns("ipc")
            finally:
                setns(self.home.fds["ipc"], CLONE_NEWIPC)
        except BaseException:
            os.close(mnt)
            raise
        member.mnt, member.ipc = mnt, ipc
        if member.base >= 0:  # its own namespace holds the fork parent's layers now
            os.close(member.base)
            member.base = -1

    def _layers(self, member: Member, image_dev: bool = True) -> None:
        """The session's tmpfs, overlay, ``/tmp``, ``/dev/shm`` and devpts (in its namespace)."""
        layer_dir = member.layer_dir
        os.mkdir(layer_dir, 0o700)
        mount(
            "tmpfs", layer_dir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={self.disk_bytes},mode=0700"
        )
        os.mkdir(os.path.join(layer_dir, f"u{member.gen}"), 0o755)
        os.mkdir(os.path.join(layer_dir, f"w{member.gen}"), 0o700)
        for name in ("tmp", "shm"):
            path = os.path.join(layer_dir, name)
            os.mkdir(path)
            os.chmod(path, 0o1777)
        options = overlay_options(member.lowers, layer_dir, member.gen)
        mount("overlay", SANDBOX_DIR, "overlay", MS_NOSUID | MS_NODEV, options)
        mount(os.path.join(layer_dir, "tmp"), "/tmp", None, MS_BIND, None)
        mount(os.path.join(layer_dir, "shm"), "/dev/shm", None, MS_BIND, None)
        with contextlib.suppress(OSError):  # a private pty namespace (bwrap's is shared)
            mount(
                "devpts",
                "/dev/pts",
                "devpts",
                MS_NOSUID | MS_NOEXEC,
                "newinstance,ptmxmode=0666,mode=0620",
            )
        if self.image and image_dev:  # after /dev/shm and devpts: the recursive bind takes them
            mount_image_dev()


def _anchor() -> None:
    """Mount a lineage's anchor tmpfs, with the cover its boxes bind over ``/.collimate``.

    A box hides the node's internal folder before it runs anything: a bind of this empty,
    read-only dir (its flags go with it) costs the box less than a tmpfs of its own
    (a superblock made and torn down per box).
    """
    mount("tmpfs", ANCHOR_DIR, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0711")
    os.mkdir(COVER_DIR, 0o555)
    mount(COVER_DIR, COVER_DIR, None, MS_BIND, None)
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    mount(None, COVER_DIR, None, flags, None)
