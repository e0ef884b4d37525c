"""Who uses the store's images: records of use, each naming the live process that holds it.

Mixed into :class:`~collimate_rl.node.images.store.ImageStore`. A template that uses an image
is recorded under its *holder*, the ``ImageStore`` object of one node process, in the index's
``holders``. Each holder has a file ``holders/<id>`` on which it keeps an exclusive ``flock``
for as long as it lives. The kernel drops that lock when the process ends, however it ends
(a clean stop, SIGKILL, the OOM killer; after a machine crash nobody holds a lock), so a
holder whose file is not locked, or is missing, is gone: the store treats its records as
released. Listings leave them out, and prune, a node's start and every change of the users
delete them with the file. A live holder's records are kept whoever asks, another node
sharing the store included.

Why a lock and not the holder's pid with the kernel's boot id and the host name: a pid is
reused, by an unrelated process of the same boot or, for nodes in containers that share a
store through a volume, by another node whose pid in its own namespace is the same small
number on the same boot and maybe the same host name; so a dead holder's records would look
alive. A lock is the holder's own open file, which no other process can inherit by chance,
and the store already relies on ``flock`` between the processes sharing it. The pid, boot
id and host name are still written into the record, to tell an operator whose it is.

The descriptor is close-on-exec, and a ``fork`` without exec closes it in the child: a child
that outlived its node could otherwise keep the node's records alive.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as tmp:
...     gone = Path(tmp, "holder")
...     gone.touch()  # what a killed holder leaves: a file nobody locks
...     holder_alive(gone), holder_alive(Path(tmp, "missing"))
(False, False)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import socket
import time
import weakref
from pathlib import Path
from typing import Any

__all__ = ["StoreHolders", "holder_alive"]

#: A holder's id: its file's name in ``holders/`` (another name in the index names nobody).
_HOLDER_ID = re.compile(r"[0-9a-f]{16}")
#: Every holder's lock of this process (closed in a child that ``fork`` made).
_LOCKS: weakref.WeakSet[StoreHolders] = weakref.WeakSet()


def _drop_locks_in_child() -> None:
    for holder in list(_LOCKS):
        holder._forget_lock()  # the child is not the holder


os.register_at_fork(after_in_child=_drop_locks_in_child)


def holder_alive(path: Path) -> bool:
    """Whether a process holds the holder file ``path`` locked (its holder lives).

    A shared, non-blocking probe: probes never exclude each other, and only the holder's own
    exclusive lock makes one fail.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        raise
    finally:
        os.close(fd)
    return False


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


class StoreHolders:
    """The store's records of use, by holder; the store provides its files and index.

    Every method with a ``doc`` runs under the store's lock: exclusive where it changes the
    index or the ``holders`` folder, shared where it only reads.
    """

    root: Path
    _holder_id: str | None
    _holder_fd: int | None
    #: template id -> its record ({"ref", "blobs"}), as this holder wrote it
    _held: dict[str, dict[str, Any]]

    def _init_holders(self) -> None:
        self._holder_id = None
        self._holder_fd = None
        self._held = {}

    def _holder_path(self, holder_id: str) -> Path:
        return self.root / "holders" / holder_id

    def _forget_lock(self) -> None:
        fd, self._holder_fd = self._holder_fd, None
        self._holder_id = None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _live_holders(self, doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The holders of ``doc`` that are alive (under the store's lock, shared or not)."""
        return {
            hid: entry
            for hid, entry in doc["holders"].items()
            if hid == self._holder_id
            or (_HOLDER_ID.fullmatch(hid) is not None and holder_alive(self._holder_path(hid)))
        }

    def _release_gone(self, doc: dict[str, Any]) -> list[str]:
        """Drop the records of holders that are gone, and their files (exclusive lock held).

        Returns the ids of the holders whose records were dropped (``doc`` is changed; the
        caller writes it).
        """
        live = self._live_holders(doc)
        gone = sorted(set(doc["holders"]) - set(live))
        for hid in gone:
            del doc["holders"][hid]
        with os.scandir(self.root / "holders") as entries:
            for entry in entries:
                if entry.name not in live and not holder_alive(Path(entry.path)):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
        return gone

    def _own_entry(self, doc: dict[str, Any]) -> dict[str, Any]:
        """This holder's entry in ``doc``, registering the holder first (exclusive lock held).

        A holder whose file went (someone deleted it; a prune then took its records) takes a
        new one and writes again what it holds.
        """
        path = self._holder_path(self._holder_id) if self._holder_id is not None else None
        if path is not None and self._holder_fd is not None:
            try:
                same = os.stat(path).st_ino == os.fstat(self._holder_fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                doc["holders"].pop(self._holder_id, None)
                self._forget_lock()
        if self._holder_fd is None:
            self._take_lock()
        assert self._holder_id is not None
        entry: dict[str, Any] | None = doc["holders"].get(self._holder_id)
        if entry is None:
            entry = {
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "boot_id": _boot_id(),
                "since": time.time(),
                "templates": {},
            }
            doc["holders"][self._holder_id] = entry
        for template_id, use in self._held.items():
            entry["templates"].setdefault(template_id, dict(use))
        return entry

    def _take_lock(self) -> None:
        # A new file, locked before anybody can probe it: probes run under the store's lock,
        # which the caller holds exclusively.
        while True:
            holder_id = secrets.token_hex(8)
            path = self._holder_path(holder_id)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            except FileExistsError:  # pragma: no cover - 64 random bits
                continue
            break
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, f"{socket.gethostname()} {os.getpid()} {_boot_id()}\n".encode())
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        self._holder_id, self._holder_fd = holder_id, fd
        _LOCKS.add(self)

    def _hold(self, doc: dict[str, Any], template_id: str, use: dict[str, Any] | None) -> bool:
        """Record (``use``) or release (``None``) this holder's use by ``template_id``;
        whether ``doc`` changed."""
        if use is None:
            self._held.pop(template_id, None)
            entry = doc["holders"].get(self._holder_id or "")
            if entry is None or entry["templates"].pop(template_id, None) is None:
                return False
            if not entry["templates"]:
                del doc["holders"][self._holder_id]
            return True
        self._held[template_id] = dict(use)
        self._own_entry(doc)["templates"][template_id] = dict(use)
        return True

    def _drop_holder(self, doc: dict[str, Any]) -> None:
        """Release every record of this holder and its file (exclusive lock held)."""
        self._held.clear()
        if self._holder_id is not None:
            doc["holders"].pop(self._holder_id, None)
            self._holder_path(self._holder_id).unlink(missing_ok=True)
        _LOCKS.discard(self)
        self._forget_lock()
