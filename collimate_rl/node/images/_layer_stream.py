"""A layer blob read as its tar stream: decompressed by media type, hashed and metered as it goes.

The compressed bytes are hashed on the way in (the digest is checked when the
stream is finished) and the tar bytes are counted on the way out, so a
decompression bomb stops at its budget while it streams: nothing ever holds
more than a few reads' worth of output (zlib's ``max_length``, zstd's bounded
``stream_reader``).

Reading, hashing and decompressing run in a thread of their own, a few chunks
ahead of the unpacker (both release the GIL), so they overlap the unpacker's
file system calls on a second core. Gzip is inflated with ISA-L (the ``isal``
package of the node extra, about twice zlib's speed) when it is installed.

>>> import gzip, hashlib, io
>>> blob = gzip.compress(b"x" * 5000)
>>> digest = "sha256:" + hashlib.sha256(blob).hexdigest()
>>> stream = LayerStream(io.BytesIO(blob), GZIP_TYPES[0], digest, limit=4096)
>>> stream.read()
Traceback (most recent call last):
...
collimate_rl.node.images._layer_stream.OverBudget: 5000
>>> stream.close()
"""

from __future__ import annotations

import hashlib
import queue
import re
import threading
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO

from collimate_rl.node.images.errors import DigestMismatch, ImageStoreError, LayerError

__all__ = [
    "GZIP_TYPES",
    "PLAIN_TYPES",
    "ZSTD_TYPES",
    "LayerStream",
    "OverBudget",
    "split_digest",
]

PLAIN_TYPES = (
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
)
GZIP_TYPES = (
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
)
ZSTD_TYPES = (
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
)

_CHUNK = 1 << 20  # tar bytes per decompression step: the most ever held
_IN_CHUNK = 1 << 16  # compressed bytes per step: small, so zlib's leftover input is cheap
_AHEAD = 4  # chunks the reading thread may run ahead of the unpacker


def _inflater() -> tuple[Any, Any]:
    """ISA-L's zlib-compatible module if installed, else zlib; and its error class."""
    try:
        from isal import isal_zlib
    except ImportError:  # pragma: no cover - the node extra brings it
        return zlib, zlib.error
    return isal_zlib, isal_zlib.error


_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")


def split_digest(digest: str) -> tuple[str, str]:
    """``"sha256:<hex>"`` -> ``("sha256", "<hex>")``; ImageStoreError for anything else.

    The hex part names files in the store, so nothing but 64 lowercase hex digits
    passes. (The OCI spec also registers sha512; no registry or builder uses it.)

    >>> split_digest("sha256:" + "0" * 64)[0]
    'sha256'
    """
    match = _DIGEST.fullmatch(digest)
    if match is None:
        raise ImageStoreError(f"{digest!r} is not a sha256 digest (sha256:<64 hex digits>)")
    return "sha256", match.group(1)


class OverBudget(Exception):
    """The tar stream passed its budget; ``args[0]`` is the bytes produced so far."""


class _Hashing:
    """The raw blob, hashed as it is read."""

    def __init__(self, raw: BinaryIO, algo: str) -> None:
        self.raw = raw
        self.hash = hashlib.new(algo)

    def read(self, size: int = _CHUNK) -> bytes:
        data = self.raw.read(size if size > 0 else _CHUNK)
        self.hash.update(data)
        return data

    def drain(self) -> None:
        while self.read(_CHUNK):
            pass


class _Ahead:
    """Calls ``fill(_CHUNK)`` in a thread, at most ``_AHEAD`` results ahead of :meth:`next`."""

    def __init__(self, fill: Callable[[int], bytes]) -> None:
        self._queue: queue.Queue[bytes | BaseException] = queue.Queue(_AHEAD)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(
            target=self._run, args=(fill,), name="collimate-layer-read", daemon=True
        )
        self._thread.start()

    def _run(self, fill: Callable[[int], bytes]) -> None:
        try:
            while True:
                data = fill(_CHUNK)
                if not self._put(data) or not data:
                    return
        except BaseException as exc:  # handed to the unpacker, raised there
            self._put(exc)

    def _put(self, item: bytes | BaseException) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def next(self) -> bytes:
        if self._done:
            return b""
        item = self._queue.get()
        if isinstance(item, BaseException):
            self._done = True
            raise item
        self._done = not item
        return item

    def close(self) -> None:
        """Stop the thread (it is done with the blob when this returns)."""
        self._stop.set()
        self._thread.join()


class LayerStream:
    """The tar stream of a layer blob: ``read(n)`` gives at most ``n`` bytes, ``b""`` at the end.

    What :meth:`read` returns may be a view into the stream's buffer, valid until the
    next read (the unpacker writes it out at once; nothing is copied twice).

    Args:
        raw: the blob, opened for reading.
        media_type: the layer's media type (gzip, zstd or plain tar).
        digest: the blob's digest, checked by :meth:`finish`.
        limit: how many tar bytes may come out; past it :meth:`read` raises OverBudget.
    """

    def __init__(self, raw: BinaryIO, media_type: str, digest: str, *, limit: int) -> None:
        algo, _ = split_digest(digest)
        self.digest = digest
        self.limit = limit
        self.produced = 0
        self._src = _Hashing(raw, algo)
        self._buf = memoryview(b"")
        self._pos = 0
        self._pending = b""
        self._fill: Any
        if media_type in GZIP_TYPES:
            self._inflate, self._inflate_error = _inflater()
            self._gz: Any = self._inflate.decompressobj(16 + zlib.MAX_WBITS)
            self._fill = self._fill_gzip
        elif media_type in ZSTD_TYPES:
            self._fill = _zstd_reader(self._src).read
        elif media_type in PLAIN_TYPES:
            self._fill = self._src.read
        else:
            raise LayerError(
                f"layer media type {media_type!r} is not one the node unpacks (plain tar, gzip "
                "or zstd)"
            )
        self._ahead = _Ahead(self._fill)

    def close(self) -> None:
        """Stop reading the blob (idempotent; :meth:`finish` does it too)."""
        self._ahead.close()

    def read(self, size: int = -1) -> bytes | memoryview:
        if self._pos >= len(self._buf):
            data = self._ahead.next()
            if not data:
                return b""
            self.produced += len(data)
            if self.produced > self.limit:
                raise OverBudget(self.produced)
            self._buf = memoryview(data)
            self._pos = 0
        start = self._pos
        self._pos = min(len(self._buf), start + size) if size >= 0 else len(self._buf)
        return self._buf[start : self._pos]

    def _fill_gzip(self, size: int) -> bytes:
        while True:
            data = self._pending or self._src.read(_IN_CHUNK)
            if not data:
                if not self._gz.eof:
                    raise LayerError("the layer's gzip stream ends early (a truncated blob)")
                return b""
            if self._gz.eof:
                # A gzip file may hold several members back to back; anything else after
                # the end is padding (hashed by finish, not unpacked).
                if not data.startswith(b"\x1f\x8b"):
                    self._pending = b""
                    return b""
                self._gz = self._inflate.decompressobj(16 + zlib.MAX_WBITS)
            try:
                out = self._gz.decompress(data, size)
            except self._inflate_error as exc:
                raise LayerError(f"the layer's gzip stream is corrupt: {exc}") from exc
            self._pending = self._gz.unconsumed_tail or self._gz.unused_data
            if out:
                return bytes(out)

    def finish(self) -> None:
        """Hash what the tar reader left unread and check the digest.

        Raises:
            DigestMismatch: the blob does not hash to its digest.
        """
        self._ahead.close()
        self._src.drain()
        actual = f"{self._src.hash.name}:{self._src.hash.hexdigest()}"
        if actual != self.digest:
            raise DigestMismatch(self.digest, actual, what="layer")


def _zstd_reader(src: _Hashing) -> Any:
    try:
        import zstandard
    except ImportError as exc:  # pragma: no cover - the node extra brings it
        raise LayerError(
            "this layer is zstd-compressed and the zstandard package is missing: install "
            "the node extra (pip install 'collimate-rl[node]')"
        ) from exc
    reader = zstandard.ZstdDecompressor().stream_reader(
        src,  # type: ignore[arg-type]  # it only calls read(n)
        read_size=_IN_CHUNK,
        read_across_frames=True,
    )

    class _Checked:
        def read(self, size: int) -> bytes:
            try:
                return bytes(reader.read(size))
            except zstandard.ZstdError as exc:
                raise LayerError(f"the layer's zstd stream is corrupt: {exc}") from exc

    return _Checked()
