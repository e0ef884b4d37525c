"""The image store's files: its layout, its locks, and writes that land whole or not at all.

Layout under the store's root (see :mod:`.store`)::

    lock                          flock: shared to read, exclusive to change
    index.json                    images, and which templates of which holder use which
                                  (atomic rename)
    holders/<id>                  flock'd by its holder (a node's store) while it lives
    blobs/sha256/<hex>            verified blobs (manifests, configs, layers)
    partial/sha256/<hex>          downloads under way (resumable), flock'd by their writer
    layers/sha256/<hex>/          an unpacked layer: an overlayfs lower layer
    layers/sha256/<hex>.json      its record: unpacked bytes, what was neutralised
    layers/sha256/<hex>.lock      flock'd while the layer is being unpacked
    tmp/                          unpacks under way (renamed into layers/ when whole)

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as tmp:
...     write_atomic(Path(tmp, "x.json"), b"{}")
...     Path(tmp, "x.json").read_bytes()
b'{}'
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["flocked", "try_flock", "write_atomic"]


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``path`` through a temporary file, fsync and rename: readers see old or new."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)


@contextlib.contextmanager
def flocked(path: Path, *, exclusive: bool) -> Iterator[int]:
    """Hold ``flock`` on ``path`` (created if missing) for the ``with`` block.

    ``flock`` belongs to the open file, so two threads of one process exclude each
    other as two processes do.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield fd
    finally:
        os.close(fd)


def try_flock(path: Path) -> int | None:
    """An fd holding an exclusive ``flock`` on ``path``, or None if someone holds it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
